"""Read a callgrind output file (one process) into per-function, per-line and per-instruction costs,
and name the instructions of a hot function by mnemonic. Pure; used by `llama_ab.py --only profile-mm`
(the MUL_MAT profile of kernels/README.md) and tested by tests/kernels/test_ab_script.py.

callgrind's format compresses names (`fn=(12) name`, later `fn=(12)`) and positions (`+3`, `-1`,
`*` relative to the previous cost line); a cost line after `calls=` is the inclusive cost of that
call, not the caller's own. callgrind_annotate reads it the same way (it too skips the target
position of `calls=`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAMED = re.compile(r"^\((\d+)\)\s*(.*)$")


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
    names: dict[tuple[str, str], str] = {}

    def name(kind: str, raw: str) -> str:
        m = _NAMED.match(raw.strip())
        if not m:
            return raw.strip()
        key = (kind, m.group(1))
        if m.group(2):
            names[key] = m.group(2)
        return names.get(key, f"({m.group(1)})")

    prof = Profile(events=[], positions=["line"])
    fn = file = ""
    callee = ""
    in_call = False
    last = [0, 0]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head = line[0]
        if head.isdigit() or head in "+-*" or line.startswith("0x"):
            parts = line.split()
            npos = len(prof.positions)
            pos = []
            for j in range(npos):
                tok = parts[j]
                base = last[j]
                if tok == "*":
                    v = base
                elif tok[0] in "+-":
                    v = base + int(tok, 0)
                else:
                    v = int(tok, 0)
                pos.append(v)
            last[:npos] = pos
            costs = [int(c) for c in parts[npos:]]
            n = len(prof.events)
            if in_call:
                if callee != fn:
                    _add(prof.calls, (fn, callee), costs, n)
                in_call = False
                continue
            _add(prof.self_fn, fn, costs, n)
            line_no = pos[prof.positions.index("line")] if "line" in prof.positions else 0
            _add(prof.self_line, (fn, file, line_no), costs, n)
            if "instr" in prof.positions:
                _add(prof.self_instr, (fn, pos[prof.positions.index("instr")]), costs, n)
            continue
        key, _, value = line.partition("=")
        if key == "fn":
            fn = name("fn", value)
        elif key in ("fl", "fi", "fe"):
            file = name("fl", value)
        elif key in ("cfi", "cfl", "jfi"):
            name("fl", value)
        elif key in ("ob", "cob"):
            name("ob", value)
        elif key == "cfn":
            callee = name("fn", value)
        elif key == "jfn":
            name("fn", value)
        elif key == "calls":
            in_call = True
        elif line.startswith("events:"):
            prof.events = line.split(":", 1)[1].split()
        elif line.startswith("positions:"):
            prof.positions = line.split(":", 1)[1].split()
        elif line.startswith("summary:") or line.startswith("totals:"):
            prof.summary = [int(c) for c in line.split(":", 1)[1].split()]
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


def load_offset(addresses: list[int], mnemonics: dict[int, str],
                candidates: tuple[int, ...] = (0, 0x108000, 0x400000, 0x555555554000)) -> int:
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
