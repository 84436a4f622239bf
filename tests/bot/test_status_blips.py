"""One rule for every status report of the flow (`bot.progress.best_effort_status`): a GitHub or
Redis blip is logged and skipped, never raised; a cancel (KeyboardInterrupt) still goes through."""
from __future__ import annotations

import logging

import pytest

from bot.progress import best_effort_status


def test_a_blip_while_reporting_is_logged_not_raised(caplog):
    reached = []
    with caplog.at_level(logging.WARNING, logger="autoresearch.bot"), best_effort_status():
        reached.append("before")
        raise ConnectionError("GitHub answered 502")
    assert reached == ["before"]
    assert "status update failed: GitHub answered 502" in caplog.text


def test_a_cancel_is_not_a_blip():
    with pytest.raises(KeyboardInterrupt), best_effort_status():
        raise KeyboardInterrupt


def test_the_last_status_edit_shows_the_latest_record(redis_url):
    """A command's edit rendered from a running record must not land after the worker's edit of the
    cancelled one (seen as a stale "running" comment on a cancelled run, under load): edits of one
    status comment are serialised and each renders the record it reads inside the lock."""
    import threading
    import time

    import redis

    from bot import approval as ap
    from bot.flow import Flow
    from bot.store import Store
    from recordfixtures import record

    class Host:                       # the GitHub adapter's one call here; the first edit is slow
        owner, repo = "octo", "synth"

        def __init__(self):
            self.bodies, self.gate, self.first = [], threading.Event(), True

        def upsert_comment(self, issue, marker, body, comment_id):
            if self.first:
                self.first = False
                self.gate.wait(10)
            self.bodies.append(str(body))
            return 99

    conn = redis.Redis.from_url(redis_url)
    store, host = Store(conn), Host()
    store.replace_run(record(state=ap.RUNNING, message="cancelling"))
    flow = Flow(place=None, store=store, gh=host, token=None, launcher=None, git=None)
    command = threading.Thread(target=flow.refresh_status, args=("7-abc1234",))
    command.start()                   # renders "running", then waits in the slow edit
    time.sleep(0.3)
    store.update_run("octo/synth", "7-abc1234", state=ap.CANCELLED, message="cancelled: jobs stopped")
    worker = threading.Thread(target=flow.refresh_status, args=("7-abc1234",))
    worker.start()
    time.sleep(0.5)                   # without the lock the worker's edit lands here, before the command's
    host.gate.set()
    command.join(10), worker.join(10)
    assert len(host.bodies) == 2 and "jobs stopped" in host.bodies[-1], host.bodies
