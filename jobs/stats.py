"""Statistics for honest A/B benchmarking. Pure: plain lists in, plain data out; no I/O, and
no randomness without an explicit ``seed`` argument.

The rules this module keeps, and why (numbers measured on shared 2-vCPU cloud machines running
real benchmarks such as ``llama-bench``):

* **One sample = one whole benchmark invocation.** Repeats inside one process are correlated;
  invocation-to-invocation noise is 5-8% CV and the machine drifts 3-9% over minutes.
* **Compare on the log scale.** Throughput and latency are ratios; ``log`` makes a +10% and a
  -9.1% change (the same change seen as tok/s and as ms/tok) symmetric, so a metric and its
  inverse get the same verdict. ``delta_pct``, the CI and the MDE are ratios in percent:
  ``100 * (exp(d) - 1)`` for a difference ``d`` of log values (head minus base).
* **Default test: Welch's t** (``scipy.stats.ttest_ind(equal_var=False)``) on log values.
* **Drift switches to a paired test.** Baseline (A) and candidate (B) run interleaved
  (``abba_order``: A B B A A B B A ...). Adjacent A/B invocations in run order form pairs, and
  their differences cancel slow machine drift. The paired t-test is used when the data show drift
  (:func:`detect_drift`): a significant linear trend of log values against invocation order
  (fitted with an arm term, over both arms), or a significant, strong positive correlation between
  the two members of adjacent pairs.
* **A machine-speed probe is a covariate.** A slow period slows every metric and the probe alike;
  when probes are given, ``log(metric) ~ arm + log(probe)`` (or, paired, ``diff ~ 1 + diff of
  log(probe)``) is fitted by least squares and its arm coefficient is used if the fit lowers the
  residual sd (df-corrected) below that of the same model without the probe.
* **CV is an anomaly flag, not a gate.** A rule such as "trust only CV < 2%" never holds on this
  kind of machine and would reject even a 1.6x win; significance, the CI and the MDE decide.
* **A win must clear three bars**: p < alpha, an improvement of at least ``floor_pct`` (the effect
  floor from an A/A :func:`calibrate`), and a CI entirely on the improving side. Anything else that
  is not the mirror-image loss is "no detectable difference", reported with its MDE.
* **Degenerate data never raise and never yield NaN**: the verdict is "untrusted" with a note.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import product as _cartesian
from typing import Any

import numpy as np
from scipy import optimize, stats

from .model import MetricResult

WARMUP = "W"
BASE = "A"
HEAD = "B"
DRIFT_ALPHA = 0.05        # significance of the trend / pair-correlation drift checks
DRIFT_MIN_PAIR_R = 0.5    # ... and the pair correlation must also be at least this strong
MIN_PAIRS = 3             # a paired test needs at least this many adjacent A/B pairs
UNTRUSTED = "untrusted"
WIN, LOSS, NO_DIFFERENCE = "win", "loss", "no detectable difference"


# --------------------------------------------------------------------------- run order


def abba_order(n_per_arm: int, warmup: int = 0) -> list[str]:
    """The order of benchmark invocations for one A/B measurement.

    ``warmup`` entries ``"W"`` first (a baseline invocation whose result is discarded: it warms
    caches, page cache and CPU frequency), then ``A B B A A B B A ...`` truncated to exactly
    ``n_per_arm`` ``"A"`` (baseline) and ``n_per_arm`` ``"B"`` (candidate). Every consecutive
    pair of the measured part, (0,1), (2,3), ..., holds one A and one B, and the AB/BA
    alternation cancels a linear drift in the mean of each arm.

    >>> "".join(abba_order(3, warmup=1))
    'WABBAAB'
    """
    if n_per_arm < 0 or warmup < 0:
        raise ValueError("n_per_arm and warmup must be >= 0")
    return [WARMUP] * warmup + [BASE if i % 4 in (0, 3) else HEAD for i in range(2 * n_per_arm)]


def adjacent_pairs(base_order: Sequence[float], head_order: Sequence[float]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` of base sample ``i`` and head sample ``j`` that ran next to each other.

    Walks all invocations in run order (``*_order`` are global invocation indices) and pairs an
    invocation with the next one when their arms differ, then continues after the pair; with
    :func:`abba_order` this pairs positions (0,1), (2,3), ... .
    """
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


# --------------------------------------------------------------------------- power / MDE


def _mde_log(se: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true difference of log means detected with probability ``power`` by a two-sided
    t-test at ``alpha`` whose estimate has standard error ``se`` and ``df`` degrees of freedom.

    Exact for the t-test: solves ``P(|T| > t_crit) = power`` with ``T`` non-central t
    (``scipy.stats.nct``), non-centrality ``delta / se``.
    """
    if not (se > 0) or not math.isfinite(se):
        return 0.0 if se == 0 else math.inf
    if not (df > 0) or not math.isfinite(df):
        return math.inf
    tc = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(nc: float) -> float:
        return stats.nct.sf(tc, df, nc) + stats.nct.cdf(-tc, df, nc) - power

    # Fallback where scipy's non-central t is numerically undefined (df below ~1.5 gives NaN):
    # the usual (t_crit + z_power) approximation, which overstates nothing at such tiny df.
    approx = float(tc + stats.norm.ppf(power)) * se
    hi = tc + stats.norm.ppf(power) + 1.0
    try:
        while shortfall(hi) < 0:
            hi *= 2
            if hi > 1e6:
                return math.inf
        if not (math.isfinite(shortfall(0.0)) and math.isfinite(shortfall(hi))):
            return approx
        return float(optimize.brentq(shortfall, 0.0, hi, xtol=1e-10)) * se
    except (ValueError, RuntimeError):
        return approx


def _pct(log_delta: float) -> float:
    """A difference of logs as a ratio in percent."""
    if log_delta > 700:
        return math.inf
    return 100.0 * math.expm1(log_delta)


def mde_pct(sd_log: float, n_per_arm: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect in percent (``100 * (exp(d) - 1)``) of a two-sided two-sample
    t-test on log values, ``n_per_arm`` samples per arm, per-sample sd ``sd_log`` (log units,
    ~ CV for small values), at significance ``alpha`` with probability ``power``.

    Uses the non-central t with ``2n - 2`` df (Welch's df at equal n and sd), so small ``n`` pays
    its price: at n=6 the MDE is ~1.8 x sd, at n=20 ~0.9 x sd. ``inf`` when ``n_per_arm < 2``.
    Increases with ``sd_log``, decreases with ``n_per_arm``.
    """
    if sd_log < 0 or not math.isfinite(sd_log):
        raise ValueError(f"sd_log must be a finite number >= 0, not {sd_log}")
    if n_per_arm < 2:
        return math.inf
    return _pct(_mde_log(sd_log * math.sqrt(2.0 / n_per_arm), 2 * n_per_arm - 2, alpha, power))


def repeats_for(sd_log: float, target_mde_pct: float, alpha: float = 0.05, power: float = 0.8,
                n_min: int = 6, n_max: int = 20) -> int:
    """Invocations per arm: the smallest ``n`` in ``[n_min, n_max]`` whose :func:`mde_pct` is at
    most ``target_mde_pct``; ``n_max`` when even that cannot reach the target (the MDE at
    ``n_max`` is then what the experiment can detect)."""
    if n_min < 2 or n_max < n_min:
        raise ValueError(f"need 2 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    if not math.isfinite(sd_log) or sd_log < 0:
        return n_max
    for n in range(n_min, n_max + 1):
        if mde_pct(sd_log, n, alpha, power) <= target_mde_pct:
            return n
    return n_max


# --------------------------------------------------------------------------- helpers


def cv_pct(values: Sequence[float]) -> float:
    """Coefficient of variation in percent (sample sd, ddof=1, over the mean).

    An anomaly flag (compare it with a generous limit such as 15%), never a gate for verdicts.
    0.0 for fewer than two values; ``inf`` when the mean is not positive or a value is not finite.
    """
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return 0.0
    mean = float(np.mean(x))
    if not np.all(np.isfinite(x)) or mean <= 0:
        return math.inf
    return float(100.0 * np.std(x, ddof=1) / mean)


def _natural(values: np.ndarray) -> tuple[float, float]:
    """Mean and sd (ddof=1) over the finite values; 0.0 where not defined."""
    x = values[np.isfinite(values)]
    mean = float(np.mean(x)) if x.size else 0.0
    sd = float(np.std(x, ddof=1)) if x.size >= 2 else 0.0
    return mean, sd


@dataclass(frozen=True)
class _Ols:
    beta: np.ndarray
    se: np.ndarray
    df: int
    resid_sd: float


def _ols(y: np.ndarray, X: np.ndarray) -> _Ols | None:
    """Least squares with classical standard errors; None when rank-deficient or df < 1."""
    n, k = X.shape
    if n - k < 1 or np.linalg.matrix_rank(X) < k:
        return None
    beta, _, _, _ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    df = n - k
    s2 = float(resid @ resid) / df
    cov = s2 * np.linalg.inv(X.T @ X)
    return _Ols(beta, np.sqrt(np.maximum(np.diag(cov), 0.0)), df, math.sqrt(s2))


def _two_sided_p(t_stat: float, df: float) -> float:
    return float(2.0 * stats.t.sf(abs(t_stat), df))


# --------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class Drift:
    """What :func:`detect_drift` saw.

    ``trend_pct``: fitted change of the metric over the whole run (first to last invocation), in
    percent, from ``log(v) ~ 1 + arm + order``; ``trend_p`` its two-sided p. ``pair_r``: Pearson
    correlation of log values of the base and head member of adjacent pairs, ``pair_p`` its
    one-sided (r > 0) p. ``detected`` when ``trend_p < DRIFT_ALPHA`` or (``pair_r >=
    DRIFT_MIN_PAIR_R`` and ``pair_p < DRIFT_ALPHA``).
    """

    detected: bool
    reason: str
    trend_pct: float = 0.0
    trend_p: float = 1.0
    pair_r: float = 0.0
    pair_p: float = 1.0
    n_pairs: int = 0
    slope_log: float = 0.0          # fitted trend per unit of order (log units)
    resid_sd_log: float = math.nan  # residual sd of the trend fit (NaN when not fitted)


def detect_drift(log_base: Sequence[float], log_head: Sequence[float],
                 base_order: Sequence[float], head_order: Sequence[float],
                 alpha: float | None = None) -> Drift:
    """Look for machine drift in log values using their run order (see :class:`Drift`);
    ``alpha`` defaults to ``DRIFT_ALPHA``."""
    alpha = DRIFT_ALPHA if alpha is None else alpha
    x, y = np.asarray(log_base, float), np.asarray(log_head, float)
    ox, oy = np.asarray(base_order, float), np.asarray(head_order, float)
    z = np.concatenate([x, y])
    t = np.concatenate([ox, oy])
    g = np.concatenate([np.zeros(x.size), np.ones(y.size)])
    trend_pct, trend_p, slope, resid_sd = 0.0, 1.0, 0.0, math.nan
    fit = _ols(z, np.column_stack([np.ones(z.size), g, t])) if z.size >= 5 else None
    if fit is not None and fit.se[2] > 0:
        slope = float(fit.beta[2])
        trend_p = _two_sided_p(slope / fit.se[2], fit.df)
        trend_pct = _pct(slope * float(t.max() - t.min()))
        resid_sd = fit.resid_sd
    elif fit is not None:
        resid_sd = fit.resid_sd
    pairs = adjacent_pairs(ox, oy)
    pair_r, pair_p = 0.0, 1.0
    if len(pairs) >= 4:
        px = np.array([x[i] for i, _ in pairs])
        py = np.array([y[j] for _, j in pairs])
        if np.std(px) > 0 and np.std(py) > 0:
            res = stats.pearsonr(px, py, alternative="greater")
            pair_r, pair_p = float(res.statistic), float(res.pvalue)
    reasons = []
    if trend_p < alpha:
        reasons.append(f"trend {trend_pct:+.1f}% over the run, p={trend_p:.2g}")
    if pair_r >= DRIFT_MIN_PAIR_R and pair_p < alpha:
        reasons.append(f"adjacent pairs correlate r={pair_r:.2f}, p={pair_p:.2g}")
    return Drift(bool(reasons), "; ".join(reasons), trend_pct, trend_p, pair_r, pair_p, len(pairs),
                 slope, resid_sd)


# --------------------------------------------------------------------------- the test


@dataclass(frozen=True)
class _Estimate:
    delta_log: float      # head minus base, log units
    se: float
    df: float
    p: float
    method: str
    sd_equiv: float       # per-sample-equivalent sd of the method (paired: sd(diff)/sqrt 2)


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`compare` computed; :func:`calibrate` reads the parts it needs.

    ``problem`` is set (and ``estimate`` None) when the data cannot be tested.
    """

    base: np.ndarray
    head: np.ndarray
    estimate: _Estimate | None
    problem: str = ""
    notes: tuple[str, ...] = ()
    drift: Drift | None = None
    sd_log: float = 0.0                      # pooled within-arm sd of log values
    sd_log_no_probe: float = 0.0             # per-sample-equivalent sd of the test without probe
    sd_log_with_probe: float | None = None   # ... of the probe model, when one could be fitted


def _welch(x: np.ndarray, y: np.ndarray) -> _Estimate | None:
    vx, vy = np.var(x, ddof=1), np.var(y, ddof=1)
    se2 = vx / x.size + vy / y.size
    if not se2 > 0:
        return None
    df = se2 ** 2 / ((vx / x.size) ** 2 / (x.size - 1) + (vy / y.size) ** 2 / (y.size - 1))
    with warnings.catch_warnings():   # one constant arm: scipy warns of "precision loss"
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(y, x, equal_var=False).pvalue)
    pooled = math.sqrt(((x.size - 1) * vx + (y.size - 1) * vy) / (x.size + y.size - 2))
    return _Estimate(float(np.mean(y) - np.mean(x)), math.sqrt(se2), float(df), p,
                     f"Welch t on log values (df {df:.1f})", pooled)


def _paired(d: np.ndarray, why: str) -> _Estimate | None:
    sd = float(np.std(d, ddof=1))
    if not sd > 0:
        return None
    p = float(stats.ttest_1samp(d, 0.0).pvalue)
    return _Estimate(float(np.mean(d)), sd / math.sqrt(d.size), d.size - 1, p,
                     f"paired t on {d.size} adjacent A/B pairs (drift: {why})", sd / math.sqrt(2))


def _valid_aux(values: Sequence[float] | None, n: int, what: str, notes: list[str],
               positive: bool = False) -> np.ndarray | None:
    if values is None:
        return None
    a = np.asarray(values, dtype=float)
    if a.size != n:
        notes.append(f"{what} ignored: {a.size} entries for {n} samples")
        return None
    if not np.all(np.isfinite(a)) or (positive and np.any(a <= 0)):
        notes.append(f"{what} ignored: not all {'positive ' if positive else ''}finite numbers")
        return None
    return a


def analyse(base: Sequence[float], head: Sequence[float], *,
            base_order: Sequence[float] | None = None, head_order: Sequence[float] | None = None,
            base_probe: Sequence[float] | None = None, head_probe: Sequence[float] | None = None,
            ) -> Analysis:
    """Choose and run the test behind :func:`compare` (see the module docstring for the rules).

    Steps: validate (n >= 2 per arm, all values finite and > 0, some variance); Welch on log
    values; if orders are given and :func:`detect_drift` finds drift, a paired t on adjacent
    pairs instead (at least ``MIN_PAIRS`` pairs; with fewer the arms are not interleaved and the
    result is untrusted); then, if probes are given, the same design with ``log(probe)`` as a
    covariate, kept when it lowers the residual sd.
    """
    x_raw, y_raw = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    notes: list[str] = []

    def untrusted(problem: str) -> Analysis:
        return Analysis(x_raw, y_raw, None, problem, tuple(notes))

    if x_raw.size < 2 or y_raw.size < 2:
        return untrusted(f"too few samples (base {x_raw.size}, head {y_raw.size}; need >= 2 each)")
    for arm, v in (("base", x_raw), ("head", y_raw)):
        if not np.all(np.isfinite(v)):
            return untrusted(f"{arm} has non-finite values")
        if np.any(v <= 0):
            return untrusted(f"{arm} has non-positive values ({float(v.min()):g}); "
                             "a ratio metric must be > 0 (broken parser?)")
    x, y = np.log(x_raw), np.log(y_raw)
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return untrusted("zero variance in both arms (a constant benchmark output? broken parser?)")
    welch = _welch(x, y)
    assert welch is not None  # some variance exists
    sd_log = welch.sd_equiv
    estimate = welch

    ox = _valid_aux(base_order, x.size, "base_order", notes)
    oy = _valid_aux(head_order, y.size, "head_order", notes)
    drift = None
    pairs: list[tuple[int, int]] = []
    if ox is not None and oy is not None:
        drift = detect_drift(x, y, ox, oy)
        pairs = adjacent_pairs(ox, oy)
        if drift.detected:
            if len(pairs) < MIN_PAIRS:
                return Analysis(x_raw, y_raw, None,
                                f"drift ({drift.reason}) and the arms are not interleaved "
                                f"({len(pairs)} adjacent A/B pairs): the difference is confounded "
                                "with drift; run them in abba_order", tuple(notes), drift, sd_log)
            d = np.array([y[j] - x[i] for i, j in pairs])
            paired = _paired(d, drift.reason)
            if paired is None:
                return Analysis(x_raw, y_raw, None, "zero variance of paired differences",
                                tuple(notes), drift, sd_log)
            estimate = paired
    elif (base_order is None) != (head_order is None):
        notes.append("orders ignored: given for one arm only")
    sd_no_probe = estimate.sd_equiv

    px = _valid_aux(base_probe, x.size, "base_probe", notes, positive=True)
    py = _valid_aux(head_probe, y.size, "head_probe", notes, positive=True)
    sd_with_probe = None
    if px is not None and py is not None:
        lpx, lpy = np.log(px), np.log(py)
        if estimate is welch:
            z = np.concatenate([x, y])
            g = np.concatenate([np.zeros(x.size), np.ones(y.size)])
            lp = np.concatenate([lpx, lpy])
            fit = _ols(z, np.column_stack([np.ones(z.size), g, lp]))
            base_fit = _ols(z, np.column_stack([np.ones(z.size), g]))
            if fit is not None and base_fit is not None and fit.se[1] > 0:
                sd_with_probe = fit.resid_sd
                if fit.resid_sd < base_fit.resid_sd:
                    estimate = _Estimate(
                        float(fit.beta[1]), float(fit.se[1]), fit.df,
                        _two_sided_p(fit.beta[1] / fit.se[1], fit.df),
                        f"OLS log(metric) ~ arm + log(probe) (probe slope {fit.beta[2]:.2f}; "
                        f"residual sd {100 * fit.resid_sd:.2f}% vs {100 * base_fit.resid_sd:.2f}% "
                        "without probe)", fit.resid_sd)
                else:
                    notes.append(f"probe not used: residual sd {100 * fit.resid_sd:.2f}% is not "
                                 f"below {100 * base_fit.resid_sd:.2f}% without it")
        else:
            d = np.array([y[j] - x[i] for i, j in pairs])
            dp = np.array([lpy[j] - lpx[i] for i, j in pairs])
            fit = _ols(d, np.column_stack([np.ones(d.size), dp]))
            if fit is not None and fit.se[0] > 0:
                sd_with_probe = fit.resid_sd / math.sqrt(2)
                sd_d = float(np.std(d, ddof=1))
                if fit.resid_sd < sd_d:
                    estimate = _Estimate(
                        float(fit.beta[0]), float(fit.se[0]), fit.df,
                        _two_sided_p(fit.beta[0] / fit.se[0], fit.df),
                        f"{estimate.method}; adjusted by OLS diff ~ 1 + diff log(probe) (probe "
                        f"slope {fit.beta[1]:.2f}; residual sd {100 * fit.resid_sd:.2f}% vs "
                        f"{100 * sd_d:.2f}% without probe)", sd_with_probe)
                else:
                    notes.append("probe not used: it does not lower the residual sd of the pairs")
    elif (base_probe is None) != (head_probe is None):
        notes.append("probe ignored: given for one arm only")
    return Analysis(x_raw, y_raw, estimate, "", tuple(notes), drift, sd_log, sd_no_probe,
                    sd_with_probe)


def compare(base: Sequence[float], head: Sequence[float], *, direction: str = "higher",
            alpha: float = 0.05, floor_pct: float = 1.0, power: float = 0.8,
            base_order: Sequence[float] | None = None, head_order: Sequence[float] | None = None,
            base_probe: Sequence[float] | None = None, head_probe: Sequence[float] | None = None,
            name: str = "") -> MetricResult:
    """Compare one metric between baseline and candidate; every field of the result is filled.

    ``base``/``head``: one value per whole benchmark invocation. ``*_order``: the global
    invocation index of each sample (enables drift detection and the paired test). ``*_probe``:
    a machine-speed measurement taken beside each invocation (enables the covariate model).
    The test is chosen by :func:`analyse`; ``method`` names it and why.

    Result fields: ``base_mean``/``head_mean``/``*_sd`` on the natural scale (arithmetic, ddof=1);
    ``delta_pct`` = ``100 * (exp(d) - 1)`` with ``d`` the method's estimate of the difference of
    log means (head vs base; positive = head larger); ``p_value`` two-sided; ``ci_*_pct`` the
    ``1 - alpha`` CI of the same ratio; ``mde_pct`` the effect the chosen method detects with
    probability ``power`` at the observed n and noise.

    Verdict. With improvement ``I = 100 * (exp(s * d) - 1)``, ``s = +1`` for ``direction="higher"``
    and ``-1`` for ``"lower"`` (so a metric and its inverse get the same verdict):
    ``"win"`` iff ``p < alpha`` and ``I >= floor_pct`` and the whole CI of ``I`` is >= 0;
    ``"loss"`` iff ``p < alpha`` and the worsening ``100 * (exp(-s * d) - 1) >= floor_pct`` and the
    whole CI of ``I`` is <= 0; otherwise ``"no detectable difference"`` with ``"MDE x.x%"`` in the
    note. ``"untrusted"`` (never an exception, never NaN) for: fewer than 2 samples in an arm,
    non-finite or non-positive values, zero variance, drift with non-interleaved arms. Unknown
    quantities are then reported as p = 1.0, CI [-100%, +inf%], MDE +inf.
    """
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    a = analyse(base, head, base_order=base_order, head_order=head_order,
                base_probe=base_probe, head_probe=head_probe)
    bm, bs = _natural(a.base)
    hm, hs = _natural(a.head)
    common: dict[str, Any] = dict(name=name, base_mean=bm, base_sd=bs, head_mean=hm, head_sd=hs,
                                  n_base=int(a.base.size), n_head=int(a.head.size))
    est = a.estimate
    if est is None:
        delta = 100.0 * (hm / bm - 1.0) if bm > 0 and hm > 0 else 0.0
        return MetricResult(**common, delta_pct=delta, p_value=1.0, ci_low_pct=-100.0,
                            ci_high_pct=math.inf, mde_pct=math.inf, method="none",
                            verdict=UNTRUSTED, note="; ".join((a.problem,) + a.notes))
    notes = list(a.notes)
    p = est.p
    if not math.isfinite(p):
        notes.append("p-value was not a number (degenerate variance); reported as 1.0")
        p = 1.0
    tc = float(stats.t.ppf(1 - alpha / 2, est.df))
    lo_log, hi_log = est.delta_log - tc * est.se, est.delta_log + tc * est.se
    mde = _pct(_mde_log(est.se, est.df, alpha, power))
    s = 1.0 if direction == "higher" else -1.0
    improvement = _pct(s * est.delta_log)
    worsening = _pct(-s * est.delta_log)
    imp_lo, imp_hi = sorted((_pct(s * lo_log), _pct(s * hi_log)))
    if p < alpha and improvement >= floor_pct and imp_lo >= 0:
        verdict = WIN
    elif p < alpha and worsening >= floor_pct and imp_hi <= 0:
        verdict = LOSS
    else:
        verdict = NO_DIFFERENCE
        if p < alpha:
            why = (f"significant (p={p:.3g}) but {max(improvement, worsening):.1f}% is below the "
                   f"{floor_pct:.1f}% effect floor")
        else:
            why = f"p={p:.3g} >= alpha {alpha:g}"
        notes.insert(0, f"MDE {mde:.1f}%: {why}")
    return MetricResult(**common, delta_pct=_pct(est.delta_log), p_value=p,
                        ci_low_pct=_pct(lo_log), ci_high_pct=_pct(hi_log), mde_pct=mde,
                        method=est.method, verdict=verdict, note="; ".join(notes))


# --------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class Calibration:
    """An A/A calibration: the same build measured against itself, interleaved.

    Noise: ``sd_log`` is the pooled within-arm sd of log values (what Welch sees, ~ CV);
    ``sd_log_effective`` the per-sample-equivalent sd of the test :func:`compare` chose on this
    data without the probe (paired: sd of pair differences / sqrt 2); ``sd_log_with_probe`` the
    same with the probe covariate (None without probes); ``sd_log_plan`` the smaller of the last
    two, used for ``repeats`` and the floor.
    Plan: ``repeats`` = :func:`repeats_for` (``sd_log_plan``, target); ``mde_pct`` and
    ``mde_pct_with_probe`` = :func:`mde_pct` at ``repeats`` with ``sd_log_effective`` and
    ``sd_log_with_probe``. ``floor_pct``: see :func:`calibrate`.
    False wins: ``false_win_rate`` = max of ``false_win_rate_permutation`` and
    ``false_win_rate_parametric`` (see :func:`calibrate`), in [0, 1].
    ``ok`` is False when the A/A data could not be analysed (``note`` says why); the plan is
    then the conservative one (n_max repeats, false_win_rate 1.0).
    """

    ok: bool
    n_a: int
    n_b: int
    sd_log: float
    sd_log_effective: float
    sd_log_with_probe: float | None
    sd_log_plan: float
    drift: bool
    drift_note: str
    trend_pct: float
    method: str
    aa_delta_pct: float
    aa_p_value: float
    floor_pct: float
    repeats: int
    mde_pct: float
    mde_pct_with_probe: float | None
    target_mde_reached: bool
    false_win_rate: float
    false_win_rate_permutation: float
    false_win_rate_parametric: float
    n_permutations: int
    n_simulations: int
    note: str = ""
    floor_parts: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _round_up(x: float, step: float = 0.1) -> float:
    if not math.isfinite(x):
        return x
    return round(math.ceil(round(x / step, 9)) * step, 10)


def _permutation_false_wins(a: np.ndarray, b: np.ndarray, a_order: np.ndarray, b_order: np.ndarray,
                            pa: np.ndarray | None, pb: np.ndarray | None, *, alpha: float,
                            floor_pct: float, n_permutations: int, rng: np.random.Generator,
                            ) -> tuple[float, int]:
    """Fraction of label swaps within adjacent pairs under which compare calls a "win"."""
    pairs = adjacent_pairs(a_order, b_order)
    m = len(pairs)
    if m == 0 or n_permutations <= 0:
        return 1.0, 0
    if 2 ** m <= n_permutations:
        masks = [np.array(bits, dtype=bool) for bits in _cartesian((False, True), repeat=m)]
    else:
        masks = [rng.random(m) < 0.5 for _ in range(n_permutations)]
    wins = 0
    for mask in masks:
        a2, b2, oa, ob = a.copy(), b.copy(), a_order.copy(), b_order.copy()
        qa = pa.copy() if pa is not None else None
        qb = pb.copy() if pb is not None else None
        for (i, j), swap in zip(pairs, mask):
            if swap:
                a2[i], b2[j] = b[j], a[i]
                oa[i], ob[j] = b_order[j], a_order[i]
                if qa is not None and qb is not None:
                    qa[i], qb[j] = pb[j], pa[i]
        r = compare(a2, b2, direction="higher", alpha=alpha, floor_pct=floor_pct, base_order=oa,
                    head_order=ob, base_probe=qa, head_probe=qb)
        wins += r.verdict == WIN
    return wins / len(masks), len(masks)


def _parametric_false_wins(sd: float, slope: float, n: int, warmup: int, *, alpha: float,
                           floor_pct: float, n_simulations: int, rng: np.random.Generator) -> float:
    """Fraction of simulated no-change runs (n per arm in abba_order, iid normal log noise with
    sd ``sd`` plus a linear drift of ``slope`` log units per invocation) that compare calls a win."""
    if n_simulations <= 0:
        return 0.0
    order = abba_order(n, warmup)
    oa = np.array([i for i, lab in enumerate(order) if lab == BASE], float)
    ob = np.array([i for i, lab in enumerate(order) if lab == HEAD], float)
    wins = 0
    for _ in range(n_simulations):
        za = slope * oa + rng.normal(0.0, sd, oa.size)
        zb = slope * ob + rng.normal(0.0, sd, ob.size)
        r = compare(np.exp(za), np.exp(zb), direction="higher", alpha=alpha, floor_pct=floor_pct,
                    base_order=oa, head_order=ob)
        wins += r.verdict == WIN
    return wins / n_simulations


def calibrate(a_values: Sequence[float], a_order: Sequence[float] | None,
              b_values: Sequence[float], b_order: Sequence[float] | None, *,
              alpha: float = 0.05, target_mde_pct: float = 5.0, n_min: int = 6, n_max: int = 20,
              min_effect_pct: float = 1.0, probe_a: Sequence[float] | None = None,
              probe_b: Sequence[float] | None = None, power: float = 0.8,
              sd_floor_factor: float = 1.0, warmup: int = 1, n_permutations: int = 1024,
              n_simulations: int = 400, seed: int = 0) -> Calibration:
    """A/A calibration: measure the same build as two pseudo-arms (interleaved, one whole
    invocation per sample) and derive the noise, the plan and the effect floor.

    * **Analysis**: :func:`analyse` on (A, B) exactly as :func:`compare` would (drift -> paired,
      probe -> covariate). The observed A/A ``aa_delta_pct`` and ``aa_p_value`` come from it.
    * **Repeats**: :func:`repeats_for` with ``sd_log_plan`` (see :class:`Calibration`).
    * **Floor** (exact rule): ``floor_pct = max(min_effect_pct, ceil_0.1(|aa_delta_pct|),
      ceil_0.1(100 * (exp(sd_floor_factor * sd_log_plan) - 1)))`` where ``ceil_0.1`` rounds up to
      the next 0.1%. The A/A delta is a difference that exists with no change at all; one
      per-invocation sd is the smallest change a single lucky invocation could fake. The parts
      are in ``floor_parts``.
    * **False-win rate** (how often ``compare(..., floor_pct=floor_pct)`` says "win" when nothing
      changed), two estimates, the larger reported:
      *permutation* — the A/A data themselves, relabelled by swapping A and B inside adjacent
      pairs (so every relabelling is still an ABBA-style interleaving at the same positions,
      drift kept in place); all ``2**pairs`` relabellings when that is at most ``n_permutations``,
      otherwise ``n_permutations`` random ones from ``seed``;
      *parametric* — ``n_simulations`` seeded runs of ``repeats`` per arm in :func:`abba_order`
      with normal log noise of sd ``sd_log_plan`` (the noise the chosen test will face) plus,
      when drift was detected, the A/A's fitted linear drift per invocation.
    """
    rng = np.random.default_rng(seed)
    an = analyse(a_values, b_values, base_order=a_order, head_order=b_order,
                 base_probe=probe_a, head_probe=probe_b)
    na, nb = int(an.base.size), int(an.head.size)
    est = an.estimate
    if est is None:
        floor = max(min_effect_pct, 0.0)
        return Calibration(
            ok=False, n_a=na, n_b=nb, sd_log=an.sd_log, sd_log_effective=an.sd_log,
            sd_log_with_probe=None, sd_log_plan=an.sd_log,
            drift=bool(an.drift and an.drift.detected),
            drift_note=an.drift.reason if an.drift else "", trend_pct=an.drift.trend_pct if an.drift else 0.0,
            method="none", aa_delta_pct=0.0, aa_p_value=1.0, floor_pct=floor, repeats=n_max,
            mde_pct=math.inf, mde_pct_with_probe=None, target_mde_reached=False,
            false_win_rate=1.0, false_win_rate_permutation=1.0, false_win_rate_parametric=1.0,
            n_permutations=0, n_simulations=0, note=f"A/A not analysable: {an.problem}",
            floor_parts={"min_effect_pct": min_effect_pct})
    sd_eff = an.sd_log_no_probe
    sd_probe = an.sd_log_with_probe
    sd_plan = min(sd_eff, sd_probe) if sd_probe is not None else sd_eff
    repeats = repeats_for(sd_plan, target_mde_pct, alpha, power, n_min, n_max)
    mde = mde_pct(sd_eff, repeats, alpha, power)
    mde_probe = mde_pct(sd_probe, repeats, alpha, power) if sd_probe is not None else None
    aa_delta = _pct(est.delta_log)
    p = est.p if math.isfinite(est.p) else 1.0
    parts = {"min_effect_pct": float(min_effect_pct),
             "aa_delta_pct": _round_up(abs(aa_delta)),
             "sd_pct": _round_up(_pct(sd_floor_factor * sd_plan))}
    floor = max(parts.values())

    a_arr, b_arr = an.base, an.head
    if a_order is not None and b_order is not None and len(a_order) == na and len(b_order) == nb:
        oa, ob = np.asarray(a_order, float), np.asarray(b_order, float)
    else:   # no usable run order: treat sample i of A and of B as one adjacent pair
        oa, ob = 2.0 * np.arange(na), 2.0 * np.arange(nb) + 1
    pa = np.asarray(probe_a, float) if probe_a is not None and len(probe_a) == na else None
    pb = np.asarray(probe_b, float) if probe_b is not None and len(probe_b) == nb else None
    if pa is None or pb is None:
        pa = pb = None
    fw_perm, n_perm = _permutation_false_wins(
        a_arr, b_arr, oa, ob, pa, pb, alpha=alpha, floor_pct=floor,
        n_permutations=n_permutations, rng=rng)
    drift = an.drift
    slope = drift.slope_log if drift is not None and drift.detected else 0.0
    fw_param = _parametric_false_wins(sd_plan, slope, repeats, warmup, alpha=alpha, floor_pct=floor,
                                      n_simulations=n_simulations, rng=rng)
    notes = list(an.notes)
    if mde > target_mde_pct and (mde_probe is None or mde_probe > target_mde_pct):
        notes.append(f"target MDE {target_mde_pct:g}% not reachable within {n_max} repeats")
    return Calibration(
        ok=True, n_a=na, n_b=nb, sd_log=an.sd_log, sd_log_effective=sd_eff,
        sd_log_with_probe=sd_probe, sd_log_plan=sd_plan,
        drift=bool(drift and drift.detected), drift_note=drift.reason if drift else "",
        trend_pct=drift.trend_pct if drift else 0.0, method=est.method,
        aa_delta_pct=aa_delta, aa_p_value=p, floor_pct=floor, repeats=repeats, mde_pct=mde,
        mde_pct_with_probe=mde_probe,
        target_mde_reached=min(mde, mde_probe if mde_probe is not None else math.inf) <= target_mde_pct,
        false_win_rate=max(fw_perm, fw_param), false_win_rate_permutation=fw_perm,
        false_win_rate_parametric=fw_param, n_permutations=n_perm, n_simulations=n_simulations,
        note="; ".join(notes), floor_parts=parts)


# --------------------------------------------------------------------------- sanity


def _pair_fields(pair: Any) -> tuple[str, str, float, float]:
    if isinstance(pair, (tuple, list)):
        a, b, prod, tol = pair
    else:   # e.g. config.InversePair
        a, b, prod, tol = pair.a, pair.b, pair.product, pair.tolerance
    return str(a), str(b), float(prod), float(tol)


def sanity_problems(base_samples: dict[str, list[float]], *, max_spread: float = 3.0,
                    inverse_pairs: Sequence[Any] = ()) -> list[str]:
    """Reasons not to trust a benchmark's baseline numbers at all (a broken parser, typically);
    empty when none. Checks, per metric: at least one value; every value finite and > 0;
    ``max / min <= max_spread`` (the original llama.cpp run lost hours to a script that reported
    14 tok/s instead of 52 on some invocations). Per inverse pair ``(a, b, product, tolerance)``
    (tuples or objects with those attributes): both metrics present, and for every invocation
    ``|a_i * b_i - product| / product <= tolerance`` (e.g. tok/s x ms/tok = 1000).
    """
    problems: list[str] = []
    for name, values in base_samples.items():
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            problems.append(f"{name}: no baseline samples")
            continue
        if not np.all(np.isfinite(v)):
            problems.append(f"{name}: non-finite baseline values")
            continue
        if np.any(v <= 0):
            problems.append(f"{name}: non-positive baseline values (min {float(v.min()):g})")
            continue
        spread = float(v.max() / v.min())
        if spread > max_spread:
            problems.append(f"{name}: baseline max/min = {spread:.2f} ({float(v.min()):g} .. "
                            f"{float(v.max()):g}) exceeds {max_spread:g}; is the parser reading "
                            "the right line?")
    for pair in inverse_pairs:
        a, b, prod, tol = _pair_fields(pair)
        missing = [m for m in (a, b) if not base_samples.get(m)]
        if missing:
            problems.append(f"inverse pair {a} x {b}: no baseline samples of {', '.join(missing)}")
            continue
        va, vb = np.asarray(base_samples[a], float), np.asarray(base_samples[b], float)
        if va.size != vb.size:
            problems.append(f"inverse pair {a} x {b}: {va.size} vs {vb.size} samples; "
                            "cannot check per invocation")
            continue
        with np.errstate(all="ignore"):
            dev = np.abs(va * vb - prod) / prod
        bad = [i for i, d in enumerate(dev) if not d <= tol]
        if bad:
            i = bad[0]
            problems.append(f"inverse pair {a} x {b} should be {prod:g} (+-{100 * tol:g}%): "
                            f"invocation {i} gives {va[i]:g} x {vb[i]:g} = {va[i] * vb[i]:g}"
                            + (f" ({len(bad)} of {dev.size} invocations off)" if len(bad) > 1 else ""))
    return problems
