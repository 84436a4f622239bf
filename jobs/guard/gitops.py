"""Thin adapter over the real `git` command: worktrees, commits, branches, patches.

Every git process is hardened (jobs/guard/githarden.py: no hooks, no fsmonitor, no system or global
config, no program a config names). Worktrees this module makes for target code are *pinned*: every
later command there names the real repository's git dir and the tree explicitly (`--git-dir`,
`--work-tree`), so a `.git` file or folder a build wrote into its tree is never followed, and
`check_worktree` tells whether the build touched it. Before git runs in a repository, the config
files it would read are checked for keys that run programs (`githarden.unsafe_keys`).
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from jobs.guard import githarden

IDENTITY = {"GIT_AUTHOR_NAME": "autoresearch", "GIT_AUTHOR_EMAIL": "autoresearch@users.noreply.github.com",
            "GIT_COMMITTER_NAME": "autoresearch", "GIT_COMMITTER_EMAIL": "autoresearch@users.noreply.github.com"}
GITFILE_LIMIT = 4096           # a worktree's `.git` file is one line


class GitError(RuntimeError):
    pass


# tree (absolute, normalised) -> its git dir inside the real repository (`<common>/worktrees/<id>`)
_PINNED: dict[str, Path] = {}
_GITFILES: dict[str, str] = {}     # tree -> its `.git` file as git wrote it
_DIRS: dict[str, tuple[Path, Path]] = {}   # repository path -> (git dir, common dir), as discovered
# config file -> (stat signature, problem or "") of its last check
_CHECKED: dict[str, tuple[tuple[int, int, int], str]] = {}


def _key(path: Path | str) -> str:
    return os.path.normpath(os.path.abspath(path))


def global_config() -> str:
    """The only global git config git reads: /dev/null, or the file the operator names."""
    return os.environ.get("AUTORESEARCH_GIT_CONFIG") or githarden.NOWHERE


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    return githarden.environment(os.environ, global_config=global_config(), extra={**IDENTITY, **(extra or {})})


def run(args: list[str], *, repo: Path | str | None = None, input: str | None = None,
        env: dict[str, str] | None = None, config: list[tuple[str, str]] = (), git_dir: Path | None = None,
        **kw) -> subprocess.CompletedProcess:
    """One hardened git process; pinned to the real repository when `repo` is a pinned worktree,
    or to `git_dir` when the caller names it (`repo` is then its work tree). `kw` goes to
    subprocess.run (capture, timeout, pass_fds)."""
    where: dict[str, str] = {}
    if git_dir is not None:
        where = {"git_dir": str(git_dir), "work_tree": _key(repo), "cwd": _key(repo)}
        check_configs([Path(git_dir) / "config"])
    elif repo is not None:
        pinned = _PINNED.get(_key(repo))
        if pinned is not None:
            check_worktree(repo)
            where = {"git_dir": str(pinned), "work_tree": _key(repo), "cwd": _key(repo)}
            check_configs([_common_dir(pinned) / "config", pinned / "config.worktree"])
        else:
            where = {"cwd": str(repo)}
            if args[:1] not in (["init"], ["clone"], ["rev-parse"]):
                _check_repo_configs(Path(repo))
    argv = githarden.command(args, config=list(config), **where)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(argv, input=input, env=environment(env), **kw)


def git(repo: Path | str, *args: str, input: str | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> str:
    proc = run(list(args), repo=repo, input=input, env=env)
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


# -- the config a repository gives git ----------------------------------------------------------
def _common_dir(git_dir: Path) -> Path:
    try:
        rel = _read_small(git_dir / "commondir").strip()
    except OSError:
        return git_dir
    return (git_dir / rel).resolve() if rel else git_dir


def _read_small(path: Path, limit: int = GITFILE_LIMIT) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, limit + 1)[:limit + 1].decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _check_repo_configs(repo: Path) -> None:
    dirs = _DIRS.get(_key(repo))
    if dirs is None:
        proc = subprocess.run(githarden.command(["rev-parse", "--path-format=absolute", "--absolute-git-dir",
                                                 "--git-common-dir"], cwd=str(repo)),
                              capture_output=True, text=True, env=environment())
        lines = proc.stdout.split("\n")
        if proc.returncode != 0 or len(lines) < 2:
            return                               # not a repository (yet): the command itself will say so
        dirs = _DIRS[_key(repo)] = (Path(lines[0]), Path(lines[1]))
    check_configs([dirs[1] / "config", dirs[0] / "config.worktree"])


def config_names(path: Path) -> list[str]:
    """The keys set in the config file `path` (its includes not followed), as git itself reads them."""
    with tempfile.TemporaryDirectory(prefix="autoresearch-gitcfg-") as empty:
        proc = subprocess.run(githarden.command(["config", "--no-includes", "--file", str(path), "--name-only",
                                                 "--list", "-z"], cwd=empty),
                              capture_output=True, text=True, env=environment({"GIT_CEILING_DIRECTORIES": empty}))
    if proc.returncode != 0:
        raise GitError(f"git cannot read the config {path}: {proc.stderr.strip()[:300]}")
    return [n for n in proc.stdout.split("\0") if n]


def check_configs(files: list[Path]) -> None:
    """GitError if one of these config files (missing ones are skipped) holds a key that runs a
    program (`githarden.unsafe_keys`); each file is read again only when it changed."""
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        known = _CHECKED.get(str(path))
        if known is None or known[0] != signature:
            known = (signature, _config_problem(path))
            _CHECKED[str(path)] = known
        if known[1]:
            raise GitError(known[1])


def _config_problem(path: Path) -> str:
    try:
        bad = githarden.unsafe_keys(config_names(path))
    except GitError as exc:
        return str(exc)
    if not bad:
        return ""
    return (f"the git config {path} sets {', '.join(bad[:5])}, which make git run a program the config "
            "names; autoresearch runs no program a repository's config names (target code may have "
            f"written it). Fix: remove those keys (git config --file {path} --unset <key>) or use a fresh clone")


# -- reading --------------------------------------------------------------------------------------
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
    with tempfile.TemporaryDirectory(prefix="autoresearch-apply-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(repo, "read-tree", commit, env=env)
        proc = run(["apply", "--cached", "--check", "--whitespace=nowarn", "-"], repo=repo, input=patch_text, env=env)
    return "" if proc.returncode == 0 else (proc.stderr.strip() or proc.stdout.strip() or "git apply failed")


def is_clean(repo: Path) -> bool:
    return git(repo, "status", "--porcelain", "--untracked-files=no") == ""


# -- worktrees --------------------------------------------------------------------------------------
def add_worktree(repo: Path, path: Path, commit: str) -> Path:
    """A detached, clean checkout of `commit` at `path` (replacing a stale one), pinned: later
    commands there use the real repository's git dir, never the tree's own `.git`."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        remove_worktree(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # --force twice: a run killed while git was creating this worktree leaves it "missing but
    # locked" (git's own initialising lock), which a single --force refuses to reuse.
    git(repo, "worktree", "add", "--detach", "--force", "--force", str(path), commit)
    _pin(repo, path)
    return path


def _pin(repo: Path, tree: Path) -> None:
    """Record the git dir git just made for `tree` (before any target code ran there), after
    checking that it lies in `repo`'s own `worktrees/` and names `tree` back."""
    common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")).resolve()
    text = _read_small(Path(tree) / ".git")
    target = githarden.gitfile_target(text)
    admin = Path(target).resolve() if target else None
    if admin is None or admin.parent != common / "worktrees":
        raise GitError(f"git made {tree}/.git naming {target!r}, not a worktree of {common}")
    back = _read_small(admin / "gitdir").strip()
    if Path(back).resolve() != (Path(tree) / ".git").resolve():
        raise GitError(f"{admin} belongs to {back}, not to {tree}")
    _PINNED[_key(tree)] = admin
    _GITFILES[_key(tree)] = text


def pinned(tree: Path | str) -> bool:
    return _key(tree) in _PINNED


def check_worktree(tree: Path | str) -> None:
    """GitError unless the pinned `tree`'s `.git` is still the regular file git wrote: target code
    that replaced it (a folder, a link, another `gitdir:`) tried to make git read its own config."""
    expected = _GITFILES[_key(tree)]
    try:
        text = _read_small(Path(tree) / ".git")
    except OSError as exc:
        raise GitError(f"the worktree {tree} was tampered with: its .git is no longer the file git made "
                       f"({exc.strerror or exc}); code run in the tree replaced it, so git is not run there") from None
    if text != expected:
        raise GitError(f"the worktree {tree} was tampered with: its .git file was rewritten (it names "
                       f"{(githarden.gitfile_target(text) or text)[:200]!r}); code run in the tree changed it, so git "
                       "is not run there")


def remove_worktree(repo: Path, path: Path) -> None:
    """Delete the tree without running git in it (it may hold anything target code wrote), then
    let git forget it (`worktree prune` reads only the repository's own records)."""
    path = Path(path)
    _PINNED.pop(_key(path), None)
    _GITFILES.pop(_key(path), None)
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)      # rmtree never follows a link out of the tree
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


# -- writing ----------------------------------------------------------------------------------------
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
