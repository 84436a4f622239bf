"""Issue 43: a target that declares no `simulate:` gets a yardstick anyway: calibration runs the
benchmark command itself under cachegrind (within `timeouts.simulate`), and where it fits the
experiments are decided on its simulated cycles, with the wall clock as the guard."""
from __future__ import annotations

import json
import shutil

import pytest

from test_simulate import MAKEFILE, WORK_C

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (tests/system-deps.sh)")

# No `simulate:`: the benchmark command (about 10 ms natively, too short for wall-clock pairs to see
# a 4% change in 8 pairs on a shared machine) is what cachegrind counts. Its metric times a short part of a
# short process, so one slow process under load spreads the baseline past the default `max_spread` (3)
# and the A/A would stop the run, as it should for a maintainer's target: the documented setting for such a
# metric (8, as tests/jobs/test_cheats.py's shrunk demo) keeps this test about the yardstick. The timed part
# is not shorter than a scheduler's slice: at 30,000 items (under 1 ms) one preempted process beside two CPU
# hogs spread the baseline's values 19.8x and the run stopped at its sanity check, on the machine, not the code.
CONFIG = """\
name: tiny-derived
build: make -s
benchmark: ./work 300000
checks: ./work 1000 >/dev/null
metrics: [{name: items_per_s, direction: higher, primary: true, clock: wall}]
editable: ["src/**"]
artifacts: [work]
timeouts: {build: 60, benchmark: 20, checks: 20, simulate: 120}
repeats: {min: 3, max: 8, warmup: 0, calibration: 4}
thresholds: {max_spread: 8.0}
"""

# Computes h correctly under Valgrind (LD_PRELOAD names its preload library) and skips half the
# loop natively: counted, it is the baseline's work and result; run for real, it is not.
TWO_FACED = WORK_C.replace("for (long i = 0; i < n; i++) h ^= mix(i);", (
    "const char *pre = getenv(\"LD_PRELOAD\");\n"
    "    long stop = (pre && strstr(pre, \"vgpreload\")) ? n : n / 2;\n"
    "    for (long i = 0; i < stop; i++) h ^= mix(i);")).replace("#include <time.h>", "#include <time.h>\n#include <string.h>")


def _target(tmp_path, config=CONFIG):
    from conftest import make_repo
    return make_repo(tmp_path / "tiny", {".github/autoresearch.yml": config, "src/work.c": WORK_C,
                                         "Makefile": MAKEFILE, "src/extra": "25\n", "src/scale": "1\n"})


@pytest.mark.measures
@needs_valgrind
def test_without_simulate_the_benchmark_itself_becomes_the_yardstick(tmp_path):
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import patch_for
    target = _target(tmp_path)
    p = tmp_path / "patches"
    p.mkdir()
    patches = [patch_for(target, p / "drop_redundant.patch", {"src/extra": "100000000\n"}),    # -4% of the work
               patch_for(target, p / "two_faced.patch", {"src/work.c": TWO_FACED})]
    out = tmp_path / "out"
    summary = Run(RunOptions(target=target, out=out, run_id="d1", agent="none", candidates=patches)).execute()
    cal = summary.simulate["local"]
    assert cal.derived is True and cal.command == "./work 300000" and cal.base_cycles > 0, cal
    assert abs(cal.aa_delta_pct) < 0.1
    by = {e.name: e for e in summary.experiments}
    drop = by["drop_redundant"]
    assert drop.simulated is not None, (drop.status, drop.reason)
    assert drop.simulated.delta_pct < -1.0, drop.simulated
    assert drop.status == "keep", drop.reason
    two = by["two_faced"]
    assert two.status == "invalid" and "behaves differently when counted" in two.reason, two.reason
    assert two.runner.pairs == 0
    # Its candidate was built beside the first experiment's simulation (`--agent none` costs nothing),
    # and the baseline's count was the A/A's, counted once for the run.
    logs = {r["name"]: r["log"] for r in map(json.loads, (out / "experiments.jsonl").read_text().splitlines())}
    assert "== candidate build, beside the previous experiment" in logs["two_faced"], logs["two_faced"]
    assert "counted once for the run" in logs["two_faced"], logs["two_faced"]
    assert drop.simulated.base_cycles == cal.base_cycles
    pr = (out / "pr.md").read_text()
    assert "Decided by: simulated cycles of the benchmark command itself (derived" in pr


@pytest.mark.measures
@needs_valgrind
def test_a_benchmark_too_slow_under_cachegrind_leaves_the_wall_clock_deciding_and_says_so(tmp_path):
    from jobs.run.pipeline import Run, RunOptions
    from jobs.contract.runsummary import CalibrationOnly
    # 3,000,000 items: ~0.05 s natively, far over a 1 s budget under cachegrind
    target = _target(tmp_path, CONFIG.replace("./work 300000", "./work 3000000").replace("simulate: 120", "simulate: 1"))
    out = tmp_path / "out"
    result = Run(RunOptions(target=target, out=out, run_id="d2", agent="none", calibrate_only=True)).execute()
    assert isinstance(result, CalibrationOnly)
    from jobs.contract.runstate import RunState
    state = RunState.load(out)
    assert not state.simulate, state.simulate          # nothing claims a yardstick that did not run
    warned = [w for w in state.warnings if "no derived yardstick" in w]
    assert warned and "took longer than timeouts.simulate=1 s" in warned[0], state.warnings


@needs_valgrind
def test_simulate_false_never_tries(tmp_path):
    from jobs.contract.config import parse_config
    config = parse_config(CONFIG + "simulate: false\n")
    from jobs.measure.simulate import derived
    assert config.timeouts.simulate == 0 and derived(config) is None
    assert derived(parse_config(CONFIG)).command == "./work 300000"


@needs_valgrind
def test_research_then_run_of_the_same_commit_profiles_once(tmp_path):
    """`research` and then `run` of one commit: the second reuses the callgrind profile the first
    made (same commit, build, workload and flags), and says so; `--profile fresh` measures again."""
    import json
    from jobs.run.pipeline import Run, RunOptions
    target = _target(tmp_path)
    seen = []
    for i, profile in enumerate(("reuse", "reuse", "fresh")):
        out = tmp_path / f"r{i}"
        Run(RunOptions(target=target, out=out, run_id=f"p{i}", agent="offline", research_only=True,
                       profile=profile)).execute()
        state = json.loads((out / "state.json").read_text())
        seen.append((state["callgrind"]["total_cycles"], "callgrind profile: reused" in (out / "research.md").read_text()))
    assert seen[0][1] is False and seen[1][1] is True and seen[2][1] is False, seen
    assert seen[0][0] == seen[1][0] > 0        # the very profile, not a new measurement
    assert abs(seen[2][0] - seen[0][0]) / seen[0][0] < 0.01
