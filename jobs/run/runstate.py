"""A run's state in memory, written through: `state.json` and `experiments.jsonl` (`jobs.contract.ledger`).

The phases of a run (`jobs.run.pipeline`, `jobs.run.measuring`, `jobs.run.calibrating`, `jobs.run.stacking`,
`jobs.run.research_phase`) share one `RunState`: every change is written before the next step starts,
under one lock, since the experiments of a wave finish on several threads.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from jobs.contract import ledger
from jobs.contract.model import ExperimentRecord


class RunState(dict):
    """state.json as a dict (read it like one); change it only through `save`."""

    def __init__(self, out: Path, data: dict[str, Any] | None = None):
        super().__init__(data if data is not None else (ledger.load_state(out) or {}))
        self.out = Path(out)
        self.lock = threading.RLock()

    def save(self, **changes: Any) -> None:
        with self.lock:
            self.update(changes)
            ledger.save_state(self.out, self)

    def append(self, record: ExperimentRecord) -> None:
        """One finished record to experiments.jsonl."""
        with self.lock:
            ledger.append(self.out, record)
