"""End to end through real parts: signed webhook over HTTP -> Flask -> Redis/RQ (real workers)
-> fake GitHub on loopback + bare git remotes -> the real pipeline on the synthetic target."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rq import Queue

from bot.jobqueue import COMMANDS, RUNS
from jobs.measure.isolation import backings
from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import ROOT, git
from synthetic import FASTER, patch_for, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

REPO = "octo/synth"


def _target(tmp_path: Path, *, candidate: bool = True, bench_sleep: float = 0.0, config: str | None = None,
            env_dump: Path | None = None) -> Path:
    t = synthetic_target(tmp_path / "target")
    if candidate:
        # A maintainer candidate: the bot evaluates .github/autoresearch/candidates/*.patch as hypotheses.
        cand = t / ".github" / "autoresearch" / "candidates"
        cand.mkdir(parents=True)
        patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
        (cand / "faster.patch").write_text((tmp_path / "faster.patch").read_text())
    if env_dump:       # the target's own build script records the environment it was given, in the
        # one place outside its tree a sandboxed build may write: a cache its config declares.
        (t / "build.sh").write_text(f"env >> {env_dump}/env.txt\n" + (t / "build.sh").read_text())
        cfg = t / ".github" / "autoresearch.yml"
        cfg.write_text(cfg.read_text() + f"sandbox: {{caches: ['{env_dump}']}}\n")
    if bench_sleep:
        bench = (t / "bench.sh").read_text().replace("s=$(cat build/speed)", f"sleep {bench_sleep}\ns=$(cat build/speed)")
        (t / "bench.sh").write_text(bench)
    if config is not None:
        (t / ".github" / "autoresearch.yml").write_text(config)
    git(t, "add", "-A")
    git(t, "commit", "-qm", "bot test setup", "--allow-empty")
    return t


def _setup(bot_env, tmp_path, **kw) -> Path:
    t = _target(tmp_path, **kw)
    bot_env.add_target(REPO, t)
    perms = bot_env.github.repos[REPO].permissions
    perms["alice"] = ("write", "maintain")
    perms["bob"] = ("read", "read")
    return t


def _run(bot_env, issue: int = 1) -> dict:
    from bot.store import Store
    return Store(bot_env.redis).current_run(REPO, issue)


def _status_comments(bot_env, issue: int = 1) -> list[dict]:
    return [c for c in bot_env.bot_comments(REPO, issue) if "<!-- autoresearch:status" in c["body"]]


def _no_token_on_disk(bot_env) -> None:
    tokens = list(bot_env.github.tokens)
    assert tokens
    for path in bot_env.workdir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for token in tokens:
                assert token.encode() not in data, f"token leaked into {path}"


def test_maintainer_comment_plan_run_draft_pr_and_rerun(bot_env, tmp_path, request):
    dump = Path.home() / ".cache" / "autoresearch" / f"test-env-{tmp_path.name}"
    request.addfinalizer(lambda: [shutil.rmtree(d, ignore_errors=True) for d in [dump, *backings(dump)]])
    _setup(bot_env, tmp_path, env_dump=dump)
    payload = bot_env.comment_payload(REPO, 1, "alice", "Let's try it.\n/autoresearch optimize cpu\n")
    first = bot_env.deliver("issue_comment", payload, delivery="dup-1")
    again = bot_env.deliver("issue_comment", payload, delivery="dup-1")       # GitHub redelivers
    assert first.status == 202 and again.status == 200 and again.body["status"] == "duplicate"
    assert Queue(COMMANDS, connection=bot_env.redis).count == 1
    bot_env.work()

    comment_id = payload["comment"]["id"]
    assert {"comment_id": comment_id, "content": "eyes", "user": BOT_LOGIN} in bot_env.github.reactions
    rec = _run(bot_env)
    assert rec.state == "done", rec
    comments = bot_env.bot_comments(REPO, 1)
    plans = [c for c in comments if "<!-- autoresearch:plan" in c["body"]]
    assert len(plans) == 1 and "1 experiment(s)" in plans[0]["body"] and "0.00 USD" in plans[0]["body"]
    assert "`faster.patch`" in plans[0]["body"]
    statuses = _status_comments(bot_env)
    assert len(statuses) == 1                      # one sticky status comment, edited in place
    body = statuses[0]["body"]
    assert "✅ done" in body and "1/1" in body and "`faster` +" in body and "USD" in body and "/pull/100" in body
    assert len(bot_env.github.pulls) == 1          # exactly one run, one PR
    pr = bot_env.github.pulls[(REPO, 100)]
    assert pr["draft"] and pr["head"] == f"autoresearch/{rec.run_id}"
    assert "| score |" in pr["body"] and "AI-generated" in pr["body"] and pr["body"].rstrip().endswith("Closes #1")
    bare = bot_env.git_root / f"{REPO}.git"
    log = git(bare, "log", "--format=%s", f"main..autoresearch/{rec.run_id}").splitlines()
    assert log == ["faster: maintainer candidate"]
    _no_token_on_disk(bot_env)
    # The declared cache is the build's view; its repository's namespace keeps what it wrote.
    seen = "".join((d / "env.txt").read_text() for d in backings(dump) if (d / "env.txt").is_file())    # what target code saw: no token, no App secrets or settings
    assert "PATH=" in seen and "AUTORESEARCH_" not in seen and "ghs_" not in seen and "Authorization" not in seen
    clone_config = (bot_env.workdir / "octo" / "synth" / rec.run_id / "repo" / ".git" / "config").read_text()
    assert "extraheader" not in clone_config.lower() and "x-access-token" not in clone_config

    # A rerun of the same request resumes the same run and updates the same PR.
    bot_env.github.pulls[(REPO, 100)]["body"] = "stale"
    assert bot_env.comment(REPO, 1, "alice", "/autoresearch optimize cpu").status == 202
    bot_env.work()
    assert _run(bot_env).state == "done"
    assert len(bot_env.github.pulls) == 1 and "| score |" in bot_env.github.pulls[(REPO, 100)]["body"]
    assert len(_status_comments(bot_env)) == 1


def test_outsider_waits_for_approval_and_approval_binds_to_base(bot_env, tmp_path):
    target = _setup(bot_env, tmp_path, candidate=False)
    assert bot_env.comment(REPO, 2, "bob", "/autoresearch optimize cpu").status == 202
    bot_env.work(COMMANDS)
    rec = _run(bot_env, 2)
    assert rec.state == "awaiting_approval" and rec.approval is None
    assert Queue(RUNS, connection=bot_env.redis).count == 0          # nothing runs, nothing is spent
    plan = next(c for c in bot_env.bot_comments(REPO, 2) if "<!-- autoresearch:plan" in c["body"])
    assert "awaiting approval" in plan["body"] and "does not have write access" in plan["body"]

    assert f"/autoresearch approve {rec.plan_digest}" in plan["body"]

    # The outsider cannot approve their own request.
    bot_env.comment(REPO, 2, "bob", f"/autoresearch approve {rec.plan_digest}")
    bot_env.work(COMMANDS)
    assert _run(bot_env, 2).state == "awaiting_approval"
    assert "may not approve" in bot_env.bot_comments(REPO, 2)[-1]["body"]

    # Another user without write access cannot replace the pending plan (issue 12): answered, unchanged.
    bot_env.comment(REPO, 2, "carol", "/autoresearch optimize cpu budget=0")
    bot_env.work(COMMANDS)
    assert "may not replace it" in bot_env.bot_comments(REPO, 2)[-1]["body"]
    assert _run(bot_env, 2) == rec

    # A bare approve names no plan: nothing is approved, and the reply says which plan waits.
    bot_env.comment(REPO, 2, "alice", "/autoresearch approve")
    bot_env.work(COMMANDS)
    assert _run(bot_env, 2).state == "awaiting_approval"
    assert f"/autoresearch approve {rec.plan_digest}" in bot_env.bot_comments(REPO, 2)[-1]["body"]
    bot_env.comment(REPO, 2, "alice", "/autoresearch approve 0123456789abcdef")
    bot_env.work(COMMANDS)
    assert _run(bot_env, 2).state == "awaiting_approval"
    assert "is not the one awaiting approval" in bot_env.bot_comments(REPO, 2)[-1]["body"]

    # A maintainer approves; then the default branch moves before the run starts: approval is void.
    bot_env.comment(REPO, 2, "alice", f"/autoresearch approve {rec.plan_digest}")
    bot_env.work(COMMANDS)
    rec = _run(bot_env, 2)
    assert rec.state == "queued" and rec.approval.by == "alice"
    (target / "src" / "code.c").write_text("int main(void) { return 1; }\n")
    git(target, "commit", "-qam", "moved on")
    git(target, "push", "-q", str(bot_env.git_root / f"{REPO}.git"), "HEAD:main")
    bot_env.work(RUNS)
    old = rec.run_id
    rec = _run(bot_env, 2)
    assert rec.run_id != old and rec.state == "awaiting_approval" and "moved" in rec.message
    from bot.store import Store
    assert Store(bot_env.redis).get_run(REPO, old).state == "cancelled"
    assert not (bot_env.workdir / "octo" / "synth" / old / "out").exists()      # nothing ran

    # Approved again at the new base: it runs (no candidates, no recipes: nothing to try, so it stops
    # before the calibration and says so, without a PR).
    bot_env.comment(REPO, 2, "alice", f"/autoresearch approve {rec.plan_digest}")
    bot_env.work()
    rec = _run(bot_env, 2)
    assert rec.state == "done", rec
    assert not bot_env.github.pulls
    assert any("nothing was measured and no pull request was opened" in c["body"]
               for c in bot_env.bot_comments(REPO, 2))
    assert not (bot_env.workdir / "octo" / "synth" / rec.run_id / "out" / "pr.md").exists()
    assert "✅ done" in _status_comments(bot_env, 2)[-1]["body"]


def test_cancel_mid_run_stops_jobs(bot_env, tmp_path):
    _setup(bot_env, tmp_path, bench_sleep=0.3)
    bot_env.comment(REPO, 3, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    assert _run(bot_env, 3).state == "queued"
    env = {**os.environ, **bot_env.env}
    worker = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker", "--burst", "--queues", RUNS],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rec = _run(bot_env, 3)
            if rec.state == "running" and "calibrate" in rec.phase:
                break
            assert worker.poll() is None, worker.stdout.read().decode()
            time.sleep(0.1)
        else:
            pytest.fail(f"the run did not start: {rec}")
        assert "🏃 running" in _status_comments(bot_env, 3)[0]["body"]
        bot_env.comment(REPO, 3, "bob", "/autoresearch cancel")          # not bob's run: refused
        bot_env.comment(REPO, 3, "alice", "/autoresearch cancel")
        bot_env.work(COMMANDS)
        out, _ = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, out.decode()[-3000:]
    rec = _run(bot_env, 3)
    assert rec.state == "cancelled" and "jobs stopped" in rec.message
    assert any("may not cancel" in c["body"] for c in bot_env.bot_comments(REPO, 3))
    status = _status_comments(bot_env, 3)
    assert len(status) == 1 and "🛑 cancelled" in status[0]["body"] and "jobs stopped" in status[0]["body"]
    assert Queue(RUNS, connection=bot_env.redis).count == 0 and not bot_env.github.pulls
    clone = bot_env.workdir / "octo" / "synth" / rec.run_id / "repo"
    assert git(clone, "worktree", "list").count("\n") == 0        # the experiment worktree was released


def test_cancel_before_start_cancels_the_queued_job(bot_env, tmp_path):
    _setup(bot_env, tmp_path, candidate=False)
    bot_env.comment(REPO, 4, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    assert Queue(RUNS, connection=bot_env.redis).count == 1
    bot_env.comment(REPO, 4, "alice", "/autoresearch cancel")
    bot_env.work(COMMANDS)
    rec = _run(bot_env, 4)
    assert rec.state == "cancelled" and Queue(RUNS, connection=bot_env.redis).count == 0
    bot_env.work()
    assert _run(bot_env, 4).state == "cancelled"
    assert "🛑 cancelled" in _status_comments(bot_env, 4)[0]["body"]


def test_bad_config_names_the_field_and_starts_nothing(bot_env, tmp_path):
    bad = "build: make\nbenchmark: ./b.sh\nchecks: ./c.sh\nmetrics: [{name: s, primary: true}]\neditable: [src]\nbudget: {usd: -3}\n"
    _setup(bot_env, tmp_path, candidate=False, config=bad)
    bot_env.comment(REPO, 5, "alice", "/autoresearch optimize cpu")
    bot_env.work()
    reply = bot_env.bot_comments(REPO, 5)[-1]["body"]
    assert "not valid" in reply and "`budget.usd`" in reply
    assert _run(bot_env, 5) is None and Queue(RUNS, connection=bot_env.redis).count == 0


def test_malformed_command_and_unknown_override_get_help(bot_env, tmp_path):
    _setup(bot_env, tmp_path, candidate=False)
    payload = bot_env.comment_payload(REPO, 6, "bob", "/autoresearch optimise cpu")
    bot_env.deliver("issue_comment", payload)
    bot_env.comment(REPO, 6, "alice", "/autoresearch optimize cpu metric=tg128")
    bot_env.comment(REPO, 6, "alice", "/autoresearch status")
    bot_env.work()
    replies = [c["body"] for c in bot_env.bot_comments(REPO, 6)]
    assert "unknown command `optimise`" in replies[0] and "/autoresearch optimize cpu" in replies[0]
    assert "metric=tg128: not a metric of this target" in replies[1]
    assert "no run on this issue" in replies[2]
    assert {"comment_id": payload["comment"]["id"], "content": "eyes", "user": BOT_LOGIN} in bot_env.github.reactions
    assert _run(bot_env, 6) is None


def test_fork_push_and_bench_on_the_bot_pr(bot_env, tmp_path, monkeypatch):
    _setup(bot_env, tmp_path)
    # The configured fork: a bare repo of the same project under another owner.
    fork = bot_env.git_root / "forker" / "synth.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(bot_env.git_root / f"{REPO}.git"), str(fork)], check=True)
    monkeypatch.setenv("AUTORESEARCH_FORK_OWNER", "forker")
    bot_env.comment(REPO, 7, "alice", "/autoresearch optimize cpu")
    bot_env.work()
    rec = _run(bot_env, 7)
    assert rec.state == "done", rec
    pr = bot_env.github.pulls[(REPO, 100)]
    assert pr["head"] == f"forker:autoresearch/{rec.run_id}" and pr["draft"]
    assert git(fork, "rev-parse", "--verify", "-q", f"refs/heads/autoresearch/{rec.run_id}")
    assert not git(bot_env.git_root / f"{REPO}.git", "branch", "--list", "autoresearch/*")   # upstream untouched
    # The PR's Reproduce block runs on the maintainer's machine: it clones the repository by its URL
    # and fetches the branch from the fork it went to, never the worker's clone (nor its `origin/`).
    script = pr["body"].split("## Reproduce")[1].split("```sh\n")[1].split("\n```")[0]
    git_url = bot_env.env["AUTORESEARCH_GIT_URL"]
    assert f'git clone -q {git_url}/{REPO}.git "$work/target"' in script, script
    assert f"fetch -q {git_url}/forker/synth.git autoresearch/{rec.run_id}" in script, script
    assert str(bot_env.workdir) not in pr["body"] and "origin/" not in script
    # Its git steps, run as written: the patch it measures is the kept change.
    lines = script.splitlines()
    steps = lines[:next(i for i, line in enumerate(lines) if "autoresearch run" in line)]
    patch = subprocess.run(["bash", "-e", "-c", "\n".join(steps) + '\ncat "$work/head.patch"'], cwd=tmp_path,
                           env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, check=True)
    assert "+++ b/src/speed.txt" in patch.stdout and "+" + FASTER.strip() in patch.stdout, patch.stdout + patch.stderr

    # `/autoresearch bench` on that PR re-measures its head against its base.
    assert bot_env.comment(REPO, 100, "bob", "/autoresearch bench", pr=True).status == 202
    assert bot_env.comment(REPO, 100, "alice", "/autoresearch bench", pr=True).status == 202
    bot_env.work()
    replies = [c["body"] for c in bot_env.bot_comments(REPO, 100)]
    assert "may not start a bench" in replies[0]
    report = next(b for b in replies if b.startswith("autoresearch bench of"))
    assert "| score |" in report and "kept" in report, report
    # Its Reproduce block too clones the repository by its URL and fetches the pull request's head
    # from the fork it lives in: no worker path anywhere in the reply.
    bench_script = report.split("## Reproduce")[1].split("```sh\n")[1].split("\n```")[0]
    assert f'git clone -q {git_url}/{REPO}.git "$work/target"' in bench_script, bench_script
    assert f"fetch -q {git_url}/forker/synth.git autoresearch/{rec.run_id}" in bench_script, bench_script
    assert str(bot_env.workdir) not in report and "origin/" not in bench_script
    _no_token_on_disk(bot_env)


def test_research_and_planning_happen_once_per_run(bot_env, tmp_path, monkeypatch):
    """optimize researches and plans the clone once; the run (another RQ job, another process)
    uses that preparation, and the pipeline is handed the research instead of scanning again."""
    import jobs.api
    import jobs.run.preparation
    import jobs.run.research_phase
    calls = tmp_path / "calls.txt"            # work horses are forked: they inherit the spies, not memory

    def spy(name, real):
        def wrapper(*args, **kwargs):
            with calls.open("a") as fh:
                fh.write(name + "\n")
            return real(*args, **kwargs)
        return wrapper
    monkeypatch.setattr(jobs.run.preparation, "research", spy("research in prepare", jobs.run.preparation.research))
    monkeypatch.setattr(jobs.run.research_phase, "research", spy("research in the pipeline", jobs.run.research_phase.research))
    monkeypatch.setattr(jobs.api, "prepare", spy("prepare", jobs.api.prepare))
    _setup(bot_env, tmp_path)
    bot_env.comment(REPO, 8, "alice", "/autoresearch optimize cpu")
    bot_env.work(COMMANDS)
    assert calls.read_text().splitlines() == ["prepare", "research in prepare"]
    bot_env.work(RUNS)
    rec = _run(bot_env, 8)
    assert rec.state == "done", rec
    assert calls.read_text().splitlines() == ["prepare", "research in prepare"]      # nothing again
    out = bot_env.workdir / "octo" / "synth" / rec.run_id / "out"
    assert "faster" in (out / "research.md").read_text()          # the pipeline still wrote its research report


def test_a_github_outage_on_approve_is_answered_and_retried(bot_env, tmp_path):
    """The permission API answering 500 to an approve: the commenter is told it failed and will be
    retried (not left with 👀 alone), and the retry approves once GitHub answers again."""
    _setup(bot_env, tmp_path, candidate=False)
    assert bot_env.comment(REPO, 5, "bob", "/autoresearch optimize cpu").status == 202
    bot_env.work(COMMANDS)
    rec = _run(bot_env, 5)
    assert rec.state == "awaiting_approval"
    path = f"/repos/{REPO}/collaborators/alice/permission"
    bot_env.github.faults[("GET", path)] = 500
    bot_env.comment(REPO, 5, "alice", f"/autoresearch approve {rec.plan_digest}")
    bot_env.work(COMMANDS)
    last = bot_env.bot_comments(REPO, 5)[-1]["body"]
    assert "could not handle `approve`" in last and "GitHub answered 500" in last and "tried again in 5 s" in last
    assert _run(bot_env, 5).state == "awaiting_approval"
    # One quick retry in the job (bot/github.py RETRIES), then the queue's retry takes over.
    assert [s for m, p, s in bot_env.github.log if (m, p) == ("GET", path)] == [500, 500]

    del bot_env.github.faults[("GET", path)]
    time.sleep(5.5)                       # RQ's retry interval: the job is due again
    from rq import Worker
    Worker([COMMANDS], connection=bot_env.redis).work(burst=True, with_scheduler=True)
    assert _run(bot_env, 5).state == "queued" and _run(bot_env, 5).approval.by == "alice"
