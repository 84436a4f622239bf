"""The run's processes: while a run goes, the calling process is a child subreaper, so even a
daemon that target code detached (`setsid`, double fork; possible only without the sandbox, whose
init already kills its stragglers) stays in this process's tree; at the end every process of that
tree that the run started is killed and reaped (`ended_processes`, used by `jobs.api.start`).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from typing import Iterator

from jobs.guard import procfs
from jobs.contract.errors import RunError

PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37      # <linux/prctl.h>
END_WAIT_S = 10.0                                           # for a process in uninterruptible sleep


class ProcessesSurvived(RunError):
    """Processes the run started could not be ended; nothing may be published next to them."""


def _subreaper(on: bool | None = None) -> bool:
    """This process's child-subreaper flag (set it when `on` is given); False where unsupported."""
    libc = ctypes.CDLL(None, use_errno=True)
    if on is not None:
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    flag = ctypes.c_int(0)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and bool(flag.value)


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, start time, state) of every process on this machine (from /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = procfs.stat_fields(entry)
        if fields is None:
            continue                                                # gone meanwhile
        table[int(entry)] = (int(fields[1]), fields[19], fields[0])
    return table


def descendants(root: int, skip: frozenset[tuple[int, str]] = frozenset()) -> dict[int, tuple[int, str, str]]:
    """The processes below `root`, leaving out every (pid, start time) in `skip` and what lies below it."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if (pid, table[pid][1]) in skip:
            continue
        found[pid] = table[pid]
        todo += children.get(pid, ())
    return found


def end_processes(skip: frozenset[tuple[int, str]] = frozenset(), wait_s: float = END_WAIT_S) -> list[int]:
    """SIGKILL every descendant of this process but those in `skip` (and theirs), reap them, and
    return the pids still alive after `wait_s` (none, unless one cannot die yet)."""
    me, deadline = os.getpid(), time.monotonic() + wait_s
    while True:
        found = descendants(me, skip)
        for pid, (ppid, _, state) in found.items():
            if state != "Z":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if ppid == me:                      # ours (orphans were re-parented to us): reap it
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not found or time.monotonic() > deadline:
            return sorted(pid for pid, (_, _, state) in found.items() if state != "Z")
        time.sleep(0.02)


@contextlib.contextmanager
def ended_processes() -> Iterator[None]:
    """While the block runs, orphans of what it starts are re-parented to this process (child
    subreaper) instead of init; when it ends, every process it started is killed and reaped.
    Raises ProcessesSurvived when one could not be ended (and the block itself did not raise)."""
    me = os.getpid()
    before = frozenset((pid, start) for pid, (_, start, _) in descendants(me).items())
    was = _subreaper()
    _subreaper(True)
    try:
        yield
    finally:
        try:
            left = end_processes(before)
        finally:
            if not was:
                _subreaper(False)
    if left:
        raise ProcessesSurvived(f"processes the run started are still alive after SIGKILL ({', '.join(map(str, left))}); "
                                "nothing is published while they are")
