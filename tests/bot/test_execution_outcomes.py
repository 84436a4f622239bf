"""Issue 42, one front door: the flow's helpers return what `bot.flow.Flow` does next instead of
calling back into it. `bot.execution` returns `Finish`/`Publish`/`TakeOver`/`Leave` values and
`bot.planning` is handed `planning.Clones` (ports), never the flow; only `Flow` ends
(`Flow.finish`) and publishes (`Flow.publish`) a run."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot import approval as ap
from bot import execution, planning
from bot.flow import Flow
from bot.ports import Outcome
from bot.status import unresumable_message
from jobs.contract.errors import RunCancelled
from recordfixtures import record

BOT = Path(__file__).resolve().parents[2] / "bot"
HELPERS = ("execution.py", "planning.py")
FLOW_TYPES = {"Flow", "RunFlow", "PlanningFlow", "BenchFlow"}


def callbacks(source: str) -> list[str]:
    """Where `source` can reach the flow: an import of `bot.flow`, a parameter named `flow` or
    typed by a flow protocol, or a call of a `finish`/`publish`/`refresh_status` of something
    (`flow.finish(...)`, `self.flow.publish(...)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if (node.module or "").endswith("flow") or (node.module or "bot") == "bot" and "flow" in names \
                    or names & FLOW_TYPES:
                found.append(f"import:{node.lineno}")
        elif isinstance(node, ast.Import) and any(a.name == "bot.flow" for a in node.names):
            found.append(f"import:{node.lineno}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if arg.arg == "flow" or set(re.findall(r"\w+", note)) & FLOW_TYPES:
                    found.append(f"parameter {arg.arg}:{node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"finish", "publish"}:
            found.append(f"{ast.unparse(node.func)}:{node.lineno}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "flow":
            found.append(f"{ast.unparse(node)}:{node.lineno}")
    return sorted(set(found))


def test_the_callback_check_sees_a_callback():
    bad = ("from .ports import RunFlow\nfrom . import flow as f\n"
           "def execute(flow: RunFlow, rec):\n    flow.finish(rec, 'fail')\n"
           "def g(f: 'PlanningFlow'):\n    f.publish(1)\n")
    assert callbacks(bad) == ["f.publish:6", "flow.finish:4", "import:1", "import:2", "parameter f:5",
                              "parameter flow:3"]
    assert callbacks("def f(store: RunStore, refresh_status):\n    store.update_run('r')\n") == []


@pytest.mark.parametrize("module", HELPERS)
def test_the_helpers_take_no_flow_and_never_call_back_into_it(module):
    assert callbacks((BOT / module).read_text(encoding="utf-8")) == []


def test_the_helpers_return_outcomes_flow_carries_out():
    assert {"Finish", "Publish", "TakeOver", "Leave"} <= set(vars(execution))
    flow_source = (BOT / "flow.py").read_text(encoding="utf-8")
    assert "execution.execute(self" not in flow_source and "execution.resume(self" not in flow_source
    assert "planning.prepare(self," not in flow_source and "planning.prepared(self," not in flow_source


# -- what each ending is: pure ---------------------------------------------------------------------

def test_a_failed_pipeline_finishes_the_run_as_failed_with_its_error():
    rec, exc = record(run_id="7-x"), RuntimeError("boom " * 400)
    step = execution.run_failed(rec, exc)
    assert (step.rec, step.event) == (rec, "fail")
    assert step.fields == {"message": f"❌ the run failed: {str(exc)[:1500]}"}
    assert step.outcome == Outcome(ap.FAILED, "7-x", step="run", error=exc, message=str(exc)[:500])


def test_a_cancelled_pipeline_says_what_stays_in_the_ledger():
    step = execution.run_cancelled(record(run_id="7-x"), 3)
    assert step.event == "cancelled" and step.fields == {
        "phase": "cancelled",
        "message": "🛑 cancelled: jobs stopped and machines released; 3 finished experiment(s) stay on record in the "
                   "ledger"}
    assert step.outcome == Outcome(ap.CANCELLED, "7-x", step="run")


def test_a_published_run_finishes_done_with_the_fields_publish_returned(tmp_path):
    fields = {"pr_url": "https://x/pull/4", "pr_number": 4, "message": "draft pull request: https://x/pull/4"}
    prep, summary = SimpleNamespace(layout=SimpleNamespace(out=tmp_path)), SimpleNamespace(cost_usd=1.25)
    step = execution.run_done(record(run_id="7-x"), prep, summary, fields)
    assert step.event == "finish" and step.fields == {"phase": "done", "cost_usd": 1.25, **fields}
    assert step.outcome == Outcome(ap.DONE, "7-x", step="done", summary=summary, out=tmp_path,
                                   pr_url="https://x/pull/4", fields=fields)
    nothing = execution.run_done(record(), prep, SimpleNamespace(), {"message": "nothing to try"})   # RunStopped
    assert nothing.fields == {"phase": "done", "cost_usd": 0.0, "message": "nothing to try"}
    assert nothing.outcome.pr_url == ""


def test_a_failed_publication_finishes_the_run_as_failed_at_publish():
    exc = OSError("push refused")
    step = execution.publish_failed(record(run_id="7-x"), exc)
    assert step.event == "fail" and step.fields == {"message": "❌ publishing the result failed: push refused"}
    assert step.outcome == Outcome(ap.FAILED, "7-x", step="publish", error=exc, message="push refused")


def test_a_lost_run_ends_cancelled_or_failed_with_its_reason():
    cancelled = execution.resume_ended(record(run_id="7-x"), "", True, 2)
    assert cancelled.event == "cancelled" and cancelled.fields == {
        "phase": "cancelled",
        "message": "🛑 cancelled while it had no worker; 2 finished experiment(s) stay on record in the ledger"}
    assert cancelled.outcome == Outcome(ap.CANCELLED, "7-x", step="resume")
    failed = execution.resume_ended(record(run_id="7-x"), "its run folder is gone", False, 2)
    assert failed.event == "fail"
    assert failed.fields == {"phase": "lost", "message": unresumable_message("its run folder is gone", 2)}
    assert failed.outcome == Outcome(ap.FAILED, "7-x", step="resume", message="its run folder is gone")


def test_only_a_running_run_whose_worker_was_lost_is_taken_over():
    assert execution.resumable(record(state=ap.RUNNING, lost_at=5.0))
    assert not execution.resumable(record(state=ap.RUNNING, lost_at=0.0))
    assert not execution.resumable(record(state=ap.QUEUED, lost_at=5.0))
    assert not execution.resumable(None)


# -- execute and resume return what to do; they end nothing themselves ------------------------------

class Lease:
    holder = "w1"

    def __init__(self, lost: bool = False) -> None:
        self.lost, self.released = lost, 0

    def release(self) -> None:
        self.released += 1


def _execute(monkeypatch, tmp_path, start, lease=None, interrupts_cancel=False):
    monkeypatch.setattr(execution, "scrub_environment", lambda: None)     # not this test process's
    monkeypatch.setattr(execution.api, "start", start)
    monkeypatch.setattr(execution.api, "finished_experiments", lambda out: 3)
    prep = SimpleNamespace(layout=SimpleNamespace(out=tmp_path), base="b" * 40,
                           config=SimpleNamespace(agent="none", primary=SimpleNamespace(name="ms")))
    refreshed = []
    lease = lease or Lease()
    step = execution.execute(record(run_id="7-x"), prep, lease, store=None,
                             place=SimpleNamespace(executor="local", operator=None),
                             refresh_status=refreshed.append, cancel_requested=lambda: False,
                             published=lambda: "where", interrupts_cancel=interrupts_cancel)
    assert refreshed == ["7-x"] and lease.released == 0       # the status first; the lease is the caller's
    return step, prep


def test_execute_returns_publish_when_the_pipeline_returned(monkeypatch, tmp_path):
    summary = SimpleNamespace(cost_usd=0.5)
    seen = {}

    def start(prep, **kw):
        seen.update(kw)
        return summary
    step, prep = _execute(monkeypatch, tmp_path, start)
    assert isinstance(step, execution.Publish) and (step.prep, step.summary) == (prep, summary)
    assert seen["published"] == "where" and seen["should_stop"]() is False


@pytest.mark.parametrize("raised,interrupts,event", [(RuntimeError("boom"), False, "fail"),
                                                     (RunCancelled("stop"), False, "cancelled"),
                                                     (KeyboardInterrupt(), True, "cancelled")])
def test_execute_returns_how_a_raising_pipeline_ends(monkeypatch, tmp_path, raised, interrupts, event):
    def start(prep, **kw):
        raise raised
    step, _ = _execute(monkeypatch, tmp_path, start, interrupts_cancel=interrupts)
    assert isinstance(step, execution.Finish) and step.event == event
    if event == "cancelled":
        assert step == execution.run_cancelled(record(run_id="7-x"), 3)


def test_execute_writes_nothing_once_the_lease_is_lost(monkeypatch, tmp_path):
    step, _ = _execute(monkeypatch, tmp_path, lambda prep, **kw: SimpleNamespace(), lease=Lease(lost=True))
    assert step == execution.lost("7-x") and step.outcome.step == "lost" and step.outcome.state == ap.RUNNING


def test_resume_returns_take_over_or_the_ending(monkeypatch, tmp_path):
    layout = SimpleNamespace(out=tmp_path)
    dropped = []
    monkeypatch.setattr(execution.api, "clean_worktrees", lambda layout: None)
    monkeypatch.setattr(execution.api, "drop_branches", dropped.append)
    monkeypatch.setattr(execution.api, "finished_experiments", lambda out: 4)
    monkeypatch.setattr(planning, "record_plan_id", lambda prep, rec: rec.plan_digest)
    rec = record(run_id="7-x", state=ap.RUNNING, lost_at=1.0,
                 approval=ap.Approval("bob", "d" * 16, "b" * 40))
    prep = SimpleNamespace(base="b" * 40)
    monkeypatch.setattr(execution.api, "load_preparation", lambda layout, executor: prep)
    assert ap.may_start(rec.approval, rec.plan_digest, prep.base)
    assert execution.resume(rec, layout, "local", lambda: False) == execution.TakeOver(rec, prep)
    assert dropped == []
    assert execution.resume(rec, layout, "local", lambda: True) == execution.resume_ended(rec, "", True, 4)
    monkeypatch.setattr(execution.api, "load_preparation", lambda layout, executor: None)
    why = "its run folder (clone, preparation) is not on this worker"
    assert execution.resume(rec, layout, "local", lambda: False) == execution.resume_ended(rec, why, False, 4)
    assert dropped == [layout, layout]


# -- Flow carries them out -------------------------------------------------------------------------

def test_flow_finishes_publishes_and_only_then_releases_the_lease(monkeypatch, tmp_path):
    events = []
    lease = Lease()
    lease.release = lambda: events.append("release")
    flow = Flow(place=None, store=None, gh=None, token=None, launcher=SimpleNamespace(interrupts_cancel=False),
                git=None)
    monkeypatch.setattr(flow, "finish", lambda rec, event, **fields: events.append((event, fields)), raising=False)
    prep, summary = SimpleNamespace(layout=SimpleNamespace(out=tmp_path)), SimpleNamespace(cost_usd=2.0)
    monkeypatch.setattr(execution, "execute", lambda rec, prep_, lease_, **kw: execution.Publish(rec, prep_, summary))

    def publish(rec, prep_, summary_):
        events.append("publish")
        return {"pr_url": "u", "message": "draft pull request: u"}
    monkeypatch.setattr(flow, "publish", publish, raising=False)
    out = flow.execute(record(run_id="7-x"), prep, lease)
    assert events == ["publish", ("finish", {"phase": "done", "cost_usd": 2.0, "pr_url": "u",
                                             "message": "draft pull request: u"}), "release"]
    assert out.state == ap.DONE and out.pr_url == "u"

    events.clear()

    def refused(rec, prep_, summary_):
        raise OSError("push refused")
    monkeypatch.setattr(flow, "publish", refused, raising=False)
    out = flow.execute(record(run_id="7-x"), prep, lease)
    assert events == [("fail", {"message": "❌ publishing the result failed: push refused"}), "release"]
    assert (out.state, out.step) == (ap.FAILED, "publish")

    events.clear()
    monkeypatch.setattr(execution, "execute", lambda *a, **kw: execution.lost("7-x"))
    assert flow.execute(record(run_id="7-x"), prep, lease).step == "lost" and events == ["release"]
