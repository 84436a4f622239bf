"""git adapter for the bot: clone/fetch and push with a token asked for only when needed.

The token comes from a provider (`Callable[[], str]`) that is called right before a git process
that talks to the remote, and only then: resetting a clone that already has its commit, or
diffing, asks for nothing. The token reaches git through a pipe, never through anything another
process can read in `/proc`: it is written into a pipe whose read end only that one git process
inherits (`pass_fds`), and git's credential helper (`credential.helper`, a one-line shell
function) copies it from that descriptor when git asks (`get`). So the token is in no process's
environment (`/proc/*/environ`) or argv (`/proc/*/cmdline`; argv names the descriptor, not its
contents), never in the clone's `.git/config` (the remote URL stays token-free), no file, no log.
Helpers configured elsewhere (system or global git config) are switched off for that process.
"""
from __future__ import annotations

import os
import select
import subprocess
from pathlib import Path
from typing import Callable

TokenProvider = Callable[[], str]


class CloneError(RuntimeError):
    pass


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
            "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C"}


def _credential(secret: str) -> tuple[int, list[str]]:
    """A pipe holding git's credential answer for `secret`, and the `-c` options of a helper that
    reads it: (read end to pass to git, git options). The caller closes the read end."""
    answer = f"username=x-access-token\npassword={secret}\n".encode()
    if "\n" in secret or len(answer) > select.PIPE_BUF:    # one atomic write; no newline smuggling
        raise CloneError("the token provider returned something that is not a token")
    read, write = os.pipe()
    try:
        os.write(write, answer)
    finally:
        os.close(write)
    # `get`: answer from the pipe (once; the pipe then is empty). `store` and `erase`: nothing to do.
    # Either way git's request on stdin is read first, so git never writes into a closed pipe.
    # (/dev/fd/N, not <&N: a POSIX shell's redirections take one-digit descriptors only.)
    helper = f'!f() {{ cat >/dev/null; if [ "$1" = get ]; then cat /dev/fd/{read}; fi; }}; f'
    return read, ["-c", "credential.helper=", "-c", f"credential.helper={helper}"]


def _git(args: list[str], cwd: Path | None = None, token: TokenProvider | None = None) -> str:
    secret = token() if token else None
    read, options = _credential(secret) if secret else (None, [])
    try:
        proc = subprocess.run(["git", *options, *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                              timeout=1800, pass_fds=(read,) if read is not None else ())
    finally:
        if read is not None:
            os.close(read)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()
        if secret:
            msg = msg.replace(secret, "***")
        raise CloneError(f"git {args[0]} failed: {msg[-2000:]}")
    return proc.stdout.strip()


def has_commit(dest: Path, commit: str) -> bool:
    return (Path(dest) / ".git").is_dir() and subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=dest, env=_env(), capture_output=True).returncode == 0


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
