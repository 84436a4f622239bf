"""The on-machine experiment driver: build baseline and candidate, check, benchmark interleaved.

Same code on this machine (LocalExecutor calls `run_experiment`) and on a cloud VM
(`python -m jobs.runner spec.json --repo DIR` prints JSON lines). It reports raw samples only;
verdicts are computed centrally from them, so a VM never decides what counts as a win.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .metrics import explain_missing, parse_metrics
from .model import ArmSamples
from .secrets import scrubbed_env  # never hand credentials to target code: one policy, jobs/secrets.py
from .spec import ExperimentSpec, RawResult
from .stats import abba_order

Progress = Callable[[str, float], None]   # (message, fraction done 0..1)

LOG_TAIL = 4000


@dataclass
class Step:
    returncode: int | None          # None: timed out
    output: str
    seconds: float


def run_step(command: str, cwd: Path, timeout: float) -> Step:
    """Run a shell command in its own process group; on timeout kill the whole group."""
    start = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=cwd, env=scrubbed_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return Step(proc.returncode, out, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, _ = proc.communicate()
        return Step(None, out or "", time.monotonic() - start)
    except BaseException:
        # Interrupted (Ctrl-C, a worker being stopped): the step's own process group would
        # otherwise outlive us, since it runs in a session of its own.
        _kill_group(proc.pid)
        proc.wait()
        raise


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):   # the group may already be gone
        os.killpg(pgid, signal.SIGKILL)


def tail(text: str, limit: int = LOG_TAIL) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model")):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cpus, {platform.machine()})"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cpus)"


def machine_probe() -> float:
    """A ~20 ms memory-bandwidth probe (GB/s) taken beside each invocation: a slow period on a
    shared machine slows the probe and the benchmark together, so it can serve as a covariate."""
    import numpy as np
    src = np.ones(4 * 1024 * 1024, dtype=np.float64)   # 32 MiB: out of cache
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


class Failure(Exception):
    def __init__(self, status: str, reason: str, log: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def _must_pass(command: str, tree: Path, timeout: float, what: str, fail_status: str) -> str:
    """Run a build or checks step; a timeout or non-zero exit becomes that step's own status."""
    step = run_step(command, tree, timeout)
    if step.returncode is None:
        raise Failure("timeout", f"{what} exceeded {timeout:.0f} s", tail(step.output))
    if step.returncode != 0:
        raise Failure(fail_status, f"{what} failed (exit {step.returncode})", tail(step.output))
    return f"== {what} ({step.seconds:.1f} s)\n{tail(step.output, 1000)}\n"


def _build(spec: ExperimentSpec, tree: Path, label: str, progress: Progress) -> str:
    progress(f"building {label}", 0.0)
    return _must_pass(spec.build, tree, spec.build_timeout, f"{label} build", "build_failed")


def _checks(spec: ExperimentSpec, tree: Path, progress: Progress) -> str:
    progress("running checks", 0.1)
    return _must_pass(spec.checks, tree, spec.checks_timeout, "checks", "checks_failed")


def _invoke(spec: ExperimentSpec, tree: Path, label: str) -> tuple[dict[str, float], float]:
    step = run_step(spec.benchmark, tree, spec.benchmark_timeout)
    if step.returncode is None:
        raise Failure("timeout", f"{label} benchmark exceeded {spec.benchmark_timeout:.0f} s", tail(step.output))
    if step.returncode != 0:
        raise Failure("crash", f"{label} benchmark exited with status {step.returncode}", tail(step.output))
    parsed = parse_metrics(step.output)
    if spec.primary not in parsed.values:
        raise Failure("crash", f"{label} benchmark: {explain_missing(parsed, spec.primary)}", tail(step.output))
    return {k: v for k, v in parsed.values.items() if k in spec.metrics}, step.seconds


def _record(arm: ArmSamples, values: dict[str, float], index: int, probe: float | None, seconds: float):
    for name, value in values.items():
        arm.values.setdefault(name, []).append(value)
    arm.order.append(index)
    arm.seconds.append(seconds)
    if probe is not None:
        arm.probe.append(probe)


def run_experiment(spec: ExperimentSpec, base_dir: Path, head_dir: Path, *,
                   build_base: bool = True, progress: Progress | None = None) -> RawResult:
    """Build, check and benchmark one experiment in two prepared clean trees."""
    progress = progress or (lambda msg, frac: None)
    started = time.monotonic()
    result = RawResult(status="ok", cpu=cpu_model())
    log = []
    try:
        if build_base:
            log.append(_build(spec, base_dir, "baseline", progress))
        if head_dir != base_dir:
            log.append(_build(spec, head_dir, "candidate", progress))
        if spec.run_checks:
            log.append(_checks(spec, head_dir, progress))
        order = abba_order(spec.n_per_arm, spec.warmup)
        for i, label in enumerate(order):
            progress(f"invocation {i + 1}/{len(order)} ({label})", 0.2 + 0.8 * i / len(order))
            tree, arm = (head_dir, result.head) if label == "B" else (base_dir, result.base)
            name = "candidate" if label == "B" else "baseline"
            probe = machine_probe() if spec.probe else None
            values, seconds = _invoke(spec, tree, name)
            if label != "W":   # warm-up invocations are run for their side effects and discarded
                _record(arm, values, i, probe, seconds)
        progress("measured", 1.0)
    except Failure as failure:
        result.status, result.reason = failure.status, failure.reason
        log.append(f"== {failure.status}: {failure.reason}\n{failure.log}")
    result.seconds = time.monotonic() - started
    result.log = tail("".join(log), 3 * LOG_TAIL)
    return result


def main(argv: list[str] | None = None) -> int:
    """Remote entry point: worktrees from the repo, run, print progress and one RESULT line."""
    from . import gitops
    parser = argparse.ArgumentParser(prog="python -m jobs.runner")
    parser.add_argument("spec", type=Path)
    parser.add_argument("--repo", type=Path, default=Path("."))
    parser.add_argument("--work", type=Path, default=Path("autoresearch-work"))
    args = parser.parse_args(argv)
    args.repo, args.work = args.repo.resolve(), args.work.resolve()   # git -C needs absolute paths
    spec = ExperimentSpec.from_json(args.spec.read_text())
    base = gitops.add_worktree(args.repo, args.work / "base", spec.base_commit)
    head = base if spec.head_commit == spec.base_commit else \
        gitops.add_worktree(args.repo, args.work / "head", spec.head_commit)

    def progress(message: str, fraction: float) -> None:
        print(f"PROGRESS {fraction:.2f} {message}", flush=True)

    result = run_experiment(spec, base, head, progress=progress)
    print("RESULT " + result.to_json(), flush=True)
    print(f"EXPERIMENT_STATUS: {result.status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
