"""The hostile target of tests/jobs/guard/test_hostile_target.py, through the App end to end: a signed webhook
-> Flask -> RQ (real workers) -> the pipeline -> git push over smart HTTP with an installation token
-> a draft PR on the fake GitHub. Every attempt of its build fails, the run completes, its daemon is
gone (before the push, too), and neither the App's key nor a token reaches a file, log, comment or
PR body; at the moment of the push no process's environment or argv holds the token."""
from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest

from bot.store import Store
from botfixtures import SECRET, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from githttp import GitHTTP
from hostile import assert_nothing_leaked, hostile_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

REPO = "octo/synth"
BASIC_PREFIX = base64.b64encode(b"x-access-token:").decode()     # any Basic credential of a token


def scan_processes(needles: list[bytes]) -> list[str]:
    """Every process's environment and argv that holds one of `needles` (pid, file)."""
    hits = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("environ", "cmdline"):
            try:
                data = Path(f"/proc/{pid}/{part}").read_bytes()
            except OSError:
                continue
            hits += [f"{pid}/{part}" for n in needles if n in data]
    return hits


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by `make test`")
def test_a_hostile_target_through_the_app_is_contained(bot_env, tmp_path, monkeypatch, capfd, request):
    key_path = Path(bot_env.env["AUTORESEARCH_PRIVATE_KEY_PATH"])
    port = int(bot_env.env["AUTORESEARCH_REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
    h = hostile_target(tmp_path, key_path, port)
    request.addfinalizer(h.cleanup)
    cand = h.target / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    (cand / "faster.patch").write_text(h.patch.read_text())
    from conftest import git
    git(h.target, "add", "-A")
    git(h.target, "commit", "-qm", "a maintainer candidate")
    bot_env.add_target(REPO, h.target)
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")

    # git over HTTP, behind the installation tokens the fake GitHub hands out; at the push, look at
    # the machine: is anything of the target alive, and can any process's environ/argv show a token?
    at_push: list[dict] = []

    def on_request(method: str, path: str, user: str) -> None:
        if path.endswith("/git-receive-pack"):
            at_push.append({"daemons": h.daemons(), "exposed": scan_processes(
                [BASIC_PREFIX.encode(), b"ghs_fake", *[t.encode() for t in bot_env.github.tokens]])})
    server = GitHTTP(bot_env.git_root, lambda: list(bot_env.github.tokens), on_request=on_request)
    monkeypatch.setenv("AUTORESEARCH_GIT_URL", server.start())
    request.addfinalizer(server.stop)

    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    rec = Store(bot_env.redis).current_run(REPO, 1)
    # on failure say why (the record's repr is truncated): its phase, message, warnings, last comment
    last_comment = [c["body"] for c in bot_env.github.comments.values()][-1:]
    assert rec.state == "done", (rec.state, rec.phase, rec.phase_detail, rec.message, rec.warnings, last_comment)

    h.assert_contained(bot_env.redis)
    pr = bot_env.github.pulls[(REPO, 100)]
    assert pr["draft"] and "faster" in pr["body"]
    assert at_push and at_push[0] == {"daemons": [], "exposed": []}, at_push
    assert any(p.endswith("/git-receive-pack") for _, p, status in server.requests if status == 200)
    assert set(server.authenticated) <= set(bot_env.github.tokens)      # git used real installation tokens

    captured = capfd.readouterr()
    needles = [line for line in key_path.read_text().splitlines() if line and not line.startswith("-----")][:3]
    needles += list(bot_env.github.tokens) + [SECRET]
    comments = [c["body"] for c in bot_env.github.comments.values()]
    bodies = [p["body"] for p in bot_env.github.pulls.values()]
    assert_nothing_leaked(needles, captured.out, captured.err, *comments, *bodies, bot_env.workdir)
