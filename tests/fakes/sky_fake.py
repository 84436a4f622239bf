"""A fake of the SkyPilot client SDK at the boundary the executor and the reaper use.

Same call signatures as `sky` 0.14 (`launch`, `stream_and_get`, `get`, `tail_logs`, `down`,
`status`, `api_cancel`), same request-id style (calls return a request id; `get` /
`stream_and_get` resolve it), and it raises SkyPilot's real exception classes. It keeps books of
the clusters it has "up" (`clusters`), records every call (`calls`), and can inject failures
(`inject`): provisioning error (the cluster stays in the books, as SkyPilot leaves a failed
cluster up for debugging), provisioning hang, preemption mid-job, a job that hangs past its
time limit, a job that fails without output, a noisy VM, a teardown that errors.

A job "runs" for real: the task's workdir is copied to a per-cluster folder (SkyPilot syncs it to
`~/sky_workdir`) and the task's `run` script is executed there with bash, with only the task's
envs plus PATH/HOME (the fake VM's HOME has no venv, so the script falls back to `python3` on
PATH, which is this test venv's). Its output is streamed line by line behind SkyPilot's
`(task, pid=N) ` prefix. `setup` is recorded, not run (it would apt-get install).

`job="canned"` skips the subprocess: the fake prints the driver's lines itself (PROGRESS per
invocation in the spec's ABBA order, then a RESULT with ~1%-noise samples, the candidate 10%
faster when it differs from the baseline). Use it where the test is about the machine, not the
measurement; it is much faster on a loaded test box.

An optional `FakeClock` makes VM time deterministic: provisioning, a job and a teardown advance
it by fixed amounts, so cost assertions can be exact.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sky
from sky import exceptions

RESULT = re.compile(r"^RESULT (.*)$")


def real_signature(fn):
    """Every call must also bind to the real `sky.<name>` signature: an argument the real SDK
    would reject fails here too, so the executor cannot drift from the real boundary."""
    real = inspect.signature(getattr(sky, fn.__name__))

    @functools.wraps(fn)
    def checked(self, *args, **kwargs):
        real.bind(*args, **kwargs)
        return fn(self, *args, **kwargs)
    return checked


class FakeClock:
    def __init__(self, start: float = 1000.0):
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@dataclass
class Fault:
    kind: str                 # provision_error | provision_hang | preempt | hang | job_fail | noisy | down_error
    match: str = ""           # substring of the cluster name ("" = any)
    times: int = 1
    after_lines: int = 3      # preempt: lines streamed before the VM disappears


@dataclass
class Cluster:
    name: str
    task: Any
    status: str = "INIT"      # INIT | UP | STOPPED
    launch_kwargs: dict = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    downed: threading.Event = field(default_factory=threading.Event)
    proc: subprocess.Popen | None = None


class FakeSky:
    exceptions = exceptions
    Task = sky.Task
    StatusRefreshMode = sky.StatusRefreshMode
    ClusterStatus = sky.ClusterStatus

    def __init__(self, root: Path, *, clock: FakeClock | None = None, provision_s: float = 120.0,
                 job_s: float = 600.0, down_s: float = 30.0, hang_limit_s: float = 60.0, job: str = "runner"):
        assert job in ("runner", "canned")
        self.job = job
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.provision_s, self.job_s, self.down_s, self.hang_limit_s = provision_s, job_s, down_s, hang_limit_s
        self.clusters: dict[str, Cluster] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.launched: list[str] = []           # every cluster name ever launched, in order
        self.tasks: dict[str, dict[str, Any]] = {}   # cluster -> what the task carried (envs, files)
        self.faults: list[Fault] = []
        self._requests: dict[str, tuple] = {}
        self._cancelled: dict[str, threading.Event] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- test controls ------------------------------------------------------------------------
    def inject(self, kind: str, match: str = "", times: int = 1, **kw) -> None:
        with self._lock:
            self.faults.append(Fault(kind, match, times, **kw))

    def _take(self, kind: str, name: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.kind == kind and f.match in name and f.times > 0:
                    f.times -= 1
                    return f
        return None

    def _tick(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)

    def _record(self, method: str, **kw) -> None:
        with self._lock:
            self.calls.append((method, kw))

    def _request(self, *op) -> str:
        rid = f"req-{next(self._ids)}"
        with self._lock:
            self._requests[rid] = op
            self._cancelled[rid] = threading.Event()
        return rid

    def up(self) -> list[str]:
        """Clusters still in the books (anything here is a leaked VM)."""
        with self._lock:
            return sorted(self.clusters)

    def called(self, method: str) -> list[dict[str, Any]]:
        return [kw for m, kw in self.calls if m == method]

    # -- the SDK surface ------------------------------------------------------------------------
    @real_signature
    def launch(self, task, cluster_name=None, retry_until_up=False, idle_minutes_to_autostop=None,
               wait_for=None, dryrun=False, down=False, backend=None, optimize_target=None, no_setup=False,
               clone_disk_from=None, fast=False, resize=False, **_internal) -> str:
        assert isinstance(task, sky.Task), "sky.launch takes a sky.Task"
        assert cluster_name, "the executor always names its clusters"
        self._record("launch", task=task, cluster_name=cluster_name, retry_until_up=retry_until_up,
                     idle_minutes_to_autostop=idle_minutes_to_autostop, down=down, dryrun=dryrun)
        return self._request("launch", cluster_name, task,
                             {"down": down, "idle_minutes_to_autostop": idle_minutes_to_autostop})

    @real_signature
    def down(self, cluster_name, purge=False, graceful=False, graceful_timeout=None) -> str:
        self._record("down", cluster_name=cluster_name, purge=purge)
        return self._request("down", cluster_name)

    @real_signature
    def status(self, cluster_names=None, refresh=None, all_users=False, *, _include_credentials=False,
               _summary_response=False) -> str:
        self._record("status", cluster_names=cluster_names, refresh=refresh, all_users=all_users)
        return self._request("status", cluster_names)

    @real_signature
    def api_cancel(self, request_ids=None, all_users=False, silent=False) -> str:
        self._record("api_cancel", request_ids=request_ids)
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids or [])
        for rid in ids:
            if rid in self._cancelled:
                self._cancelled[rid].set()
        return self._request("noop", ids)

    @real_signature
    def get(self, request_id):
        return self._resolve(request_id)

    @real_signature
    def stream_and_get(self, request_id=None, log_path=None, tail=None, follow=True, output_stream=None,
                       relay_rich_status=False):
        return self._resolve(request_id)

    @real_signature
    def tail_logs(self, cluster_name, job_id, follow, tail=0, output_stream=None, *, preload_content=True) -> int:
        self._record("tail_logs", cluster_name=cluster_name, job_id=job_id, follow=follow)
        with self._lock:
            c = self.clusters.get(cluster_name)
        if c is None:
            raise exceptions.ClusterDoesNotExist(f"Cluster {cluster_name!r} does not exist.")
        if c.status != "UP":
            raise exceptions.ClusterNotUpError(f"Cluster {cluster_name!r} is not up.", cluster_status=None)
        if self._take("hang", cluster_name):
            c.downed.wait(self.hang_limit_s)       # hangs until someone tears the VM down
            raise exceptions.ClusterDoesNotExist(f"Cluster {cluster_name!r} was torn down.")
        if self._take("job_fail", cluster_name):
            self._tick(self.job_s)
            return exceptions.JobExitCode.FAILED
        preempt = self._take("preempt", cluster_name)
        noisy = self._take("noisy", cluster_name)
        if self.job == "canned":
            return self._canned_job(c, output_stream or sys.stdout, preempt, noisy)
        return self._run_job(c, output_stream or sys.stdout, preempt, noisy)

    # -- internals ----------------------------------------------------------------------------
    def _resolve(self, request_id):
        with self._lock:
            op = self._requests.get(request_id)
        if op is None:
            raise RuntimeError(f"Failed to get request {request_id}: 404")
        kind = op[0]
        if kind == "launch":
            return self._provision(request_id, *op[1:])
        if kind == "down":
            return self._down(op[1])
        if kind == "status":
            return self._status(op[1])
        return op[1]

    def _provision(self, request_id, name, task, kwargs):
        with self._lock:
            if name in self.clusters:
                raise AssertionError(f"{name} launched twice: the executor must use a fresh VM")
            c = Cluster(name, task, launch_kwargs=kwargs)
            self.clusters[name] = c
            self.launched.append(name)
            files = sorted(str(p.relative_to(task.workdir)) for p in Path(task.workdir).rglob("*")
                           if p.is_file())
            self.tasks[name] = {"envs": dict(task.envs), "setup": task.setup, "run": task.run,
                                "files": files, "resources": str(task.resources)}
        self._tick(self.provision_s)
        if self._take("provision_error", name):
            raise exceptions.ResourcesUnavailableError(
                f"Failed to provision all possible launchable resources for {name} (fake)")
        if self._take("provision_hang", name):
            cancelled = self._cancelled[request_id]
            while not (cancelled.is_set() or c.downed.is_set()):
                time.sleep(0.01)
            raise exceptions.RequestCancelled(f"launch request for {name} cancelled (fake)")
        c.status = "UP"
        return 1, {"cluster": name}

    def _down(self, name):
        if self._take("down_error", name):
            raise RuntimeError(f"Failed to tear down {name} (fake)")
        with self._lock:
            c = self.clusters.pop(name, None)
        if c is None:
            raise exceptions.ClusterDoesNotExist(f"Cluster {name!r} does not exist.")
        c.downed.set()
        if c.proc and c.proc.poll() is None:
            os.killpg(c.proc.pid, signal.SIGKILL)
        self._tick(self.down_s)
        return None

    def _status(self, names):
        with self._lock:
            chosen = [c for n, c in sorted(self.clusters.items()) if names is None or n in names]
            return [{"name": c.name, "status": getattr(sky.ClusterStatus, c.status), "launched_at": 0,
                     "autostop": c.launch_kwargs.get("idle_minutes_to_autostop") or -1,
                     "to_down": bool(c.launch_kwargs.get("down"))} for c in chosen]

    def _run_job(self, c: Cluster, out, preempt: Fault | None, noisy: Fault | None) -> int:
        remote = self.root / "vms" / c.name / "sky_workdir"
        home = self.root / "vms" / c.name / "home"
        if remote.exists():
            shutil.rmtree(remote)
        shutil.copytree(c.task.workdir, remote)
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               "HOME": str(home), "LANG": "C.UTF-8", **{k: str(v) for k, v in c.task.envs.items()}}
        c.proc = subprocess.Popen(["bash", "-c", c.task.run], cwd=remote, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True)
        prefix = f"(task, pid={c.proc.pid}) "
        for i, line in enumerate(c.proc.stdout):
            if preempt and i >= preempt.after_lines:
                os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait()
                c.status = "STOPPED"          # a preempted spot VM: gone from under the job
                self._tick(self.job_s / 2)
                raise exceptions.ClusterNotUpError(f"Cluster {c.name!r} is not up (preempted, fake).",
                                                   cluster_status=None)
            m = RESULT.match(line.rstrip("\n"))
            if m and noisy:
                line = "RESULT " + json.dumps(_make_noisy(json.loads(m.group(1)))) + "\n"
            out.write(prefix + line)
        rc = c.proc.wait()
        self._tick(self.job_s)
        return exceptions.JobExitCode.SUCCEEDED if rc == 0 else exceptions.JobExitCode.FAILED


    def _canned_job(self, c: Cluster, out, preempt: Fault | None, noisy: Fault | None) -> int:
        from jobs.stats.sequential import pair_schedule
        from jobs.contract.spec import ExperimentSpec, Invocation, RawResult
        spec = ExperimentSpec.from_json((Path(c.task.workdir) / "spec.json").read_text())
        speed = 100.0 if spec.head_commit == spec.base_commit else 110.0
        result = RawResult(status="ok", cpu=f"fake {c.name} (8 cpus)", stopped="exhausted")
        lines = ["PROGRESS 0.00 building baseline"]
        index = 0
        for i, (first, seed) in enumerate(pair_schedule(spec.n_per_arm, spec.seed)):
            lines.append(f"PROGRESS {0.2 + 0.8 * i / spec.n_per_arm:.2f} pair {i + 1}/{spec.n_per_arm}")
            for position, arm in enumerate((first, "A" if first == "B" else "B")):
                v = (speed if arm == "B" else 100.0) * (1 + 0.01 * ((index * 7) % 5 - 2) / 2)
                result.invocations.append(Invocation(arm=arm, pair=i, position=position, seed=seed, index=index,
                                                     metrics={"score": v, "ms": 1000 / v}, wall_s=1 / v, cpu_s=1 / v))
                index += 1
        lines += ["PROGRESS 1.00 measured", "RESULT " + result.to_json(), "EXPERIMENT_STATUS: ok"]
        for i, line in enumerate(lines):
            if preempt and i >= preempt.after_lines:
                c.status = "STOPPED"
                self._tick(self.job_s / 2)
                raise exceptions.ClusterNotUpError(f"Cluster {c.name!r} is not up (preempted, fake).",
                                                   cluster_status=None)
            if noisy and line.startswith("RESULT "):
                line = "RESULT " + json.dumps(_make_noisy(json.loads(line[7:])))
            out.write(f"(task, pid=4242) {line}\n")
        self._tick(self.job_s)
        return exceptions.JobExitCode.SUCCEEDED


def _make_noisy(result: dict) -> dict:
    """What a noisy neighbour does to the baseline: +-30% swings between processes."""
    for k, inv in enumerate(i for i in result["invocations"] if i["arm"] == "A"):
        inv["metrics"] = {name: v * (1.3 if k % 2 else 0.7) for name, v in inv["metrics"].items()}
    return result
