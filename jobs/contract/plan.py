"""The plan shown before any money is spent: experiments, platforms, estimated cost. Pure.

Approval binds to `Plan.digest()` together with the base commit: if either changes, the plan
must be approved again.

Prices come in as a function (`hourly_usd(instance_type) -> USD per hour`), so this module reads
no catalog: `jobs.api.make_plan` passes the shipped SkyPilot catalog's prices
(`jobs.executors.cloud.catalog.hourly_price`). A local plan needs none (this machine costs nothing).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Callable

from jobs.contract.config import Platform, TargetConfig

# Default instance types per platform name, as in the reference study. The one home of these
# names: the SkyPilot executor and the dry run read them from here.
DEFAULT_INSTANCE = {"x86": "c6i.2xlarge", "arm": "c7g.2xlarge"}

HourlyPrice = Callable[[str], float]


def instance_type_for(platform: Platform) -> str:
    """The platform's configured instance type, else its default, else '' (no default known)."""
    return platform.instance_type or DEFAULT_INSTANCE.get(platform.name, "")


@dataclass(frozen=True)
class CostPlan:
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


def make_plan(config: TargetConfig, n_hypotheses: int, *, cloud: bool = False,
              minutes_per_experiment: float = 10.0, hourly_usd: HourlyPrice | None = None) -> CostPlan:
    n = min(n_hypotheses, config.budget.max_experiments)
    platforms = tuple(p.name for p in config.platforms)
    if not cloud:           # this machine (the executor registry's `is_cloud`): no instance types, no price
        types = tuple("" for _ in platforms)
    else:
        types = tuple(instance_type_for(p) for p in config.platforms)
    if hourly_usd is None and any(types):
        raise ValueError("a cloud plan needs prices: pass hourly_usd (jobs.api.make_plan passes the catalog's)")
    runs = n + 2   # calibration (A/A) and the stack are measured too
    est = sum(runs * minutes_per_experiment / 60 * hourly_usd(t) for t in types if t)
    return CostPlan(n, platforms, types, minutes_per_experiment, round(est, 2), config.budget.usd,
                config.budget.max_vms)
