"""The calibrate phase of a run: an A/A of two builds of the base per machine (noise, floor, MDE,
location bias, simulated-cycles jitter), or a recent one of the same base, machine and contract
reused (`jobs.run.calcache`). What every later step reads of it is saved in the run's state.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jobs.contract import events
from jobs.contract.calibrated import MetricCalibration, SimulatedCalibration
from jobs.run import calcache
from jobs.measure import simulate
from jobs.stats.calibration import calibrate_run, extra_pairs, merge_pairs
from jobs.contract.errors import RunError
from jobs.executors import Executor
from jobs.run.measuring import Measurer
from jobs.contract.model import ExperimentRecord
from jobs.contract.runnerview import RunnerView


@dataclass
class Calibrating:
    repo: Path
    bench: Measurer

    @property
    def state(self):
        return self.bench.state

    def run(self, executors: list[Executor]) -> dict[str, dict[str, MetricCalibration]]:
        state, config = self.state, self.bench.config
        capped = config      # the MDE and pair counts reported are those of the cap this run uses
        if self.bench.repeats:
            capped = config.model_copy(update={"repeats": config.repeats.model_copy(
                update={"max": self.bench.repeats})})
        for ex in executors:
            if ex.platform in state.calibration or self._reuse(ex):
                continue
            self.bench.emit(events.Phase("calibrate", platform=ex.platform))
            spec = self.bench.spec(ex, "calibration", state.base_commit, config.repeats.calibration, "calibration")
            refusal = self.bench.budget_refusal(ex, spec, 0)
            if refusal:
                raise RunError(f"cannot calibrate on {ex.platform}: {refusal}")
            raw = self.bench.execute(ex, spec)
            if raw.status == "skipped":   # no machine or no budget: nothing about the target
                raise RunError(f"calibration on {ex.platform} could not start: {raw.reason}")
            if raw.status != "ok":
                raise RunError(f"the baseline itself could not be measured on {ex.platform} "
                               f"({raw.status}: {raw.reason}); fix the target's build/benchmark/checks "
                               f"first.\n{raw.log}")
            if raw.simulated:     # the A/A's slowed second run: counted work that follows the time judges nothing
                budget = simulate.time_budget_problem(
                    raw.simulated, "the benchmark command" if spec.simulate_derived else "`simulate.command`")
                if budget:
                    raise RunError(f"calibration on {ex.platform}: {budget}" + (
                        ". If its work is fixed after all, `simulate: false` runs on the wall clock alone, without "
                        "this check" if spec.simulate_derived else
                        ". That is the `simulate:` workload; the benchmark command itself runs only natively and was "
                        "not checked")
                        + ". No experiment was run.")
            derived = spec.simulate_derived and bool(raw.simulated)
            if derived:               # the benchmark itself fit under cachegrind: judged as a declared yardstick is
                capped = simulate.tried(capped)
            elif spec.simulate_derived:
                self.bench.emit(events.RunWarning(
                    f"{ex.platform}: no derived yardstick ({raw.simulate_problem}); the wall clock decides alone"))
            result = calibrate_run(raw, capped)
            more = extra_pairs(result, capped, len(raw.pairs()))
            if more:              # the bias bound came out wide: one more batch of A/A pairs (calibration.extra_pairs)
                spec = replace(self.bench.spec(ex, "calibration-more", state.base_commit, more, "calibration"),
                               simulate=None, simulate_derived=False)    # pairs only: the simulation ran above
                extra = None if self.bench.budget_refusal(ex, spec, 0) else self.bench.execute(ex, spec)
                if extra is not None and extra.status == "ok":
                    raw = merge_pairs(raw, extra)
                    result = calibrate_run(raw, capped)
            if result.problems:
                raise RunError(f"calibration on {ex.platform}: " + "; ".join(result.problems)
                               + ". No verdict would be trustworthy; fix this first.")
            cal = dict(result.metrics)
            simulated = None
            if raw.simulated:
                sim = simulate.compare(raw.simulated)
                unstable = simulate.unstable_digests(raw.simulated)
                if unstable:
                    result.warnings.append(f"the simulated workload's DIGEST {', '.join(unstable)} differs between "
                                           "two builds of the same commit on the same input: not deterministic, so "
                                           "not checked")
                printed = sorted(raw.simulated.get("A", {}).get("digests") or {})
                simulated = SimulatedCalibration(
                    aa_delta_pct=sim.delta_pct if sim else None, base_cycles=sim.base if sim else None,
                    digests=[d for d in printed if d not in unstable], seconds=raw.simulated.get("A", {}).get("wall_s"),
                    native_seconds=raw.steps.get("native_simulate_s"),
                    separate_build=config.simulate is not None and config.simulate.separate_build, derived=derived,
                    command=config.benchmark if derived else None,
                    timeout=config.timeouts.simulate if derived else None)
            for message in result.warnings:
                self.bench.emit(events.RunWarning(f"{ex.platform}: {message}"))
            state.append(ExperimentRecord(
                run_id=self.bench.run_id, name="calibration", hypothesis="A/A", platform=ex.platform,
                status="ok", reason="two builds of the base commit against each other",
                base_commit=state.base_commit,
                calibration=_record_form(cal), seconds=raw.seconds, cpu=raw.cpu, cost_usd=raw.cost_usd,
                kind="calibration",
                flags=[f for c in cal.values() for f in c.flags] + result.warnings,
                runner=RunnerView.partial(pairs=len(raw.pairs()), sandboxed=raw.sandboxed, steps=raw.steps)))
            self._adopt(ex.platform, cal, result.digests, raw.cpu, simulated)
            self.bench.emit(events.Calibrated(ex.platform, cal))
            if ex.platform == "local":
                calcache.store(self.repo, self._key(ex.platform, raw.cpu), calcache.Cached(
                    run_id=self.bench.run_id, calibration=cal, digests=result.digests, cpu=raw.cpu,
                    simulate=simulated))
        state.save(phase="experiments")
        return state.calibration

    def _adopt(self, platform: str, cal: dict[str, MetricCalibration], digests: Any, cpu: str,
               simulated: SimulatedCalibration | None) -> None:
        """What every later step reads of a platform's calibration, measured here or reused."""
        if simulated:
            self.state.save(simulate={**(self.state.simulate or {}), platform: simulated})
        self.state.save(calibration={**self.state.calibration, platform: cal},
                        digests={**self.state.digests, platform: digests},
                        cpus={**self.state.cpus, platform: cpu})

    def _key(self, platform: str, cpu: str) -> str:
        return calcache.key(self.bench.config, self.state.base_commit, platform, cpu, self.bench.repeats,
                            self.state.bench_env_digest)

    def _reuse(self, ex: Executor) -> bool:
        """A recent calibration of this base on this machine with this contract (jobs/run/calcache.py)."""
        from jobs.measure.runner import cpu_model
        if ex.platform != "local":
            return False
        found = calcache.lookup(self.repo, self._key(ex.platform, cpu_model()))
        if found is None:
            return False
        cal = found.calibration
        reason = (f"reused: the calibration of run {found.run_id} ({found.age_s / 60:.0f} min ago; same base "
                  "commit, machine and contract)")
        self.state.append(ExperimentRecord(
            run_id=self.bench.run_id, name="calibration", hypothesis="A/A", platform=ex.platform, status="ok",
            reason=reason, base_commit=self.state.base_commit, cpu=found.cpu, kind="calibration",
            calibration=_record_form(cal), flags=[f for c in cal.values() for f in c.flags],
            runner=RunnerView.partial(reused_from=found.run_id)))
        self._adopt(ex.platform, cal, found.digests, found.cpu, found.simulate)
        self.bench.emit(events.RunWarning(f"{ex.platform}: calibration {reason}"))
        self.bench.emit(events.Calibrated(ex.platform, cal, reused=True))
        return True


def _record_form(cal: dict[str, MetricCalibration]) -> dict[str, MetricCalibration]:
    """The calibration record's (experiments.jsonl) view of a platform's calibration: each metric's
    calibration as its JSON form without its A/A pairs reads back (so the record writes no `prior`)."""
    return {k: MetricCalibration.from_json({f: v for f, v in c.to_json().items() if f != "prior"})
            for k, c in cal.items()}
