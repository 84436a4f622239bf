"""Benchmark (not a test): how often the verdict keeps what it should and nothing else, as METRIC lines.

    .venv/bin/python tests/benchmarks/verdict_power.py simulate                 # the table, at the defaults
    PYTHONPATH=/path/to/other/checkout .venv/bin/python tests/benchmarks/verdict_power.py simulate   # "before"
    .venv/bin/python tests/benchmarks/verdict_power.py yardstick                # a simulate: target's wall guard
    .venv/bin/python tests/benchmarks/verdict_power.py curtail                  # what the guard's early stop costs
    .venv/bin/python tests/benchmarks/verdict_power.py looks                    # the guard, looking fewer times
    .venv/bin/python tests/benchmarks/verdict_power.py demo --runs 10 --nulls 3
    .venv/bin/python tests/benchmarks/verdict_power.py demo --runs 2 --nulls 3 --load states

`simulate`: whole runs through the loaded code's own functions at the config's defaults: an A/A
calibration (`calibrate_run`, its floor and prior), then one experiment sampled pair by pair with
the runner's stop rule (`jobs.measure.runner.stop_reason`) and judged (`jobs.stats.verdict.judge`), at the first
slot's level of a run of `budget.max_experiments`. Processes are simulated in run order under the
noise models of `Noise` (quiet, a second-in-pair effect, t3 tails with outliers, i.i.d. and Markov
2.9x slow states, AR(1) drift, heteroscedastic, a busy day) with true effects 0, +5% and +14.5%,
and under hazards with no real effect: a 3% or 10% faster candidate folder (location), a candidate
that slows the next process by 10% (carry-over), a candidate that prints 1.5x its MB/s (the
runner's CPU clock sees the same work), and one that does both with a 25% carry-over (the clock's
pairs inherit it as a saving). The runner's folder swap is emulated when the loaded code
has it (`jobs.measure.locations.swap_coins`, earlier `jobs.measure.runner.swap_coins`). keep_rate at effect 0 =
false keeps; at 5 and 14.5 = power; slower_rate = discards that call the candidate slower (at
effect 0: false alarms).

`yardstick`: the same whole runs for a target with `simulate:` (the shape of
examples/llama.cpp/autoresearch.yml: 8 A/A pairs, at most 20 per experiment), judged by
`jobs.measure.simulate.judge_yardstick`: a candidate whose simulated cycles fall past the floor (`--sim-pct`,
-2.3% as the x86 GEMV recipes did) while its real speed changes by each of `--wall` (a gain, nothing,
losses). Keeps are split into confirmed (the interval excludes a regression beyond the tolerance)
and unconfirmed (kept on the count alone); at a negative wall effect every keep is a slowdown sold
as a gain.

`curtail`: the same runs, paired: each sampled to its end without the guard giving up early, then judged
on all its pairs and on those up to where `jobs.stats.curtail.give_up` would have stopped it: how often
it gives up, the pairs that saves, and how often (and how) the verdict changes.

`looks`: would the guard settle sooner if it looked at a few planned numbers of pairs instead of after
every pair (a group-sequential signed-rank test, Bonferroni over the looks)? The same pairs judged both
ways: how often each confirms, after how many pairs, and how often falsely (at a real regression).

`demo`: the real loop on this machine, `--runs` times: `autoresearch run` on the bundled demo
target with the offline agent (all recipes) plus `--nulls` maintainer candidates that change only
a comment (identical binaries: any keep is false). Prints per run whether fuse-softmax was kept
and whether the stack was confirmed, the false keeps, and what it cost (processes per arm,
minutes). `--load states` runs a load generator beside it that puts two CPU hogs on and off at
random (0.5-3 s), so processes land in slow and fast states as on a busy shared host.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# Appended, not prepended: PYTHONPATH=/work/main runs the same script against another checkout.
sys.path += [str(ROOT), str(ROOT / "tests")]


class Noise:
    """Per-process log-speed noise in run order, for the models named in the table. Each call of
    `next()` is one benchmark process (a state carries over between processes where the model has one)."""

    MODELS = ("quiet", "order", "heavy", "states-iid", "states-markov", "ar1-drift", "hetero", "noisy")

    def __init__(self, kind: str, rng: np.random.Generator):
        self.kind, self.rng, self.slow, self.drift = kind, rng, False, 0.0

    def next(self, position: int) -> float:
        r, k = self.rng, self.kind
        if k == "quiet":            # 4.6% per pair, as measured here on a quiet day
            return r.normal(0, 0.0325)
        if k == "order":            # quiet, plus the second process of a pair 4% faster
            return r.normal(0, 0.0325) + (0.04 if position == 1 else 0.0)
        if k == "heavy":            # Student t3 with outliers
            return 0.07 * r.standard_t(3) / math.sqrt(3) + (r.normal(0, 0.5) if r.random() < 0.03 else 0.0)
        if k == "states-iid":       # each process in a 2.9x slower state 30% of the time
            return -math.log(2.9) * (r.random() < 0.3) + r.normal(0, 0.02)
        if k == "states-markov":    # slow states that persist (enter 10%, stay 80%)
            self.slow = r.random() < (0.8 if self.slow else 0.1)
            return -math.log(2.9) * self.slow + r.normal(0, 0.02)
        if k == "ar1-drift":        # the machine's speed drifts (AR(1), phi 0.95)
            self.drift = 0.95 * self.drift + r.normal(0, 0.02)
            return self.drift + r.normal(0, 0.02)
        if k == "hetero":           # the noise level itself changes from process to process
            return r.normal(0, 0.0325 * math.exp(r.normal(0, 0.7)))
        if k == "noisy":            # the busy day: 41% per pair
            return r.normal(0, 0.29)
        if k == "tg128":            # llama.cpp's tg128 A/A on this machine kind: 8.8% per pair
            return r.normal(0, 0.088 / math.sqrt(2))
        raise ValueError(k)


HAZARDS = ("location-3%", "location-10%", "carry-over-10%", "printed-1.5x", "printed-1.5x+carry-over-25%")


class Sampler:
    """Benchmark processes in run order, through the loaded code's own pair schedule, warm-ups and
    folder swap: `measure` returns a RawResult like the runner's, stopped by `stop` (a spec) when given."""

    def __init__(self, noise: Noise, rng: np.random.Generator, hazard: str = ""):
        try:
            from jobs.measure.locations import swap_coins  # this branch: arms swap folders, blocks of two pairs
        except ImportError:
            try:
                from jobs.measure.runner import swap_coins  # older: a coin per pair
            except ImportError:
                swap_coins = None
        self.noise, self.rng, self.hazard, self.swap_coins = noise, rng, hazard, swap_coins

    def measure(self, n_pairs: int, head_effect: float, seed: int, stop=None, experiment: bool = True,
                simulated: dict | None = None):
        from jobs.measure.runner import stop_reason
        from jobs.stats.sequential import pair_schedule, warmup_order
        from jobs.contract.spec import Invocation, RawResult
        noise, rng, hazard = self.noise, self.rng, self.hazard
        raw = RawResult(status="ok", cpu="sim")
        if simulated:
            raw.simulated = simulated
        coins = self.swap_coins(n_pairs, seed) if self.swap_coins else [0] * n_pairs
        last = None

        def proc(arm: str, pair: int, position: int, s: int, swapped: int) -> None:
            nonlocal last
            v = noise.next(position) + (head_effect if arm == "B" else 0.0)
            in_q = (arm == "B") != bool(swapped)     # the candidate's folder (exp-*) is Q
            if experiment and hazard.startswith("location-") and in_q:
                v += math.log1p(float(hazard[len("location-"):-1]) / 100)
            if experiment and hazard == "carry-over-10%" and last == "B":
                v += math.log(0.9)
            if experiment and hazard == "printed-1.5x+carry-over-25%" and last == "B":
                v += math.log(0.75)        # the next process, and its clock, 25% slower
            printed = v + (math.log(1.5) if experiment and hazard.startswith("printed-1.5x") and arm == "B" else 0.0)
            cpu = 0.02 * math.exp(rng.normal(0, 0.05)) + 0.1 * math.exp(-v)
            raw.invocations.append(Invocation(arm=arm, pair=pair, position=position, seed=s,
                                              metrics={"m": 100 * math.exp(printed)}, wall_s=cpu, cpu_s=cpu,
                                              index=len(raw.invocations)))
            last = arm
        for arm in warmup_order(seed):
            proc(arm, -1, 0, 1, 0)
        for i, (first, s) in enumerate(pair_schedule(n_pairs, seed)):
            for position, arm in enumerate((first, "A" if first == "B" else "B")):
                proc(arm, i, position, s, coins[i])
            if stop is not None:
                raw.stopped = stop_reason(stop, raw)
                if raw.stopped:
                    break
        return raw


def calibrated(sampler: Sampler, config, slot: int, family: int, **spec_fields):
    """The A/A calibration (and its second batch where the loaded code asks for one) through
    `calibrate_run`, then the experiment's plan and the runner's spec of it (with `spec_fields`):
    (plan, spec), or None when the calibration refuses."""
    from jobs.stats.calibration import calibrate_run
    from jobs.stats.sequential import slot_alpha
    from jobs.contract.spec import ExperimentSpec
    from jobs.stats.verdict import VerdictPlan
    seed = int(sampler.rng.integers(1, 2**31 - 1))
    aa = sampler.measure(config.repeats.calibration, 0.0, seed, experiment=False)
    cal = calibrate_run(aa, config, n_sims=5)
    try:                                            # this branch: a wide bias bound buys a second A/A batch
        from jobs.stats.calibration import extra_pairs, merge_pairs
    except ImportError:
        extra_pairs = None
    more = extra_pairs(cal, config, len(aa.pairs())) if extra_pairs else 0
    if more:
        cal = calibrate_run(merge_pairs(aa, sampler.measure(more, 0.0, seed + 7, experiment=False)), config, n_sims=5)
    if cal.problems:
        return None
    c = cal.metrics["m"]
    th, rp = config.thresholds, config.repeats
    floor = max(th.min_effect_pct, c.floor_pct)
    plan = VerdictPlan(alpha=slot_alpha(th.alpha, slot, family), floor_pct=floor, target_pct=max(th.target_mde_pct, floor),
                max_pairs=rp.max, min_pairs=rp.min, alpha_loss=th.alpha,
                priors={"m": tuple(tuple(p) for p in c.prior)}, adjust={"m": tuple(c.adjust)})
    rule = plan.rule()
    try:                                            # this branch: the spec carries the verdict's own Rule
        from jobs.contract.spec import StopRule
    except ImportError:
        stop, extra = rule, {"adjust": list(c.adjust), "clock": "cpu", "timed_share": config.integrity.timed_share}
    else:                                           # older code: a StopRule copied from it
        fields = StopRule.__dataclass_fields__
        stop = StopRule(alpha_keep=rule.alpha_keep, floor=rule.floor, target=rule.target, alpha_loss=rule.alpha_loss,
                        alpha_futility=rule.alpha_futility, min_pairs=rule.min_pairs, adjust=list(c.adjust),
                        **{k: v for k, v in (("clock", "cpu"), ("timed_share", config.integrity.timed_share))
                           if k in fields})
        extra = {}
    spec = ExperimentSpec.from_config(config, run_id="sim", name="x", platform="sim", base_commit="a",
                                      head_commit="b", n_per_arm=rp.max, seed=seed + 1, stop=stop,
                                      prior=[list(p) for p in c.prior], **extra, **spec_fields)
    return plan, spec


def one_run(kind: str, effect_pct: float, hazard: str, rng: np.random.Generator, config, slot: int,
            family: int) -> tuple[str, int]:
    """One calibration + one experiment through the loaded code's own functions (the runner's stop
    rule, `calibrate_run`, `judge`); returns the experiment's status and the pairs it sampled."""
    from jobs.stats.verdict import judge
    sampler = Sampler(Noise("quiet" if hazard else kind, rng), rng, hazard)
    got = calibrated(sampler, config, slot, family)
    if got is None:
        return "calibration-refused", 0
    plan, spec = got
    raw = sampler.measure(spec.n_per_arm, math.log1p(effect_pct / 100), spec.seed, stop=spec)
    judged = judge(raw, config, plan)
    # a discard that names the candidate slower is its own outcome: at effect 0 it is a false alarm
    slower = judged.status.value == "discard" and judged.reason.startswith("m slower")
    return ("slower" if slower else judged.status.value), len(raw.pairs())


YARDSTICK_CONFIG = (   # the shape of examples/llama.cpp/autoresearch.yml with its simulate: line on
    "build: make\nbenchmark: ./b\nchecks: ./c\neditable: ['src/**']\n"
    "metrics: [{name: m, primary: true, clock: cpu}]\n"
    "repeats: {min: 3, max: 20, warmup: 1, calibration: 8}\n"
    "thresholds: {alpha: 0.05, min_effect_pct: 1.0, target_mde_pct: 5.0}\n"
    "budget: {max_experiments: 12}\n"
    "simulate: {command: ./sim, separate_build: true}\n")
YARDSTICK_MODELS = ("quiet", "tg128", "states-markov", "noisy")


def yardstick_experiment(kind: str, wall_pct: float, sim_pct: float, rng: np.random.Generator, config, slot: int,
                         family: int):
    """One calibration + one experiment of a target with `simulate:`: the candidate's simulated cycles
    change by `sim_pct` (past the floor when negative), its real speed by `wall_pct`; sampled with the
    runner's stop rule. Returns (raw, plan, guard), or None when the calibration refused."""
    from jobs.measure.simulate import Guard
    sampler = Sampler(Noise(kind, rng), rng)
    got = calibrated(sampler, config, slot, family, simulate_floor_pct=config.simulate.min_effect_pct)
    if got is None:
        return None
    plan, spec = got
    base = 10**9
    simulated = {"A": {"cycles": base}, "B": {"cycles": round(base * (1 + sim_pct / 100))}}
    raw = sampler.measure(spec.n_per_arm, math.log1p(wall_pct / 100), spec.seed, stop=spec, simulated=simulated)
    return raw, plan, Guard(config.simulate.wall_tolerance_pct, plan.alpha_loss, plan.min_pairs, plan.alpha)


def yardstick_outcome(raw, config, plan, guard) -> str:
    """`jobs.measure.simulate.judge_yardstick`'s verdict: keep-confirmed, keep-unconfirmed or the status."""
    from jobs.measure.simulate import judge_yardstick
    judged = judge_yardstick(raw, config, plan, config.simulate.min_effect_pct, guard, None)
    if judged.status.value != "keep":
        return judged.status.value
    runner = judged.runner          # a dict before the runner's view was typed (issue 42), a RunnerView since
    confirmed = (runner.get("wall_guard") or {}).get("confirmed") if isinstance(runner, dict) else \
        getattr(runner.wall_guard, "confirmed", None)
    return "keep-confirmed" if confirmed else "keep-unconfirmed"


def one_yardstick_run(kind: str, wall_pct: float, sim_pct: float, rng: np.random.Generator, config, slot: int,
                      family: int) -> tuple[str, int]:
    """`yardstick_experiment` judged: (keep-confirmed, keep-unconfirmed or the status; the wall-clock
    pairs it sampled)."""
    got = yardstick_experiment(kind, wall_pct, sim_pct, rng, config, slot, family)
    if got is None:
        return "calibration-refused", 0
    raw, plan, guard = got
    return yardstick_outcome(raw, config, plan, guard), len(raw.pairs())


def yardstick(args) -> None:
    """What the wall-clock guard of a `simulate:` target keeps: a count win (simulated cycles
    `--sim-pct`) whose real effect on the wall clock is a gain, nothing, or a loss."""
    from jobs.contract.config import parse_config
    config = parse_config(YARDSTICK_CONFIG)
    family = config.budget.max_experiments
    print(f"# llama.cpp-shaped config: repeats.max {config.repeats.max}, calibration {config.repeats.calibration} "
          f"pairs, wall_tolerance {config.simulate.wall_tolerance_pct}%, simulated {args.sim_pct:+g}%; slot {args.slot}",
          flush=True)
    rng = np.random.default_rng(args.seed)
    only = set(args.only.split(",")) if args.only else None
    for kind in YARDSTICK_MODELS:
        if only and kind not in only:
            continue
        for wall in (float(w) for w in args.wall.split(",")):
            runs = [one_yardstick_run(kind, wall, args.sim_pct, rng, config, args.slot, family)
                    for _ in range(args.sims)]
            outcomes = [status for status, _ in runs]
            tag = f"yardstick.{kind}.wall{wall:+g}"
            print(f"METRIC {tag}.pairs_mean={np.mean([pairs for _, pairs in runs]):.1f}")
            for what in ("keep-confirmed", "keep-unconfirmed", "discard"):
                print(f"METRIC {tag}.{what.replace('-', '_')}_rate={outcomes.count(what) / args.sims:.3f}")
            print(f"METRIC {tag}.runs={args.sims}", flush=True)


def guard_paths(kind: str, wall_pct: float, n: int, rng: np.random.Generator, config, family: int):
    """One experiment's guard pairs as the verdict sees them, through the loaded code's own sampler and
    calibration (as `curtail` judges them): the A/A calibration of `config` under noise model `kind`,
    then `n` pairs, unstopped, of a candidate whose real speed changed by `wall_pct`. Returns the
    adjusted pairs, their scales and the guard (`jobs.measure.simulate.Guard`, as the run makes it), or
    None when the calibration refused."""
    from jobs.measure.simulate import Guard
    from jobs.stats.sequential import adjusted
    from jobs.stats.verdict import metric_pairs
    sampler = Sampler(Noise(kind, rng), rng)
    got = calibrated(sampler, config, 1, family, simulate_floor_pct=config.simulate.min_effect_pct)
    if got is None:
        return None
    plan, spec = got
    raw = sampler.measure(n, math.log1p(wall_pct / 100), spec.seed)
    primary = config.primary
    y, s = adjusted(metric_pairs(raw, primary.name, primary.direction, tuple(plan.adjust.get(primary.name, ()))),
                    plan.prior(primary.name))
    return y, s, Guard(config.simulate.wall_tolerance_pct, plan.alpha_loss, plan.min_pairs, plan.alpha)


def first_confirmed(y: np.ndarray, s: np.ndarray, min_pairs: int, tol: float, alpha: float) -> int:
    """The first number of pairs (from `min_pairs`) at which the guard's interval excludes a regression
    beyond `tol`, 0 for none. The interval is a running intersection, so its lower end only rises (to
    within its grid's refinement: drops under 1e-5 percentage points over 48 paths of 40 pairs,
    and the same first number as a scan from the start on every one of them): a bisection finds it."""
    from jobs.measure.simulate import wall_interval
    lo, hi = min_pairs, y.size
    if wall_interval(y, s, alpha)[0] <= -tol:
        return 0
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if wall_interval(y[:mid], s[:mid], alpha)[0] > -tol else (mid + 1, hi)
    return lo


def looks(args) -> None:
    """Would the wall-clock guard settle sooner if it looked fewer times? The guard confirms a keep when
    its anytime-valid interval excludes a regression beyond the tolerance, and may look after every
    pair (`jobs.measure.simulate.wall_interval`, what the runner's stop rule checks). The alternative is a
    group-sequential design: Wilcoxon's exact signed-rank test of the pairs against the tolerance, at
    a few planned looks (`--looks`, and the cap), each at alpha over the number of looks (Bonferroni).
    For each noise model and real wall-clock effect, the same pairs are judged both ways: how often each
    confirms, and after how many pairs (the cap when it does not). At an effect at or below minus the
    tolerance every confirmation is a false one, which must stay at or below alpha."""
    from jobs.contract.config import parse_config
    from jobs.stats.sequential import to_log
    from jobs.stats.stats import signed_rank_p
    config = parse_config(YARDSTICK_CONFIG)
    family, cap = config.budget.max_experiments, args.cap
    planned = sorted({int(k) for k in args.looks.split(",") if 0 < int(k) < cap} | {cap})
    rng = np.random.default_rng(args.seed)
    print(f"# llama.cpp-shaped config, wall_tolerance {config.simulate.wall_tolerance_pct}%, cap {cap} pairs; "
          f"looks at {planned}, each at the guard's level over {len(planned)}", flush=True)
    for kind in (args.only.split(",") if args.only else YARDSTICK_MODELS):
        for wall in (float(w) for w in args.wall.split(",")):
            anytime, grouped = [], []
            for _ in range(args.sims):
                got = guard_paths(kind, wall, cap, rng, config, family)
                if got is None:
                    continue
                y, s, guard = got
                tol, alpha = guard.tolerance_pct, guard.alpha
                anytime.append(first_confirmed(y, s, guard.min_pairs, tol, alpha))
                grouped.append(next((k for k in planned
                                     if signed_rank_p(y[:k] - to_log(-tol), "greater") < alpha / len(planned)), 0))
            tag = f"looks.{kind}.wall{wall:+g}"
            for name, ats in (("anytime", anytime), ("grouped", grouped)):
                print(f"METRIC {tag}.{name}_confirm_rate={np.mean([a > 0 for a in ats]):.3f}")
                print(f"METRIC {tag}.{name}_pairs_mean={np.mean([a or cap for a in ats]):.1f}")
            print(f"# {tag}: {len(anytime)} runs ({args.sims - len(anytime)} calibrations refused)", flush=True)


def curtail(args) -> None:
    """What giving up early costs the wall-clock guard, paired: each run of `yardstick`'s shape is
    sampled to its own end without giving up (`jobs.stats.curtail.give_up` switched off), then judged
    on all its pairs and on the pairs up to where `give_up` would first have stopped it. Prints how
    often it gives up, the pairs it saves, and how often the verdict differs (and how)."""
    import copy
    import jobs.stats.curtail as curtailing
    from jobs.contract.config import parse_config
    from jobs.measure.simulate import UNSETTLED
    from jobs.stats.sequential import adjusted
    from jobs.stats.verdict import metric_pairs
    give_up, curtailing.give_up = curtailing.give_up, lambda *a, **k: False
    config = parse_config(YARDSTICK_CONFIG)
    family, primary = config.budget.max_experiments, config.primary
    rng = np.random.default_rng(args.seed)
    for kind in YARDSTICK_MODELS:
        if args.only and kind not in args.only.split(","):
            continue
        for wall in (float(w) for w in args.wall.split(",")):
            gave, saved, changed, runs = 0, [], {}, 0
            for _ in range(args.sims):
                got = yardstick_experiment(kind, wall, args.sim_pct, rng, config, args.slot, family)
                if got is None:
                    continue
                raw, plan, guard = got
                runs += 1
                full = yardstick_outcome(raw, config, plan, guard)
                n, early = len(raw.pairs()), None
                for k in range(plan.min_pairs, n):
                    cut = copy.deepcopy(raw)
                    cut.invocations = [inv for inv in raw.invocations if inv.pair < k]
                    y, s = adjusted(metric_pairs(cut, primary.name, primary.direction,
                                                 tuple(plan.adjust.get(primary.name, ()))), plan.prior(primary.name))
                    if give_up(y, s, max_pairs=plan.max_pairs, tolerance_pct=guard.tolerance_pct, alpha=guard.alpha):
                        cut.stopped = UNSETTLED
                        early = yardstick_outcome(cut, config, plan, guard)
                        gave, saved = gave + 1, saved + [n - k]
                        break
                if early is not None and early != full:
                    changed[f"{full}->{early}"] = changed.get(f"{full}->{early}", 0) + 1
            tag = f"curtail.{kind}.wall{wall:+g}"
            runs = max(1, runs)
            print(f"METRIC {tag}.gave_up_rate={gave / runs:.3f}")
            print(f"METRIC {tag}.pairs_saved_mean={sum(saved) / runs:.2f}")
            print(f"METRIC {tag}.verdict_changed_rate={sum(changed.values()) / runs:.3f}")
            print(f"# {tag}: {runs} runs, changed: {changed or 'none'}", flush=True)


def simulate(args) -> None:
    from jobs.contract.config import parse_config
    config = parse_config("build: make\nbenchmark: ./b\nchecks: ./c\neditable: ['src/**']\n"
                          "metrics: [{name: m, primary: true, clock: cpu}]\n")
    family = config.budget.max_experiments
    print(f"# defaults: alpha {config.thresholds.alpha}, max_experiments {family}, repeats.max {config.repeats.max}, "
          f"calibration {config.repeats.calibration} pairs, floor {config.thresholds.min_effect_pct}%, "
          f"target {config.thresholds.target_mde_pct}%; slot {args.slot}", flush=True)
    rng = np.random.default_rng(args.seed)
    cases = [(k, 0.0, "") for k in Noise.MODELS] + [(k, e, "") for k in Noise.MODELS for e in (5.0, 14.5)] + \
        [("quiet", 0.0, h) for h in HAZARDS]
    only = set(args.only.split(",")) if args.only else None
    for kind, effect, hazard in cases:
        name = hazard or kind
        if only and name not in only:
            continue
        sims = args.sims if effect == 0 else max(1, args.sims // 2)
        runs = [one_run(kind, effect, hazard, rng, config, args.slot, family) for _ in range(sims)]
        outcomes = [status for status, _ in runs]
        tag = f"sim.{name}.effect{effect:g}"
        print(f"METRIC {tag}.pairs_mean={np.mean([pairs for _, pairs in runs]):.1f}")
        print(f"METRIC {tag}.keep_rate={outcomes.count('keep') / sims:.3f}")
        print(f"METRIC {tag}.invalid_rate={outcomes.count('invalid') / sims:.3f}")
        print(f"METRIC {tag}.slower_rate={outcomes.count('slower') / sims:.3f}")
        print(f"METRIC {tag}.runs={sims}", flush=True)


def load_generator(stop) -> None:
    """Two CPU hogs (plain shell busy loops) switched on and off at random: the benchmark's
    processes land in slow and fast states, as on a busy shared host."""
    rnd = random.Random(1)
    while not stop.is_set():
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)] \
            if rnd.random() < 0.5 else []
        stop.wait(rnd.uniform(0.5, 3.0))
        for h in hogs:
            h.kill()
            h.wait()
        stop.wait(rnd.uniform(0.5, 3.0))


def demo(args) -> None:
    from conftest import git
    from jobs.cli import demo_target
    from synthetic import patch_for
    stop = threading.Event()
    loader = threading.Thread(target=load_generator, args=(stop,), daemon=True) if args.load == "states" else None
    if loader:
        loader.start()
    totals = {"softmax_kept": 0, "stack_confirmed": 0, "nulls": 0, "null_keeps": 0, "pairs": 0, "minutes": 0.0}
    try:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                repo = demo_target(Path(tmp) / "tinyllm")
                cands = []
                for k in range(args.nulls):
                    text = (repo / "src" / "ops.c").read_text() + f"\n/* null candidate {k}: a comment only */\n"
                    cands.append(patch_for(repo, Path(tmp) / f"null{k}.patch", {"src/ops.c": text}))
                out = Path(tmp) / "out"
                cmd = [sys.executable, "-m", "jobs.cli", "run", str(repo), "--agent", "offline", "--out", str(out),
                       "--run-id", f"power{run}"] + [a for c in cands for a in ("--candidate", str(c))]
                start = time.monotonic()
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                minutes = (time.monotonic() - start) / 60
                if proc.returncode != 0:
                    print(f"# run {run}: failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}", flush=True)
                    continue
                summary = json.loads((out / "summary.json").read_text())
                status = {e["name"]: e for e in summary["experiments"]}
                softmax = status.get("fuse-softmax", {}).get("status")
                nulls = [status[f"null{k}"] for k in range(args.nulls) if f"null{k}" in status]
                false = sum(n["status"] == "keep" for n in nulls)
                pairs = sum((r.get("runner") or {}).get("pairs", 0)
                            for r in [*summary["experiments"], *summary["attribution"], *summary["stacks"].values()])
                in_branch = git(repo, "log", "--format=%B", f"{summary['base_commit']}..{summary['branch']}") \
                    if summary.get("branch_left", True) else ""      # no branch is left when nothing is kept
                confirmed = bool(summary["stack_confirmed"]) and "Hypothesis: fuse-softmax " in in_branch
                totals["softmax_kept"] += softmax == "keep"
                totals["stack_confirmed"] += confirmed
                totals["nulls"] += len(nulls)
                totals["null_keeps"] += false
                totals["pairs"] += pairs
                totals["minutes"] += minutes
                print(f"# run {run}: fuse-softmax {softmax} ({status.get('fuse-softmax', {}).get('reason', '')}); "
                      f"stack confirmed with it: {confirmed}; null keeps {false}/{len(nulls)}; {pairs} pairs "
                      f"(processes per arm); {minutes:.1f} min", flush=True)
                kept = [e["name"] for e in summary["experiments"] if e["status"] == "keep"]
                stack = "; ".join(f"{p}: {s['status']} ({s['reason']})" for p, s in summary["stacks"].items())
                loo = "; ".join(f"{a['name']}: {a['status']}" for a in summary["attribution"])
                print(f"#   kept alone: {kept}; leave-one-out: {loo or '-'}; stack: {stack or '-'}", flush=True)
    finally:
        stop.set()
        if loader:
            loader.join(timeout=10)
    runs = max(1, args.runs)
    print(f"METRIC demo.runs={args.runs}")
    print(f"METRIC demo.softmax_kept_runs={totals['softmax_kept']}")
    print(f"METRIC demo.stack_confirmed_runs={totals['stack_confirmed']}")
    print(f"METRIC demo.null_candidates={totals['nulls']}")
    print(f"METRIC demo.null_false_keeps={totals['null_keeps']}")
    print(f"METRIC demo.pairs_per_run={totals['pairs'] / runs:.1f}")
    print(f"METRIC demo.minutes_per_run={totals['minutes'] / runs:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("simulate")
    s.add_argument("--sims", type=int, default=200, help="runs per null case (half that per effect)")
    s.add_argument("--slot", type=int, default=1, help="the experiment's slot in a run of max_experiments")
    s.add_argument("--only", default="", help="comma-separated model or hazard names")
    s.add_argument("--seed", type=int, default=0)
    for name in ("yardstick", "curtail"):          # the same runs: judged, or judged with and without giving up
        y = sub.add_parser(name)
        y.add_argument("--sims", type=int, default=100, help="runs per (noise model, wall effect)")
        y.add_argument("--slot", type=int, default=1)
        y.add_argument("--only", default="", help="comma-separated noise model names")
        y.add_argument("--sim-pct", type=float, default=-2.3, help="the candidate's change in simulated cycles")
        y.add_argument("--wall", default="2,0,-4,-8,-15", help="comma-separated true wall-clock effects in %%")
        y.add_argument("--seed", type=int, default=0)
    g = sub.add_parser("looks")
    g.add_argument("--sims", type=int, default=200, help="runs per (noise model, wall effect)")
    g.add_argument("--only", default="", help="comma-separated noise model names")
    g.add_argument("--wall", default="5,0,-5,-10", help="comma-separated true wall-clock effects in %%")
    g.add_argument("--cap", type=int, default=60, help="the pair cap (the demo's repeats.max)")
    g.add_argument("--looks", default="8,16,32", help="the group-sequential design's planned looks before the cap")
    g.add_argument("--seed", type=int, default=0)
    d = sub.add_parser("demo")
    d.add_argument("--runs", type=int, default=10)
    d.add_argument("--nulls", type=int, default=3)
    d.add_argument("--load", choices=["none", "states"], default="none")
    args = parser.parse_args()
    {"simulate": simulate, "yardstick": yardstick, "curtail": curtail, "looks": looks, "demo": demo}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
