"""Comment and pull-request text. Pure: plain and typed data (records) in, Markdown out.

The status comment of a run is found again by a hidden marker (`<!-- autoresearch:status RUN -->`)
among the bot's own comments (`bot.github`: by author, never by marker alone) and edited in place,
so every run has exactly one.

Everything a repository or a commenter controls (plan text with platform names, candidate file
names, the best experiment's name, run messages carrying errors, config field names, the report)
passes through `jobs.guard.mdsafe` here: each body is `Markdown` made by `md` (every value escaped unless
already markup) and assembled by `document`, which refuses a plain string; no mention, reference,
link, image or HTML of theirs is live.
"""
from __future__ import annotations

from collections.abc import Iterable

from jobs.guard import mdsafe
from jobs.contract import results
from jobs.contract.runsummary import ExperimentRecord
from jobs.guard.mdsafe import Markdown, code, document, join, md, prose

from .commands import help_text
from .record import RunRecord

STATUS_MARKER = "<!-- autoresearch:status {run_id} -->"
PLAN_MARKER = "<!-- autoresearch:plan {run_id} {digest} -->"

STATE_WORDS = {
    "awaiting_approval": "⏸️ awaiting approval", "queued": "⏳ queued", "running": "🏃 running",
    "done": "✅ done", "failed": "❌ failed", "cancelled": "🛑 cancelled",
}

AI_DISCLOSURE = ("> 🤖 **AI-generated.** This pull request was produced by autoresearch (agent: {agent}): "
                 "the changes were written by an automated agent and measured by the run above. Review it as "
                 "you would any outside contribution.")


def status_marker(run_id: str) -> Markdown:
    return md(STATUS_MARKER, run_id=run_id)


MAX_LOSSES = 3                 # a run whose worker was lost this often is ended, not resumed again
LOST_WORDS = "⚠️ worker lost — resuming"


def state_words(r: RunRecord) -> str:
    if r.state == "running" and r.lost_at:
        return LOST_WORDS
    return STATE_WORDS.get(r.state, r.state)


def lost_message(r: RunRecord, lease_s: float) -> str:
    """What the status says while a run whose worker died waits for the next one."""
    return (f"⚠️ the worker running this run is gone (killed, out of memory, or shut down for a redeploy: its "
            f"lease lapsed or was handed back; leases last {lease_s:g} s after the last heartbeat) during "
            f"{r.phase or 'the run'}; {r.experiments_done} finished experiment(s) are on record in its ledger. "
            f"The next free worker resumes it from there (worker loss {r.losses + 1} of at most {MAX_LOSSES}).")


def resumed_message(r: RunRecord) -> str:
    return (f"🔁 resumed from its ledger after {'its worker was' if r.losses == 1 else f'{r.losses} workers were'} "
            "lost: finished experiments are not run again.")


def unresumable_message(reason: str, done: int) -> str:
    return (f"❌ the run's worker was lost and the run cannot be resumed: {reason}. {done} finished "
            "experiment(s) stay on record in its ledger; `/autoresearch optimize cpu` starts it again from there.")


def status_body(r: RunRecord) -> Markdown:
    total = r.experiments_total
    rows = [
        ("state", state_words(r)),
        ("phase", r.phase or "—"),
        ("experiments", f"{r.experiments_done}/{total}" if total is not None else "—"),
        ("current best", mdsafe.rendered(r.best) if r.best else "—"),     # `best_line`'s Markdown, stored as is
        ("cost so far", f"{float(r.cost_usd or 0):.2f} USD"),
        ("plan", mdsafe.text(r.plan_text, 1000) if r.plan_text else "—"),
        ("base commit", code((r.base_commit or "")[:12])),
        ("requested by", md("@{}", login(r.requester)) if r.requester else "—"),
    ]
    if r.approval:
        rows.append(("approved by", md("@{} (plan {})", login(r.approval.by), code(r.approval.plan_digest, 40))))
    if r.pr_url:
        rows.append(("pull request", mdsafe.own_url(r.pr_url)))          # GitHub's own html_url
    lines = [status_marker(r.run_id), md("### autoresearch run {}", code(r.run_id)), md(""),
             md("| | |"), md("|---|---|"), *[md("| {} | {} |", k, v) for k, v in rows]]
    if r.warnings:
        lines += [md(""), md("**Warnings** (newest last; the report lists every one):")]
        lines += [md("- ⚠️ {}", mdsafe.text(w, 400)) for w in r.warnings]
    if r.message:
        lines += [md(""), prose(r.message)]
    return document(lines + [md("")])


def login(name: str) -> str | Markdown:
    """A GitHub login as the bot writes it after `@` (logins are letters, digits and `-`; the
    Action's dispatch actor or a stored record could hold anything else: then it is made inert)."""
    return name if name.replace("-", "").isalnum() and name.isascii() else mdsafe.text(name, 60)


def plan_marker(r: RunRecord) -> Markdown:
    return md(PLAN_MARKER, run_id=r.run_id, digest=r.plan_digest)


def plan_body(r: RunRecord) -> Markdown:
    lines = [plan_marker(r), md("### autoresearch plan {} for run {}", code(r.plan_digest), code(r.run_id)),
             md(""), md("- **Plan:** {}", mdsafe.text(r.plan_text, 1000)),
             md("- **Base commit:** {}", code(r.base_commit[:12])),
             md("- **Hypotheses:** {} from research{}", r.n_hypotheses,
                md(", maintainer candidates: {}", join(", ", [code(c, 120) for c in r.candidates])) if r.candidates
                else md("")),
             md("- **Decision:** {} — {}", STATE_WORDS.get(r.state, r.state), prose(r.message))]
    if r.state == "awaiting_approval":
        lines += [md(""), md("Nothing runs and nothing is spent until an approver comments"), md(""),
                  md("    /autoresearch approve {}", r.plan_digest), md(""),
                  md("The approval holds for this plan at this commit only.")]
    return document(lines + [md("")])


def approve_names_plan(r: RunRecord, named: str) -> Markdown:
    """A bare `approve`, or one naming another plan: nothing is approved; say which plan waits."""
    said = (md("plan {} is not the one awaiting approval", code(named)) if named
            else md("`approve` names the plan it approves"))
    return md("autoresearch: {}; nothing was approved. Plan {} of run {} (requested by @{}, base {}) awaits approval: "
              "{}\n\nTo approve it, an approver comments {}.\n", said, code(r.plan_digest), code(r.run_id),
              login(r.requester), code(r.base_commit[:12]), mdsafe.text(r.plan_text, 1000),
              code(f"/autoresearch approve {r.plan_digest}"))


def pending_plan_kept(r: RunRecord, author: str) -> Markdown:
    return md("autoresearch: plan {} of @{} awaits approval, and @{} may not replace it (only its requester or an "
              "approver can: write access or a listing in `approvers`). Nothing changed.\n", code(r.plan_digest),
              login(r.requester), login(author))


def command_failed_reply(verb: str, why: str, retries_left: int, wait_s: int) -> Markdown:
    """A command's job failed (e.g. GitHub 5xx): it is retried, or it has given up."""
    if retries_left:
        return md("autoresearch: could not handle {} just now ({}). It is tried again in {} s (up to {} more time{}).\n",
                  code(verb), mdsafe.spans(why, at_start=False), wait_s, retries_left, "s" if retries_left > 1 else "")
    return md("autoresearch: {} failed ({}) and was not carried out after retrying. Post the command again once "
              "GitHub is reachable; `/autoresearch status` shows where the run stands.\n", code(verb),
              mdsafe.spans(why, at_start=False))


def help_reply(reason: str) -> Markdown:
    """`reason` (a parser's or the config's sentence: its backticks mark the commenter's words as code)."""
    return md("autoresearch: {}.\n\n{}\n", mdsafe.spans(reason, at_start=False), help_text())


def config_error_reply(source: str, problems: list[tuple[str, str]]) -> Markdown:
    lines = [md("autoresearch: {} on the default branch is not valid, so no run was started.", code(source)), md("")]
    lines += [md("- {}: {}", code(field, 200), prose(msg, 1000)) for field, msg in problems]
    return document(lines + [md("")])


def best_line(records: Iterable[ExperimentRecord], primary: str) -> Markdown:
    """The best kept experiment on the primary metric so far, from the ledger's records."""
    best = results.best_kept(records, primary)
    if best is None:
        return md("")
    rec, m = best
    return md("{} {:+.1f}% {} on {} (p={:.3g})", code(rec.name, 120, in_table=True), m.delta_pct, primary,
              rec.platform or "?", m.p_value)


def pr_title(issue_number: int, target: str) -> str:
    return f"autoresearch: CPU optimizations for {mdsafe.plain(target, 120)} (#{issue_number})"


def pr_body(report_md: Markdown, issue_number: int, agent: str, kept: bool) -> Markdown:
    link = md("Closes #{}", issue_number) if kept else md("Refs #{}", issue_number)
    disclosure = md(AI_DISCLOSURE, agent=code(agent, 40))
    report = mdsafe.lines(report_md)
    while report and not report[-1].strip():
        report.pop()
    return document([*report, md(""), md("---"), md(""), disclosure, md(""), link, md("")])
