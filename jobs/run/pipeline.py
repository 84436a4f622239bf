"""One autoresearch run: research -> calibrate -> experiments -> stack -> report.

The imperative shell around the pure core. Every state change is written (state.json,
experiments.jsonl) before the next step starts: re-running the same run id resumes and never
re-runs a finished experiment. Progress goes to an `on_event` callback (rich bars in the CLI,
job.meta in an RQ worker) so this module knows nothing of terminals or queues.

This module holds the run's sequence, its setup (sandbox, operator, agent, executors) and the
experiments' waves; each other phase is its own module with explicit inputs: `research_phase`,
`calibrating`, `stacking` (measures through one callable), `reporting` (the `RunSummary`), all
measuring through `measuring.Measurer` and writing through `jobs.contract.runstate.RunState`.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from jobs.contract import agentkinds, branches, ledger, yardstick
from jobs.contract import events
from jobs.run import cleanup, families, runlock
from jobs.guard import gitops, sandbox
from jobs.agent import make_agent
from jobs.agent.offline import NotImplementable
from jobs.contract.branches import Published
from jobs.run.calibrating import Calibrating
from jobs.contract.config import TargetConfig, load_config
from jobs.contract.errors import RunCancelled, RunError  # noqa: F401  (re-exported: jobs.run.pipeline.RunError)
from jobs.executors import Executor, ExecutorUnavailable, make_executors
from jobs.run.measuring import Measurer, plan_for
from jobs.contract.model import Evidence, ExperimentRecord, Hypothesis, SkipCause, Status
from jobs.guard.operator import OperatorError, OperatorPolicy
from jobs.run.reporting import Reporting, reach_warnings
from jobs.research.offline import Research
from jobs.run.research_phase import Researching
from jobs.measure import simulate
from jobs.measure.isolation import Isolation, IsolationError, repo_key
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import CalibrationOnly, ResearchOnly, RunStopped, RunSummary
from jobs.stats.sequential import slot_alpha
from jobs.contract.spec import SandboxSpec
from jobs.run.stacking import Stacking, commit_patches, stackable
from jobs.stats.verdict import VerdictPlan

Event = events.Event
OnEvent = Callable[[Event], None]


@dataclass
class RunOptions:
    target: Path
    out: Path
    run_id: str
    agent: str | None = None                  # a name in jobs/contract/agentkinds.py; None: the repo config's choice
    candidates: list[Path] = field(default_factory=list)
    repeats: int | None = None                # override the calibrated repeats per arm
    executor: str = "local"
    research_only: bool = False
    calibrate_only: bool = False
    no_sandbox: bool = False                  # the CLI user's --no-sandbox (reports say so)
    # What the operator decided (jobs.guard.operator): the App and the Action pass theirs, read from their
    # own environment; None: this process's environment, as the CLI's user is the operator.
    operator: OperatorPolicy | None = None
    repo_identity: str | None = None          # whose cache namespace (`owner/name`); None: the target's path
    # The bot's: where its result branch is pushed, for the report's Reproduce block (jobs.contract.branches).
    published: Published | None = None
    # The config to run by, as is: a `jobs.api.Preparation`'s, read once and narrowed once by the
    # command's overrides (`/autoresearch optimize cpu metric=tg128 budget=30`) before the plan was
    # made. None: the target's own `.github/autoresearch.yml`, read here.
    config: TargetConfig | None = None
    # The offline research already made on this commit (the bot's plan did it): not scanned again.
    research: Research | None = None
    # The op profile's instrumented build: reuse (a profile kept for the same inputs, else build and
    # keep it), fresh (build even when one is kept) or off (no profile).
    profile: str = "reuse"
    # Keep slots (jobs.stats.sequential.slot_alpha) that earlier runs asking the same question already
    # spent: the k-th `/autoresearch bench` of a pull request starts at slot k, so all its benches
    # together keep a no-change candidate with probability at most alpha.
    slots_spent: int = 0


def new_run_id(base_commit: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + base_commit[:7]


class Run:
    def __init__(self, options: RunOptions, on_event: OnEvent | None = None,
                 executors: list[Executor] | None = None, agent=None,
                 should_stop: Callable[[], bool] | None = None):
        self.o = options
        self._emit = on_event or (lambda event: None)
        self._stop = threading.Event()       # set on Ctrl-C so every wave thread stops at its next step
        user_stop = should_stop or (lambda: False)
        self.should_stop = lambda: self._stop.is_set() or user_stop()
        self.repo = gitops.toplevel(options.target)
        if self.repo is None:
            raise RunError(f"{options.target} is not a git repository: autoresearch needs one "
                           "(git init && git add -A && git commit)")
        named = [why for p in options.candidates if (why := branches.candidate_problem(Path(p).name, Path(p).stem))]
        if named:                        # each names a git branch: refused before any work, not by git midway
            raise RunError("; ".join(named))
        self.config: TargetConfig = options.config if options.config is not None else load_config(self.repo)
        self._warnings: list[str] = []      # shown once the run's events start
        try:
            self.operator = options.operator or OperatorPolicy.from_env(face="cli")
        except OperatorError as exc:
            raise RunError(str(exc)) from None
        self.sandboxed, self.unsandboxed_by, refused = self.operator.sandbox_decision(
            self.config.sandbox.enabled, options.no_sandbox)
        self._warnings += [refused] if refused else []
        if not self.sandboxed:
            self._warnings.append(f"target code runs WITHOUT a sandbox ({self.unsandboxed_by}): it can read this "
                                  "machine's files and network, and leave state between benchmark processes")
        self.env_names, not_allowed = self.operator.allowed_env(self.config.sandbox.env)
        if not_allowed:
            self._warnings.append(f"the config's sandbox.env asks for {', '.join(not_allowed)}, which the operator "
                                  "does not allow (AUTORESEARCH_SANDBOX_ENV): target code does not get them")
        if options.agent is None:    # the repo's choice; without the key it needs, the default agent runs
            options.agent, fallback = agentkinds.for_config(self.config.agent, os.environ)
            if fallback:
                self._warnings.append(fallback)
        self.out = Path(options.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = RunState.load(self.out)
        self._executors = executors
        self._agent = agent
        self._lock = threading.Lock()       # events of a wave's experiments come from several threads
        self._impl_lock = threading.Lock()  # one agent edit at a time: commits land in one repo
        self._llm_charged = 0.0             # model spend of this process already in cost_usd
        self.started = time.monotonic()

    def emit(self, event: Event) -> None:
        if isinstance(event, events.RunWarning):
            self._record_warning(event.message)
        with self._lock:
            self._emit(event)

    def _record_warning(self, message: str) -> None:
        """A warning kept in state.json (each message once), for the report: what the operator or the
        run decided against the repository's wishes reaches the maintainer, not only a log. Those said
        before the state exists are saved with it (`_init_state`)."""
        with self.state.lock:
            seen = list(self.state.warnings)
            if self.state.run_id and message not in seen:
                self.state.save(warnings=seen + [message])

    # -- state -----------------------------------------------------------------------------
    def _save(self, **changes: Any) -> None:
        self.state.save(**changes)

    def _check_isolation(self) -> None:
        """Refuse to start when the sandbox cannot run or a declared path is not allowed."""
        try:
            Isolation.from_spec(self._sandbox_spec())
            if self.sandboxed:
                sandbox.check()
        except (IsolationError, sandbox.SandboxUnavailable) as exc:
            raise RunError(str(exc)) from None

    def _sandbox_spec(self) -> SandboxSpec:
        sb = self.config.sandbox
        return SandboxSpec(enabled=self.sandboxed, caches=list(sb.caches), read_only=list(sb.read_only),
                           env=list(self.env_names), repo_key=repo_key(self.o.repo_identity or str(self.repo)),
                           limits=self.operator.limits.to_dict(),
                           protect=[str(self.repo), str(self.out), *self.operator.protected],
                           secrets=list(self.operator.secrets))

    def _init_state(self) -> None:
        self._check_isolation()
        if agentkinds.kind(self.o.agent).needs_env:
            self.agent      # e.g. --agent claude without a key (or SDK) refuses here, before any research is built
        base = gitops.head_commit(self.repo)
        overlap = yardstick.overlaps(self.config, gitops.files_at(self.repo, base))
        if overlap:                  # the CLI's preflight says it first; the App and the Action land here
            raise RunError("; ".join(overlap))
        if self.state.begun:
            if self.state.run_id != self.o.run_id:
                raise RunError(f"{self.out} holds run {self.state.run_id}, not {self.o.run_id}; "
                               "use another --out or that run id")
            if self.state.base_commit != base:
                raise RunError(f"run {self.o.run_id} started at {self.state.base_commit[:12]} but the "
                               f"target is now at {base[:12]}; start a new run id for the new commit")
            if self.o.repeats is None:   # a resume measures with the same repeats as the first start
                self.o.repeats = self.state.repeats_override
            self.emit(events.Resume(self.state.phase))
            return
        if not gitops.is_clean(self.repo):
            self._warnings.append(f"the target has uncommitted changes; the run uses the committed tree at {base[:12]}")
        for message in self._warnings:
            self.emit(events.RunWarning(message))
        self._save(run_id=self.o.run_id, base_commit=base, target=str(self.repo), agent=self.o.agent,
                   repeats_override=self.o.repeats,
                   phase="research", platforms=[e.platform for e in self.executors],
                   warnings=list(dict.fromkeys(self._warnings)),
                   branch=branches.run_branch(self.o.run_id), calibration={}, cost_usd=0.0,
                   sandboxed=self.sandboxed, unsandboxed_by=self.unsandboxed_by, bench_env_names=self.env_names,
                   # what keys the profile cache: the values' hash, never the values (issue 20, N8)
                   bench_env_digest=hashlib.sha256(json.dumps({n: os.environ.get(n) for n in self.env_names},
                                                              sort_keys=True).encode()).hexdigest())

    @property
    def executors(self) -> list[Executor]:
        if self._executors is None:
            try:
                self._executors = make_executors(self.o.executor, self.repo, self.out / "work",
                                                 self.config, self.o.run_id)
            except ExecutorUnavailable as exc:
                raise RunError(str(exc)) from None
        return self._executors

    @property
    def agent(self):
        if self._agent is None:
            self._agent = make_agent(self.o.agent, self._recipes(), self.config)
            if self._agent.runs_target_code:          # an agent that runs target code runs it in our sandbox
                self._agent.isolation = Isolation.from_spec(self._sandbox_spec())
        return self._agent

    def _charge_llm(self) -> None:
        """Add the model's spend since the last charge to the run's cost (budgets include it)."""
        meter = self._agent.meter if self._agent is not None else None     # no agent made yet: nothing spent
        if meter is None:
            return
        with self.state.lock:
            delta = meter.usd - self._llm_charged
            self._llm_charged = meter.usd
            llm = {**meter.as_dict(), "cost_usd": round(self.state.llm.cost_usd + delta, 6)}
            self.state.save(llm=llm, cost_usd=round(self.state.cost_usd + delta, 6))

    @cached_property
    def bench(self) -> Measurer:
        """How every phase measures (made once the state is initialised: a resume fixes the repeats)."""
        return Measurer(self.config, self.o.run_id, self.state, self._sandbox_spec(), self.emit, self.should_stop,
                        platforms=len(self.executors), repeats=self.o.repeats, started=self.started)

    def plan(self, platform: str, alpha: float) -> VerdictPlan:
        """The pre-registered test of one experiment on one platform (`jobs.run.measuring.plan_for`)."""
        return plan_for(self.config, self.state, platform, alpha, self.o.repeats)

    # -- phases ----------------------------------------------------------------------------
    def research_phase(self) -> list[Hypothesis]:
        return Researching(self.repo, self.out, self.config, self.state, self.emit,
                           Isolation.from_spec(self._sandbox_spec()), self.o.agent, lambda: self.agent,
                           self._charge_llm, list(self.o.candidates), self.o.research, self.o.profile).run()

    def calibrate_phase(self) -> dict[str, Any]:
        calibration = Calibrating(self.repo, self.bench).run(self.executors)
        # From here on experiments, the stack and the report measure by the derived yardstick where
        # the calibration found it fits (a resumed run finds the same in state.json).
        config = simulate.in_use(self.config, self.state.simulate, [e.platform for e in self.executors])
        if config is not self.config:
            self.config = self.bench.config = config
        return calibration

    def stack_phase(self, results: list[ExperimentRecord]) -> dict[str, ExperimentRecord]:
        primary = self.config.primary
        return Stacking(self.repo, self.out, self.state, self.executors, self.config.thresholds.alpha,
                        self.bench.measured, self.emit, primary=primary.name,
                        higher_is_better=primary.direction == "higher").run(results)

    stackable = staticmethod(stackable)

    def _recipes(self):
        from jobs.research.recipes import load_recipe_set
        return {r.id: r for name in self.config.research.recipes for r in load_recipe_set(name)}

    def _implement(self, h: Hypothesis) -> str:
        """The hypothesis's commit (made once, shared by every platform; kept under a ref)."""
        ref = branches.experiment_branch(self.o.run_id, h.id)
        existing = gitops.git(self.repo, "rev-parse", "--verify", "-q", ref, check=False)
        if existing:
            return existing
        tree = self.out / "work" / f"impl-{h.id}"
        gitops.add_worktree(self.repo, tree, self.state.base_commit)
        try:
            commit = self.agent.implement(h, tree, self.config)
        finally:
            gitops.remove_worktree(self.repo, tree)
        gitops.set_branch(self.repo, ref, commit)
        return commit

    def _budget_refusal(self, ex: Executor, h: Hypothesis, n: int, count: int) -> str:
        """Why `h`, with `count` experiments attempted before it, must not start (jobs.run.measuring), or ''."""
        return self.bench.budget_refusal(ex, self.bench.spec(ex, h.id, self.state.base_commit, n, "experiment"), count)

    def _announce(self, ex: Executor, nxt: Hypothesis, n: int, count: int) -> None:
        """Tell the executor which experiment comes next, so it may build that candidate beside this
        one's checks and simulation (`Executor.build_ahead`). Only for an agent whose edits cost
        nothing (no model spend): the next hypothesis is implemented now instead of after this
        experiment, and one the agent drops when it revises the list was made for nothing."""
        if self.agent.meter is not None or self._budget_refusal(ex, nxt, n, count + 1):
            return
        try:
            with self._impl_lock:
                commit = self._implement(nxt)
        except Exception:   # (NotImplementable, or the agent failing): said when its own turn comes, not
            return          # charged to this experiment, which is measured all the same
        ex.build_ahead(self.bench.spec(ex, nxt.id, commit, n, "experiment"))

    def _experiment(self, h: Hypothesis, ex: Executor, count: int, slot: int | None = None,
                    nxt: Hypothesis | None = None) -> ExperimentRecord:
        label = h.id if len(self.executors) == 1 else f"{h.id}@{ex.platform}"
        self.emit(events.ExperimentStart(label, platform=ex.platform))
        slot = slot or count + 1
        n = self.o.repeats or self.config.repeats.max
        refusal = self._budget_refusal(ex, h, n, count)
        if refusal:
            rec = self.bench.record(ex, h.id, h, Status.SKIPPED.value, refusal, skip=SkipCause.BUDGET)
        else:
            try:
                with self._impl_lock:
                    try:
                        commit = self._implement(h)
                    finally:
                        self._charge_llm()
            except NotImplementable as exc:
                cause = SkipCause.EDIT_REFUSED if str(exc).startswith("edit refused") else SkipCause.NOT_IMPLEMENTED
                rec = self.bench.record(ex, h.id, h, Status.SKIPPED.value, f"not implemented: {exc}", skip=cause)
            else:
                # Each experiment's keep level is its slot's share of the run's alpha (see
                # jobs.stats.sequential.slot_alpha), so the whole run keeps its false-keep bound.
                alpha = slot_alpha(self.config.thresholds.alpha, slot, self.config.budget.max_experiments)
                plan = self.plan(ex.platform, alpha / len(self.executors))
                if nxt is not None:
                    self._announce(ex, nxt, n, count)
                raw, verdict = self.bench.measure(ex, h.id, commit, "experiment", plan)
                rec = self.bench.record(ex, h.id, h, verdict.status.value, verdict.reason, commit=commit, raw=raw,
                                   verdict=verdict, plan=plan, slot=slot)
        self.emit(events.ExperimentDone(label, rec.status, rec.reason))
        return rec

    def experiments_phase(self, hypotheses: list[Hypothesis]) -> list[ExperimentRecord]:
        """Waves: up to `parallel` experiments per platform at once; between waves the agent may
        re-rank, add or drop the hypotheses still pending, in the light of the results so far."""
        self.emit(events.Phase("experiments", total=len(hypotheses)))
        done = ledger.finished(self.out)
        results: list[ExperimentRecord] = []
        kinds = {h.id: h.kind for h in hypotheses}
        for ex in self.executors:
            for h in hypotheses:
                key = f"{h.id}@{ex.platform}"
                if key in done:
                    rec = done[key]
                    rec.hypothesis_kind = rec.hypothesis_kind or h.kind
                    results.append(rec)
                    self.emit(events.ExperimentDone(h.id if len(self.executors) == 1 else key,
                                                    rec.status, rec.reason, resumed=True))
        finished = {(r.hypothesis, r.platform) for r in results}
        pending = [h for h in hypotheses if any((h.id, ex.platform) not in finished for ex in self.executors)]
        while pending:
            wave_size = min(ex.parallel for ex in self.executors)
            wave, pending = pending[:wave_size], pending[wave_size:]
            jobs = [(h, ex) for h in wave for ex in self.executors if (h.id, ex.platform) not in finished]
            workers = sum(ex.parallel for ex in self.executors)
            count, first_slot = self.attempted(results), self.next_slot(results, self.o.slots_spent)
            # One experiment at a time on one machine: the next one's candidate is built beside it.
            nxt = pending[0] if pending and len(jobs) == 1 and len(self.executors) == 1 else None
            with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
                futures = [pool.submit(self._experiment, h, ex, count + wave.index(h), first_slot + wave.index(h), nxt)
                           for h, ex in jobs]
                try:
                    wave_results = [f.result() for f in futures]
                except BaseException:
                    self._stop.set()   # the other experiments of the wave stop at their next step
                    raise
            results += wave_results
            if pending:
                pending = self.agent.revise(pending, list(results))
                self._charge_llm()
                kinds.update({h.id: h.kind for h in pending})
        results += self._combinations(results, done, kinds)
        self._save(phase="stack")
        for r in results:
            r.hypothesis_kind = r.hypothesis_kind or kinds.get(r.hypothesis, "")
        return results

    def _combinations(self, results: list[ExperimentRecord], done: dict[str, ExperimentRecord],
                      kinds: dict[str, str]) -> list[ExperimentRecord]:
        """Issue 44: build options that edit the same line of a build file cannot all stack (their
        commits conflict). Where two or more portable ones were kept alone, their combination (one
        patch editing that line with every kept member's edit) is measured as one more experiment,
        through the same path and budget as any other (`_experiment`: a refusal is its record);
        the stack then takes the family's best (`jobs.run.families`)."""
        kept = stackable(results)
        commits = {r.hypothesis: r.commit for r in results if r.commit}
        patches = commit_patches(self.repo, self.state.base_commit, kept, commits)
        out: list[ExperimentRecord] = []
        for fam in families.to_combine(kept, patches):
            if any(r.hypothesis == families.combined_id(fam.members) for r in results):
                continue                  # a resumed run: already among the hypotheses, and measured
            line = families.combine(fam.old, [fam.edits[m] for m in fam.members])
            h = self._combination(fam, line)
            kinds[h.id] = h.kind
            recs = [done[key] for ex in self.executors if (key := f"{h.id}@{ex.platform}") in done]
            if not recs:
                count, slot = self.attempted(results + out), self.next_slot(results + out, self.o.slots_spent)
                recs = [self._experiment(h, ex, count, slot) for ex in self.executors]
            out += recs
        return out

    def _combination(self, fam: families.Family, line: str) -> Hypothesis:
        """The combination of one family as a hypothesis with a patch of its own (under the run's
        folder), added to the state's hypotheses once so a resume and the report know it."""
        hid = families.combined_id(fam.members)
        shown = gitops.run(["show", f"{self.state.base_commit}:{fam.file}"], repo=self.repo)
        if shown.returncode != 0:
            raise gitops.GitError(f"git show {fam.file} at the base failed: {shown.stderr.strip()}")
        text = shown.stdout
        patch = self.out / "patches" / f"{hid}.patch"
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text(families.combined_patch(fam.file, text, fam.line, line), encoding="utf-8")
        flags = " ".join(f for m in fam.members for f in families.added_flags(fam.old, fam.edits[m]))
        h = Hypothesis(id=hid, title=f"Build with {flags} together ({fam.where})", kind="build",
                       rationale=(f"{', '.join(fam.members)} each edit {fam.where} and were each kept alone; their "
                                  "commits conflict, so only one can stack: this measures them together"),
                       evidence=[Evidence(fam.where, f"`{fam.old.strip()}` is the line each member edits")],
                       patch=str(patch), generated=f"the combination of {', '.join(fam.members)} (same line)")
        known = self.state.hypotheses or []
        if not any(k.id == hid for k in known):
            self._save(hypotheses=[*known, h])
        return h

    @staticmethod
    def next_slot(results: list[ExperimentRecord], spent: int = 0) -> int:
        """The first keep slot (jobs.stats.sequential.slot_alpha) a new wave may use: past every slot a
        measured experiment held, so a hypothesis skipped in an earlier wave never hands its number
        to a later one while the slot after it is already spent, and past the `spent` slots of
        earlier runs of the same question (RunOptions.slots_spent)."""
        return max([spent + Run.attempted(results)] + [r.slot or 0 for r in results]) + 1

    @staticmethod
    def attempted(results: list[ExperimentRecord]) -> int:
        """Hypotheses that counted against max_experiments: a lead no agent could implement
        costs nothing and must not crowd out the ones that can be built."""
        return len({r.hypothesis for r in results if r.skip_cause != SkipCause.NOT_IMPLEMENTED.value})

    def report_phase(self, results: list[ExperimentRecord], stacks: dict[str, ExperimentRecord]) -> RunSummary:
        reporting = Reporting(self.o.run_id, self.config, self.repo, self.out, self.state,
                              [ex.platform for ex in self.executors], self.o.agent, self.o.executor, self.o.repeats,
                              list(self.o.candidates), self.o.published)
        summary = reporting.summary(results, stacks, time.monotonic() - self.started)
        reporting.write(summary)
        self._save(phase="done")
        self.emit(events.Done(summary))
        return summary

    def execute(self) -> RunSummary | RunStopped | CalibrationOnly | ResearchOnly:
        """The run's summary; a `RunStopped` when there is nothing to try; with `calibrate_only` or
        `research_only`, what that step found."""
        runlock.acquire(self.out, self.o.run_id)          # `autoresearch clean` leaves a live run alone
        runlock.register(self.repo, self.o.run_id, self.out)
        try:
            self._init_state()
            if self.o.calibrate_only:
                self.calibrate_phase()
                return CalibrationOnly(self.o.run_id, self.state.calibration, self.state.cpus)
            hypotheses = self.research_phase()
            if self.o.research_only:
                return ResearchOnly(self.o.run_id, hypotheses)
            if not hypotheses:    # no work without a reason: no calibration, no branch
                why = ("research found no hypothesis and no --candidate was given; research.md says what was "
                       "scanned and what to do")
                self._save(phase="stopped", stopped=why)
                self.emit(events.RunWarning(f"nothing to try: {why}"))
                return RunStopped(self.o.run_id, why, str(self.out / "research.md"))
            self.calibrate_phase()
            # Issue 43: before any experiment, say when the wall clock cannot reach the target MDE
            # within the pair cap and no yardstick decides instead, and what would reach it.
            for message in reach_warnings(self.config, self.state, self.o.repeats):
                self.emit(events.RunWarning(message))
            results = self.experiments_phase(hypotheses)
            stacks = self.stack_phase(results)
            return self.report_phase(results, stacks)
        except RunCancelled:
            self._save(phase="cancelled")
            self.emit(events.Cancelled())
            raise
        except KeyboardInterrupt:
            self._stop.set()
            raise
        finally:
            self._stop.set()
            try:
                for ex in self._executors or []:
                    # Machine time of attempts cut short (cancel, Ctrl-C) was paid for all the same.
                    unreported = getattr(ex, "unreported_usd", 0.0) or 0.0
                    if unreported and self.state.begun:
                        self._save(cost_usd=round(self.state.cost_usd + unreported, 6))
                    ex.close()
            finally:
                self._end()

    def _end(self) -> None:
        """Best effort: a leftover here is what `autoresearch clean` is for; never mask the run's error."""
        try:
            cleanup.end_of_run(self.repo, self.o.run_id, self.out, finished=self.state.phase == "done")
        except gitops.GitError as exc:
            self.emit(events.RunWarning(f"could not tidy the target after the run: {exc}"))
        finally:
            runlock.release(self.out)
