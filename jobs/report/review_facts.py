"""What pr.md needs from git and the ledger besides the numbers: the files each kept commit
changes (`git diff --stat`), the branch's whole diffstat, and the first lines of each failed
step's output. Read once when the report is written; the renderer (jobs.report.report) stays pure."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jobs.contract.model import ExperimentRecord
from jobs.contract.runsummary import BranchCommit
from jobs.guard import gitops
from jobs.report.report_review import FAILED_STEPS, failure_excerpt

STAT_WIDTH = "--stat=100"


def commit_facts(repo: Path, base: str, head: str, names: list[str]) -> list[BranchCommit]:
    """One entry per commit of base..head, oldest first: its hypothesis (the stack's cherry-picks
    are in the order of `names`), subject and diffstat."""
    commits = gitops.git(repo, "rev-list", "--reverse", f"{base}..{head}").split()
    out = []
    for i, commit in enumerate(commits):
        subject = gitops.git(repo, "log", "-1", "--format=%s", commit)
        name = names[i] if len(commits) == len(names) else subject.split(":", 1)[0]
        out.append(BranchCommit(hypothesis=name, commit=commit, subject=subject,
                                stat=_stat(repo, f"{commit}^", commit),
                                files=gitops.git(repo, "diff", "--name-only", f"{commit}^", commit).splitlines()))
    return out


def branch_diffstat(repo: Path, base: str, head: str) -> str:
    return _stat(repo, base, head)


def _stat(repo: Path, a: str, b: str) -> str:
    # `git diff --stat` output with its leading space restored (gitops.git strips the output).
    text = gitops.git(repo, "diff", STAT_WIDTH, a, b)
    return " " + text if text else ""


def with_failure_output(record: ExperimentRecord) -> ExperimentRecord:
    """The record for the summary (summary.json leaves its full log out), with the failed step's first lines."""
    if record.status in FAILED_STEPS and record.log:
        return replace(record, failure_output=failure_excerpt(record.log, record.status))
    return record
