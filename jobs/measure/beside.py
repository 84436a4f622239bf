"""The next experiment's work beside this one (issue 43): what takes turns with nothing runs while this
experiment's builds, checks and simulations do, and is over before its first pair, which runs alone.
The local executor builds the next candidate there (jobs.executors.local); this module only starts,
times and ends that work, whatever it is."""
from __future__ import annotations

import threading
import time
from typing import Callable


class Beside:
    """Work run beside an experiment's build-side steps (its checks and simulations, which take turns
    with nothing, and a build of its candidate alone that leaves a core free) and over before its
    first pair (which must run alone): the local executor builds the next experiment's candidate
    there, and where there is time checks and simulates it too (jobs.executors.local,
    `jobs.measure.runner.checks_and_count_ahead`). Its errors are its own: the work records its
    outcome, and this experiment never fails of it."""

    def __init__(self, work: Callable[[threading.Event], None]):
        self.cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), name="beside", daemon=True)
        self._started = 0.0
        self._builds_over = 0.0

    def builds_over(self) -> None:
        """This experiment's own builds are over: its checks and simulation, which the work beside takes
        turns with, begin now. Starts the work if it has not begun with those builds."""
        self._builds_over = time.monotonic()
        self.start()

    def since_builds(self) -> float:
        """Seconds since this experiment's own builds ended (0 while they go on): how far into its checks
        and simulation the work beside has come."""
        return time.monotonic() - self._builds_over if self._builds_over else 0.0

    def _run(self, work: Callable[[threading.Event], None]) -> None:
        try:
            work(self.cancel)
        except Exception:           # the work's own record says what happened; nothing to raise here
            pass

    def start(self) -> None:
        if not self._started:
            self._started = time.monotonic()
            self._thread.start()

    def finish(self, cancel: bool = False, expected: float = 0.0) -> str:
        """Wait for the work, stopping it first with `cancel`. Otherwise it may go on for as long again
        as it has run so far, or for twice `expected` (what the like work took here: this experiment's
        own build), or a second, whichever is longest: a build that far along is likely near its end,
        and one that is not, or that waits on something, must not hold this experiment up. Past that
        it is stopped, and the reason is returned ('' when it ended on its own)."""
        if not self._started:
            return ""
        if cancel:
            self.cancel.set()
            self._thread.join()
            return ""
        ran = time.monotonic() - self._started
        self._thread.join(timeout=max(ran, 2 * expected, 1.0))
        if not self._thread.is_alive():
            return ""
        self.cancel.set()
        self._thread.join()
        return f"stopped after {time.monotonic() - self._started:.1f} s, not over when this experiment's pairs were due"
