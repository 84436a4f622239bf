"""Executors run an ExperimentSpec somewhere and return its RawResult.

Every executor has the same small interface, so the pipeline does not care where a run happens:
`run(spec, progress) -> RawResult`, `estimate_usd(spec)` before launching (budgets are hard caps),
`build_ahead(spec)` (a hint of the next experiment, which it may ignore) and `close()` (which must
release every machine it holds). `parallel` says how many experiments
may run at once: 1 for this machine (two benchmarks side by side would disturb each other),
up to `budget.max_vms` for cloud VMs.

Executors are registered by name in `jobs.executors.registry`; what machine executors share
(the run's budget, retries on a fresh machine, following a remote job's log) is in `budget`,
`attempts` and `logstream` beside it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from jobs.contract.config import TargetConfig
from jobs.contract.errors import ExecutorUnavailable  # noqa: F401  (re-exported)
from jobs.measure.runner import Progress
from jobs.contract.spec import ExperimentSpec, RawResult
from .registry import executor_kind


class Executor(Protocol):
    platform: str
    parallel: int

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult: ...

    def estimate_usd(self, spec: ExperimentSpec) -> float: ...

    def build_ahead(self, spec: ExperimentSpec) -> None:
        """A hint: `spec` is measured next, so its candidate may be built beside the next `run`'s
        checks and simulation (the local executor does). An executor that cannot ignores it."""

    def close(self) -> None: ...


def make_executors(kind: str, repo: Path, workdir: Path, config: TargetConfig, run_id: str) -> list[Executor]:
    """One executor per platform the run measures on, by the registered kind's factory."""
    try:
        entry = executor_kind(kind)
    except ValueError as exc:
        raise ExecutorUnavailable(str(exc)) from None
    try:
        factory = entry.load()
    except ImportError as exc:
        if not entry.extra:
            raise
        raise ExecutorUnavailable(f"--executor {kind} needs the {entry.extra} extra (pip install "
                                  f"'autoresearch[{entry.extra}]'): {exc}") from None
    return factory(repo, workdir, config, run_id)
