"""Issue 43, "simulations side by side ... and the next experiment's": where the next candidate's build
is over early in this experiment's simulation, its checks and its simulated run are made beside this
one too, and its own experiment starts from them. What decides is unchanged: the candidate's DIGESTs
when counted and natively, a failing check. Real git, make, gcc, bubblewrap and Valgrind."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.contract.spec import ExperimentSpec, SandboxSpec
from jobs.executors.local import BuiltAhead, LocalExecutor
from jobs.measure import runner
from jobs.measure.isolation import Isolation
from jobs.measure.counted import SimulatedCounts
from jobs.measure.runner import Premade
from test_baseline_counts import CONFIG, commit, needs_tools, spec_for
from test_build_once import announcing
from test_simulate import MAKEFILE, WORK_C


@pytest.fixture
def target(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    # Checks that fail where the candidate says so (src/checks_fail), as a broken round trip would.
    config = CONFIG.replace("checks: ./work 1000 >/dev/null", "checks: ./work 1000 >/dev/null && ! test -s src/checks_fail")
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": config, "src/work.c": WORK_C, "Makefile": MAKEFILE,
                                      "src/extra": "25\n", "src/scale": "1\n", "src/checks_fail": ""})
    return repo, git(repo, "rev-parse", "HEAD")


def unread_file(repo: Path, parent: str) -> str:
    """`parent` with a file its build does not read: the same build from another tree."""
    git(repo, "checkout", "-q", "--detach", parent)
    (repo / "src" / "unread").write_text("the same work\n")
    git(repo, "add", "src/unread")
    git(repo, "commit", "-qm", "src/unread")
    return git(repo, "rev-parse", "HEAD")


@needs_tools
def test_the_next_candidate_is_checked_and_simulated_beside_this_one(target, tmp_path, monkeypatch):
    # The share is the timing rule's (tested below); here every next candidate goes on to its checks
    # and simulated run, whatever the machine's speed.
    monkeypatch.setattr(runner, "AHEAD_SHARE", 1e9)
    repo, base = target
    drop = commit(repo, base, "src/extra", "100000000\n")                      # -4% of the work, same result
    also = commit(repo, base, "src/extra", "50\n")                             # -2%, same result
    wrong = commit(repo, base, "src/work.c", WORK_C.replace("h ^= mix(i);", "h ^= mix(i) + 1;"))   # another h
    failing = commit(repo, drop, "src/checks_fail", "broken round trip\n")
    # The same builds from other trees (a file the build does not read): builds the run has not counted,
    # so each experiment counts (a build counted before is reused instead: test_baseline_counts.py).
    twin, also_2 = (unread_file(repo, c) for c in (drop, also))
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    said: dict[str, list[str]] = {}
    run = announcing(executor, lambda head, name: spec_for(repo, base, head, name), said)
    try:
        counted = run("drop", drop)                           # counts the baseline: nothing ahead yet
        also_run = run("also", also, announce=("drop-ahead", twin))
        ahead = run("drop-ahead", twin, announce=("next", also))
        after = run("next", also)
        invalid_run = run("also-2", also_2, announce=("wrong", wrong))
        invalid = run("wrong", wrong)
        run("also-3", also, announce=("failing", failing))
        failed = run("failing", failing)
    finally:
        executor.close()
    for r in (counted, also_run, ahead, after, invalid_run):
        assert r.status == "ok", r.log
    # Checked and counted beside the experiment before it, not again in its own turn.
    assert "== checks, beside the previous experiment" in ahead.log, ahead.log
    assert "running checks" not in said["drop-ahead"] and "running checks" in said["drop"]
    assert "simulated candidate" in ahead.log and "beside the previous experiment)" in ahead.log, ahead.log
    assert ahead.simulated["B"]["ahead"] is True and ahead.simulated["A"]["reused"] is True
    # The same count as the candidate's own turn gave (two counts of one commit agree far below the
    # 0.5% floor), and its native run's DIGESTs were still compared.
    b1, b2 = counted.simulated["B"]["cycles"], ahead.simulated["B"]["cycles"]
    assert abs(b2 - b1) / b1 < 1e-3 and b2 < 0.99 * ahead.simulated["A"]["cycles"], (b1, b2)
    assert ahead.simulated["B"]["native"]["returncode"] == 0
    assert ahead.invocations, "the wall-clock pairs still ran"
    # An experiment whose steps were all made ahead has nothing to run beside the next one's: that one
    # is built, checked and counted in its own turn.
    assert "beside the previous experiment" not in after.log and "running checks" in said["next"], after.log
    # A candidate counted ahead that computes something else is invalid before any pair.
    assert "simulated candidate" in invalid.log and "beside the previous experiment)" in invalid.log, invalid.log
    assert invalid.stopped == "invalid" and "DIGEST h" in invalid.log and not invalid.invocations, invalid.log
    # Checks that failed ahead fail the experiment as its own turn would have.
    assert failed.status == "checks_failed" and "checks failed" in failed.reason, (failed.status, failed.reason)
    assert "running checks" not in said.get("failing", [])
    assert not failed.invocations and not failed.simulated


@needs_tools
def test_the_next_candidate_waits_for_its_own_turn_when_its_build_took_too_long(target, tmp_path):
    repo, base = target
    drop = commit(repo, base, "src/extra", "100000000\n")
    spec = spec_for(repo, base, drop, "drop")
    base_tree, head_tree = tmp_path / "base", tmp_path / "head"
    git(repo, "worktree", "add", "-q", "--detach", str(base_tree), base)
    git(repo, "worktree", "add", "-q", "--detach", str(head_tree), drop)
    counts = SimulatedCounts.of_clone(repo)
    isolation = Isolation.from_spec(spec.sandbox)
    counts.put(runner._count_key(counts, spec, "A"), {"cycles": 1000, "wall_s": 30.0, "cpu_s": 10.0})
    # Built 6 s into a simulation of 10 s of CPU time (30 s of wall time, waiting for a shared core):
    # this experiment's pairs would wait about as long as the next one saves. Its checks and count
    # are left to its own turn (the tree is not even built here).
    late = Premade(("built", 6.0))
    assert runner.checks_and_count_ahead(spec, base_tree, head_tree, isolation, counts, threading.Event(), 6.0, late)
    assert late.checks is None and late.checks_failure is None and late.counted is None
    # No known baseline count, or no sandbox: nothing ahead either.
    for others, iso in ((SimulatedCounts.of_clone(repo), isolation), (counts, Isolation.from_spec(SandboxSpec(enabled=False)))):
        none = Premade(("built", 1.0))
        assert runner.checks_and_count_ahead(spec, base_tree, head_tree, iso, others, threading.Event(), 1.0, none)
        assert none.checks is None and none.counted is None
    # Early enough: its checks run (here they fail: the tree was never built) and are kept as a failure.
    early = Premade(("built", 1.0))
    assert runner.checks_and_count_ahead(spec, base_tree, head_tree, isolation, counts, threading.Event(), 1.0, early)
    assert early.checks_failure is not None and early.checks_failure.status == "checks_failed"
    assert early.counted is None


@needs_tools
def test_checks_stopped_half_way_or_timed_out_leave_a_tree_that_is_built_again(target, tmp_path):
    repo, base = target
    spec = spec_for(repo, base, base, "slow")
    spec.checks, spec.checks_timeout = "touch half-way && sleep 30", 60
    base_tree = tmp_path / "base"
    git(repo, "worktree", "add", "-q", "--detach", str(base_tree), base)
    counts = SimulatedCounts.of_clone(repo)
    counts.put(runner._count_key(counts, spec, "A"), {"cycles": 1000, "wall_s": 100.0})
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    premade = Premade(("built", 0.1))
    kept = runner.checks_and_count_ahead(spec, base_tree, base_tree, Isolation.from_spec(spec.sandbox), counts,
                                         cancel, 0.1, premade)
    # The checks wrote into the tree before they were stopped: it can no longer stand for a fresh build.
    assert (base_tree / "half-way").exists()
    assert kept is False and premade.checks is None and premade.checks_failure is None
    # Checks over their time limit beside another experiment's work are no verdict on the candidate
    # either (its own turn runs them alone), and they too may have written into the tree.
    spec.checks, spec.checks_timeout = "touch half-way && sleep 30", 1
    timed_out = Premade(("built", 0.1))
    assert runner.checks_and_count_ahead(spec, base_tree, base_tree, Isolation.from_spec(spec.sandbox), counts,
                                         threading.Event(), 0.1, timed_out) is False
    assert timed_out.checks_failure is None


def test_made_ahead_answers_only_for_the_same_steps():
    def spec(**kw) -> ExperimentSpec:
        fields = dict(run_id="r", name="n", platform="local", base_commit="b" * 40, head_commit="h" * 40,
                      build="make", benchmark="./bench", checks="./checks", metrics=["m"], primary="m", n_per_arm=2,
                      simulate="./work 20000", simulate_seed=5, kind="experiment")
        return ExperimentSpec(**{**fields, **kw})
    premade = Premade(("log", 1.0), checks=("ok", 0.2), counted={"B": {"cycles": 1}, "native": None, "key": "k"})
    ahead = BuiltAhead(spec(), Path("/w/head-next"), premade)
    assert ahead.answers(spec(name="renamed", seed=99)) is premade        # its name and pair order are not its steps'
    # Another workload, seed or time limit of the simulation: the build and checks stand, the count does not.
    for other in (spec(simulate="./work 30000"), spec(simulate_seed=6), spec(simulate_timeout=5)):
        made = ahead.answers(other)
        assert made.build == premade.build and made.checks == premade.checks and made.counted is None
    # Other checks: only the build stands. Another commit or build command: nothing.
    for other in (spec(checks="./other"), spec(run_checks=False), spec(checks_timeout=1)):
        made = ahead.answers(other)
        assert made.build == premade.build and made.checks is None and made.counted is None
    assert ahead.answers(spec(head_commit="c" * 40)) is None and ahead.answers(spec(build="make -j2")) is None
    assert BuiltAhead(spec(), Path("/w/head-next")).answers(spec()) is None      # never built
