"""Anytime-valid paired A/B decisions for benchmarks on noisy machines. Pure: numpy in, data out;
no I/O, and no randomness without an explicit seed.

The design, and why (measured on this project's shared 2-core machines, where one benchmark
process can run 2.9x slower than the next and repeats inside a process are correlated):

* **The unit is a pair**: one baseline and one candidate process, run back to back with the same
  input seed, in an order drawn by a fair coin (`pair_schedule`). The coin makes the two arms
  exchangeable: when nothing changed, the pair's log ratio is as likely to be +x as -x, whatever
  the machine does (drift, bimodal speed states, heavy tails). That symmetry is the only
  assumption the test makes; no normality, no constant variance.
* **The test bets on the sign-symmetric null** (a "test by betting" e-process; Shafer & Vovk,
  Waudby-Smith & Ramdas). Against "the improvement is at most d0", each pair multiplies a wealth by
  ``1 + lam * tanh(theta * (y - d0) / s)``, averaged over a fixed grid of (theta, lam) bets, where
  `y` is the pair's log ratio oriented so that positive = better and `s` is a noise scale fixed
  from data seen before the pair (calibration + earlier pairs). Under the null every factor has
  mean <= 1, so by Ville's inequality P(wealth ever reaches 1/alpha) <= alpha: the test may be
  checked after every pair and stopped at any time ("sequential sampling" with no alpha spent on
  peeking). Bounded bets (tanh) make one 3x outlier cost a bet, not the experiment; the
  large-theta, small-lambda bets act as a sign test, which is what still works when a third of the
  processes land in a slow state.
* **Decisions** (`decide`), checked after each pair: *keep* when the wealth against "improvement <=
  floor" reaches 1/alpha_keep (the interval clears the floor); *loss* when the wealth against
  "improvement >= -floor" reaches 1/alpha_loss; *futile* (non-binding, so it never adds false keeps)
  when the wealth against "improvement >= target" reaches 1/alpha_futility while the estimate is
  not a slowdown (a slowdown samples on until the loss is shown, so a report never calls a clear
  regression "no difference"); else sample on, to `max_pairs`. No veto for noise: noise only
  makes the wealth grow slower.
* **Nuisances are adjusted predictably**: the coin also decides which arm ran second, and a
  machine-speed probe is taken before each process (of an experiment, only where the calibration
  kept it as a nuisance); when the A/A calibration shows such an
  effect (pre-registered there, never chosen per experiment), a pair's ``y`` is corrected by
  ``beta @ z`` with ``z`` = (order sign, probe log ratio) and ``beta`` a robust (Huber) fit on
  earlier pairs and the calibration only. Flipping the coin flips ``z`` with ``y``, so the
  symmetry (and the guarantee) survives; a candidate cannot move ``beta`` for the pair it is
  measured in, and one pair in a slow state cannot drag it.
* **Across a run**, experiment ``i`` (in the order they start) gets ``alpha * w_i`` with weights
  ``1 / (i * H_M)`` over the run's ``M = max_experiments`` slots (`slot_alpha`): the chance of any
  false keep in the whole run is at most alpha, whatever the agent adds between waves.
* **Estimates**: the effect is the Hodges-Lehmann estimate of the pairs (robust to a slow state);
  the interval is the confidence sequence obtained by inverting the same tests at the
  experiment's alpha (running intersection), so "interval clears the floor" and "keep" agree.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from jobs.stats.meanbound import MIN_SCALE, mixture_width, winsorised, winsorised_prefixes
from jobs.contract.spec import Rule  # noqa: F401 (the experiment's stopping rule: part of its contract, used here)

THETAS = np.array([0.5, 1.0, 2.0, 8.0])
LAMBDAS = np.array([0.2, 0.5, 0.95])
BETS = np.array([(t, lam) for t in THETAS for lam in LAMBDAS])     # (theta, lambda) grid, equal weights
RIDGE = 1.0              # shrinkage (in pairs) of the nuisance fit towards no adjustment
HUBER = 1.345            # Huber's constant: residuals beyond it (in robust sds) are down-weighted
Q80 = 1.2816             # the 80th percentile of |N(0, 1)|
KEEP, LOSS, FUTILE, CONTINUE, EXHAUSTED = "keep", "loss", "futile", "continue", "exhausted"


# --------------------------------------------------------------------------- schedule


def pair_schedule(n_pairs: int, seed: int) -> list[tuple[str, int]]:
    """For each pair, which arm runs first ("A" baseline or "B" candidate) and the input seed both
    of its processes get. Drawn from `seed` alone, so a resumed run repeats it."""
    rng = np.random.default_rng(seed)
    firsts = rng.integers(0, 2, n_pairs)
    seeds = rng.integers(1, 2**31 - 1, n_pairs)
    return [("B" if f else "A", int(s)) for f, s in zip(firsts, seeds)]


def warmup_order(seed: int) -> list[str]:
    """One warm-up process per arm (results discarded), in a coin-drawn order."""
    return ["B", "A"] if np.random.default_rng(seed ^ 0x5EED).integers(0, 2) else ["A", "B"]


# --------------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    """One pair as the test sees it: ``y`` = log(candidate / baseline) of the metric, oriented so
    that positive means better; ``z`` the nuisance covariates (each flips sign with the labels)."""

    y: float
    z: tuple[float, ...] = ()


def orient(log_ratio: float, direction: str) -> float:
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    return log_ratio if direction == "higher" else -log_ratio


def to_pct(log_value: float) -> float:
    """A log ratio as a percentage change of the ratio (+inf beyond float range)."""
    if log_value > 700:
        return math.inf
    return 100.0 * math.expm1(log_value)


def to_log(pct: float) -> float:
    return math.log1p(pct / 100.0)


@dataclass(frozen=True)
class Prior:
    """What calibration hands to every experiment before its first pair: the A/A pairs' oriented
    log ratios and covariates (effect 0 by construction), used for the noise scale and the
    nuisance fit until the experiment's own pairs take over."""

    pairs: tuple[Pair, ...] = ()


def _nuisance_beta(ys: np.ndarray, zs: np.ndarray, prior: Prior) -> np.ndarray:
    """Robust ridge fit of y ~ 1 + z on the prior and earlier pairs; only z's coefficients are
    used. Huber weights (IRLS): a pair caught in a slow state must not drag the correction, or the
    correction itself would add that pair's noise to every later one."""
    k = zs.shape[1] if zs.ndim == 2 else 0
    if k == 0:
        return np.zeros(0)
    py = np.array([p.y for p in prior.pairs if len(p.z) >= k], float)
    pz = np.array([p.z[:k] for p in prior.pairs if len(p.z) >= k], float).reshape(-1, k)
    # The prior's effect is 0 and the experiment's is unknown: separate intercepts.
    n0, n1 = py.size, ys.size
    if n0 + n1 < k + 3:
        return np.zeros(k)
    X = np.zeros((n0 + n1, 2 + k))
    X[:n0, 0] = 1.0
    X[n0:, 1] = 1.0
    X[:n0, 2:] = pz
    X[n0:, 2:] = zs
    y = np.concatenate([py, ys])
    penalty = np.diag([1e-9, 1e-9] + [RIDGE] * k)     # tiny on the intercepts: one may be empty
    w = np.ones(y.size)
    beta = np.zeros(2 + k)
    for _ in range(6):
        Xw = X * w[:, None]
        try:
            beta = np.linalg.solve(X.T @ Xw + penalty, Xw.T @ y)
        except np.linalg.LinAlgError:
            return np.zeros(k)
        r = y - X @ beta
        scale = max(MIN_SCALE, 1.4826 * float(np.median(np.abs(r - np.median(r)))))
        w = np.minimum(1.0, HUBER * scale / np.maximum(np.abs(r), 1e-12))
    return beta[2:]


def _robust_scale(values: np.ndarray) -> float:
    """The noise scale of centred `values`: the larger of the MAD's and the 80th percentile of the
    absolute deviations' (each scaled to a normal's sd, so on normal noise both are the sd). The MAD
    alone collapses under bimodal noise: with a third of the processes 2.9x slower, over half the
    pairs have no slow process and the MAD sees only their 2% jitter; every bet then saturates into
    a sign bet that loses its stake on each pair a slow state flips, and a +100% candidate was kept
    only 80% of the time (issue 21). The 80th percentile sees the second mode whenever it holds
    more than a fifth of the pairs; a minority of outliers (heavy tails) leaves it near the MAD's."""
    if values.size < 3:
        return math.nan
    return float(robust_scales(values[None, :])[0])


def robust_scales(rows: np.ndarray) -> np.ndarray:
    """`_robust_scale` of each row of a 2-D array (no MIN_SCALE, no small-sample rule)."""
    dev = np.sort(np.abs(rows - _sorted_quantile(np.sort(rows, axis=1), 0.5)[:, None]), axis=1)
    return np.maximum(1.4826 * _sorted_quantile(dev, 0.5), _sorted_quantile(dev, 0.8) / Q80)


def _sorted_quantile(rows: np.ndarray, q: float) -> np.ndarray:
    """np.quantile(rows, q, axis=1) (linear interpolation) of rows already sorted: one sort
    serves both quantiles, and this is the inner loop of every simulation."""
    pos = (rows.shape[1] - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, rows.shape[1] - 1)
    return rows[:, lo] + (pos - lo) * (rows[:, hi] - rows[:, lo])


def adjusted(pairs: Sequence[Pair], prior: Prior = Prior()) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's nuisance-adjusted ``y`` and its predictable noise scale ``s`` (both computed
    from the prior and earlier pairs only)."""
    n = len(pairs)
    ys = np.array([p.y for p in pairs], float)
    k = min((len(p.z) for p in pairs), default=0)
    zs = np.array([p.z[:k] for p in pairs], float).reshape(n, k)
    prior_res = np.array([p.y for p in prior.pairs], float)
    adj = np.empty(n)
    scale = np.empty(n)
    for i in range(n):
        beta = _nuisance_beta(ys[:i], zs[:i], prior) if k else np.zeros(0)
        adj[i] = ys[i] - (float(zs[i] @ beta) if k else 0.0)
        past = np.concatenate([prior_res - np.median(prior_res) if prior_res.size else prior_res,
                               adj[:i] - np.median(adj[:i]) if i else adj[:0]])
        s = _robust_scale(past)
        scale[i] = max(MIN_SCALE, s if math.isfinite(s) else 0.05)
    return adj, scale


# --------------------------------------------------------------------------- e-processes


def log_wealth(y: np.ndarray, s: np.ndarray, d0: np.ndarray | float, side: str) -> np.ndarray:
    """Running log wealth (one value per pair) of the mixture bet against H0: improvement <= d0
    (`side="up"`) or >= d0 (`side="down"`), for each null value in `d0`. Shape (len(d0), n); for
    pairs given as rows (paths, n), shape (paths, len(d0), n)."""
    d0 = np.atleast_1d(np.asarray(d0, float))
    sign = 1.0 if side == "up" else -1.0
    u = sign * (y[..., None, :] - d0[:, None]) / s[..., None, :]       # (..., m, n)
    factors = 1.0 + BETS[:, 1] * np.tanh(BETS[:, 0] * u[..., None])
    paths = np.cumsum(np.log(np.maximum(factors, 1e-300)), axis=-2)   # (..., m, n, k)
    top = paths.max(axis=-1, keepdims=True)
    return (top + np.log(np.mean(np.exp(paths - top), axis=-1, keepdims=True)))[..., 0]


@dataclass(frozen=True)
class StopDecision:
    kind: str                         # keep | loss | futile | continue | exhausted
    n: int                            # pairs used
    at: int                           # pairs at which the decision was first reached (0: none)
    wealth_keep: float                # final wealth against "improvement <= floor"
    wealth_loss: float
    wealth_futility: float


def mean_lower_bounds(y: np.ndarray, alpha: float, prior: Prior = Prior(), start: int = 2) -> np.ndarray:
    """After each pair, a lower confidence bound (log units, oriented) of the *mean* improvement:
    the pairs winsorised at MEAN_REACH robust scales around their median, minus the time-uniform
    normal-mixture width. The bets of the keep test are bounded, and their large-theta bets are
    sign bets: they reject "symmetric about the floor" for a candidate that is +3% in 85% of the
    processes and -25% in the rest, slower on average (kept 3-6% at level 1.25%, issue 21). A keep
    therefore also needs this bound to clear the floor. Winsorising keeps symmetric slow states and
    heavy tails from swamping it (symmetric noise does not move the mean), at a price: a loss more
    than MEAN_REACH scales from the median counts as MEAN_REACH scales. The spread is never taken
    below the A/A pairs' (winsorised alike): a run that has not yet met its rare losses looks
    quieter than the machine is, and a few lucky pairs must not make the bound tight. The bound is
    asymptotic; the false-keep guarantee rests on the exact test, which a keep needs as well.
    Bounds before `start` pairs are left at -inf (not computed)."""
    base = np.array([p.y for p in prior.pairs], float)
    base_sd = winsorised(base)[1] if base.size >= 3 else 0.0
    rows = np.atleast_2d(np.asarray(y, float))
    out = np.full(rows.shape, -math.inf)
    first = max(2, start)
    if first <= rows.shape[1]:
        ns = np.arange(first, rows.shape[1] + 1)
        mean, sd = winsorised_prefixes(rows, ns)
        widths = np.array([mixture_width(int(n), alpha) for n in ns])
        out[:, first - 1:] = mean - np.maximum(sd, base_sd) * widths
    return out if np.ndim(y) == 2 else out[0]


def decide(y: np.ndarray, s: np.ndarray, rule: Rule, prior: Prior = Prior()) -> StopDecision:
    """The first stopping event among keep/loss/futile at or after `min_pairs`; `continue` while
    below `max_pairs`, `exhausted` at it. A keep needs the sign-symmetric test to have rejected
    "improvement <= floor" (at any time so far: Ville's inequality bounds the running maximum) and
    the mean's lower bound (`mean_lower_bounds`) to clear the floor now."""
    n = y.size
    if n == 0:
        return StopDecision(CONTINUE, 0, 0, 1.0, 1.0, 1.0)
    kinds, at, wealth = decide_paths(y[None, :], s[None, :], rule, prior)
    i = (at[0] or n) - 1
    return StopDecision(str(kinds[0]), n, int(at[0]), *_exp(*(float(w[0, i]) for w in wealth)))


def decide_paths(ys: np.ndarray, ss: np.ndarray, rule: Rule, prior: Prior = Prior(), *,
                 lower_bounds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """`decide` for many paths of equal length at once (rows of `ys`, their scales in `ss`): each
    path's kind, the pairs at which it was reached (0: none) and the running log wealths (keep,
    loss, futility). The one copy of the rule: `decide` is this on one row, and the power
    simulation runs it on all of its paths in one pass. `lower_bounds`: `mean_lower_bounds(ys,
    rule.alpha_keep, prior)` when the caller already has it (the power simulation shifts one set
    of noise paths by each effect it tries, and the bound shifts with them)."""
    n = ys.shape[1]
    keep = log_wealth(ys, ss, rule.floor, "up")[:, 0]
    loss = log_wealth(ys, ss, -rule.floor, "down")[:, 0]
    fut = log_wealth(ys, ss, rule.futility, "down")[:, 0]
    running = np.cumsum(ys, axis=1) / np.arange(1, n + 1)
    rejected = np.maximum.accumulate(keep, axis=1) >= math.log(1 / rule.alpha_keep)
    bounds = mean_lower_bounds(ys, rule.alpha_keep, prior) if lower_bounds is None else lower_bounds
    clears = bounds > rule.floor
    events = np.stack([rejected & clears,                                    # checked in this order
                       loss >= math.log(1 / rule.alpha_loss),
                       (fut >= math.log(1 / rule.alpha_futility)) & (running > -rule.floor)])
    events[:, :, :rule.min_pairs - 1] = False
    stopped = events.any(axis=0)
    at = np.where(stopped.any(axis=1), np.argmax(stopped, axis=1) + 1, 0)
    first = np.argmax(events[:, np.arange(ys.shape[0]), np.maximum(at - 1, 0)], axis=0)
    undecided = EXHAUSTED if n >= rule.max_pairs else CONTINUE
    kinds = np.where(at > 0, np.array([KEEP, LOSS, FUTILE])[first], undecided)
    return kinds, at, (keep, loss, fut)


def _exp(*logs: float) -> tuple[float, ...]:
    return tuple(math.exp(min(x, 700.0)) for x in logs)


def confidence_sequence(y: np.ndarray, s: np.ndarray, alpha: float) -> tuple[float, float]:
    """Lower and upper bound (log units, oriented) of the running-intersection confidence
    sequence at level `alpha` per side: every improvement value not rejected at any time."""
    if y.size == 0:
        return -math.inf, math.inf
    spread = float(np.max(np.abs(y)) + 4 * np.max(s))
    grid = np.linspace(-spread, spread, 1601)
    bar = math.log(1 / alpha)
    up = log_wealth(y, s, grid, "up").max(axis=1) >= bar          # rejects "improvement <= d0"
    down = log_wealth(y, s, grid, "down").max(axis=1) >= bar      # rejects "improvement >= d0"
    lo = float(grid[up].max()) if up.any() else -math.inf
    hi = float(grid[down].min()) if down.any() else math.inf
    # The grid point is only where the bound starts: refine it between grid points (each bet is
    # monotone in d0), or a printed bound sits below the floor the keep says it clears.
    step = float(grid[1] - grid[0])
    if math.isfinite(lo):
        lo = _edge(lambda d: log_wealth(y, s, d, "up").max(axis=1) >= bar, lo, lo + step)
    if math.isfinite(hi):
        hi = _edge(lambda d: log_wealth(y, s, d, "down").max(axis=1) >= bar, hi, hi - step)
    return lo, hi


def _edge(rejected, inside: float, outside: float, rounds: int = 3, points: int = 33) -> float:
    """The d0 nearest `outside` for which `rejected(d0)` (vectorised) still holds, between `inside`
    (it does) and `outside` (it does not): `rounds` of `points`-point grids, so the returned value
    always satisfies it and lies within (outside - inside) / 32**rounds of the edge."""
    for _ in range(rounds):
        grid = np.linspace(inside, outside, points)
        ok = rejected(grid)
        k = int(np.flatnonzero(ok).max()) if ok.any() else 0
        inside, outside = float(grid[k]), float(grid[min(k + 1, points - 1)])
    return inside


def always_valid_p(y: np.ndarray, s: np.ndarray, d0: float = 0.0) -> float:
    """Two-sided anytime-valid p-value for "the improvement is d0": 2 / the larger running
    maximum wealth of the two one-sided bets, capped at 1."""
    if y.size == 0:
        return 1.0
    best = max(float(log_wealth(y, s, d0, "up")[0].max()), float(log_wealth(y, s, d0, "down")[0].max()))
    return float(min(1.0, 2.0 * math.exp(-best)))


def hodges_lehmann(y: np.ndarray) -> float:
    """Median of the Walsh averages: the effect estimate that matches a signed-rank view of the
    pairs and ignores a minority of pairs caught in a slow state."""
    if y.size == 0:
        return 0.0
    i, j = np.triu_indices(y.size)
    return float(np.median((y[i] + y[j]) / 2.0))


# --------------------------------------------------------------------------- run-level error control


def harmonic(m: int) -> float:
    return float(np.sum(1.0 / np.arange(1, m + 1)))


def slot_alpha(alpha: float, slot: int, family: int) -> float:
    """The keep level of the `slot`-th experiment (1-based, in the order experiments start) when a
    run may measure at most `family` of them: ``alpha / (slot * H_family)``. The weights sum to 1,
    so the family-wise chance of any false keep is at most `alpha` (weighted Bonferroni; valid
    whatever decides which hypothesis fills a slot, since each slot's test uses fresh pairs).
    0 beyond the family: such an experiment could never be kept."""
    if family < 1 or slot < 1:
        raise ValueError("slot and family start at 1")
    if slot > family:
        return 0.0
    return alpha / (slot * harmonic(family))


def min_pairs_to_keep(alpha: float, limit: int = 10_000) -> int:
    """The fewest pairs in which any keep at level `alpha` is possible: even when every pair wins
    by far more than the noise, each bet can at most multiply by ``1 + lambda``. A pair cap below
    this cannot keep anything, however large the speed-up."""
    bar = math.log(1 / alpha)
    growth = np.log1p(BETS[:, 1])
    for n in range(1, limit + 1):
        top = float(np.max(n * growth))
        if top + math.log(np.mean(np.exp(n * growth - top))) >= bar:
            return n
    return limit


@dataclass(frozen=True)
class Summary:
    """Everything a report needs about one metric's paired comparison."""

    n: int
    estimate: float                   # HL, oriented log units
    lo: float                         # confidence-sequence bounds at `alpha`, oriented log units
    hi: float
    p_value: float
    alpha: float
    wealth_keep: float
    wealth_loss: float
    scale: float                      # last predictable noise scale (log units)
    notes: tuple[str, ...] = field(default_factory=tuple)


def running_max_wealth(y: np.ndarray, s: np.ndarray, d0: float, side: str) -> float:
    """The largest wealth the one-sided bet against d0 reached at any time (what a test that was
    checked after every pair would have seen)."""
    if y.size == 0:
        return 1.0
    return math.exp(min(700.0, float(log_wealth(y, s, d0, side)[0].max())))


def summarize(pairs: Sequence[Pair], rule: Rule, prior: Prior = Prior()) -> Summary:
    y, s = adjusted(pairs, prior)
    lo, hi = confidence_sequence(y, s, rule.alpha_keep)
    return Summary(n=y.size, estimate=hodges_lehmann(y), lo=lo, hi=hi, p_value=always_valid_p(y, s),
                   alpha=rule.alpha_keep, wealth_keep=running_max_wealth(y, s, rule.floor, "up"),
                   wealth_loss=running_max_wealth(y, s, -rule.floor, "down"),
                   scale=float(s[-1]) if s.size else math.nan)
