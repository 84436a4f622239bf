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
