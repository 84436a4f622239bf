"""The image check: build the App's image, start compose.yaml's stack, and drive one webhook through
it to a draft PR (deploy/image-check.sh runs this with the project's venv; README, "Docker").

1. A Docker engine: the running one, or (as root) `dockerd --iptables=false --bridge=none`, started
   here and stopped at the end.
2. The base: `debian:12.11-slim` from the registry when it can be pulled, else a base made here from
   Debian's own packages (`debootstrap --variant=minbase bookworm` + `docker import`, which is what
   the registry's image is). With the local base, the Python dependencies come from a wheelhouse
   the host's pip fills (deploy/wheels), so the build needs no package index of its own.
3. The images: the App's (Dockerfile) and redis and nginx from Debian packages (deploy/redis,
   deploy/nginx), all built with `--network host`.
4. The stack: compose.yaml + deploy/compose.hostnet.yaml (every container on the host's network,
   listening on free loopback ports) + an override written here that points the App at the fake
   GitHub (tests/fakes/github.py, on loopback in this process) and mounts its git remotes.
5. One signed `issue_comment` (GitHub's own example payload, pointed at a tiny target with a
   maintainer candidate) POSTed to nginx's front door; the run is followed to a draft PR, and its
   summary must say that target code ran in the sandbox (bubblewrap inside the worker container).

Prints METRIC lines (image size, build, start and webhook-to-draft-PR times). Exit 0: passed;
1: a check failed (the message says which); 77: this host cannot run it (no engine can be started).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bot")]

REGISTRY_BASE = "debian:12.11-slim"
LOCAL_BASE = "autoresearch-base:bookworm"
APP_IMAGE, REDIS_IMAGE, NGINX_IMAGE = "autoresearch:local", "autoresearch-redis:local", "autoresearch-nginx:local"
APP_UID = 10001                   # the image's user (Dockerfile)
DEBIAN_PYTHON = "3.11.2"          # Debian 12's python3: the wheelhouse is for it
SKIP = 77


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


# -- the engine ------------------------------------------------------------------------------------
class Engine:
    """The Docker engine: the one already answering, or one this check starts (and stops)."""

    def __init__(self, workdir: Path):
        self.workdir, self.started = workdir, None

    def up(self) -> None:
        if shutil.which("docker") is None:
            raise CannotRun("no `docker` client (Debian: apt-get install docker.io)")
        if self._answers():
            return
        if os.geteuid() != 0 or shutil.which("dockerd") is None:
            raise CannotRun("no Docker engine answers and this check cannot start one (it needs root and "
                            "`dockerd`: apt-get install docker.io, then run as root)")
        logf = open(self.workdir / "dockerd.log", "w")
        log("starting dockerd --iptables=false --bridge=none (log: dockerd.log)")
        self.started = subprocess.Popen(["dockerd", "--iptables=false", "--bridge=none"], stdout=logf,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while not self._answers():
            if self.started.poll() is not None or time.monotonic() > deadline:
                tail = (self.workdir / "dockerd.log").read_text()[-3000:]
                self.down()
                raise CannotRun(f"dockerd did not start:\n{tail}")
            time.sleep(0.5)

    @staticmethod
    def _answers() -> bool:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0

    def down(self) -> None:
        if self.started and self.started.poll() is None:
            log("stopping the dockerd this check started")
            self.started.send_signal(signal.SIGTERM)
            try:
                self.started.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.started.kill()
                self.started.wait()


COMPOSE_DEB = ("trixie", "docker-compose", "2.26.1-4")   # Debian 13's Compose v2, when the host has none


def compose_command(workdir: Path) -> list[str]:
    """Compose v2: the docker plugin, a v2 `docker-compose`, else Debian 13's docker-compose package
    unpacked into a cache dir (apt with a private sources list: the host's apt setup is untouched).
    Debian 12's docker-compose (1.29) cannot pass the worker's `systempaths=unconfined`."""
    for argv in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(argv[0]):
            proc = subprocess.run([*argv, "version", "--short"], capture_output=True, text=True)
            major = proc.stdout.strip().lstrip("v").split(".")[0]
            if proc.returncode == 0 and major.isdigit() and int(major) >= 2:
                return argv
    suite, package, version = COMPOSE_DEB
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autoresearch-tests" / f"{package}-{version}"
    binary = cache / "usr" / "libexec" / "docker" / "cli-plugins" / "docker-compose"
    if binary.is_file():
        return [str(binary)]
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise CannotRun("no Compose v2 (docker compose): install the compose plugin")
    log(f"no Compose v2 here: unpacking Debian {suite}'s {package} {version} into {cache}")
    apt = workdir / "apt"
    for d in ("lists/partial", "cache/archives/partial"):
        (apt / d).mkdir(parents=True)
    (apt / "sources.list").write_text(f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                                      f"{debian_mirror()} {suite} main\n")
    opts = [f"-oDir::Etc::SourceList={apt / 'sources.list'}", "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}", "-oAPT::Sandbox::User=root"]
    run(["apt-get", *opts, "update", "-qq"], timeout=600)
    run(["apt-get", *opts, "download", f"{package}={version}"], timeout=600, cwd=apt)
    deb = next(apt.glob(f"{package}_*.deb"))
    cache.mkdir(parents=True, exist_ok=True)
    run(["dpkg-deb", "-x", str(deb), str(cache)])
    return [str(binary)]


# -- the base and the images -----------------------------------------------------------------------
def debian_mirror() -> str:
    """The Debian mirror this host's apt uses (deb822 or one-line sources), else deb.debian.org."""
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    for path in [Path("/etc/apt/sources.list"), *Path("/etc/apt").glob("sources.list.d/*.list")]:
        for line in path.read_text().splitlines() if path.is_file() else []:
            parts = line.split()
            if parts[:1] == ["deb"] and "debian" in line and "security" not in line:
                return next(p for p in parts[1:] if "://" in p)
    return "http://deb.debian.org/debian"


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def make_local_base(workdir: Path) -> None:
    """debootstrap a minimal bookworm and import it: what `debian:bookworm-slim` is, made here."""
    if shutil.which("debootstrap") is None:
        raise CannotRun("no registry base can be pulled and debootstrap is missing (apt-get install debootstrap)")
    mirror = debian_mirror()
    rootfs = workdir / "rootfs"
    t0 = time.monotonic()
    run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], timeout=1800)
    security = mirror.rstrip("/").removesuffix("/debian") + "/debian-security"
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {mirror} bookworm main\ndeb {mirror} bookworm-updates main\ndeb {security} bookworm-security main\n")
    policy = rootfs / "usr/sbin/policy-rc.d"      # no daemon starts while an image is built
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    for junk in ("var/lib/apt/lists", "var/cache/apt"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / junk).mkdir(parents=True)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run(["docker", "import", "-c", 'CMD ["bash"]', "-", LOCAL_BASE], stdin=tar.stdout,
                         capture_output=True, text=True)
    tar.stdout.close()
    if tar.wait() or imp.returncode:
        raise CheckFailed(f"docker import failed: {imp.stderr}")
    shutil.rmtree(rootfs, ignore_errors=True)
    metric("base_build_s", time.monotonic() - t0)


def choose_base(mode: str, workdir: Path, rebuild: bool) -> str:
    if mode in ("auto", "registry"):
        log(f"trying the registry base {REGISTRY_BASE}")
        pulled = subprocess.run(["docker", "pull", REGISTRY_BASE], capture_output=True, text=True, timeout=180)
        if pulled.returncode == 0:
            return REGISTRY_BASE
        if mode == "registry":
            raise CheckFailed(f"cannot pull {REGISTRY_BASE}: {pulled.stderr.strip()}")
        log(f"no registry ({pulled.stderr.strip()[:160]}): using a base made from Debian packages")
    if rebuild or not image_exists(LOCAL_BASE):
        make_local_base(workdir)
    return LOCAL_BASE


def fill_wheelhouse() -> None:
    """Wheels for every dependency, fetched by the host's pip, for Debian 12's Python on x86_64."""
    dest = ROOT / "deploy" / "wheels"
    common = ["--only-binary=:all:", "--python-version", DEBIAN_PYTHON, "--implementation", "cp",
              "--abi", "cp311", "--abi", "abi3", "--abi", "none",
              *[a for p in ("manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64", "linux_x86_64")
                for a in ("--platform", p)]]
    # async-timeout: redis needs it below Python 3.11.3, a marker pip download evaluates against
    # the host's Python rather than --python-version's.
    run([sys.executable, "-m", "pip", "download", "-q", "-d", str(dest), *common, f"{ROOT}[bot,llm]",
         "setuptools>=68", "wheel", "async-timeout>=4.0.3"], timeout=900)
    for stray in dest.glob("autoresearch-*"):
        stray.unlink()


def build_images(base: str, *, no_cache: bool = False) -> None:
    offline = base == LOCAL_BASE
    if offline:
        fill_wheelhouse()
    args = ["--network", "host", "--build-arg", f"BASE={base}", *(["--no-cache"] if no_cache else [])]
    for tag, context, extra in [(APP_IMAGE, ROOT, ["--build-arg", f"OFFLINE_WHEELS={'1' if offline else ''}"]),
                                (REDIS_IMAGE, ROOT / "deploy" / "redis", []),
                                (NGINX_IMAGE, ROOT / "deploy" / "nginx", [])]:
        t0 = time.monotonic()
        run(["docker", "build", *args, *extra, "-t", tag, str(context)], timeout=3600)
        metric(f"build_{tag.split(':')[0].replace('-', '_')}_s", time.monotonic() - t0)
    size = int(run(["docker", "image", "inspect", "-f", "{{.Size}}", APP_IMAGE], quiet=True).stdout)
    metric("image_bytes", size)
    metric("image_mb", size / 1e6)
    user = run(["docker", "image", "inspect", "-f", "{{.Config.User}}", APP_IMAGE], quiet=True).stdout.strip()
    if user.split(":")[0] in ("", "0", "root"):
        raise CheckFailed(f"{APP_IMAGE} runs as root (USER {user!r})")


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


SANDBOX_PROBE = ("from jobs import sandbox\ntry:\n    print('userns' if sandbox.check() else 'root-fallback')\n"
                 "except sandbox.SandboxUnavailable as exc:\n    print('unavailable:', exc)")


def check_containers(stack: Stack) -> None:
    """Both App containers run as the image's user, and the worker's bubblewrap works there with
    user namespaces (jobs.sandbox.check, the pipeline's own preflight)."""
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", choices=["auto", "local", "registry"], default="auto",
                    help="auto: the registry's Debian when it can be pulled, else one made with debootstrap")
    ap.add_argument("--rebuild-base", action="store_true", help="debootstrap again even if the local base exists")
    ap.add_argument("--run-timeout", type=float, default=1200, help="seconds from webhook to draft PR at most")
    ap.add_argument("--no-cache", action="store_true", help="build every image layer afresh (a cold build's time)")
    ap.add_argument("--keep", action="store_true", help="leave the stack (and a started dockerd) running")
    opts = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="autoresearch-image-check-"))
    engine = Engine(workdir)
    try:
        if os.geteuid() == 0 and not all(shutil.which(t) for t in ("docker", "dockerd", "debootstrap")):
            run(["bash", str(ROOT / "tests" / "system-deps.sh"), "--image-check"], timeout=1200)
        engine.up()
        compose = compose_command(workdir)
        base = choose_base(opts.base, workdir, opts.rebuild_base)
        log(f"base image: {base}")
        build_images(base, no_cache=opts.no_cache)
        drive_stack(compose, workdir, opts.run_timeout, keep=opts.keep)
        log("PASSED")
        return 0
    except CannotRun as exc:
        print(f"SKIP: {exc}", flush=True)
        return SKIP
    except CheckFailed as exc:
        print(f"FAILED: {exc}", flush=True)
        return 1
    finally:
        if not opts.keep:
            engine.down()
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"kept: {workdir}")


if __name__ == "__main__":
    sys.exit(main())
