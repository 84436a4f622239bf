"""The experiment contract as data: what one machine must do for one experiment.

An ExperimentSpec renders to a local process (LocalExecutor) or to a SkyPilot task alike; the
on-machine driver (`jobs.runner`) reads it as JSON. Keep it small and textual.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .config import TargetConfig
from .model import ArmSamples


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
    n_per_arm: int
    warmup: int = 1
    build_timeout: float = 600
    benchmark_timeout: float = 300
    checks_timeout: float = 600
    run_checks: bool = True
    probe: bool = True
    kind: str = "experiment"          # experiment | calibration | stack

    @classmethod
    def from_config(cls, config: TargetConfig, **kw: Any) -> "ExperimentSpec":
        return cls(
            build=config.build, benchmark=config.benchmark, checks=config.checks,
            metrics=[m.name for m in config.metrics], primary=config.primary.name,
            warmup=config.repeats.warmup,
            build_timeout=config.timeouts.build, benchmark_timeout=config.timeouts.benchmark,
            checks_timeout=config.timeouts.checks, **kw,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "ExperimentSpec":
        return cls(**json.loads(text))


@dataclass
class RawResult:
    """What a machine reports back: raw samples, never verdicts (those are computed centrally)."""

    status: str                       # ok | build_failed | checks_failed | crash | timeout
    reason: str = ""
    base: ArmSamples = field(default_factory=ArmSamples)
    head: ArmSamples = field(default_factory=ArmSamples)
    cpu: str = ""
    seconds: float = 0.0
    log: str = ""
    cost_usd: float = 0.0             # machine time this experiment cost (0 on this machine)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RawResult":
        data = json.loads(text)
        data["base"] = ArmSamples(**data["base"])
        data["head"] = ArmSamples(**data["head"])
        return cls(**data)
