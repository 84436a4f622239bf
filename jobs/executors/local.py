"""LocalExecutor: each experiment in its own git worktree on this machine.

The baseline worktree is built once per run and reused (same machine, same clean tree); every
candidate gets a fresh worktree at its own commit and is built from clean. The A/A calibration
builds a second worktree of the base commit, so that it compares two builds the way every
experiment does (a path or code-layout effect shows up there, not as a false win later).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from jobs.guard import gitops
from jobs.measure import pairjournal
from jobs.contract.config import TargetConfig
from jobs.measure.runner import Progress, run_experiment
from jobs.contract.spec import ExperimentSpec, RawResult


class LocalExecutor:
    platform = "local"
    parallel = 1

    def __init__(self, repo: Path, workdir: Path):
        self.repo = Path(repo)
        self.workdir = Path(workdir)
        self._built_base: str | None = None

    def _base_tree(self, commit: str) -> tuple[Path, bool]:
        path = self.workdir / "base"
        if self._built_base == commit and path.is_dir():
            return path, False
        gitops.add_worktree(self.repo, path, commit)
        return path, True

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult:
        base, needs_build = self._base_tree(spec.base_commit)
        head = base
        if spec.head_commit != spec.base_commit or spec.kind == "calibration":
            slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in spec.name)
            head = gitops.add_worktree(self.repo, self.workdir / f"exp-{slug}", spec.head_commit)
        # Each measured pair is kept in the run's folder until the experiment returns: a stop in
        # the middle resumes from them (jobs/measure/pairjournal.py).
        kind_slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{spec.kind}-{spec.name}")
        journal = self.workdir.parent / "pairs" / f"{kind_slug}.json"
        try:
            result = run_experiment(spec, base, head, build_base=needs_build, progress=progress, journal=journal)
            pairjournal.forget(journal)
        finally:
            if head != base:
                gitops.remove_worktree(self.repo, head)
        # A failed baseline build must be retried next time, not assumed good.
        base_failed = result.status in ("build_failed", "timeout") and result.reason.startswith("baseline")
        self._built_base = None if base_failed else spec.base_commit
        return result

    def estimate_usd(self, spec: ExperimentSpec) -> float:
        return 0.0

    def close(self) -> None:
        gitops.remove_worktree(self.repo, self.workdir / "base")
        shutil.rmtree(self.workdir, ignore_errors=True)


def make_local_executors(repo: Path, workdir: Path, config: TargetConfig, run_id: str) -> list[LocalExecutor]:
    """This machine is one platform, whatever the config lists (cloud platforms need a cloud executor)."""
    return [LocalExecutor(repo, workdir)]
