"""The pure core of bot/: command grammar, approval state machine, routing, status text."""
from __future__ import annotations

import pickle

import pytest

from bot import approval as ap
from bot.commands import Command, Invalid, parse_comment
from bot.routing import CommentCommand, Ignored, route
from bot.status import best_line, pr_body, status_body, status_marker
from jobs.contract.config import Overrides
from jobs.contract.model import ExperimentRecord
from jobs.guard.mdsafe import md
from recordfixtures import record


@pytest.mark.parametrize("body,expected", [
    ("/autoresearch optimize cpu", Command("optimize", "cpu")),
    ("please\n/autoresearch optimize cpu metric=tg128 platforms=x86,arm budget=30\nthanks",
     Command("optimize", "cpu", Overrides("tg128", ("x86", "arm"), 30.0))),
    ("/autoresearch optimize CPU budget=$12.5", Command("optimize", "cpu", Overrides(budget=12.5))),
    ("/autoresearch approve", Command("approve")),
    ("/autoresearch approve 0123456789ABCDEF", Command("approve", plan="0123456789abcdef")),
    ("  /autoresearch cancel  ", Command("cancel")),
    ("/autoresearch status", Command("status")),
    ("/autoresearch bench", Command("bench")),
])
def test_commands_parse(body, expected):
    assert parse_comment(body) == expected


@pytest.mark.parametrize("body,reason", [
    ("/autoresearch", "no command"),
    ("/autoresearch frobnicate", "unknown command"),
    ("/autoresearch optimize", "say what to optimize"),
    ("/autoresearch optimize gpu", "say what to optimize"),
    ("/autoresearch optimize cpu budget=-1", "budget="),
    ("/autoresearch optimize cpu budget=nan", "budget="),
    ("/autoresearch optimize cpu budget=lots", "budget="),
    ("/autoresearch optimize cpu metric=a;rm", "metric="),
    ("/autoresearch optimize cpu platforms=x86,x86", "platforms="),
    ("/autoresearch optimize cpu platforms=,", "platforms="),
    ("/autoresearch optimize cpu color=red", "unknown argument"),
    ("/autoresearch optimize cpu metric=a metric=b", "given twice"),
    ("/autoresearch optimize cpu fast", "name=value"),
    ("/autoresearch approve now", "takes the plan's id"),
    ("/autoresearch approve 0123456789abcdef 0123456789abcdef", "takes the plan's id"),
    ("/autoresearch cancel now", "takes no arguments"),
])
def test_malformed_commands_get_a_reason(body, reason):
    parsed = parse_comment(body)
    assert isinstance(parsed, Invalid) and reason in parsed.reason


@pytest.mark.parametrize("body", [
    "", None, "I ran /autoresearch optimize cpu yesterday", "/autoresearchoptimize cpu",
    "```\n/autoresearch optimize cpu\n```", "> /autoresearch optimize cpu",
    # issue 12: what GitHub renders as a comment, code or quote is not a command
    "<!--\n/autoresearch approve\n-->", "hidden <!--\n/autoresearch approve\n-->",
    "text\n\n    /autoresearch approve", "> a quote\n/autoresearch approve",
    "```\nopened with backticks\n~~~\n/autoresearch approve", "`/autoresearch approve`",
    "- /autoresearch approve", "# /autoresearch approve",
])
def test_text_that_is_not_a_command(body):
    assert parse_comment(body) is None


def test_first_command_line_wins():
    assert parse_comment("/autoresearch status\n/autoresearch cancel") == Command("status")


def test_overrides_are_one_value_from_comment_to_json():
    o = parse_comment("/autoresearch optimize cpu metric=m platforms=x86 budget=0").overrides
    assert o == Overrides("m", ("x86",), 0.0) and o
    assert o.to_dict() == {"metric": "m", "platforms": ["x86"], "budget": 0.0}      # what run ids hash
    assert Overrides.from_dict(o.to_dict()) == o and Overrides(platforms=["arm"]).platforms == ("arm",)
    assert not Overrides() and Overrides().to_dict() == {} and Overrides.from_dict(None) == Overrides()


# -- approval ------------------------------------------------------------------------------------
@pytest.mark.parametrize("perm,role,approvers,ok", [
    ("admin", "admin", [], True), ("write", "write", [], True), ("write", "maintain", [], True),
    ("read", "triage", [], False), ("read", "read", [], False), ("none", "", [], False),
    ("none", "", ["Alice"], True), ("read", "read", ["bob"], False),
])
def test_is_approver(perm, role, approvers, ok):
    assert ap.is_approver("alice", perm, role, approvers) is ok


def test_maintainer_within_budget_starts_outsider_waits():
    d = ap.decide_request("alice", True, False, "d1", "c1")
    assert d.state == ap.QUEUED and ap.may_start(d.approval, "d1", "c1")
    d = ap.decide_request("eve", False, False, "d1", "c1")
    assert d.state == ap.AWAITING and d.approval is None and "write access" in d.reason


def test_over_budget_always_needs_approval():
    d = ap.decide_request("alice", True, True, "d1", "c1")
    assert d.state == ap.AWAITING and "budget" in d.reason


def test_approval_binds_to_plan_and_base():
    d = ap.decide_approve(ap.AWAITING, "alice", True, "d1", "c1")
    assert d.state == ap.QUEUED and d.approval == ap.Approval("alice", "d1", "c1")
    assert ap.may_start(d.approval, "d1", "c1")
    assert not ap.may_start(d.approval, "d2", "c1")
    assert not ap.may_start(d.approval, "d1", "c2")
    assert not ap.may_start(None, "d1", "c1")
    assert ap.Approval.from_dict(d.approval.to_dict()) == d.approval


def test_outsider_cannot_approve():
    d = ap.decide_approve(ap.AWAITING, "eve", False, "d1", "c1")
    assert d.approval is None and d.state == ap.AWAITING


def test_state_machine():
    s = ap.transition(ap.AWAITING, "approve")
    s = ap.transition(s, "start")
    assert ap.transition(s, "finish") == ap.DONE
    assert ap.transition(ap.QUEUED, "stale") == ap.AWAITING
    assert ap.transition(ap.RUNNING, "cancelled") == ap.CANCELLED
    with pytest.raises(ap.InvalidTransition, match="cannot start a run that is done"):
        ap.transition(ap.DONE, "start")
    with pytest.raises(ap.InvalidTransition):
        ap.transition(ap.AWAITING, "start")     # nothing starts without approval
    assert ap.may_cancel("bob", "Bob", False) and not ap.may_cancel("eve", "bob", False)


# -- routing -------------------------------------------------------------------------------------
def _comment(body="/autoresearch optimize cpu", action="created", user_type="User", login="alice", pr=False):
    issue = {"number": 7}
    if pr:
        issue["pull_request"] = {"url": "x"}
    return {"action": action, "issue": issue, "installation": {"id": 5},
            "comment": {"id": 99, "body": body, "user": {"login": login, "type": user_type}},
            "repository": {"name": "r", "owner": {"login": "o"}, "default_branch": "trunk"}}


def test_route_command():
    r = route("issue_comment", _comment(), delivery="d")
    assert isinstance(r, CommentCommand) and r.verb == "optimize" and r.full_name == "o/r"
    assert r.default_branch == "trunk" and r.issue_number == 7 and r.comment_id == 99 and not r.is_pull_request
    assert r.command == Command("optimize", "cpu")
    assert pickle.loads(pickle.dumps(r)) == r            # the RQ job's argument, as the worker gets it


@pytest.mark.parametrize("event,payload,why", [
    ("push", {}, "not handled"),
    ("issue_comment", _comment(action="edited"), "action"),
    ("issue_comment", _comment(user_type="Bot"), "bot"),
    ("issue_comment", _comment(login="autoresearch[bot]"), "bot"),
    ("issue_comment", _comment(login="me-app"), "bot"),
    ("issue_comment", _comment(body="nice work"), "no /autoresearch"),
    ("issue_comment", {"action": "created", "comment": "weird"}, "author"),
    ("issue_comment", {"action": "created", "comment": {"user": {"login": "x"}, "body": "/autoresearch status"}},
     "lacks"),
    ("issue_comment", [1, 2], "action"),
])
def test_route_ignores(event, payload, why):
    r = route(event, payload, bot_login="me-app")
    assert isinstance(r, Ignored) and why in r.reason


def test_route_malformed_and_bench_on_issue_get_help():
    r = route("issue_comment", _comment(body="/autoresearch optimise cpu"))
    assert r.verb is None and "unknown command" in r.error
    r = route("issue_comment", _comment(body="/autoresearch bench"))
    assert r.verb is None and "pull request" in r.error
    r = route("issue_comment", _comment(body="/autoresearch bench", pr=True))
    assert r.verb == "bench" and r.is_pull_request


# -- status text ---------------------------------------------------------------------------------
def test_status_body_has_marker_and_fields():
    body = status_body(record(run_id="7-abc", state="running", phase="experiments", experiments_done=2,
                              experiments_total=5, best="`x` +3.0%", cost_usd=1.234, base_commit="f" * 40,
                              requester="alice"))
    assert body.startswith(status_marker("7-abc"))
    for text in ("running", "experiments", "2/5", "`x` +3.0%", "1.23 USD", "@alice"):
        assert text in body


def test_best_line_and_pr_body():
    lines = [{"kind": "experiment", "status": "keep", "name": "a", "platform": "x86",
              "metrics": [{"name": "score", "delta_pct": 3.0, "p_value": 0.01}]},
             {"kind": "experiment", "status": "keep", "name": "b", "platform": "x86",
              "metrics": [{"name": "score", "delta_pct": 9.0, "p_value": 0.001}]},
             {"kind": "experiment", "status": "discard", "name": "c", "platform": "x86",
              "metrics": [{"name": "score", "delta_pct": 20.0, "p_value": 0.5}]}]
    recs = [ExperimentRecord.from_summary(line) for line in lines]      # as jobs.api.read_records reads them
    assert best_line(recs, "score") == "`b` +9.0% score on x86 (p=0.001)"
    assert best_line([], "score") == ""
    # Passed over: a stack (not an experiment), a change not measured (null), another metric.
    others = [{"kind": "stack", "status": "keep", "name": "stack", "platform": "x86",
               "metrics": [{"name": "score", "delta_pct": 50.0, "p_value": 0.001}]},
              {"status": "keep", "name": "d", "platform": "arm", "metrics": [{"name": "score", "delta_pct": None}]},
              {"status": "keep", "name": "e", "metrics": [{"name": "other", "delta_pct": 80.0, "p_value": 0.01}]},
              {"status": "keep", "name": "f", "metrics": [{"name": "score", "delta_pct": -9.5, "p_value": 0.02}]}]
    recs += [ExperimentRecord.from_summary(line) for line in others]
    assert best_line(recs, "score") == "`f` -9.5% score on ? (p=0.02)"      # no platform on record: ?
    with pytest.raises(AttributeError):         # records, not their JSON lines
        best_line(lines, "score")
    body = pr_body(md("# report"), 7, "offline", True)
    assert "AI-generated" in body and body.rstrip().endswith("Closes #7")
    with pytest.raises(TypeError):                 # a report that did not come through jobs.guard.mdsafe
        pr_body("# report", 7, "offline", True)


# -- the run record ------------------------------------------------------------------------------
def test_run_record_round_trips_through_json_and_refuses_unknown_or_missing_fields():
    import json
    from bot.record import RecordError, changes, from_fields, to_fields
    rec = record(overrides=Overrides("score", ("x86",), 3.0), approval=ap.Approval("alice", "d1", "c1"))
    assert from_fields(json.loads(json.dumps(to_fields(rec)))) == rec
    assert changes(approval=None, overrides=Overrides(budget=1.0)) == {"approval": None, "overrides": {"budget": 1.0}}
    with pytest.raises(RecordError, match="colour"):
        changes(colour="red")
    partial = to_fields(rec)
    del partial["base_commit"]
    with pytest.raises(RecordError, match="base_commit"):
        from_fields(partial)


def test_settings_mask_the_app_key_in_every_sandbox(tmp_path):
    import os
    from bot.settings import Settings
    from jobs.guard import sandbox
    key = tmp_path / "app.pem"
    Settings.from_env({"AUTORESEARCH_APP_ID": "1", "AUTORESEARCH_PRIVATE_KEY_PATH": str(key),
                       "AUTORESEARCH_WEBHOOK_SECRET": "s"})
    assert os.path.realpath(key) in sandbox.hidden()
