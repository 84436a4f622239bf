"""jobs/contract/events.py: one type per progress event; `to_dict` is the plain form the events had as
dicts (the same keys, an optional one only when set), and `from_dict` reads it back."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from jobs.contract import events as ev
from summaries import run_summary

SUMMARY = run_summary(branch_left=False, branch_note="nothing was kept")
# Each event as an emit site builds it, and the dict that site used to emit.
CASES: list[tuple[ev.Event, dict]] = [
    (ev.Phase("research"), {"type": "phase", "phase": "research"}),
    (ev.Phase("calibrate", platform="x86"), {"type": "phase", "phase": "calibrate", "platform": "x86"}),
    (ev.Phase("experiments", total=3), {"type": "phase", "phase": "experiments", "total": 3}),
    (ev.Phase("stack", total=0), {"type": "phase", "phase": "stack", "total": 0}),
    (ev.ResearchDone(("a", "b")), {"type": "research_done", "hypotheses": ["a", "b"]}),
    (ev.Calibrated("local", {"score": {"floor_pct": 1.5}}),
     {"type": "calibrated", "platform": "local", "calibration": {"score": {"floor_pct": 1.5}}}),
    (ev.Calibrated("local", {}, reused=True), {"type": "calibrated", "platform": "local", "calibration": {},
                                               "reused": True}),
    (ev.ExperimentStart("stack"), {"type": "experiment_start", "name": "stack"}),
    (ev.ExperimentStart("a@x86", platform="x86"), {"type": "experiment_start", "name": "a@x86", "platform": "x86"}),
    (ev.ExperimentDone("a", "keep", "score +3%"),
     {"type": "experiment_done", "name": "a", "status": "keep", "reason": "score +3%"}),
    (ev.ExperimentDone("a", "discard", "", resumed=True),
     {"type": "experiment_done", "name": "a", "status": "discard", "reason": "", "resumed": True}),
    (ev.StepProgress("a", "pair 1/10", 0.2), {"type": "progress", "name": "a", "message": "pair 1/10", "fraction": 0.2}),
    (ev.StepDone("a", "build_failed"), {"type": "step_done", "name": "a", "status": "build_failed"}),
    (ev.RunWarning("careful"), {"type": "warning", "message": "careful"}),
    (ev.Resume("experiments"), {"type": "resume", "phase": "experiments"}),
    (ev.Resume(None), {"type": "resume", "phase": None}),
    (ev.Done(SUMMARY), {"type": "done", "summary": SUMMARY.to_json()}),
    (ev.Cancelled(), {"type": "cancelled"}),
]


@pytest.mark.parametrize("event, plain", CASES, ids=[f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(CASES)])
def test_to_dict_is_the_old_dict_and_from_dict_reads_it_back(event, plain):
    assert event.to_dict() == plain
    assert list(event.to_dict()) == list(plain)           # the same keys in the same order, `type` first
    assert ev.from_dict(plain) == event
    assert type(event).from_dict(event.to_dict()) == event


def test_every_event_type_is_in_the_union_has_a_case_and_is_frozen():
    kinds = set(typing.get_args(ev.Event))
    assert kinds == set(ev.KINDS.values())
    assert kinds == {type(e) for e, _ in CASES}
    assert len({k.TYPE for k in kinds}) == len(kinds) == 11
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.RunWarning("x").message = "y"  # type: ignore[misc]


def test_a_dict_of_another_kind_is_refused():
    with pytest.raises(ValueError):
        ev.from_dict({"type": "nonsense"})
    with pytest.raises(ValueError):
        ev.RunWarning.from_dict({"type": "phase", "phase": "research"})
