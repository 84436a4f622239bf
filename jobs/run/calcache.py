"""A recent A/A calibration of the same base commit on the same machine is reused by the next run.

`autoresearch calibrate` (and every run's own calibration) stores what it fixed in the target's git
folder (`.git/autoresearch/calibrations/<key>.json`). A later run on the same host looks it up
before measuring anything: the key covers the base commit, the platform, this host and its CPU,
every config field the calibration depends on (commands, metrics, repeats, thresholds, sandbox,
simulate), and the values of the variables `sandbox.env` passes to target code (a model path or a
thread count changes what the benchmark measures: a llama.cpp run at `-t 2` on another model once
reused a `-t 1` run's noise); it is used only while younger than `MAX_AGE_S`, since a machine's load
changes by the hour. Only this machine's own calibrations are reused (platform `local`): a cloud VM is a new machine.
"""
from __future__ import annotations

import hashlib
import json
import socket
import time
from pathlib import Path
from typing import Any

from jobs.guard import gitops
from jobs.contract import ledger

MAX_AGE_S = 6 * 3600
FIELDS = ("build", "benchmark", "checks", "metrics", "repeats", "thresholds", "integrity", "sandbox", "simulate", "timeouts",
          "artifacts")


def key(config, base: str, platform: str, cpu: str, repeats: int | None, env_digest: str = "") -> str:
    """`env_digest`: the run's hash of the passed variables' values (state `bench_env_digest`, which
    keys the op profile's cache too)."""
    contract = {f: getattr(config, f, None) for f in FIELDS}
    text = json.dumps({"base": base, "platform": platform, "host": socket.gethostname(), "cpu": cpu,
                       "repeats": repeats, "env": env_digest,
                       "contract": {k: (v.model_dump() if hasattr(v, "model_dump") else
                                        [x.model_dump() if hasattr(x, "model_dump") else x for x in v]
                                        if isinstance(v, list) else v) for k, v in contract.items()}},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _folder(repo: Path) -> Path:
    common = Path(gitops.git(repo, "rev-parse", "--git-common-dir"))
    return (common if common.is_absolute() else Path(repo) / common) / "autoresearch" / "calibrations"


def store(repo: Path, k: str, entry: dict[str, Any]) -> None:
    folder = _folder(repo)
    folder.mkdir(parents=True, exist_ok=True)
    ledger.write_atomic(folder / f"{k}.json", json.dumps({**entry, "created": time.time()}, default=str))


def lookup(repo: Path, k: str, now: float | None = None) -> dict[str, Any] | None:
    path = _folder(repo) / f"{k}.json"
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    age = (now or time.time()) - float(entry.get("created", 0))
    return {**entry, "age_s": age} if 0 <= age <= MAX_AGE_S else None
