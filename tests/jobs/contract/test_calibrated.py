"""jobs/contract/calibrated.py: the A/A calibrations are typed in memory and written exactly as the
dicts earlier versions wrote (state.json, summary.json, the calibration cache), so a run resumes
across versions and keys this version does not know survive."""
from __future__ import annotations

import json
import math

import pytest

from jobs.contract import ledger
from jobs.contract.calibrated import MetricCalibration, SimulatedCalibration, platform_calibrations
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import CalibrationOnly, RunSummary

# Every key `MetricCalibration.to_dict()` (dataclasses.asdict) wrote, in its order.
OLD_KEYS = ["ok", "n_pairs", "sd_log", "aa_delta_pct", "aa_p_value", "order_effect_pct", "drift", "drift_note",
            "floor_pct", "target_pct", "alpha_first", "mde_pct", "mean_pairs_at_mde", "mean_pairs_null",
            "false_win_rate", "repeats", "adjust", "prior", "flags", "note", "floor_raise_pct"]

# A primary metric's calibration as a run wrote it into state.json (20 pairs, order adjusted).
REAL = {
    "ok": True, "n_pairs": 20, "sd_log": 0.0123, "aa_delta_pct": 0.41, "aa_p_value": 0.52, "order_effect_pct": -0.8,
    "drift": True, "drift_note": "the second process of a pair runs -0.8% (p=0.0123); every pair is adjusted for it",
    "floor_pct": 1.37, "target_pct": 2.0, "alpha_first": 0.0136, "mde_pct": 3.1, "mean_pairs_at_mde": 14.2,
    "mean_pairs_null": 21.5, "false_win_rate": 0.0067, "repeats": 40, "adjust": ["order"],
    "prior": [[0.011, 1.0], [-0.004, -1.0], [0.002, 1.0]], "flags": ["tps: one slow process in arm B"],
    "note": "", "floor_raise_pct": 0.37,
}
SIMULATED = {"aa_delta_pct": 0.0001, "base_cycles": 123_456_789, "digests": ["out"], "seconds": 12.5,
             "native_seconds": 0.25, "separate_build": False, "derived": True, "command": "./bench", "timeout": 300.0}


def test_a_real_calibration_round_trips_with_an_unknown_key_in_its_place():
    data = {**REAL, "from_a_newer_version": {"x": [1, 2]}}
    c = MetricCalibration.from_json(data)
    assert c.floor_pct == 1.37 and c.adjust == ["order"] and c.prior[0] == [0.011, 1.0] and c.repeats == 40
    assert c.extra == {"from_a_newer_version": {"x": [1, 2]}}
    assert json.dumps(c.to_json()) == json.dumps(data)         # same keys, values and order


def test_an_unknown_key_keeps_its_place_among_the_known_ones():
    data = {"floor_pct": 2.0, "retired": 1, "repeats": 9}
    assert list(MetricCalibration.from_json(data).to_json()) == ["floor_pct", "retired", "repeats"]
    sim = {"base_cycles": 5, "newer": "x", "aa_delta_pct": 0.1}
    assert json.dumps(SimulatedCalibration.from_json(sim).to_json()) == json.dumps(sim)


def test_a_built_calibration_writes_the_keys_the_old_dict_wrote_in_their_order():
    assert list(MetricCalibration().to_json()) == OLD_KEYS
    assert MetricCalibration.from_json(REAL).to_json() == REAL
    built = SimulatedCalibration(**{k: v for k, v in SIMULATED.items()})
    assert json.dumps(built.to_json()) == json.dumps(SIMULATED)
    # the derived yardstick's command and timeout are written only for a derived one, as before
    plain = SimulatedCalibration(aa_delta_pct=0.1, base_cycles=1, digests=[], seconds=1.0, native_seconds=None)
    assert list(plain.to_json()) == ["aa_delta_pct", "base_cycles", "digests", "seconds", "native_seconds",
                                     "separate_build", "derived"]


def test_missing_keys_take_the_defaults_the_readers_used_and_are_not_written():
    c = MetricCalibration.from_json({})
    assert c.floor_pct is None and c.repeats is None and c.mde_pct is None and c.n_pairs is None
    assert c.prior == [] and c.adjust == [] and c.flags == [] and c.drift is False and c.note == ""
    assert c.floor_raise_pct == 0.0 and c.extra == {}
    assert c.to_json() == {}
    s = SimulatedCalibration.from_json({})
    assert s.digests is None and s.base_cycles is None and s.aa_delta_pct is None
    assert s.derived is False and s.separate_build is False and s.to_json() == {}


def test_not_an_object_is_refused():
    with pytest.raises(ValueError, match="JSON object"):
        MetricCalibration.from_json([1, 2])


def _old_state() -> dict:
    return {"run_id": "r1", "phase": "experiments", "platforms": ["local", "arm"],
            "calibration": {"local": {"score": {**REAL, "unknown": 1}, "rss": {**REAL, "flags": []}},
                            "arm": {"score": {"floor_pct": 1.0, "prior": [[0.01, 1.0, 0.0]]}}},
            "digests": {"local": ["out"], "arm": None}, "cpus": {"local": "CPU", "arm": "Graviton"},
            "simulate": {"local": {**SIMULATED, "kept": True}, "arm": {"aa_delta_pct": 0.1, "digests": []}}}


def test_a_state_json_written_by_the_dict_form_loads_typed_and_saves_identically(tmp_path):
    ledger.save_state(tmp_path, _old_state())
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    score = state.calibration["local"]["score"]
    assert isinstance(score, MetricCalibration) and score.floor_pct == 1.37 and score.extra == {"unknown": 1}
    assert state.calibration["arm"]["score"].repeats is None
    assert isinstance(state.simulate["local"], SimulatedCalibration) and state.simulate["local"].derived
    assert state.simulate["arm"].digests == [] and state.simulate["arm"].base_cycles is None
    assert state.to_json() == _old_state()
    state.save()
    assert (tmp_path / "state.json").read_bytes() == before
    state.save(phase="done")            # another field changed: the calibrations are written as they were
    assert json.loads((tmp_path / "state.json").read_text()) == {**_old_state(), "phase": "done"}


def test_the_constructor_and_save_take_a_json_form_or_the_types(tmp_path):
    state = RunState.load(tmp_path)
    state.save(calibration={"local": {"score": REAL}}, simulate={"local": SimulatedCalibration.from_json(SIMULATED)})
    assert state.calibration["local"]["score"].mde_pct == 3.1 and state.simulate["local"].command == "./bench"
    assert json.loads((tmp_path / "state.json").read_text()) == {"calibration": {"local": {"score": REAL}},
                                                                 "simulate": {"local": SIMULATED}}
    typed = platform_calibrations({"local": {"score": REAL}})
    assert RunState(tmp_path, calibration=typed).calibration == typed
    assert RunState(tmp_path, simulate={"local": SIMULATED}).simulate["local"].timeout == 300.0


def test_summary_and_calibration_only_carry_the_types_and_write_the_json_form():
    from summaries import run_summary
    summary = run_summary(calibration={"local": {"score": {**REAL, "mde_pct": None}}}, simulate={"local": SIMULATED})
    assert summary.calibration["local"]["score"].mde_pct is None
    assert summary.simulate["local"].base_cycles == 123_456_789
    data = summary.to_json()
    assert data["calibration"] == {"local": {"score": {**REAL, "mde_pct": None}}}
    assert data["simulate"] == {"local": SIMULATED}
    again = RunSummary.from_json(json.loads(ledger.dumps(data)))
    assert again.to_json() == data
    only = CalibrationOnly("r1", {"local": {"score": REAL}}, {"local": "CPU"})
    assert only.calibration["local"]["score"].floor_pct == 1.37


def test_an_infinite_mde_is_null_in_summary_json():
    c = MetricCalibration.from_json({**REAL, "mde_pct": math.inf})
    assert json.loads(ledger.dumps(c.to_json()))["mde_pct"] is None
