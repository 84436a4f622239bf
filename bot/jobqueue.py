"""RQ adapter: which queue, timeouts, retries and cancellation — declared at enqueue time — and
the App's `Launcher` (bot.ports) built on them; and how a run whose worker died is found again.

Two queues so that a `cancel` or `approve` is never stuck behind a three-hour run:
`autoresearch-commands` (short jobs: replies, plans, approvals) and `autoresearch-runs`
(pipelines and benches). `autoresearch worker` listens to both, commands first.

A job's argument is the routed `CommentCommand` itself (RQ pickles it): the worker acts on exactly
what the webhook parsed, overrides included.

No stranded run. A run that starts or resumes takes a *lease* in Redis (`RunLease`: `SET NX` with a
TTL of `LEASE_S`), which a thread of the work horse renews every `BEAT_S`. A worker that dies
(SIGKILL, OOM, a redeploy that outlasts the grace period) stops renewing it, and the lease expires
at most `LEASE_S` after its last heartbeat. Every `autoresearch worker` runs a `Sweeper` that looks
at the running runs every `SWEEP_S` (and once when it starts): a running run without a lease is
marked lost in its record (`lost_at`, `losses`) and a `resume_run` job goes to the front of the runs
queue, so the next free worker resumes it from its ledger (`Flow.resume`). A dead worker's run is
therefore marked lost within `LEASE_S + SWEEP_S` seconds (40 s by default) of its last heartbeat,
as long as any worker is up (a restarted container's is). A resume job that has started is given
`START_GRACE_S` to take the lease before its run counts as lost again. RQ's own abandoned-job handling is
no substitute here: it moves a dead worker's job to the failed registry only at a worker's
maintenance pass (every 10 minutes), after RQ's 90 s heartbeat expiry, and knows nothing of the
run's ledger. A horse that cannot renew its lease for `LEASE_S - BEAT_S` seconds treats it as lost
and stops at its next step, before anyone else can have taken the run over.

A worker asked to stop (SIGTERM from a redeploy) does not sit out the grace period on a three-hour
run: `HandingOverWorker` signals its horse, whose run stops at the next step and hands its lease
back, and the worker exits; the next sweep (any worker's, the new container's at its start) queues
the resume. A step that outlasts the grace period is SIGKILLed, and the lease lapses instead.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from datetime import timezone
from typing import Any

import redis
from rq import Queue, Retry, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from . import approval as ap
from .ports import Outcome, RunStore, StopFailed
from .record import RunRecord
from .routing import CommentCommand
from .status import lost_message
from .store import Store

log = logging.getLogger("autoresearch.bot")

COMMANDS = "autoresearch-commands"
RUNS = "autoresearch-runs"
ALL = (COMMANDS, RUNS)
LEASE_S = 30.0          # a run's lease lives this long after its last heartbeat
BEAT_S = 5.0            # the heartbeat's period
PUBSUB_WAKE_S = 1.0     # how often a worker's command-channel thread looks up from its wait
SWEEP_S = 10.0          # how often a worker looks for running runs without a lease
START_GRACE_S = 30.0    # a started resume job has this long to reach its lease (fork, imports, Redis)
COMMAND_RETRIES = 2     # a command job that fails (GitHub 5xx) runs again after 5 s, then 30 s
HANDOVER_SIGNAL = signal.SIGUSR1    # worker -> its work horse: hand the run back (ignored elsewhere)


def configure(lease_s: float | None = None, sweep_s: float | None = None) -> None:
    """Set the lease and sweep periods of this worker (and of the work horses it forks)."""
    global LEASE_S, BEAT_S, SWEEP_S
    if lease_s is not None:
        if lease_s < 2:
            raise ValueError("the lease must last at least 2 seconds")
        LEASE_S, BEAT_S = float(lease_s), max(0.5, float(lease_s) / 6)
    if sweep_s is not None:
        SWEEP_S = max(0.2, float(sweep_s))


def enqueue_command(conn: redis.Redis, command: CommentCommand, pipeline: Any = None) -> str:
    """`pipeline`: a MULTI pipeline the job joins (written when the caller executes it, see bot.intake)."""
    job = Queue(COMMANDS, connection=conn).enqueue_call(
        "bot.tasks.handle_comment", args=(command,), timeout=900, retry=Retry(max=COMMAND_RETRIES, interval=[5, 30]),
        result_ttl=24 * 3600, failure_ttl=7 * 24 * 3600, description=f"comment {command.comment_id}",
        pipeline=pipeline)
    return job.id


def _run_timeout(wall_hours: float) -> int:
    # The pipeline enforces wall_hours itself; the job timeout is the backstop for a hung worker.
    return int(wall_hours * 3600 * 1.5) + 1800


def enqueue_run(conn: redis.Redis, repo: str, run_id: str, wall_hours: float) -> str:
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.execute_run", repo, run_id, job_timeout=_run_timeout(wall_hours),
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"run {repo} {run_id}")
    return job.id


def enqueue_resume(conn: redis.Redis, repo: str, run_id: str, wall_hours: float) -> str:
    """A lost run goes before every queued run: it was approved, started and paid for first."""
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.resume_run", repo, run_id, job_timeout=_run_timeout(wall_hours), at_front=True,
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"resume {repo} {run_id}")
    return job.id


def enqueue_bench(conn: redis.Redis, command: CommentCommand, wall_hours: float = 2.0) -> str:
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.execute_bench", command, job_timeout=int(wall_hours * 3600) + 1800,
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"bench {command.issue_number}")
    return job.id


def cancel_queued(conn: redis.Redis, job_ids: list[str]) -> list[str]:
    """Cancel those of `job_ids` that have not started; returns the ids cancelled."""
    cancelled = []
    for job_id in job_ids:
        try:
            job = Job.fetch(job_id, connection=conn)
        except NoSuchJobError:
            continue
        if job.get_status() in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
            job.cancel()
            cancelled.append(job_id)
    return cancelled


class RunLease:
    """This process runs `repo`/`run_id`: a Redis lease, renewed by a daemon thread every `BEAT_S`
    (see the module docstring). `lost` turns true, for good, when a renewal finds the lease gone or
    someone else's, or when no renewal has succeeded for `LEASE_S - BEAT_S` seconds."""

    def __init__(self, store: Store, repo: str, run_id: str):
        self.store, self.repo, self.run_id = store, repo, run_id
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s, self.beat_s = LEASE_S, BEAT_S
        self._lost = threading.Event()           # no longer ours (expired, or someone else's)
        self._leaving = threading.Event()        # ours, being handed back (the worker shuts down)
        self._done = threading.Event()
        self._renewed = time.monotonic()
        self._thread: threading.Thread | None = None
        self._previous_handler: Any = None

    def take(self) -> bool:
        if not self.store.take_lease(self.repo, self.run_id, self.holder, self.lease_s):
            return False
        self._renewed = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.run_id}", daemon=True)
        self._thread.start()
        if threading.current_thread() is threading.main_thread():     # the work horse's job thread
            self._previous_handler = signal.signal(HANDOVER_SIGNAL, lambda *_: self.hand_over())
        return True

    def hand_over(self) -> None:
        """The worker is shutting down: stop at the next step and give the run back at once (the
        next sweep, in any worker, queues its resume) rather than let it be killed mid-step."""
        log.warning("run %s is handed back: its worker is shutting down", self.run_id)
        self._leaving.set()

    @property
    def lost(self) -> bool:
        if not self._lost.is_set() and time.monotonic() - self._renewed > self.lease_s - self.beat_s:
            self._lost.set()             # fenced: by now the sweeper may consider the worker gone
        return self._lost.is_set() or self._leaving.is_set()

    def _beat(self) -> None:
        while not self._done.wait(self.beat_s):
            if self._lost.is_set():
                return
            try:
                held = self.store.renew_lease(self.repo, self.run_id, self.holder, self.lease_s)
            except redis.RedisError as exc:      # a blip: `lost` decides once the lease may have run out
                log.warning("lease of run %s not renewed: %s", self.run_id, exc)
                continue
            if not held:
                log.warning("lease of run %s lost: another worker holds it, or it expired", self.run_id)
                self._lost.set()
                return
            self._renewed = time.monotonic()

    def release(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=self.beat_s + 5)
        if self._previous_handler is not None:
            signal.signal(HANDOVER_SIGNAL, self._previous_handler)
        if not self._lost.is_set():
            try:
                self.store.release_lease(self.repo, self.run_id, self.holder)
            except redis.RedisError as exc:       # it expires on its own
                log.warning("lease of run %s not released: %s", self.run_id, exc)


class QueueLauncher:
    """The App's Launcher: an approved run becomes a job on the runs queue (its id kept on the
    record); a cancel removes the jobs that have not started, and a running pipeline stops itself
    at its next step because it reads the cancel flag the flow has set. The process that runs a
    run holds its lease (`hold`); a running run whose lease is gone has no worker any more, and a
    cancel ends it at once (`stop` raises StopFailed)."""

    interrupts_cancel = False

    def __init__(self, conn: redis.Redis):
        self.conn = conn

    def launch(self, store: RunStore, record: RunRecord) -> Outcome:
        job_id = enqueue_run(self.conn, record.repo, record.run_id, record.wall_hours)
        store.update_run(record.repo, record.run_id, jobs=[*record.jobs, job_id])
        return Outcome(record.state, record.run_id, message=record.message)

    def withdraw(self, record: RunRecord) -> None:
        cancel_queued(self.conn, record.jobs)

    def stop(self, record: RunRecord) -> str:
        if Store(self.conn).lease_holder(record.repo, record.run_id) is None:
            raise StopFailed("no worker runs it any more (its worker died, or handed it back while shutting "
                             "down, and no other has taken it over yet)")
        return "the running step"

    def launch_bench(self, command: CommentCommand) -> None:
        enqueue_bench(self.conn, command)

    def running_fields(self) -> dict[str, Any]:
        return {}

    def hold(self, record: RunRecord) -> RunLease | None:
        lease = RunLease(Store(self.conn), record.repo, record.run_id)
        return lease if lease.take() else None


# -- finding runs whose worker died ---------------------------------------------------------------
PENDING = (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


def _resume_pending(conn: redis.Redis, record: RunRecord, now: float) -> bool:
    """Is the resume job queued for this lost run still to come (queued, or started so recently
    that it may be about to take the lease)?"""
    if not record.jobs:
        return False
    try:
        job = Job.fetch(record.jobs[-1], connection=conn)
    except NoSuchJobError:
        return False
    status = job.get_status()
    if status in PENDING:
        return True
    at = job.started_at
    started = (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp() if at else 0.0
    # Not LEASE_S alone: with a short lease (3 s in the tests) a horse on a loaded host was still on its
    # way to the lease when the next sweep counted its run lost a second time.
    return status == JobStatus.STARTED and now - started < max(LEASE_S, START_GRACE_S)


def sweep(conn: redis.Redis, now: float | None = None) -> list[str]:
    """Mark every running run that has no lease as lost and queue its resume (once: a run already
    marked whose resume job is still to come is left alone). Returns the run ids queued."""
    store, queued = Store(conn), []
    for repo, run_id in store.running_runs():
        if store.lease_holder(repo, run_id):
            continue
        with store.locked(repo, run_id):
            rec = store.get_run(repo, run_id)
            if rec is None or rec.state != ap.RUNNING:
                store.forget_running(repo, run_id)
                continue
            t = time.time() if now is None else now
            if store.lease_holder(repo, run_id) or (rec.lost_at and _resume_pending(conn, rec, t)):
                continue
            store.update_run(repo, run_id, lost_at=t, losses=rec.losses + 1, worker="",
                             message=lost_message(rec, LEASE_S))
            job_id = enqueue_resume(conn, repo, run_id, rec.wall_hours)
            store.update_run(repo, run_id, jobs=[*rec.jobs, job_id])
        log.warning("run %s of %s lost its worker (no lease); resume queued as job %s", run_id, repo, job_id)
        queued.append(run_id)
    return queued


class Sweeper:
    """`sweep` every `SWEEP_S` seconds in a daemon thread of the worker, on its own connection
    (the work horses the worker forks never touch it)."""

    def __init__(self, url: str):
        self.conn = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="autoresearch sweeper", daemon=True)

    def sweep_once(self, reindex: bool = False) -> list[str]:
        """One sweep; `reindex` first rebuilds the index of running runs from their records (a
        worker does it when it starts, so runs stranded before there was an index are found too)."""
        try:
            if reindex:
                Store(self.conn).index_running_runs()
            return sweep(self.conn)
        except (redis.RedisError, OSError) as exc:       # Redis away: try again next period
            log.warning("sweep failed: %s", exc)
            return []

    def start(self) -> "Sweeper":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(SWEEP_S):
            self.sweep_once()

    def stop(self) -> None:
        self._stop.set()


class HandingOverWorker(Worker):
    """RQ's forking worker that, asked to stop (SIGTERM: a redeploy; SIGINT), first tells its work
    horse to hand its run back at the next step (`RunLease.hand_over`), then shuts down warm as RQ
    does: the run is resumed by the next worker within a sweep instead of being killed when the
    grace period ends. Horses that hold no run ignore the signal (`ignore_handover`).
    Its own `sweeper` stops first: a run handed back by this redeploy is not a lost run, and a
    sweep here would count it as one (three losses end a run)."""

    sweeper: "Sweeper | None" = None

    def subscribe(self):
        """RQ's subscription to this worker's command channel, its listening thread woken every
        PUBSUB_WAKE_S instead of RQ's 60 s: redis-py 8.2's `PubSubWorkerThread.stop()` joins that
        thread, so a worker stopping before its subscription was confirmed (a `--burst` start on a
        loaded host) waited a whole minute in `unsubscribe` (rq issue 1613's hang)."""
        self.log.info("Worker %s: subscribing to channel %s", self.name, self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(sleep_time=PUBSUB_WAKE_S, daemon=True,
                                                       exception_handler=self._pubsub_exception_handler)

    def request_stop(self, signum, frame):
        if self.sweeper is not None:
            self.sweeper.stop()
        if self.horse_pid:
            try:
                os.kill(self.horse_pid, HANDOVER_SIGNAL)
            except ProcessLookupError:
                pass
        super().request_stop(signum, frame)


def ignore_handover() -> None:
    """In the worker, before any horse is forked: a horse inherits this, so the handover signal is
    a no-op wherever no run has installed its handler."""
    signal.signal(HANDOVER_SIGNAL, signal.SIG_IGN)
