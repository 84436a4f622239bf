"""Agents turn one hypothesis into one commit in an experiment's worktree.

Interface (the pipeline uses nothing else):
- `implement(hypothesis, tree, config) -> commit id` — one commit in `tree`, or NotImplementable;
- `revise(hypotheses, results) -> hypotheses` — between waves, re-rank/add/drop what is left.
"""
from __future__ import annotations

from typing import Any, Protocol

from ..config import TargetConfig
from ..model import Hypothesis


class Agent(Protocol):
    name: str

    def implement(self, h: Hypothesis, tree, config: TargetConfig) -> str: ...

    def revise(self, pending: list[Hypothesis], results: list[dict[str, Any]]) -> list[Hypothesis]: ...


def make_agent(name: str, recipes: dict, config: TargetConfig, **kw: Any) -> Agent:
    from .offline import OfflineAgent
    if name in ("offline", "none"):
        return OfflineAgent(recipes)
    if name == "claude":
        from .claude import make_claude_agent  # needs the llm extra and an API key
        return make_claude_agent(recipes, config, **kw)
    raise ValueError(f"unknown agent {name!r} (choose offline, claude or none)")
