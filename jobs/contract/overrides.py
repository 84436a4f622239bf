"""Pure: a command's arguments as one value, from the comment to the run (`bot.commands` parses
them, run records store them, `jobs.contract.config.TargetConfig.narrow` applies them once, before the plan).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Overrides:
    """A command's arguments (`/autoresearch optimize cpu metric=tg128 platforms=x86,arm budget=30`):
    one value from the comment to the pipeline, applied by `TargetConfig.narrow`. `to_dict()` is
    its JSON form (only the arguments given), which run records store and run ids hash."""

    metric: str | None = None
    platforms: tuple[str, ...] | None = None
    budget: float | None = None

    def __post_init__(self) -> None:
        if self.platforms is not None and not isinstance(self.platforms, tuple):
            object.__setattr__(self, "platforms", tuple(self.platforms))

    def __bool__(self) -> bool:
        return bool(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.metric:
            out["metric"] = self.metric
        if self.platforms:
            out["platforms"] = list(self.platforms)
        if self.budget is not None:
            out["budget"] = self.budget
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Overrides":
        data = data or {}
        budget = data.get("budget")
        return cls(data.get("metric") or None, tuple(data["platforms"]) if data.get("platforms") else None,
                   float(budget) if budget is not None else None)
