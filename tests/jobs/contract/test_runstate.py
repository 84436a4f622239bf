"""`RunState` reads and writes exactly the state.json earlier versions wrote: a run resumes across
versions, and keys this version does not know survive."""
from __future__ import annotations

import json
import threading

import pytest

from jobs.contract import ledger
from jobs.contract.runstate import KEYS, RunState

# A state.json as the dict-based RunState wrote it at the end of a run: every key it ever saved.
TODAY = {
    "run_id": "20261203-193954-abc1234", "base_commit": "a" * 40, "target": "/src/t", "agent": "offline",
    "repeats_override": None, "phase": "done", "platforms": ["local"], "warnings": ["w1"],
    "branch": "autoresearch/20261203-193954-abc1234", "sandboxed": False, "unsandboxed_by": "--no-sandbox",
    "bench_env_names": ["OMP_NUM_THREADS"], "bench_env_digest": "d" * 64, "stopped": "",
    "cost_usd": 0.1234, "llm": {"calls": 3, "cost_usd": 0.01},
    "hypotheses": [{"id": "h1", "title": "t", "kind": "micro", "rationale": "r", "evidence": []}],
    "profile": None, "callgrind": None, "profile_missing": "not measured",
    "calibration": {"local": {"score": {"floor_pct": 1.0, "prior": [[0.01, 1.0, 0.0]]}}},
    "digests": {"local": ["out"]}, "cpus": {"local": "Some CPU"},
    "simulate": {"local": {"aa_delta_pct": 0.1, "digests": []}},
    "machines": {"local": {"isa": "x86_64", "load": [0.5]}},
    "noise": {"local": {"pool": [0.01], "history": []}},
    "stack_commit": "b" * 40, "stack_applied": ["h1", "h2"], "stack_dropped": ["h3"],
    "stack_without": {"h2": "c" * 40}, "stack_final": "b" * 40, "stack_survivors": ["h1"],
    "stack_unattributed": ["h2"], "stack_confirmed": True, "branch_left": True, "branch_note": "",
    "stack_kept_off": {"h4": "superseded by h1 (same line)"},
}


def test_every_key_of_todays_file_is_a_field():
    assert set(TODAY) == KEYS


def test_a_file_written_by_the_dict_state_loads_typed_and_is_written_back_identically(tmp_path):
    ledger.save_state(tmp_path, TODAY)                 # what the dict-based RunState wrote
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    assert not isinstance(state, dict)
    assert state.run_id == TODAY["run_id"] and state.stack_final == "b" * 40 and state.sandboxed is False
    assert state.calibration["local"]["score"].floor_pct == 1.0 and state.repeats_override is None
    assert state.to_json() == TODAY
    state.save()
    assert (tmp_path / "state.json").read_bytes() == before


def test_unknown_keys_survive_a_save(tmp_path):
    ledger.save_state(tmp_path, {**TODAY, "from_a_newer_version": {"x": 1}, "retired_key": [1, 2]})
    state = RunState.load(tmp_path)
    state.save(phase="stack", cost_usd=0.5)
    written = json.loads((tmp_path / "state.json").read_text())
    assert written == {**TODAY, "from_a_newer_version": {"x": 1}, "retired_key": [1, 2],
                       "phase": "stack", "cost_usd": 0.5}


def test_only_keys_loaded_or_saved_are_written(tmp_path):
    """A run just started holds few keys; a field's default must not add keys the file never had
    (a key's absence means something: `hypotheses`, `stack_final`, `stack_survivors`, `simulate`)."""
    state = RunState.load(tmp_path)
    assert not state.begun and state.hypotheses is None and state.stack_final is None and state.simulate is None
    state.save(run_id="r1", phase="research", calibration={})
    assert state.begun
    assert json.loads((tmp_path / "state.json").read_text()) == {"run_id": "r1", "phase": "research",
                                                                 "calibration": {}}
    again = RunState.load(tmp_path)
    assert again.to_json() == {"run_id": "r1", "phase": "research", "calibration": {}}
    assert again.cost_usd == 0.0 and again.branch_left is True and again.stack_applied == []


def test_save_refuses_a_key_state_json_does_not_have(tmp_path):
    state = RunState.load(tmp_path)
    with pytest.raises(TypeError, match="no field stack_finall"):
        state.save(stack_finall="x")
    assert not (tmp_path / "state.json").exists()


def test_saves_from_several_threads_are_all_kept(tmp_path):
    state = RunState.load(tmp_path)
    state.save(cost_usd=0.0)

    def add() -> None:
        for _ in range(50):
            with state.lock:
                state.save(cost_usd=state.cost_usd + 1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state.cost_usd == 200 and RunState.load(tmp_path).cost_usd == 200
