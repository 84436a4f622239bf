"""jobs/research/cgformat.py: callgrind's format read by the rules of its manual, on text shaped
like valgrind 3.19's output (compressed names and positions, inlined files, calls, two processes)."""
from __future__ import annotations

from jobs.research import cgformat
from jobs.research.callgrind import parse
from jobs.measure.simulate import L1_WEIGHT

ONE = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 11
positions: instr line
events: Ir D1mr
fl=(1) /src/a.c
fn=(1) main
0x401000 10 5 1
+4 +1 3
fi=(2) /src/inline.h
+2 * 7
fn=(2) helper
0x401100 20 2
cfl=(1)
cfn=(1)
calls=1 0x401000 10
+8 21 100 4
* * 1
totals: 118 5
"""

TWO = """# callgrind format
version: 1
pid: 12
events: Ir
fl=(1) /src/b.c
fn=(1) other
3 9
summary: 9
"""


def test_names_positions_inlined_files_and_calls_follow_the_format():
    got = list(cgformat.costs(ONE))
    assert [(c.fn, c.file, c.positions, c.costs, c.callee) for c in got] == [
        ("main", "/src/a.c", {"instr": 0x401000, "line": 10}, {"Ir": 5, "D1mr": 1}, None),
        ("main", "/src/a.c", {"instr": 0x401004, "line": 11}, {"Ir": 3}, None),
        ("main", "/src/inline.h", {"instr": 0x401006, "line": 11}, {"Ir": 7}, None),
        # a new fn= ends the inlined file: back to the function's own
        ("helper", "/src/a.c", {"instr": 0x401100, "line": 20}, {"Ir": 2}, None),
        # the line after calls= is the call's inclusive cost, named by the compressed cfn=(1)
        ("helper", "/src/a.c", {"instr": 0x401108, "line": 21}, {"Ir": 100, "D1mr": 4}, "main"),
        ("helper", "/src/a.c", {"instr": 0x401108, "line": 21}, {"Ir": 1}, None),
    ]
    assert cgformat.header(ONE, "summary", "totals") == ["118", "5"]
    assert [c.calls for c in got] == [0, 0, 0, 0, 1, 0]          # `calls=1 0x401000 10`: one call summed


def test_concatenated_processes_start_new_name_tables_and_positions():
    got = list(cgformat.costs(ONE + TWO))
    last = got[-1]
    # (1) is "other" in /src/b.c in the second file, and its positions are `line` alone again
    assert (last.fn, last.file, last.positions, last.costs) == ("other", "/src/b.c", {"line": 3}, {"Ir": 9})


def test_the_research_summary_counts_self_costs_only():
    prof = parse(ONE + TWO, root="/src")
    by_name = {s.function: s for s in prof.functions}
    assert set(by_name) == {"main", "helper", "other"}
    # main: 5 + 3 + 7 Ir and one D1 miss; helper's 100-Ir call into main is not its own cost
    assert by_name["main"].cycles == 15 + L1_WEIGHT * 1
    # the call graph's edge: helper called main once, for 100 Ir and 4 D1 misses inclusive
    assert prof.calls == [["helper", "main", 1, 100 + L1_WEIGHT * 4]]
    assert by_name["helper"].cycles == 2 + 1 and by_name["other"].cycles == 9
    assert any(s.where == "inline.h:11" for s in prof.lines)
