"""What `jobs.measure.simulate.wrapped_command` prints after the workload's DIGEST lines, built by hand: per
process its cachegrind file's `events:`/`summary:` lines and Valgrind 3.19's closing summary in its
log, framed by the marker's `begin`/`end` lines (jobs/measure/cgoutput.py reads it)."""
from __future__ import annotations

from jobs.measure.cgoutput import EVENTS


def log_lines(pid: int, c: tuple[int, ...]) -> list[str]:
    """Valgrind 3.19's six total lines for the nine counts `c` (EVENTS order), as its log prints them."""
    ir, i1, lli, dr, d1r, lldr, dw, d1w, lldw = c
    return [f"=={pid}== I   refs:      {ir:,}", f"=={pid}== I1  misses:    {i1:,}", f"=={pid}== LLi misses:    {lli:,}",
            f"=={pid}== D   refs:      {dr + dw:,}  ({dr:,} rd   + {dw:,} wr)",
            f"=={pid}== D1  misses:    {d1r + d1w:,}  ({d1r:,} rd   + {d1w:,} wr)",
            f"=={pid}== LLd misses:    {lldr + lldw:,}  ({lldr:,} rd   + {lldw:,} wr)"]


def entries(marker: str, procs: dict[int, tuple[int, ...]]) -> list[str]:
    out = []
    for pid, c in procs.items():
        out += [f"{marker} file cg.{pid}", "events: " + " ".join(EVENTS) + " ", "summary: " + " ".join(map(str, c))]
    for pid, c in procs.items():
        out += [f"{marker} file vg.{pid}", *log_lines(pid, c)]
    return out


def listing(marker: str, procs: dict[int, tuple[int, ...]], extra: list[str] | None = None, n_extra: int = 0) -> str:
    """The framed listing of `procs` ({pid: counts}), `extra` lines (entries) added before its end."""
    body = entries(marker, procs) + list(extra or [])
    n = 2 * len(procs) + n_extra
    return "\n".join([f"{marker} begin", *body, f"{marker} end {n}"]) + "\n"
