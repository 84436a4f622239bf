"""The dashboard's view and chart: pure functions over a run's files' contents."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.dashboard import chart, run_view
from jobs.api import RunState
from jobs.contract.model import ExperimentRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the bot tests' helpers
from recordfixtures import record  # noqa: E402


def rec(name, platform, status, delta=None, kind="experiment"):
    metrics = [] if delta is None else [{"name": "tg", "delta_pct": delta, "ci_low_pct": delta - 1,
                                         "ci_high_pct": delta + 1, "p_value": 0.01, "base_mean": 50.0,
                                         "head_mean": 50 * (1 + delta / 100)}]
    return ExperimentRecord.from_summary({"name": name, "hypothesis": name, "platform": platform, "status": status,
                                          "reason": status, "metrics": metrics, "kind": kind,
                                          "log": "secret build log"})


STATE = {"phase": "experiments", "platforms": ["x86", "arm"], "cost_usd": 3.456,
         "calibration": {"x86": {"tg": {"floor_pct": 1.0, "repeats": 8}}},
         "hypotheses": [{"id": h} for h in ("a", "b", "c", "d", "e")]}


def state(data: dict) -> RunState:
    """state.json's object, as `jobs.api.read_run` reads it."""
    return RunState.from_json(Path("out"), data)


def test_waves_follow_the_parallelism_and_the_first_unfinished_wave_runs():
    records = [rec(h, p, "keep", 2.0) for h in ("a", "b") for p in ("x86", "arm")] + [rec("c", "x86", "discard", 0.1)]
    v = run_view("o/r", "1-abc", state(STATE), records, parallel=2)
    assert [(w["experiments"], w["status"]) for w in v["waves"]] == [
        (["a", "b"], "done"), (["c", "d"], "running"), (["e"], "pending")]
    assert (v["done"], v["total"], v["cost_usd"], v["primary"]) == (2, 5, 3.46, "tg")
    assert v["experiments"][2]["cells"] == {"x86": v["experiments"][2]["cells"]["x86"],
                                            "arm": {"status": "pending", "reason": "", "delta_pct": None}}
    assert "secret build log" not in str(v)                  # logs are never part of the view
    assert not v["final"]


def test_final_state_comes_from_the_phase_or_the_apps_record():
    assert run_view("o/r", "1", state(dict(STATE, phase="done")), []).get("final")
    v = run_view("o/r", "1", state(STATE), [], record=record(state="cancelled", pr_url="https://x/pull/3"))
    assert v["final"] and v["state"] == "cancelled" and v["pr_url"] == "https://x/pull/3"


def test_chart_bars_are_placed_against_the_baseline():
    records = [rec("a", "x86", "keep", 10.0), rec("b", "x86", "discard", -5.0), rec("c", "x86", "crash"),
               rec("stack", "x86", "keep", 9.0, kind="stack")]
    ch = chart(run_view("o/r", "1", state(dict(STATE, platforms=["x86"])), records))
    bars = {b["label"]: b for b in ch["bars"]}
    assert set(bars) == {"a", "b", "stack @ x86"}             # nothing measured, no bar
    assert bars["a"]["x"] == ch["zero"] and bars["b"]["x"] + bars["b"]["w"] == ch["zero"]
    assert bars["a"]["w"] > bars["stack @ x86"]["w"] > bars["b"]["w"] > 0
    assert bars["a"]["ci"][0] < bars["a"]["x"] + bars["a"]["w"] < bars["a"]["ci"][1]


def test_the_state_is_read_typed_a_key_it_lacks_takes_its_default_and_an_unknown_one_changes_nothing():
    full = {**STATE, "base_commit": "b" * 40, "branch": "autoresearch/1", "agent": "offline",
            "hypotheses": [{"id": "a", "title": "fuse", "kind": "fusion", "rationale": "", "from_a_later_version": 1},
                           {"title": "no id: no row"}]}
    v = run_view("o/r", "1", state(full), [rec("a", "x86", "keep", 2.0)])
    assert [(e["name"], e["title"]) for e in v["experiments"]] == [("a", "fuse")]
    assert (v["base_commit"], v["branch"], v["agent"], v["phase"]) == ("b" * 12, "autoresearch/1", "offline",
                                                                       "experiments")
    assert v["calibration"] == {"x86": {"floor_pct": 1.0, "repeats": 8}}
    assert run_view("o/r", "1", state({**full, "written_by_a_later_version": {"x": 1}}),
                    [rec("a", "x86", "keep", 2.0)]) == v
    # An empty state.json (a run just begun): every field its default.
    v = run_view("o/r", "1", state({}), [])
    assert (v["phase"], v["state"], v["platforms"], v["cost_usd"], v["base_commit"], v["branch"], v["agent"],
            v["primary"], v["experiments"], v["calibration"], v["final"]) == (
        "—", "—", ["local"], 0.0, "", "", "", "", [], {}, False)


def test_the_view_takes_the_typed_state_and_records_not_their_json():
    with pytest.raises(AttributeError):
        run_view("o/r", "1", STATE, [])
    with pytest.raises(AttributeError):
        run_view("o/r", "1", state(STATE), [{"name": "a", "kind": "experiment"}])
