"""Event routing: a GitHub event in, a `CommentCommand` or `Ignored` out. Pure: performs no I/O.

The one router of both faces. The App's webhook (`route`) acts on `issue_comment` only; the
Action's workflow (`route_workflow_event`) also starts a run from an `issues` event labeled with
its trigger label and from a manual `workflow_dispatch` (inputs `issue`, `command`). Every command
goes through the same grammar (`bot.commands`) and the same constructor (`_command`).

GitHub's payloads are read leniently, field by field, from the decoded JSON: githubkit's typed
webhook models reject about a third of GitHub's own example payloads, and no payload shape may
turn into a 5xx. Anything we do not act on is `Ignored` with a reason (answered 2xx).

Only comments with action `created` are acted on (never edits: an edited comment must not re-run
anything). Comments and events by bots, including this app, are ignored.
https://docs.github.com/en/webhooks/webhook-events-and-payloads#issue_comment
https://docs.github.com/en/actions/writing-workflows/choosing-when-your-workflow-runs/events-that-trigger-workflows
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .commands import GRAMMAR, Command, Invalid, parse_comment, parse_line

OPTIMIZE_LINE = "/autoresearch optimize cpu"      # what a trigger label means


def field(payload: Any, *path: str) -> Any:
    """payload[path[0]][path[1]]..., or None if any step is missing or not a mapping."""
    node = payload
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Ignored:
    reason: str


@dataclass(frozen=True)
class CommentCommand:
    """A command (or a malformed one) addressed to autoresearch on an issue or pull request. This
    object itself is the RQ job's argument: what was parsed here is what the worker acts on."""
    delivery: str
    installation_id: int           # 0 in a workflow (the Action authenticates with its token)
    owner: str
    repo: str
    default_branch: str
    issue_number: int
    is_pull_request: bool
    comment_id: int                # 0 when no comment carried it (a label, a dispatch)
    author: str
    command: Command | None        # None: malformed -> help reply saying `error`
    error: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def verb(self) -> str | None:
        return self.command.verb if self.command else None


def is_bot(login: str | None, user_type: str | None, bot_login: str) -> bool:
    return (user_type or "").lower() == "bot" or (login or "").endswith("[bot]") or \
        (bool(bot_login) and (login or "").lower() == bot_login.lower())


def _repository(payload: Any) -> dict[str, str] | None:
    owner = _str(field(payload, "repository", "owner", "login"))
    repo = _str(field(payload, "repository", "name"))
    if owner is None or repo is None:
        return None
    return {"owner": owner, "repo": repo,
            "default_branch": _str(field(payload, "repository", "default_branch")) or "main"}


def _command(parsed: Command | Invalid, *, is_pull_request: bool, **common: Any) -> CommentCommand:
    """The one place a parsed line becomes a CommentCommand (App and Action alike)."""
    if isinstance(parsed, Invalid):
        return CommentCommand(**common, is_pull_request=is_pull_request, command=None, error=parsed.reason)
    if GRAMMAR[parsed.verb].pull_requests_only and not is_pull_request:
        return CommentCommand(**common, is_pull_request=is_pull_request, command=None,
                              error=f"`{parsed.verb}` works on an autoresearch pull request, not on an issue")
    return CommentCommand(**common, is_pull_request=is_pull_request, command=parsed)


def route(event: str, payload: Any, *, delivery: str = "", bot_login: str = "",
          installation_required: bool = True) -> CommentCommand | Ignored:
    """The App's webhook: `issue_comment` created by a person, carrying a command line. A workflow's
    payload has no App installation (`installation_required=False`, the id is then 0)."""
    if event != "issue_comment":
        return Ignored(f"event {event!r} is not handled")
    if field(payload, "action") != "created":
        return Ignored(f"issue_comment action {field(payload, 'action')!r} is not handled")
    login = _str(field(payload, "comment", "user", "login"))
    if login is None:
        return Ignored("comment without an author")
    if is_bot(login, _str(field(payload, "comment", "user", "type")), bot_login):
        return Ignored(f"comment by bot {login}")
    body = field(payload, "comment", "body")
    parsed = parse_comment(body if isinstance(body, str) else "")
    if parsed is None:
        return Ignored("no /autoresearch command")
    installation = _int(field(payload, "installation", "id"))
    if installation is None and not installation_required:
        installation = 0
    repository = _repository(payload)
    number = _int(field(payload, "issue", "number"))
    comment_id = _int(field(payload, "comment", "id"))
    if None in (installation, repository, number, comment_id):
        return Ignored("payload lacks installation, repository, issue or comment fields")
    return _command(parsed, is_pull_request=isinstance(field(payload, "issue", "pull_request"), dict),
                    delivery=delivery, installation_id=installation, issue_number=number, comment_id=comment_id,
                    author=login, **repository)


def route_workflow_event(event: str, payload: Any, *, bot_login: str, label: str,
                         delivery: str = "") -> CommentCommand | Ignored:
    """The Action's events: a comment (as `route`), an issue labeled `label` (means
    `optimize cpu`), or a manual dispatch with inputs `issue` and `command` (one line)."""
    if not isinstance(payload, dict):
        return Ignored("the event payload is not a JSON object")
    if event == "issue_comment":
        return route(event, payload, delivery=delivery, bot_login=bot_login, installation_required=False)
    sender = field(payload, "sender", "login")
    if is_bot(sender, field(payload, "sender", "type"), bot_login):
        return Ignored(f"event sent by bot {sender}")
    if event == "issues":
        if field(payload, "action") != "labeled":
            return Ignored(f"issues action {field(payload, 'action')!r} is not handled")
        if field(payload, "label", "name") != label:
            return Ignored(f"label {field(payload, 'label', 'name')!r} is not the trigger label {label!r}")
        if isinstance(field(payload, "issue", "pull_request"), dict):
            return Ignored("labels on pull requests do not start runs")
        line, issue = OPTIMIZE_LINE, field(payload, "issue", "number")
    elif event == "workflow_dispatch":
        inputs = field(payload, "inputs")
        inputs = inputs if isinstance(inputs, dict) else {}
        command = inputs.get("command") or "optimize cpu"
        if not isinstance(command, str) or "\n" in command:
            return Ignored("input `command` must be one line")
        line, issue = f"/autoresearch {command.strip()}", inputs.get("issue")
    else:
        return Ignored(f"event {event!r} is not handled")
    repository = _repository(payload)
    if repository is None:
        return Ignored("payload lacks the repository")
    try:
        number = int(issue)
    except (TypeError, ValueError):
        return Ignored(f"no issue number given ({issue!r})")
    if number <= 0:
        return Ignored(f"no issue number given ({issue!r})")
    if not isinstance(sender, str) or not sender:
        return Ignored("no actor")
    parsed = parse_line(line)
    if isinstance(parsed, Command) and GRAMMAR[parsed.verb].pull_requests_only:
        parsed = Invalid(line, f"`{parsed.verb}` is answered on a pull-request comment")
    return _command(parsed, is_pull_request=False, delivery=delivery, installation_id=0, issue_number=number,
                    comment_id=0, author=sender, **repository)
