"""Said before the first experiment (issue 43): the wall clock cannot reach the target MDE within
the pair cap on this machine, and no deterministic yardstick decides for it. Pure: numbers in, one
sentence (or none) out.

The MDE at the cap is the calibration's own power simulation (`jobs.stats.power.mde`, the rule the
runner decides by, on this machine's A/A residuals). The cap that would reach the target is found
with that same simulation, by doubling the cap and then bisecting (`pairs_for_mde`), up to `LIMIT`
pairs; beyond that, or when the floor itself is above the target, no cap reaches it and only a
`simulate:` workload (simulated cycles, `jobs.measure.simulate`) can decide effects that small.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from jobs.stats.power import mde
from jobs.stats.sequential import Prior, Rule

LIMIT = 640          # the largest cap searched: its power simulation takes ~10 s on a 2-core VM
N_SIMS = 200         # as `jobs.run.measuring.plan_for`'s own MDE


def pairs_for_mde(residuals: Sequence[float], rule: Rule, target_pct: float, *, prior: Prior = Prior(),
                  limit: int = LIMIT, n_sims: int = N_SIMS) -> int | None:
    """The smallest pair cap (within 10% of it) at which `rule` keeps a `target_pct` improvement
    with 80% probability on this noise (`jobs.stats.power.mde`); None when `limit` pairs do not."""
    def reaches(cap: int) -> bool:
        return mde(residuals, replace(rule, max_pairs=cap), prior=prior, n_sims=n_sims).effect_pct <= target_pct
    lo, hi = rule.max_pairs, rule.max_pairs
    while not reaches(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(limit, 2 * hi)
    while hi - lo > max(1, hi // 10):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def cap_warning(platform: str, metric: str, *, mde_pct: float, target_pct: float, floor_pct: float, cap: int,
                yardstick: bool, residuals: Sequence[float] = (), rule: Rule | None = None,
                prior: Prior = Prior(), limit: int = LIMIT) -> str:
    """The warning, or "" when the wall clock reaches the target within the cap or a yardstick
    (simulated cycles with a base count on this platform) decides instead. `rule`: the first
    experiment's (its level and cap), whose cap is raised to find one that reaches the target."""
    if yardstick or mde_pct <= target_pct:
        return ""
    at = f"{mde_pct:.1f}%" if math.isfinite(mde_pct) else "more than a 10x improvement"
    head = (f"on {platform}, the wall clock cannot reach the target MDE of {target_pct:g}% on {metric} within the "
            f"cap of {cap} pairs: this machine's A/A noise makes the smallest improvement kept with 80% probability "
            f"{at}, so smaller wins will read as \"no detectable difference\"")
    simulate = ("declare a `simulate:` workload (simulated cycles decide effects that small, "
                "the wall clock only guards them)")
    if floor_pct >= target_pct:
        return (f"{head}. No pair cap reaches it: the floor is {floor_pct:.1f}%, above the target; to judge "
                f"smaller effects, {simulate}.")
    needed = pairs_for_mde(residuals, rule, target_pct, prior=prior, limit=limit) if rule is not None else None
    if needed is None:
        return (f"{head}. Not even {limit} pairs would reach it on this noise; to judge smaller effects, "
                f"{simulate}.")
    return (f"{head}. To reach it: a pair cap of about {needed} (`--repeats {needed}` or `repeats.max: {needed}`; "
            f"slower), or {simulate}.")
