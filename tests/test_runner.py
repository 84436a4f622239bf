"""The on-machine driver as a VM runs it: relative paths, JSON lines out, credentials scrubbed."""
import json
import os
import subprocess
import sys

from jobs.config import load_config
from jobs.spec import ExperimentSpec, RawResult
from conftest import ROOT, git
from synthetic import synthetic_target


def test_runner_main_with_relative_paths_prints_progress_and_one_result(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    (repo / "src" / "speed.txt").write_text("150\n")
    git(repo, "commit", "-qam", "faster")
    base, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    spec = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="x86",
                                      base_commit=base, head_commit=head, n_per_arm=3)
    (tmp_path / "spec.json").write_text(spec.to_json())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_TOKEN": "ghs_secret", "MY_API_KEY": "k"}
    proc = subprocess.run([sys.executable, "-m", "jobs.runner", "spec.json", "--repo", "t", "--work", "w"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(l.startswith("PROGRESS ") for l in lines)
    results = [l for l in lines if l.startswith("RESULT ")]
    assert len(results) == 1 and lines[-1] == "EXPERIMENT_STATUS: ok"
    raw = RawResult.from_json(results[0][len("RESULT "):])
    assert len(raw.base.values["score"]) == len(raw.head.values["score"]) == 3
    assert min(raw.head.values["score"]) > max(raw.base.values["score"])   # the head really is faster
    assert len(raw.base.probe) == 3 and raw.cpu


def test_target_commands_never_see_credentials(tmp_path, monkeypatch):
    from jobs.runner import run_step
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws")
    monkeypatch.setenv("HARMLESS", "ok")
    step = run_step("env", tmp_path, timeout=10)
    assert "HARMLESS=ok" in step.output
    for secret in ("ghs_secret", "sk-ant", "aws"):
        assert secret not in step.output


def test_timeout_kills_the_whole_process_group(tmp_path):
    from jobs.runner import run_step
    pidfile = tmp_path / "child.pid"
    step = run_step(f"(sleep 30 & echo $! > {pidfile}; wait)", tmp_path, timeout=1)
    assert step.returncode is None
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
        alive = open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert not alive


def test_worktree_left_missing_but_locked_by_a_killed_run_is_reused(tmp_path):
    import shutil
    from jobs import gitops
    repo = synthetic_target(tmp_path / "t")
    wt = tmp_path / "w" / "impl-x"
    gitops.add_worktree(repo, wt, "HEAD")
    git(repo, "worktree", "lock", "--reason", "initializing", str(wt))
    shutil.rmtree(wt)                        # what a SIGKILL mid-`worktree add` leaves behind
    assert gitops.add_worktree(repo, wt, "HEAD") == wt and (wt / "bench.sh").is_file()
