"""Pure: the runner's own view of one experiment, typed: `RunnerView` (`ExperimentRecord.runner`),
with its two nested parts `SimulatedView` (the simulated cycles the yardstick counted) and `WallGuard`
(the wall-clock guard beside a simulated-cycles verdict).

This module owns the three types and their JSON form, nothing else. `jobs.stats.verdict.runner_view`
builds the view of a measured experiment, `jobs.measure.simulate.judge_yardstick` adds its
`simulated` and `wall_guard`, `jobs.run.calibrating` writes the partial view of a calibration record
(`RunnerView.partial`); the report, the stack's gains and the yardstick's section read attributes.

`from_json` / `to_json` read and write exactly the objects earlier versions wrote (experiments.jsonl,
summary.json), as `jobs.contract.calibrated` does (`jobs.contract.jsonform`): a loaded view writes back
the keys it was read with, in their order, values untouched; unknown keys are kept in `extra`; a key
not there takes the default its readers always took.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from jobs.contract.jsonform import Json, JsonRecord, from_json


@dataclass
class SimulatedView(JsonRecord):
    """The simulated cycles of both arms (`jobs.measure.simulate.sim_view`). A field is None where an
    older or hand-made file has no such key."""
    base_cycles: int | None = None
    head_cycles: int | None = None
    delta_pct: float | None = None           # the head's change in simulated cycles (- is fewer)
    floor_pct: float | None = None           # the floor it was judged against
    seconds: dict[str, float | None] = field(default_factory=dict)   # arm ("A", "B") -> one simulated run's wall time
    model: str = ""                          # the cycle model (`jobs.measure.simulate.MODEL`)
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


@dataclass
class WallGuard(JsonRecord):
    """The wall-clock guard's interval of the primary metric (oriented: + is better) beside a
    simulated-cycles verdict (`jobs.measure.simulate.judge_yardstick`)."""
    lo_pct: float | None = None              # None: not in the file (shown as -100%)
    hi_pct: float | None = None              # None: unbounded (strict JSON writes +inf as null)
    alpha: float = 0.0                       # its level
    tolerance_pct: float | None = None       # the regression it must exclude
    pairs: int = 0
    noisy: bool | None = None                # the wall clock was too noisy to guard (written only then)
    loss_p: float | None = None              # the one look's signed-rank p that the head is slower
    confirmed: bool | None = None            # the interval excluded a regression beyond the tolerance
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _OPTIONAL = ("noisy", "loss_p", "confirmed")    # written when set (the verdict sets them as it goes)


@dataclass
class RunnerView(JsonRecord):
    """What the runner saw of one experiment: its own clocks per arm (medians), sandbox, pairs, step
    times and stop reason; the yardstick's counts and guard; a reused calibration's origin.

    Built with its fields (`jobs.stats.verdict.runner_view`), a view writes the measured ones always
    (a clock may be None) and the rest only when set; `partial` builds one that has only the keys
    given (a calibration record's). A field is its default where a file has no such key."""
    pairs: int = 0
    stopped: str = ""                        # why the runner stopped sampling ('' : it did not stop early)
    sandboxed: bool | None = None
    wall_base_s: float | None = None
    wall_head_s: float | None = None
    cpu_base_s: float | None = None
    cpu_head_s: float | None = None
    steps: dict[str, float] = field(default_factory=dict)     # step name -> seconds
    carry_over_pct: float | None = None      # the primary's carry-over estimate, when measured
    carry_over_p: float | None = None
    simulated: SimulatedView | None = None   # when the deterministic yardstick counted both arms
    wall_guard: WallGuard | None = None      # beside a simulated-cycles verdict
    reused_from: str | None = None           # a reused calibration's run
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _OPTIONAL = ("carry_over_pct", "carry_over_p", "simulated", "wall_guard", "reused_from")
    _NESTED = {"simulated": SimulatedView, "wall_guard": WallGuard}

    @classmethod
    def partial(cls, **values: Any) -> RunnerView:
        """A view whose file form has only these keys, in this order (none: `{}`)."""
        return cls(**values, keys=tuple(values))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RunnerView:
        """The view back from its JSON form; None (or no view at all) is the empty view `{}`."""
        return cls.partial() if data is None else from_json(cls, data, cls._NESTED)


def as_runner_view(value: RunnerView | Mapping[str, Any] | None) -> RunnerView:
    """A view from its JSON form (a typed one is taken as it is)."""
    return value if isinstance(value, RunnerView) else RunnerView.from_json(value)


def given(part: SimulatedView | WallGuard | None):
    """A nested part when the view has one that says something: an empty one (`{}` in the file)
    reads as none, as the mapping it was read from did."""
    return part if part is not None and part.keys != () else None
