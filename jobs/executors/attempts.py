"""Attempts on fresh machines until one gives a trustworthy result, and teardowns retried until
confirmed: what every executor that rents machines (cloud VMs, pods) shares.

An experiment on rented machines is one or more attempts. Before each, its worst case is reserved
against the run's budget (`jobs.executors.budget`): refused, it is not started and the experiment
is `skipped` with the reason. Each attempt runs on a new machine and ends with an outcome:

- `result`: the job printed its RESULT line; those samples are returned.
- `preempted`, `provision_failed`: a failure of the machine, not of the experiment. Retried on a
  new machine up to `max_machine_retries` times, then `skipped` ("not measured"). Only the final
  attempt's samples are ever returned, so nothing is counted twice; every machine is billed once.
- `timeout`: the job overran the sum of its steps' limits (`timeout`, not retried).
- `failed`: the job ended without a usable RESULT line (`crash`, not retried).

A noisy machine is not a failure: the runner's sequential test samples on until it decides.
The retry policies are tenacity's; this module only says what is retried and what comes out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_incrementing

from jobs.measure.runner import Progress
from jobs.contract.spec import RawResult
from .budget import SharedBudget

MACHINE_FAILURES = frozenset({"preempted", "provision_failed"})


@dataclass
class Attempt:
    cluster: str                  # the machine's name (a SkyPilot cluster, a pod)
    outcome: str = "failed"       # result | preempted | provision_failed | timeout | failed | refused
    reason: str = ""
    result: RawResult | None = None
    seconds: float = 0.0
    cost_usd: float = 0.0
    torn_down: bool = False
    log: list[str] = field(default_factory=list)

    def note(self) -> str:
        return (f"{self.cluster}: {self.outcome}{' (' + self.reason + ')' if self.reason else ''}, "
                f"{self.seconds:.0f} s, {self.cost_usd:.4f} USD")


@dataclass
class Attempts:
    """The attempts of one experiment: what it cost and what to say about each machine."""
    tried: list[Attempt] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.tried)

    def notes(self) -> str:
        return "; ".join(a.note() for a in self.tried)


def measure_on_fresh_machines(*, name_machine: Callable[[], str], budget: SharedBudget, worst_case_usd: float,
                              attempt: Callable[[str], Attempt], max_machine_retries: int, machine: str,
                              progress: Progress) -> tuple[RawResult, Attempts]:
    """Attempts on new machines (each reserved against `budget` first) until one ends other than
    by a machine failure, or `max_machine_retries` new machines have failed too. `attempt(name)` runs
    one machine and must leave it torn down (or in the lease) and its cost settled in `budget`."""
    done = Attempts()

    def one() -> Attempt:
        name = name_machine()
        refusal = budget.reserve(name, worst_case_usd)
        if refusal:                      # not started, nothing billed
            return Attempt(cluster=name, outcome="refused", reason=refusal)
        att = attempt(name)
        done.tried.append(att)
        return att

    def retrying_on_a_new_machine(state) -> None:     # progress raises when the run is cancelled
        progress(f"{machine} lost ({state.outcome.result().outcome}); retrying on a new one", 0.0)

    last = Retrying(stop=stop_after_attempt(max_machine_retries + 1),
                    retry=retry_if_result(lambda att: att.outcome in MACHINE_FAILURES),
                    before_sleep=retrying_on_a_new_machine,
                    retry_error_callback=lambda state: state.outcome.result())(one)
    return _raw_result(last, len(done.tried), machine), done


def _raw_result(last: Attempt, machines: int, machine: str) -> RawResult:
    if last.outcome == "result" and last.result is not None:
        return last.result
    if last.outcome == "refused":
        return RawResult(status="skipped", reason=last.reason)
    if last.outcome in MACHINE_FAILURES:
        return RawResult(status="skipped", reason=(f"not measured: no usable {machine} after {machines} attempts "
                                                   f"(last: {last.outcome}: {last.reason})"))
    status = "timeout" if last.outcome == "timeout" else "crash"
    return RawResult(status=status, reason=last.reason, log="\n".join(last.log))


def tear_down(down: Callable[[], None], attempts: int, backoff_s: float) -> BaseException | None:
    """Calls `down()` until it returns (the machine is confirmed gone), at most `attempts` times,
    waiting `backoff_s`, 2 x `backoff_s`, ... between tries. None when it succeeded, else the last error
    (the caller keeps the machine in the run's lease for `autoresearch reap`)."""
    try:
        Retrying(stop=stop_after_attempt(attempts), wait=wait_incrementing(start=backoff_s, increment=backoff_s),
                 reraise=True)(down)       # retries on any Exception; a KeyboardInterrupt goes through
    except Exception as exc:     # a machine must not outlive its experiment: the caller records this
        return exc
    return None
