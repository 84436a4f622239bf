"""Each build's simulated run, counted once per run (issue 43: "reuse what is known").

A simulated count is a function of the build and the workload: the source tree built, the build
command, whose compiler cache it built with, the simulated command and its input seed (the run's).
Its counts are deterministic up to a jitter the A/A measures between two builds of one commit in two
folders, far below the floor. So the first count of a build answers for every later experiment that
builds the same tree the same way in this run, whichever commit holds that tree and whichever folder
it stands in: the run's baseline in every experiment, and in the stack phase a stack without one
member (the tree of that member's own experiment, or of the other member) and the stack itself
(counted by the first attribution, reused by the next and by the stack's confirmation). The
candidate's DIGESTs are still compared natively on every build (jobs.measure.runner._yardstick).

Keyed by the git tree a commit holds, which the App's own clone resolves: never read from a folder a
build has run in. Kept by the executor, in this process's memory, out of every sandbox's reach; used
only for sandboxed runs, where a benchmark cannot change the tree it ran from.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Callable

# What a stored count leaves out: the native run is each experiment's own, and how the count was
# got (beside another experiment, or reused) is said by the experiment that uses it.
NOT_KEPT = ("native", "ahead", "reused")


class SimulatedCounts:
    """Simulated runs by build (`key`), counted once per run. `tree_of`: a commit's tree id (the App's
    clone's `git rev-parse C^{tree}`), or '' where it cannot be told (then nothing is reused)."""

    def __init__(self, tree_of: Callable[[str], str]):
        self._tree_of = tree_of
        self._trees: dict[str, str] = {}
        self._known: dict[str, dict] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_clone(cls, repo: Path) -> SimulatedCounts:
        """Counts keyed by the trees the App's own clone `repo` says commits hold (never a folder a build
        ran in): the one place that resolves them."""
        from jobs.guard import gitops
        return cls(lambda commit: gitops.git(repo, "rev-parse", "--verify", "-q", f"{commit}^{{tree}}", check=False))

    def _tree(self, commit: str) -> str:
        with self._lock:
            tree = self._trees.get(commit)
        if tree is None:
            try:
                tree = self._tree_of(commit) or ""
            except Exception:             # (a commit the clone does not have): counted, never reused
                tree = ""
            with self._lock:
                self._trees[commit] = tree
        return tree

    def key(self, spec, commit: str, role: str, seed: int) -> str:
        """The build of `commit` by `spec`'s build command with `role`'s compiler cache (jobs.measure.runner.base_arm),
        counted by `spec`'s simulated command at `seed`; '' when the commit's tree is unknown."""
        tree = self._tree(commit)
        if not tree:
            return ""
        parts = ("tree", tree, spec.build, role, spec.simulate or "", str(seed))
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def get(self, key: str) -> dict | None:
        with self._lock:
            known = self._known.get(key) if key else None
        return dict(known) if known is not None else None

    def put(self, key: str, outcome: dict) -> None:
        if not key or outcome.get("slowed"):   # the A/A's slowed run counts the same work another way: never reused
            return
        with self._lock:
            self._known[key] = {k: v for k, v in outcome.items() if k not in NOT_KEPT}
