"""Reading runs back: the run folders' contents, typed (`RunFiles`), so readers such as the
dashboard and the bot's progress never need to know the layout (`jobs.contract.layout`) nor the
files' keys.

- `list_runs(workdir)`: every run folder the pipeline has started, newest first.
- `read_run(workdir, run_id, repo)`: one run's state (a `RunState`), records (`ExperimentRecord`s),
  summary, primary metric.
- `read_records(out)`: the ledger's records, as readers show them (see there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.contract import ledger
from jobs.contract.config import ConfigError, TargetConfig, load_config
from jobs.contract.layout import RunLayout
from jobs.contract.model import ExperimentRecord
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import RunSummary


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_summary(out: Path) -> RunSummary | None:
    """The run's summary.json, typed; None when there is none yet or it cannot be read."""
    data = read_json(Path(out) / "summary.json")
    try:
        return RunSummary.from_json(data) if data is not None else None
    except ValueError:
        return None


def read_records(out: Path) -> list[ExperimentRecord]:
    """The ledger's records, typed; an unreadable ledger reads as empty (readers show what they can).
    Each is read as summary.json's records are (`ExperimentRecord.from_summary`): a metric's null
    stays None, "not measured", where the pipeline resuming from the ledger (`from_dict`) reads it
    as the non-finite value strict JSON could not hold."""
    try:
        lines = ledger.read(out)
    except ledger.LedgerError:
        return []
    records = []
    for line in lines:
        try:
            records.append(ExperimentRecord.from_summary(line))
        except (TypeError, ValueError, KeyError, AttributeError):    # not a record (a hand edit): left out
            continue
    return records


def read_state(out: Path) -> RunState:
    """The run's state.json, typed; one not there yet, unreadable, or with a field of the wrong shape
    reads as a state not begun (each field its default): a reader shows what it can, never fails."""
    data = read_json(Path(out) / ledger.STATE)
    try:
        return RunState.from_json(Path(out), data if isinstance(data, dict) else {})
    except (TypeError, ValueError, KeyError, AttributeError):         # a field of the wrong shape
        return RunState(Path(out))


def spent_usd(out: Path) -> float:
    """The run's spent total from its state.json, 0.0 where none is recorded (`ledger.recorded_cost_usd`:
    the bot asks on every progress event, and reads only that field)."""
    return ledger.recorded_cost_usd(Path(out)) or 0.0


def finished_experiments(out: Path) -> int:
    return len(ledger.finished(out)) if Path(out).exists() else 0


@dataclass(frozen=True)
class RunFiles:
    """A run folder's contents, typed."""
    repo: str                         # owner/name
    run_id: str
    state: RunState                   # state.json (read only here: nothing reading a RunFiles saves it)
    records: list[ExperimentRecord]   # the ledger's, as `read_records` reads them
    summary: RunSummary | None        # None until the run is done (or when summary.json cannot be read)
    primary: str | None               # the run's primary metric, when its config can still be read
    parallel: int                     # experiments per wave: 1 here, up to max_vms on cloud machines


def run_config(layout: RunLayout) -> TargetConfig | None:
    """The config the run ran by: its preparation's (narrowed by the command's overrides, so a
    `metric=` shows), else the clone's own file; None when neither can be read."""
    prepared = read_json(layout.prepared)
    try:
        if isinstance(prepared, dict) and "config" in prepared:
            return TargetConfig.model_validate(prepared["config"])
        return load_config(layout.clone)
    except (ConfigError, OSError, ValueError):
        return None


def list_runs(workdir: Path) -> list[RunLayout]:
    """Every run folder under `workdir` that the pipeline has started, newest first."""
    found = []
    for state in Path(workdir).glob(f"*/*/*/out/{ledger.STATE}"):
        run = state.parent.parent
        found.append((state.stat().st_mtime, RunLayout(Path(workdir), run.parent.parent.name, run.parent.name, run.name)))
    found.sort(key=lambda t: t[0], reverse=True)
    return [layout for _, layout in found]


def read_run(workdir: Path, run_id: str, repo: str | None = None) -> RunFiles | None:
    """The newest run called `run_id` (of `repo`, when given), or None."""
    for layout in list_runs(workdir):
        if layout.run_id != run_id or (repo and layout.full_name != repo):
            continue
        state = read_state(layout.out)
        config = run_config(layout)
        platforms = list(state.platforms or [])
        cloud = bool(platforms) and platforms != ["local"] and config is not None
        return RunFiles(layout.full_name, run_id, state, read_records(layout.out),
                        read_summary(layout.out), config.primary.name if config else None,
                        max(1, config.budget.max_vms) if cloud else 1)
    return None
