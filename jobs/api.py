"""The front door of `jobs/`: everything the bot (its two faces and the dashboard) uses of the
engine, re-exported here by name (`__all__`), so `bot/` imports `jobs.api` and not the packages
behind it (issue 42; `tests/test_layering.py` holds bot to it). Two seams are imported where they
live, named in that test's `BOT_MAY_IMPORT` with the reason: the Markdown seam `jobs.guard.mdsafe`
and the command line's jobs half `jobs.cli`; the bot's pure core also reads the plain data types
(`jobs.contract.config`, `results`, `runsummary`) where they live, since this module, which runs
the pipeline, is not pure.

A run:
- `prepare(layout, ...)`, `load_preparation`, `make_plan`, `prepare_candidates`,
  `candidates_in_repo`, `Preparation`, `PlanError`, `CANDIDATES_DIR` (`jobs.run.preparation`); its
  folders `RunLayout`, `PREPARED` (`jobs.contract.layout`).
- `start(prep, ...)`: the pipeline on the prepared clone (`jobs.run.pipeline.Run`), with the
  preparation's config (read once, narrowed once by the command's overrides) as is. When it returns
  or raises, no process the run started is alive (`jobs.run.reaper.ended_processes`). A caller
  publishes only with `start`'s summary in hand, so nothing of the target runs at that moment.
  What it returns: `RunSummary`, `RunStopped` (`jobs.contract.runsummary`; the summary's records are
  `ExperimentRecord`s, `jobs.contract.model`); `verdict_line`
  (`jobs.contract.results`). What it says as it goes, to `on_event`: `events`, one type per kind,
  and their union `Event` (`jobs.contract.events`).
- What a dead run leaves behind: `clean_worktrees(layout)` removes its worktrees, `drop_branches`
  its refs. Its branches: `run_branch`, `is_run_made`, `Published` (`jobs.contract.branches`).
- Reading runs back (`jobs.run.runfiles`): `RunFiles`, `list_runs`, `read_run`, `read_records`,
  `finished_experiments`, `spent_usd`, typed: a run's state.json is a `RunState`
  (`jobs.contract.runstate`), its ledger's lines `ExperimentRecord`s; writing a small file whole:
  `write_atomic` (`jobs.contract.ledger`).

The config and the errors:
- `TargetConfig`, `Overrides`, `parse_config`, `CONFIG_PATH`, `ConfigError` (`jobs.contract.config`).
- `RunError`, `OverrideError`, `Terminated`, `cancellation` (`jobs.contract.errors`).

The machine and its operator:
- Executors by name (`jobs.executors.registry`): `EXECUTORS`, `DEFAULT_EXECUTOR`, `executor_names`,
  `executor_kind`.
- The operator's decisions (`jobs.guard.operator`): `OperatorPolicy`, `OperatorError`.
- Secrets kept from target code: `scrub_environment` (`jobs.guard.secrets`), `hide_from_sandbox`
  (`jobs.guard.sandbox.hide`).
- Hardened git for the bot's clones (`jobs.guard.gitops`): `run_git`, `git_config_names`, `GitError`.

(The CLI, `jobs.cli`, drives `jobs.run.pipeline` directly.)
"""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable

from jobs.contract import branches, events
from jobs.contract.branches import Published, is_run_made, run_branch
from jobs.contract.events import Event
from jobs.contract.config import CONFIG_PATH, ConfigError, Overrides, TargetConfig, parse_config
from jobs.contract.errors import OverrideError, RunError, Terminated, cancellation
from jobs.contract.layout import PREPARED, RunLayout
from jobs.contract.ledger import write_atomic
from jobs.contract.model import ExperimentRecord
from jobs.contract.results import verdict_line
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import RunStopped, RunSummary
from jobs.executors.registry import DEFAULT as DEFAULT_EXECUTOR
from jobs.executors.registry import EXECUTORS, executor_kind, executor_names
from jobs.guard import gitops
from jobs.guard.gitops import GitError
from jobs.guard.gitops import config_names as git_config_names
from jobs.guard.gitops import run as run_git
from jobs.guard.operator import OperatorError, OperatorPolicy
from jobs.guard.sandbox import hide as hide_from_sandbox
from jobs.guard.secrets import scrub_environment
from jobs.run.pipeline import Run, RunOptions
from jobs.run.preparation import CANDIDATES_DIR, PlanError, Preparation, candidates_in_repo, load_preparation, make_plan, prepare, prepare_candidates
from jobs.run.reaper import ended_processes
from jobs.run.runfiles import RunFiles, finished_experiments, list_runs, read_records, read_run, spent_usd

__all__ = [
    # a run: preparing, starting, what it returns, what it leaves, reading it back
    "prepare", "load_preparation", "make_plan", "prepare_candidates", "candidates_in_repo", "Preparation",
    "PlanError", "CANDIDATES_DIR", "RunLayout", "PREPARED",
    "start", "RunSummary", "RunStopped", "ExperimentRecord", "verdict_line", "events", "Event",
    "clean_worktrees", "drop_branches", "run_branch", "is_run_made", "Published",
    "RunFiles", "RunState", "list_runs", "read_run", "read_records", "finished_experiments", "spent_usd",
    "write_atomic",
    # the config and the errors
    "TargetConfig", "Overrides", "parse_config", "CONFIG_PATH", "ConfigError",
    "RunError", "OverrideError", "Terminated", "cancellation",
    # the machine and its operator
    "EXECUTORS", "DEFAULT_EXECUTOR", "executor_names", "executor_kind",
    "OperatorPolicy", "OperatorError", "scrub_environment", "hide_from_sandbox",
    "run_git", "git_config_names", "GitError",
]


def start(prep: Preparation, *, executor: str, agent: str | None = None,
          on_event: Callable[[Event], None] | None = None, should_stop: Callable[[], bool] | None = None,
          operator: OperatorPolicy | None = None, slots_spent: int = 0,
          published: Published | None = None) -> RunSummary | RunStopped:
    """Run the pipeline on the prepared clone (resuming whatever `prep.layout.out` already holds),
    with the preparation's config, candidates and research, under the operator's decisions
    (`bot.settings` reads them; None: the strict defaults: always sandboxed, no variable passed
    through, the default limits). The workdir of every run is protected.
    `slots_spent`: keep slots earlier runs of the same question used (a bench's re-runs).
    `published`: where the result branch will be pushed, so the report's Reproduce block fetches it
    from there and not from this worker's clone (jobs.contract.branches.Published)."""
    layout = prep.layout
    operator = operator or OperatorPolicy(face="app")
    operator = replace(operator, protected=(*operator.protected, str(layout.workdir)))
    options = RunOptions(target=layout.clone, out=layout.out, run_id=layout.run_id, agent=agent,
                         candidates=list(prep.candidates), executor=executor, config=prep.config,
                         research=prep.research, operator=operator, repo_identity=layout.full_name,
                         slots_spent=slots_spent, published=published)
    with ended_processes():
        return Run(options, on_event=on_event, should_stop=should_stop).execute()


# -- what a dead run leaves behind ----------------------------------------------------------------
def clean_worktrees(layout: RunLayout) -> list[Path]:
    """Remove the worktrees a run's dead process left in its clone (all live under `out/work`)
    and that folder; the ledger and state stay. Returns the worktrees removed."""
    if not (layout.clone / ".git").is_dir():
        return []
    gone = gitops.remove_worktrees_under(layout.clone, layout.out / "work")
    shutil.rmtree(layout.out / "work", ignore_errors=True)
    return gone


def drop_branches(layout: RunLayout) -> list[str]:
    """Delete the run's local branches (`autoresearch/<run-id>` and its experiments' refs) from its
    clone: for a run that has ended without publishing them."""
    if not (layout.clone / ".git").is_dir():
        return []
    rid = layout.run_id
    return gitops.delete_branches(layout.clone, branches.run_branch(rid), branches.experiments_prefix(rid))
