"""What runs leave in a target, and removing it: `autoresearch clean TARGET` and a run's own end.

A run makes, in TARGET: `autoresearch/<run-id>` (its result), one `autoresearch/<run-id>-exp/<h>`
branch per implemented hypothesis (so a resume does not implement it again), and worktrees under
`<out>/work/`. When a run finishes, only its branch stays (`end_of_run`). A run that crashed or was
killed leaves the rest; `find_leftovers` lists it and `remove` deletes it. A run that is alive
(`jobs.run.runlock`) is never touched, nor anything that no autoresearch run made: other branches,
other worktrees, the run folders' records (state.json, experiments.jsonl, reports).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from jobs.guard import gitops
from jobs.run import runlock
from jobs.contract.branches import PREFIX, experiments_prefix, run_branch, run_of
from jobs.contract.ledger import LedgerError
from jobs.contract.runstate import RunState


@dataclass(frozen=True)
class Leftover:
    kind: str       # branch | worktree | folder | lock | record
    what: str       # the branch name or the path
    run_id: str
    why: str


def _branches(repo: Path) -> list[str]:
    return gitops.git(repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{PREFIX}").splitlines()


def _runs(repo: Path) -> dict[str, Path]:
    """run id -> output folder: the target's record, plus runs found through their worktrees
    (`<out>/work/<tree>` next to a state.json) for runs recorded nowhere else."""
    runs = runlock.registered(repo)
    for tree in gitops.worktrees(repo):
        out = tree.parent.parent
        if tree.parent.name == "work" and out not in runs.values():
            try:
                state = RunState.load(out)
            except LedgerError:
                state = None
            if state is not None and state.run_id:
                runs.setdefault(state.run_id, out)
    return runs


def find_leftovers(repo: Path) -> tuple[list[Leftover], list[str]]:
    """(what dead runs left in `repo`, the ids of runs alive now)."""
    repo = Path(repo)
    runs = _runs(repo)
    branches = _branches(repo)
    trees = gitops.worktrees(repo)
    leftovers: list[Leftover] = []
    live: list[str] = []
    for rid in sorted(set(runs) | {run_of(b) for b in branches}):
        out = runs.get(rid)
        if out is not None and runlock.alive(out):
            live.append(rid)
            continue
        try:
            state = RunState.load(out) if out is not None and out.is_dir() else None
        except LedgerError:
            state = None
        started = state is not None and state.begun
        finished = started and state.phase == "done"
        for b in branches:
            if b.startswith(experiments_prefix(rid)):
                leftovers.append(Leftover("branch", b, rid, "an experiment's commit of a run that is not running"))
            elif b == run_branch(rid) and started and not finished:
                leftovers.append(Leftover("branch", b, rid, f"the branch of a run that stopped in phase "
                                                            f"{state.phase} (it can no longer be resumed)"))
        if out is None:
            continue
        work = out / "work"
        for tree in trees:
            if tree == work or work in tree.parents:
                why = "registered, its folder is gone" if not tree.exists() else "of a run that is not running"
                leftovers.append(Leftover("worktree", str(tree), rid, why))
        if work.is_dir():
            leftovers.append(Leftover("folder", str(work), rid, "build trees of a run that is not running"))
        if runlock.read_lock(out):
            leftovers.append(Leftover("lock", str(out / runlock.LOCK), rid, "its process is gone"))
        if not out.exists():
            leftovers.append(Leftover("record", rid, rid, f"the target's note of run folder {out}, which is gone"))
    return leftovers, live


def remove(repo: Path, leftovers: list[Leftover]) -> None:
    for item in (i for i in leftovers if i.kind == "worktree"):
        gitops.git(repo, "worktree", "unlock", item.what, check=False)
        gitops.remove_worktree(repo, Path(item.what))
    for item in leftovers:
        if item.kind == "branch":
            gitops.git(repo, "branch", "-D", "-q", item.what, check=False)
        elif item.kind == "folder":
            shutil.rmtree(item.what, ignore_errors=True)
        elif item.kind == "lock":
            Path(item.what).unlink(missing_ok=True)
        elif item.kind == "record":
            runlock.forget(repo, item.run_id)


def end_of_run(repo: Path, run_id: str, out: Path, *, finished: bool) -> None:
    """A run's own tidy-up when it ends: its worktrees (a killed step's too) always; its
    experiments' branches once it has finished (a run that stopped early keeps them to resume)."""
    gitops.remove_worktrees_under(repo, Path(out) / "work")
    if finished:
        gitops.delete_branches(repo, experiments_prefix(run_id))
