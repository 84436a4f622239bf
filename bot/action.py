"""`autoresearch action`: the GitHub Action's entry point (action.yml runs it in a workflow).

It does what the App does for one event, in one process on the runner, with the workflow's
`GITHUB_TOKEN` instead of an installation token:

- reads `GITHUB_EVENT_NAME` / `GITHUB_EVENT_PATH`: `issue_comment` (created), `issues` (labeled
  with the trigger label), `workflow_dispatch` (inputs `issue` and `command`);
- turns the event into the App's `CommentCommand` with the App's grammar (`bot.commands`) and
  routing (`bot.routing.route`, which also ignores bots and edits);
- decides with the App's permission rules (`bot.approval`, the collaborator-permission API
  through `bot.github.RepoClient`): write access or a configured approver starts the run at
  once; anyone else's request is recorded as awaiting approval;
- plans, runs and publishes with the App's own code (`bot.tasks.cmd_optimize`, `cmd_approve`,
  `run_approved`), which an approved run here reaches through `RunnerHost` (run it now) where the
  App's goes through `WorkerHost` (enqueue it on RQ): the same run id, plan comment, sticky status
  comment, branch and draft PR as the App;
- writes `run-id`, `pr-url`, `state` and `verdict` to `GITHUB_OUTPUT` and the report to
  `GITHUB_STEP_SUMMARY`.

A runner keeps nothing between workflow runs and has no Redis, so the run records the App keeps
in Redis live here in one bot-authored comment per issue (`IssueStateStore`, marker
`<!-- autoresearch:action-state -->`); only a comment written by the bot's own login is
trusted. `cancel` of a running run cancels that workflow run (Actions API); the runner's
SIGINT/SIGTERM then stops the pipeline, which releases its machines.

The token: the App worker fetches installation tokens through `bot.tasks.installation_token`;
in this one-shot process that name is bound to a function returning the workflow token
(`use_workflow_token`), so `prepare` (clone) and `publish` (push) run unchanged. Like the App,
the token is kept out of the environment the target's build and benchmark see
(`scrub_environment`).
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from . import approval as ap
from .commands import Invalid, parse_line
from .routing import CommentCommand, Ignored, field, is_bot, route

STATE_MARKER = "<!-- autoresearch:action-state -->"
DEFAULT_LABEL = "autoresearch"
DEFAULT_BOT_LOGIN = "github-actions[bot]"
_STATE_JSON = re.compile(r"```json\n(.*?)\n```", re.S)


class ActionError(RuntimeError):
    """The action cannot run as configured (missing event file, token, ...)."""


# -- events -> commands (pure) -------------------------------------------------------------------
def _repo_fields(payload: dict) -> dict | None:
    owner = field(payload, "repository", "owner", "login")
    name = field(payload, "repository", "name")
    if not isinstance(owner, str) or not isinstance(name, str):
        return None
    branch = field(payload, "repository", "default_branch")
    return {"owner": owner, "repo": name, "default_branch": branch if isinstance(branch, str) and branch else "main"}


def _synthetic(payload: dict, line: str, issue: Any, actor: Any, delivery: str) -> CommentCommand | Ignored:
    """A command that did not come from a comment (a label, a manual dispatch): same grammar."""
    repo = _repo_fields(payload)
    if repo is None:
        return Ignored("payload lacks the repository")
    try:
        number = int(issue)
    except (TypeError, ValueError):
        return Ignored(f"no issue number given ({issue!r})")
    if number <= 0:
        return Ignored(f"no issue number given ({issue!r})")
    if not isinstance(actor, str) or not actor:
        return Ignored("no actor")
    common = dict(delivery=delivery, installation_id=0, issue_number=number, is_pull_request=False,
                  comment_id=0, author=actor, **repo)
    parsed = parse_line(line)
    if isinstance(parsed, Invalid):
        return CommentCommand(**common, verb=None, args={}, error=parsed.reason)
    if parsed.verb == "bench":
        return CommentCommand(**common, verb=None, args={}, error="`bench` is answered on a pull-request comment")
    args = asdict(parsed)
    if args["platforms"] is not None:
        args["platforms"] = list(args["platforms"])
    return CommentCommand(**common, verb=parsed.verb, args=args)


def command_from_event(event: str, payload: Any, *, bot_login: str = DEFAULT_BOT_LOGIN,
                       label: str = DEFAULT_LABEL, delivery: str = "") -> CommentCommand | Ignored:
    """The command an Actions event carries, or Ignored with a reason. Pure."""
    if not isinstance(payload, dict):
        return Ignored("the event payload is not a JSON object")
    if event == "issue_comment":
        # Workflow event payloads carry no App installation; the routing needs a number there.
        p = dict(payload)
        if not isinstance(field(p, "installation", "id"), int):
            p["installation"] = {"id": 0}
        return route(event, p, delivery=delivery, bot_login=bot_login)
    sender = field(payload, "sender", "login")
    if is_bot(sender, field(payload, "sender", "type"), bot_login):
        return Ignored(f"event sent by bot {sender}")
    if event == "issues":
        if field(payload, "action") != "labeled":
            return Ignored(f"issues action {field(payload, 'action')!r} is not handled")
        if field(payload, "label", "name") != label:
            return Ignored(f"label {field(payload, 'label', 'name')!r} is not the trigger label {label!r}")
        if isinstance(field(payload, "issue", "pull_request"), dict):
            return Ignored("labels on pull requests do not start runs")
        return _synthetic(payload, "/autoresearch optimize cpu", field(payload, "issue", "number"), sender,
                          delivery)
    if event == "workflow_dispatch":
        inputs = field(payload, "inputs")
        inputs = inputs if isinstance(inputs, dict) else {}
        command = inputs.get("command") or "optimize cpu"
        if not isinstance(command, str) or "\n" in command:
            return Ignored("input `command` must be one line")
        return _synthetic(payload, f"/autoresearch {command.strip()}", inputs.get("issue"), sender, delivery)
    return Ignored(f"event {event!r} is not handled")


# -- where the App keeps Redis, the Action keeps an issue comment --------------------------------
class IssueStateStore:
    """The subset of `bot.store.Store` the worker functions use, kept in one bot-authored issue
    comment. `locked` is a no-op: the example workflow's `concurrency` group serialises runs."""

    def __init__(self, gh, issue: int, bot_login: str, flush_interval: float = 15.0):
        self.gh, self.issue, self.bot_login = gh, issue, bot_login.lower()
        self.flush_interval = flush_interval
        self.comment_id: int | None = None
        self.data: dict[str, Any] = {"runs": {}, "current": None, "pr": None, "cancel": []}
        self._last_flush = 0.0
        self._dirty = False
        self.load()

    # persistence
    def load(self) -> None:
        found = self.gh.own_comment(self.issue, STATE_MARKER, self.bot_login)
        if found is None:
            return
        self.comment_id, body = found
        m = _STATE_JSON.search(body)
        try:
            data = json.loads(m.group(1)) if m else None
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("runs"), dict):
            self.data.update(data)

    def flush(self, force: bool = True) -> None:
        if not force and (not self._dirty or time.monotonic() - self._last_flush < self.flush_interval):
            return
        body = (f"{STATE_MARKER}\n<details><summary>autoresearch state (kept by the GitHub Action; "
                f"do not edit)</summary>\n\n```json\n{json.dumps(self.data, sort_keys=True)}\n```\n</details>\n")
        self.comment_id = self.gh.upsert_comment(self.issue, STATE_MARKER, body, self.comment_id)
        self._last_flush, self._dirty = time.monotonic(), False

    # the Store interface
    def get_run(self, repo: str, run_id: str) -> dict[str, Any] | None:
        rec = self.data["runs"].get(run_id)
        return json.loads(json.dumps(rec)) if rec else None

    def update_run(self, repo: str, run_id: str, **fields: Any) -> None:
        if fields:
            self.data["runs"].setdefault(run_id, {"run_id": run_id}).update(json.loads(json.dumps(fields)))
            self._dirty = True
            self.flush(force=False)

    def replace_run(self, repo: str, record: dict[str, Any]) -> None:
        self.data["runs"][record["run_id"]] = json.loads(json.dumps(record))
        self.flush()

    @contextmanager
    def locked(self, repo: str, run_id: str) -> Iterator[None]:
        yield

    def set_current(self, repo: str, issue: int, run_id: str) -> None:
        self.data["current"] = run_id
        self.flush()

    def current_run(self, repo: str, issue: int) -> dict[str, Any] | None:
        return self.get_run(repo, self.data["current"]) if self.data.get("current") else None

    def request_cancel(self, repo: str, run_id: str) -> None:
        if run_id not in self.data["cancel"]:
            self.data["cancel"].append(run_id)
        self.flush()

    def clear_cancel(self, repo: str, run_id: str) -> None:
        if run_id in self.data["cancel"]:
            self.data["cancel"].remove(run_id)
            self.flush()

    def cancel_requested(self, repo: str, run_id: str) -> bool:
        return run_id in self.data["cancel"]

    def issue_pr(self, repo: str, issue: int) -> dict[str, Any] | None:
        return self.data.get("pr")

    def set_issue_pr(self, repo: str, issue: int, pr: dict[str, Any]) -> None:
        self.data["pr"] = pr
        self.flush()


# -- settings, clients, outputs ------------------------------------------------------------------
def action_settings(env: dict[str, str]):
    """The App's Settings, filled from the workflow's environment (no App id or key: a token)."""
    from .settings import Settings, SettingsError
    executor = env.get("AUTORESEARCH_EXECUTOR") or "auto"
    if executor == "auto":
        has_cloud = bool(env.get("AWS_ACCESS_KEY_ID")) or (Path.home() / ".aws" / "credentials").is_file()
        executor = "skypilot" if has_cloud else "local"
    if executor not in ("local", "skypilot"):
        raise SettingsError("executor must be auto, local or skypilot")
    runner_temp = env.get("RUNNER_TEMP") or str(Path.home() / ".cache")
    return Settings(
        app_id="", private_key_path=Path("/nonexistent"), webhook_secret="",
        redis_url="", executor=executor,
        api_url=(env.get("AUTORESEARCH_GITHUB_API_URL") or env.get("GITHUB_API_URL") or Settings.api_url).rstrip("/"),
        git_url=(env.get("AUTORESEARCH_GIT_URL") or env.get("GITHUB_SERVER_URL") or Settings.git_url).rstrip("/"),
        bot_login=env.get("AUTORESEARCH_BOT_LOGIN") or DEFAULT_BOT_LOGIN,
        fork_owner=env.get("AUTORESEARCH_FORK_OWNER", ""),
        workdir=Path(env.get("AUTORESEARCH_WORKDIR") or Path(runner_temp) / "autoresearch"),
    )


def workflow_client(settings, token: str, owner: str, repo: str):
    """`bot.github.RepoClient` authenticated with the workflow token instead of an installation."""
    from githubkit import TokenAuthStrategy

    from .github import RepoClient, _client

    class WorkflowRepoClient(RepoClient):
        """Same endpoints and response validation as the App's client, plus the two the Action needs:
        GET  /repos/{o}/{r}/issues/{n}/comments   the state comment, by author and marker
        POST /repos/{o}/{r}/actions/runs/{id}/cancel
        (https://docs.github.com/en/rest/actions/workflow-runs#cancel-a-workflow-run)"""

        def __init__(self):
            self.settings = settings
            self.owner, self.repo = owner, repo
            self.gh = _client(TokenAuthStrategy(token), settings)

        def own_comment(self, issue: int, marker: str, author: str) -> tuple[int, str] | None:
            """(id, body) of the first comment by `author` that carries `marker` (pages of 100)."""
            page = 1
            while True:
                comments = self.gh.rest.issues.list_comments(self.owner, self.repo, issue, per_page=100,
                                                             page=page).parsed_data
                for c in comments:
                    login = (c.user.login if c.user else "") or ""
                    if login.lower() == author.lower() and isinstance(c.body, str) and marker in c.body:
                        return c.id, c.body
                if len(comments) < 100:
                    return None
                page += 1

        def cancel_workflow_run(self, run_id: int) -> None:
            self.gh.rest.actions.cancel_workflow_run(self.owner, self.repo, run_id)

    return WorkflowRepoClient()


def use_workflow_token(token: str) -> None:
    """The worker asks `bot.tasks.installation_token` for git credentials; in this one-shot
    process the answer is the workflow token."""
    from . import tasks
    tasks.installation_token = lambda settings, installation_id: token


def write_outputs(path: str | None, outputs: dict[str, str]) -> None:
    """GITHUB_OUTPUT, multi-line safe (`name<<DELIMITER`)."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for name, value in outputs.items():
            value = str(value)
            delim = f"ghadelimiter_{uuid.uuid4().hex}"
            fh.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def verdict_summary(summary: dict[str, Any]) -> str:
    """One line: what was kept, and the stack's primary-metric change per platform."""
    primary = summary.get("primary", "")
    exps = [e for e in summary.get("experiments", []) if e.get("kind", "experiment") == "experiment"]
    kept = sorted({e["hypothesis"] for e in exps if e.get("status") == "keep"})
    parts = [f"kept {len(kept)} of {len({e['hypothesis'] for e in exps})} experiment(s)"
             + (f" ({', '.join(kept)})" if kept else "")]
    for platform, st in sorted((summary.get("stacks") or {}).items()):
        m = next((m for m in st.get("metrics") or [] if m.get("name") == primary), None)
        delta = f", {primary} {m['delta_pct']:+.1f}% (p={m['p_value']:.3g})" if m and m.get("delta_pct") is not None else ""
        parts.append(f"stack on {platform}: {st.get('status')}{delta}")
    return "; ".join(parts)


def _persist_cloud_credentials(env: dict[str, str]) -> None:
    """SkyPilot reads ~/.aws; the environment is scrubbed before the run (as in the App)."""
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    creds = Path.home() / ".aws" / "credentials"
    if not key or not secret or creds.exists():
        return
    creds.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = ["[default]", f"aws_access_key_id = {key}", f"aws_secret_access_key = {secret}"]
    if env.get("AWS_SESSION_TOKEN"):
        lines.append(f"aws_session_token = {env['AWS_SESSION_TOKEN']}")
    fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")


# -- the handlers (the App's worker functions, run in-process instead of through RQ) -------------
class Outcome(dict):
    """What to write to GITHUB_OUTPUT, plus the exit code."""

    @property
    def code(self) -> int:
        return 1 if self.get("state") == ap.FAILED else 0


def _interrupted(exc: BaseException) -> bool:
    """A cancel, or the runner's SIGINT/SIGTERM, possibly followed by an error raised while the
    interrupted step was being cleaned up (e.g. killing a process group that had just exited)."""
    from jobs.pipeline import RunCancelled
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (RunCancelled, KeyboardInterrupt)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class RunnerHost:
    """Where the Action's approved run happens: here and now, in this process (the App enqueues it,
    `bot.tasks.WorkerHost`). The hooks `bot.tasks.cmd_optimize` / `cmd_approve` / `run_approved` call,
    and how they differ from the App's."""

    catches = (KeyboardInterrupt, Exception)    # the runner's SIGINT/SIGTERM is a cancel too
    marks_prepare_errors = False                # a clone/GitHub error propagates, the record as it was

    def __init__(self, env: dict[str, str], workflow_run_id: str):
        self.env, self.workflow_run_id = env, workflow_run_id

    def queued(self, ctx, rec: dict) -> None:
        """`optimize` queued the run: its record is written already (replace_run, set_current)."""

    def approved(self, ctx, rec: dict) -> None:
        """`approve` queued the run: write the approval (an update_run) before it starts."""
        ctx.store.flush()

    def result(self, ctx, rec: dict) -> Outcome:
        """A run awaiting approval is reported; a queued one runs now (`bot.tasks.run_approved`)."""
        from . import tasks
        if rec["state"] != ap.QUEUED:
            return Outcome(state=rec["state"], run_id=rec["run_id"], verdict=rec["message"])
        o = tasks.run_approved(ctx.s, ctx.store, ctx.gh, ctx.store.get_run(ctx.repo, rec["run_id"]), self)
        outcome = Outcome(state=o.state, run_id=o.run_id)
        if o.error is not None:
            outcome["verdict"] = str(o.error)[:500]
        if o.state == ap.DONE:
            outcome.update(pr_url=o.fields.get("pr_url", ""), verdict=verdict_summary(o.summary),
                           report=str(o.out / "pr.md"), out=str(o.out))
        return outcome

    def start_fields(self) -> dict[str, Any]:
        return {"workflow_run_id": self.workflow_run_id}    # what `cancel` cancels

    def saved(self, store: IssueStateStore) -> None:
        store.flush()                                        # a status change is written at once

    def before_scrub(self, s) -> None:
        if s.executor == "skypilot":
            _persist_cloud_credentials(self.env)

    def interrupted(self, exc: BaseException) -> bool:
        return _interrupted(exc)


def handle_optimize(ctx, env: dict[str, str], workflow_run_id: str) -> Outcome:
    """The App's `cmd_optimize`; an approved plan runs here and now instead of being enqueued."""
    from . import tasks
    return tasks.cmd_optimize(ctx, RunnerHost(env, workflow_run_id))


def handle_approve(ctx, env: dict[str, str], workflow_run_id: str) -> Outcome:
    """The App's `cmd_approve`; the approved run starts in this workflow run."""
    from . import tasks
    return tasks.cmd_approve(ctx, RunnerHost(env, workflow_run_id))


def handle_cancel(ctx, env: dict[str, str], workflow_run_id: str) -> Outcome:
    """The App's `cmd_cancel`: a run still awaiting approval is cancelled; a running one is
    stopped by cancelling its workflow run (the pipeline then releases its machines)."""
    from . import tasks
    cur = ctx.store.current_run(ctx.repo, ctx.cmd.issue_number)
    if not cur or cur["state"] in ap.FINAL:
        raise tasks.Reply("autoresearch: there is no active run on this issue to cancel.\n")
    ok = tasks.approver(ctx, ctx.cmd.author, cur.get("approvers", []))
    if not ap.may_cancel(ctx.cmd.author, cur.get("requester", ""), ok):
        raise tasks.Reply(f"autoresearch: @{ctx.cmd.author} may not cancel this run (only its requester or an "
                          "approver can).\n")
    run_id = cur["run_id"]
    ctx.store.request_cancel(ctx.repo, run_id)
    if cur["state"] == ap.RUNNING and cur.get("workflow_run_id"):
        try:
            ctx.gh.cancel_workflow_run(int(cur["workflow_run_id"]))
        except Exception as exc:
            # The workflow run is gone (finished, or its runner died: 404/409), or the workflow lacks
            # `actions: write`. Either way nothing of ours is stopping it: record the run as cancelled
            # so the issue is not blocked by a run that no longer runs.
            ctx.store.update_run(ctx.repo, run_id, state=ap.transition(cur["state"], "cancel"), phase="cancelled",
                                 message=f"cancelled by @{ctx.cmd.author}; workflow run {cur['workflow_run_id']} "
                                         f"could not be cancelled ({str(exc)[:200]}): if it still runs, cancel it "
                                         "from the Actions tab")
        else:
            ctx.store.update_run(ctx.repo, run_id, message=f"cancelling (requested by @{ctx.cmd.author}): workflow "
                                 f"run {cur['workflow_run_id']} is being stopped and its machines released")
    else:
        ctx.store.update_run(ctx.repo, run_id, state=ap.transition(cur["state"], "cancel"),
                             message=f"cancelled by @{ctx.cmd.author} before it started")
    ctx.store.flush()
    tasks.refresh_status(ctx.store, ctx.gh, ctx.repo, run_id)
    return Outcome(state=ctx.store.get_run(ctx.repo, run_id)["state"], run_id=run_id)


def handle_status(ctx, env: dict[str, str], workflow_run_id: str) -> Outcome:
    from . import tasks
    tasks.cmd_status(ctx)
    cur = ctx.store.current_run(ctx.repo, ctx.cmd.issue_number) or {}
    return Outcome(state=cur.get("state", ""), run_id=cur.get("run_id", ""), pr_url=cur.get("pr_url", ""))


def handle_bench(ctx, env: dict[str, str], workflow_run_id: str) -> Outcome:
    from . import tasks
    raise tasks.Reply("autoresearch: `bench` is answered by the autoresearch App; in a workflow, re-run the "
                      "optimize command instead.\n")


HANDLERS = {"optimize": handle_optimize, "approve": handle_approve, "cancel": handle_cancel,
            "status": handle_status, "bench": handle_bench}


def _interrupt(signum, frame):      # the runner cancels a job with SIGINT, then SIGTERM
    raise KeyboardInterrupt


def run_action(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    from . import tasks
    event = env.get("GITHUB_EVENT_NAME", "")
    path = env.get("GITHUB_EVENT_PATH", "")
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB_TOKEN") or ""
    output_path, summary_path = env.get("GITHUB_OUTPUT"), env.get("GITHUB_STEP_SUMMARY")
    if not event or not path:
        raise ActionError("GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (run this inside a workflow)")
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ActionError(f"cannot read the event payload {path}: {exc}") from None
    s = action_settings(env)
    delivery = env.get("GITHUB_RUN_ID", "")
    cmd = command_from_event(event, payload, bot_login=s.bot_login,
                             label=env.get("AUTORESEARCH_LABEL") or DEFAULT_LABEL, delivery=delivery)
    if isinstance(cmd, Ignored):
        print(f"autoresearch: ignored: {cmd.reason}")
        write_outputs(output_path, {"state": "ignored", "run-id": "", "pr-url": "", "verdict": cmd.reason})
        return 0
    if not token:
        raise ActionError("no GitHub token: pass `github-token` (the workflow's GITHUB_TOKEN by default)")
    gh = workflow_client(s, token, cmd.owner, cmd.repo)
    use_workflow_token(token)
    if cmd.comment_id:
        gh.react(cmd.comment_id, "eyes")
    if cmd.verb is None:
        gh.comment(cmd.issue_number, tasks.help_reply(cmd.error))
        write_outputs(output_path, {"state": "help", "run-id": "", "pr-url": "", "verdict": cmd.error})
        return 0
    store = IssueStateStore(gh, cmd.issue_number, s.bot_login)
    ctx = tasks.Ctx(s, store, gh, cmd)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        outcome = HANDLERS[cmd.verb](ctx, env, delivery)
    except tasks.Reply as reply:
        gh.comment(cmd.issue_number, str(reply))
        outcome = Outcome(state="replied", verdict=str(reply).strip()[:500])
    finally:
        store.flush(force=store._dirty)
    write_outputs(output_path, {"state": outcome.get("state", ""), "run-id": outcome.get("run_id", ""),
                                "pr-url": outcome.get("pr_url", ""), "verdict": outcome.get("verdict", "")})
    if summary_path and outcome.get("report") and Path(outcome["report"]).is_file():
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(Path(outcome["report"]).read_text(encoding="utf-8") + "\n")
    print(f"autoresearch: {cmd.verb}: {outcome.get('state')} {outcome.get('run_id', '')} "
          f"{outcome.get('pr_url', '')}".rstrip())
    return outcome.code


def cmd_action(args) -> int:
    from .settings import SettingsError
    try:
        return run_action()
    except (ActionError, SettingsError) as exc:
        print(f"autoresearch action: {exc}", file=sys.stderr)
        return 2


def register(sub) -> None:
    """Add `autoresearch action` to the console script's parser."""
    p = sub.add_parser("action", help="handle one GitHub Actions event (GITHUB_EVENT_NAME/GITHUB_EVENT_PATH)")
    p.set_defaults(func=cmd_action)


def main(argv: list[str] | None = None) -> int:
    """`python -m bot.action`: the same as `autoresearch action`."""
    from jobs import cli as jobs_cli
    return jobs_cli.main(["action", *(argv or [])], extend=register)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
