"""Issue 20, F1a through the Action end to end (`autoresearch action` in a subprocess, the fake
GitHub, real git, real bubblewrap): a repository whose `.github/autoresearch.yml` asks for
`sandbox: {enabled: false}` does not get it. The workflow's operator did not allow it
(no `AUTORESEARCH_ALLOW_UNSANDBOXED`), so the run is sandboxed anyway: the target's build and
benchmark, which write a canary to a host folder and copy a host file into it, leave no canary,
the run completes with its one candidate kept and its summary says sandboxed, and the PR does not
say it ran without a sandbox. (The pipeline's refusal is a `warning` event, which the App and the
Action do not show anywhere: bot/progress.py drops it. The App's end-to-end test of the same:
tests/bot/test_trust_boundary_app.py.)"""
from __future__ import annotations

import shutil
import subprocess

import pytest
from test_action import ACTION_REPO, WORKFLOW_TOKEN, _only_pr, _summary, _target, run_action  # first: sets the path

from botfixtures import app_key, bot_env, webhook_examples  # noqa: F401,E402  (fixtures)
from conftest import git  # noqa: E402

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

HOST_SECRET = "operator-only-canary-7c41d2"
# What target code does when it is not sandboxed: append to a file in a host folder, with a host
# file's content. Inside the sandbox that folder is not the host's (a private tmpfs, the host file
# absent), so nothing reaches the host.
EVIDENCE = '{{ echo "{step} ran unsandboxed as uid $(id -u)"; cat {secret}; }} >> {canary} 2>/dev/null || true\n'


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by `make test`")
def test_a_repository_cannot_switch_the_sandbox_off_in_the_action(bot_env, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    secret, canary = host / "secret.txt", host / "canary.txt"
    secret.write_text(HOST_SECRET + "\n")
    t = _target(tmp_path)
    for script, step in (("build.sh", "build"), ("bench.sh", "benchmark")):
        text = (t / script).read_text()
        head, nl, rest = text.partition("\n") if text.startswith("#!") else ("", "", text)
        (t / script).write_text(head + nl + EVIDENCE.format(step=step, secret=secret, canary=canary) + rest)
    cfg = t / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + "sandbox: {enabled: false}\n")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "asks to run unsandboxed; its build and benchmark write to the host")

    # The control: run on the host as they are, these scripts leave the evidence this test looks for.
    for script in ("build.sh", "bench.sh"):
        subprocess.run(["bash", script], cwd=t, capture_output=True, timeout=60)
    assert "build ran unsandboxed" in canary.read_text() and "benchmark ran unsandboxed" in canary.read_text()
    assert HOST_SECRET in canary.read_text()
    canary.unlink()
    git(t, "clean", "-qfdx")

    bot_env.add_target(ACTION_REPO, t)
    bot_env.github.repos[ACTION_REPO].permissions["alice"] = ("write", "maintain")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    payload = bot_env.comment_payload(ACTION_REPO, 3, "alice", "/autoresearch optimize cpu")
    payload.pop("installation")
    outputs, stdout = run_action(bot_env, tmp_path, "issue_comment", payload, "unsandboxed-ask")

    # The run completed, sandboxed: its one candidate kept, and the target never reached the host.
    assert outputs["state"] == "done", (outputs, stdout)
    assert not canary.exists(), canary.read_text()[:500]
    summary = _summary(tmp_path / "action-work" / "octo", "synth-action", outputs["run-id"])
    assert [(e["name"], e["status"]) for e in summary["experiments"]] == [("faster", "keep")]
    assert summary["sandboxed"] is True and summary["unsandboxed_by"] == "", summary
    # The PR says nothing about running unsandboxed, and the host file's content is nowhere.
    pr = _only_pr(bot_env, ACTION_REPO)
    assert "| score |" in pr["body"] and "WITHOUT a sandbox" not in pr["body"]
    texts = [pr["body"], stdout, *(c["body"] for c in bot_env.github.comments.values())]
    assert not any(HOST_SECRET in text for text in texts)
