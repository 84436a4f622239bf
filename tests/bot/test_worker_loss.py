"""A worker killed mid-run, as a container dies (SIGKILL to every process it has, OOM or a redeploy
past the grace period): another worker notices within the lease's bound, resumes the run from its
ledger, and finishes it to a draft PR with every experiment measured once; the sticky status
comment tells the truth at every step. Real workers (`autoresearch worker`), real Redis, real git,
the fake GitHub on loopback."""
from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from flask import request
from rq import Queue

from bot.jobqueue import COMMANDS, RUNS, sweep
from bot.store import Store
from botfixtures import app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import ROOT, alive, git
from jobs import api
from jobs.run import reaper
from jobs.guard import sandbox
from synthetic import FASTER, patch_for, synthetic_target, with_timeouts

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

REPO = "octo/synth"
LEASE_S, SWEEP_S = 3, 0.5


def record_status_bodies(fake) -> list[tuple[float, str]]:
    """Every body the bot writes into a status comment, in order (the fake keeps only the last)."""
    seen: list[tuple[float, str]] = []
    for endpoint in ("create_comment", "update_comment"):
        real = fake.app.view_functions[endpoint]

        def spy(*args, _real=real, **kwargs):
            body = (request.get_json(silent=True) or {}).get("body", "")
            if "<!-- autoresearch:status" in body:
                seen.append((time.time(), body))
            return _real(*args, **kwargs)
        fake.app.view_functions[endpoint] = spy
    return seen


def state_row(body: str) -> str:
    return next(line for line in body.splitlines() if line.startswith("| state |"))


def worker(bot_env, log: Path) -> subprocess.Popen:
    """A real worker whose output goes to `log` (read while it runs: `output`)."""
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker", "--lease-seconds", str(LEASE_S),
                                 "--sweep-seconds", str(SWEEP_S)], cwd=ROOT, env={**os.environ, **bot_env.env},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log
    return proc


def output(proc: subprocess.Popen) -> str:
    return proc.log.read_text(errors="replace")


def wait_until(what, timeout: float, proc: subprocess.Popen | None = None, why: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the worker exited ({why}): {output(proc)[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"timed out: {why}" + (f"; the worker said: {output(proc)[-3000:]}" if proc is not None else ""))


@pytest.fixture
def gate():
    """A folder under the operator's cache root that the target declares read-only, so its sandboxed
    build sees it: the slow candidate's build waits until the test creates `open` in it. The tests
    act on a worker while that build is certainly running, whatever the machine's load (a fixed sleep
    did not: beside two CPU hogs a 3 s and then a 10 s build were over before the signal landed)."""
    path = sandbox.cache_root().expanduser() / "test-gates" / uuid.uuid4().hex
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_a_run_in_a_worker(bot_env, tmp_path, gate: Path):
    """A run with two maintainer candidates, in a real worker, until its first experiment is on
    record; the second one's build then waits for `gate/open`: (store, run record, out dir, status
    bodies, worker)."""
    target = synthetic_target(tmp_path / "target")
    build = target / "build.sh"
    build.write_text(f"[ -e src/slow-build ] && while [ ! -e {gate}/open ]; do sleep 0.1; done\n" + build.read_text())
    cfg = target / ".github" / "autoresearch.yml"
    # The build timeout bounds a gate the test forgot to open.
    cfg.write_text(with_timeouts(cfg.read_text(), build=300) + f"sandbox:\n  read_only: [{gate}]\n")
    git(target, "commit", "-qam", "a build that can be slow")
    patches = {name: patch_for(target, tmp_path / f"{name}.patch", change).read_text() for name, change in
               (("1-faster", {"src/speed.txt": FASTER}),
                ("2-same", {"src/slow-build": "same speed, slower to build\n"}))}
    cand = target / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    for name, text in patches.items():
        (cand / f"{name}.patch").write_text(text)
    git(target, "add", "-A")
    git(target, "commit", "-qm", "two maintainer candidates")
    bot_env.add_target(REPO, target)
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")
    bodies = record_status_bodies(bot_env.github)
    store = Store(bot_env.redis)

    bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    rec = store.current_run(REPO, 1)
    assert rec.state == "queued", rec
    out = bot_env.workdir / "octo" / "synth" / rec.run_id / "out"
    first = worker(bot_env, tmp_path / "first-worker.log")
    try:
        wait_until(lambda: (r := store.current_run(REPO, 1)).experiments_done >= 1 and "experiments" in r.phase,
                   240, first, "the first experiment did not finish")
    except BaseException:
        end_worker(first)
        raise
    assert store.lease_holder(REPO, rec.run_id)
    return store, rec, out, bodies, first


def a_run_whose_worker_died(bot_env, tmp_path, issue: int):
    """A run queued by a maintainer's `optimize` on `issue` and marked running, with no worker
    holding its lease: (store, run record)."""
    bot_env.add_target(REPO, synthetic_target(tmp_path / "target"))
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")
    store = Store(bot_env.redis)
    bot_env.comment(REPO, issue, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    rec = store.current_run(REPO, issue)
    store.update_run(REPO, rec.run_id, state="running", phase="experiments")
    return store, rec


def end_worker(proc: subprocess.Popen) -> list[int]:
    """SIGKILL a worker and every process it has at once (a container dying); returns their pids."""
    tree = [proc.pid, *reaper.descendants(proc.pid)]
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):       # a short-lived step ended meanwhile
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return tree


def test_a_worker_sigkilled_during_the_experiments_is_replaced_and_the_run_resumes_to_a_draft_pr(bot_env, tmp_path,
                                                                                                gate):
    store, rec, out, bodies, first = start_a_run_in_a_worker(bot_env, tmp_path, gate)
    # The container dies: every process of the worker at once (its work horse, the sandbox of the
    # experiment being built, RQ's scheduler) gets SIGKILL.
    tree = end_worker(first)
    killed_at = time.time()
    time.sleep(0.5)
    assert not [pid for pid in tree if alive(pid)]
    before = api.read_records(out)
    assert [r.name for r in before if r.kind == "experiment"] == ["1-faster"]
    assert "🏃 running" in state_row(bodies[-1][1])              # what the issue showed when the worker died

    (gate / "open").touch()                       # the resumed run's build of the second candidate may end
    second = worker(bot_env, tmp_path / "second-worker.log")
    try:
        lost = wait_until(lambda: store.current_run(REPO, 1).lost_at, LEASE_S + 60, second, "the loss was not noticed")
        print(f"METRIC lost_noticed_s={lost - killed_at:.2f}")
        final = wait_until(lambda: (r := store.current_run(REPO, 1)).state in ("done", "failed") and r, 300, second,
                           "the resumed run did not end")
    finally:
        second.send_signal(signal.SIGTERM)          # warm shutdown: it is idle by now
        try:
            second.wait(timeout=60)
        except subprocess.TimeoutExpired:
            second.kill()
    assert final.state == "done", final
    assert final.losses == 1 and final.lost_at == 0 and final.pr_url

    # Each experiment measured exactly once: the one cut short by the kill left no record and was
    # measured again from scratch; the finished one was not measured again.
    records = api.read_records(out)
    counts = collections.Counter((r.kind, r.name, r.platform) for r in records)
    assert counts == {("calibration", "calibration", "local"): 1, ("experiment", "1-faster", "local"): 1,
                      ("experiment", "2-same", "local"): 1, ("stack", "stack", "local"): 1}, counts
    assert records[:len(before)] == before

    # The sticky comment, edit by edit: running, then the loss, then running again (resumed), then done.
    states = [state_row(b) for _, b in bodies]
    lost_at = next(i for i, s in enumerate(states) if "⚠️ worker lost — resuming" in s)
    assert "🏃 running" in states[lost_at - 1] and "🏃 running" in states[lost_at + 1]
    assert "leases last 3 s" in bodies[lost_at][1] and "1 finished experiment(s)" in bodies[lost_at][1]
    assert "🔁 resumed from its ledger" in bodies[lost_at + 1][1]
    assert "✅ done" in states[-1] and all("✅ done" not in s for s in states[:-1])
    assert [i for i, s in enumerate(states) if "worker lost" in s] == [lost_at]
    assert len([c for c in bot_env.bot_comments(REPO, 1) if "<!-- autoresearch:status" in c["body"]]) == 1

    pr = bot_env.github.pulls[(REPO, 100)]
    assert pr["draft"] and pr["head"] == f"autoresearch/{rec.run_id}"
    clone = out.parent / "repo"
    assert git(clone, "worktree", "list").count("\n") == 0          # the dead worker's worktrees are gone
    assert not store.lease_holder(REPO, rec.run_id) and store.running_runs() == []


def test_a_worker_asked_to_stop_hands_its_run_back_at_the_next_step(bot_env, tmp_path, gate):
    """A redeploy: `docker compose` sends the worker (PID 1) SIGTERM. RQ alone would wait for the
    whole run and lose it to the SIGKILL at the end of the grace period; here the horse stops at the
    next step, hands the lease back and the worker exits, so the next sweep queues the resume at once
    (the resume itself is the test above)."""
    store, rec, out, bodies, first = start_a_run_in_a_worker(bot_env, tmp_path, gate)
    tree = [first.pid, *reaper.descendants(first.pid)]
    os.kill(first.pid, signal.SIGTERM)
    try:
        # The horse has the handover (it logs it) while the second candidate's build still waits;
        # only then may that step end.
        wait_until(lambda: "is handed back: its worker is shutting down" in output(first), 60, first,
                   "the work horse did not take the handover")
        (gate / "open").touch()
        first.wait(timeout=90)                      # one step (the build), not the whole run
    finally:
        if first.poll() is None:
            end_worker(first)
    time.sleep(0.5)
    assert first.returncode == 0 and not [pid for pid in tree if alive(pid)]
    assert store.lease_holder(REPO, rec.run_id) is None             # handed back, not left to lapse
    cur = store.current_run(REPO, 1)
    assert cur.state == "running" and not cur.lost_at                # not ended: it is to be resumed
    assert [r.name for r in api.read_records(out) if r.kind == "experiment"] == ["1-faster"]
    assert sweep(bot_env.redis) == [rec.run_id]                      # the very next sweep finds it
    assert Queue(RUNS, connection=bot_env.redis).fetch_job(store.current_run(REPO, 1).jobs[-1]).func_name == \
        "bot.tasks.resume_run"


def test_a_lost_run_whose_folder_is_gone_ends_failed_with_the_reason_and_the_issue_is_free_again(bot_env, tmp_path):
    """A resume that cannot be: the run ends as failed, says why, and `optimize` works again."""
    store, rec = a_run_whose_worker_died(bot_env, tmp_path, 2)
    # Its worker took it and died right away (nothing renews the lease, nothing is in the folder).
    import shutil
    shutil.rmtree(bot_env.workdir / "octo" / "synth" / rec.run_id)
    assert sweep(bot_env.redis) == [rec.run_id]
    bot_env.work()
    rec = store.current_run(REPO, 2)
    assert rec.state == "failed" and "cannot be resumed: its run folder" in rec.message
    status = [c for c in bot_env.bot_comments(REPO, 2) if "<!-- autoresearch:status" in c["body"]][0]["body"]
    assert "❌ failed" in status and "cannot be resumed" in status
    bot_env.comment(REPO, 2, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    assert store.current_run(REPO, 2).state == "queued"            # not "already running"


def test_cancel_of_a_run_whose_worker_died_ends_it_at_once_and_removes_its_leftovers(bot_env, tmp_path):
    store, rec = a_run_whose_worker_died(bot_env, tmp_path, 3)
    # Its worker started it, made a worktree and an experiment's branch, and died (no lease).
    clone = bot_env.workdir / "octo" / "synth" / rec.run_id / "repo"
    git(clone, "worktree", "add", "-q", "--detach", str(clone.parent / "out" / "work" / "exp-x"), "HEAD")
    git(clone, "branch", f"autoresearch/{rec.run_id}-exp/x", "HEAD")
    bot_env.comment(REPO, 3, "alice", "/autoresearch cancel")
    bot_env.work(COMMANDS)
    rec = store.current_run(REPO, 3)
    assert rec.state == "cancelled" and "no worker runs it any more" in rec.message
    assert git(clone, "worktree", "list").count("\n") == 0 and not (clone.parent / "out" / "work").exists()
    assert not git(clone, "branch", "--list", "autoresearch/*")
    bot_env.comment(REPO, 3, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    assert store.current_run(REPO, 3).state == "queued"
