"""Pure: a callgrind profile of the base commit as research measures it and state.json keeps it,
typed: `CallProfile` (the total simulated cycles, the hot functions, lines and cache-miss spots as
`Spot`s, the compiler's `Remark`s on hot loops, every executed line's cost, the functions' extents
and the heaviest call edges). `jobs.research.callgrind` measures and ranks with it; the research
phase keeps it in `RunState.callgrind` and in its per-commit cache (`to_dict` / `from_dict`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Spot:
    where: str              # file:line, or function name
    function: str
    cycles: int
    share: float            # of the whole run's simulated cycles
    miss_share: float = 0.0  # of this spot's cycles spent in data-cache misses
    first_line: str = ""    # a function's first costed file:line


@dataclass
class Remark:
    file: str
    line: int
    message: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class CallProfile:
    total_cycles: int
    functions: list[Spot] = field(default_factory=list)
    lines: list[Spot] = field(default_factory=list)
    misses: list[Spot] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)       # vectorisation misses on hot lines
    command: str = ""
    flags: str = ""
    notes: list[str] = field(default_factory=list)
    # Every executed line of the tree, not just the hot ones (what `measured_share` reads): file ->
    # [[line, cycles]], a line's cycles inclusive (its own cost plus that of the calls made from it);
    # and each function's executed extent per file: [function, file, first line, last line, self cycles].
    # Empty in a profile kept before they existed: then nothing is called unexecuted.
    coverage: dict[str, list[list[int]]] = field(default_factory=dict)
    extents: list[list] = field(default_factory=list)
    # The call graph's heaviest edges: [caller, callee, calls, inclusive cycles of those calls], the
    # heaviest first (what the inlining transformation reads: a hot callee called often for little work).
    calls: list[list] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> CallProfile:
        spots = {k: [Spot(**s) for s in data.get(k, [])] for k in ("functions", "lines", "misses")}
        return cls(total_cycles=int(data["total_cycles"]), **spots,
                   remarks=[Remark(**r) for r in data.get("remarks", [])], command=data.get("command", ""),
                   flags=data.get("flags", ""), notes=list(data.get("notes", [])),
                   coverage={str(f): [[int(n), int(c)] for n, c in v] for f, v in (data.get("coverage") or {}).items()},
                   extents=[list(e) for e in data.get("extents") or []],
                   calls=[[str(a), str(b), int(n), int(c)] for a, b, n, c in data.get("calls") or []])
