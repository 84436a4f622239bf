"""Issue 43: with an agent whose edits cost nothing, the pipeline makes the next hypothesis's commit
before measuring the current one and announces it to the executor (`Executor.build_ahead`), which
builds it beside the current experiment. A next hypothesis that cannot be made costs the current
one nothing: it is measured, and the other is skipped in its own turn with its own reason. Real git,
real builds in the sandbox (the synthetic target)."""
from __future__ import annotations

from pathlib import Path

import pytest

from synthetic import FASTER, patch_for, synthetic_target

pytestmark = [pytest.mark.measures,
              pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap (make test installs it)")]


def test_a_next_hypothesis_that_cannot_be_made_costs_the_current_one_nothing(tmp_path):
    from jobs.run.pipeline import Run, RunOptions
    target = synthetic_target(tmp_path / "target")
    p = tmp_path / "patches"
    p.mkdir()
    faster = patch_for(target, p / "1-faster.patch", {"src/speed.txt": FASTER})
    same = patch_for(target, p / "3-same.patch", {"src/speed.txt": "100\n\n"})
    # Written against a file content the base does not have: it cannot be applied.
    stale = p / "2-stale.patch"
    stale.write_text(faster.read_text().replace("-100", "-999"))
    out = tmp_path / "out"
    summary = Run(RunOptions(target=target, out=out, run_id="a1", agent="none",
                             candidates=[faster, stale, same])).execute()
    by = {e.name: e for e in summary.experiments}
    assert by["1-faster"].status not in ("skipped", "error") and by["1-faster"].runner.pairs > 0, by["1-faster"].reason
    assert by["2-stale"].status == "skipped" and "does not apply" in by["2-stale"].reason, by["2-stale"].reason
    assert by["3-same"].status not in ("skipped", "error"), by["3-same"].reason
