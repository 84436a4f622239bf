"""SkyPilotExecutor: each experiment on its own fresh cloud VM, torn down whatever happens.

One executor per platform (x86 `c6i.2xlarge`, ARM `c7g.2xlarge` by default; `platforms:
[{name, instance_type, cloud}]` in `.github/autoresearch.yml` overrides). An experiment is one
SkyPilot task (`jobs.executors.cloud.tasks`): the VM builds baseline and candidate from clean trees, runs
checks, benchmarks them interleaved and prints one `RESULT` line, exactly as `LocalExecutor` does
on this machine, and the raw samples come back here, where verdicts are made.

Per attempt, through the SkyPilot SDK (0.9-0.14, client/API-server style):

    sky.launch(task, cluster_name, down=True, idle_minutes_to_autostop=N)   -> request id
    sky.stream_and_get(request)                      -> (job id, handle): provisioned + set up
    sky.tail_logs(cluster, job id, follow=True, output_stream=...)   PROGRESS/RESULT lines
    sky.down(cluster) + sky.get(...)                 in `finally`, always

Teardown is guaranteed three ways: `down=True` (SkyPilot downs the VM when the job ends),
`autostop` with `down` after `idle_minutes` (the safety net if this process dies), and `sky.down`
in `finally` for every cluster, including after a provisioning error (SkyPilot keeps such a
cluster up for debugging), a job that overran its time limit, a lost VM and a cancelled run
(`should_stop` raises inside `progress`). A teardown that keeps failing leaves the cluster in the
run's lease, and `autoresearch reap` downs it once the run is gone.

Failures of the machine (preemption, a lost VM: the job ended without a RESULT and the cluster
is no longer UP; provisioning failures) are retried on a new VM, the experiment's own failures are
not, and budgets are hard caps: every launch, retries included, first reserves the attempt's worst
case (provisioning and teardown allowances plus every step at its time limit, which the job is
killed past) against `budget.usd` with everything spent and in flight on every platform. Those
rules are shared by every machine executor: `jobs.executors.attempts` (retries, teardown),
`jobs.executors.budget` (the reservation), `jobs.executors.logstream` (following the job's log).
Cost is VM time (from just before `sky.launch` to the end of `sky.down`) x the shipped catalog's
hourly price (`jobs.executors.cloud.catalog`), summed over attempts.
"""
from __future__ import annotations

import itertools
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import sky  # noqa: F401  (ImportError here means: install the cloud extra)

from jobs.executors.cloud import catalog, tasks
from jobs.executors.cloud.leases import VmLease
from jobs.contract.config import Platform, TargetConfig
from jobs.contract.errors import ExecutorUnavailable
from jobs.contract.plan import DEFAULT_INSTANCE  # one home for the default instance types
from jobs.measure.runner import Progress, tail
from jobs.contract.spec import ExperimentSpec, RawResult
from .attempts import Attempt, measure_on_fresh_machines, tear_down
from .budget import SharedBudget, budget_for_run
from .logstream import DeadlinePassed, RemoteError, Watch, follow_job_log, wait_for

DEFAULT_PLATFORMS = tuple(Platform(name=name, instance_type=it, cloud="aws") for name, it in DEFAULT_INSTANCE.items())
USE_SPOT_ENV = "AUTORESEARCH_SKY_USE_SPOT"


@dataclass
class CloudOptions:
    idle_minutes: int = 10                  # autostop (with down) safety net; >= 1 keeps a finished
                                            # VM visible long enough to tell "job failed" from "VM lost"
    provision_timeout_s: float = 900.0      # launch + setup; past it the attempt is abandoned
    teardown_allowance_s: float = 300.0     # billed time reserved for sky.down
    job_slack_s: float = 120.0              # clone + worktrees, on top of the steps' own limits
    heartbeat_s: float = 15.0               # how often a silent wait checks for cancellation
    max_vm_retries: int = 2                 # new VMs after a preemption/provisioning failure
    down_attempts: int = 3
    down_backoff_s: float = 5.0
    use_spot: bool = False
    lease_dir: Path | None = None

    def __post_init__(self):
        if self.idle_minutes < 1:
            raise ValueError("idle_minutes must be >= 1 (the autostop safety net)")

    @classmethod
    def from_env(cls, **kw: Any) -> "CloudOptions":
        kw.setdefault("use_spot", os.environ.get(USE_SPOT_ENV, "") in ("1", "true", "yes"))
        return cls(**kw)


def worst_case_seconds(spec: ExperimentSpec, options: CloudOptions) -> float:
    """Billed time of one VM attempt at worst: provisioning and teardown allowances plus the job
    at every step's time limit (past which it is killed)."""
    return (options.provision_timeout_s + options.teardown_allowance_s
            + tasks.job_seconds(spec, options.job_slack_s))


class SkyPilotExecutor:
    def __init__(self, *, platform: Platform, repo: Path, workdir: Path, config: TargetConfig, run_id: str,
                 budget: SharedBudget, lease: VmLease, sdk=None, clock: Callable[[], float] = time.monotonic,
                 options: CloudOptions | None = None):
        self.platform = platform.name
        self.instance_type = platform.instance_type or DEFAULT_INSTANCE.get(platform.name)
        if not self.instance_type:
            raise ValueError(f"platform {platform.name!r}: set instance_type in .github/autoresearch.yml "
                             f"(defaults exist only for {', '.join(DEFAULT_INSTANCE)})")
        self.cloud = platform.cloud or "aws"
        self.options = options or CloudOptions.from_env()
        self.price = catalog.hourly_price(self.instance_type, spot=self.options.use_spot)
        self.parallel = config.budget.max_vms
        self.repo, self.workdir, self.config, self.run_id = Path(repo), Path(workdir), config, run_id
        self.budget, self.lease = budget, lease
        self.sdk = sdk if sdk is not None else sky
        self.clock = clock
        self.attempts: list[Attempt] = []          # every VM this executor started, in order
        self.unreported_usd = 0.0                  # VM time of attempts cut short by an exception
        self._up: set[str] = set()                 # clusters not (yet) confirmed down
        self._numbers = itertools.count(1)        # cluster names: one number per VM ...
        self._token = secrets.token_hex(2)        # ... behind a per-process token: never reuse a VM
        self._stages = itertools.count(1)         # local staging folders: one per run() call
        self._lock = threading.Lock()
        self._closed = False
        lease.acquire()

    # -- the Executor interface -------------------------------------------------------------
    def bound_seconds(self, spec: ExperimentSpec) -> float:
        """Worst-case billed time of one attempt (what a launch reserves)."""
        return worst_case_seconds(spec, self.options)

    def _bound_usd(self, spec: ExperimentSpec) -> float:
        return self.bound_seconds(spec) / 3600 * self.price

    def estimate_usd(self, spec: ExperimentSpec) -> float:
        """This experiment's worst case plus what is in flight on every platform (not yet in the
        run's spent total), so the pipeline's check `spent + estimate > budget` is a hard cap."""
        return self._bound_usd(spec) + self.budget.in_flight()

    def render(self, spec: ExperimentSpec, workdir: Path, name: str | None = None) -> dict[str, Any]:
        return tasks.task_config(spec, workdir=workdir, instance_type=self.instance_type, cloud=self.cloud,
                                 use_spot=self.options.use_spot, idle_minutes=self.options.idle_minutes,
                                 name=name)

    def build_ahead(self, spec: ExperimentSpec) -> None:
        """Each VM builds its own experiment: nothing to start ahead."""

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult:
        with self._lock:
            n = next(self._stages)
        stage = tasks.stage_workdir(spec, self.repo, self.workdir / f"{tasks.slug(spec.name, 24)}-{self.platform}-{n}")
        try:
            config = self.render(spec, stage)
            task = self.sdk.Task.from_yaml_config(config)
            return self._run(spec, task, progress)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def close(self) -> None:
        """Down anything still up (a teardown that failed earlier), then drop the lease."""
        if self._closed:
            return
        self._closed = True
        for name in sorted(self._up):
            self._down(name, Attempt(cluster=name))
        self.lease.release()

    # -- one experiment: attempts on fresh VMs until a trustworthy result or a final verdict --
    def _run(self, spec: ExperimentSpec, task, progress: Progress) -> RawResult:
        def name_vm() -> str:
            with self._lock:
                return tasks.cluster_name(self.run_id, spec.name, self.platform, f"{self._token}{next(self._numbers)}")
        result, done = measure_on_fresh_machines(
            name_machine=name_vm, budget=self.budget, worst_case_usd=self._bound_usd(spec),
            attempt=lambda name: self._attempt(spec, task, name, progress),
            max_machine_retries=self.options.max_vm_retries, machine=f"{self.instance_type} VM", progress=progress)
        result.cost_usd = done.cost_usd
        self.budget.report(done.cost_usd)
        header = f"== {self.platform} on {self.instance_type} ({self.price:g} USD/h): " + done.notes()
        result.log = tail(header + "\n" + (result.log or ""), 3 * 4000)
        return result

    # -- one VM ------------------------------------------------------------------------------
    def _attempt(self, spec: ExperimentSpec, task, name: str, progress: Progress) -> Attempt:
        att = Attempt(cluster=name)
        self.attempts.append(att)
        start = self.clock()
        launch: dict[str, Any] = {}
        with self._lock:
            self._up.add(name)
        self.lease.add(name)
        try:
            self._provision_and_run(spec, task, att, launch, start, progress)
        finally:
            if launch.get("request") is not None and not launch.get("done"):
                try:
                    self.sdk.api_cancel(launch["request"])
                except Exception:       # best effort: sky.down below is what matters
                    pass
            self._down(name, att)
            att.seconds = max(0.0, self.clock() - start)
            att.cost_usd = att.seconds / 3600 * self.price
            self.budget.settle(name, att.cost_usd)
            if att.outcome == "failed" and not att.reason:      # left by an exception (cancel)
                self.unreported_usd += att.cost_usd
        return att

    def _provision_and_run(self, spec, task, att: Attempt, launch: dict, start: float, progress: Progress):
        o = self.options
        progress(f"launching {self.instance_type} ({att.cluster})", 0.0)
        try:
            launch["request"] = self.sdk.launch(task, cluster_name=att.cluster, retry_until_up=False,
                                                idle_minutes_to_autostop=o.idle_minutes, down=True)
        except Exception as exc:          # the request itself was refused (API server, bad request)
            if not type(exc).__module__.startswith("sky"):
                raise
            att.outcome, att.reason = "provision_failed", f"{type(exc).__name__}: {exc}"
            return
        try:
            job_id, _handle = wait_for(lambda: self.sdk.stream_and_get(launch["request"]),
                                       start + o.provision_timeout_s, self._watch(progress), "provisioning", 0.0)
        except DeadlinePassed:
            att.outcome, att.reason = "provision_failed", f"provisioning exceeded {o.provision_timeout_s:.0f} s"
            return
        except RemoteError as err:
            launch["done"] = True
            att.outcome, att.reason = "provision_failed", str(err)
            return
        launch["done"] = True
        self._stream(spec, att, job_id, progress)

    def _watch(self, progress: Progress) -> Watch:
        return Watch(self.clock, self.options.heartbeat_s, progress)

    def _stream(self, spec: ExperimentSpec, att: Attempt, job_id, progress: Progress) -> None:
        deadline = self.clock() + tasks.job_seconds(spec, self.options.job_slack_s)
        seen = follow_job_log(lambda sink: self.sdk.tail_logs(att.cluster, job_id, follow=True, output_stream=sink),
                              deadline, self._watch(progress))
        att.log.extend(seen.lines)
        if seen.timed_out:
            att.outcome, att.reason = "timeout", self._overran(spec)
        elif seen.result_line is not None:
            try:
                att.result, att.outcome = RawResult.from_json(seen.result_line), "result"
            except (ValueError, TypeError, KeyError) as exc:
                att.outcome, att.reason = "failed", f"unreadable RESULT line from the VM: {exc}"
        elif self._vm_lost(att.cluster):
            att.outcome, att.reason = "preempted", f"the VM went away before the job finished ({seen.ending()})"
        else:
            att.outcome, att.reason = "failed", f"the VM job ended without a RESULT line ({seen.ending()})"

    def _overran(self, spec: ExperimentSpec) -> str:
        return (f"the VM job exceeded its time limit ({tasks.job_seconds(spec, self.options.job_slack_s):.0f} s: "
                "every build, check and benchmark step at its own limit); the VM was torn down")

    def _vm_lost(self, name: str) -> bool:
        try:
            records = self.sdk.get(self.sdk.status(cluster_names=[name],
                                                   refresh=sky.StatusRefreshMode.FORCE))
        except Exception:
            return True          # cannot even see it: treat as gone (a retry is bounded by budget)
        for record in records or []:
            rec_name = record["name"] if isinstance(record, dict) else getattr(record, "name", None)
            status = record["status"] if isinstance(record, dict) else getattr(record, "status", None)
            if rec_name == name:
                return str(getattr(status, "value", status)) != "UP"
        return True

    def _down(self, name: str, att: Attempt) -> None:
        """sky.down until SkyPilot confirms (or says there is no such cluster)."""
        from sky import exceptions as sky_exceptions

        def down() -> None:
            try:
                self.sdk.get(self.sdk.down(name))
            except sky_exceptions.ClusterDoesNotExist:
                pass                     # already gone: what down is for
        failure = tear_down(down, self.options.down_attempts, self.options.down_backoff_s)
        if failure is not None:
            att.log.append(f"teardown of {name} failed {self.options.down_attempts} times: {failure!r}; "
                           "it stays in this run's lease for `autoresearch reap`")
            return
        att.torn_down = True
        with self._lock:
            self._up.discard(name)
        self.lease.remove(name)


def platforms_for(config: TargetConfig) -> list[Platform]:
    """The configured cloud platforms; `local` entries are not cloud machines and are skipped.
    With none configured, x86 and ARM at their default instance types."""
    chosen = [p for p in config.platforms if p.name != "local"]
    return chosen or list(DEFAULT_PLATFORMS)


def make_skypilot_executors(repo: Path, workdir: Path, config: TargetConfig, run_id: str, *, sdk=None,
                            clock: Callable[[], float] = time.monotonic,
                            options: CloudOptions | None = None) -> list[SkyPilotExecutor]:
    """One executor per platform, sharing one budget and one lease (see jobs.executors.cloud.leases)."""
    options = options or CloudOptions.from_env()
    workdir = Path(workdir)
    out = workdir.parent
    budget = budget_for_run(config.budget.usd, out)
    lease = VmLease(run_id, tasks.run_prefix(run_id), out, options.lease_dir)
    executors = []
    try:
        for platform in platforms_for(config):
            executors.append(SkyPilotExecutor(platform=platform, repo=repo, workdir=workdir / platform.name,
                                              config=config, run_id=run_id, budget=budget, lease=lease, sdk=sdk,
                                              clock=clock, options=options))
    except Exception as exc:
        for ex in executors:
            ex.close()
        if isinstance(exc, (catalog.CatalogError, ValueError)):   # a config problem: say which
            raise ExecutorUnavailable(f"--executor skypilot: {exc}") from None
        raise
    return executors
