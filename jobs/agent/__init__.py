"""Agents turn one hypothesis into one commit in an experiment's worktree.

Interface (the pipeline uses nothing else): an `Agent` subclass with
- `implement(hypothesis, tree, config) -> commit id` — one commit in `tree`, or NotImplementable;
- `revise(hypotheses, results) -> hypotheses` — between waves, re-rank/add/drop what is left;
- its abilities as declared fields, read by the pipeline (never found with `hasattr`):
  `ranks_from_digests` (it has `research(digests)`, a model researcher), `runs_target_code` (the
  pipeline gives it the run's sandbox in `isolation`), `reads_profile` (the pipeline gives it the
  callgrind digest in `profile_digest`), `meter` (its model spend, charged to the run, or None).

Which agents exist is the registry's (jobs/contract/agentkinds.py); each one's module here exposes
`make(recipes, config, **kw)`. The model agent and its parts: `llm` (research, implement, revise),
`chat` (the one-method protocol a provider implements), `tools`, `prompts`, `meter`; `claude` is
the Anthropic adapter. `transforms`: the catalogue of profile-guided source rewrites of hot code
(runtime dispatch, pragmas, prefetch, attributes), each built and checked before it is tried.
"""
from __future__ import annotations

import importlib
from typing import Any

from jobs.contract import agentkinds
from jobs.contract.config import TargetConfig
from jobs.contract.model import ExperimentRecord, Hypothesis


class Agent:
    """What every agent is; the abilities are off unless an agent declares them."""

    name: str = ""
    ranks_from_digests: bool = False        # has research(digests) -> hypotheses
    runs_target_code: bool = False          # builds or runs the target: gets the run's `isolation`
    reads_profile: bool = False             # takes the callgrind digest in `profile_digest`
    implements_leads: bool = False          # can implement a hypothesis with neither recipe nor patch
    meter: Any = None                       # its model spend (jobs.agent.meter.Meter), or None
    isolation: Any = None                   # set by the pipeline when `runs_target_code`
    profile_digest: str = ""                # set by the pipeline when `reads_profile`

    def implement(self, h: Hypothesis, tree, config: TargetConfig) -> str:
        raise NotImplementedError

    def revise(self, pending: list[Hypothesis], results: list[ExperimentRecord]) -> list[Hypothesis]:
        return pending

    def research(self, digests) -> list[Hypothesis]:
        raise NotImplementedError(f"the {self.name} agent does not rank from digests (ranks_from_digests is off)")


def make_agent(name: str, recipes: dict, config: TargetConfig, **kw: Any) -> Agent:
    """The registered agent `name`, made by its module (imported only when asked for). An agent
    refuses with a RunError when what it needs (a key, an SDK) is missing."""
    module = importlib.import_module(f"{__name__}.{agentkinds.kind(name).module}")   # ValueError: unknown name
    agent = module.make(recipes, config, **kw)
    if not isinstance(agent, Agent):
        raise TypeError(f"the {name} agent's make() returned a {type(agent).__name__}, not a jobs.agent.Agent "
                        "(subclass it and declare its abilities)")
    return agent
