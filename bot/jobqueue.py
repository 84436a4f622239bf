"""RQ adapter: which queue, timeouts, retries and cancellation — declared at enqueue time — and
the App's `Launcher` (bot.ports) built on them.

Two queues so that a `cancel` or `approve` is never stuck behind a three-hour run:
`autoresearch-commands` (short jobs: replies, plans, approvals) and `autoresearch-runs`
(pipelines and benches). `autoresearch worker` listens to both, commands first.

A job's argument is the routed `CommentCommand` itself (RQ pickles it): the worker acts on exactly
what the webhook parsed, overrides included.
"""
from __future__ import annotations

from typing import Any

import redis
from rq import Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from .ports import Outcome
from .record import RunRecord
from .routing import CommentCommand

COMMANDS = "autoresearch-commands"
RUNS = "autoresearch-runs"
ALL = (COMMANDS, RUNS)


def enqueue_command(conn: redis.Redis, command: CommentCommand) -> str:
    job = Queue(COMMANDS, connection=conn).enqueue(
        "bot.tasks.handle_comment", command, job_timeout=900, retry=Retry(max=2, interval=[5, 30]),
        result_ttl=24 * 3600, failure_ttl=7 * 24 * 3600, description=f"comment {command.comment_id}")
    return job.id


def enqueue_run(conn: redis.Redis, repo: str, run_id: str, wall_hours: float) -> str:
    # The pipeline enforces wall_hours itself; the job timeout is the backstop for a hung worker.
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.execute_run", repo, run_id, job_timeout=int(wall_hours * 3600 * 1.5) + 1800,
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"run {repo} {run_id}")
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


class QueueLauncher:
    """The App's Launcher: an approved run becomes a job on the runs queue (its id kept on the
    record); a cancel removes the jobs that have not started, and a running pipeline stops itself
    at its next step because it reads the cancel flag the flow has set."""

    interrupts_cancel = False

    def __init__(self, conn: redis.Redis):
        self.conn = conn

    def launch(self, flow: Any, record: RunRecord) -> Outcome:
        job_id = enqueue_run(self.conn, record.repo, record.run_id, record.wall_hours)
        flow.store.update_run(record.repo, record.run_id, jobs=[*record.jobs, job_id])
        return Outcome(record.state, record.run_id, message=record.message)

    def withdraw(self, record: RunRecord) -> None:
        cancel_queued(self.conn, record.jobs)

    def stop(self, record: RunRecord) -> str:
        return "the running step"

    def launch_bench(self, command: CommentCommand) -> None:
        enqueue_bench(self.conn, command)

    def running_fields(self) -> dict[str, Any]:
        return {}
