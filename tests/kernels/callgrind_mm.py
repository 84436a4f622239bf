"""A callgrind output file (one process) as per-function, per-line and per-instruction costs, and the
instructions of a hot function named by mnemonic. Pure; used by `llama_ab.py --only profile-mm`
(the MUL_MAT profile of kernels/README.md) and tested by tests/kernels/test_ab_script.py.

The format itself (compressed names and positions, inlined files, the inclusive cost after
`calls=`) is read by the product's one reader, `jobs.research.cgformat`."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobs.research import cgformat


@dataclass
class Profile:
    events: list[str]
    positions: list[str]
    self_fn: dict[str, list[int]] = field(default_factory=dict)
    self_line: dict[tuple[str, str, int], list[int]] = field(default_factory=dict)
    self_instr: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    calls: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    summary: list[int] = field(default_factory=list)

    def ev(self, counts: list[int], name: str) -> int:
        i = self.events.index(name)
        return counts[i] if i < len(counts) else 0


def _add(table: dict, key, costs: list[int], n: int) -> None:
    row = table.setdefault(key, [0] * n)
    for i, c in enumerate(costs):
        row[i] += c


def parse(text: str) -> Profile:
    """Self costs per function, per (function, file, line) and per (function, instruction), and the
    cost of each call edge, from the product's reader of the format (`jobs.research.cgformat`)."""
    prof = Profile(events=cgformat.header(text, "events"), positions=cgformat.header(text, "positions") or ["line"])
    n = len(prof.events)
    for cost in cgformat.costs(text):
        values = [cost.costs.get(e, 0) for e in prof.events]
        if cost.callee is not None:
            if cost.callee != cost.fn:
                _add(prof.calls, (cost.fn, cost.callee), values, n)
            continue
        _add(prof.self_fn, cost.fn, values, n)
        _add(prof.self_line, (cost.fn, cost.file, cost.positions.get("line", 0)), values, n)
        if "instr" in cost.positions:
            _add(prof.self_instr, (cost.fn, cost.positions["instr"]), values, n)
    prof.summary = [int(c) for c in cgformat.header(text, "summary", "totals")]
    return prof


def inclusive(prof: Profile, fn: str) -> list[int]:
    """The function's own cost plus every call it makes (recursion excluded)."""
    total = list(prof.self_fn.get(fn, [0] * len(prof.events)))
    total += [0] * (len(prof.events) - len(total))
    for (caller, _), costs in prof.calls.items():
        if caller == fn:
            for i, c in enumerate(costs):
                total[i] += c
    return total


def reachable(prof: Profile, roots: list[str]) -> set[str]:
    """Every function called, directly or not, from `roots` (the roots included)."""
    seen, todo = set(roots), list(roots)
    while todo:
        f = todo.pop()
        for caller, callee in prof.calls:
            if caller == f and callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def exclusive_to(prof: Profile, roots: list[str]) -> set[str]:
    """The roots and every function called only (directly or not) from them: the functions whose
    own costs all belong to the roots' work. A callee shared with other callers (memset, malloc)
    stays out; its part is the cost of the call edges from inside (`calls`)."""
    callers: dict[str, set[str]] = {}
    for caller, callee in prof.calls:
        callers.setdefault(callee, set()).add(caller)
    own = set(roots)
    grew = True
    while grew:
        grew = False
        for callee, who in callers.items():
            if callee not in own and who <= own:
                own.add(callee)
                grew = True
    return own


def find_functions(prof: Profile, pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return sorted({f for f in prof.self_fn if rx.search(f)} | {c for _, c in prof.calls if rx.search(c)})


_OBJDUMP = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*([a-z][a-z0-9.]*)")


def disassembly(objdump_text: str) -> dict[int, str]:
    """`objdump -d --no-show-raw-insn`-free output (raw bytes shown) -> {address: mnemonic}."""
    out = {}
    for line in objdump_text.splitlines():
        m = _OBJDUMP.match(line)
        if m:
            out[int(m.group(1), 16)] = m.group(2)
    return out


# Where Valgrind may have mapped a PIE executable (0: not PIE): the disassembly's addresses plus one of these.
PIE_BASES = (0, 0x108000, 0x400000, 0x555555554000)


def load_offset(addresses: list[int], mnemonics: dict[int, str], candidates: tuple[int, ...] = PIE_BASES) -> int:
    """Valgrind maps a PIE executable at a fixed base: the offset under which every profiled
    address of the executable is an instruction start in the disassembly."""
    best, score = 0, -1
    for off in candidates:
        hits = sum(1 for a in addresses if a - off in mnemonics)
        if hits > score:
            best, score = off, hits
    if addresses and score < len(addresses):
        raise ValueError(f"{len(addresses) - score} of {len(addresses)} profiled addresses are no instruction start")
    return best


def by_mnemonic(prof: Profile, fn: str, mnemonics: dict[int, str], event: str = "Ir") -> dict[str, int]:
    """A function's own cost per instruction mnemonic (needs a --dump-instr=yes profile)."""
    rows = {a: c for (f, a), c in prof.self_instr.items() if f == fn}
    off = load_offset(list(rows), mnemonics)
    out: dict[str, int] = {}
    for a, costs in rows.items():
        m = mnemonics[a - off]
        out[m] = out.get(m, 0) + prof.ev(costs, event)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def by_line(prof: Profile, fn: str, event: str = "Ir") -> list[tuple[str, int, int]]:
    """A function's own cost per source line (file, line, count), largest first."""
    rows = [(fl, ln, prof.ev(c, event)) for (f, fl, ln), c in prof.self_line.items() if f == fn]
    return sorted(rows, key=lambda r: -r[2])
