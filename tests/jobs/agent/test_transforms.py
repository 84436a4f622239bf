"""Issue 44: offline, the loop changes the library's hot code, not only its flags. The catalogue of
profile-guided source transformations (jobs/agent/transforms/rewrite.py: pure rewrites) and the check
that each one builds and changes its function's machine code (jobs/agent/transforms/check.py)."""
from __future__ import annotations

import platform
import shutil
import subprocess

import pytest

from jobs.contract.model import Evidence
from jobs.research.callgrind import CallProfile, Remark, Spot
from jobs.agent.transforms.rewrite import (Transform, dispatch, enclosing_loop, find_definition, plan, with_attribute,
                                      with_pragma, with_prefetch)

SRC = """\
#include <stddef.h>
/* sum: adds { things } "quoted" */
static long
sum(const int *a, size_t n)
{
    long s = 0; // a "}" in a comment
    for (size_t i = 0; i < n; i++) {
        s += a[i] * 3;
    }
    return s;
}

void add(float *a, const float *b, int n) {
  for (int i = 0; i < n; i++)
    a[i] += b[i];
}

static inline int sq(int x) { return x * x; }

void scale(float *out, const float *in, int n, float k) {
    int i = 0;
    while (i < n) {
        out[i] = in[i] * k;
        i++;
    }
    for (int j = 0; j < n; j += 4) {
        for (int m = 0; m < 4; m++) {
            out[j + m] = in[j + m] * k;
        }
    }
}
"""


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_a_definition_is_found_with_its_specifiers_and_refused_when_ambiguous():
    d = find_definition(SRC, "sum")
    assert d is not None and d.start_line == 2 and d.specifiers == "static long"
    assert SRC[d.body_open] == "{" and SRC[d.body_close] == "}" and SRC[d.body_close - 1] == "\n"
    assert find_definition(SRC, "missing") is None
    assert find_definition("int f(void);\nint g(void) { return f(); }\n", "f") is None    # declared, not defined
    twice = "#ifdef A\nint f(void) { return 1; }\n#else\nint f(void) { return 2; }\n#endif\n"
    assert find_definition(twice, "f") is None
    assert find_definition("template <typename T>\nT f(T x) { return x; }\n", "f") is None
    assert find_definition("struct S { int f(void) { return 1; } };\n", "f") is None          # not at file scope
    assert find_definition("int f(a) int a; { return a; }\n", "f") is None                   # K&R


def test_dispatch_marks_the_definition_and_refuses_where_it_is_not_legal():
    new = dispatch(SRC, "add", "lib/v.c")
    assert new is not None
    assert '__attribute__((target_clones("avx2","default")))\nvoid add(float *a' in new
    assert new.replace('__attribute__((target_clones("avx2","default")))\n', "") == SRC
    assert dispatch(SRC, "add", "lib/v.h") is None                          # a header
    assert dispatch(SRC, "sq", "lib/v.c") is None                           # inline
    taken = SRC + "void (*fp)(float *, const float *, int) = add;\n"
    assert dispatch(taken, "add", "lib/v.c") is None                        # its address is taken
    compared = SRC + "int same(void *p) { return p == (void *)add; }\n"
    assert dispatch(compared, "add", "lib/v.c") is None
    called = SRC + "void twice(float *a, const float *b) { add(a, b, 4); add(a, b, 4); }\n"
    assert dispatch(called, "add", "lib/v.c") is not None                   # calls are fine
    assert dispatch(new, "add", "lib/v.c") is None                          # already multi-versioned
    # the attribute goes above the specifiers, not between the return type and the name
    assert "/* sum: adds { things } \"quoted\" */\n__attribute__((hot))\nstatic long\nsum(" in with_attribute(
        SRC, "sum", "hot")
    assert with_attribute(SRC, "sq", "flatten") is None and "((hot))\nstatic inline int sq" in with_attribute(
        SRC, "sq", "hot", refuse_inline=False)


def test_the_innermost_loop_around_a_line_gets_the_pragma():
    d = find_definition(SRC, "scale")
    lines = _lines(SRC)
    hot = lines.index("            out[j + m] = in[j + m] * k;")
    assert lines[enclosing_loop(SRC, d, hot).header].strip().startswith("for (int m")
    assert lines[enclosing_loop(SRC, d, hot - 2).header].strip().startswith("for (int j")
    assert lines[enclosing_loop(SRC, d, lines.index("        i++;")).header].strip() == "while (i < n) {"
    assert enclosing_loop(SRC, d, lines.index("    int i = 0;")) is None
    new = with_pragma(SRC, "scale", hot + 1, "GCC unroll 4")
    assert "        #pragma GCC unroll 4\n        for (int m = 0; m < 4; m++) {\n" in new
    assert new.count("#pragma") == 1
    # an unbraced loop body: the pragma still goes before the header
    add = with_pragma(SRC, "add", _lines(SRC).index("    a[i] += b[i];") + 1, "GCC ivdep")
    assert "  #pragma GCC ivdep\n  for (int i = 0; i < n; i++)\n    a[i] += b[i];" in add
    assert with_pragma(new, "scale", hot + 2, "GCC unroll 4") is None       # a pragma is already there
    assert with_pragma(SRC, "scale", lines.index("    int i = 0;") + 1, "GCC unroll 4") is None   # no loop
    assert with_pragma(SRC, "sum", hot + 1, "GCC unroll 4") is None         # a line outside the function
    do_while = "void f(int *a, int n) {\n    int i = 0;\n    do {\n        a[i]++;\n    } while (++i < n);\n}\n"
    assert "    #pragma GCC unroll 4\n    do {\n" in with_pragma(do_while, "f", 4, "GCC unroll 4")   # gcc takes do loops


def test_a_prefetch_goes_into_a_braced_loop_before_the_miss_line():
    lines = _lines(SRC)
    miss = lines.index("        s += a[i] * 3;") + 1
    new = with_prefetch(SRC, "sum", miss, 8)
    assert "    for (size_t i = 0; i < n; i++) {\n        __builtin_prefetch(&a[i + 8], 0);\n        s += a[i] * 3;" in new
    assert "&a[i + 32]" in with_prefetch(SRC, "sum", miss, 32)
    inner = lines.index("            out[j + m] = in[j + m] * k;") + 1
    assert with_prefetch(SRC, "scale", inner, 8) is None                    # indexed by j + m: not read
    assert with_prefetch(SRC, "add", lines.index("    a[i] += b[i];") + 1, 8) is None     # unbraced body
    assert with_prefetch(SRC, "scale", lines.index("        out[i] = in[i] * k;") + 1, 8) is None   # a while loop
    offs = ("void g(float *o, const float *p, int n, int k) {\n    for (int i = 0; i < n; i++) {\n"
            "        o[i] = p[i + k] + 1.0f;\n    }\n}\n")
    out = with_prefetch(offs, "g", 3, 32)
    assert "        __builtin_prefetch(&o[i + 32], 1); __builtin_prefetch(&p[i + k + 32], 0);\n        o[i] = p[i + k]" in out
    member = "void h(struct s *x, int n) {\n    for (int i = 0; i < n; i++) {\n        x->v[i] = 0;\n    }\n}\n"
    assert with_prefetch(member, "h", 3, 8) is None                         # a member array: not a plain one
    cont = "void h(int *a, int n, int c) {\n    for (int i = 0; i < n; i++) {\n        if (c)\n            a[i] = 0;\n    }\n}\n"
    assert with_prefetch(cont, "h", 4, 8) is None                           # the body of a braceless if


def _prof(rel="lib/v.c"):
    lines = _lines(SRC)
    hot_line = lines.index("        s += a[i] * 3;") + 1
    return CallProfile(
        total_cycles=1000,
        functions=[Spot("sum", "sum", 600, 0.6, 0.4, f"{rel}:6"), Spot("add", "add", 300, 0.3, 0.0, f"{rel}:14")],
        lines=[Spot(f"{rel}:{hot_line}", "sum", 500, 0.5), Spot(f"{rel}:15", "add", 250, 0.25)],
        misses=[Spot(f"{rel}:{hot_line}", "sum", 400, 0.9, 1.0)],
        remarks=[Remark(rel, 14, "missed: not vectorized: possible alias involving gather/scatter")])


def test_the_plan_names_each_transformation_with_its_evidence_and_bound():
    prof = _prof()
    out, notes = plan(prof, prof.functions, {"lib/v.c": SRC})
    keys = [t.key for t in out]
    assert keys == ["clones-sum", "clones-add", "unroll-sum", "unroll-add", "ivdep-add", "unroll8-sum",
                    "unroll8-add", "flatten-sum", "prefetch8-sum", "prefetch32-sum"]   # dispatch, pragmas, prefetch first
    assert notes == ["transformations: 1 more not tried (at most 10): hot-attribute"]   # capped at 10, said so
    assert "ivdep-sum" not in keys                                      # no remark names aliasing on sum's loop
    ivdep = next(t for t in out if t.key == "ivdep-add")
    assert ivdep.evidence[1] == Evidence("lib/v.c:14", "compiler: missed: not vectorized: possible alias involving "
                                                       "gather/scatter")
    assert "review the callers" in ivdep.rationale
    h = next(t for t in out if t.key == "clones-add").hypothesis("/p/clones-add.patch")
    assert h.kind == "micro" and h.patch == "/p/clones-add.patch" and "offline research" in h.generated
    assert h.title == "dispatch add() for AVX2 at run time (target_clones) (30.0%)"
    assert h.expected == "at most 30.0% (Amdahl bound from the measured share)" and h.score == 2.85
    assert h.evidence[-1].where == "profile:simulated" and "30.0%" in h.evidence[-1].note
    pf = next(t for t in out if t.key == "prefetch8-sum")
    assert pf.evidence[0].where == prof.misses[0].where and "90% of all miss cycles" in pf.evidence[0].note
    assert "wall clock decide" in pf.rationale
    hot = next(t for t in plan(prof, prof.functions, {"lib/v.c": SRC}, most=11)[0] if t.key == "hot-attribute")
    assert hot.functions == ["sum", "add"] and hot.files["lib/v.c"].count("__attribute__((hot))") == 2
    none, _ = plan(prof, prof.functions, {"lib/v.c": SRC}, x86_64=False)
    assert not [t for t in none if t.what == "dispatch"]
    gone, why = plan(prof, prof.functions, {})
    assert gone == [] and "no definition this parser reads" in why[0]


# -- the check, on real builds ---------------------------------------------------------------------------------------

pytestmark_build = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objdump") is None,
                                      reason="needs gcc and objdump")
needs_x86 = pytest.mark.skipif(platform.machine() != "x86_64", reason="target_clones(\"avx2\") is x86-64 only")

LIB_C = """\
#include <stddef.h>
#include "v.h"

long dot(const int *a, const int *b, size_t n) {
    long s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (long)a[i] * b[i];
    }
    return s;
}

int mix3(const int *a, int k) {
    int s = 0;
    for (int i = 0; i < 3; i++)
        s = s * k + a[i];
    return s;
}
"""
LIB_H = "#include <stddef.h>\nlong dot(const int *a, const int *b, size_t n);\nint mix3(const int *a, int k);\n"
BENCH_C = """\
#include <stdio.h>
#include <stdlib.h>
#include "lib/v.h"
int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
    int *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) { a[i] = (int)(i & 15); b[i] = (int)(i & 7); }
    long s = 0;
    for (int r = 0; r < 8; r++) s += dot(a, b, n);
    for (size_t i = 0; i + 3 < n; i += 2) s += mix3(a + i, (int)i);
    printf("DIGEST s=%lx\\n", (unsigned long)s);
    return 0;
}
"""
MAKEFILE = ("CC ?= cc\nCFLAGS ?= -O2\n\nbench: bench.c lib/libv.a\n\t$(CC) $(CFLAGS) -o bench bench.c lib/libv.a\n\n"
            "lib/libv.a: lib/v.c lib/v.h\n\t$(CC) $(CFLAGS) -c -o lib/v.o lib/v.c\n\tar rcs lib/libv.a lib/v.o\n")
CONFIG = """\
name: vlib
build: make -s
benchmark: ./bench 200000
checks: ./bench 100 >/dev/null
metrics: [{name: s, direction: higher, primary: true}]
editable: ["lib/**"]
timeouts: {build: 60}
simulate: {command: ./bench 400000, timeout: 300}
"""


def _library(tmp_path):
    from conftest import make_repo
    return make_repo(tmp_path / "vlib", {"lib/v.c": LIB_C, "lib/v.h": LIB_H, "bench.c": BENCH_C,
                                         "Makefile": MAKEFILE, ".github/autoresearch.yml": CONFIG})


def _run(c, cwd, timeout, **kw):
    from jobs.measure.runner import run_step
    return run_step(c, cwd, timeout, **kw)


def _transform(key, what, files, functions):
    return Transform(key, what, files, functions, key, "why", [], 0.5)


@pytestmark_build
@needs_x86
def test_the_check_keeps_what_changes_the_code_and_drops_what_does_not(tmp_path):
    from jobs.agent.transforms.check import check
    tree = _library(tmp_path)
    src = LIB_C
    mix_loop = _lines(src).index("        s = s * k + a[i];") + 1
    dot_loop = _lines(src).index("        s += (long)a[i] * b[i];") + 1
    candidates = [
        _transform("unroll-dot", "unroll", {"lib/v.c": with_pragma(src, "dot", dot_loop, "GCC unroll 4")}, ["dot"]),
        _transform("unroll-mix3", "unroll", {"lib/v.c": with_pragma(src, "mix3", mix_loop, "GCC unroll 4")}, ["mix3"]),
        _transform("hot-dot", "hot", {"lib/v.c": with_attribute(src, "dot", "hot")}, ["dot"]),
        _transform("clones-dot", "dispatch", {"lib/v.c": dispatch(src, "dot", "lib/v.c")}, ["dot"]),
        _transform("clones-mix3", "dispatch", {"lib/v.c": dispatch(src, "mix3", "lib/v.c")}, ["mix3"]),
        _transform("broken", "unroll", {"lib/v.c": src.replace("return s;", "return s")}, ["dot"]),
    ]
    kept, notes = check(tree, candidates, _run, "make -s", 60)
    assert [t.key for t in kept] == ["unroll-dot", "clones-dot"], notes
    text = "\n".join(notes)
    # gcc -O2 unrolls a 3-trip loop completely with or without the pragma, and treats dot alike with `hot`
    assert "unroll-mix3 dropped: the machine code of mix3() is the same" in text
    assert "hot-dot dropped: the machine code of dot() is the same" in text
    assert "clones-mix3 dropped: its AVX2 clone is the same code as its default clone" in text
    assert "broken dropped: the patched build failed" in text
    assert not list(tree.rglob("*.o")), "the check builds scratch copies, never the research tree"


@pytestmark_build
def test_a_budget_stops_the_check_and_says_what_was_not_checked(tmp_path):
    from jobs.agent.transforms.check import check
    tree = _library(tmp_path)
    t = _transform("unroll-dot", "unroll", {"lib/v.c": with_pragma(LIB_C, "dot", 7, "GCC unroll 4")}, ["dot"])
    kept, notes = check(tree, [t], _run, "make -s", 60, budget_s=0)
    assert kept == [] and "not checked within the time budget" in notes[-1] and "unroll-dot" in notes[-1]
    kept, notes = check(tree, [t], _run, "false", 60)
    assert kept == [] and "the unpatched build failed" in notes[0]


@pytest.mark.measures
@pytestmark_build
@needs_x86
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_transform_hypotheses_from_a_real_profile_apply_and_build(tmp_path):
    from jobs.contract.config import parse_config
    from jobs.research.callgrind import measure
    from jobs.agent.transforms.check import transform_hypotheses
    tree = _library(tmp_path)
    config = parse_config(CONFIG)
    prof = measure(tree, config, _run)
    assert prof.functions[0].function == "dot" and prof.functions[0].first_line.startswith("lib/v.c:"), prof.functions
    hyps, notes = transform_hypotheses(tree, prof, list(config.editable), tmp_path / "patches", _run, config.build,
                                       config.timeouts.build)
    ids = [h.id for h in hyps]
    assert ids == ["clones-dot", "unroll-dot", "unroll8-dot", "prefetch8-dot", "prefetch32-dot"], (ids, notes)
    dropped = sorted(n.split()[1] for n in notes if " dropped: " in n)
    # gcc -O2 already unrolls mix3's 3-trip loop and gains nothing from AVX2 there; `hot` and `flatten`
    # leave this code as it was
    assert dropped == ["clones-mix3", "flatten-dot", "hot-attribute", "unroll-mix3", "unroll8-mix3"], notes
    assert any("no prefetch at lib/v.c:" in n and "mix3()" in n for n in notes), notes
    dot = next(h for h in hyps if h.id == "clones-dot")
    share = prof.functions[0].share
    assert dot.title == f"dispatch dot() for AVX2 at run time (target_clones) ({100 * share:.1f}%)"
    assert dot.score == round(0.95 * min(3.0, 10 * share), 3) and dot.kind == "micro"
    assert dot.evidence[0].where.startswith("lib/v.c:") and dot.evidence[-1].where == "profile:simulated"
    subprocess.run(["make", "-s"], cwd=tree, check=True)     # the research tree as the profile left it
    for h in hyps:
        work = tmp_path / f"apply-{h.id}"
        subprocess.run(["git", "clone", "-q", str(tree), str(work)], check=True)
        subprocess.run(["git", "-C", str(work), "apply", h.patch], check=True)
        assert subprocess.run(["git", "-C", str(work), "diff", "--quiet"]).returncode == 1
        subprocess.run(["make", "-s"], cwd=work, check=True)
        digest = subprocess.run(["./bench", "1000"], cwd=work, capture_output=True, text=True, check=True).stdout
        assert digest == subprocess.run(["./bench", "1000"], cwd=tree, capture_output=True, text=True,
                                        check=True).stdout
        if h.id == "clones-dot":     # Valgrind (the yardstick) runs AVX2, so the resolver picks that clone there
            from jobs.research.callgrind import parse
            subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=cg.out", "./bench", "20000"],
                           cwd=work, check=True, capture_output=True)
            counted = parse((work / "cg.out").read_text(), root=str(work))
            assert counted.functions[0].function == "dot.avx2", counted.functions[:3]


def test_the_agent_applies_a_transformation_through_its_tool_and_is_refused_where_it_does_not_apply(tmp_path):
    from jobs.agent.tools import Workbench
    from jobs.contract.config import parse_config
    from conftest import make_repo
    tree = make_repo(tmp_path / "t", {"lib/v.c": SRC, "bench.c": "int main(void) { return 0; }\n"})
    config = parse_config("name: t\nbuild: make\nbenchmark: ./b\nchecks: 'true'\n"
                          "metrics: [{name: s, direction: higher, primary: true}]\neditable: ['lib/**']\n")
    bench = Workbench(tree, config, None)
    line = _lines(SRC).index("            out[j + m] = in[j + m] * k;") + 1
    text, error = bench.run("apply_transformation", {"kind": "unroll", "path": "lib/v.c", "function": "scale",
                                                     "line": line})
    assert not error and "applied unroll to scale()" in text and bench.edited == {"lib/v.c"}
    assert (tree / "lib/v.c").read_text() == with_pragma(SRC, "scale", line, "GCC unroll 4")
    text, error = bench.run("apply_transformation", {"kind": "dispatch", "path": "lib/v.c", "function": "sq"})
    assert error and "does not apply to sq()" in text                      # inline
    text, error = bench.run("apply_transformation", {"kind": "prefetch", "path": "lib/v.c", "function": "sum"})
    assert error and "needs `line`" in text
    text, error = bench.run("apply_transformation", {"kind": "hot", "path": "bench.c", "function": "main"})
    assert error and text.startswith("refused:") and "int main" in (tree / "bench.c").read_text()
    text, error = bench.run("apply_transformation", {"kind": "inline", "path": "lib/v.c", "function": "sum"})
    assert not error and "__attribute__((always_inline))\nstatic inline long\nsum(" in (tree / "lib/v.c").read_text()
    text, error = bench.run("apply_transformation", {"kind": "inline", "path": "lib/v.c", "function": "add"})
    assert error and "does not apply to add()" in text                     # external: not static
    text, error = bench.run("apply_transformation", {"kind": "inline-everything", "path": "lib/v.c", "function": "sum"})
    assert error and "invalid input" in text


def test_preprocessor_lines_and_macros_do_not_confuse_the_parser():
    src = ("#define OPEN {\n#define LOOP(n) for (int q = 0; q < n; q++) \\\n    { x++; }\n"
           "int f(int *a, int n) {\n    int s = 0;\n    for (int i = 0; i < n; i++) {\n        s += a[i];\n    }\n"
           "    return s;\n}\n")
    d = find_definition(src, "f")
    assert d is not None and d.start_line == 3
    assert "    #pragma GCC unroll 4\n    for (int i" in with_pragma(src, "f", 7, "GCC unroll 4")
    assert with_pragma(src, "f", 2, "GCC unroll 4") is None              # the loop in a macro is not f's


def test_a_patch_of_a_file_without_a_final_newline_applies(tmp_path):
    from conftest import make_repo
    from jobs.agent.transforms.check import unified_patch
    old = "int f(int *a, int n) {\n    int s = 0;\n    for (int i = 0; i < n; i++) {\n        s += a[i];\n    }\n    return s;\n}"
    tree = make_repo(tmp_path / "t", {"f.c": old})
    new = with_pragma(old, "f", 4, "GCC unroll 4")
    (tmp_path / "p.patch").write_text(unified_patch({"f.c": (old, new)}))
    subprocess.run(["git", "-C", str(tree), "apply", str(tmp_path / "p.patch")], check=True)
    assert (tree / "f.c").read_text() == new and not new.endswith("\n")


INLINED = """\
static inline unsigned hash(unsigned x) {
    return x * 2654435761u;
}

static inline unsigned scan(const unsigned char *p, int n) {
    unsigned h = 0;
    for (int i = 0; i < n; i++) {
        h ^= hash(p[i]);
    }
    return h;
}

unsigned outer(const unsigned char *p, int n) {
    return scan(p, n) + 1;
}
"""


def test_a_hot_line_in_an_inlined_callee_gets_its_pragma_in_the_callee():
    """The profile counts lines where they ran: scan()'s loop, inlined into outer(), is named as
    outer()'s hottest line after hash()'s straight-line code. The pragma goes on scan()'s loop."""
    from jobs.agent.transforms.rewrite import containing_function
    assert containing_function(INLINED, 2) == "hash" and containing_function(INLINED, 8) == "scan"
    assert containing_function(INLINED, 14) == "outer" and containing_function(INLINED, 4) is None
    prof = CallProfile(total_cycles=1000, functions=[Spot("outer", "outer", 900, 0.9, 0.0, "lib.c:13")],
                       lines=[Spot("lib.c:2", "outer", 500, 0.5), Spot("lib.c:8", "outer", 300, 0.3)])
    out, notes = plan(prof, prof.functions, {"lib.c": INLINED})
    unroll = next(t for t in out if t.what == "unroll")
    assert "#pragma GCC unroll 4\n    for (int i = 0; i < n; i++) {" in unroll.files["lib.c"]
    assert unroll.functions == ["outer"] and "lib.c:8" in unroll.title and "in scan(), inlined there" in unroll.rationale


def test_a_do_while_loop_takes_the_pragma_and_a_loop_without_a_condition_does_not():
    from jobs.agent.transforms.rewrite import with_pragma
    src = ("unsigned f(const unsigned *p, const unsigned *end) {\n"
           "    unsigned h = 0;\n"
           "    do {\n"
           "        h += *p++;\n"
           "    } while (p < end);\n"
           "    for (;;) {\n"
           "        if (h > 7) break;\n"
           "        h++;\n"
           "    }\n"
           "    return h;\n"
           "}\n")
    new = with_pragma(src, "f", 4, "GCC unroll 4")
    assert new is not None and "    #pragma GCC unroll 4\n    do {\n" in new
    assert with_pragma(src, "f", 7, "GCC unroll 4") is None      # gcc: "missing loop condition"


# -- inline: the call graph's small, often-called callees ------------------------------------------------------------

CALLS = """\
#include <stddef.h>
#if defined(__GNUC__)
#  define LIB_NO_INLINE static __attribute__((noinline))
#else
#  define LIB_NO_INLINE static
#endif
#define LIB_FORCE static inline __attribute__((always_inline))

static unsigned
tail(unsigned h, const unsigned char *p, size_t n)
{
    while (n--) h = h * 31 + *p++;
    return h;
}

LIB_NO_INLINE unsigned mid(const unsigned char *p, size_t n) { return tail(7, p, n & 15); }

LIB_FORCE unsigned forced(unsigned h) { return h ^ (h >> 7); }

unsigned public_hash(const unsigned char *p, size_t n)
{
    unsigned h = n > 128 ? mid(p, n) : tail(0, p, n & 15);
    return forced(h);
}

static inline unsigned rare(unsigned h) { return h * 3; }
"""


def test_always_inline_forces_a_static_function_and_undoes_the_librarys_noinline_macro():
    from jobs.agent.transforms.rewrite import always_inline
    out = always_inline(CALLS, "tail")
    assert "__attribute__((always_inline))\nstatic inline unsigned\ntail(" in out
    assert out.replace("__attribute__((always_inline))\nstatic inline unsigned\ntail", "static unsigned\ntail") == CALLS
    mid = always_inline(CALLS, "mid")           # every #define of LIB_NO_INLINE is `static` (one with noinline)
    assert "__attribute__((always_inline))\nstatic inline unsigned mid(" in mid
    assert mid.count("LIB_NO_INLINE") == CALLS.count("LIB_NO_INLINE") - 1
    kept = always_inline(CALLS, "rare")          # already `inline`: the attribute alone
    assert "__attribute__((always_inline))\nstatic inline unsigned rare(" in kept
    assert always_inline(CALLS, "forced") is None          # its macro already forces it
    assert always_inline(CALLS, "public_hash") is None     # external: `inline` would drop its out-of-line copy in C
    assert always_inline(CALLS, "missing") is None


def _call_graph(edges, functions):
    return CallProfile(total_cycles=1_000_000, functions=[Spot(f, f, 1, 0.1, 0.0, f"lib/h.c:{n}") for f, n in functions]
                       + [Spot("main", "main", 1, 0.1, 0.0, "bench.c:3")], calls=[list(e) for e in edges])


def test_inline_callees_picks_small_often_called_callees_reached_on_most_calls():
    from jobs.agent.transforms.rewrite import inline_callees
    spots = [("tail", 10), ("mid", 16), ("public_hash", 20), ("rare", 26)]
    prof = _call_graph([("main", "public_hash", 50_000, 600_000),
                        ("public_hash", "tail.part.0", 45_000, 200_000),     # gcc's clone name: the function is tail
                        ("public_hash", "mid", 20_000, 150_000),
                        ("mid", "tail.part.0", 20_000, 80_000),
                        ("public_hash", "rare", 5_000, 40_000),              # reached on 10% of public_hash's calls
                        ("main", "slow", 2_000, 5_000_000)], spots)          # not an editable function
    t, notes = inline_callees(prof, prof.functions, {"lib/h.c": CALLS})
    assert t is not None and t.what == "inline" and t.key == "inline-tail-and-1"
    assert t.files["lib/h.c"].count("__attribute__((always_inline))") == CALLS.count("always_inline") + 2
    assert sorted(t.functions) == ["mid", "public_hash"]            # the callers, whose machine code must change
    assert "tail() is called 65,000 times from public_hash(), mid() for 4 simulated cycles a call" in t.evidence[0].note
    assert "mid()" in t.title and "rare()" not in t.title and round(t.share, 2) == 0.43
    # public_hash is called from the benchmark's main, in another file: nothing to say about it
    assert not any("public_hash()" in n for n in notes)
    static_caller = _call_graph([("tail", "public_hash", 50_000, 600_000)], spots)
    _, notes = inline_callees(static_caller, static_caller.functions, {"lib/h.c": CALLS})
    assert any("public_hash() is called 50,000 times" in n and "not forced inline" in n for n in notes)
    few = _call_graph([("public_hash", "tail", 999, 2_000)], spots)        # too few calls to matter
    assert inline_callees(few, few.functions, {"lib/h.c": CALLS}) == (None, [])
    heavy = _call_graph([("public_hash", "tail", 5_000, 5_000 * 1_001)], spots)   # too much work a call
    assert inline_callees(heavy, heavy.functions, {"lib/h.c": CALLS}) == (None, [])


@pytest.mark.measures
@pytestmark_build
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_inline_transformation_from_a_real_call_graph_builds_and_keeps_the_output(tmp_path):
    from conftest import make_repo
    from jobs.contract.config import parse_config
    from jobs.research.callgrind import measure
    from jobs.agent.transforms.check import transform_hypotheses
    bench = ('#include <stdio.h>\n#include <stdlib.h>\nunsigned public_hash(const unsigned char *p, size_t n);\n'
             'int main(int argc, char **argv) {\n    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 100000;\n'
             '    unsigned char buf[256]; unsigned acc = 0;\n    for (int i = 0; i < 256; i++) buf[i] = (unsigned char)i;\n'
             '    for (size_t k = 0; k < n; k++) acc += public_hash(buf + (k & 63), 1 + (k * 7) % 200);\n'
             '    printf("DIGEST acc=%x\\n", acc);\n    return 0;\n}\n')
    makefile = "CC ?= cc\nCFLAGS ?= -O2\nbench: bench.c lib/h.c\n\t$(CC) $(CFLAGS) -o bench bench.c lib/h.c\n"
    config = CONFIG.replace("vlib", "hlib").replace("./bench 400000", "./bench 20000")
    tree = make_repo(tmp_path / "hlib", {"lib/h.c": CALLS, "bench.c": bench, "Makefile": makefile,
                                         ".github/autoresearch.yml": config})
    cfg = parse_config(config)
    prof = measure(tree, cfg, _run)
    assert any(callee == "mid" for _, callee, _, _ in prof.calls), prof.calls      # its noinline macro kept it a call
    hyps, notes = transform_hypotheses(tree, prof, list(cfg.editable), tmp_path / "patches", _run, cfg.build,
                                       cfg.timeouts.build)
    inline = next((h for h in hyps if h.id.startswith("inline-")), None)
    assert inline is not None, ([h.id for h in hyps], notes)
    work = tmp_path / "apply"
    subprocess.run(["git", "clone", "-q", str(tree), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "apply", inline.patch], check=True)
    subprocess.run(["make", "-s"], cwd=work, check=True)
    subprocess.run(["make", "-s"], cwd=tree, check=True)
    outputs = [subprocess.run(["./bench", "5000"], cwd=d, capture_output=True, text=True, check=True).stdout
               for d in (tree, work)]
    assert outputs[0] == outputs[1] and outputs[0].startswith("DIGEST")
