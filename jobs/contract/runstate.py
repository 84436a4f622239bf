"""A run's state in memory, written through: `state.json` and `experiments.jsonl` (`jobs.contract.ledger`).

The phases of a run (`jobs.run.pipeline`, `jobs.run.measuring`, `jobs.run.calibrating`, `jobs.run.stacking`,
`jobs.run.research_phase`) share one `RunState`: every change is written before the next step starts,
under one lock, since the experiments of a wave finish on several threads.

`RunState` has one field per key of state.json; `from_json` / `to_json` read and write exactly the
file earlier versions wrote, so a run resumes across versions: a key is written only once it was
loaded or saved (a field's default stands in for a key not there yet), and keys this version does
not know (an older or newer file's) are kept and written back unchanged. `save` is the one writer.
`calibration` and `simulate` hold the types of `jobs.contract.calibrated` (written in their JSON form;
a JSON form given to the constructor or `save` is read into them).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from jobs.contract import ledger
from jobs.contract.calibrated import (MetricCalibration, SimulatedCalibration, platform_calibrations,
                                      platform_calibrations_json, simulated_calibrations,
                                      simulated_calibrations_json)
from jobs.contract.model import ExperimentRecord

Json = dict[str, Any]


@dataclass(eq=False)
class RunState:
    """state.json, typed; read its fields, change them only through `save`."""
    out: Path
    # -- set when the run starts (jobs.run.pipeline) ---------------------------------------------------
    run_id: str = ""
    base_commit: str = ""
    target: str = ""
    agent: str = ""
    repeats_override: int | None = None
    phase: str | None = None            # research | calibrate | experiments | stack… | done | stopped | cancelled
    platforms: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    branch: str = ""
    sandboxed: bool = True
    unsandboxed_by: str = ""
    bench_env_names: list[str] = field(default_factory=list)
    bench_env_digest: str = ""
    stopped: str = ""                   # why a run with nothing to try stopped
    cost_usd: float = 0.0
    llm: Json = field(default_factory=dict)
    # -- research (jobs.run.research_phase) --------------------------------------------------------------
    hypotheses: list[Json] | None = None     # None: research has not finished
    profile: Json | None = None
    callgrind: Json | None = None
    profile_missing: str = ""
    # -- calibration (jobs.run.calibrating), per platform ------------------------------------------------
    calibration: dict[str, dict[str, MetricCalibration]] = field(default_factory=dict)   # platform -> metric -> A/A
    digests: dict[str, Any] = field(default_factory=dict)
    cpus: dict[str, str] = field(default_factory=dict)
    simulate: dict[str, SimulatedCalibration] | None = None  # None: no platform ran the simulated yardstick
    # -- measuring (jobs.run.measuring), per platform ----------------------------------------------------
    machines: dict[str, Json] = field(default_factory=dict)
    noise: dict[str, Json] = field(default_factory=dict)
    # -- the stack (jobs.run.stacking) -------------------------------------------------------------------
    stack_commit: str = ""
    stack_applied: list[str] = field(default_factory=list)
    stack_dropped: list[str] = field(default_factory=list)
    stack_without: dict[str, Any] = field(default_factory=dict)
    stack_final: str | None = None           # None: attribution has not finished
    stack_survivors: list[str] | None = None
    stack_unattributed: list[str] = field(default_factory=list)
    stack_kept_off: dict[str, str] = field(default_factory=dict)   # kept alone, left off the branch: why (issue 44)
    stack_confirmed: bool = False
    branch_left: bool = True
    branch_note: str = ""
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)        # keys this version does not know, kept
    present: set[str] = field(default_factory=set, repr=False)  # the known keys the file holds
    lock: Any = field(default_factory=threading.RLock, repr=False)

    def __post_init__(self) -> None:
        self.calibration = platform_calibrations(self.calibration)
        self.simulate = simulated_calibrations(self.simulate)

    @classmethod
    def load(cls, out: Path) -> RunState:
        """The state.json in `out` (an empty state when there is none yet)."""
        return cls.from_json(out, ledger.load_state(Path(out)) or {})

    @classmethod
    def from_json(cls, out: Path, data: Json) -> RunState:
        known = {k: v for k, v in data.items() if k in KEYS}
        return cls(Path(out), **known, extra={k: v for k, v in data.items() if k not in KEYS}, present=set(known))

    def to_json(self) -> Json:
        """Exactly the keys the file holds: those loaded or saved, and the unknown ones kept."""
        with self.lock:
            return {**self.extra, **{k: _plain(k, getattr(self, k)) for k in KEYS if k in self.present}}

    @property
    def begun(self) -> bool:
        """state.json holds a run (it was loaded non-empty or saved)."""
        return bool(self.present or self.extra)

    def save(self, **changes: Any) -> None:
        """Change fields and write state.json, under the lock: the one writer of the file."""
        unknown = [k for k in changes if k not in KEYS]
        if unknown:
            raise TypeError(f"state.json has no field {', '.join(unknown)}")
        with self.lock:
            for k, v in changes.items():
                setattr(self, k, _typed(k, v))
            self.present.update(changes)
            ledger.save_state(self.out, self.to_json())

    def append(self, record: ExperimentRecord) -> None:
        """One finished record to experiments.jsonl."""
        with self.lock:
            ledger.append(self.out, record)


KEYS = frozenset(f.name for f in fields(RunState)) - {"out", "extra", "present", "lock"}


def _typed(key: str, value: Any) -> Any:
    """A field's value in memory: the calibrations typed (`jobs.contract.calibrated`)."""
    if key == "calibration":
        return platform_calibrations(value)
    if key == "simulate":
        return simulated_calibrations(value)
    return value


def _plain(key: str, value: Any) -> Any:
    """A field's value in state.json: the calibrations in their JSON form."""
    if key == "calibration":
        return platform_calibrations_json(value)
    if key == "simulate":
        return simulated_calibrations_json(value)
    return value
