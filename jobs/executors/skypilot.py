"""SkyPilotExecutor: each experiment on its own fresh cloud VM, torn down whatever happens.

One executor per platform (x86 `c6i.2xlarge`, ARM `c7g.2xlarge` by default; `platforms:
[{name, instance_type, cloud}]` in `.github/autoresearch.yml` overrides). An experiment is one
SkyPilot task (`jobs.cloud.tasks`): the VM builds baseline and candidate from clean trees, runs
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

Failures of the machine, not of the experiment:
- Preemption / lost VM (the job ended without a RESULT and the cluster is no longer UP) and
  provisioning failures: retried on a new VM, up to `max_vm_retries` times. Only the final
  attempt's samples are returned, so nothing is counted twice; each VM's time is billed once.
- A noisy VM is not a machine failure: the runner's sequential test samples on until it decides
  (noise costs pairs, never the verdict), and the report flags the spread. Its samples are kept.
- Still no VM after the retries: `skipped` (not measured), with the reason.

Cost is VM time (from just before `sky.launch` to the end of `sky.down`) x the shipped catalog's
hourly price (`jobs.cloud.catalog`), summed over attempts. Budgets are hard caps: before every
launch, including retries, the worst case of the attempt (provisioning and teardown allowances
plus every step at its time limit, which the job is killed past) is reserved against
`budget.usd` together with everything spent and everything in flight on every platform; an
attempt that does not fit is not launched (`skipped`, "budget: ...").
"""
from __future__ import annotations

import io
import itertools
import os
import queue
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import sky  # noqa: F401  (ImportError here means: install the cloud extra)

from ..cloud import catalog, tasks
from ..cloud.leases import Lease
from ..config import Platform, TargetConfig
from ..errors import ExecutorUnavailable
from ..ledger import load_state
from ..plan import DEFAULT_INSTANCE  # one home for the default instance types
from ..runner import Progress, tail
from ..spec import ExperimentSpec, RawResult

DEFAULT_PLATFORMS = tuple(Platform(name=name, instance_type=it, cloud="aws") for name, it in DEFAULT_INSTANCE.items())
USE_SPOT_ENV = "AUTORESEARCH_SKY_USE_SPOT"

# The driver's lines, possibly behind SkyPilot's "(task, pid=1234) " prefix.
LINE = re.compile(r"^(?:\([^)]*\)\s+)?(PROGRESS|RESULT|EXPERIMENT_STATUS:)\s?(.*)$")


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


class SharedBudget:
    """USD spent and reserved by every executor of one run; reservations are atomic.

    `run_spent()` (when given) reads the run's own total from its state.json: previous sessions,
    VM costs already returned to the pipeline and model spend. VM time settled here but not yet
    returned in a RawResult (earlier attempts of an experiment still retrying) is added to it."""

    def __init__(self, limit_usd: float, spent_usd: float = 0.0, run_spent: Callable[[], float | None] | None = None):
        self.limit, self.spent = float(limit_usd), float(spent_usd)
        self.reported = 0.0
        self.reserved: dict[str, float] = {}
        self.run_spent = run_spent or (lambda: None)
        self._lock = threading.Lock()

    def in_flight(self) -> float:
        with self._lock:
            return sum(self.reserved.values())

    def total_spent(self) -> float:
        run = self.run_spent()
        return self.spent if run is None else run + max(0.0, self.spent - self.reported)

    def reserve(self, key: str, usd: float) -> str:
        """'' when `usd` more fits under the limit (and is now reserved), else why not."""
        with self._lock:
            spent, held = self.total_spent(), sum(self.reserved.values())
            if spent + held + usd > self.limit + 1e-9:
                return (f"budget: {spent:.2f} USD spent + {held:.2f} USD in flight + {usd:.2f} USD "
                        f"worst case for this VM would exceed {self.limit:g} USD")
            self.reserved[key] = usd
            return ""

    def settle(self, key: str, usd: float) -> None:
        with self._lock:
            self.reserved.pop(key, None)
            self.spent += usd

    def report(self, usd: float) -> None:
        """`usd` of settled VM time goes back to the pipeline (which adds it to state.json)."""
        with self._lock:
            self.reported += usd


def _state_cost(out: Path) -> Callable[[], float | None]:
    def read() -> float | None:
        try:
            return float(load_state(out)["cost_usd"])
        except Exception:        # no state yet (or a torn read): fall back to our own books
            return None
    return read


class _Remote(Exception):
    """An exception raised by a SkyPilot call (as opposed to one raised by `progress`)."""

    def __init__(self, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc


class _Deadline(Exception):
    pass


@dataclass
class Attempt:
    cluster: str
    outcome: str = "failed"       # result | preempted | provision_failed | timeout | failed
    reason: str = ""
    result: RawResult | None = None
    seconds: float = 0.0
    cost_usd: float = 0.0
    torn_down: bool = False
    log: list[str] = field(default_factory=list)


class _Lines(io.TextIOBase):
    """The output_stream handed to sky.tail_logs: complete lines go to a queue."""

    def __init__(self):
        self.queue: queue.Queue[str] = queue.Queue()
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self.queue.put(line.rstrip("\r"))
        return len(text)

    def flush_partial(self) -> None:
        if self._partial:
            self.queue.put(self._partial)
            self._partial = ""


def _call_in_thread(fn: Callable[[], Any], name: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:    # handed to the waiting thread
            box["exc"] = exc
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread, box


class SkyPilotExecutor:
    def __init__(self, *, platform: Platform, repo: Path, workdir: Path, config: TargetConfig, run_id: str,
                 budget: SharedBudget, lease: Lease, sdk=None, clock: Callable[[], float] = time.monotonic,
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
        spent, notes, vm_failures = 0.0, [], 0
        while True:
            with self._lock:
                name = tasks.cluster_name(self.run_id, spec.name, self.platform,
                                          f"{self._token}{next(self._numbers)}")
            refusal = self.budget.reserve(name, self._bound_usd(spec))
            if refusal:
                return self._final(RawResult(status="skipped", reason=refusal), spent, notes)
            att = self._attempt(spec, task, name, progress)
            spent += att.cost_usd
            notes.append(f"{name}: {att.outcome}{' (' + att.reason + ')' if att.reason else ''}, "
                         f"{att.seconds:.0f} s, {att.cost_usd:.4f} USD")
            if att.outcome == "result":
                return self._final(att.result, spent, notes)
            if att.outcome in ("preempted", "provision_failed"):
                vm_failures += 1
                if vm_failures > self.options.max_vm_retries:
                    return self._final(RawResult(status="skipped", reason=(
                        f"not measured: no usable {self.instance_type} VM after {vm_failures} attempts "
                        f"(last: {att.outcome}: {att.reason})")), spent, notes)
                progress(f"VM lost ({att.outcome}); retrying on a new VM", 0.0)
                continue
            if att.outcome == "timeout":
                return self._final(RawResult(status="timeout", reason=att.reason, log="\n".join(att.log)),
                                   spent, notes)
            return self._final(RawResult(status="crash", reason=att.reason, log="\n".join(att.log)), spent, notes)

    def _final(self, result: RawResult, spent: float, notes: list[str]) -> RawResult:
        result.cost_usd = spent
        self.budget.report(spent)
        header = f"== {self.platform} on {self.instance_type} ({self.price:g} USD/h): " + "; ".join(notes)
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
            job_id, _handle = self._wait(lambda: self.sdk.stream_and_get(launch["request"]),
                                         start + o.provision_timeout_s, progress, "provisioning", 0.0)
        except _Deadline:
            att.outcome, att.reason = "provision_failed", f"provisioning exceeded {o.provision_timeout_s:.0f} s"
            return
        except _Remote as err:
            launch["done"] = True
            att.outcome, att.reason = "provision_failed", str(err)
            return
        launch["done"] = True
        self._stream(spec, att, job_id, progress)

    def _wait(self, fn: Callable[[], Any], deadline: float, progress: Progress, message: str, fraction: float):
        thread, box = _call_in_thread(fn, f"sky-{message}")
        while True:
            thread.join(self.options.heartbeat_s)
            if not thread.is_alive():
                break
            if self.clock() >= deadline:
                raise _Deadline(message)
            progress(message, fraction)       # raises when the run is cancelled
        if "exc" in box:
            raise _Remote(box["exc"])
        return box.get("value")

    def _stream(self, spec: ExperimentSpec, att: Attempt, job_id, progress: Progress) -> None:
        deadline = self.clock() + tasks.job_seconds(spec, self.options.job_slack_s)
        sink = _Lines()
        thread, box = _call_in_thread(lambda: self.sdk.tail_logs(att.cluster, job_id, follow=True,
                                                                 output_stream=sink), "sky-logs")
        message, fraction, result_line = "running", 0.0, None
        while True:
            try:
                line = sink.queue.get(timeout=self.options.heartbeat_s)
            except queue.Empty:
                if not thread.is_alive():
                    sink.flush_partial()
                    if sink.queue.empty():
                        break
                    continue
                if self.clock() >= deadline:
                    att.outcome, att.reason = "timeout", self._overran(spec)
                    return
                progress(message, fraction)    # heartbeat: lets a cancel in
                continue
            match = LINE.match(line)
            if match and match.group(1) == "PROGRESS":
                frac, _, text = match.group(2).partition(" ")
                try:
                    fraction, message = float(frac), text or message
                except ValueError:
                    pass
                progress(message, fraction)
            elif match and match.group(1) == "RESULT":
                result_line = match.group(2)
            elif match:
                pass
            else:
                att.log.append(line)
                del att.log[:-200]
            if self.clock() >= deadline and result_line is None:
                att.outcome, att.reason = "timeout", self._overran(spec)
                return
        if result_line is not None:
            try:
                att.result = RawResult.from_json(result_line)
                att.outcome = "result"
                return
            except (ValueError, TypeError, KeyError) as exc:
                att.outcome, att.reason = "failed", f"unreadable RESULT line from the VM: {exc}"
                return
        code = box.get("value")
        why = f"log stream failed: {type(box['exc']).__name__}: {box['exc']}" if "exc" in box \
            else f"job exit code {code}"
        if self._vm_lost(att.cluster):
            att.outcome, att.reason = "preempted", f"the VM went away before the job finished ({why})"
        else:
            att.outcome, att.reason = "failed", f"the VM job ended without a RESULT line ({why})"

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
        last = None
        for i in range(self.options.down_attempts):
            try:
                self.sdk.get(self.sdk.down(name))
                break
            except sky_exceptions.ClusterDoesNotExist:
                break
            except Exception as exc:     # retried; a cluster must not outlive its experiment
                last = exc
                if i + 1 < self.options.down_attempts:
                    time.sleep(self.options.down_backoff_s * (i + 1))
        else:
            att.log.append(f"teardown of {name} failed {self.options.down_attempts} times: {last!r}; "
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
    """One executor per platform, sharing one budget and one lease (see jobs.cloud.leases)."""
    options = options or CloudOptions.from_env()
    workdir = Path(workdir)
    out = workdir.parent
    budget = SharedBudget(config.budget.usd, run_spent=_state_cost(out))
    lease = Lease(run_id, tasks.run_prefix(run_id), out, options.lease_dir)
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
