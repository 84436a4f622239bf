"""`autoresearch action`: the GitHub Action's entry point (action.yml runs it in a workflow step).

A thin adapter around the App's own flow (`bot.flow.Flow`), in one process on the runner:

- event -> command: `GITHUB_EVENT_NAME` / `GITHUB_EVENT_PATH` through the one router
  (`bot.routing.route_workflow_event`: `issue_comment` created, `issues` labeled with the trigger
  label, `workflow_dispatch` with inputs `issue` and `command`);
- the flow's adapters, the Action's way: the REST client and git authenticate with the workflow's
  `GITHUB_TOKEN` (`RepoClient.for_token`, a token provider returning it); run records live in one
  bot-authored issue comment signed with the `state-key` secret (`bot.issuestore.IssueStateStore`,
  `AUTORESEARCH_STATE_KEY`: without it the Action stops with a message saying how to add it); the `Launcher` is `RunNow`: an
  approved run runs in this process once the command has been answered, and `cancel` of a running
  run cancels its workflow run (Actions API), whose SIGINT/SIGTERM then stops the pipeline here;
- outputs: `run-id`, `pr-url`, `state` and `verdict` to `GITHUB_OUTPUT`, the report to
  `GITHUB_STEP_SUMMARY`; exit code 1 when the run failed.

So the plan comment, the sticky status comment, the run id, the branch and the draft PR are the
App's. As in the App, the token never reaches the environment the target's build and benchmark
see (`jobs.guard.secrets.scrub_environment`).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from jobs.api import Terminated, executor_kind, verdict_line
from jobs.guard.mdsafe import md

from . import approval as ap
from . import gitclone
from .flow import Flow
from .github import RepoClient
from .issuestore import IssueStateStore, StateKeyError
from .ports import Outcome, Reply, RunStore, StopFailed, Unleased
from .record import RunRecord
from .routing import CommentCommand, Ignored, route_workflow_event
from .settings import Settings, SettingsError, cloud_credentials

DEFAULT_LABEL = "autoresearch"


class ActionError(RuntimeError):
    """The action cannot run as configured (missing event file, token, ...)."""


class RunNow:
    """The Action's Launcher: here and now, in this process (the App's is `jobqueue.QueueLauncher`)."""

    interrupts_cancel = True           # the runner cancels a job with SIGINT, then SIGTERM

    def __init__(self, gh: RepoClient, env: dict[str, str], workflow_run_id: str):
        self.gh, self.env, self.workflow_run_id = gh, env, workflow_run_id
        self.pending: str | None = None

    def launch(self, store: RunStore, record: RunRecord) -> Outcome:
        self.pending = record.run_id       # runs once the command is answered (`run_pending`)
        return Outcome(record.state, record.run_id, message=record.message)

    def run_pending(self, flow: Flow) -> Outcome | None:
        if self.pending is None:
            return None
        if executor_kind(flow.place.executor).uses_cloud_credentials:
            _persist_cloud_credentials(self.env)       # SkyPilot reads ~/.aws; the environment is scrubbed next
        return flow.run(flow.store.get_run(flow.repo, self.pending))

    def withdraw(self, record: RunRecord) -> None:
        """Nothing is queued: an approved run starts in the workflow run that approved it."""

    def stop(self, record: RunRecord) -> str:
        if not record.workflow_run_id:
            raise StopFailed("no workflow run is recorded for it")
        try:
            self.gh.cancel_workflow_run(int(record.workflow_run_id))
        except Exception as exc:
            # Gone (finished, or its runner died: 404/409), or the workflow lacks `actions: write`.
            raise StopFailed(f"workflow run {record.workflow_run_id} could not be cancelled ({str(exc)[:200]}): "
                             "if it still runs, cancel it from the Actions tab") from None
        return f"workflow run {record.workflow_run_id}"

    def launch_bench(self, command: CommentCommand) -> None:
        raise Reply(md("autoresearch: `bench` is answered by the autoresearch App; in a workflow, re-run the "
                       "optimize command instead.\n"))

    def running_fields(self) -> dict[str, Any]:
        return {"workflow_run_id": self.workflow_run_id}       # what `cancel` cancels

    def hold(self, record: RunRecord) -> Unleased:
        return Unleased()                  # the run lives and dies with this workflow run


def write_outputs(path: str | None, outputs: dict[str, str]) -> None:
    """GITHUB_OUTPUT, multi-line safe (`name<<DELIMITER`)."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for name, value in outputs.items():
            delim = f"ghadelimiter_{uuid.uuid4().hex}"
            fh.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def outputs(o: Outcome) -> dict[str, str]:
    verdict = verdict_line(o.summary) if o.summary else (str(o.error)[:500] if o.error else o.message)
    return {"state": o.state, "run-id": o.run_id, "pr-url": o.pr_url, "verdict": verdict}


def _persist_cloud_credentials(env: dict[str, str]) -> None:
    """SkyPilot reads ~/.aws; the environment is scrubbed before the run (as in the App)."""
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    creds = cloud_credentials()
    if not key or not secret or creds.exists():
        return
    creds.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = ["[default]", f"aws_access_key_id = {key}", f"aws_secret_access_key = {secret}"]
    if env.get("AWS_SESSION_TOKEN"):
        lines.append(f"aws_session_token = {env['AWS_SESSION_TOKEN']}")
    fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _interrupt(signum, frame):      # SIGTERM after SIGINT: the same cancel
    raise Terminated()


def run_action(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    event, path = env.get("GITHUB_EVENT_NAME", ""), env.get("GITHUB_EVENT_PATH", "")
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB_TOKEN") or ""
    output_path, summary_path = env.get("GITHUB_OUTPUT"), env.get("GITHUB_STEP_SUMMARY")
    if not event or not path:
        raise ActionError("GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (run this inside a workflow)")
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ActionError(f"cannot read the event payload {path}: {exc}") from None
    s = Settings.for_action(env)
    workflow_run_id = env.get("GITHUB_RUN_ID", "")
    cmd = route_workflow_event(event, payload, bot_login=s.bot_login, label=env.get("AUTORESEARCH_LABEL") or DEFAULT_LABEL,
                               delivery=workflow_run_id)
    if isinstance(cmd, Ignored):
        print(f"autoresearch: ignored: {cmd.reason}")
        write_outputs(output_path, {"state": "ignored", "run-id": "", "pr-url": "", "verdict": cmd.reason})
        return 0
    if not token:
        raise ActionError("no GitHub token: pass `github-token` (the workflow's GITHUB_TOKEN by default)")
    gh = RepoClient.for_token(s, token, cmd.owner, cmd.repo)
    key = env.get("AUTORESEARCH_STATE_KEY") or env.get("INPUT_STATE_KEY") or ""
    try:
        store = IssueStateStore(gh, cmd.issue_number, s.bot_login, key=key, repo=cmd.full_name)
    except StateKeyError as exc:
        raise ActionError(str(exc)) from None
    launcher = RunNow(gh, env, workflow_run_id)
    flow = Flow(place=s, store=store, gh=gh, token=lambda: token, launcher=launcher, git=gitclone)
    signal.signal(signal.SIGTERM, _interrupt)
    # The runner's cancel is SIGINT: make it one even where this process was started with SIGINT ignored
    # (Python then leaves it ignored; a background job of a non-interactive shell starts so).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        outcome = flow.handle(cmd)
        outcome = launcher.run_pending(flow) or outcome
    finally:
        store.flush(force=store.dirty)
    write_outputs(output_path, outputs(outcome))
    report = outcome.out / "pr.md" if outcome.out else None
    if summary_path and report and report.is_file():
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(report.read_text(encoding="utf-8") + "\n")
    print(f"autoresearch: {cmd.verb or 'help'}: {outcome.state} {outcome.run_id} {outcome.pr_url}".rstrip())
    return 1 if outcome.state == ap.FAILED else 0


def cmd_action(args) -> int:
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
