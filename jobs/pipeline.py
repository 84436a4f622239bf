"""One autoresearch run: research -> calibrate -> experiments -> stack -> report.

The imperative shell around the pure core. Every state change is written (state.json,
experiments.jsonl) before the next step starts: re-running the same run id resumes and never
re-runs a finished experiment. Progress goes to an `on_event` callback (rich bars in the CLI,
job.meta in an RQ worker) so this module knows nothing of terminals or queues.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import gitops, ledger
from .agent.offline import NotImplementable, OfflineAgent
from .config import TargetConfig, load_config
from .executors import Executor
from .executors.local import LocalExecutor
from .model import ExperimentRecord, Hypothesis, Status
from .report import render_pr, render_research
from .research.offline import candidate_hypothesis, research
from .spec import ExperimentSpec, RawResult
from .stats import calibrate
from .verdict import judge

Event = dict[str, Any]
OnEvent = Callable[[Event], None]


class RunError(RuntimeError):
    """The run could not proceed; the message says why and what to do."""


@dataclass
class RunOptions:
    target: Path
    out: Path
    run_id: str
    agent: str = "offline"                    # offline | none | claude
    candidates: list[Path] = field(default_factory=list)
    repeats: int | None = None                # override the calibrated repeats per arm
    executor: str = "local"
    research_only: bool = False
    calibrate_only: bool = False


def new_run_id(base_commit: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + base_commit[:7]


class Run:
    def __init__(self, options: RunOptions, on_event: OnEvent | None = None,
                 executor: Executor | None = None, agent=None):
        self.o = options
        self.emit = on_event or (lambda event: None)
        self.repo = gitops.toplevel(options.target)
        if self.repo is None:
            raise RunError(f"{options.target} is not a git repository: autoresearch needs one "
                           "(git init && git add -A && git commit)")
        self.config: TargetConfig = load_config(self.repo)
        self.out = Path(options.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = ledger.load_state(self.out) or {}
        self._executor = executor
        self._agent = agent
        self.started = time.monotonic()

    # -- state -----------------------------------------------------------------------------
    def _save(self, **changes: Any) -> None:
        self.state.update(changes)
        ledger.save_state(self.out, self.state)

    def _init_state(self) -> None:
        base = gitops.head_commit(self.repo)
        if self.state:
            if self.state["run_id"] != self.o.run_id:
                raise RunError(f"{self.out} holds run {self.state['run_id']}, not {self.o.run_id}; "
                               "use another --out or that run id")
            if self.state["base_commit"] != base:
                raise RunError(f"run {self.o.run_id} started at {self.state['base_commit'][:12]} but the "
                               f"target is now at {base[:12]}; start a new run id for the new commit")
            self.emit({"type": "resume", "phase": self.state.get("phase")})
            return
        if not gitops.is_clean(self.repo):
            self.emit({"type": "warning", "message": "the target has uncommitted changes; the run uses "
                       f"the committed tree at {base[:12]}"})
        self._save(run_id=self.o.run_id, base_commit=base, target=str(self.repo), agent=self.o.agent,
                   phase="research", platform=self.executor.platform, branch=f"autoresearch/{self.o.run_id}")

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            if self.o.executor != "local":
                raise RunError(f"executor {self.o.executor!r} is not available in this build")
            self._executor = LocalExecutor(self.repo, self.out / "work")
        return self._executor

    # -- phases ----------------------------------------------------------------------------
    def research_phase(self) -> list[Hypothesis]:
        if "hypotheses" in self.state:
            return [Hypothesis.from_dict(h) for h in self.state["hypotheses"]]
        self.emit({"type": "phase", "phase": "research"})
        tree = self.out / "work" / "research"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        try:
            hypotheses: list[Hypothesis] = [candidate_hypothesis(Path(p)) for p in self.o.candidates]
            found = research(tree, self.config) if self.o.agent != "none" else None
            if found:
                hypotheses += found.hypotheses
            notes = found.notes if found else ["--agent none: only the given candidates are evaluated"]
            findings = [f"`{f.where}` {f.describe()}" for f in (found.findings if found else [])]
        finally:
            gitops.remove_worktree(self.repo, tree)
        (self.out / "research.md").write_text(render_research(
            self.config.name or self.repo.name, self.state["base_commit"], hypotheses, notes, findings,
            self.o.agent), encoding="utf-8")
        (self.out / "hypotheses.json").write_text(
            json.dumps([h.to_dict() for h in hypotheses], indent=2), encoding="utf-8")
        self._save(hypotheses=[h.to_dict() for h in hypotheses], phase="calibrate")
        self.emit({"type": "research_done", "hypotheses": [h.id for h in hypotheses]})
        return hypotheses

    def _spec(self, name: str, head: str, n: int, kind: str, checks: bool = True) -> ExperimentSpec:
        return ExperimentSpec.from_config(
            self.config, run_id=self.o.run_id, name=name, platform=self.executor.platform,
            base_commit=self.state["base_commit"], head_commit=head, n_per_arm=n, kind=kind,
            run_checks=checks)

    def _execute(self, spec: ExperimentSpec) -> RawResult:
        def progress(message: str, fraction: float) -> None:
            self.emit({"type": "progress", "name": spec.name, "message": message, "fraction": fraction})
        return self.executor.run(spec, progress)

    def calibrate_phase(self) -> dict[str, Any]:
        if "calibration" in self.state:
            return self.state["calibration"]
        self.emit({"type": "phase", "phase": "calibrate"})
        n = self.config.repeats.calibration
        spec = self._spec("calibration", self.state["base_commit"], n, "calibration", checks=True)
        raw = self._execute(spec)
        if raw.status != "ok":
            raise RunError(f"the baseline itself could not be measured ({raw.status}: {raw.reason}); "
                           f"fix the target's build/benchmark/checks first.\n{raw.log}")
        th, rp = self.config.thresholds, self.config.repeats
        cal = {}
        for metric in self.config.metrics:
            a, b = raw.base.values.get(metric.name), raw.head.values.get(metric.name)
            if not a or not b:
                continue
            c = calibrate(a, raw.base.order, b, raw.head.order, alpha=th.alpha,
                          target_mde_pct=th.target_mde_pct, n_min=rp.min, n_max=rp.max,
                          min_effect_pct=th.min_effect_pct, probe_a=raw.base.probe or None,
                          probe_b=raw.head.probe or None)
            cal[metric.name] = asdict(c)
        if self.config.primary.name not in cal:
            raise RunError(f"calibration produced no samples of the primary metric {self.config.primary.name}")
        ledger.append(self.out, ExperimentRecord(
            run_id=self.o.run_id, name="calibration", hypothesis="A/A", platform=self.executor.platform,
            status="ok", reason="baseline against itself", base_commit=self.state["base_commit"],
            metrics=[{"name": k, **v} for k, v in cal.items()], seconds=raw.seconds, cpu=raw.cpu,
            kind="calibration"))
        self._save(calibration=cal, cpu=raw.cpu, phase="experiments")
        self.emit({"type": "calibrated", "calibration": cal})
        return cal

    def _floor_and_repeats(self) -> tuple[float, int]:
        cal = self.state["calibration"][self.config.primary.name]
        return cal["floor_pct"], self.o.repeats or cal["repeats"]

    def _implement(self, h: Hypothesis) -> str:
        tree = self.out / "work" / f"impl-{h.id}"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        try:
            agent = self._agent or OfflineAgent(self._recipes())
            commit = agent.implement(h, tree, self.config)
        finally:
            gitops.remove_worktree(self.repo, tree)
        # A ref keeps the commit alive across resumes and for the stack.
        gitops.set_branch(self.repo, f"autoresearch/{self.o.run_id}-exp/{h.id}", commit)
        return commit

    def _recipes(self):
        from .recipes import load_recipe_set
        return {r.id: r for name in self.config.research.recipes for r in load_recipe_set(name)}

    def _record(self, name: str, h: Hypothesis | None, status: str, reason: str, *, commit=None,
                metrics=(), raw: RawResult | None = None, kind="experiment") -> dict[str, Any]:
        rec = ExperimentRecord(
            run_id=self.o.run_id, name=name, hypothesis=h.id if h else name, platform=self.executor.platform,
            status=status, reason=reason, commit=commit, base_commit=self.state["base_commit"],
            metrics=list(metrics), seconds=raw.seconds if raw else 0.0, cpu=raw.cpu if raw else "",
            log=raw.log if raw and status != "keep" else "", kind=kind)
        ledger.append(self.out, rec)
        data = rec.to_dict()
        data["hypothesis_kind"] = h.kind if h else kind
        return data

    def measure(self, name: str, commit: str, n: int, floor: float, kind: str):
        spec = self._spec(name, commit, n, kind)
        raw = self._execute(spec)
        verdict = judge(raw, self.config, floor)
        if verdict.remeasure:
            self.emit({"type": "progress", "name": name, "message": f"re-measuring: {verdict.reason}",
                       "fraction": 0.0})
            raw = self._execute(spec)
            verdict = judge(raw, self.config, floor, remeasured=True)
        return raw, verdict

    def experiments_phase(self, hypotheses: list[Hypothesis]) -> list[dict[str, Any]]:
        self.emit({"type": "phase", "phase": "experiments", "total": len(hypotheses)})
        done = ledger.finished(self.out)
        floor, n = self._floor_and_repeats()
        results = []
        budget = self.config.budget
        for index, h in enumerate(hypotheses):
            key = f"{h.id}@{self.executor.platform}"
            if key in done:
                record = dict(done[key], hypothesis_kind=h.kind)
                self.emit({"type": "experiment_done", "name": h.id, "status": record["status"],
                           "reason": record["reason"], "resumed": True})
                results.append(record)
                continue
            self.emit({"type": "experiment_start", "name": h.id, "index": index})
            over = self._over_budget(index)
            if over:
                results.append(self._record(h.id, h, Status.SKIPPED.value, over))
            else:
                try:
                    commit = self._implement(h)
                except NotImplementable as exc:
                    results.append(self._record(h.id, h, Status.SKIPPED.value, f"not implemented: {exc}"))
                else:
                    raw, verdict = self.measure(h.id, commit, n, floor, "experiment")
                    results.append(self._record(h.id, h, verdict.status.value, verdict.reason, commit=commit,
                                                metrics=verdict.metric_dicts(), raw=raw))
            last = results[-1]
            self.emit({"type": "experiment_done", "name": h.id, "status": last["status"], "reason": last["reason"]})
        self._save(phase="stack")
        return results

    def _over_budget(self, index: int) -> str:
        budget = self.config.budget
        if index >= budget.max_experiments:
            return f"budget: max_experiments={budget.max_experiments} reached"
        hours = (time.monotonic() - self.started) / 3600
        if hours >= budget.wall_hours:
            return f"budget: wall_hours={budget.wall_hours:g} reached"
        return ""

    def stack_phase(self, results: list[dict[str, Any]]) -> dict[str, Any] | None:
        done = ledger.finished(self.out, kind="stack")
        key = f"stack@{self.executor.platform}"
        if key in done:
            return done[key]
        keeps = [r for r in results if r["status"] == Status.KEEP.value]
        branch = self.state["branch"]
        if not keeps:
            gitops.set_branch(self.repo, branch, self.state["base_commit"])
            return None
        self.emit({"type": "phase", "phase": "stack", "total": len(keeps)})
        tree = self.out / "work" / "stack"
        gitops.add_worktree(self.repo, tree, self.state["base_commit"])
        applied, dropped = [], []
        try:
            for r in keeps:
                (applied if gitops.cherry_pick(tree, r["commit"]) else dropped).append(r["name"])
            head = gitops.head_commit(tree)
        finally:
            gitops.remove_worktree(self.repo, tree)
        gitops.set_branch(self.repo, branch, head)
        floor, n = self._floor_and_repeats()
        raw, verdict = self.measure("stack", head, n, floor, "stack")
        reason = verdict.reason + (f"; dropped (conflicts): {', '.join(dropped)}" if dropped else "")
        record = self._record("stack", None, verdict.status.value, reason, commit=head,
                              metrics=verdict.metric_dicts(), raw=raw, kind="stack")
        record["applied"] = applied
        self._save(stack_applied=applied, stack_dropped=dropped)
        return record

    def report_phase(self, results: list[dict[str, Any]], stack: dict[str, Any] | None) -> dict[str, Any]:
        platform = self.executor.platform
        configured = [p.name for p in self.config.platforms]
        platforms = [platform] + [p for p in configured if p != platform]
        summary = {
            "run_id": self.o.run_id, "target": self.config.name or self.repo.name, "repo": str(self.repo),
            "base_commit": self.state["base_commit"], "branch": self.state["branch"], "platform": platform,
            "platforms": platforms, "cpu": self.state.get("cpu", ""), "agent": self.o.agent,
            "primary": self.config.primary.name, "calibration": self.state["calibration"],
            "experiments": [{k: v for k, v in r.items() if k != "log"} for r in results],
            "stack": ({**{k: v for k, v in stack.items() if k != "log"}, "platform": platform} if stack else None),
            "cost_usd": 0.0, "wall_seconds": round(time.monotonic() - self.started, 1),
            "reproduce": [f"autoresearch run {self.repo} --run-id {self.o.run_id} --out {self.out}",
                          f"git -C {self.repo} log --oneline {self.state['base_commit'][:12]}..{self.state['branch']}"],
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        (self.out / "pr.md").write_text(render_pr(summary), encoding="utf-8")
        self._save(phase="done")
        self.emit({"type": "done", "summary": summary})
        return summary

    def execute(self) -> dict[str, Any]:
        self._init_state()
        try:
            hypotheses = self.research_phase()
            if self.o.research_only:
                return {"run_id": self.o.run_id, "hypotheses": [h.to_dict() for h in hypotheses]}
            self.calibrate_phase()
            if self.o.calibrate_only:
                return {"run_id": self.o.run_id, "calibration": self.state["calibration"], "cpu": self.state["cpu"]}
            results = self.experiments_phase(hypotheses)
            stack = self.stack_phase(results)
            return self.report_phase(results, stack)
        finally:
            self.executor.close()
