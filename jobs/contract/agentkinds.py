"""The agent registry: every agent's name, the module that makes it, and what it needs. Pure.

Adding an agent is one `AgentKind` in `AGENTS` plus its module in `jobs/agent/`, which exposes
`make(recipes, config, **kw) -> Agent` (the protocol in `jobs/agent/__init__.py`). Everything else
that names agents reads this table: the CLI's `--agent` choices, the config's `agent` field (and the
README's table generated from it), the pipeline's fallback when a key is missing, whether a run
researches (`researches`), and
`jobs.agent.make_agent`. It lives on the ground floor, beside `jobs.contract.config`, so the config can be
validated against it; it imports nothing of the project, and the agents' modules are named here as
text (`jobs.agent.make_agent` imports them), so loading a config never loads an SDK.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class AgentKind:
    name: str
    module: str                 # under jobs/agent/, exposing make(recipes, config, **kw)
    summary: str                # a phrase for help texts (no semicolons: they separate agents)
    researches: bool = True     # ranks and implements hypotheses; False: evaluates only --candidate patches
    needs_env: str = ""         # an environment variable it cannot start without (an API key)


DEFAULT = "offline"             # deterministic, free, needs nothing: what a config gets unless it asks
AGENTS: dict[str, AgentKind] = {k.name: k for k in (
    AgentKind("offline", "offline", "recipes and maintainer patches, deterministic, no API key"),
    AgentKind("claude", "claude", "Anthropic's Messages API ranks, implements (tool use) and revises",
              needs_env="ANTHROPIC_API_KEY"),
    AgentKind("none", "offline", "no research, evaluates only the given --candidate patches", researches=False),
)}


def names(*, researching: bool = False) -> list[str]:
    """Every agent's name in the registry's order; with `researching`, only those that research."""
    return [n for n, k in AGENTS.items() if k.researches or not researching]


def researches(name: str) -> bool:
    """Whether the agent called `name` scans for hypotheses (False: it evaluates only the given
    candidate patches). A name outside the registry (an agent handed in directly) researches."""
    found = AGENTS.get(name)
    return found is None or found.researches


def kind(name: str) -> AgentKind:
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r} (choose {', '.join(AGENTS)})")
    return AGENTS[name]


def for_config(name: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """The agent a repository config's choice runs as here, and a warning when it is not that one.

    A repository's default should not stop a run on a machine that lacks the key its agent needs:
    the default agent runs instead, and says so. (An agent asked for on the command line is the
    operator's own choice and refuses instead: `jobs.agent.make_agent`.)"""
    needs = kind(name).needs_env
    if needs and not environ.get(needs):
        return DEFAULT, f"config asks for agent: {name} but {needs} is not set; using {DEFAULT}"
    return name, ""
