"""What runs leave in a target (jobs.run.cleanup, jobs.run.runlock, `autoresearch clean`): a finished run
keeps only its branch; `clean` lists what dead runs left, removes it only with --yes, and never
touches a live run or anything autoresearch did not make. Real git, real processes."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

from conftest import git
from jobs.run import cleanup, runlock
from jobs import cli
from jobs.guard import gitops
from jobs.contract import ledger
from synthetic import synthetic_target


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def fake_run(repo, out, run_id, *, phase, lock=None, exp=("a", "b"), run_branch=True, tree=True):
    """What a run of `run_id` leaves in `repo` and `out` (as the pipeline makes them)."""
    out.mkdir(parents=True)
    ledger.save_state(out, {"run_id": run_id, "phase": phase, "base_commit": gitops.head_commit(repo)})
    runlock.register(repo, run_id, out)
    for h in exp:
        git(repo, "branch", f"autoresearch/{run_id}-exp/{h}", "HEAD")
    if run_branch:
        git(repo, "branch", f"autoresearch/{run_id}", "HEAD")
    if tree:
        gitops.add_worktree(repo, out / "work" / "base", "HEAD")
    if lock:
        (out / runlock.LOCK).write_text(json.dumps(lock))


def branches(repo) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").splitlines())


def test_lock_liveness(tmp_path):
    runlock.acquire(tmp_path, "r1")
    assert runlock.alive(tmp_path)                      # this process
    runlock.release(tmp_path)
    assert not runlock.alive(tmp_path) and not (tmp_path / runlock.LOCK).exists()
    (tmp_path / runlock.LOCK).write_text(json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "start": "1"}))
    assert not runlock.alive(tmp_path)
    # A reused pid (same number, another start time) is not the run.
    (tmp_path / runlock.LOCK).write_text(json.dumps({"pid": 1, "host": socket.gethostname(), "start": "-1"}))
    assert not runlock.alive(tmp_path)
    # Another host's lock cannot be checked from here: it counts as alive.
    (tmp_path / runlock.LOCK).write_text(json.dumps({"pid": dead_pid(), "host": "elsewhere", "start": "1"}))
    assert runlock.alive(tmp_path)


def test_clean_lists_then_removes_only_what_dead_runs_left(tmp_path, capsys):
    repo = synthetic_target(tmp_path / "t")
    git(repo, "branch", "feature", "HEAD")                                    # the user's own
    gitops.add_worktree(repo, tmp_path / "mine", "HEAD")                       # the user's own worktree
    here = {"pid": __import__("os").getpid(), "host": socket.gethostname(),
            "start": runlock._start_ticks(__import__("os").getpid())}
    crashed, done, live = tmp_path / "runs" / "crashed", tmp_path / "runs" / "done", tmp_path / "runs" / "live"
    fake_run(repo, crashed, "crashed", phase="experiments",
             lock={"pid": dead_pid(), "host": socket.gethostname(), "start": "1"})
    fake_run(repo, done, "done", phase="done", exp=("c",))
    import shutil
    shutil.rmtree(done / "work")                       # its worktree is registered but its folder is gone
    fake_run(repo, live, "live", phase="experiments", lock=here)
    before = branches(repo)

    assert cli.main(["clean", str(repo)]) == 0                                 # dry run by default
    listing = " ".join(capsys.readouterr().out.split())
    assert branches(repo) == before and (crashed / "work" / "base").is_dir()
    for words in ("would remove branch autoresearch/crashed-exp/a", "would remove branch autoresearch/crashed (",
                  "would remove branch autoresearch/done-exp/c", f"would remove worktree {done / 'work' / 'base'}",
                  f"would remove folder {crashed / 'work'}", "left alone: run live is running", "add --yes"):
        assert words in listing, words
    assert "autoresearch/live" not in listing.replace("run live is running", "")
    assert "would remove branch autoresearch/done " not in listing and "feature" not in listing

    assert cli.main(["clean", str(repo), "--yes"]) == 0
    after = branches(repo)
    assert after == {"main", "feature", "autoresearch/done", "autoresearch/live",
                     "autoresearch/live-exp/a", "autoresearch/live-exp/b"}
    trees = {str(t) for t in gitops.worktrees(repo)}
    assert trees == {str(tmp_path / "mine"), str(live / "work" / "base")}
    assert not (crashed / "work").exists() and (crashed / "state.json").is_file()   # records stay
    assert not (crashed / runlock.LOCK).exists() and (live / runlock.LOCK).exists()
    capsys.readouterr()
    assert cli.main(["clean", str(repo)]) == 0
    assert "nothing to clean" in capsys.readouterr().out


def test_a_finished_run_keeps_only_its_branch(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    out = tmp_path / "o"
    fake_run(repo, out, "r1", phase="done")
    cleanup.end_of_run(repo, "r1", out, finished=True)
    assert branches(repo) == {"main", "autoresearch/r1"} and gitops.worktrees(repo) == []
    # A run that stopped early keeps its experiments' commits, so a resume need not make them again.
    fake_run(repo, tmp_path / "o2", "r2", phase="experiments")
    cleanup.end_of_run(repo, "r2", tmp_path / "o2", finished=False)
    assert {"autoresearch/r2-exp/a", "autoresearch/r2-exp/b"} <= branches(repo) and gitops.worktrees(repo) == []


def test_a_run_folder_recorded_nowhere_is_found_through_its_worktree(tmp_path, capsys):
    repo = synthetic_target(tmp_path / "t")
    out = tmp_path / "old-run"
    fake_run(repo, out, "old", phase="research")
    runlock.forget(repo, "old")                        # a run from before the target kept a record
    leftovers, live = cleanup.find_leftovers(repo)
    assert not live and {(i.kind, i.what) for i in leftovers} >= {
        ("worktree", str(out / "work" / "base")), ("folder", str(out / "work")), ("branch", "autoresearch/old")}


def test_sigterm_ends_a_run_like_ctrl_c_and_leaves_no_worktree(tmp_path):
    import os
    import signal
    import time

    from conftest import ROOT
    from synthetic import patch_for
    repo = synthetic_target(tmp_path / "t")
    patches = [patch_for(repo, tmp_path / f"c{i}.patch", {"src/speed.txt": f"{101 + i}\n"}) for i in range(3)]
    out = tmp_path / "out"
    args = [sys.executable, "-m", "jobs.cli", "run", str(repo), "--agent", "none", "--out", str(out)]
    for patch in patches:
        args += ["--candidate", str(patch)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    seen: list = []
    while time.monotonic() < deadline and not (seen := gitops.worktrees(repo)):    # a step is under way
        time.sleep(0.05)
    # Seen once is enough: a step's worktree may already be gone again (the calibration's twin tree).
    assert seen and runlock.alive(out)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, output
    assert "terminated; re-run with the same --run-id/--out to resume" in output
    assert gitops.worktrees(repo) == [] and not (out / runlock.LOCK).exists()
    assert json.loads((out / "state.json").read_text())["phase"] != "done"       # resumable, records kept
    assert os.path.isdir(out)


def test_a_caught_sigterm_exits_143_even_when_it_landed_inside_an_exec_of_a_string(tmp_path):
    """CPython flags a bare KeyboardInterrupt that escapes an exec() of a string (a dataclass being
    created) and, run with -m like `python -m jobs.cli`, kills itself with SIGINT at exit even though
    the handler caught it; SIGTERM's `Terminated` is a subclass, so the exit code stays main()'s."""
    import os

    from conftest import ROOT
    codes = {}
    for kind in ("Terminated", "KeyboardInterrupt"):
        (tmp_path / f"exits_{kind}.py").write_text(
            f"import sys\nfrom jobs.contract.errors import Terminated\nkind = {kind}\n"
            "try:\n    exec('raise kind()')\nexcept KeyboardInterrupt:\n    pass\nsys.exit(143)\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        codes[kind] = subprocess.run([sys.executable, "-m", f"exits_{kind}"], cwd=tmp_path, env=env).returncode
    assert codes["Terminated"] == 143
    assert codes["KeyboardInterrupt"] == -2      # the interpreter quirk this guards against, still there
