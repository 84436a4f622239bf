"""The report phase of a run: its `RunSummary` made from the run's state and records, written as
summary.json and rendered as pr.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jobs.contract import ledger
from jobs.contract.branches import Published
from jobs.contract.config import TargetConfig
from jobs.measure.machine import summarise_load
from jobs.run.measuring import plan_for
from jobs.contract.runstate import RunState
from jobs.contract.model import ExperimentRecord, Hypothesis
from jobs.contract.noisetrack import NoiseSeen
from jobs.report.report import render_pr
from jobs.report.report_review import CLI, reproduce_lines
from jobs.contract.runsummary import ErrorControl, RunSummary
from jobs.executors.registry import DEFAULT as DEFAULT_EXECUTOR
from jobs.guard.shellcmd import command
from jobs.stats.reach import cap_warning
from jobs.stats.sequential import slot_alpha


@dataclass
class Reporting:
    run_id: str
    config: TargetConfig
    repo: Path
    out: Path
    state: RunState
    platforms: list[str]                 # measured, in the executors' order
    agent: str
    executor: str
    repeats: int | None
    candidates: list[Path]
    published: Published | None = None   # the bot's: where a maintainer fetches the result; None: the CLI's

    def summary(self, results: list[ExperimentRecord], stacks: dict[str, ExperimentRecord],
                wall_seconds: float) -> RunSummary:
        state, measured = self.state, self.platforms
        configured = [p.name for p in self.config.platforms]
        confirmed = bool(state.stack_confirmed) and state.branch_left
        facts = self._review_facts(results, confirmed)
        built = RunSummary(
            run_id=self.run_id, target=self.config.name or self.repo.name, repo=str(self.repo),
            base_commit=state.base_commit, branch=state.branch,
            platform=measured[0], platforms=measured + [p for p in configured if p not in measured],
            cpus=state.cpus, cpu=state.cpus.get(measured[0], ""),
            machines={p: m.with_load(summarise_load(list(m.load or []))) for p, m in state.machines.items()},
            agent=self.agent, primary=self.config.primary.name, calibration=state.calibration, **facts,
            stack_applied=state.stack_applied if state.stack_survivors is None else state.stack_survivors,
            stack_dropped=state.stack_dropped, stack_unattributed=state.stack_unattributed,
            attribution=[ExperimentRecord.from_summary(r) for r in ledger.read(self.out)
                         if r.get("kind") == "attribution"],
            sandboxed=state.sandboxed, unsandboxed_by=state.unsandboxed_by,
            profile_missing=state.profile_missing,
            noise={p: NoiseSeen.of(n) for p, n in state.noise.items()},
            profile=state.profile, simulate=state.simulate,
            error_control=ErrorControl(self.config.thresholds.alpha, self.config.budget.max_experiments,
                                       len(measured)),
            stacks=dict(stacks),
            cost_usd=state.cost_usd, wall_seconds=round(wall_seconds, 1),
            stack_confirmed=state.stack_confirmed,
            branch_left=state.branch_left, branch_note=state.branch_note,
            floor_pct={p: plan_for(self.config, state, p, 0, self.repeats).floor_pct for p in measured
                       if p in state.calibration},
            reproduce=self.reproduce(state.base_commit, state.branch if confirmed else None),
            resume=self.resume_command(), warnings=tuple(state.warnings),
            stack_kept_off=dict(state.stack_kept_off))
        # Non-finite numbers (an untrusted result's infinite interval) are null in the file and here alike.
        return RunSummary.from_json(ledger.strict_json(built.to_json()))

    def reproduce(self, base: str, branch: str | None) -> list[str]:
        """A fresh measurement of base vs head (jobs.report.report_review.reproduce_lines): from the target
        folder on the CLI; for the bot, from the repository's URL and where the branch was pushed,
        since the worker's clone is nowhere a maintainer can reach."""
        env, pub = self.state.bench_env_names or [], self.published
        if pub is None:
            return reproduce_lines(str(self.repo), base, branch, env, self.repeats, self.agent,
                                   [str(Path(c).resolve()) for c in self.candidates])
        head = pub.head_branch if branch or pub.head_is_candidate else None
        return reproduce_lines(pub.clone_url, base, head, env, self.repeats,
                               self.agent, pub.candidates, branch_url=pub.head_url, candidates_in_repo=True)

    def resume_command(self) -> str:
        """The command that re-prints or resumes this very run, from its folder: none for the bot's
        runs, whose folder is on a worker (the bot resumes them itself)."""
        if self.published is not None:
            return ""
        return command(CLI, "run", self.repo, "--run-id", self.run_id, "--out", self.out,
                       *(("--executor", self.executor) if self.executor != DEFAULT_EXECUTOR else ()),
                       *(("--repeats", self.repeats) if self.repeats else ()),
                       env=self.state.bench_env_names or [])

    def write(self, summary: RunSummary) -> None:
        data = summary.to_json()
        (self.out / "summary.json").write_text(ledger.dumps(data, indent=2), encoding="utf-8")
        (self.out / "pr.md").write_text(render_pr(summary), encoding="utf-8")

    def _review_facts(self, results: list[ExperimentRecord], confirmed: bool) -> dict[str, Any]:
        """What each kept commit touches, and the failed steps' first lines (jobs.report.review_facts)."""
        from jobs.report.review_facts import branch_diffstat, commit_facts, with_failure_output
        base, facts = self.state.base_commit, {}
        facts["experiments"] = [with_failure_output(r) for r in results]
        if confirmed:
            head = self.state.stack_final
            facts["commits"] = commit_facts(self.repo, base, head, self.state.stack_survivors or [])
            facts["diffstat"] = branch_diffstat(self.repo, base, head) if len(facts["commits"]) > 1 else ""
        hyps = {h.id: h for h in self.state.hypotheses or []}
        facts["hypotheses"] = {c.hypothesis: self._public(hyps[c.hypothesis]) for c in facts.get("commits", [])
                               if c.hypothesis in hyps}
        return facts

    def _public(self, hypothesis: Hypothesis) -> Hypothesis:
        """A bot run's hypothesis as a maintainer can follow it: a candidate's patch file named where
        the repository keeps it (or by its name alone, a bench's diff), never by the worker's path."""
        if self.published is None:
            return hypothesis
        in_repo = {c.rsplit("/", 1)[-1]: c for c in self.published.candidates}
        evidence = [replace(e, where=in_repo.get(Path(e.where).name, Path(e.where).name))
                    if e.note == "patch file" else e for e in hypothesis.evidence]
        return replace(hypothesis, evidence=evidence)


def reach_warnings(config: TargetConfig, state: RunState, repeats: int | None) -> list[str]:
    """Issue 43, said after the calibration and before any experiment: per calibrated platform
    whose wall clock cannot reach the target MDE within the pair cap and that has no yardstick
    (simulated cycles with a base count), what would reach it (`jobs.stats.reach.cap_warning`)."""
    primary, out = config.primary.name, []
    alpha = slot_alpha(config.thresholds.alpha, 1, config.budget.max_experiments)
    for platform, cal in state.calibration.items():
        if primary not in cal or not cal[primary].prior:
            continue
        sim = (state.simulate or {}).get(platform)
        if sim is not None and sim.base_cycles is not None:
            continue                    # the yardstick decides small effects there
        plan = plan_for(config, state, platform, alpha, repeats)
        out.append(cap_warning(platform, primary, mde_pct=plan.mde_pct, target_pct=config.thresholds.target_mde_pct,
                               floor_pct=plan.floor_pct, cap=plan.max_pairs, yardstick=False,
                               residuals=[p[0] for p in cal[primary].prior], rule=plan.rule(),
                               prior=plan.prior(primary)))
    return [w for w in out if w]
