"""Both `RunStore`s keep one contract (bot/ports.py): the App's Redis store on the private
redis-server, and the Action's issue-comment store against the fake GitHub over loopback."""
from __future__ import annotations

import pytest
import redis

from bot import approval as ap
from bot.record import IssuePR, RecordError
from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from jobs.contract.config import Overrides
from recordfixtures import record

REPO = "octo/store"
TOKEN = "ghs_storecontract0123456789"


@pytest.fixture(params=["redis", "issue-comment"])
def stores(request, redis_url, bot_env, tmp_path):
    """A factory of stores over the same backing data: each call is a fresh process's view."""
    if request.param == "redis":
        from bot.store import Store
        conn = redis.Redis.from_url(redis_url)
        conn.flushdb()
        return lambda: Store(conn)
    from bot.github import RepoClient
    from bot.issuestore import IssueStateStore
    from bot.settings import Settings
    from conftest import make_repo
    bot_env.add_target(REPO, make_repo(tmp_path / "src", {"README": "x\n"}))
    bot_env.github.tokens[TOKEN] = 0
    s = Settings.for_action({"GITHUB_API_URL": bot_env.env["AUTORESEARCH_GITHUB_API_URL"],
                             "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN, "AUTORESEARCH_EXECUTOR": "local"})
    return lambda: IssueStateStore(RepoClient.for_token(s, TOKEN, "octo", "store"), 7, BOT_LOGIN,
                                   key="ports-test-state-key", repo="octo/store")


def test_run_records_round_trip_and_durable_writes_are_seen_by_the_next_process(stores):
    store = stores()
    assert store.get_run(REPO, "7-abc1234") is None and store.current_run(REPO, 7) is None
    rec = record(repo=REPO, overrides=Overrides("score", ("x86", "arm"), 12.5),
                 approval=ap.Approval("alice", "d" * 16, "b" * 40), jobs=["j1"], candidates=["faster.patch"])
    store.replace_run(rec)
    store.set_current(REPO, 7, rec.run_id)
    assert store.get_run(REPO, rec.run_id) == rec and store.current_run(REPO, 7) == rec

    with store.locked(REPO, rec.run_id):
        store.update_run(REPO, rec.run_id, state=ap.RUNNING, message="started", workflow_run_id="9001")
    store.update_run(REPO, rec.run_id, phase="experiments", experiments_done=1, best="`faster` +3.0%")
    assert store.get_run(REPO, rec.run_id).phase == "experiments"            # this process sees everything
    later = stores().get_run(REPO, rec.run_id)                               # the next one sees the durable part
    assert (later.state, later.message, later.workflow_run_id, later.overrides, later.approval) == \
           (ap.RUNNING, "started", "9001", rec.overrides, rec.approval)
    with pytest.raises(RecordError, match="colour"):
        store.update_run(REPO, rec.run_id, colour="red")


def test_cancel_flags_and_the_issues_pull_request(stores):
    store = stores()
    store.replace_run(record(repo=REPO))
    assert not store.cancel_requested(REPO, "7-abc1234")
    store.request_cancel(REPO, "7-abc1234")
    assert stores().cancel_requested(REPO, "7-abc1234")
    store.clear_cancel(REPO, "7-abc1234")
    assert not stores().cancel_requested(REPO, "7-abc1234")
    assert store.issue_pr(REPO, 7) is None
    pr = IssuePR(100, "https://github.com/octo/store/pull/100", "b")
    store.set_issue_pr(REPO, 7, pr)
    assert stores().issue_pr(REPO, 7) == pr                # typed both ways, in Redis and in the Action's comment
    assert IssuePR.from_dict({"url": "u", "branch": "b"}) is None and IssuePR.from_dict(None) is None
