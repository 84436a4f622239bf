"""Pure: a run's progress events, one frozen type per kind, and `Event`, their union.

A run says how it goes by handing one of these to its `on_event` callback (`jobs.run.pipeline.Run`):
the CLI's rich rows and plain lines (`jobs.run.progress_view`) and the bot's run record and status
comment (`bot/progress.py`) dispatch on the type and read attributes. `to_dict()` is the plain form
the events have always had (`{"type": "phase", "phase": "research"}`; an optional field appears only
when it is set, as the emit sites always wrote them), and `from_dict` reads one back, for anything
that keeps or sends events as JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Union

from jobs.contract.runsummary import RunSummary

Json = dict[str, Any]


def _when_set(default: Any = None) -> Any:
    """A field whose key `to_dict` leaves out while it holds its default."""
    return field(default=default, metadata={"when_set": True})


class _Plain:
    """`to_dict`/`from_dict` of a flat event: its fields under their own names, after `type`."""
    TYPE: ClassVar[str]

    def to_dict(self) -> Json:
        out: Json = {"type": self.TYPE}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.metadata.get("when_set") and value == f.default:
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Json) -> Any:
        if data.get("type") != cls.TYPE:
            raise ValueError(f"not a {cls.TYPE!r} event: {data.get('type')!r}")
        return cls(**{k: v for k, v in data.items() if k != "type"})


@dataclass(frozen=True)
class Phase(_Plain):
    """A phase begins: research, calibrate (once per platform), experiments, stack."""
    TYPE: ClassVar[str] = "phase"
    phase: str
    platform: str | None = _when_set()
    total: int | None = _when_set()          # experiments (or stack candidates) to do


@dataclass(frozen=True)
class ResearchDone(_Plain):
    TYPE: ClassVar[str] = "research_done"
    hypotheses: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hypotheses", tuple(self.hypotheses))   # a JSON list reads back as the tuple


@dataclass(frozen=True)
class Calibrated(_Plain):
    """A platform's A/A calibration is in place, measured or `reused` from a recent run."""
    TYPE: ClassVar[str] = "calibrated"
    platform: str
    calibration: Json
    reused: bool = _when_set(False)


@dataclass(frozen=True)
class ExperimentStart(_Plain):
    TYPE: ClassVar[str] = "experiment_start"
    name: str
    platform: str | None = _when_set()


@dataclass(frozen=True)
class ExperimentDone(_Plain):
    """An experiment's verdict; `resumed`: it finished in an earlier attempt of the run."""
    TYPE: ClassVar[str] = "experiment_done"
    name: str
    status: str
    reason: str
    resumed: bool = _when_set(False)


@dataclass(frozen=True)
class StepProgress(_Plain):
    """A step of a measured (or research) task: `fraction` 1.0 is its final line."""
    TYPE: ClassVar[str] = "progress"
    name: str
    message: str
    fraction: float


@dataclass(frozen=True)
class StepDone(_Plain):
    """A measured step ended, however it ended (`status`: its result's, `error` or `cancelled`)."""
    TYPE: ClassVar[str] = "step_done"
    name: str
    status: str


@dataclass(frozen=True)
class RunWarning(_Plain):
    TYPE: ClassVar[str] = "warning"
    message: str


@dataclass(frozen=True)
class Resume(_Plain):
    """A run picked up where an earlier attempt left it (`phase`: its saved phase, if any)."""
    TYPE: ClassVar[str] = "resume"
    phase: str | None


@dataclass(frozen=True)
class Done(_Plain):
    """The report is written."""
    TYPE: ClassVar[str] = "done"
    summary: RunSummary

    def to_dict(self) -> Json:
        return {"type": self.TYPE, "summary": self.summary.to_json()}

    @classmethod
    def from_dict(cls, data: Json) -> Done:
        if data.get("type") != cls.TYPE:
            raise ValueError(f"not a {cls.TYPE!r} event: {data.get('type')!r}")
        return cls(RunSummary.from_json(data["summary"]))


@dataclass(frozen=True)
class Cancelled(_Plain):
    TYPE: ClassVar[str] = "cancelled"


Event = Union[Phase, ResearchDone, Calibrated, ExperimentStart, ExperimentDone, StepProgress, StepDone,
              RunWarning, Resume, Done, Cancelled]
KINDS: dict[str, type[_Plain]] = {k.TYPE: k for k in (
    Phase, ResearchDone, Calibrated, ExperimentStart, ExperimentDone, StepProgress, StepDone,
    RunWarning, Resume, Done, Cancelled)}


def from_dict(data: Json) -> Event:
    """An event's plain form (`to_dict`) back as its type."""
    kind = KINDS.get(data.get("type"))  # type: ignore[arg-type]
    if kind is None:
        raise ValueError(f"unknown event type: {data.get('type')!r}")
    event: Event = kind.from_dict(data)
    return event
