"""Issue 44 in pr.md's summary: a kept change the stack leaves off the branch is named with why, and a run
whose every keep is kept off does not claim that nothing beat the floor."""
from __future__ import annotations

from jobs.contract import portability
from jobs.report.report import render_pr
from summaries import run_summary

WHY = portability.flag_problem("-march=x86-64-v3")


def summary_section(md: str) -> str:
    return md.split("## Summary")[1].split("\n## ")[0]


def test_a_run_whose_only_keep_is_kept_off_says_so_and_why():
    kept = dict(name="build-march", hypothesis="build-march", platform="local", status="keep",
                reason="simulated cycles -2.40%", metrics=[],
                runner={"simulated": {"base_cycles": 100, "head_cycles": 97, "delta_pct": -2.4, "floor_pct": 0.5}})
    md = render_pr(run_summary(experiments=[kept], simulate={"local": {"base_cycles": 100}},
                               stack_kept_off={"build-march": WHY}, branch_left=False,
                               branch_note="everything kept is kept off the branch: build-march"))
    top = summary_section(md)
    assert "1 optimization was kept alone (build-march), and each is kept off the branch (why: below)." in top, top
    assert ("- **build-march** was kept alone but is kept off the branch: -march=x86-64-v3 makes a binary that does "
            "not run on x86-64 CPUs without AVX2; the runtime-dispatch form (target_clones) is the shippable way.") in top
    assert "No optimization changed the simulated cycles" not in md


def test_nothing_kept_off_adds_nothing():
    md = render_pr(run_summary())
    assert "kept off the branch" not in md
