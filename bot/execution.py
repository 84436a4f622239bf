"""A run held by this process: `execute` (its pipeline) and `resume` (taking over a run whose
worker was lost), and how each ends. Part of the flow, kept apart so that the flow's command half
stays readable; like the flow, it depends on `bot.ports` protocols only.

These functions do not end a run themselves: each returns what `bot.flow.Flow` does next (its one
front door for a run's record and status comment), a value of this module:

- `Finish(rec, event, fields, outcome)`: `Flow.finish(rec, event, **fields)` (the state machine's
  transition, then the status comment); the run ended as `outcome` says;
- `Publish(rec, prep, summary)`: `Flow.publish` the result, then finish the run as `run_done` (or,
  if publishing raised, `publish_failed`) says;
- `TakeOver(rec, prep)`: a lost run goes on here: its clone checked out at its base, then executed;
- `Leave(outcome)`: nothing more is written: the run is not this process's any more.

What they need of the world in the middle (the pipeline runs inside the lease, the status comment is
refreshed before it starts) they are handed as the specific ports and narrow callables, never the
flow: so none of them can reach `Flow.finish` or `Flow.publish` (tests/bot/test_execution_outcomes.py).

The lease (`bot.ports.HeldLease`, from `Launcher.hold`) is what makes a run this process's: taken
before the record says `running` (so a running run always has a holder, or has lost its worker),
renewed by the App's heartbeat while the pipeline runs, released (by `Flow`) after the record's
final write. A process whose lease is lost stops at the pipeline's next step and writes nothing more.

A run whose worker was lost (the App's sweeper set `lost_at`, see `bot.jobqueue`) is resumed by
the next worker from its ledger: the same run folder, the same run id, so `jobs.run.pipeline` skips
every finished experiment and repeats only the one that was cut short. It is not resumed, but ended
as failed with the reason, when its run folder is not on this machine, its approval no longer
matches its plan, or its workers were lost `MAX_LOSSES` times (a step that kills its worker, e.g.
out of memory, would otherwise loop). A cancel that came while it had no worker ends it as
cancelled. Either way the dead worker's worktrees are removed; when the run ends here, its local
branches too (its ledger stays: the same request later resumes from it).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobs import api
from jobs.api import RunStopped, RunSummary, cancellation, scrub_environment

from . import approval as ap
from . import planning
from .ports import HeldLease, Outcome, Place, RunStore
from .progress import Progress, best_effort_status
from .record import RunRecord
from .status import MAX_LOSSES, unresumable_message


@dataclass(frozen=True)
class Finish:
    """End the run: `Flow.finish(rec, event, **fields)`; `outcome` is how the run ended."""
    rec: RunRecord
    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=lambda: Outcome(""))


@dataclass(frozen=True)
class Publish:
    """The pipeline returned (no process of the target is left) and the run is still this process's:
    `Flow.publish` it, then finish it (`run_done`, or `publish_failed` if publishing raised)."""
    rec: RunRecord
    prep: api.Preparation
    summary: RunSummary | RunStopped


@dataclass(frozen=True)
class TakeOver:
    """A lost run this process now holds goes on from its ledger: check out its base, then `execute`."""
    rec: RunRecord
    prep: api.Preparation


@dataclass(frozen=True)
class Leave:
    """Write nothing more: `outcome` says why the run is not this process's."""
    outcome: Outcome


def lost(run_id: str) -> Leave:
    return Leave(Outcome(ap.RUNNING, run_id, step="lost", message="this process no longer holds the run (its lease "
                         "was lost or handed back); the next worker resumes it"))


def run_failed(rec: RunRecord, exc: BaseException) -> Finish:
    """The pipeline raised, and not as a cancel."""
    return Finish(rec, "fail", {"message": f"❌ the run failed: {str(exc)[:1500]}"},
                  Outcome(ap.FAILED, rec.run_id, step="run", error=exc, message=str(exc)[:500]))


def run_cancelled(rec: RunRecord, done: int) -> Finish:
    """The pipeline stopped for a cancel, `done` experiments finished."""
    return Finish(rec, "cancelled", {"phase": "cancelled", "message": "🛑 cancelled: jobs stopped and machines "
                                     f"released; {done} finished experiment(s) stay on record in the ledger"},
                  Outcome(ap.CANCELLED, rec.run_id, step="run"))


def publish_failed(rec: RunRecord, exc: BaseException) -> Finish:
    return Finish(rec, "fail", {"message": f"❌ publishing the result failed: {str(exc)[:1500]}"},
                  Outcome(ap.FAILED, rec.run_id, step="publish", error=exc, message=str(exc)[:500]))


def run_done(rec: RunRecord, prep: api.Preparation, summary: RunSummary | RunStopped, fields: dict) -> Finish:
    """Published: `fields` are what `Flow.publish` returned (the PR's url and number, the message)."""
    return Finish(rec, "finish", {"phase": "done", "cost_usd": getattr(summary, "cost_usd", 0.0), **fields},
                  Outcome(ap.DONE, rec.run_id, step="done", summary=summary, out=prep.layout.out,
                          pr_url=fields.get("pr_url", ""), fields=fields))


def execute(rec: RunRecord, prep: api.Preparation, lease: HeldLease, *, store: RunStore, place: Place,
            refresh_status: Callable[[str], None], cancel_requested: Callable[[], bool],
            published: Callable[[], api.Published], interrupts_cancel: bool) -> Finish | Publish | Leave:
    """Run the pipeline of `rec`, which this process holds by `lease` (the caller releases it after
    carrying out what this returns): `store` and `refresh_status` for `Progress`, `place` for the
    executor and the operator's policy, `cancel_requested` reads the cancel flag, `published` says
    where the result will be published."""
    run_id = rec.run_id
    with best_effort_status():
        refresh_status(run_id)
    scrub_environment()       # target code runs next, in this process's children
    ends_run = (Exception, KeyboardInterrupt) if interrupts_cancel else (Exception,)
    try:
        summary = api.start(prep, executor=place.executor, agent=prep.config.agent,
                            operator=place.operator,   # the operator's, not the repo's
                            on_event=Progress(store, refresh_status, rec, prep.layout.out, prep.config.primary.name),
                            should_stop=lambda: lease.lost or cancel_requested(),
                            published=published())
    except ends_run as exc:
        if lease.lost:
            return lost(run_id)
        if not cancellation(exc, interrupts=interrupts_cancel):
            return run_failed(rec, exc)
        return run_cancelled(rec, api.finished_experiments(prep.layout.out))
    if lease.lost:
        return lost(run_id)
    return Publish(rec, prep, summary)


def resume_refusal(rec: RunRecord, prep: api.Preparation | None) -> str:
    """Why the lost run `rec` cannot be resumed with the preparation found on this machine, or ''."""
    if rec.losses >= MAX_LOSSES:
        return f"its worker was lost {rec.losses} times (a step may be killing it, e.g. out of memory)"
    if prep is None or prep.base != rec.base_commit:
        return "its run folder (clone, preparation) is not on this worker"
    if not ap.may_start(rec.approval, planning.record_plan_id(prep, rec), prep.base):
        return "its plan is no longer the one that was approved"
    return ""


def resumable(rec: RunRecord | None) -> bool:
    """Is `rec` a running run whose worker was lost (one a process may take over)?"""
    return bool(rec and rec.state == ap.RUNNING and rec.lost_at)


def resume_ended(rec: RunRecord, why: str, cancelled: bool, done: int) -> Finish:
    """The lost run `rec` ends here: cancelled while it had no worker, else failed because `why`."""
    if cancelled:
        return Finish(rec, "cancelled", {"phase": "cancelled", "message": "🛑 cancelled while it had no worker; "
                                         f"{done} finished experiment(s) stay on record in the ledger"},
                      Outcome(ap.CANCELLED, rec.run_id, step="resume"))
    return Finish(rec, "fail", {"phase": "lost", "message": unresumable_message(why, done)},
                  Outcome(ap.FAILED, rec.run_id, step="resume", message=why))


def resume(rec: RunRecord, layout: api.RunLayout, executor: str,
           cancel_requested: Callable[[], bool]) -> Finish | TakeOver:
    """`rec` was lost and this process now holds it: the dead worker's worktrees go; it goes on from
    its ledger (`TakeOver`) or ends (see above; its local branches go then too)."""
    api.clean_worktrees(layout)
    prep = api.load_preparation(layout, executor)
    why = resume_refusal(rec, prep)
    cancelled = cancel_requested()
    if cancelled or why:
        api.drop_branches(layout)
        return resume_ended(rec, why, cancelled, api.finished_experiments(layout.out))
    return TakeOver(rec, prep)
