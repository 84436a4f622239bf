"""Redis adapter: delivery dedupe, and the App's `RunStore` (run records, cancel flags, an issue's PR).

Keys (all under `ar:`):
- `ar:delivery:<X-GitHub-Delivery>`   SET NX with TTL: the first delivery wins, redeliveries are no-ops
- `ar:run:<owner/repo>:<run_id>`     hash, one JSON value per `RunRecord` field (see bot.record)
- `ar:lock:<owner/repo>:<run_id>`    a Redis lock serialising the run's state transitions
- `ar:issue:<owner/repo>#<n>`        the issue's current run id
- `ar:cancel:<owner/repo>:<run_id>`  set by `cancel`; the worker's `should_stop` reads it
- `ar:pr:<owner/repo>#<n>`           JSON {number, url, branch}: reruns update this PR

Every write is durable when the call returns (a Redis command), as `bot.ports.RunStore` asks.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

import redis

from .record import RunRecord, changes, from_fields, to_fields


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30)


class Store:
    def __init__(self, r: redis.Redis):
        self.r = r

    # -- deliveries --------------------------------------------------------------------------
    def first_delivery(self, delivery: str, ttl: int) -> bool:
        return bool(self.r.set(f"ar:delivery:{delivery}", "1", nx=True, ex=ttl))

    def forget_delivery(self, delivery: str) -> None:
        self.r.delete(f"ar:delivery:{delivery}")

    # -- runs ------------------------------------------------------------------------------------
    @staticmethod
    def _run_key(repo: str, run_id: str) -> str:
        return f"ar:run:{repo}:{run_id}"

    def get_run(self, repo: str, run_id: str) -> RunRecord | None:
        raw = self.r.hgetall(self._run_key(repo, run_id))
        return from_fields({k.decode(): json.loads(v) for k, v in raw.items()}) if raw else None

    def update_run(self, repo: str, run_id: str, **fields: Any) -> None:
        if fields:
            self.r.hset(self._run_key(repo, run_id), mapping={k: json.dumps(v) for k, v in changes(**fields).items()})

    def replace_run(self, record: RunRecord) -> None:
        key = self._run_key(record.repo, record.run_id)
        pipe = self.r.pipeline()
        pipe.delete(key)
        pipe.hset(key, mapping={k: json.dumps(v) for k, v in to_fields(record).items()})
        pipe.execute()

    @contextmanager
    def locked(self, repo: str, run_id: str) -> Iterator[None]:
        """Serialises state transitions of one run across web, command and run jobs."""
        with self.r.lock(f"ar:lock:{repo}:{run_id}", timeout=60, blocking_timeout=30):
            yield

    def set_current(self, repo: str, issue: int, run_id: str) -> None:
        self.r.set(f"ar:issue:{repo}#{issue}", run_id)

    def current_run(self, repo: str, issue: int) -> RunRecord | None:
        run_id = self.r.get(f"ar:issue:{repo}#{issue}")
        return self.get_run(repo, run_id.decode()) if run_id else None

    # -- cancel ----------------------------------------------------------------------------------
    def request_cancel(self, repo: str, run_id: str) -> None:
        self.r.set(f"ar:cancel:{repo}:{run_id}", "1", ex=30 * 24 * 3600)

    def clear_cancel(self, repo: str, run_id: str) -> None:
        self.r.delete(f"ar:cancel:{repo}:{run_id}")

    def cancel_requested(self, repo: str, run_id: str) -> bool:
        return bool(self.r.exists(f"ar:cancel:{repo}:{run_id}"))

    # -- pull requests ---------------------------------------------------------------------------
    def issue_pr(self, repo: str, issue: int) -> dict[str, Any] | None:
        raw = self.r.get(f"ar:pr:{repo}#{issue}")
        return json.loads(raw) if raw else None

    def set_issue_pr(self, repo: str, issue: int, pr: dict[str, Any]) -> None:
        self.r.set(f"ar:pr:{repo}#{issue}", json.dumps(pr))
