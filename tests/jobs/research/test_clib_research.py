"""Research for any C/C++ target: the callgrind parser, compiler remarks, build-option patches and
hot-function leads (jobs/research/callgrind.py, jobs/research/clib.py), and a run with nothing to
try stopping before the calibration."""
from __future__ import annotations

import subprocess

import pytest

from jobs.contract.config import parse_config
from jobs.research.callgrind import CallProfile, Spot, parse, remarks
from jobs.research.clib import build_option_hypotheses, hot_function_hypotheses
from jobs.contract.runsummary import RunStopped

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

# Real callgrind 3.19 output (--compress-strings=no --compress-pos=no) of a small program, trimmed.
CALLGRIND = """# callgrind format
version: 1
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 24123090 4026830 4011496 1057 125939 125575 1056 6990 6787
ob=/tmp/x/t
fl=/tmp/x/t.c
fn=hot
2 300 20 120 0 20 20 0 1 1
cfn=sq
calls=20 1
2 60 20
2 7999920 1999980 3999960 0 124980 124980 0 6249 6249
cfn=sq
calls=1999980 1
2 5999940 1999980
2 10000000
3 120 100 0 0 20

fn=main
4 12 0 5 2 0 0 2
cfn=hot
calls=1 2
4 1200017 200005 200004 0 6251 6250 0 6250 6250
4 67 5

fn=sq
1 6000000 2000000
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fl=./string/strlen.S
fn=strlen
10 1000
"""


def test_parse_counts_self_cost_only():
    prof = parse(CALLGRIND, root="/tmp/x")
    by = {s.function: s for s in prof.functions}
    hot_ir = 300 + 7999920 + 10000000 + 120
    hot_cycles = hot_ir + 10 * (20 + 20 + 124980 + 124980 + 20) + 100 * (1 + 1 + 6249 + 6249)
    assert by["hot"].cycles == hot_cycles           # the calls' inclusive costs are not its own
    assert by["sq"].cycles == 6000000 and by["main"].cycles == 12 + 67 + 10 * 2 + 100 * 2   # I1mr 2, ILmr 2
    assert prof.total_cycles == sum(s.cycles for s in prof.functions)
    assert prof.functions[0].function == "hot" and prof.functions[0].first_line == "t.c:2"
    assert prof.lines[0].where == "t.c:2" and prof.lines[0].function == "hot"
    assert prof.misses[0].where == "t.c:2" and prof.misses[0].share > 0.99


def test_remarks_on_hot_lines_only():
    prof = parse(CALLGRIND, root="/tmp/x")
    out = "\n".join(["t.c:3:5: missed: couldn't vectorize loop",
                     "t.c:3:5: missed: not vectorized: possible alias involving gather/scatter.",
                     "t.c:90:5: missed: couldn't vectorize loop",
                     "t.c:2:1: note: something unrelated",
                     "t.c:2:9: remark: loop not vectorized [-Rpass-missed=loop-vectorize]"])   # clang
    found = remarks(out, prof)
    assert [(r.where, r.message) for r in found] == [
        ("t.c:2", "loop not vectorized [-Rpass-missed=loop-vectorize]"),
        ("t.c:3", "couldn't vectorize loop"), ("t.c:3", "not vectorized: possible alias involving gather/scatter.")]


def _measure_with_build_output(build_output: str):
    """`measure` with a fake sandbox: the build prints `build_output`, the workload under callgrind
    prints CALLGRIND after the marker it was given. No process runs."""
    import re
    from types import SimpleNamespace

    from jobs.research.callgrind import measure

    config = SimpleNamespace(
        build="make", timeouts=SimpleNamespace(build=60),
        simulate=SimpleNamespace(command="./t", timeout=30, profile_flags="-O2 -g -fopt-info-vec-missed"))

    def run(command, cwd, timeout, extra_env=None, step=""):
        if step == "build":
            assert extra_env == {"CFLAGS": "-O2 -g -fopt-info-vec-missed", "CXXFLAGS": "-O2 -g -fopt-info-vec-missed"}
            return SimpleNamespace(returncode=0, output=build_output)
        marker = re.search(r"AUTORESEARCH-CALLGRIND-[0-9a-f]+", command)[0]
        return SimpleNamespace(returncode=0, output=f"{marker}\n{CALLGRIND}")

    return measure("/tmp/x", config, run)


def test_a_multi_line_build_output_with_remarks_is_not_reported_as_printing_none():
    # The check once searched the whole output with the line-anchored REMARK pattern (no re.M), so
    # any build of more than one line was "printed no compiler remarks", right under its remarks.
    from jobs.research.callgrind import render

    build = "\n".join(["cc -O2 -g -fopt-info-vec-missed -c t.c -o t.o",
                       "t.c:3:5: missed: couldn't vectorize loop",
                       "t.c:3:5: missed: not vectorized: possible alias involving gather/scatter.",
                       "t.c:40:1: note: something unrelated",
                       "cc t.o -o t"])
    prof = _measure_with_build_output(build)
    assert [(r.where, r.message) for r in prof.remarks] == [
        ("t.c:3", "couldn't vectorize loop"), ("t.c:3", "not vectorized: possible alias involving gather/scatter.")]
    text = "\n".join(render(prof))
    assert "`t.c:3` couldn't vectorize loop" in text
    assert "printed no compiler remarks" not in text and prof.notes == []


def test_a_build_output_without_remarks_says_so():
    from jobs.research.callgrind import render

    prof = _measure_with_build_output("cc -O2 -g -fopt-info-vec-missed -c t.c -o t.o\ncc t.o -o t\n")
    assert prof.remarks == []
    assert prof.notes == ["the build printed no compiler remarks: it may not pass CFLAGS/CXXFLAGS to the compiler"]
    assert "- note: the build printed no compiler remarks" in "\n".join(render(prof))


def test_hot_functions_become_leads_with_an_amdahl_bound_only_when_editable():
    prof = parse(CALLGRIND, root="/tmp/x")
    prof.remarks = remarks("t.c:3:5: missed: not vectorized: possible alias involving gather/scatter.", prof)
    notes: list[str] = []
    leads = hot_function_hypotheses(prof, ["t.c"], notes)
    assert [h.id for h in leads] == ["hot-hot", "hot-sq"]
    h = leads[0]
    assert h.patch is None and h.recipe is None and "aliasing" in h.rationale
    bound = next(e for e in h.evidence if e.where == "profile:simulated")
    assert f"{100 * prof.functions[0].share:.1f}%" in bound.note and "at most" in bound.note
    assert any(e.where == "t.c:3" and e.note.startswith("compiler:") for e in h.evidence)
    assert not parse(CALLGRIND).functions[0].first_line.startswith("string")
    assert hot_function_hypotheses(prof, ["lib/**"], notes) == [] and "outside the editable paths" in notes[-1]


def test_a_hot_function_without_debug_info_is_not_called_outside_the_editable_paths():
    # llama.cpp's yardstick build is Release without -g: callgrind names the function but not its file
    prof = parse(CALLGRIND.replace("fl=/tmp/x/t.c", "fl=???"), root="/tmp/x")
    assert prof.functions[0].first_line.startswith("???")
    notes: list[str] = []
    assert hot_function_hypotheses(prof, ["t.c"], notes) == []
    assert len(notes) == 1 and "cannot name" in notes[0] and "-g" in notes[0] and "hot " in notes[0]
    assert "outside the editable paths" not in notes[0]


def test_build_option_patches_apply(tmp_path):
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "Makefile").write_text("CC ?= cc\nCFLAGS ?= -O2 -Wall\nall:\n\t$(CC) $(CFLAGS) -o x x.c\n")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    prof = CallProfile(total_cycles=1000, functions=[Spot("f", "f", 600, 0.6, 0.0, "x.c:1")])
    notes: list[str] = []
    hyps = build_option_hypotheses(tree, ["Makefile"], tmp_path / "patches", prof, notes)
    assert {h.id for h in hyps} == {"build-o3", "build-lto", "build-unroll", "build-march"}
    for h in hyps:
        subprocess.run(["git", "-C", str(tree), "apply", "--check", h.patch], check=True)
        assert h.evidence[0].where == "Makefile:2" and "100%" in h.evidence[1].note
    o3 = open(next(h.patch for h in hyps if h.id == "build-o3")).read()
    assert "-CFLAGS ?= -O2 -Wall\n+CFLAGS ?= -O3 -Wall\n" in o3
    march = next(h for h in hyps if h.id == "build-march")
    assert "run-time dispatch" in march.rationale
    assert build_option_hypotheses(tree, ["src/**"], tmp_path / "p2", prof, notes) == []
    assert "no editable build file" in notes[-1]


def test_nothing_to_try_stops_before_calibration(tmp_path):
    from conftest import git
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import synthetic_target
    target = synthetic_target(tmp_path / "target")
    out = tmp_path / "out"
    result = Run(RunOptions(target=target, out=out, run_id="t0", agent="offline")).execute()
    assert isinstance(result, RunStopped) and "no hypothesis" in result.why
    assert not (out / "experiments.jsonl").exists() and not (out / "pr.md").exists()
    assert git(target, "branch", "--list", "autoresearch/*") == ""
    research = (out / "research.md").read_text()
    assert "## What was scanned" in research and "the run stops here" in research
    # no `simulate:` declared: the benchmark command would stand in for one, but this target's build
    # makes no native code (its benchmark is a shell script), so nothing is profiled and research says why
    assert "callgrind profile: not measured (the build made no native code" in research, research


def test_simulate_false_derives_no_profile_and_says_how_to_get_one(tmp_path):
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import synthetic_target
    target = synthetic_target(tmp_path / "target")
    config = target / ".github" / "autoresearch.yml"
    config.write_text(config.read_text() + "simulate: false\n")
    from conftest import git
    git(target, "commit", "-qam", "no yardstick")
    out = tmp_path / "out"
    result = Run(RunOptions(target=target, out=out, run_id="t0", agent="offline")).execute()
    assert isinstance(result, RunStopped)
    research = (out / "research.md").read_text()
    assert "Callgrind profile: not measured" in research
    assert "`timeouts.simulate` is 0 (`simulate: false`)" in research


def test_a_recent_calibration_of_the_same_base_is_reused(tmp_path):
    import json
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import FASTER, patch_for, synthetic_target
    target = synthetic_target(tmp_path / "target")
    first = Run(RunOptions(target=target, out=tmp_path / "cal", run_id="c1", agent="none",
                           calibrate_only=True, repeats=3)).execute()
    patch = patch_for(target, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    Run(RunOptions(target=target, out=tmp_path / "run", run_id="r1", agent="none", candidates=[patch],
                      repeats=3)).execute()
    ledger = [json.loads(line) for line in (tmp_path / "run" / "experiments.jsonl").read_text().splitlines()]
    cal = next(r for r in ledger if r["kind"] == "calibration")
    assert cal["reason"].startswith("reused: the calibration of run c1") and cal["runner"]["reused_from"] == "c1"
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    for field in ("sd_log", "n_pairs", "floor_pct", "prior"):
        before = getattr(first.calibration["local"]["score"], field)
        assert state["calibration"]["local"]["score"][field] == json.loads(json.dumps(before))


def test_a_loop_blocked_by_aliasing_gets_a_restrict_patch_that_compiles(tmp_path):
    from jobs.research.callgrind import Remark
    from jobs.research.clib import restrict_hypotheses
    tree = tmp_path / "t"
    (tree / "src").mkdir(parents=True)
    (tree / "src/add.c").write_text("void add(float *a, const float *b,\n         const float *c, int n) {\n"
                                    "  for (int i = 0; i < n; i++)\n    a[i] = b[i] * 2.0f + c[i];\n}\n")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    prof = CallProfile(total_cycles=1000, functions=[Spot("add", "add", 900, 0.9, 0.1, "src/add.c:1")],
                       lines=[Spot("src/add.c:4", "add", 800, 0.8)],
                       remarks=[Remark("src/add.c", 3, "optimized:  loop versioned for vectorization because of "
                                                       "possible aliasing")])
    [h] = restrict_hypotheses(tree, prof, ["src/**"], tmp_path / "patches")
    assert h.id == "restrict-add" and "review the callers" in h.rationale and h.evidence[0].where == "src/add.c:3"
    subprocess.run(["git", "-C", str(tree), "apply", h.patch], check=True)
    text = (tree / "src/add.c").read_text()
    assert "float *restrict a, const float *restrict b,\n         const float *restrict c, int n" in text
    subprocess.run(["cc", "-std=c99", "-fsyntax-only", str(tree / "src/add.c")], check=True)
    # no alias remark on its hot lines: no patch
    prof.remarks = [Remark("src/add.c", 3, "not vectorized: control flow in loop")]
    assert restrict_hypotheses(tree, prof, ["src/**"], tmp_path / "p2") == []


def test_identical_build_outputs_are_not_sampled_without_a_simulation(tmp_path):
    from conftest import git
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import patch_for, synthetic_target
    target = synthetic_target(tmp_path / "target")
    cfg = target / ".github/autoresearch.yml"
    cfg.write_text(cfg.read_text() + "artifacts: [build/speed]\n")
    git(target, "commit", "-qam", "declare the build output")
    same = patch_for(target, tmp_path / "tidy.patch", {"src/code.c": "int main(void) { return 0; } /* tidy */\n"})
    summary = Run(RunOptions(target=target, out=tmp_path / "out", run_id="a1", agent="none", candidates=[same],
                             repeats=3)).execute()
    [rec] = summary.experiments
    assert rec.status == "discard" and rec.reason.startswith("no change in the binary: the 1 declared")
    assert rec.runner.pairs == 0


def test_a_patch_the_loop_wrote_is_never_labelled_the_maintainers(tmp_path):
    """Issue 44: a generated build-option patch was committed as "maintainer candidate" and listed
    as "Implementation: maintainer patch". Its hypothesis now says what wrote it, and so do its
    commit and research.md."""
    from jobs.agent.offline import OfflineAgent
    from jobs.contract.config import parse_config
    from jobs.report.report import render_research
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "Makefile").write_text("CC ?= cc\nCFLAGS ?= -O2 -Wall\nall:\n\t$(CC) $(CFLAGS) -o x x.c\n")
    (tree / "x.c").write_text("int main(void) { return 0; }\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True)
    prof = CallProfile(total_cycles=1000, functions=[Spot("f", "f", 600, 0.6, 0.0, "x.c:1")])
    hyps = build_option_hypotheses(tree, ["Makefile"], tmp_path / "patches", prof, [])
    o3 = next(h for h in hyps if h.id == "build-o3")
    assert o3.generated and "offline research" in o3.generated
    config = parse_config("name: t\nbuild: make\nbenchmark: ./x\nchecks: 'true'\nmetrics: [{name: s, direction: higher, primary: true}]\n"
                          "editable: [Makefile]\n")
    OfflineAgent({}).implement(o3, tree, config)
    message = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%B"], capture_output=True, text=True,
                             check=True).stdout
    assert "maintainer" not in message and "Generated by autoresearch" in message, message
    md = render_research("t", "a" * 40, [o3], [], [], "offline")
    assert "Implementation: generated patch (a build-option patch of the offline research)" in md
    assert "maintainer patch" not in md
