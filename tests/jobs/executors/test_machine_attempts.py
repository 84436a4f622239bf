"""What machine executors share, without any cloud: retries on fresh machines (only machine
failures, bounded, each reserved against the budget first, nothing counted twice), teardown
retried until confirmed, and the budget counting the run's own state.json."""
from __future__ import annotations

import pytest

pytest.importorskip("tenacity", reason="the shared retries need the cloud extra: pip install -e '.[cloud]'")

from jobs.executors.attempts import Attempt, measure_on_fresh_machines, tear_down  # noqa: E402
from jobs.executors.budget import SharedBudget, budget_for_run  # noqa: E402
from jobs.contract.ledger import save_state  # noqa: E402
from jobs.contract.spec import RawResult  # noqa: E402

WORST = 1.0       # USD reserved per attempt
COST = 0.25       # USD each scripted machine really costs


class Machines:
    """Scripted machines: the nth attempt ends with outcomes[n]; each settles its cost like a real one."""

    def __init__(self, budget: SharedBudget, outcomes: list[str]):
        self.budget, self.outcomes = budget, list(outcomes)
        self.names = iter(f"vm{i}" for i in range(1, 100))
        self.started: list[str] = []
        self.told: list[str] = []

    def attempt(self, name: str) -> Attempt:
        self.started.append(name)
        outcome = self.outcomes.pop(0)
        att = Attempt(cluster=name, outcome=outcome, reason=f"{outcome} on {name}", cost_usd=COST,
                      log=[f"log of {name}"])
        if outcome == "result":
            att.reason, att.result = "", RawResult(status="ok", reason=f"measured on {name}")
        self.budget.settle(name, COST)
        return att

    def measure(self, retries: int = 2, progress=None) -> tuple[RawResult, object]:
        return measure_on_fresh_machines(
            name_machine=lambda: next(self.names), budget=self.budget, worst_case_usd=WORST, attempt=self.attempt,
            max_machine_retries=retries, machine="test VM", progress=progress or (lambda m, f: self.told.append(m)))


def test_a_lost_machine_is_retried_on_a_new_one_and_only_the_last_samples_count():
    budget = SharedBudget(10.0)
    machines = Machines(budget, ["preempted", "provision_failed", "result"])
    result, done = machines.measure()
    assert result.reason == "measured on vm3"
    assert machines.started == ["vm1", "vm2", "vm3"]                  # a new machine every time
    assert done.cost_usd == pytest.approx(3 * COST) and budget.spent == pytest.approx(3 * COST)
    assert budget.in_flight() == 0
    assert machines.told == ["test VM lost (preempted); retrying on a new one",
                             "test VM lost (provision_failed); retrying on a new one"]
    assert "vm1: preempted (preempted on vm1)" in done.notes() and "vm3: result" in done.notes()


def test_machines_that_keep_failing_are_not_measured_after_the_retries():
    machines = Machines(SharedBudget(10.0), ["preempted"] * 10)
    result, done = machines.measure(retries=2)
    assert result.status == "skipped"
    assert result.reason == "not measured: no usable test VM after 3 attempts (last: preempted: preempted on vm3)"
    assert len(done.tried) == 3 and done.cost_usd == pytest.approx(3 * COST)


@pytest.mark.parametrize("outcome,status", [("timeout", "timeout"), ("failed", "crash")])
def test_the_experiments_own_failure_is_not_retried(outcome, status):
    machines = Machines(SharedBudget(10.0), [outcome, "result"])
    result, done = machines.measure()
    assert (result.status, result.reason, result.log) == (status, f"{outcome} on vm1", "log of vm1")
    assert machines.started == ["vm1"]


def test_an_attempt_the_budget_cannot_cover_is_never_started():
    budget = SharedBudget(WORST * 1.5, spent_usd=0.75)
    machines = Machines(budget, ["result"])
    result, done = machines.measure()
    assert result.status == "skipped" and result.reason.startswith("budget: 0.75 USD spent")
    assert machines.started == [] and done.tried == [] and budget.in_flight() == 0


def test_a_retry_the_budget_cannot_cover_stops_with_the_budgets_reason():
    budget = SharedBudget(WORST + COST - 0.01)   # the first machine fits; after its cost, a second does not
    machines = Machines(budget, ["preempted", "result"])
    result, done = machines.measure()
    assert result.status == "skipped" and "would exceed" in result.reason
    assert machines.started == ["vm1"] and done.cost_usd == pytest.approx(COST)


def test_a_cancel_inside_an_attempt_or_between_attempts_goes_through():
    class Cancelled(Exception):
        pass

    def cancelled_attempt(name):
        raise Cancelled(name)
    with pytest.raises(Cancelled, match="vm1"):
        measure_on_fresh_machines(name_machine=lambda: "vm1", budget=SharedBudget(10.0), worst_case_usd=WORST,
                                  attempt=cancelled_attempt, max_machine_retries=2, machine="m",
                                  progress=lambda m, f: None)

    def cancel(message, fraction):
        raise Cancelled(message)
    machines = Machines(SharedBudget(10.0), ["preempted", "result"])
    with pytest.raises(Cancelled, match="retrying"):
        machines.measure(progress=cancel)
    assert machines.started == ["vm1"]


def test_teardown_is_retried_until_confirmed_and_reports_a_lasting_failure():
    calls = []

    def flaky_down():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("API server busy")
    assert tear_down(flaky_down, attempts=3, backoff_s=0.0) is None and len(calls) == 3

    calls.clear()

    def broken_down():
        calls.append(1)
        raise ConnectionError(f"refused {len(calls)}")
    failure = tear_down(broken_down, attempts=4, backoff_s=0.0)
    assert isinstance(failure, ConnectionError) and str(failure) == "refused 4" and len(calls) == 4

    def interrupted_down():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        tear_down(interrupted_down, attempts=3, backoff_s=0.0)


def test_the_budget_counts_what_the_run_already_spent(tmp_path):
    budget = budget_for_run(1.0, tmp_path)
    assert budget.total_spent() == 0.0                 # no state.json yet: its own books
    save_state(tmp_path, {"cost_usd": 0.7})
    assert budget.total_spent() == pytest.approx(0.7)
    # Another field of the wrong shape (the typed state would read as a fresh one) does not hide the spend.
    save_state(tmp_path, {"cost_usd": 0.7, "hypotheses": "not a list"})
    assert budget.total_spent() == pytest.approx(0.7)
    assert "would exceed 1 USD" in budget.reserve("vm1", 0.5) and budget.reserve("vm1", 0.3) == ""
