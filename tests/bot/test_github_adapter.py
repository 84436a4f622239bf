"""bot/github.py against the fake GitHub: githubkit's response models accept every answer
(`.parsed_data` validates), auth is real (JWT for the app, installation tokens after)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.github import RepoClient, installation_token
from bot.settings import Settings
from conftest import git, make_repo
from botfixtures import app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)


@pytest.fixture()
def client(bot_env, tmp_path):
    src = make_repo(tmp_path / "src", {".github/autoresearch.yml": "name: x\n", "README": "hi\n"})
    bot_env.add_target("octo/widget", src)
    bot_env.github.repos["octo/widget"].permissions["alice"] = ("write", "maintain")
    return RepoClient(Settings.from_env(), 77, "octo", "widget"), src


def test_every_endpoint_parses(bot_env, client):
    gh, src = client
    s = Settings.from_env()
    token = installation_token(s, 77)
    assert token.startswith("ghs_") and bot_env.github.tokens[token] == 77

    head = git(src, "rev-parse", "HEAD")
    assert gh.head_sha("main") == head
    assert gh.file_text(".github/autoresearch.yml", head) == "name: x\n"
    assert gh.file_text("nope.yml", head) is None
    assert gh.permission("alice") == ("write", "maintain")
    assert gh.permission("mallory") == ("read", "read")

    user_comment = bot_env.github.add_comment("octo/widget", 1, "alice", "hello")
    gh.react(user_comment["id"], "eyes")
    assert bot_env.github.reactions == [{"comment_id": user_comment["id"], "content": "eyes",
                                         "user": bot_env.github.user(gh.settings.bot_login)["login"]}]
    cid = gh.comment(1, "<!-- m -->\nfirst")
    assert gh.find_comment(1, "<!-- m -->") == cid
    assert gh.upsert_comment(1, "<!-- m -->", "<!-- m -->\nsecond") == cid
    assert gh.upsert_comment(1, "<!-- m -->", "<!-- m -->\nthird", known_id=cid) == cid
    assert bot_env.github.comments[cid]["body"].endswith("third")
    assert gh.find_comment(1, "<!-- absent -->") is None

    git(src, "checkout", "-q", "-b", "autoresearch/x")
    (Path(src) / "README").write_text("changed\n")
    git(src, "commit", "-qam", "change")
    git(src, "push", "-q", str(bot_env.git_root / "octo/widget.git"), "autoresearch/x")
    number, url = gh.create_draft_pr("t", "autoresearch/x", "main", "body")
    assert url.endswith(f"/pull/{number}") and bot_env.github.pulls[("octo/widget", number)]["draft"]
    pull = gh.pull(number)
    assert pull.head_ref == "autoresearch/x" and pull.base_sha == head and pull.head_sha != head
    assert gh.update_pr(number, "t2", "body2") == url
    assert bot_env.github.pulls[("octo/widget", number)]["body"] == "body2"


def test_parsed_data_of_raw_githubkit_calls(bot_env, client):
    """The fake's shapes, checked directly against githubkit's models (the ones the bot uses)."""
    gh, _ = client
    cid = gh.comment(1, "x")
    assert gh.gh.rest.issues.list_comments("octo", "widget", 1).parsed_data[0].id == cid
    assert gh.gh.rest.repos.get_collaborator_permission_level("octo", "widget", "alice").parsed_data.user.login == "alice"


def test_bad_credentials_are_refused(bot_env, client, tmp_path):
    from githubkit.exception import RequestFailed
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    other = tmp_path / "other.pem"
    other.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    s = Settings.from_env({**bot_env.env, "AUTORESEARCH_PRIVATE_KEY_PATH": str(other)})
    with pytest.raises(RequestFailed) as err:
        installation_token(s, 77)
    assert err.value.response.status_code == 401


def test_pull_requests_are_read_leniently_and_same_owner_forks_are_named(bot_env, client, tmp_path):
    """A label as GitHub's OpenAPI description allows it (no `archived_by`), which githubkit's model
    rejects; and a head branch in a fork with the repository's owner (`head_repo`)."""
    gh, src = client
    fork = bot_env.add_target("octo/widget-fork", src)
    git(src, "checkout", "-q", "-b", "autoresearch/y")
    (Path(src) / "README").write_text("in the fork\n")
    git(src, "commit", "-qam", "fork change")
    git(src, "push", "-q", str(fork), "autoresearch/y")
    number, url = gh.create_draft_pr("t", "autoresearch/y", "main", "body", head_repo="octo/widget-fork")
    label = {"id": 1, "node_id": "LA_1", "url": "https://api.github.com/repos/octo/widget/labels/perf",
             "name": "perf", "description": None, "color": "ededed", "default": False}
    bot_env.github.pulls[("octo/widget", number)]["labels"] = [label]
    with pytest.raises(Exception, match="archived_by"):
        gh.gh.rest.pulls.get("octo", "widget", number).parsed_data
    pull = gh.pull(number)
    assert pull.head_repo == "octo/widget-fork" and pull.head_ref == "autoresearch/y"
    assert gh.update_pr(number, "t2", "b2") == url


def test_a_workflow_run_is_cancelled(bot_env, client):
    from githubkit.exception import RequestFailed
    gh, _ = client
    bot_env.github.workflow_runs[("octo/widget", 31)] = "in_progress"
    gh.cancel_workflow_run(31)
    assert bot_env.github.cancelled_runs == [("octo/widget", 31)]
    with pytest.raises(RequestFailed) as err:            # finished: GitHub answers 409
        gh.cancel_workflow_run(31)
    assert err.value.response.status_code == 409


def test_comments_are_found_only_among_the_bots_own(bot_env, client):
    """N4 at the adapter: a marker in someone else's comment is never found, so never edited; without
    a configured login nothing is searched at all (a new comment is posted)."""
    import dataclasses
    gh, _ = client
    theirs = bot_env.github.add_comment("octo/widget", 2, "mallory", "<!-- m -->\nmine")
    assert gh.find_comment(2, "<!-- m -->") is None
    ours = gh.upsert_comment(2, "<!-- m -->", "<!-- m -->\nthe bot's")
    assert ours != theirs["id"] and gh.find_comment(2, "<!-- m -->") == ours
    assert bot_env.github.comments[theirs["id"]]["body"] == "<!-- m -->\nmine" and not bot_env.github.foreign_edits
    blind = RepoClient(dataclasses.replace(Settings.from_env(), bot_login=""), 77, "octo", "widget")
    before = len(bot_env.github.log)
    assert blind.find_comment(2, "<!-- m -->") is None and len(bot_env.github.log) == before
