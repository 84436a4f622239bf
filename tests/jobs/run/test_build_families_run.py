"""Issue 44 end to end, on a tiny real C target whose simulated workload (`simulate:`) makes every
verdict deterministic: build options that edit the same Makefile line are measured alone, then
together; the stack carries the family's best only, and a kept `-march=x86-64-v3` build stays off
the branch, with pr.md saying why.

The flags are `-DSKIP1`/`-DSKIP2` (each skips redundant passes of the benchmark, with the same
output) beside the real `-march`: unlike `-O3` or `-funroll-loops`, their effect on the simulated
cycles is known in advance, and they edit the Makefile's flags line exactly as build options do."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.run.pipeline import Run, RunOptions
from synthetic import patch_for

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

AVX2 = "avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False

CONFIG = """\
name: flags
build: make -s
benchmark: ./bench
checks: ./bench small
metrics:
  - {name: ms, direction: lower, primary: true, clock: cpu}
editable: ["Makefile"]
timeouts: {build: 60, benchmark: 20, checks: 60}
repeats: {min: 3, max: 12, warmup: 1, calibration: 6}
budget: {max_experiments: 4}
simulate: {command: ./bench small}
"""

MAKEFILE = "CFLAGS = -O1 -Wall\nall: bench\nbench: bench.c\n\t$(CC) $(CFLAGS) -o $@ bench.c\n"

# Four passes over the input, three of them redundant (their results only reach a volatile sink):
# -DSKIP1 leaves out one, -DSKIP2 two, both together three.
BENCH = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static unsigned long long pass(const unsigned char *in, size_t n, unsigned long long h) {
    for (size_t i = 0; i < n; i++) h = (h ^ in[i]) * 1099511628211ULL;
    return h;
}
int main(int argc, char **argv) {
    size_t n = argc > 1 ? (1u << 15) : (1u << 21);
    double t0 = now();
    unsigned long long x = 1;
    unsigned char *in = malloc(n);
    for (size_t i = 0; i < n; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; in[i] = (unsigned char)(x >> 56); }
    volatile unsigned long long sink;
    unsigned long long h = pass(in, n, 1469598103934665603ULL);
#ifndef SKIP1
    sink = pass(in, n, h + 1);
#endif
#ifndef SKIP2
    sink = pass(in, n, h + 2);
    sink = pass(in, n, h + 3);
#endif
    (void)sink;
    printf("METRIC ms=%.4f\n", 1000 * (now() - t0));
    printf("DIGEST h=%016llx\n", h);
    free(in);
    return 0;
}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not AVX2:
        pytest.skip("the -march=x86-64-v3 candidate needs a CPU with AVX2 to run its benchmark")
    tmp = tmp_path_factory.mktemp("families")
    target = make_repo(tmp / "target", {".github/autoresearch.yml": CONFIG, "Makefile": MAKEFILE, "bench.c": BENCH,
                                        ".gitignore": "bench\n"})
    patches = tmp / "patches"
    patches.mkdir()

    def flags(name: str, added: str) -> Path:
        return patch_for(target, patches / f"{name}.patch", {"Makefile": MAKEFILE.replace("-Wall", f"-Wall {added}")})

    candidates = [flags("skip1", "-DSKIP1"), flags("skip2", "-DSKIP2"), flags("march", "-march=x86-64-v3 -DSKIP1")]
    out = tmp / "out"
    summary = Run(RunOptions(target=target, out=out, run_id="fam", agent="none", candidates=candidates,
                             profile="off")).execute()
    return target, out, summary


def test_two_kept_options_of_one_line_are_measured_together_and_only_the_best_stacks(run):
    target, out, summary = run
    status = {e.hypothesis: e.status for e in summary.experiments}
    both = "combined-skip1+skip2"
    # each kept alone; their combination measured as one more experiment, through the same verdicts
    assert status == {"skip1": "keep", "skip2": "keep", "march": "keep", both: "keep"}, summary.experiments
    combined = next(e for e in summary.experiments if e.hypothesis == both)
    assert combined.slot == 4 and combined.hypothesis_kind == "build"
    # the branch holds one build-option commit: the combination's, which edits the line with both flags
    assert summary.stack_applied == [both] and summary.stack_dropped == [], summary
    assert summary.stack_confirmed and summary.branch_left
    assert git(target, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}").splitlines() == \
        [f"{both}: Build with -DSKIP1 -DSKIP2 together (Makefile:1)"]
    assert git(target, "show", f"{summary.branch}:Makefile").splitlines()[0] == "CFLAGS = -O1 -Wall -DSKIP1 -DSKIP2"
    md = (out / "pr.md").read_text()
    for name in ("skip1", "skip2"):
        assert f"- **{name}** was kept alone but is kept off the branch: superseded by {both} (same line)." in md, md


def test_a_kept_march_build_stays_off_the_branch_and_pr_md_says_why(run):
    target, out, summary = run
    assert next(e for e in summary.experiments if e.hypothesis == "march").status == "keep"
    assert "march" not in summary.stack_applied
    assert "march" not in git(target, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}")
    assert "-march" not in git(target, "show", f"{summary.branch}:Makefile")
    # not in the combination either: it is not portable
    assert summary.stack_kept_off["march"].startswith("-march=x86-64-v3 makes a binary")
    md = (out / "pr.md").read_text()
    summary_section = md.split("## Summary")[1].split("\n## ")[0]
    assert ("- **march** was kept alone but is kept off the branch: -march=x86-64-v3 makes a binary that does not "
            "run on x86-64 CPUs without AVX2; the runtime-dispatch form (target_clones) is the shippable way."
            ) in summary_section, summary_section


def test_a_combination_the_budget_refuses_is_said_and_the_best_single_option_stacks(tmp_path):
    target = make_repo(tmp_path / "target", {".github/autoresearch.yml": CONFIG.replace("max_experiments: 4",
                                                                                         "max_experiments: 2"),
                                             "Makefile": MAKEFILE, "bench.c": BENCH, ".gitignore": "bench\n"})
    (tmp_path / "p").mkdir()
    candidates = [patch_for(target, tmp_path / "p" / f"{name}.patch",
                            {"Makefile": MAKEFILE.replace("-Wall", f"-Wall -D{name.upper()}")})
                  for name in ("skip1", "skip2")]
    summary = Run(RunOptions(target=target, out=tmp_path / "out", run_id="fb", agent="none", candidates=candidates,
                             profile="off")).execute()
    both = "combined-skip1+skip2"
    refused = next(e for e in summary.experiments if e.hypothesis == both)
    assert (refused.status, refused.reason) == ("skipped", "budget: max_experiments=2 reached")
    assert summary.stack_applied == ["skip2"], summary        # the best alone: two passes less than skip1's one
    md = (tmp_path / "out" / "pr.md").read_text()
    assert (f"- **skip1** was kept alone but is kept off the branch: superseded by skip2 (same line; their "
            f"combination {both} was not measured: budget: max_experiments=2 reached).") in md, md
