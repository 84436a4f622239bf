"""LocalExecutor: each experiment in git worktrees on this machine.

The baseline worktree (`<workdir>/base`) is built once per base commit and reused (same machine,
same clean tree). Candidates are checked out at two paths that stay the same for the whole run
(`<workdir>/head` and `<workdir>/head-next`, in turn), so that the baseline's build made in each for
the location swap (jobs.measure.locations) is kept and reused by later experiments of the same base
commit and build command: the baseline is built once per folder per run (issue 43), and its
simulated run counted once (jobs.measure.counted: so is every other build of the run, a stack's among
them). When the pipeline announces the next experiment (`build_ahead`), its candidate is built in
the other path while this one is checked and simulated (work that takes turns with nothing; from the
start where this one's candidate was not built ahead and builds alone, as the run's first does), and
where that build is over early, checked and simulated there too
(`jobs.measure.runner.checks_and_count_ahead`): its experiment then starts from those steps. That
work is over before this experiment's first pair, which runs alone: what is not by then, after a
bounded wait (jobs.measure.beside.Beside), is stopped and made again when its own experiment runs.
The next `run` of that spec starts from what was made.
Where the build system allows it (it records header dependencies and the candidate changes only
C/C++ sources and headers), a candidate's tree starts as a copy of the baseline's build made in the
same folder with the candidate's changed files written over it, so only what changed is rebuilt (`jobs.measure.locations.start_from_build`). The A/A
calibration builds a second worktree of the base commit in a folder of its own, so that it
compares two separate builds the way every experiment does (a path or code-layout effect shows up
there, not as a false win later).
"""
from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from jobs.guard import gitops
from jobs.measure import locations, pairjournal
from jobs.contract.config import TargetConfig
from jobs.measure.isolation import Isolation
from jobs.measure.beside import Beside
from jobs.measure.counted import SimulatedCounts
from jobs.measure.runner import (Failure, Premade, Progress, base_arm, checks_and_count_ahead, must_pass,
                                 run_experiment)
from jobs.contract.spec import ExperimentSpec, RawResult

HEAD = "head"          # the candidates' folder: one of two paths for the whole run
AHEAD = "head-next"    # the other: the next candidate's, built beside this one's checks and simulation


@dataclass
class BuiltAhead:
    """The next experiment's candidate, built in the other candidates' folder while the current one
    was checked and simulated, and where there was time checked and simulated too (`Premade`)."""
    spec: ExperimentSpec
    folder: Path
    premade: Premade | None = None

    def answers(self, spec: ExperimentSpec) -> Premade | None:
        """What of this work stands for `spec`'s: the build where the commits, build command, time limit
        and sandbox are the same; its checks and simulated run only where theirs are too. None: nothing."""
        mine = self.spec
        if self.premade is None or (mine.head_commit, mine.base_commit, mine.build, mine.build_timeout, mine.sandbox) != \
                (spec.head_commit, spec.base_commit, spec.build, spec.build_timeout, spec.sandbox):
            return None
        if (mine.kind, mine.run_checks, mine.checks, mine.checks_timeout) != \
                (spec.kind, spec.run_checks, spec.checks, spec.checks_timeout):
            return Premade(self.premade.build)
        if (mine.simulate, mine.simulate_seed or mine.seed, mine.simulate_timeout, mine.simulate_derived,
                mine.artifacts) != (spec.simulate, spec.simulate_seed or spec.seed, spec.simulate_timeout,
                                    spec.simulate_derived, spec.artifacts):
            return replace(self.premade, counted=None)
        return self.premade


class LocalExecutor:
    platform = "local"
    parallel = 1

    def __init__(self, repo: Path, workdir: Path, *, incremental: bool = True):
        self.repo = Path(repo)
        self.workdir = Path(workdir)
        self.incremental = incremental
        self._built_base: str | None = None
        # Each build's simulated run, counted once per run: keyed by the tree this clone says a commit holds.
        self._counts = SimulatedCounts.of_clone(self.repo)
        self._next: ExperimentSpec | None = None      # the next experiment, as the pipeline announced it
        self._ahead: BuiltAhead | None = None         # its candidate, built beside the current one

    def build_ahead(self, spec: ExperimentSpec) -> None:
        """The pipeline's word that `spec` is measured next: its candidate is built in the other folder
        beside the next `run`'s checks and simulation, and a `run` of that spec starts from it."""
        self._next = spec

    def _base_tree(self, commit: str) -> tuple[Path, bool]:
        path = self.workdir / "base"
        if self._built_base == commit and path.is_dir():
            return path, False
        gitops.add_worktree(self.repo, path, commit)
        return path, True

    def _head_tree(self, spec: ExperimentSpec, base_built: bool, name: str = HEAD) -> Path:
        """The candidate's checkout at `name` (the A/A's second tree of the base at a folder of its own);
        `base_built`: the baseline is already built for this run, so the candidate's tree may start from
        the baseline's build kept beside `name` (jobs.measure.locations.start_from_build)."""
        if spec.kind == "calibration":      # two separate builds of the base, never a kept one
            slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in spec.name)
            return gitops.add_worktree(self.repo, self.workdir / f"exp-{slug}", spec.head_commit)
        head = gitops.add_worktree(self.repo, self.workdir / name, spec.head_commit)
        kept = locations.kept_build(head, locations.build_key(spec.base_commit, spec.build, base_arm(spec)))
        if kept is None:
            locations.forget_kept(head)     # another base commit's or build command's: never this one's
        elif self.incremental and base_built and spec.swap_locations:
            copy = head.with_name(f"{name}.start")
            if locations.start_from_build(kept, spec.base_commit, head, copy):
                shutil.rmtree(head)
                copy.rename(head)
        return head

    def _drop_ahead(self) -> None:
        if self._ahead is not None:
            gitops.remove_worktree(self.repo, self._ahead.folder)
            self._ahead = None

    def _beside(self, spec: ExperimentSpec, head: Path, nxt: ExperimentSpec | None) -> Beside | None:
        """The next candidate's build (then, where there is time, its checks and simulated run), in the
        candidates' folder this experiment does not use, as work beside this one
        (jobs.measure.beside.Beside), where the pipeline announced one (`nxt`)."""
        if (nxt is None or spec.kind != "experiment" or nxt.kind != "experiment" or head.name not in (HEAD, AHEAD)
                or nxt.base_commit != spec.base_commit or nxt.head_commit == nxt.base_commit):
            return None
        ahead = BuiltAhead(nxt, self.workdir / (AHEAD if head.name == HEAD else HEAD))

        def build(cancel: threading.Event) -> None:
            ahead.folder = self._head_tree(nxt, True, ahead.folder.name)
            isolation = Isolation.from_spec(nxt.sandbox)
            try:
                text, seconds = must_pass(nxt.build, ahead.folder, nxt.build_timeout, "candidate build", "build_failed",
                                          isolation, "build", "candidate", cancel=cancel)
            except Failure:           # built again, and its failure said, when that experiment runs
                return
            if cancel.is_set():
                return
            premade = Premade((text.replace("== candidate build", "== candidate build, beside the previous experiment",
                                            1), seconds))
            # How far into this experiment's checks and simulation the build ended (0: it ended beside this
            # experiment's own build), which is what the next candidate's would go on beside.
            if checks_and_count_ahead(nxt, self.workdir / "base", ahead.folder, isolation, self._counts,
                                      cancel, beside.since_builds(), premade):
                ahead.premade = premade
        self._ahead = ahead
        beside = Beside(build)
        return beside

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult:
        base, needs_build = self._base_tree(spec.base_commit)
        head = base
        ahead, nxt, self._next = self._ahead, self._next, None
        built = ahead.answers(spec) if ahead is not None and not needs_build else None
        if built is not None:
            self._ahead = None
            head = ahead.folder
        else:
            self._drop_ahead()
            if spec.head_commit != spec.base_commit or spec.kind == "calibration":
                head = self._head_tree(spec, not needs_build)
        # Nothing of this experiment is left to run beside the next one's steps when its own checks and
        # simulated run were made ahead: the next one is built in its own turn.
        beside = self._beside(spec, head, nxt) if head != base and not (built and built.counted) else None
        # Each measured pair is kept in the run's folder until the experiment returns: a stop in
        # the middle resumes from them (jobs/measure/pairjournal.py).
        kind_slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{spec.kind}-{spec.name}")
        journal = self.workdir.parent / "pairs" / f"{kind_slug}.json"
        try:
            result = run_experiment(spec, base, head, build_base=needs_build, progress=progress, journal=journal,
                                    keep_baseline=head.name in (HEAD, AHEAD), incremental=self.incremental,
                                    counts=self._counts, built=built, beside=beside)
            pairjournal.forget(journal)
        except BaseException:
            self._drop_ahead()
            raise
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
        self._drop_ahead()
        gitops.remove_worktree(self.repo, self.workdir / "base")
        shutil.rmtree(self.workdir, ignore_errors=True)


def make_local_executors(repo: Path, workdir: Path, config: TargetConfig, run_id: str) -> list[LocalExecutor]:
    """This machine is one platform, whatever the config lists (cloud platforms need a cloud executor)."""
    return [LocalExecutor(repo, workdir)]
