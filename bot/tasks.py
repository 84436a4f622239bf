"""The App's RQ entry points. Each builds the App's adapters and hands the work to `bot.flow`.

| job | queue | what |
|---|---|---|
| `handle_comment(command)` | commands | one comment command: 👀, then optimize / approve / cancel / status / bench |
| `execute_run(repo, run_id)` | runs | one approved run, from its preparation to the draft PR |
| `resume_run(repo, run_id)` | runs (front) | a running run whose worker was lost, from its ledger (`bot.jobqueue` sweeps) |
| `execute_bench(command)` | runs | re-measure a bot PR's head against its base |

Jobs are plain importable functions of plain data (RQ style); the App's adapters come from the
environment (`Settings.from_env`): Redis (`Store`), the installation's REST client
(`RepoClient`), a fresh installation token per git operation, RQ (`QueueLauncher`), git.
"""
from __future__ import annotations

import logging

from githubkit.exception import RequestFailed
from rq import get_current_job

from jobs.api import ConfigError, RunError

from . import approval as ap
from . import gitclone, jobqueue
from .flow import Flow
from .github import RepoClient, installation_token
from .jobqueue import QueueLauncher
from .routing import CommentCommand
from .settings import Settings
from .status import command_failed_reply
from .store import Store, connect

log = logging.getLogger("autoresearch.bot")


def app_flow(s: Settings, installation_id: int, owner: str, repo: str, store: Store | None = None) -> Flow:
    """The App's face of the flow for one repository of one installation."""
    store = store or Store(connect(s.redis_url))
    return Flow(place=s, store=store, gh=RepoClient(s, installation_id, owner, repo),
                token=lambda: installation_token(s, installation_id), launcher=QueueLauncher(store.r), git=gitclone)


def handle_comment(command: CommentCommand) -> str:
    """RQ job for one comment command; returns how it ended (a state, help, replied, bench).
    If it fails (GitHub answering 5xx, say, to the permission check), the commenter is told so on
    the first attempt (it will be retried) and after the last (post it again), not left with 👀."""
    s = Settings.from_env()
    flow = app_flow(s, command.installation_id, command.owner, command.repo)
    try:
        return flow.handle(command).state
    except Exception as exc:
        job = get_current_job()
        left = job.retries_left if job is not None and job.retries_left is not None else 0
        if left == 0 or left == jobqueue.COMMAND_RETRIES:
            why = f"GitHub answered {exc.response.status_code}" if isinstance(exc, RequestFailed) else type(exc).__name__
            wait = (job.retry_intervals or [0])[0] if job is not None and left else 0
            try:
                flow.gh.comment(command.issue_number, command_failed_reply(command.verb or "command", why, left, wait))
            except Exception as reply_exc:        # GitHub is down for replies too: the log says it
                log.warning("could not reply that the command failed: %s", reply_exc)
        raise


def execute_run(repo: str, run_id: str) -> str:
    """RQ job: one approved run, from clone to draft PR."""
    return _held(repo, run_id, ap.QUEUED, "run")


def resume_run(repo: str, run_id: str) -> str:
    """RQ job: a running run whose worker was lost, resumed from its ledger (or ended, with the reason)."""
    return _held(repo, run_id, ap.RUNNING, "resume")


def _held(repo: str, run_id: str, state: str, how: str) -> str:
    s = Settings.from_env()
    s.private_key()                                   # fail early, before any spending
    store = Store(connect(s.redis_url))
    rec = store.get_run(repo, run_id)
    if rec is None or rec.state != state:
        return f"not started: run is {rec.state if rec else 'unknown'}"
    flow = app_flow(s, rec.installation_id, rec.owner, rec.name, store)
    o = flow.run(rec) if how == "run" else flow.resume(rec)
    if o.error is not None and not (o.step == "run" and isinstance(o.error, (RunError, ConfigError))):
        raise o.error                 # the run is marked failed; RQ records the crash
    if o.step in ("approval", "lost"):
        return {"approval": "replanned", "lost": "given up: the next worker resumes it"}[o.step]
    if o.step == "start":
        return f"not started: run is {o.state}"
    return {ap.FAILED: "failed", ap.CANCELLED: "cancelled", ap.DONE: "done"}[o.state]


def execute_bench(command: CommentCommand) -> str:
    """RQ job: re-measure a bot PR's head against its base (one candidate: the PR's diff)."""
    s = Settings.from_env()
    o = app_flow(s, command.installation_id, command.owner, command.repo).run_bench(command)
    return "done" if o.state == ap.DONE else "failed"
