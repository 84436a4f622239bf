"""pr.md as a reviewer reads it, from real runs on the synthetic target: what each kept commit
touches, the failed step's own output, no branch when nothing is kept, and a "Reproduce" block
that really re-measures base against head from a fresh clone, with plain progress lines when
its output goes to a pipe."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from conftest import ROOT, git
from jobs.contract.events import Event, RunWarning, StepProgress
from jobs.run.pipeline import Run, RunOptions
from synthetic import patch_for, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test


def shell_block(md: str, heading: str) -> str:
    section = md.split(f"## {heading}")[1]
    return re.search(r"```sh\n(.*?)\n```", section, re.S).group(1)


def autoresearch_shim(folder) -> str:
    """`folder`/autoresearch, this checkout's CLI (the console script may not be installed): the
    block calls `.venv/bin/autoresearch` from the checkout's root, which `folder`'s grandparent stands for."""
    folder.mkdir(parents=True)
    shim = folder / "autoresearch"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobs.cli \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return str(folder)


def test_pr_names_files_shows_failures_and_its_reproduce_block_re_measures(tmp_path):
    target = synthetic_target(tmp_path / "target")
    patches = tmp_path / "patches"
    patches.mkdir()
    # Three times the speed, and three times less work per process: large enough that even a loaded
    # 2-core host keeps it within the 12 pairs (at +30% such a host sometimes kept nothing, and
    # every check below of what a kept commit touches was skipped).
    faster = patch_for(target, patches / "faster.patch", {"src/speed.txt": "300\n"})
    wrong = patch_for(target, patches / "wrong.patch", {"src/wrong": "x"})
    out = tmp_path / "out"
    summary = Run(RunOptions(target=target, out=out, run_id="rv", agent="none", candidates=[faster, wrong],
                             repeats=12)).execute()
    md = (out / "pr.md").read_text()
    base = summary.base_commit

    # The honest large candidate is kept, and confirmed with the stack (the branch-less path is
    # the next test's): everything below is checked on every host, never skipped.
    assert [e.name for e in summary.experiments if e.status == "keep"] == ["faster"], summary.experiments
    assert summary.stack_confirmed and summary.branch_left, summary.stacks
    # What the kept commit touches, from git itself.
    changes = md.split("## What each commit changes")[1].split("\n## ")[0]
    assert "**faster**" in changes and "src/speed.txt | 2 +-" in changes and "1 file changed" in changes
    # The failed checks' own output, folded, not only "exit 1".
    details = md.split("<summary>wrong on local: checks failed (exit 1): first lines of its output</summary>")[1]
    assert "output differs from reference" in details.split("</details>")[0]

    # The reproduce block, run as a reviewer would, output piped.
    script = shell_block(md, "Reproduce")
    assert base in script and "--agent none --candidate" in script
    env = {**os.environ, "PATH": os.environ["PATH"], "SHIM": autoresearch_shim(tmp_path / ".venv" / "bin"),
           "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = proc.stdout
    # Plain progress lines, in order, though nothing here is a terminal.
    expected = ["phase research", "research done", "phase calibrate", "calibration done", "phase experiments",
                "experiment ", "report written"]
    at = 0
    for text in expected:
        found = log.find(text, at)
        assert found >= 0, f"{text!r} missing after position {at}:\n{log}"
        at = found
    assert re.search(r"^\[ *\d+(s|m\d\ds)\] experiment \S+: (keep|discard|noise)", log, re.M), log
    # The new run measured the same base commit, from its own clone.
    again = log.split("# autoresearch: CPU optimizations for")[1]
    assert f"base `{base[:12]}`" in again
    assert "| head | local | candidate |" in again


def test_a_run_that_keeps_nothing_leaves_no_branch(tmp_path):
    target = synthetic_target(tmp_path / "target")
    patches = tmp_path / "patches"
    patches.mkdir()
    wrong = patch_for(target, patches / "wrong.patch", {"src/wrong": "x"})
    out = tmp_path / "out"
    git(target, "branch", "autoresearch/nk")        # a branch of this run id left by an earlier attempt goes too
    summary = Run(RunOptions(target=target, out=out, run_id="nk", agent="none", candidates=[wrong],
                             repeats=6)).execute()
    assert summary.branch_left is False
    assert git(target, "branch", "--list", "autoresearch/*") == ""
    md = (out / "pr.md").read_text()
    assert "No branch was left (nothing was kept)." in md
    # Its reproduce block runs the loop again with the same candidate, not a resume of this run.
    script = shell_block(md, "Reproduce")
    assert f"--candidate {wrong}" in script and "--run-id" not in script


def test_research_names_its_sub_steps_and_the_profile_can_be_switched_off(tmp_path):
    target = synthetic_target(tmp_path / "target")
    cfg = target / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + "research: {profile: {instrument: llama/op-profile.yml}}\n")
    git(target, "commit", "-qam", "profile")
    for mode, note in (("reuse", "profile: not measured (instrumentation op-profile does not fit"),
                       ("off", "profile: not measured (switched off with --profile off)")):
        events: list[Event] = []
        Run(RunOptions(target=target, out=tmp_path / mode, run_id=mode, agent="offline", research_only=True,
                       profile=mode), on_event=events.append).execute()
        steps = [e.message.split(" (")[0] for e in events if isinstance(e, StepProgress) and e.name == "research"]
        # no `simulate:`: the benchmark command is looked at for a derived callgrind profile first
        assert steps[:3] == ["scan", "callgrind profile", "gap scan"], steps
        assert ("profile build" in steps) is False        # the instrumentation does not fit this target
        assert note in (tmp_path / mode / "research.md").read_text()


def test_agent_claude_without_a_key_refuses_before_anything_runs(tmp_path):
    # README, "The Claude agent": the config's `agent: claude` falls back to offline with a warning
    # (tests/jobs/run/test_pipeline.py); an explicit --agent claude refuses, and it does so at once.
    target = synthetic_target(tmp_path / "target")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "jobs.cli", "run", str(target), "--agent", "claude",
                           "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--agent claude needs ANTHROPIC_API_KEY" in proc.stdout
    assert not (tmp_path / "out" / "research.md").exists() and not (tmp_path / "out" / "state.json").exists()


def test_a_profile_that_was_not_measured_is_said_loudly_or_stops_the_run(tmp_path):
    """Issue 27: the instrumented build timed out and research silently fell back to kind weights.
    Now research.md (and pr.md) say so under their title, an event warns, and
    `research.profile.required: true` stops the run before anything is measured."""
    from jobs.contract.errors import RunError
    target = synthetic_target(tmp_path / "target")
    cfg = target / ".github" / "autoresearch.yml"
    base = cfg.read_text()
    cfg.write_text(base + "research: {profile: {instrument: llama/op-profile.yml}}\n")
    git(target, "commit", "-qam", "profile")
    events: list[Event] = []
    Run(RunOptions(target=target, out=tmp_path / "warn", run_id="warn", agent="offline", research_only=True),
        on_event=events.append).execute()
    md = (tmp_path / "warn" / "research.md").read_text()
    assert md.splitlines()[2].startswith("> **Warning:** the op profile was not measured (")
    assert "raise research.profile.timeout (now 1800 s)" in md and "research.profile.required: true" in md
    assert any(isinstance(e, RunWarning) and "op profile was not measured" in e.message for e in events)

    cfg.write_text(base + "research: {profile: {instrument: llama/op-profile.yml, required: true}}\n")
    git(target, "commit", "-qam", "profile required")
    with pytest.raises(RunError, match="research.profile.required is true, so the run stops"):
        Run(RunOptions(target=target, out=tmp_path / "stop", run_id="stop", agent="offline")).execute()
    assert not (tmp_path / "stop" / "experiments.jsonl").exists()


def test_pr_md_carries_the_profile_warning_at_the_top():
    from jobs.guard.mdsafe import md
    from jobs.report.report import with_warning
    text = with_warning(md("# autoresearch: x\n\n## Summary\n"), "the op profile was not measured (timeout)")
    assert text.splitlines()[:3] == ["# autoresearch: x", "", "> **Warning:** the op profile was not measured (timeout)"]
    assert with_warning(md("# t\nrest"), "") == "# t\nrest"
