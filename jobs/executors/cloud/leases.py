"""Which runs are alive, for the reaper: one small lease file per run, refreshed by a heartbeat.

A run that holds cloud executors writes `<lease dir>/<run>.json` (run id, cluster name prefix,
output folder, host, pid, its clusters now up, `updated` time) and rewrites it every
`HEARTBEAT_S` seconds while it lives; closing its executors removes it.

A run is **live** when its lease was updated within `ttl` seconds (default 10 minutes) and its
`state.json` (next to the lease's `out`) is not in phase `done` or `cancelled`. A killed worker
stops heartbeating, so its lease goes stale and `autoresearch reap` downs its clusters.

The lease folder is `$AUTORESEARCH_LEASE_DIR`, else `~/.autoresearch/leases`. Runs started on
other machines are only seen if that folder is shared with them (a mounted volume): otherwise run
the reaper where the runs run, or give it a longer `--ttl`.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from jobs.contract.results import FINAL_PHASES

LEASE_DIR_ENV = "AUTORESEARCH_LEASE_DIR"
HEARTBEAT_S = 60.0
DEFAULT_TTL_S = 600.0
FINISHED_PHASES = FINAL_PHASES                 # a lease of a run in one of these phases is dead


def lease_dir(path: Path | str | None = None) -> Path:
    if path:
        return Path(path)
    env = os.environ.get(LEASE_DIR_ENV)
    return Path(env) if env else Path.home() / ".autoresearch" / "leases"


class VmLease:
    """The lease of one run, shared by its executors (acquire/release count them)."""

    def __init__(self, run_id: str, prefix: str, out: Path | None, directory: Path | str | None = None,
                 heartbeat_s: float = HEARTBEAT_S):
        self.run_id, self.prefix, self.out = run_id, prefix, out
        self.path = lease_dir(directory) / f"{prefix.rstrip('-')}.json"
        self.heartbeat_s = heartbeat_s
        self.clusters: set[str] = set()
        self._users = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._thread is None:
                self._stop.clear()
                self._write_locked()
                self._thread = threading.Thread(target=self._beat, name=f"lease-{self.run_id}", daemon=True)
                self._thread.start()

    def release(self) -> None:
        """Drop one user; the last one stops the heartbeat and removes the lease file."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._stop.set()
        thread.join(timeout=5)
        with self._lock:
            if not self.clusters:
                self.path.unlink(missing_ok=True)
            else:   # clusters whose teardown failed stay listed, and the lease goes stale -> reaper
                self._write_locked()

    def add(self, cluster: str) -> None:
        with self._lock:
            self.clusters.add(cluster)
            self._write_locked()

    def remove(self, cluster: str) -> None:
        with self._lock:
            self.clusters.discard(cluster)
            self._write_locked()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                self._write_locked()

    def _write_locked(self) -> None:
        data = {"run_id": self.run_id, "prefix": self.prefix, "out": str(self.out) if self.out else None,
                "host": socket.gethostname(), "pid": os.getpid(), "clusters": sorted(self.clusters),
                "updated": time.time()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        os.replace(tmp, self.path)


def read_leases(directory: Path | str | None = None) -> list[dict[str, Any]]:
    out = []
    folder = lease_dir(directory)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue          # a lease being replaced or garbage: it protects nothing
        if isinstance(data, dict) and isinstance(data.get("prefix"), str):
            data["path"] = str(path)
            out.append(data)
    return out


def run_phase(out: str | None) -> str | None:
    if not out:
        return None
    from jobs.contract.ledger import LedgerError
    from jobs.contract.runstate import RunState
    try:
        return RunState.load(Path(out)).phase
    except (OSError, ValueError, TypeError, LedgerError):   # unreadable: the lease protects nothing it can prove
        return None


def is_live(lease: dict[str, Any], *, ttl_s: float = DEFAULT_TTL_S, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    fresh = now - float(lease.get("updated") or 0) <= ttl_s
    return fresh and run_phase(lease.get("out")) not in FINISHED_PHASES


def live_prefixes(directory: Path | str | None = None, *, ttl_s: float = DEFAULT_TTL_S,
                  now: float | None = None) -> list[str]:
    return [lease["prefix"] for lease in read_leases(directory) if is_live(lease, ttl_s=ttl_s, now=now)]
