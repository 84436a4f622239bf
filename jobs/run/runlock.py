"""Which runs are alive, and where each run of a target keeps its files.

- `<out>/run.lock`: written when a run starts (pid, the process's start time, host), removed when it
  ends. A run is **alive** while that process exists on this host with the same start time (a
  reused pid is not the run). A lock from another host cannot be checked from here, so it counts
  as alive: `autoresearch clean` never touches what it cannot prove dead.
- `<git common dir>/autoresearch/runs/<run-id>`: the run's output folder, recorded in the target
  itself, so `autoresearch clean TARGET` finds every run of TARGET (and its worktrees, branches and
  scratch folders) wherever `--out` put it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from jobs.guard import gitops, procfs
from jobs.contract.errors import RunError

LOCK = "run.lock"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or None."""
    fields = procfs.stat_fields(pid)
    return fields[19] if fields else None


def read_lock(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(out) / LOCK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def holder_alive(lock: dict[str, Any] | None) -> bool:
    if not lock:
        return False
    if lock.get("host") != socket.gethostname():
        return True                     # cannot be checked from here: assume alive
    pid = lock.get("pid")
    return isinstance(pid, int) and _start_ticks(pid) is not None and _start_ticks(pid) == lock.get("start")


def alive(out: Path) -> bool:
    """Whether a process is running the run in `out` now."""
    return holder_alive(read_lock(out))


def check_free(out: Path) -> None:
    """RunError when another live process is running the run in `out` (the CLI asks before it starts)."""
    current = read_lock(out)
    if current and current.get("pid") != os.getpid() and holder_alive(current):
        raise RunError(f"{out}: run {current.get('run_id')} is already running (pid {current.get('pid')} on "
                       f"{current.get('host')}); fix: wait for it to end, or stop that process and re-run to resume")


def acquire(out: Path, run_id: str) -> None:
    """Mark `out` as being run by this process (a resume takes over a dead or handed-back run's lock)."""
    out = Path(out)
    tmp = out / f"{LOCK}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"run_id": run_id, "pid": os.getpid(), "start": _start_ticks(os.getpid()),
                               "host": socket.gethostname(), "since": time.time()}), encoding="utf-8")
    os.replace(tmp, out / LOCK)


def release(out: Path) -> None:
    lock = read_lock(out)
    if lock and lock.get("pid") == os.getpid() and lock.get("host") == socket.gethostname():
        (Path(out) / LOCK).unlink(missing_ok=True)


# -- the target's record of its runs ---------------------------------------------------------
def _registry(repo: Path) -> Path:
    common = Path(gitops.git(repo, "rev-parse", "--git-common-dir"))
    return (common if common.is_absolute() else Path(repo) / common) / "autoresearch" / "runs"


def register(repo: Path, run_id: str, out: Path) -> None:
    folder = _registry(repo)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / run_id).write_text(json.dumps({"out": str(Path(out).resolve())}), encoding="utf-8")


def registered(repo: Path) -> dict[str, Path]:
    """run id -> output folder, for every run recorded in `repo` (the folder may be gone)."""
    folder = _registry(repo)
    runs = {}
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            runs[entry.name] = Path(json.loads(entry.read_text(encoding="utf-8"))["out"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return runs


def forget(repo: Path, run_id: str) -> None:
    (_registry(repo) / run_id).unlink(missing_ok=True)
