"""Issue 41, A1, through the App end to end (signed webhook -> Flask -> RQ -> the pipeline -> the
fake GitHub): one repository's first run plants a link in its own declared cache, pointing at the
folder that holds the App's workdir; its next run declares a cache *through* that link, named
after the workdir, and its build writes a canary there and reads another tenant's file. At
ea10b95 the second run's cache was made, chowned and bound writable through the link, so its
build wrote into the App's workdir and printed the other tenant's file. Now the second run is
refused before anything of it runs, with the reason, and the workdir holds nothing of it."""
from __future__ import annotations

import shutil

import pytest

from bot.store import Store
from botfixtures import app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import git
from synthetic import FASTER, patch_for, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

REPO = "octo/planter"
PRIVATE = "another tenant's private words 6c1f"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by `make test`")
def test_a_link_left_in_a_cache_never_lets_the_next_run_reach_the_apps_workdir(bot_env, tmp_path, monkeypatch):
    # The operator's cache root as a fresh machine has it ($XDG_CACHE_HOME/autoresearch), set after
    # the App started: its fixtures keep GitHub's OpenAPI description under the real one.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AUTORESEARCH_CACHE_ROOT", raising=False)
    cache = tmp_path / "xdg" / "autoresearch"
    cache.mkdir(parents=True)
    workdir = bot_env.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "other-tenant.txt").write_text(PRIVATE + "\n")
    owner = workdir.stat().st_uid

    t = synthetic_target(tmp_path / "target")
    cand = t / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    (cand / "faster.patch").write_text(patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER}).read_text())
    cfg = t / ".github" / "autoresearch.yml"
    config = cfg.read_text()
    build = t / "build.sh"
    honest = build.read_text()
    # Run 1: an ordinary cache, and a build that leaves a link in it.
    cfg.write_text(config + f"sandbox: {{caches: ['{cache}/a']}}\n")
    build.write_text(f"ln -sfn {workdir.parent} {cache}/a/b 2>/dev/null || true\n" + honest)
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a cache, and a link in it")
    bare = bot_env.add_target(REPO, t)
    branch = git(t, "rev-parse", "--abbrev-ref", "HEAD")
    bot_env.github.repos[REPO].permissions["alice"] = ("write", "maintain")
    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    assert Store(bot_env.redis).current_run(REPO, 1).state == "done", [c["body"] for c in bot_env.bot_comments(REPO, 1)]
    planted = list((cache / "repos").glob("*/*/a/b"))
    assert planted and all(p.is_symlink() for p in planted), "run 1's build should have left its link"

    # Run 2: a cache declared through the link, named after the App's workdir.
    through = f"{cache}/a/b/{workdir.name}"
    cfg.write_text(config + f"sandbox: {{caches: ['{through}']}}\n")
    build.write_text(f"echo pwned > {through}/canary 2>/dev/null; cat {through}/other-tenant.txt 2>/dev/null\n"
                     + honest)
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a cache through the link")
    git(t, "push", "-q", str(bare), f"HEAD:{branch}")
    assert bot_env.comment(REPO, 2, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()

    rec = Store(bot_env.redis).current_run(REPO, 2)
    assert rec.state == "failed", rec
    said = " ".join(c["body"] for c in bot_env.bot_comments(REPO, 2))
    assert "is a link" in said, said
    assert not (workdir / "canary").exists() and workdir.stat().st_uid == owner
    assert not list(workdir.rglob("canary"))
    everything = [c["body"] for c in bot_env.github.comments.values()] + \
                 [p["body"] for p in bot_env.github.pulls.values()]
    assert not any(PRIVATE in text for text in everything)
