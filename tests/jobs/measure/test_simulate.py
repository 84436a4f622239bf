"""The deterministic yardstick (jobs/measure/simulate.py): cachegrind parsing, the simulated-cycles model,
the verdict that combines it with the wall-clock guard, and one small end-to-end run on a tiny C
target through the whole pipeline (valgrind for real, in the sandbox)."""
from __future__ import annotations

import math
import random
import shutil

import pytest

from jobs.contract.config import parse_config
from jobs.contract.model import Status
from jobs.measure.simulate import Comparison, Guard, SimulateError, digest_problems, extract, extract_digests, floor_pct, judge_yardstick, parse_cachegrind, render_section, stop_after_pair, unstable_digests
from jobs.contract.spec import Invocation, RawResult
from jobs.stats.verdict import VerdictPlan
from summaries import run_summary

# Real cachegrind 3.19 output (events/summary lines) of a small loop, as printed in the sandbox.
SAMPLE = """desc: I1 cache:         32768 B, 64 B, 8-way associative
cmd: ./t
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw 
fl=/tmp/t.c
fn=main
3 15000000 10 10 20000 100 90 10000 300 290
summary: 15112631 1232 1231 26198 1122 979 10574 373 349
"""


def test_parse_and_model():
    c = parse_cachegrind(SAMPLE)
    assert c.get("Ir") == 15112631 and c.get("DLmw") == 349
    # Ir + 10 (I1mr + D1mr + D1mw) + 100 (ILmr + DLmr + DLmw)
    assert c.cycles == 15112631 + 10 * (1232 + 1122 + 373) + 100 * (1231 + 979 + 349)


# Real cachegrind 3.27.1 output (arm64, under qemu-aarch64: tests/kernels/arm_yardstick.sh), header and
# totals of llama-digest on a 2-layer model: the format the arm64 yardstick reads is the same.
SAMPLE_ARM64 = """desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         8388608 B, 64 B, 16-way associative
cmd: build-sim/bin/llama-digest synthetic-qwen3-2L-q4_0.gguf 1 64 0 1 -1
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw 
fl=???
fn=(below main)
0 142 8 7 25 11 0 11 0 0
summary: 1037387691 22519 9362 200698689 9087733 2346388 58799020 2301873 1204703
"""


def test_a_newer_cachegrind_on_arm64_reads_the_same():
    c = parse_cachegrind(SAMPLE_ARM64)
    assert c.get("Ir") == 1037387691 and c.get("DLmw") == 1204703
    assert c.cycles == 1507554241        # Ir + 10 (I1mr + D1mr + D1mw) + 100 (ILmr + DLmr + DLmw)


def test_extract_sums_every_process_and_ignores_the_rest():
    from yardstick_listing import listing
    marker = "MARK-123"
    text = "noise METRIC x=1\n" + listing(marker, {7: (100, 1, 0, 0, 0, 0, 0, 0, 0), 9: (50, 2, 0, 0, 0, 0, 0, 0, 0)})
    c = extract(text, marker)
    assert c.get("Ir") == 150 and c.get("I1mr") == 3 and c.processes == 2
    assert c.cycles == 150 + 10 * 3


def test_the_workloads_digests_are_read_before_the_first_marker_only():
    marker = "MARK-123"
    text = ("DIGEST argmax=00ff\nnot a DIGEST line\nDIGEST bad=zz\n" + marker + "\nevents: Ir\nsummary: 1\n"
            "DIGEST late=01\n")
    # after the marker is cachegrind's file, not the workload's output
    assert extract_digests(text, marker) == {"argmax": "00ff"}
    assert extract_digests(marker + "\nevents: Ir\nsummary: 1\n", marker) == {}


def test_a_simulated_workload_that_computes_something_else_is_invalid_before_any_pair():
    # The yardstick counts one build and the pairs time another (llama.cpp: an AVX2 copy): a candidate
    # that skips work only where it is counted would be kept on its simulated saving, with an
    # unchanged wall clock. Its counted process prints what it computed, and that must match.
    raw = raw_with(0.0, 1_000_000, 600_000, n=0)
    raw.simulated["A"]["digests"] = {"argmax": "aaaa", "shape": "01"}
    raw.simulated["B"]["digests"] = {"argmax": "bbbb", "shape": "01"}
    j = judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.INVALID and "DIGEST argmax is bbbb for the candidate and aaaa" in j.reason, j.reason
    assert j.reason.startswith("the simulated workload:") and "nothing was sampled" in j.reason
    # only the names the A/A calibration found deterministic are compared; [] compares none
    assert judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD, ["shape"]).status != Status.INVALID
    assert judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD, []).status != Status.INVALID
    raw.simulated["B"]["digests"] = {"shape": "01"}
    assert "printed no DIGEST argmax" in judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD).reason
    # equal digests: the yardstick decides as before
    raw.simulated["B"]["digests"] = {"argmax": "aaaa", "shape": "01"}
    assert digest_problems(raw.simulated, None) == []


def test_a_digest_two_simulated_runs_of_one_commit_disagree_on_is_unstable():
    sim = {"A": {"digests": {"argmax": "01", "clock": "02"}}, "B": {"digests": {"argmax": "01", "clock": "03"}}}
    assert unstable_digests(sim) == ["clock"]
    assert unstable_digests({"A": {"cycles": 1}, "B": {"cycles": 1}}) == []


@pytest.mark.parametrize("text", ["", "events: Ir\n", "events: Ir I1mr\nsummary: 1\n", "events: Ir\nsummary: x\n"])
def test_unreadable_output_is_an_error(text):
    with pytest.raises(SimulateError):
        parse_cachegrind(text)


def test_floor_is_raised_past_the_jitter():
    assert floor_pct(0.5, 0.0) == 0.5
    assert floor_pct(0.5, -0.4) == pytest.approx(1.2)


CONFIG = parse_config("""
build: make
benchmark: ./bench
checks: ./checks
metrics: [{name: speed, direction: higher, primary: true}]
editable: ["src/**"]
simulate: {command: ./bench small, wall_tolerance_pct: 5}
""")
PLAN = VerdictPlan(alpha=0.01, floor_pct=1.0, target_pct=5.0, max_pairs=30)
GUARD = Guard(tolerance_pct=5.0, alpha=0.05, claim_alpha=0.01)


def raw_with(effect: float, base_cycles: int, head_cycles: int, n: int = 12, noise: float = 0.01,
             seed: int = 1, cores: tuple[float, float] = (1.0, 1.0)) -> RawResult:
    """n coin-ordered pairs whose candidate is `effect` (relative) faster, wall time alike; each arm's
    process busy on `cores` (baseline, candidate) cores on average (CPU time = cores x wall time)."""
    rng = random.Random(seed)
    raw = RawResult(status="ok", simulated={"A": {"cycles": base_cycles, "wall_s": 2.0},
                                            "B": {"cycles": head_cycles, "wall_s": 2.0}})
    for i in range(n):
        a = 100 * math.exp(rng.gauss(0, noise))
        b = a * (1 + effect) * math.exp(rng.gauss(0, noise))
        first = rng.random() < 0.5
        raw.invocations += [Invocation("A", i, 0 if first else 1, i, {"speed": a}, wall_s=1 / a, cpu_s=cores[0] / a),
                            Invocation("B", i, 1 if first else 0, i, {"speed": b}, wall_s=1 / b, cpu_s=cores[1] / b)]
    return raw


def test_keep_needs_the_simulated_saving_and_the_guard():
    j = judge_yardstick(raw_with(0.015, 1_000_000, 985_000), CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.KEEP, j.reason
    assert "simulated cycles -1.50%" in j.reason and "confirmed: it excludes a regression beyond 5%" in j.reason
    assert j.runner.simulated.delta_pct == pytest.approx(-1.5)


def test_a_real_wall_clock_slowdown_vetoes_a_simulated_saving():
    j = judge_yardstick(raw_with(-0.2, 1_000_000, 985_000), CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.DISCARD and "slower" in j.reason or "loss" in j.reason, j.reason


def test_a_noisy_wall_clock_neither_confirms_nor_refutes_and_says_so():
    j = judge_yardstick(raw_with(0.0, 1_000_000, 985_000, n=4, noise=0.3), CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.KEEP and "neither confirms nor refutes" in j.reason, j.reason
    assert j.runner.wall_guard.confirmed is False
    few = judge_yardstick(raw_with(0.0, 1_000_000, 985_000, n=2), CONFIG, PLAN, 0.5, GUARD)
    assert few.status == Status.DISCARD and "needs at least 3" in few.reason


TG128_PLAN = VerdictPlan(alpha=0.01, floor_pct=4.9, target_pct=5.0, max_pairs=20)   # llama.cpp's tg128 cell


def test_pairs_that_lean_to_a_loss_refute_the_count_where_the_anytime_interval_cannot_reach():
    """The shape of llama.cpp's tg128 cell: 20 pairs at 8.8% noise, the floor raised to 4.9%. A
    count win whose real effect is an 8% slowdown leaves the anytime interval reaching past -5%, so
    the guard alone kept it ("neither confirms nor refutes"); the one look at the last pair does not."""
    for seed in (1, 2, 3, 5):
        j = judge_yardstick(raw_with(-0.08, 1_000_000, 977_000, n=20, noise=0.088, seed=seed), CONFIG, TG128_PLAN,
                            0.5, GUARD)
        guard = j.runner.wall_guard
        assert guard.hi_pct > -5.0 and not any(m.verdict == "loss" for m in j.metrics), j.reason
        assert j.status == Status.DISCARD and "its pairs lean to a loss" in j.reason, j.reason
        assert guard.loss_p < 0.05
    for seed in (1, 2, 3, 5):       # the same noise with no real change: the count's keep stands
        j = judge_yardstick(raw_with(0.0, 1_000_000, 977_000, n=20, noise=0.088, seed=seed), CONFIG, TG128_PLAN,
                            0.5, GUARD)
        assert j.status == Status.KEEP and j.runner.wall_guard.loss_p > 0.05, j.reason


def busy_raw(head_cycles: int, *, candidate_spreads: bool = True, head_digest: str = "d1") -> RawResult:
    """12 pairs on a busy machine: the baseline's values spread 4x while each process took the same
    time (so the parser check fires); the candidate's spread alike (load) or not (a parser)."""
    raw = RawResult(status="ok", simulated={"A": {"cycles": 1_000_000, "wall_s": 2.0},
                                            "B": {"cycles": head_cycles, "wall_s": 2.0}})
    shake = [1.0, 4.0, 1.5, 3.0, 1.2, 2.5, 3.5, 1.1, 2.0, 3.8, 1.3, 2.2]
    for i, k in enumerate(shake):
        t = 1.0 + 0.01 * (i * 7 % 5)          # the processes' own time: flat, not following the values
        b = 100 * (shake[(i + 5) % len(shake)] if candidate_spreads else 1.0)
        raw.invocations += [Invocation("A", i, i % 2, 2 * i, {"speed": 100 * k}, {"h": "d1"}, wall_s=t, cpu_s=t),
                            Invocation("B", i, 1 - i % 2, 2 * i + 1, {"speed": b}, {"h": head_digest}, wall_s=t, cpu_s=t)]
    return raw


def test_a_busy_machines_baseline_does_not_stop_the_yardstick_but_the_guard_confirms_nothing():
    from jobs.stats.verdict import judge
    raw = busy_raw(980_000)
    assert judge(raw, CONFIG, PLAN).status == Status.NOISE           # the wall clock alone: too noisy
    j = judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.KEEP, j.reason
    assert "simulated cycles -2.00%" in j.reason and "too noisy to guard it" in j.reason, j.reason
    assert "most likely machine load" in j.reason and "neither confirms nor refutes" in j.reason, j.reason
    assert j.runner.simulated.delta_pct == pytest.approx(-2.0)
    assert j.runner.wall_guard.noisy is True and j.runner.wall_guard.confirmed is False
    same = judge_yardstick(busy_raw(1_000_010), CONFIG, PLAN, 0.5, GUARD)
    assert same.status == Status.DISCARD and same.reason.startswith("no change in simulated cycles"), same.reason


def test_a_busy_machine_still_runs_the_candidates_own_checks_and_a_parser_still_stops_it():
    cheat = judge_yardstick(busy_raw(980_000, head_digest="other"), CONFIG, PLAN, 0.5, GUARD)
    assert cheat.status == Status.INVALID and "DIGEST" in cheat.reason, cheat.reason
    parser = judge_yardstick(busy_raw(980_000, candidate_spreads=False), CONFIG, PLAN, 0.5, GUARD)
    assert parser.status == Status.NOISE and "most likely the benchmark parser" in parser.reason, parser.reason


def test_a_busy_calibration_warns_when_the_simulation_decides_and_stops_the_run_when_the_wall_clock_does():
    from jobs.stats.calibration import calibrate_run
    aa = busy_raw(1_000_000)
    with_sim = calibrate_run(aa, CONFIG, n_sims=50)
    assert with_sim.problems == [] and any("The simulated cycles decide" in w for w in with_sim.warnings)
    wall_only = calibrate_run(aa, CONFIG.model_copy(update={"simulate": None}), n_sims=50)
    assert len(wall_only.problems) == 1 and "most likely machine load" in wall_only.problems[0]


def test_claimed_speedup_with_unchanged_simulated_cycles_is_invalid():
    # The benchmark reports +30% and its process is faster too (so the runner's clock check passes),
    # but the simulated work is the same: the claim is not trusted.
    j = judge_yardstick(raw_with(0.3, 1_000_000, 1_000_100, n=10), CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.INVALID and "did not move" in j.reason, j.reason


def test_a_win_a_separate_build_cannot_see_is_discarded_as_unseen_not_called_invalid():
    # llama.cpp on an AVX-512 machine: the workload runs an AVX2 copy (Valgrind has no AVX-512), so a
    # gain on the 512-bit path is real and invisible to it. Not kept, and not an accusation either.
    separate = CONFIG.model_copy(update={"simulate": CONFIG.simulate.model_copy(update={"separate_build": True})})
    j = judge_yardstick(raw_with(0.3, 1_000_000, 1_000_100, n=10), separate, PLAN, 0.5, GUARD)
    assert j.status == Status.DISCARD and j.reason.startswith("unseen by the yardstick"), j.reason
    assert "simulate.separate_build" in j.reason and j.runner.simulated.delta_pct == pytest.approx(0.01)
    # what it sees still decides as before
    seen = judge_yardstick(raw_with(0.015, 1_000_000, 985_000), separate, PLAN, 0.5, GUARD)
    assert seen.status == Status.KEEP, seen.reason


def test_unchanged_and_slower_simulations_discard():
    same = judge_yardstick(raw_with(0.0, 1_000_000, 1_000_010, n=3), CONFIG, PLAN, 0.5, GUARD)
    assert same.status == Status.DISCARD and same.reason.startswith("no change in simulated cycles"), same.reason
    slower = judge_yardstick(raw_with(0.0, 1_000_000, 1_020_000, n=3), CONFIG, PLAN, 0.5, GUARD)
    assert slower.status == Status.DISCARD and slower.reason.startswith("slower: simulated cycles +2.00%")


def test_identical_binaries_are_not_sampled():
    raw = RawResult(status="ok", stopped="identical", artifacts={"identical": True, "files": ["a.o", "b"]})
    j = judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.DISCARD and j.reason.startswith("no change in the binary: the 2 declared")


def test_stop_rule():
    import numpy as np
    y, s = np.full(8, 0.01), np.full(8, 0.01)
    assert stop_after_pair(Comparison(100, 99), 0.5, y[:2], s[:2], GUARD) == ""          # before min_pairs
    assert stop_after_pair(Comparison(100, 100), 0.5, y, s, GUARD) == "simulated"         # nothing saved
    assert stop_after_pair(Comparison(100, 98), 0.5, y, s, GUARD) == "guarded"
    assert stop_after_pair(Comparison(100, 98), 0.5, -y * 20, s, GUARD) == "loss"
    # nothing saved, but the benchmark claims +22%: sampled until the claim is established
    assert stop_after_pair(Comparison(100, 100), 0.5, y[:3] * 20, s[:3], GUARD) == ""
    y12, s12 = np.full(12, 0.2), np.full(12, 0.01)
    assert stop_after_pair(Comparison(100, 100), 0.5, y12, s12, GUARD) == "claimed"


def test_report_section_labels_both_yardsticks():
    j = judge_yardstick(raw_with(0.015, 1_000_000, 985_000), CONFIG, PLAN, 0.5, GUARD)
    summary = run_summary(simulate={"local": {"aa_delta_pct": 0.0001, "base_cycles": 1_000_000, "seconds": 3.0,
                                              "native_seconds": 0.1}},
                          experiments=[{"name": "x", "platform": "local", "status": j.status.value,
                                        "runner": j.runner, "metrics": j.metric_dicts()}])
    text = "\n".join(render_section(summary))
    assert "Ir + 10·(I1mr + D1mr + D1mw) + 100·(ILmr + DLmr + DLmw)" in text
    assert "30x slowdown" in text and "| x | local | 1,000,000 → 985,000 | -1.500% (0.5%) |" in text
    assert "is `invalid`" in text and "separate_build" not in text
    summary.simulate["local"].separate_build = True
    text = "\n".join(render_section(summary))
    assert "discarded as unseen, not kept" in text and "is `invalid`" not in text


# -- end to end: a tiny C target, valgrind for real, through the pipeline ----------------------
WORK_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static unsigned long mix(unsigned long x) {
    for (int k = 0; k < 40; k++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long h = 0, again = 0;
    for (long i = 0; i < n; i++) h ^= mix(i);
    for (long i = 0; i < n / EXTRA; i++) again ^= mix(i);   /* redundant: its result is not needed */
    if (again == 1) fputs("", stderr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("METRIC items_per_s=%.1f\n", n / s * SCALE);
    printf("DIGEST h=%lx\n", h);
    return 0;
}
"""
MAKEFILE = "work: src/work.c src/extra src/scale\n\tcc -O1 -DEXTRA=$$(cat src/extra) -DSCALE=$$(cat src/scale) -o work src/work.c\n"
TINY_CONFIG = """\
name: tiny
build: make -s
benchmark: ./work 1000000
checks: ./work 1000 >/dev/null
metrics: [{name: items_per_s, direction: higher, primary: true, clock: wall}]
editable: ["src/**"]
artifacts: [work]
timeouts: {build: 60, benchmark: 20, checks: 20}
repeats: {min: 3, max: 12, warmup: 0, calibration: 4}
simulate: {command: ./work 20000, timeout: 120, wall_tolerance_pct: 10}
"""


@pytest.mark.measures
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (tests/system-deps.sh)")
def test_tiny_c_target_end_to_end(tmp_path):
    from conftest import make_repo
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import patch_for
    target = make_repo(tmp_path / "tiny", {".github/autoresearch.yml": TINY_CONFIG, "src/work.c": WORK_C, "Makefile": MAKEFILE,
                                           "src/extra": "25\n", "src/scale": "1\n"})
    p = tmp_path / "patches"
    p.mkdir()
    patches = [
        patch_for(target, p / "drop_redundant.patch", {"src/extra": "100000000\n"}),   # -4% of the work
        patch_for(target, p / "comment.patch", {"src/work.c": WORK_C + "/* tidy */\n"}),   # same binary
        # half the work, only at the yardstick's input size (simulate runs `./work 20000`): counted as
        # -50%, the wall clock unchanged, so without the digest of the counted run it would be kept
        patch_for(target, p / "skip_where_counted.patch", {"src/work.c": WORK_C.replace(
            "for (long i = 0; i < n; i++) h ^= mix(i);",
            "for (long i = 0; i < (n == 20000 ? n / 2 : n); i++) h ^= mix(i);")}),
    ]
    out = tmp_path / "out"
    summary = Run(RunOptions(target=target, out=out, run_id="t1", agent="none", candidates=patches)).execute()
    by = {e.name: e for e in summary.experiments}
    drop = by["drop_redundant"]
    assert drop.simulated is not None, (drop.status, drop.reason)     # say why, when it never got there
    sim = drop.simulated
    # deterministic: the removed loop is 1/25 of the loops, diluted by process start-up (~2M instructions)
    assert -2.5 < sim.delta_pct < -1.0, sim
    # Kept, unless its guard pairs leaned to a loss (a 5% test: seen beside two CPU hogs at load 5.4,
    # p=0.039 on this ~10 ms benchmark's pairs), which is the guard doing its job on that noise.
    assert drop.status == "keep" or "lean to a loss" in drop.reason, drop.reason
    assert by["comment"].status == "discard" and "no change in the binary" in by["comment"].reason, by["comment"].reason
    assert by["comment"].runner.pairs == 0
    skip = by["skip_where_counted"]
    assert skip.status == "invalid" and "the simulated workload: DIGEST h is" in skip.reason, skip.reason
    assert skip.runner.pairs == 0
    cal = summary.simulate["local"]
    # two builds of one commit differ by ~0.003-0.012% (seen here: the build folder's path length
    # reaches the binary and its start-up); far below the 0.5% floor and the -1.8% above
    assert abs(cal.aa_delta_pct) < 0.1 and cal.seconds > 0
    assert cal.digests == ["h"]          # the counted run's DIGEST, deterministic, so checked
    pr = (out / "pr.md").read_text()
    assert "## Deterministic yardstick (simulated cycles)" in pr and "| drop_redundant | local |" in pr


def test_pr_summary_leads_with_the_yardstick_when_it_decided_the_stack():
    from jobs.measure.simulate import headline
    j = judge_yardstick(raw_with(0.0, 1_000_000, 985_000, n=4, noise=0.3), CONFIG, PLAN, 0.5, GUARD)
    stack = {"status": "keep", "runner": j.runner, "metrics": j.metric_dicts()}
    text = headline(run_summary(stack_applied=["a"], stacks={"local": stack}))[0]
    assert text.startswith("1 optimization(s) kept (a), decided by the deterministic yardstick on local: "
                           "**simulated cycles -1.50%**")
    assert "Wall clock beside it: speed" in text and "neither confirms nor refutes it" in text
    assert headline(run_summary(stacks={"local": {**stack, "status": "discard"}})) == []
    none = headline(run_summary(simulate={"local": {}}, stacks={}, experiments=[{"runner": j.runner}]))[0]
    assert none.startswith("No optimization changed the simulated cycles by more than the floor")


def test_a_keep_whose_guard_gave_up_early_says_so():
    from jobs.measure.simulate import UNSETTLED
    raw = raw_with(0.01, 1_000_000, 985_000, n=9, noise=0.15, seed=4)
    raw.stopped = UNSETTLED
    j = judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.KEEP, j.reason
    assert "neither confirms nor refutes" in j.reason
    assert "the guard stopped at 9 of 30 pairs: more were unlikely to settle it" in j.reason
    raw.stopped = "exhausted"
    assert "the guard stopped at" not in judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD).reason
