"""Pure: the op profile of the base commit as state.json and summary.json hold it, typed: `OpProfile`
(the command profiled, the CPU, and one `WorkloadTime` per workload: where its graph-evaluation time
went, per op). `jobs.research.profile.Profile.to_dict()` writes it, the research phase saves it in
`RunState.profile`, the summary carries it, and pr.md renders it (`jobs.report.report.profile_section`)
so a reader can set each kept change against its Amdahl bound.

Their JSON form is the objects earlier versions wrote (`jobs.contract.jsonform`): a loaded object
writes back its keys in their order, unknown keys kept in `extra`; a key not there takes the default
its reader always took.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.contract.jsonform import Json, JsonRecord


@dataclass(frozen=True)
class WorkloadTime(JsonRecord):
    """One workload (a metric such as pp512, or `tokens=N`) of the profiled process."""
    name: str = ""
    tokens: int = 0
    graphs: int = 0                          # graphs evaluated (warm-up ones left out)
    skipped: int = 0                         # warm-up graphs left out
    total_ms: float = 0.0
    threads: int = 0
    by_op: dict[str, float] = field(default_factory=dict)            # op -> share of total_ms, largest first
    fused_per_graph: dict[str, float] = field(default_factory=dict)  # the tree's own fused kernels, per graph
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class OpProfile(JsonRecord):
    """Where the base commit's time went, per workload and op (research's op profile)."""
    command: str = ""
    cpu: str = ""
    notes: list[str] = field(default_factory=list)
    workloads: list[WorkloadTime] = field(default_factory=list)
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "workloads", [w if isinstance(w, WorkloadTime) else WorkloadTime.from_json(w)
                                               for w in self.workloads or []])


def op_profile(value: OpProfile | Any) -> OpProfile | None:
    """A stored profile typed: None stays None (none was measured), a JSON object is read."""
    return value if value is None or isinstance(value, OpProfile) else OpProfile.from_json(value)


def op_profile_json(value: OpProfile | None) -> Json | None:
    return None if value is None else value.to_json()
