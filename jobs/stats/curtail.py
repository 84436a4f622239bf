"""When the wall-clock guard's next pairs can no longer settle it: stochastic curtailment.

A keep decided on simulated cycles samples wall-clock pairs only for its guard, which settles one
of three ways: the anytime-valid interval excludes a regression beyond the tolerance (confirmed),
it lies wholly below it (a loss), or, once sampling ends, the pairs lean to a loss at one look
(`jobs.stats.stats.signed_rank_p`, as `jobs.measure.simulate.judge_yardstick` tests it). On a noisy
machine none of the three may be within reach of the pair cap, and then every pair to the cap is
spent to end where it began: kept on the count, "neither confirms nor refutes". On xxHash that was
the largest part of a kept experiment's time (issue 43).

`settle_chance` is the predictive probability that going on to the cap settles the guard: future
pairs are the pairs so far resampled (their own shape: slow states make a few far off and the rest
close) around an effect as uncertain as their mean, and a path is settled when either bet crosses its
bar by the cap or the whole path leans to a loss. The guard gives up from half the cap on, when that
chance is below `GIVE_UP_BELOW`. No decision the guard makes changes its error rate (the bets are
anytime-valid; the lean is tested on the pairs there are); what is given up is the power the
remaining pairs were predicted to have. A candidate that really runs slower shows it in its pairs,
which keeps the chance of a refutation high and the sampling going. What it costs, paired (the same
runs judged with and without it): `tests/benchmarks/verdict_power.py curtail`. The draws are seeded by
the pairs themselves, so the stop is a pure function of the records. Pure: numpy only.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from jobs.stats.sequential import log_wealth, to_log

PATHS = 200            # predictive paths per look: a chance near 5% is known to about ±1.5%
GIVE_UP_BELOW = 0.05   # stop sampling when going on to the cap settles the guard less often than this


def _signed_rank_z(rows: np.ndarray) -> np.ndarray:
    """Per row, the signed-rank statistic's z score (normal approximation, ties by rank order):
    negative when the values lean below 0. Vectorised over paths; the exact test is for the verdict."""
    n = rows.shape[1]
    ranks = np.argsort(np.argsort(np.abs(rows), axis=1), axis=1) + 1.0
    w_plus = np.where(rows > 0, ranks, 0.0).sum(axis=1)
    mean, sd = n * (n + 1) / 4.0, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    return (w_plus - mean) / sd


def _lean_z(alpha: float) -> float:
    """The one-sided normal quantile below which a signed-rank z leans to a loss at level `alpha`."""
    from statistics import NormalDist
    return NormalDist().inv_cdf(alpha)


def settle_chance(y: np.ndarray, s: np.ndarray, *, max_pairs: int, tolerance_pct: float, alpha: float,
                  paths: int = PATHS) -> float:
    """The chance that sampling on to `max_pairs` settles the guard (see the module docstring) at its
    level `alpha` (its interval's and its lean's alike), given the adjusted pairs `y` (log units, + is
    better) and their scales `s` so far. 1.0 before half the
    cap (what a few pairs say of a noisy machine's shape is too little to give up on) and at the cap."""
    y, s = np.asarray(y, float), np.asarray(s, float)
    k = y.size
    if k < max(2, max_pairs // 2) or k >= max_pairs:
        return 1.0
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(y.tobytes()).digest()[:8], "big"))
    scale = float(s[-1])
    # The pairs' own shape, not a normal one: a machine with slow states makes a few pairs far off and
    # the rest close, and the lean test sees a shift in the many. So the future pairs are the pairs so
    # far resampled (a smoothed bootstrap: each with a little noise of the test's scale), around an
    # effect as uncertain as the mean of k of them.
    residuals = y - float(np.mean(y))
    effect = float(np.mean(y)) + rng.choice(residuals, (paths, k)).mean(axis=1)
    future = (effect[:, None] + rng.choice(residuals, (paths, max_pairs - k))
              + rng.standard_normal((paths, max_pairs - k)) * scale / math.sqrt(k))
    rows = np.concatenate([np.broadcast_to(y, (paths, k)), future], axis=1)
    scales = np.concatenate([np.broadcast_to(s, (paths, k)), np.full((paths, max_pairs - k), scale)], axis=1)
    bar = math.log(1 / alpha)
    d0 = to_log(-tolerance_pct)
    confirmed = log_wealth(rows, scales, d0, "up")[:, 0, :].max(axis=1) >= bar
    refuted = log_wealth(rows, scales, d0, "down")[:, 0, :].max(axis=1) >= bar
    leans = _signed_rank_z(rows) < _lean_z(alpha)
    return float(np.mean(confirmed | refuted | leans))


def give_up(y: np.ndarray, s: np.ndarray, *, max_pairs: int, tolerance_pct: float, alpha: float) -> bool:
    """True when the guard's remaining pairs are unlikely to settle it (`settle_chance` below
    `GIVE_UP_BELOW`)."""
    return settle_chance(y, s, max_pairs=max_pairs, tolerance_pct=tolerance_pct, alpha=alpha) < GIVE_UP_BELOW
