"""callgrind's output format, read into one record per cost line. Pure.

One reader for every summary of a callgrind file: the research profile's hot spots
(`jobs/research/callgrind.py`) and the per-instruction MUL_MAT profile of the slow llama.cpp
script (`tests/kernels/callgrind_mm.py`). It follows the format's rules
(https://valgrind.org/docs/manual/cl-format.html):

- names may be compressed: `fn=(12) name` defines id 12, a later `fn=(12)` reuses it; `fl`, `fi`,
  `fe`, `cfi`/`cfl` share one table of file names, `fn`, `cfn`, `jfn` one of function names;
- positions (`positions: instr line`, default `line`) may be relative to the previous cost line:
  `+3`, `-1`, `*` (same); instruction addresses are hexadecimal;
- `fi=`/`fe=` switch the source file of the following cost lines (inlined code) until the next
  `fn=` or `fl=`;
- the cost line after `calls=` is the inclusive cost of that call (`Cost.callee` names the
  callee, `Cost.calls` how many calls it sums), not the caller's own cost;
- files can be concatenated (one per process): each `version:` or `events:` header starts a new
  name table and new positions.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_NAMED = re.compile(r"^\((\d+)\)\s*(.*)$")


@dataclass(frozen=True)
class Cost:
    fn: str
    file: str                       # the inlined file (fi/fe) where one is set, else the function's (fl)
    positions: dict[str, int]       # e.g. {"line": 42} or {"instr": 0x401a2c, "line": 42}
    costs: dict[str, int]           # by event name; events a line omits are 0
    callee: str | None = None       # set for the inclusive cost of a call from `fn`
    calls: int = 0                  # with `callee`: how many calls that cost line sums


def _position(token: str, previous: int) -> int:
    if token == "*":
        return previous
    if token[0] in "+-":
        return previous + int(token, 0)
    return int(token, 0)


def costs(text: str) -> Iterator[Cost]:
    """Every cost line of a callgrind file (or of several concatenated), in order. Lines that are
    not cost lines of a known shape are skipped, as callgrind_annotate skips them."""
    names: dict[tuple[str, str], str] = {}
    events: list[str] = []
    positions = ["line"]
    last = [0]
    fn = fl = fi = callee = ""
    in_call, count = False, 0

    def name(table: str, raw: str) -> str:
        m = _NAMED.match(raw.strip())
        if not m:
            return raw.strip()
        if m.group(2):
            names[(table, m.group(1))] = m.group(2)
        return names.get((table, m.group(1)), f"({m.group(1)})")

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            parts = line.split()
            try:
                pos = [_position(parts[j], last[j]) for j in range(len(positions))]
                values = [int(v) for v in parts[len(positions):]]
            except (ValueError, IndexError):
                continue
            last = pos
            cost = Cost(fn, fi or fl, dict(zip(positions, pos)), dict(zip(events, values)),
                        callee if in_call else None, count if in_call else 0)
            in_call = False
            yield cost
            continue
        key, _, value = line.partition("=")
        if line.startswith(("version:", "events:")):
            if line.startswith("events:"):
                events = line.split(":", 1)[1].split()
            else:
                positions = ["line"]             # a new file: its own header says otherwise
            names.clear()
            last = [0] * len(positions)
            fn = fl = fi = ""
        elif line.startswith("positions:"):
            positions = line.split(":", 1)[1].split()
            last = [0] * len(positions)
        elif key == "fn":
            fn, fi = name("fn", value), ""
        elif key == "fl":
            fl, fi = name("fl", value), ""
        elif key in ("fi", "fe"):
            fi = name("fl", value)
        elif key in ("cfi", "cfl"):
            name("fl", value)
        elif key in ("ob", "cob"):
            name("ob", value)
        elif key == "cfn":
            callee = name("fn", value)
        elif key == "jfn":
            name("fn", value)
        elif key == "calls":
            in_call = True
            try:                        # `calls=<count> <target position>`
                count = int(value.split()[0])
            except (ValueError, IndexError):
                count = 0


def header(text: str, *keys: str) -> list[str]:
    """The words of the last `key: ...` line for any of `keys` (e.g. "events", or "summary" and
    "totals" for the whole run's costs); [] when there is none."""
    found: list[str] = []
    for raw in text.splitlines():
        key, sep, rest = raw.strip().partition(":")
        if sep and key in keys:
            found = rest.split()
    return found
