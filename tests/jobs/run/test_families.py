"""Issue 44, the pure parts: which build flags are not shippable by default (read from a patch's added
lines), build options grouped by the line they edit, their flags combined into one line, and what the
stack leaves off the branch."""
from __future__ import annotations

import subprocess

import pytest

from jobs.contract import portability
from jobs.run import families
from jobs.run.stacking import gains
from jobs.contract.model import ExperimentRecord, MetricResult

MAKEFILE = "CC ?= cc\nCFLAGS ?= -O2 -Wall\nall: x\n"


def patch(old_line: str, new_line: str, path: str = "Makefile", text: str = MAKEFILE) -> str:
    lines = text.splitlines(keepends=True)
    at = lines.index(old_line + "\n") + 1
    return families.combined_patch(path, text, at, new_line)


def flagged(new_line: str, path: str = "Makefile") -> str:
    return portability.problem(patch("CFLAGS ?= -O2 -Wall", new_line, path))


@pytest.mark.parametrize("line", ["CFLAGS ?= -O2 -Wall -march=x86-64-v3", "CFLAGS ?= -O2 -Wall -march=native",
                                  "CFLAGS ?= -O2 -Wall -mavx2", "CFLAGS ?= -O2 -Wall -mavx512f",
                                  "CFLAGS ?= -O2 -Wall -mtune=native", "CFLAGS ?= -Ofast -Wall",
                                  "CFLAGS ?= -O2 -Wall -ffast-math"])
def test_flags_that_tie_the_binary_to_a_cpu_or_change_semantics_are_flagged(line):
    assert flagged(line)


@pytest.mark.parametrize("line", ["CFLAGS ?= -O3 -Wall", "CFLAGS ?= -O2 -Wall -flto",
                                  "CFLAGS ?= -O2 -Wall -funroll-loops", "CFLAGS ?= -O2 -Wall -march=x86-64",
                                  "CFLAGS ?= -O2 -Wall -fno-fast-math"])
def test_portable_flags_are_not(line):
    assert flagged(line) == ""


def test_the_reasons_say_what_breaks_and_what_ships():
    assert flagged("CFLAGS ?= -O2 -Wall -march=x86-64-v3") == (
        "-march=x86-64-v3 makes a binary that does not run on x86-64 CPUs without AVX2; "
        "the runtime-dispatch form (target_clones) is the shippable way")
    assert "build machine's CPU" in flagged("CFLAGS ?= -O2 -Wall -march=native")
    assert "without AVX2" in flagged("CFLAGS ?= -O2 -Wall -mavx2")
    assert "floating-point semantics" in flagged("CFLAGS ?= -O2 -Wall -ffast-math")


def test_only_what_the_patch_adds_counts():
    base = "CC ?= cc\nCFLAGS ?= -O2 -march=native\nall: x\n"
    # the line already had -march=native: raising -O2 to -O3 does not add it
    assert portability.problem(patch("CFLAGS ?= -O2 -march=native", "CFLAGS ?= -O3 -march=native", text=base)) == ""
    # a target attribute in a C source is the runtime-dispatch form, not a global flag
    src = "int f(void) { return 0; }\n"
    clones = patch("int f(void) { return 0; }",
                   '__attribute__((target_clones("avx2","default"))) int f(void) { return 0; }', "src/f.c", src)
    assert portability.problem(clones) == ""
    # a maintainer's CMake patch is read the same way as research's Makefile one
    cmake = 'set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O2")\n'
    assert "-march=native" in portability.problem(
        patch(cmake.rstrip("\n"), 'set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O2 -march=native")', "CMakeLists.txt", cmake))


def test_a_patch_applies_as_git_applies_it(tmp_path):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    text = patch("CFLAGS ?= -O2 -Wall", "CFLAGS ?= -O3 -Wall")
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=text, text=True, check=True)
    assert (tmp_path / "Makefile").read_text() == MAKEFILE.replace("-O2", "-O3")


def test_options_editing_the_same_line_are_one_family():
    o3, lto = patch("CFLAGS ?= -O2 -Wall", "CFLAGS ?= -O3 -Wall"), patch("CFLAGS ?= -O2 -Wall", "CFLAGS ?= -O2 -Wall -flto")
    other = patch("CC ?= cc", "CC ?= clang")
    source = patch("int f;", "int f = 1;", "src/f.c", "int f;\n")
    [fam] = families.families({"o3": o3, "cc": other, "lto": lto, "src": source})
    assert (fam.where, fam.members) == ("Makefile:2", ["o3", "lto"])
    assert families.families({"o3": o3, "cc": other}) == []          # one per line: no family
    two_lines = o3 + patch("CC ?= cc", "CC ?= clang").split("\n", 1)[1]
    assert families.line_edit(two_lines) is None                      # more than one line: not a build option


def test_the_flags_of_one_line_combine():
    old = "CFLAGS ?= -O2 -Wall"
    assert families.combine(old, ["CFLAGS ?= -O3 -Wall", "CFLAGS ?= -O2 -Wall -funroll-loops",
                                  "CFLAGS ?= -O2 -Wall -flto"]) == "CFLAGS ?= -O3 -Wall -funroll-loops -flto"
    cmake = 'set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O2")'
    assert families.combine(cmake, ['set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O3")',
                                    'set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O2 -flto")']) == \
        'set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O3 -flto")'
    assert families.combine(old, ["CFLAGS ?= -O3 -Wall", "CFLAGS ?= -Os -Wall"]) is None   # the same characters


def test_the_stack_keeps_a_familys_best_and_leaves_non_portable_builds_off():
    line = "CFLAGS ?= -O2 -Wall"
    p = {"o3": patch(line, "CFLAGS ?= -O3 -Wall"), "unroll": patch(line, "CFLAGS ?= -O2 -Wall -funroll-loops"),
         "march": patch(line, "CFLAGS ?= -O2 -Wall -march=x86-64-v3")}
    # march is never combined nor stacked; o3 and unroll are combined
    [fam] = families.to_combine(["o3", "unroll", "march"], p)
    assert fam.members == ["o3", "unroll"]
    both = families.combined_id(fam.members)
    p[both] = patch(line, families.combine(fam.old, [fam.edits[m] for m in fam.members]))
    names = ["o3", "unroll", "march", both]
    off = families.kept_off(names, p, {"o3": 4.6, "unroll": 6.5, "march": 9.0, both: 8.0})
    assert off == {"march": portability.flag_problem("-march=x86-64-v3"),
                   "o3": f"superseded by {both} (same line)", "unroll": f"superseded by {both} (same line)"}
    # the combination not better than the best single member: the single member stacks
    off = families.kept_off(names, p, {"o3": 4.6, "unroll": 6.5, both: 6.0})
    assert {n for n in names if n not in off} == {"unroll"} and off[both] == "superseded by unroll (same line)"


def test_gains_read_the_yardstick_first_then_the_primary_metrics_direction():
    def rec(name, status, delta, sim=None):
        m = MetricResult("ms", 1, 0, 1, 0, 3, 3, delta, 0.01, 0, 0, 1, "t", "win")
        return ExperimentRecord("r", name, name, "local", status, "", metrics=[m],
                                runner={"simulated": {"delta_pct": sim}} if sim is not None else {})
    g = gains([rec("a", "keep", -5.0), rec("b", "keep", -9.0, sim=-2.0), rec("c", "discard", -50.0)], "ms", False)
    assert g == {"a": 5.0, "b": 2.0}
