"""Steps that take turns with nothing, run at once: the builds of one experiment in separate folders.

A build is not measured, so it may share the machine (only the wall-clock pairs must run alone,
jobs.measure.runner). The two builds an experiment makes before its first pair are in folders of
their own (the A/A's two builds of the base; each arm's build in the other arm's folder,
jobs.measure.locations), so on a host with a second core they take the time of the longer one
instead of the sum (issue 43: builds took three quarters of each experiment).

Every step runs to its end even when another fails: the caller's record of what was built must be
exact (a baseline build stopped half way would be taken for a built one), and a build that passed
is still of use (the baseline's build kept for the next experiment). The first failure in the
steps' order is raised once all are over, as it would have been had they run one after another.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_together(steps: Sequence[Callable[[threading.Event], T]], cores: int | None = None) -> list[T]:
    """Each step's result, in order; the steps run at once up to `cores` (default: the cores this
    process may use; one after another, each to its end, where that is one). A step gets an event
    that is set only when this call is interrupted (a cancel or Ctrl-C in the caller's thread): it
    should stop then, as at its time limit. The first exception, in the steps' order, is raised
    after all are over."""
    stop = threading.Event()
    cores = usable_cores() if cores is None else cores
    with ThreadPoolExecutor(max_workers=max(1, min(cores, len(steps))), thread_name_prefix="together") as pool:
        futures = [pool.submit(step, stop) for step in steps]
        try:
            wait(futures)
        except BaseException:
            stop.set()          # the steps under way stop at this, those not begun never start
            for future in futures:
                future.cancel()
            raise
    return [future.result() for future in futures]
