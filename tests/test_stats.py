"""jobs.stats: known distributions with seeded RNGs; every assertion is one that could fail."""
from __future__ import annotations

import math
import re
from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as sps

from jobs.stats import (Calibration, abba_order, adjacent_pairs, calibrate, compare, cv_pct,
                        detect_drift, mde_pct, repeats_for, sanity_problems)

LOG50 = math.log(50.0)


def orders(n: int, warmup: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Global invocation indices of the A and B samples of abba_order(n, warmup)."""
    run = abba_order(n, warmup)
    return (np.array([i for i, x in enumerate(run) if x == "A"], float),
            np.array([i for i, x in enumerate(run) if x == "B"], float))


def lognormal(rng, n, sd, effect=0.0, mean=LOG50):
    return np.exp(rng.normal(mean + math.log1p(effect), sd, n))


def finite_fields(result) -> bool:
    """No NaN anywhere; inf only where documented (CI high, MDE of an untrusted result)."""
    return all(not (isinstance(v, float) and math.isnan(v)) for v in asdict(result).values())


# --------------------------------------------------------------------------- abba_order


@pytest.mark.parametrize("n", range(0, 13))
@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_abba_order_counts_and_shape(n, warmup):
    run = abba_order(n, warmup)
    assert run[:warmup] == ["W"] * warmup
    body = run[warmup:]
    assert body.count("A") == n and body.count("B") == n and len(body) == 2 * n
    # every consecutive pair of the measured part holds one A and one B
    assert all({body[k], body[k + 1]} == {"A", "B"} for k in range(0, 2 * n, 2))
    if n >= 4:
        assert "".join(body[:8]) == "ABBAABBA"


def test_abba_order_rejects_negative():
    with pytest.raises(ValueError):
        abba_order(-1, 0)


def test_adjacent_pairs_follow_run_order():
    oa, ob = orders(5, warmup=2)
    pairs = adjacent_pairs(oa, ob)
    assert len(pairs) == 5
    assert all(abs(oa[i] - ob[j]) == 1 for i, j in pairs)
    # sequential arms (AAAA BBBB) meet only once
    assert len(adjacent_pairs([0, 1, 2, 3], [4, 5, 6, 7])) == 1


# --------------------------------------------------------------------------- MDE and repeats


def test_mde_monotone_in_n_and_sd():
    for sd in (0.01, 0.03, 0.06, 0.1):
        values = [mde_pct(sd, n) for n in range(2, 41)]
        assert all(a > b for a, b in zip(values, values[1:]))
    for n in (3, 6, 20):
        values = [mde_pct(sd, n) for sd in (0.005, 0.01, 0.03, 0.06, 0.1)]
        assert all(a < b for a, b in zip(values, values[1:]))


def test_mde_edges():
    assert mde_pct(0.06, 1) == math.inf
    assert mde_pct(0.0, 10) == 0.0
    with pytest.raises(ValueError):
        mde_pct(-0.1, 10)


def test_mde_uses_t_not_z():
    sd, n = 0.06, 4
    z = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * sd * math.sqrt(2 / n)
    assert mde_pct(sd, n) > 100 * math.expm1(z) * 1.15      # small n pays for its df
    n = 200
    z = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * sd * math.sqrt(2 / n)
    assert mde_pct(sd, n) == pytest.approx(100 * math.expm1(z), rel=0.01)


def test_mde_has_the_power_it_claims():
    """At an effect equal to the MDE, a Welch test on log values rejects ~80% of the time."""
    rng = np.random.default_rng(11)
    sd, n, trials = 0.06, 8, 4000
    effect = math.log1p(mde_pct(sd, n) / 100)
    x = rng.normal(0, sd, (trials, n))
    y = rng.normal(effect, sd, (trials, n))
    power = np.mean(sps.ttest_ind(y, x, axis=1, equal_var=False).pvalue < 0.05)
    assert 0.75 <= power <= 0.84


def test_repeats_for_bounds_and_target():
    assert repeats_for(0.001, 5.0, n_min=6, n_max=20) == 6
    assert repeats_for(0.5, 5.0, n_min=6, n_max=20) == 20
    n = repeats_for(0.05, 6.0, n_min=3, n_max=40)
    assert 3 <= n <= 40
    assert mde_pct(0.05, n) <= 6.0 < mde_pct(0.05, n - 1)
    for sd in np.linspace(0.0, 0.2, 21):
        assert 4 <= repeats_for(float(sd), 5.0, n_min=4, n_max=12) <= 12
    with pytest.raises(ValueError):
        repeats_for(0.05, 5.0, n_min=10, n_max=5)


# --------------------------------------------------------------------------- compare


def test_clean_ten_percent_win():
    rng = np.random.default_rng(1)
    oa, ob = orders(8)
    r = compare(lognormal(rng, 8, 0.03), lognormal(rng, 8, 0.03, 0.10), direction="higher",
                base_order=oa, head_order=ob, name="tg128")
    assert r.verdict == "win", r
    assert r.name == "tg128" and r.n_base == 8 and r.n_head == 8
    assert 5 < r.delta_pct < 15 and r.ci_low_pct > 0 and r.ci_low_pct < r.delta_pct < r.ci_high_pct
    assert r.p_value < 0.001 and 0 < r.mde_pct < 10
    assert r.head_mean > r.base_mean > 0 and r.base_sd > 0
    assert finite_fields(r) and math.isfinite(r.ci_high_pct)


def test_welch_matches_scipy_without_order():
    rng = np.random.default_rng(2)
    base, head = lognormal(rng, 7, 0.05), lognormal(rng, 9, 0.02, 0.03)
    r = compare(base, head)
    expected = sps.ttest_ind(np.log(head), np.log(base), equal_var=False)
    assert "Welch" in r.method
    assert r.p_value == pytest.approx(expected.pvalue)
    gm = math.exp(np.mean(np.log(head)) - np.mean(np.log(base)))
    assert r.delta_pct == pytest.approx(100 * (gm - 1))
    ci = expected.confidence_interval(0.95)
    assert r.ci_low_pct == pytest.approx(100 * math.expm1(ci.low))
    assert r.ci_high_pct == pytest.approx(100 * math.expm1(ci.high))


def test_aa_false_win_rate_with_six_percent_cv():
    rng = np.random.default_rng(3)
    oa, ob = orders(8)
    verdicts = [compare(lognormal(rng, 8, 0.06), lognormal(rng, 8, 0.06), direction="higher",
                        floor_pct=0.0, base_order=oa, head_order=ob).verdict for _ in range(600)]
    wins, losses = verdicts.count("win") / 600, verdicts.count("loss") / 600
    assert wins <= 0.05 and losses <= 0.05
    assert wins + losses <= 0.08            # two-sided alpha 0.05 plus a little for test choice
    assert wins + losses > 0.01             # the test is not simply blind


def test_big_win_despite_high_cv():
    """A 1.6x win with 8% CV: a 'CV < 2%' gate would reject it; the test must not."""
    rng = np.random.default_rng(4)
    oa, ob = orders(6)
    base, head = lognormal(rng, 6, 0.08), lognormal(rng, 6, 0.08, 0.6)
    assert cv_pct(base) > 2 and cv_pct(head) > 2
    r = compare(base, head, direction="higher", base_order=oa, head_order=ob, floor_pct=5.0)
    assert r.verdict == "win" and r.delta_pct > 40


def test_small_effect_below_mde_is_no_detectable_difference():
    rng = np.random.default_rng(5)
    oa, ob = orders(6)
    r = compare(lognormal(rng, 6, 0.06), lognormal(rng, 6, 0.06, 0.02), direction="higher",
                base_order=oa, head_order=ob)
    assert r.verdict == "no detectable difference"
    assert r.mde_pct > 5
    m = re.search(r"MDE (\d+\.\d)%", r.note)
    assert m and float(m.group(1)) == pytest.approx(r.mde_pct, abs=0.05)


def test_significant_but_below_floor():
    rng = np.random.default_rng(6)
    base, head = lognormal(rng, 20, 0.002), lognormal(rng, 20, 0.002, 0.01)
    r = compare(base, head, floor_pct=3.0)
    assert r.p_value < 1e-6
    assert r.verdict == "no detectable difference" and "floor" in r.note and "MDE" in r.note
    assert compare(base, head, floor_pct=0.5).verdict == "win"


def test_direction_lower_flips():
    rng = np.random.default_rng(7)
    base, head = lognormal(rng, 8, 0.03), lognormal(rng, 8, 0.03, 0.10)
    assert compare(base, head, direction="higher").verdict == "win"
    assert compare(base, head, direction="lower").verdict == "loss"
    assert compare(head, base, direction="lower").verdict == "win"
    # a metric and its inverse (tok/s vs ms/tok) get the same verdict from the same data
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        b, h = lognormal(rng, 6, 0.05), lognormal(rng, 6, 0.05, 0.06)
        up = compare(b, h, direction="higher", floor_pct=2.0)
        down = compare(1000 / b, 1000 / h, direction="lower", floor_pct=2.0)
        assert up.verdict == down.verdict
        assert up.p_value == pytest.approx(down.p_value)
        assert (1 + up.delta_pct / 100) * (1 + down.delta_pct / 100) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        compare(base, head, direction="faster")


def drifting(rng, n, sd, drift_total, effect=0.0, sequential=False):
    oa, ob = orders(n)
    if sequential:
        oa, ob = np.arange(1, n + 1, dtype=float), np.arange(n + 1, 2 * n + 1, dtype=float)
    slope = math.log1p(drift_total) / (2 * n)
    a = np.exp(LOG50 + slope * oa + rng.normal(0, sd, n))
    b = np.exp(LOG50 + math.log1p(effect) + slope * ob + rng.normal(0, sd, n))
    return a, b, oa, ob


def test_drift_switches_to_paired_test():
    rng = np.random.default_rng(8)
    a, b, oa, ob = drifting(rng, 10, 0.02, 0.09)
    drift = detect_drift(np.log(a), np.log(b), oa, ob)
    assert drift.detected and 5 < drift.trend_pct < 13
    r = compare(a, b, base_order=oa, head_order=ob)
    assert "paired" in r.method and "trend" in r.method
    assert r.verdict == "no detectable difference"
    # without orders compare cannot know: plain Welch
    assert "Welch" in compare(a, b).method


def test_drift_with_abba_keeps_false_wins_low_but_sequential_order_would_not():
    rng = np.random.default_rng(9)
    trials, abba_wins, paired, seq_wins = 300, 0, 0, 0
    for _ in range(trials):
        a, b, oa, ob = drifting(rng, 10, 0.02, 0.09)
        r = compare(a, b, base_order=oa, head_order=ob, floor_pct=0.0)
        abba_wins += r.verdict == "win"
        paired += "paired" in r.method
        # the same drift with the arms run one after the other, judged by naive Welch
        a, b, *_ = drifting(rng, 10, 0.02, 0.09, sequential=True)
        seq_wins += compare(a, b, floor_pct=0.0).verdict == "win"
    assert abba_wins / trials <= 0.05
    assert paired / trials > 0.9
    assert seq_wins / trials > 0.5


def test_drift_with_non_interleaved_arms_is_untrusted():
    rng = np.random.default_rng(10)
    a, b, oa, ob = drifting(rng, 10, 0.01, 0.09, sequential=True)
    r = compare(a, b, base_order=oa, head_order=ob)
    assert r.verdict == "untrusted" and "interleaved" in r.note and finite_fields(r)


def test_paired_test_finds_win_through_drift():
    rng = np.random.default_rng(12)
    a, b, oa, ob = drifting(rng, 10, 0.02, 0.09, effect=0.05)
    r = compare(a, b, base_order=oa, head_order=ob, floor_pct=1.0)
    assert "paired" in r.method and r.verdict == "win" and 2 < r.delta_pct < 8


def slow_periods(rng, n, effect, slow_sd=0.06, noise_sd=0.01):
    """Slow periods hit the metric and the machine-speed probe together."""
    slow = rng.normal(0, slow_sd, 2 * n)
    a = np.exp(LOG50 + slow[:n] + rng.normal(0, noise_sd, n))
    b = np.exp(LOG50 + math.log1p(effect) + slow[n:] + rng.normal(0, noise_sd, n))
    pa = np.exp(slow[:n] + rng.normal(0, noise_sd, n))
    pb = np.exp(slow[n:] + rng.normal(0, noise_sd, n))
    return a, b, pa, pb


def test_probe_covariate_lowers_mde():
    rng = np.random.default_rng(13)
    oa, ob = orders(8)
    a, b, pa, pb = slow_periods(rng, 8, effect=0.04)
    plain = compare(a, b, base_order=oa, head_order=ob)
    probed = compare(a, b, base_order=oa, head_order=ob, base_probe=pa, head_probe=pb)
    assert "probe" in probed.method and "probe" not in plain.method
    assert probed.mde_pct < plain.mde_pct / 2
    assert plain.verdict == "no detectable difference" and probed.verdict == "win"
    assert 2 < probed.delta_pct < 6


def test_probe_is_ignored_when_malformed():
    rng = np.random.default_rng(14)
    a, b, pa, pb = slow_periods(rng, 6, effect=0.0)
    r = compare(a, b, base_probe=pa[:4], head_probe=pb)
    assert "probe" not in r.method and "base_probe ignored" in r.note
    r = compare(a, b, base_probe=-pa, head_probe=pb)
    assert "probe" not in r.method and "ignored" in r.note


def test_probe_false_wins_stay_low():
    rng = np.random.default_rng(15)
    oa, ob = orders(8)
    wins = 0
    for _ in range(300):
        a, b, pa, pb = slow_periods(rng, 8, effect=0.0)
        wins += compare(a, b, base_order=oa, head_order=ob, base_probe=pa, head_probe=pb,
                        floor_pct=0.0).verdict == "win"
    assert wins / 300 <= 0.05


@pytest.mark.parametrize("base,head,fragment", [
    ([50.0], [52.0, 53.0], "too few"),
    ([], [], "too few"),
    ([50.0, 50.0, 50.0], [52.0, 52.0, 52.0], "zero variance"),
    ([50.0, 0.0, 51.0], [52.0, 53.0, 51.0], "non-positive"),
    ([50.0, -3.0, 51.0], [52.0, 53.0, 51.0], "non-positive"),
    ([50.0, float("nan"), 51.0], [52.0, 53.0, 51.0], "non-finite"),
    ([50.0, 49.0, 51.0], [52.0, float("inf"), 51.0], "non-finite"),
])
def test_degenerate_inputs_are_untrusted_not_errors(base, head, fragment):
    r = compare(base, head, direction="higher", name="m")
    assert r.verdict == "untrusted" and fragment in r.note
    assert r.p_value == 1.0 and finite_fields(r)
    assert math.isfinite(r.base_mean) and math.isfinite(r.head_mean)


def test_one_constant_arm_is_still_tested():
    r = compare([50.0, 50.0, 50.0, 50.0], [55.0, 56.0, 54.5, 55.5])
    assert r.verdict == "win" and finite_fields(r)


def test_mismatched_orders_are_ignored_with_a_note():
    r = compare([50, 51, 49, 50], [55, 56, 54, 55], base_order=[1, 2], head_order=[3, 4, 5, 6])
    assert r.verdict == "win" and "Welch" in r.method and "base_order ignored" in r.note


# --------------------------------------------------------------------------- calibrate


def test_calibrate_aa_six_percent():
    rng = np.random.default_rng(16)
    oa, ob = orders(6)
    a, b = lognormal(rng, 6, 0.06), lognormal(rng, 6, 0.06)
    c = calibrate(list(a), list(oa), list(b), list(ob), alpha=0.05, target_mde_pct=5.0,
                  n_min=6, n_max=20, min_effect_pct=1.0, n_simulations=200, seed=1)
    assert isinstance(c, Calibration) and c.ok
    assert 0.03 < c.sd_log < 0.1 and c.sd_log_with_probe is None and c.mde_pct_with_probe is None
    assert 6 <= c.repeats <= 20
    assert c.mde_pct == pytest.approx(mde_pct(c.sd_log_effective, c.repeats))
    assert c.floor_pct >= 1.0
    assert c.floor_pct >= abs(c.aa_delta_pct)
    assert c.floor_pct >= 100 * math.expm1(c.sd_log_plan) - 1e-9
    assert c.floor_pct == max(c.floor_parts.values())
    assert 0.0 <= c.false_win_rate <= 1.0
    assert c.false_win_rate == max(c.false_win_rate_permutation, c.false_win_rate_parametric)
    assert c.n_permutations == 64            # 6 pairs: every relabelling enumerated
    assert c.false_win_rate <= 0.07
    # same seed, same answer
    again = calibrate(list(a), list(oa), list(b), list(ob), alpha=0.05, target_mde_pct=5.0,
                      n_min=6, n_max=20, min_effect_pct=1.0, n_simulations=200, seed=1)
    assert again == c


def test_calibrate_floor_rule_min_effect_dominates_when_quiet():
    rng = np.random.default_rng(17)
    oa, ob = orders(6)
    a, b = lognormal(rng, 6, 0.002), lognormal(rng, 6, 0.002)
    c = calibrate(a, oa, b, ob, alpha=0.05, target_mde_pct=5.0, n_min=6, n_max=20,
                  min_effect_pct=1.5, n_simulations=50)
    assert c.floor_pct == 1.5 and c.repeats == 6 and c.target_mde_reached


def test_calibrate_with_probe_and_drift():
    rng = np.random.default_rng(18)
    oa, ob = orders(8)
    a, b, pa, pb = slow_periods(rng, 8, effect=0.0)
    c = calibrate(a, oa, b, ob, alpha=0.05, target_mde_pct=3.0, n_min=6, n_max=20,
                  min_effect_pct=1.0, probe_a=pa, probe_b=pb, n_permutations=128,
                  n_simulations=100, seed=3)
    assert c.sd_log_with_probe is not None and c.sd_log_with_probe < c.sd_log_effective / 2
    assert c.mde_pct_with_probe < c.mde_pct and c.sd_log_plan == c.sd_log_with_probe
    assert c.n_permutations == 128 and 0 <= c.false_win_rate <= 0.07

    a, b, oa, ob = drifting(rng, 8, 0.02, 0.09)
    c = calibrate(a, oa, b, ob, alpha=0.05, target_mde_pct=5.0, n_min=6, n_max=20,
                  min_effect_pct=1.0, n_simulations=100)
    assert c.drift and "trend" in c.drift_note and "paired" in c.method
    assert c.false_win_rate <= 0.07


def test_calibrate_degenerate():
    c = calibrate([50.0], [0], [50.0, 51.0], [1, 2], alpha=0.05, target_mde_pct=5.0, n_min=6,
                  n_max=20, min_effect_pct=1.0)
    assert not c.ok and c.repeats == 20 and c.false_win_rate == 1.0 and "too few" in c.note


# --------------------------------------------------------------------------- sanity / CV


def test_cv_pct():
    assert cv_pct([50.0, 50.0]) == 0.0
    assert cv_pct([1.0]) == 0.0
    assert cv_pct([9.0, 11.0]) == pytest.approx(100 * math.sqrt(2) / 10)
    assert cv_pct([-1.0, 1.0]) == math.inf


def test_sanity_catches_fourteen_vs_fifty_two():
    samples = {"tg128": [52.1, 51.8, 14.0, 52.4, 14.2, 51.9], "pp512": [410.0, 402.0, 415.0]}
    problems = sanity_problems(samples, max_spread=3.0, inverse_pairs=[])
    assert len(problems) == 1 and "tg128" in problems[0] and "14" in problems[0]
    assert sanity_problems({"tg128": [52.1, 51.8, 50.0]}, max_spread=3.0, inverse_pairs=[]) == []


def test_sanity_catches_inverse_pair_contradiction():
    # a parser that reads the wrong line every time: spread is fine, tok/s x ms/tok is not
    tps = [14.0, 14.1, 13.9, 14.0]
    ms = [19.2, 19.0, 19.3, 19.1]                      # 1000 / 52
    problems = sanity_problems({"tps": tps, "ms_per_tok": ms}, max_spread=3.0,
                               inverse_pairs=[("tps", "ms_per_tok", 1000.0, 0.1)])
    assert len(problems) == 1 and "tps x ms_per_tok" in problems[0]
    good = sanity_problems({"tps": [52.0, 51.0], "ms_per_tok": [19.2, 19.6]}, max_spread=3.0,
                           inverse_pairs=[SimpleNamespace(a="tps", b="ms_per_tok", product=1000.0,
                                                          tolerance=0.1)])
    assert good == []
    # one bad invocation is enough
    assert sanity_problems({"tps": [52.0, 51.0], "ms_per_tok": [19.2, 30.0]}, max_spread=3.0,
                           inverse_pairs=[("tps", "ms_per_tok", 1000.0, 0.1)])


def test_sanity_other_problems():
    problems = sanity_problems({"a": [], "b": [1.0, 0.0], "c": [float("nan"), 1.0]},
                               max_spread=3.0, inverse_pairs=[("a", "zz", 1.0, 0.1)])
    assert len(problems) == 4
    assert any("a: no baseline" in p for p in problems)
    assert any("b: non-positive" in p for p in problems)
    assert any("c: non-finite" in p for p in problems)
    assert any("inverse pair a x zz" in p for p in problems)


def test_mde_is_finite_where_scipy_nct_is_undefined():
    # Welch's df can fall below 2 with tiny, very unequal arms; the MDE must not raise there.
    from jobs.stats import _mde_log
    values = [_mde_log(0.05, df) for df in (0.5, 1.0, 1.2, 1.5, 2.0, 3.0)]
    assert all(math.isfinite(v) and v > 0 for v in values)
    assert values == sorted(values, reverse=True)      # fewer degrees of freedom, larger MDE
