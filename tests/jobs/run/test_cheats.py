"""The three benchmark cheats of issue #10 against the real demo target, through the whole loop:
each passes checks.sh, none is kept; an honest fusion measured beside them still is.

The demo's benchmark is sized for a test: 336 prompt tokens and 24 generated ones (positions
336..359, past the 330 the checks look at, which is what the skip-layers cheat exploits) instead
of 512 + 448, 4 A/A calibration pairs, and at most 20 pairs per experiment (the fewest at which this
run's sequential test can keep a change is about 9). 20 rather than 12 gives the runner's clock a claim
to test more often: at 12, under two CPU hogs, the fork-work cheat's own score was once undecided
(+31.7%, interval -26.5%...+106.1%), so it was discarded before the clock was asked."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from cheats import cache_in_tmp, fork_work, skip_layers
from conftest import git
from jobs.cli import demo_target
from jobs.run.pipeline import Run, RunOptions
from jobs.research.recipes import load_recipe_set, planned_edits
from synthetic import patch_for

pytestmark = [pytest.mark.measures, pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap (make test installs it)")]


def caught_by_the_runners_clock(experiment: dict) -> bool:
    """Never kept, and the runner's own clock is why whenever the score made a claim for it to test:
    `invalid` once its pairs exclude the claim, `discard` while they cannot yet (a noisy host at the
    pair cap, seen here even quiet once in 60 pairs of the minicomp target). On a noisy host the
    score may claim nothing the floor lets through (seen: "+65.9% is real ... but does not clear the
    23.3% floor" after a noisy calibration; "no detectable difference" at 12 pairs under two hogs):
    then the cheat is discarded before the clock is asked, and only "never kept" can be asserted. A
    quiet host's run gets the claim, so a clock that stopped looking still fails this test there."""
    status, reason = experiment.status, experiment.reason
    if status == "invalid":
        return "clock does not see" in reason
    if status != "discard":
        return False
    no_claim = "does not clear the" in reason or "no detectable difference" in reason
    return "runner's own clock neither confirms nor excludes" in reason or no_claim


def small_demo(dest: Path) -> Path:
    repo = demo_target(dest)
    bench, cfg = repo / "bench.sh", repo / ".github" / "autoresearch.yml"
    bench.write_text(bench.read_text().replace("bench -p 512 -n 448", "bench -p 336 -n 24"))
    # 24 generated tokens are 9-28 ms of CPU: under CI's load one A/A baseline's tg_tps spread 3.19x
    # (the other arm 1.69x) while the whole process's time, mostly the prompt, did not follow, and the
    # spread alarm stopped calibration at the default 3x. A short timed part is what max_spread is for
    # (examples/clibs/xxhash sets 6 for the same reason); the checks and the DIGEST vouch for the numbers.
    # These tests hold the wall clock's own integrity checks (the runner's clocks, digests), so the
    # demo's simulated yardstick is switched off: with it, the fork-work cheat is already `invalid`
    # by its process count under cachegrind, before the clock is asked (tests/jobs/measure).
    text = re.sub(r"\nsimulate:\n(?:  .*\n)+", "\nsimulate: false\n", cfg.read_text())
    cfg.write_text(text.replace("  calibration: 10\n", "  calibration: 4\n") + "thresholds: {max_spread: 8.0}\n")
    assert "simulate: false" in cfg.read_text()
    assert "bench -p 336 -n 24" in bench.read_text() and "calibration: 4" in cfg.read_text()
    assert "thresholds" not in cfg.read_text().split("thresholds: {max_spread: 8.0}")[0]
    git(repo, "commit", "-qam", "benchmark sized for a test")
    return repo


def test_cheats_that_pass_the_checks_are_never_kept_and_an_honest_fusion_is(tmp_path):
    repo = small_demo(tmp_path / "tinyllm")
    model = (repo / "src" / "model.c").read_text()
    patches = tmp_path / "patches"
    patches.mkdir()
    fuse = next(r for r in load_recipe_set("tinyllm") if r.id == "fuse-softmax")
    candidates = [
        patch_for(repo, patches / "fuse-softmax.patch", planned_edits(fuse, repo)),
        patch_for(repo, patches / "skip-layers.patch", {"src/model.c": skip_layers(model)}),
        patch_for(repo, patches / "cache-in-tmp.patch", {"src/model.c": cache_in_tmp(model)}),
        patch_for(repo, patches / "fork-work.patch", {"src/model.c": fork_work(model)}),
    ]
    summary = Run(RunOptions(target=repo, out=tmp_path / "out", run_id="cheats", agent="none",
                             candidates=candidates, repeats=20)).execute()
    status = {e.name: e for e in summary.experiments}

    # Work skipped where the checks do not look: the tokens it generates differ from the baseline's.
    assert status["skip-layers"].status == "invalid", status["skip-layers"].reason
    assert "DIGEST tokens" in status["skip-layers"].reason
    # Work moved into child processes the benchmark's CPU clock does not charge.
    assert caught_by_the_runners_clock(status["fork-work"]), status["fork-work"].reason
    # State cached in /tmp, $HOME or the tree: every process starts from nothing, so nothing is gained.
    cache = status["cache-in-tmp"]
    assert cache.status == "discard", cache.reason
    tg = next(m for m in cache.metrics if m.name == "tg_tps")
    assert tg.delta_pct < 5.0
    assert not (Path.home() / ".tinyllm-cache").exists()

    # The honest fusion passes the same integrity checks (whether it is kept depends on this
    # machine's noise today, which a test must not assert); nothing else can reach the branch.
    assert status["fuse-softmax"].status in ("keep", "discard"), status["fuse-softmax"].reason
    log = git(repo, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}").splitlines() \
        if summary.branch_left else []       # no branch is left when nothing is kept
    assert log in ([], ["fuse-softmax: maintainer candidate"])
    pr = (tmp_path / "out" / "pr.md").read_text()
    assert "numbers not trusted (integrity check)" in pr


def test_the_real_library_cheat_is_refused_and_hidden_in_the_library_it_is_invalid(tmp_path):
    """Issue 21, as a maintainer tried it on a compression library whose own bench/bench.c is built
    by its Makefile: printing 1.5x the MB/s is an edit of the yardstick (refused); the same 1.5x
    hidden in the library's clock, which the benchmark links, is caught by the runner's clock."""
    from minicomp import BENCH, CLOCK, RLE, minicomp, one_pass, scaled_print, slow_clock
    repo = minicomp(tmp_path / "minicomp", calibration=12, extra="simulate: false\n")   # the wall clock's own check
    patches = tmp_path / "patches"
    patches.mkdir()
    candidates = [
        patch_for(repo, patches / "scaled-print.patch", {"bench/bench.c": scaled_print(BENCH)}),
        patch_for(repo, patches / "slow-clock.patch", {"lib/clock.c": slow_clock(CLOCK)}),
        patch_for(repo, patches / "one-pass.patch", {"lib/rle.c": one_pass(RLE)}),
    ]
    summary = Run(RunOptions(target=repo, out=tmp_path / "out", run_id="lib", agent="none",
                             candidates=candidates)).execute()
    status = {e.name: e for e in summary.experiments}
    scaled = status["scaled-print"]
    assert scaled.status == "skipped" and "part of the yardstick (bench/**" in scaled.reason, scaled.reason
    hidden = status["slow-clock"]
    assert caught_by_the_runners_clock(hidden), hidden.reason
    honest = status["one-pass"]
    assert honest.status in ("keep", "discard"), honest.reason
    log = git(repo, "log", "--format=%s", f"{summary.base_commit}..{summary.branch}").splitlines()
    assert log in ([], ["one-pass: maintainer candidate"])
