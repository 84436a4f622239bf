"""Comment and pull-request text. Pure: plain data in, Markdown out.

The status comment of a run is found again by a hidden marker (`<!-- autoresearch:status RUN -->`)
and edited in place, so every run has exactly one.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobs import results

from .commands import HELP
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
        ("current best", r.best or "—"),
        ("cost so far", f"{float(r.cost_usd or 0):.2f} USD"),
        ("plan", r.plan_text or "—"),
        ("base commit", f"`{(r.base_commit or '')[:12]}`"),
        ("requested by", f"@{r.requester}" if r.requester else "—"),
    ]
    if r.approval:
        rows.append(("approved by", f"@{r.approval.by} (plan `{r.approval.plan_digest}`)"))
    if r.pr_url:
        rows.append(("pull request", r.pr_url))
    lines = [status_marker(r.run_id), f"### autoresearch run `{r.run_id}`", "",
             "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if r.message:
        lines += ["", r.message]
    return "\n".join(lines) + "\n"


def plan_marker(r: RunRecord) -> str:
    return PLAN_MARKER.format(run_id=r.run_id, digest=r.plan_digest)


def plan_body(r: RunRecord) -> str:
    lines = [plan_marker(r), f"### autoresearch plan `{r.plan_digest}` for run `{r.run_id}`",
             "", f"- **Plan:** {r.plan_text}", f"- **Base commit:** `{r.base_commit[:12]}`",
             f"- **Hypotheses:** {r.n_hypotheses} from research"
             + (f", maintainer candidates: {', '.join(f'`{c}`' for c in r.candidates)}" if r.candidates else ""),
             f"- **Decision:** {STATE_WORDS.get(r.state, r.state)} — {r.message}"]
    if r.state == "awaiting_approval":
        lines += ["", "Nothing runs and nothing is spent until an approver comments", "",
                  f"    /autoresearch approve {r.plan_digest}", "",
                  "The approval holds for this plan at this commit only."]
    return "\n".join(lines) + "\n"


def approve_names_plan(r: RunRecord, named: str) -> str:
    """A bare `approve`, or one naming another plan: nothing is approved; say which plan waits."""
    said = f"plan `{named}` is not the one awaiting approval" if named else "`approve` names the plan it approves"
    return (f"autoresearch: {said}; nothing was approved. Plan `{r.plan_digest}` of run `{r.run_id}` "
            f"(requested by @{r.requester}, base `{r.base_commit[:12]}`) awaits approval: {r.plan_text}\n\n"
            f"To approve it, an approver comments `/autoresearch approve {r.plan_digest}`.\n")


def pending_plan_kept(r: RunRecord, author: str) -> str:
    return (f"autoresearch: plan `{r.plan_digest}` of @{r.requester} awaits approval, and @{author} may not "
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
    return f"autoresearch: {reason}.\n\n{HELP}\n"


def config_error_reply(source: str, problems: list[tuple[str, str]]) -> str:
    lines = [f"autoresearch: `{source}` on the default branch is not valid, so no run was started.", ""]
    lines += [f"- `{field}`: {msg}" for field, msg in problems]
    return "\n".join(lines) + "\n"


def best_line(records: Iterable[Mapping[str, Any]], primary: str) -> str:
    """The best kept experiment on the primary metric so far, from ledger records."""
    best = results.best_kept(records, primary)
    if best is None:
        return ""
    rec, m = best
    return f"`{rec['name']}` {m['delta_pct']:+.1f}% {primary} on {rec.get('platform', '?')} (p={m['p_value']:.3g})"


def pr_title(issue_number: int, target: str) -> str:
    return f"autoresearch: CPU optimizations for {target} (#{issue_number})"


def pr_body(report_md: str, issue_number: int, agent: str, kept: bool) -> str:
    link = f"Closes #{issue_number}" if kept else f"Refs #{issue_number}"
    return f"{report_md.rstrip()}\n\n---\n\n{AI_DISCLOSURE.format(agent=agent)}\n\n{link}\n"
