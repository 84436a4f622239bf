"""RQ adapter: which queue, timeouts, retries and cancellation — declared at enqueue time.

Two queues so that a `cancel` or `approve` is never stuck behind a three-hour run:
`autoresearch-commands` (short jobs: replies, plans, approvals) and `autoresearch-runs`
(pipelines and benches). `autoresearch worker` listens to both, commands first.
"""
from __future__ import annotations

import redis
from rq import Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

COMMANDS = "autoresearch-commands"
RUNS = "autoresearch-runs"
ALL = (COMMANDS, RUNS)


def enqueue_command(conn: redis.Redis, command: dict) -> str:
    job = Queue(COMMANDS, connection=conn).enqueue(
        "bot.tasks.handle_comment", command, job_timeout=900, retry=Retry(max=2, interval=[5, 30]),
        result_ttl=24 * 3600, failure_ttl=7 * 24 * 3600, description=f"comment {command.get('comment_id')}")
    return job.id


def enqueue_run(conn: redis.Redis, repo: str, run_id: str, wall_hours: float) -> str:
    # The pipeline enforces wall_hours itself; the job timeout is the backstop for a hung worker.
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.execute_run", repo, run_id, job_timeout=int(wall_hours * 3600 * 1.5) + 1800,
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"run {repo} {run_id}")
    return job.id


def enqueue_bench(conn: redis.Redis, command: dict, wall_hours: float = 2.0) -> str:
    job = Queue(RUNS, connection=conn).enqueue(
        "bot.tasks.execute_bench", command, job_timeout=int(wall_hours * 3600) + 1800,
        result_ttl=7 * 24 * 3600, failure_ttl=30 * 24 * 3600, description=f"bench {command.get('issue_number')}")
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
