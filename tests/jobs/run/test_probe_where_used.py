"""The machine probe (a memory copy the runner times just before each benchmark process) is taken only
where a verdict can use it: in a calibration, which decides whether it is a nuisance, and in an
experiment whose plan adjusts some metric for it. Elsewhere it would only lengthen the pairs, the part
of an experiment that runs alone."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import git
from jobs.contract.config import load_config
from jobs.contract.runstate import RunState
from jobs.contract.spec import ExperimentSpec, SandboxSpec
from jobs.guard import gitops
from jobs.measure.runner import run_experiment
from jobs.run.measuring import Measurer
from jobs.stats.verdict import VerdictPlan
from synthetic import synthetic_target


@pytest.fixture()
def bench(tmp_path) -> Measurer:
    repo = synthetic_target(tmp_path / "t")
    state = RunState.load(tmp_path / "out")
    state.base_commit = git(repo, "rev-parse", "HEAD")
    return Measurer(load_config(repo), "r1", state, SandboxSpec(), lambda event: None, lambda: False, platforms=1)


def plan(adjust: dict[str, tuple[str, ...]]) -> VerdictPlan:
    return VerdictPlan(alpha=0.01, floor_pct=1.0, target_pct=5.0, max_pairs=10, adjust=adjust)


LOCAL = SimpleNamespace(platform="local")


def test_a_calibration_probes_every_process(bench):
    assert bench.spec(LOCAL, "calibration", bench.state.base_commit, 8, "calibration").probe


@pytest.mark.parametrize("adjust, probes", [
    ({}, False),
    ({"score": ("order",)}, False),
    ({"score": ("order", "probe")}, True),
    ({"score": (), "other": ("probe",)}, True),     # a metric besides the primary is judged with it too
])
def test_an_experiment_probes_only_when_its_plan_adjusts_a_metric_for_the_probe(bench, adjust, probes):
    for kind in ("experiment", "attribution", "stack"):
        spec = bench.spec(LOCAL, "e", bench.state.base_commit, 10, kind, plan=plan(adjust))
        assert spec.probe is probes, (kind, adjust)


def test_an_unprobed_experiment_measures_the_same_pairs_without_probes(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    (repo / "src" / "speed.txt").write_text("120\n")
    git(repo, "commit", "-qam", "faster")
    base_c, head_c = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    base = gitops.add_worktree(repo, tmp_path / "w" / "base", base_c)
    head = gitops.add_worktree(repo, tmp_path / "w" / "head", head_c)
    for probe in (True, False):
        spec = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="local",
                                          base_commit=base_c, head_commit=head_c, n_per_arm=3, seed=7, probe=probe)
        result = run_experiment(spec, base, head)
        assert result.status == "ok" and len(result.pairs()) == 3
        measured = [inv for inv in result.invocations if inv.pair >= 0]
        assert all((inv.probe is not None) is probe for inv in measured), [inv.probe for inv in measured]
        assert len(result.base.probe) == (3 if probe else 0)
