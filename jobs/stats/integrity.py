"""Reasons to distrust a candidate's numbers, and reasons to distrust a benchmark's. Pure.

A candidate can game a benchmark without failing its checks: skip work where the checks do not
look, reuse results cached by an earlier process, or move work where the benchmark's clock does
not see it (child processes, set-up outside the timed region). The runner therefore records, per
process, what the target cannot forge: its own wall time, the CPU time of the whole process tree
(every descendant is reaped inside the sandbox), the input seed it handed out, and the output
digest the benchmark printed (`DIGEST name=hex`). These functions compare them:

* `digest_problems`: in every pair both processes got the same seed, so equal outputs must give
  equal digests; a candidate that computes something else at the benchmarked positions differs.
* `clock_problems`, `clock_decision`: a real speed-up of the timed work makes the whole process
  cheaper on the clock the metric uses (declared per metric: `clock: wall|cpu`). Given the
  baseline's timed share of the process (at least `timed_share`), the claimed improvement implies
  a minimum saving of the runner's own clock. That is a sequential test of its own, not a glance
  at an interval that is still wide when the metric decides: a keep is final only once the
  runner's clock confirms a saving of that order, and a candidate whose clock excludes it is
  `invalid` (the runner samples on, to the cap, until the clock decides). Both sides are tested at
  the run's alpha: the keep level already guards against a null; this guards against a cheat.
* `inverse_problems`: two metrics that must agree per process (tok/s x ms/tok = 1000).
* `parser_problems` vs `load_flags`: a baseline whose metric swings without the process's own
  time swinging with it is a broken parser (stop); one whose metric and process time swing
  together is a loaded machine (sample on, and say so).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def digest_problems(pairs: Sequence[tuple[dict[str, str], dict[str, str]]]) -> list[str]:
    """`pairs`: (baseline digests, candidate digests) per pair, both from the same input seed."""
    problems = []
    for i, (a, b) in enumerate(pairs):
        for name, value in sorted(a.items()):
            if name not in b:
                problems.append(f"pair {i + 1}: the candidate printed no DIGEST {name} (the baseline did)")
            elif b[name] != value:
                problems.append(f"pair {i + 1}: DIGEST {name} is {b[name][:16]} for the candidate and "
                                f"{value[:16]} for the baseline on the same input: it computes something else")
        if problems:
            break                          # one pair says it; the rest would repeat it
    return problems


def nondeterministic_digests(pairs: Sequence[tuple[dict[str, str], dict[str, str]]]) -> list[str]:
    """Digest names that differ between two processes of the *same* build with the same seed (an
    A/A calibration): those cannot serve as an integrity check on this target."""
    bad = set()
    for a, b in pairs:
        bad |= {name for name in a if name in b and a[name] != b[name]}
    return sorted(bad)


def required_saving(claim: float, timed_share: float) -> float:
    """Least log saving of the whole process implied by a claimed improvement `claim` (oriented
    log ratio > 0) of work that takes at least `timed_share` of the process: with the rest of the
    process unchanged, T_new / T_old = 1 - share * (1 - exp(-claim))."""
    if claim <= 0:
        return 0.0
    return -math.log1p(-timed_share * -math.expm1(-claim))


def clock_problems(metric: str, claim_lo: float, clock: str, saving_hi: float, saving_pct: float,
                   timed_share: float) -> list[str]:
    """`claim_lo`: the lower bound of the metric's improvement (oriented log); `saving_hi`: the upper
    bound of the runner's own saving on `clock` (log of base/candidate process time). A claim the
    runner's clock cannot account for even at their most favourable is a problem."""
    if claim_lo <= 0:
        return []
    need = required_saving(claim_lo, timed_share)
    if saving_hi >= need:
        return []
    what = "CPU time of the whole process tree" if clock == "cpu" else "wall time"
    return [f"{metric} claims at least {100 * math.expm1(claim_lo):+.1f}%, which needs the process's "
            f"{what} to fall by at least {100 * -math.expm1(-need):.1f}% (timed share >= {timed_share:g}); "
            f"the runner measured {saving_pct:+.1f}% (at most {100 * -math.expm1(-saving_hi):.1f}%): the work "
            "went where the benchmark's clock does not see it (child processes, untimed set-up, a cache)"]


CONFIRMED, EXCLUDED, UNDECIDED = "confirmed", "excluded", "undecided"


def clock_decision(y: np.ndarray, s: np.ndarray, need: float, alpha_confirm: float, alpha_exclude: float) -> str:
    """The runner's own clock as a sequential test, with the paired e-process of `jobs.stats.sequential`
    on `y` = log(baseline time / candidate time) per pair (the saving) and its scale `s`:
    *excluded* once the wealth against "the saving is at least `need`" reaches 1/alpha_exclude (the
    clock's interval excludes what the claim implies: the result is invalid); *confirmed* once the
    wealth against "the saving is at most need/2" reaches 1/alpha_confirm (the clock shows a
    saving of the claimed order); else *undecided* (sample on). Whichever happened first wins."""
    from jobs.stats.sequential import log_wealth
    if need <= 0:
        return CONFIRMED
    if y.size == 0:
        return UNDECIDED
    ex = np.flatnonzero(log_wealth(y, s, need, "down")[0] >= math.log(1 / alpha_exclude))
    co = np.flatnonzero(log_wealth(y, s, need / 2, "up")[0] >= math.log(1 / alpha_confirm))
    if ex.size and (not co.size or ex[0] <= co[0]):
        return EXCLUDED
    return CONFIRMED if co.size else UNDECIDED


def inverse_problems(per_process: Sequence[dict[str, float]], inverse_pairs: Sequence[Any], who: str) -> list[str]:
    """Per process, ``a * b`` must be ``product`` within ``tolerance`` for every declared pair."""
    problems = []
    for pair in inverse_pairs:
        a, b, prod, tol = pair.a, pair.b, float(pair.product), float(pair.tolerance)
        bad = [(i, m[a], m[b]) for i, m in enumerate(per_process)
               if a in m and b in m and not abs(m[a] * m[b] - prod) / prod <= tol]
        if bad:
            i, va, vb = bad[0]
            problems.append(f"{who}: {a} x {b} should be {prod:g} (+-{100 * tol:g}%) but process {i + 1} gives "
                            f"{va:g} x {vb:g} = {va * vb:g}" + (f" ({len(bad)} of {len(per_process)} off)"
                                                                 if len(bad) > 1 else ""))
    return problems


def value_problems(per_process: Sequence[dict[str, float]], names: Sequence[str], who: str) -> list[str]:
    problems = []
    for name in names:
        vals = [m[name] for m in per_process if name in m]
        if any(not (math.isfinite(v) and v > 0) for v in vals):
            problems.append(f"{who}: {name} has values that are not positive numbers "
                            f"(min {min(vals):g}); a rate or a time must be > 0 (broken parser?)")
    return problems


def _spread(values: Sequence[float]) -> float:
    v = np.asarray(values, float)
    return float(v.max() / v.min()) if v.size and v.min() > 0 else math.inf


def parser_problems(metric: str, values: Sequence[float], clock_s: Sequence[float], max_spread: float) -> list[str]:
    """A baseline metric that spreads more than `max_spread` while the process's own time on the
    metric's clock does not move with it (rank correlation below 0.5, or a spread below the fourth
    root of the metric's): the benchmark output, not the machine, is moving. On a loaded machine the
    two move together, the process time less so when an untimed set-up dilutes it."""
    if len(values) < 3 or len(values) != len(clock_s):
        return []
    spread = _spread(values)
    if spread <= max_spread:
        return []
    from scipy.stats import spearmanr
    with np.errstate(all="ignore"):
        rho = spearmanr(np.log(np.asarray(values, float)), np.log(np.asarray(clock_s, float))).statistic
    if math.isfinite(rho) and abs(rho) >= 0.5 and _spread(clock_s) >= spread ** 0.25:
        return []                                # the process itself swung: load, not the parser
    return [f"{metric}: baseline values spread {spread:.2f}x ({min(values):g} .. {max(values):g}) while the "
            f"processes' own time did not move with them (rank correlation {rho:.2f})"]


def load_flags(metric: str, base: Sequence[float], head: Sequence[float], max_spread: float,
               max_cv_pct: float) -> list[str]:
    """Warnings (never vetoes) that the machine was noisy while this metric was measured."""
    flags = []
    for who, values in (("baseline", base), ("candidate", head)):
        v = np.asarray(values, float)
        if v.size < 2 or v.min() <= 0:
            continue
        cv = 100 * float(np.std(v, ddof=1) / np.mean(v))
        spread = _spread(v)
        if spread > max_spread or cv > max_cv_pct:
            flags.append(f"{metric}: {who} CV {cv:.1f}%, max/min {spread:.2f} (a loaded machine: sampled on "
                         "until the paired test decided)")
    return flags
