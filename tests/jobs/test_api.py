"""jobs/api.py: the preparation a run is planned from is saved once and read back equal, so the
pipeline, handed that research, ranks exactly what a fresh scan would have given it."""
from __future__ import annotations

import json
import os
import shutil

from conftest import ROOT
from jobs import api
from jobs.contract.config import Overrides, load_config
from jobs.research.offline import merge_sources, research

DEMO = ROOT / "examples" / "tinyllm"
BASE = "a" * 40


def _layout(tmp_path, run_id="1-aaaaaaa"):
    layout = api.RunLayout(tmp_path / "work", "octo", "tiny", run_id)
    shutil.copytree(DEMO, layout.clone, ignore=shutil.ignore_patterns("*.o", "tinyllm", "tinyllm_ref", "build"))
    return layout


def test_prepared_research_reads_back_equal_and_ranks_the_same(tmp_path):
    layout = _layout(tmp_path)
    (layout.clone / api.CANDIDATES_DIR).mkdir(parents=True)
    (layout.clone / api.CANDIDATES_DIR / "mine.patch").write_text("--- a/x\n+++ b/x\n")
    config = load_config(layout.clone).narrow(Overrides(budget=0.5))
    prep = api.prepare(layout, BASE, config, "local")
    assert prep.research.hypotheses and prep.research.findings and prep.research.detections
    assert [c.name for c in prep.candidates] == ["mine.patch"] and (layout.candidates / "mine.patch").is_file()
    assert prep.plan.experiments == len(prep.research.hypotheses) + 1 and prep.plan.budget_usd == 0.5

    loaded = api.load_preparation(layout, "local")
    assert (loaded.base, loaded.config, loaded.plan, loaded.candidates) == (BASE, config, prep.plan, prep.candidates)
    r, s = loaded.research, prep.research
    assert [h.to_dict() for h in r.hypotheses] == [h.to_dict() for h in s.hypotheses]
    assert (r.findings, r.detections, r.notes, sorted(r.recipes)) == (s.findings, s.detections, s.notes, sorted(s.recipes))
    fresh = research(layout.clone, config)
    assert [h.to_dict() for h in merge_sources(loaded.research, None, config).hypotheses] == \
           [h.to_dict() for h in merge_sources(fresh, None, config).hypotheses]


def test_a_preparation_that_does_not_read_back_is_made_again(tmp_path):
    layout = _layout(tmp_path)
    config = load_config(layout.clone)
    assert api.load_preparation(layout, "local") is None               # another machine: nothing saved here
    api.prepare(layout, BASE, config, "local")
    data = json.loads(layout.prepared.read_text())
    data["candidates"] = ["../../../etc/passwd"]                        # not a patch in candidates/
    layout.prepared.write_text(json.dumps(data))
    assert api.load_preparation(layout, "local") is None
    api.prepare(layout, BASE, config, "local")
    data = json.loads(layout.prepared.read_text())
    data["research"]["hypotheses"][0]["patch"] = "/tmp/evil.patch"      # research never makes patches
    layout.prepared.write_text(json.dumps(data))
    assert all(h.patch is None for h in api.load_preparation(layout, "local").research.hypotheses)
    layout.prepared.write_text("{not json")
    assert api.load_preparation(layout, "local") is None


def test_run_folders_are_listed_and_read_through_the_layout(tmp_path):
    from jobs.contract import ledger
    old, new = _layout(tmp_path, "1-old"), _layout(tmp_path, "2-new")
    for layout, phase, mtime in ((old, "done", 1_000_000), (new, "experiments", 2_000_000)):
        layout.out.mkdir(parents=True)
        ledger.save_state(layout.out, {"run_id": layout.run_id, "phase": phase, "platforms": ["local"]})
        os.utime(layout.out / ledger.STATE, (mtime, mtime))
    assert [lay.run_id for lay in api.list_runs(tmp_path / "work")][0] == "2-new"
    files = api.read_run(tmp_path / "work", "1-old", "octo/tiny")
    assert files.state.phase == "done" and files.primary == "tg_tps" and files.parallel == 1
    assert files.records == [] and files.summary is None
    assert api.read_run(tmp_path / "work", "1-old", "other/repo") is None
    assert api.read_run(tmp_path / "work", "../1-old") is None


def test_a_run_is_read_back_with_the_config_it_was_prepared_with(tmp_path):
    from jobs.contract import ledger
    layout = _layout(tmp_path)
    layout.out.mkdir(parents=True)
    ledger.save_state(layout.out, {"run_id": layout.run_id, "phase": "experiments", "platforms": ["local"]})
    api.prepare(layout, BASE, load_config(layout.clone).narrow(Overrides(metric="pp_tps")), "local")
    assert api.read_run(tmp_path / "work", layout.run_id).primary == "pp_tps"     # the command's metric=
    layout.prepared.unlink()
    assert api.read_run(tmp_path / "work", layout.run_id).primary == "tg_tps"     # the clone's own file


def test_a_run_folder_reads_back_typed_keeping_what_this_version_does_not_know(tmp_path):
    """state.json is a RunState (a key it lacks takes its field's default, an unknown one is kept, not
    an error), the ledger's lines ExperimentRecords (a metric's null stays None: not measured)."""
    from jobs.contract import ledger
    from jobs.contract.model import ExperimentRecord
    layout = _layout(tmp_path)
    layout.out.mkdir(parents=True)
    ledger.save_state(layout.out, {"run_id": layout.run_id, "cost_usd": 2.5, "hypotheses": [{"id": "a", "title": "t"}],
                                   "from_a_later_version": [1]})
    line = {"run_id": layout.run_id, "name": "a", "hypothesis": "a", "platform": "local", "status": "keep",
            "reason": "", "metrics": [{"name": "tg_tps", "delta_pct": None, "p_value": 0.01}], "log": "x"}
    (layout.out / ledger.LEDGER).write_text(json.dumps(line) + "\n")
    files = api.read_run(tmp_path / "work", layout.run_id)
    assert isinstance(files.state, api.RunState) and files.state.extra == {"from_a_later_version": [1]}
    assert (files.state.phase, files.state.platforms, files.state.cost_usd) == (None, [], 2.5)
    assert [(h.id, h.title) for h in files.state.hypotheses] == [("a", "t")]
    assert files.records == api.read_records(layout.out) == [ExperimentRecord.from_summary(line)]
    assert files.records[0].metric("tg_tps").delta_pct is None and files.records[0].kind == "experiment"
    assert api.spent_usd(layout.out) == 2.5 and api.spent_usd(tmp_path / "nowhere") == 0.0
    # the one number is read on its own: another field of the wrong shape does not hide it
    ledger.save_state(layout.out, {"run_id": layout.run_id, "cost_usd": 1.25, "hypotheses": "not a list"})
    assert api.spent_usd(layout.out) == 1.25 and api.read_run(tmp_path / "work", layout.run_id).state.cost_usd == 0.0
    for wrong in ("3", None, True, [1]):
        ledger.save_state(layout.out, {"run_id": layout.run_id, "cost_usd": wrong})
        assert api.spent_usd(layout.out) == 0.0, wrong
    ledger.save_state(layout.out, {"run_id": layout.run_id, "cost_usd": 2.5, "hypotheses": [{"id": "a", "title": "t"}],
                                   "from_a_later_version": [1]})
    (layout.out / ledger.LEDGER).write_text("{not json\n" + json.dumps(line) + "\n")
    assert api.read_records(layout.out) == []           # an unreadable ledger reads as empty


def test_a_hand_edited_run_folder_reads_as_what_can_be_read(tmp_path):
    """A line of the ledger that is no record is left out (the others are shown); a state.json whose
    field has the wrong shape reads as a state not begun: the dashboard and the budget never fail on it."""
    from jobs.contract import ledger
    layout = _layout(tmp_path)
    layout.out.mkdir(parents=True)
    line = {"run_id": layout.run_id, "name": "a", "platform": "local", "status": "keep", "metrics": []}
    (layout.out / ledger.LEDGER).write_text(json.dumps([1, 2]) + "\n" + json.dumps(line) + "\n")
    assert [r.name for r in api.read_records(layout.out)] == ["a"]
    ledger.save_state(layout.out, {"run_id": layout.run_id, "cost_usd": 2.5, "hypotheses": ["not an object"]})
    files = api.read_run(tmp_path / "work", layout.run_id)
    assert files.state.hypotheses is None and files.state.cost_usd == 0.0 and [r.name for r in files.records] == ["a"]
