"""LocalExecutor: each experiment in git worktrees on this machine.

The baseline worktree (`<workdir>/base`) is built once per base commit and reused (same machine,
same clean tree). Every candidate is checked out at one path for the whole run (`<workdir>/head`),
so that the baseline's build made in that folder for the location swap (jobs.measure.locations) is
kept and reused by the next experiment of the same base commit and build command: the baseline is
built once per folder per run (issue 43), and its simulated run counted once (`BaselineCounts`). Where the build system allows it (it records header
dependencies and the candidate changes only C/C++ sources and headers), a candidate's tree starts as
a copy of the baseline's build made in the same folder with the candidate's changed files written
over it, so only what changed is rebuilt (`jobs.measure.locations.start_from_build`). The A/A
calibration builds a second worktree of the base commit in a folder of its own, so that it
compares two separate builds the way every experiment does (a path or code-layout effect shows up
there, not as a false win later).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from jobs.guard import gitops
from jobs.measure import locations, pairjournal
from jobs.contract.config import TargetConfig
from jobs.measure.runner import BaselineCounts, Progress, base_arm, run_experiment
from jobs.contract.spec import ExperimentSpec, RawResult

HEAD = "head"          # the candidates' folder, one path per run


class LocalExecutor:
    platform = "local"
    parallel = 1

    def __init__(self, repo: Path, workdir: Path, *, incremental: bool = True):
        self.repo = Path(repo)
        self.workdir = Path(workdir)
        self.incremental = incremental
        self._built_base: str | None = None
        self._baseline_counts = BaselineCounts()     # the built baseline's simulated run, counted once

    def _base_tree(self, commit: str) -> tuple[Path, bool]:
        path = self.workdir / "base"
        if self._built_base == commit and path.is_dir():
            return path, False
        self._baseline_counts.forget()
        gitops.add_worktree(self.repo, path, commit)
        return path, True

    def _head_tree(self, spec: ExperimentSpec, base: Path, base_built: bool) -> Path:
        if spec.kind == "calibration":      # two separate builds of the base, never a kept one
            slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in spec.name)
            return gitops.add_worktree(self.repo, self.workdir / f"exp-{slug}", spec.head_commit)
        head = gitops.add_worktree(self.repo, self.workdir / HEAD, spec.head_commit)
        kept = locations.kept_build(head, locations.build_key(spec.base_commit, spec.build, base_arm(spec)))
        if kept is None:
            locations.forget_kept(head)     # another base commit's or build command's: never this one's
        elif self.incremental and base_built and spec.swap_locations:
            copy = head.with_name(f"{HEAD}.start")
            if locations.start_from_build(kept, spec.base_commit, head, copy):
                shutil.rmtree(head)
                copy.rename(head)
        return head

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult:
        base, needs_build = self._base_tree(spec.base_commit)
        head = base
        if spec.head_commit != spec.base_commit or spec.kind == "calibration":
            head = self._head_tree(spec, base, not needs_build)
        # Each measured pair is kept in the run's folder until the experiment returns: a stop in
        # the middle resumes from them (jobs/measure/pairjournal.py).
        kind_slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{spec.kind}-{spec.name}")
        journal = self.workdir.parent / "pairs" / f"{kind_slug}.json"
        try:
            result = run_experiment(spec, base, head, build_base=needs_build, progress=progress, journal=journal,
                                    keep_baseline=head.name == HEAD, incremental=self.incremental,
                                    baseline_counts=self._baseline_counts)
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
