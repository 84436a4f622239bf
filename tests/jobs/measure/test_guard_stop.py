"""The wall-clock guard's stop rule after each pair (`jobs.measure.simulate.stop_after_pair`) computes the
interval only once one of its ends may have passed a boundary (`may_pass`). That must change when
it computes, never what it decides: on paths of every noise the project models, each prefix stops
exactly where the rule that computes the interval after every pair stops."""
from __future__ import annotations

import numpy as np
import pytest

from jobs.measure.simulate import Comparison, Guard, may_pass, stop_after_pair, wall_interval
from jobs.stats.curtail import give_up
from jobs.stats.sequential import Pair, adjusted, to_log, to_pct

GUARD = Guard(tolerance_pct=5.0, alpha=0.05 / 3.6, min_pairs=3, claim_alpha=0.05 / 3.6, max_pairs=24)
SAVED, NOT_SAVED = Comparison(1_000_000, 950_000), Comparison(1_000_000, 999_000)


def every_pair_rule(sim: Comparison, floor: float, y, s, guard: Guard) -> str:
    """The rule as it was: the interval after every pair."""
    if len(y) < guard.min_pairs:
        return ""
    if sim.saving_pct < floor:
        if to_pct(float(np.median(y))) < guard.tolerance_pct:
            return "simulated"
        lo, hi = wall_interval(y, s, guard.claim_alpha)
        return "claimed" if lo > 0 else "simulated" if hi < guard.tolerance_pct else ""
    lo, hi = wall_interval(y, s, guard.alpha)
    if lo > -guard.tolerance_pct:
        return "guarded"
    if hi < -guard.tolerance_pct:
        return "loss"
    if give_up(y, s, max_pairs=guard.max_pairs, tolerance_pct=guard.tolerance_pct, alpha=guard.alpha):
        return "unsettled"
    return ""


def path(rng: np.random.Generator, effect_pct: float, noise: str, n: int) -> list[Pair]:
    """Pair log ratios (+ is better) with `effect_pct` and the noise of a quiet machine, tg128's, a
    busy day's, or processes switching between a fast and a 2.9x slower state."""
    effect = to_log(effect_pct)
    if noise == "states":
        slow = rng.random((n, 2)) < 0.3
        y = effect + np.log(np.where(slow[:, 0], 2.9, 1.0)) - np.log(np.where(slow[:, 1], 2.9, 1.0))
        y = y + rng.normal(0, 0.01, n)
    else:
        y = effect + rng.normal(0, {"quiet": 0.003, "tg128": 0.035, "busy": 0.41}[noise], n)
    return [Pair(float(v)) for v in y]


CASES = [(effect, noise, sim) for noise in ("quiet", "tg128", "busy", "states")
         for effect in (-12.0, -5.0, 0.0, 5.0, 40.0) for sim in (SAVED, NOT_SAVED)]


@pytest.mark.parametrize("effect, noise, sim", CASES)
def test_it_stops_where_the_interval_after_every_pair_stops(effect, noise, sim):
    rng = np.random.default_rng(abs(hash((effect, noise, sim.head))) % 2**32)
    pairs = path(rng, effect, noise, GUARD.max_pairs)
    for n in range(1, len(pairs) + 1):
        y, s = adjusted(pairs[:n])
        assert stop_after_pair(sim, 0.5, y, s, GUARD) == every_pair_rule(sim, 0.5, y, s, GUARD), (n, effect, noise)


def test_may_pass_is_true_wherever_an_end_has_passed():
    rng = np.random.default_rng(7)
    checked = passed = 0
    for _ in range(150):
        pairs = path(rng, float(rng.choice([-8.0, -5.0, -2.0, 0.0, 3.0, 20.0])),
                     str(rng.choice(["quiet", "tg128", "states"])), int(rng.integers(3, 20)))
        y, s = adjusted(pairs)
        lo, hi = wall_interval(y, s, GUARD.alpha)
        for pct in (-GUARD.tolerance_pct, 0.0, GUARD.tolerance_pct):
            for side, beyond in (("up", lo > pct), ("down", hi < pct)):
                checked += 1
                passed += beyond
                assert may_pass(y, s, pct, GUARD.alpha, side) or not beyond, (pct, side, lo, hi)
    assert 0 < passed < checked          # both kinds of prefix were met


def test_on_a_quiet_machine_no_interval_is_searched_before_the_pair_that_settles_the_guard():
    # What the change buys: before the guard can settle, no bet has won, so no grid is searched.
    pairs = path(np.random.default_rng(3), 0.0, "quiet", 16)
    prefixes = [adjusted(pairs[:n]) for n in range(1, 17)]
    first_pass = next(n for n, (y, s) in enumerate(prefixes, 1) if may_pass(y, s, -GUARD.tolerance_pct, GUARD.alpha, "up"))
    settled = next(n for n, (y, s) in enumerate(prefixes, 1) if wall_interval(y, s, GUARD.alpha)[0] > -GUARD.tolerance_pct)
    assert first_pass == settled > GUARD.min_pairs
