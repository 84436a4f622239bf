"""What a test plan can detect on this machine: the probability of a keep for a true improvement,
simulated pair by pair through `jobs.stats.sequential.decide_paths`, the rule `decide` itself runs (no second copy of the rule), and
the smallest improvement kept with a given power (the MDE). Pure: numpy only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jobs.stats.sequential import KEEP, MIN_SCALE, Pair, Prior, Rule, decide_paths, mean_lower_bounds, robust_scales, to_pct


@dataclass(frozen=True)
class Power:
    effect_pct: float
    power: float
    mean_pairs: float


@dataclass(frozen=True)
class Paths:
    """Simulated noise paths and their predictable scales, drawn once per `mde` and shared by every
    effect its bisection tries: a true effect shifts each path, and neither the scales (spreads
    about a median) nor the mean's lower bound (a winsorised mean about a median, minus a width)
    depend on a shift but by it, so only the bets are computed per effect."""
    noise: np.ndarray
    scales: np.ndarray
    prior: Prior
    lower_bounds: np.ndarray           # `mean_lower_bounds` of the noise alone: + effect per effect


def paths(residuals: Sequence[float], rule: Rule, *, prior: Prior = Prior(), n_sims: int = 400,
          seed: int = 0) -> Paths | None:
    """`n_sims` paths of `rule.max_pairs` pairs, each pair's noise drawn from `residuals` (a
    symmetrised bootstrap of measured pair noise: this machine's own tails and slow states, not a
    normal model); None without residuals."""
    res = np.asarray(residuals, float)
    res = res - np.median(res)
    if res.size == 0:
        return None
    rng = np.random.default_rng(seed)
    noise = rng.choice(res, size=(n_sims, rule.max_pairs)) * rng.choice([-1.0, 1.0], size=(n_sims, rule.max_pairs))
    prior_res = np.array([p.y for p in prior.pairs], float)
    prior_res = prior_res - np.median(prior_res) if prior_res.size else res
    scales = np.empty_like(noise)
    for i in range(rule.max_pairs):
        past = np.concatenate([np.broadcast_to(prior_res, (n_sims, prior_res.size)),
                               noise[:, :i] - np.median(noise[:, :i], axis=1, keepdims=True) if i else noise[:, :0]],
                              axis=1)
        scales[:, i] = np.maximum(MIN_SCALE, robust_scales(past)) if past.shape[1] >= 3 else 0.05
    prior = prior if prior.pairs else Prior(tuple(Pair(float(v)) for v in res))
    return Paths(noise, scales, prior, mean_lower_bounds(noise, rule.alpha_keep, prior))


def keep_rate(drawn: Paths, effect: float, rule: Rule) -> tuple[float, float]:
    """P(keep) and mean pairs used on the drawn paths when the true improvement is `effect`."""
    # The very decision the runner and the verdict take, pair by pair (no second copy of the rule).
    kinds, at, _ = decide_paths(effect + drawn.noise, drawn.scales, rule, drawn.prior,
                                lower_bounds=drawn.lower_bounds + effect)
    return float(np.mean(kinds == KEEP)), float(np.mean(np.where(at > 0, at, rule.max_pairs)))


def simulate(residuals: Sequence[float], effect: float, rule: Rule, *, prior: Prior = Prior(),
             n_sims: int = 400, seed: int = 0) -> tuple[float, float]:
    """P(keep) and mean pairs used when the true improvement is `effect` (log units) and each
    pair's noise is drawn from `residuals` (see `paths`)."""
    drawn = paths(residuals, rule, prior=prior, n_sims=n_sims, seed=seed)
    return keep_rate(drawn, effect, rule) if drawn is not None else (0.0, float(rule.max_pairs))


def mde(residuals: Sequence[float], rule: Rule, *, prior: Prior = Prior(), power: float = 0.8,
        n_sims: int = 400, seed: int = 0) -> Power:
    """The smallest improvement kept with probability >= `power` (simulated with `simulate`, so
    the floor, the futility stop and the cap on pairs are all priced in), by bisection on the log
    scale; +inf when even a 10x improvement is not."""
    top = math.log(10.0)
    drawn = paths(residuals, rule, prior=prior, n_sims=n_sims, seed=seed)
    if drawn is None:
        return Power(math.inf, 0.0, float(rule.max_pairs))
    p_top, n_top = keep_rate(drawn, top, rule)
    if p_top < power:
        return Power(math.inf, p_top, n_top)
    lo, hi = rule.floor, top
    best = (hi, p_top, n_top)
    for _ in range(14):
        mid = (lo + hi) / 2
        p, n = keep_rate(drawn, mid, rule)
        if p >= power:
            hi, best = mid, (mid, p, n)
        else:
            lo = mid
        if hi - lo < 0.002:
            break
    return Power(to_pct(best[0]), best[1], best[2])
