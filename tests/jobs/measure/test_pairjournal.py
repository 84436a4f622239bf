"""An interrupted experiment resumes from the pairs it had measured (issue 27): the runner keeps
each complete pair in a journal as it is measured; the same experiment started again continues
from them, and a journal of any other experiment is ignored."""
from __future__ import annotations

import json

import pytest

from conftest import git
from jobs.guard import gitops
from jobs.measure import pairjournal
from jobs.contract.config import load_config
from jobs.measure.runner import run_experiment
from jobs.contract.spec import ExperimentSpec, Invocation
from synthetic import synthetic_target


def inv(arm: str, pair: int) -> Invocation:
    return Invocation(arm=arm, pair=pair, position=0, seed=pair, metrics={"score": 100.0 + pair})


def test_only_whole_pairs_in_order_count():
    got = pairjournal.complete_pairs([inv("A", -1), inv("A", 0), inv("B", 0), inv("B", 1), inv("A", 1),
                                      inv("A", 2), inv("A", 3), inv("B", 3)])
    assert [(i.arm, i.pair) for i in got] == [("A", 0), ("B", 0), ("B", 1), ("A", 1)]   # 2 is half: 3 waits


class Stop(Exception):
    pass


def test_a_stopped_experiment_resumes_from_its_measured_pairs(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    (repo / "src" / "speed.txt").write_text("120\n")
    git(repo, "commit", "-qam", "faster")
    base_c, head_c = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    spec = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="local",
                                      base_commit=base_c, head_commit=head_c, n_per_arm=6, seed=7)
    base = gitops.add_worktree(repo, tmp_path / "w" / "base", base_c)
    head = gitops.add_worktree(repo, tmp_path / "w" / "head", head_c)
    journal = tmp_path / "out" / "pairs" / "e.json"

    def stop_at_pair_4(message: str, fraction: float) -> None:
        if message == "pair 4/6":
            raise Stop()
    with pytest.raises(Stop):
        run_experiment(spec, base, head, progress=stop_at_pair_4, journal=journal)
    kept = json.loads(journal.read_text())["invocations"]
    assert sorted({i["pair"] for i in kept}) == [0, 1, 2] and len(kept) == 6

    said = []
    result = run_experiment(spec, base, head, progress=lambda m, f: said.append(m), journal=journal)
    assert result.status == "ok" and len(result.pairs()) == 6
    assert "resumed 3 measured pairs of an interrupted attempt" in said
    assert "pair 1/6" not in said and "pair 4/6" in said            # nothing measured twice
    first_three = [(i["arm"], i["pair"], i["metrics"]["score"]) for i in kept]
    assert [(i.arm, i.pair, i.metrics["score"]) for i in result.measured()[:6]] == first_three

    # Another experiment (here: another head commit) never takes these pairs.
    other = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="local",
                                       base_commit=base_c, head_commit=base_c, n_per_arm=2, seed=7)
    assert pairjournal.load(journal, other) == []
    journal.write_text("{torn")
    assert pairjournal.load(journal, spec) == []
