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


def test_a_resume_holds_the_lease_before_its_first_status_edit(redis_url, monkeypatch):
    """A resume's first act is the status edit that says the worker was lost. Made before the lease,
    a slow edit (GitHub under load) left the run without a holder long enough for the next sweep to
    count a second loss and queue a second resume (seen in CI: `losses == 2` after one kill)."""
    import types

    import redis

    from bot import approval as ap
    from bot import execution, jobqueue
    from bot.flow import Flow
    from bot.store import Store
    from recordfixtures import record

    conn = redis.Redis.from_url(redis_url)
    store = Store(conn)

    class Host:
        owner, repo = "octo", "synth"
        holders: list = []

        def upsert_comment(self, issue, marker, body, comment_id):
            self.holders.append(store.lease_holder("octo/synth", "7-abc1234"))
            self.holders.append(jobqueue.sweep(conn))          # what a sweep at that moment does
            return 99

    store.replace_run(record(state=ap.RUNNING, lost_at=100.0, losses=1))
    host = Host()
    flow = Flow(place=types.SimpleNamespace(executor="local"), store=store, gh=host, token=None,
                launcher=jobqueue.QueueLauncher(conn), git=None)
    monkeypatch.setattr(flow, "layout", lambda run_id: None)
    monkeypatch.setattr(execution, "resume", lambda rec, *a: execution.resume_ended(rec, "", True, 1))
    assert flow.resume(store.get_run("octo/synth", "7-abc1234")).state == ap.CANCELLED
    first_holder, first_sweep = host.holders[:2]
    assert first_holder and first_sweep == []
    rec = store.get_run("octo/synth", "7-abc1234")
    assert rec.losses == 1 and store.lease_holder("octo/synth", "7-abc1234") is None


def test_a_status_lock_whose_holder_was_killed_delays_the_next_edit_not_skips_it(redis_url, monkeypatch):
    """A worker SIGKILLed in the middle of a status edit never releases that edit's lock: the next
    edit (the resumed run's "worker lost") waits until the lock lapses, and is made."""
    import time

    import redis

    from bot import approval as ap
    from bot import store as store_module
    from bot.flow import Flow
    from bot.store import Store
    from recordfixtures import record

    monkeypatch.setattr(store_module, "STATUS_LOCK_S", 1)
    conn = redis.Redis.from_url(redis_url)
    store = Store(conn)
    store.replace_run(record(state=ap.RUNNING, lost_at=100.0, losses=1))

    class Host:
        owner, repo = "octo", "synth"
        bodies: list = []

        def upsert_comment(self, issue, marker, body, comment_id):
            self.bodies.append(str(body))
            return 99

    dead = store.status_locked("octo/synth", "7-abc1234")
    dead.__enter__()                        # taken, never given back: its holder is gone
    host = Host()
    started = time.monotonic()
    Flow(place=None, store=store, gh=host, token=None, launcher=None, git=None).refresh_status("7-abc1234")
    waited = time.monotonic() - started
    assert len(host.bodies) == 1 and "worker lost" in host.bodies[0]
    assert waited > 0.5, waited               # it did wait for the lapse (a LockError would have skipped it)
    with pytest.raises(redis.exceptions.LockNotOwnedError):        # long gone by now
        dead.__exit__(None, None, None)
