"""Measured pairs kept on disk as they are measured, so an interrupted experiment resumes from them.

A stop (Ctrl-C, SIGTERM, a worker lost, a cancel) in the middle of an experiment used to throw its
measured pairs away: 46 pairs (47 min) of one llama.cpp experiment were measured again from pair 1.
The runner now writes each complete pair here, and a later attempt at the *same* experiment (same
run, name, platform, kind, base and head commits and seed, so the same coin order and input seeds)
starts from them. The sequential test allows it: its decisions are valid at any stopping time, and
continuing an interrupted sequence is one more such time. Warm-up processes are run again (they
warm the new processes' machine state and are never measured).

The file lives in the run's own folder (written by the trusted runner, never by target code).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from jobs.contract.ledger import write_atomic
from jobs.contract.spec import ExperimentSpec, Invocation, RawResult


def identity(spec: ExperimentSpec) -> str:
    """What must be equal for earlier pairs to count: the pair cap and stop rule may differ."""
    key = "/".join(str(x) for x in (spec.run_id, spec.name, spec.platform, spec.kind, spec.base_commit,
                                     spec.head_commit, spec.seed, spec.benchmark))
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def complete_pairs(invocations: list[Invocation]) -> list[Invocation]:
    """The measured invocations of pairs that have both arms, in run order. Pure."""
    arms: dict[int, set[str]] = {}
    for inv in invocations:
        if inv.pair >= 0:
            arms.setdefault(inv.pair, set()).add(inv.arm)
    whole = {p for p, seen in arms.items() if seen == {"A", "B"}}
    # a pair counts only if every earlier pair is whole too: the schedule is followed in order
    upto = next((i for i in range(len(arms) + 1) if i not in whole), len(arms))
    return [inv for inv in invocations if 0 <= inv.pair < upto]


def load(path: Path | None, spec: ExperimentSpec) -> list[Invocation]:
    """The complete pairs an earlier attempt at this very experiment measured ([] if none or other)."""
    if path is None or not Path(path).is_file():
        return []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("identity") != identity(spec):
            return []
        return complete_pairs([Invocation(**i) for i in data.get("invocations", [])])
    except (OSError, ValueError, TypeError):
        return []          # a torn or foreign file: measure afresh rather than trust it


def save(path: Path | None, spec: ExperimentSpec, result: RawResult) -> None:
    """Write the complete pairs measured so far (atomically: never half a file)."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from dataclasses import asdict
    data = {"identity": identity(spec), "name": spec.name, "platform": spec.platform,
            "invocations": [asdict(i) for i in complete_pairs(result.invocations)]}
    write_atomic(path, json.dumps(data))


def forget(path: Path | None) -> None:
    if path is not None:
        Path(path).unlink(missing_ok=True)
