"""The Action's `RunStore`: run records kept in one bot-authored comment on the issue.

A runner keeps nothing between workflow runs and has no Redis, so what the App keeps in Redis
lives here in a `<details>` block of JSON under the marker `<!-- autoresearch:action-state -->`:
`{"runs": {run_id: record fields}, "current": run_id, "pr": {...}, "cancel": [run_id, ...]}`.
Only a comment written by the bot's own login is read: anyone can post the marker, nobody else's
comment is trusted.

Writes: a change of anything but progress (`bot.ports.PROGRESS_FIELDS`) is written to GitHub
before the call returns; progress is written at most every `flush_interval` seconds (and by
`flush()`). `locked` is a no-op: the example workflow's `concurrency` group serialises runs of
one issue.
"""
from __future__ import annotations

import json
import re
import time
from contextlib import contextmanager
from typing import Any, Iterator

from .ports import PROGRESS_FIELDS
from .record import RunRecord, changes, from_fields, to_fields

STATE_MARKER = "<!-- autoresearch:action-state -->"
_STATE_JSON = re.compile(r"```json\n(.*?)\n```", re.S)


class IssueStateStore:
    def __init__(self, gh, issue: int, bot_login: str, flush_interval: float = 15.0):
        self.gh, self.issue, self.bot_login = gh, issue, bot_login.lower()
        self.flush_interval = flush_interval
        self.comment_id: int | None = None
        self.data: dict[str, Any] = {"runs": {}, "current": None, "pr": None, "cancel": []}
        self._last_flush = 0.0
        self.dirty = False
        self.load()

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        found = self.gh.own_comment(self.issue, STATE_MARKER, self.bot_login)
        if found is None:
            return
        self.comment_id, body = found
        m = _STATE_JSON.search(body)
        try:
            data = json.loads(m.group(1)) if m else None
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("runs"), dict):
            self.data.update(data)

    def flush(self, force: bool = True) -> None:
        if not force and (not self.dirty or time.monotonic() - self._last_flush < self.flush_interval):
            return
        body = (f"{STATE_MARKER}\n<details><summary>autoresearch state (kept by the GitHub Action; "
                f"do not edit)</summary>\n\n```json\n{json.dumps(self.data, sort_keys=True)}\n```\n</details>\n")
        self.comment_id = self.gh.upsert_comment(self.issue, STATE_MARKER, body, self.comment_id)
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

    def issue_pr(self, repo: str, issue: int) -> dict[str, Any] | None:
        return self.data.get("pr")

    def set_issue_pr(self, repo: str, issue: int, pr: dict[str, Any]) -> None:
        self.data["pr"] = pr
        self.flush()
