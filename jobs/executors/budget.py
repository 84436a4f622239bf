"""The run's USD budget as every billed executor of one run sees it: a hard cap, reserved before launch.

A machine executor reserves an attempt's worst case (what it costs if every step runs to its time
limit) before it starts a machine, settles the real cost when the machine is gone, and reports
what it hands back to the pipeline in a RawResult. A reservation that does not fit under the limit,
together with everything spent and everything in flight on every platform, is refused: that
attempt is not started. Executors of different kinds may share one `SharedBudget`.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from jobs.contract import ledger


class SharedBudget:
    """USD spent and reserved by every executor of one run; reservations are atomic.

    `run_spent()` (when given) reads the run's own total from its state.json: previous sessions,
    machine costs already returned to the pipeline and model spend. Machine time settled here but
    not yet returned in a RawResult (earlier attempts of an experiment still retrying) is added to it."""

    def __init__(self, limit_usd: float, spent_usd: float = 0.0, run_spent: Callable[[], float | None] | None = None):
        self.limit, self.spent = float(limit_usd), float(spent_usd)
        self.reported = 0.0
        self.reserved: dict[str, float] = {}
        self.run_spent = run_spent or (lambda: None)
        self._lock = threading.Lock()

    def in_flight(self) -> float:
        with self._lock:
            return sum(self.reserved.values())

    def total_spent(self) -> float:
        run = self.run_spent()
        return self.spent if run is None else run + max(0.0, self.spent - self.reported)

    def reserve(self, key: str, usd: float) -> str:
        """'' when `usd` more fits under the limit (and is now reserved), else why not."""
        with self._lock:
            spent, held = self.total_spent(), sum(self.reserved.values())
            if spent + held + usd > self.limit + 1e-9:
                return (f"budget: {spent:.2f} USD spent + {held:.2f} USD in flight + {usd:.2f} USD "
                        f"worst case for this VM would exceed {self.limit:g} USD")
            self.reserved[key] = usd
            return ""

    def settle(self, key: str, usd: float) -> None:
        with self._lock:
            self.reserved.pop(key, None)
            self.spent += usd

    def report(self, usd: float) -> None:
        """`usd` of settled machine time goes back to the pipeline (which adds it to state.json)."""
        with self._lock:
            self.reported += usd


def run_cost_reader(out: Path) -> Callable[[], float | None]:
    """Reads the run's spent total from its state.json in `out`; None where none is recorded (no state
    yet, or a torn read): the budget then keeps to its own books (`ledger.recorded_cost_usd`)."""
    return lambda: ledger.recorded_cost_usd(out)


def budget_for_run(limit_usd: float, out: Path) -> SharedBudget:
    """The budget of the run whose folder is `out`, counting what it has already spent."""
    return SharedBudget(limit_usd, run_spent=run_cost_reader(out))
