"""The on-machine experiment driver: build baseline and candidate, check, benchmark in pairs.

Same code on this machine (LocalExecutor calls `run_experiment`) and on a cloud VM
(`python -m jobs.measure.runner spec.json --repo DIR` prints JSON lines). Every step that runs target code
runs in the sandbox (`jobs.guard.sandbox`): builds and checks with a writable worktree, each benchmark
process with a read-only one, a fresh /tmp and $HOME, and its own input seed. The driver records
per process what the target cannot forge (its wall time, the CPU time of its whole process tree,
the seed, the DIGEST it printed) and samples pairs until the sequential test in the spec decides.
It reports raw records only; verdicts are computed centrally from them, so a VM never decides
what counts as a win (its early stop is a pure function of the same records, valid at any time).
"""
from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from jobs.measure import pairjournal
from jobs.guard import sandbox
from jobs.stats.carryover import clock_carry_over_open
from jobs.measure.locations import Locations, build_key, swap_coins
from jobs.measure.beside import Beside
from jobs.measure.counted import SimulatedCounts
from jobs.measure.together import run_together, usable_cores
from jobs.measure.hostfacts import cpu_model, load_now, machine_facts  # noqa: F401  (cpu_model: jobs.measure.runner's own name)
from jobs.measure.isolation import DEFAULT_ISOLATION, Isolation, IsolationError
from jobs.stats.integrity import EXCLUDED, UNDECIDED, digest_problems, value_problems
from jobs.contract.metrics import explain_missing, parse_metrics
from jobs.guard.secrets import scrubbed_env  # only for --no-sandbox runs: one policy, jobs/guard/secrets.py
from jobs.stats.sequential import Pair, Prior, adjusted, confidence_sequence, decide, pair_schedule, warmup_order
from jobs.contract.spec import ExperimentSpec, Invocation, RawResult
from jobs.stats.verdict import clock_check, metric_pairs

Progress = Callable[[str, float], None]   # (message, fraction done 0..1)
LOG_TAIL = 4000




@dataclass
class Step:
    returncode: int | None          # None: timed out
    output: str
    seconds: float
    cpu_s: float = 0.0
    overflow: str = ""              # the output cap it hit (it was stopped there), or ''


def run_step(command: str, cwd: Path, timeout: float, *, isolation: Isolation = DEFAULT_ISOLATION,
             step: str = "build", extra_env: dict[str, str] | None = None, arm: str | None = None,
             cancel: threading.Event | None = None) -> Step:
    """Run a target command: sandboxed (unless the operator switched it off), under the operator's
    limits, the whole tree killed at the time limit, at the output cap, when `cancel` is set (as at
    the time limit) and when the command ends."""
    policy = isolation.policy(cwd, step, extra_env, arm)
    if policy is None:      # unsandboxed: the compiler cache's settings for a build step (jobs.measure.isolation)
        base_env = scrubbed_env()
        env = {**base_env, **isolation.build_env(cwd, step, arm, base_env.get("PATH", "")), **(extra_env or {})}
    else:
        env = None
    done = sandbox.run(command, Path(cwd), timeout, policy=policy, env=env, limits=isolation.limits, cancel=cancel)
    return Step(done.returncode, done.output, done.wall_s, done.cpu_s, done.overflow)


def tail(text: str, limit: int = LOG_TAIL) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _load() -> list[float]:
    """The 1-minute load average now, as a one-item list (empty where the OS does not say)."""
    now = load_now()
    return [round(now[0], 2)] if now else []


@functools.cache
def _probe_buffers():
    import numpy as np
    return np.ones(4 * 1024 * 1024, dtype=np.float64), np.zeros(4 * 1024 * 1024, dtype=np.float64)


def machine_probe() -> float:
    """A memory-bandwidth probe (GB/s) taken just before each benchmark process: a slow period
    slows the probe and the benchmark alike. Taken by the runner, never by target code. The two
    32 MiB buffers (out of cache) are allocated once per process: allocating and faulting them in
    for every probe cost more than the copies it times (~15 ms a pair of processes)."""
    import numpy as np
    src, dst = _probe_buffers()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


class Failure(Exception):
    def __init__(self, status: str, reason: str, log: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def must_pass(command: str, tree: Path, timeout: float, what: str, fail_status: str, isolation: Isolation,
              step: str, arm: str, cancel: threading.Event | None = None) -> tuple[str, float]:
    """Run a build or checks step; a timeout, an output over the cap or a non-zero exit becomes
    that step's own status (`cancel`: stopped when set, as at the time limit)."""
    done = run_step(command, tree, timeout, isolation=isolation, step=step, arm=arm, cancel=cancel)
    if done.overflow:
        raise Failure(fail_status, f"{what} stopped: {done.overflow}", tail(done.output))
    if done.returncode is None:
        raise Failure("timeout", f"{what} exceeded {timeout:.0f} s", tail(done.output))
    if done.returncode != 0:
        raise Failure(fail_status, f"{what} failed (exit {done.returncode})", tail(done.output))
    return f"== {what} ({done.seconds:.1f} s)\n{tail(done.output, 1000)}\n", done.seconds


def base_arm(spec: ExperimentSpec) -> str:
    """Whose caches the baseline sees: `base`, written only by builds of a run's base commit. An
    attribution's baseline is a stack of candidates, so it builds with the candidates' caches."""
    return "candidate" if spec.kind == "attribution" else "base"


def _invoke(spec: ExperimentSpec, tree: Path, who: str, seed: int, isolation: Isolation) -> Invocation:
    done = run_step(spec.benchmark, tree, spec.benchmark_timeout, isolation=isolation, step="benchmark",
                    extra_env={"AUTORESEARCH_SEED": str(seed)}, arm=base_arm(spec) if who == "baseline" else "candidate")
    if done.overflow:
        raise Failure("crash", f"{who} benchmark stopped: {done.overflow}", tail(done.output))
    if done.returncode is None:
        raise Failure("timeout", f"{who} benchmark exceeded {spec.benchmark_timeout:.0f} s", tail(done.output))
    if done.returncode != 0:
        raise Failure("crash", f"{who} benchmark exited with status {done.returncode}", tail(done.output))
    parsed = parse_metrics(done.output, max_lines=isolation.limits.metric_lines)
    if parsed.overflow:
        raise Failure("crash", f"{who} benchmark: {parsed.overflow}", tail(done.output))
    if spec.primary not in parsed.values:
        raise Failure("crash", f"{who} benchmark: {explain_missing(parsed, spec.primary)}", tail(done.output))
    return Invocation(arm="", pair=-1, position=0, seed=seed,
                      metrics={k: v for k, v in parsed.values.items() if k in spec.metrics},
                      digests=parsed.digests, wall_s=done.seconds, cpu_s=done.cpu_s)


def stop_reason(spec: ExperimentSpec, result: RawResult) -> str:
    """After each complete pair: '' to go on, else why to stop (the spec's sequential test on the
    primary metric, or a digest that already disagrees)."""
    pairs = result.pairs()
    if digest_problems([(a.digests, b.digests) for a, b in pairs[-1:]]):
        return "invalid"
    if value_problems([b.metrics for _, b in pairs[-1:]], [spec.primary], "candidate"):
        return "invalid"             # no later pair can make it a number the test can use
    if spec.stop is None:
        return ""
    rule = spec.stop
    prior = Prior(tuple(Pair(p[0], tuple(p[1:])) for p in spec.prior))
    y, s = adjusted(metric_pairs(result, spec.primary, spec.directions.get(spec.primary, "higher"),
                                 tuple(spec.adjust)), prior)
    if spec.simulate:     # the simulation decides; pairs only serve the wall-clock guard
        from jobs.measure.simulate import Guard, compare, stop_after_pair
        return stop_after_pair(compare(result.simulated), spec.simulate_floor_pct, y, s,
                               Guard(spec.wall_tolerance_pct, rule.alpha_loss, rule.min_pairs, rule.alpha_keep,
                                     max_pairs=rule.max_pairs))
    kind = decide(y, s, rule, prior).kind
    if kind == "keep" and spec.clock:
        # A keep is final only once the runner's own clock decides too (jobs.stats.integrity.clock_decision).
        claim_lo = confidence_sequence(y, s, rule.alpha_keep)[0]
        state, _ = clock_check(result, spec.primary, spec.clock, claim_lo, spec.timed_share, rule.alpha_loss,
                               rule.alpha_loss)
        if state == EXCLUDED:
            return "invalid"
        if state == UNDECIDED and len(pairs) < spec.n_per_arm:
            return ""
        # A keep does not stop while a carry-over could explain the clock's confirmation: the judge's
        # test decides at the end, on every pair (jobs.stats.carryover.clock_carry_over_open).
        if len(pairs) < spec.n_per_arm and clock_carry_over_open(result, spec.clock, claim_lo, spec.timed_share,
                                                                   rule.alpha_loss):
            return ""
    return kind if kind in ("keep", "loss", "futile") else ""


class _Done(Exception):
    """Nothing left to measure (the candidate's build outputs equal the baseline's)."""


def _seed(spec: ExperimentSpec) -> int:
    """The simulated workload's input seed: the run's, so the baseline's count is one number per run."""
    return (spec.simulate_seed or spec.seed) % 2147483629 + 7


def _count_key(counts: SimulatedCounts, spec: ExperimentSpec, arm: str) -> str:
    """The key of arm `arm`'s build in `counts`: the baseline's commit built with its caches (`base_arm`),
    or the candidate's with the candidates'; the one place that says which is which."""
    if arm == "A":
        return counts.key(spec, spec.base_commit, base_arm(spec), _seed(spec))
    return counts.key(spec, spec.head_commit, "candidate", _seed(spec))


def _simulate_arm(spec: ExperimentSpec, trees: dict, arm: str, seed: int, isolation: Isolation,
                  cancel: threading.Event) -> dict:
    from jobs.measure import simrun
    tree, who = trees[arm]
    side = "candidate" if arm == "B" else base_arm(spec)
    # The A/A's second run is slowed on purpose: work that follows the time shows as counts that
    # fall (jobs.measure.simulate.time_budget_problem); a fixed amount of work counts the same.
    return simrun.simulate(spec.simulate, tree, spec.simulate_timeout, seed=seed, who=who,
                           slowed=spec.kind == "calibration" and arm == "B", cancel=cancel,
                           run_step=lambda c, cwd, t, **kw: run_step(c, cwd, t, isolation=isolation, arm=side, **kw))


def _run_native(spec: ExperimentSpec, trees: dict, arm: str, seed: int, isolation: Isolation,
                cancel: threading.Event | None = None) -> Step:
    return run_step(spec.simulate, trees[arm][0], spec.simulate_timeout, isolation=isolation, step="benchmark",
                    arm=base_arm(spec) if arm == "A" else "candidate", extra_env={"AUTORESEARCH_SEED": str(seed)},
                    cancel=cancel)


@dataclass
class Premade:
    """A candidate's steps made before its own experiment ran, beside the previous one's checks and
    simulation (jobs.executors.local): its build always; where there was time (`AHEAD_SHARE`), its
    checks (or their failure, given again as the experiment's own) and its simulated run (`count_ahead`)."""
    build: tuple[str, float]
    checks: tuple[str, float] | None = None
    checks_failure: Failure | None = None
    counted: dict | None = None


# The next candidate's checks and simulated run go on beside this experiment only when its build was
# over within this share of the baseline's simulated run (its CPU time) after this experiment's own
# builds (`Beside.since_builds`; 0 where the two candidates were built at once): this experiment's
# pairs then wait for them about as long as that build took, and the next experiment saves its checks
# and simulation (about the baseline's simulated run), so the wait is at most half the saving. Where
# the build takes about as long as the simulation (a single compile-and-link command), the second core
# is busy with it anyway.
AHEAD_SHARE = 0.5


def count_ahead(spec: ExperimentSpec, base_tree: Path, head_tree: Path, isolation: Isolation,
                counts: SimulatedCounts | None, cancel: threading.Event) -> dict | None:
    """The candidate's simulated run and its native DIGEST run, made before its experiment runs (the
    work `_yardstick` does for it once the baseline's count is known); None where that does not apply
    (no simulation, no known baseline count, an unsandboxed run, declared build outputs equal to the
    baseline's, no native code), where it failed (its experiment runs it again, and says why) or was
    stopped. Benchmark steps see a read-only tree, so a stopped run leaves the tree as it was."""
    from jobs.measure import simrun
    if not spec.simulate or spec.kind != "experiment" or not isolation.enabled or counts is None:
        return None
    seed = _seed(spec)
    key = _count_key(counts, spec, "A")
    if counts.get(key) is None or counts.get(_count_key(counts, spec, "B")) is not None:
        return None        # (a build counted earlier in the run is not counted again: its experiment reuses it)
    # The baseline's folder may stand aside for the current experiment's builds in the other folders
    # (jobs.measure.locations) while this reads it: a wrong answer costs only this early count, which
    # its own experiment makes again where it does not apply (`_yardstick` compares the outputs first).
    try:
        if spec.artifacts and simrun.compare_artifacts(base_tree, head_tree, spec.artifacts)["identical"]:
            return None
    except OSError:
        return None
    if spec.simulate_derived and not simrun.makes_native_code(head_tree):
        return None
    trees = {"A": (base_tree, "baseline"), "B": (head_tree, "candidate")}
    try:
        outcome = _simulate_arm(spec, trees, "B", seed, isolation, cancel)
    except simrun.SimulationFailed:
        return None
    native = _run_native(spec, trees, "B", seed, isolation, cancel)
    return None if cancel.is_set() else {"B": outcome, "native": native, "key": key}


def checks_and_count_ahead(spec: ExperimentSpec, base_tree: Path, head_tree: Path, isolation: Isolation,
                           counts: SimulatedCounts | None, cancel: threading.Event, built_after: float,
                           premade: Premade) -> bool:
    """After the next candidate's build (over `built_after` seconds into this experiment's checks and
    simulation; 0 where it ended beside this experiment's own build):
    its checks and simulated run into `premade`, where `AHEAD_SHARE` allows. False when its tree can no
    longer stand for a fresh build: checks stopped half way (or at their time limit) may have written
    into it."""
    known = counts.get(_count_key(counts, spec, "A")) if counts is not None and spec.simulate else None
    # The baseline's CPU time when counted: its wall time may include waiting for a core it shared.
    simulated_s = float(known.get("cpu_s") or known.get("wall_s") or 0) if known is not None else 0.0
    if known is None or not isolation.enabled or built_after > AHEAD_SHARE * simulated_s:
        return True
    if spec.run_checks:
        try:
            text, seconds = must_pass(spec.checks, head_tree, spec.checks_timeout, "checks", "checks_failed",
                                      isolation, "checks", "candidate", cancel=cancel)
        except Failure as failure:
            # Stopped, or over its time limit beside another experiment's work: not a verdict on this
            # candidate, and what it wrote stays in the tree. Any other failure is its own turn's.
            if cancel.is_set() or failure.status == "timeout":
                return False
            premade.checks_failure = failure
            return True
        if cancel.is_set():
            return False
        premade.checks = (text.replace("== checks", "== checks, beside the previous experiment", 1), seconds)
    premade.counted = count_ahead(spec, base_tree, head_tree, isolation, counts, cancel)
    return True


def _yardstick(spec: ExperimentSpec, trees: dict, result: RawResult, isolation: Isolation, progress: Progress,
               log: list[str], counts: SimulatedCounts | None = None, counted: dict | None = None) -> bool:
    """Before any pair (jobs/measure/simrun.py): compare the declared build outputs, then run the reduced workload
    once per arm under cachegrind (each build once per run where `counts` knows it already, the
    baseline's in every experiment after the first: the candidate's native run then takes the free core;
    the candidate's too where `counted`, made by `count_ahead` beside the previous experiment, is of
    this baseline count). True: nothing to sample (identical outputs, or another DIGEST or number of
    processes: invalid). Two A/A runs that counted a different number of processes fail the calibration."""
    from jobs.measure import simrun
    from jobs.measure.simulate import digest_problems, native_problems, process_problems
    if spec.artifacts and spec.kind != "calibration" and trees["A"][0] != trees["B"][0]:
        result.artifacts = simrun.compare_artifacts(trees["A"][0], trees["B"][0], spec.artifacts)
        if result.artifacts["identical"]:
            result.stopped = "identical"
            return True
    if not spec.simulate:
        return False
    if spec.simulate_derived and not simrun.makes_native_code(trees["A"][0]):
        result.simulate_problem = ("the build made no native code (no ELF file in its tree): cachegrind would count "
                                   "an interpreter's work, not the target's")
        return False
    seed = _seed(spec)
    counts = counts if isolation.enabled else None
    keys = {a: _count_key(counts, spec, a) for a in ("A", "B")} if counts is not None else {}
    # The A/A counts both of its builds (their difference is the jitter it measures); it leaves the
    # base's count for the experiments.
    known = {a: c for a, c in ((a, counts.get(k)) for a, k in keys.items()) if c is not None} \
        if counts is not None and spec.kind != "calibration" else {}
    ahead = counted if "A" in known and counted is not None and counted.get("key") == keys["A"] else None
    # The same workload natively, once: in the A/A what the simulation costs over a native run (timed
    # after the simulations, alone); for a candidate, the DIGESTs it prints natively must be those it
    # printed when counted (run beside the simulation where a count is known).
    arm = "A" if spec.kind == "calibration" else "B"
    run_native = functools.partial(_run_native, spec, trees, arm, seed, isolation)
    if ahead is not None and "B" not in known:     # nothing left to run: both counts and the native run are known
        progress("the candidate was simulated beside the previous experiment; the baseline's count is the run's", 0.12)
        outcomes = {"B": {**ahead["B"], "ahead": True}, "native": {"step": ahead["native"]}}
    else:
        runs = {a: functools.partial(_simulate_arm, spec, trees, a, seed, isolation) for a in trees if a not in known}
        if known:
            runs["native"] = lambda cancel: {"step": run_native(cancel)}
            fresh = " and ".join(trees[a][1] for a in runs if a != "native")
            reused = " and ".join(trees[a][1] for a in known)
            progress(f"simulating the {fresh} (cachegrind; the {reused}'s count is the run's)" if fresh else
                     f"the {reused}'s counts are the run's: the candidate runs natively", 0.12)
        else:
            progress("simulating baseline and candidate side by side (cachegrind)", 0.12)
        outcomes = simrun.side_by_side(runs)
    native_beside = outcomes.pop("native", {}).get("step")
    failed = simrun.first_failure(outcomes)
    if failed and spec.simulate_derived:     # the A/A's try of the derived yardstick: the run goes on without it
        result.simulate_problem = simrun.why_not_derived(failed, spec.simulate_timeout)
        log.append(f"== derived yardstick not used: {result.simulate_problem}\n{tail(failed.log, 1000)}\n")
        return False
    if failed:
        raise Failure(failed.status, failed.reason, failed.log)
    result.simulated.update(outcomes)
    for a, count in known.items():
        result.simulated[a] = {**count, "reused": True}
    for a, key in keys.items():
        if a not in known:
            counts.put(key, result.simulated[a])
    for a, (tree, who) in trees.items():
        once = (" counted once for the run" if result.simulated[a].get("reused") else
                " beside the previous experiment" if result.simulated[a].get("ahead") else "")
        log.append(f"== simulated {who}: {result.simulated[a]['cycles']:,} cycles "
                   f"({result.simulated[a]['wall_s']:.1f} s{once})\n")
    native = native_beside or run_native()
    if spec.kind == "calibration" and native.returncode == 0:
        result.steps["native_simulate_s"] = native.seconds
    elif spec.kind != "calibration":
        result.simulated["B"]["native"] = simrun.native_view(native.output, native.returncode)
    if spec.kind == "calibration" and process_problems(result.simulated):   # two runs of one commit must agree
        a, b = (result.simulated[arm]["processes"] for arm in ("A", "B"))
        raise Failure("crash", f"A/A: two simulated runs of the base commit ran {a} and {b} process(es) under "
                      "cachegrind: the workload's process tree is not deterministic (or a record was forged), so its "
                      "counts cannot be compared; make `simulate.command` start the same processes every run")
    problems = [] if spec.kind == "calibration" else (
        process_problems(result.simulated) + digest_problems(result.simulated, spec.simulate_digests)
        + native_problems(result.simulated, spec.simulate_digests))
    if problems:              # the counted build computes something else: no pair can make it a keep
        log.append("== " + "; ".join(problems) + "\n")
        result.stopped = "invalid"
    return bool(problems)


def _sample(spec: ExperimentSpec, folders: dict[str, Path], locations: Locations | None, result: RawResult,
            isolation: Isolation, progress: Progress, journal: Path | None,
            ready: Callable[[], None] | None = None) -> None:
    """Warm-up, then the pairs in the schedule's order (from the journal's, if an interrupted attempt left
    some) until `stop_reason` says stop; with `locations`, a coin per pair picks which folder each arm runs
    from, else each arm runs from its own folder (`folders`). `ready`: called before the first process,
    to end work beside the experiment (the processes run alone). Their seconds, screening's included,
    add up in `steps["sampling"]`: the part of an experiment that runs alone, which no build-side saving
    shortens (tests/benchmarks/experiments_per_hour.py prints the bound it sets)."""
    if ready is not None:
        ready()
    began = time.monotonic()
    try:
        _pairs(spec, folders, locations, result, isolation, progress, journal)
    finally:
        result.steps["sampling"] = result.steps.get("sampling", 0.0) + time.monotonic() - began


def _pairs(spec: ExperimentSpec, folders: dict[str, Path], locations: Locations | None, result: RawResult,
           isolation: Isolation, progress: Progress, journal: Path | None) -> None:
    """`_sample`'s warm-up and pairs."""
    names = {"A": "baseline", "B": "candidate"}
    coins = swap_coins(spec.n_per_arm, spec.seed) if locations else [0] * spec.n_per_arm
    trees = {arm: (tree, names[arm]) for arm, tree in (locations.trees() if locations else folders).items()}
    index = 0
    schedule = pair_schedule(spec.n_per_arm, spec.seed)
    warm_seed = spec.seed % 2147483629 + 1
    for _ in range(spec.warmup):   # run for their side effects (page cache, CPU clock) and discarded
        for arm in warmup_order(spec.seed):
            tree, who = trees[arm]
            inv = _invoke(spec, tree, who, warm_seed, isolation)
            inv.arm, inv.index = arm, index
            result.invocations.append(inv)
            index += 1
    earlier = pairjournal.load(journal, spec)
    resumed = len({inv.pair for inv in earlier})
    if earlier:
        for inv in earlier:
            inv.index = index
            result.invocations.append(inv)
            index += 1
        progress(f"resumed {resumed} measured pairs of an interrupted attempt", 0.2)
        result.stopped = stop_reason(spec, result)
    for i, (first, seed) in enumerate(schedule):
        if result.stopped:
            break
        if i < resumed:
            continue
        progress(f"pair {i + 1}/{spec.n_per_arm}", 0.2 + 0.8 * i / max(1, spec.n_per_arm))
        if locations:
            trees = {arm: (tree, names[arm]) for arm, tree in locations.place(bool(coins[i])).items()}
        for position, arm in enumerate((first, "A" if first == "B" else "B")):
            tree, who = trees[arm]
            probe = machine_probe() if spec.probe else None
            inv = _invoke(spec, tree, who, seed, isolation)
            inv.arm, inv.pair, inv.position, inv.probe, inv.index = arm, i, position, probe, index
            inv.location = int(coins[i])
            result.invocations.append(inv)
            index += 1
        pairjournal.save(journal, spec, result)
        result.stopped = stop_reason(spec, result)
    if not result.stopped:
        result.stopped = "exhausted" if spec.stop else "fixed"


# What screening pairs may settle: the simulation's discard, and outputs that disagree (a DIGEST or a
# value: not a speed, so where an arm runs from cannot make or hide it).
SCREEN_SETTLES = ("simulated", "invalid")


def _screen(spec: ExperimentSpec, folders: dict[str, Path], result: RawResult, isolation: Isolation,
            progress: Progress, journal: Path | None, log: list[str], ready: Callable[[], None] | None = None) -> bool:
    """Each build once (issue 43): when the simulated cycles already discard the candidate, its pairs
    only serve the guard against a wall-clock claim the simulation does not see, and most claim
    nothing. So first sample with each arm in its own folder, without building each in the other's:
    True when that settles it (`SCREEN_SETTLES`). Any other stop (a claim, or no decision) is a speed
    claim a location effect could make, so those pairs are set aside (counted in
    `steps["screening_pairs"]`) and the caller measures again from pair 0 with locations swapped.
    Screening pairs are never journaled (a resumed attempt screens again); a journal with pairs means
    an earlier attempt had gone on to the swapped protocol, so it resumes that."""
    from jobs.measure.simulate import compare
    sim = compare(result.simulated)
    if (not spec.simulate or spec.kind == "calibration" or spec.stop is None or result.simulate_problem
            or (sim is not None and sim.saving_pct >= spec.simulate_floor_pct) or pairjournal.load(journal, spec)):
        return False
    _sample(spec, folders, None, result, isolation, progress, None, ready)
    pairs = len(result.pairs())
    if result.stopped in SCREEN_SETTLES:
        why = ("the simulated cycles discard it and the wall clock claimed nothing" if result.stopped == "simulated"
               else "its outputs disagree with the baseline's (invalid)")
        log.append(f"== second-folder builds skipped: {why} ({pairs} pairs, each arm in its own folder)\n")
        return True
    log.append(f"== screening stopped '{result.stopped}' after {pairs} pairs with each arm in its own folder: set "
               "aside, and measured again with each arm built in both folders (a location effect could make a claim)\n")
    result.steps["screening_pairs"] = pairs
    result.invocations.clear()
    result.stopped = ""
    return False


def run_experiment(spec: ExperimentSpec, base_dir: Path, head_dir: Path, *, build_base: bool = True,
                   progress: Progress | None = None, isolation: Isolation | None = None,
                   journal: Path | None = None, keep_baseline: bool = False, incremental: bool = False,
                   counts: SimulatedCounts | None = None, built: Premade | None = None,
                   beside: Beside | None = None) -> RawResult:
    """Build, check and benchmark one experiment in two prepared clean trees. `journal` (optional):
    where each complete pair is kept as it is measured, and resumed from (jobs/measure/pairjournal.py).
    `keep_baseline`: `head_dir`'s path is the same for every experiment of the run, so the baseline's
    build made there is kept for the next one (jobs.measure.locations); `incremental`: the candidate's
    build in the baseline's folder starts from the baseline's build there where that equals a clean one;
    `counts`: the simulated runs of builds counted earlier in the run (jobs.measure.counted);
    `built`: the candidate's steps already made in `head_dir` (`Premade`: its build, perhaps its checks and
    simulated run), so they are not made again;
    `beside`: work started with the candidate's build where that build is alone and a core is free, else
    once it is built, and finished before the first pair (`Beside`)."""
    progress = progress or (lambda msg, frac: None)
    isolation = isolation or Isolation.from_spec(spec.sandbox)
    started = time.monotonic()
    result = RawResult(status="ok", cpu=cpu_model(), sandboxed=isolation.enabled,
                       machine={**machine_facts(), "load": _load()})
    log = []
    locations: Locations | None = None

    def settle_beside() -> None:
        """The work beside this experiment is over (or stopped) before its first pair, which runs alone;
        until then it goes on beside this one's builds in the other folders too."""
        nonlocal beside
        if beside is None:
            return
        work, beside = beside, None
        progress("finishing the next candidate's steps before the pairs", 0.15)
        if stopped := work.finish(expected=result.steps.get("build_candidate", 0.0)):
            log.append(f"== the next candidate's steps, begun beside this experiment: {stopped}; what was not "
                       "over is made again when its own experiment runs\n")
    texts: dict[str, str] = {}      # each build's log text under its step name, logged in the builds' order

    def build_step(who: str, tree: Path, step: str, what: str, stop: threading.Event) -> None:
        """`who`'s build in `tree`, recorded as `step`: one of two at once (jobs.measure.together)."""
        texts[step], result.steps[step] = must_pass(spec.build, tree, spec.build_timeout, what, "build_failed",
                                                    isolation, "build",
                                                    base_arm(spec) if who == "baseline" else "candidate", cancel=stop)

    def log_builds(steps: list[str]) -> None:
        log.extend(texts[step] for step in steps if step in texts)
    try:
        # The baseline's and the candidate's builds, in folders of their own: at once.
        builds = ([("baseline", base_dir)] if build_base else []) + (
            [("candidate", head_dir)] if head_dir != base_dir and built is None else [])
        if builds:
            progress(f"building {' and '.join(who for who, _ in builds)}", 0.0)
        if beside is not None and not build_base and len(builds) < usable_cores():
            # A candidate not built ahead (the run's first, say) builds with a core to spare: the next
            # candidate's build takes it now, rather than leave it idle until this build is over.
            beside.start()
        try:
            run_together([functools.partial(build_step, who, tree, f"build_{who}", f"{who} build")
                          for who, tree in builds])
        finally:
            log_builds([f"build_{who}" for who, _ in builds])
        if head_dir != base_dir and built is not None:
            text, result.steps["build_candidate"] = built.build
            log.append(text)
        if beside is not None:
            beside.builds_over()
        if spec.run_checks and built is not None and built.checks_failure is not None:
            raise built.checks_failure      # as they failed beside the previous experiment, on this build
        if spec.run_checks and built is not None and built.checks is not None:
            text, result.steps["checks"] = built.checks
            log.append(text)
        elif spec.run_checks:
            progress("running checks", 0.1)
            text, result.steps["checks"] = must_pass(spec.checks, head_dir, spec.checks_timeout, "checks",
                                                     "checks_failed", isolation, "checks", "candidate")
            log.append(text)
        stop = _yardstick(spec, {"A": (base_dir, "baseline"), "B": (head_dir, "candidate")}, result, isolation,
                          progress, log, counts, built.counted if built is not None else None)
        if stop:
            settle_beside()
            progress("measured (no change in the binary)" if result.stopped == "identical" else
                     "measured (the simulated workload differs from the baseline's)", 1.0)
            raise _Done()
        names = {"A": "baseline", "B": "candidate"}
        folders = {"A": base_dir, "B": head_dir}
        if head_dir != base_dir and spec.swap_locations and not _screen(spec, folders, result, isolation, progress,
                                                                        journal, log, settle_beside):
            # Each arm built in both folders; a coin per pair picks which stands where (jobs.measure.locations).
            # The baseline's build at the candidate's folder is kept for the next experiment of the run
            # (`keep_baseline`: the local executor's candidate folders keep their paths for the run), never in an A/A.
            keep = build_key(spec.base_commit, spec.build, base_arm(spec)) \
                if keep_baseline and spec.kind != "calibration" else ""
            locations = Locations(base_dir, head_dir, keep=keep, base_commit=spec.base_commit,
                                  incremental=incremental and spec.kind != "calibration")

            progress("building each arm in the other's folder", 0.15)
            try:
                locations.prepare(lambda folder, arm, stop: build_step(
                    names[arm], folder, f"build_{names[arm]}_swapped", f"{names[arm]} build in the other arm's folder",
                    stop))
            finally:
                log_builds(["build_candidate_swapped", "build_baseline_swapped"])
            if locations.reused:
                log.append("== baseline build in the other arm's folder: kept from an earlier experiment (same base "
                           "commit and build command)\n")
        if not result.stopped:          # (screening may have decided it)
            _sample(spec, folders, locations, result, isolation, progress, journal, settle_beside)
        progress(f"measured ({result.stopped})", 1.0)
    except _Done:
        pass
    except Failure as failure:
        result.status, result.reason = failure.status, failure.reason
        log.append(f"== {failure.status}: {failure.reason}\n{failure.log}")
    finally:
        if beside is not None:       # (not yet finished: a failure or a cancel ended this experiment early)
            beside.finish(cancel=sys.exc_info()[0] is not None)
        if locations:
            locations.restore()
    result.machine["load"] += _load()
    result.seconds = time.monotonic() - started
    result.log = tail("".join(log), 3 * LOG_TAIL)
    return result


def main(argv: list[str] | None = None) -> int:
    """Remote entry point: worktrees from the repo, run, print progress and one RESULT line."""
    from jobs.guard import gitops
    parser = argparse.ArgumentParser(prog="python -m jobs.measure.runner")
    parser.add_argument("spec", type=Path)
    parser.add_argument("--repo", type=Path, default=Path("."))
    parser.add_argument("--work", type=Path, default=Path("autoresearch-work"))
    args = parser.parse_args(argv)
    args.repo, args.work = args.repo.resolve(), args.work.resolve()   # git -C needs absolute paths
    spec = ExperimentSpec.from_json(args.spec.read_text())
    base = gitops.add_worktree(args.repo, args.work / "base", spec.base_commit)
    head = base if spec.head_commit == spec.base_commit and spec.kind != "calibration" else \
        gitops.add_worktree(args.repo, args.work / "head", spec.head_commit)

    def progress(message: str, fraction: float) -> None:
        print(f"PROGRESS {fraction:.2f} {message}", flush=True)

    try:
        isolation = Isolation.from_spec(spec.sandbox, protect=(args.work, args.repo))
        if isolation.enabled:
            sandbox.check()
    except (IsolationError, sandbox.SandboxUnavailable) as exc:
        result = RawResult(status="skipped", reason=str(exc))
    else:
        result = run_experiment(spec, base, head, progress=progress, isolation=isolation)
    print("RESULT " + result.to_json(), flush=True)
    print(f"EXPERIMENT_STATUS: {result.status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
