"""Agents turn one hypothesis into one commit in an experiment's worktree.

Interface (the pipeline uses nothing else):
- `implement(hypothesis, tree, config) -> commit id` — one commit in `tree`, or NotImplementable;
- `revise(hypotheses, results) -> hypotheses` — between waves, re-rank/add/drop what is left.
Optional, found by the pipeline when present: `research(digests)` (a model researcher), `meter`
(model spend, charged to the run), `isolation` and `profile_digest` (set by the pipeline).

Which agents exist is the registry's (jobs/contract/agentkinds.py); each one's module here exposes
`make(recipes, config, **kw)`. The model agent and its parts: `llm` (research, implement, revise),
`chat` (the one-method protocol a provider implements), `tools`, `prompts`, `meter`; `claude` is
the Anthropic adapter.
"""
from __future__ import annotations

import importlib
from typing import Any, Protocol

from jobs.contract import agentkinds
from jobs.contract.config import TargetConfig
from jobs.contract.model import Hypothesis


class Agent(Protocol):
    name: str

    def implement(self, h: Hypothesis, tree, config: TargetConfig) -> str: ...

    def revise(self, pending: list[Hypothesis], results: list[dict[str, Any]]) -> list[Hypothesis]: ...


def make_agent(name: str, recipes: dict, config: TargetConfig, **kw: Any) -> Agent:
    """The registered agent `name`, made by its module (imported only when asked for). An agent
    refuses with a RunError when what it needs (a key, an SDK) is missing."""
    module = importlib.import_module(f"{__name__}.{agentkinds.kind(name).module}")   # ValueError: unknown name
    return module.make(recipes, config, **kw)
