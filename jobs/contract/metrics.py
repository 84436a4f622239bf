"""The benchmark contract: parse `METRIC name=value` and `DIGEST name=hex` lines. Pure; no I/O.

Grammar (one per line): ``^METRIC\\s+([\\w.µ]+)=(\\S+)\\s*$``. Values must be finite numbers;
when a name repeats, the last value wins (benchmarks may print a provisional figure and then the
final one). ``^DIGEST\\s+([\\w.µ]+)=([0-9A-Fa-f]{1,128})\\s*$``: a digest of what the benchmark
computed at the positions it timed (e.g. the generated tokens), for the input seed it was given
in ``AUTORESEARCH_SEED``; a candidate's must equal the baseline's for the same seed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

METRIC_LINE = re.compile(r"^METRIC\s+([\w.µ]+)=(\S+)\s*$")
DIGEST_LINE = re.compile(r"^DIGEST\s+([\w.µ]+)=([0-9A-Fa-f]{1,128})\s*$")


@dataclass(frozen=True)
class ParsedMetrics:
    values: dict[str, float]
    # Lines that looked like METRIC lines but were not valid: (line number, text, reason).
    rejected: list[tuple[int, str, str]] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    overflow: str = ""          # why parsing stopped early (too many METRIC/DIGEST lines), or ''


MAX_LINES = 10000               # METRIC/DIGEST lines read per process (jobs.guard.limits.Limits.metric_lines)


def parse_metrics(output: str, max_lines: int = MAX_LINES) -> ParsedMetrics:
    """Bounded: after `max_lines` METRIC/DIGEST lines it stops, with `overflow` saying so (a
    benchmark that prints millions of them fails instead of stalling the runner)."""
    values: dict[str, float] = {}
    digests: dict[str, str] = {}
    rejected: list[tuple[int, str, str]] = []
    seen = 0
    for lineno, raw in enumerate(output.splitlines(), start=1):
        line = raw.rstrip("\r")
        if line.startswith(("METRIC", "DIGEST")):
            seen += 1
            if seen > max_lines:
                return ParsedMetrics(values, rejected, digests,
                                     f"more than {max_lines} METRIC/DIGEST lines (line {lineno}); the cap is "
                                     "AUTORESEARCH_LIMIT_METRIC_LINES")
        if line.startswith("DIGEST"):
            digest = DIGEST_LINE.match(line)
            if digest:
                digests[digest.group(1)] = digest.group(2).lower()
            else:
                rejected.append((lineno, line, "not of the form 'DIGEST name=hex'"))
            continue
        if not line.startswith("METRIC"):
            continue
        match = METRIC_LINE.match(line)
        if not match:
            rejected.append((lineno, line, "not of the form 'METRIC name=value'"))
            continue
        name, text = match.groups()
        try:
            value = float(text)
        except ValueError:
            rejected.append((lineno, line, f"value {text!r} is not a number"))
            continue
        if not math.isfinite(value):
            rejected.append((lineno, line, f"value {text!r} is not finite"))
            values.pop(name, None)  # a non-finite last value must not leave a stale earlier one
            continue
        values[name] = value
    return ParsedMetrics(values=values, rejected=rejected, digests=digests)


def missing_metrics(parsed: ParsedMetrics, required: list[str]) -> list[str]:
    return [name for name in required if name not in parsed.values]


def explain_missing(parsed: ParsedMetrics, name: str) -> str:
    """Why a required metric has no value: never printed, or printed but rejected."""
    bad = [r for r in parsed.rejected if r[1].startswith(f"METRIC {name}=") or f" {name}=" in r[1]]
    if bad:
        lineno, text, reason = bad[-1]
        return f"metric {name!r}: line {lineno} {text!r}: {reason}"
    return f"metric {name!r} was never printed (expected a line 'METRIC {name}=<number>')"
