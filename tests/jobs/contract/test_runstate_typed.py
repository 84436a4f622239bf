"""Issue 42: `RunState.hypotheses`, `.machines` and `.noise` are typed (`Hypothesis`, `MachineFacts`,
`NoiseTrack`), and a state.json the dict-based fields wrote loads typed and is written back byte for
byte, keys this version does not know included; the summary's forms (`NoiseSeen`, `MachineFacts` with
the load summed up, the public `Hypothesis`) write the JSON they always did."""
from __future__ import annotations

import json

from jobs.contract import ledger
from jobs.contract.machinefacts import MachineFacts
from jobs.contract.model import Evidence, Hypothesis
from jobs.contract.noisetrack import NoiseEntry, NoiseSeen, NoiseTrack
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import RunSummary

HYPOTHESIS = {"id": "h1", "title": "Fuse A and B", "kind": "fusion", "rationale": "one pass", "expected": "",
              "ops": ["add"], "evidence": [{"where": "src/ops.c:12", "note": "copy pass"}], "score": 0.5,
              "bound_pct": None, "recipe": "fuse", "patch": None, "generated": "", "measured_share": 0.3,
              "variant_of": None}
# An older version's hypothesis: fewer keys, another order, keys this version does not know.
OLDER = {"title": "Unroll", "id": "h2", "kind": "micro", "rationale": "r", "retired": 1,
         "evidence": [{"note": "hot loop", "where": "src/loop.c:3", "line_text": "for (;;)"}]}
MACHINE = {"cpu": "AMD EPYC", "cpus": 2, "arch": "x86_64", "isa": "avx2", "flags": ["avx2", "fma"],
           "kernel": "6.1", "compiler": "gcc 12.2", "load": [0.5, 1.25]}
OLD_FORM = {
    "run_id": "r1", "phase": "experiments", "hypotheses": [HYPOTHESIS, OLDER],
    "machines": {"local": MACHINE, "arm": {"isa": "neon", "load": [], "numa": 2}},
    "noise": {"local": {"pool": [0.01, -0.02], "history": [
        {"name": "h1", "pairs": 8, "noise_pct": 1.23}, {"noise_pct": 2.0, "name": "h2", "pairs": 6, "seed": 7}]},
        "arm": {"history": [], "from_a_newer_version": True}},
    "from_a_newer_version": {"x": 1},
}


def test_an_old_form_state_loads_typed_and_is_written_back_byte_for_byte(tmp_path):
    ledger.save_state(tmp_path, OLD_FORM)
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    h1, h2 = state.hypotheses
    assert isinstance(h1, Hypothesis) and h1 == Hypothesis.from_dict(HYPOTHESIS)
    assert h2.id == "h2" and h2.evidence == [Evidence("src/loop.c:3", "hot loop")] and h2.variant_of is None
    local = state.machines["local"]
    assert isinstance(local, MachineFacts) and local.isa == "avx2" and local.cpus == 2 and local.load == [0.5, 1.25]
    assert state.machines["arm"].extra == {"numa": 2} and state.machines["arm"].cpus is None
    track = state.noise["local"]
    assert isinstance(track, NoiseTrack) and track.pool == [0.01, -0.02]
    assert track.history == [NoiseEntry("h1", 8, 1.23), NoiseEntry("h2", 6, 2.0, extra={"seed": 7})]
    assert state.noise["arm"].pool == [] and state.noise["arm"].extra == {"from_a_newer_version": True}
    assert state.to_json() == OLD_FORM                                  # (the file sorts its keys)
    state.save()
    assert (tmp_path / "state.json").read_bytes() == before
    state.save(phase="stack")
    assert json.loads((tmp_path / "state.json").read_text()) == {**OLD_FORM, "phase": "stack"}


def test_typed_values_saved_write_the_json_the_dict_fields_wrote(tmp_path):
    state = RunState.load(tmp_path)
    made = Hypothesis("h3", "t", "micro", "r", evidence=[Evidence("a.c:1")])
    state.save(hypotheses=[made], noise={"local": NoiseTrack(pool=[0.1], history=[NoiseEntry("h3", 4, 0.5)])},
               machines={"local": MachineFacts.from_json(MACHINE)})
    made.title = "changed after saving"                                 # the state holds its own copy
    written = json.loads((tmp_path / "state.json").read_text())
    assert written["hypotheses"] == [Hypothesis("h3", "t", "micro", "r", evidence=[Evidence("a.c:1")]).to_dict()]
    assert list(state.to_json()["noise"]["local"]) == ["pool", "history"]   # the order the dict was built in
    assert written["noise"]["local"]["history"] == [{"name": "h3", "pairs": 4, "noise_pct": 0.5}]
    assert written["machines"] == {"local": MACHINE}
    assert RunState.load(tmp_path).hypotheses[0].title == "t"


def test_a_loaded_hypothesis_changed_is_written_as_its_to_dict(tmp_path):
    ledger.save_state(tmp_path, OLD_FORM)
    state = RunState.load(tmp_path)
    h2 = state.hypotheses[1]
    h2.title = "Unroll by 8"
    state.save(hypotheses=[state.hypotheses[0], h2])
    written = json.loads((tmp_path / "state.json").read_text())["hypotheses"]
    assert written == [HYPOTHESIS, h2.to_dict()]


def test_the_summary_forms_write_what_they_always_did():
    track = NoiseTrack.from_json(OLD_FORM["noise"]["local"])
    seen = NoiseSeen.of(track)
    assert json.dumps(seen.to_json()) == json.dumps({"history": OLD_FORM["noise"]["local"]["history"], "pool_pairs": 2})
    assert NoiseSeen.from_json(seen.to_json()).to_json() == seen.to_json()
    odd = MachineFacts.from_json({"load": [1.0], "isa": "avx2", "numa": 2})
    summed = odd.with_load({"min": 1.0, "max": 1.0, "mean": 1.0})
    assert json.dumps(summed.to_json()) == json.dumps({"isa": "avx2", "numa": 2,
                                                       "load": {"min": 1.0, "max": 1.0, "mean": 1.0}})
    assert list(MachineFacts(cpu="X").with_load({}).to_json())[-1] == "load"


def test_a_summary_reads_its_hypotheses_machines_and_noise_typed():
    from summaries import run_summary
    s = run_summary(hypotheses={"h1": HYPOTHESIS}, machines={"local": {**MACHINE, "load": {"min": 0.5, "max": 1.25,
                                                                                      "mean": 0.88}}},
                noise={"local": {"history": [{"name": "h1", "noise_pct": 1.0, "pairs": 8}], "pool_pairs": 8}})
    assert s.hypotheses["h1"] == Hypothesis.from_dict(HYPOTHESIS) and s.machines["local"].kernel == "6.1"
    assert s.noise["local"].history[0].pairs == 8 and s.noise["local"].pool_pairs == 8
    data = s.to_json()
    assert data["hypotheses"] == {"h1": HYPOTHESIS} and data["machines"]["local"]["load"]["max"] == 1.25
    assert json.dumps(data["noise"]) == json.dumps(
        {"local": {"history": [{"name": "h1", "noise_pct": 1.0, "pairs": 8}], "pool_pairs": 8}})
    assert RunSummary.from_json(json.loads(json.dumps(data))).to_json() == data


def test_the_models_spend_is_typed_and_written_back_as_read(tmp_path):
    from jobs.contract.runstate import LlmSpend
    older = {"cost_usd": 0.01, "calls": 3, "cache_tokens": 7}           # another order, a key this version lacks
    ledger.save_state(tmp_path, {"run_id": "r1", "llm": older})
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    assert (state.llm.calls, state.llm.cost_usd, state.llm.stopped) == (3, 0.01, "")
    assert isinstance(state.llm, LlmSpend) and state.llm.extra == {"cache_tokens": 7}
    state.save()
    assert (tmp_path / "state.json").read_bytes() == before
    (tmp_path / "new").mkdir()
    fresh = RunState.load(tmp_path / "new")
    assert fresh.llm.cost_usd == 0.0 and "llm" not in fresh.to_json()            # not written until saved
    fresh.save(llm={"calls": 1, "input_tokens": 5, "output_tokens": 2, "cost_usd": 0.5, "stopped": ""})
    assert isinstance(fresh.llm, LlmSpend) and fresh.llm.cost_usd == 0.5


def test_the_summarys_error_control_is_typed_and_an_older_empty_one_is_written_back_empty():
    from jobs.contract.runsummary import ErrorControl
    base = dict(run_id="r", target="t", repo="", base_commit="b" * 40, branch="", platform="local",
                platforms=["local"], cpus={}, cpu="", machines={}, agent="offline", primary="m", calibration={},
                experiments=[])
    said = RunSummary(**base, error_control={"alpha": 0.05, "family": 8, "platforms": 1})
    assert said.error_control == ErrorControl(0.05, 8, 1)
    assert said.to_json()["error_control"] == {"alpha": 0.05, "family": 8, "platforms": 1}
    assert RunSummary.from_json(said.to_json()).error_control == said.error_control
    older = RunSummary(**base)                                            # no error_control, or `{}`
    assert older.error_control is None and older.to_json()["error_control"] == {}
    assert RunSummary(**base, error_control={}).error_control is None


def test_the_callgrind_profile_is_typed_and_an_older_form_is_written_back_as_read(tmp_path):
    from jobs.contract.callprofile import CallProfile, Spot
    older = {"total_cycles": 1000, "functions": [{"where": "f", "function": "f", "cycles": 600, "share": 0.6,
                                                  "miss_share": 0.0, "first_line": "a.c:3"}],
             "lines": [], "misses": [], "remarks": [], "command": "./bench", "flags": "-g", "notes": [],
             "from_a_newer_version": 1}                       # no `coverage`, `extents`, `calls`: kept before them
    ledger.save_state(tmp_path, {"run_id": "r1", "callgrind": older})
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    assert isinstance(state.callgrind, CallProfile) and state.callgrind.functions[0] == \
        Spot("f", "f", 600, 0.6, 0.0, "a.c:3") and state.callgrind.calls == []
    state.save(phase="calibrate")
    assert json.loads((tmp_path / "state.json").read_text())["callgrind"] == older
    made = CallProfile(total_cycles=5, calls=[["a", "b", 1000, 20]])
    state.save(callgrind=made)
    again = RunState.load(tmp_path)
    assert again.callgrind == made and again.to_json()["callgrind"] == made.to_dict()
    assert before != (tmp_path / "state.json").read_bytes()
