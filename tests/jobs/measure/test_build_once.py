"""Each build once (issue 43): the baseline is built once per folder per run, a candidate's build
starts from the baseline's objects where that equals a clean build, and C/C++ build steps go through
a compiler cache per repository. Real git, real make and gcc, real bubblewrap."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.contract.config import load_config
from jobs.contract.spec import ExperimentSpec, SandboxSpec
from jobs.executors.local import LocalExecutor
from jobs.measure import locations
from jobs.measure.runner import base_arm
from jobs.measure.together import usable_cores

pytestmark = [pytest.mark.measures,
              pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap (make test installs it)")]

CONFIG = """\
name: cprog
build: make
benchmark: ./bench.sh
checks: "true"
metrics:
  - {name: score, direction: higher, primary: true}
timeouts: {build: 60, benchmark: 10, checks: 10}
editable: ["*.c", "*.h"]
repeats: {min: 3, max: 3, warmup: 0, calibration: 4}
"""
# Header dependencies recorded (-MMD -MP): make rebuilds what a changed header reaches.
MAKEFILE = """\
SRCS := $(wildcard *.c)
prog: $(SRCS:.c=.o)
\t$(CC) -o $@ $^
%.o: %.c
\t$(CC) -O1 -MMD -MP -c -o $@ $<
-include $(SRCS:.c=.d)
"""
FILES = {
    ".github/autoresearch.yml": CONFIG,
    "Makefile": MAKEFILE,
    "factor.h": "#define FACTOR 3\n",
    "main.c": '#include <stdio.h>\n#include "factor.h"\nint util(void);\n__attribute__((weak)) int extra(void);\n'
              'int main(void) { printf("%d\\n", FACTOR * 100 + util() + (extra ? extra() : 0)); return 0; }\n',
    "util.c": "int util(void) { return 5; }\n",
    "extra.c": "int extra(void) { return 1000; }\n",
    "bench.sh": "#!/usr/bin/env bash\nv=$(./prog) || exit 1\n"
                "awk -v v=$v -v r=$RANDOM 'BEGIN { printf \"METRIC score=%.4f\\n\", v * (1 + (r % 100) / 1000000) }'\n",
}


def commit(repo: Path, changes: dict[str, str | None], message: str, parent: str) -> str:
    git(repo, "checkout", "-q", "--detach", parent)
    for rel, text in changes.items():
        if text is None:
            (repo / rel).unlink()
        else:
            (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def spec_for(repo: Path, base: str, head: str, name: str, **kw) -> ExperimentSpec:
    return ExperimentSpec.from_config(load_config(repo), run_id="r", name=name, platform="local",
                                      base_commit=base, head_commit=head, n_per_arm=2, **kw)


def builds_candidate(messages: list[str]) -> bool:
    """The experiment's own progress said it built its candidate (alone, or with the baseline)."""
    return any(m.startswith("building ") and m.endswith("candidate") for m in messages)


def announcing(executor: LocalExecutor, spec_of, said: dict[str, list[str]]):
    """`run(name, head, announce=(next_name, next_head))` in the pipeline's order: the next experiment
    announced (`build_ahead`), then this one run; each experiment's progress messages go to `said`.
    `spec_of(head, name)` makes an experiment's spec."""
    def run(name: str, head: str, announce: tuple[str, str] | None = None):
        if announce:
            executor.build_ahead(spec_of(announce[1], announce[0]))
        return executor.run(spec_of(head, name), lambda m, f: said.setdefault(name, []).append(m))
    return run


def clean_output(repo: Path, commit_: str, where: Path) -> int:
    """What the program a clean build of `commit_` prints (built outside any sandbox, for reference)."""
    git(repo, "worktree", "add", "-q", "--detach", str(where), commit_)
    subprocess.run(["make", "-s"], cwd=where, check=True, capture_output=True)
    return int(subprocess.run(["./prog"], cwd=where, check=True, capture_output=True, text=True).stdout)


def in_turn(repo: Path, tmp_path: Path, *specs: ExperimentSpec) -> list:
    """Each spec's result, run in order through one local executor (closed after)."""
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    try:
        return [executor.run(spec, lambda m, f: None) for spec in specs]
    finally:
        executor.close()

def scores(result) -> set[int]:
    return {int(v) for v in result.head.values["score"]}


def baseline_builds(result) -> int:
    return sum(k in result.steps for k in ("build_baseline", "build_baseline_swapped"))


@pytest.fixture
def target(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "t", FILES)
    return repo, git(repo, "rev-parse", "HEAD")


def test_the_baseline_is_built_once_per_folder_and_candidates_build_like_clean_builds(target, tmp_path):
    repo, base = target
    header = commit(repo, {"factor.h": "#define FACTOR 4\n"}, "header", base)
    util = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "util", base)
    gone = commit(repo, {"extra.c": None}, "delete", base)
    both = commit(repo, {"factor.h": "#define FACTOR 6\n", "util.c": "int util(void) { return 9; }\n"}, "both", base)
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    results = {}
    try:
        for name, head in (("header", header), ("util", util), ("gone", gone), ("both", both)):
            results[name] = executor.run(spec_for(repo, base, head, name), lambda m, f: None)
            assert results[name].status == "ok", results[name].log
    finally:
        executor.close()
    # Four experiments: the baseline built in each folder once (before: 1 + one per experiment = 5).
    assert [baseline_builds(r) for r in results.values()] == [2, 0, 0, 0]
    assert all("build_candidate" in r.steps and "build_candidate_swapped" in r.steps for r in results.values())
    # Every candidate's program is what a clean build of its commit prints, in both folders' builds.
    for k, (name, head) in enumerate((("header", header), ("util", util), ("gone", gone), ("both", both))):
        assert scores(results[name]) == {clean_output(repo, head, tmp_path / f"clean{k}")}, name
    assert scores(results["header"]) == {1405} and scores(results["gone"]) == {305}
    assert {int(v) for v in results["util"].base.values["score"]} == {1305}
    # "util" changed util.c only and started from the baseline's objects: main.c was not compiled again
    # (in a clean tree it would be); "gone" deletes a file, so its tree was a clean checkout.
    candidate_log = results["util"].log.split("== candidate build")[1].split("==")[0]
    assert "util.c" in candidate_log and "main.c" not in candidate_log, candidate_log
    gone_log = results["gone"].log.split("== candidate build")[1].split("==")[0]
    assert "main.c" in gone_log, gone_log
    assert not (tmp_path / "out" / "work").exists()


def test_a_failed_baseline_build_is_never_kept(target, tmp_path):
    repo, base = target
    flag = tmp_path / "fail-in-head"
    (repo / "Makefile").write_text(MAKEFILE.replace("prog: $(SRCS:.c=.o)\n",
                                                    f"prog: $(SRCS:.c=.o)\n\t! {{ [ -e {flag} ] && [ $(notdir $(CURDIR)) = head ] "
                                                    "&& grep -q 'return 5' util.c; }\n"))
    git(repo, "commit", "-qam", "the baseline's build fails in head while the flag exists")
    base = git(repo, "rev-parse", "HEAD")
    one = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "one", base)
    two = commit(repo, {"util.c": "int util(void) { return 8; }\n"}, "two", base)
    work = tmp_path / "out" / "work"
    executor = LocalExecutor(repo, work)
    unsandboxed = SandboxSpec(enabled=False)          # the build reads the flag on the host
    try:
        flag.write_text("")
        first = executor.run(spec_for(repo, base, one, "one", sandbox=unsandboxed), lambda m, f: None)
        assert first.status == "build_failed" and first.reason.startswith("baseline build in the other"), first.log
        key = locations.build_key(base, "make", base_arm(spec_for(repo, base, one, "one")))
        assert locations.kept_build(work / "head", key) is None
        assert not (work / "head.A.key").exists()
        flag.unlink()
        second = executor.run(spec_for(repo, base, two, "two", sandbox=unsandboxed), lambda m, f: None)
        assert second.status == "ok", second.log
        assert "build_baseline_swapped" in second.steps and "build_baseline" in second.steps
        assert locations.kept_build(work / "head", key) is not None      # this one passed: kept
    finally:
        executor.close()


def test_calibration_compares_two_separate_builds_and_other_bases_build_their_own(target, tmp_path):
    repo, base = target
    one = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "one", base)
    two = commit(repo, {"util.c": "int util(void) { return 8; }\n"}, "two", one)
    first, calibration, stacked, again = in_turn(
        repo, tmp_path, spec_for(repo, base, one, "one"), spec_for(repo, base, base, "calibration", kind="calibration"),
        spec_for(repo, one, two, "on-one", kind="attribution"), spec_for(repo, base, one, "again"))
    assert first.status == calibration.status == stacked.status == again.status == "ok"
    # The A/A: the base built in a second worktree and both arms built in both folders, nothing kept.
    assert {"build_candidate", "build_candidate_swapped", "build_baseline_swapped"} <= set(calibration.steps)
    # Another base commit: its baseline is built, not taken from the run base's kept build ...
    assert {"build_baseline", "build_baseline_swapped"} <= set(stacked.steps)
    assert {int(v) for v in stacked.base.values["score"]} == {1307}
    # ... and the run base's build is then made again (the kept one was the other commit's).
    assert {"build_baseline", "build_baseline_swapped"} <= set(again.steps)
    assert {int(v) for v in again.base.values["score"]} == {1305}


def build_spans(log: str) -> dict[str, tuple[int, int]]:
    """Each build's (began, ended) in ns, as its own output in the experiment's log says them."""
    spans = {}
    for what, output in re.findall(r"== (.+?) \([\d.]+ s\)\n(.*?)(?=\n== |\Z)", log, re.S):
        began, ended = re.search(r"began (\d+)", output), re.search(r"ended (\d+)", output)
        if began and ended:
            spans[what] = (int(began.group(1)), int(ended.group(1)))
    return spans


def stamping_builds(repo: Path) -> str:
    """A commit whose build says when it began and ended (`build_spans`), and takes a second at least."""
    (repo / "build.sh").write_text('echo "began $(date +%s%N)"\nsleep 1\nmake\necho "ended $(date +%s%N)"\n')
    (repo / ".github" / "autoresearch.yml").write_text(CONFIG.replace("build: make", "build: bash build.sh"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a build that says when it began and ended")
    base = git(repo, "rev-parse", "HEAD")
    return base


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.skipif(usable_cores() < 2, reason="one core: the builds take turns")
def test_the_two_builds_of_each_step_run_at_once_in_their_own_folders(target, tmp_path):
    repo, _ = target
    base = stamping_builds(repo)
    calibration, = in_turn(repo, tmp_path, spec_for(repo, base, base, "calibration", kind="calibration"))
    assert calibration.status == "ok", calibration.log
    spans = build_spans(calibration.log)
    assert overlap(spans["baseline build"], spans["candidate build"]), spans        # the A/A's two builds
    other_folders = ("baseline build in the other arm's folder", "candidate build in the other arm's folder")
    assert overlap(spans[other_folders[0]], spans[other_folders[1]]), spans
    # Each build is still a whole one in its own folder: the pairs ran every arm's program.
    assert calibration.steps["build_baseline"] >= 1 and calibration.steps["build_candidate_swapped"] >= 1


@pytest.mark.skipif(usable_cores() < 2, reason="one core: the builds take turns")
def test_a_candidate_not_built_ahead_builds_at_once_with_the_next_one(target, tmp_path):
    """The run's first experiment after its calibration (the baseline built, nothing built ahead) builds its
    candidate alone: the announced next candidate's build begins with it, not after it on an idle core."""
    repo, _ = target
    base = stamping_builds(repo)
    util = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "util", base)
    header = commit(repo, {"factor.h": "#define FACTOR 4\n"}, "header", base)
    executor = LocalExecutor(repo, tmp_path / "out" / "work")
    said: dict[str, list[str]] = {}
    run = announcing(executor, lambda head, name: spec_for(repo, base, head, name, kind="calibration" if
                                                           name == "calibration" else "experiment"), said)
    try:
        calibration = run("calibration", base)
        first = run("util", util, announce=("header", header))
        second = run("header", header)
    finally:
        executor.close()
    for r in (calibration, first, second):
        assert r.status == "ok", r.log
    own, ahead = build_spans(first.log)["candidate build"], build_spans(second.log)[
        "candidate build, beside the previous experiment"]
    assert overlap(own, ahead), (own, ahead)
    assert "build_baseline" not in first.steps and not builds_candidate(said["header"])
    # Each is still the clean build of its own commit, measured from its own folder.
    assert scores(first) == {1307} and scores(second) == {1405}


def test_a_candidate_that_fails_to_build_beside_the_baseline_leaves_the_baseline_built(target, tmp_path):
    """Without a calibration first (one reused from the cache), the first experiment builds the baseline and
    its candidate at once: the candidate's failure is its own, and the baseline, built to its end, is not built
    again by the next experiment."""
    repo, base = target
    broken = commit(repo, {"util.c": "int util(void) { return 5 }\n"}, "does not compile", base)
    fine = commit(repo, {"util.c": "int util(void) { return 9; }\n"}, "nine", base)
    first, second = in_turn(repo, tmp_path, spec_for(repo, base, broken, "broken"), spec_for(repo, base, fine, "fine"))
    assert first.status == "build_failed" and first.reason.startswith("candidate build failed"), first.reason
    assert first.steps["build_baseline"] > 0 and "== baseline build" in first.log
    assert second.status == "ok", second.log
    assert "build_baseline" not in second.steps and scores(second) == {1309}


@pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache (make test installs it)")
@pytest.mark.parametrize("sandboxed", [True, False])
def test_build_steps_go_through_a_compiler_cache_of_their_repository(tmp_path, monkeypatch, sandboxed):
    from jobs.measure.isolation import CCACHE, Isolation, repo_key
    from jobs.measure.runner import run_step
    root = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(root))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.c").write_text("int f(int x) { return x * 3; }\n")
    one, two = (Isolation.from_spec(SandboxSpec(enabled=sandboxed, repo_key=repo_key(n))) for n in ("o/one", "o/two"))
    assert one.ccache and one.ccache_view() == str(root.resolve() / CCACHE)
    view = one.ccache_view()
    backing = {iso: Path(iso.backing(view, "candidate")) for iso in (one, two)}
    assert backing[one] != backing[two] and all(p.is_dir() for p in backing.values())
    assert str(backing[one]).startswith(one.namespace) and str(backing[two]).startswith(two.namespace)
    env = run_step("env", tree, 20, isolation=one, step="build", arm="candidate").output
    ccache_dir = view if sandboxed else str(backing[one])
    assert f"CCACHE_DIR={ccache_dir}\n" in env and f"CCACHE_BASEDIR={tree.resolve()}\n" in env
    assert f"PATH={one.ccache}:" in env
    for step in ("benchmark", "checks"):
        other = run_step("env", tree, 20, isolation=one, step=step, arm="candidate").output
        assert "CCACHE_" not in other and one.ccache not in other, step
    # A real compile through it fills only its own repository's cache (and only its arm's).
    done = run_step("cc -O2 -c a.c -o a.o && cc -O2 -c a.c -o b.o && cmp a.o b.o", tree, 60, isolation=one,
                    step="build", arm="candidate")
    assert done.returncode == 0, done.output
    assert any(p.is_file() for p in backing[one].rglob("*"))
    assert not any(p.is_file() for p in backing[two].rglob("*"))
    assert not any(p.is_file() for p in Path(one.backing(view, "base")).rglob("*"))
    monkeypatch.setenv("AUTORESEARCH_CCACHE", "0")
    off = Isolation.from_spec(SandboxSpec(enabled=sandboxed, repo_key=repo_key("o/one")))
    assert not off.ccache
    assert "CCACHE_DIR" not in run_step("env", tree, 20, isolation=off, step="build").output


def test_the_next_candidate_is_built_beside_this_one_and_measured_from_that_build(target, tmp_path):
    repo, base = target
    header = commit(repo, {"factor.h": "#define FACTOR 4\n"}, "header", base)
    util = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "util", base)
    both = commit(repo, {"factor.h": "#define FACTOR 6\n", "util.c": "int util(void) { return 9; }\n"}, "both", base)
    work = tmp_path / "out" / "work"
    executor = LocalExecutor(repo, work)
    said: dict[str, list[str]] = {}
    run = announcing(executor, lambda head, name: spec_for(repo, base, head, name), said)
    try:
        first = run("header", header, announce=("util", util))
        second = run("util", util, announce=("both", both))
        third = run("header-again", header)          # not the one announced (the agent revised its list)
    finally:
        executor.close()
    for r in (first, second, third):
        assert r.status == "ok", r.log
    # The announced candidate was built while the first was measured, and not built again.
    assert "== candidate build, beside the previous experiment" in second.log, second.log
    assert not builds_candidate(said["util"]) and builds_candidate(said["header"])
    assert "build_candidate" in second.steps
    # Its build, in the other candidates' folder, is what a clean build prints, as its build in the
    # baseline's folder is (the location swap still builds each arm in both).
    assert scores(second) == {clean_output(repo, util, tmp_path / "clean-util")} == {1307}
    assert "build_candidate_swapped" in second.steps and "build_baseline_swapped" in second.steps
    # An announced candidate that is not run next is dropped; the one run is built as usual.
    assert "beside the previous experiment" not in third.log and builds_candidate(said["header-again"])
    assert scores(third) == scores(first) == {1405}
    assert not work.exists()


def test_a_cancelled_experiment_stops_the_next_candidates_build_and_leaves_nothing(target, tmp_path):
    from jobs.contract.errors import RunCancelled
    repo, base = target
    header = commit(repo, {"factor.h": "#define FACTOR 4\n"}, "header", base)
    # The next candidate's build takes long (its own make rule), so it is still running when the cancel comes.
    slow = commit(repo, {"util.c": "int util(void) { return 7; }\n",
                         "Makefile": MAKEFILE.replace("prog: $(SRCS:.c=.o)\n", "prog: $(SRCS:.c=.o)\n\tsleep 30\n")},
                  "slow", base)
    work = tmp_path / "out" / "work"
    executor = LocalExecutor(repo, work)

    def cancel_at_checks(message: str, fraction: float) -> None:
        if message == "running checks":
            raise RunCancelled("cancelled")
    try:
        executor.build_ahead(spec_for(repo, base, slow, "slow"))
        with pytest.raises(RunCancelled):
            executor.run(spec_for(repo, base, header, "header"), cancel_at_checks)
        assert not (work / "head-next").exists() and not (work / "head").exists()
        after = executor.run(spec_for(repo, base, header, "header"), lambda m, f: None)
        assert after.status == "ok" and "beside the previous experiment" not in after.log
    finally:
        executor.close()
    assert not work.exists()


def test_work_beside_an_experiment_never_holds_its_pairs_up_for_long():
    import threading
    import time
    from jobs.measure.beside import Beside
    seen = []

    def waits_on_something(cancel: threading.Event) -> None:     # a build stuck on a lock, say
        seen.append(cancel.wait(60))
    stuck = Beside(waits_on_something)
    stuck.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    why = stuck.finish(expected=0.3)              # may go on for max(0.2 s run, 2 x 0.3 s, 1 s) = 1 s
    assert 0.9 < time.monotonic() - t0 < 5 and seen == [True]
    assert why.startswith("stopped after") and "pairs were due" in why

    def ends(cancel: threading.Event) -> None:
        seen.append(cancel.wait(0.5))
    quick = Beside(ends)
    quick.start()
    assert quick.finish(expected=0.0) == "" and seen[-1] is False     # over on its own within its second
    assert Beside(ends).finish() == ""                                   # never started: nothing to wait for


def test_work_beside_an_experiment_counts_from_the_end_of_its_builds():
    import threading
    import time
    from jobs.measure.beside import Beside
    begun = threading.Event()
    work = Beside(lambda cancel: (begun.set(), cancel.wait(5)))
    assert work.since_builds() == 0.0
    work.start()                                   # with the experiment's own build: its builds go on
    assert begun.wait(5) and work.since_builds() == 0.0
    time.sleep(0.2)
    work.builds_over()
    time.sleep(0.1)
    assert 0.05 < work.since_builds() < 0.19       # from the builds' end, not from the work's start
    work.finish(cancel=True)
    later = Beside(lambda cancel: begun.clear())
    later.builds_over()                             # not begun with a build: it begins once they are over
    later.finish()
    assert not begun.is_set()


def test_work_beside_an_experiment_goes_on_through_its_other_folder_builds_and_ends_before_its_pairs(target,
                                                                                                      tmp_path):
    import threading
    import time
    from jobs.measure.beside import Beside
    from jobs.measure.runner import run_experiment
    repo, base = target
    head = commit(repo, {"util.c": "int util(void) { return 7; }\n"}, "util", base)
    base_dir, head_dir = tmp_path / "base", tmp_path / "head"
    git(repo, "worktree", "add", "-q", "--detach", str(base_dir), base)
    git(repo, "worktree", "add", "-q", "--detach", str(head_dir), head)
    seen: dict[str, object] = {}

    def until_the_candidate_is_built_in_the_baselines_folder(cancel: threading.Event) -> None:
        # The candidate's build in the baseline's folder steps aside as `base.B` (jobs.measure.locations).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not cancel.is_set():
            if base_dir.with_name("base.B").is_dir():
                seen["saw_other_folder_build"] = True
                break
            time.sleep(0.01)
        seen["ended"] = time.monotonic()

    spec = spec_for(repo, base, head, "util")
    result = run_experiment(spec, base_dir, head_dir, progress=lambda m, f: seen.setdefault("first_pair", time.monotonic())
                            if m.startswith("pair 1/") else None,
                            beside=Beside(until_the_candidate_is_built_in_the_baselines_folder))
    assert result.status == "ok", result.log
    assert "build_candidate_swapped" in result.steps and result.invocations
    # Before, the work ended (or was stopped) before those builds began, and never saw them.
    assert seen.get("saw_other_folder_build") is True, (seen, result.log)
    assert "stopped after" not in result.log
    assert seen["ended"] <= seen["first_pair"]
