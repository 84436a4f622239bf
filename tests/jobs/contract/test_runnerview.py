"""jobs/contract/runnerview.py (issue 42): the runner's own view of an experiment (`ExperimentRecord.runner`)
and a calibration record's `calibration` are typed in memory and written exactly as the dicts earlier
versions wrote (experiments.jsonl, summary.json): same keys, same values, same order, unknown keys kept."""
from __future__ import annotations

import json
import math

from jobs.contract import ledger
from jobs.contract.calibrated import MetricCalibration
from jobs.contract.model import ExperimentRecord
from jobs.contract.runnerview import RunnerView, SimulatedView, WallGuard

# A stack's runner view as a yardstick run wrote it (judge_yardstick: the wall clock's view, its
# carry-over, then the simulated cycles and the guard), with a key from a newer version.
RUNNER = {
    "pairs": 7, "stopped": "guarded", "sandboxed": True, "wall_base_s": 0.812, "wall_head_s": 0.774,
    "cpu_base_s": 0.79, "cpu_head_s": 0.751, "steps": {"build_base": 41.2, "build_candidate": 40.8, "checks": 3.1},
    "carry_over_pct": -0.41, "carry_over_p": 0.6123,
    "simulated": {"base_cycles": 1_234_567_890, "head_cycles": 1_200_000_000, "delta_pct": -2.8,
                  "floor_pct": 0.5, "seconds": {"A": 12.1, "B": 11.9}, "model": "Ir + 10 * L1 misses",
                  "from_a_newer_simulator": 1},
    "wall_guard": {"lo_pct": -1.9, "hi_pct": None, "alpha": 0.05, "tolerance_pct": 3.0, "pairs": 7,
                   "loss_p": 0.31, "confirmed": True},
    "from_a_newer_version": {"x": [1, 2]},
}

# One line of experiments.jsonl, its keys in the record's field order.
LINE = {
    "run_id": "20250101-abc", "name": "fuse_loops", "hypothesis": "fuse_loops", "platform": "local", "status": "keep",
    "reason": "simulated cycles -2.80%", "commit": "b" * 40, "base_commit": "a" * 40,
    "metrics": [{"name": "tps", "base_mean": 100.0, "base_sd": 1.0, "head_mean": 101.0, "head_sd": 1.1, "n_base": 7,
                 "n_head": 7, "delta_pct": 1.0, "p_value": 0.2, "ci_low_pct": -1.9, "ci_high_pct": 3.9,
                 "mde_pct": 4.0, "method": "sequential", "verdict": "no detectable difference", "note": "",
                 "alpha": 0.01, "e_value": 1.5, "n_pairs": 7}],
    "seconds": 120.5, "cost_usd": 0.0, "cpu": "Xeon", "log": "", "kind": "stack", "flags": [], "alpha": 0.01,
    "slot": None, "runner": RUNNER, "hypothesis_kind": "stack", "skip_cause": None, "regressions": [],
    "calibration": {},
}

CALIBRATION_RECORD = {
    **LINE, "name": "calibration", "hypothesis": "A/A", "status": "ok", "kind": "calibration", "metrics": [],
    "runner": {"pairs": 20, "sandboxed": True, "steps": {"build_base": 40.0}},
    "calibration": {"tps": {"ok": True, "n_pairs": 20, "sd_log": 0.0123, "floor_pct": 1.37, "mde_pct": None,
                            "adjust": ["order"], "flags": [], "note": "", "floor_raise_pct": 0.37,
                            "from_a_newer_version": "kept"}},
}


def test_a_real_record_line_round_trips_with_its_nested_parts_and_unknown_keys():
    rec = ExperimentRecord.from_dict(json.loads(json.dumps(LINE)))
    r = rec.runner
    assert isinstance(r, RunnerView) and r.pairs == 7 and r.stopped == "guarded" and r.steps["checks"] == 3.1
    assert r.cpu_head_s == 0.751 and r.carry_over_p == 0.6123 and r.reused_from is None
    assert isinstance(rec.simulated, SimulatedView) and rec.simulated.delta_pct == -2.8
    assert rec.simulated.seconds == {"A": 12.1, "B": 11.9} and rec.simulated.extra == {"from_a_newer_simulator": 1}
    g = rec.wall_guard
    assert isinstance(g, WallGuard) and g.pairs == 7 and g.loss_p == 0.31 and g.confirmed is True
    assert g.hi_pct is None and g.noisy is None
    assert r.extra == {"from_a_newer_version": {"x": [1, 2]}}
    assert json.dumps(rec.to_dict()) == json.dumps(LINE)                  # same keys, values, order
    assert ledger.dumps(rec.to_dict(), sort_keys=True) == ledger.dumps(LINE, sort_keys=True)
    summary = {k: v for k, v in LINE.items() if k != "log"}
    back = ExperimentRecord.from_summary(json.loads(json.dumps(rec.summary_dict())))
    assert json.dumps(back.summary_dict()) == json.dumps(summary)


def test_an_old_line_without_the_yardstick_parts_loads_with_the_defaults_readers_took():
    old = {**LINE, "runner": {"pairs": 3, "stopped": "", "sandboxed": True, "wall_base_s": None, "wall_head_s": None,
                              "cpu_base_s": None, "cpu_head_s": None, "steps": {}}}
    del old["calibration"], old["hypothesis_kind"]
    rec = ExperimentRecord.from_dict(old)
    assert rec.simulated is None and rec.wall_guard is None and rec.runner.carry_over_pct is None
    assert rec.runner.wall_base_s is None and rec.calibration == {}
    assert json.dumps(rec.to_dict()["runner"]) == json.dumps(old["runner"])
    bare = ExperimentRecord.from_dict({k: v for k, v in LINE.items() if k != "runner"})
    assert bare.runner.pairs == 0 and bare.runner.stopped == "" and bare.to_dict()["runner"] == {}
    # an empty part reads as none, as the mapping `{}` did; it is still written back
    empty = ExperimentRecord.from_dict({**LINE, "runner": {"pairs": 1, "simulated": {}, "wall_guard": {}}})
    assert empty.simulated is None and empty.wall_guard is None
    assert empty.to_dict()["runner"] == {"pairs": 1, "simulated": {}, "wall_guard": {}}


def test_a_calibration_records_calibration_round_trips_typed():
    rec = ExperimentRecord.from_dict(json.loads(json.dumps(CALIBRATION_RECORD)))
    c = rec.calibration["tps"]
    assert isinstance(c, MetricCalibration) and c.floor_pct == 1.37 and c.mde_pct is None and c.adjust == ["order"]
    assert c.extra == {"from_a_newer_version": "kept"}
    assert json.dumps(rec.to_dict()) == json.dumps(CALIBRATION_RECORD)
    assert rec.runner.keys == ("pairs", "sandboxed", "steps")


def test_a_built_view_writes_the_keys_its_producers_wrote_in_their_order():
    view = RunnerView(pairs=5, stopped="keep", sandboxed=True, wall_base_s=1.0, wall_head_s=0.9, cpu_base_s=None,
                      cpu_head_s=None, steps={"build_base": 1.0})
    assert list(view.to_json()) == ["pairs", "stopped", "sandboxed", "wall_base_s", "wall_head_s", "cpu_base_s",
                                    "cpu_head_s", "steps"]
    view.carry_over_pct, view.carry_over_p = -0.3, 0.5
    view.simulated = SimulatedView(base_cycles=10, head_cycles=9, delta_pct=-10.0, floor_pct=0.5,
                                   seconds={"A": 1.0, "B": 1.0}, model="m")
    view.wall_guard = WallGuard(lo_pct=-1.0, hi_pct=math.inf, alpha=0.05, tolerance_pct=3.0, pairs=5)
    view.wall_guard.noisy = True
    view.wall_guard.confirmed = False
    out = view.to_json()
    assert list(out)[8:] == ["carry_over_pct", "carry_over_p", "simulated", "wall_guard"]
    assert list(out["simulated"]) == ["base_cycles", "head_cycles", "delta_pct", "floor_pct", "seconds", "model"]
    assert out["wall_guard"] == {"lo_pct": -1.0, "hi_pct": math.inf, "alpha": 0.05, "tolerance_pct": 3.0, "pairs": 5,
                                 "noisy": True, "confirmed": False}
    assert list(out["wall_guard"])[-2:] == ["noisy", "confirmed"]
    assert RunnerView.partial(reused_from="run-1").to_json() == {"reused_from": "run-1"}
    assert RunnerView.partial().to_json() == {}
    assert ExperimentRecord("r", "n", "h", "p", "ok", "").to_dict()["runner"] == {}
    again = RunnerView.from_json(json.loads(ledger.dumps(out)))
    assert again.wall_guard.hi_pct is None and json.dumps(again.to_json()) == ledger.dumps(out)
