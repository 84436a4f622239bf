"""The wall-clock guard gives up when its remaining pairs are unlikely to settle it (jobs/stats/curtail.py)."""
from __future__ import annotations

import math

import numpy as np

from jobs.measure.simulate import UNSETTLED, Comparison, Guard, stop_after_pair
from jobs.stats.curtail import GIVE_UP_BELOW, give_up, settle_chance

ARGS = dict(max_pairs=20, tolerance_pct=5.0, alpha=0.05)


def pairs(values: list[float], scale: float) -> tuple[np.ndarray, np.ndarray]:
    y = np.log1p(np.array(values) / 100)
    return y, np.full(y.size, scale)


# Twelve pairs of a noisy machine (about 20% a pair) around a small gain: at 20 pairs the guard's
# interval is still far wider than the 5% tolerance, and nothing leans to a loss.
NOISY = [25, -17, 12, -21, 30, -11, 4, 19, -26, 15, 8, -6]
# The same machine, a candidate 12% slower: the pairs lean below zero from the start.
SLOWER = [-25, -3, -18, -14, 2, -22, -9, -16, -30, -5, -11, -20]


def test_noisy_pairs_around_a_gain_are_not_going_to_settle_by_the_cap():
    y, s = pairs(NOISY, 0.20)
    chance = settle_chance(y, s, **ARGS)
    assert chance < GIVE_UP_BELOW, chance
    assert give_up(y, s, **ARGS)


def test_a_real_slowdown_keeps_the_guard_sampling():
    y, s = pairs(SLOWER[:10], 0.15)
    assert settle_chance(y, s, **ARGS) > 0.5
    assert not give_up(y, s, **ARGS)


def test_a_quiet_machine_settles_so_the_guard_goes_on():
    y, s = pairs([0.4, -0.3, 0.1, 0.6, -0.2, 0.3, 0.0, -0.1, 0.2, 0.5], 0.01)
    assert settle_chance(y, s, **ARGS) > 0.9


def test_the_guard_never_gives_up_before_half_the_cap_nor_at_it():
    y, s = pairs(NOISY, 0.20)
    assert settle_chance(y[:9], s[:9], **ARGS) == 1.0             # a few pairs say too little of the noise's shape
    assert settle_chance(y[:10], s[:10], **ARGS) < 1.0
    assert settle_chance(y, s, **{**ARGS, "max_pairs": len(NOISY)}) == 1.0


def test_the_chance_is_a_pure_function_of_the_pairs():
    y, s = pairs(NOISY[:11], 0.20)
    assert settle_chance(y, s, **ARGS) == settle_chance(y.copy(), s.copy(), **ARGS)


def test_the_stop_rule_gives_up_only_with_a_cap_and_a_simulated_saving():
    y, s = pairs(NOISY, 0.20)
    capped = Guard(5.0, 0.05, 3, 0.01, max_pairs=20)
    assert stop_after_pair(Comparison(100, 97), 0.5, y, s, capped) == UNSETTLED
    assert stop_after_pair(Comparison(100, 97), 0.5, y, s, Guard(5.0, 0.05, 3, 0.01)) == ""   # no cap: to the end
    # a discard by the count stops on its own rule, never as unsettled
    flat, s = pairs([v / 10 for v in NOISY], 0.02)
    assert stop_after_pair(Comparison(100, 100), 0.5, flat, s, capped) == "simulated"


def test_the_lean_the_verdict_tests_counts_as_settling():
    # A 6% slowdown at 3% noise: the interval alone may not clear -5% by the cap, the lean does.
    y, s = pairs([-6 + 3 * math.sin(i) for i in range(10)], 0.03)
    assert settle_chance(y, s, **ARGS) > 0.9


def test_slow_states_do_not_hide_a_shift_in_the_many_pairs():
    # A host with 2.9x slow states: most pairs see both processes alike (8% slower), a few see one
    # of them slow. The lean test sees the shift in the many, so going on is worth it.
    y, s = pairs([-8, -7, -9, 160, -8, -6, -65, -9, -8, -7], 0.30)
    assert settle_chance(y, s, **ARGS) > 0.5


def test_the_runner_gives_up_at_its_own_pair_cap():
    """Wired through the runner's stop rule: the spec's cap (its `stop.max_pairs`) is the guard's."""
    from jobs.contract.config import parse_config
    from jobs.contract.spec import ExperimentSpec, Invocation, RawResult, Rule
    from jobs.measure.runner import stop_reason
    from jobs.stats.sequential import pair_schedule
    config = parse_config("build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: tps, primary: true}]\n"
                          "editable: [src/**]\nsimulate: {command: ./b 10}\n")
    raw = RawResult(status="ok", simulated={"A": {"cycles": 1_000_000}, "B": {"cycles": 970_000}})
    for i, (first, seed) in enumerate(pair_schedule(len(NOISY), 3)):
        for position, arm in enumerate((first, "A" if first == "B" else "B")):
            tps = 100.0 * (1 + NOISY[i] / 100) if arm == "B" else 100.0
            raw.invocations.append(Invocation(arm=arm, pair=i, position=position, seed=seed, index=2 * i + position,
                                              wall_s=1.0, cpu_s=1.0, metrics={"tps": tps}))

    def spec(cap: int) -> ExperimentSpec:
        return ExperimentSpec.from_config(config, run_id="r", name="x", platform="p", base_commit="a", head_commit="b",
                                          n_per_arm=cap, simulate_floor_pct=0.5,
                                          stop=Rule(alpha_keep=0.0125, floor=0.01, target=0.05, max_pairs=cap))
    assert stop_reason(spec(20), raw) == UNSETTLED
    assert stop_reason(spec(40), raw) == ""        # 12 of 40: not yet half the cap
