"""Pure: the machine's noise as a run goes, typed: `NoiseTrack` (one platform's recent-noise pool and
history, `RunState.noise`), `NoiseEntry` (one experiment's line of the history) and `NoiseSeen`
(what summary.json says of a track, `RunSummary.noise`). `jobs.run.measuring` adds to a track after
each measured experiment and reads its pool (`jobs.stats.drift`); the report reads the history.

Their JSON form is the objects earlier versions wrote (`jobs.contract.jsonform`): a loaded object
writes back its keys in their order, unknown keys kept in `extra`; a key not there takes the
default its readers always took (an empty pool, an empty history).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from jobs.contract.jsonform import Json, JsonRecord


@dataclass
class NoiseEntry(JsonRecord):
    """One measured experiment's primary-metric noise per pair, its effect taken out."""
    name: str = ""                           # the experiment
    pairs: int = 0
    noise_pct: float = 0.0                   # their robust scale (jobs.stats.drift.scale_pct), rounded to 0.01
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


class _WithHistory(JsonRecord):
    history: list[NoiseEntry]

    def __post_init__(self) -> None:
        self.history = [e if isinstance(e, NoiseEntry) else NoiseEntry.from_json(e) for e in self.history or []]


@dataclass
class NoiseTrack(_WithHistory):
    """One platform's noise as the run went (state.json): the most recent residuals, which the next
    plan's MDE is computed from once there are enough (`jobs.stats.drift.current`), and the history."""
    pool: list[float] = field(default_factory=list)
    history: list[NoiseEntry] = field(default_factory=list)
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


@dataclass
class NoiseSeen(_WithHistory):
    """What summary.json says of a platform's track: its history and the pool's size at the end."""
    history: list[NoiseEntry] = field(default_factory=list)
    pool_pairs: int = 0
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, track: NoiseTrack) -> NoiseSeen:
        return cls(history=list(track.history), pool_pairs=len(track.pool))
