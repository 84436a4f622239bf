"""One measurement of a run: spec → executor → raw result → verdict → record in the ledger.

`Measurer` is what the phases of a run (`jobs.run.calibrating`, the experiments in `jobs.run.pipeline`,
`jobs.run.stacking`) share to measure a commit against a base on one machine: the experiment's spec
(seeded by its identity), the budget check, the executor call with cancellation between steps,
the verdict and the ledger record. `plan_for` is the pre-registered test of one experiment.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Callable

from jobs.stats import drift
from jobs.contract import events
from jobs.contract.config import TargetConfig
from jobs.contract.errors import RunCancelled
from jobs.executors import Executor
from jobs.contract.model import ExperimentRecord, Hypothesis, SkipCause
from jobs.contract.machinefacts import MachineFacts
from jobs.contract.noisetrack import NoiseEntry, NoiseTrack
from jobs.contract.runstate import RunState
from jobs.contract.runnerview import RunnerView
from jobs.stats.power import mde
from jobs.contract.spec import ExperimentSpec, RawResult, SandboxSpec
from jobs.stats.verdict import Judgement, VerdictPlan, judge

OnEvent = Callable[[events.Event], None]


def plan_for(config: TargetConfig, state: RunState, platform: str, alpha: float,
             repeats: int | None = None) -> VerdictPlan:
    """The pre-registered test of one experiment on one platform at keep level `alpha` (0: no
    power estimate), from the platform's calibration and recent noise in `state`."""
    th, rp = config.thresholds, config.repeats
    cal = state.calibration[platform]
    primary = cal[config.primary.name]
    max_pairs = repeats or rp.max
    # The calibration may have raised the floor above the config's (an A/A bias between builds).
    floor = max(th.min_effect_pct, th.min_effect_pct if primary.floor_pct is None else primary.floor_pct)
    plan = VerdictPlan(alpha=alpha, floor_pct=floor, target_pct=max(th.target_mde_pct, floor), max_pairs=max_pairs,
                min_pairs=min(rp.min, max_pairs), alpha_loss=th.alpha,
                priors={name: tuple(tuple(p) for p in c.prior) for name, c in cal.items()},
                digests=tuple(d) if (d := state.digests.get(platform)) is not None else None,
                adjust={name: tuple(c.adjust) for name, c in cal.items()})
    if alpha <= 0:
        return plan
    # The machine's noise as the run goes (jobs/stats/drift.py): once recent experiments give enough
    # pairs, they, not the calibration alone, say which effects this run can still see.
    track = state.noise.get(platform)
    residuals, _ = drift.current([p[0] for p in primary.prior], track.pool if track is not None else [])
    power = mde(residuals, plan.rule(), prior=plan.prior(config.primary.name), n_sims=200)
    return VerdictPlan(**{**plan.__dict__, "mde_pct": power.effect_pct})


@dataclass
class Measurer:
    config: TargetConfig                  # narrowed by the command's overrides, once, before the run
    run_id: str
    state: RunState
    sandbox: SandboxSpec
    emit: OnEvent
    should_stop: Callable[[], bool]
    platforms: int                        # machines measured on: labels carry `@platform` when > 1
    repeats: int | None = None            # the run's cap on pairs (--repeats)
    started: float = 0.0                  # time.monotonic() at the run's start (wall_hours)

    def plan(self, platform: str, alpha: float) -> VerdictPlan:
        return plan_for(self.config, self.state, platform, alpha, self.repeats)

    def label(self, name: str, platform: str) -> str:
        return name if self.platforms == 1 else f"{name}@{platform}"

    def spec(self, ex: Executor, name: str, head: str, n: int, kind: str, *, plan: VerdictPlan | None = None,
             base: str | None = None) -> ExperimentSpec:
        base = base or self.state.base_commit
        # The pair order and input seeds are drawn from the experiment's identity: a resumed run
        # repeats them, and nobody picks a lucky draw.
        seed = int.from_bytes(hashlib.sha256(f"{self.run_id}/{name}/{ex.platform}/{kind}/{base}/{head}"
                                             .encode()).digest()[:4], "big")
        # The simulated workload's seed is the run's, not the experiment's (nor its base's: a stack
        # without one member is its baseline): each build's count is then one number for the whole
        # run, the stack phase's included (jobs.measure.counted).
        run_base = self.state.base_commit
        simulate_seed = int.from_bytes(hashlib.sha256(f"{self.run_id}/{ex.platform}/{run_base}/simulate"
                                                      .encode()).digest()[:4], "big")
        stop = None
        prior: list[list[float]] = []
        if plan is not None:
            stop = replace(plan.rule(), max_pairs=n)      # the verdict's own rule, capped at this spec's pairs
            prior = [list(p) for p in plan.priors.get(self.config.primary.name, ())]
        config = self.config
        if kind == "calibration":      # the A/A tries the derived yardstick (jobs.measure.simulate.derived)
            from jobs.measure.simulate import tried
            config = tried(config)
        return ExperimentSpec.from_config(
            config, simulate_derived=config is not self.config, run_id=self.run_id, name=name, platform=ex.platform,
            base_commit=base, head_commit=head, n_per_arm=n, kind=kind, seed=seed, stop=stop, prior=prior,
            adjust=list(plan.adjust.get(self.config.primary.name, ())) if plan else [],
            # The machine probe before each process (three copies of 32 MiB, about 6 ms) serves the
            # calibration, which decides whether it is a nuisance, and a plan that adjusts some metric for
            # it; else it only lengthens every pair, the part of an experiment that runs alone.
            probe=plan is None or any("probe" in nuisances for nuisances in plan.adjust.values()),
            clock=self.config.primary.clock, timed_share=self.config.integrity.timed_share,
            sandbox=self.sandbox, simulate_floor_pct=self.sim_floor(ex.platform),
            simulate_digests=self.sim_digests(ex.platform), simulate_seed=simulate_seed)

    def sim_floor(self, platform: str) -> float:
        """The simulated change a keep needs: the config's floor, raised past the A/A jitter."""
        from jobs.measure.simulate import floor_pct
        if self.config.simulate is None:
            return 0.0
        sim = (self.state.simulate or {}).get(platform)
        aa = sim.aa_delta_pct if sim is not None else None
        return floor_pct(self.config.simulate.min_effect_pct, aa)

    def sim_digests(self, platform: str) -> list[str] | None:
        """The simulated run's DIGEST names to check: those the A/A calibration found deterministic
        (None: every name, for a calibration that predates the check); none with integrity.digests off."""
        if self.config.simulate is None or not self.config.integrity.digests:
            return []
        sim = (self.state.simulate or {}).get(platform)
        names = sim.digests if sim is not None else None
        return None if names is None else list(names)

    def execute(self, ex: Executor, spec: ExperimentSpec) -> RawResult:
        label = self.label(spec.name, ex.platform)

        def progress(message: str, fraction: float) -> None:
            # Checked between every build, check and benchmark invocation: a cancel takes effect
            # within one step, and the executor's own cleanup releases its machine.
            if self.should_stop():
                raise RunCancelled(f"run {self.run_id} cancelled")
            self.emit(events.StepProgress(label, message, fraction))
        if self.should_stop():
            raise RunCancelled(f"run {self.run_id} cancelled")
        ended = "error"
        try:
            raw = ex.run(spec, progress)
            ended = raw.status
        except RunCancelled:
            ended = "cancelled"
            raise
        finally:
            # The step's end, said once and in one place, whatever way it ended: a view retires the
            # step here rather than by knowing every step name (a second calibration batch was left
            # "running" in the heartbeat for the rest of a run).
            self.emit(events.StepDone(label, ended))
        with self.state.lock:
            self.state.save(cost_usd=round(self.state.cost_usd + raw.cost_usd, 4))
            if raw.machine:       # where it ran (ISA, kernel, compiler) and the load seen while it ran
                seen = self.state.machines.get(ex.platform)
                facts = {k: v for k, v in raw.machine.items() if k != "load"}
                load = (list(seen.load) if seen is not None else []) + list(raw.machine.get("load", []))
                self.state.save(machines={**self.state.machines,
                                          ex.platform: MachineFacts.from_json({**facts, "load": load})})
        return raw

    def budget_refusal(self, ex: Executor, spec: ExperimentSpec, count: int) -> str:
        """Why this experiment must not start (budgets are hard caps), or ''."""
        budget = self.config.budget
        if count >= budget.max_experiments:
            return f"budget: max_experiments={budget.max_experiments} reached"
        if (time.monotonic() - self.started) / 3600 >= budget.wall_hours:
            return f"budget: wall_hours={budget.wall_hours:g} reached"
        estimate = ex.estimate_usd(spec)
        spent = self.state.cost_usd
        if spent + estimate > budget.usd:
            return f"budget: {spent:.2f} USD spent + {estimate:.2f} USD estimated would exceed {budget.usd:g} USD"
        return ""

    def measure(self, ex: Executor, name: str, commit: str, kind: str, plan: VerdictPlan,
                base: str | None = None) -> tuple[RawResult, Judgement]:
        spec = self.spec(ex, name, commit, plan.max_pairs, kind, plan=plan, base=base)
        raw = self.execute(ex, spec)
        if kind == "experiment" and raw.status == "ok":
            self._follow_noise(ex.platform, name, raw, plan)
        if self.config.simulate is not None or raw.stopped == "identical":
            from jobs.measure.simulate import Guard, judge_yardstick
            tolerance = self.config.simulate.wall_tolerance_pct if self.config.simulate else 5.0
            guard = Guard(tolerance, plan.alpha_loss, plan.min_pairs, plan.alpha)
            return raw, judge_yardstick(raw, self.config, plan, self.sim_floor(ex.platform), guard,
                                        self.sim_digests(ex.platform))
        return raw, judge(raw, self.config, plan)

    def measured(self, ex: Executor, name: str, commit: str, *, kind: str, alpha: float, base: str | None = None,
                 note: str = "") -> ExperimentRecord:
        """Measure `commit` against `base` (the run's base when None) at keep level `alpha`, and
        record it, its reason followed by `note` (`jobs.run.stacking` measures through this)."""
        plan = self.plan(ex.platform, alpha)
        raw, verdict = self.measure(ex, name, commit, kind, plan, base=base)
        return self.record(ex, name, None, verdict.status.value, verdict.reason + note, commit=commit, raw=raw,
                           kind=kind, verdict=verdict, plan=plan, base=base)

    def _follow_noise(self, platform: str, name: str, raw: RawResult, plan: VerdictPlan) -> None:
        """Add this experiment's primary-metric residuals to the platform's recent-noise pool."""
        from jobs.stats.verdict import metric_pairs
        primary = self.config.primary
        ys = [p.y for p in metric_pairs(raw, primary.name, primary.direction,
                                        tuple(plan.adjust.get(primary.name, ())))]
        res = drift.residuals(ys)
        if not res:
            return
        with self.state.lock:
            seen = self.state.noise.get(platform) or NoiseTrack()
            keep = max(2 * self.config.repeats.calibration, drift.MIN_POOL)
            track = NoiseTrack(pool=drift.pooled(seen.pool, res, keep),
                               history=[*seen.history, NoiseEntry(name=name, pairs=len(res),
                                                                  noise_pct=round(drift.scale_pct(res), 2))])
            self.state.save(noise={**self.state.noise, platform: track})

    def record(self, ex: Executor, name: str, h: Hypothesis | None, status: str, reason: str, *,
               commit=None, raw: RawResult | None = None, kind="experiment", verdict: Judgement | None = None,
               plan: VerdictPlan | None = None, slot: int | None = None, base: str | None = None,
               skip: SkipCause | None = None) -> ExperimentRecord:
        metrics = list(verdict.metrics) if verdict else []
        rec = ExperimentRecord(
            run_id=self.run_id, name=name, hypothesis=h.id if h else name, platform=ex.platform,
            status=status, reason=reason, commit=commit, base_commit=base or self.state.base_commit,
            metrics=metrics, seconds=raw.seconds if raw else 0.0,
            cpu=raw.cpu if raw else "", cost_usd=raw.cost_usd if raw else 0.0,
            log=raw.log if raw and status != "keep" else "", kind=kind,
            flags=verdict.flags if verdict else [], alpha=plan.alpha if plan else None, slot=slot,
            runner=verdict.runner if verdict else RunnerView.partial(), hypothesis_kind=h.kind if h else kind,
            skip_cause=skip.value if skip else None, regressions=[m.name for m in metrics if m.verdict == "loss"])
        self.state.append(rec)
        return rec
