"""jobs/run/calcache.py: a calibration is reused only for the same measurement. The values of the
variables the config passes to target code are part of it: a llama.cpp cell at `-t 2` on another
model reused a `-t 1` run's calibration (same commit, config and machine) until they joined the key."""
from __future__ import annotations

import json

import pytest

from jobs.run import calcache
from jobs.contract.config import parse_config
from synthetic import CONFIG as SYNTH_CONFIG, FILES

PASSING = SYNTH_CONFIG + "sandbox: {env: [SYNTH_THREADS]}\n"     # the synthetic target, its benchmark given a variable
CONFIG = parse_config(PASSING)


def test_the_passed_variables_digest_is_part_of_the_key():
    one = calcache.key(CONFIG, "abc", "local", "cpu", 8, "digest-of-threads-1")
    assert one == calcache.key(CONFIG, "abc", "local", "cpu", 8, "digest-of-threads-1")
    assert one != calcache.key(CONFIG, "abc", "local", "cpu", 8, "digest-of-threads-2")


@pytest.mark.measures
def test_a_run_reuses_a_calibration_only_when_its_benchmark_gets_the_same_variables(tmp_path, monkeypatch):
    from jobs.run.pipeline import Run, RunOptions
    from conftest import make_repo
    target = make_repo(tmp_path / "target", {**FILES, ".github/autoresearch.yml": PASSING})
    monkeypatch.setenv("AUTORESEARCH_SANDBOX_ENV", "SYNTH_THREADS")     # the operator allows it

    def calibration(run_id: str, threads: str) -> dict:
        monkeypatch.setenv("SYNTH_THREADS", threads)
        Run(RunOptions(target=target, out=tmp_path / run_id, run_id=run_id, agent="none",
                       calibrate_only=True, repeats=3)).execute()
        ledger = [json.loads(l) for l in (tmp_path / run_id / "experiments.jsonl").read_text().splitlines()]
        return next(r for r in ledger if r["kind"] == "calibration")

    assert not calibration("t1", "1")["reason"].startswith("reused")
    assert not calibration("t2", "2")["reason"].startswith("reused")      # another measurement: measured again
    again = calibration("t1-again", "1")
    assert again["reason"].startswith("reused: the calibration of run t1"), again["reason"]


def test_an_entry_is_typed_in_memory_and_the_old_json_on_disk(tmp_path, monkeypatch):
    """What `store` writes is the dict form earlier versions wrote; `lookup` reads it (or an older
    entry) back into the types of jobs.contract.calibrated."""
    from jobs.contract.calibrated import MetricCalibration, SimulatedCalibration
    monkeypatch.setattr(calcache, "calibrations_folder", lambda repo: tmp_path)
    score = {"floor_pct": 1.5, "prior": [[0.01, 1.0]], "flags": ["f"], "from_a_newer_version": 1}
    old = {"run_id": "c1", "calibration": {"score": score}, "digests": ["out"], "cpu": "CPU",
           "simulate": {"aa_delta_pct": 0.001, "base_cycles": 10, "digests": []}, "created": 1000.0}
    (tmp_path / "k.json").write_text(json.dumps(old))
    found = calcache.lookup(tmp_path, "k", now=1060.0)
    assert found.run_id == "c1" and found.age_s == 60.0 and found.digests == ["out"] and found.cpu == "CPU"
    assert isinstance(found.calibration["score"], MetricCalibration) and found.calibration["score"].floor_pct == 1.5
    assert isinstance(found.simulate, SimulatedCalibration) and found.simulate.base_cycles == 10
    calcache.store(tmp_path, "again", found)
    written = json.loads((tmp_path / "again.json").read_text())
    assert {k: v for k, v in written.items() if k != "created"} == {k: v for k, v in old.items() if k != "created"}
    assert calcache.lookup(tmp_path, "k", now=1000.0 + calcache.MAX_AGE_S + 1) is None      # too old
    (tmp_path / "bad.json").write_text(json.dumps({"created": 1000.0}))
    assert calcache.lookup(tmp_path, "bad", now=1001.0) is None                            # not an entry
