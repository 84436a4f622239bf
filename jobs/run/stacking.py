"""The stack phase of a run: the kept commits cherry-picked onto the base, each one's own
contribution tested (backward elimination), the surviving stack re-measured, and the run's
branch left only when that re-measure confirms it.

Before any pick, some kept commits are kept off the branch, each with why (`jobs.run.families`,
issue 44): a build that is not shippable by default (`-march=x86-64-v3`, `-ffast-math`: read from
the commit's diff, `jobs.contract.portability`), and the members of a build-option family (patches of
one build-file line, which would otherwise conflict and be dropped in ranking order) other than the
family's best. Their verdicts stand; pr.md names them with the reason (`stack_kept_off`).

It measures through one callable (`Measure`, `jobs.run.measuring.Measurer.measured` in a run), so it
knows nothing of specs, executors' internals or verdicts.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from jobs.guard import gitops
from jobs.contract import events, ledger
from jobs.executors import Executor
from jobs.contract.model import ExperimentRecord, Status
from jobs.run import families
from jobs.contract.runstate import RunState


class Measure(Protocol):
    def __call__(self, ex: Executor, name: str, commit: str, *, kind: str, alpha: float,
                 base: str | None = None, note: str = "") -> ExperimentRecord: ...


def stackable(results: list[ExperimentRecord]) -> list[str]:
    """Hypotheses kept on at least one platform and, on none, broken, invalid, or measured
    slower on any metric (decided from the records' fields, never from their text)."""
    by_h: dict[str, list[ExperimentRecord]] = {}
    for r in results:
        by_h.setdefault(r.hypothesis, []).append(r)
    return [name for name, recs in by_h.items()
            if any(r.status == Status.KEEP.value for r in recs)
            and not any(r.broken or r.regressions for r in recs)]


def gains(results: list[ExperimentRecord], primary: str = "", higher_is_better: bool = True) -> dict[str, float]:
    """Per kept hypothesis, its measured gain in % (larger is better), the mean over its kept records:
    the fall in simulated cycles where the yardstick decided, else the primary metric's change in its
    better direction. What picks a build-option family's best (`jobs.run.families.best`)."""
    per: dict[str, list[float]] = {}
    for r in results:
        if r.status != Status.KEEP.value:
            continue
        sim = r.simulated
        if sim is not None and sim.delta_pct is not None:
            per.setdefault(r.hypothesis, []).append(-float(sim.delta_pct))
            continue
        m = r.metric(primary) if primary else (r.metrics[0] if r.metrics else None)
        if m is not None:
            per.setdefault(r.hypothesis, []).append(m.delta_pct if higher_is_better else -m.delta_pct)
    return {n: sum(v) / len(v) for n, v in per.items()}


def commit_patches(repo: Path, base: str, names: list[str], commits: dict[str, str]) -> dict[str, str]:
    """Each named hypothesis's change as a unified diff of its commit against `base`: what the branch
    would carry, whoever wrote it (research, an agent, a maintainer's patch)."""
    return {n: gitops.git(repo, "diff", "--no-color", "--no-ext-diff", base, commits[n])
            for n in names if commits.get(n)}


@dataclass
class Stacking:
    repo: Path
    out: Path
    state: RunState
    executors: list[Executor]
    alpha: float                           # the run's false-keep level (thresholds.alpha)
    measure: Measure
    emit: Callable[[events.Event], None]
    primary: str = ""                      # the primary metric's name ('' : each record's first metric)
    higher_is_better: bool = True          # its direction

    def _label(self, name: str, platform: str) -> str:
        return name if len(self.executors) == 1 else f"{name}@{platform}"

    def build(self, names: list[str], commits: dict[str, str], label: str) -> tuple[str, list[str], list[str]]:
        """Cherry-pick `names` onto the base in order: (head, applied, dropped on conflict)."""
        tree = self.out / "work" / f"stack-{label}"
        gitops.add_worktree(self.repo, tree, self.state.base_commit)
        applied, dropped = [], []
        try:
            for name in names:
                (applied if gitops.cherry_pick(tree, commits[name]) else dropped).append(name)
            return gitops.head_commit(tree), applied, dropped
        finally:
            gitops.remove_worktree(self.repo, tree)

    def attribution(self, applied: list[str], commits: dict[str, str], head: str) -> list[str]:
        """Backward elimination, last-ranked commit first: while two or more remain, the current
        stack is measured against itself without that commit (at alpha / (k - 1) per test, k the
        commits stacked). A commit whose own contribution shows on no platform leaves, and the
        stack without it becomes the current one. A null that rode along with a real win leaves;
        of two commits that do the same thing, one stays (leave-one-out on the full stack would
        drop both); a commit that breaks the stack (its checks, its integrity) leaves."""
        done = ledger.finished(self.out, kind="attribution")
        tests = max(1, len(applied) - 1)
        current, current_head = list(applied), head
        for name in reversed(applied):
            if len(current) < 2:
                break
            without = self.state.stack_without.get(name)
            if not without:
                without, _, _ = self.build([n for n in current if n != name], commits, f"without-{name}")
                self.state.save(stack_without={**self.state.stack_without, name: without})
            kept_somewhere, harmful = False, False
            for ex in self.executors:
                label = self._label(f"attribution:{name}", ex.platform)
                rec = done.get(f"attribution:{name}@{ex.platform}")
                if rec is None:
                    self.emit(events.ExperimentStart(label))
                    rec = self.measure(ex, f"attribution:{name}", current_head, kind="attribution",
                                       alpha=self.alpha / tests / len(self.executors), base=without)
                    self.emit(events.ExperimentDone(label, rec.status, rec.reason))
                kept_somewhere |= rec.status == Status.KEEP.value
                harmful |= rec.broken
            if harmful or not kept_somewhere:
                current.remove(name)
                current_head = without
        return current

    def run(self, results: list[ExperimentRecord]) -> dict[str, ExperimentRecord]:
        """The stack's re-measure per platform ({} when there is nothing to stack)."""
        done = ledger.finished(self.out, kind="stack")
        names = stackable(results)
        commits = {r.hypothesis: r.commit for r in results if r.commit}
        branch = self.state.branch
        if not names:
            self._no_branch(branch, "nothing was kept")
            return {}
        # what a stack already built was built without (a resume: the same, or none for an older run's)
        off = self.state.stack_kept_off if self.state.stack_commit else self.kept_off(names, results, commits)
        names = [n for n in names if n not in off]
        if not names:
            self._no_branch(branch, f"everything kept is kept off the branch: {', '.join(off)}")
            return {}
        if not self.state.stack_commit:
            self.emit(events.Phase("stack", total=len(names)))
            head, applied, dropped = self.build(names, commits, "all")
            self.state.save(stack_commit=head, stack_applied=applied, stack_dropped=dropped)
        applied, dropped = self.state.stack_applied, self.state.stack_dropped
        if self.state.stack_final is None:
            survivors = applied
            if len(applied) >= 2:
                survivors = self.attribution(applied, commits, self.state.stack_commit)
            final = self.state.stack_commit
            if survivors != applied:
                final = self.build(survivors, commits, "final")[0]
            self.state.save(stack_final=final, stack_survivors=survivors,
                            stack_unattributed=[n for n in applied if n not in survivors])
        head, survivors = self.state.stack_final, self.state.stack_survivors
        stacks: dict[str, ExperimentRecord] = {}
        if not survivors:
            self._no_branch(branch, "no kept commit showed a contribution of its own in the stack")
            self.state.save(stack_confirmed=False)
            return stacks
        notes = []
        if off:
            notes.append(f"kept off the branch: {', '.join(off)}")
        if dropped:
            notes.append(f"dropped (conflicts): {', '.join(dropped)}")
        if self.state.stack_unattributed:
            notes.append(f"dropped (no contribution of their own shown): {', '.join(self.state.stack_unattributed)}")
        for ex in self.executors:
            key = f"stack@{ex.platform}"
            if key in done:
                stacks[ex.platform] = done[key]
                continue
            name = self._label("stack", ex.platform)
            self.emit(events.ExperimentStart(name))
            rec = self.measure(ex, "stack", head, kind="stack", alpha=self.alpha / len(self.executors),
                               note="".join(f"; {n}" for n in notes))
            stacks[ex.platform] = rec
            self.emit(events.ExperimentDone(name, rec.status, rec.reason))
        if not any(st.status == Status.KEEP.value for st in stacks.values()):
            # The re-measure did not confirm the stack anywhere: the branch must not carry it.
            self._no_branch(branch, "the re-measure of the stack did not confirm it")
            self.state.save(stack_confirmed=False)
        else:
            gitops.set_branch(self.repo, branch, head)
            self.state.save(stack_confirmed=True, branch_left=True, branch_note="")
        return stacks

    def kept_off(self, names: list[str], results: list[ExperimentRecord], commits: dict[str, str]) -> dict[str, str]:
        """Kept hypotheses the stack leaves off the branch, with why (`jobs.run.families.kept_off`):
        a build that is not shippable by default, a build-option family's members other than its best.
        Their verdicts stand; only the branch goes without them. Saved for the report."""
        combos = {r.hypothesis: (f"their combination {r.hypothesis} was not measured: {r.reason}"
                                 if r.status == Status.SKIPPED.value else
                                 f"their combination {r.hypothesis} was not kept ({r.status})")
                  for r in results if r.hypothesis.startswith(families.COMBINED) and r.hypothesis not in names}
        off = families.kept_off(names, commit_patches(self.repo, self.state.base_commit, names, commits), gains(results, self.primary, self.higher_is_better),
                                combos)
        if off != self.state.stack_kept_off:
            self.state.save(stack_kept_off=off)
        return off

    def _no_branch(self, branch: str, why: str) -> None:
        """A branch equal to the base says nothing: none is left (an earlier one of this run goes)."""
        gitops.delete_branches(self.repo, branch)
        self.state.save(branch_left=False, branch_note=why)
