"""The deterministic yardstick: simulated cycles from Valgrind's cachegrind. Pure.

Noise on a shared machine hides the 1-3% effects a mature library offers (the A/A MDE there is
5-20%). Counting work instead of time does not: a reduced workload (`simulate.command`) runs
once per arm under `valgrind --tool=cachegrind --cache-sim=yes` with a fixed cache geometry
(`CACHES`, so the count does not depend on the host's caches), and its event counts become one
number, the **simulated cycles** (`MODEL`):

    cycles = Ir + 10 * (I1mr + D1mr + D1mw) + 100 * (ILmr + DLmr + DLmw)

instructions executed plus first-level misses at ~10 cycles and last-level misses at ~100
(the model of SQLite's cachegrind tracking and of Itamar Turner-Trauring's write-up). Two runs
of one binary count the same to a few parts per million; the A/A calibration measures that jitter
and the floor of the simulated change is never below a multiple of it.

How it combines with wall-clock pairs (`judge_yardstick`), in order:

1. Anything the wall-clock verdict already failed (build, checks, crash, timeout, a baseline that
   fails its sanity check as a parser would, an invalid candidate) stands. A baseline shaken by the
   machine's load (both arms spread alike) does not: the simulation exists for that machine, so it
   decides, the candidate's own checks still run, and the wall clock confirms nothing (step 4).
2. A candidate whose build outputs (`artifacts`) are byte-identical to the baseline's is
   "no change in the binary": nothing was sampled. One whose simulated workload printed a
   `DIGEST` other than the baseline's (same seed; names the A/A calibration found deterministic)
   is `invalid` before any pair: the build the yardstick counts computes something else, and
   since the counted work and the checked work are one process, a candidate cannot be fast where
   it is counted and correct where it is checked.
3. **Integrity**: a benchmark that claims a speed-up (its primary metric wins at the experiment's
   level) while the simulated cycles do not move beyond the floor is `invalid`: the work it claims
   to save is still being done. Where the workload runs a build of its own (`separate_build`, e.g.
   an AVX2 copy because Valgrind has no AVX-512) the claim may be true on a path only the measured
   build runs: discarded as unseen instead. Nor where the candidate runs its work on more cores at once
   (`at_once`: the runner's CPU time per wall second rose), which the simulation, running threads one
   at a time, cannot count: the wall-clock verdict alone decides it (a keep says "kept on the wall
   clock alone"; anything else is discarded as unseen).
4. **Keep** needs both: the simulated cycles fall by at least the floor, AND the wall-clock
   interval of the primary metric (anytime-valid, at level `alpha_loss`) does not lie below
   `-wall_tolerance_pct`: the simulator models neither branch prediction nor threads nor the real
   memory system, so the real machine gets a veto against a slowdown it can show. Pairs are
   sampled until the interval excludes a regression beyond the tolerance (the reason then says
   "confirmed"), shows one (discard), or the pair cap. Then one look: pairs that lean to a loss
   (Wilcoxon's signed-rank test, one-sided at `alpha_loss`) discard it too, since the anytime
   interval is too wide at a 20-pair cap to resolve a real 8% slowdown on tg128's noise. On a
   machine too noisy to confirm within the cap the keep rests on the simulation, and the reason
   says the wall clock "neither confirms nor refutes" it, with its interval.
5. Simulated cycles up by at least the floor: discard (slower); within the floor: discard,
   "no change in simulated cycles".

The simulation serialises threads (one CPU); a change that only helps by spreading work over
cores does not show in it: such targets should not declare `simulate`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jobs.measure import cgoutput
from jobs.measure.cgoutput import EVENTS, SimulateError
from jobs.contract.runnerview import SimulatedView, WallGuard
from jobs.contract.runsummary import RunSummary

if TYPE_CHECKING:
    from jobs.contract.calibrated import SimulatedCalibration
    from jobs.contract.config import Simulate
    from jobs.guard.mdsafe import Markdown

L1_WEIGHT, LL_WEIGHT = 10, 100
MODEL = (f"simulated cycles = Ir + {L1_WEIGHT}·(I1mr + D1mr + D1mw) + {LL_WEIGHT}·(ILmr + DLmr + DLmw) "
         "(instructions, first-level and last-level cache misses of cachegrind with I1/D1 32 KiB 8-way, "
         "LL 8 MiB 16-way, 64-byte lines)")
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
JITTER_MULTIPLE = 3.0      # the floor is never below this many times the A/A jitter
TOTAL_LIMIT = 2 ** 96      # a total of many processes' counts (each below 2**63): still a number json and floats hold
CYCLES_LIMIT = (1 + 3 * L1_WEIGHT + 3 * LL_WEIGHT) * TOTAL_LIMIT     # the most cycles such counts make



def derived(config) -> Simulate | None:
    """The yardstick a config without `simulate:` may have: its benchmark command itself under
    cachegrind, within `timeouts.simulate` per run (0: never). Calibration tries it once per arm and
    the run uses it only where it fit (`in_use`); None when the config declares its own or opts out."""
    from jobs.contract.config import Simulate
    if config.simulate is not None or not config.timeouts.simulate:
        return None
    return Simulate(command=config.benchmark, timeout=config.timeouts.simulate)


def fitted(state_simulate: dict[str, SimulatedCalibration] | None, platforms) -> bool:
    """The derived yardstick ran in the A/A calibration of every platform in `platforms` (state.json's
    `simulate`: a platform's entry has `derived` and its base cycles)."""
    seen = state_simulate or {}
    return bool(platforms) and all((c := seen.get(p)) is not None and c.derived and c.base_cycles is not None
                                   for p in platforms)


def tried(config):
    """`config` with the derived yardstick in `simulate` (what calibration tries and research
    profiles), or `config` as is when it has none to try."""
    candidate = derived(config)
    return config if candidate is None else config.model_copy(update={"simulate": candidate})


def in_use(config, state_simulate: dict[str, SimulatedCalibration] | None, platforms):
    """The config the experiments measure by: with the derived yardstick in `simulate` once the
    calibration of every platform found it fits, else the config as is. A run resumed after its
    calibration gets the same from state.json."""
    return tried(config) if fitted(state_simulate, platforms) else config


def decided_by(state_simulate: dict[str, SimulatedCalibration] | None) -> Markdown:
    """Which yardstick decided keeps, in words for pr.md: the project's own markup
    (`jobs.guard.mdsafe.Markdown`, so its backticks are code spans, not text to escape)."""
    from jobs.guard.mdsafe import md
    entries = [c for c in (state_simulate or {}).values() if c.base_cycles is not None]
    if not entries:
        return md("the wall clock alone (no simulated yardstick)")
    if any(c.derived for c in entries):
        return md("simulated cycles of the benchmark command itself (derived: the config declares no `simulate:` "
                  "workload), with the wall clock as the guard")
    return md("simulated cycles of the declared `simulate:` workload, with the wall clock as the guard")


@dataclass(frozen=True)
class Counts:
    """Event totals of one simulated run (summed over every process it started). Every count is an
    int in [0, TOTAL_LIMIT) and `processes` at least 1, so `to_dict` always dumps as JSON and a
    ratio of two runs' cycles is a finite float."""

    events: tuple[tuple[str, int], ...]
    processes: int = 1

    def __post_init__(self):
        bad = [f"{n}={v!r}"[:60] for n, v in self.events
               if type(v) is not int or not 0 <= v < TOTAL_LIMIT]
        if bad or type(self.processes) is not int or self.processes < 1:
            raise SimulateError(f"counts out of range: {', '.join(bad) or f'processes={self.processes!r}'}")

    def get(self, name: str) -> int:
        return dict(self.events).get(name, 0)

    @property
    def cycles(self) -> int:
        g = self.get
        return (g("Ir") + L1_WEIGHT * (g("I1mr") + g("D1mr") + g("D1mw"))
                + LL_WEIGHT * (g("ILmr") + g("DLmr") + g("DLmw")))

    def to_dict(self) -> dict:
        return {**dict(self.events), "cycles": self.cycles, "processes": self.processes}


def parse_cachegrind(text: str) -> Counts:
    """One cachegrind output file (or only its `events:`/`summary:` lines) -> Counts (jobs.measure.cgoutput
    checks it: exactly the EVENTS line, one summary of non-negative counts below 2**63)."""
    return Counts(tuple(zip(EVENTS, cgoutput.parse_cachegrind(text))))


def total(parts: list[Counts]) -> Counts:
    if not parts:
        raise SimulateError("the simulated run left no cachegrind output")
    names = list(dict.fromkeys(n for c in parts for n, _ in c.events))
    return Counts(tuple((n, sum(c.get(n) for c in parts)) for n in names), sum(c.processes for c in parts))


# Valgrind options that make the simulated run slower (~1.4-1.6x with cachegrind here: no optimisation of
# the translated code, every translation checked for self-modifying code, no chasing across branches)
# without changing what the workload does or what is counted: the A/A's second run uses them, to see
# whether the counted work depends on how fast the workload runs (`time_budget_problem`).
SLOWED = ("--vex-iropt-level=0", "--smc-check=all", "--vex-guest-chase=no")
SLOWED_TIMEOUT = 2.0      # the slowed run's time limit, as a multiple of the simulation's own
BUDGET_FALL_PCT = 10.0    # counts that fall by this much when the run is slowed: work that follows the time


def wrapped_command(command: str, marker: str, slowed: bool = False) -> str:
    """The shell command that runs `command` under cachegrind (every child process too) inside the
    sandbox and prints the workload's DIGEST lines, then its listing of each process's records after
    a `marker` line (jobs/measure/cgoutput.py: where they are kept and what is read of them). The rest of
    the workload's output goes to a file, printed (tail) only when it fails. `slowed`: with `SLOWED`."""
    return cgoutput.script(command, marker, ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=no",
                                             *CACHES, *(SLOWED if slowed else ()), "--trace-children=yes",
                                             "--vgdb=no"])


def time_budget_problem(simulated: dict, what: str) -> str | None:
    """Why an A/A's simulated runs (`RawResult.simulated`: A as is, B slowed by `SLOWED`) show that
    `what` (the workload's command, in words) does as much work as its time allows, or None. A workload
    with a fixed amount of work counts the same at any speed (two runs agree to parts per million);
    one that repeats its work until a time budget is spent (Google Benchmark's default, a "run for N
    seconds" loop) does less of it when slowed, so its counts fall. Such a workload defeats both
    yardsticks: a faster candidate does more rounds in the same time, so the simulated cycles do not
    fall, and the benchmark process takes its budget either way, so the runner's own clock cannot
    confirm a claimed speed-up (jobs.stats.integrity) and every real one would be called invalid."""
    sim = compare(simulated)
    if sim is None or not simulated.get("B", {}).get("slowed") or sim.delta_pct > -BUDGET_FALL_PCT:
        return None
    seconds = [simulated[arm].get("wall_s") for arm in ("A", "B")]
    took = (f" in {seconds[0]:.1f} s and {seconds[1]:.1f} s" if all(isinstance(t, (int, float)) for t in seconds)
            else "")
    return (f"{what} does as much work as its time allows: run twice under cachegrind, the second time slowed "
            f"(Valgrind without its optimiser, ~1.5x), it counted {sim.base:,} and then {sim.head:,} simulated cycles "
            f"({sim.delta_pct:+.1f}%){took}, where a fixed amount of work counts the same at any speed. A loop "
            "that runs until a time budget is spent does this (Google Benchmark's default, a run-for-N-seconds "
            "loop). Neither yardstick can judge it: a faster candidate does more rounds in the same time, so its "
            "simulated cycles do not fall, and its process takes the same time, so the runner's own clock would "
            "call every real speed-up invalid. Give it a fixed amount of work (a fixed number of rounds; Google "
            "Benchmark: --benchmark_min_time=<N>x)")


def extract(output: str, marker: str) -> Counts:
    """The totals `wrapped_command` printed, summed over its processes once every record was checked
    (SimulateError says which record failed and how)."""
    return total([Counts(tuple(zip(EVENTS, c))) for c in cgoutput.processes(output, marker).values()])


def extract_digests(output: str, marker: str) -> dict[str, str]:
    """The workload's `DIGEST name=hex` lines `wrapped_command` printed before its listing (a line of
    another form there is ignored, as in a benchmark's output; a name printed twice keeps its last
    value, as jobs.contract.metrics does)."""
    from jobs.contract.metrics import parse_metrics
    return dict(parse_metrics(cgoutput.before_listing(output, marker)).digests)


def process_problems(simulated: dict) -> list[str]:
    """Why the two simulated runs (`RawResult.simulated`) cannot be compared: they ran a different
    number of processes under cachegrind. One process more is what a forged record (a file and its
    log for a process that never ran) adds; a workload that really starts another number of
    processes counts other work. [] when either arm does not say (an older record)."""
    base, head = (simulated.get(arm, {}).get("processes") for arm in ("A", "B"))
    if not isinstance(base, int) or not isinstance(head, int) or base == head:
        return []
    return [f"the simulated workload ran {head} process(es) under cachegrind for the candidate and {base} for the "
            "baseline: the counts of different process trees are not compared (a record the runner did not ask "
            "for, or a workload that starts other processes)"]


def digest_problems(simulated: dict, names: list[str] | tuple[str, ...] | None) -> list[str]:
    """Why the candidate's simulated workload computes something else than the baseline's: the
    DIGESTs both got from the same seed, limited to `names` (those the A/A calibration found
    deterministic; None: every name the baseline printed)."""
    from jobs.stats.integrity import digest_problems as differ
    base, head = (dict(simulated.get(arm, {}).get("digests") or {}) for arm in ("A", "B"))
    if names is not None:
        base = {k: v for k, v in base.items() if k in names}
    return [p.replace("pair 1: ", "the simulated workload: ", 1) for p in differ([(base, head)])]


def native_problems(simulated: dict, names: list[str] | tuple[str, ...] | None) -> list[str]:
    """A candidate must behave the same natively as under the simulator: the same workload with the
    same seed, run natively (`simulated["B"]["native"]`, jobs.measure.simrun.native_view), prints the
    DIGESTs its simulated run printed (`names`: those the A/A found deterministic; None: all). A build
    that computes one thing where it is counted and another where it runs for real is caught here,
    before any pair."""
    head = simulated.get("B") or {}
    native = head.get("native")
    if native is None:
        return []
    if native.get("returncode") != 0:
        state = "timed out" if native.get("returncode") is None else f"exited with status {native['returncode']}"
        return [f"the candidate's workload ran under cachegrind but {state} natively"]
    counted, real = head.get("digests") or {}, native.get("digests") or {}
    return [f"the candidate's workload printed DIGEST {n}={counted[n]} under cachegrind but {real.get(n, 'none')} "
            "natively with the same seed: it behaves differently when counted"
            for n in sorted(counted) if (names is None or n in names) and real.get(n) != counted[n]]


def unstable_digests(simulated: dict) -> list[str]:
    """DIGEST names two simulated runs of the same commit (the A/A calibration) disagree on."""
    from jobs.stats.integrity import nondeterministic_digests
    return nondeterministic_digests([(dict(simulated.get("A", {}).get("digests") or {}),
                                      dict(simulated.get("B", {}).get("digests") or {}))])


@dataclass(frozen=True)
class Comparison:
    base: int                  # simulated cycles of the baseline
    head: int

    @property
    def delta_pct(self) -> float:
        """Candidate vs baseline in simulated cycles (negative = fewer = faster)."""
        if self.base <= 0:
            return math.inf
        try:                    # counts are bounded (Counts); a record from elsewhere may not be
            return 100.0 * (self.head / self.base - 1.0)
        except OverflowError:
            return math.inf

    @property
    def saving_pct(self) -> float:
        return -self.delta_pct


def floor_pct(configured: float, aa_delta_pct: float | None) -> float:
    """The least simulated change that counts: the config's, raised past the A/A jitter."""
    jitter = abs(aa_delta_pct or 0.0)
    return max(configured, JITTER_MULTIPLE * jitter)


def compare(simulated: dict) -> Comparison | None:
    """`RawResult.simulated` ({"A": counts, "B": counts}) -> Comparison, None when an arm is missing or
    its cycles are not a count `Counts` could have made."""
    try:
        base, head = int(simulated["A"]["cycles"]), int(simulated["B"]["cycles"])
    except (KeyError, TypeError, ValueError):
        return None
    return Comparison(base, head) if 0 <= base < CYCLES_LIMIT and 0 <= head < CYCLES_LIMIT else None


@dataclass(frozen=True)
class Guard:
    """The wall-clock guard's parameters: a regression beyond `tolerance_pct` must be excluded at
    level `alpha` (anytime-valid, so it may be checked after every pair)."""

    tolerance_pct: float
    alpha: float
    min_pairs: int = 3
    claim_alpha: float = 0.01         # the experiment's keep level: a claim is a wall-clock win at this level
    max_pairs: int = 0                # the pair cap, for giving up early when it cannot settle (0: never give up)


def wall_interval(y: list[float], s: list[float], alpha: float) -> tuple[float, float]:
    """The primary metric's interval in % (oriented: + is better) at level `alpha`."""
    from jobs.stats.sequential import confidence_sequence, to_pct
    lo, hi = confidence_sequence(y, s, alpha)
    return (to_pct(lo) if math.isfinite(lo) else -100.0, to_pct(hi) if math.isfinite(hi) else math.inf)


UNSETTLED = "unsettled"     # the guard stopped early: the pairs left to the cap were unlikely to settle it


def may_pass(y, s, pct: float, alpha: float, side: str) -> bool:
    """Whether the end of `wall_interval(y, s, alpha)` on `side` may lie beyond `pct`: the lower end
    above it ("up"), or the upper end below it ("down"). False means it does not; True is settled by
    the interval itself. One bet at `pct`, where the interval searches 1601 null values (about 10 ms a
    pair at 12 pairs, beside a 90 ms benchmark process): each bet's wealth only falls as its null value
    moves against it, so an end lies beyond `pct` only if the bet at `pct` has already won. `SLACK`
    moves the bet a hair towards winning, so rounding never hides an end the interval finds."""
    from jobs.stats.sequential import running_max_wealth, to_log
    at = to_log(pct) + (-SLACK if side == "up" else SLACK)
    return running_max_wealth(y, s, at, side) >= 1 / alpha


SLACK = 1e-9       # log units: far below the interval's own refinement (about 1e-7 in log units)


def stop_after_pair(sim: Comparison | None, floor: float, y: list[float], s: list[float], guard: Guard) -> str:
    """The runner's stop rule when a simulation decides: '' to go on, else why to stop. Pairs only
    serve the guard (and the integrity check), so a candidate that does not save simulated cycles
    stops at `min_pairs`; one that does stops once the guard is settled either way. The interval is
    computed only once an end may have passed a boundary (`may_pass`): same stops, fewer grids."""
    if len(y) < guard.min_pairs:
        return ""
    if sim is None or sim.saving_pct < floor:
        # Nothing saved: pairs go on only while the benchmark seems to claim a large speed-up, until
        # the claim is established (then it is invalid) or ruled out.
        import numpy as np
        from jobs.stats.sequential import to_pct
        if to_pct(float(np.median(y))) < guard.tolerance_pct:
            return "simulated"
        if not (may_pass(y, s, 0.0, guard.claim_alpha, "up") or
                may_pass(y, s, guard.tolerance_pct, guard.claim_alpha, "down")):
            return ""
        lo, hi = wall_interval(y, s, guard.claim_alpha)
        return "claimed" if lo > 0 else "simulated" if hi < guard.tolerance_pct else ""
    if any(may_pass(y, s, -guard.tolerance_pct, guard.alpha, side) for side in ("up", "down")):
        lo, hi = wall_interval(y, s, guard.alpha)
        if lo > -guard.tolerance_pct:
            return "guarded"
        if hi < -guard.tolerance_pct:
            return "loss"
    from jobs.stats.curtail import give_up
    if guard.max_pairs and give_up(y, s, max_pairs=guard.max_pairs, tolerance_pct=guard.tolerance_pct,
                                   alpha=guard.alpha):
        return UNSETTLED
    return ""


MORE_AT_ONCE = 1.15     # CPU time per wall second, candidate over baseline in the median pair: more cores at once


def at_once(raw) -> tuple[float, float] | None:
    """(baseline, candidate), each arm's median over complete pairs of its process tree's CPU time over
    its wall time (1.0: one core busy throughout; below 1 where it waited for a core), when the
    candidate's is at least `MORE_AT_ONCE` times the baseline's in the median pair: a candidate that
    does its work on more cores at once. Not above 1 itself: on a busy machine two threads get more of
    the cores than one, and both arms wait (about 0.4 against 0.6 beside two CPU hogs). None otherwise, or
    where the runner has no CPU times. Only a route to the wall-clock verdict, which must keep a change
    on its own (the runner's clock check included), so a chance rise does not make a keep."""
    import statistics
    rows = [(a.cpu_s / a.wall_s, b.cpu_s / b.wall_s) for a, b in raw.pairs()
            if a.wall_s > 0 and b.wall_s > 0 and a.cpu_s > 0 and b.cpu_s > 0]
    if not rows:
        return None
    base, head = statistics.median(a for a, _ in rows), statistics.median(b for _, b in rows)
    return (base, head) if statistics.median(b / a for a, b in rows) >= MORE_AT_ONCE else None


def sim_view(sim: Comparison, floor: float, raw_simulated: dict) -> SimulatedView:
    return SimulatedView(base_cycles=sim.base, head_cycles=sim.head, delta_pct=round(sim.delta_pct, 4),
                         floor_pct=floor, seconds={a: raw_simulated.get(a, {}).get("wall_s") for a in ("A", "B")},
                         model=MODEL)


def judge_yardstick(raw, config, plan, floor: float, guard: Guard, digests: list[str] | None = None):
    """The experiment's status when the target declares `simulate` (see the module docstring).
    `digests`: the simulated workload's DIGEST names to compare (None: all; [] none)."""
    from jobs.contract.model import Status
    from jobs.stats.sequential import adjusted
    from jobs.stats.stats import signed_rank_p
    from jobs.stats.verdict import BaselineSanity, Judgement, baseline_check, judge, metric_pairs, runner_view
    if raw.status == "ok" and raw.stopped == "identical":
        n = len(raw.artifacts.get("files", []))
        return Judgement(Status.DISCARD, f"no change in the binary: the {n} declared build output(s) are "
                         "byte-identical to the baseline's (nothing was sampled)", runner=runner_view(raw))
    differ = (process_problems(raw.simulated) + digest_problems(raw.simulated, digests)
              + native_problems(raw.simulated, digests) if raw.status == "ok" and raw.simulated else [])
    if differ:
        return Judgement(Status.INVALID, "; ".join(differ) + " (the build the yardstick counts, before any "
                         "wall-clock pair: nothing was sampled)", runner=runner_view(raw))
    # A busy machine's wall clock (the baseline's spread, both arms alike) does not stop the yardstick,
    # which exists for that machine: the simulated cycles decide, the candidate's checks (digests,
    # values) still run, and the guard confirms nothing.
    check = baseline_check(raw, config) if raw.status == "ok" else None
    noisy = check.text if check is not None and check.machine_load else ""
    wall = judge(raw, config, plan, baseline=BaselineSanity() if noisy else check)
    if raw.status != "ok" or wall.status in (Status.NOISE, Status.INVALID, Status.CRASH):
        return wall
    sim = compare(raw.simulated)
    if sim is None:
        return Judgement(Status.CRASH, "the simulated run left no counts for one arm", wall.metrics, wall.flags,
                         wall.runner)
    view = replace(wall.runner, simulated=sim_view(sim, floor, raw.simulated), extra=dict(wall.runner.extra))
    primary = config.primary
    main = next((m for m in wall.metrics if m.name == primary.name), None)
    y, s = adjusted(metric_pairs(raw, primary.name, primary.direction, plan.adjust.get(primary.name, ())),
                    plan.prior(primary.name))
    lo, hi = wall_interval(y, s, guard.alpha) if len(y) >= 2 else (-100.0, math.inf)
    view.wall_guard = WallGuard(lo_pct=lo, hi_pct=hi, alpha=guard.alpha, tolerance_pct=guard.tolerance_pct,
                                pairs=len(y))
    simtext = f"simulated cycles {sim.delta_pct:+.2f}% ({sim.base:,} → {sim.head:,}; floor {floor:.2g}%)"
    walltext = (f"wall-clock {primary.name} {main.delta_pct:+.1f}%, interval {lo:+.1f}%…{hi:+.1f}% at level "
                f"{guard.alpha:g} ({len(y)} pairs)" if main else "no wall-clock pairs")
    if noisy:
        walltext = f"the wall clock too noisy to guard it ({walltext}; {noisy})"
        view.wall_guard.noisy = True
    claim_lo = wall_interval(y, s, guard.claim_alpha)[0] if len(y) >= 2 else -100.0
    claims = main is not None and (main.verdict == "win" or claim_lo > 0)
    if claims and abs(sim.delta_pct) < floor:
        parallel = at_once(raw)
        if parallel:
            # Not a saving the count hides: the work runs on more cores at once (the runner's CPU time of
            # the process tree did not fall with its wall time). The simulation runs threads one at a
            # time, so only the wall clock can judge it, as it would without a yardstick.
            why = (f"the candidate runs more of its work at once (its processes' CPU time per second of wall time "
                   f"{parallel[1]:.2f}, the baseline's {parallel[0]:.2f}), which the simulation, running threads one "
                   "at a time, cannot count")
            if wall.status == Status.KEEP:
                return Judgement(Status.KEEP, f"kept on the wall clock alone: {wall.reason}; the {simtext} did not "
                                 f"move: {why}", wall.metrics, wall.flags, view)
            return Judgement(Status.DISCARD, f"unseen by the yardstick: {walltext}, but the {simtext} did not move: "
                             f"{why}; on the wall clock alone it is not a keep ({wall.reason})", wall.metrics,
                             wall.flags, view)
        if config.simulate.separate_build:
            # The workload ran a build of its own (another ISA): the win may be on a path only the
            # measured build runs. Not kept (the yardstick does not see it), and not called a cheat.
            return Judgement(Status.DISCARD, f"unseen by the yardstick: the benchmark measured {primary.name} "
                             f"{main.delta_pct:+.1f}% (its interval excludes 0 at the keep level "
                             f"{guard.claim_alpha:.3g}) but the {simtext} did not move, and the simulated workload "
                             "runs a build of its own (simulate.separate_build), so the gain may be on a path only "
                             "the measured build has; judge such a change on the wall clock alone, without "
                             "`simulate`", wall.metrics, wall.flags, view)
        return Judgement(Status.INVALID, f"the benchmark claims {primary.name} {main.delta_pct:+.1f}% (its "
                         f"interval excludes 0 at the keep level {guard.claim_alpha:.3g}) but the {simtext} did not "
                         "move: the work it claims to save is still done. A gain the model cannot see (instruction "
                         "latency, branch prediction, e.g. from -march) looks the same: judge such a change on the "
                         "wall clock alone (`simulate: false`)", wall.metrics, wall.flags, view)
    if sim.saving_pct >= floor:
        losses = [m for m in wall.metrics if m.verdict == "loss"]
        if losses:
            worst = ", ".join(f"{m.name} {m.delta_pct:+.1f}%" for m in losses)
            return Judgement(Status.DISCARD, f"{simtext}, but the wall clock measured a loss: {worst}",
                             wall.metrics, wall.flags, view)
        if hi < -guard.tolerance_pct:
            return Judgement(Status.DISCARD, f"{simtext}, but {walltext}: slower than the "
                             f"{guard.tolerance_pct:g}% tolerance on the real machine", wall.metrics, wall.flags, view)
        # One look, once sampling ended: pairs that lean to a loss refute the count even where the
        # interval (anytime-valid, so wide) could not resolve the tolerance: at the llama.cpp config's
        # 20-pair cap and tg128's noise, 66% of real 8% slowdowns were kept on the count without it.
        lean = signed_rank_p(y, "less")
        view.wall_guard.loss_p = lean
        if lean < guard.alpha:
            return Judgement(Status.DISCARD, f"{simtext}, but {walltext}: its pairs lean to a loss (signed-rank "
                             f"p={lean:.2g} < {guard.alpha:g} that the candidate is slower, one look at the last "
                             "pair): the saving the count sees does not reach the real machine",
                             wall.metrics, wall.flags, view)
        if len(y) < guard.min_pairs:
            return Judgement(Status.DISCARD, f"{simtext}, but only {len(y)} wall-clock pair(s): the guard "
                             f"needs at least {guard.min_pairs}", wall.metrics, wall.flags, view)
        confirmed = lo > -guard.tolerance_pct and not noisy
        view.wall_guard.confirmed = confirmed
        word = ("confirmed: it excludes a regression beyond" if confirmed else
                "neither confirms nor refutes it: no regression beyond")
        early = (f" (the guard stopped at {len(y)} of {plan.max_pairs} pairs: more were unlikely to settle it)"
                 if raw.stopped == UNSETTLED else "")
        return Judgement(Status.KEEP, f"{simtext}; {walltext} {word} {guard.tolerance_pct:g}%"
                         + ("" if confirmed else " was shown") + early, wall.metrics, wall.flags, view)
    if sim.delta_pct >= floor:
        return Judgement(Status.DISCARD, f"slower: {simtext}; {walltext}", wall.metrics, wall.flags, view)
    return Judgement(Status.DISCARD, f"no change in simulated cycles: {simtext}; {walltext}", wall.metrics,
                     wall.flags, view)


def guard_interval(g: WallGuard | None) -> str:
    """A result's wall-clock guard interval (`runner.wall_guard`) as `-3.7%…+6.8%` (`+inf` when unbounded)."""
    g = g or WallGuard()
    hi, lo = g.hi_pct, -100 if g.lo_pct is None else g.lo_pct
    return f"{lo:+.1f}%…{'+inf' if hi is None or hi == math.inf else f'{hi:+.1f}%'}"


def guard_interval_at(g: WallGuard | None) -> str:
    """The guard interval with its level and pairs: `-3.7%…+6.8% (0.05, 7 pairs)`."""
    g = g or WallGuard()
    return f"{guard_interval(g)} ({g.alpha:g}, {g.pairs} pairs)"


def render_section(summary: RunSummary) -> list:
    """pr.md's 'Deterministic yardstick' section: the model, this machine's A/A jitter and cost, and
    per experiment the simulated change beside the wall-clock interval, both labelled. Lines are
    `jobs.guard.mdsafe.Markdown`: platform and experiment names (the repository's) escaped by `md`."""
    from jobs.guard.mdsafe import md
    cal = summary.simulate or {}
    rows = [e for e in summary.experiments + list(summary.stacks.values()) if e.simulated]
    if not cal and not rows:
        return []
    out = [md("## Deterministic yardstick (simulated cycles)"), md(""), md("Decided by: {}.", decided_by(cal)), md(""),
           md("Model: {}.", MODEL), md(""),
           md("Keeps are decided on simulated cycles (one cachegrind run per arm, no pairs): a keep needs them to "
              "fall by at least the floor **and** the wall-clock interval of the primary metric (coin-ordered "
              "pairs) not to lie below the tolerance, nor the pairs to lean to a loss at the last one (a one-sided "
              "signed-rank test at one look); the wall clock *confirms* a keep when its interval excludes "
              "a regression beyond the tolerance, and otherwise the reason says it neither confirms nor refutes it. {}",
              md("The simulated workload runs a build of its own (`simulate.separate_build`, e.g. an AVX2 copy "
                 "Valgrind can run): a wall-clock win it does not see is discarded as unseen, not kept.")
              if any(c.separate_build for c in cal.values()) else
              md("A benchmark that claims a speed-up while the simulated cycles do not move is `invalid`.")), md("")]
    for platform, c in cal.items():
        slow = (md("; {:.1f} s simulated vs {:.2f} s native = {:.0f}x slowdown", c.seconds, c.native_seconds,
                   c.seconds / c.native_seconds) if c.seconds and c.native_seconds else md(""))
        aa = c.aa_delta_pct
        out.append(md("- {}: A/A (two builds of the base, the second run slowed ~1.5x under Valgrind: a count that "
                      "followed the time would fall) {:+.4f}% in simulated cycles ({:,} cycles per run){}.",
                      platform, aa, c.base_cycles or 0, slow) if aa is not None else
                   md("- {}: no A/A simulation", platform))
    if cal:
        out.append(md(""))
    if rows:
        out += [md("| experiment | platform | simulated cycles base → head | simulated Δ (floor) | "
                   "wall-clock Δ, interval (level), pairs | status |"), md("|---|---|---|---|---|---|")]
        primary = summary.primary
        for e in rows:
            sim, g = e.simulated, e.wall_guard or WallGuard()
            m = e.metric(primary)
            wall = (md("{:+.1f}%, {} ({:g}), {}", m.delta_pct, guard_interval(g), g.alpha, g.pairs)
                    if m else md("—"))
            out.append(md("| {} | {} | {:,} → {:,} | {:+.3f}% ({:.2g}%) | {} | {} |", e.name, e.platform,
                          sim.base_cycles, sim.head_cycles, sim.delta_pct, sim.floor_pct, wall, e.status))
        out.append(md(""))
    return out


def headline(summary: RunSummary) -> list:
    """pr.md's summary when the deterministic yardstick decided the stack: the simulated change
    first, the wall clock of the primary metric beside it, labelled ([] otherwise); `Markdown` lines."""
    from jobs.guard.mdsafe import join, md
    out = []
    kept = summary.stack_applied or []
    for platform, st in summary.stacks.items():
        sim = st.simulated
        if not sim or st.status != "keep":
            continue
        g = st.wall_guard or WallGuard()
        m = st.metric(summary.primary)
        wall = (md("{} {:+.1f}%, interval {} at level {:g} over {} pairs", summary.primary, m.delta_pct,
                   guard_interval(g), g.alpha, g.pairs) if m else md("no pairs"))
        if -sim.delta_pct < sim.floor_pct:      # kept on the wall clock alone (`at_once`): the count did not move
            out.append(md("{} optimization(s) kept ({}) on {}, decided by the **wall clock alone**: {}. The simulated "
                          "cycles did not move ({:+.2f}%, floor {:.2g}%): the gain comes from running work on more "
                          "cores at once, which the simulation cannot count.", len(kept), join(", ", kept), platform,
                          wall, sim.delta_pct, sim.floor_pct))
            continue
        out.append(md("{} optimization(s) kept ({}), decided by the deterministic yardstick on {}: **simulated cycles "
                      "{:+.2f}%** (floor {:.2g}%). Wall clock beside it: {}, which {}", len(kept), join(", ", kept),
                      platform, sim.delta_pct, sim.floor_pct, wall,
                      "confirms it." if g.confirmed else "neither confirms nor refutes it on this machine."))
    if not out and summary.simulate and not summary.stacks:
        tried = [e for e in summary.experiments if e.simulated]
        if tried:
            out.append(md("No optimization changed the simulated cycles by more than the floor and held on the wall "
                          "clock ({} measured; the table below gives each one's simulated change), so no stack was "
                          "built and the branch equals the base commit.", len(tried)))
    return out + [md("")] if out else []
