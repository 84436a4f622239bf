"""RQ jobs: the imperative shell that ties commands, approvals, GitHub, git and the pipeline.

Each job is a plain importable function of plain data (RQ style) and builds its adapters from
the environment (`Settings.from_env`). The decisions themselves live in the pure modules:
`commands` (grammar), `approval` (who may spend, state machine), `status` (text).

Maintainer candidates: besides what research finds, every `*.patch` under
`.github/autoresearch/candidates/` on the default branch is evaluated as one hypothesis (the
pipeline's `--candidate` mechanism), so maintainers can queue their own ideas for measurement.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs import ledger, secrets
from jobs.cloud.catalog import hourly_price
from jobs.config import CONFIG_PATH, ConfigError, TargetConfig, parse_config
from jobs.pipeline import Run, RunCancelled, RunError, RunOptions, apply_overrides
from jobs.plan import Plan, make_plan
from jobs.research.offline import research

from . import approval as ap
from . import gitclone, jobqueue
from .github import RepoClient, installation_token
from .routing import CommentCommand
from .settings import Settings
from .status import (PLAN_MARKER, best_line, config_error_reply, help_reply, plan_body, pr_body, pr_title,
                     status_body, status_marker)
from .store import Store, connect

log = logging.getLogger("autoresearch.bot")
CANDIDATES_DIR = ".github/autoresearch/candidates"
COMMENT_LIMIT = 60000


class Reply(Exception):
    """Stop handling and answer the issue with this text."""


@dataclass
class Ctx:
    s: Settings
    store: Store
    gh: RepoClient
    cmd: CommentCommand

    @property
    def repo(self) -> str:
        return self.cmd.full_name


@dataclass
class Prepared:
    run_id: str
    base: str
    config: TargetConfig
    plan: Plan
    n_hypotheses: int
    candidates: list[Path]
    root: Path

    @property
    def clone(self) -> Path:
        return self.root / "repo"


def _connect(s: Settings):
    return connect(s.redis_url)


def run_id_for(issue: int, base: str, overrides: dict) -> str:
    """Stable per (issue, base commit, command arguments): a rerun of the same request resumes
    the same run (finished experiments are never re-run or paid for twice)."""
    rid = f"{issue}-{base[:7]}"
    if overrides:
        rid += "-" + hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:4]
    return rid


def run_options(p: Prepared | None, overrides: dict, **kw) -> RunOptions:
    return RunOptions(primary=overrides.get("metric"), platforms=overrides.get("platforms"),
                      budget_usd=overrides.get("budget"), **kw)


def prepare(s: Settings, gh: RepoClient, installation_id: int, default_branch: str, issue: int,
            overrides: dict, base: str | None = None) -> Prepared:
    """Config from the default branch, research on a clone, and the plan. Raises Reply."""
    base = base or gh.head_sha(default_branch)
    text = gh.file_text(CONFIG_PATH, base)
    if text is None:
        raise Reply(config_error_reply(CONFIG_PATH, [("(file)", "not found on the default branch; add it "
                                                       "(see the autoresearch docs)")]))
    try:
        config = parse_config(text, CONFIG_PATH)
    except ConfigError as exc:
        raise Reply(config_error_reply(CONFIG_PATH, exc.problems)) from None
    try:
        config = apply_overrides(config, run_options(None, overrides, target=Path("."), out=Path("."), run_id="-"))
    except RunError as exc:
        raise Reply(help_reply(str(exc))) from None
    run_id = run_id_for(issue, base, overrides)
    root = s.workdir / gh.owner / gh.repo / run_id
    token = installation_token(s, installation_id)
    gitclone.checkout(s.clone_url(gh.owner, gh.repo), root / "repo", base, token, ref=default_branch)
    del token
    n = len(research(root / "repo", config).hypotheses) if config.agent != "none" else 0
    cand_dir = root / "candidates"
    shutil.rmtree(cand_dir, ignore_errors=True)
    cand_dir.mkdir(parents=True)
    candidates = []
    for patch in sorted((root / "repo" / CANDIDATES_DIR).glob("*.patch")):
        shutil.copy2(patch, cand_dir / patch.name)
        candidates.append(cand_dir / patch.name)
    try:
        plan = make_plan(config, n + len(candidates), executor=s.executor, hourly_usd=hourly_price)
    except Exception as exc:   # e.g. no price for an instance type
        raise Reply(f"autoresearch: could not price the plan: {exc}\n") from None
    return Prepared(run_id, base, config, plan, n, candidates, root)


# -- status ----------------------------------------------------------------------------------------
def refresh_status(store: Store, gh: RepoClient, repo: str, run_id: str) -> None:
    rec = store.get_run(repo, run_id)
    if rec is None:
        return
    cid = gh.upsert_comment(rec["issue"], status_marker(run_id), status_body(rec), rec.get("status_comment_id"))
    if cid != rec.get("status_comment_id"):
        store.update_run(repo, run_id, status_comment_id=cid)


def new_record(ctx_repo: str, cmd: CommentCommand, p: Prepared, decision: ap.Decision, old: dict | None) -> dict:
    platforms = list(p.plan.platforms)
    return {
        "run_id": p.run_id, "repo": ctx_repo, "owner": cmd.owner, "name": cmd.repo,
        "installation_id": cmd.installation_id, "issue": cmd.issue_number, "default_branch": cmd.default_branch,
        "requester": cmd.author, "overrides": cmd.command.overrides if cmd.command else {},
        "base_commit": p.base, "plan_digest": p.plan.digest(), "plan_text": p.plan.describe(),
        "over_budget": p.plan.over_budget, "approvers": list(p.config.approvers),
        "n_hypotheses": p.n_hypotheses, "candidates": [c.name for c in p.candidates],
        "state": decision.state, "approval": decision.approval.to_dict() if decision.approval else None,
        "phase": "planned", "experiments_done": 0, "experiments_total": p.plan.experiments * max(1, len(platforms)),
        "best": "", "cost_usd": 0.0, "message": decision.reason, "jobs": [],
        "status_comment_id": (old or {}).get("status_comment_id"), "created": time.time(),
        "wall_hours": p.config.budget.wall_hours,
    }


def post_plan(gh: RepoClient, rec: dict) -> None:
    marker = PLAN_MARKER.format(run_id=rec["run_id"], digest=rec["plan_digest"])
    body = plan_body(rec["run_id"], rec["plan_text"], rec["plan_digest"], rec["base_commit"], rec["state"],
                     rec["message"], rec["n_hypotheses"], rec["candidates"])
    gh.upsert_comment(rec["issue"], marker, body)


def _enqueue_run(store: Store, rec: dict) -> None:
    job_id = jobqueue.enqueue_run(store.r, rec["repo"], rec["run_id"], rec.get("wall_hours", 4.0))
    store.update_run(rec["repo"], rec["run_id"], jobs=list(rec.get("jobs", [])) + [job_id])


def approver(ctx: Ctx, login: str, approvers: list[str]) -> bool:
    perm, role = ctx.gh.permission(login)
    return ap.is_approver(login, perm, role, approvers)


class WorkerHost:
    """Where an approved run happens, for `cmd_optimize` / `cmd_approve` / `run_approved`: the App
    enqueues it on RQ and a worker runs it (`execute_run`). The Action's `RunnerHost`
    (`bot.action`) runs it at once in its own process instead."""

    catches: tuple[type[BaseException], ...] = (Exception,)   # what the pipeline may raise that ends a run
    marks_prepare_errors = True    # a clone/GitHub error while preparing fails the run before propagating

    def queued(self, ctx: Ctx, rec: dict) -> None:
        """`optimize` queued the run at once (its plan and status are on the issue)."""
        _enqueue_run(ctx.store, rec)

    def approved(self, ctx: Ctx, rec: dict) -> None:
        """`approve` queued the run (before the status is refreshed: a GitHub blip cannot strand it)."""
        _enqueue_run(ctx.store, rec)

    def result(self, ctx: Ctx, rec: dict) -> Any:
        """What the handler returns, last: the run's state."""
        return rec["state"]

    def start_fields(self) -> dict[str, Any]:
        """Extra run-record fields set when the run starts."""
        return {}

    def saved(self, store: Any) -> None:
        """The run record changed status; Redis has it already."""

    def before_scrub(self, s: Settings) -> None:
        """Last chance to use the environment's credentials before `scrub_environment`."""

    def interrupted(self, exc: BaseException) -> bool:
        """Does the pipeline's exception mean the run was cancelled (else it failed)?"""
        return isinstance(exc, RunCancelled)


WORKER = WorkerHost()


# -- command handlers ------------------------------------------------------------------------------
def cmd_optimize(ctx: Ctx, host: WorkerHost = WORKER) -> Any:
    cmd = ctx.cmd
    cur = ctx.store.current_run(ctx.repo, cmd.issue_number)
    if cur and cur["state"] in (ap.QUEUED, ap.RUNNING):
        raise Reply(f"autoresearch: run `{cur['run_id']}` is already {cur['state']}; "
                    "`/autoresearch cancel` it first.\n")
    p = prepare(ctx.s, ctx.gh, cmd.installation_id, cmd.default_branch, cmd.issue_number,
                cmd.command.overrides)
    config_approvers = list(p.config.approvers)
    ok = approver(ctx, cmd.author, config_approvers)
    decision = ap.decide_request(cmd.author, ok, p.plan.over_budget, p.plan.digest(), p.base)
    with ctx.store.locked(ctx.repo, p.run_id):
        old = ctx.store.get_run(ctx.repo, p.run_id)
        if old and old["state"] in (ap.QUEUED, ap.RUNNING):
            raise Reply(f"autoresearch: run `{p.run_id}` is already {old['state']}.\n")
        if cur and cur["state"] == ap.AWAITING and cur["run_id"] != p.run_id:
            ctx.store.update_run(ctx.repo, cur["run_id"], state=ap.CANCELLED,
                                 message=f"superseded by run `{p.run_id}`")
        rec = new_record(ctx.repo, cmd, p, decision, old)
        ctx.store.replace_run(ctx.repo, rec)
        ctx.store.clear_cancel(ctx.repo, p.run_id)
        ctx.store.set_current(ctx.repo, cmd.issue_number, p.run_id)
    if cur and cur["run_id"] != p.run_id and cur["state"] == ap.AWAITING:
        refresh_status(ctx.store, ctx.gh, ctx.repo, cur["run_id"])
    post_plan(ctx.gh, rec)          # the plan is on the issue before anything is spent
    refresh_status(ctx.store, ctx.gh, ctx.repo, p.run_id)
    if decision.state == ap.QUEUED:
        host.queued(ctx, rec)
    return host.result(ctx, rec)


def cmd_approve(ctx: Ctx, host: WorkerHost = WORKER) -> Any:
    cur = ctx.store.current_run(ctx.repo, ctx.cmd.issue_number)
    if not cur or cur["state"] != ap.AWAITING:
        raise Reply("autoresearch: nothing on this issue is awaiting approval.\n")
    ok = approver(ctx, ctx.cmd.author, cur.get("approvers", []))
    with ctx.store.locked(ctx.repo, cur["run_id"]):
        cur = ctx.store.get_run(ctx.repo, cur["run_id"])
        if cur["state"] != ap.AWAITING:
            raise Reply(f"autoresearch: run `{cur['run_id']}` is {cur['state']}, not awaiting approval.\n")
        d = ap.decide_approve(cur["state"], ctx.cmd.author, ok, cur["plan_digest"], cur["base_commit"])
        if d.approval is None:
            raise Reply(f"autoresearch: {d.reason}.\n")
        ctx.store.update_run(ctx.repo, cur["run_id"], state=d.state, approval=d.approval.to_dict(),
                             message=f"{d.reason} for plan `{cur['plan_digest']}` at `{cur['base_commit'][:12]}`")
    rec = ctx.store.get_run(ctx.repo, cur["run_id"])
    host.approved(ctx, rec)
    refresh_status(ctx.store, ctx.gh, ctx.repo, cur["run_id"])
    return host.result(ctx, rec)


def cmd_cancel(ctx: Ctx) -> str:
    cur = ctx.store.current_run(ctx.repo, ctx.cmd.issue_number)
    if not cur or cur["state"] in ap.FINAL:
        raise Reply("autoresearch: there is no active run on this issue to cancel.\n")
    ok = approver(ctx, ctx.cmd.author, cur.get("approvers", []))
    if not ap.may_cancel(ctx.cmd.author, cur.get("requester", ""), ok):
        raise Reply(f"autoresearch: @{ctx.cmd.author} may not cancel this run (only its requester or an "
                    "approver can).\n")
    run_id = cur["run_id"]
    with ctx.store.locked(ctx.repo, run_id):
        ctx.store.request_cancel(ctx.repo, run_id)      # a running pipeline stops within one step
        cur = ctx.store.get_run(ctx.repo, run_id)
        jobqueue.cancel_queued(ctx.store.r, cur.get("jobs", []))
        if cur["state"] == ap.RUNNING:
            ctx.store.update_run(ctx.repo, run_id, message=f"cancelling (requested by @{ctx.cmd.author}); "
                                 "the running step is being stopped and its machines released")
        else:
            ctx.store.update_run(ctx.repo, run_id, state=ap.transition(cur["state"], "cancel"),
                                 message=f"cancelled by @{ctx.cmd.author} before it started")
    refresh_status(ctx.store, ctx.gh, ctx.repo, run_id)
    return "cancel"


def cmd_status(ctx: Ctx) -> str:
    cur = ctx.store.current_run(ctx.repo, ctx.cmd.issue_number)
    if not cur:
        raise Reply(help_reply("there is no run on this issue yet"))
    refresh_status(ctx.store, ctx.gh, ctx.repo, cur["run_id"])
    return "status"


def cmd_bench(ctx: Ctx) -> str:
    pull = ctx.gh.pull(ctx.cmd.issue_number)
    if not pull.head_ref.startswith("autoresearch/"):
        raise Reply("autoresearch: `bench` re-measures autoresearch pull requests only (branch "
                    "`autoresearch/...`).\n")
    if not approver(ctx, ctx.cmd.author, []):
        raise Reply(f"autoresearch: @{ctx.cmd.author} may not start a bench (needs write access).\n")
    jobqueue.enqueue_bench(ctx.store.r, ctx.cmd.to_dict())
    ctx.gh.comment(ctx.cmd.issue_number, f"autoresearch: bench of `{pull.head_sha[:12]}` against "
                   f"`{pull.base_sha[:12]}` queued.\n")
    return "bench"


HANDLERS = {"optimize": cmd_optimize, "approve": cmd_approve, "cancel": cmd_cancel, "status": cmd_status,
            "bench": cmd_bench}


def handle_comment(data: dict) -> str:
    """RQ job for one comment command: 👀 first, then the command's handler."""
    s = Settings.from_env()
    cmd = CommentCommand.from_dict(data)
    gh = RepoClient(s, cmd.installation_id, cmd.owner, cmd.repo)
    gh.react(cmd.comment_id, "eyes")
    if cmd.verb is None:
        gh.comment(cmd.issue_number, help_reply(cmd.error))
        return "help"
    ctx = Ctx(s, Store(_connect(s)), gh, cmd)
    try:
        return HANDLERS[cmd.verb](ctx)
    except Reply as reply:
        gh.comment(cmd.issue_number, str(reply))
        return "replied"


# -- the run ---------------------------------------------------------------------------------------
class Progress:
    """Pipeline events -> run record fields -> the sticky status comment (throttled edits)."""

    def __init__(self, store: Store, gh: RepoClient, rec: dict, out: Path, primary: str, interval: float = 2.0):
        self.store, self.gh, self.rec, self.out, self.primary = store, gh, rec, out, primary
        self.interval = interval
        self.done = 0
        self.platforms = max(1, len(rec.get("platforms") or []) or 1)
        self.last = 0.0

    def __call__(self, event: dict) -> None:
        kind = event.get("type")
        fields: dict[str, Any] = {}
        force = False
        if kind == "phase":
            fields["phase"] = event["phase"] + (f" ({event['platform']})" if event.get("platform") else "")
            if event["phase"] == "experiments" and "total" in event:
                fields["experiments_total"] = event["total"] * self.platforms
            force = True
        elif kind == "experiment_done" and not str(event.get("name", "")).startswith("stack"):
            self.done += 1
            fields["experiments_done"] = self.done
            fields["best"] = best_line(ledger.read(self.out), self.primary)
            force = True
        elif kind == "experiment_start" and str(event.get("name", "")).startswith("stack"):
            fields["phase"] = "stack (re-measuring the kept changes together)"
            force = True
        elif kind == "progress":
            fields["phase_detail"] = f"{event.get('name')}: {event.get('message')}"
        elif kind == "done":
            fields["phase"] = "report"
            force = True
        state = ledger.load_state(self.out) or {}
        fields["cost_usd"] = state.get("cost_usd", 0.0)
        try:
            self.store.update_run(self.rec["repo"], self.rec["run_id"], **fields)
            if force or time.monotonic() - self.last > self.interval:
                self.last = time.monotonic()
                refresh_status(self.store, self.gh, self.rec["repo"], self.rec["run_id"])
        except Exception as exc:     # a GitHub or Redis blip must not kill a long run
            log.warning("status update failed: %s", exc)


def scrub_environment() -> None:
    """This job's process runs target code next: drop every secret and App setting."""
    secrets.scrub_environment()


def finish(store: Store, gh: RepoClient, rec: dict, event: str, **fields: Any) -> None:
    with store.locked(rec["repo"], rec["run_id"]):
        cur = store.get_run(rec["repo"], rec["run_id"])
        store.update_run(rec["repo"], rec["run_id"], state=ap.transition(cur["state"], event), **fields)
    try:
        refresh_status(store, gh, rec["repo"], rec["run_id"])
    except Exception as exc:
        log.warning("status update failed: %s", exc)


def replan(s: Settings, store: Store, gh: RepoClient, rec: dict, p: Prepared, why: str) -> str:
    """Plan or base changed since approval: post the new plan, awaiting approval again."""
    with store.locked(rec["repo"], rec["run_id"]):
        if p.run_id == rec["run_id"]:
            store.update_run(rec["repo"], rec["run_id"], state=ap.transition(rec["state"], "stale"), approval=None,
                             plan_digest=p.plan.digest(), plan_text=p.plan.describe(), over_budget=p.plan.over_budget,
                             message=f"{why}: approval is needed again")
        else:
            store.update_run(rec["repo"], rec["run_id"], state=ap.transition(rec["state"], "cancel"),
                             message=f"superseded by run `{p.run_id}` ({why})")
            cmd = CommentCommand(delivery="", installation_id=rec["installation_id"], owner=rec["owner"],
                                 repo=rec["name"], default_branch=rec["default_branch"], issue_number=rec["issue"],
                                 is_pull_request=False, comment_id=0, author=rec["requester"], verb="optimize",
                                 args={"verb": "optimize", "target": "cpu", "metric": rec["overrides"].get("metric"),
                                       "platforms": rec["overrides"].get("platforms"),
                                       "budget": rec["overrides"].get("budget")})
            d = ap.Decision(ap.AWAITING, None, f"{why}: approval is needed again")
            store.replace_run(rec["repo"], new_record(rec["repo"], cmd, p, d, store.get_run(rec["repo"], p.run_id)))
            store.set_current(rec["repo"], rec["issue"], p.run_id)
    refresh_status(store, gh, rec["repo"], rec["run_id"])
    new = store.get_run(rec["repo"], p.run_id)
    post_plan(gh, new)
    refresh_status(store, gh, rec["repo"], p.run_id)
    return "replanned"


@dataclass
class RunOutcome:
    """How `run_approved` ended: `step` is where (prepare, approval, start, run, publish, done)."""
    state: str
    run_id: str
    step: str
    error: BaseException | None = None      # what failed the run (not raised: the host decides)
    summary: dict | None = None
    fields: dict | None = None              # publish's record fields (pr_url, ...)
    out: Path | None = None


def run_approved(s: Settings, store: Any, gh: RepoClient, rec: dict, host: WorkerHost) -> RunOutcome:
    """One queued run: prepare, check the approval still holds (else replan), start, scrub the
    environment, run the pipeline (a cancel request stops it), record the status, publish."""
    repo, run_id = rec["repo"], rec["run_id"]
    try:
        p = prepare(s, gh, rec["installation_id"], rec["default_branch"], rec["issue"], rec["overrides"])
    except Reply as reply:
        finish(store, gh, rec, "fail", phase="planning", message=str(reply).strip())
        return RunOutcome(ap.FAILED, run_id, "prepare")
    except Exception as exc:       # GitHub or git unreachable: say so rather than stay "queued" forever
        if host.marks_prepare_errors:
            finish(store, gh, rec, "fail", phase="planning",
                   message=f"❌ could not prepare the run: {str(exc)[:500]}")
        raise
    approval = ap.Approval.from_dict(rec.get("approval"))
    if not ap.may_start(approval, p.plan.digest(), p.base):
        why = ("the default branch moved from `%s` to `%s`" % (rec["base_commit"][:12], p.base[:12])
               if p.base != rec["base_commit"] else "the plan changed since it was approved")
        replan(s, store, gh, rec, p, why)
        return RunOutcome(ap.AWAITING, p.run_id, "approval")
    with store.locked(repo, run_id):
        cur = store.get_run(repo, run_id)
        if cur["state"] != ap.QUEUED or store.cancel_requested(repo, run_id):
            return RunOutcome(cur["state"], run_id, "start")
        store.update_run(repo, run_id, state=ap.transition(cur["state"], "start"), phase="starting",
                         platforms=list(p.plan.platforms), message="", **host.start_fields())
    host.saved(store)
    rec = store.get_run(repo, run_id)
    refresh_status(store, gh, repo, run_id)
    out = p.root / "out"
    host.before_scrub(s)
    scrub_environment()
    options = run_options(p, rec["overrides"], target=p.clone, out=out, run_id=run_id, agent=p.config.agent,
                          candidates=p.candidates, executor=s.executor)
    progress = Progress(store, gh, rec, out, p.config.primary.name)
    try:
        summary = Run(options, on_event=progress, should_stop=lambda: store.cancel_requested(repo, run_id)).execute()
    except host.catches as exc:
        if not host.interrupted(exc):
            finish(store, gh, rec, "fail", message=f"❌ the run failed: {str(exc)[:1500]}")
            host.saved(store)
            return RunOutcome(ap.FAILED, run_id, "run", error=exc)
        done = len(ledger.finished(out)) if out.exists() else 0
        finish(store, gh, rec, "cancelled", phase="cancelled",
               message=f"🛑 cancelled: jobs stopped and machines released; {done} finished experiment(s) stay on "
                       "record in the ledger")
        host.saved(store)
        return RunOutcome(ap.CANCELLED, run_id, "run")
    try:
        fields = publish(s, store, gh, rec, p, summary, out)
    except Exception as exc:
        finish(store, gh, rec, "fail", message=f"❌ publishing the result failed: {str(exc)[:1500]}")
        host.saved(store)
        return RunOutcome(ap.FAILED, run_id, "publish", error=exc)
    finish(store, gh, rec, "finish", phase="done", cost_usd=summary.get("cost_usd", 0.0), **fields)
    host.saved(store)
    return RunOutcome(ap.DONE, run_id, "done", summary=summary, fields=fields, out=out)


def execute_run(repo: str, run_id: str) -> str:
    """RQ job: one approved run, from clone to draft PR."""
    s = Settings.from_env()
    s.private_key()                                   # fail early, before any spending
    store = Store(_connect(s))
    rec = store.get_run(repo, run_id)
    if rec is None or rec["state"] != ap.QUEUED:
        return f"not started: run is {rec['state'] if rec else 'unknown'}"
    gh = RepoClient(s, rec["installation_id"], rec["owner"], rec["name"])
    if store.cancel_requested(repo, run_id):
        finish(store, gh, rec, "cancel", message="cancelled before it started")
        return "cancelled"
    o = run_approved(s, store, gh, rec, WORKER)
    if o.error is not None and not (o.step == "run" and isinstance(o.error, (RunError, ConfigError))):
        raise o.error                 # the run is marked failed; RQ records the crash
    if o.step == "approval":
        return "replanned"
    if o.step == "start":
        return f"not started: run is {o.state}"
    return {ap.FAILED: "failed", ap.CANCELLED: "cancelled", ap.DONE: "done"}[o.state]


def push_target(s: Settings, config, rec: dict) -> tuple[str, str]:
    """(owner, name) to push the run's branch to: the repo config's `pull_request.fork`, else the
    app-wide AUTORESEARCH_FORK_OWNER, else the repository itself."""
    fork = config.pull_request.fork
    if fork:
        owner, _, name = fork.partition("/")
        return owner, name or rec["name"]
    return (s.fork_owner or rec["owner"]), rec["name"]


def publish(s: Settings, store: Store, gh: RepoClient, rec: dict, p: Prepared, summary: dict, out: Path) -> dict:
    """Push the run's branch and open (or update) the issue's draft PR; or report without a PR."""
    report = (out / "pr.md").read_text(encoding="utf-8")
    kept = any(st.get("status") == "keep" for st in summary.get("stacks", {}).values())
    if not kept:
        gh.comment(rec["issue"], (f"autoresearch run `{rec['run_id']}`: no change was kept, so no pull request "
                                  f"was opened. The report:\n\n{report}")[:COMMENT_LIMIT])
        return {"message": "no change was kept; the report is in a comment below"}
    existing = store.issue_pr(rec["repo"], rec["issue"])
    branch = existing["branch"] if existing else summary["branch"]
    fork_owner, fork_name = push_target(s, p.config, rec)
    token = installation_token(s, rec["installation_id"])
    gitclone.push(s.clone_url(fork_owner, fork_name), p.clone, f"refs/heads/{summary['branch']}", branch, token)
    del token
    body = pr_body(report, rec["issue"], p.config.agent, kept)[:COMMENT_LIMIT]
    title = pr_title(rec["issue"], summary.get("target", rec["name"]))
    if existing:
        url = gh.update_pr(existing["number"], title, body)
        number = existing["number"]
    else:
        head = f"{fork_owner}:{branch}" if fork_owner != rec["owner"] else branch
        number, url = gh.create_draft_pr(title, head, rec["default_branch"], body)
        store.set_issue_pr(rec["repo"], rec["issue"], {"number": number, "url": url, "branch": branch})
    return {"pr_url": url, "pr_number": number, "message": f"draft pull request: {url}"}


def execute_bench(data: dict) -> str:
    """RQ job: re-measure a bot PR's head against its base (one candidate: the PR's diff)."""
    s = Settings.from_env()
    cmd = CommentCommand.from_dict(data)
    gh = RepoClient(s, cmd.installation_id, cmd.owner, cmd.repo)
    pull = gh.pull(cmd.issue_number)
    run_id = f"bench-{pull.number}-{pull.head_sha[:7]}"
    root = s.workdir / cmd.owner / cmd.repo / run_id
    token = installation_token(s, cmd.installation_id)
    url = s.clone_url(cmd.owner, cmd.repo)
    gitclone.checkout(url, root / "repo", pull.base_sha, token, ref=pull.base_ref)
    head_url = s.clone_url(s.fork_owner, cmd.repo) if s.fork_owner else url
    head = gitclone.fetch_ref(head_url, root / "repo", pull.head_ref, token)
    del token
    patch = root / f"{pull.head_ref.replace('/', '-')}.patch"
    patch.write_text(gitclone.diff(root / "repo", pull.base_sha, head) + "\n")
    scrub_environment()
    try:
        summary = Run(RunOptions(target=root / "repo", out=root / "out", run_id=run_id, agent="none",
                                 candidates=[patch], executor=s.executor)).execute()
    except (RunError, ConfigError) as exc:
        gh.comment(cmd.issue_number, f"autoresearch bench failed: {str(exc)[:1500]}\n")
        return "failed"
    report = (root / "out" / "pr.md").read_text(encoding="utf-8")
    gh.comment(cmd.issue_number, (f"autoresearch bench of `{head[:12]}` against `{pull.base_sha[:12]}` "
                                  f"(run `{run_id}`, cost {summary.get('cost_usd', 0):.2f} USD):\n\n{report}"
                                  )[:COMMENT_LIMIT])
    return "done"
