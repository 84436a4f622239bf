"""The sandbox every target step runs in (bubblewrap), attacked the way a hostile build would."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import alive
from jobs.guard import sandbox

pytestmark = pytest.mark.skipif(subprocess.run(["which", "bwrap"], capture_output=True).returncode != 0,
                                reason="bubblewrap is installed by `make test` (tests/system-deps.sh)")


def policy(tree: Path, writable: bool = True, **env) -> sandbox.Policy:
    home = str(Path.home())
    return sandbox.Policy(tree=tree, tree_writable=writable, home=home,
                          env=sandbox.environment([], extra=env, home=home))


def test_secret_files_outside_the_tree_are_invisible(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    secret = tmp_path / "app-key.pem"
    secret.write_text("-----BEGIN PRIVATE KEY----- hunter2")
    home_secret = Path.home() / ".autoresearch-test-secret"
    home_secret.write_text("hunter3")
    try:
        c = sandbox.run(f"cat {secret}; cat {home_secret}; find / -name 'app-key.pem' 2>/dev/null; ls -A ~",
                        tree, 30, policy=policy(tree))
    finally:
        home_secret.unlink()
    assert "hunter2" not in c.output and "hunter3" not in c.output
    assert "No such file" in c.output


def test_no_other_process_and_no_environment_of_the_app(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_supersecret")
    monkeypatch.setenv("AUTORESEARCH_PRIVATE_KEY_PATH", "/etc/app.pem")
    victim = subprocess.Popen(["sleep", "30"], env={**os.environ, "INSTALLATION_TOKEN": "ghs_victim"})
    try:
        c = sandbox.run("ps ax; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env", tmp_path, 30,
                        policy=policy(tmp_path))
    finally:
        victim.kill()
    assert "ghs_victim" not in c.output and "ghs_supersecret" not in c.output
    assert "/etc/app.pem" not in c.output
    assert "sleep 30" not in c.output               # the host's processes are not even listed


def test_no_network_not_even_loopback(tmp_path, redis_url):
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass                                    # reachable from here ...
    c = sandbox.run(f"exec 3<>/dev/tcp/127.0.0.1/{port} && printf 'SET pwned 1\\r\\n' >&3 && echo CONNECTED",
                    tmp_path, 30, policy=policy(tmp_path))
    assert "CONNECTED" not in c.output and c.returncode != 0   # ... but not from inside


def test_a_setsid_daemon_does_not_outlive_its_step_and_its_cpu_is_charged(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    # The daemon does a fixed amount of work, says so, then spins until it is killed: whatever
    # the machine's load, the step is charged at least that work.
    work = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"
    (tree / "daemon.sh").write_text(f"#!/bin/bash\n{work}\ntouch worked\nwhile :; do :; done\n")
    alone = sandbox.run(f"bash -c '{work}'", tree, 120, policy=policy(tree))
    c = sandbox.run("setsid nohup bash ./daemon.sh >/dev/null 2>&1 & "
                    "while [ ! -e worked ]; do sleep 0.05; done; echo done", tree, 120, policy=policy(tree))
    assert c.returncode == 0 and "done" in c.output
    time.sleep(0.2)
    leftovers = subprocess.run(["pgrep", "-f", "bash ./daemon.sh"], capture_output=True, text=True).stdout.split()
    assert not [p for p in leftovers if alive(int(p))], "the daemon survived its step"
    # Uncharged, the step would cost only its polling loop (a few ms). The same work's CPU time
    # varies by a third between processes on a busy host (1.59 s vs 2.15 s seen in one run), so
    # the bound leaves room for that and still fails by a factor of ~100 when nothing is charged.
    assert c.cpu_s >= 0.4 * alone.cpu_s, f"the daemon's CPU was not charged ({c.cpu_s:.3f} s vs {alone.cpu_s:.3f} s)"


def test_private_tmp_and_home_and_a_read_only_benchmark_tree(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    marker = f"ar-test-{os.getpid()}"
    first = sandbox.run(f"echo cached > /tmp/{marker}; echo cached > ~/{marker}; echo cached > /dev/shm/{marker}; "
                        f"echo x > ./{marker} && echo WROTE-TREE", tree, 30, policy=policy(tree, writable=False))
    second = sandbox.run(f"cat /tmp/{marker} ~/{marker} /dev/shm/{marker}", tree, 30, policy=policy(tree, writable=False))
    assert "WROTE-TREE" not in first.output and "Read-only file system" in first.output
    assert "cached" not in second.output
    assert not Path(f"/tmp/{marker}").exists() and not (Path.home() / marker).exists()


def test_build_tree_is_writable_and_the_environment_is_an_allow_list(tmp_path, monkeypatch):
    monkeypatch.setenv("HARMLESS_BUT_UNLISTED", "x")
    c = sandbox.run("echo built > out.txt; env", tmp_path, 30, policy=policy(tmp_path, AUTORESEARCH_SEED="42"))
    assert (tmp_path / "out.txt").read_text() == "built\n"
    assert "AUTORESEARCH_SEED=42" in c.output and "HARMLESS_BUT_UNLISTED" not in c.output


def test_timeout_kills_everything_the_step_started(tmp_path):
    start = time.monotonic()
    # A duration no other process on this (shared) machine uses: only this step's sleeps match.
    marker = f"{60 + os.getpid() % 1000 / 1000:.3f}"
    c = sandbox.run(f"(setsid sleep {marker} &); sleep {marker}", tmp_path, 1, policy=policy(tmp_path))
    assert c.returncode is None and time.monotonic() - start < 10
    time.sleep(0.2)
    assert not [p for p in subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True,
                                          text=True).stdout.split() if alive(int(p))]


def test_secret_names_are_never_passed_even_when_asked():
    env = sandbox.environment(["GITHUB_TOKEN", "MODEL_PATH", "AUTORESEARCH_REDIS_URL"],
                              source={"GITHUB_TOKEN": "t", "MODEL_PATH": "/m", "AUTORESEARCH_REDIS_URL": "redis://x"})
    assert env["MODEL_PATH"] == "/m" and "GITHUB_TOKEN" not in env and "AUTORESEARCH_REDIS_URL" not in env


def test_unavailable_bubblewrap_names_the_fix(monkeypatch):
    sandbox.check.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap.*--no-sandbox"):
            sandbox.check()
    finally:
        sandbox.check.cache_clear()


def test_bwrap_command_line_is_built_from_the_policy():
    argv = sandbox.bwrap_argv(
        sandbox.Policy(tree=Path("/w/t"), tree_writable=False,
                       mounts=(sandbox.Mount("/c/ccache", writable=True), sandbox.Mount("/c/models")),
                       env={"A": "1"}, home="/home/u"),
        ["bash", "-c", "make"], existing={"/usr", "/etc", "/lib=>usr/lib"}, userns=True, init_fd=7)
    joined = " ".join(argv)
    for part in ("--unshare-net", "--unshare-pid", "--as-pid-1", "--die-with-parent", "--cap-drop ALL",
                 "--unshare-user", "--ro-bind /usr /usr", "--symlink usr/lib /lib", "--tmpfs /home/u",
                 "--bind /c/ccache /c/ccache", "--ro-bind /c/models /c/models", "--ro-bind /w/t /w/t",
                 "--clearenv", "--setenv A 1", f"--ro-bind-data 7 {sandbox.INIT_PATH}",
                 f"-- {sandbox.INIT_PATH} bash -c make"):
        assert part in joined, part
    assert "/opt" not in joined and "--bind /w/t" not in joined


def test_a_hidden_secret_inside_a_system_directory_is_masked(tmp_path):
    # An operator may keep the App's key under /etc or /opt, which sandboxes see read-only.
    from jobs.measure.isolation import Isolation
    secret_dir = Path("/opt") / f"autoresearch-test-{os.getpid()}"
    secret_dir.mkdir()
    key = secret_dir / "app.pem"
    key.write_text("-----BEGIN PRIVATE KEY----- hunter4")
    try:
        sandbox.hide(key)
        done = sandbox.run(f"cat {key}; ls -la {secret_dir}", tmp_path, 30,
                           policy=Isolation().policy(tmp_path, "build"))
        assert "hunter4" not in done.output
        sandbox.hide(secret_dir)
        done = sandbox.run(f"ls {secret_dir}", tmp_path, 30, policy=Isolation().policy(tmp_path, "build"))
        assert "app.pem" not in done.output
    finally:
        sandbox._HIDDEN.clear()
        key.unlink()
        secret_dir.rmdir()
