"""Small statistics helpers: fixed-sample tests the pipeline takes at one look, and what scripts
outside it use (e.g. an op-level A/B script). Pure.

The pipeline decides with `jobs.stats.sequential` (coin-ordered pairs, an anytime-valid e-process, a
pre-registered plan from the A/A calibration). `compare` applies the same test to two lists of
samples measured elsewhere: adjacent baseline/candidate samples in run order form the pairs, so a
script that runs its arms interleaved (`abba_order`) gets the pipeline's verdict rule.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jobs.contract.model import MetricResult
from jobs.stats.sequential import Pair, Rule, summarize, to_log, to_pct

WARMUP, BASE, HEAD = "W", "A", "B"


def signed_rank_p(y: Sequence[float] | np.ndarray, alternative: str = "two-sided") -> float:
    """Wilcoxon's signed-rank p of paired values `y` (zeros dropped; exact up to 50 pairs), against
    "centred on 0". Fixed-sample: valid at one look, not after every pair (that is jobs.stats.sequential).
    `alternative` as scipy's: "less" asks whether `y` lies below 0."""
    values = np.asarray(y, dtype=float)
    nz = values[values != 0]
    if nz.size < 2:
        return 1.0
    from scipy import stats  # here, not at the top: scipy.stats takes ~1 s to import, and every
    # `autoresearch action` process imports the modules that use this without testing anything
    return float(stats.wilcoxon(nz, alternative=alternative, method="exact" if nz.size <= 50 else "approx").pvalue)


def abba_order(n_per_arm: int, warmup: int = 0) -> list[str]:
    """``warmup`` "W" entries, then A B B A A B B A ... with exactly ``n_per_arm`` of each arm.

    >>> "".join(abba_order(3, warmup=1))
    'WABBAAB'
    """
    if n_per_arm < 0 or warmup < 0:
        raise ValueError("n_per_arm and warmup must be >= 0")
    return [WARMUP] * warmup + [BASE if i % 4 in (0, 3) else HEAD for i in range(2 * n_per_arm)]


def adjacent_pairs(base_order: Sequence[float], head_order: Sequence[float]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` of base sample ``i`` and head sample ``j`` that ran next to each other."""
    events = sorted([(float(o), 0, i) for i, o in enumerate(base_order)]
                    + [(float(o), 1, j) for j, o in enumerate(head_order)])
    pairs, k = [], 0
    while k < len(events) - 1:
        (_, arm1, i1), (_, arm2, i2) = events[k], events[k + 1]
        if arm1 != arm2:
            pairs.append((i1, i2) if arm1 == 0 else (i2, i1))
            k += 2
        else:
            k += 1
    return pairs


def compare(base: Sequence[float], head: Sequence[float], *, direction: str = "higher", alpha: float = 0.05,
            floor_pct: float = 1.0, target_pct: float = 5.0, base_order: Sequence[float] | None = None,
            head_order: Sequence[float] | None = None, name: str = "", **_ignored) -> MetricResult:
    """The pipeline's paired test on samples measured elsewhere. Without orders, sample i of each
    arm forms pair i. Degenerate input gives verdict "untrusted", never an exception."""
    b, h = np.asarray(base, float), np.asarray(head, float)
    bm, bs = (float(b.mean()) if b.size else 0.0), (float(b.std(ddof=1)) if b.size > 1 else 0.0)
    hm, hs = (float(h.mean()) if h.size else 0.0), (float(h.std(ddof=1)) if h.size > 1 else 0.0)
    common = dict(name=name, base_mean=bm, base_sd=bs, head_mean=hm, head_sd=hs, n_base=int(b.size),
                  n_head=int(h.size), alpha=alpha)
    if base_order is not None and head_order is not None and len(base_order) == b.size and len(head_order) == h.size:
        index = adjacent_pairs(base_order, head_order)
    else:
        index = [(i, i) for i in range(min(b.size, h.size))]
    bad = [v for v in (*b, *h) if not (math.isfinite(v) and v > 0)]
    if len(index) < 2 or bad:
        why = f"{len(index)} pairs" if not bad else "values must be finite and > 0 (broken parser?)"
        return MetricResult(**common, delta_pct=0.0, p_value=1.0, ci_low_pct=-100.0, ci_high_pct=math.inf,
                            mde_pct=math.inf, method="none", verdict="untrusted", note=why)
    sign = 1.0 if direction == "higher" else -1.0
    pairs = [Pair(sign * math.log(h[j] / b[i])) for i, j in index]
    rule = Rule(alpha_keep=alpha, floor=to_log(floor_pct), target=to_log(max(target_pct, floor_pct)),
                max_pairs=max(len(pairs), 1))
    s = summarize(pairs, rule)
    lo, hi = (s.lo, s.hi) if sign > 0 else (-s.hi, -s.lo)
    if s.wealth_keep >= 1 / alpha:
        verdict = "win"
    elif s.wealth_loss >= 1 / alpha:
        verdict = "loss"
    else:
        verdict = "no detectable difference"
    return MetricResult(**common, delta_pct=to_pct(sign * s.estimate), p_value=s.p_value,
                        ci_low_pct=to_pct(lo) if math.isfinite(lo) else -100.0,
                        ci_high_pct=to_pct(hi) if math.isfinite(hi) else math.inf, mde_pct=math.inf,
                        method=f"sign-symmetric e-process on {len(pairs)} adjacent pairs (anytime-valid)",
                        verdict=verdict, note="", e_value=s.wealth_keep, n_pairs=len(pairs))
