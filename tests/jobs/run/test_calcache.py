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
