"""The front of `jobs/` for the bot's two faces and the dashboard: a run's layout (`jobs.contract.layout`),
its preparation (`jobs.run.preparation`), starting it, what a dead run leaves behind, and reading runs
back (`jobs.run.runfiles`). (The CLI, `jobs.cli`, drives `jobs.run.pipeline` directly.)

- `start(prep, ...)`: the pipeline on the prepared clone (`jobs.run.pipeline.Run`), with the
  preparation's config (read once, narrowed once by the command's overrides) as is. When it returns
  or raises, no process the run started is alive (`jobs.run.reaper.ended_processes`). A caller
  publishes only with `start`'s summary in hand, so nothing of the target runs at that moment.
- `clean_worktrees(layout)`: the worktrees a dead run left behind, removed; `drop_branches` its refs.
"""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable

from jobs.contract import branches
from jobs.guard import gitops
from jobs.contract.branches import Published
from jobs.contract.layout import PREPARED, RunLayout  # noqa: F401  (the bot's names for them)
from jobs.guard.operator import OperatorPolicy
from jobs.run.pipeline import Run, RunOptions
from jobs.run.preparation import CANDIDATES_DIR, PlanError, Preparation, candidates_in_repo, load_preparation, make_plan, prepare, prepare_candidates  # noqa: F401
from jobs.run.reaper import ended_processes
from jobs.run.runfiles import RunFiles, finished_experiments, list_runs, read_records, read_run, spent_usd  # noqa: F401
from jobs.contract.runsummary import RunStopped, RunSummary


def start(prep: Preparation, *, executor: str, agent: str | None = None,
          on_event: Callable[[dict], None] | None = None, should_stop: Callable[[], bool] | None = None,
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
