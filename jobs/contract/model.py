"""Plain data shared by every stage of a run. No behaviour beyond (de)serialisation."""
from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from jobs.contract.calibrated import MetricCalibration, metric_calibrations
from jobs.contract.jsonform import per_key_json
from jobs.contract.runnerview import RunnerView, SimulatedView, WallGuard, as_runner_view, given


class Status(str, Enum):
    """Outcome of one experiment; each has one meaning the report explains."""

    KEEP = "keep"                    # significant win on the primary metric, beyond the floor
    DISCARD = "discard"              # measured cleanly: no detectable win, or a loss
    NOISE = "noise"                  # measurements untrustworthy: the baseline failed its sanity check
    INVALID = "invalid"              # the candidate's numbers disagree with what the runner saw itself
    BUILD_FAILED = "build_failed"    # baseline or candidate did not build
    CRASH = "crash"                  # benchmark exited non-zero or printed no valid primary metric
    CHECKS_FAILED = "checks_failed"  # candidate builds but its correctness checks fail
    TIMEOUT = "timeout"              # build, benchmark or checks exceeded its time limit
    SKIPPED = "skipped"              # not attempted (no patch could be made, budget reached)


@dataclass
class Evidence:
    """Where a hypothesis comes from: `file:line` in the tree, or a URL."""

    where: str
    note: str = ""


EVIDENCE_KEYS = ("where", "note")


@dataclass
class Hypothesis:
    id: str
    title: str
    kind: str                         # fusion | parallelism | micro | candidate
    rationale: str
    expected: str = ""
    ops: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    score: float = 0.0
    bound_pct: float | None = None    # Amdahl bound on the primary workload (op profile), when measured
    recipe: str | None = None         # recipe id that implements it, if any
    patch: str | None = None          # path of a patch that implements it: a maintainer's (--candidate), or
    generated: str = ""               # ...what of the loop's own research wrote it ('' = the maintainer's)
    measured_share: float | None = None   # callgrind profile's cycles in the code it changes (research.callgrind.rank); None: unmeasured
    variant_of: str | None = None     # the hypothesis this one tries at another setting (unroll 8 of unroll 4)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hypothesis":
        data = dict(data)
        data["evidence"] = [Evidence(**e) for e in data.get("evidence", [])]
        return cls(**data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Hypothesis":
        """A stored hypothesis (state.json, summary.json), read leniently: keys this version does not
        know are left out (`RunState` keeps the object it read and writes that back), a missing
        required one reads as ''."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        known["evidence"] = [e if isinstance(e, Evidence) else Evidence(**{k: e[k] for k in EVIDENCE_KEYS if k in e})
                             for e in known.get("evidence") or []]
        return cls(**{**dict.fromkeys(("id", "title", "kind", "rationale"), ""), **known})


@dataclass
class ArmSamples:
    """One arm's measurements: one entry per whole benchmark invocation, in run order."""

    values: dict[str, list[float]] = field(default_factory=dict)   # metric -> samples
    order: list[int] = field(default_factory=list)                  # global invocation index
    probe: list[float] = field(default_factory=list)                # machine-speed probe per sample
    seconds: list[float] = field(default_factory=list)              # wall time per invocation


@dataclass
class MetricResult:
    name: str
    base_mean: float
    base_sd: float
    head_mean: float
    head_sd: float
    n_base: int
    n_head: int
    delta_pct: float
    p_value: float
    ci_low_pct: float
    ci_high_pct: float
    mde_pct: float
    method: str
    verdict: str                      # win | loss | no detectable difference | untrusted
    note: str = ""
    alpha: float | None = None        # the level this comparison was decided at
    e_value: float | None = None      # evidence against "no improvement beyond the floor"
    n_pairs: int = 0


# What a metric of a summary's record that leaves a field out reads as (`ExperimentRecord.from_summary`):
# the readers already treat None as "not measured".
_MISSING: dict[str, Any] = {"name": "", "method": "", "verdict": "", "note": "", "n_pairs": 0}


class SkipCause(str, Enum):
    """Why an experiment was not measured; decisions read this, never the reason's text."""

    NOT_IMPLEMENTED = "not_implemented"   # no recipe/agent could make the patch (costs no budget)
    EDIT_REFUSED = "edit_refused"         # the patch touched what it may not
    BUDGET = "budget"                     # a budget cap was reached
    NO_MACHINE = "no_machine"             # no machine could be had (cloud)


@dataclass
class ExperimentRecord:
    """One line of experiments.jsonl: everything the report needs about one experiment, typed
    for the whole run (the ledger holds its `to_dict()`, summary.json its `summary_dict()`). The
    runner's own view (`runner`: its clocks, sandbox, stop reason, simulated cycles, wall-clock
    guard) is a `jobs.contract.runnerview.RunnerView`; `simulated` and `wall_guard` read its two
    parts the report asks about. A calibration record's `calibration` holds each metric's
    `MetricCalibration` as the record writes it (without its A/A pairs). Either given in its JSON
    form (a ledger line's, a test's) is read into its type here."""

    run_id: str
    name: str
    hypothesis: str
    platform: str
    status: str
    reason: str
    commit: str | None = None
    base_commit: str | None = None
    metrics: list[MetricResult] = field(default_factory=list)
    seconds: float = 0.0
    cost_usd: float = 0.0
    cpu: str = ""
    log: str = ""
    kind: str = "experiment"          # experiment | stack | calibration | attribution
    flags: list[str] = field(default_factory=list)     # noise warnings, never vetoes
    alpha: float | None = None        # keep level of this experiment's slot in the run
    slot: int | None = None
    runner: RunnerView = field(default_factory=RunnerView.partial)   # the runner's own clocks, sandbox, stop reason
    hypothesis_kind: str = ""         # fusion | parallelism | micro | candidate (experiments)
    skip_cause: str | None = None     # a SkipCause value when status is skipped
    regressions: list[str] = field(default_factory=list)   # metrics measured worse (verdict "loss")
    calibration: dict[str, MetricCalibration] = field(default_factory=dict)   # per metric, for kind "calibration"
    # The failed step's first lines (jobs.report.review_facts): summary.json's, never the ledger's.
    failure_output: str | None = None

    def __post_init__(self) -> None:
        self.runner = as_runner_view(self.runner)
        self.calibration = metric_calibrations(self.calibration)

    def metric(self, name: str | None) -> MetricResult | None:
        return next((m for m in self.metrics if m.name == name), None) if name else None

    @property
    def simulated(self) -> SimulatedView | None:
        """The runner's simulated-cycles view (`runner.simulated`), when the yardstick measured it."""
        return given(self.runner.simulated)

    @property
    def wall_guard(self) -> WallGuard | None:
        """The wall-clock guard beside a simulated-cycles verdict (`runner.wall_guard`; None when none)."""
        return given(self.runner.wall_guard)

    @property
    def broken(self) -> bool:
        """The candidate failed to build, run, pass its checks, or keep its numbers honest."""
        return self.status in (Status.BUILD_FAILED.value, Status.CRASH.value, Status.CHECKS_FAILED.value,
                               Status.TIMEOUT.value, Status.INVALID.value, Status.NOISE.value)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "metrics":
                value = [asdict(m) if is_dataclass(m) else m for m in value]   # as asdict(self) took them
            elif f.name == "runner":
                value = value.to_json()
            elif f.name == "calibration":
                value = per_key_json(value)
            out[f.name] = copy.deepcopy(value)
        if out["failure_output"] is None:          # a ledger line never has one
            del out["failure_output"]
        return out

    def summary_dict(self) -> dict[str, Any]:
        """The record as summary.json holds it: without its full log (a failure's first lines instead)."""
        return {k: v for k, v in self.to_dict().items() if k != "log"}

    @classmethod
    def from_summary(cls, data: dict[str, Any]) -> "ExperimentRecord":
        """A record of summary.json back, as it was written: its metrics' nulls (a non-finite value in
        strict JSON) stay None, and what an older or hand-made summary leaves out takes an empty
        value. A field this version does not know is dropped."""
        if not isinstance(data, dict):
            raise ValueError(f"a run's record is a JSON object, not {type(data).__name__}")
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for name in ("run_id", "name", "hypothesis", "platform", "status", "reason"):
            values.setdefault(name, "")
        values["metrics"] = [m if isinstance(m, MetricResult) else
                             MetricResult(**{f: m.get(f, _MISSING.get(f)) for f in MetricResult.__dataclass_fields__})
                             for m in values.get("metrics") or []]
        return cls(**values)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentRecord":
        """A ledger line back to a record; fields older lines lack take their defaults, and
        their metrics' missing fields too."""
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known = MetricResult.__dataclass_fields__
        metrics = []
        for m in data.get("metrics") or []:
            values = {k: v for k, v in m.items() if k in known}
            for f in ("delta_pct", "p_value", "ci_low_pct", "ci_high_pct", "mde_pct"):
                if values.get(f) is None:          # strict JSON stored a non-finite value as null
                    values[f] = {"p_value": 1.0, "ci_low_pct": -100.0, "delta_pct": 0.0}.get(f, math.inf)
            metrics.append(MetricResult(**values))
        data["metrics"] = metrics
        return cls(**data)
