"""jobs/stats/drift.py: the run's noise follows the machine (issue 27). Pure."""
import math

from jobs.stats.drift import MIN_POOL, current, pooled, residuals, scale_pct


def test_residuals_take_the_effect_out_and_the_pool_keeps_the_most_recent():
    r = residuals([0.10, 0.12, 0.08, math.nan])
    assert r == [0.0, 0.12 - 0.10, 0.08 - 0.10]               # a +10% effect is not noise
    pool = pooled([1.0] * 30, [2.0] * 5, keep=20)
    assert len(pool) == 20 and pool[-5:] == [2.0] * 5
    assert residuals([0.1]) == []


def test_the_pool_stands_in_for_the_calibration_once_it_is_big_enough():
    cal = [0.3, -0.3, 0.2, -0.2]
    assert current(cal, [0.01] * (MIN_POOL - 1)) == (cal, "calibration")
    assert current(cal, [0.01] * MIN_POOL)[1] == "recent experiments"
    loud, quiet = scale_pct(cal), scale_pct([0.01, -0.01, 0.0, 0.02, -0.02])
    assert loud > 10 * quiet > 0 and math.isnan(scale_pct([0.1]))


def test_a_plan_after_noisy_experiments_states_a_larger_mde_than_the_quiet_calibration(tmp_path):
    """The pipeline's plan follows the pool: the same calibration, two different recent pools."""
    import random
    from jobs.run.pipeline import Run, RunOptions
    from jobs.contract.runstate import RunState
    from synthetic import synthetic_target
    rng = random.Random(1)
    quiet = [[rng.gauss(0, 0.005), 0.0, 0.0] for _ in range(12)]
    run = Run(RunOptions(target=synthetic_target(tmp_path / "t"), out=tmp_path / "out", run_id="n"))
    run.state = RunState(tmp_path / "out", calibration={"local": {"score": {"prior": quiet, "floor_pct": 1.0},
                                                                "ms": {"prior": quiet, "floor_pct": 1.0}}})
    calm = run.plan("local", 0.01).mde_pct
    run.state.save(noise={"local": {"pool": [rng.gauss(0, 0.08) for _ in range(16)]}})
    loud = run.plan("local", 0.01).mde_pct
    assert loud > 2 * calm, (calm, loud)
