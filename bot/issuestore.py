"""The Action's `RunStore`: run records kept in one bot-authored comment on the issue.

A runner keeps nothing between workflow runs and has no Redis, so what the App keeps in Redis
lives here in a `<details>` block of JSON under the marker `<!-- autoresearch:action-state -->`:
`{"runs": {run_id: record fields}, "current": run_id, "pr": {...}, "cancel": [run_id, ...]}`.

A state comment is trusted only when both hold (issue 20): it was written by the bot's own login
(`github-actions[bot]`: anyone can post the marker), and it carries a valid HMAC-SHA256 of its
JSON, the repository and the issue (`<!-- autoresearch:state-mac HEX -->`), keyed with the
workflow's `state-key` (a repository secret, `AUTORESEARCH_STATE_KEY`). The author alone is not
enough: every workflow of the repository comments as `github-actions[bot]`, and one that echoes
what a user wrote (a greeting bot quoting the issue) would otherwise forge the state. The per-job
`GITHUB_TOKEN` cannot be the key (it changes every run); the secret is the one stable thing only
the repository's workflows hold. Binding the repository and issue stops a state being replayed on
another issue. A comment that fails either check is ignored and never edited; the store then
writes its own new comment.

Writes: a change of anything but progress (`bot.ports.PROGRESS_FIELDS`) is written to GitHub
before the call returns; progress is written at most every `flush_interval` seconds (and by
`flush()`). `locked` is a no-op: the example workflow's `concurrency` group serialises runs of
one issue.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import time
from contextlib import contextmanager
from typing import Any, Iterator

from .ports import PROGRESS_FIELDS
from .record import IssuePR, RunRecord, changes, from_fields, to_fields

STATE_MARKER = "<!-- autoresearch:action-state -->"
_STATE_JSON = re.compile(r"```json\n(.*?)\n```", re.S)
_STATE_MAC = re.compile(r"<!-- autoresearch:state-mac ([0-9a-f]{64}) -->")
MIN_KEY_CHARS = 16


class StateKeyError(ValueError):
    """No usable key to sign and check the state comment."""


def state_mac(key: str, repo: str, issue: int, state_json: str) -> str:
    """HMAC-SHA256 of the state's JSON text, bound to its repository and issue."""
    msg = f"autoresearch-action-state-v1\n{repo.lower()}\n{issue}\n{state_json}".encode()
    return hmac.new(key.encode(), msg, hashlib.sha256).hexdigest()


def state_body(key: str, repo: str, issue: int, data: dict) -> str:
    text = json.dumps(data, sort_keys=True)
    return (f"{STATE_MARKER}\n<!-- autoresearch:state-mac {state_mac(key, repo, issue, text)} -->\n"
            f"<details><summary>autoresearch state (kept by the GitHub Action; do not edit)</summary>\n\n"
            f"```json\n{text}\n```\n</details>\n")


def verified_state(key: str, repo: str, issue: int, body: str) -> dict | None:
    """The state a comment body carries, if its MAC is valid for this repository and issue."""
    m, mac = _STATE_JSON.search(body), _STATE_MAC.search(body)
    if not m or not mac or not hmac.compare_digest(mac.group(1), state_mac(key, repo, issue, m.group(1))):
        return None
    try:
        data = json.loads(m.group(1))
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("runs"), dict) else None


class IssueStateStore:
    def __init__(self, gh, issue: int, bot_login: str, flush_interval: float = 15.0, *, key: str, repo: str):
        if len(key or "") < MIN_KEY_CHARS:
            raise StateKeyError(
                "the Action's state comment must be signed, and no state key is set (or it is shorter than "
                f"{MIN_KEY_CHARS} characters): add a repository secret AUTORESEARCH_STATE_KEY (a long random "
                "string, e.g. `openssl rand -hex 32`) and pass it to the action: "
                "`with: state-key: ${{ secrets.AUTORESEARCH_STATE_KEY }}`")
        self.gh, self.issue, self.bot_login = gh, issue, bot_login.lower()
        self.key, self.repo_name = key, repo
        self.flush_interval = flush_interval
        self.comment_id: int | None = None
        self.data: dict[str, Any] = {"runs": {}, "current": None, "pr": None, "cancel": []}
        self._last_flush = -math.inf     # monotonic time starts near 0 at boot (an Actions runner is new)
        self.dirty = False
        self.load()

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        """The first of the bot's own state comments whose MAC holds; every other is ignored."""
        for comment_id, body in self.gh.own_comments(self.issue, STATE_MARKER, self.bot_login):
            data = verified_state(self.key, self.repo_name, self.issue, body)
            if data is not None:
                self.comment_id = comment_id
                self.data.update(data)
                return

    def flush(self, force: bool = True) -> None:
        if not force and (not self.dirty or time.monotonic() - self._last_flush < self.flush_interval):
            return
        body = state_body(self.key, self.repo_name, self.issue, self.data)
        if self.comment_id is None:             # never a search by marker: that could find a forgery
            self.comment_id = self.gh.comment(self.issue, body)
        else:
            self.gh.edit_comment(self.comment_id, body)
        self._last_flush, self.dirty = time.monotonic(), False

    # -- RunStore ------------------------------------------------------------------------------
    def get_run(self, repo: str, run_id: str) -> RunRecord | None:
        data = self.data["runs"].get(run_id)
        return from_fields(json.loads(json.dumps(data))) if data else None

    def update_run(self, repo: str, run_id: str, **fields: Any) -> None:
        if not fields:
            return
        self.data["runs"].setdefault(run_id, {"run_id": run_id}).update(json.loads(json.dumps(changes(**fields))))
        self.dirty = True
        self.flush(force=not set(fields) <= PROGRESS_FIELDS)

    def replace_run(self, record: RunRecord) -> None:
        self.data["runs"][record.run_id] = json.loads(json.dumps(to_fields(record)))
        self.flush()

    @contextmanager
    def locked(self, repo: str, run_id: str) -> Iterator[None]:
        yield

    status_locked = locked             # one process per run in an Action: nothing to serialise

    def set_current(self, repo: str, issue: int, run_id: str) -> None:
        self.data["current"] = run_id
        self.flush()

    def current_run(self, repo: str, issue: int) -> RunRecord | None:
        return self.get_run(repo, self.data["current"]) if self.data.get("current") else None

    def request_cancel(self, repo: str, run_id: str) -> None:
        if run_id not in self.data["cancel"]:
            self.data["cancel"].append(run_id)
        self.flush()

    def clear_cancel(self, repo: str, run_id: str) -> None:
        if run_id in self.data["cancel"]:
            self.data["cancel"].remove(run_id)
            self.flush()

    def cancel_requested(self, repo: str, run_id: str) -> bool:
        return run_id in self.data["cancel"]

    def issue_pr(self, repo: str, issue: int) -> IssuePR | None:
        return IssuePR.from_dict(self.data.get("pr"))

    def set_issue_pr(self, repo: str, issue: int, pr: IssuePR) -> None:
        self.data["pr"] = pr.to_dict()
        self.flush()
