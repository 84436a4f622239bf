"""The one flow of the App and the Action: optimize, approve, cancel, status, bench, run, publish.

Both faces build a `Flow` for one repository from their own adapters (the table in `bot.ports`)
and hand it parsed commands (`handle`) or approved runs (`run`). Everything between a command
and a draft pull request happens here, once; the decisions are the pure modules' (`commands`
grammar, `approval` rules and state machine, `status` text), the research and the pipeline are
`jobs.api`'s.

A run, from the comment to the draft PR:
1. `optimize`: `.github/autoresearch.yml` is read at the default branch head and narrowed by the
   command's arguments (a bad file or argument is answered, nothing starts); the clone is
   researched and planned once (`jobs.api.prepare`, saved in the run folder); the record, the plan
   comment and the sticky status comment are written; if the requester may spend, the run is
   launched (the App enqueues it, the Action runs it in its own process); else it awaits approval
   under a plan id covering every field of the plan, and no clone is kept for it (`bot.planning`).
2. `run`: if the default branch still is at the planned base, the saved preparation is used (it is
   made again only on a machine that lacks it, e.g. a fresh Actions runner); if the branch moved,
   the new base is a new run, planned and awaiting approval. The approval must name this plan
   digest at this base. The job's environment is scrubbed of secrets, then the pipeline runs with
   the research handed over; a cancel stops it within one step; `Progress` keeps the record and
   the status comment current. The process running it holds its lease (`Launcher.hold`); a run
   whose worker was lost is resumed from its ledger by the next one (`resume`, `bot.execution`).
   `bot.planning` and `bot.execution` are handed ports, never the flow: they return what it does
   next (a preparation; `execution.Finish`, `Publish`, `TakeOver`, `Leave`); only it ends and publishes a run.
3. `publish`: `autoresearch/<run-id>` is pushed (to the configured fork, else the repository) and
   the issue's draft PR opened or updated; with nothing kept, the report becomes a comment.

Security kept here, in code: a token is asked for only by the git operation that needs it and
never kept; `jobs.guard.secrets.scrub_environment()` runs before any target code; only approvers and the
requester may cancel; an approval holds only for the plan id and base commit it was given for.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs import api
from jobs.api import Overrides, RunStopped, RunSummary, TargetConfig, run_branch
from jobs.guard.mdsafe import clip, code, md, rendered, spans

from . import approval as ap
from . import bench, execution, planning
from .commands import GRAMMAR
from .planning import run_id_for  # noqa: F401  (the run id's home is bot.planning)
from .ports import GitRemote, Launcher, HeldLease, Outcome, Place, RepoHost, Reply, RunStore, StopFailed, TokenProvider
from .progress import best_effort_status
from .record import IssuePR, RunRecord
from .routing import CommentCommand
from .status import (approve_names_plan, help_reply, login, pending_plan_kept, plan_body, plan_marker, pr_body, pr_title,
                     resumed_message, status_body, status_marker)

COMMENT_LIMIT = 60000


def push_target(fork_owner: str, config: TargetConfig, owner: str, name: str) -> tuple[str, str]:
    """(owner, name) to push the run's branch to: the repo config's `pull_request.fork`, else the
    app-wide fork owner (AUTORESEARCH_FORK_OWNER), else the repository itself."""
    fork = config.pull_request.fork
    if fork:
        fork_owner_, _, fork_name = fork.partition("/")
        return fork_owner_, fork_name or name
    return (fork_owner or owner), name


HANDLERS: dict[str, Callable[[Flow, CommentCommand], Outcome]] = {}


def handles(verb: str) -> Callable[[Callable], Callable]:
    """Registers the `Flow` method (or any `(flow, command) -> Outcome`) that answers `verb`, a verb
    of `bot.commands.GRAMMAR`: the grammar and its handlers stay one registry."""
    if verb not in GRAMMAR:
        raise ValueError(f"{verb!r} is not a verb of bot.commands.GRAMMAR: add it there first")

    def register(handler: Callable) -> Callable:
        HANDLERS[verb] = handler
        return handler
    return register


@dataclass
class Flow:
    place: Place
    store: RunStore
    gh: RepoHost
    token: TokenProvider
    launcher: Launcher
    git: GitRemote

    @property
    def repo(self) -> str:
        return f"{self.gh.owner}/{self.gh.repo}"

    @property
    def clones(self) -> planning.Clones:
        """What `bot.planning` is handed: the ports it works through, not the flow."""
        return planning.Clones(self.gh, self.git, self.token, self.place)

    def layout(self, run_id: str) -> api.RunLayout:
        return self.clones.layout(run_id)

    # -- commands --------------------------------------------------------------------------------
    def handle(self, cmd: CommentCommand) -> Outcome:
        """👀 on the comment, then its command; a `Reply` is answered on the issue."""
        if cmd.comment_id:
            self.gh.react(cmd.comment_id, "eyes")
        if cmd.command is None:
            self.gh.comment(cmd.issue_number, help_reply(cmd.error))
            return Outcome("help", message=cmd.error)
        handler = HANDLERS.get(cmd.command.verb)
        if handler is None:
            raise LookupError(f"no handler for `{cmd.command.verb}`: register one with bot.flow.handles")
        try:
            return handler(self, cmd)
        except Reply as reply:
            self.gh.comment(cmd.issue_number, reply.body)
            return Outcome("replied", message=str(reply).strip())

    @handles("optimize")
    def optimize(self, cmd: CommentCommand) -> Outcome:
        cur = self.store.current_run(self.repo, cmd.issue_number)
        if cur and cur.state in (ap.QUEUED, ap.RUNNING):
            raise Reply(md("autoresearch: run {} is already {}; `/autoresearch cancel` it first.\n", code(cur.run_id),
                           cur.state))
        if cur and cur.state == ap.AWAITING and cmd.author.lower() != cur.requester.lower() \
                and not self.is_approver(cmd.author, cur.approvers):
            raise Reply(pending_plan_kept(cur, cmd.author))      # an outsider cannot swap the plan
        overrides = cmd.command.overrides if cmd.command else Overrides()
        prep = planning.prepare(self.clones, cmd.issue_number, cmd.default_branch, overrides)   # Reply: what to fix
        ok = self.is_approver(cmd.author, list(prep.config.approvers))
        run_id = prep.layout.run_id
        with self.store.locked(self.repo, run_id):
            old = self.store.get_run(self.repo, run_id)
            if old and old.state in (ap.QUEUED, ap.RUNNING):
                raise Reply(md("autoresearch: run {} is already {}.\n", code(run_id), old.state))
            nonce = planning.same_plan_nonce(prep, old) or planning.new_nonce()
            plan = planning.plan_id(prep, self.repo, cmd.issue_number, overrides, nonce)
            decision = ap.decide_request(cmd.author, ok, prep.plan.over_budget, plan, prep.base)
            if cur and cur.state == ap.AWAITING and cur.run_id != run_id:
                self.store.update_run(self.repo, cur.run_id, state=ap.transition(cur.state, "cancel"),
                                      message=f"superseded by run `{run_id}`")
                planning.discard(self.layout(cur.run_id))
            rec = self._record(cmd.installation_id, cmd.issue_number, cmd.default_branch, cmd.author, overrides,
                               prep, decision, old, nonce)
            self.store.replace_run(rec)
            self.store.clear_cancel(self.repo, run_id)
            self.store.set_current(self.repo, cmd.issue_number, run_id)
        if decision.state != ap.QUEUED:
            planning.release_clone(prep.layout)          # nothing cloned stays for a plan nobody approved
        if cur and cur.run_id != run_id and cur.state == ap.AWAITING:
            self.refresh_status(cur.run_id)
        self.gh.upsert_comment(rec.issue, plan_marker(rec), plan_body(rec))   # the plan, before anything is spent
        self.refresh_status(run_id)
        if decision.state == ap.QUEUED:
            return self.launcher.launch(self.store, rec)
        return Outcome(rec.state, run_id, message=rec.message)

    @handles("approve")
    def approve(self, cmd: CommentCommand) -> Outcome:
        cur = self.store.current_run(self.repo, cmd.issue_number)
        if not cur or cur.state != ap.AWAITING:
            raise Reply(md("autoresearch: nothing on this issue is awaiting approval.\n"))
        plan = cmd.command.plan if cmd.command else ""
        if plan != cur.plan_digest:
            raise Reply(approve_names_plan(cur, plan))
        ok = self.is_approver(cmd.author, cur.approvers)
        with self.store.locked(self.repo, cur.run_id):
            cur = self.store.get_run(self.repo, cur.run_id)
            if cur.state != ap.AWAITING or cur.plan_digest != plan:
                raise Reply(md("autoresearch: plan {} of run {} is not awaiting approval.\n", code(plan),
                               code(cur.run_id)))
            d = ap.decide_approve(cur.state, cmd.author, ok, cur.plan_digest, cur.base_commit)
            if d.approval is None:
                raise Reply(md("autoresearch: {}.\n", spans(d.reason, at_start=False)))
            self.store.update_run(self.repo, cur.run_id, state=d.state, approval=d.approval,
                                  message=f"{d.reason} for plan `{cur.plan_digest}` at `{cur.base_commit[:12]}`")
        outcome = self.launcher.launch(self.store, self.store.get_run(self.repo, cur.run_id))   # before the status:
        self.refresh_status(cur.run_id)                                  # a GitHub blip cannot strand it
        return outcome

    @handles("cancel")
    def cancel(self, cmd: CommentCommand) -> Outcome:
        cur = self.store.current_run(self.repo, cmd.issue_number)
        if not cur or cur.state in ap.FINAL:
            raise Reply(md("autoresearch: there is no active run on this issue to cancel.\n"))
        ok = self.is_approver(cmd.author, cur.approvers)
        if not ap.may_cancel(cmd.author, cur.requester, ok):
            raise Reply(md("autoresearch: @{} may not cancel this run (only its requester or an approver can).\n",
                           login(cmd.author)))
        run_id, by = cur.run_id, cmd.author
        with self.store.locked(self.repo, run_id):
            self.store.request_cancel(self.repo, run_id)      # a running pipeline stops within one step
            cur = self.store.get_run(self.repo, run_id)
            self.launcher.withdraw(cur)
            if cur.state != ap.RUNNING:
                self.store.update_run(self.repo, run_id, state=ap.transition(cur.state, "cancel"),
                                      message=f"cancelled by @{by} before it started")
                planning.discard(self.layout(run_id))
            else:
                try:
                    what = self.launcher.stop(cur)
                except StopFailed as exc:
                    # Nothing of ours is running it any more (or we may not stop it): say so, do not
                    # leave the issue blocked by a run that no longer runs, nor its leftovers here.
                    self.store.update_run(self.repo, run_id, state=ap.transition(cur.state, "cancel"),
                                          phase="cancelled", message=f"cancelled by @{by}; {exc}")
                    api.clean_worktrees(self.layout(run_id))
                    api.drop_branches(self.layout(run_id))
                else:
                    self.store.update_run(self.repo, run_id, message=f"cancelling (requested by @{by}): {what} "
                                          "is being stopped and its machines released")
        self.refresh_status(run_id)
        rec = self.store.get_run(self.repo, run_id)
        return Outcome(rec.state, run_id)

    @handles("status")
    def status(self, cmd: CommentCommand) -> Outcome:
        cur = self.store.current_run(self.repo, cmd.issue_number)
        if not cur:
            raise Reply(help_reply("there is no run on this issue yet"))
        self.refresh_status(cur.run_id)
        return Outcome(cur.state, cur.run_id, pr_url=cur.pr_url)

    @handles("bench")
    def bench(self, cmd: CommentCommand) -> Outcome:
        return bench.request(self, cmd)

    # -- planning ----------------------------------------------------------------------------------
    def is_approver(self, login: str, approvers: list[str]) -> bool:
        perm, role = self.gh.permission(login)
        return ap.is_approver(login, perm, role, approvers)

    def _record(self, installation_id: int, issue: int, default_branch: str, requester: str, overrides: Overrides,
                prep: api.Preparation, decision: ap.ApprovalDecision, old: RunRecord | None, nonce: str) -> RunRecord:
        return RunRecord(
            run_id=prep.layout.run_id, repo=self.repo, owner=self.gh.owner, name=self.gh.repo,
            installation_id=installation_id, issue=issue, default_branch=default_branch, requester=requester,
            overrides=overrides, base_commit=prep.base, plan_nonce=nonce, plan_text=prep.plan.describe(),
            plan_digest=planning.plan_id(prep, self.repo, issue, overrides, nonce),
            over_budget=prep.plan.over_budget, state=decision.state, approvers=list(prep.config.approvers),
            n_hypotheses=prep.n_hypotheses, candidates=[c.name for c in prep.candidates], approval=decision.approval,
            wall_hours=prep.config.budget.wall_hours, message=decision.reason,
            experiments_total=prep.plan.experiments * max(1, len(prep.plan.platforms)),
            status_comment_id=old.status_comment_id if old else None, created=time.time())

    def replan(self, rec: RunRecord, prep: api.Preparation, why: str) -> Outcome:
        """The base or the plan changed since approval: post the new plan, awaiting approval again."""
        new_id = prep.layout.run_id
        with self.store.locked(self.repo, rec.run_id):
            nonce = planning.new_nonce()
            if new_id == rec.run_id:
                self.store.update_run(self.repo, rec.run_id, state=ap.transition(rec.state, "stale"), approval=None,
                                      plan_digest=planning.plan_id(prep, self.repo, rec.issue, rec.overrides, nonce),
                                      plan_nonce=nonce, plan_text=prep.plan.describe(),
                                      over_budget=prep.plan.over_budget, message=f"{why}: approval is needed again")
            else:
                self.store.update_run(self.repo, rec.run_id, state=ap.transition(rec.state, "cancel"),
                                      message=f"superseded by run `{new_id}` ({why})")
                planning.discard(self.layout(rec.run_id))
                d = ap.ApprovalDecision(ap.AWAITING, None, f"{why}: approval is needed again")
                self.store.replace_run(self._record(rec.installation_id, rec.issue, rec.default_branch, rec.requester,
                                                    rec.overrides, prep, d, self.store.get_run(self.repo, new_id),
                                                    nonce))
                self.store.set_current(self.repo, rec.issue, new_id)
        planning.release_clone(prep.layout)
        self.refresh_status(rec.run_id)
        new = self.store.get_run(self.repo, new_id)
        self.gh.upsert_comment(new.issue, plan_marker(new), plan_body(new))
        self.refresh_status(new_id)
        return Outcome(ap.AWAITING, new_id, step="approval", message=new.message)

    # -- the run ---------------------------------------------------------------------------------
    def run(self, rec: RunRecord) -> Outcome:
        """One approved run: its preparation (or a replan), start, scrub, pipeline, publish."""
        run_id = rec.run_id
        if rec.state != ap.QUEUED:
            return Outcome(rec.state, run_id, step="start")
        if self.store.cancel_requested(self.repo, run_id):
            self.finish(rec, "cancel", message="cancelled before it started")
            return Outcome(ap.CANCELLED, run_id, step="start")
        try:
            prep = planning.prepared(self.clones, rec)      # the saved one at its base, else a new run's
        except Reply as reply:
            self.finish(rec, "fail", phase="planning", message=str(reply).strip())
            return Outcome(ap.FAILED, run_id, step="prepare", message=str(reply).strip())
        except Exception as exc:       # GitHub or git unreachable: say so rather than stay "queued" forever
            self.finish(rec, "fail", phase="planning", message=f"❌ could not prepare the run: {str(exc)[:500]}")
            raise
        if not ap.may_start(rec.approval, planning.record_plan_id(prep, rec), prep.base):
            why = (f"the default branch moved from `{rec.base_commit[:12]}` to `{prep.base[:12]}`"
                   if prep.base != rec.base_commit else "the plan changed since it was approved")
            return self.replan(rec, prep, why)
        with self.store.locked(self.repo, run_id):
            cur = self.store.get_run(self.repo, run_id)
            lease = None
            if cur.state == ap.QUEUED and not self.store.cancel_requested(self.repo, run_id):
                lease = self.launcher.hold(cur)       # before `running`: a running run always has a holder
            if lease is None:
                return Outcome(cur.state, run_id, step="start")
            try:
                self.store.update_run(self.repo, run_id, state=ap.transition(cur.state, "start"), phase="starting",
                                      platforms=list(prep.plan.platforms), message="", worker=lease.holder,
                                      **self.launcher.running_fields())
            except BaseException:
                lease.release()
                raise
        return self.execute(self.store.get_run(self.repo, run_id), prep, lease)

    def resume(self, rec: RunRecord) -> Outcome:
        """A running run whose worker was lost: taken over from its ledger, or ended (`bot.execution`)."""
        run_id = rec.run_id
        # The lease first: until it is held, the sweepers take this job's time from its start as a sign
        # that it died too, and a slow status edit (GitHub under load) was counted as a second loss.
        with self.store.locked(self.repo, run_id):
            cur = self.store.get_run(self.repo, run_id)
            lease = self.launcher.hold(cur) if execution.resumable(cur) else None
        try:
            with best_effort_status():
                self.refresh_status(run_id)      # then the truth: its worker was lost, it resumes now
            if lease is None:
                return Outcome(cur.state if cur else "unknown", run_id, step="start")
            with self.store.locked(self.repo, run_id):
                cur = self.store.get_run(self.repo, run_id)
                self.store.update_run(self.repo, run_id, lost_at=0.0, worker=lease.holder, phase="resuming",
                                      message=resumed_message(cur), **self.launcher.running_fields())
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        handed_on = False
        try:
            step = execution.resume(cur, self.layout(run_id), self.place.executor,
                                    lambda: self.store.cancel_requested(self.repo, run_id))
            if not isinstance(step, execution.TakeOver):
                return self.carry_out(step)
            self.clones.checkout(self.layout(run_id), step.prep.base, cur.default_branch)   # nothing is fetched
            handed_on = True
        finally:
            if not handed_on:
                lease.release()
        return self.execute(self.store.get_run(self.repo, run_id), step.prep, lease)

    def execute(self, rec: RunRecord, prep: api.Preparation, lease: HeldLease) -> Outcome:
        """The pipeline of a run this process holds (`bot.execution.execute`), then its publication;
        the lease goes after the record's last write."""
        try:
            step = execution.execute(rec, prep, lease, store=self.store, place=self.place,
                                     refresh_status=self.refresh_status,
                                     cancel_requested=lambda: self.store.cancel_requested(self.repo, rec.run_id),
                                     published=lambda: self.published(rec, prep),
                                     interrupts_cancel=self.launcher.interrupts_cancel)
            if isinstance(step, execution.Publish):
                try:
                    fields = self.publish(rec, prep, step.summary)   # no process of the target is left
                except Exception as exc:
                    step = execution.publish_failed(rec, exc)
                else:
                    step = execution.run_done(rec, prep, step.summary, fields)
            return self.carry_out(step)
        finally:
            lease.release()

    def carry_out(self, step: execution.Finish | execution.Leave) -> Outcome:
        """What `bot.execution` returned: a `Finish` is this flow's `finish`; a `Leave` writes nothing."""
        if isinstance(step, execution.Finish):
            self.finish(step.rec, step.event, **step.fields)
        return step.outcome

    def push_place(self, rec: RunRecord, prep: api.Preparation, own_branch: str) -> tuple[str, str, str]:
        """(owner, name, branch) the run's result is pushed to: `push_target`'s repository, and the
        issue's existing PR's branch (a rerun updates that PR), else the run's own branch."""
        existing = self.store.issue_pr(self.repo, rec.issue)
        return (*push_target(self.place.fork_owner, prep.config, rec.owner, rec.name),
                existing.branch if existing else own_branch)

    def published(self, rec: RunRecord, prep: api.Preparation) -> api.Published:
        """Where a maintainer fetches this run's result, told to the run before it starts so that
        its report's Reproduce block names the repository's URL and the branch's, never the worker's
        clone (the same place `publish` pushes to)."""
        owner, name, branch = self.push_place(rec, prep, run_branch(rec.run_id))
        return api.Published(clone_url=self.place.clone_url(self.gh.owner, self.gh.repo),   # what the run cloned
                             head_url=self.place.clone_url(owner, name), head_branch=branch,
                             candidates=api.candidates_in_repo(prep))

    def publish(self, rec: RunRecord, prep: api.Preparation, summary: RunSummary | RunStopped) -> dict:
        """Push the run's branch and open (or update) the issue's draft PR; or report without a PR.
        Returns the record fields to set. `summary` comes from `api.start`, which returns only once
        every process the run started is gone: the token's git push never runs next to target code."""
        if isinstance(summary, RunStopped):     # nothing to try: research.md says what was scanned and what to do
            research_md = prep.layout.out / "research.md"     # rendered by jobs.report.report through jobs.guard.mdsafe
            research = rendered(research_md.read_text(encoding="utf-8") if research_md.is_file() else "")
            self.gh.comment(rec.issue, clip(md("autoresearch run {}: nothing was measured and no pull request was "
                                               "opened: {}.\n\n{}", code(rec.run_id), spans(summary.why, at_start=False),
                                               research), COMMENT_LIMIT))
            return {"message": "nothing to try; the research is in a comment below"}
        report = rendered((prep.layout.out / "pr.md").read_text(encoding="utf-8"))   # jobs.report.report's, as is
        kept = summary.kept
        if not kept:
            self.gh.comment(rec.issue, clip(md("autoresearch run {}: no change was kept, so no pull request was opened. "
                                               "The report:\n\n{}", code(rec.run_id), report), COMMENT_LIMIT))
            return {"message": "no change was kept; the report is in a comment below"}
        fork_owner, fork_name, branch = self.push_place(rec, prep, summary.branch)
        existing = self.store.issue_pr(self.repo, rec.issue)
        self.git.push(self.place.clone_url(fork_owner, fork_name), prep.layout.clone,
                      f"refs/heads/{summary.branch}", branch, self.token)
        body = clip(pr_body(report, rec.issue, prep.config.agent, kept), COMMENT_LIMIT)
        title = pr_title(rec.issue, summary.target or rec.name)
        if existing:
            url, number = self.gh.update_pr(existing.number, title, body), existing.number
        else:
            head = f"{fork_owner}:{branch}" if fork_owner != rec.owner else branch
            same_owner_fork = fork_owner == rec.owner and fork_name != rec.name
            number, url = self.gh.create_draft_pr(title, head, rec.default_branch, body,
                                                  head_repo=f"{fork_owner}/{fork_name}" if same_owner_fork else "")
            self.store.set_issue_pr(self.repo, rec.issue, IssuePR(number, url, branch))
        return {"pr_url": url, "pr_number": number, "message": f"draft pull request: {url}"}

    def run_bench(self, cmd: CommentCommand) -> Outcome:
        """Re-measure a bot PR's head against its base (`bot.bench`)."""
        return bench.run(self, cmd)

    # -- record and status -------------------------------------------------------------------------
    def finish(self, rec: RunRecord, event: str, **fields) -> None:
        """A state transition of the run (validated by the state machine), then the status comment."""
        with self.store.locked(self.repo, rec.run_id):
            cur = self.store.get_run(self.repo, rec.run_id)
            self.store.update_run(self.repo, rec.run_id, state=ap.transition(cur.state, event), **fields)
        with best_effort_status():
            self.refresh_status(rec.run_id)

    def refresh_status(self, run_id: str) -> None:
        # Edits of one status comment are serialised, each rendering the record read inside the lock:
        # a command's edit rendered from a record that a worker then ended could otherwise land after
        # the worker's final edit, leaving "running" on a cancelled run. Its own lock (not the run's),
        # since callers may hold that one, and a short one (`Store.status_locked`).
        with self.store.status_locked(self.repo, run_id):
            rec = self.store.get_run(self.repo, run_id)
            if rec is None:
                return
            cid = self.gh.upsert_comment(rec.issue, status_marker(run_id), status_body(rec), rec.status_comment_id)
            if cid != rec.status_comment_id:
                self.store.update_run(self.repo, run_id, status_comment_id=cid)


_unanswered = set(GRAMMAR) - set(HANDLERS)
if _unanswered:            # a verb the grammar parses but nobody answers: fail at import, not on a comment
    raise ImportError(f"bot.flow has no handler for {sorted(_unanswered)}")
