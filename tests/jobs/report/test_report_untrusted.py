"""N11 in pr.md (jobs.report.report.render_pr): the config name, platform names, experiment names, kinds,
reasons (refused paths among them), flags and the Reproduce commands come from the repository;
none of them becomes a live mention, reference, link, image, HTML or a fence breakout."""
from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from jobs.report.report import render_pr
from mdattacks import ATTACKS, live
from test_report import metric, summary

MD = MarkdownIt("commonmark").enable("table")


@pytest.mark.parametrize("evil", ATTACKS)
def test_pr_md_keeps_repository_strings_inert(evil):
    name = f"{evil}-x"
    s = summary(target=evil, platforms=[evil], platform=evil, cpus={evil: evil}, primary="tg",
                calibration={}, stack_applied=[name], stack_dropped=[name], stack_unattributed=[name],
                experiments=[dict(name=name, hypothesis=name, platform=evil, status="keep", hypothesis_kind=evil,
                                  reason=f"touches {evil} outside editable", metrics=[metric("tg", 12.3, 0.0004)],
                                  flags=[evil], runner={"pairs": 3, "stopped": evil}),
                             dict(name=name, hypothesis=name, platform=evil, status="discard", hypothesis_kind="micro",
                                  reason=f"refused path {evil}", metrics=[])],
                stacks={evil: dict(status="discard", reason=evil, commit="b" * 40, cpu=evil, metrics=[])},
                reproduce=[f"autoresearch run {evil}", "```", "@octocat"],
                warnings=[f"the config's sandbox.env asks for {evil}, which the operator does not allow"])
    md = render_pr(s)
    assert "## Notes from the run" in md
    assert live(md) == [], (evil, md)
    fences = [t for t in MD.parse(md) if t.type == "fence"]
    assert len(fences) == 1 and "@octocat" in fences[0].content          # the commands stay inside their block
