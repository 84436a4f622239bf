"""git adapter for the bot: clone/fetch and push with a token asked for only when needed.

The token comes from a provider (`Callable[[], str]`) that is called right before a git process
that talks to the remote, and only then: resetting a clone that already has its commit, or
diffing, asks for nothing. The token reaches git through a pipe, never through anything another
process can read in `/proc`: it is written into a pipe whose read end only that one git process
inherits (`pass_fds`), and git's credential helper (`credential.helper`, a one-line shell
function) copies it from that descriptor when git asks (`get`). So the token is in no process's
environment (`/proc/*/environ`) or argv (`/proc/*/cmdline`; argv names the descriptor, not its
contents), never in the clone's `.git/config` (the remote URL stays token-free), no file, no log.
Helpers configured elsewhere (system or global git config) are switched off for that process, and
the helper answers only when git asks for the remote's own host (`host=` of git's request), so a
URL rewritten on the way (`url.*.insteadOf`, a redirect to another host) gets nothing.

Every git process is hardened like the worker's (jobs/guard/githarden.py via jobs.guard.gitops: no hooks, so
no `pre-push` hook planted in the clone can read the pipe; no fsmonitor, no system or global config,
only https/http/file transports), runs against the clone's own `.git` explicitly, and before a
process that is given the token the clone's config must hold only what `git clone` and this module
write (`CLONE_KEYS`): a clone whose config something else wrote is refused, not trusted.
"""
from __future__ import annotations

import os
import re
import select
import stat
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from jobs.api import GitError, git_config_names, run_git

TokenProvider = Callable[[], str]

# Everything `git clone` and `checkout` below write into a clone's config.
CLONE_KEYS = re.compile(r"^(?:core\.(?:repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|"
                        r"precomposeunicode|symlinks)|remote\.origin\.(?:url|fetch)|branch\..+\.(?:remote|merge)|"
                        r"user\.(?:name|email)|extensions\.objectformat)$", re.S)


class CloneError(RuntimeError):
    pass


def remote_host(url: str) -> str:
    """`host[:port]` of an http(s) URL as git names it to a credential helper; '' for other URLs."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return ""
    host = parts.netloc.rpartition("@")[2]
    if not re.fullmatch(r"[A-Za-z0-9.\-]+(?::[0-9]+)?|\[[0-9A-Fa-f:.]+\](?::[0-9]+)?", host):
        raise CloneError(f"the git URL's host {host[:100]!r} is not a host name")
    return host


def _credential(secret: str, host: str) -> tuple[int, list[tuple[str, str]]]:
    """A pipe holding git's credential answer for `secret`, and the config of a helper that
    reads it for `host` only: (read end to pass to git, config pairs). The caller closes the read end."""
    answer = f"username=x-access-token\npassword={secret}\n".encode()
    if "\n" in secret or len(answer) > select.PIPE_BUF:    # one atomic write; no newline smuggling
        raise CloneError("the token provider returned something that is not a token")
    read, write = os.pipe()
    try:
        os.write(write, answer)
    finally:
        os.close(write)
    # `get` for `host`: answer from the pipe (once; the pipe then is empty). Anything else: nothing.
    # Either way git's request on stdin is read first, so git never writes into a closed pipe.
    # (/dev/fd/N, not <&N: a POSIX shell's redirections take one-digit descriptors only. `host` is
    # checked by remote_host: letters, digits, dots, dashes, colons and brackets only.)
    helper = (f'!f() {{ h=; while IFS= read -r l; do case "$l" in host=*) h="${{l#host=}}";; esac; done; '
              f'if [ "$1" = get ] && [ "$h" = "{host}" ]; then cat /dev/fd/{read}; fi; }}; f')
    return read, [("credential.helper", ""), ("credential.helper", helper), ("credential.useHttpPath", "false")]


def _clone_git_dir(dest: Path) -> Path | None:
    """The clone's own `.git` folder, if it is one (a link or a file is not trusted)."""
    try:
        return dest / ".git" if stat.S_ISDIR(os.lstat(dest / ".git").st_mode) else None
    except OSError:
        return None


def _check_clone_config(dest: Path) -> None:
    git_dir = _clone_git_dir(dest)
    if git_dir is None:
        raise CloneError(f"{dest} is not a clone made by autoresearch (its .git is not a folder); delete it")
    try:
        foreign = [n for n in git_config_names(git_dir / "config") if not CLONE_KEYS.match(n)]
    except GitError as exc:
        raise CloneError(str(exc)) from None
    if foreign:
        raise CloneError(f"the clone's git config {git_dir / 'config'} holds {', '.join(sorted(foreign)[:5])}, "
                         "which autoresearch never writes: something else wrote to the clone, so it is not given "
                         f"the token. Fix: delete {dest}; the next run clones afresh")


def _git(args: list[str], cwd: Path | None = None, token: TokenProvider | None = None, url: str = "") -> str:
    secret = token() if token else None
    read, options = _credential(secret, remote_host(url)) if secret and remote_host(url) else (None, [])
    try:
        git_dir = _clone_git_dir(cwd) if cwd is not None else None
        if cwd is not None and git_dir is None:
            raise CloneError(f"{cwd} is not a clone made by autoresearch (its .git is not a folder); delete it")
        if secret and cwd is not None:
            _check_clone_config(cwd)
        proc = run_git(args, repo=cwd, git_dir=git_dir, config=options, timeout=1800,
                          pass_fds=(read,) if read is not None else ())
    except GitError as exc:
        raise CloneError(f"git {args[0]} refused: {exc}") from None
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
    git_dir = _clone_git_dir(Path(dest))
    if git_dir is None:
        return False
    try:
        return run_git(["cat-file", "-e", f"{commit}^{{commit}}"], repo=dest, git_dir=git_dir).returncode == 0
    except GitError:
        return False


def checkout(url: str, dest: Path, commit: str, token: TokenProvider | None, ref: str | None = None) -> Path:
    """`dest` as a clone of `url` with `commit` checked out (detached) and clean; reused when present."""
    dest = Path(dest)
    if not (dest / ".git").is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(["clone", "-q", "--no-checkout", url, str(dest)], token=token, url=url)
        _git(["config", "user.name", "autoresearch[bot]"], dest)
        _git(["config", "user.email", "autoresearch[bot]@users.noreply.github.com"], dest)
    if not has_commit(dest, commit):
        _git(["fetch", "-q", url, ref or commit], dest, token=token, url=url)
    _git(["checkout", "-q", "--force", "--detach", commit], dest)
    _git(["clean", "-qfdx"], dest)
    return dest


def fetch_ref(url: str, dest: Path, ref: str, token: TokenProvider | None) -> str:
    _git(["fetch", "-q", url, ref], dest, token=token, url=url)
    return _git(["rev-parse", "FETCH_HEAD"], dest)


def diff(dest: Path, base: str, head: str) -> str:
    return _git(["diff", "--binary", "--no-ext-diff", "--no-textconv", f"{base}...{head}"], dest)


def push(url: str, dest: Path, local_ref: str, remote_branch: str, token: TokenProvider | None) -> None:
    """Force-push `local_ref` to `remote_branch` (the run's branch belongs to the bot)."""
    _git(["push", "-q", "--force", "--no-verify", url, f"{local_ref}:refs/heads/{remote_branch}"], dest,
         token=token, url=url)
