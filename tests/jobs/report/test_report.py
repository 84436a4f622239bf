from jobs.contract.model import Evidence, ExperimentRecord, Hypothesis
from jobs.report.report import render_pr, render_research
from summaries import run_summary


def metric(name, delta, p, verdict="win"):
    return dict(name=name, base_mean=100.0, base_sd=2.0, head_mean=100 + delta, head_sd=2.5, n_base=10, n_head=10,
                delta_pct=delta, p_value=p, ci_low_pct=delta - 3, ci_high_pct=delta + 3, mde_pct=4.2,
                method="welch", verdict=verdict, note="")


def result(**fields):
    """A `MetricResult` as a summary holds it, of the fields given (the others not measured)."""
    return ExperimentRecord.from_summary({"metrics": [fields]}).metrics[0]


def summary(**kw):
    base = dict(
        run_id="r1", target="demo", repo="/x", base_commit="a" * 40, branch="autoresearch/r1", platform="x86",
        platforms=["x86", "arm"], cpus={"x86": "Xeon (8 cpus)"}, cpu="Xeon", agent="offline", primary="tg",
        calibration={"x86": {"tg": dict(n_pairs=10, sd_log=0.061, aa_delta_pct=0.4, aa_p_value=0.62,
                                        order_effect_pct=-1.2, drift=False, false_win_rate=0.003, mde_pct=7.1,
                                        mean_pairs_null=14.0, mean_pairs_at_mde=18.5, floor_pct=1.0,
                                        repeats=40)}},
        error_control={"alpha": 0.05, "family": 8, "platforms": 1},
        experiments=[
            dict(name="fuse-a", hypothesis="fuse-a", platform="x86", status="keep", reason="tg +12.3%",
                 hypothesis_kind="fusion", metrics=[metric("tg", 12.3, 0.0004)], alpha=0.0184,
                 flags=["tg: baseline CV 21.0%, max/min 2.90 (a loaded machine: sampled on until the paired "
                        "test decided)"],
                 runner={"pairs": 12, "stopped": "keep", "wall_base_s": 0.81, "wall_head_s": 0.72,
                         "cpu_base_s": 0.80, "cpu_head_s": 0.71}),
            dict(name="fork", hypothesis="fork", platform="x86", status="invalid", hypothesis_kind="candidate",
                 reason="tg claims at least +300.0%, which needs ...: the work went where the benchmark's clock "
                        "does not see it", metrics=[metric("tg", 326.0, 0.0001)]),
            dict(name="decoy", hypothesis="decoy", platform="x86", status="discard", hypothesis_kind="micro",
                 reason="tg: no detectable difference (+0.4%, p=0.80, MDE 4.2%)",
                 metrics=[metric("tg", 0.4, 0.8, "no detectable difference")]),
            dict(name="broken", hypothesis="broken", platform="x86", status="checks_failed", hypothesis_kind="fusion",
                 reason="checks failed (exit 1)", metrics=[]),
        ],
        stack_applied=["fuse-a"],
        stacks={"x86": dict(status="keep", reason="tg +11.0%", commit="b" * 40, cpu="Xeon (8 cpus)",
                            metrics=[metric("tg", 11.0, 0.0001)])},
        cost_usd=1.234, wall_seconds=300, reproduce=["autoresearch run X"])
    base.update(kw)
    return run_summary(**base)


def test_pr_has_tables_verdicts_and_honest_unmeasured_platform():
    md = render_pr(summary())
    assert ("**tg +11.0%** on x86 (paired estimate over 10 pairs; one-sided interval +8.0%…+14.0%, whose lower "
            "end clears the 1% floor)") in md
    assert "## A/B on x86" in md
    assert "| tg | 10 | +11.0% | +8.0%…+14.0% | win: interval clears the 1% floor | 100 → 111 |" in md
    arm = md.split("## A/B on arm")[1].split("##")[0]
    assert "Not measured" in arm and "|" not in arm           # no invented numbers for ARM
    assert "| fuse-a | x86 | fusion | kept | +12.3% | +9.3%…+15.3% | tg +12.3% |" in md
    assert "**decoy** on x86 (discarded): tg: no detectable difference" in md
    assert "**broken** on x86 (failed correctness checks)" in md
    assert "**fork** on x86 (numbers not trusted (integrity check)): tg claims" in md
    assert "| tg | 10 | 6.1% | +0.4% (0.620) | -1.2% | 0.3% | 7.1% | 14.00 / 18.50 | 1.0% | 40 |" in md
    assert "chance of any false keep in this run is at most 0.05" in md
    assert "Noise warnings: 1 on 1 measurement(s); none of them vetoed a verdict" in md and "CV 21.0%" in md
    assert "| fuse-a | x86 | 12 | keep | 0.81 s → 0.72 s | 0.8 s → 0.71 s |" in md
    assert "1.23 USD" in md and "autoresearch run X" in md and "measured in this run" in md


def test_one_statistical_language_no_unlabelled_p_and_no_unpaired_sd():
    md = render_pr(summary())
    # The only p-values are the A/A calibration's, and they are labelled two-sided.
    assert "two-sided p" in md and "| p |" not in md and "p (two-sided)" not in md and "p<0.001" not in md
    assert " ± " not in md                                       # no unpaired mean ± sd beside a paired verdict
    assert "one-sided" in md and "clears the 1% floor" in md


def test_each_kept_commit_shows_its_files_hypothesis_and_evidence():
    stat = " src/ops.c   | 12 +++++++-----\n bench/bench.c |  2 +-\n 2 files changed, 8 insertions(+), 6 deletions(-)"
    md = render_pr(summary(
        commits=[dict(hypothesis="fuse-a", commit="c" * 40, subject="fuse-a: recipe", stat=stat,
                      files=["src/ops.c", "bench/bench.c"])],
        hypotheses={"fuse-a": dict(id="fuse-a", title="Fuse A and B", evidence=[
            dict(where="src/ops.c:12", note="copy pass"), dict(where="src/ops.c:40", note="second pass")])}))
    section = md.split("## What each commit changes")[1].split("\n## ")[0]
    assert ("1. **fuse-a** `cccccccccccc`: Fuse A and B; evidence: `src/ops.c:12` copy pass (+1 more in "
            "research.md); alone: tg +12.3%, interval +9.3%…+15.3%") in section
    assert "bench/bench.c |  2 +-" in section and "2 files changed" in section
    # A commit that edits benchmark-looking code is pointed out, not left to opening the commit.
    assert "**Look at this one:** it edits paths named like benchmark or test code (`bench/bench.c`)" in section


def test_a_commit_the_yardstick_decided_shows_its_simulated_change_not_too_few_pairs():
    from jobs.report.report_review import hypothesis_line
    alone = {"metrics": [dict(name="pp512", delta_pct=4.6, ci_low_pct=None, ci_high_pct=None, alpha=0.0081)],
             "runner": {"simulated": {"delta_pct": -0.6, "floor_pct": 0.5},
                        "wall_guard": {"lo_pct": -3.7, "hi_pct": 6.8, "alpha": 0.05, "pairs": 7}}}
    line = hypothesis_line(None, ExperimentRecord.from_summary(alone), "pp512")
    assert line == ("alone: simulated cycles -0.60% (floor 0.5%); wall clock beside it pp512 +4.6%, interval "
                    "-3.7%…+6.8% (0.05, 7 pairs)"), line
    assert "too few pairs" not in line
    plain = hypothesis_line(None, ExperimentRecord.from_summary({"metrics": alone["metrics"]}), "pp512")
    assert plain == "alone: pp512 +4.6%, interval unbounded (0.0081): too few pairs at this level"


def test_the_per_optimization_table_shows_the_guard_interval_a_yardstick_keep_was_decided_with():
    exps = summary().experiments
    m = metric("tg", 4.6, 0.3, "no detectable difference")
    m.update(ci_low_pct=None, ci_high_pct=None, alpha=0.0081)
    exps[0] = {**exps[0].summary_dict(), "metrics": [m], "runner": {
        "pairs": 7, "simulated": {"delta_pct": -0.6, "floor_pct": 0.5, "base_cycles": 1000, "head_cycles": 994},
        "wall_guard": {"lo_pct": -3.7, "hi_pct": 6.8, "alpha": 0.05, "pairs": 7}}}
    md = render_pr(summary(experiments=exps))
    table = md.split("## Per optimization")[1].split("\n\n")[1]
    row = next(line for line in table.splitlines() if line.startswith("| fuse-a |"))
    assert "guard -3.7%…+6.8% (0.05, 7 pairs)" in row and "too few pairs" not in row, row
    # a wall-clock keep keeps its own rule's interval
    decoy = next(line for line in table.splitlines() if line.startswith("| decoy |"))
    assert "| -2.6%…+3.4% |" in decoy and "guard" not in decoy, decoy


def test_yardstick_like_paths():
    from jobs.report.report_review import yardstick_like
    files = ["bench/bench.c", "src/ops.c", "tests/test_ops.c", "ggml/src/ggml-cpu/ops.cpp", "benchmark.py",
             "tools/llama-bench/llama-bench.cpp", "src/bench_util.h", "src/benchmarks.c", "src/testify.c"]
    assert yardstick_like(files) == ["bench/bench.c", "tests/test_ops.c", "benchmark.py",
                                     "tools/llama-bench/llama-bench.cpp", "src/bench_util.h", "src/benchmarks.c"]


def test_failures_are_folded_with_the_first_lines_of_their_output():
    exps = summary().experiments
    exps[3].failure_output = "case 1: FAIL\ncase 2: FAIL\n```\nnot a fence"
    md = render_pr(summary(experiments=exps))
    block = md.split("<summary>broken on x86: checks failed (exit 1): first lines of its output</summary>")[1]
    block = block.split("</details>")[0]
    assert "case 1: FAIL\ncase 2: FAIL" in block
    assert "````" in block          # a longer fence than the output's own backticks: it cannot close it


def test_failure_excerpt_takes_the_failed_steps_output():
    from jobs.report.report_review import failure_excerpt
    log = "== baseline build (1.0 s)\nok\n== checks_failed: checks failed (exit 1)\n\nFAIL a\nFAIL b\n"
    assert failure_excerpt(log, "checks_failed") == "FAIL a\nFAIL b"
    assert failure_excerpt("x\n" * 40 + "last", "crash", lines=3) == "x\nx\nlast"


def test_no_branch_left_is_said():
    s = summary(stack_applied=[], stacks={}, experiments=summary().experiments[1:], branch_left=False,
                branch_note="nothing was kept")
    md = render_pr(s)
    assert "No branch was left (nothing was kept)." in md and "no branch (nothing was kept)" in md


def test_pr_without_winners_says_so():
    s = summary(stack_applied=[], stacks={}, experiments=summary().experiments[1:])
    md = render_pr(s)
    assert "No optimization beat the baseline" in md
    assert "Not measured: no optimization was kept" in md.split("## A/B on x86")[1]


def test_research_md_lists_evidence_and_implementation():
    h = Hypothesis(id="fuse-x", title="Fuse X", kind="fusion", rationale="3 passes", ops=["a", "b"],
                   evidence=[Evidence("src/ops.c:12", "copy pass")], score=4, recipe="fuse-x")
    md = render_research("demo", "c" * 40, [h], ["rms: already present (ops.cpp:9)"], [], "offline")
    assert "### 1. Fuse X (`fuse-x`, fusion, score 4.00)" in md
    assert "- `src/ops.c:12` copy pass" in md and "recipe `fuse-x`" in md
    assert "rms: already present (ops.cpp:9)" in md


def test_untrusted_metric_with_unknown_bounds_renders():
    from jobs.contract.ledger import strict_json
    m = metric("tg", 0.0, 1.0, "untrusted")
    m.update(ci_high_pct=float("inf"), mde_pct=float("inf"))
    s = summary()
    s.stacks["x86"].metrics = ExperimentRecord.from_summary({"metrics": [strict_json(m)]}).metrics
    md = render_pr(s)
    assert "| tg | 10 | +0.0% | -3.0%…? | untrusted: too few complete pairs |" in md


def test_dropped_winner_is_reported_not_silent():
    md = render_pr(summary(stack_dropped=["fuse-b"]))
    assert "**fuse-b** won on its own but its commit conflicts" in md


def test_an_interval_open_at_both_ends_says_so():
    from jobs.report.report_review import interval
    assert interval(result(ci_low_pct=-100.0, ci_high_pct=None, alpha=0.0092)) == \
        "unbounded (0.0092): too few pairs at this level"
    assert interval(result(ci_low_pct=-3.0, ci_high_pct=None)) == "-3.0%…?"


def test_how_sure_names_the_yardstick_when_simulated_cycles_decided():
    from jobs.contract.runsummary import ErrorControl
    from jobs.report.report import _how_sure
    wall = run_summary(platform="local", calibration={}, primary="x")
    assert _how_sure(wall, ErrorControl(0.05)).startswith("How sure: a change is kept when")
    assert "decided on simulated cycles" in _how_sure(run_summary(platform="local", primary="x",
                                                                  simulate={"local": {}}), ErrorControl(0.05))


def test_a_bot_runs_reproduce_block_fetches_from_where_it_pushed_never_from_the_workers_clone():
    from pathlib import Path

    from jobs.contract.branches import Published
    from jobs.run.reporting import Reporting
    from jobs.contract.runstate import RunState
    worker = Path("/srv/autoresearch/octo/synth/r1/repo")        # the App's clone (jobs.contract.layout)

    def reporting(published):
        state = RunState(worker.parent / "out", bench_env_names=["OMP"])
        return Reporting("r1", None, worker, worker.parent / "out", state, ["local"],
                         "offline", "local", 12, [worker.parent / "candidates" / "faster.patch"], published)
    bot = reporting(Published(clone_url="https://github.com/octo/synth.git",
                              head_url="https://github.com/forker/synth.git", head_branch="autoresearch/r0",
                              candidates=(".github/autoresearch/candidates/faster.patch",)))
    kept = "\n".join(bot.reproduce("a" * 40, "autoresearch/r1"))
    assert kept.splitlines()[2] == 'git clone -q https://github.com/octo/synth.git "$work/target"'
    # The branch went to a fork, under the existing PR's branch: fetched from there by name.
    assert ('git -C "$work/target" fetch -q https://github.com/forker/synth.git autoresearch/r0\n'
            f'git -C "$work/target" diff --binary {"a" * 40} FETCH_HEAD > "$work/head.patch"') in kept
    assert "/srv/" not in kept and "origin/" not in kept
    assert 'OMP="$OMP" .venv/bin/autoresearch run "$work/target" --agent none --candidate "$work/head.patch"' in kept
    # Nothing kept: the maintainer's candidates are taken from the fresh clone, where the repo keeps them.
    again = "\n".join(bot.reproduce("a" * 40, None))
    assert '--candidate "$work/target"/.github/autoresearch/candidates/faster.patch' in again and "/srv/" not in again
    assert bot.resume_command() == ""           # the run's folder is on the worker: nothing to re-print here
    # A kept candidate's evidence names the patch where the repository keeps it, not the worker's copy.
    hyp = Hypothesis.from_json({"id": "faster", "evidence": [
        {"where": str(worker.parent / "candidates" / "faster.patch"), "note": "patch file"},
        {"where": "src/a.c:3", "note": "hot loop"}]})
    assert [e.where for e in bot._public(hyp).evidence] == [".github/autoresearch/candidates/faster.patch", "src/a.c:3"]
    assert hyp.evidence[0].where.startswith(str(worker.parent))   # the state's own stays as it was
    assert reporting(None)._public(hyp) == hyp                  # the CLI's user has their own path at hand
    # A bench: the pull request's head is the candidate, so it is measured again even when not kept.
    bench = reporting(Published(clone_url="https://github.com/octo/synth.git", head_url="https://github.com/forker/synth.git",
                                head_branch="autoresearch/r0", head_is_candidate=True))
    for branch in ("autoresearch/r1", None):
        lines = "\n".join(bench.reproduce("a" * 40, branch))
        assert "fetch -q https://github.com/forker/synth.git autoresearch/r0" in lines and "/srv/" not in lines
        md = render_pr(summary(reproduce=lines.splitlines(), stack_confirmed=False))
        assert "Measures base against this branch again" in md and "Runs the whole loop" not in md
    # The CLI's run: its user has the target folder at hand, so the block stays as it was.
    cli = reporting(None)
    local = "\n".join(cli.reproduce("a" * 40, "autoresearch/r1"))
    assert f'git clone -q {worker} "$work/target"' in local and f"{'a' * 40} origin/autoresearch/r1 >" in local
    assert "fetch" not in local and f"--run-id r1 --out {worker.parent / 'out'}" in cli.resume_command()


def test_the_runs_warnings_are_noted_once_each_and_the_missing_profile_only_at_the_top():
    refused = ("the repository's config asks for `sandbox: {enabled: false}`; only the operator can turn the "
               "sandbox off (AUTORESEARCH_ALLOW_UNSANDBOXED=1 in the operator's settings), so target code runs sandboxed")
    noisy = "x86: calibration noisy: sd 9.0%"
    missing = "the op profile was not measured (timeout): hypotheses are ranked by kind weights alone"
    md = render_pr(summary(warnings=[refused, noisy, refused, missing], profile_missing=missing))
    notes = md.split("## Notes from the run\n\n")[1].split("\n\n")[0].splitlines()
    # inert text read as written: the message's own backticks make a code span (nothing in one is live),
    # its braces show as typed; no escape shows
    assert notes == ["- the repository's config asks for `sandbox: {enabled: false}`; only the operator can "
                     "turn the sandbox off (AUTORESEARCH_ALLOW_UNSANDBOXED=1 in the operator's settings), so target "
                     "code runs sandboxed", f"- {noisy}"]
    assert md.count(missing) == 1 and md.startswith("# autoresearch") and "> **Warning:** " in md
    assert md.index("## Notes from the run") < md.index("## A/B on x86")


def test_a_run_without_warnings_has_no_notes_section():
    assert "Notes from the run" not in render_pr(summary())


def test_a_floor_the_calibration_raised_is_printed_to_three_digits_as_elsewhere_in_the_report():
    from jobs.report.report_review import decision
    assert decision(result(verdict="win"), 9.906790173) == "win: interval clears the 9.91% floor"
    assert decision(result(verdict="", ci_low_pct=0.4, ci_high_pct=3.0), 1.0) == "real but inside the 1% floor"


def test_the_pr_says_who_switched_the_sandbox_off():
    from jobs.report.report import render_pr
    assert "WITHOUT a sandbox" not in render_pr(summary())
    md = render_pr(summary(sandboxed=False, unsandboxed_by="--no-sandbox (the operator)"))
    assert "WITHOUT a sandbox in this run** (switched off by --no-sandbox (the operator))" in md
