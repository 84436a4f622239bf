"""N7 of issue 20, through the App end to end: a repository commits its candidate patches as links,
one to the App's private key (its path is predictable) and one to /dev/zero. The App's
preparation reads the candidates out of its clone: it must follow neither link, answer with a
reason, and leave the key's bytes in no file, comment or log."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from botfixtures import SECRET, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import git
from synthetic import synthetic_target
from hostile import assert_nothing_leaked

REPO = "octo/synth"


@pytest.mark.parametrize("link", ["key", "zero"])
def test_linked_candidate_patches_are_refused_and_never_read(bot_env, tmp_path, capfd, link):
    key_path = Path(bot_env.env["AUTORESEARCH_PRIVATE_KEY_PATH"])
    target = synthetic_target(tmp_path / "target")
    cand = target / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    os.symlink(key_path if link == "key" else "/dev/zero", cand / f"{link}.patch")
    git(target, "add", "-A")
    git(target, "commit", "-qm", "candidates that are links")
    bot_env.add_target(REPO, target)
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")

    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()

    replies = [c["body"] for c in bot_env.bot_comments(REPO, 1)]
    assert any(f"{link}.patch" in body and "symbolic link" in body for body in replies), replies
    copied = list(bot_env.workdir.rglob(f"candidates/{link}.patch"))
    assert all(p.is_symlink() for p in copied), copied          # only the clone's own link, never a copy
    captured = capfd.readouterr()
    needles = [line for line in key_path.read_text().splitlines() if line and not line.startswith("-----")][:3]
    comments = [c["body"] for c in bot_env.github.comments.values()]
    assert_nothing_leaked(needles + [SECRET], captured.out, captured.err, *comments, bot_env.workdir)
