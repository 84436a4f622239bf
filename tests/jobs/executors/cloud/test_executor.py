"""The SkyPilot executor against the SDK fake: teardown on success, failure, timeout, preemption
and cancel (0 clusters left in the fake's books), retries without double counting, noisy VMs,
budget reservations. Jobs really run: the fake executes the task's run script, i.e. jobs.measure.runner
on the synthetic target."""
from __future__ import annotations

import dataclasses

import cloud_helpers  # noqa: F401  (before sky is imported)
import pytest

from cloud_helpers import config_for, options, spec_for, target  # noqa: F401  (target: a fixture)
from conftest import git
from fakes.sky_fake import FakeClock, FakeSky
from jobs.executors.cloud import tasks
from jobs.executors.cloud.leases import read_leases
from jobs.executors.budget import SharedBudget
from jobs.executors.skypilot import make_skypilot_executors

X86 = 0.34 / 3600     # USD per second
JOB_S = 150.0         # fake job time (within the synthetic target's job limit of ~196 s)
VM_S = 120 + JOB_S + 30   # provisioning + job + teardown on the fake clock


class Cancelled(RuntimeError):
    pass


def executors(tmp_path, repo, fake, clock=None, config=None, **kw):
    config = config or config_for(repo)
    return make_skypilot_executors(repo, tmp_path / "out" / "work", config, "r1", sdk=fake,
                                   clock=clock or fake.clock, options=options(tmp_path, **kw))


def quiet(message, fraction):
    pass


@pytest.fixture()
def fake(tmp_path):
    """Canned jobs (the machine is under test, not the measurement); see `real` for the runner."""
    return FakeSky(tmp_path / "fake", clock=FakeClock(), job_s=JOB_S, job="canned")


@pytest.fixture()
def real(tmp_path):
    """Jobs run jobs.measure.runner for real on the synthetic target."""
    return FakeSky(tmp_path / "fake", clock=FakeClock(), job_s=JOB_S)


def test_success_measures_on_the_vm_and_tears_down(target, tmp_path, real):
    fake = real
    repo, base, head = target
    x86, arm = executors(tmp_path, repo, fake)
    assert (x86.platform, x86.instance_type, arm.platform, arm.instance_type) == \
        ("x86", "c6i.2xlarge", "arm", "c7g.2xlarge")
    assert x86.parallel == arm.parallel == 4
    seen = []
    raw = x86.run(spec_for(x86.config, base, head), lambda m, f: seen.append((m, f)))
    assert raw.status == "ok", raw.log
    assert len(raw.base.values["score"]) == len(raw.head.values["score"]) == 4
    assert 9 < 100 * (sum(raw.head.values["score"]) / sum(raw.base.values["score"]) - 1) < 11
    assert any(m.startswith("pair ") for m, _ in seen) and seen[-1][1] == 1.0 and "measured" in seen[-1][0]
    # One VM: launched with down=True and the autostop safety net, then sky.down in finally.
    (launch,) = fake.called("launch")
    assert launch["down"] is True and launch["idle_minutes_to_autostop"] == 10
    assert launch["cluster_name"].startswith("autoresearch-r1-exp-x86-")
    assert [d["cluster_name"] for d in fake.called("down")] == [launch["cluster_name"]]
    assert fake.up() == []
    # Cost: provisioning 120 s + job 150 s + teardown 30 s at the catalog price.
    assert raw.cost_usd == pytest.approx(VM_S * X86)
    assert "c6i.2xlarge" in raw.log and launch["cluster_name"] in raw.log
    # The VM got the bundle, the driver and the spec, and no setup ran here.
    files = fake.tasks[launch["cluster_name"]]["files"]
    assert {"repo.bundle", "spec.json", "jobs/measure/runner.py"} <= set(files)
    for ex in (x86, arm):
        ex.close()
    assert read_leases(tmp_path / "leases") == []


def test_provisioning_error_is_torn_down_and_retried_on_a_new_vm(target, tmp_path, fake):
    repo, base, head = target
    fake.inject("provision_error")
    x86, arm = executors(tmp_path, repo, fake)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "ok"
    first, second = fake.launched
    assert first != second
    assert [d["cluster_name"] for d in fake.called("down")] == [first, second]   # the failed one too
    assert fake.up() == []
    assert raw.cost_usd == pytest.approx((120 + 30 + VM_S) * X86)
    assert "provision_failed" in raw.log


def test_no_vm_at_all_is_skipped_not_blamed_on_the_patch(target, tmp_path, fake):
    repo, base, head = target
    fake.inject("provision_error", times=10)
    x86, _ = executors(tmp_path, repo, fake, max_vm_retries=2)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "skipped" and "no usable c6i.2xlarge VM after 3 attempts" in raw.reason
    assert len(fake.launched) == 3 and fake.up() == []
    assert raw.cost_usd == pytest.approx(3 * 150 * X86)


def test_preemption_retries_on_a_new_vm_without_double_counting(target, tmp_path, real):
    fake = real
    repo, base, head = target
    fake.inject("preempt", after_lines=4)
    x86, _ = executors(tmp_path, repo, fake)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "ok", raw.log
    assert len(fake.launched) == 2 and fake.up() == []
    # Only the final VM's samples: exactly n per arm, not n plus the preempted VM's partial ones.
    assert len(raw.base.values["score"]) == len(raw.head.values["score"]) == 4
    # Each VM's time is billed once: preempted (120 + 75 + 30) + replacement (120 + 150 + 30).
    assert raw.cost_usd == pytest.approx((120 + JOB_S / 2 + 30 + VM_S) * X86)
    assert "preempted" in raw.log
    # The preempted cluster was STOPPED (not gone): it was downed explicitly.
    assert [d["cluster_name"] for d in fake.called("down")] == fake.launched


def test_job_hanging_past_its_time_limit_is_a_timeout_and_torn_down(target, tmp_path):
    import time
    repo, base, head = target
    fake = FakeSky(tmp_path / "fake")         # real time: the executor's own deadline must fire
    fake.inject("hang")
    config = config_for(repo, timeouts={"build": 0.2, "benchmark": 0.1, "checks": 0.1})
    x86, _ = executors(tmp_path, repo, fake, clock=time.monotonic, config=config, job_slack_s=0.0)
    spec = dataclasses.replace(spec_for(config, base, head, n=1), warmup=0)
    assert tasks.job_seconds(spec, 0.0) == pytest.approx(2 * 0.2 + 0.1 + 2 * 1.1)
    started = time.monotonic()
    raw = x86.run(spec, quiet)
    assert raw.status == "timeout" and "time limit" in raw.reason
    assert time.monotonic() - started < 20
    assert fake.up() == [] and len(fake.called("down")) == 1


def test_job_failing_without_a_result_is_a_crash_and_torn_down(target, tmp_path, fake):
    repo, base, head = target
    fake.inject("job_fail")
    x86, _ = executors(tmp_path, repo, fake)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "crash" and "without a RESULT line" in raw.reason and "100" in raw.reason
    assert fake.up() == [] and len(fake.launched) == 1


def test_target_failures_come_back_as_the_runner_reports_them(target, tmp_path, real):
    fake = real
    repo, base, _ = target
    (repo / "src" / "broken").write_text("x")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken")
    broken = git(repo, "rev-parse", "HEAD")
    x86, _ = executors(tmp_path, repo, fake)
    raw = x86.run(spec_for(x86.config, base, broken), quiet)
    assert raw.status == "build_failed" and raw.reason.startswith("candidate build failed")
    assert fake.up() == [] and len(fake.launched) == 1     # a real failure is not retried


def test_cancel_mid_job_tears_down(target, tmp_path, fake):
    repo, base, head = target
    x86, _ = executors(tmp_path, repo, fake)

    def progress(message, fraction):
        if message.startswith("pair 3"):
            raise Cancelled("run cancelled")
    with pytest.raises(Cancelled):
        x86.run(spec_for(x86.config, base, head), progress)
    assert fake.up() == [] and len(fake.called("down")) == 1
    assert x86.unreported_usd > 0 and x86.budget.reserved == {}


def test_cancel_while_provisioning_cancels_the_request_and_tears_down(target, tmp_path, fake):
    repo, base, head = target
    fake.inject("provision_hang")
    x86, _ = executors(tmp_path, repo, fake)
    calls = []

    def progress(message, fraction):
        calls.append(message)
        if message == "provisioning" and len(calls) > 3:
            raise Cancelled("run cancelled")
    with pytest.raises(Cancelled):
        x86.run(spec_for(x86.config, base, head), progress)
    assert fake.called("api_cancel") and fake.up() == []


def test_provisioning_past_its_limit_is_abandoned_and_torn_down(target, tmp_path):
    import time
    repo, base, head = target
    fake = FakeSky(tmp_path / "fake")
    fake.inject("provision_hang", times=5)
    x86, _ = executors(tmp_path, repo, fake, clock=time.monotonic, provision_timeout_s=0.1, max_vm_retries=1)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "skipped" and "provisioning exceeded" in raw.reason
    assert len(fake.launched) == 2 and fake.up() == [] and len(fake.called("api_cancel")) == 2


def test_a_noisy_vm_is_measured_not_replaced(target, tmp_path, fake):
    # Noise costs pairs (the runner samples on until its test decides), never a second VM or the
    # verdict: the samples come back as measured, and judging them is not the executor's job.
    repo, base, head = target
    fake.inject("noisy")
    x86, _ = executors(tmp_path, repo, fake)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "ok" and len(fake.launched) == 1 and fake.up() == []
    assert max(raw.base.values["score"]) / min(raw.base.values["score"]) > 1.8
    assert raw.cost_usd == pytest.approx(VM_S * X86)


def test_failing_teardown_is_retried_then_left_to_close_and_the_lease(target, tmp_path, fake):
    repo, base, head = target
    fake.inject("down_error", times=3)          # every attempt inside run() fails
    x86, arm = executors(tmp_path, repo, fake, down_attempts=3)
    raw = x86.run(spec_for(x86.config, base, head), quiet)
    assert raw.status == "ok"
    (name,) = fake.up()
    (lease,) = read_leases(tmp_path / "leases")
    assert lease["clusters"] == [name] and lease["prefix"] == "autoresearch-r1-"
    x86.close()
    arm.close()
    assert fake.up() == [] and read_leases(tmp_path / "leases") == []


def test_budget_reservation_refuses_before_launching(target, tmp_path, fake):
    repo, base, head = target
    x86, arm = executors(tmp_path, repo, fake)
    spec = spec_for(x86.config, base, head)
    bound = x86.estimate_usd(spec)
    # Exactly one worst case fits: a second concurrent launch must be refused.
    x86.budget.limit = bound * 1.5
    assert x86.budget.reserve("someone-else", bound) == ""
    assert arm.estimate_usd(spec) == pytest.approx(arm._bound_usd(spec) + bound)
    raw = x86.run(spec, quiet)
    assert raw.status == "skipped" and raw.reason.startswith("budget:") and raw.cost_usd == 0
    assert fake.launched == []


def test_shared_budget_is_atomic():
    b = SharedBudget(1.0, spent_usd=0.25)
    assert b.reserve("a", 0.5) == ""
    assert "would exceed 1 USD" in b.reserve("b", 0.5)
    b.settle("a", 0.1)
    assert b.spent == pytest.approx(0.35) and b.in_flight() == 0 and b.reserve("b", 0.5) == ""


def test_budget_counts_the_runs_own_total_plus_vm_time_not_yet_reported():
    # state.json says 0.6 USD (0.1 of VM results already returned + 0.5 of model spend); 0.2 USD of
    # VM time is settled here but still inside a retrying experiment.
    b = SharedBudget(1.0, run_spent=lambda: 0.6)
    b.settle("vm1", 0.1)
    b.report(0.1)
    b.settle("vm2", 0.2)
    assert b.total_spent() == pytest.approx(0.8)
    assert "would exceed" in b.reserve("vm3", 0.25) and b.reserve("vm3", 0.2) == ""


def test_estimate_is_the_worst_case_at_catalog_price(target, tmp_path, fake):
    repo, base, head = target
    x86, arm = executors(tmp_path, repo, fake)
    spec = spec_for(x86.config, base, head)
    job = 2 * 20 + 20 + 2 * (4 + 1) * (3 + 1) + 120        # synthetic timeouts: build 20, checks 20, bench 3
    assert tasks.job_seconds(spec) == job
    assert x86.estimate_usd(spec) == pytest.approx((900 + 300 + job) / 3600 * 0.34)
    assert arm.estimate_usd(spec) == pytest.approx((900 + 300 + job) / 3600 * 0.29)


def test_the_fake_speaks_the_real_sdk_signatures(tmp_path):
    import sky
    fake = FakeSky(tmp_path / "fake")
    with pytest.raises(TypeError):
        fake.launch(sky.Task(run="true"), cluster_name="x", detach_run=True)   # not a 0.14 parameter
    with pytest.raises(TypeError):
        fake.tail_logs("x", 1, True, 0, None, True)                          # preload_content is keyword-only
    assert fake.called("launch") == []
