"""A complete `RunRecord` for tests, with any field overridden."""
from __future__ import annotations

from bot.record import RunRecord
from jobs.contract.config import Overrides


def record(**fields) -> RunRecord:
    values = dict(run_id="7-abc1234", repo="octo/synth", owner="octo", name="synth", installation_id=77, issue=7,
                  default_branch="main", requester="alice", overrides=Overrides(), base_commit="b" * 40,
                  plan_digest="d" * 16, plan_text="1 experiment(s) + calibration + stack on local", over_budget=False,
                  state="queued")
    return RunRecord(**{**values, **fields})
