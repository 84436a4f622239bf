"""The errors a run raises across module boundaries, in one place at the bottom of `jobs/`.

Every module may import this one (it imports nothing of the project), so raising a `RunError`
never needs an import that runs back up to the pipeline. `jobs.run.pipeline` and `jobs.executors`
re-export their names, so existing `from jobs.run.pipeline import RunError` keeps working.

- `RunError`: the run could not proceed; the message says why and what to do.
- `OverrideError`: a command's arguments (`metric=`, `platforms=`, `budget=`) do not fit the
  repository's config; a `RunError`, answered with help rather than a failed run.
- `RunCancelled`: a cancel was asked for (`should_stop`); machines were released and finished
  work stays on record.
- `ExecutorUnavailable`: the requested executor cannot run here (missing extra, unknown name).
- `Terminated`: SIGTERM, raised as a `KeyboardInterrupt` so it stops a run the way Ctrl-C does.
- `cancellation(exc)`: whether an exception (or what it interrupted) is a cancel.
"""
from __future__ import annotations


class RunError(RuntimeError):
    """The run could not proceed; the message says why and what to do."""


class OverrideError(RunError):
    """A command argument names something the repository's config does not have, or exceeds it."""


class RunCancelled(RuntimeError):
    """`should_stop` said so; machines were released and finished work stays on record."""


class ExecutorUnavailable(RuntimeError):
    """The requested executor cannot run (unknown name, or its extra is not installed)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: ends a run like Ctrl-C (every `except KeyboardInterrupt` catches it).

    A subclass rather than a bare KeyboardInterrupt on purpose: CPython remembers a bare one that
    escapes an `exec()` of a string (a dataclass or namedtuple being created when the signal lands)
    and, even after our handler caught it, kills the process with SIGINT at exit, so a clean
    "terminated" exit 143 came out as "killed by SIGINT" (CI, 2026-12-01). It checks the exact type."""

    def __init__(self, signal_name: str = "SIGTERM"):
        super().__init__(signal_name)


def cancellation(exc: BaseException | None, *, interrupts: bool = False) -> bool:
    """True if `exc`, or an exception it was raised while handling, is a `RunCancelled` (or, with
    `interrupts`, a `KeyboardInterrupt`: how a CI runner says "cancel"). Cleanup after a cancel can
    raise errors of its own (killing a process group that had just exited); the chain still says
    what happened first."""
    kinds: tuple[type[BaseException], ...] = (RunCancelled, KeyboardInterrupt) if interrupts else (RunCancelled,)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
