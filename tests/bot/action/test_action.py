"""`autoresearch action` end to end: GitHub's own `issue_comment` example payload as the workflow's
event file -> the console script in a subprocess -> the fake GitHub on loopback + bare git remotes
-> the real pipeline on the synthetic target -> the same run and draft PR the App produces."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the bot helper's fixtures

from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: E402,F401  (fixtures)
from conftest import ROOT, git  # noqa: E402
from synthetic import FASTER, patch_for, synthetic_target  # noqa: E402

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

APP_REPO = "octo/synth"
ACTION_REPO = "octo/synth-action"
STATE_KEY = "action-test-state-key-0123456789"
WORKFLOW_TOKEN = "ghs_workflowtoken0123456789"


def _target(tmp_path: Path) -> Path:
    t = synthetic_target(tmp_path / "target")
    cand = t / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    (cand / "faster.patch").write_text((tmp_path / "faster.patch").read_text())
    git(t, "add", "-A")
    git(t, "commit", "-qm", "action test setup")
    return t


def _cli() -> list[str]:
    """The console script, as action.yml runs it: `autoresearch action`."""
    return [str(Path(sys.executable).parent / "autoresearch"), "action"]


def run_action(bot_env, tmp_path: Path, event: str, payload: dict, name: str, **extra: str) -> tuple[dict, str]:
    """Run the action as a workflow step would: env vars in, GITHUB_OUTPUT out."""
    d = tmp_path / name
    d.mkdir()
    event_path, output, step_summary = d / "event.json", d / "output", d / "summary.md"
    event_path.write_text(json.dumps(payload))
    output.write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)),
           "GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(event_path), "GITHUB_OUTPUT": str(output),
           "GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_TOKEN": WORKFLOW_TOKEN, "GITHUB_RUN_ID": "9001",
           "GITHUB_API_URL": bot_env.env["AUTORESEARCH_GITHUB_API_URL"],
           "GITHUB_SERVER_URL": f"file://{bot_env.git_root}", "RUNNER_TEMP": str(tmp_path / "runner"),
           "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN, "AUTORESEARCH_EXECUTOR": "auto", "AUTORESEARCH_STATE_KEY": STATE_KEY,
           "AUTORESEARCH_WORKDIR": str(tmp_path / "action-work"), "PYTHONPATH": str(ROOT), **extra}
    proc = subprocess.run(_cli(), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return parse_outputs(output.read_text()), proc.stdout


def parse_outputs(text: str) -> dict[str, str]:
    out, lines = {}, iter(text.splitlines())
    for line in lines:
        name, _, delim = line.partition("<<")
        value = []
        for v in lines:
            if v == delim:
                break
            value.append(v)
        out[name] = "\n".join(value)
    return out


def _shape(body: str) -> list[str]:
    """What two runs of the same experiments must share in their PR body, whatever the noise:
    the sections, the tables' columns, each experiment's row (name, platform, kind, status), the
    AI disclosure and the closing line. (Means, p-values, the drift flag and the run's warnings,
    such as a floor raised by the A/A bias, vary run to run: "Notes from the run" is left out.)"""
    out, stable = [], []  # stable: indexes of the current experiment table's noise-free columns
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("## Notes from the run"):
            continue
        if line.startswith("#"):
            out.append(line)
        elif line.startswith("| metric") or line.startswith("| experiment"):
            stable = [i for i, c in enumerate(cells) if c in ("experiment", "platform", "kind", "status")] \
                if line.startswith("| experiment") else []
            out.append(line)
        elif not line.strip():
            stable = []
        elif stable and line.startswith("| ") and not line.startswith("|---"):
            out.append(" | ".join(cells[i] for i in stable))
        elif "AI-generated" in line or line.startswith("Closes #") or line.startswith("Refs #"):
            out.append(line)
    return out


def _only_pr(bot_env, full: str) -> dict:
    pulls = [dict(p, number=n) for (f, n), p in bot_env.github.pulls.items() if f == full]
    assert len(pulls) == 1, pulls
    return pulls[0]


def _summary(workdir: Path, repo: str, run_id: str) -> dict:
    return json.loads((workdir / repo / run_id / "out" / "summary.json").read_text())


def test_issue_comment_event_file_gives_the_same_run_and_draft_pr_as_the_app(bot_env, tmp_path):
    target = _target(tmp_path)
    for full in (APP_REPO, ACTION_REPO):
        bot_env.add_target(full, target)
        bot_env.github.repos[full].permissions["alice"] = ("write", "maintain")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0

    # The App: signed webhook -> RQ worker -> pipeline -> draft PR.
    assert bot_env.comment(APP_REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    from bot.store import Store
    app_run = Store(bot_env.redis).current_run(APP_REPO, 1)
    assert app_run.state == "done", app_run

    # The Action: GitHub's example issue_comment payload as the event file (no App installation
    # in a workflow's payload), pointed at the second repo, through `autoresearch action`.
    payload = bot_env.comment_payload(ACTION_REPO, 1, "alice", "Please:\n/autoresearch optimize cpu\n")
    payload.pop("installation")
    outputs, stdout = run_action(bot_env, tmp_path, "issue_comment", payload, "comment")

    # The same run: same id (issue, base commit, arguments), same plan, same experiments and verdicts.
    assert outputs["state"] == "done", (outputs, stdout)
    assert outputs["run-id"] == app_run.run_id
    app_sum = _summary(bot_env.workdir / "octo", "synth", app_run.run_id)
    act_sum = _summary(tmp_path / "action-work" / "octo", "synth-action", outputs["run-id"])
    assert act_sum["base_commit"] == app_sum["base_commit"] and act_sum["branch"] == app_sum["branch"]
    assert [(e["name"], e["platform"], e["status"]) for e in act_sum["experiments"]] == \
           [(e["name"], e["platform"], e["status"]) for e in app_sum["experiments"]] == [("faster", "local", "keep")]
    assert {p: s["status"] for p, s in act_sum["stacks"].items()} == {"local": "keep"}
    assert outputs["verdict"].startswith("kept 1 of 1 experiment(s) (faster); stack on local: keep, score +")

    # The same draft PR: title, head branch, base, draft flag; the body differs only in the noise.
    app_pr = _only_pr(bot_env, APP_REPO)
    act_pr = _only_pr(bot_env, ACTION_REPO)
    assert outputs["pr-url"] == f"https://github.com/{ACTION_REPO}/pull/{act_pr['number']}"
    for key in ("title", "head", "base", "draft"):
        assert act_pr[key] == app_pr[key], key
    assert act_pr["draft"] is True and act_pr["head"] == f"autoresearch/{app_run.run_id}"
    assert _shape(act_pr["body"]) == _shape(app_pr["body"])
    assert "faster | local | candidate | kept" in _shape(act_pr["body"])
    assert "AI-generated" in act_pr["body"] and act_pr["body"].rstrip().endswith("Closes #1")
    bare = bot_env.git_root / f"{ACTION_REPO}.git"
    assert git(bare, "log", "--format=%s", f"main..{act_pr['head']}").splitlines() == ["faster: maintainer candidate"]

    # The same conversation on the issue: 👀, one plan comment, one sticky status comment (done, PR).
    def kinds(full):
        return sorted(m for c in bot_env.bot_comments(full, 1)
                      for m in ("autoresearch:plan", "autoresearch:status") if f"<!-- {m}" in c["body"])
    assert kinds(ACTION_REPO) == kinds(APP_REPO) == ["autoresearch:plan", "autoresearch:status"]
    status = next(c for c in bot_env.bot_comments(ACTION_REPO, 1) if "<!-- autoresearch:status" in c["body"])
    assert "✅ done" in status["body"] and outputs["pr-url"] in status["body"]
    assert {"comment_id": payload["comment"]["id"], "content": "eyes", "user": BOT_LOGIN} in bot_env.github.reactions
    assert (tmp_path / "comment" / "summary.md").read_text().count("| score |") >= 1

    # The token never reaches the run's files.
    for path in (tmp_path / "action-work").rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert WORKFLOW_TOKEN.encode() not in path.read_bytes(), path

    # The dashboard shows both: the App's run on the App's own server (over HTTP, signed link, with
    # the Redis record), and the Action's run from its run directory.
    from bot.dashboard import blueprint, load_run, make_token, signing_key
    import http.cookiejar
    import urllib.request
    token = make_token(signing_key({}, bot_env.env["AUTORESEARCH_WEBHOOK_SECRET"]), "alice", app_run.run_id,
                       repo=APP_REPO)
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"{bot_env.url}/runs/{app_run.run_id}?token={token}", timeout=10).read().decode()
    assert "faster" in page and "keep" in page and 'id="chart"' in page
    data = json.loads(opener.open(f"{bot_env.url}/runs/{app_run.run_id}.json", timeout=10).read())
    assert data["final"] and data["run"]["state"] == "done" and data["run"]["pr_url"] == app_run.pr_url
    assert [(e["name"], e["cells"]["local"]["status"]) for e in data["run"]["experiments"]] == [("faster", "keep")]

    view = load_run(tmp_path / "action-work", outputs["run-id"])
    assert view is not None and view["phase"] == "done" and view["final"]
    assert [(e["name"], e["cells"]["local"]["status"]) for e in view["experiments"]] == [("faster", "keep")]
    assert view["stacks"]["local"]["status"] == "keep"
    from flask import Flask
    app = Flask("runner-dashboard")
    app.register_blueprint(blueprint(root=tmp_path / "action-work", env={"AUTORESEARCH_DASHBOARD_SECRET": "k"}))
    client = app.test_client()
    assert client.get(f"/runs/{outputs['run-id']}?token={make_token('k', 'alice')}").status_code == 303
    assert "faster" in client.get(f"/runs/{outputs['run-id']}").text


def test_outsider_waits_then_approver_runs_and_rerun_updates_the_pr(bot_env, tmp_path):
    target = _target(tmp_path)
    bot_env.add_target(ACTION_REPO, target)
    perms = bot_env.github.repos[ACTION_REPO].permissions
    perms["alice"], perms["bob"] = ("write", "maintain"), ("read", "read")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0

    def comment(login: str, body: str, name: str):
        p = bot_env.comment_payload(ACTION_REPO, 4, login, body)
        p.pop("installation")
        return run_action(bot_env, tmp_path, "issue_comment", p, name)[0]

    out = comment("bob", "/autoresearch optimize cpu", "bob")
    assert out["state"] == "awaiting_approval" and out["pr-url"] == "" and not bot_env.github.pulls
    plan = next(c for c in bot_env.bot_comments(ACTION_REPO, 4) if "<!-- autoresearch:plan" in c["body"])
    assert "does not have write access" in plan["body"]
    digest = re.search(r"/autoresearch approve ([0-9a-f]{16})", plan["body"]).group(1)
    assert comment("bob", f"/autoresearch approve {digest}", "bob-approve")["state"] == "replied"   # not an approver
    assert comment("alice", "/autoresearch approve", "alice-bare")["state"] == "replied"    # names no plan
    assert not bot_env.github.pulls

    out = comment("alice", f"/autoresearch approve {digest}", "alice-approve")
    pr = _only_pr(bot_env, ACTION_REPO)
    assert out["state"] == "done" and out["pr-url"].endswith(f"/pull/{pr['number']}")
    status = [c for c in bot_env.bot_comments(ACTION_REPO, 4) if "<!-- autoresearch:status" in c["body"]]
    assert len(status) == 1 and "| approved by | @alice" in status[0]["body"]

    # A rerun (workflow_dispatch with the same command) updates the same draft PR.
    bot_env.github.pulls[(ACTION_REPO, pr["number"])]["body"] = "stale"
    dispatch = {"inputs": {"issue": "4", "command": "optimize cpu"}, "ref": "refs/heads/main",
                "repository": bot_env.github.repo_json(ACTION_REPO), "sender": bot_env.github.user("alice"),
                "workflow": ".github/workflows/autoresearch.yml"}
    out, _ = run_action(bot_env, tmp_path, "workflow_dispatch", dispatch, "dispatch")
    assert out["state"] == "done" and out["pr-url"].endswith(f"/pull/{pr['number']}")
    assert "| score |" in _only_pr(bot_env, ACTION_REPO)["body"]
    states = [c for c in bot_env.bot_comments(ACTION_REPO, 4) if "<!-- autoresearch:action-state" in c["body"]]
    assert len(states) == 1           # the Action's record of the issue: one comment, edited in place


def test_ignored_events_and_help(bot_env, tmp_path):
    bot_env.add_target(ACTION_REPO, _target(tmp_path))
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    p = bot_env.comment_payload(ACTION_REPO, 5, "carol", "/autoresearch optimise cpu")
    p.pop("installation")
    out, _ = run_action(bot_env, tmp_path, "issue_comment", p, "typo")
    assert out["state"] == "help" and "unknown command" in out["verdict"]
    reply = bot_env.bot_comments(ACTION_REPO, 5)[-1]["body"]
    assert "unknown command `optimise`" in reply and "/autoresearch optimize cpu" in reply

    bot = bot_env.comment_payload(ACTION_REPO, 5, BOT_LOGIN, "/autoresearch optimize cpu")
    out, _ = run_action(bot_env, tmp_path, "issue_comment", bot, "own")
    assert out["state"] == "ignored" and "bot" in out["verdict"]
    edited = dict(p, action="edited")
    assert run_action(bot_env, tmp_path, "issue_comment", edited, "edited")[0]["state"] == "ignored"
    assert len(bot_env.bot_comments(ACTION_REPO, 5)) == 2      # the help reply, and the user's comment by the bot


def test_workflow_events_go_through_the_apps_router_and_grammar():
    from bot.routing import Ignored, route_workflow_event
    from jobs.contract.config import Overrides

    def command_from_event(event, payload):
        return route_workflow_event(event, payload, bot_login="github-actions[bot]", label="autoresearch")
    repo = {"name": "r", "owner": {"login": "o"}, "default_branch": "trunk"}
    labeled = {"action": "labeled", "label": {"name": "autoresearch"}, "issue": {"number": 7},
               "repository": repo, "sender": {"login": "alice", "type": "User"}}
    cmd = command_from_event("issues", labeled)
    assert (cmd.verb, cmd.issue_number, cmd.author, cmd.default_branch) == ("optimize", 7, "alice", "trunk")
    assert isinstance(command_from_event("issues", dict(labeled, label={"name": "bug"})), Ignored)
    assert isinstance(command_from_event("issues", dict(labeled, action="opened")), Ignored)
    assert isinstance(command_from_event("issues", dict(labeled, sender={"login": "x[bot]", "type": "Bot"})), Ignored)
    d = {"inputs": {"issue": "3", "command": "optimize cpu metric=ms platforms=x86,arm budget=5"},
         "repository": repo, "sender": {"login": "alice"}}
    cmd = command_from_event("workflow_dispatch", d)
    assert cmd.command.overrides == Overrides("ms", ("x86", "arm"), 5.0)
    bad = command_from_event("workflow_dispatch", dict(d, inputs={"issue": "3", "command": "optimize gpu"}))
    assert bad.verb is None and "optimize cpu" in bad.error
    assert isinstance(command_from_event("workflow_dispatch", dict(d, inputs={"command": "status"})), Ignored)
    assert isinstance(command_from_event("push", {}), Ignored)
    assert isinstance(command_from_event("issue_comment", []), Ignored)


def test_cancel_before_start_and_status(bot_env, tmp_path):
    bot_env.add_target(ACTION_REPO, _target(tmp_path))
    perms = bot_env.github.repos[ACTION_REPO].permissions
    perms["alice"], perms["bob"] = ("write", "maintain"), ("read", "read")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0

    def comment(login: str, body: str, name: str):
        p = bot_env.comment_payload(ACTION_REPO, 6, login, body)
        p.pop("installation")
        return run_action(bot_env, tmp_path, "issue_comment", p, name)[0]

    assert comment("bob", "/autoresearch optimize cpu", "request")["state"] == "awaiting_approval"
    assert comment("carol", "/autoresearch cancel", "stranger")["state"] == "replied"      # neither requester nor approver
    out = comment("bob", "/autoresearch cancel", "cancel")                                 # the requester may
    assert out["state"] == "cancelled"
    assert comment("alice", "/autoresearch approve", "late")["state"] == "replied"         # nothing awaits approval now
    status = next(c for c in bot_env.bot_comments(ACTION_REPO, 6) if "<!-- autoresearch:status" in c["body"])
    shown = status["body"].replace("\u2060", "")          # mentions in messages are made inert (jobs.guard.mdsafe)
    assert "🛑 cancelled" in shown and "cancelled by @bob before it started" in shown
    out = comment("alice", "/autoresearch status", "status")
    assert out["state"] == "cancelled" and out["run-id"]
    assert not bot_env.github.pulls


def test_cancel_of_a_run_whose_workflow_is_gone_unblocks_the_issue(bot_env, tmp_path):
    """A `running` record whose workflow run can no longer be cancelled (here: the fake knows no such
    Actions run, and answers 409 as GitHub does for a finished run) is marked cancelled, not left running."""
    from bot.issuestore import STATE_MARKER, state_body
    from bot.record import to_fields
    from recordfixtures import record
    bot_env.add_target(ACTION_REPO, _target(tmp_path))
    bot_env.github.repos[ACTION_REPO].permissions["alice"] = ("write", "maintain")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    rec = to_fields(record(run_id="8-deadbee", repo=ACTION_REPO, name="synth-action", state="running", issue=8,
                           workflow_run_id="4242", base_commit="d" * 40))
    state = {"runs": {"8-deadbee": rec}, "current": "8-deadbee", "pr": None, "cancel": []}
    # A forged state comment by someone else (saying the run is over) comes first and is not trusted.
    forged = dict(state, runs={"8-deadbee": dict(rec, state="done")})
    bot_env.github.add_comment(ACTION_REPO, 8, "mallory", f"{STATE_MARKER}\n```json\n{json.dumps(forged)}\n```\n")
    bot_env.github.add_comment(ACTION_REPO, 8, BOT_LOGIN, state_body(STATE_KEY, ACTION_REPO, 8, state))

    p = bot_env.comment_payload(ACTION_REPO, 8, "alice", "/autoresearch cancel")
    p.pop("installation")
    out, _ = run_action(bot_env, tmp_path, "issue_comment", p, "cancel")
    assert out["state"] == "cancelled" and out["run-id"] == "8-deadbee"
    status = next(c for c in bot_env.bot_comments(ACTION_REPO, 8) if "<!-- autoresearch:status" in c["body"])
    assert "🛑 cancelled" in status["body"] and "workflow run 4242 could not be cancelled" in status["body"]


@pytest.mark.parametrize("sigint_ignored_at_start", [False, True])
def test_runner_cancellation_stops_the_run_and_says_so(bot_env, tmp_path, sigint_ignored_at_start):
    """Cancelling a workflow run sends the step SIGINT (then SIGTERM): the pipeline stops within a
    step, finished work stays on record, the status comment and outputs say cancelled. Also when the
    step's process was started with SIGINT ignored (as a shell starts a background job; Python then
    leaves it ignored): seen twice in the suite, a SIGINT that did nothing and a run that finished."""
    import signal
    import time
    t = _target(tmp_path)
    bench = (t / "bench.sh").read_text().replace("s=$(cat build/speed)", "sleep 0.3\ns=$(cat build/speed)")
    (t / "bench.sh").write_text(bench)
    git(t, "commit", "-qam", "slow benchmark")
    bot_env.add_target(ACTION_REPO, t)
    bot_env.github.repos[ACTION_REPO].permissions["alice"] = ("write", "maintain")
    bot_env.github.tokens[WORKFLOW_TOKEN] = 0
    p = bot_env.comment_payload(ACTION_REPO, 9, "alice", "/autoresearch optimize cpu")
    p.pop("installation")
    d = tmp_path / "sigint"
    d.mkdir()
    (d / "event.json").write_text(json.dumps(p))
    (d / "output").write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)),
           "GITHUB_EVENT_NAME": "issue_comment", "GITHUB_EVENT_PATH": str(d / "event.json"),
           "GITHUB_OUTPUT": str(d / "output"), "GITHUB_TOKEN": WORKFLOW_TOKEN, "GITHUB_RUN_ID": "77",
           "GITHUB_API_URL": bot_env.env["AUTORESEARCH_GITHUB_API_URL"],
           "GITHUB_SERVER_URL": f"file://{bot_env.git_root}", "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN,
           "AUTORESEARCH_STATE_KEY": STATE_KEY,
           "AUTORESEARCH_EXECUTOR": "local", "AUTORESEARCH_WORKDIR": str(tmp_path / "action-work"),
           "PYTHONPATH": str(ROOT)}
    # Either way the parent's own disposition is not passed on: the step starts as the test says.
    disposition = signal.SIG_IGN if sigint_ignored_at_start else signal.SIG_DFL
    proc = subprocess.Popen(_cli(), env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            statuses = [c["body"] for c in bot_env.bot_comments(ACTION_REPO, 9) if "<!-- autoresearch:status" in c["body"]]
            if statuses and "🏃 running" in statuses[0] and "calibrate" in statuses[0]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the run never reached calibration")
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    (tmp_path / "action.log").write_text(out)
    assert proc.returncode == 0, out[-3000:]
    assert parse_outputs((d / "output").read_text())["state"] == "cancelled"
    status = next(c for c in bot_env.bot_comments(ACTION_REPO, 9) if "<!-- autoresearch:status" in c["body"])
    assert "🛑 cancelled" in status["body"] and "machines released" in status["body"]
    assert not bot_env.github.pulls


def test_executor_choice_and_cloud_credentials(tmp_path, monkeypatch):
    from bot.action import _persist_cloud_credentials
    from bot.settings import Settings
    action_settings = Settings.for_action
    monkeypatch.setenv("HOME", str(tmp_path))
    assert action_settings({}).executor == "local"
    assert action_settings({"AWS_ACCESS_KEY_ID": "AKIA"}).executor == "skypilot"
    assert action_settings({"AWS_ACCESS_KEY_ID": "AKIA", "AUTORESEARCH_EXECUTOR": "local"}).executor == "local"
    s = action_settings({"GITHUB_API_URL": "https://ghe.example/api/v3/", "GITHUB_SERVER_URL": "https://ghe.example",
                         "RUNNER_TEMP": str(tmp_path / "rt")})
    assert (s.api_url, s.git_url, s.workdir) == ("https://ghe.example/api/v3", "https://ghe.example",
                                                 tmp_path / "rt" / "autoresearch")
    _persist_cloud_credentials({"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s1"})
    creds = tmp_path / ".aws" / "credentials"
    assert creds.stat().st_mode & 0o777 == 0o600 and "AKIA1" in creds.read_text()
    _persist_cloud_credentials({"AWS_ACCESS_KEY_ID": "AKIA2", "AWS_SECRET_ACCESS_KEY": "s2"})
    assert "AKIA2" not in creds.read_text()               # an existing credentials file is never replaced
