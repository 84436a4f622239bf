"""The executors this project knows, by name: the one place a new executor is added.

The CLI's `--executor` choices and help, the bot's `AUTORESEARCH_EXECUTOR` check, the Action's
`auto` choice and credentials step, the plan's pricing, `--dry-run` and `make_executors` all read
`EXECUTORS` (its entries' fields, such as `is_cloud`, not their names). An entry's `load` imports
its module only when that executor is used, so an executor whose extra is not installed (SkyPilot
without `autoresearch[cloud]`) is still a valid name with a clear error when chosen.

A factory has the signature `(repo, workdir, config, run_id) -> list[Executor]`: one executor per
platform the run measures on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Factory = Callable[..., list[Any]]


@dataclass(frozen=True)
class ExecutorKind:
    name: str
    summary: str                        # what it is, for --help and error messages
    load: Callable[[], Factory]         # imports its module; ImportError means its extra is missing
    extra: str = ""                     # the pip extra it needs, named when `load` fails
    # Reads the operator's cloud credentials from ~/.aws: the Action writes them from its
    # environment before the environment is scrubbed, and its `auto` picks this kind when they exist.
    uses_cloud_credentials: bool = False
    # Rents machines by instance type: its plan names each platform's instance type and prices it
    # with the catalog, and `--dry-run` previews its tasks. False: it runs on this machine, for free.
    is_cloud: bool = False


def _local() -> Factory:
    from .local import make_local_executors
    return make_local_executors


def _skypilot() -> Factory:
    from .skypilot import make_skypilot_executors
    return make_skypilot_executors


EXECUTORS: dict[str, ExecutorKind] = {kind.name: kind for kind in (
    ExecutorKind("local", "git worktrees on this machine, one experiment at a time", _local),
    ExecutorKind("skypilot", "one cloud VM per experiment and platform", _skypilot, extra="cloud",
                 uses_cloud_credentials=True, is_cloud=True),
)}

DEFAULT = "local"


def executor_names() -> list[str]:
    return list(EXECUTORS)


def executor_kind(name: str) -> ExecutorKind:
    """The registered kind called `name`; a ValueError naming the choices otherwise."""
    try:
        return EXECUTORS[name]
    except KeyError:
        raise ValueError(f"unknown executor {name!r} (choose {' or '.join(EXECUTORS)})") from None


def describe_executors() -> str:
    """One line for --help: every executor with its summary, the default first."""
    return "; ".join(f"{k.name} ({k.summary}{', default' if k.name == DEFAULT else ''}"
                     f"{'; needs the ' + k.extra + ' extra' if k.extra else ''})" for k in EXECUTORS.values())
