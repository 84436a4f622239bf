"""Executors run an ExperimentSpec somewhere and return its RawResult.

Every executor has the same small interface, so the pipeline does not care where a run happens:
`run(spec, progress) -> RawResult` and `close()`.
"""
from __future__ import annotations

from typing import Protocol

from ..runner import Progress
from ..spec import ExperimentSpec, RawResult


class Executor(Protocol):
    platform: str

    def run(self, spec: ExperimentSpec, progress: Progress) -> RawResult: ...

    def close(self) -> None: ...
