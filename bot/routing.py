"""Webhook event routing. Pure: performs no I/O of its own.

GitHub's payloads are read leniently, field by field, from the decoded JSON: githubkit's typed
webhook models reject about a third of GitHub's own example payloads, and no payload shape may
turn into a 5xx. Anything we do not act on is `Ignored` with a reason (answered 2xx).

Only `issue_comment` with action `created` is acted on (never edits: an edited comment must not
re-run anything). Comments by bots, including this app, are ignored.
https://docs.github.com/en/webhooks/webhook-events-and-payloads#issue_comment
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .commands import Command, Invalid, parse_comment


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
    """A command (or malformed command) from a new issue or pull-request comment."""
    delivery: str
    installation_id: int
    owner: str
    repo: str
    default_branch: str
    issue_number: int
    is_pull_request: bool
    comment_id: int
    author: str
    verb: str | None               # None: malformed -> help reply
    args: dict                     # Command fields
    error: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CommentCommand":
        return cls(**d)

    @property
    def command(self) -> Command | None:
        if self.verb is None:
            return None
        a = dict(self.args)
        if a.get("platforms") is not None:
            a["platforms"] = tuple(a["platforms"])
        return Command(**a)


def is_bot(login: str | None, user_type: str | None, bot_login: str) -> bool:
    return (user_type or "").lower() == "bot" or (login or "").endswith("[bot]") or \
        (bool(bot_login) and (login or "").lower() == bot_login.lower())


def route(event: str, payload: Any, *, delivery: str = "", bot_login: str = "") -> CommentCommand | Ignored:
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
    owner = _str(field(payload, "repository", "owner", "login"))
    repo = _str(field(payload, "repository", "name"))
    number = _int(field(payload, "issue", "number"))
    comment_id = _int(field(payload, "comment", "id"))
    if None in (installation, owner, repo, number, comment_id):
        return Ignored("payload lacks installation, repository, issue or comment fields")
    is_pr = isinstance(field(payload, "issue", "pull_request"), dict)
    common = dict(delivery=delivery, installation_id=installation, owner=owner, repo=repo,
                  default_branch=_str(field(payload, "repository", "default_branch")) or "main",
                  issue_number=number, is_pull_request=is_pr, comment_id=comment_id, author=login)
    if isinstance(parsed, Invalid):
        return CommentCommand(**common, verb=None, args={}, error=parsed.reason)
    if parsed.verb == "bench" and not is_pr:
        return CommentCommand(**common, verb=None, args={},
                              error="`bench` works on an autoresearch pull request, not on an issue")
    args = asdict(parsed)
    if args["platforms"] is not None:
        args["platforms"] = list(args["platforms"])
    return CommentCommand(**common, verb=parsed.verb, args=args)
