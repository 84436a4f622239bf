"""Plain data shared by every stage of a run. No behaviour beyond (de)serialisation."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


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
    recipe: str | None = None         # recipe id that implements it, if any
    patch: str | None = None          # path of a maintainer's patch (--candidate)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hypothesis":
        data = dict(data)
        data["evidence"] = [Evidence(**e) for e in data.get("evidence", [])]
        return cls(**data)


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


@dataclass
class ExperimentRecord:
    """One line of experiments.jsonl: everything the report needs about one experiment."""

    run_id: str
    name: str
    hypothesis: str
    platform: str
    status: str
    reason: str
    commit: str | None = None
    base_commit: str | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    cost_usd: float = 0.0
    cpu: str = ""
    log: str = ""
    kind: str = "experiment"          # experiment | stack | calibration | attribution
    flags: list[str] = field(default_factory=list)     # noise warnings, never vetoes
    alpha: float | None = None        # keep level of this experiment's slot in the run
    slot: int | None = None
    runner: dict[str, Any] = field(default_factory=dict)   # the runner's own clocks, sandbox, stop reason

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
