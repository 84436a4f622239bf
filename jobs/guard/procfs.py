"""Reading a process's /proc/<pid>/stat: one parser for the run lock and the process-tree reaper."""
from __future__ import annotations


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None when the process is gone.
    The name is in parentheses and may hold spaces and ')', so split after its last ')'. Index 0 is
    the state, 1 the parent pid, 19 the start time in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()
    except OSError:
        return None
