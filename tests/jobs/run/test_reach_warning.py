"""Issue 43, part 2: after calibration, before any experiment, a warning when the wall clock cannot
reach the target MDE within the pair cap and no yardstick decides instead, naming what would."""
from __future__ import annotations

import numpy as np

from jobs.stats.reach import cap_warning, pairs_for_mde
from jobs.stats.power import mde
from jobs.stats.sequential import Rule, slot_alpha, to_log

ALPHA1 = slot_alpha(0.05, 1, 30)
NOISE = list(np.random.default_rng(1).normal(0, 0.05, 20))      # 5% per pair: a loaded machine


def rule(cap: int) -> Rule:
    return Rule(alpha_keep=ALPHA1, floor=to_log(1.0), target=to_log(3.0), min_pairs=3, max_pairs=cap)


def warning(cap: int, **kw) -> str:
    at_cap = mde(NOISE, rule(cap), n_sims=200).effect_pct
    return cap_warning("x86", "tg_tps", **{**dict(mde_pct=at_cap, target_pct=3.0, floor_pct=1.0, cap=cap,
                                                 yardstick=False, residuals=NOISE, rule=rule(cap)), **kw})


def test_above_the_target_without_a_yardstick_names_the_cap_that_would_reach_it():
    needed = pairs_for_mde(NOISE, rule(20), 3.0)
    assert needed is not None and 20 < needed <= 640
    assert mde(NOISE, rule(needed), n_sims=200).effect_pct <= 3.0 < mde(NOISE, rule(20), n_sims=200).effect_pct
    text = warning(20)
    assert text.startswith("on x86, the wall clock cannot reach the target MDE of 3% on tg_tps within the cap of 20 "
                           "pairs"), text
    assert f"a pair cap of about {needed} (`--repeats {needed}` or `repeats.max: {needed}`" in text
    assert "declare a `simulate:` workload" in text


def test_a_yardstick_or_a_reached_target_says_nothing():
    assert warning(20, yardstick=True) == ""
    assert warning(20, mde_pct=2.9) == ""


def test_no_cap_reaches_a_target_below_the_floor_or_beyond_the_search():
    raised = warning(20, floor_pct=4.0)
    assert "No pair cap reaches it: the floor is 4.0%, above the target" in raised and "simulate:" in raised
    beyond = warning(20, limit=30)
    assert "Not even 30 pairs would reach it" in beyond and "simulate:" in beyond
    assert "more than a 10x improvement" in cap_warning("x86", "tg", mde_pct=float("inf"), target_pct=3.0,
                                                        floor_pct=1.0, cap=5, yardstick=False)


def test_the_runs_wiring_reads_the_calibration_and_the_yardstick_per_platform(tmp_path):
    from jobs.contract.config import load_config
    from jobs.run.reporting import reach_warnings
    from jobs.contract.runstate import RunState
    from synthetic import synthetic_target
    config = load_config(synthetic_target(tmp_path / "target"))        # target MDE 3%, floor 1%, score primary
    cal = {"score": {"prior": [[y] for y in NOISE], "floor_pct": 1.0, "adjust": []}}
    state = RunState(tmp_path / "out", calibration={"x86": cal, "arm": cal},
                     simulate={"arm": {"base_cycles": 1_000_000}})
    said = reach_warnings(config, state, 20)
    assert len(said) == 1 and said[0].startswith("on x86, the wall clock cannot reach the target MDE of 3% on score "
                                                 "within the cap of 20 pairs"), said
    state.simulate = None
    assert len(reach_warnings(config, state, 20)) == 2
