"""jobs/contract/runsummary.py: the typed run summary writes exactly the summary.json the dashboard, the
Action and older readers know (keys, order, the branch's facts only when a branch was confirmed)."""
from __future__ import annotations

import pytest

from jobs.contract import ledger
from jobs.contract.results import verdict_line
from jobs.contract.runsummary import RunStopped, RunSummary

# summary.json's keys in the order the pipeline has always written them (the file's contract).
KEYS = ["run_id", "target", "repo", "base_commit", "branch", "platform", "platforms", "cpus", "cpu", "machines",
        "agent", "primary", "calibration", "experiments", "commits", "diffstat", "hypotheses", "stack_applied",
        "stack_dropped", "stack_unattributed", "attribution", "sandboxed", "unsandboxed_by", "profile_missing",
        "noise", "profile", "simulate", "error_control", "stacks", "cost_usd", "wall_seconds", "stack_confirmed",
        "branch_left", "branch_note", "floor_pct", "reproduce", "resume", "warnings"]


def _data(**changes):
    data = {k: None for k in KEYS}
    data.update(run_id="r1", target="t", repo="/r", base_commit="a" * 40, branch="autoresearch/r1", platform="local",
                platforms=["local"], cpus={"local": "Xeon"}, cpu="Xeon", machines={}, agent="none", primary="score",
                calibration={"local": {}}, experiments=[{"name": "c", "hypothesis": "c", "status": "keep"}],
                commits=[{"hypothesis": "c"}], diffstat="", hypotheses={}, stack_applied=["c"], stack_dropped=[],
                stack_unattributed=[], attribution=[], sandboxed=True, unsandboxed_by="", profile_missing="",
                noise={}, error_control={"alpha": 0.05}, cost_usd=0.0, wall_seconds=1.5,
                stacks={"local": {"status": "keep", "metrics": [{"name": "score", "delta_pct": 12.0, "p_value": 0.01}]}},
                stack_confirmed=True, branch_left=True, branch_note="", floor_pct={"local": 1.0}, reproduce=["x"],
                resume="autoresearch run /r", warnings=["the config's sandbox.env asks for X, which the operator "
                                                        "does not allow"])
    data.update(changes)
    return data


def test_the_json_form_reads_back_byte_for_byte():
    data = _data()
    text = ledger.dumps(data, indent=2)
    summary = RunSummary.from_json(data)
    assert ledger.dumps(summary.to_json(), indent=2) == text
    assert list(summary.to_json()) == KEYS
    assert summary.kept and summary.stacks["local"]["status"] == "keep"


def test_a_summary_written_before_warnings_were_kept_reads_back_without_any():
    data = _data()
    del data["warnings"]
    assert RunSummary.from_json(data).warnings == ()


def test_the_warnings_are_a_tuple_each_message_once():
    summary = RunSummary.from_json(_data(warnings=["b", "a", "b"]))
    assert summary.warnings == ("b", "a")
    assert ledger.dumps(summary.to_json()).endswith('"warnings": ["b", "a"]}')


def test_the_branch_facts_are_left_out_when_no_branch_was_confirmed():
    data = _data(stack_confirmed=False)
    del data["commits"], data["diffstat"]
    summary = RunSummary.from_json(data)
    assert summary.commits is None and list(summary.to_json()) == [k for k in KEYS if k not in ("commits", "diffstat")]


def test_what_is_not_a_summary_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown keys in a run summary: surprise"):
        RunSummary.from_json(_data(surprise=1))
    with pytest.raises(ValueError, match="not a run summary"):
        RunSummary.from_json({"run_id": "r1"})
    with pytest.raises(ValueError, match="JSON object"):
        RunSummary.from_json([])


def test_the_verdict_line_reads_a_summary_and_a_stopped_run():
    assert verdict_line(RunSummary.from_json(_data())) == \
        "kept 1 of 1 experiment(s) (c); stack on local: keep, score +12.0% (p=0.01)"
    assert verdict_line(RunStopped("r1", "research found no hypothesis", "/o/research.md")) == \
        "nothing to try: research found no hypothesis"
