"""Issue 44: hypotheses ranked by the measured cost of the code they would change (jobs/research/
callgrind.py `rank`, applied by offline.merge_sources once the callgrind profile exists). A scan finding
in code the benchmark never runs is "not on the measured path", not ranked; a 60% hot function's
lead outranks build options and cold fusions; without a profile the old order stands."""
from __future__ import annotations

import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from jobs.contract.config import parse_config
from jobs.contract.model import Evidence, Hypothesis
from jobs.report.report import render_research
from jobs.research.callgrind import CallProfile, Spot, parse
from jobs.research.callgrind import BUILD_FRACTION, HOT_SHARE, LOCAL_FRACTION, rank
from jobs.research.offline import Research, merge_sources
from jobs.research.passes import Finding, Pass

TOTAL = 1_000_000


def _profile(coverage: bool = True) -> CallProfile:
    """match_finder (lib.c 10-40) 60% of the cycles, encode (lib.c 50-80) 30%, tiny (lib.c 90-95) 4%,
    main 6%; dump_stats (lib.c 100-140) never runs."""
    return CallProfile(
        total_cycles=TOTAL,
        functions=[Spot("match_finder", "match_finder", 600_000, 0.6, 0.2, "lib.c:10"),
                   Spot("encode", "encode", 300_000, 0.3, 0.1, "lib.c:50"),
                   Spot("main", "main", 60_000, 0.06, 0.0, "bench.c:3"),
                   Spot("tiny", "tiny", 40_000, 0.04, 0.0, "lib.c:90")],
        coverage={"lib.c": [[12, 300_000], [20, 300_000], [52, 100_000], [60, 10_000], [62, 10_000],
                            [70, 180_000], [91, 40_000]],
                  "bench.c": [[3, 60_000 + 940_000]]} if coverage else {},
        extents=[["match_finder", "lib.c", 11, 40, 600_000], ["encode", "lib.c", 51, 80, 300_000],
                 ["tiny", "lib.c", 90, 95, 40_000], ["main", "bench.c", 2, 9, 60_000]] if coverage else [])


def _finding(function: str, start: int, end: int, passes: int) -> Finding:
    return Finding("lib.c", function, start, end, "tmp_depth",
                   [Pass(start + 2 * i, start + 2 * i + 1, {"tmp_depth"}, set(), "for (...)") for i in range(passes)])


def _fusion(f: Finding) -> Hypothesis:
    from jobs.research.offline import finding_hypothesis
    return finding_hypothesis(f)


def _lead(fn: str, share: float) -> Hypothesis:
    return Hypothesis(id=f"hot-{fn}", title=f"Speed up {fn}()", kind="micro", rationale="hot",
                      evidence=[Evidence("profile:simulated", "...")], score=min(3.0, 10 * share), measured_share=share)


def _build(key: str) -> Hypothesis:
    return Hypothesis(id=f"build-{key}", title=key, kind="build", rationale="flag",
                      evidence=[Evidence("Makefile:2", "CFLAGS")], score=2.0, patch=f"/p/build-{key}.patch",
                      measured_share=1.0)


COLD = _finding("dump_stats", 110, 124, 7)      # 7 passes over tmp_depth where nothing runs
WARM = _finding("encode", 60, 63, 3)            # 3 passes in encode, lines costing 2%


def _spans(*findings: Finding):
    return ({f.where: (f.file, f.start, f.end) for f in findings}, {f.where: len(f.passes) for f in findings})


def test_a_finding_in_unexecuted_code_is_not_on_the_measured_path_and_not_ranked():
    spans, passes = _spans(COLD, WARM)
    ranked, off = rank([_fusion(COLD), _fusion(WARM), _lead("match_finder", 0.6)], _profile(), spans, passes)
    assert [h.id for h in ranked] == ["hot-match_finder", "fuse-encode-60"]
    [(h, why)] = off
    assert h.id == "fuse-dump_stats-110" and h.measured_share == 0.0
    assert "`lib.c:110`" in why and "ran 0 of the 1,000,000 simulated cycles" in why


def test_a_60pct_hot_lead_outranks_build_options_and_a_cold_fusion_and_the_order_is_share_times_fraction():
    spans, passes = _spans(COLD, WARM)
    hyps = [_build("o3"), _build("lto"), _fusion(WARM), _lead("encode", 0.3), _lead("match_finder", 0.6)]
    ranked, off = rank(hyps, _profile(), spans, passes)
    assert off == []
    assert [h.id for h in ranked] == ["hot-match_finder", "hot-encode", "build-lto", "build-o3", "fuse-encode-60"]
    by = {h.id: h for h in ranked}
    assert by["hot-match_finder"].score == pytest.approx(100 * 0.6 * LOCAL_FRACTION)          # 15.0
    assert by["build-o3"].score == pytest.approx(100 * 1.0 * BUILD_FRACTION)                  # 4.0
    # the fusion's share is its own lines' (60-63: 2%), not its function's 30%; 3 passes -> 2/3 removable
    assert by["fuse-encode-60"].measured_share == pytest.approx(0.02)
    assert by["fuse-encode-60"].score == pytest.approx(100 * 0.02 * 2 / 3, abs=1e-3)
    # and a fusion that removes most passes of a hot loop goes ahead of a lead on a larger function
    big = _finding("match_finder", 12, 20, 4)                     # lines 12 and 20: 60% of the cycles
    spans, passes = _spans(big)
    ranked, _ = rank([_lead("match_finder", 0.6), _fusion(big)], _profile(), spans, passes)
    assert [h.id for h in ranked] == ["fuse-match_finder-12", "hot-match_finder"]
    assert ranked[0].score == pytest.approx(100 * 0.6 * 3 / 4, abs=1e-3)


def test_build_options_never_crowd_out_code_holding_5pct_or_more():
    # encode's lead at 30% x 0.25 = 7.5 and a 6% function's (1.5) both beat a build option's 4.0 by tier,
    # a 4% function (1.0) does not
    hyps = [_build("o3"), _lead("main", 0.06), _lead("tiny", 0.04), _build("lto"), _lead("encode", 0.3)]
    ranked, _ = rank(hyps, _profile(), {}, {})
    assert [h.id for h in ranked][:2] == ["hot-encode", "hot-main"]
    assert [h.id for h in ranked][2:] == ["build-lto", "build-o3", "hot-tiny"]
    assert all(h.measured_share >= HOT_SHARE for h in ranked[:2])


def test_a_site_in_a_hot_function_takes_its_self_share_and_a_located_nowhere_hypothesis_ranks_last():
    recipe = Hypothesis(id="r", title="recipe", kind="micro", rationale="", score=9.0,
                        evidence=[Evidence("lib.c:30", "probe")])
    paper = Hypothesis(id="paper", title="paper", kind="micro", rationale="", score=50.0,
                       evidence=[Evidence("https://arxiv.org/abs/1", "paper")])
    ranked, off = rank([paper, recipe, _build("o3")], _profile(), {}, {})
    assert [h.id for h in ranked] == ["r", "build-o3", "paper"]
    assert ranked[0].measured_share == pytest.approx(0.6) and paper.measured_share is None and paper.score == 50.0


def test_a_profile_without_line_coverage_calls_nothing_unexecuted():
    spans, passes = _spans(COLD)
    ranked, off = rank([_fusion(COLD), _lead("match_finder", 0.6)], _profile(coverage=False), spans, passes)
    assert off == [] and [h.id for h in ranked] == ["hot-match_finder", "fuse-dump_stats-110"]
    assert ranked[1].measured_share is None


def _config(limit: int = 3):
    return parse_config("name: t\nbuild: make\nbenchmark: ./bench\nchecks: 'true'\n"
                        "metrics: [{name: s, direction: higher, primary: true}]\n"
                        f"editable: ['*.c', Makefile]\nresearch: {{max_hypotheses: {limit}}}\n")


def test_merge_sources_without_a_profile_keeps_the_old_order_and_with_one_gives_the_slots_to_measured_cost():
    def found():
        hyps = [_fusion(COLD), _build("o3"), _build("lto"), _build("unroll"), _lead("match_finder", 0.6),
                _lead("encode", 0.3)]
        for h in hyps:      # as research_c makes them without a profile
            h.measured_share = None
        return Research(hyps, [COLD, WARM], [], {}, [])
    old = merge_sources(found(), None, _config(3))
    # today's rule: patches first (the build options, score 2.0), then leads; the cold fusion (3.25) among them
    assert [h.id for h in old.hypotheses] == ["build-lto", "build-o3", "build-unroll"] and old.off_path == []
    measured = found()
    measured.hypotheses[-2].measured_share, measured.hypotheses[-1].measured_share = 0.6, 0.3
    new = merge_sources(measured, None, _config(3), _profile())
    # the cold fusion is set apart; WARM, cut by the scan's own limit (not in the list), comes back but ranks
    # below the build options at 2%; the top 3 each touch code holding >= 5% of the profile when it exists
    assert [h.id for h, _ in new.off_path] == ["fuse-dump_stats-110"]
    assert [h.id for h in new.hypotheses] == ["hot-match_finder", "hot-encode", "build-lto"]
    assert all(h.measured_share >= HOT_SHARE for h in new.hypotheses[:3])
    text = render_research("t", "a" * 40, new.hypotheses, [], [], "offline", off_path=new.off_path)
    ranked_part, _, rest = text.partition("## Not on the measured path")
    assert "dump_stats" not in ranked_part
    assert "- `fuse-dump_stats-110` Fuse 7 passes over" in rest and "ran 0 of the 1,000,000 simulated cycles" in rest
    assert "ranked by measured cost" in ranked_part and "Measured: 60.0% of the simulated cycles" in ranked_part
    assert "ranked by measured cost" not in render_research("t", "a" * 40, old.hypotheses, [], [], "offline")


def test_offline_a_lead_is_listed_where_it_ranks_but_takes_no_slot():
    """The offline agent cannot write a lead's code: on xxHash four leads took four of eight slots and
    build options were never measured. Without `leads_take_slots` every slot goes to a patch."""
    def found():
        hyps = [_build("o3"), _build("lto"), _build("unroll"), _lead("match_finder", 0.6), _lead("encode", 0.3)]
        for h in hyps:
            h.measured_share = None
        hyps[-2].measured_share, hyps[-1].measured_share = 0.6, 0.3
        return Research(hyps, [], [], {}, [])
    model = merge_sources(found(), None, _config(3), _profile())
    assert [h.id for h in model.hypotheses] == ["hot-match_finder", "hot-encode", "build-lto"]
    offline = merge_sources(found(), None, _config(3), _profile(), leads_take_slots=False)
    assert [h.id for h in offline.hypotheses] == ["hot-match_finder", "hot-encode", "build-lto", "build-o3",
                                                  "build-unroll"]


def test_a_second_setting_of_a_change_takes_a_slot_only_after_every_distinct_change_has_one():
    """On xxHash the 8 x unroll of three hot loops (each beside its 4 x unroll) took three of eight
    slots from -O3 and -funroll-loops, the two largest wins measured there."""
    def unroll(fn: str, share: float, factor: int) -> Hypothesis:
        h = _lead(fn, share)
        h.id, h.patch = f"unroll{'' if factor == 4 else factor}-{fn}", f"/p/unroll{factor}-{fn}.patch"
        h.variant_of = None if factor == 4 else f"unroll-{fn}"
        return h

    def found():
        return Research([unroll("match_finder", 0.6, 4), unroll("match_finder", 0.6, 8), unroll("encode", 0.3, 4),
                         unroll("encode", 0.3, 8), _build("o3"), _build("unroll")], [], [], {}, [])
    offline = merge_sources(found(), None, _config(4), _profile(), leads_take_slots=False)
    assert [h.id for h in offline.hypotheses] == ["unroll-match_finder", "unroll-encode", "build-o3", "build-unroll"]
    roomy = merge_sources(found(), None, _config(5), _profile(), leads_take_slots=False)
    assert [h.id for h in roomy.hypotheses] == ["unroll-match_finder", "unroll8-match_finder", "unroll-encode",
                                                "build-o3", "build-unroll"]       # a spare slot: the variant, in rank
    model = merge_sources(found(), None, _config(4), _profile())
    assert "unroll8-match_finder" not in [h.id for h in model.hypotheses]
    assert Hypothesis.from_dict(offline.hypotheses[0].to_dict()).variant_of is None
    assert Hypothesis.from_dict(roomy.hypotheses[1].to_dict()).variant_of == "unroll-match_finder"


def test_a_saved_hypothesis_without_the_field_still_loads():
    d = _lead("x", 0.2).to_dict()
    del d["measured_share"]
    assert Hypothesis.from_dict(d).measured_share is None
    assert Hypothesis.from_dict(_lead("x", 0.2).to_dict()).measured_share == 0.2


def test_parse_keeps_every_executed_line_with_its_calls_and_each_functions_extent():
    text = "\n".join(["version: 1", "events: Ir", "fl=/r/lib.c", "fn=hot", "10 100", "11 50",
                      "cfn=leaf", "calls=1 30", "11 400", "fn=leaf", "30 400", "fn=main", "5 7",
                      "fl=/usr/include/x.h", "fn=sys", "3 9"])
    prof = parse(text, root="/r")
    assert prof.coverage == {"lib.c": [[5, 7], [10, 100], [11, 450], [30, 400]]}   # 11: its own 50 + the call's 400
    assert sorted(prof.extents) == [["hot", "lib.c", 10, 11, 150], ["leaf", "lib.c", 30, 30, 400],
                                    ["main", "lib.c", 5, 5, 7]]
    assert CallProfile.from_dict(prof.to_dict()) == prof
    assert CallProfile.from_dict({"total_cycles": 5}).coverage == {}      # a profile kept before: no coverage


LIB = r"""#include <stdlib.h>
#include "lib.h"

unsigned match_finder(const unsigned char *buf, int n) {
    unsigned best = 0;
    for (int i = 0; i + 4 < n; i++) {
        unsigned len = 0;
        while (i + len < (unsigned)n && len < 64 && buf[i + len] == buf[(i + len + 7) % n]) len++;
        if (len > best) best = len;
    }
    return best;
}

int dump_stats(int *tmp_depth, int n) {
    for (int i = 0; i < n; i++) tmp_depth[i] = i * 3;
    for (int i = 0; i < n; i++) tmp_depth[i] += 1;
    for (int i = 0; i < n; i++) tmp_depth[i] *= 2;
    for (int i = 0; i < n; i++) tmp_depth[i] -= 5;
    return tmp_depth[n - 1];
}
"""
BENCH = r"""#include <stdio.h>
#include <stdlib.h>
#include "lib.h"

int main(int argc, char **argv) {
    static unsigned char buf[20000];
    for (int i = 0; i < 20000; i++) buf[i] = (unsigned char)(i * 7 % 13);
    unsigned best = 0;
    for (int r = 0; r < 3; r++) best += match_finder(buf, 20000);
    if (argc > 5) { int t[8]; printf("%d\n", dump_stats(t, 8)); }
    printf("score: %u\n", best);
    return 0;
}
"""


@pytest.mark.measures
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None, reason="needs valgrind and cc")
def test_a_real_library_profiled_under_callgrind_ranks_its_hot_function_first(tmp_path):
    from jobs.research.clib import research_c
    from jobs.research.offline import research
    tree = tmp_path / "lib"
    tree.mkdir()
    (tree / "lib.h").write_text("unsigned match_finder(const unsigned char *, int);\nint dump_stats(int *, int);\n")
    (tree / "lib.c").write_text(LIB)
    (tree / "bench.c").write_text(BENCH)
    (tree / "Makefile").write_text("CC ?= cc\nCFLAGS ?= -O2\nbench: lib.c bench.c\n\t$(CC) $(CFLAGS) -o bench lib.c bench.c\n")
    config = parse_config("name: t\nbuild: make -B bench\nbenchmark: ./bench\nchecks: 'true'\n"
                          "metrics: [{name: score, direction: higher, primary: true}]\n"
                          "editable: ['*.c', '*.h', Makefile]\nresearch: {max_hypotheses: 3}\n"
                          "simulate: {command: ./bench, profile_flags: '-O1 -g'}\n")

    def run(command, cwd, timeout, extra_env=None, step=""):
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env={**os.environ, **(extra_env or {})},
                              capture_output=True, text=True, timeout=timeout)
        return SimpleNamespace(returncode=done.returncode, output=done.stdout + done.stderr)

    found = research(tree, config)
    assert [f.function for f in found.findings] == ["dump_stats"], found.findings   # the scan sees only the cold code
    extra, notes, prof = research_c(tree, config, tmp_path / "patches", run)
    assert prof is not None, notes
    hot = next(s for s in prof.functions if s.function == "match_finder")
    assert hot.share > 0.5, prof.functions
    from jobs.agent.transforms.check import transform_hypotheses     # as the research phase adds them
    changed, _ = transform_hypotheses(tree, prof, list(config.editable), tmp_path / "patches", run, config.build,
                                      config.timeouts.build)
    found.hypotheses += extra + changed
    merged = merge_sources(found, None, config, prof)
    ids = [h.id for h in merged.hypotheses]
    assert "hot-match_finder" in ids and len(ids) == 3, ids
    assert [h.id for h, _ in merged.off_path] == ["fuse-dump_stats-15"], merged.off_path
    assert all(not i.startswith("fuse-dump_stats") for i in ids)
    # the three slots go to code holding >= 5% of the profile (match_finder > 50%, the bench's main), none to a
    # build option
    assert merged.hypotheses[0].measured_share > 0.5
    assert all(h.kind != "build" and h.measured_share >= HOT_SHARE for h in merged.hypotheses), \
        [(h.id, h.kind, h.measured_share) for h in merged.hypotheses]
    assert any(h.kind == "build" for h in extra)          # there were build options to crowd the slots


def test_a_file_the_profile_has_no_line_data_for_is_not_called_unexecuted():
    """A target whose Makefile sets CFLAGS itself is profiled without -g: its functions show as
    `???:0` while libc's lines are there. Its hypotheses are unmeasured (old order), never set apart."""
    recipe = Hypothesis(id="fuse-softmax", title="fuse", kind="fusion", rationale="", score=3.0, recipe="fuse-softmax",
                        evidence=[Evidence("src/ops.c:43", "probe")])
    ranked, off = rank([recipe], _profile(), {}, {})
    assert off == [] and [h.id for h in ranked] == ["fuse-softmax"] and ranked[0].measured_share is None
