"""Where the time really goes, for any C/C++ target: a callgrind profile of the reduced workload
and the compiler's own account of the hot loops.

`measure` builds the research worktree with `simulate.profile_flags` in CFLAGS/CXXFLAGS (file:line
needs -g; `-fopt-info-vec-missed` makes gcc name each loop it did not vectorise and why), runs
`simulate.command` once under `valgrind --tool=callgrind --cache-sim=yes` in the sandbox, and
reduces the output to hot functions, hot lines and cache-miss hot spots, each with its share of
the simulated cycles (jobs/measure/simulate.py's model). Parsing and ranking are pure (`parse`, `remarks`,
`rank`: hypotheses ordered by the measured cost of the code they would change).
"""
from __future__ import annotations

import hashlib
import json
import re
import secrets
import shlex
from collections.abc import Iterator
from pathlib import Path

from jobs.guard.mdsafe import Markdown, code, join, md, spans
from jobs.contract.callprofile import CallProfile, Remark, Spot   # noqa: F401  (this module's readers take them from here)
from jobs.contract.model import Hypothesis
from jobs.measure.simulate import CACHES, L1_WEIGHT, LL_WEIGHT
from . import cgformat

TOP = 12
EDGES = 60          # call-graph edges kept, the heaviest
FORMAT = "calls"    # what a kept profile holds: one kept before its call edges is measured again


def _cycles(ev: dict[str, int]) -> int:
    return (ev.get("Ir", 0) + L1_WEIGHT * (ev.get("I1mr", 0) + ev.get("D1mr", 0) + ev.get("D1mw", 0))
            + LL_WEIGHT * (ev.get("ILmr", 0) + ev.get("DLmr", 0) + ev.get("DLmw", 0)))


def _miss_cycles(ev: dict[str, int]) -> int:
    return L1_WEIGHT * (ev.get("D1mr", 0) + ev.get("D1mw", 0)) + LL_WEIGHT * (ev.get("DLmr", 0) + ev.get("DLmw", 0))


def cache_file(folder: Path, commit: str, config, env_digest: str = "") -> Path:
    """Where the profile of one commit, build, workload and flags is kept (beside the op profiles):
    `research` then `run` of the same commit profile once."""
    sim = config.simulate
    key = "\0".join([commit, config.build, sim.command, sim.profile_flags, str(sim.timeout), env_digest,
                     FORMAT])
    return Path(folder) / f"callgrind-{hashlib.sha256(key.encode('utf-8', 'replace')).hexdigest()[:24]}.json"


def load_cached(path: Path | None) -> CallProfile | None:
    """The kept profile at `path`, or None (absent or unreadable: then it is measured again)."""
    if path is None or not path.is_file():
        return None
    try:
        return CallProfile.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(path: Path | None, prof: CallProfile) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(prof.to_dict()), encoding="utf-8")
    tmp.replace(path)


def parse(text: str, root: str = "") -> CallProfile:
    """A callgrind file (any number of processes concatenated; `cgformat` reads the format) ->
    self costs per function and per source line, ranked. Costs after a `calls=` line are the
    callee's inclusive cost and are not self cost; they count in `coverage`, at the line that calls.
    `coverage` and `extents` hold every executed line and function of the tree (files under `root`)."""
    by_fn: dict[str, dict[str, int]] = {}
    by_line: dict[tuple[str, int], dict[str, int]] = {}
    line_fn: dict[tuple[str, int], str] = {}
    first: dict[str, tuple[str, int]] = {}
    called: dict[tuple[str, int], int] = {}              # inclusive cycles of the calls made from a line
    extent: dict[tuple[str, str], list[int]] = {}         # (function, file) -> [first, last, self cycles]
    edges: dict[tuple[str, str], list[int]] = {}          # (caller, callee) -> [calls, inclusive cycles]
    prefix = root.rstrip("/") + "/" if root else ""
    for cost in cgformat.costs(text):
        fn, line = cost.fn, cost.positions.get("line", 0)
        f = cost.file.removeprefix(prefix)
        if cost.callee is not None:
            if cost.callee != fn:
                edge = edges.setdefault((fn, cost.callee), [0, 0])
                edge[0], edge[1] = edge[0] + cost.calls, edge[1] + _cycles(cost.costs)
            if line > 0:
                called[(f, line)] = called.get((f, line), 0) + _cycles(cost.costs)
            continue
        if line > 0:
            ext = extent.setdefault((fn, f), [line, line, 0])
            ext[0], ext[1], ext[2] = min(ext[0], line), max(ext[1], line), ext[2] + _cycles(cost.costs)
        acc = by_fn.setdefault(fn, {})
        key = (f, line)
        lacc = by_line.setdefault(key, {})
        for k, v in cost.costs.items():
            acc[k] = acc.get(k, 0) + v
            lacc[k] = lacc.get(k, 0) + v
        line_fn.setdefault(key, fn)
        if fn not in first or (first[fn][0] == f and line < first[fn][1] and line > 0):
            first[fn] = (f, line)
    total = sum(_cycles(ev) for ev in by_fn.values()) or 1
    funcs = sorted(((n, _cycles(ev), ev) for n, ev in by_fn.items()), key=lambda t: -t[1])
    lines = sorted(((k, _cycles(ev), ev) for k, ev in by_line.items() if k[1] > 0), key=lambda t: -t[1])
    miss = sorted(((k, _miss_cycles(ev), ev) for k, ev in by_line.items() if k[1] > 0), key=lambda t: -t[1])
    miss_total = sum(_miss_cycles(ev) for ev in by_fn.values()) or 1
    prof = CallProfile(total_cycles=total)
    prof.functions = [Spot(n, n, c, c / total, _miss_cycles(ev) / max(c, 1),
                           f"{first[n][0]}:{first[n][1]}" if n in first else "") for n, c, ev in funcs[:TOP]]
    prof.lines = [Spot(f"{k[0]}:{k[1]}", line_fn[k], c, c / total, _miss_cycles(ev) / max(c, 1))
                  for k, c, ev in lines[:2 * TOP]]
    prof.misses = [Spot(f"{k[0]}:{k[1]}", line_fn[k], c, c / miss_total, 1.0)
                   for k, c, ev in miss[:TOP] if c > 0]
    coverage: dict[str, dict[int, int]] = {}
    for key in set(by_line) | set(called):
        if key[1] > 0 and _in_tree(key[0]):
            own = _cycles(by_line[key]) if key in by_line else 0
            coverage.setdefault(key[0], {})[key[1]] = own + called.get(key, 0)
    prof.coverage = {f: [[n, c] for n, c in sorted(v.items())] for f, v in sorted(coverage.items())}
    prof.extents = [[fn, f, a, b, c] for (fn, f), (a, b, c) in sorted(extent.items()) if _in_tree(f)]
    heaviest = sorted(edges.items(), key=lambda kv: -kv[1][1])[:EDGES]
    prof.calls = [[a, b, n, c] for (a, b), (n, c) in heaviest]
    return prof


def _in_tree(file: str) -> bool:
    """A file of the profiled tree (its path relative to the root), not a system header or `???`."""
    return bool(file) and not file.startswith(("/", "???"))


# gcc -fopt-info-vec-missed ("missed: couldn't vectorize loop") and clang -Rpass-missed=loop-vectorize
# ("remark: loop not vectorized").
REMARK = re.compile(r"^(?P<file>[^\s:]+\.(?:c|cc|cpp|cxx|h|hpp)):(?P<line>\d+):\d+: (?:optimized|missed|note|remark): "
                    r"(?P<msg>.*)$")


def remark_lines(build_output: str) -> Iterator[re.Match[str]]:
    """Every compiler remark in a build's output, one `REMARK` match per line. `REMARK` is anchored
    at both ends and compiled without re.M, so it is only ever matched line by line: a search of the
    whole (multi-line) output would never match."""
    for line in build_output.splitlines():
        m = REMARK.match(line.strip())
        if m:
            yield m


def printed_remarks(build_output: str) -> bool:
    """Did the build print any compiler remark (optimized/missed/note/remark) at all?"""
    return next(remark_lines(build_output), None) is not None


def remarks(build_output: str, prof: CallProfile, window: int = 3) -> list[Remark]:
    """gcc's -fopt-info-vec-missed lines about the profile's hot lines (within `window` lines)."""
    hot = [(s.where.rsplit(":", 1)[0], int(s.where.rsplit(":", 1)[1])) for s in prof.lines if s.share >= 0.005]
    out: dict[tuple[str, int, str], Remark] = {}
    for m in remark_lines(build_output):
        f, n, msg = m["file"].removeprefix("./"), int(m["line"]), m["msg"].strip()
        if "vectoriz" not in msg and "vectoris" not in msg:   # gcc and clang spell it with a z
            continue
        if any(f == hf and abs(n - hn) <= window for hf, hn in hot):
            out.setdefault((f, n, msg), Remark(f, n, msg))
    return sorted(out.values(), key=lambda r: (r.file, r.line))[:40]


def wrapped(command: str, marker: str) -> str:
    vg = " ".join(["valgrind", "--tool=callgrind", "--cache-sim=yes", *CACHES, "--trace-children=yes",
                   "--vgdb=no", "--compress-strings=no", "--compress-pos=no", '--callgrind-out-file="$d/cg.%p"'])
    # As jobs/measure/cgoutput.py does for the yardstick: the workload's output (what /proc/self/fd/1 leads
    # to) in one folder, the records in a randomly named one inside another that cannot be listed
    # while the workload runs. A profile only ranks hypotheses; the yardstick decides.
    return (f'o=$(mktemp -d) && p=$(mktemp -d) && d=$(mktemp -d "$p/XXXXXXXXXXXX") || exit 97; '
            f'chmod 300 "$d" && chmod 100 "$p" || exit 97; {vg} bash -c {shlex.quote(command)} '
            f'>"$o/out.log" 2>&1; rc=$?; chmod 700 "$p" "$d"; '
            f'if [ $rc -ne 0 ]; then tail -c 3000 "$o/out.log"; exit $rc; fi; '
            f'for f in "$d"/cg.*; do echo {shlex.quote(marker)}; cat "$f"; done')


def measure(tree, config, run, native_only: bool = False) -> CallProfile | None:
    """Build with the profile flags and run the reduced workload under callgrind, both through
    `run(command, cwd, timeout, extra_env=..., step=...)` (the run's sandbox). None + a note in
    `notes` when it could not be measured; the caller records why."""
    sim = config.simulate
    flags = sim.profile_flags
    env = {"CFLAGS": flags, "CXXFLAGS": flags} if flags else {}
    build = run(config.build, tree, config.timeouts.build, extra_env=env, step="build")
    if build.returncode != 0:
        raise RuntimeError(f"the profile build (CFLAGS={flags!r}) failed (exit {build.returncode}): "
                           f"{build.output[-400:]}")
    if native_only:                 # the derived workload (the benchmark command): only where it counts the target's code
        from jobs.measure.simrun import makes_native_code
        if not makes_native_code(tree):
            raise RuntimeError("the build made no native code (no ELF file in its tree), so the benchmark command "
                               "is not profiled under callgrind")
    marker = "AUTORESEARCH-CALLGRIND-" + secrets.token_hex(12)
    done = run(wrapped(sim.command, marker), tree, sim.timeout * 2, extra_env={"AUTORESEARCH_SEED": "1"},
               step="benchmark")
    if done.returncode != 0:
        raise RuntimeError(f"the workload under callgrind failed (exit {done.returncode}): {done.output[-400:]}")
    prof = parse("\n".join(done.output.split(marker + "\n")[1:]), root=str(tree))
    prof.remarks = remarks(build.output, prof)
    prof.command, prof.flags = sim.command, flags
    if flags and "-fopt-info" in flags and not printed_remarks(build.output):
        prof.notes.append("the build printed no compiler remarks: it may not pass CFLAGS/CXXFLAGS to the compiler")
    return prof


def render(prof: CallProfile) -> list[Markdown]:
    """research.md's section: function, file and line names and the compiler's remarks come from
    the target's build, so each enters as a code span or escaped text (`md`)."""
    out = [md("## Where the time goes (callgrind profile of the simulated workload)"), md(""),
           md("{} built with CFLAGS {}, once under callgrind with cache simulation: {:,} simulated cycles (model: "
              "jobs/measure/simulate.py).", code(prof.command, 2000), code(prof.flags or "(the build as it is)", 2000),
              prof.total_cycles), md(""),
           md("| hot function | first line | share of simulated cycles | of it in data-cache misses |"),
           md("|---|---|---|---|")]
    out += [md("| {} | {} | {:.1f}% | {:.0f}% |", code(s.function), code(s.first_line), 100 * s.share,
               100 * s.miss_share) for s in prof.functions]
    out += [md(""), md("| hot line | function | share |"), md("|---|---|---|")]
    out += [md("| {} | {} | {:.1f}% |", code(s.where), code(s.function), 100 * s.share) for s in prof.lines[:TOP]]
    if prof.misses:
        out += [md(""), md("Data-cache-miss hot spots (share of all miss cycles): {}", join(", ", [
            md("{} ({}) {:.0f}%", code(s.where), s.function, 100 * s.share) for s in prof.misses[:6]]))]
    out += [md(""), md("The compiler on the hot loops (-fopt-info-vec-missed, lines within 3 of a hot line):"), md("")]
    out += [md("- {} {}", code(r.where), spans(r.message, at_start=False)) for r in prof.remarks[:15]] or [
        md("- none (no remark on a hot line)")]
    out += [md("- note: {}", spans(n, at_start=False)) for n in prof.notes] + [md("")]
    return out


def digest(prof: CallProfile) -> str:
    """The same evidence as plain text for a model (treated as untrusted data)."""
    lines = [f"simulated cycles of `{prof.command}`: {prof.total_cycles:,}"]
    lines += [f"function {s.function} ({s.first_line}): {100 * s.share:.1f}% self, {100 * s.miss_share:.0f}% of it "
              "data-cache misses" for s in prof.functions]
    lines += [f"line {s.where} in {s.function}: {100 * s.share:.1f}%" for s in prof.lines[:TOP]]
    lines += [f"cache-miss spot {s.where} in {s.function}: {100 * s.share:.0f}% of miss cycles" for s in prof.misses[:6]]
    lines += [f"compiler: {r.where}: {r.message}" for r in prof.remarks[:20]]
    return "\n".join(lines)


# -- ranking by measured cost (issue 44) ---------------------------------------------------------
# A hypothesis ranks by the share of the callgrind profile's simulated cycles in the code it would
# change times the fraction of that cost its kind of change can remove. Few, round numbers: they
# order what is tried; the yardstick measures what it gives.
LOCAL_FRACTION = 0.25   # a change inside a function (a hot-function lead, `restrict`, micro-tuning, a
                        # parallel split): reshaping or vectorising its loops takes a part of their cost, rarely all
BUILD_FRACTION = 0.04   # a build option acts on the whole program (share 1.0) and typically removes a few %
FUSION_PASSES = 2       # a fusion whose number of passes is unknown: two into one
HOT_SHARE = 0.05        # code holding this share of the profile or more is hot: a hypothesis on it ranks ahead
                        # of every whole-program build option, whatever the fractions say


def removable(h: Hypothesis, passes: int = 0) -> float:
    """What `h`'s kind of change can remove from the code it touches, as a fraction of its cost: a
    fusion of N passes at most (N-1)/N of them (N: the scan's passes, else its ops, else
    `FUSION_PASSES`); a build option `BUILD_FRACTION` (of the whole program); any other change
    `LOCAL_FRACTION`."""
    if h.kind == "build":
        return BUILD_FRACTION
    if h.kind == "fusion":
        n = passes or (len(h.ops) if len(h.ops) >= 2 else FUSION_PASSES)
        return (n - 1) / n
    return LOCAL_FRACTION


def _sites(h: Hypothesis) -> list[tuple[str, int]]:
    """The file:line places in the tree a hypothesis's evidence names (not profile rows or URLs)."""
    out = []
    for e in h.evidence:
        if e.where.startswith(("profile:", "http://", "https://")) or ":" not in e.where:
            continue
        file, _, rest = e.where.partition(":")
        digits = rest.split(":", 1)[0]
        if digits.isdigit() and int(digits) > 0:
            out.append((file.removeprefix("./"), int(digits)))
    return out


def measured_share(h: Hypothesis, prof: CallProfile, spans: dict[str, tuple[str, int, int]]
                   ) -> tuple[float | None, bool]:
    """(the share of `prof`'s simulated cycles in the code `h` would change, whether any of that
    code ran at all). A build option: 1.0 (the whole program). A hypothesis made from the profile
    keeps the share it was made with (its function's self cost). Otherwise per site of its
    evidence: a memory-pass finding's lines (`spans`: where -> file, first, last line) cost
    **inclusively** (each line's own cycles plus those of the calls made from it); any other line
    costs its enclosing function's **self** cycles (inclusive function costs are not derived:
    recursion would count a callee twice). The largest site counts. None: not measured (no site,
    a profile without line coverage, or none of its files with line data in the profile)."""
    if h.kind == "build":
        return 1.0, True
    if h.measured_share is not None:
        return h.measured_share, h.measured_share > 0
    sites = _sites(h)
    if not sites or not prof.coverage:
        return None, True
    located = {f for f in prof.coverage} | {f for _fn, f, _a, _b, _c in prof.extents}
    if not any(file in located for file, _line in sites):
        # none of its files has line data in the profile: built without -g (a Makefile that sets
        # CFLAGS itself ignores the profile flags), not proven unexecuted; the demo's five recipes
        # were all set apart as "not on the measured path" while their functions held 50% of it
        return None, True
    total = max(prof.total_cycles, 1)
    fn_self: dict[str, int] = {}
    for fn, _f, _a, _b, cycles in prof.extents:
        fn_self[fn] = fn_self.get(fn, 0) + cycles
    lines = {f: dict((n, c) for n, c in v) for f, v in prof.coverage.items()}
    best, ran = 0.0, False
    for e in h.evidence:
        if e.where not in spans:
            continue
        file, first, last = spans[e.where]
        cycles = sum(c for n, c in lines.get(file, {}).items() if first <= n <= last)
        best, ran = max(best, min(1.0, cycles / total)), ran or cycles > 0
    for file, line in sites:
        around = [fn for fn, f, a, b, _c in prof.extents if f == file and a - 1 <= line <= b]
        ran = ran or bool(around) or lines.get(file, {}).get(line, 0) > 0
        if f"{file}:{line}" not in spans and around:
            best = max(best, min(1.0, max(fn_self[fn] for fn in around) / total))
    return best, ran


def rank(hypotheses: list[Hypothesis], prof: CallProfile, spans: dict[str, tuple[str, int, int]] | None = None,
         passes: dict[str, int] | None = None) -> tuple[list[Hypothesis], list[tuple[Hypothesis, str]]]:
    """Pure: `hypotheses` ranked by measured cost, and those not on the measured path with why.

    Each gets `measured_share` (see `measured_share`) and, when measured, `score` = 100 x share x
    `removable` (the % of the profile's cycles it could remove at most). Order: hypotheses on hot
    code (share >= `HOT_SHARE`, not a build option) first, then the other measured ones (build
    options among them), then the unmeasured in their old order; within each by score. A
    hypothesis whose code ran 0 cycles (its lines and the function around them), in a profile that
    covers every executed line, is not ranked: it is returned in the second list.
    `spans`: where -> (file, first, last) of the memory-pass findings; `passes`: where -> their
    number of passes."""
    spans, passes = spans or {}, passes or {}
    ranked, off = [], []
    for h in hypotheses:
        old = h.score
        share, ran = measured_share(h, prof, spans)
        h.measured_share = share
        if share is None:
            ranked.append(((2, 0.0, -old, h.id), h))
            continue
        if share == 0 and not ran and prof.coverage:
            where = ", ".join(f"`{f}:{n}`" for f, n in _sites(h)[:3])
            off.append((h, f"its code ({where}) and the function around it ran 0 of the {prof.total_cycles:,} "
                           "simulated cycles of the profiled workload"))
            continue
        n = max((passes.get(e.where, 0) for e in h.evidence), default=0)
        h.score = round(100 * share * removable(h, n), 3)
        tier = 0 if share >= HOT_SHARE and h.kind != "build" else 1
        ranked.append(((tier, -h.score, -old, h.id), h))
    return [h for _key, h in sorted(ranked, key=lambda t: t[0])], off
