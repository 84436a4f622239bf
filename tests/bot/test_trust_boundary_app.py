"""Issue 20 through the App end to end (signed webhook -> Flask -> RQ -> the pipeline -> the fake
GitHub): a repository whose config asks for `sandbox: {enabled: false}` (F1a) and for the
operator's DATABASE_URL (N8), and whose build then reaches for the App's key, Redis, root's
files and its own clone's git hooks. The run is sandboxed anyway, no attempt succeeds, and no
value the operator did not allow reaches the target, a comment, the PR or a file."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.store import Store
from botfixtures import SECRET, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import git
from hostile import assert_nothing_leaked, hostile_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

REPO = "octo/synth"
CANARY = "postgres://operator:canary-9f3e1b@db.internal/prod"

EXTRA = r"""
R={report}/attempts.txt
if [ ! -e {report}/extra-done ]; then
touch {report}/extra-done
env | grep -q DATABASE_URL && echo "env: DATABASE_URL=$DATABASE_URL" >> $R || echo "env: no DATABASE_URL" >> $R
echo "model: ${{SYN_MODEL:-unset}}" >> $R
if head -c 64 /etc/shadow 2>/dev/null | grep -q root; then echo "shadow: READ" >> $R; else echo "shadow: denied" >> $R; fi
hooks=0
for d in {workdir}/*/*/*/repo/.git/hooks; do
  printf '#!/bin/sh\ncat /proc/self/environ > {report}/hook-ran\n' > $d/pre-push 2>/dev/null && hooks=$((hooks+1))
done
echo "hooks: $hooks" >> $R
fi
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by `make test`")
def test_a_repository_cannot_switch_the_sandbox_off_nor_take_the_operators_variables(
        bot_env, tmp_path, monkeypatch, capfd, request):
    monkeypatch.setenv("DATABASE_URL", CANARY)
    monkeypatch.setenv("SYN_MODEL", "/models/m.gguf")
    monkeypatch.setenv("AUTORESEARCH_SANDBOX_ENV", "SYN_MODEL")      # the operator allows only this name
    key_path = Path(bot_env.env["AUTORESEARCH_PRIVATE_KEY_PATH"])
    port = int(bot_env.env["AUTORESEARCH_REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
    h = hostile_target(tmp_path, key_path, port)
    request.addfinalizer(h.cleanup)
    build = h.target / "build.sh"
    build.write_text(build.read_text() + EXTRA.format(report=h.report, workdir=bot_env.workdir))
    cfg = h.target / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text().replace("sandbox: {caches:", "sandbox: {enabled: false, env: [DATABASE_URL, SYN_MODEL], caches:"))
    cand = h.target / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    (cand / "faster.patch").write_text(h.patch.read_text())
    git(h.target, "add", "-A")
    git(h.target, "commit", "-qm", "asks to run unsandboxed, with the operator's database")
    bot_env.add_target(REPO, h.target)
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")

    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    rec = Store(bot_env.redis).current_run(REPO, 1)
    assert rec.state == "done", rec

    h.assert_contained(bot_env.redis)                 # key denied, no Redis key, no daemon, no host /tmp
    attempts = h.attempts()
    assert "env: no DATABASE_URL" in attempts and "model: /models/m.gguf" in attempts, attempts
    assert "shadow: denied" in attempts and "hooks: 0" in attempts, attempts
    assert not list(bot_env.workdir.glob("*/*/*/repo/.git/hooks/pre-push"))
    assert not (h.report / "hook-ran").exists()
    pr = bot_env.github.pulls[(REPO, 100)]
    assert "WITHOUT a sandbox" not in pr["body"] and 'SYN_MODEL="$SYN_MODEL"' in pr["body"]
    assert "/models/m.gguf" not in pr["body"]
    # The maintainer is told what was refused, by name, never with a value (issue 23, issue 20).
    notes = pr["body"].split("## Notes from the run\n")[1].split("\n## ")[0]
    assert "only the operator can turn the sandbox off" in notes and "so target code runs sandboxed" in notes, notes
    assert "sandbox.env asks for DATABASE_URL, which the operator does not allow" in notes, notes
    assert CANARY not in notes and "SYN_MODEL" not in notes

    captured = capfd.readouterr()
    needles = [line for line in key_path.read_text().splitlines() if line and not line.startswith("-----")][:3]
    needles += list(bot_env.github.tokens) + [SECRET, CANARY]
    comments = [c["body"] for c in bot_env.github.comments.values()]
    bodies = [p["body"] for p in bot_env.github.pulls.values()]
    assert_nothing_leaked(needles, captured.out, captured.err, *comments, *bodies, bot_env.workdir)
