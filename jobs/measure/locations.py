"""Where each arm runs from, decided per pair by a coin (issue 21).

Where a build lives and runs can change its speed by itself: code and data alignment, the size of
the environment, path strings (Mytkowicz et al., "Producing wrong data without doing anything
obviously wrong!", ASPLOS 2009). When the baseline always runs from one folder and the candidate
from another, such an effect is an arm effect, and it is kept as a win. So each arm is built in
*both* folders, and before each pair a coin decides which arm's builds stand in which folder: a
location effect then lands on either arm with equal chance, i.e. it becomes symmetric noise that
the paired test tolerates, in the A/A calibration and in every experiment alike. The coins come in
blocks of two pairs, one swapped and one not (`swap_coins`), so the effect also cancels every two
pairs instead of only on average.

Every build runs from the folder it was built in (a build may embed its own path: an RPATH, a
CMake cache), so the idle builds wait under sibling names (`<folder>.A`, `<folder>.B`) and folders
are swapped by renaming, which is atomic on one file system.

Each build once (issue 43). The baseline's build in the candidate's folder (`<q>.A`) is kept beside
it for the next experiment of the run when the caller gives a `keep` key (`build_key`: the base
commit, the build command and whose caches it saw): the local executor's candidate folder has one
path for the whole run, so that build still runs from the folder it was built in. The key is
written beside it (`<q>.A.key`, outside every tree a sandbox sees) only once the build passed, so a
failed or timed-out build is never reused, and a build of another commit never answers for this
one. A candidate's tree can start as a copy of the baseline's build made in the same folder, its
own tracked files written over it (`start_from_build`), so `make` rebuilds only what changed; only
where that equals a clean build (a build system that records header dependencies, and a change to
C/C++ sources and headers alone), else the candidate's tree is a clean checkout as before.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Callable

from jobs.guard import gitops
from jobs.measure.together import run_together


def clean_copy(tree: Path, dest: Path) -> Path:
    """A clean checkout of `tree`'s HEAD at `dest` (its tracked files only, whatever was built in
    `tree`), with `tree`'s `.git` pointer so that git commands in a build still work."""
    dest.mkdir(parents=True)
    fd, index = tempfile.mkstemp(prefix="autoresearch-index-")
    os.close(fd)
    try:
        env = {"GIT_INDEX_FILE": index}
        gitops.git(tree, "read-tree", "HEAD", env=env)
        gitops.git(tree, "checkout-index", "--all", "--force", f"--prefix={dest}/", env=env)
    finally:
        os.unlink(index)
    if (tree / ".git").is_file():
        shutil.copy2(tree / ".git", dest / ".git")
    return dest


# What a candidate may change for its tree to start from the baseline's build: C/C++ sources and
# headers (a build file, a script or a data file changes what `make` cannot see: flags, rules).
SOURCE_SUFFIXES = {".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".inl", ".ipp",
                   ".tcc", ".s", ".S", ".inc"}
# Files a build system leaves when it records each object's header dependencies (gcc -MMD, automake's
# depcomp, CMake, Ninja): without one, a changed header or an included .c file would not be rebuilt.
DEPENDENCY_RECORDS = (".d", ".Po", ".Plo")
DEPENDENCY_FILES = {".ninja_deps", "compiler_depend.make", "depend.make"}


def build_key(base_commit: str, build: str, arm: str) -> str:
    """What a kept baseline build was made of: its commit, the build command, whose caches it saw."""
    return hashlib.sha256(f"{base_commit}\0{build}\0{arm}".encode()).hexdigest()


def kept_build(q: Path, key: str) -> Path | None:
    """The baseline's build kept beside the folder `q` under `key` (`Locations(keep=key)`), or None."""
    q = Path(q)
    kept, stamp = q.with_name(f"{q.name}.A"), q.with_name(f"{q.name}.A.key")
    try:
        if not key or stamp.is_symlink() or stamp.read_text() != key:
            return None
    except OSError:
        return None
    return kept if kept.is_dir() and not kept.is_symlink() else None


def forget_kept(q: Path) -> None:
    q = Path(q)
    q.with_name(f"{q.name}.A.key").unlink(missing_ok=True)
    shutil.rmtree(q.with_name(f"{q.name}.A"), ignore_errors=True)


def records_dependencies(tree: Path, limit: int = 200_000) -> bool:
    """True when the built `tree` holds a build system's record of header dependencies (walked
    without following a link, at most `limit` entries)."""
    seen = 0
    for _, dirs, files in os.walk(tree, followlinks=False):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            if name in DEPENDENCY_FILES or name.endswith(DEPENDENCY_RECORDS):
                return True
        seen += len(files) + len(dirs)
        if seen > limit:
            return False
    return False


def _ignore_top_git(top: str):
    return lambda folder, names: [".git"] if folder == top else []


def _remove(root: Path, rel: str) -> None:
    """Delete `root/rel` without following a link on the way (a link in its place is removed itself)."""
    here = root
    parts = Path(rel).parts
    for part in parts[:-1]:
        here = here / part
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return                     # a link or a file where a folder was: nothing below it to delete
        except FileNotFoundError:
            return
    target = here / parts[-1]
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(target)
    else:
        target.unlink()


def start_from_build(built: Path, base_commit: str, candidate: Path, dest: Path) -> bool:
    """Make `dest` a copy of the baseline's built tree `built` (times kept, links copied as links,
    never followed) with the tracked files of the pinned worktree `candidate` written fresh where
    they differ from the base commit or where the baseline's build changed them, and `candidate`'s
    `.git` pointer. False (and nothing at `dest`) where that would not equal a clean build: the
    candidate deletes or changes anything but C/C++ sources and headers, or the build system keeps
    no record of header dependencies."""
    built, candidate, dest = Path(built), Path(candidate), Path(dest)
    changed = gitops.git(candidate, "diff", "--name-status", "--no-renames", base_commit, "HEAD").splitlines()
    if not changed:
        return False
    for line in changed:
        status, _, path = line.partition("\t")
        if status.startswith("D") or Path(path).suffix not in SOURCE_SUFFIXES:
            return False
    if not records_dependencies(built):
        return False
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(built, dest, symlinks=True, copy_function=shutil.copy2, ignore=_ignore_top_git(str(built)))
    fd, index = tempfile.mkstemp(prefix="autoresearch-index-")
    os.close(fd)
    try:
        admin = Path(gitops.git(candidate, "rev-parse", "--absolute-git-dir"))
        env = {"GIT_INDEX_FILE": index}

        def in_copy(*args: str) -> str:
            proc = gitops.run(list(args), repo=dest, git_dir=admin, env=env)
            if proc.returncode != 0:
                raise gitops.GitError(f"git {' '.join(args)} failed in {dest}: {proc.stderr.strip()}")
            return proc.stdout
        # The base's tracked files the baseline's build changed or removed (git compares contents; a
        # link where a file was counts as changed): written back as the candidate has them.
        in_copy("read-tree", base_commit)
        in_copy("update-index", "-q", "--refresh")
        touched = set(in_copy("diff-files", "--name-only", "-z").split("\0")) - {""}
        paths = sorted(touched | {line.partition("\t")[2] for line in changed})
        in_copy("read-tree", "HEAD")
        present = set(in_copy("ls-files", "-z", "--", *paths).split("\0")) - {""} if paths else set()
        for rel in paths:
            _remove(dest, rel)           # written fresh below (a newer time than every object), or gone
        if present:
            in_copy("checkout-index", "--force", f"--prefix={dest}/", "--", *sorted(present))
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.unlink(index)
    shutil.copy2(candidate / ".git", dest / ".git")
    return True


class Locations:
    """Two folders P (the baseline's) and Q (the candidate's); after `prepare`, each arm has a
    build in each. `place(swap)` puts A at P and B at Q (swap False) or B at P and A at Q.

    `keep`: a `build_key`; the baseline's build at Q is kept beside Q under it for the next
    experiment (and reused from there). `base_commit` (with `incremental`): the candidate's build at
    P starts from the baseline's build there (`start_from_build`) where that equals a clean build."""

    def __init__(self, p: Path, q: Path, *, keep: str = "", base_commit: str = "", incremental: bool = False):
        self.p, self.q = Path(p), Path(q)
        self.swapped = False
        self.keep, self.base_commit, self.incremental = keep, base_commit, incremental
        self.reused = False          # the baseline's build at Q came from an earlier experiment

    def _aside(self, folder: Path, arm: str) -> Path:
        return folder.with_name(f"{folder.name}.{arm}")

    def _clear(self) -> None:
        for folder in (self.p, self.q):
            for extra in ("A", "B", "fresh"):
                if folder == self.q and extra == "A" and kept_build(self.q, self.keep):
                    continue
                shutil.rmtree(self._aside(folder, extra), ignore_errors=True)
        if not kept_build(self.q, self.keep):
            forget_kept(self.q)

    def prepare(self, build: Callable[[Path, str, threading.Event], None]) -> None:
        """With A built at P and B at Q: build B at P and A at Q (`build(folder, arm, stop)`), leaving A
        at P and B at Q in place and the two new builds aside. A baseline's build at Q kept under `keep`
        is used instead of building it again. The two builds are in separate folders, so they run at
        once where the host has a second core (jobs.measure.together; `stop` is set when the caller is
        interrupted); a failure is raised once both are over, the folders back in place."""
        self._clear()
        self.reused = kept_build(self.q, self.keep) is not None
        fresh_b = self._aside(self.p, "fresh")
        if not (self.incremental and self.base_commit and start_from_build(self.p, self.base_commit, self.q, fresh_b)):
            clean_copy(self.q, fresh_b)
        todo = [(self.p, fresh_b, "B", "A")]
        if not self.reused:
            todo.append((self.q, clean_copy(self.p, self._aside(self.q, "fresh")), "A", "B"))
        placed = []
        passed: set[str] = set()

        def one(folder: Path, arm: str) -> Callable[[threading.Event], None]:
            def step(stop: threading.Event) -> None:
                build(folder, arm, stop)
                passed.add(arm)
            return step
        try:
            for folder, fresh, arm, other in todo:
                folder.rename(self._aside(folder, other))        # the build standing there steps aside
                fresh.rename(folder)
                placed.append((folder, arm, other))
            run_together([one(folder, arm) for folder, arm, _ in placed])
        finally:
            for folder, arm, other in placed:
                folder.rename(self._aside(folder, arm))
                self._aside(folder, other).rename(folder)
            if "A" in passed and self.keep:        # only a build that passed is ever kept
                self._aside(self.q, "A.key").write_text(self.keep)

    def trees(self) -> dict[str, Path]:
        return {"A": self.q, "B": self.p} if self.swapped else {"A": self.p, "B": self.q}

    def place(self, swap: bool) -> dict[str, Path]:
        if swap != self.swapped:
            here = self.trees()
            for arm, folder in here.items():
                folder.rename(self._aside(folder, arm))
            for arm, folder in here.items():
                other = "B" if arm == "A" else "A"
                self._aside(folder, other).rename(folder)
            self.swapped = swap
        return self.trees()

    def restore(self) -> None:
        """A back at P and B at Q (the folders the executor made), the extra builds removed."""
        try:
            if self.swapped and self._aside(self.p, "A").exists():
                self.place(False)
        finally:
            self._clear()


def swap_coins(n_pairs: int, seed: int) -> list[int]:
    """Per pair, 1 when the arms trade folders, balanced in blocks of two pairs: a fair coin per
    block, drawn from `seed` alone (independent of the order coin, so a resumed run repeats it),
    picks which of its two pairs swaps. A location effect then cancels every two pairs instead of
    only on average: with a coin per pair, runs of same-side coins let it decide. Measured with the
    stop rule on simulated pairs: a 6% effect (noise 0.8%) stopped 2.2% of identical candidates as
    "slower" and kept 0.1% within 20 pairs, and one of 2-8 noise sds raised the false keeps of an
    effect at the floor from 1.1% to 2.1-2.9%; blocked: 0 of 20,000 and 0.0%. Whole simulated runs
    (tests/benchmarks/verdict_power.py, location-10%): 0.2% kept, 1.3% "slower" -> 0 and 0 of 1,000.
    Without a location effect nothing changes."""
    import numpy as np
    first = np.random.default_rng([seed, 0x10CA7E]).integers(0, 2, (n_pairs + 1) // 2)
    return [int(first[i // 2]) ^ (i % 2) for i in range(n_pairs)]     # the block's second pair: the other side
