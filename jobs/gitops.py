"""Thin adapter over the real `git` command: worktrees, commits, branches, patches."""
from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(RuntimeError):
    pass


def git(repo: Path | str, *args: str, input: str | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input, capture_output=True, text=True,
        env={"GIT_TERMINAL_PROMPT": "0", "PATH": _path(), "HOME": _home(),
             "GIT_AUTHOR_NAME": "autoresearch", "GIT_AUTHOR_EMAIL": "autoresearch@users.noreply.github.com",
             "GIT_COMMITTER_NAME": "autoresearch", "GIT_COMMITTER_EMAIL": "autoresearch@users.noreply.github.com",
             **(env or {})},
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


def has_commits(repo: Path) -> bool:
    return git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False) != ""


def files_at(repo: Path, commit: str) -> list[str]:
    """Every file path in `commit`'s tree (relative to the root)."""
    return [p for p in git(repo, "ls-tree", "-r", "--name-only", "-z", commit).split("\0") if p]


def patch_check(repo: Path, commit: str, patch_text: str) -> str:
    """'' if `patch_text` applies to `commit` exactly as the run applies it (`git apply` at the tree
    root), else git's complaint. Checked against a throwaway index of `commit`: no checkout."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory(prefix="autoresearch-apply-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(repo, "read-tree", commit, env=env)
        proc = subprocess.run(["git", "-C", str(repo), "apply", "--cached", "--check", "--whitespace=nowarn", "-"],
                              input=patch_text, capture_output=True, text=True,
                              env={"PATH": _path(), "HOME": _home(), "GIT_TERMINAL_PROMPT": "0", **env})
    return "" if proc.returncode == 0 else (proc.stderr.strip() or proc.stdout.strip() or "git apply failed")


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


def worktrees(repo: Path) -> list[Path]:
    """The linked worktrees of `repo` (not its main one), as git lists them (missing ones too)."""
    listed = [Path(line[len("worktree "):]) for line in git(repo, "worktree", "list", "--porcelain").splitlines()
              if line.startswith("worktree ")]
    return listed[1:]


def remove_worktrees_under(repo: Path, folder: Path) -> list[Path]:
    """Remove every linked worktree of `repo` that lives under `folder` (a dead run's leftovers,
    locked or missing ones included) and prune git's records of them; returns those removed."""
    folder = Path(folder).resolve()
    gone = [w for w in worktrees(repo) if w.resolve() == folder or folder in w.resolve().parents]
    for tree in gone:
        git(repo, "worktree", "unlock", str(tree), check=False)
        remove_worktree(repo, tree)
    git(repo, "worktree", "prune", check=False)
    return gone


def delete_branches(repo: Path, *patterns: str) -> list[str]:
    """Delete the local branches matching `patterns` (for-each-ref patterns under refs/heads/)."""
    names = git(repo, "for-each-ref", "--format=%(refname:short)",
                *[f"refs/heads/{p}" for p in patterns]).splitlines() if patterns else []
    for name in names:
        git(repo, "branch", "-D", "-q", name, check=False)
    return names


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

