"""Comment and pull-request text. Pure: plain data in, Markdown out.

The status comment of a run is found again by a hidden marker (`<!-- autoresearch:status RUN -->`)
among the bot's own comments (`bot.github`: by author, never by marker alone) and edited in place,
so every run has exactly one.

Everything a repository or a commenter controls (plan text with platform names, candidate file
names, the best experiment's name, run messages carrying errors, config field names, the report)
passes through `jobs.mdsafe` here: no mention, reference, link, image or HTML of theirs is live.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobs import mdsafe, results

from .commands import help_text
from .record import RunRecord

STATUS_MARKER = "<!-- autoresearch:status {run_id} -->"
PLAN_MARKER = "<!-- autoresearch:plan {run_id} {digest} -->"

STATE_WORDS = {
    "awaiting_approval": "⏸️ awaiting approval", "queued": "⏳ queued", "running": "🏃 running",
    "done": "✅ done", "failed": "❌ failed", "cancelled": "🛑 cancelled",
}

AI_DISCLOSURE = ("> 🤖 **AI-generated.** This pull request was produced by autoresearch (agent: `{agent}`): "
                 "the changes were written by an automated agent and measured by the run above. Review it as "
                 "you would any outside contribution.")


def status_marker(run_id: str) -> str:
    return STATUS_MARKER.format(run_id=run_id)


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


def status_body(r: RunRecord) -> str:
    total = r.experiments_total
    rows = [
        ("state", state_words(r)),
        ("phase", r.phase or "—"),
        ("experiments", f"{r.experiments_done}/{total}" if total is not None else "—"),
        ("current best", r.best or "—"),          # `best_line`'s: made inert there
        ("cost so far", f"{float(r.cost_usd or 0):.2f} USD"),
        ("plan", mdsafe.text(r.plan_text, 1000) if r.plan_text else "—"),
        ("base commit", f"`{(r.base_commit or '')[:12]}`"),
        ("requested by", f"@{login(r.requester)}" if r.requester else "—"),
    ]
    if r.approval:
        rows.append(("approved by", f"@{login(r.approval.by)} (plan {mdsafe.code(r.approval.plan_digest, 40)})"))
    if r.pr_url:
        rows.append(("pull request", r.pr_url))          # GitHub's own html_url
    lines = [status_marker(r.run_id), f"### autoresearch run `{r.run_id}`", "",
             "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if r.warnings:
        lines += ["", "**Warnings** (newest last; the report lists every one):"]
        lines += [f"- ⚠️ {mdsafe.text(w, 400)}" for w in r.warnings]
    if r.message:
        lines += ["", mdsafe.prose(r.message)]
    return "\n".join(lines) + "\n"


def login(name: str) -> str:
    """A GitHub login as the bot writes it after `@` (logins are letters, digits and `-`; the
    Action's dispatch actor or a stored record could hold anything else: then it is made inert)."""
    return name if name.replace("-", "").isalnum() and name.isascii() else mdsafe.text(name, 60)


def plan_marker(r: RunRecord) -> str:
    return PLAN_MARKER.format(run_id=r.run_id, digest=r.plan_digest)


def plan_body(r: RunRecord) -> str:
    lines = [plan_marker(r), f"### autoresearch plan `{r.plan_digest}` for run `{r.run_id}`",
             "", f"- **Plan:** {mdsafe.text(r.plan_text, 1000)}", f"- **Base commit:** `{r.base_commit[:12]}`",
             f"- **Hypotheses:** {r.n_hypotheses} from research"
             + (f", maintainer candidates: {', '.join(mdsafe.code(c, 120) for c in r.candidates)}"
                if r.candidates else ""),
             f"- **Decision:** {STATE_WORDS.get(r.state, r.state)} — {mdsafe.prose(r.message)}"]
    if r.state == "awaiting_approval":
        lines += ["", "Nothing runs and nothing is spent until an approver comments", "",
                  f"    /autoresearch approve {r.plan_digest}", "",
                  "The approval holds for this plan at this commit only."]
    return "\n".join(lines) + "\n"


def approve_names_plan(r: RunRecord, named: str) -> str:
    """A bare `approve`, or one naming another plan: nothing is approved; say which plan waits."""
    said = f"plan `{named}` is not the one awaiting approval" if named else "`approve` names the plan it approves"
    return (f"autoresearch: {said}; nothing was approved. Plan `{r.plan_digest}` of run `{r.run_id}` "
            f"(requested by @{login(r.requester)}, base `{r.base_commit[:12]}`) awaits approval: "
            f"{mdsafe.text(r.plan_text, 1000)}\n\n"
            f"To approve it, an approver comments `/autoresearch approve {r.plan_digest}`.\n")


def pending_plan_kept(r: RunRecord, author: str) -> str:
    return (f"autoresearch: plan `{r.plan_digest}` of @{login(r.requester)} awaits approval, and @{login(author)} may not "
            "replace it (only its requester or an approver can: write access or a listing in `approvers`). "
            "Nothing changed.\n")


def command_failed_reply(verb: str, why: str, retries_left: int, wait_s: int) -> str:
    """A command's job failed (e.g. GitHub 5xx): it is retried, or it has given up."""
    if retries_left:
        return (f"autoresearch: could not handle `{verb}` just now ({why}). It is tried again "
                f"in {wait_s} s (up to {retries_left} more time{'s' if retries_left > 1 else ''}).\n")
    return (f"autoresearch: `{verb}` failed ({why}) and was not carried out after retrying. Post the command "
            "again once GitHub is reachable; `/autoresearch status` shows where the run stands.\n")


def help_reply(reason: str) -> str:
    return f"autoresearch: {reason}.\n\n{help_text()}\n"


def config_error_reply(source: str, problems: list[tuple[str, str]]) -> str:
    lines = [f"autoresearch: `{source}` on the default branch is not valid, so no run was started.", ""]
    lines += [f"- {mdsafe.code(field, 200)}: {mdsafe.prose(msg, 1000)}" for field, msg in problems]
    return "\n".join(lines) + "\n"


def best_line(records: Iterable[Mapping[str, Any]], primary: str) -> str:
    """The best kept experiment on the primary metric so far, from ledger records."""
    best = results.best_kept(records, primary)
    if best is None:
        return ""
    rec, m = best
    return (f"{mdsafe.code(rec['name'], 120, in_table=True)} {m['delta_pct']:+.1f}% {mdsafe.text(primary)} on "
            f"{mdsafe.text(rec.get('platform', '?'))} (p={m['p_value']:.3g})")


def pr_title(issue_number: int, target: str) -> str:
    return f"autoresearch: CPU optimizations for {mdsafe.plain(target, 120)} (#{issue_number})"


def pr_body(report_md: str, issue_number: int, agent: str, kept: bool) -> str:
    link = f"Closes #{issue_number}" if kept else f"Refs #{issue_number}"
    disclosure = AI_DISCLOSURE.format(agent=mdsafe.one_line(agent, 40).replace("`", "'"))
    return f"{report_md.rstrip()}\n\n---\n\n{disclosure}\n\n{link}\n"
