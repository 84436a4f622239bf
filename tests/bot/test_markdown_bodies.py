"""N11, pure: every comment body `bot.status` writes keeps what a repository or commenter controls
inert (plan text with platform names, candidate file names, the best experiment, run messages,
config field names, the PR title), whatever the strings are."""
from __future__ import annotations

import re

import pytest

from bot import status
from bot.approval import Approval
from jobs.contract.model import ExperimentRecord
from recordfixtures import record
from test_github_face import live
from mdattacks import ATTACKS

BEST = [{"name": None, "platform": None, "status": "keep", "metrics": [
    {"name": "score", "delta_pct": 5.0, "p_value": 0.01, "ci_low_pct": 2.0, "ci_high_pct": 8.0}]}]


@pytest.mark.parametrize("evil", ATTACKS)
def test_status_plan_and_replies_keep_untrusted_text_inert(evil):
    best = status.best_line([ExperimentRecord.from_summary({**BEST[0], "name": evil, "platform": evil})], "score")
    rec = record(plan_text=f"1 experiment(s) on {evil}", candidates=[f"{evil}.patch", "ok.patch"], message=evil,
                 best=best, requester="alice", approval=Approval("alice", "d" * 16, "b" * 40),
                 pr_url="https://github.com/octo/synth/pull/100", state="awaiting_approval")
    bodies = [status.status_body(rec), status.plan_body(rec), status.approve_names_plan(rec, ""),
              status.pending_plan_kept(rec, "bob"), status.config_error_reply("cfg", [(evil, evil)])]
    for body in bodies:
        assert set(live(body)) <= {"@alice", "@bob", "https://github.com/octo/synth/pull/100"}, (evil, body)
    title = status.pr_title(1, evil)                 # plain text on GitHub: only its linkers matter
    assert "\n" not in title and not re.search(r"@[A-Za-z0-9]|#\d|https?://|(?i:www\.)", title.replace("(#1)", ""))
