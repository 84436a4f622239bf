"""bot/progress.py: what a run's events change in its record and its status comment. A warning
(a profile that timed out, a calibration redone) reaches the issue while the run goes on, not only
the PR at its end; the record is a real Redis store."""
from __future__ import annotations

import redis

from bot import status
from bot.progress import MAX_WARNINGS, Progress
from jobs.contract import events
from bot.store import Store
from mdattacks import ATTACKS
from recordfixtures import record
from test_github_face import live


def test_warnings_reach_the_status_comment_at_once_newest_last_and_inert(redis_url, tmp_path):
    store = Store(redis.Redis.from_url(redis_url))
    rec = record(run_id="7-warn", warnings=["an earlier warning, before a resume"])
    store.replace_run(rec)
    refreshed: list[str] = []
    progress = Progress(store, refreshed.append, rec, tmp_path, "score", interval=3600.0)
    progress(events.StepProgress(name="x", message="sampling", fraction=0.0))
    progress(events.StepProgress(name="x", message="still sampling", fraction=0.0))
    assert len(refreshed) == 1                # throttled: the second had nothing the maintainer must see now
    evil = ATTACKS[:MAX_WARNINGS]
    for i, text in enumerate(["the op profile timed out at 1800 s: ranked by kind", *evil]):
        progress(events.RunWarning(message=text))
        assert len(refreshed) == i + 2        # each warning edits the comment now
    kept = store.get_run(rec.repo, rec.run_id).warnings
    assert kept == list(evil)[-MAX_WARNINGS:]
    body = status.status_body(store.get_run(rec.repo, rec.run_id))
    assert body.count("- ⚠️ ") == MAX_WARNINGS and "**Warnings**" in body
    assert set(live(body)) <= {"@alice"}, body


def test_a_run_without_warnings_shows_no_warnings_block():
    assert "Warnings" not in status.status_body(record())


def test_the_first_event_shows_even_right_after_the_machine_booted(redis_url, tmp_path, monkeypatch):
    # time.monotonic() counts from boot on Linux: a worker started minutes after boot must not sit
    # silent for a whole interval (seen: CI on a machine 5 minutes up, interval 3600 s, no refresh)
    from types import SimpleNamespace
    import bot.progress
    monkeypatch.setattr(bot.progress, "time", SimpleNamespace(monotonic=lambda: 30.0))   # 30 s after boot
    store = Store(redis.Redis.from_url(redis_url))
    rec = record(run_id="8-boot")
    store.replace_run(rec)
    refreshed: list[str] = []
    progress = Progress(store, refreshed.append, rec, tmp_path, "score", interval=60.0)
    progress(events.StepProgress(name="x", message="building", fraction=0.0))
    progress(events.StepProgress(name="x", message="sampling", fraction=0.0))
    assert refreshed == ["8-boot"]
