"""jobs/contract/runsummary.py: the typed run summary writes exactly the summary.json the dashboard, the
Action and older readers know (keys, order, the branch's facts only when a branch was confirmed)."""
from __future__ import annotations

import pytest

from jobs.contract import ledger
from jobs.contract.results import verdict_line
from jobs.contract.model import ExperimentRecord, MetricResult
from jobs.contract.runsummary import BranchCommit, RunStopped, RunSummary

# summary.json's keys in the order the pipeline has always written them (the file's contract).
KEYS = ["run_id", "target", "repo", "base_commit", "branch", "platform", "platforms", "cpus", "cpu", "machines",
        "agent", "primary", "calibration", "experiments", "commits", "diffstat", "hypotheses", "stack_applied",
        "stack_dropped", "stack_unattributed", "attribution", "sandboxed", "unsandboxed_by", "profile_missing",
        "noise", "profile", "simulate", "error_control", "stacks", "cost_usd", "wall_seconds", "stack_confirmed",
        "branch_left", "branch_note", "floor_pct", "reproduce", "resume", "warnings"]


# A record's keys in summary.json: the ledger line's without its log, a failed step's first lines last.
RECORD_KEYS = ["run_id", "name", "hypothesis", "platform", "status", "reason", "commit", "base_commit", "metrics",
               "seconds", "cost_usd", "cpu", "kind", "flags", "alpha", "slot", "runner", "hypothesis_kind",
               "skip_cause", "regressions", "calibration"]
SCORE = MetricResult(name="score", base_mean=10.0, base_sd=1.0, head_mean=11.2, head_sd=1.0, n_base=12, n_head=12,
                     delta_pct=12.0, p_value=0.01, ci_low_pct=8.0, ci_high_pct=16.0, mde_pct=3.0, method="paired",
                     verdict="win", n_pairs=12)


def _record(**fields):
    return ExperimentRecord(**{"run_id": "r1", "platform": "local", "reason": "score +12.0%", "log": "all of it",
                               **fields}).summary_dict()


def _data(**changes):
    data = {k: None for k in KEYS}
    data.update(run_id="r1", target="t", repo="/r", base_commit="a" * 40, branch="autoresearch/r1", platform="local",
                platforms=["local"], cpus={"local": "Xeon"}, cpu="Xeon", machines={}, agent="none", primary="score",
                calibration={"local": {}}, experiments=[_record(name="c", hypothesis="c", status="keep")],
                commits=[{"hypothesis": "c"}], diffstat="", hypotheses={}, stack_applied=["c"], stack_dropped=[],
                stack_unattributed=[], attribution=[], sandboxed=True, unsandboxed_by="", profile_missing="",
                noise={}, error_control={"alpha": 0.05}, cost_usd=0.0, wall_seconds=1.5,
                stacks={"local": _record(name="stack", hypothesis="stack", status="keep", kind="stack",
                                         metrics=[SCORE])},
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
    assert summary.kept and summary.stacks["local"].status == "keep"
    assert isinstance(summary.experiments[0], ExperimentRecord) and summary.stacks["local"].metric("score") == SCORE


def test_a_record_is_written_as_the_ledger_holds_it_without_its_log():
    failed = ExperimentRecord("r1", "b", "b", "local", "checks_failed", "checks failed (exit 1)", log="x" * 100,
                              failure_output="case 1: FAIL")
    data = RunSummary.from_json(_data(experiments=[failed], attribution=[failed])).to_json()
    assert list(data["experiments"][0]) == RECORD_KEYS + ["failure_output"]
    assert data["experiments"][0]["failure_output"] == "case 1: FAIL" and "log" not in data["attribution"][0]
    assert list(data["stacks"]["local"]) == RECORD_KEYS
    assert failed.to_dict()["failure_output"] == "case 1: FAIL"
    assert "failure_output" not in ExperimentRecord("r1", "b", "b", "local", "keep", "").to_dict()   # the ledger's


def test_a_metric_a_strict_file_wrote_as_null_reads_back_as_none():
    data = _data()
    data["stacks"]["local"]["metrics"][0].update(ci_high_pct=None, mde_pct=None)
    summary = RunSummary.from_json(data)
    m = summary.stacks["local"].metric("score")
    assert m is not None and m.ci_high_pct is None and m.mde_pct is None
    assert ledger.dumps(summary.to_json(), indent=2) == ledger.dumps(data, indent=2)


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


def test_the_branch_commits_are_typed_and_written_back_as_they_were_read():
    full = {"hypothesis": "c", "commit": "c" * 40, "subject": "c: recipe", "stat": " a.c | 2 +-", "files": ["a.c"]}
    later = {"files": ["b.c"], "hypothesis": "d", "from_a_later_version": {"x": 1}}     # another order, a key unknown
    data = _data(commits=[full, later])
    summary = RunSummary.from_json(data)
    assert all(isinstance(c, BranchCommit) for c in summary.commits)
    assert (summary.commits[0].commit, summary.commits[0].files) == ("c" * 40, ["a.c"])
    assert (summary.commits[1].hypothesis, summary.commits[1].commit, summary.commits[1].stat) == ("d", "", "")
    assert ledger.dumps(summary.to_json(), indent=2) == ledger.dumps(data, indent=2)
    built = BranchCommit(hypothesis="c", commit="c" * 40, subject="c: recipe", stat=" a.c | 2 +-", files=["a.c"])
    assert built.to_json() == full and list(built.to_json()) == list(full)      # the keys commit_facts always wrote
    assert RunSummary.from_json(_data(commits=[built])).to_json()["commits"] == [full]


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
