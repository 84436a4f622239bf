"""Redis adapter: delivery dedupe, and the App's `RunStore` (run records, cancel flags, an issue's PR,
which runs are running and who holds them).

Keys (all under `ar:`):
- `ar:delivery:<X-GitHub-Delivery>`   SET NX with TTL: the first delivery wins, redeliveries are no-ops
- `ar:comment:<comment id>:<action>`  the same for the comment a command came in (bot.intake)
- `ar:run:<owner/repo>:<run_id>`     hash, one JSON value per `RunRecord` field (see bot.record)
- `ar:lock:<owner/repo>:<run_id>`    a Redis lock serialising the run's state transitions
- `ar:issue:<owner/repo>#<n>`        the issue's current run id
- `ar:cancel:<owner/repo>:<run_id>`  set by `cancel`; the worker's `should_stop` reads it
- `ar:pr:<owner/repo>#<n>`           JSON {number, url, branch}: reruns update this PR
- `ar:running`                       set of `<owner/repo> <run_id>` whose record is `running` (kept by
                                     every write of a record's state): what the worker's sweeper checks
- `ar:lease:<owner/repo>:<run_id>`   who runs it now (`host:pid:nonce`), with a TTL its heartbeat renews;
                                     a `running` run without one has lost its worker

Every write is durable when the call returns (a Redis command), as `bot.ports.RunStore` asks.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

import redis

from .approval import RUNNING
from .record import IssuePR, RunRecord, changes, from_fields, to_fields


def delivery_key(delivery: str) -> str:
    """One key per GitHub delivery, for ignored (here) and queued (bot.intake) deliveries alike."""
    return f"ar:delivery:{delivery}"


# Compare-and-set on the lease: only its holder renews or releases it.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
STATUS_LOCK_S = 15          # how long a status edit may hold its lock (one PATCH; see status_locked)


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30)


class Store:
    def __init__(self, r: redis.Redis):
        self.r = r

    # -- deliveries --------------------------------------------------------------------------
    def first_delivery(self, delivery: str, ttl: int) -> bool:
        return bool(self.r.set(delivery_key(delivery), "1", nx=True, ex=ttl))

    # -- runs ------------------------------------------------------------------------------------
    @staticmethod
    def _run_key(repo: str, run_id: str) -> str:
        return f"ar:run:{repo}:{run_id}"

    def get_run(self, repo: str, run_id: str) -> RunRecord | None:
        raw = self.r.hgetall(self._run_key(repo, run_id))
        return from_fields({k.decode(): json.loads(v) for k, v in raw.items()}) if raw else None

    def update_run(self, repo: str, run_id: str, **fields: Any) -> None:
        if fields:
            pipe = self.r.pipeline()
            pipe.hset(self._run_key(repo, run_id), mapping={k: json.dumps(v) for k, v in changes(**fields).items()})
            if "state" in fields:
                self._index(pipe, repo, run_id, fields["state"])
            pipe.execute()

    def replace_run(self, record: RunRecord) -> None:
        key = self._run_key(record.repo, record.run_id)
        pipe = self.r.pipeline()
        pipe.delete(key)
        pipe.hset(key, mapping={k: json.dumps(v) for k, v in to_fields(record).items()})
        self._index(pipe, record.repo, record.run_id, record.state)
        pipe.execute()

    @staticmethod
    def _index(pipe: Any, repo: str, run_id: str, state: str) -> None:
        (pipe.sadd if state == RUNNING else pipe.srem)("ar:running", f"{repo} {run_id}")

    def running_runs(self) -> list[tuple[str, str]]:
        """(repo, run_id) of every run whose record says it is running."""
        return sorted(tuple(m.decode().split(" ", 1)) for m in self.r.smembers("ar:running"))

    def forget_running(self, repo: str, run_id: str) -> None:
        self.r.srem("ar:running", f"{repo} {run_id}")

    def index_running_runs(self) -> int:
        """Rebuild the index from the records themselves (records written before it existed, or by
        hand); returns how many running runs it holds."""
        for key in self.r.scan_iter(match="ar:run:*", count=500):
            raw = self.r.hget(key, "state")
            if raw is not None and json.loads(raw) == RUNNING:
                repo, _, run_id = key.decode()[len("ar:run:"):].rpartition(":")
                self.r.sadd("ar:running", f"{repo} {run_id}")
        return int(self.r.scard("ar:running"))

    # -- leases (who runs a run now) --------------------------------------------------------------
    @staticmethod
    def _lease_key(repo: str, run_id: str) -> str:
        return f"ar:lease:{repo}:{run_id}"

    def take_lease(self, repo: str, run_id: str, holder: str, ttl_s: float) -> bool:
        return bool(self.r.set(self._lease_key(repo, run_id), holder, nx=True, px=int(ttl_s * 1000)))

    def renew_lease(self, repo: str, run_id: str, holder: str, ttl_s: float) -> bool:
        """Extend the lease if `holder` still holds it; False when it does not (expired, taken over)."""
        return bool(self.r.eval(_RENEW, 1, self._lease_key(repo, run_id), holder, int(ttl_s * 1000)))

    def release_lease(self, repo: str, run_id: str, holder: str) -> None:
        self.r.eval(_RELEASE, 1, self._lease_key(repo, run_id), holder)

    def lease_holder(self, repo: str, run_id: str) -> str | None:
        raw = self.r.get(self._lease_key(repo, run_id))
        return raw.decode() if raw else None

    @contextmanager
    def locked(self, repo: str, run_id: str) -> Iterator[None]:
        """Serialises state transitions of one run across web, command and run jobs."""
        with self.r.lock(f"ar:lock:{repo}:{run_id}", timeout=60, blocking_timeout=30):
            yield

    @contextmanager
    def status_locked(self, repo: str, run_id: str) -> Iterator[None]:
        """Serialises edits of one run's status comment. Short-lived: a worker killed mid-edit (it
        edits after every step, so a SIGKILL lands in one often) held the run lock's 60 s, and the
        resumed run's first edit waited it out. An edit slower than this loses only the ordering."""
        with self.r.lock(f"ar:lock:{repo}:{run_id}:status", timeout=STATUS_LOCK_S,
                         blocking_timeout=STATUS_LOCK_S + 5):
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
    def issue_pr(self, repo: str, issue: int) -> IssuePR | None:
        raw = self.r.get(f"ar:pr:{repo}#{issue}")
        try:
            return IssuePR.from_dict(json.loads(raw)) if raw else None
        except ValueError:                     # not JSON: as if none (a new PR rather than a wrong one)
            return None

    def set_issue_pr(self, repo: str, issue: int, pr: IssuePR) -> None:
        self.r.set(f"ar:pr:{repo}#{issue}", json.dumps(pr.to_dict()))
