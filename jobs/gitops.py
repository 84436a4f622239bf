"""Thin adapter over the real `git` command: worktrees, commits, branches, patches."""
from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(RuntimeError):
    pass


def git(repo: Path | str, *args: str, input: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input, capture_output=True, text=True,
        env={"GIT_TERMINAL_PROMPT": "0", "PATH": _path(), "HOME": _home(),
             "GIT_AUTHOR_NAME": "autoresearch", "GIT_AUTHOR_EMAIL": "autoresearch@users.noreply.github.com",
             "GIT_COMMITTER_NAME": "autoresearch", "GIT_COMMITTER_EMAIL": "autoresearch@users.noreply.github.com"},
    )
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def _path() -> str:
    import os
    return os.environ.get("PATH", "/usr/bin:/bin")


def _home() -> str:
    import os
    return os.environ.get("HOME", "/tmp")


def toplevel(path: Path) -> Path | None:
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except (GitError, FileNotFoundError, NotADirectoryError):
        return None


def head_commit(repo: Path, ref: str = "HEAD") -> str:
    return git(repo, "rev-parse", f"{ref}^{{commit}}")


def is_clean(repo: Path) -> bool:
    return git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def add_worktree(repo: Path, path: Path, commit: str) -> Path:
    """A detached, clean checkout of `commit` at `path` (replacing a stale one)."""
    path = Path(path)
    if path.exists():
        remove_worktree(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # --force twice: a run killed while git was creating this worktree leaves it "missing but
    # locked" (git's own initialising lock), which a single --force refuses to reuse.
    git(repo, "worktree", "add", "--detach", "--force", "--force", str(path), commit)
    return path


def remove_worktree(repo: Path, path: Path) -> None:
    git(repo, "worktree", "remove", "--force", str(path), check=False)
    if Path(path).exists():
        import shutil
        shutil.rmtree(path, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


def commit_all(tree: Path, message: str) -> str:
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--no-verify", "-m", message)
    return head_commit(tree)


def apply_patch(tree: Path, patch_text: str) -> None:
    git(tree, "apply", "--whitespace=nowarn", "-", input=patch_text)


def cherry_pick(tree: Path, commit: str) -> bool:
    """True if `commit` applied cleanly; on conflict the pick is aborted and False returned."""
    try:
        git(tree, "cherry-pick", "--allow-empty", "-x", commit)
        return True
    except GitError:
        git(tree, "cherry-pick", "--abort", check=False)
        return False


def set_branch(repo: Path, branch: str, commit: str) -> None:
    git(repo, "branch", "-f", branch, commit)

