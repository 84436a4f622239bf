"""Shared fixtures. Real parts only: a real redis-server on a free loopback port, real git."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLOW_TIMEOUT_S = 3 * 3600   # a slow test builds llama.cpp twice: well over an hour on a loaded 2-core machine


def pytest_collection_modifyitems(config, items):
    """The default suite's per-test timeout (pyproject.toml) catches a hang in a test sized for a
    test; a slow test without its own timeout mark gets SLOW_TIMEOUT_S instead.

    Every `measures` test joins one xdist group: with `--dist loadgroup` (make test) one worker runs
    them one after another while the other workers take the tests that measure nothing (compiles,
    qemu, Monte-Carlo, unit tests). Two measuring tests side by side make each other's noise and
    each then needs more pairs (seen with two workers and worksteal); one measuring test beside
    CPU work costs it far less than waiting for that work would."""
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        if item.get_closest_marker("measures"):
            item.add_marker(pytest.mark.xdist_group("measures"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A private redis-server for this test session (never the shared one, never fakeredis)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not installed; run `make test` (it installs it)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a killed child its parent has not reaped yet)."""
    from jobs.guard.procfs import stat_fields
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        if rel.endswith(".sh"):
            f.chmod(0o755)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path
