"""A run held by this process: `execute` (its pipeline, then its publication) and `resume` (taking
over a run whose worker was lost). Part of the flow (`bot.flow.Flow` calls these with itself), kept
apart so that the flow's command half stays readable; like the flow, it depends on `bot.ports`
protocols only.

The lease (`bot.ports.Lease`, from `Launcher.hold`) is what makes a run this process's: taken
before the record says `running` (so a running run always has a holder, or has lost its worker),
renewed by the App's heartbeat while the pipeline runs, released after the record's final write. A
process whose lease is lost stops at the pipeline's next step and writes nothing more.

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

from jobs import api
from jobs.api import cancellation, scrub_environment

from . import approval as ap
from . import planning
from .ports import HeldLease, Outcome, RunFlow
from .progress import Progress, best_effort_status
from .record import RunRecord
from .status import MAX_LOSSES, resumed_message, unresumable_message


def execute(flow: RunFlow, rec: RunRecord, prep: api.Preparation, lease: HeldLease) -> Outcome:
    """`flow` (a `bot.flow.Flow`) runs the pipeline of `rec`, which this process holds by `lease`,
    then publishes it; the lease goes at the end."""
    run_id = rec.run_id
    lost = Outcome(ap.RUNNING, run_id, step="lost", message="this process no longer holds the run (its lease was "
                   "lost or handed back); the next worker resumes it")
    try:
        with best_effort_status():
            flow.refresh_status(run_id)
        scrub_environment()       # target code runs next, in this process's children
        ends_run = (Exception, KeyboardInterrupt) if flow.launcher.interrupts_cancel else (Exception,)
        try:
            summary = api.start(prep, executor=flow.place.executor, agent=prep.config.agent,
                                operator=flow.place.operator,   # the operator's, not the repo's
                                on_event=Progress(flow.store, flow.refresh_status, rec, prep.layout.out,
                                                  prep.config.primary.name),
                                should_stop=lambda: lease.lost or flow.store.cancel_requested(flow.repo, run_id),
                                published=flow.published(rec, prep))
        except ends_run as exc:
            if lease.lost:
                return lost
            if not cancellation(exc, interrupts=flow.launcher.interrupts_cancel):
                flow.finish(rec, "fail", message=f"❌ the run failed: {str(exc)[:1500]}")
                return Outcome(ap.FAILED, run_id, step="run", error=exc, message=str(exc)[:500])
            done = api.finished_experiments(prep.layout.out)
            flow.finish(rec, "cancelled", phase="cancelled",
                        message=f"🛑 cancelled: jobs stopped and machines released; {done} finished experiment(s) "
                                "stay on record in the ledger")
            return Outcome(ap.CANCELLED, run_id, step="run")
        if lease.lost:
            return lost
        try:
            fields = flow.publish(rec, prep, summary)     # `start` returned: no process of the target is left
        except Exception as exc:
            flow.finish(rec, "fail", message=f"❌ publishing the result failed: {str(exc)[:1500]}")
            return Outcome(ap.FAILED, run_id, step="publish", error=exc, message=str(exc)[:500])
        flow.finish(rec, "finish", phase="done", cost_usd=getattr(summary, "cost_usd", 0.0), **fields)
        return Outcome(ap.DONE, run_id, step="done", summary=summary, out=prep.layout.out,
                       pr_url=fields.get("pr_url", ""), fields=fields)
    finally:
        lease.release()


def resume_refusal(rec: RunRecord, prep: api.Preparation | None) -> str:
    """Why the lost run `rec` cannot be resumed with the preparation found on this machine, or ''."""
    if rec.losses >= MAX_LOSSES:
        return f"its worker was lost {rec.losses} times (a step may be killing it, e.g. out of memory)"
    if prep is None or prep.base != rec.base_commit:
        return "its run folder (clone, preparation) is not on this worker"
    if not ap.may_start(rec.approval, planning.record_plan_id(prep, rec), prep.base):
        return "its plan is no longer the one that was approved"
    return ""


def resume(flow: RunFlow, rec: RunRecord) -> Outcome:
    """Take over `rec` if it is running and lost, and go on from its ledger; or end it (see above)."""
    run_id, layout = rec.run_id, flow.layout(rec.run_id)
    with best_effort_status():
        flow.refresh_status(run_id)          # first the truth: its worker was lost, it resumes now
    with flow.store.locked(flow.repo, run_id):
        cur = flow.store.get_run(flow.repo, run_id)
        lease = flow.launcher.hold(cur) if cur and cur.state == ap.RUNNING and cur.lost_at else None
        if lease is None:
            return Outcome(cur.state if cur else "unknown", run_id, step="start")
        flow.store.update_run(flow.repo, run_id, lost_at=0.0, worker=lease.holder, phase="resuming",
                              message=resumed_message(cur), **flow.launcher.running_fields())
    handed_on = False
    try:
        api.clean_worktrees(layout)
        prep = api.load_preparation(layout, flow.place.executor)
        why = resume_refusal(cur, prep)
        cancelled = flow.store.cancel_requested(flow.repo, run_id)
        if cancelled or why:
            api.drop_branches(layout)
            done = api.finished_experiments(layout.out)
            if cancelled:
                flow.finish(cur, "cancelled", phase="cancelled", message=f"🛑 cancelled while it had no worker; "
                            f"{done} finished experiment(s) stay on record in the ledger")
                return Outcome(ap.CANCELLED, run_id, step="resume")
            flow.finish(cur, "fail", phase="lost", message=unresumable_message(why, done))
            return Outcome(ap.FAILED, run_id, step="resume", message=why)
        flow.git.checkout(flow.place.clone_url(flow.gh.owner, flow.gh.repo), layout.clone, prep.base, flow.token,
                          ref=cur.default_branch)        # a clean tree at the base; nothing is fetched
        handed_on = True
    finally:
        if not handed_on:
            lease.release()
    return execute(flow, flow.store.get_run(flow.repo, run_id), prep, lease)
