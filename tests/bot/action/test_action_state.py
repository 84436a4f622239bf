"""The Action's state comment is authenticated (issue 20): only a comment by the bot's own login
that carries a valid HMAC (keyed with the workflow's `state-key` secret, bound to repository and
issue) is trusted. A forged one (unsigned, signed with another key, or a genuine one copied to
another issue) is ignored and never edited; without a key the Action says how to add one."""
from __future__ import annotations

import json
import os
import subprocess

from test_action import ACTION_REPO, STATE_KEY, WORKFLOW_TOKEN, _cli, _target, run_action  # first: sets the path

from bot.issuestore import STATE_MARKER, state_body, verified_state
from bot.record import to_fields
from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: F401,E402  (fixtures)
from conftest import ROOT  # noqa: E402
from recordfixtures import record  # noqa: E402


def _state(issue: int, state: str = "running") -> dict:
    rec = to_fields(record(run_id=f"{issue}-deadbee", repo=ACTION_REPO, name="synth-action", state=state,
                           issue=issue, base_commit="d" * 40, requester="alice"))
    return {"runs": {rec["run_id"]: rec}, "current": rec["run_id"], "pr": None, "cancel": []}


def _status(bot_env, tmp_path, issue: int, name: str) -> dict:
    p = bot_env.comment_payload(ACTION_REPO, issue, "alice", "/autoresearch status")
    p.pop("installation")
    return run_action(bot_env, tmp_path, "issue_comment", p, name)[0]


def test_forged_state_comments_are_ignored_and_never_edited(bot_env, tmp_path):
    bot_env.add_target(ACTION_REPO, _target(tmp_path))
    bot_env.github.repos[ACTION_REPO].permissions["alice"] = ("write", "maintain")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    gh = bot_env.github
    # Posted as the bot's own login (another workflow echoing a user's text would do that): no MAC,
    # and a MAC made with another key.
    plain = gh.add_comment(ACTION_REPO, 5, BOT_LOGIN, f"{STATE_MARKER}\n```json\n{json.dumps(_state(5))}\n```\n")
    other_key = gh.add_comment(ACTION_REPO, 5, BOT_LOGIN, state_body("not-the-state-key-at-all", ACTION_REPO, 5,
                                                                      _state(5)))
    # ... and the genuine state of issue 6, copied to issue 5
    replayed = gh.add_comment(ACTION_REPO, 5, BOT_LOGIN, state_body(STATE_KEY, ACTION_REPO, 6, _state(6)).replace(
        "6-deadbee", "5-deadbee"))
    forged = {c["id"]: c["body"] for c in (plain, other_key, replayed)}

    out = _status(bot_env, tmp_path, 5, "status-forged")
    assert out["state"] == "replied" and out["run-id"] == ""          # "no run on this issue yet"
    assert "no run on this issue" in bot_env.bot_comments(ACTION_REPO, 5)[-1]["body"]
    for cid, body in forged.items():                                   # never edited
        assert gh.comments[cid]["body"] == body
        assert not any(m == "PATCH" and p.endswith(f"/comments/{cid}") for m, p, _ in gh.log)
    assert not any("<!-- autoresearch:status 5-deadbee" in c["body"] for c in bot_env.bot_comments(ACTION_REPO, 5))

    # The genuine state of issue 6, signed with the workflow's key, is trusted there.
    genuine = gh.add_comment(ACTION_REPO, 6, BOT_LOGIN, state_body(STATE_KEY, ACTION_REPO, 6, _state(6)))
    out = _status(bot_env, tmp_path, 6, "status-genuine")
    assert out["state"] == "running" and out["run-id"] == "6-deadbee"
    states = [c for c in bot_env.bot_comments(ACTION_REPO, 6) if STATE_MARKER in c["body"]]
    assert [c["id"] for c in states] == [genuine["id"]]                 # kept in place, signed again
    assert verified_state(STATE_KEY, ACTION_REPO, 6, states[0]["body"])["current"] == "6-deadbee"


def test_without_a_state_key_the_action_says_how_to_add_one(bot_env, tmp_path):
    bot_env.add_target(ACTION_REPO, _target(tmp_path))
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    p = bot_env.comment_payload(ACTION_REPO, 7, "alice", "/autoresearch status")
    p.pop("installation")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(p))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_EVENT_NAME": "issue_comment",
           "GITHUB_EVENT_PATH": str(event), "GITHUB_TOKEN": WORKFLOW_TOKEN,
           "GITHUB_API_URL": bot_env.env["AUTORESEARCH_GITHUB_API_URL"], "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN,
           "AUTORESEARCH_WORKDIR": str(tmp_path / "w"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(_cli(), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "AUTORESEARCH_STATE_KEY" in proc.stderr and "state-key" in proc.stderr, proc
    assert bot_env.github.issue_comments(ACTION_REPO, 7)[-1]["login"] == "alice"      # nothing written
