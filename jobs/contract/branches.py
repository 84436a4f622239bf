"""The names of the branches a run makes, in one place. Pure.

`autoresearch/<run-id>` holds a run's result (the bot pushes it for the pull request);
`autoresearch/<run-id>-exp/<hypothesis>` holds one implemented hypothesis, so a resumed run does
not implement it again. The pipeline makes them, `jobs.run.cleanup` and `jobs.api` find and delete
them, the bot pushes them and tells its pull requests' branches by them: all through here.
`Published` says where the bot pushes a run's result, so its report can say where to fetch it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "autoresearch/"
EXPERIMENTS = "-exp/"
# What git refuses anywhere in a branch name (`git check-ref-format`), besides control characters.
_REFUSED = {" ": "a space", "~": "'~'", "^": "'^'", ":": "':'", "?": "'?'", "*": "'*'", "[": "'['", "\\": "'\\'",
            "/": "'/' (one name, not a folder)"}


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
    why = name_problem(hypothesis_id)
    if why:
        raise ValueError(f"the hypothesis id {hypothesis_id!r} cannot name a git branch: it {why}")
    return experiments_prefix(run_id) + hypothesis_id


def name_problem(name: str) -> str:
    """Why `name` cannot be the last part of a branch name ('' when it can): git's rules for one
    component (`git check-ref-format`: no control character, space, ~ ^ : ? * [ \\, no `..` or
    `@{`, no leading `.`, no trailing `.` or `.lock`), and no `/`."""
    if not name:
        return "is empty"
    bad = dict.fromkeys(_REFUSED.get(c, f"a control character ({ord(c):#04x})") for c in name
                        if ord(c) < 32 or ord(c) == 127 or c in _REFUSED)
    if bad:
        return "holds " + " and ".join(bad)
    for part, words in (("..", "'..'"), ("@{", "'@{'")):
        if part in name:
            return f"holds {words}"
    if name.startswith("."):
        return "begins with '.'"
    return next((f"ends with '{end}'" for end in (".lock", ".") if name.endswith(end)), "")


def candidate_problem(file_name: str, stem: str) -> str:
    """Why a candidate patch file named `file_name` cannot be run ('' when it can): its experiment is
    named `stem` (the name without `.patch`), which becomes part of a git branch name."""
    why = name_problem(stem)
    if not why:
        return ""
    fix = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip(".-")
    fix = fix if fix and not name_problem(fix) else "candidate-1"
    return (f"the candidate patch {file_name!r} names its experiment {stem!r}, which {why} and so cannot be part of a "
            f"git branch name ({experiments_prefix('<run>')}<name>); fix: rename the file, e.g. to {fix}.patch")


def is_run_made(branch: str) -> bool:
    """Is `branch` named like one a run makes? A name proves nothing about who pushed it."""
    return branch.startswith(PREFIX) and len(branch) > len(PREFIX)


def run_of(branch: str) -> str:
    """The run id in the name of a branch a run made (its own or an experiment's)."""
    if not is_run_made(branch):
        raise ValueError(f"{branch!r} is not a branch an autoresearch run makes")
    return branch[len(PREFIX):].split(EXPERIMENTS, 1)[0]


@dataclass(frozen=True)
class Published:
    """Where a maintainer gets what a bot run (the App, the Action) measured, from their own machine:
    the run's clone lives on a worker, so a report naming its path (or its `origin/<branch>`, absent
    when the branch went to a fork) cannot be followed. The CLI's runs have none: their user has the
    target folder at hand. All of it is known before the run starts; none of it holds a token."""
    clone_url: str                        # the repository, as a maintainer clones it
    head_url: str                         # where the result branch is pushed: a fork, or clone_url
    head_branch: str                      # its name there (a rerun pushes to its PR's existing branch)
    candidates: tuple[str, ...] = ()      # the run's maintainer patches, as paths inside the repository
    # The head branch is what the run measured, not what it will push (`/autoresearch bench`: the pull
    # request's diff is its one candidate): Reproduce measures base against it whatever was kept.
    head_is_candidate: bool = False
