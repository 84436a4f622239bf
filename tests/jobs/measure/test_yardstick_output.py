"""The yardstick's output is the runner's, not the workload's (issue findings A6, A8): cachegrind's
records are kept apart from the workload's output, only the records the runner asked for are read,
every count is checked, and two arms that ran a different number of processes are not compared.
Each test fails on ea10b95, where a forged `cg.0` next to the workload's `out.log` was summed
(-52.6% simulated cycles) and 4,299-digit counts crashed the run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jobs.contract.model import Status
from jobs.measure.simulate import EVENTS, Comparison, Counts, SimulateError, extract, judge_yardstick, parse_cachegrind, wrapped_command
from yardstick_listing import entries, listing, log_lines

MARK = "AUTORESEARCH-CACHEGRIND-test"
ONE = (1000, 10, 5, 300, 20, 4, 100, 7, 3)
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (tests/system-deps.sh)")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is installed by `make test` (tests/system-deps.sh)")

# The workload of a candidate that games the count (A6): it finds the folders its open descriptors
# lead to (its output's, at ea10b95 also the records'; here also Valgrind's log's) and leaves a
# cachegrind file with negative counts there, then does its real work.
FORGED = r"""printf 'events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nsummary: -900000000 0 0 0 0 0 0 0 0\n' > "$d/cg.0"
"""
FORGE = r"""
for fd in /proc/$$/fd/*; do t=$(readlink "$fd"); case "$t" in */out.log|*/vg.*) dirs="$dirs ${t%/*}";; esac; done
for d in $dirs; do """ + FORGED + "done\n"
WORK = "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo DIGEST h=01"


def summary_of(*counts) -> str:
    return "events: " + " ".join(EVENTS) + "\nsummary: " + " ".join(map(str, counts)) + "\n"


# -- A8: counts are numbers json and floats hold, or a clear error -------------------------------
def test_a_count_of_4299_digits_is_a_clear_error_not_a_crash():
    huge = "9" * 4299                        # below int()'s 4,300-digit limit: at ea10b95 it got through
    with pytest.raises(SimulateError, match="at most 19 digits"):
        parse_cachegrind(summary_of(huge, *[1] * 8))
    text = listing(MARK, {41: ONE}).replace("summary: 1000 ", f"summary: {huge} ", 1)
    with pytest.raises(SimulateError, match=r"cg\.41, summary Ir: .*at most 19 digits"):
        extract(text, MARK)
    with pytest.raises(SimulateError, match="not below 2\\*\\*63"):
        parse_cachegrind(summary_of(2 ** 63, *[1] * 8))


@pytest.mark.parametrize("word", ["-5", "+5", "5.0", "0x10", "١٢"])
def test_a_count_is_a_plain_non_negative_integer(word):
    with pytest.raises(SimulateError, match="is not a count"):
        parse_cachegrind(summary_of(word, *[1] * 8))


def test_counts_always_dump_as_json_and_a_comparison_never_overflows():
    with pytest.raises(SimulateError):
        Counts((("Ir", 10 ** 4299),))
    with pytest.raises(SimulateError):
        Counts((("Ir", -1),))
    c = Counts(tuple(zip(EVENTS, [2 ** 63 - 1] * 9)), processes=3)
    assert json.loads(json.dumps(c.to_dict()))["cycles"] == c.cycles
    assert Comparison(1, 10 ** 4299).delta_pct == float("inf")     # OverflowError at ea10b95
    assert Comparison(3, 10 ** 400).saving_pct == float("-inf")
    from jobs.measure.simulate import compare  # a stored record's cycles: a count, or no comparison
    assert compare({"A": {"cycles": -5}, "B": {"cycles": 1}}) is None
    assert compare({"A": {"cycles": 10 ** 4299}, "B": {"cycles": 1}}) is None
    assert compare({"A": {"cycles": 10}, "B": {"cycles": 5}}).delta_pct == -50.0


# -- A6 and the rest: only the records the runner asked for, checked against each other ----------
def test_a_forged_file_in_the_records_folder_fails_the_step_and_names_it():
    # At ea10b95 the shell's `for f in "$d"/cg.*` printed a block for it, summed with the rest.
    forged = [f"{MARK} stray cg.0"]
    with pytest.raises(SimulateError, match=r"holds 'cg.0', which the runner did not ask for"):
        extract(listing(MARK, {41: ONE}, forged, n_extra=1), MARK)
    with pytest.raises(SimulateError, match=r"'notes.txt'"):
        extract(listing(MARK, {41: ONE}, [f"{MARK} stray notes.txt"], n_extra=1), MARK)


def test_a_file_needs_its_log_and_a_log_its_file_and_they_must_agree():
    lone_file = [f"{MARK} file cg.77", *summary_of(*ONE).splitlines()]
    with pytest.raises(SimulateError, match=r"cg\.77 has no Valgrind log vg\.77"):
        extract(listing(MARK, {41: ONE}, lone_file, n_extra=1), MARK)
    lone_log = [f"{MARK} file vg.77", *log_lines(77, ONE)]
    with pytest.raises(SimulateError, match=r"vg\.77 has no cachegrind file cg\.77 .*SIGKILL"):
        extract(listing(MARK, {41: ONE}, lone_log, n_extra=1), MARK)
    text = listing(MARK, {41: ONE}).replace("summary: 1000 ", "summary: 400 ", 1)     # the file lowered, not the log
    with pytest.raises(SimulateError, match=r"vg\.41 \(file vs log: Ir 400 vs 1000\)"):
        extract(text, MARK)
    # a log line of another process, or one of its totals missing
    with pytest.raises(SimulateError, match="not a summary line of process 41"):
        extract(listing(MARK, {41: ONE}).replace("==41== I1", "==42== I1"), MARK)
    with pytest.raises(SimulateError, match="no LLd misses"):
        extract("\n".join(line for line in listing(MARK, {41: ONE}).splitlines() if "LLd" not in line) + "\n", MARK)


def test_a_file_has_exactly_the_expected_events_and_one_summary():
    twice = listing(MARK, {41: ONE}).replace("summary: 1000", "summary: 1 1 1 1 1 1 1 1 1\nsummary: 1000", 1)
    with pytest.raises(SimulateError, match=r"cg\.41: 1 events: and 2 summary: lines"):
        extract(twice, MARK)
    other = listing(MARK, {41: ONE}).replace("events: Ir I1mr", "events: Ir I1mw", 1)
    with pytest.raises(SimulateError, match=r"cg\.41: events 'Ir I1mw"):
        extract(other, MARK)


def test_the_listing_is_framed_as_the_runner_printed_it():
    good = listing(MARK, {41: ONE})
    assert extract(good, MARK).processes == 1
    injected = "DIGEST h=01\n" + "\n".join([f"{MARK} begin", *entries(MARK, {5: ONE}), f"{MARK} end 2"]) + "\n" + good
    with pytest.raises(SimulateError, match="something else wrote into the runner's output"):
        extract(injected, MARK)         # a block written into the wrapper's stdout before its own listing
    inside = good.replace(f"{MARK} end 2", "\n".join([*entries(MARK, {5: ONE}), f"{MARK} end 2"]))
    with pytest.raises(SimulateError, match="4 entries where the runner listed 2"):
        extract(inside, MARK)
    with pytest.raises(SimulateError, match="not framed"):
        extract(good + "summary: 1\n", MARK)
    with pytest.raises(SimulateError, match="no listing"):
        extract("DIGEST h=01\n", MARK)


def test_valgrind_from_3_21_on_prints_its_totals_with_one_space_and_reads_the_same():
    old = "\n".join(log_lines(41, ONE))
    new = old.replace("I   refs:", "I refs:").replace("D   refs:", "D refs:")
    assert extract(listing(MARK, {41: ONE}).replace(old, new), MARK).get("Ir") == 1000


# -- the number of processes: a forged record adds one, and arms that differ are not compared -----
def test_a_candidate_whose_simulated_run_counted_another_number_of_processes_is_not_kept():
    from test_simulate import CONFIG, GUARD, PLAN, raw_with
    raw = raw_with(0.0, 1_000_000, 500_000)          # -50% simulated cycles, the wall clock unchanged
    assert judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD).status == Status.KEEP
    raw.simulated["A"]["processes"], raw.simulated["B"]["processes"] = 3, 4
    j = judge_yardstick(raw, CONFIG, PLAN, 0.5, GUARD)
    assert j.status == Status.INVALID, j.reason
    assert "ran 4 process(es) under cachegrind for the candidate and 3 for the baseline" in j.reason


@pytest.mark.parametrize("kind", ["experiment", "calibration"])
def test_the_runner_stops_an_arm_pair_that_ran_another_number_of_processes(tmp_path, monkeypatch, kind):
    from jobs.measure import runner, simrun
    from jobs.measure.isolation import Isolation
    from jobs.contract.spec import ExperimentSpec, RawResult
    counted = iter([{"cycles": 1000, "processes": 2, "wall_s": 1.0, "digests": {}},
                    {"cycles": 900, "processes": 3, "wall_s": 1.0, "digests": {}}])
    monkeypatch.setattr(simrun, "simulate", lambda *a, **kw: next(counted))
    monkeypatch.setattr(runner, "run_step", lambda *a, **kw: runner.Step(0, "", 1.0))
    spec = ExperimentSpec(run_id="r", name="x", platform="local", base_commit="a", head_commit="b", build="true",
                          benchmark="true", checks="true", metrics=["speed"], primary="speed", n_per_arm=3,
                          kind=kind, simulate="./work")
    result, log = RawResult(status="ok"), []
    trees = {"A": (tmp_path / "a", "baseline"), "B": (tmp_path / "b", "candidate")}
    if kind == "calibration":
        with pytest.raises(runner.Failure, match="A/A: two simulated runs of the base commit ran 2 and 3 process"):
            runner._yardstick(spec, trees, result, Isolation(enabled=False), lambda *a: None, log)
    else:
        assert runner._yardstick(spec, trees, result, Isolation(enabled=False), lambda *a: None, log)
        assert result.stopped == "invalid" and "ran 3 process(es)" in "".join(log)


# -- real valgrind: the attack as replayed ----------------------------------------------------------
def run_wrapped(command: str, tmp: Path) -> str:
    """`command` under the wrapper, outside the sandbox (its folders made under `tmp`)."""
    done = subprocess.run(["bash", "-c", wrapped_command(command, MARK)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@needs_valgrind
def test_a6_replayed_a_forged_file_is_never_summed(tmp_path):
    # The replay: the folder of its output (`/proc/$$/fd/1`), where the records were at ea10b95.
    find = 't=$(readlink /proc/$$/fd/1); d=${t%/*}\n'
    honest = extract(run_wrapped(find + WORK, tmp_path), MARK)
    replayed = extract(run_wrapped(find + FORGED + WORK, tmp_path), MARK)
    assert replayed.processes == honest.processes
    assert replayed.cycles == pytest.approx(honest.cycles, rel=0.005)      # -52.6% at ea10b95
    # Every folder its descriptors lead to, the records' too (through Valgrind's log): named, not summed.
    with pytest.raises(SimulateError, match="'cg.0', which the runner did not ask for"):
        extract(run_wrapped(FORGE + WORK, tmp_path), MARK)


@needs_valgrind
def test_the_workloads_output_folder_holds_no_record(tmp_path):
    out = run_wrapped('o=$(readlink /proc/$$/fd/1); ls -A "${o%/*}" | sed "s/^/DIGEST seen=/"; echo DIGEST x=1', tmp_path)
    assert "seen=out.log" in out and "seen=cg." not in out and "seen=vg." not in out


# -- end to end: the attacks from inside the benchmark's sandbox ---------------------------------
def sandboxed(tmp_path: Path):
    from jobs.measure.isolation import Isolation
    from jobs.measure.runner import run_step
    iso = Isolation()

    def step(command, cwd, timeout, **kw):
        return run_step(command, cwd, timeout, isolation=iso, **kw)
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    return tree, step


@pytest.mark.measures
@needs_bwrap
@needs_valgrind
def test_in_the_sandbox_a_forged_or_rewritten_record_fails_the_step(tmp_path):
    from jobs.measure.simrun import SimulationFailed, simulate
    tree, step = sandboxed(tmp_path)
    honest = simulate(WORK, tree, 120, step, seed=1, who="baseline")
    assert honest["processes"] == 1 and honest["cycles"] > 0 and honest["digests"] == {"h": "01"}
    with pytest.raises(SimulationFailed, match="'cg.0', which the runner did not ask for") as failed:
        simulate(FORGE + WORK, tree, 120, step, seed=1, who="candidate")
    assert failed.value.status == "crash" and failed.value.reason.startswith("candidate simulated run:")
    # a record rewritten after Valgrind wrote it (a child that has ended; its log left alone)
    lower = r"""/bin/true & c=$!; wait $c
for fd in /proc/$$/fd/*; do t=$(readlink "$fd"); case "$t" in */vg.*) d=${t%/*};; esac; done
sed -i 's/^summary: [0-9]*/summary: 1/' "$d/cg.$c"; """
    with pytest.raises(SimulationFailed, match=r"summary disagrees with Valgrind's log vg\.[0-9]+ \(file vs log: Ir 1 vs"):
        simulate(lower + WORK, tree, 120, step, seed=1, who="candidate")


@pytest.mark.measures
@needs_bwrap
@needs_valgrind
def test_in_the_sandbox_a_consistent_forgery_for_a_process_that_never_ran_makes_the_candidate_invalid(tmp_path):
    from jobs.measure.simrun import simulate
    from jobs.measure.simulate import process_problems
    tree, step = sandboxed(tmp_path)
    log = "\\n".join(log_lines(999999, (1,) * 9))
    find = r"""for fd in /proc/$$/fd/*; do t=$(readlink "$fd"); case "$t" in */vg.*) d=${t%/*};; esac; done
"""
    fake = (r"""printf 'events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nsummary: 1 1 1 1 1 1 1 1 1\n' > "$d/cg.999999"
printf '""" + log + r"""\n' > "$d/vg.999999"; """)
    base = simulate(find + WORK, tree, 120, step, seed=1, who="baseline")      # the same processes, no forgery
    head = simulate(find + fake + WORK, tree, 120, step, seed=1, who="candidate")
    assert head["processes"] == base["processes"] + 1          # it was read: both records agree
    assert process_problems({"A": base, "B": head}) and not process_problems({"A": base, "B": base})
