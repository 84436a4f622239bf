"""The real pipeline with SkyPilot executors (x86 + ARM) against the SDK fake on the synthetic
target: results land in per-platform tables of pr.md, every VM is torn down, the budget holds,
and a cancelled run leaves nothing up."""
from __future__ import annotations

import json
import time

import cloud_helpers  # noqa: F401  (before sky is imported)
import pytest
import yaml

from cloud_helpers import options
from conftest import git
from fakes.sky_fake import FakeClock, FakeSky
from jobs.contract.ledger import load_state, read
from jobs.run.pipeline import Run, RunCancelled, RunError, RunOptions
from jobs.executors.skypilot import make_skypilot_executors
from synthetic import FASTER, patch_for, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test


def cloud_target(tmp_path, **overrides):
    repo = synthetic_target(tmp_path / "target")
    path = repo / ".github" / "autoresearch.yml"
    data = yaml.safe_load(path.read_text())
    data.update({"platforms": ["x86", {"name": "arm", "instance_type": "c7g.2xlarge", "cloud": "aws"}],
                 "budget": {"usd": 5, "max_vms": 2, "max_experiments": 10, "wall_hours": 1}})
    data.update(overrides)
    path.write_text(yaml.safe_dump(data))
    git(repo, "commit", "-qam", "cloud platforms")
    return repo


def start(repo, tmp_path, fake, candidates, should_stop=None, clock=None, **kw):
    out = tmp_path / "out"
    from jobs.contract.config import load_config
    config = load_config(repo)
    executors = make_skypilot_executors(repo, out / "work", config, "c1", sdk=fake,
                                        clock=clock or time.monotonic, options=options(tmp_path, **kw))
    run = Run(RunOptions(target=repo, out=out, run_id="c1", agent="none", candidates=candidates,
                         executor="skypilot"), executors=executors, should_stop=should_stop)
    return run, out, executors


def test_x86_and_arm_results_land_in_their_own_tables(tmp_path):
    repo = cloud_target(tmp_path)
    fake = FakeSky(tmp_path / "fake")
    patches = tmp_path / "patches"
    patches.mkdir()
    faster = patch_for(repo, patches / "faster.patch", {"src/speed.txt": FASTER})
    same = patch_for(repo, patches / "same.patch", {"src/code.c": "int main(void) { return 0; } /* x */\n"})
    run, out, executors = start(repo, tmp_path, fake, [faster, same])
    summary = run.execute()

    assert fake.up() == []                                      # every VM torn down
    assert sorted(summary.stacks) == ["arm", "x86"]
    by = {(e.name, e.platform): e for e in summary.experiments}
    assert by[("faster", "x86")].status == by[("faster", "arm")].status == "keep"
    assert by[("same", "x86")].status == "discard"
    pr = (out / "pr.md").read_text()
    x86, arm = pr.index("## A/B on x86"), pr.index("## A/B on arm")
    x86_section, arm_section = pr[x86:arm], pr[arm:pr.index("\n## ", arm + 1)]
    for section in (x86_section, arm_section):
        assert "| score |" in section and "Not measured" not in section
    # Each platform ran on its own instance type, one fresh VM per measurement.
    launched = fake.called("launch")
    types = {c["cluster_name"]: str(next(iter(c["task"].resources)).instance_type) for c in launched}
    assert {t for n, t in types.items() if "-x86-" in n} == {"c6i.2xlarge"}
    assert {t for n, t in types.items() if "-arm-" in n} == {"c7g.2xlarge"}
    assert len(launched) == 2 * (1 + 2 + 1) and len(set(types)) == len(launched)  # cal + 2 exp + stack
    # Cost: VM time x catalog price, per experiment in the ledger and in total in the state.
    ledger = read(out)
    assert all(r["cost_usd"] > 0 for r in ledger)
    assert load_state(out)["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in ledger), abs=1e-3)
    assert load_state(out)["cost_usd"] <= 5
    assert not list((tmp_path / "leases").glob("*.json"))       # closed runs hold no lease


def test_budget_stops_launching_before_it_would_be_exceeded(tmp_path):
    # One platform, one VM at a time, deterministic VM time: each VM costs 300 s at 0.34 USD/h
    # (~0.028 USD) while a launch reserves its worst case (~0.15 USD: every pair up to the cap).
    # Budget 0.22 USD: the calibration and two experiments fit; the third experiment's estimate
    # would pass the budget, so it is skipped and nothing more is launched (the stack would not
    # fit either).
    repo = cloud_target(tmp_path, platforms=["x86"],
                        budget={"usd": 0.22, "max_vms": 1, "max_experiments": 10, "wall_hours": 1})
    fake = FakeSky(tmp_path / "fake", clock=FakeClock(), job_s=150, job="canned")
    patches = tmp_path / "patches"
    patches.mkdir()
    cands = [patch_for(repo, patches / f"p{i}.patch", {"src/speed.txt": f"{120 + i}\n"}) for i in range(3)]
    run, out, (x86,) = start(repo, tmp_path, fake, cands, clock=fake.clock)
    held = []
    reserve = x86.budget.reserve

    def watched(key, usd):
        why = reserve(key, usd)
        held.append(x86.budget.spent + x86.budget.in_flight())
        return why
    x86.budget.reserve = watched
    summary = run.execute()

    status = {e.name: (e.status, e.reason) for e in summary.experiments}
    assert status["p0"][0] == status["p1"][0] == "keep"
    assert status["p2"][0] == "skipped" and status["p2"][1].startswith("budget:")
    assert summary.stacks["x86"].status == "skipped" and "budget:" in summary.stacks["x86"].reason
    assert len(fake.launched) == 3                              # calibration, p0, p1: nothing more
    assert max(held) <= 0.22                                     # reservations never passed the cap
    assert load_state(out)["cost_usd"] == pytest.approx(3 * 300 / 3600 * 0.34, abs=5e-4)
    assert fake.up() == []


def test_cancel_mid_run_tears_everything_down(tmp_path):
    repo = cloud_target(tmp_path)
    fake = FakeSky(tmp_path / "fake", job="canned")
    patches = tmp_path / "patches"
    patches.mkdir()
    faster = patch_for(repo, patches / "faster.patch", {"src/speed.txt": FASTER})
    flag = {"stop": False}

    def should_stop():
        # Cancel as soon as the first experiment VM (after calibration) is running.
        if any("-faster-" in n for n in fake.launched) and fake.called("tail_logs"):
            flag["stop"] = True
        return flag["stop"]
    run, out, _ = start(repo, tmp_path, fake, [faster], should_stop=should_stop)
    with pytest.raises(RunCancelled):
        run.execute()
    assert flag["stop"] and fake.up() == []
    assert load_state(out)["phase"] == "cancelled"


def test_calibration_that_cannot_get_a_vm_stops_the_run_cleanly(tmp_path):
    repo = cloud_target(tmp_path)
    fake = FakeSky(tmp_path / "fake", clock=FakeClock(), job="canned")
    fake.inject("provision_error", match="-calibration-x86-", times=10)
    patches = tmp_path / "patches"
    patches.mkdir()
    faster = patch_for(repo, patches / "faster.patch", {"src/speed.txt": FASTER})
    run, out, _ = start(repo, tmp_path, fake, [faster], clock=fake.clock, max_vm_retries=1)
    with pytest.raises(RunError, match="no usable c6i.2xlarge VM"):
        run.execute()
    assert fake.up() == [] and len(fake.launched) == 2
    # The two failed VMs' time (provisioning 120 s + teardown 30 s each) is still paid for.
    assert json.loads((out / "state.json").read_text())["cost_usd"] == pytest.approx(300 / 3600 * 0.34, abs=1e-4)
