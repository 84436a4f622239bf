"""No stranded run, part by part, on the private redis-server: the run's lease and its heartbeat,
the sweeper that finds running runs without one, what a cancel does to such a run, why a lost
run is not resumed, and the status text at each step."""
from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest
import redis
from rq import Queue

from bot import approval as ap
from bot import jobqueue
from bot.execution import resume_refusal
from bot.ports import StopFailed
from bot.status import MAX_LOSSES, status_body
from bot.store import Store
from recordfixtures import record

REPO = "octo/synth"


@pytest.fixture()
def conn(redis_url):
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    saved = (jobqueue.LEASE_S, jobqueue.BEAT_S, jobqueue.SWEEP_S)
    jobqueue.configure(lease_s=2, sweep_s=0.2)
    yield r
    jobqueue.LEASE_S, jobqueue.BEAT_S, jobqueue.SWEEP_S = saved
    r.flushdb()


def running(store: Store, **fields):
    rec = record(repo=REPO, state=ap.RUNNING, phase="experiments", experiments_done=2, experiments_total=3, **fields)
    store.replace_run(rec)
    return rec


def test_the_store_indexes_running_runs_by_their_state(conn):
    store = Store(conn)
    store.replace_run(record(repo=REPO, state=ap.QUEUED))
    assert store.running_runs() == []
    store.update_run(REPO, "7-abc1234", state=ap.RUNNING)
    assert store.running_runs() == [(REPO, "7-abc1234")]
    store.update_run(REPO, "7-abc1234", phase="experiments")          # progress leaves the index alone
    assert store.running_runs() == [(REPO, "7-abc1234")]
    store.update_run(REPO, "7-abc1234", state=ap.DONE)
    assert store.running_runs() == []


def test_runs_stranded_before_the_index_existed_are_found_when_a_worker_starts(conn, redis_url):
    store = Store(conn)
    running(store, run_id="5-old0000")
    store.replace_run(record(repo=REPO, run_id="6-done000", state=ap.DONE))
    conn.delete("ar:running")                               # as written by an older version
    assert jobqueue.sweep(conn) == []
    assert jobqueue.Sweeper(redis_url).sweep_once(reindex=True) == ["5-old0000"]
    assert store.get_run(REPO, "5-old0000").lost_at and store.get_run(REPO, "6-done000").lost_at == 0


def test_a_heartbeat_keeps_the_lease_and_only_its_holder_releases_it(conn):
    store = Store(conn)
    lease = jobqueue.RunLease(store, REPO, "7-abc1234")
    assert lease.take()
    assert not jobqueue.RunLease(store, REPO, "7-abc1234").take()    # one holder at a time
    time.sleep(3 * jobqueue.LEASE_S)                                  # three lease lifetimes: renewed all along
    assert store.lease_holder(REPO, "7-abc1234") == lease.holder and not lease.lost
    assert 0 < conn.pttl(f"ar:lease:{REPO}:7-abc1234") <= jobqueue.LEASE_S * 1000
    store.release_lease(REPO, "7-abc1234", "someone-else")
    assert store.lease_holder(REPO, "7-abc1234") == lease.holder
    lease.release()
    assert store.lease_holder(REPO, "7-abc1234") is None


def test_a_holder_whose_lease_was_taken_over_knows_it_is_lost(conn):
    store = Store(conn)
    lease = jobqueue.RunLease(store, REPO, "7-abc1234")
    assert lease.take()
    conn.delete(f"ar:lease:{REPO}:7-abc1234")             # it expired while this process stalled ...
    assert store.take_lease(REPO, "7-abc1234", "the-new-worker", 60)     # ... and another took the run
    deadline = time.monotonic() + 5
    while not lease.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease.lost
    lease.release()
    assert store.lease_holder(REPO, "7-abc1234") == "the-new-worker"      # not released by the old holder


def test_a_holder_that_cannot_renew_fences_itself_before_its_lease_runs_out(conn):
    store = Store(conn)
    lease = jobqueue.RunLease(store, REPO, "7-abc1234")
    assert lease.take()
    lease._done.set()                                   # the heartbeat stops (a stalled process, Redis away)
    time.sleep(jobqueue.LEASE_S - jobqueue.BEAT_S + 0.2)
    assert lease.lost and store.lease_holder(REPO, "7-abc1234") == lease.holder   # lost before it expired
    lease.release()


def test_the_handover_signal_makes_the_holder_stop_and_give_the_lease_back_at_once(conn):
    store = Store(conn)
    before = signal.getsignal(jobqueue.HANDOVER_SIGNAL)
    lease = jobqueue.RunLease(store, REPO, "7-abc1234")
    assert lease.take()                                  # in the main thread: it listens for the signal
    os.kill(os.getpid(), jobqueue.HANDOVER_SIGNAL)       # what HandingOverWorker sends its horse
    deadline = time.monotonic() + 5
    while not lease.lost and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lease.lost and store.lease_holder(REPO, "7-abc1234") == lease.holder
    lease.release()
    assert store.lease_holder(REPO, "7-abc1234") is None        # handed back, not left to lapse
    assert signal.getsignal(jobqueue.HANDOVER_SIGNAL) == before           # the job's handler is gone


def test_sweep_marks_a_running_run_without_lease_lost_and_queues_its_resume_once(conn):
    store = Store(conn)
    held = running(store, run_id="8-held000")
    lost = running(store, run_id="9-lost000", jobs=["the-dead-job"])
    assert store.take_lease(REPO, held.run_id, "alive", 60)
    now = time.time()
    assert jobqueue.sweep(conn, now=now) == [lost.run_id]
    rec = store.get_run(REPO, lost.run_id)
    assert rec.state == ap.RUNNING and rec.lost_at == now and rec.losses == 1 and rec.worker == ""
    assert "leases last 2 s" in rec.message and "2 finished experiment(s)" in rec.message
    runs = Queue(jobqueue.RUNS, connection=conn)
    assert runs.job_ids == [rec.jobs[-1]] and rec.jobs[0] == "the-dead-job"
    job = runs.fetch_job(rec.jobs[-1])
    assert job.func_name == "bot.tasks.resume_run" and job.args == (REPO, lost.run_id)
    assert store.get_run(REPO, held.run_id).lost_at == 0                      # the held run is left alone
    assert jobqueue.sweep(conn) == [] and runs.count == 1                    # its resume is still to come
    runs.fetch_job(rec.jobs[-1]).cancel()                                     # ... until it is gone unclaimed
    assert jobqueue.sweep(conn) == [lost.run_id] and store.get_run(REPO, lost.run_id).losses == 2


def test_a_started_resume_has_a_grace_beyond_a_short_lease_to_reach_its_lease(conn):
    """A resume job that started but holds no lease yet: its horse is on its way (fork, imports, Redis),
    longer than a 2 s lease on a loaded host; the run is counted lost again only after the grace."""
    from datetime import datetime, timezone

    from rq.job import JobStatus

    store = Store(conn)
    lost = running(store, run_id="9-lost000", lost_at=time.time() - 60, losses=1)
    job = Queue(jobqueue.RUNS, connection=conn).enqueue("bot.tasks.resume_run", REPO, lost.run_id)
    store.update_run(REPO, lost.run_id, jobs=[job.id])
    now = time.time()
    job.set_status(JobStatus.STARTED)
    job.started_at = datetime.fromtimestamp(now - 3 * jobqueue.LEASE_S, tz=timezone.utc)
    job.save()
    assert jobqueue.sweep(conn, now=now) == [] and store.get_run(REPO, lost.run_id).losses == 1
    later = now + jobqueue.START_GRACE_S
    assert jobqueue.sweep(conn, now=later) == [lost.run_id] and store.get_run(REPO, lost.run_id).losses == 2


def test_sweep_forgets_an_index_entry_whose_record_is_no_longer_running(conn):
    store = Store(conn)
    running(store)
    conn.hset(f"ar:run:{REPO}:7-abc1234", "state", '"done"')                 # written behind the index's back
    assert jobqueue.sweep(conn) == [] and store.running_runs() == []


def test_the_sweeper_thread_finds_a_lost_run_within_lease_plus_sweep(conn, redis_url):
    store = Store(conn)
    running(store)
    assert store.take_lease(REPO, "7-abc1234", "a-worker-about-to-die", jobqueue.LEASE_S)
    sweeper = jobqueue.Sweeper(redis_url).start()
    try:
        start = time.monotonic()
        while not store.get_run(REPO, "7-abc1234").lost_at and time.monotonic() - start < 30:
            time.sleep(0.05)
        took = time.monotonic() - start
    finally:
        sweeper.stop()
    assert store.get_run(REPO, "7-abc1234").lost_at, "the lost run was never noticed"
    print(f"METRIC lost_noticed_s={took:.2f} bound_s={jobqueue.LEASE_S + jobqueue.SWEEP_S:.2f}")


def test_cancel_of_a_running_run_without_a_worker_ends_it_at_once(conn):
    store = Store(conn)
    rec = running(store)
    launcher = jobqueue.QueueLauncher(conn)
    with pytest.raises(StopFailed, match="no worker runs it any more"):
        launcher.stop(rec)
    store.take_lease(REPO, rec.run_id, "alive", 60)
    assert launcher.stop(rec) == "the running step"


def test_why_a_lost_run_is_not_resumed(monkeypatch):
    from bot import planning
    approval = ap.Approval("alice", "x" * 16, "b" * 40)
    prep = SimpleNamespace(base="b" * 40)                                    # what is read of it
    monkeypatch.setattr(planning, "record_plan_id", lambda prep, rec: "x" * 16)     # its plan's id
    assert resume_refusal(record(state=ap.RUNNING, losses=1, approval=approval), prep) == ""
    assert "lost 3 times" in resume_refusal(record(state=ap.RUNNING, losses=MAX_LOSSES, approval=approval), prep)
    assert "not on this worker" in resume_refusal(record(state=ap.RUNNING, losses=1, approval=approval), None)
    other = record(state=ap.RUNNING, losses=1, approval=ap.Approval("alice", "y" * 16, "b" * 40))
    assert "no longer the one that was approved" in resume_refusal(other, prep)


def test_status_says_lost_while_a_run_waits_for_its_next_worker():
    lost = status_body(record(state=ap.RUNNING, lost_at=1.0, losses=1, message="⚠️ the worker ... stopped"))
    assert "⚠️ worker lost — resuming" in lost and "🏃 running" not in lost
    resumed = status_body(record(state=ap.RUNNING, lost_at=0.0, losses=1, message="🔁 resumed"))
    assert "🏃 running" in resumed and "🔁 resumed" in resumed
