"""The stack half of the image check (deploy/image_check.py builds the images, then calls
`drive_stack`): compose.yaml + deploy/compose.hostnet.yaml + an override that wires the App to the
fake GitHub (tests/fakes/github.py, on loopback in this process); one signed issue_comment through
nginx; the run followed to a draft PR and its sandbox checked. Also the shell helpers both share."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bot")]

APP_IMAGE = "autoresearch:local"
APP_UID = 10001                   # the image's user (Dockerfile)


class CheckFailed(Exception):
    pass


class CannotRun(Exception):
    pass


def log(msg: str) -> None:
    print(f"[image-check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(argv: list[str], *, timeout: float = 1800, check: bool = True, quiet: bool = False, **kw) -> subprocess.CompletedProcess:
    if not quiet:
        log("$ " + " ".join(argv))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode:
        raise CheckFailed(f"{' '.join(argv[:4])} … exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc


def metric(name: str, value: float) -> None:
    print(f"METRIC {name}={value:.3f}" if isinstance(value, float) else f"METRIC {name}={value}", flush=True)


# -- the stack -------------------------------------------------------------------------------------
def wait_http(url: str, timeout: float) -> float:
    t0 = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - t0
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() - t0 > timeout:
            raise CheckFailed(f"{url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.2)


REPO = "octo/synth"


def app_key(workdir: Path) -> tuple[Path, str]:
    """A fresh App key: the private half is the stack's file secret (readable by the image's user
    only), the public half is what the fake GitHub checks the App's JWTs with."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = workdir / "app.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    give_to_app(path)
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return path, public


def give_to_app(path: Path) -> None:
    """Files the containers write or read as the image's user: theirs (as root), else open to all."""
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        if os.geteuid() == 0:
            os.chown(p, APP_UID, APP_UID, follow_symlinks=False)
        elif not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o066 | (0o011 if p.is_dir() else 0))


def target_repo(workdir: Path) -> Path:
    """The tests' tiny synthetic target (a score in a file) with one maintainer candidate that makes
    it faster: the run keeps it and opens a draft PR within minutes."""
    from conftest import git
    from synthetic import patch_for, synthetic_target
    t = synthetic_target(workdir / "target")
    cand = t / ".github" / "autoresearch" / "candidates"
    cand.mkdir(parents=True)
    patch_for(t, cand / "faster.patch", {"src/speed.txt": "130\n"})
    git(t, "add", "-A")
    git(t, "commit", "-qm", "image check: a maintainer candidate")
    return t


def comment_template() -> dict:
    from botfixtures import install_examples
    index = json.loads(install_examples().read_text())
    return next(ex for spec in index if spec["name"] == "issue_comment"
                for ex in spec["examples"] if ex.get("action") == "created")


class Stack:
    def __init__(self, compose: list[str], files: list[Path], project: str, env: dict[str, str]):
        self.argv = [*compose, "-p", project, *[a for f in files for a in ("-f", str(f))]]
        self.env = {**os.environ, **env}

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        return run([*self.argv, *args], env=self.env, check=check, timeout=timeout, cwd=ROOT)

    def logs(self) -> str:
        return self("logs", "--no-color", "--tail", "60", check=False).stdout[-12000:]


def drive_stack(compose: list[str], workdir: Path, run_timeout: float, *, keep: bool) -> None:
    from botfixtures import APP_ID, BOT_LOGIN, SECRET, BotEnv
    from conftest import free_port
    from fakes.github import FakeGitHub
    from fakes.openapi import openapi
    openapi()                                   # the fake's answers are checked against GitHub's description
    import logging
    logging.getLogger("werkzeug").setLevel(logging.WARNING)     # the fake's request log

    # The fake GitHub's git reads repositories the containers' user owns.
    os.environ.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
    key_file, public = app_key(workdir)
    git_root, runs = workdir / "remotes", workdir / "runs"
    git_root.mkdir()
    runs.mkdir()
    fake = FakeGitHub(git_root, APP_ID, public, bot_login=BOT_LOGIN)
    api = fake.start()
    redis_port, web_port, proxy_port = free_port(), free_port(), free_port()
    front = f"http://127.0.0.1:{proxy_port}"
    bot = BotEnv(front, fake, None, {}, git_root, runs, comment_template())
    bot.add_target(REPO, target_repo(workdir))
    fake.repos[REPO].permissions["alice"] = ("write", "maintain")
    give_to_app(git_root)
    give_to_app(runs)

    # The App talks to the fake GitHub on loopback and clones/pushes its remotes by file:// URL; the
    # run folders are a host directory so this check can read the run's summary.
    mounts = [f"{runs}:/var/lib/autoresearch", f"{git_root}:{git_root}"]
    wiring = {"AUTORESEARCH_GITHUB_API_URL": api, "AUTORESEARCH_GIT_URL": f"file://{git_root}",
              "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN}
    override = workdir / "compose.check.yaml"
    override.write_text(json.dumps({"services": {s: {"environment": wiring, "volumes": mounts}
                                                 for s in ("web", "worker")}}, indent=2))
    stack = Stack(compose, [ROOT / "compose.yaml", ROOT / "deploy" / "compose.hostnet.yaml", override],
                  f"autoresearch-check-{os.getpid()}",
                  {"AUTORESEARCH_APP_ID": APP_ID, "AUTORESEARCH_WEBHOOK_SECRET": SECRET,
                   "AUTORESEARCH_PRIVATE_KEY_FILE": str(key_file), "AUTORESEARCH_REDIS_PORT": str(redis_port),
                   "AUTORESEARCH_WEB_PORT": str(web_port), "AUTORESEARCH_PROXY_PORT": str(proxy_port)})
    try:
        t0 = time.monotonic()
        stack("up", "-d", "--no-build")
        wait_http(f"{front}/healthz", 180)
        metric("stack_up_to_healthz_s", time.monotonic() - t0)
        stack("stop", "web")                    # the App's container alone: start to /healthz answering
        t0 = time.monotonic()
        stack("start", "web")
        wait_http(f"http://127.0.0.1:{web_port}/healthz", 180)
        metric("web_start_to_healthz_s", time.monotonic() - t0)
        wait_http(f"{front}/healthz", 30)
        check_containers(stack)

        t0 = time.monotonic()
        sent = bot.comment(REPO, 1, "alice", "Let's try it.\n/autoresearch optimize cpu\n")
        if sent.status != 202:
            raise CheckFailed(f"the front door answered {sent.status} {sent.body} to a signed issue_comment")
        metric("webhook_ack_ms", sent.seconds * 1000)
        pr = follow_to_draft_pr(bot, stack, t0, run_timeout)
        metric("webhook_to_draft_pr_s", time.monotonic() - t0)
        check_run(pr, runs, bot)
        wait_healthy(stack, ("web", "worker"), 120)
        if fake.violations:
            raise CheckFailed("the fake GitHub answered outside GitHub's OpenAPI description:\n"
                              + "\n".join(fake.violations[:10]))
    except CheckFailed as exc:
        raise CheckFailed(f"{exc}\n--- compose logs ---\n{stack.logs()}") from None
    finally:
        if not keep:
            stack("down", "-v", "--remove-orphans", check=False)
        fake.stop()


SANDBOX_PROBE = ("from jobs.guard import sandbox\ntry:\n    print('userns' if sandbox.check() else 'root-fallback')\n"
                 "except sandbox.SandboxUnavailable as exc:\n    print('unavailable:', exc)")


def check_containers(stack: Stack) -> None:
    """Both App containers run as the image's user, and the worker's bubblewrap works there with
    user namespaces (jobs.guard.sandbox.check, the pipeline's own preflight)."""
    for service in ("web", "worker"):
        uid = stack("exec", "-T", service, "id", "-u").stdout.strip()
        if uid != str(APP_UID):
            raise CheckFailed(f"the {service} container runs as uid {uid}, not the image's user {APP_UID}")
    probe = stack("exec", "-T", "worker", "python", "-c", SANDBOX_PROBE).stdout.strip()
    if probe != "userns":
        raise CheckFailed(f"bubblewrap in the worker container: {probe}")
    log(f"web and worker run as uid {APP_UID}; bubblewrap works in the worker (user namespaces)")
    # What the worker's security_opt is for (logged, not asserted: a kernel may differ).
    for opts in ([], ["--security-opt", "seccomp=unconfined"]):
        out = run(["docker", "run", "--rm", "--network", "host", *opts, "--entrypoint", "python", APP_IMAGE,
                   "-c", SANDBOX_PROBE], check=False, quiet=True).stdout.strip()
        log(f"without compose's worker options ({' '.join(opts) or 'Docker defaults'}): {out[:160]}")


def wait_healthy(stack: Stack, services: tuple[str, ...], timeout: float) -> None:
    """The images' and compose's own health checks pass (the web one on the host-network port)."""
    t0 = time.monotonic()
    for service in services:
        cid = stack("ps", "-q", service).stdout.strip()
        while True:
            health = run(["docker", "inspect", "-f", "{{.State.Health.Status}}", cid], quiet=True).stdout.strip()
            if health == "healthy":
                break
            if time.monotonic() - t0 > timeout:
                raise CheckFailed(f"the {service} container is {health!r}, not healthy, after {timeout:.0f} s")
            time.sleep(1)
    log(f"{', '.join(services)}: healthy")


def follow_to_draft_pr(bot, stack: Stack, t0: float, timeout: float) -> dict:
    last = ""
    while time.monotonic() - t0 < timeout:
        pulls = [{**p, "number": n} for (repo, n), p in bot.github.pulls.items() if repo == REPO]
        if pulls:
            return pulls[0]
        status = [c["body"] for c in bot.bot_comments(REPO, 1) if "<!-- autoresearch:status" in c["body"]]
        line = next((ln for ln in (status[-1].splitlines() if status else []) if ln.startswith("| phase")),
                    "(no status comment yet)")
        if line != last:
            log(f"status after {time.monotonic() - t0:.0f} s: {line[:150]}")
            last = line
        if any(w in (status[-1] if status else "") for w in ("❌", "🛑")):
            raise CheckFailed(f"the run ended without a PR:\n{status[-1]}")
        time.sleep(1)
    raise CheckFailed(f"no draft PR within {timeout:.0f} s")


def check_run(pr: dict, runs: Path, bot) -> None:
    if not pr["draft"] or not pr["head"].startswith("autoresearch/"):
        raise CheckFailed(f"the PR is not the bot's draft: draft={pr['draft']} head={pr['head']}")
    if "| score |" not in pr["body"] or "WITHOUT a sandbox" in pr["body"]:
        raise CheckFailed(f"the PR body is not a sandboxed run's report:\n{pr['body'][:3000]}")
    run_id = pr["head"].removeprefix("autoresearch/")
    summaries = list(runs.glob(f"**/{run_id}/out/summary.json"))
    if len(summaries) != 1:
        raise CheckFailed(f"expected one summary.json for run {run_id} under the run folders, found {summaries}")
    summary = json.loads(summaries[0].read_text())
    if summary.get("sandboxed") is not True:
        raise CheckFailed(f"the run's summary says sandboxed={summary.get('sandboxed')!r}")
    experiments = summary.get("experiments", [])
    unsandboxed = [e["name"] for e in experiments if e.get("runner", {}).get("sandboxed") is not True]
    if not experiments or unsandboxed:
        raise CheckFailed(f"experiments measured outside the sandbox: {unsandboxed or 'no experiments'}")
    kept = [e["name"] for e in experiments if e.get("status") == "keep"]
    log(f"draft PR #{pr['number']} from {pr['head']}; run {run_id} ran sandboxed; kept: {kept}")
