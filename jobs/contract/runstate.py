"""A run's state in memory, written through: `state.json` and `experiments.jsonl` (`jobs.contract.ledger`).

The phases of a run (`jobs.run.pipeline`, `jobs.run.measuring`, `jobs.run.calibrating`, `jobs.run.stacking`,
`jobs.run.research_phase`) share one `RunState`: every change is written before the next step starts,
under one lock, since the experiments of a wave finish on several threads.

`RunState` has one field per key of state.json; `from_json` / `to_json` read and write exactly the
file earlier versions wrote, so a run resumes across versions: a key is written only once it was
loaded or saved (a field's default stands in for a key not there yet), and keys this version does
not know (an older or newer file's) are kept and written back unchanged. `save` is the one writer.
`calibration` and `simulate` hold the types of `jobs.contract.calibrated`, `hypotheses` the
`Hypothesis`es of `jobs.contract.model`, `machines` the `MachineFacts` of `jobs.contract.machinefacts`,
`noise` the `NoiseTrack`s of `jobs.contract.noisetrack`, `profile` the `OpProfile` of
`jobs.contract.opprofile`, `callgrind` the `CallProfile` of `jobs.contract.callprofile` and `llm` an
`LlmSpend` (written in their JSON form; a JSON form
given to the constructor or `save` is read into them). A hypothesis (and the callgrind profile) read
from the file is written back as the very object it was read from while it is unchanged (`Hypothesis.to_dict` writes every
field of this version, in its order; an older file's object may have fewer, or keys this version
does not know); a new or changed one as its `to_dict()`.
"""
from __future__ import annotations

import copy
import functools
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from jobs.contract import ledger
from jobs.contract.callprofile import CallProfile
from jobs.contract.calibrated import (MetricCalibration, SimulatedCalibration, platform_calibrations,
                                      platform_calibrations_json, simulated_calibrations,
                                      simulated_calibrations_json)
from jobs.contract.jsonform import JsonRecord, per_key, per_key_json
from jobs.contract.machinefacts import MachineFacts
from jobs.contract.model import ExperimentRecord, Hypothesis
from jobs.contract.noisetrack import NoiseTrack
from jobs.contract.opprofile import OpProfile, op_profile, op_profile_json

Json = dict[str, Any]


@dataclass(frozen=True)
class LlmSpend(JsonRecord):
    """What the model agent has used so far in this run (`jobs.agent.meter.Meter.as_dict`): the run's
    cost includes `cost_usd`, carried across a resume."""
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    stopped: str = ""                     # why the meter stopped the agent (a budget cap), or ""
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


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
    llm: LlmSpend = field(default_factory=LlmSpend)
    # -- research (jobs.run.research_phase) --------------------------------------------------------------
    hypotheses: list[Hypothesis] | None = None     # None: research has not finished
    profile: OpProfile | None = None               # the op profile (research.profile); None: not measured
    callgrind: CallProfile | None = None           # the callgrind profile (research.callgrind); None: not measured
    profile_missing: str = ""
    # -- calibration (jobs.run.calibrating), per platform ------------------------------------------------
    calibration: dict[str, dict[str, MetricCalibration]] = field(default_factory=dict)   # platform -> metric -> A/A
    digests: dict[str, list[str] | None] = field(default_factory=dict)   # platform -> deterministic outputs' names
    cpus: dict[str, str] = field(default_factory=dict)
    simulate: dict[str, SimulatedCalibration] | None = None  # None: no platform ran the simulated yardstick
    # -- measuring (jobs.run.measuring), per platform ----------------------------------------------------
    machines: dict[str, MachineFacts] = field(default_factory=dict)    # where it ran, and the load seen
    noise: dict[str, NoiseTrack] = field(default_factory=dict)         # the noise as the run went
    # -- the stack (jobs.run.stacking) -------------------------------------------------------------------
    stack_commit: str = ""
    stack_applied: list[str] = field(default_factory=list)
    stack_dropped: list[str] = field(default_factory=list)
    stack_without: dict[str, str] = field(default_factory=dict)    # hypothesis -> the stack's commit without it
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
    hypotheses_read: list[tuple[Hypothesis, Json]] = field(default_factory=list, repr=False)  # as read, and from what
    callgrind_read: tuple[CallProfile, Json] | None = field(default=None, repr=False)        # likewise
    lock: Any = field(default_factory=threading.RLock, repr=False)

    def __post_init__(self) -> None:
        for key in _TYPED:
            setattr(self, key, self._typed(key, getattr(self, key)))

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
            return {**self.extra, **{k: self._plain(k, getattr(self, k)) for k in KEYS if k in self.present}}

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
                setattr(self, k, self._typed(k, v))
            self.present.update(changes)
            ledger.save_state(self.out, self.to_json())

    def append(self, record: ExperimentRecord) -> None:
        """One finished record to experiments.jsonl."""
        with self.lock:
            ledger.append(self.out, record)

    def hypothesis_json(self, hypothesis: Hypothesis) -> Json:
        """A hypothesis's JSON form in state.json: the object it was read from while it is unchanged."""
        read = next((data for seen, data in self.hypotheses_read if seen == hypothesis), None)
        return copy.deepcopy(read) if read is not None else hypothesis.to_dict()

    def _typed(self, key: str, value: Any) -> Any:
        """A field's value in memory: the calibrations, profiles, hypotheses, machines, noise and the
        model's spend typed (a hypothesis given typed is copied, as its JSON form was: changing it later
        changes no state; a hypothesis or callgrind profile read from JSON is remembered with that JSON)."""
        if key in _CONVERTED:
            return _CONVERTED[key][0](value)
        if key == "callgrind" and isinstance(value, dict):
            profile = CallProfile.from_dict(value)
            self.callgrind_read = (copy.deepcopy(profile), copy.deepcopy(value))
            return profile
        if key == "hypotheses" and value is not None:
            out = []
            for h in value:
                if isinstance(h, Hypothesis):
                    out.append(copy.deepcopy(h))
                else:
                    out.append(Hypothesis.from_json(h))
                    self.hypotheses_read.append((copy.deepcopy(out[-1]), copy.deepcopy(h)))
            return out
        return value

    def _plain(self, key: str, value: Any) -> Any:
        """A field's value in state.json: the typed ones in their JSON form; a hypothesis or callgrind
        profile read from the file as it was read while it is unchanged (an older form)."""
        if key in _CONVERTED:
            return _CONVERTED[key][1](value)
        if key == "callgrind" and value is not None:
            read = self.callgrind_read
            return copy.deepcopy(read[1]) if read is not None and read[0] == value else value.to_dict()
        if key == "hypotheses" and value is not None:
            return [self.hypothesis_json(h) for h in value]
        return value


def _llm_spend(value: Any) -> LlmSpend:
    return value if isinstance(value, LlmSpend) else LlmSpend.from_json(value or {})


# The fields typed without memory of what was read: key -> (its JSON form -> typed, typed -> its JSON form).
_CONVERTED = {
    "calibration": (platform_calibrations, platform_calibrations_json),
    "simulate": (simulated_calibrations, simulated_calibrations_json),
    "profile": (op_profile, op_profile_json),
    "llm": (_llm_spend, LlmSpend.to_json),
    "machines": (functools.partial(per_key, MachineFacts), per_key_json),
    "noise": (functools.partial(per_key, NoiseTrack), per_key_json),
}


KEYS = frozenset(f.name for f in fields(RunState)) - {"out", "extra", "present", "lock", "hypotheses_read",
                                                     "callgrind_read"}
_TYPED = (*_CONVERTED, "hypotheses", "callgrind")
