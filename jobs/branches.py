"""The names of the branches a run makes, in one place. Pure.

`autoresearch/<run-id>` holds a run's result (the bot pushes it for the pull request);
`autoresearch/<run-id>-exp/<hypothesis>` holds one implemented hypothesis, so a resumed run does
not implement it again. The pipeline makes them, `jobs.cleanup` and `jobs.api` find and delete
them, the bot pushes them and tells its pull requests' branches by them: all through here.
"""
from __future__ import annotations

PREFIX = "autoresearch/"
EXPERIMENTS = "-exp/"


def run_branch(run_id: str) -> str:
    """The branch of a run's result."""
    if not run_id:
        raise ValueError("a run's branch needs a run id")
    return f"{PREFIX}{run_id}"


def experiments_prefix(run_id: str) -> str:
    """What every experiment branch of the run starts with."""
    return run_branch(run_id) + EXPERIMENTS


def experiment_branch(run_id: str, hypothesis_id: str) -> str:
    """The branch holding the commit of one hypothesis of the run."""
    if not hypothesis_id:
        raise ValueError("an experiment's branch needs a hypothesis id")
    return experiments_prefix(run_id) + hypothesis_id


def is_run_made(branch: str) -> bool:
    """Is `branch` named like one a run makes? A name proves nothing about who pushed it."""
    return branch.startswith(PREFIX) and len(branch) > len(PREFIX)


def run_of(branch: str) -> str:
    """The run id in the name of a branch a run made (its own or an experiment's)."""
    if not is_run_made(branch):
        raise ValueError(f"{branch!r} is not a branch an autoresearch run makes")
    return branch[len(PREFIX):].split(EXPERIMENTS, 1)[0]
