"""Each build once (issue 43): when the simulated cycles already discard a candidate, its wall-clock
pairs only guard against a claim the simulation does not see, so they are first taken with each arm
in its own folder and the candidate is built in the baseline's folder only when the wall clock
claims something (then every judged pair is measured with locations swapped, as before). A tiny C
target, valgrind, make and gcc for real, in the sandbox."""
from __future__ import annotations

import math
import shutil

import pytest

from conftest import git, make_repo
from test_simulate import MAKEFILE, TINY_CONFIG, WORK_C

pytestmark = [pytest.mark.measures,
              pytest.mark.skipif(shutil.which("valgrind") is None,
                                 reason="valgrind is not installed (tests/system-deps.sh)")]

FILES = {".github/autoresearch.yml": TINY_CONFIG, "src/work.c": WORK_C, "Makefile": MAKEFILE,
         "src/extra": "25\n", "src/scale": "1\n"}
COSTS_A_LITTLE = {"src/extra": "20\n"}          # more redundant work: simulated cycles go up, not down
DROP_REDUNDANT = {"src/extra": "100000000\n"}   # -1.8% simulated cycles: a keep
# The benchmark reports 10x the items per second; the work (counted and run) is the baseline's.
INFLATED = {"src/scale": "10\n"}
SWAPPED = {"build_candidate_swapped", "build_baseline_swapped"}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """One run of the whole pipeline (calibration, then the three candidates) shared by the tests."""
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import patch_for
    tmp = tmp_path_factory.mktemp("lazy")
    target = make_repo(tmp / "tiny", FILES)
    p = tmp / "patches"
    p.mkdir()
    patches = [patch_for(target, p / f"{name}.patch", change) for name, change in
               (("costs_a_little", COSTS_A_LITTLE), ("drop_redundant", DROP_REDUNDANT), ("inflated", INFLATED))]
    summary = Run(RunOptions(target=target, out=tmp / "out", run_id="lz", agent="none", candidates=patches)).execute()
    return {e.name: e for e in summary.experiments}


def test_a_candidate_the_simulation_discards_is_never_built_in_the_other_folder(pipeline):
    e = pipeline["costs_a_little"]
    assert e.status == "discard" and "simulated cycles +" in e.reason, e.reason
    assert e.runner.stopped == "simulated"
    assert "build_candidate" in e.runner.steps
    assert not SWAPPED & set(e.runner.steps) and "screening_pairs" not in e.runner.steps, e.runner.steps
    assert e.runner.pairs >= 3


def test_a_candidate_that_saves_simulated_cycles_is_built_in_both_folders(pipeline):
    e = pipeline["drop_redundant"]
    assert e.runner.simulated.delta_pct < -1.0, e.runner.simulated
    # Kept, unless the machine's noise made its guard pairs lean to a loss (a 5% test: seen once beside
    # two CPU hogs and the suite's other worker); either way it was measured in both folders.
    assert e.status == "keep" or "lean to a loss" in e.reason, e.reason
    assert "build_candidate_swapped" in e.runner.steps and "screening_pairs" not in e.runner.steps


def test_a_wall_clock_claim_the_simulation_does_not_see_is_measured_again_with_locations_swapped(pipeline):
    e = pipeline["inflated"]
    # today's verdict for such a claim: invalid, whichever test establishes it first (the runner's own clock
    # does not confirm the claim, or the simulated cycles did not move: tests/jobs/measure/test_simulate.py)
    assert e.status == "invalid" and ("did not move" in e.reason or "claims at least" in e.reason), e.reason
    assert e.runner.stopped == "claimed"
    assert "build_candidate_swapped" in e.runner.steps, e.runner.steps
    assert e.runner.steps["screening_pairs"] >= 3


# -- the runner itself: its log, the judged pairs' locations, the stop without screening -------------

def _spec(repo, base, head, name, n=12):
    from jobs.contract.config import load_config
    from jobs.contract.spec import ExperimentSpec, Rule
    stop = Rule(alpha_keep=0.01, floor=math.log1p(0.01), target=math.log1p(0.05), max_pairs=n)
    return ExperimentSpec.from_config(load_config(repo), run_id="r", name=name, platform="local", base_commit=base,
                                      head_commit=head, n_per_arm=n, seed=7, stop=stop)


def _measure(tmp_path, change: dict[str, str], name: str):
    from jobs.executors.local import LocalExecutor
    repo = make_repo(tmp_path / "t", FILES)
    base = git(repo, "rev-parse", "HEAD")
    for rel, text in change.items():
        (repo / rel).write_text(text)
    git(repo, "commit", "-qam", name)
    head = git(repo, "rev-parse", "HEAD")
    executor = LocalExecutor(repo, tmp_path / "work")
    try:
        return executor.run(_spec(repo, base, head, name), lambda m, f: None)
    finally:
        executor.close()


def test_the_runner_says_why_it_skipped_the_second_folder_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    raw = _measure(tmp_path, COSTS_A_LITTLE, "costs")
    assert raw.status == "ok" and raw.stopped == "simulated", raw.log
    assert "second-folder builds skipped: the simulated cycles discard it and the wall clock claimed nothing" in raw.log
    assert not SWAPPED & set(raw.steps) and len(raw.pairs()) >= 3
    assert {inv.location for inv in raw.measured()} == {0}
    # the processes' seconds, warm-up included, and what runs around them, counted apart from the builds
    assert sum(inv.wall_s for inv in raw.invocations) <= raw.steps["sampling"] < raw.seconds


def test_claimed_pairs_are_set_aside_and_the_judged_ones_swap_locations(tmp_path, monkeypatch):
    from jobs.measure import runner
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    raw = _measure(tmp_path / "lazy", INFLATED, "inflated")
    assert raw.status == "ok" and raw.stopped == "claimed", raw.log
    assert SWAPPED <= set(raw.steps) and raw.steps["screening_pairs"] >= 3
    assert "screening stopped 'claimed'" in raw.log
    # the screening pairs set aside took seconds too, which the judged pairs' do not hold
    screened = raw.steps["sampling"] - sum(inv.wall_s for inv in raw.invocations)
    assert screened >= 2 * raw.steps["screening_pairs"] * min(inv.wall_s for inv in raw.invocations), raw.steps
    # the judged pairs are the swapped protocol's alone, from pair 0, half of them swapped
    pairs = raw.pairs()
    assert [a.pair for a, _ in pairs] == list(range(len(pairs)))
    assert {inv.location for inv in raw.measured()} == {0, 1}
    # what the runner did before screening existed stops the same way
    monkeypatch.setattr(runner, "_screen", lambda *a, **kw: False)
    before = _measure(tmp_path / "eager", INFLATED, "inflated")
    assert before.stopped == raw.stopped and "screening_pairs" not in before.steps
