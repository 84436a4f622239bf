"""Issue 43: each build's simulated run is counted once per run, not once per experiment. The
baseline's build is made once per base commit, the workload's seed is the run's and counts are
deterministic, so the first count answers for every later experiment on the same build; in the stack
phase a stack without one member is a tree counted before, and the stack's count serves the next
attribution and the stack's confirmation. The candidate's own checks (its DIGESTs when counted and
natively) are untouched. Real git, make, gcc, bubblewrap and Valgrind."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.contract.config import load_config
from jobs.contract.spec import ExperimentSpec, SandboxSpec
from jobs.executors.local import LocalExecutor
from jobs.measure.counted import SimulatedCounts
from test_simulate import MAKEFILE, WORK_C

CONFIG = """\
name: counted-once
build: make -s
benchmark: ./work 100000
checks: ./work 1000 >/dev/null
metrics: [{name: items_per_s, direction: higher, primary: true, clock: wall}]
editable: ["src/**"]
timeouts: {build: 60, benchmark: 20, checks: 20}
repeats: {min: 2, max: 3, warmup: 0, calibration: 4}
simulate: {command: ./work 20000, timeout: 120}
"""


def spec_for(repo: Path, base: str, head: str, name: str, **kw) -> ExperimentSpec:
    return ExperimentSpec.from_config(load_config(repo), run_id="r", name=name, platform="local", base_commit=base,
                                      head_commit=head, n_per_arm=2, simulate_seed=1234, **kw)


def commit(repo: Path, parent: str, rel: str, text: str) -> str:
    git(repo, "checkout", "-q", "--detach", parent)
    (repo / rel).write_text(text)
    git(repo, "commit", "-qam", rel)
    return git(repo, "rev-parse", "HEAD")


def same_tree(repo: Path, commit_: str, message: str) -> str:
    """Another commit holding `commit_`'s tree (as a stack without one member holds that member's)."""
    return git(repo, "commit-tree", f"{commit_}^{{tree}}", "-p", git(repo, "rev-parse", f"{commit_}~1"), "-m", message)


def test_a_count_answers_for_the_same_tree_built_and_counted_the_same_way(tmp_path):
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": CONFIG, "src/work.c": WORK_C, "Makefile": MAKEFILE,
                                      "src/extra": "25\n"})
    base = git(repo, "rev-parse", "HEAD")
    drop = commit(repo, base, "src/extra", "100000000\n")
    twin = same_tree(repo, drop, "the same change, another commit")
    counts = SimulatedCounts.of_clone(repo)
    spec = spec_for(repo, base, drop, "drop")

    def key(commit_=drop, role="candidate", seed=7, **kw):
        return counts.key(replace(spec, **kw), commit_, role, seed)
    first = key()
    assert first and first == key(twin)             # another commit (and folder) holding the same tree
    others = [key(base), key(role="base"),          # another tree; the base's compiler cache
              key(seed=8), key(build="make CFLAGS=-O3"), key(simulate="./work 30000")]
    assert len({first, *others}) == 1 + len(others)
    counts.put(first, {"cycles": 10, "digests": {"h": "1"}, "native": {"returncode": 0}, "ahead": True})
    counts.put(key(seed=8), {"cycles": 9, "slowed": True})         # the A/A's slowed run: never reused
    assert counts.get(key(twin)) == {"cycles": 10, "digests": {"h": "1"}}   # how it was got is each use's own
    assert counts.get(key(seed=8)) is None
    counts.get(first)["cycles"] = 0                                   # a copy: a caller cannot change it
    assert counts.get(first)["cycles"] == 10
    # A commit the clone does not hold has no key: counted every time, never reused.
    assert key("f" * 40) == "" and counts.get("") is None
    counts.put("", {"cycles": 1})
    assert counts.get("") is None


def needs_tools(test):
    marks = [pytest.mark.measures,
             pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (tests/system-deps.sh)"),
             pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap (make test installs it)")]
    for mark in marks:
        test = mark(test)
    return test


@pytest.fixture
def target(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": CONFIG, "src/work.c": WORK_C, "Makefile": MAKEFILE,
                                      "src/extra": "25\n", "src/scale": "1\n"})
    return repo, git(repo, "rev-parse", "HEAD")


@needs_tools
def test_the_baseline_is_counted_once_and_the_candidates_digests_still_decide(target, tmp_path):
    repo, base = target
    drop = commit(repo, base, "src/extra", "100000000\n")                      # -4% of the work, same result
    wrong = commit(repo, base, "src/work.c", WORK_C.replace("h ^= mix(i);", "h ^= mix(i) + 1;"))   # another h
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    try:
        first = executor.run(spec_for(repo, base, drop, "drop"), lambda m, f: None)
        second = executor.run(spec_for(repo, base, wrong, "wrong"), lambda m, f: None)
        third = executor.run(spec_for(repo, base, drop, "drop-again"), lambda m, f: None)
    finally:
        executor.close()
    for r in (first, second, third):
        assert r.status == "ok", r.log
    # Counted by the first experiment, reused by the later ones: the same counts, said in the log.
    assert "reused" not in first.simulated["A"] and "counted once for the run" not in first.log
    for r in (second, third):
        assert r.simulated["A"]["reused"] is True, r.simulated["A"]
        assert r.simulated["A"]["cycles"] == first.simulated["A"]["cycles"]
        assert "counted once for the run" in r.log, r.log
    # The candidate is still counted (two counts of one commit agree far below the 0.5% floor), and
    # run natively, every time.
    b1, b3 = first.simulated["B"]["cycles"], third.simulated["B"]["cycles"]
    assert abs(b3 - b1) / b1 < 1e-3 and b3 < 0.99 * first.simulated["A"]["cycles"], (b1, b3)
    assert third.simulated["B"]["native"]["returncode"] == 0
    # A candidate that computes something else is invalid against the reused baseline's DIGEST.
    assert second.stopped == "invalid" and "DIGEST h" in second.log, second.log
    assert not second.invocations                                          # before any pair


@needs_tools
def test_another_base_commit_or_an_unsandboxed_run_counts_the_baseline_again(target, tmp_path):
    repo, base = target
    drop = commit(repo, base, "src/extra", "100000000\n")
    other_base = commit(repo, base, "src/scale", "2\n")
    on_other = commit(repo, other_base, "src/extra", "100000000\n")
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    try:
        first = executor.run(spec_for(repo, base, drop, "drop"), lambda m, f: None)
        moved = executor.run(spec_for(repo, other_base, on_other, "moved"), lambda m, f: None)
    finally:
        executor.close()
    assert first.status == moved.status == "ok", (first.log, moved.log)
    assert "reused" not in moved.simulated["A"], moved.simulated["A"]
    # Unsandboxed, a benchmark could change the tree it ran from: nothing is reused.
    loose = LocalExecutor(repo, tmp_path / "out2" / "work")
    unsandboxed = SandboxSpec(enabled=False)
    try:
        runs = [loose.run(spec_for(repo, base, drop, name, sandbox=unsandboxed), lambda m, f: None)
                for name in ("one", "two")]
    finally:
        loose.close()
    assert all(r.status == "ok" and "reused" not in r.simulated["A"] for r in runs), [r.log for r in runs]


@needs_tools
def test_the_stack_phase_counts_only_the_stack_and_only_once(target, tmp_path):
    repo, base = target
    drop = commit(repo, base, "src/extra", "100000000\n")                   # a member: -4% of the work
    stack = commit(repo, drop, "src/scale", "2\n")                          # the stack: that member and another
    without = same_tree(repo, drop, "the stack without its other member")  # holds the first member's tree
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    try:
        member = executor.run(spec_for(repo, base, drop, "drop"), lambda m, f: None)
        attribution = executor.run(spec_for(repo, without, stack, "attribution:scale", kind="attribution"),
                                   lambda m, f: None)
        confirmation = executor.run(spec_for(repo, base, stack, "stack", kind="stack"), lambda m, f: None)
    finally:
        executor.close()
    for r in (member, attribution, confirmation):
        assert r.status == "ok", r.log
    # The stack without one member is that member's build, counted by its own experiment (another
    # commit, another folder, the same tree): only the stack is counted.
    assert attribution.simulated["A"]["reused"] is True, attribution.log
    assert attribution.simulated["A"]["cycles"] == member.simulated["B"]["cycles"]
    assert "reused" not in attribution.simulated["B"]
    # The stack's confirmation counts nothing: the base's count is the run's, the stack's the attribution's.
    assert confirmation.simulated["A"]["cycles"] == member.simulated["A"]["cycles"]
    assert confirmation.simulated["B"]["cycles"] == attribution.simulated["B"]["cycles"]
    assert confirmation.simulated["A"]["reused"] is confirmation.simulated["B"]["reused"] is True
    assert confirmation.log.count("counted once for the run") == 2, confirmation.log
    # Still run natively, and its DIGESTs compared with those it printed when counted.
    assert confirmation.simulated["B"]["native"]["returncode"] == 0
    assert confirmation.simulated["B"]["native"]["digests"] == confirmation.simulated["B"]["digests"]
