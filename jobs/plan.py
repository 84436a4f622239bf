"""The plan shown before any money is spent: experiments, platforms, estimated cost. Pure.

Approval binds to `Plan.digest()` together with the base commit: if either changes, the plan
must be approved again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from .config import TargetConfig

# Default instance types per platform name, as in the reference study.
DEFAULT_INSTANCE = {"x86": "c6i.2xlarge", "arm": "c7g.2xlarge"}


def hourly_usd(instance_type: str | None) -> float:
    """On-demand price per hour. Local runs cost nothing; cloud prices come from the shipped
    SkyPilot catalog (jobs.cloud.catalog)."""
    if not instance_type:
        return 0.0
    from .cloud.catalog import hourly_price
    return hourly_price(instance_type)


@dataclass(frozen=True)
class Plan:
    experiments: int                   # hypotheses to test (each on every platform)
    platforms: tuple[str, ...]
    instance_types: tuple[str, ...]
    minutes_per_experiment: float
    est_usd: float
    budget_usd: float
    max_vms: int

    @property
    def over_budget(self) -> bool:
        return self.est_usd > self.budget_usd

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def describe(self) -> str:
        where = ", ".join(f"{p} ({t})" if t else p for p, t in zip(self.platforms, self.instance_types))
        return (f"{self.experiments} experiment(s) + calibration + stack on {where}; up to {self.max_vms} "
                f"machine(s) at once; estimated {self.est_usd:.2f} USD (budget {self.budget_usd:g} USD)")


def make_plan(config: TargetConfig, n_hypotheses: int, *, executor: str = "local",
              minutes_per_experiment: float = 10.0) -> Plan:
    n = min(n_hypotheses, config.budget.max_experiments)
    platforms = tuple(p.name for p in config.platforms)
    if executor == "local":
        types = tuple("" for _ in platforms)
    else:
        types = tuple(p.instance_type or DEFAULT_INSTANCE.get(p.name, "") for p in config.platforms)
    runs = n + 2   # calibration (A/A) and the stack are measured too
    est = sum(runs * minutes_per_experiment / 60 * hourly_usd(t or None) for t in types)
    return Plan(n, platforms, types, minutes_per_experiment, round(est, 2), config.budget.usd,
                config.budget.max_vms)
