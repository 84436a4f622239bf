"""The run's persistent record: `experiments.jsonl` (append-only) and `state.json`.

Every state change is written before the next step starts, so a killed run resumes where it
stopped and a finished experiment is never run (or paid for) twice.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from jobs.contract.model import ExperimentRecord

LEDGER = "experiments.jsonl"
STATE = "state.json"


class LedgerError(RuntimeError):
    pass


def strict_json(value: Any) -> Any:
    """Non-finite floats (an untrusted result's infinite CI or MDE) become null, so every file we
    write is strict JSON that jq and other tools can read."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def dumps(value: Any, **kw: Any) -> str:
    return json.dumps(strict_json(value), allow_nan=False, **kw)


def append(out_dir: Path, record: ExperimentRecord) -> None:
    path = Path(out_dir) / LEDGER
    with path.open("a", encoding="utf-8") as fh:
        fh.write(dumps(record.to_dict(), sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read(out_dir: Path) -> list[dict[str, Any]]:
    """All complete records. A torn last line (process killed mid-write) is ignored, since the
    experiment it described will simply be run again; a bad line elsewhere is an error."""
    path = Path(out_dir) / LEDGER
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines):
                break
            raise LedgerError(f"{path}:{i}: not a JSON record; fix or remove that line") from None
    return records


def finished(out_dir: Path, kind: str = "experiment") -> dict[str, ExperimentRecord]:
    """The finished records of one kind, typed, keyed `name@platform` (the last one wins)."""
    return {r["name"] + "@" + r["platform"]: ExperimentRecord.from_dict(r)
            for r in read(out_dir) if r.get("kind") == kind}


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader (or a kill) never sees half of it: a sibling temporary
    file, then one rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def save_state(out_dir: Path, state: dict[str, Any]) -> None:
    write_atomic(Path(out_dir) / STATE, dumps(state, indent=2, sort_keys=True))


def recorded_cost_usd(out_dir: Path) -> float | None:
    """The run's spent total (`cost_usd`) as its state.json records it; None where there is no state
    yet, the file cannot be read (a torn read) or the field is not a finite number. Only that field is
    read: the budget's hard cap and the bot's progress both ask for it, and a field of the wrong shape
    elsewhere in the file (which would make the typed state a fresh one) must not hide what was spent."""
    try:
        data = load_state(out_dir)
    except (LedgerError, OSError, ValueError):
        return None
    cost = data.get("cost_usd") if isinstance(data, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost):
        return None
    return float(cost)


def load_state(out_dir: Path) -> dict[str, Any] | None:
    path = Path(out_dir) / STATE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LedgerError(f"{path}: unreadable run state ({exc}); remove it to start over") from None
