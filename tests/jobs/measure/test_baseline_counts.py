"""Issue 43: the baseline's simulated run is counted once per run, not once per experiment. Its build
is made once per base commit, its workload's seed is the run's and its counts are deterministic, so
the first count answers for every later experiment on the same build; the candidate's own checks
(its DIGESTs when counted and natively) are untouched. Real git, make, gcc, bubblewrap and Valgrind."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.contract.config import load_config
from jobs.contract.spec import ExperimentSpec, SandboxSpec
from jobs.executors.local import LocalExecutor
from jobs.measure.runner import BaselineCounts
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


def spec_key(**kw) -> str:
    spec = ExperimentSpec(run_id="r", name="n", platform="local", base_commit=kw.pop("base", "b" * 40),
                          head_commit="h" * 40, build=kw.pop("build", "make"), benchmark="./bench", checks="true",
                          metrics=["m"], primary="m", n_per_arm=2, simulate=kw.pop("simulate", "./work 20000"),
                          kind=kw.pop("kind", "experiment"))
    return BaselineCounts.key(spec, Path(kw.pop("tree", "/w/base")), kw.pop("seed", 7))


def test_a_count_answers_only_for_the_same_build_workload_seed_and_folder():
    first = spec_key()
    assert first == spec_key()
    others = [spec_key(base="c" * 40), spec_key(build="make CFLAGS=-O3"), spec_key(simulate="./work 30000"),
              spec_key(seed=8), spec_key(tree="/w/head"),
              spec_key(kind="attribution")]        # a stack's baseline builds with the candidates' caches
    assert len({first, *others}) == 1 + len(others)
    counts = BaselineCounts()
    counts.put(first, {"cycles": 10, "digests": {"h": "1"}, "native": {"returncode": 0}})
    counts.put(spec_key(seed=8), {"cycles": 9, "slowed": True})      # the A/A's slowed run: never reused
    assert counts.get(first) == {"cycles": 10, "digests": {"h": "1"}}
    assert counts.get(spec_key(seed=8)) is None
    counts.get(first)["cycles"] = 0                                   # a copy: a caller cannot change it
    assert counts.get(first)["cycles"] == 10
    counts.forget()
    assert counts.get(first) is None


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
