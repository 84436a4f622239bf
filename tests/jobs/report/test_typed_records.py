"""Issue 42, "typed all the way down": a run's records reach pr.md, the CLI's tables and the bot's reply
as `ExperimentRecord`s (their metrics `MetricResult`s), read by attribute, never by string key.

Two checks: pr.md renders from a summary built of records (a reader that went back to `e["name"]`
raises TypeError), and a static one over the readers' source (a string subscript or `.get(...)` on
a name bound to a record or a metric fails here before any run)."""
from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from jobs.contract.model import ExperimentRecord, MetricResult
from jobs.contract.runsummary import RunSummary
from jobs.report.report import render_pr
from summaries import NEUTRAL

READERS = ["jobs/report/report.py", "jobs/report/report_review.py", "jobs/report/review_facts.py",
           "jobs/run/reporting.py", "jobs/cli.py", "jobs/measure/simulate.py", "jobs/contract/runsummary.py",
           "bot/bench.py", "bot/dashboard/view.py", "bot/status.py", "jobs/contract/results.py",
           "jobs/agent/prompts.py", "jobs/agent/llm.py", "jobs/agent/offline.py"]
# (the dashboard's own view is plain data for its template, read by key.)
# Where records or metrics are iterated from: the summary's fields, a record's metrics.
RECORD_SOURCES = ("summary.experiments", "summary.stacks", "summary.attribution", ".metrics")
RECORD_TYPES = ("ExperimentRecord", "MetricResult")


def _bound(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple) and target.elts:     # `for platform, stack in summary.stacks.items()`
        return _bound(target.elts[-1])
    return []


def _record_names(fn: ast.AST) -> set[str]:
    """The names a function binds to a record or a metric (or to a list of them)."""
    names: set[str] = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for a in fn.args.args + fn.args.kwonlyargs:
            if a.annotation is not None and any(t in ast.unparse(a.annotation) for t in RECORD_TYPES):
                names.add(a.arg)
    for _ in range(3):            # a name bound from one bound a few lines above
        for node in ast.walk(fn):
            if isinstance(node, (ast.For, ast.comprehension)):
                if any(s in ast.unparse(node.iter) for s in RECORD_SOURCES) or \
                        any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.iter)):
                    names.update(_bound(node.target))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                value = ast.unparse(node.value)
                filtered = isinstance(node.value, ast.ListComp) and isinstance(node.value.elt, ast.Name) and \
                    isinstance(node.value.generators[0].iter, ast.Name) and node.value.generators[0].iter.id in names
                if filtered or value in ("summary.experiments", "summary.attribution") or \
                        any(s in value for s in (".metric(", "stacks.get(", "stacks[", ".from_summary(")):
                    names.update(_bound(node.targets[0]))
    return names


def string_key_reads(source: str) -> list[str]:
    """`name["key"]` and `name.get(...)` on a name bound to a record or a metric, per function."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = _record_names(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names \
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.append(f"{fn.name}: {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in names:
                found.append(f"{fn.name}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", READERS)
def test_no_reader_goes_back_to_string_keys_on_a_record(path):
    assert string_key_reads((ROOT / path).read_text(encoding="utf-8")) == []


def test_the_static_check_sees_a_string_key_read():
    old = '''
def rows(summary):
    for e in summary.experiments:
        m = e.metric("speed")
        yield e["name"], m["delta_pct"]
    for platform, st in summary.stacks.items():
        yield st.get("status")
def table(rec: ExperimentRecord):
    return rec["reason"]
'''
    assert sorted(string_key_reads(old)) == ["rows: e['name']", "rows: m['delta_pct']", "rows: st.get('status')",
                                             "table: rec['reason']"]


def _metric(delta: float) -> MetricResult:
    return MetricResult(name="speed", base_mean=1.0, base_sd=0.1, head_mean=1 + delta / 100, head_sd=0.1, n_base=9,
                        n_head=9, delta_pct=delta, p_value=0.01, ci_low_pct=delta - 1, ci_high_pct=delta + 1,
                        mde_pct=2.0, method="paired", verdict="win", alpha=0.02, n_pairs=9)


def test_pr_md_renders_from_records_and_reads_the_same_from_summary_json():
    kept = ExperimentRecord("r1", "fuse", "fuse", "local", "keep", "speed +5.0%", metrics=[_metric(5.0)],
                            runner={"pairs": 9, "stopped": "keep", "wall_base_s": 1.0, "wall_head_s": 0.95},
                            flags=["speed: a loaded machine"], log="the whole log")
    broken = ExperimentRecord("r1", "bad", "bad", "local", "checks_failed", "checks failed (exit 1)",
                              failure_output="case 1: FAIL")
    stack = replace(kept, name="stack", kind="stack", commit="b" * 40, metrics=[_metric(4.0)])
    summary = RunSummary(**{**NEUTRAL, "experiments": [kept, broken], "stacks": {"local": stack},
                            "attribution": [replace(kept, name="attribution:fuse", kind="attribution")],
                            "stack_applied": ["fuse"], "cpus": {"local": "cpu"}})
    assert all(isinstance(e, ExperimentRecord) for e in summary.experiments + summary.attribution)
    md = render_pr(summary)
    assert "| fuse | local |  | kept | +5.0% |" in md and "**speed +4.0%** on local" in md
    assert "case 1: FAIL" in md and "| fuse | local | 9 | keep |" in md and "speed: a loaded machine" in md
    assert render_pr(RunSummary.from_json(summary.to_json())) == md
