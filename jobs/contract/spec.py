"""The experiment contract as data: what one machine must do for one experiment.

An ExperimentSpec renders to a local process (LocalExecutor) or to a SkyPilot task alike; the
on-machine driver (`jobs.measure.runner`) reads it as JSON and answers with a RawResult: one record per
benchmark process (never a verdict: those are computed centrally from the raw records). Keep it
small and textual.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from jobs.contract.config import TargetConfig
from jobs.contract.model import ArmSamples


@dataclass(frozen=True)
class Rule:
    """When to stop and what to call it; log ratios oriented so that positive = better."""

    alpha_keep: float
    floor: float                      # log(1 + min_effect_pct/100)
    target: float                     # log(1 + target_mde_pct/100): futility bound
    alpha_loss: float = 0.05
    alpha_futility: float = 0.1
    min_pairs: int = 3
    max_pairs: int = 40

    @property
    def futility(self) -> float:
        """The improvement the futility stop tests against: the target, but never above twice the
        floor. The stop is a valid test of "improvement >= bound" at `alpha_futility`, so an effect
        at or above the bound is stopped as futile at most that often; effects between the floor
        and the bound are what it stops freely. At the 5% target an effect of twice the 1% floor
        was stopped early in nearly every run and kept at most 4.7% of the time in every noise
        model (issue 21); at twice the floor it samples on while it may still be shown to clear
        the floor. The price: a null candidate costs more pairs before it is called futile."""
        return min(self.target, 2 * self.floor) if self.floor > 0 else self.target

    def __post_init__(self):
        if not 0 < self.alpha_keep < 1 or not 0 < self.alpha_loss < 1 or not 0 < self.alpha_futility < 1:
            raise ValueError("alphas must lie in (0, 1)")
        if self.floor < 0 or self.target < self.floor:
            raise ValueError("need 0 <= floor <= target")
        if not 1 <= self.min_pairs <= self.max_pairs:
            raise ValueError("need 1 <= min_pairs <= max_pairs")


@dataclass
class SandboxSpec:
    """What target code may see beyond its worktree (paths may start with ~, expanded where the
    runner runs), as the operator decided it (`jobs.guard.operator`): `enabled: false` only by the
    operator's opt-out that reports state; `env` the names the operator allows of those asked."""

    enabled: bool = True
    caches: list[str] = field(default_factory=list)       # writable in build/checks, read-only in benchmark
    read_only: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)          # variable names passed through
    repo_key: str = ""                                    # the repository's cache namespace (isolation.repo_key)
    limits: dict[str, int] = field(default_factory=dict)  # jobs.guard.limits.Limits.to_dict(); {} = defaults
    protect: list[str] = field(default_factory=list)      # paths no declared one may contain or lie in
    secrets: list[str] = field(default_factory=list)      # the operator's secret files, likewise (jobs.guard.declared_paths)


@dataclass
class ExperimentSpec:
    run_id: str
    name: str
    platform: str
    base_commit: str
    head_commit: str                  # == base_commit for an A/A calibration
    build: str
    benchmark: str
    checks: str
    metrics: list[str]
    primary: str
    n_per_arm: int                    # the most pairs (one process per arm each) this experiment may use
    directions: dict[str, str] = field(default_factory=dict)
    warmup: int = 1
    build_timeout: float = 600
    benchmark_timeout: float = 300
    checks_timeout: float = 600
    run_checks: bool = True
    probe: bool = True
    kind: str = "experiment"          # experiment | calibration | stack | attribution
    seed: int = 0                     # draws the pair order and input seeds
    # The sequential test the runner applies to the primary after each pair: the very Rule the
    # central verdict decides with (`jobs.stats.verdict.VerdictPlan.rule()`), its max_pairs this spec's cap.
    # None: a fixed number of pairs (calibration).
    stop: Rule | None = None
    adjust: list[str] = field(default_factory=list)   # nuisances of the primary fixed by calibration
    clock: str = ""                   # the primary's clock (cpu | wall): a keep waits for the clock test
    timed_share: float = 0.25         # integrity.timed_share
    prior: list[list[float]] = field(default_factory=list)   # calibration pairs [y, z...] of the primary
    sandbox: SandboxSpec = field(default_factory=SandboxSpec)
    simulate: str | None = None       # the reduced workload run under cachegrind once per arm
    simulate_timeout: float = 900
    simulate_floor_pct: float = 0.5   # the simulated saving a keep needs (raised by calibration)
    simulate_digests: list[str] | None = None   # DIGEST names of the simulated run the A/A found deterministic
    # The simulated workload's input seed: one per run, platform and base commit (0: the experiment's
    # own), so the baseline's simulated run is the same in every experiment and is counted once.
    simulate_seed: int = 0
    # The calibration's try of the derived yardstick (the benchmark command itself, no `simulate:`):
    # where it does not fit (no native code, too slow, an instruction Valgrind cannot run) the A/A
    # goes on without it and `RawResult.simulate_problem` says why, instead of failing.
    simulate_derived: bool = False
    wall_tolerance_pct: float = 5.0   # the wall-clock guard's tolerance
    artifacts: list[str] = field(default_factory=list)   # build outputs compared by hash
    swap_locations: bool = True       # each arm built in both folders, a coin per pair picks (jobs.measure.locations)

    @classmethod
    def from_config(cls, config: TargetConfig, **kw: Any) -> "ExperimentSpec":
        sb = config.sandbox
        # Without the pipeline's decision (jobs.guard.operator): sandboxed, and no variable passed through.
        kw.setdefault("sandbox", SandboxSpec(caches=list(sb.caches), read_only=list(sb.read_only)))
        return cls(
            build=config.build, benchmark=config.benchmark, checks=config.checks,
            metrics=[m.name for m in config.metrics], primary=config.primary.name,
            directions={m.name: m.direction for m in config.metrics},
            warmup=config.repeats.warmup,
            build_timeout=config.timeouts.build, benchmark_timeout=config.timeouts.benchmark,
            checks_timeout=config.timeouts.checks,
            simulate=config.simulate.command if config.simulate else None,
            simulate_timeout=config.simulate.timeout if config.simulate else 900,
            wall_tolerance_pct=config.simulate.wall_tolerance_pct if config.simulate else 5.0,
            artifacts=list(config.artifacts), **kw,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "ExperimentSpec":
        data = json.loads(text)
        if data.get("stop") is not None:
            data["stop"] = Rule(**data["stop"])
        data["sandbox"] = SandboxSpec(**data.get("sandbox", {}))
        return cls(**data)


@dataclass
class Invocation:
    """One benchmark process, as the runner saw it."""

    arm: str                          # "A" baseline | "B" candidate
    pair: int                         # 0-based; -1 for a warm-up process
    position: int                     # 0: ran first in its pair, 1: second
    seed: int                         # AUTORESEARCH_SEED it was given
    metrics: dict[str, float] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0               # the runner's own clock, whole sandbox
    cpu_s: float = 0.0                # user+system CPU of the whole process tree
    probe: float | None = None        # machine-speed probe taken just before it (GB/s)
    index: int = 0                    # global position in run order
    location: int = 0                 # 1: ran from the other arm's folder (jobs.measure.locations)


@dataclass
class RawResult:
    """What a machine reports back: raw records, never verdicts (those are computed centrally)."""

    status: str                       # ok | build_failed | checks_failed | crash | timeout | skipped
    reason: str = ""
    invocations: list[Invocation] = field(default_factory=list)
    cpu: str = ""
    seconds: float = 0.0
    log: str = ""
    cost_usd: float = 0.0             # machine time this experiment cost (0 on this machine)
    sandboxed: bool = True
    stopped: str = ""                 # why the runner stopped sampling (keep/loss/futile/exhausted/invalid)
    steps: dict[str, float] = field(default_factory=dict)   # seconds per build/checks step
    simulated: dict[str, Any] = field(default_factory=dict)   # arm -> cachegrind counts (jobs/measure/simulate.py)
    artifacts: dict[str, Any] = field(default_factory=dict)   # declared build outputs compared by hash
    simulate_problem: str = ""        # why a derived yardstick did not fit (ExperimentSpec.simulate_derived)
    machine: dict[str, Any] = field(default_factory=dict)     # where it ran: jobs.measure.machine facts + 1-min loads

    def measured(self) -> list[Invocation]:
        return [i for i in self.invocations if i.pair >= 0]

    def pairs(self) -> list[tuple[Invocation, Invocation]]:
        """Complete pairs (baseline, candidate), in run order."""
        by: dict[int, dict[str, Invocation]] = {}
        for inv in self.measured():
            by.setdefault(inv.pair, {})[inv.arm] = inv
        return [(p["A"], p["B"]) for _, p in sorted(by.items()) if "A" in p and "B" in p]

    def arm(self, arm: str) -> ArmSamples:
        """One arm's samples in the older per-arm shape (for display and simple statistics)."""
        out = ArmSamples()
        for inv in self.measured():
            if inv.arm != arm:
                continue
            for name, value in inv.metrics.items():
                out.values.setdefault(name, []).append(value)
            out.order.append(inv.index)
            out.seconds.append(inv.wall_s)
            if inv.probe is not None:
                out.probe.append(inv.probe)
        return out

    @property
    def base(self) -> ArmSamples:
        return self.arm("A")

    @property
    def head(self) -> ArmSamples:
        return self.arm("B")

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> "RawResult":
        data = json.loads(text)
        data["invocations"] = [Invocation(**i) for i in data.get("invocations", [])]
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
