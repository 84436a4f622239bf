"""A recent A/A calibration of the same base commit on the same machine is reused by the next run.

`autoresearch calibrate` (and every run's own calibration) stores what it fixed in the target's git
folder (`.git/autoresearch/calibrations/<key>.json`). A later run on the same host looks it up
before measuring anything: the key covers the base commit, the platform, this host and its CPU,
every config field the calibration depends on (commands, metrics, repeats, thresholds, sandbox,
simulate), and the values of the variables `sandbox.env` passes to target code (a model path or a
thread count changes what the benchmark measures: a llama.cpp run at `-t 2` on another model once
reused a `-t 1` run's noise); it is used only while younger than `MAX_AGE_S`, since a machine's load
changes by the hour. Only this machine's own calibrations are reused (platform `local`): a cloud VM is a new machine.

An entry is a `Cached` in memory and JSON on disk (its calibrations in the JSON form of
`jobs.contract.calibrated`); `store` and `lookup` convert at that boundary.
"""
from __future__ import annotations

import hashlib
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.guard import gitops
from jobs.contract import ledger
from jobs.contract.calibrated import MetricCalibration, SimulatedCalibration, metric_calibrations
from jobs.contract.jsonform import per_key_json

MAX_AGE_S = 6 * 3600
# What an A/A measures, by version: an entry stored by another procedure is not reused (2: the second
# simulated run is slowed, to find work that follows the time; jobs.measure.simulate.time_budget_problem).
PROCEDURE = 2
FIELDS = ("build", "benchmark", "checks", "metrics", "repeats", "thresholds", "integrity", "sandbox", "simulate", "timeouts",
          "artifacts")


def key(config, base: str, platform: str, cpu: str, repeats: int | None, env_digest: str = "") -> str:
    """`env_digest`: the run's hash of the passed variables' values (state `bench_env_digest`, which
    keys the op profile's cache too)."""
    contract = {f: getattr(config, f, None) for f in FIELDS}
    text = json.dumps({"base": base, "platform": platform, "host": socket.gethostname(), "cpu": cpu,
                       "repeats": repeats, "env": env_digest, "procedure": PROCEDURE,
                       "contract": {k: (v.model_dump() if hasattr(v, "model_dump") else
                                        [x.model_dump() if hasattr(x, "model_dump") else x for x in v]
                                        if isinstance(v, list) else v) for k, v in contract.items()}},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def calibrations_folder(repo: Path) -> Path:
    """Where `repo`'s calibrations are kept: its git folder, shared by all its worktrees."""
    common = Path(gitops.git(repo, "rev-parse", "--git-common-dir"))
    return (common if common.is_absolute() else Path(repo) / common) / "autoresearch" / "calibrations"


@dataclass
class Cached:
    """One platform's calibration as a later run reuses it."""
    run_id: str                                    # the run that measured it
    calibration: dict[str, MetricCalibration]      # metric name -> its calibration
    digests: Any                                   # state.json's `digests` entry: deterministic names, or None
    cpu: str
    simulate: SimulatedCalibration | None = None   # the simulated yardstick's A/A, when it ran
    age_s: float = 0.0                             # how long ago it was stored (not in the file)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "calibration": per_key_json(self.calibration),
                "digests": self.digests, "cpu": self.cpu,
                "simulate": self.simulate.to_json() if self.simulate is not None else None}

    @classmethod
    def from_json(cls, entry: dict[str, Any], age_s: float) -> Cached:
        sim = entry.get("simulate")
        return cls(run_id=entry["run_id"], calibration=metric_calibrations(entry["calibration"]),
                   digests=entry["digests"], cpu=entry["cpu"],
                   simulate=SimulatedCalibration.from_json(sim) if sim else None, age_s=age_s)


def store(repo: Path, k: str, entry: Cached) -> None:
    folder = calibrations_folder(repo)
    folder.mkdir(parents=True, exist_ok=True)
    ledger.write_atomic(folder / f"{k}.json", json.dumps({**entry.to_json(), "created": time.time()}, default=str))


def lookup(repo: Path, k: str, now: float | None = None) -> Cached | None:
    path = calibrations_folder(repo) / f"{k}.json"
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        age = (now or time.time()) - float(entry.get("created", 0))
        return Cached.from_json(entry, age) if 0 <= age <= MAX_AGE_S else None
    except (OSError, ValueError, KeyError, TypeError):     # unreadable, or not an entry this version wrote
        return None
