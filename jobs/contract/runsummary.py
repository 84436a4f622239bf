"""Pure: what a finished run says about itself (`summary.json`), as one typed value.

`RunSummary.to_json()` is exactly the JSON form the pipeline has always written (same keys, same
order; `commits` and `diffstat` only when a confirmed branch was left; keys added later come last),
so the dashboard, the Action and older summaries read the same file; `from_json` reads one back
(an older file without a later key gets its default). The run's records (`experiments`, `stacks`,
`attribution`) are typed `ExperimentRecord`s (the file holds each one's `summary_dict()`: no log);
a record given as its JSON object is read with `ExperimentRecord.from_summary`. Likewise `calibration`
and `simulate` hold the types of `jobs.contract.calibrated`, `machines` the `MachineFacts` of
`jobs.contract.machinefacts` (their load summed up), `noise` the `NoiseSeen` of
`jobs.contract.noisetrack`, `profile` the `OpProfile` of `jobs.contract.opprofile`, `error_control` an
`ErrorControl` and `hypotheses` the `Hypothesis`es of `jobs.contract.model` (their public
form: a bot run's candidate patch named where the repository keeps it; written with `to_dict()`),
each read from and written as its JSON form; `commits` holds `BranchCommit`s, written back as they
were read (`jobs.contract.jsonform`).
`RunStopped` is what a run with nothing to try ends with instead (no summary.json is written);
`CalibrationOnly` and `ResearchOnly` what a run asked for that one step returns.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any

from jobs.contract.calibrated import (MetricCalibration, SimulatedCalibration, platform_calibrations,
                                      platform_calibrations_json, simulated_calibrations,
                                      simulated_calibrations_json)
from jobs.contract.jsonform import JsonRecord, per_key, per_key_json
from jobs.contract.machinefacts import MachineFacts
from jobs.contract.model import ExperimentRecord, Hypothesis
from jobs.contract.noisetrack import NoiseSeen
from jobs.contract.opprofile import OpProfile, op_profile, op_profile_json

Json = dict[str, Any]
_OPTIONAL = ("commits", "diffstat")       # present only when the run left a confirmed branch
_IF_ANY = ("stack_kept_off",)            # present only when not empty (a run without them writes what it always did)


@dataclass(frozen=True)
class BranchCommit(JsonRecord):
    """One commit of the confirmed branch, oldest first (`jobs.report.review_facts.commit_facts`): the
    hypothesis it carries, its sha and subject, its `git diff --stat` and the files it changes."""
    hypothesis: str = ""
    commit: str = ""
    subject: str = ""
    stat: str = ""
    files: list[str] = field(default_factory=list)
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ErrorControl(JsonRecord):
    """How the run bounds its chance of any false keep (pr.md's "how sure" sentence): the experiment in
    slot i is kept at level `alpha` / (i · H_family), on each of `platforms` platforms."""
    alpha: float = 0.05
    family: int | None = None                  # the slots (budget.max_experiments); None: not said
    platforms: int = 1
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


@dataclass
class RunSummary:
    run_id: str
    target: str
    repo: str
    base_commit: str
    branch: str
    platform: str                                 # the first platform measured
    platforms: list[str]                          # measured first, then the configured ones not measured
    cpus: dict[str, str]
    cpu: str
    machines: dict[str, MachineFacts]             # platform -> where it ran (load: {"min", "max", "mean"} or {})
    agent: str
    primary: str
    calibration: dict[str, dict[str, MetricCalibration]]    # platform -> metric -> its A/A calibration
    experiments: list[ExperimentRecord]           # the experiments' records (with failure output)
    commits: list[BranchCommit] | None = None     # the confirmed branch's commits (jobs.report.review_facts)
    diffstat: str | None = None
    hypotheses: dict[str, Hypothesis] = field(default_factory=dict)    # of the branch's commits, by id
    stack_applied: list[str] = field(default_factory=list)
    stack_dropped: list[str] = field(default_factory=list)
    stack_unattributed: list[str] = field(default_factory=list)
    attribution: list[ExperimentRecord] = field(default_factory=list)   # the leave-one-out measurements
    sandboxed: bool = True
    unsandboxed_by: str = ""
    profile_missing: str = ""
    noise: dict[str, NoiseSeen] = field(default_factory=dict)     # platform -> the noise as the run went
    profile: OpProfile | None = None              # the op profile of the base commit (research.profile)
    simulate: dict[str, SimulatedCalibration] | None = None  # platform -> the simulated yardstick's A/A
    error_control: ErrorControl | None = None     # None: an older summary's `{}`, written back as it was
    stacks: dict[str, ExperimentRecord] = field(default_factory=dict)   # platform -> the stack's record
    cost_usd: float = 0.0
    wall_seconds: float = 0.0
    stack_confirmed: bool = False
    branch_left: bool = True
    branch_note: str = ""
    floor_pct: dict[str, float] = field(default_factory=dict)
    reproduce: list[str] = field(default_factory=list)
    resume: str = ""
    # What the run warned about as it went (a refused `sandbox: {enabled: false}` or sandbox.env name,
    # a calibration or research caveat), each message once, in the order first said.
    warnings: tuple[str, ...] = ()
    # Kept alone but left off the branch, each with why: a build not shippable by default, or a member of
    # a build-option family superseded by the family's best (jobs.run.families, issue 44).
    stack_kept_off: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.warnings = tuple(dict.fromkeys(str(w) for w in self.warnings))   # a JSON list reads back as the tuple
        if not isinstance(self.experiments, list) or not isinstance(self.attribution, list) \
                or not isinstance(self.stacks, dict):
            raise TypeError("experiments and attribution are lists of records, stacks a mapping of them")
        for name, (typed, _) in _CONVERTED.items():
            setattr(self, name, typed(getattr(self, name)))

    def to_json(self) -> Json:
        """The summary.json object (write it with `jobs.contract.ledger.dumps(..., indent=2)`)."""
        return {f.name: _plain(f.name, getattr(self, f.name)) for f in fields(self)
                if not (f.name in _OPTIONAL and getattr(self, f.name) is None)
                and not (f.name in _IF_ANY and not getattr(self, f.name))}

    @classmethod
    def from_json(cls, data: Json) -> RunSummary:
        """A summary.json object back; a key this version does not know is an error, a missing
        optional one takes its default."""
        if not isinstance(data, dict):
            raise ValueError(f"a run summary is a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown keys in a run summary: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"not a run summary: {exc}") from None

    @property
    def kept(self) -> bool:
        """The stack was kept on some platform."""
        return any(st.status == "keep" for st in self.stacks.values())


def _record(value: ExperimentRecord | Json) -> ExperimentRecord:
    return value if isinstance(value, ExperimentRecord) else ExperimentRecord.from_summary(value)


def _commits(value: list | None) -> list[BranchCommit] | None:
    return None if value is None else [c if isinstance(c, BranchCommit) else BranchCommit.from_json(c) for c in value]


def _error_control(value: ErrorControl | Json | None) -> ErrorControl | None:
    if isinstance(value, dict):                 # read from JSON; an older summary's `{}` said none
        return ErrorControl.from_json(value) if value else None
    return value


def _hypotheses(value: dict | None) -> dict[str, Hypothesis]:
    return {k: h if isinstance(h, Hypothesis) else Hypothesis.from_json(h) for k, h in (value or {}).items()}


# The typed fields: name -> (its JSON form -> typed, typed -> its JSON form as summary.json holds it).
_CONVERTED = {
    "experiments": (lambda v: [_record(r) for r in v], lambda v: [r.summary_dict() for r in v]),
    "commits": (_commits, lambda v: None if v is None else [c.to_json() for c in v]),
    "attribution": (lambda v: [_record(r) for r in v], lambda v: [r.summary_dict() for r in v]),
    "stacks": (lambda v: {p: _record(r) for p, r in v.items()}, lambda v: {p: r.summary_dict() for p, r in v.items()}),
    "calibration": (platform_calibrations, platform_calibrations_json),
    "simulate": (simulated_calibrations, simulated_calibrations_json),
    "machines": (functools.partial(per_key, MachineFacts), per_key_json),
    "noise": (functools.partial(per_key, NoiseSeen), per_key_json),
    "profile": (op_profile, op_profile_json),
    "error_control": (_error_control, lambda v: {} if v is None else v.to_json()),
    "hypotheses": (_hypotheses, lambda v: {k: h.to_dict() for k, h in v.items()}),
}


def _plain(name: str, value: Any) -> Any:
    """A field's JSON form: the typed ones as summary.json holds them, the rest as it is."""
    return _CONVERTED[name][1](value) if name in _CONVERTED else value


@dataclass(frozen=True)
class RunStopped:
    """A run that found nothing to try: no calibration, no branch; research.md says why."""
    run_id: str
    why: str
    research: str                                 # the path of research.md


@dataclass(frozen=True)
class CalibrationOnly:
    """What a `calibrate_only` run found: per platform, each metric's calibration and the CPU it ran on."""
    run_id: str
    calibration: dict[str, dict[str, MetricCalibration]]     # platform -> metric -> its calibration
    cpus: dict[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "calibration", platform_calibrations(self.calibration))


@dataclass(frozen=True)
class ResearchOnly:
    """What a `research_only` run found: the hypotheses, ranked (research.md and hypotheses.json say more)."""
    run_id: str
    hypotheses: list[Hypothesis]
