"""Executors run an ExperimentSpec somewhere and return its RawResult.

Every executor has the same small interface, so the pipeline does not care where a run happens:
`run(spec, progress) -> RawResult`, `estimate_usd(spec)` before launching (budgets are hard caps),
and `close()` (which must release every machine it holds). `parallel` says how many experiments
may run at once: 1 for this machine (two benchmarks side by side would disturb each other),
up to `budget.max_vms` for cloud VMs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..config import TargetConfig
from ..errors import ExecutorUnavailable  # noqa: F401  (re-exported)
from ..runner import Progress
from ..spec import ExperimentSpec, RawResult


class Executor(Protocol):
    platform: str
    parallel: int

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult: ...

    def estimate_usd(self, spec: ExperimentSpec) -> float: ...

    def close(self) -> None: ...


def make_executors(kind: str, repo: Path, workdir: Path, config: TargetConfig, run_id: str) -> list[Executor]:
    """One executor per platform the run measures on."""
    if kind == "local":
        from .local import LocalExecutor
        return [LocalExecutor(repo, workdir)]
    if kind == "skypilot":
        try:
            from .skypilot import make_skypilot_executors
        except ImportError as exc:
            raise ExecutorUnavailable(f"--executor skypilot needs the cloud extra (pip install "
                                      f"'autoresearch[cloud]'): {exc}") from None
        return make_skypilot_executors(repo, workdir, config, run_id)
    raise ExecutorUnavailable(f"unknown executor {kind!r} (choose local or skypilot)")
