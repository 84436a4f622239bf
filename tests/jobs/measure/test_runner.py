"""The on-machine driver as a VM runs it: relative paths, JSON lines out, credentials scrubbed."""
import json
import os
import subprocess
import sys

import pytest

from jobs.contract.config import load_config
from jobs.contract.spec import ExperimentSpec, RawResult
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
    proc = subprocess.run([sys.executable, "-m", "jobs.measure.runner", "spec.json", "--repo", "t", "--work", "w"],
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


@pytest.mark.parametrize("sandboxed", [True, False])
def test_target_commands_never_see_credentials(tmp_path, monkeypatch, sandboxed):
    from jobs.measure.isolation import Isolation
    from jobs.measure.runner import run_step
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws")
    monkeypatch.setenv("HARMLESS", "ok")
    # Even a config that lists a credential's name does not get it passed through.
    isolation = Isolation(enabled=sandboxed, env=("HARMLESS", "GITHUB_TOKEN"))
    step = run_step("env", tmp_path, timeout=10, isolation=isolation)
    assert "HARMLESS=ok" in step.output
    for secret in ("ghs_secret", "sk-ant", "aws"):
        assert secret not in step.output


def test_declared_sandbox_paths_must_live_under_the_cache_root(tmp_path, monkeypatch):
    from jobs.measure.isolation import Isolation, IsolationError
    from jobs.contract.spec import SandboxSpec
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(tmp_path / "cache"))
    (tmp_path / "cache" / "models").mkdir(parents=True)
    key = tmp_path / "app.pem"
    key.write_text("secret")
    ok = Isolation.from_spec(SandboxSpec(caches=[str(tmp_path / "cache" / "ccache")],
                                         read_only=[str(tmp_path / "cache" / "models")]))
    assert ok.caches == (str((tmp_path / "cache" / "ccache").resolve()),)
    with pytest.raises(IsolationError, match="outside the cache root"):
        Isolation.from_spec(SandboxSpec(read_only=[str(key)]))
    (tmp_path / "cache" / "escape").symlink_to(tmp_path)       # a symlink out of the root is outside too
    with pytest.raises(IsolationError, match="outside the cache root"):
        Isolation.from_spec(SandboxSpec(read_only=[str(tmp_path / "cache" / "escape")]))


@pytest.mark.parametrize("sandboxed", [True, False])
def test_timeout_kills_the_whole_process_group(tmp_path, sandboxed):
    from jobs.measure.isolation import Isolation
    from jobs.measure.runner import run_step
    marker = f"{31 + sandboxed}.{os.getpid()}"      # a sleep length no other process uses
    step = run_step(f"(sleep {marker} & wait)", tmp_path, timeout=1, isolation=Isolation(enabled=sandboxed))
    assert step.returncode is None
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    alive = [p for p in left if open(f"/proc/{p}/stat").read().split()[2] != "Z"]
    assert not alive


def test_worktree_left_missing_but_locked_by_a_killed_run_is_reused(tmp_path):
    import shutil
    from jobs.guard import gitops
    repo = synthetic_target(tmp_path / "t")
    wt = tmp_path / "w" / "impl-x"
    gitops.add_worktree(repo, wt, "HEAD")
    git(repo, "worktree", "lock", "--reason", "initializing", str(wt))
    shutil.rmtree(wt)                        # what a SIGKILL mid-`worktree add` leaves behind
    assert gitops.add_worktree(repo, wt, "HEAD") == wt and (wt / "bench.sh").is_file()
