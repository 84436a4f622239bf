"""Properties of the paired sequential test (jobs.stats.sequential), checked by simulation.

Each property names the defect of the fixed-n design it replaces (issue #10): a CV veto over a
decisive result, an MDE without the floor, df of the wrong test, test choice after seeing the
data, no error control across a run's experiments, an unbalanced order.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from jobs.stats import power as pw
from jobs.stats import sequential as sq

LOG2_9 = math.log(2.9)


def rule(alpha=0.0125, floor_pct=1.0, target_pct=5.0, max_pairs=40, min_pairs=3):
    return sq.Rule(alpha_keep=alpha, floor=sq.to_log(floor_pct), target=sq.to_log(target_pct),
                   min_pairs=min_pairs, max_pairs=max_pairs)


def noise(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-pair noise of log(candidate/baseline) under models seen on shared machines."""
    if kind == "quiet":
        return rng.normal(0, 0.03, n)
    if kind == "heavy":
        return 0.1 * rng.standard_t(3, n) / math.sqrt(3)
    if kind == "states":        # each process independently lands in a 2.9x slower state 30% of the time
        slow_a, slow_b = (rng.random(n) < 0.3).astype(float), (rng.random(n) < 0.3).astype(float)
        return (slow_a - slow_b) * LOG2_9 + rng.normal(0, 0.02, n)
    if kind == "drift":         # slow drift: with random order it only adds symmetric noise
        return rng.normal(0, 0.03, n) + rng.choice([-1, 1], n) * np.linspace(0, 0.06, n)
    raise ValueError(kind)


def run_once(ys, zs, r, prior=sq.Prior()):
    pairs = [sq.Pair(float(y), (float(z),)) for y, z in zip(ys, zs)]
    y, s = sq.adjusted(pairs, prior)
    return sq.decide(y, s, r)


# Monte-Carlo sizes: the full study (`make test-slow`) and a smaller one for the default suite
# whose slack is wider, so that its bound sits about as many binomial standard deviations above the
# guaranteed rate as the full study's (2.2-2.3 for the keeps, 1.6-1.8 for the misses). The quick
# ones still fail a rule whose true rate is three times the guarantee 45 (keeps) and 49 (misses)
# times in 50.
FULL = pytest.mark.slow


@pytest.mark.parametrize("sims, slack", [pytest.param(250, 0.03, marks=FULL, id="full"),
                                         pytest.param(100, 0.05, id="quick")])
@pytest.mark.parametrize("kind", ["quiet", "heavy", "states", "drift"])
def test_no_change_is_almost_never_kept_whatever_the_noise(kind, sims, slack):
    rng = np.random.default_rng(11)
    r = rule(alpha=0.05, max_pairs=30)
    kept = 0
    for _ in range(sims):
        order = rng.choice([-1.0, 1.0], r.max_pairs)
        ys = noise(kind, rng, r.max_pairs) + 0.04 * order          # plus a 4% second-in-pair effect
        kept += run_once(ys, order, r).kind == sq.KEEP
    # Ville: P(keep) <= alpha exactly under a symmetric null; allow Monte Carlo slack.
    assert kept / sims <= 0.05 + slack


def test_a_decisive_result_is_a_decision_even_when_every_process_is_noisy():
    # A -74% change and a +100% change under 2.9x slow states: decided, never vetoed for noise.
    # (42% of the pairs have one process in a 2.9x slower state than the other.)
    rng = np.random.default_rng(3)
    r = rule(max_pairs=40)
    for effect, expected, share, pairs in ((math.log(0.26), sq.LOSS, 0.95, 10), (math.log(2.0), sq.KEEP, 0.8, 30)):
        outcomes = [run_once(effect + noise("states", rng, 40), rng.choice([-1.0, 1.0], 40), r)
                    for _ in range(60)]
        assert np.mean([d.kind == expected for d in outcomes]) >= share
        assert np.median([d.at for d in outcomes if d.kind == expected]) <= pairs


def test_power_at_the_reported_mde_is_the_power_it_claims():
    # The MDE is the effect kept with 80% probability by the whole procedure (floor, futility stop
    # and pair cap included) -- the fixed-n formula ignored the floor and had 74% power there.
    rng = np.random.default_rng(5)
    residuals = noise("quiet", rng, 12)
    r = rule(max_pairs=30)
    found = pw.mde(residuals, r, n_sims=300, seed=1)
    assert math.isfinite(found.effect_pct) and found.effect_pct > 1.0
    power, _ = pw.simulate(residuals, sq.to_log(found.effect_pct), r, n_sims=600, seed=99)
    assert power >= 0.8 - 0.05
    below, _ = pw.simulate(residuals, sq.to_log(found.effect_pct) * 0.5, r, n_sims=600, seed=98)
    assert below < 0.8


def test_shifted_paths_decide_exactly_as_the_rule_does_on_the_shifted_pairs():
    # The power simulation draws its noise paths once and shifts them by each effect it tries,
    # reusing the scales and the mean's lower bound; the decisions must be the rule's own on the
    # shifted pairs, recomputed from scratch (heavy tails and slow states included).
    rng = np.random.default_rng(11)
    for kind in ("quiet", "heavy", "states"):
        residuals = noise(kind, rng, 16)
        r = rule(max_pairs=30)
        drawn = pw.paths(residuals, r, n_sims=150, seed=3)
        for effect in (-0.02, 0.0, 0.004, sq.to_log(1.0), 0.03, 0.2):
            ys = effect + drawn.noise
            assert np.allclose(drawn.lower_bounds + effect, sq.mean_lower_bounds(ys, r.alpha_keep, drawn.prior),
                               rtol=0, atol=1e-12)
            kinds, at, _ = sq.decide_paths(ys, drawn.scales, r, drawn.prior)
            assert pw.keep_rate(drawn, effect, r) == (float(np.mean(kinds == sq.KEEP)),
                                                      float(np.mean(np.where(at > 0, at, r.max_pairs))))


def test_mde_never_goes_below_the_floor_however_quiet_the_machine():
    residuals = np.random.default_rng(1).normal(0, 1e-5, 12)
    found = pw.mde(residuals, rule(floor_pct=2.0, target_pct=6.0), n_sims=100)
    assert found.effect_pct >= 2.0


def test_mde_grows_with_noise_and_shrinks_with_pairs():
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, 12)
    small = pw.mde(0.02 * base, rule(max_pairs=30), n_sims=200).effect_pct
    large = pw.mde(0.08 * base, rule(max_pairs=30), n_sims=200).effect_pct
    more = pw.mde(0.08 * base, rule(max_pairs=80), n_sims=200).effect_pct
    assert small < large and more < large


def test_schedule_is_reproducible_and_coin_balanced():
    a, b = sq.pair_schedule(400, seed=7), sq.pair_schedule(400, seed=7)
    assert a == b and a != sq.pair_schedule(400, seed=8)
    firsts = [f for f, _ in a]
    assert 0.42 < firsts.count("B") / len(firsts) < 0.58
    assert len({s for _, s in a}) > 390                       # fresh input seed per pair
    assert sorted(sq.warmup_order(3)) == ["A", "B"]             # both arms warmed up, odd counts impossible


def test_order_effect_is_adjusted_without_breaking_the_guarantee():
    rng = np.random.default_rng(4)
    order = rng.choice([-1.0, 1.0], 40)
    ys = 0.06 * order + rng.normal(0, 0.005, 40)               # only an order effect, no change
    pairs = [sq.Pair(float(y), (float(z),)) for y, z in zip(ys, order)]
    adj, scale = sq.adjusted(pairs)
    assert np.std(adj[10:]) < 0.3 * np.std(ys[10:])              # the order effect is taken out ...
    assert sq.decide(adj, scale, rule()).kind != sq.KEEP          # ... and does not become a win


def test_run_level_false_keeps_are_bounded_by_alpha():
    # 30 no-change experiments in one run: with one fixed level each, P(>= 1 false keep) would be
    # ~39% at alpha 0.05 per test; with slot levels it is at most alpha.
    family, alpha = 30, 0.05
    assert sum(sq.slot_alpha(alpha, i, family) for i in range(1, family + 1)) == pytest.approx(alpha)
    assert sq.slot_alpha(alpha, family + 1, family) == 0.0
    assert sq.slot_alpha(alpha, 1, family) > sq.slot_alpha(alpha, 2, family)
    rng = np.random.default_rng(6)
    residuals = noise("heavy", rng, 12)
    total = sum(pw.simulate(residuals, 0.0, rule(alpha=sq.slot_alpha(alpha, i, family), max_pairs=30),
                            n_sims=150, seed=i)[0] for i in range(1, family + 1))
    assert total <= alpha


@pytest.mark.parametrize("sims, slack", [pytest.param(150, 0.04, marks=FULL, id="full"),
                                         pytest.param(60, 0.07, id="quick")])
def test_confidence_sequence_covers_the_true_effect(sims, slack):
    rng = np.random.default_rng(8)
    misses = 0
    for _ in range(sims):
        ys = 0.1 + noise("heavy", rng, 25)
        y, s = sq.adjusted([sq.Pair(float(v)) for v in ys])
        lo, hi = sq.confidence_sequence(y, s, 0.05)
        misses += not (lo <= 0.1 <= hi)
    assert misses / sims <= 0.1 + slack          # two sides at 0.05 each


def test_hodges_lehmann_ignores_a_minority_of_slow_pairs():
    ys = np.array([0.10] * 7 + [LOG2_9, -LOG2_9, LOG2_9])
    assert sq.hodges_lehmann(ys) == pytest.approx(0.10, abs=0.01)
    assert abs(np.mean(ys) - 0.10) > 0.05


def test_rule_rejects_nonsense():
    with pytest.raises(ValueError):
        sq.Rule(alpha_keep=0, floor=0.01, target=0.05)
    with pytest.raises(ValueError):
        sq.Rule(alpha_keep=0.05, floor=0.06, target=0.05)
    with pytest.raises(ValueError):
        sq.slot_alpha(0.05, 0, 10)


def test_compare_for_scripts_keeps_the_same_rule():
    from jobs.stats.stats import abba_order, compare
    rng = np.random.default_rng(9)
    order = abba_order(12)
    base = [100 * math.exp(rng.normal(0, 0.01)) for _ in range(12)]
    head = [110 * math.exp(rng.normal(0, 0.01)) for _ in range(12)]
    bo = [i for i, x in enumerate(order) if x == "A"]
    ho = [i for i, x in enumerate(order) if x == "B"]
    win = compare(base, head, base_order=bo, head_order=ho, alpha=0.05)
    assert win.verdict == "win" and 8 < win.delta_pct < 12 and win.ci_low_pct > 1.0
    assert compare(head, base, alpha=0.05).verdict == "loss"
    assert compare(base, head, direction="lower", alpha=0.05).verdict == "loss"
    assert compare([1, 2], [0, 1]).verdict == "untrusted"
    assert compare([1.0], [2.0]).verdict == "untrusted"


def test_the_printed_lower_bound_of_a_keep_clears_the_floor_it_claims_to():
    """Issue 21: the interval's bounds were grid points (1601 over the data's range, rounded down),
    so the keep message's lower bound sat below the floor it says it clears in a third of the
    heavy-tail keeps."""
    rng = np.random.default_rng(5)
    r = rule(alpha=0.0125, floor_pct=3.0, target_pct=8.0, max_pairs=40)
    keeps = 0
    for _ in range(60):
        ys = sq.to_log(6.0) + noise("heavy", rng, r.max_pairs)
        y, s = sq.adjusted([sq.Pair(float(v)) for v in ys])
        d = sq.decide(y, s, r)
        if d.kind != sq.KEEP:
            continue
        keeps += 1
        lo, hi = sq.confidence_sequence(y[:d.at], s[:d.at], r.alpha_keep)
        assert lo >= r.floor - 1e-12, (keeps, lo, r.floor)
        assert lo < hi
    assert keeps >= 10


def test_a_pair_cap_below_the_fewest_pairs_any_keep_needs_is_known():
    for family in (1, 8, 30):
        alpha = sq.slot_alpha(0.05, 1, family)
        need = sq.min_pairs_to_keep(alpha)
        r = rule(alpha=alpha, max_pairs=need, min_pairs=1)
        huge = np.full(need, math.log(3.0))              # every pair a 3x speed-up, no noise
        assert sq.decide(huge, np.full(need, 0.01), r).kind == sq.KEEP
        assert sq.decide(huge[:-1], np.full(need - 1, 0.01), rule(alpha=alpha, max_pairs=need - 1,
                                                                       min_pairs=1)).kind != sq.KEEP


# --------------------------------------------------------------------------- issue 21's smaller points


def _aa_prior(kind: str, rng: np.random.Generator, n: int = 20, sd: float = 0.03) -> sq.Prior:
    """What calibration hands an experiment: `n` A/A pairs of the same noise."""
    values = rng.normal(0, sd, n) if kind == "quiet" else noise(kind, rng, n)
    return sq.Prior(tuple(sq.Pair(float(v)) for v in values))


def _decide(ys: np.ndarray, r: sq.Rule, prior: sq.Prior) -> sq.StopDecision:
    y, s = sq.adjusted([sq.Pair(float(v)) for v in ys], prior)
    return sq.decide(y, s, r, prior)


@pytest.mark.parametrize("sims, bound", [pytest.param(2000, 0.0125 + 0.006, marks=FULL, id="full"),
                                         pytest.param(400, 0.02, id="quick")])
def test_a_candidate_slower_on_average_is_not_kept_for_winning_most_pairs(sims, bound):
    """Issue 21: the bets test a centre of symmetry, so a candidate +3% in 85% of its processes and
    -25% in the rest (-1.8% on average) was kept like a +3% one. A keep now also needs a lower
    bound on the (winsorised) mean to clear the floor. What is left is the runs in which no slow
    process has happened yet (0.85^n of them after n pairs), which look exactly like a +3%
    candidate: a keep after a slow process has been seen is what must not happen."""
    rng = np.random.default_rng(21)
    r = rule(alpha=0.0125)
    kept = kept_after_a_loss = 0
    for _ in range(sims):
        prior = _aa_prior("quiet", rng, sd=0.046)
        slow = rng.random(r.max_pairs) >= 0.85
        ys = np.where(slow, math.log(0.75), math.log(1.03)) + rng.normal(0, 0.046, r.max_pairs)
        d = _decide(ys, r, prior)
        kept += d.kind == sq.KEEP
        kept_after_a_loss += d.kind == sq.KEEP and bool(slow[:d.at].any())
    assert kept / sims <= bound
    assert kept_after_a_loss <= sims * 0.0025


@pytest.mark.parametrize("sims, share", [pytest.param(600, 0.985, marks=FULL, id="full"),
                                         pytest.param(150, 0.97, id="quick")])
def test_a_doubling_is_kept_under_bimodal_noise(sims, share):
    """Issue 21: under slow states the MAD saw only the fast pairs' jitter, every bet became a
    sign bet, and a +100% candidate was kept 80% of the time within 40 pairs."""
    rng = np.random.default_rng(22)
    r = rule(alpha=0.0125)
    kept = sum(_decide(math.log(2.0) + noise("states", rng, r.max_pairs), r, _aa_prior("states", rng)).kind
               == sq.KEEP for _ in range(sims))
    assert kept / sims >= share


def test_the_noise_scale_sees_a_second_mode():
    fast = np.zeros(58)
    slow = np.concatenate([fast, np.full(21, LOG2_9), np.full(21, -LOG2_9)])
    assert sq._robust_scale(slow) > 0.5 * LOG2_9
    assert sq._robust_scale(np.random.default_rng(0).normal(0, 0.03, 2000)) == pytest.approx(0.03, rel=0.1)


@pytest.mark.parametrize("sims", [pytest.param(600, marks=FULL, id="full"), pytest.param(150, id="quick")])
def test_an_effect_of_twice_the_floor_is_not_stopped_as_futile(sims):
    """Issue 21: the futility stop tested "improvement >= 5% target", so an effect of twice the 1%
    floor was stopped early in nearly every run and kept at most 4.7% of the time. It now tests
    twice the floor, which it rejects for such an effect at most alpha_futility of the time."""
    rng = np.random.default_rng(23)
    r = rule(alpha=0.0125)
    assert r.futility == pytest.approx(2 * r.floor)
    outcomes = [_decide(2 * r.floor + rng.normal(0, 0.03, r.max_pairs), r, _aa_prior("quiet", rng)).kind
                for _ in range(sims)]
    assert outcomes.count(sq.FUTILE) / sims <= r.alpha_futility + 0.05
    assert outcomes.count(sq.KEEP) / sims >= 0.06


def test_the_power_simulations_batch_decides_every_path_as_decide_does_alone():
    """`decide_paths` is the rule the power simulation runs on all its paths at once; each row's
    kind, stopping pair and wealth must be what `decide` gives that path alone (any drift between
    the two would make the printed MDE describe a rule the runner does not apply)."""
    rng = np.random.default_rng(7)
    prior = sq.Prior(tuple(sq.Pair(float(v)) for v in rng.normal(0, 0.01, 12)))
    seen: set[str] = set()
    for r in (rule(), rule(alpha=0.05, min_pairs=1, max_pairs=25)):
        for effect in (0.0, 0.015, 0.05, -0.05):
            ys = effect + np.vstack([noise(kind, rng, r.max_pairs) for kind in ("quiet", "heavy", "states") * 20])
            ss = np.full_like(ys, 0.02)
            kinds, at, wealth = sq.decide_paths(ys, ss, r, prior)
            seen |= set(kinds)
            for j in range(ys.shape[0]):
                alone = sq.decide(ys[j], ss[j], r, prior)
                i = (alone.at or r.max_pairs) - 1
                assert (kinds[j], at[j]) == (alone.kind, alone.at)
                assert math.isclose(math.exp(min(wealth[0][j, i], 700.0)), alone.wealth_keep, rel_tol=1e-12)
    assert {"keep", "loss", "futile"} <= seen          # every branch of the rule was compared
