"""What `bot.flow` needs from the world, as protocols, and the few values it trades with it.

The flow imports none of Redis, RQ, githubkit or the Actions runtime; each face wires its own
implementations (the contract tests in tests/bot/test_ports.py hold both stores to one contract):

| protocol | the App | the Action |
|---|---|---|
| `RunStore` | `bot.store.Store` (Redis) | `bot.issuestore.IssueStateStore` (one bot-authored issue comment) |
| `RepoHost` | `bot.github.RepoClient` (installation) | `bot.github.RepoClient.for_token` (workflow token) |
| `TokenProvider` | a fresh installation token per call | the workflow's token |
| `Launcher` | `bot.jobqueue.QueueLauncher` (RQ) | `bot.action.RunNow` (this process; cancel = cancel the workflow run) |
| `GitRemote` | `bot.gitclone` | `bot.gitclone` |
| `Place` | `bot.settings.Settings` | `bot.settings.Settings.for_action(env)` |

The flow's helper modules `bot.planning` and `bot.execution` are handed ports (`planning.Clones`,
the run store, the place) and narrow callables, never the flow: they return what the flow does
next. `bot.bench` is still handed the flow; what it may use of it is `BenchFlow`, not the whole
`bot.flow.Flow`, which it cannot import (it imports it).

A `RunStore` write that changes anything but progress (`PROGRESS_FIELDS`) is durable when the
call returns: the next process (a worker, the next workflow run) reads it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Protocol

from jobs.api import RunLayout
from jobs.api import OperatorPolicy, RunStopped, RunSummary
from jobs.guard.mdsafe import Markdown, document

from .record import IssuePR, RunRecord
from .routing import CommentCommand

TokenProvider = Callable[[], str]      # asked right before a git clone/fetch/push; never stored
PROGRESS_FIELDS = frozenset({"phase", "phase_detail", "experiments_done", "experiments_total", "best", "cost_usd",
                             "status_comment_id"})


class Reply(Exception):
    """Stop handling the command and answer the issue with this text: `Markdown` only (made by
    `jobs.guard.mdsafe.md`), so a commenter's or a repository's words cannot reach it unescaped."""

    def __init__(self, body: Markdown) -> None:
        self.body = document([body])           # a plain str: TypeError
        super().__init__(self.body)


class StopFailed(RuntimeError):
    """A running run could not be asked to stop (its workflow run is gone, or no permission)."""


@dataclass
class Outcome:
    """How a command or a run ended. `step` says where a run stopped (prepare, approval, start,
    run, publish, done); `error` is what failed it, not raised: the face decides."""
    state: str
    run_id: str = ""
    step: str = ""
    message: str = ""
    pr_url: str = ""
    error: BaseException | None = None
    summary: RunSummary | RunStopped | None = None
    out: Path | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class RunStore(Protocol):
    def get_run(self, repo: str, run_id: str) -> RunRecord | None: ...

    def replace_run(self, record: RunRecord) -> None: ...

    def update_run(self, repo: str, run_id: str, **fields: Any) -> None: ...

    def locked(self, repo: str, run_id: str) -> ContextManager[None]: ...

    def status_locked(self, repo: str, run_id: str) -> ContextManager[None]: ...

    def set_current(self, repo: str, issue: int, run_id: str) -> None: ...

    def current_run(self, repo: str, issue: int) -> RunRecord | None: ...

    def request_cancel(self, repo: str, run_id: str) -> None: ...

    def clear_cancel(self, repo: str, run_id: str) -> None: ...

    def cancel_requested(self, repo: str, run_id: str) -> bool: ...

    def issue_pr(self, repo: str, issue: int) -> IssuePR | None: ...

    def set_issue_pr(self, repo: str, issue: int, pr: IssuePR) -> None: ...


class PullRequest(Protocol):
    number: int
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    head_repo: str              # owner/name of the repository the head branch lives in
    author: str                 # who opened it


class RepoHost(Protocol):
    """GitHub's REST API for one repository (bot.github lists the endpoints)."""
    owner: str
    repo: str
    bot_login: str              # the bot's own login: its comments and pull requests ('' if unknown)

    def react(self, comment_id: int, content: str = "eyes") -> None: ...

    def comment(self, issue: int, body: str) -> int: ...

    def upsert_comment(self, issue: int, marker: str, body: str, known_id: int | None = None) -> int: ...

    def permission(self, username: str) -> tuple[str, str]: ...

    def head_sha(self, branch: str) -> str: ...

    def file_text(self, path: str, ref: str) -> str | None: ...

    def create_draft_pr(self, title: str, head: str, base: str, body: str, head_repo: str = "") -> tuple[int, str]: ...

    def update_pr(self, number: int, title: str, body: str) -> str: ...

    def pull(self, number: int) -> PullRequest: ...


class GitRemote(Protocol):
    def checkout(self, url: str, dest: Path, commit: str, token: TokenProvider | None,
                 ref: str | None = None) -> Path: ...

    def fetch_ref(self, url: str, dest: Path, ref: str, token: TokenProvider | None) -> str: ...

    def diff(self, dest: Path, base: str, head: str) -> str: ...

    def push(self, url: str, dest: Path, local_ref: str, remote_branch: str, token: TokenProvider | None) -> None: ...


class Place(Protocol):
    """Where runs live and run (bot.settings.Settings is one)."""
    workdir: Path
    executor: str
    fork_owner: str
    operator: OperatorPolicy    # the operator's decisions, handed to every run (never the repository's)

    def clone_url(self, owner: str, repo: str) -> str: ...


class HeldLease(Protocol):
    """This process runs the run (`Launcher.hold`). `lost` turns true when that is no longer so (its
    heartbeat could not be renewed in time, or another worker took the run over): the run must then
    stop at its next step and write nothing more, the new holder owns the record."""
    holder: str

    @property
    def lost(self) -> bool: ...

    def release(self) -> None: ...


class Unleased:
    """The lease of a face whose process cannot be lost without the run ending with it (the Action:
    the workflow run is the run)."""
    holder = ""
    lost = False

    def release(self) -> None:
        pass


class Launcher(Protocol):
    """What makes an approved run happen, and stop."""

    interrupts_cancel: bool     # is a KeyboardInterrupt a cancel? (a CI runner's SIGINT is)

    def launch(self, store: RunStore, record: RunRecord) -> Outcome:
        """The run is approved and queued: the App enqueues it (the job's id goes on the record, in
        `store`); the Action runs it in this process once the command has been answered."""

    def withdraw(self, record: RunRecord) -> None:
        """Cancel: drop whatever of this run has not started (queued jobs)."""

    def stop(self, record: RunRecord) -> str:
        """Cancel: ask what runs this run to stop; returns what is being stopped, or raises StopFailed."""

    def launch_bench(self, command: CommentCommand) -> None:
        """`/autoresearch bench` on a bot PR (or a Reply saying this face does not bench)."""

    def running_fields(self) -> dict[str, Any]:
        """Record fields that say where the run runs (written when it starts)."""

    def hold(self, record: RunRecord) -> HeldLease | None:
        """Claim the run for this process (heartbeat included) when it starts or resumes; None
        when another process holds it."""


class BenchFlow(Protocol):
    """What `bot.bench` uses of the flow (`bot.flow.Flow` is one): one repository's host, its clones
    and where its runs live, who may spend, and the launcher (to queue a bench)."""

    @property
    def place(self) -> Place: ...

    @property
    def gh(self) -> RepoHost: ...

    @property
    def token(self) -> TokenProvider: ...

    @property
    def git(self) -> GitRemote: ...

    @property
    def launcher(self) -> Launcher: ...

    def layout(self, run_id: str) -> RunLayout: ...

    def is_approver(self, login: str, approvers: list[str]) -> bool: ...
