"""git adapter for the bot: clone/fetch and push with a token asked for only when needed.

The token comes from a provider (`Callable[[], str]`) that is called right before a git process
that talks to the remote, and only then: resetting a clone that already has its commit, or
diffing, asks for nothing. The token reaches git only through the environment of that one git
process, as an HTTP `Authorization` header (GIT_CONFIG_COUNT/KEY/VALUE): it is never part of argv,
never written to the clone's `.git/config` (the remote URL stays token-free), never logged, and
never in the environment the pipeline's builds and benchmarks see.
"""
from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Callable

TokenProvider = Callable[[], str]


class CloneError(RuntimeError):
    pass


def _env(token: str | None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
                    "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}"})
    return env


def _git(args: list[str], cwd: Path | None = None, token: TokenProvider | None = None) -> str:
    secret = token() if token else None
    proc = subprocess.run(["git", *args], cwd=cwd, env=_env(secret), capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()
        if secret:
            msg = msg.replace(secret, "***")
        raise CloneError(f"git {args[0]} failed: {msg[-2000:]}")
    return proc.stdout.strip()


def has_commit(dest: Path, commit: str) -> bool:
    return (Path(dest) / ".git").is_dir() and subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=dest, env=_env(None), capture_output=True).returncode == 0


def checkout(url: str, dest: Path, commit: str, token: TokenProvider | None, ref: str | None = None) -> Path:
    """`dest` as a clone of `url` with `commit` checked out (detached) and clean; reused when present."""
    dest = Path(dest)
    if not (dest / ".git").is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(["clone", "-q", "--no-checkout", url, str(dest)], token=token)
        _git(["config", "user.name", "autoresearch[bot]"], dest)
        _git(["config", "user.email", "autoresearch[bot]@users.noreply.github.com"], dest)
    if not has_commit(dest, commit):
        _git(["fetch", "-q", url, ref or commit], dest, token=token)
    _git(["checkout", "-q", "--force", "--detach", commit], dest)
    _git(["clean", "-qfdx"], dest)
    return dest


def fetch_ref(url: str, dest: Path, ref: str, token: TokenProvider | None) -> str:
    _git(["fetch", "-q", url, ref], dest, token=token)
    return _git(["rev-parse", "FETCH_HEAD"], dest)


def diff(dest: Path, base: str, head: str) -> str:
    return _git(["diff", "--binary", f"{base}...{head}"], dest)


def push(url: str, dest: Path, local_ref: str, remote_branch: str, token: TokenProvider | None) -> None:
    """Force-push `local_ref` to `remote_branch` (the run's branch belongs to the bot)."""
    _git(["push", "-q", "--force", url, f"{local_ref}:refs/heads/{remote_branch}"], dest, token=token)
