"""The runner's own clock is a sequential test, not a glance (issue 21): a printed speed-up the
process time does not show is `invalid`, and the runner samples on until the clock decides.
Seeded synthetic pairs through the production functions (jobs.measure.runner.stop_reason, jobs.stats.verdict.judge)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from jobs.contract.config import parse_config
from jobs.contract.model import Status
from jobs.measure.runner import stop_reason
from jobs.stats.sequential import KEEP, adjusted, decide, pair_schedule, slot_alpha
from jobs.contract.spec import ExperimentSpec, Invocation, RawResult
from jobs.stats.verdict import VerdictPlan, judge, metric_pairs

CONFIG = parse_config("""
build: make -s
benchmark: ./bench/bench
checks: make -s check
metrics: [{name: mbps, direction: higher, primary: true, clock: cpu}]
editable: ["lib/**"]
repeats: {min: 3, max: 40}
""")
ALPHA = slot_alpha(0.05, 1, 30)


def process(speed: float, printed_factor: float, rng, noise: float, setup_noise: float) -> tuple[float, float]:
    """(printed MB/s, CPU seconds) of one process: 0.03 s of set-up plus timed work 1/speed."""
    work = 0.06 / speed * math.exp(rng.normal(0, noise))
    return printed_factor * 1.0 / work, 0.03 * math.exp(rng.normal(0, setup_noise)) + work


def clock_plan(max_pairs: int, seed: int) -> tuple[VerdictPlan, ExperimentSpec]:
    """The plan and the runner's spec of one experiment whose keep waits for the CPU clock's test."""
    plan = VerdictPlan(alpha=ALPHA, floor_pct=1.0, target_pct=5.0, max_pairs=max_pairs, alpha_loss=0.05)
    return plan, ExperimentSpec.from_config(
        CONFIG, run_id="r", name="x", platform="local", base_commit="a", head_commit="b", n_per_arm=max_pairs,
        seed=seed, stop=plan.rule(), clock="cpu", timed_share=0.25)


def sampled(head_speed: float, printed: float, *, seed: int, noise: float = 0.06, setup_noise: float = 0.0,
            max_pairs: int = 40):
    """Pairs appended one at a time until the runner's stop rule says stop, as `run_experiment` does."""
    rng = np.random.default_rng(seed)
    plan, spec = clock_plan(max_pairs, seed)
    raw = RawResult(status="ok", cpu="test")
    for i, (first, s) in enumerate(pair_schedule(max_pairs, seed)):
        for position, arm in enumerate((first, "A" if first == "B" else "B")):
            mbps, cpu = process(head_speed if arm == "B" else 1.0, printed if arm == "B" else 1.0, rng, noise,
                                setup_noise)
            raw.invocations.append(Invocation(arm=arm, pair=i, position=position, seed=s, metrics={"mbps": mbps},
                                              wall_s=cpu, cpu_s=cpu, index=len(raw.invocations)))
        raw.stopped = stop_reason(spec, raw)
        if raw.stopped:
            break
    return raw, judge(raw, CONFIG, plan)


@pytest.mark.parametrize("seed", range(8))
def test_a_printed_speed_up_the_process_time_does_not_show_is_never_kept(seed):
    # The real-library cheat: MB/s x1.5 printed, the same work done (the clock test must call it).
    raw, j = sampled(1.0, 1.5, seed=seed)
    assert j.status != Status.KEEP, j.reason
    assert j.status == Status.INVALID and "clock does not see" in j.reason, j.reason


@pytest.mark.parametrize("seed", range(6))
def test_an_honest_speed_up_is_confirmed_by_the_clock_and_kept(seed):
    raw, j = sampled(1.5, 1.0, seed=seed)
    assert j.status == Status.KEEP, j.reason


def test_the_runner_samples_on_until_the_clock_decides():
    # A quiet metric decides within a few pairs while an untimed set-up makes the clock noisy: the
    # keep waits for the clock (more pairs than the metric alone needed), which then refuses it.
    later = 0
    for seed in range(4):
        raw, j = sampled(1.0, 1.5, seed=seed, noise=0.02, setup_noise=1.0, max_pairs=20)
        assert j.status != Status.KEEP, j.reason
        y, s = adjusted(metric_pairs(raw, "mbps", "higher"))
        decision = decide(y, s, VerdictPlan(alpha=ALPHA, floor_pct=1.0, target_pct=5.0, max_pairs=20).rule())
        assert decision.kind == KEEP                  # the metric alone would have stopped at decision.at
        later += len(raw.pairs()) > decision.at
    assert later >= 3
