"""The whole local loop on a synthetic target: every experiment status, artifacts, resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.contract.ledger import dumps
from jobs.contract.events import RunWarning
from jobs.run.pipeline import Run, RunError, RunOptions
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import RunSummary
from synthetic import FASTER, patch_for, synthetic_target
from conftest import ROOT, git

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test


@pytest.fixture()
def target(tmp_path):
    return synthetic_target(tmp_path / "target")


def run(target, out, candidates, **kw):
    return Run(RunOptions(target=target, out=out, run_id="t1", agent="none", candidates=candidates, **kw)).execute()


def test_every_status_from_maintainer_candidates(target, tmp_path):
    p = tmp_path / "patches"
    p.mkdir()
    patches = [
        patch_for(target, p / "faster.patch", {"src/speed.txt": FASTER}),
        patch_for(target, p / "same.patch", {"src/code.c": "int main(void) { return 0; } /* tidy */\n"}),
        patch_for(target, p / "nobuild.patch", {"src/broken": "x"}),
        patch_for(target, p / "wrong.patch", {"src/wrong": "x"}),
        patch_for(target, p / "crashes.patch", {"src/crash": "x"}),
        patch_for(target, p / "hangs.patch", {"src/slow": "x"}),
        patch_for(target, p / "nan.patch", {"src/nan": "x"}),
    ]
    out = tmp_path / "out"
    summary = run(target, out, patches)
    status = {e.name: e for e in summary.experiments}
    assert status["faster"].status == "keep", status["faster"].reason
    assert status["same"].status == "discard"
    # An identical candidate: no difference, or (at most the run's level of the time) a "real" one
    # inside the floor; never a keep.
    same = status["same"].reason
    assert ("no detectable difference" in same and "MDE" in same) or ("is real" in same and "floor" in same), same
    assert status["nobuild"].status == "build_failed"
    assert status["wrong"].status == "checks_failed"
    assert status["crashes"].status == "crash" and "status 3" in status["crashes"].reason
    assert status["hangs"].status == "timeout"
    assert status["nan"].status == "crash" and "not finite" in status["nan"].reason

    # The win is measured, not assumed: ~+100% on score (speed 100 -> 200), and ms (lower is better) improves too.
    score = next(m for m in status["faster"].metrics if m.name == "score")
    assert 90 < score.delta_pct < 110 and score.p_value < 0.05 and score.n_base >= 6

    for name in ("research.md", "experiments.jsonl", "pr.md", "summary.json", "hypotheses.json"):
        assert (out / name).is_file(), name
    ledger = [json.loads(line) for line in (out / "experiments.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in ledger].count("experiment") == 7
    assert ledger[0]["kind"] == "calibration"
    # summary.json is the returned summary's JSON form, and reads back into it byte for byte.
    text = (out / "summary.json").read_text()
    assert RunSummary.from_json(json.loads(text)) == summary
    assert dumps(summary.to_json(), indent=2) == text and list(json.loads(text))[:2] == ["run_id", "target"]
    assert list(json.loads(text))[-1] == "warnings"           # a key added later comes last

    # The stack holds exactly the one winner, as one commit on the run's branch.
    log = git(target, "log", "--format=%s", f"{summary.base_commit}..autoresearch/t1").splitlines()
    assert log == ["faster: maintainer candidate"]
    assert summary.stacks["local"].status == "keep"
    pr = (out / "pr.md").read_text()
    assert "| score |" in pr and "faster" in pr and "What did not work" in pr
    assert "did not build" in pr and "failed correctness checks" in pr

    # Where it ran (issue 27): this machine's ISA and flags, kernel and compiler, and the load seen.
    from jobs.measure.hostfacts import machine_facts
    here = machine_facts()
    where = summary.machines["local"]
    assert where.isa == here["isa"] and where.flags == here["flags"] and where.kernel == here["kernel"]
    assert where.load["max"] >= where.load["min"] >= 0
    assert f"Measured on local: " in pr and here["isa"].upper() in pr
    # The noise as the run went: each measured experiment's own pairs, shown beside the calibration.
    seen = {h.name: h for h in summary.noise["local"].history}
    assert {"faster", "same"} <= set(seen) and seen["faster"].pairs == status["faster"].runner.pairs
    assert "Noise as the run went (score, per pair" in pr


def test_out_of_path_edit_is_refused(target, tmp_path, monkeypatch):
    # the config passes two variables to target code, both allowed by the operator, and asks for a third
    cfg = target / ".github/autoresearch.yml"
    cfg.write_text(cfg.read_text() + "sandbox: {env: [SYN_MODEL, SYN_THREADS, SYN_CACHE_DIR]}\n")
    git(target, "commit", "-qam", "declare the benchmark's environment")
    monkeypatch.setenv("SYN_MODEL", "/models/a b.gguf")
    monkeypatch.delenv("SYN_THREADS", raising=False)
    monkeypatch.setenv("SYN_CACHE_DIR", "/home/op/private-cache")
    monkeypatch.setenv("AUTORESEARCH_SANDBOX_ENV", "SYN_MODEL,SYN_THREADS")    # the operator allows both, not the third
    bad = patch_for(target, tmp_path / "cheat.patch", {"bench.sh": "#!/bin/sh\necho 'METRIC score=1e9'\n"})
    outside = patch_for(target, tmp_path / "outside.patch", {"README": "hi\n"})
    summary = run(target, tmp_path / "out", [bad, outside])
    status = {e.name: e for e in summary.experiments}
    assert status["cheat"].status == "skipped" and "yardstick" in status["cheat"].reason
    assert status["outside"].status == "skipped" and "outside the editable paths" in status["outside"].reason
    assert summary.stacks == {}
    # Reproduce names the variables, never their values (issue 20, N8).
    assert any(line.startswith('SYN_MODEL="$SYN_MODEL" SYN_THREADS="$SYN_THREADS" .venv/bin/autoresearch run ')
               for line in summary.reproduce)
    pr = (tmp_path / "out" / "pr.md").read_text()
    assert "/models/a b.gguf" not in pr and "/home/op/private-cache" not in pr
    # The refusal is the run's record and the maintainer's note, by name only (issue 23).
    refused = [w for w in summary.warnings if "SYN_CACHE_DIR" in w]
    assert len(refused) == 1 and "does not allow" in refused[0], summary.warnings
    assert "## Notes from the run" in pr
    assert "sandbox.env asks for SYN_CACHE_DIR, which the operator does not allow" in pr


def test_baseline_that_does_not_build_stops_the_run_with_a_reason(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    (repo / "src" / "broken").write_text("x")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "break")
    # one candidate, so that there is something to measure (with nothing to try the run stops before calibrating)
    patch = patch_for(repo, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    with pytest.raises(RunError, match="baseline itself could not be measured.*build"):
        run(repo, tmp_path / "out", [patch])


def test_not_a_git_repo(tmp_path):
    with pytest.raises(RunError, match="not a git repository"):
        run(tmp_path, tmp_path / "out", [])


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "jobs.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def test_killed_run_resumes_without_rerunning_finished_experiments(target, tmp_path):
    p = tmp_path / "patches"
    p.mkdir()
    patches = [patch_for(target, p / f"c{i}.patch", {"src/speed.txt": f"{101 + i}\n"}) for i in range(4)]
    out = tmp_path / "out"
    # +1..+4% are hard to decide: capped at 9 pairs each (the least cap at which the first slot's
    # level allows a keep; preflight refuses less), as the resume is the subject, not the verdicts.
    args = ["run", str(target), "--agent", "none", "--run-id", "kill1", "--out", str(out), "--repeats", "9"]
    for patch in patches:
        args += ["--candidate", str(patch)]
    proc = _cli(*args, start_new_session=True)
    ledger = out / "experiments.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:   # wait until at least one experiment is on record
        if ledger.exists() and sum('"kind": "experiment"' in l for l in ledger.read_text().splitlines()) >= 1:
            break
        assert proc.poll() is None, f"the run ended before it could be killed:\n{proc.stdout.read()}"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [json.loads(l) for l in ledger.read_text().splitlines() if l.strip()]
    done_before = {r["name"] for r in before if r["kind"] == "experiment"}
    assert 1 <= len(done_before) < 4

    proc = _cli(*args)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    after = [json.loads(l) for l in ledger.read_text().splitlines() if l.strip()]
    names = [r["name"] for r in after if r["kind"] == "experiment"]
    assert sorted(names) == ["c0", "c1", "c2", "c3"], names     # each exactly once
    assert [r["kind"] for r in after].count("calibration") == 1  # calibration not repeated
    assert "resuming" in output


def test_broken_parser_is_caught_before_any_verdict(tmp_path):
    # The study lost hours to a script that reported 14 tok/s instead of 52: here the benchmark's
    # two views of the same speed disagree, which the inverse-pair sanity check catches.
    repo = synthetic_target(tmp_path / "t")
    bench = (repo / "bench.sh").read_text().replace("1000 / v", "250 / v")
    (repo / "bench.sh").write_text(bench)
    git(repo, "commit", "-qam", "parser bug")
    patch = patch_for(repo, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    with pytest.raises(RunError, match="sanity check.*score.*ms"):
        run(repo, tmp_path / "out", [patch])


def test_cli_reports_bad_config_with_exit_2(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    cfg = repo / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text().replace("direction: lower", "direction: down"))
    git(repo, "commit", "-qam", "typo")
    proc = _cli("run", str(repo), "--out", str(tmp_path / "o"))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "metrics.1.direction" in out and "'higher' or 'lower'" in out


def test_cli_calibrate_prints_false_win_rate_and_mde(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    proc = _cli("calibrate", str(repo), "--out", str(tmp_path / "o"))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "false-win rate" in out and "MDE" in out and "score" in out


def test_config_agent_claude_without_key_falls_back_to_offline_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    repo = synthetic_target(tmp_path / "t")
    cfg = repo / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + "agent: claude\n")
    git(repo, "commit", "-qam", "claude")
    events = []
    r = Run(RunOptions(target=repo, out=tmp_path / "o", run_id="w", research_only=True), on_event=events.append)
    r.execute()
    assert r.o.agent == "offline"
    assert any(isinstance(e, RunWarning) and "ANTHROPIC_API_KEY" in e.message for e in events)


def test_a_commit_that_breaks_the_stack_leaves_it(tmp_path):
    # Each boost wins alone, but together they break the checks: the last-ranked one leaves the
    # stack, the other is re-measured alone and carried (and the report says why).
    from conftest import make_repo
    cfg = ("build: 'true'\nbenchmark: ./bench.sh\nchecks: ./checks.sh\n"
           "metrics: [{name: score, primary: true, clock: cpu}]\neditable: ['src/**']\n"
           "repeats: {min: 3, max: 40, warmup: 1, calibration: 8}\n")   # 40: see synthetic.CONFIG
    # +50% each: at +20% a loaded host (load 4-6) sometimes left the stack's re-measure undecided at
    # the 40-pair cap (the runner's CPU clock could not confirm it), so the stack was discarded.
    bench = ("#!/usr/bin/env bash\nv=100; [ -e src/a ] && v=$((v+50)); [ -e src/b ] && v=$((v+50))\n"
             "awk -v s=$v -v r=$RANDOM 'BEGIN { for (i = 0; i < 6e7 / s; i++) w += i;"
             " printf \"METRIC score=%.3f\\n\", s * (1 + (r % 200 - 100) / 10000) }'\n")
    checks = "#!/usr/bin/env bash\n! { [ -e src/a ] && [ -e src/b ]; }\n"
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": cfg, "bench.sh": bench, "checks.sh": checks,
                                      "src/keep": ""})
    a = patch_for(repo, tmp_path / "a.patch", {"src/a": "1\n"})
    b = patch_for(repo, tmp_path / "b.patch", {"src/b": "1\n"})
    summary = run(repo, tmp_path / "out", [a, b])
    assert [e.status for e in summary.experiments] == ["keep", "keep"]
    assert [(a.name, a.status) for a in summary.attribution] == [("attribution:b", "checks_failed")]
    assert summary.stack_applied == ["a"] and summary.stack_unattributed == ["b"]
    assert summary.stacks["local"].status == "keep" and summary.stack_confirmed is True
    log = git(repo, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}").splitlines() \
        if summary.branch_left else []       # no branch is left when nothing is kept
    assert log == ["a: maintainer candidate"]
    pr = (tmp_path / "out" / "pr.md").read_text()
    assert "**b** was kept alone but showed no contribution of its own inside the stack" in pr


def test_a_commit_that_adds_nothing_to_the_stack_is_dropped_from_the_branch(tmp_path):
    # (This bench, like the one above and tests/synthetic.py's, does work in proportion to 1/score: a faster
    # build really takes less process time, so the runner's clock check does not call it a cheat.)
    # "lucky" looks like a win alone, but on top of "real" it adds nothing (a null riding along
    # with a real win): the stack re-measure alone would confirm it; leave-one-out drops it.
    # Each doubles the score (as synthetic.FASTER does): at +30% "lucky" was once discarded alone on a
    # quiet host (this session's A/B of the old tree), so the test never reached the stack.
    from conftest import make_repo
    cfg = ("build: 'true'\nbenchmark: ./bench.sh\nchecks: 'true'\n"
           "metrics: [{name: score, primary: true, clock: cpu}]\neditable: ['src/**']\n"
           "repeats: {min: 3, max: 40, warmup: 1, calibration: 8}\n")   # 40: see synthetic.CONFIG
    bench = ("#!/usr/bin/env bash\nv=100; { [ -e src/real ] || [ -e src/lucky ]; } && v=200\n"
             "awk -v s=$v -v r=$RANDOM 'BEGIN { for (i = 0; i < 6e7 / s; i++) w += i;"
             " printf \"METRIC score=%.3f\\n\", s * (1 + (r % 200 - 100) / 10000) }'\n")
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": cfg, "bench.sh": bench, "src/keep": ""})
    real = patch_for(repo, tmp_path / "real.patch", {"src/real": "1\n"})
    lucky = patch_for(repo, tmp_path / "lucky.patch", {"src/lucky": "1\n"})
    summary = run(repo, tmp_path / "out", [real, lucky])
    assert [e.status for e in summary.experiments] == ["keep", "keep"]
    (attribution,) = summary.attribution
    assert attribution.name == "attribution:lucky" and attribution.status == "discard"
    assert summary.stack_applied == ["real"] and summary.stack_unattributed == ["lucky"]
    log = git(repo, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}").splitlines() \
        if summary.branch_left else []       # no branch is left when nothing is kept
    assert log == (["real: maintainer candidate"] if summary.stack_confirmed else [])


def record(hypothesis, status, *, skip=None, platform="x86", metrics=(), regressions=()):
    from jobs.contract.model import ExperimentRecord, MetricResult
    ms = [MetricResult(name=n, base_mean=1, base_sd=0, head_mean=1, head_sd=0, n_base=8, n_head=8, delta_pct=d,
                       p_value=0.5, ci_low_pct=d - 1, ci_high_pct=d + 1, mde_pct=3, method="m", verdict=v)
          for n, d, v in metrics]
    return ExperimentRecord(run_id="r", name=hypothesis, hypothesis=hypothesis, platform=platform, status=status,
                            reason="(text the decisions never read)", skip_cause=skip, metrics=ms,
                            regressions=list(regressions))


def test_unimplementable_leads_do_not_use_up_the_experiment_budget():
    results = [
        record("gap-a", "skipped", skip="not_implemented"),
        record("gap-b", "skipped", skip="not_implemented"),
        record("fuse-x", "keep"),
        record("fuse-x", "discard", platform="arm"),
        record("late", "skipped", skip="budget"),
    ]
    assert Run.attempted(results) == 2


def test_the_stack_is_decided_from_fields_not_from_reason_text():
    # Kept on x86, but on arm it regresses another metric ("... but regresses pp"): only the word
    # "slower" used to be checked, so it stacked. Now any regression on any platform keeps it out.
    results = [
        record("a", "keep", metrics=[("score", 10.0, "win")]),
        record("a", "discard", platform="arm", metrics=[("score", 9.0, "win"), ("pp", -8.0, "loss")],
               regressions=["pp"]),
        record("b", "keep"),
        record("b", "invalid", platform="arm"),
        record("c", "keep"),
        record("c", "discard", platform="arm", metrics=[("score", 0.5, "no detectable difference")]),
    ]
    assert Run.stackable(results) == ["c"]


def test_a_floor_raised_by_the_calibration_is_the_floor_every_experiment_is_judged_at(target, tmp_path):
    """The A/A found the two builds 3% apart: the calibration raised the primary floor to 4.2%, and
    the pre-registered plan of an experiment (and of the stack) must use it, not the config's 1%."""
    run = Run(RunOptions(target=target, out=tmp_path / "out", run_id="floor"))
    prior = [[0.03, 1.0, 0.0]] * 8
    run.state = RunState(tmp_path / "out", calibration={"local": {"score": {"floor_pct": 4.2, "prior": prior, "adjust": []}}})
    plan = run.plan("local", 0.01)
    assert plan.floor_pct == 4.2 and plan.target_pct >= 4.2
    run.state.calibration["local"]["score"].floor_pct = 1.0
    assert run.plan("local", 0.01).floor_pct == run.config.thresholds.min_effect_pct


def test_the_calibration_plans_with_the_pair_cap_the_run_uses(target, tmp_path):
    """`--repeats 7` caps every experiment at 7 pairs: the MDE the calibration reports must be the
    one reachable within 7, not within the config's 24."""
    result = Run(RunOptions(target=target, out=tmp_path / "out", run_id="cap", calibrate_only=True,
                            repeats=7)).execute()
    assert result.calibration["local"]["score"].repeats == 7
