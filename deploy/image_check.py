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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_stack import (APP_IMAGE, ROOT, CannotRun, CheckFailed, drive_stack, log,  # noqa: E402
                         metric, run)

REGISTRY_BASE = "debian:12.11-slim"
LOCAL_BASE = "autoresearch-base:bookworm"
REDIS_IMAGE, NGINX_IMAGE = "autoresearch-redis:local", "autoresearch-nginx:local"
DEBIAN_PYTHON = "3.11.2"          # Debian 12's python3: the wheelhouse is for it
SKIP = 77


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
