"""One autoresearch run: research -> calibrate -> experiments -> stack -> report.

The imperative shell around the pure core. Every state change is written (state.json,
experiments.jsonl) before the next step starts: re-running the same run id resumes and never
re-runs a finished experiment. Progress goes to an `on_event` callback (rich bars in the CLI,
job.meta in an RQ worker) so this module knows nothing of terminals or queues.
"""
from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import hashlib

from . import branches, cleanup, drift, gitops, ledger, runlock, sandbox, yardstick
from .agent.offline import NotImplementable
from .calibration import calibrate_run, extra_pairs, merge_pairs
from .config import Overrides, TargetConfig, load_config
from .agent import make_agent
from . import agentkinds
from .errors import RunCancelled, RunError  # noqa: F401  (re-exported: jobs.pipeline.RunError)
from .executors import Executor, ExecutorUnavailable, make_executors
from .machine import summarise_load
from .model import ExperimentRecord, Hypothesis, SkipCause, Status
from .report import render_pr, render_research, with_warning
from .report_review import reproduce_lines
from .research.offline import Research, candidate_hypothesis, research
from .operator import OperatorError, OperatorPolicy
from .runner import Isolation, IsolationError, repo_key, run_step
from .sequential import mde, slot_alpha
from .spec import ExperimentSpec, RawResult, SandboxSpec
from .verdict import Judgement, Plan, judge


def env_prefix(names: list[str] | dict[str, str]) -> str:
    """`A="$A" B="$B" ` for a shell command line: the variables the benchmark was given, by name
    only (their values never reach a report, a PR or a log: issue 20, N8)."""
    return "".join(f'{k}="${k}" ' for k in sorted(names) if k.replace("_", "a").isalnum())


Event = dict[str, Any]
OnEvent = Callable[[Event], None]


@dataclass
class RunOptions:
    target: Path
    out: Path
    run_id: str
    agent: str | None = None                  # a name in jobs/agentkinds.py; None: the repo config's choice
    candidates: list[Path] = field(default_factory=list)
    repeats: int | None = None                # override the calibrated repeats per arm
    executor: str = "local"
    research_only: bool = False
    calibrate_only: bool = False
    no_sandbox: bool = False                  # the CLI user's --no-sandbox (reports say so)
    # What the operator decided (jobs.operator): the App and the Action pass theirs, read from their
    # own environment; None: this process's environment, as the CLI's user is the operator.
    operator: OperatorPolicy | None = None
    repo_identity: str | None = None          # whose cache namespace (`owner/name`); None: the target's path
    # Overrides from a command such as `/autoresearch optimize cpu metric=tg128 budget=30`.
    primary: str | None = None
    platforms: list[str] | None = None
    budget_usd: float | None = None
    # The offline research already made on this commit (the bot's plan did it): not scanned again.
    research: Research | None = None
    # The op profile's instrumented build: reuse (a profile kept for the same inputs, else build and
    # keep it), fresh (build even when one is kept) or off (no profile).
    profile: str = "reuse"
    # Keep slots (jobs.sequential.slot_alpha) that earlier runs asking the same question already
    # spent: the k-th `/autoresearch bench` of a pull request starts at slot k, so all its benches
    # together keep a no-change candidate with probability at most alpha.
    slots_spent: int = 0


def apply_overrides(config: TargetConfig, o: RunOptions) -> TargetConfig:
    """The command's arguments narrow the repo config (`TargetConfig.narrow`; OverrideError is a RunError)."""
    return config.narrow(Overrides(o.primary, o.platforms, o.budget_usd))


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
        self.config: TargetConfig = apply_overrides(load_config(self.repo), options)
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
        self.state = ledger.load_state(self.out) or {}
        self._executors = executors
        self._agent = agent
        self._lock = threading.Lock()     # experiments of a wave finish on several threads
        self._impl_lock = threading.Lock()  # one agent edit at a time: commits land in one repo
        self._llm_charged = 0.0             # model spend of this process already in cost_usd
        self.started = time.monotonic()

    def emit(self, event: Event) -> None:
        with self._lock:
            self._emit(event)

    # -- state -----------------------------------------------------------------------------
    def _save(self, **changes: Any) -> None:
        with self._lock:
            self.state.update(changes)
            ledger.save_state(self.out, self.state)

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
                           protect=[str(self.repo), str(self.out), *self.operator.protected])

    def _init_state(self) -> None:
        self._check_isolation()
        if agentkinds.kind(self.o.agent).needs_env:
            self.agent      # e.g. --agent claude without a key (or SDK) refuses here, before any research is built
        base = gitops.head_commit(self.repo)
        overlap = yardstick.overlaps(self.config, gitops.files_at(self.repo, base))
        if overlap:                  # the CLI's preflight says it first; the App and the Action land here
            raise RunError("; ".join(overlap))
        if self.state:
            if self.state["run_id"] != self.o.run_id:
                raise RunError(f"{self.out} holds run {self.state['run_id']}, not {self.o.run_id}; "
                               "use another --out or that run id")
            if self.state["base_commit"] != base:
                raise RunError(f"run {self.o.run_id} started at {self.state['base_commit'][:12]} but the "
                               f"target is now at {base[:12]}; start a new run id for the new commit")
            if self.o.repeats is None:   # a resume measures with the same repeats as the first start
                self.o.repeats = self.state.get("repeats_override")
            self.emit({"type": "resume", "phase": self.state.get("phase")})
            return
        if not gitops.is_clean(self.repo):
            self._warnings.append(f"the target has uncommitted changes; the run uses the committed tree at {base[:12]}")
        for message in self._warnings:
            self.emit({"type": "warning", "message": message})
        self._save(run_id=self.o.run_id, base_commit=base, target=str(self.repo), agent=self.o.agent,
                   repeats_override=self.o.repeats,
                   phase="research", platforms=[e.platform for e in self.executors],
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
            if hasattr(self._agent, "isolation"):     # an agent that runs target code runs it in our sandbox
                self._agent.isolation = Isolation.from_spec(self._sandbox_spec())
        return self._agent

    def _charge_llm(self) -> None:
        """Add the model's spend since the last charge to the run's cost (budgets include it)."""
        meter = getattr(self._agent, "meter", None)
        if meter is None:
            return
        with self._lock:
            delta = meter.usd - self._llm_charged
            self._llm_charged = meter.usd
            llm = {**meter.as_dict(), "cost_usd": round(self.state.get("llm", {}).get("cost_usd", 0.0) + delta, 6)}
            self.state.update(llm=llm, cost_usd=round(self.state.get("cost_usd", 0.0) + delta, 6))
            ledger.save_state(self.out, self.state)

    # -- phases ----------------------------------------------------------------------------
    def research_phase(self) -> list[Hypothesis]:
        if "hypotheses" in self.state:
            return [Hypothesis.from_dict(h) for h in self.state["hypotheses"]]
        self.emit({"type": "phase", "phase": "research"})
        tree = self.out / "work" / "research"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        try:
            hypotheses: list[Hypothesis] = [candidate_hypothesis(Path(p)) for p in self.o.candidates]
            found = None
            if self.o.agent != "none":
                self._research_step("scan (recipes, memory passes)")
                found = self.o.research if self.o.research is not None else research(tree, self.config)
            sources = None
            callprof = None
            if found:
                from .research.offline import merge_sources, model_research
                from .research.sources import gather
                from .research.clib import research_c
                # Gap scan; forks/papers when configured; the op profile builds and runs target code,
                # so it runs in this run's sandbox like every other step.
                isolation = Isolation.from_spec(self._sandbox_spec())
                config, cache = self._profile_choice()
                if self.config.simulate is not None:
                    self._research_step("callgrind profile (simulate: workload)")
                extra, cnotes, callprof = research_c(tree, self.config, self.out / "patches", lambda c, cwd, timeout, **kw:
                                                     run_step(c, cwd, timeout, isolation=isolation, **kw))
                found.hypotheses += extra
                found.notes += cnotes
                sources = gather(tree, config, profile_runner=lambda command, cwd, timeout: run_step(
                    command, cwd, timeout, isolation=isolation, step="build"), on_step=self._research_step,
                    profile_cache=cache)
                if config is not self.config:
                    sources.notes.append("profile: not measured (switched off with --profile off)")
                elif sources.profile_missing:
                    self._profile_missing(sources.profile_missing)
                found = merge_sources(found, sources, self.config)
                if callprof is not None:
                    from .research.callgrind import digest
                    sources.extra_digests["callgrind profile of the reduced workload (simulated cycles)"] = digest(callprof)
                    if hasattr(self.agent, "profile_digest"):
                        self.agent.profile_digest = digest(callprof)
                if hasattr(self.agent, "research"):           # a model researcher ranks from the digests
                    found.hypotheses, extra = model_research(self.agent, found, sources)
                    found.notes += extra
                hypotheses += found.hypotheses
            notes = found.notes if found else ["--agent none: only the given candidates are evaluated"]
            findings = [f"`{f.where}` {f.describe()}" for f in (found.findings if found else [])]
            from .research.callgrind import render as render_callgrind
            from .research.clib import scanned
            coverage = scanned(tree, self.config, sources_ran=found is not None, findings=len(findings),
                               candidates=len(self.o.candidates), prof=callprof, hypotheses=len(hypotheses))
        finally:
            gitops.remove_worktree(self.repo, tree)
        self._charge_llm()
        (self.out / "research.md").write_text(with_warning(render_research(
            self.config.name or self.repo.name, self.state["base_commit"], hypotheses, notes, findings,
            self.o.agent), self.state.get("profile_missing", "")) + "\n" + "\n".join(coverage + (render_callgrind(callprof) if callprof else []))
            + ("\n" + sources.markdown() if sources else ""), encoding="utf-8")
        (self.out / "hypotheses.json").write_text(
            json.dumps([h.to_dict() for h in hypotheses], indent=2), encoding="utf-8")
        profile = sources.profile.to_dict() if sources is not None and sources.profile is not None else None
        self._save(hypotheses=[h.to_dict() for h in hypotheses], phase="calibrate", profile=profile,
                   callgrind=callprof.to_dict() if callprof else None)
        self.emit({"type": "research_done", "hypotheses": [h.id for h in hypotheses]})
        return hypotheses

    def _profile_missing(self, why: str) -> None:
        """The op profile was configured but not measured: stop (research.profile.required) or go on
        ranking by kind weights alone, saying so loudly, since the ranking decides what is tested."""
        spec = self.config.research.profile
        fix = (f"raise research.profile.timeout (now {spec.timeout:.0f} s), warm the build's cache (ccache) "
               "or fix the instrumented build, then run again (`--profile reuse` keeps a measured profile)")
        if spec.required:
            raise RunError(f"research.profile: the op profile was not measured ({why}); research.profile.required "
                           f"is true, so the run stops before anything is measured; fix: {fix}")
        message = (f"the op profile was not measured ({why}): hypotheses are ranked by kind weights alone, so the "
                   f"ones a profile would put first may not be tested; fix: {fix}, or set "
                   "research.profile.required: true to stop instead")
        self._save(profile_missing=message)
        self.emit({"type": "warning", "message": message})

    def _research_step(self, name: str) -> None:
        self.emit({"type": "progress", "name": "research", "message": name, "fraction": 0.0})

    def _profile_choice(self) -> tuple[TargetConfig, Path | None]:
        """The config the research sources see and where the op profile is kept (`--profile`)."""
        spec = self.config.research.profile
        if spec is None:
            return self.config, None
        if self.o.profile == "off":
            return self.config.model_copy(update={"research": self.config.research.model_copy(
                update={"profile": None})}), None
        from .research import profile as profile_mod
        from .research.sources import KERNELS_DIR
        recipe = KERNELS_DIR / spec.instrument
        git_dir = Path(gitops.git(self.repo, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        cache = profile_mod.cache_file(
            git_dir / "autoresearch" / "profiles", self.state["base_commit"], spec.model_dump_json(),
            recipe.read_text(encoding="utf-8") if recipe.is_file() else "", self.config.build, self.config.benchmark,
            self.state.get("bench_env_digest", ""))
        if self.o.profile == "fresh":
            cache.unlink(missing_ok=True)
        return self.config, cache

    def _spec(self, ex: Executor, name: str, head: str, n: int, kind: str, *, plan: Plan | None = None,
              base: str | None = None) -> ExperimentSpec:
        base = base or self.state["base_commit"]
        # The pair order and input seeds are drawn from the experiment's identity: a resumed run
        # repeats them, and nobody picks a lucky draw.
        seed = int.from_bytes(hashlib.sha256(f"{self.o.run_id}/{name}/{ex.platform}/{kind}/{base}/{head}"
                                             .encode()).digest()[:4], "big")
        stop = None
        prior: list[list[float]] = []
        if plan is not None:
            stop = replace(plan.rule(), max_pairs=n)      # the verdict's own rule, capped at this spec's pairs
            prior = [list(p) for p in plan.priors.get(self.config.primary.name, ())]
        return ExperimentSpec.from_config(
            self.config, run_id=self.o.run_id, name=name, platform=ex.platform,
            base_commit=base, head_commit=head, n_per_arm=n, kind=kind, seed=seed, stop=stop, prior=prior,
            adjust=list(plan.adjust.get(self.config.primary.name, ())) if plan else [],
            clock=self.config.primary.clock, timed_share=self.config.integrity.timed_share,
            sandbox=self._sandbox_spec(), simulate_floor_pct=self._sim_floor(ex.platform))

    def _sim_floor(self, platform: str) -> float:
        """The simulated change a keep needs: the config's floor, raised past the A/A jitter."""
        from .simulate import floor_pct
        if self.config.simulate is None:
            return 0.0
        aa = self.state.get("simulate", {}).get(platform, {}).get("aa_delta_pct")
        return floor_pct(self.config.simulate.min_effect_pct, aa)

    def _execute(self, ex: Executor, spec: ExperimentSpec) -> RawResult:
        label = spec.name if len(self.executors) == 1 else f"{spec.name}@{ex.platform}"

        def progress(message: str, fraction: float) -> None:
            # Checked between every build, check and benchmark invocation: a cancel takes effect
            # within one step, and the executor's own cleanup releases its machine.
            if self.should_stop():
                raise RunCancelled(f"run {self.o.run_id} cancelled")
            self.emit({"type": "progress", "name": label, "message": message, "fraction": fraction})
        if self.should_stop():
            raise RunCancelled(f"run {self.o.run_id} cancelled")
        raw = ex.run(spec, progress)
        self._save(cost_usd=round(self.state.get("cost_usd", 0.0) + raw.cost_usd, 4))
        if raw.machine:       # where it ran (ISA, kernel, compiler) and the load seen while it ran
            seen = self.state.get("machines", {}).get(ex.platform, {})
            facts = {k: v for k, v in raw.machine.items() if k != "load"}
            self._save(machines={**self.state.get("machines", {}),
                                 ex.platform: {**facts, "load": seen.get("load", []) + list(raw.machine.get("load", []))}})
        return raw

    def _budget_refusal(self, ex: Executor, spec: ExperimentSpec, count: int) -> str:
        """Why this experiment must not start (budgets are hard caps), or ''."""
        budget = self.config.budget
        if count >= budget.max_experiments:
            return f"budget: max_experiments={budget.max_experiments} reached"
        if (time.monotonic() - self.started) / 3600 >= budget.wall_hours:
            return f"budget: wall_hours={budget.wall_hours:g} reached"
        estimate = ex.estimate_usd(spec)
        spent = self.state.get("cost_usd", 0.0)
        if spent + estimate > budget.usd:
            return f"budget: {spent:.2f} USD spent + {estimate:.2f} USD estimated would exceed {budget.usd:g} USD"
        return ""

    def calibrate_phase(self) -> dict[str, Any]:
        for ex in self.executors:
            if ex.platform in self.state["calibration"]:
                continue
            if self._reuse_calibration(ex):
                continue
            self.emit({"type": "phase", "phase": "calibrate", "platform": ex.platform})
            spec = self._spec(ex, "calibration", self.state["base_commit"], self.config.repeats.calibration,
                              "calibration")
            refusal = self._budget_refusal(ex, spec, 0)
            if refusal:
                raise RunError(f"cannot calibrate on {ex.platform}: {refusal}")
            raw = self._execute(ex, spec)
            if raw.status == "skipped":   # no machine or no budget: nothing about the target
                raise RunError(f"calibration on {ex.platform} could not start: {raw.reason}")
            if raw.status != "ok":
                raise RunError(f"the baseline itself could not be measured on {ex.platform} "
                               f"({raw.status}: {raw.reason}); fix the target's build/benchmark/checks "
                               f"first.\n{raw.log}")
            config = self.config
            if self.o.repeats:   # the MDE and pair counts reported are those of the cap this run uses
                config = config.model_copy(update={"repeats": config.repeats.model_copy(update={"max": self.o.repeats})})
            result = calibrate_run(raw, config)
            more = extra_pairs(result, config, len(raw.pairs()))
            if more:              # the bias bound came out wide: one more batch of A/A pairs (calibration.extra_pairs)
                spec = self._spec(ex, "calibration-more", self.state["base_commit"], more, "calibration")
                extra = None if self._budget_refusal(ex, spec, 0) else self._execute(ex, spec)
                if extra is not None and extra.status == "ok":
                    raw = merge_pairs(raw, extra)
                    result = calibrate_run(raw, config)
            if result.problems:
                raise RunError(f"calibration on {ex.platform}: " + "; ".join(result.problems)
                               + ". No verdict would be trustworthy; fix this first.")
            cal = {name: c.to_dict() for name, c in result.metrics.items()}
            for message in result.warnings:
                self.emit({"type": "warning", "message": f"{ex.platform}: {message}"})
            self._append(ExperimentRecord(
                run_id=self.o.run_id, name="calibration", hypothesis="A/A", platform=ex.platform,
                status="ok", reason="two builds of the base commit against each other",
                base_commit=self.state["base_commit"],
                calibration={k: {f: v for f, v in c.items() if f != "prior"} for k, c in cal.items()},
                seconds=raw.seconds, cpu=raw.cpu, cost_usd=raw.cost_usd, kind="calibration",
                flags=[f for c in cal.values() for f in c["flags"]] + result.warnings,
                runner={"pairs": len(raw.pairs()), "sandboxed": raw.sandboxed, "steps": raw.steps}))
            simulated = None
            if raw.simulated:
                from .simulate import compare
                sim = compare(raw.simulated)
                simulated = {"aa_delta_pct": sim.delta_pct if sim else None, "base_cycles": sim.base if sim else None,
                             "seconds": raw.simulated.get("A", {}).get("wall_s"),
                             "native_seconds": raw.steps.get("native_simulate_s")}
            self._adopt_calibration(ex.platform, cal, result.digests, raw.cpu, simulated)
            self.emit({"type": "calibrated", "platform": ex.platform, "calibration": cal})
            if ex.platform == "local":
                from . import calcache
                calcache.store(self.repo, self._calibration_key(ex.platform, raw.cpu), {
                    "run_id": self.o.run_id, "calibration": cal, "digests": result.digests, "cpu": raw.cpu,
                    "simulate": simulated})
        self._save(phase="experiments")
        return self.state["calibration"]

    def _adopt_calibration(self, platform: str, cal: dict[str, Any], digests: Any, cpu: str,
                           simulated: dict[str, Any] | None) -> None:
        """What every later step reads of a platform's calibration, measured here or reused."""
        if simulated:
            self._save(simulate={**self.state.get("simulate", {}), platform: simulated})
        self._save(calibration={**self.state["calibration"], platform: cal},
                   digests={**self.state.get("digests", {}), platform: digests},
                   cpus={**self.state.get("cpus", {}), platform: cpu})

    def _calibration_key(self, platform: str, cpu: str) -> str:
        from . import calcache
        return calcache.key(self.config, self.state["base_commit"], platform, cpu, self.o.repeats)

    def _reuse_calibration(self, ex: Executor) -> bool:
        """A recent calibration of this base on this machine with this contract (jobs/calcache.py)."""
        from . import calcache
        from .runner import cpu_model
        if ex.platform != "local":
            return False
        found = calcache.lookup(self.repo, self._calibration_key(ex.platform, cpu_model()))
        if found is None:
            return False
        cal = found["calibration"]
        reason = (f"reused: the calibration of run {found['run_id']} ({found['age_s'] / 60:.0f} min ago; same base "
                  "commit, machine and contract)")
        self._append(ExperimentRecord(
            run_id=self.o.run_id, name="calibration", hypothesis="A/A", platform=ex.platform, status="ok",
            reason=reason, base_commit=self.state["base_commit"], cpu=found["cpu"], kind="calibration",
            calibration={k: {f: v for f, v in c.items() if f != "prior"} for k, c in cal.items()},
            flags=[f for c in cal.values() for f in c.get("flags", [])], runner={"reused_from": found["run_id"]}))
        self._adopt_calibration(ex.platform, cal, found["digests"], found["cpu"], found.get("simulate"))
        self.emit({"type": "warning", "message": f"{ex.platform}: calibration {reason}"})
        self.emit({"type": "calibrated", "platform": ex.platform, "calibration": cal, "reused": True})
        return True

    def plan(self, platform: str, alpha: float) -> Plan:
        """The pre-registered test of one experiment on one platform at keep level `alpha`."""
        th, rp = self.config.thresholds, self.config.repeats
        cal = self.state["calibration"][platform]
        primary = cal[self.config.primary.name]
        max_pairs = self.o.repeats or rp.max
        # The calibration may have raised the floor above the config's (an A/A bias between builds).
        floor = max(th.min_effect_pct, primary.get("floor_pct", th.min_effect_pct))
        plan = Plan(alpha=alpha, floor_pct=floor, target_pct=max(th.target_mde_pct, floor), max_pairs=max_pairs,
                    min_pairs=min(rp.min, max_pairs), alpha_loss=th.alpha,
                    priors={name: tuple(tuple(p) for p in c.get("prior", [])) for name, c in cal.items()},
                    digests=tuple(d) if (d := self.state.get("digests", {}).get(platform)) is not None else None,
                    adjust={name: tuple(c.get("adjust", ())) for name, c in cal.items()})
        if alpha <= 0:
            return plan
        # The machine's noise as the run goes (jobs/drift.py): once recent experiments give enough
        # pairs, they, not the calibration alone, say which effects this run can still see.
        residuals, _ = drift.current([p[0] for p in primary.get("prior", [])],
                                     self.state.get("noise", {}).get(platform, {}).get("pool", []))
        power = mde(residuals, plan.rule(), prior=plan.prior(self.config.primary.name), n_sims=200)
        return Plan(**{**plan.__dict__, "mde_pct": power.effect_pct})

    def _follow_noise(self, platform: str, name: str, raw: RawResult, plan: Plan) -> None:
        """Add this experiment's primary-metric residuals to the platform's recent-noise pool."""
        from .verdict import metric_pairs
        primary = self.config.primary
        ys = [p.y for p in metric_pairs(raw, primary.name, primary.direction,
                                        tuple(plan.adjust.get(primary.name, ())))]
        res = drift.residuals(ys)
        if not res:
            return
        seen = self.state.get("noise", {}).get(platform, {})
        keep = max(2 * self.config.repeats.calibration, drift.MIN_POOL)
        entry = {"pool": drift.pooled(seen.get("pool", []), res, keep),
                 "history": seen.get("history", []) + [{"name": name, "pairs": len(res),
                                                         "noise_pct": round(drift.scale_pct(res), 2)}]}
        self._save(noise={**self.state.get("noise", {}), platform: entry})

    def _recipes(self):
        from .recipes import load_recipe_set
        return {r.id: r for name in self.config.research.recipes for r in load_recipe_set(name)}

    def _implement(self, h: Hypothesis) -> str:
        """The hypothesis's commit (made once, shared by every platform; kept under a ref)."""
        ref = branches.experiment_branch(self.o.run_id, h.id)
        existing = gitops.git(self.repo, "rev-parse", "--verify", "-q", ref, check=False)
        if existing:
            return existing
        tree = self.out / "work" / f"impl-{h.id}"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        try:
            commit = self.agent.implement(h, tree, self.config)
        finally:
            gitops.remove_worktree(self.repo, tree)
        gitops.set_branch(self.repo, ref, commit)
        return commit

    def _append(self, record: ExperimentRecord) -> None:
        with self._lock:
            ledger.append(self.out, record)

    def _record(self, ex: Executor, name: str, h: Hypothesis | None, status: str, reason: str, *,
                commit=None, raw: RawResult | None = None, kind="experiment", verdict: Judgement | None = None,
                plan: Plan | None = None, slot: int | None = None, base: str | None = None,
                skip: SkipCause | None = None) -> ExperimentRecord:
        metrics = list(verdict.metrics) if verdict else []
        rec = ExperimentRecord(
            run_id=self.o.run_id, name=name, hypothesis=h.id if h else name, platform=ex.platform,
            status=status, reason=reason, commit=commit, base_commit=base or self.state["base_commit"],
            metrics=metrics, seconds=raw.seconds if raw else 0.0,
            cpu=raw.cpu if raw else "", cost_usd=raw.cost_usd if raw else 0.0,
            log=raw.log if raw and status != "keep" else "", kind=kind,
            flags=verdict.flags if verdict else [], alpha=plan.alpha if plan else None, slot=slot,
            runner=verdict.runner if verdict else {}, hypothesis_kind=h.kind if h else kind,
            skip_cause=skip.value if skip else None, regressions=[m.name for m in metrics if m.verdict == "loss"])
        self._append(rec)
        return rec

    def measure(self, ex: Executor, name: str, commit: str, kind: str, plan: Plan,
                base: str | None = None) -> tuple[RawResult, Judgement]:
        spec = self._spec(ex, name, commit, plan.max_pairs, kind, plan=plan, base=base)
        raw = self._execute(ex, spec)
        if kind == "experiment" and raw.status == "ok":
            self._follow_noise(ex.platform, name, raw, plan)
        if self.config.simulate is not None or raw.stopped == "identical":
            from .simulate import Guard, judge_yardstick
            tolerance = self.config.simulate.wall_tolerance_pct if self.config.simulate else 5.0
            guard = Guard(tolerance, plan.alpha_loss, plan.min_pairs, plan.alpha)
            return raw, judge_yardstick(raw, self.config, plan, self._sim_floor(ex.platform), guard)
        return raw, judge(raw, self.config, plan)

    def _experiment(self, h: Hypothesis, ex: Executor, count: int, slot: int | None = None) -> ExperimentRecord:
        label = h.id if len(self.executors) == 1 else f"{h.id}@{ex.platform}"
        self.emit({"type": "experiment_start", "name": label, "platform": ex.platform})
        slot = slot or count + 1
        n = self.o.repeats or self.config.repeats.max
        refusal = self._budget_refusal(ex, self._spec(ex, h.id, self.state["base_commit"], n, "experiment"), count)
        if refusal:
            rec = self._record(ex, h.id, h, Status.SKIPPED.value, refusal, skip=SkipCause.BUDGET)
        else:
            try:
                with self._impl_lock:
                    try:
                        commit = self._implement(h)
                    finally:
                        self._charge_llm()
            except NotImplementable as exc:
                cause = SkipCause.EDIT_REFUSED if str(exc).startswith("edit refused") else SkipCause.NOT_IMPLEMENTED
                rec = self._record(ex, h.id, h, Status.SKIPPED.value, f"not implemented: {exc}", skip=cause)
            else:
                # Each experiment's keep level is its slot's share of the run's alpha (see
                # jobs.sequential.slot_alpha), so the whole run keeps its false-keep bound.
                alpha = slot_alpha(self.config.thresholds.alpha, slot, self.config.budget.max_experiments)
                plan = self.plan(ex.platform, alpha / len(self.executors))
                raw, verdict = self.measure(ex, h.id, commit, "experiment", plan)
                rec = self._record(ex, h.id, h, verdict.status.value, verdict.reason, commit=commit, raw=raw,
                                   verdict=verdict, plan=plan, slot=slot)
        self.emit({"type": "experiment_done", "name": label, "status": rec.status, "reason": rec.reason})
        return rec

    def experiments_phase(self, hypotheses: list[Hypothesis]) -> list[ExperimentRecord]:
        """Waves: up to `parallel` experiments per platform at once; between waves the agent may
        re-rank, add or drop the hypotheses still pending, in the light of the results so far."""
        self.emit({"type": "phase", "phase": "experiments", "total": len(hypotheses)})
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
                    self.emit({"type": "experiment_done", "name": h.id if len(self.executors) == 1 else key,
                               "status": rec.status, "reason": rec.reason, "resumed": True})
        finished = {(r.hypothesis, r.platform) for r in results}
        pending = [h for h in hypotheses if any((h.id, ex.platform) not in finished for ex in self.executors)]
        while pending:
            wave_size = min(ex.parallel for ex in self.executors)
            wave, pending = pending[:wave_size], pending[wave_size:]
            jobs = [(h, ex) for h in wave for ex in self.executors if (h.id, ex.platform) not in finished]
            workers = sum(ex.parallel for ex in self.executors)
            count, first_slot = self.attempted(results), self.next_slot(results, self.o.slots_spent)
            with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
                futures = [pool.submit(self._experiment, h, ex, count + wave.index(h), first_slot + wave.index(h))
                           for h, ex in jobs]
                try:
                    wave_results = [f.result() for f in futures]
                except BaseException:
                    self._stop.set()   # the other experiments of the wave stop at their next step
                    raise
            results += wave_results
            if pending:
                pending = self.agent.revise(pending, [r.to_dict() for r in results])
                self._charge_llm()
                kinds.update({h.id: h.kind for h in pending})
        self._save(phase="stack")
        for r in results:
            r.hypothesis_kind = r.hypothesis_kind or kinds.get(r.hypothesis, "")
        return results

    @staticmethod
    def next_slot(results: list[ExperimentRecord], spent: int = 0) -> int:
        """The first keep slot (jobs.sequential.slot_alpha) a new wave may use: past every slot a
        measured experiment held, so a hypothesis skipped in an earlier wave never hands its number
        to a later one while the slot after it is already spent, and past the `spent` slots of
        earlier runs of the same question (RunOptions.slots_spent)."""
        return max([spent + Run.attempted(results)] + [r.slot or 0 for r in results]) + 1

    @staticmethod
    def attempted(results: list[ExperimentRecord]) -> int:
        """Hypotheses that counted against max_experiments: a lead no agent could implement
        costs nothing and must not crowd out the ones that can be built."""
        return len({r.hypothesis for r in results if r.skip_cause != SkipCause.NOT_IMPLEMENTED.value})

    @staticmethod
    def stackable(results: list[ExperimentRecord]) -> list[str]:
        """Hypotheses kept on at least one platform and, on none, broken, invalid, or measured
        slower on any metric (decided from the records' fields, never from their text)."""
        by_h: dict[str, list[ExperimentRecord]] = {}
        for r in results:
            by_h.setdefault(r.hypothesis, []).append(r)
        return [name for name, recs in by_h.items()
                if any(r.status == Status.KEEP.value for r in recs)
                and not any(r.broken or r.regressions for r in recs)]

    def _build_stack(self, names: list[str], commits: dict[str, str], label: str) -> tuple[str, list[str], list[str]]:
        """Cherry-pick `names` onto the base in order: (head, applied, dropped on conflict)."""
        tree = self.out / "work" / f"stack-{label}"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        applied, dropped = [], []
        try:
            for name in names:
                (applied if gitops.cherry_pick(tree, commits[name]) else dropped).append(name)
            return gitops.head_commit(tree), applied, dropped
        finally:
            gitops.remove_worktree(self.repo, tree)

    def attribution_phase(self, applied: list[str], commits: dict[str, str], head: str) -> list[str]:
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
            without = self.state.get("stack_without", {}).get(name)
            if not without:
                without, _, _ = self._build_stack([n for n in current if n != name], commits, f"without-{name}")
                self._save(stack_without={**self.state.get("stack_without", {}), name: without})
            kept_somewhere, harmful = False, False
            for ex in self.executors:
                label = f"attribution:{name}" + ("" if len(self.executors) == 1 else f"@{ex.platform}")
                rec = done.get(f"attribution:{name}@{ex.platform}")
                if rec is None:
                    self.emit({"type": "experiment_start", "name": label})
                    plan = self.plan(ex.platform, self.config.thresholds.alpha / tests / len(self.executors))
                    raw, verdict = self.measure(ex, f"attribution:{name}", current_head, "attribution", plan,
                                                base=without)
                    rec = self._record(ex, f"attribution:{name}", None, verdict.status.value, verdict.reason,
                                       commit=current_head, raw=raw, kind="attribution", verdict=verdict, plan=plan,
                                       base=without)
                    self.emit({"type": "experiment_done", "name": label, "status": rec.status, "reason": rec.reason})
                kept_somewhere |= rec.status == Status.KEEP.value
                harmful |= rec.broken
            if harmful or not kept_somewhere:
                current.remove(name)
                current_head = without
        return current

    def stack_phase(self, results: list[ExperimentRecord]) -> dict[str, ExperimentRecord]:
        done = ledger.finished(self.out, kind="stack")
        names = self.stackable(results)
        commits = {r.hypothesis: r.commit for r in results if r.commit}
        branch = self.state["branch"]
        if not names:
            self._no_branch(branch, "nothing was kept")
            return {}
        if not self.state.get("stack_commit"):
            self.emit({"type": "phase", "phase": "stack", "total": len(names)})
            head, applied, dropped = self._build_stack(names, commits, "all")
            self._save(stack_commit=head, stack_applied=applied, stack_dropped=dropped)
        applied, dropped = self.state["stack_applied"], self.state.get("stack_dropped", [])
        if "stack_final" not in self.state:
            survivors = applied
            if len(applied) >= 2:
                survivors = self.attribution_phase(applied, commits, self.state["stack_commit"])
            final = self.state["stack_commit"]
            if survivors != applied:
                final = self._build_stack(survivors, commits, "final")[0]
            self._save(stack_final=final, stack_survivors=survivors,
                       stack_unattributed=[n for n in applied if n not in survivors])
        head, survivors = self.state["stack_final"], self.state["stack_survivors"]
        stacks: dict[str, ExperimentRecord] = {}
        if not survivors:
            self._no_branch(branch, "no kept commit showed a contribution of its own in the stack")
            self._save(stack_confirmed=False)
            return stacks
        notes = []
        if dropped:
            notes.append(f"dropped (conflicts): {', '.join(dropped)}")
        if self.state.get("stack_unattributed"):
            notes.append(f"dropped (no contribution of their own shown): {', '.join(self.state['stack_unattributed'])}")
        for ex in self.executors:
            key = f"stack@{ex.platform}"
            if key in done:
                stacks[ex.platform] = done[key]
                continue
            name = "stack" if len(self.executors) == 1 else key
            self.emit({"type": "experiment_start", "name": name})
            plan = self.plan(ex.platform, self.config.thresholds.alpha / len(self.executors))
            raw, verdict = self.measure(ex, "stack", head, "stack", plan)
            reason = verdict.reason + "".join(f"; {n}" for n in notes)
            stacks[ex.platform] = self._record(ex, "stack", None, verdict.status.value, reason, commit=head,
                                               raw=raw, kind="stack", verdict=verdict, plan=plan)
            self.emit({"type": "experiment_done", "name": name, "status": verdict.status.value, "reason": reason})
        if not any(st.status == Status.KEEP.value for st in stacks.values()):
            # The re-measure did not confirm the stack anywhere: the branch must not carry it.
            self._no_branch(branch, "the re-measure of the stack did not confirm it")
            self._save(stack_confirmed=False)
        else:
            gitops.set_branch(self.repo, branch, head)
            self._save(stack_confirmed=True, branch_left=True, branch_note="")
        return stacks

    def _no_branch(self, branch: str, why: str) -> None:
        """A branch equal to the base says nothing: none is left (an earlier one of this run goes)."""
        gitops.delete_branches(self.repo, branch)
        self._save(branch_left=False, branch_note=why)

    def _review_facts(self, results: list[ExperimentRecord]) -> dict[str, Any]:
        """What each kept commit touches, and the failed steps' first lines (jobs.review_facts)."""
        from .review_facts import branch_diffstat, commit_facts, with_failure_output
        base, facts = self.state["base_commit"], {}
        facts["experiments"] = [with_failure_output(r.to_dict(), r.log) for r in results]
        if self.state.get("stack_confirmed") and self.state.get("branch_left", True):
            head = self.state["stack_final"]
            facts["commits"] = commit_facts(self.repo, base, head, self.state.get("stack_survivors", []))
            facts["diffstat"] = branch_diffstat(self.repo, base, head) if len(facts["commits"]) > 1 else ""
        hyps = {h["id"]: h for h in self.state.get("hypotheses", [])}
        facts["hypotheses"] = {c["hypothesis"]: hyps[c["hypothesis"]] for c in facts.get("commits", [])
                               if c["hypothesis"] in hyps}
        return facts

    def report_phase(self, results: list[ExperimentRecord], stacks: dict[str, ExperimentRecord]) -> dict[str, Any]:
        measured = [ex.platform for ex in self.executors]
        configured = [p.name for p in self.config.platforms]
        summary = {
            "run_id": self.o.run_id, "target": self.config.name or self.repo.name, "repo": str(self.repo),
            "base_commit": self.state["base_commit"], "branch": self.state["branch"],
            "platform": measured[0], "platforms": measured + [p for p in configured if p not in measured],
            "cpus": self.state.get("cpus", {}), "cpu": self.state.get("cpus", {}).get(measured[0], ""),
            "machines": {p: {**{k: v for k, v in m.items() if k != "load"},
                             "load": summarise_load(m.get("load", []))}
                         for p, m in self.state.get("machines", {}).items()},
            "agent": self.o.agent, "primary": self.config.primary.name,
            "calibration": self.state["calibration"],
            **self._review_facts(results),
            "stack_applied": self.state.get("stack_survivors", self.state.get("stack_applied", [])),
            "stack_dropped": self.state.get("stack_dropped", []),
            "stack_unattributed": self.state.get("stack_unattributed", []),
            "attribution": [{k: v for k, v in r.items() if k != "log"}
                            for r in ledger.read(self.out) if r.get("kind") == "attribution"],
            "sandboxed": self.state.get("sandboxed", True),
            "unsandboxed_by": self.state.get("unsandboxed_by", ""),
            "profile_missing": self.state.get("profile_missing", ""),
            "noise": {p: {"history": n.get("history", []), "pool_pairs": len(n.get("pool", []))}
                      for p, n in self.state.get("noise", {}).items()},
            "profile": self.state.get("profile"),
            "simulate": self.state.get("simulate"),
            "error_control": {"alpha": self.config.thresholds.alpha,
                              "family": self.config.budget.max_experiments,
                              "platforms": len(self.executors)},
            "stacks": {p: {k: v for k, v in s.to_dict().items() if k != "log"} for p, s in stacks.items()},
            "cost_usd": self.state.get("cost_usd", 0.0),
            "wall_seconds": round(time.monotonic() - self.started, 1),
            "stack_confirmed": self.state.get("stack_confirmed", False),
            "branch_left": self.state.get("branch_left", True), "branch_note": self.state.get("branch_note", ""),
            "floor_pct": {ex.platform: self.plan(ex.platform, 0).floor_pct for ex in self.executors
                          if ex.platform in self.state["calibration"]},
            # A fresh measurement of base vs head (jobs.report_review.reproduce_lines), and the
            # command that re-prints or resumes this very run.
            "reproduce": reproduce_lines(str(self.repo), self.state["base_commit"],
                                         self.state["branch"] if self.state.get("stack_confirmed")
                                         and self.state.get("branch_left", True) else None,
                                         self.state.get("bench_env_names") or [], self.o.repeats, self.o.agent,
                                         [str(Path(c).resolve()) for c in self.o.candidates]),
            "resume": (env_prefix(self.state.get("bench_env_names") or [])
                       + f"autoresearch run {self.repo} --run-id {self.o.run_id} --out {self.out}"
                       + (f" --executor {self.o.executor}" if self.o.executor != "local" else "")
                       + (f" --repeats {self.o.repeats}" if self.o.repeats else "")),
        }
        summary = ledger.strict_json(summary)
        (self.out / "summary.json").write_text(ledger.dumps(summary, indent=2), encoding="utf-8")
        (self.out / "pr.md").write_text(render_pr(summary), encoding="utf-8")
        self._save(phase="done")
        self.emit({"type": "done", "summary": summary})
        return summary

    def execute(self) -> dict[str, Any]:
        runlock.acquire(self.out, self.o.run_id)          # `autoresearch clean` leaves a live run alone
        runlock.register(self.repo, self.o.run_id, self.out)
        try:
            self._init_state()
            if self.o.calibrate_only:
                self.calibrate_phase()
                return {"run_id": self.o.run_id, "calibration": self.state["calibration"],
                        "cpus": self.state.get("cpus", {})}
            hypotheses = self.research_phase()
            if self.o.research_only:
                return {"run_id": self.o.run_id, "hypotheses": [h.to_dict() for h in hypotheses]}
            if not hypotheses:    # no work without a reason: no calibration, no branch
                why = ("research found no hypothesis and no --candidate was given; research.md says what was "
                       "scanned and what to do")
                self._save(phase="stopped", stopped=why)
                self.emit({"type": "warning", "message": f"nothing to try: {why}"})
                return {"run_id": self.o.run_id, "stopped": why, "hypotheses": [], "research": str(self.out / "research.md")}
            self.calibrate_phase()
            results = self.experiments_phase(hypotheses)
            stacks = self.stack_phase(results)
            return self.report_phase(results, stacks)
        except RunCancelled:
            self._save(phase="cancelled")
            self.emit({"type": "cancelled"})
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
                    if unreported and self.state:
                        self._save(cost_usd=round(self.state.get("cost_usd", 0.0) + unreported, 6))
                    ex.close()
            finally:
                self._end()

    def _end(self) -> None:
        """Best effort: a leftover here is what `autoresearch clean` is for; never mask the run's error."""
        try:
            cleanup.end_of_run(self.repo, self.o.run_id, self.out, finished=self.state.get("phase") == "done")
        except gitops.GitError as exc:
            self.emit({"type": "warning", "message": f"could not tidy the target after the run: {exc}"})
        finally:
            runlock.release(self.out)
