"""A benchmark that repeats its work until a time budget is spent (Google Benchmark's default, a
"run for N seconds" loop) can be judged by neither yardstick: a faster candidate does more rounds in
the same time, so simulated cycles do not fall, and the process takes its budget either way, so the
runner's own clock calls a real speed-up invalid. The A/A's second simulated run is slowed on
purpose (jobs.measure.simulate.SLOWED); counts that fall with it stop the run at calibration, with
what to change, before any experiment is spent."""
from __future__ import annotations

import shutil

import pytest

from jobs.measure.simulate import BUDGET_FALL_PCT, render_section, time_budget_problem, wrapped_command

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (tests/system-deps.sh)")


def _arm(cycles: int, slowed: bool = False, wall_s: float = 1.0) -> dict:
    return {"cycles": cycles, "wall_s": wall_s, "processes": 1, **({"slowed": True} if slowed else {})}


def test_counts_that_fall_when_slowed_are_work_that_follows_the_time():
    said = time_budget_problem({"A": _arm(200_000_000), "B": _arm(134_000_000, slowed=True, wall_s=1.1)},
                               "the benchmark command")
    assert said is not None
    assert "the benchmark command does as much work as its time allows" in said
    assert "200,000,000 and then 134,000,000" in said and "-33.0%" in said
    assert "--benchmark_min_time=<N>x" in said


@pytest.mark.parametrize("head, slowed", [
    (200_000_000, True),                                         # a fixed amount of work: the same count
    (int(200_000_000 * (1 - 0.99 * BUDGET_FALL_PCT / 100)), True),   # just inside: jitter, the floor takes it
    (300_000_000, True),                                         # more counted when slowed: not a budget's sign
    (134_000_000, False),                                        # an A/A run before the slowed run existed
])
def test_no_problem_without_the_fall_of_a_slowed_run(head, slowed):
    assert time_budget_problem({"A": _arm(200_000_000), "B": _arm(head, slowed=slowed)}, "x") is None


def test_no_problem_where_an_arm_did_not_count():
    assert time_budget_problem({"A": _arm(200_000_000)}, "x") is None
    assert time_budget_problem({}, "x") is None
    assert time_budget_problem({"A": {"cycles": "many"}, "B": _arm(1, slowed=True)}, "x") is None


def test_only_the_slowed_run_gets_the_slowing_options():
    plain, slowed = wrapped_command("./bench", "M"), wrapped_command("./bench", "M", slowed=True)
    assert "--vex-iropt-level=0" not in plain and "--vex-iropt-level=0" in slowed
    assert plain.replace(" --vex-iropt-level=0 --smc-check=all --vex-guest-chase=no", "") == plain
    assert slowed.replace(" --vex-iropt-level=0 --smc-check=all --vex-guest-chase=no", "") == plain


def test_pr_md_says_the_a_a_second_run_was_slowed():
    from jobs.contract.calibrated import SimulatedCalibration
    from summaries import run_summary
    summary = run_summary(simulate={"local": SimulatedCalibration(aa_delta_pct=0.0001, base_cycles=1000,
                                                                  digests=[], seconds=2.0, native_seconds=0.1)})
    text = "\n".join(str(line) for line in render_section(summary))
    assert "the second run slowed ~1.5x under Valgrind" in text
    # Which yardstick decided is the project's own markup: `simulate:` is a code span, not escaped text.
    assert "Decided by: simulated cycles of the declared `simulate:` workload" in text


# Repeats its work until `budget` seconds of CPU time are spent, as Google Benchmark decides its
# iterations by default. CPU time, not wall time: the count then follows the simulator's speed only,
# whatever else the machine runs.
BUDGETED_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static unsigned long mix(unsigned long x) {
    for (int k = 0; k < ROUNDS; k++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}
int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 0.05, t0 = cpu(), t;
    unsigned long h = 0, n = 0;
    do { for (int i = 0; i < 1000; i++) h ^= mix(n * 1000 + i); n++; } while ((t = cpu() - t0) < budget);
    printf("METRIC items_per_s=%.1f\n", n * 1000 / t);
    return h == 42;
}
"""
MAKEFILE = "spin: src/spin.c src/rounds\n\tcc -O1 -DROUNDS=$$(cat src/rounds) -o spin src/spin.c\n"
CONFIG = """\
name: budgeted
build: make -s
benchmark: ./spin 0.05
checks: ./spin 0.001 >/dev/null
metrics: [{name: items_per_s, direction: higher, primary: true, clock: wall}]
editable: ["src/**"]
artifacts: [spin]
timeouts: {build: 60, benchmark: 20, checks: 20, simulate: 120}
repeats: {min: 3, max: 8, warmup: 0, calibration: 4}
"""


def _target(tmp_path, config: str):
    from conftest import make_repo
    return make_repo(tmp_path / "budgeted", {".github/autoresearch.yml": config, "src/spin.c": BUDGETED_C,
                                             "src/rounds": "40\n", "Makefile": MAKEFILE})


@pytest.mark.measures
@needs_valgrind
def test_a_time_budgeted_benchmark_stops_the_run_at_calibration_with_what_to_change(tmp_path):
    from jobs.contract.errors import RunError
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import patch_for
    target = _target(tmp_path, CONFIG)
    (tmp_path / "p").mkdir()
    faster = patch_for(target, tmp_path / "p" / "fewer_rounds.patch", {"src/rounds": "10\n"})
    out = tmp_path / "out"
    with pytest.raises(RunError, match="the benchmark command does as much work as its time allows") as caught:
        Run(RunOptions(target=target, out=out, run_id="b1", agent="none", candidates=[faster])).execute()
    said = str(caught.value)
    assert "No experiment was run" in said and "`simulate: false`" in said
    assert not (out / "experiments.jsonl").exists() or '"kind": "experiment"' not in (out / "experiments.jsonl").read_text()


@pytest.mark.measures
@needs_valgrind
def test_a_declared_workload_with_a_time_budget_is_a_config_error_naming_it(tmp_path):
    from jobs.contract.errors import RunError
    from jobs.run.pipeline import Run, RunOptions
    target = _target(tmp_path, CONFIG + "simulate: {command: ./spin 0.02, timeout: 120}\n")
    with pytest.raises(RunError, match=r"`simulate.command` does as much work as its time allows.*That is the "
                                       r"`simulate:` workload"):
        Run(RunOptions(target=target, out=tmp_path / "out", run_id="b2", agent="none",
                       calibrate_only=True)).execute()


@needs_valgrind
def test_when_one_arm_fails_the_other_is_stopped_not_waited_for(tmp_path):
    """The slowed run may take twice the simulation's time limit: a benchmark far too slow for cachegrind
    would keep the A/A waiting that long after the other run had already failed."""
    import time
    from jobs.guard import sandbox
    from jobs.measure import simrun

    def run_step(command, cwd, timeout, **kw):
        return sandbox.run(command, cwd, timeout, policy=None, env={"PATH": "/usr/bin:/bin"},
                           cancel=kw.get("cancel"))

    def arm(command, slowed):
        return lambda cancel: simrun.simulate(command, tmp_path, 60, run_step, seed=1, who="arm", slowed=slowed,
                                              cancel=cancel)
    started = time.monotonic()
    outcomes = simrun.side_by_side({"A": arm("exit 3", False), "B": arm("sleep 50", True)}, workers=2)
    assert time.monotonic() - started < 20
    assert outcomes["A"].status == "crash" and outcomes["B"].status == simrun.CANCELLED
    assert simrun.first_failure(outcomes) is outcomes["A"]
    assert simrun.first_failure({"B": outcomes["B"], "A": outcomes["A"]}) is outcomes["A"]


def test_cancel_stops_a_step_as_a_timeout_does(tmp_path):
    import threading
    import time
    from jobs.guard import sandbox
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    done = sandbox.run("sleep 30", tmp_path, 60, policy=None, env={"PATH": "/usr/bin:/bin"}, cancel=cancel)
    assert done.returncode is None and time.monotonic() - started < 10
    quick = sandbox.run("echo hi", tmp_path, 60, policy=None, env={"PATH": "/usr/bin:/bin"},
                        cancel=threading.Event())
    assert quick.returncode == 0 and quick.output == "hi\n"
