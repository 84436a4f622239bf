"""Pure: a run's progress events, one frozen type per kind, and `Event`, their union.

A run says how it goes by handing one of these to its `on_event` callback (`jobs.run.pipeline.Run`):
the CLI's rich rows and plain lines (`jobs.run.progress_view`) and the bot's run record and status
comment (`bot/progress.py`) dispatch on the type and read attributes. No event crosses a process or
a wire (each consumer turns it into its own output), so the types carry no serialised form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from jobs.contract.calibrated import MetricCalibration
from jobs.contract.runsummary import RunSummary

Json = dict[str, Any]


@dataclass(frozen=True)
class Phase:
    """A phase begins: research, calibrate (once per platform), experiments, stack."""
    phase: str
    platform: str | None = None
    total: int | None = None          # experiments (or stack candidates) to do


@dataclass(frozen=True)
class ResearchDone:
    """Research ended with these hypotheses (their ids, in rank order)."""
    hypotheses: tuple[str, ...]


@dataclass(frozen=True)
class Calibrated:
    """A platform's A/A calibration is in place, measured or `reused` from a recent run."""
    platform: str
    calibration: dict[str, MetricCalibration]     # metric name -> its calibration
    reused: bool = False


@dataclass(frozen=True)
class ExperimentStart:
    name: str
    platform: str | None = None


@dataclass(frozen=True)
class ExperimentDone:
    """An experiment's verdict; `resumed`: it finished in an earlier attempt of the run."""
    name: str
    status: str
    reason: str
    resumed: bool = False


@dataclass(frozen=True)
class StepProgress:
    """A step of a measured (or research) task: `fraction` 1.0 is its final line."""
    name: str
    message: str
    fraction: float


@dataclass(frozen=True)
class StepDone:
    """A measured step ended, however it ended (`status`: its result's, `error` or `cancelled`)."""
    name: str
    status: str


@dataclass(frozen=True)
class RunWarning:
    message: str


@dataclass(frozen=True)
class Resume:
    """A run picked up where an earlier attempt left it (`phase`: its saved phase, if any)."""
    phase: str | None


@dataclass(frozen=True)
class Done:
    """The report is written."""
    summary: RunSummary


@dataclass(frozen=True)
class Cancelled:
    """The run was cancelled; finished experiments stay on record."""


Event = Union[Phase, ResearchDone, Calibrated, ExperimentStart, ExperimentDone, StepProgress, StepDone,
              RunWarning, Resume, Done, Cancelled]
