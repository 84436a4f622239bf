"""Issue 20's GitHub face, through the App end to end (signed webhooks over HTTP -> Flask -> real
Redis and RQ workers -> the fake GitHub on loopback + bare git remotes -> the real pipeline), each
test asserting that the attack's evidence is absent:

- N4: an outsider who posts the hidden status marker first: his comment is never edited, the run
  is not stranded, the bot keeps its own one status comment.
- N11: a repository whose config name and candidate file name are mentions, links, images and
  HTML: nothing of it is live in the plan comment, the status comment, the PR title or body.
- N5: a requester swapping his pending plan gets a new id; the approval of the old id runs nothing;
  equal requests on two issues get different ids.
- N6: an outsider's repeated `optimize` leaves no clone and at most one small folder per issue.
- `bench` on a pull request whose branch is `autoresearch/...` but whose author is not the App.
"""
from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt
from rq import Queue

from bot.jobqueue import COMMANDS, RUNS
from bot.store import Store
from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import git
from test_e2e import REPO, _run, _status_comments, _target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

MD = MarkdownIt("commonmark").enable("table")
HOSTILE_NAME = ("@octocat [x](https://evil.example/a) ![p](https://evil.example/p.png) "
                "<img src=https://evil.example/i.png> fixes #1 www.evil.example")
HOSTILE_PATCH = "@octocat-fixes-#1-<b>"          # a valid git ref name and file name


def live(markdown: str) -> list[str]:
    """What of `markdown` GitHub would make live: links, images, raw HTML other than the bot's own
    `<details>`/`<summary>` and hidden markers, mentions and references in the visible text."""
    found = []
    tokens = MD.parse(markdown)
    for tok in tokens:
        if tok.type == "html_block" and re.search(r"<(?!/?(details|summary)\b|!--)", tok.content):
            found.append(tok.content)
        for child in tok.children or []:
            if child.type in ("link_open", "image") or (child.type == "html_inline"
                                                       and not child.content.startswith("<!--")):
                found.append(child.type + ":" + (child.attrs.get("href") or child.attrs.get("src") or child.content))
            if child.type == "text":
                found += re.findall(r"@[A-Za-z0-9][\w-]*|#\d+|https?://\S+|www\.\S+", child.content)
    return found


def _people(bot_env) -> None:
    perms = bot_env.github.repos[REPO].permissions
    perms["alice"] = ("write", "maintain")
    perms["bob"] = ("read", "read")


def test_a_forged_status_marker_and_a_hostile_repository_change_nothing(bot_env, tmp_path):
    t = _target(tmp_path)
    cfg = t / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text().replace("name: synthetic", f"name: '{HOSTILE_NAME}'"))
    cand = t / ".github" / "autoresearch" / "candidates"
    (cand / "faster.patch").rename(cand / f"{HOSTILE_PATCH}.patch")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a hostile name")
    bot_env.add_target(REPO, t)
    _people(bot_env)
    run_id = f"1-{git(t, 'rev-parse', 'HEAD')[:7]}"

    # mallory posts the run's status marker before the run exists (N4)
    forged = bot_env.github.add_comment(REPO, 1, "mallory", f"<!-- autoresearch:status {run_id} -->\nI am the status")
    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    rec = _run(bot_env)
    assert rec.run_id == run_id and rec.state == "done", rec
    assert bot_env.github.foreign_edits == []
    assert bot_env.github.comments[forged["id"]]["body"].endswith("I am the status")
    assert not any(m == "PATCH" and p.endswith(f"/comments/{forged['id']}") for m, p, _ in bot_env.github.log)
    statuses = _status_comments(bot_env)
    assert len(statuses) == 1 and "✅ done" in statuses[0]["body"] and statuses[0]["id"] == rec.status_comment_id

    # N11: nothing the repository named is live anywhere the bot wrote
    pr = bot_env.github.pulls[(REPO, 100)]
    assert "octocat" in pr["body"] and "evil.example" in pr["body"]        # shown, as text
    own = {"@alice", "https://github.com/octo/synth/pull/100"}          # the bot's own mention and link
    for body in [pr["body"]] + [c["body"] for c in bot_env.bot_comments(REPO, 1)]:
        assert set(live(body.replace("Closes #1\n", ""))) <= own, body      # ... and its link to the issue
    assert not re.search(r"@octocat|#1\b|https?://", pr["title"].replace("(#1)", "")), pr["title"]


def test_a_swapped_plan_is_not_the_approved_one_and_no_clone_waits(bot_env, tmp_path):
    t = _target(tmp_path)
    bot_env.add_target(REPO, t)
    _people(bot_env)
    run_root = bot_env.workdir / "octo" / "synth"

    # N6: bob (no write access) asks four times with other budgets, then repeats the last request
    for budget in (1, 2, 3, 4):
        bot_env.comment(REPO, 2, "bob", f"/autoresearch optimize cpu budget={budget}")
    bot_env.work(COMMANDS)
    first = _run(bot_env, 2)
    folders = sorted(p.name for p in run_root.iterdir())
    assert folders == [first.run_id]                                  # superseded plans left nothing
    assert not (run_root / first.run_id / "repo").exists()            # and the pending one no clone
    saved = (run_root / first.run_id / "prepared.json").stat().st_mtime_ns
    bot_env.comment(REPO, 2, "bob", "/autoresearch optimize cpu budget=4")
    bot_env.work(COMMANDS)
    again = _run(bot_env, 2)
    assert again.run_id == first.run_id and again.plan_digest == first.plan_digest       # the same plan, id
    assert (run_root / first.run_id / "prepared.json").stat().st_mtime_ns == saved       # planned once
    plans = [c for c in bot_env.bot_comments(REPO, 2) if f"autoresearch:plan {first.run_id} " in c["body"]]
    assert len(plans) == 1                                                   # edited in place, not posted again
    assert not (run_root / first.run_id / "repo").exists()

    # N5: bob swaps his plan (another budget) after alice has read it; her approve names the old id
    seen = again.plan_digest
    bot_env.comment(REPO, 2, "bob", "/autoresearch optimize cpu budget=9")
    bot_env.work(COMMANDS)
    swapped = _run(bot_env, 2)
    assert swapped.plan_digest != seen and swapped.state == "awaiting_approval"
    bot_env.comment(REPO, 2, "alice", f"/autoresearch approve {seen}")
    bot_env.work(COMMANDS)
    assert "is not the one awaiting approval" in bot_env.bot_comments(REPO, 2)[-1]["body"]
    assert _run(bot_env, 2).state == "awaiting_approval" and _run(bot_env, 2).approval is None
    assert Store(bot_env.redis).get_run(REPO, again.run_id).state == "cancelled"
    assert Queue(RUNS, connection=bot_env.redis).count == 0                # nothing runs

    # The same request on another issue has another id; approving one never approves the other.
    bot_env.comment(REPO, 3, "bob", "/autoresearch optimize cpu budget=9")
    bot_env.work(COMMANDS)
    other = _run(bot_env, 3)
    assert other.plan_digest != swapped.plan_digest
    bot_env.comment(REPO, 3, "alice", f"/autoresearch approve {swapped.plan_digest}")
    bot_env.work(COMMANDS)
    assert _run(bot_env, 3).state == "awaiting_approval"

    # The plan alice approves is the one that runs: cloned only now, after the approval.
    bot_env.comment(REPO, 2, "alice", f"/autoresearch approve {swapped.plan_digest}")
    bot_env.work()
    done = _run(bot_env, 2)
    assert done.state == "done" and done.approval.plan_digest == swapped.plan_digest, done
    assert done.overrides.budget == 9
    assert (run_root / done.run_id / "repo" / ".git").is_dir()


def test_bench_needs_a_pull_request_the_app_opened(bot_env, tmp_path):
    t = _target(tmp_path)
    bare = bot_env.add_target(REPO, t)
    _people(bot_env)
    git(t, "checkout", "-qb", "autoresearch/evil")
    (t / "src" / "speed.txt").write_text("999\n")
    git(t, "commit", "-qam", "looks like the bot's")
    git(t, "push", "-q", str(bare), "autoresearch/evil")
    number = bot_env.github.add_pull(REPO, "autoresearch/evil", "main", "autoresearch: faster", "x", "mallory")
    assert bot_env.comment(REPO, number, "alice", "/autoresearch bench", pr=True).status == 202
    bot_env.work(COMMANDS)
    reply = bot_env.bot_comments(REPO, number)[-1]["body"]
    assert "pull requests autoresearch opened only" in reply and "nothing was queued" in reply
    assert Queue(RUNS, connection=bot_env.redis).count == 0
    assert BOT_LOGIN not in reply
