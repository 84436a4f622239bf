"""Where each arm runs from, decided per pair by a coin (issue 21).

Where a build lives and runs can change its speed by itself: code and data alignment, the size of
the environment, path strings (Mytkowicz et al., "Producing wrong data without doing anything
obviously wrong!", ASPLOS 2009). When the baseline always runs from one folder and the candidate
from another, such an effect is an arm effect, and it is kept as a win. So each arm is built in
*both* folders, and before each pair a coin decides which arm's builds stand in which folder: a
location effect then lands on either arm with equal chance, i.e. it becomes symmetric noise that
the paired test tolerates, in the A/A calibration and in every experiment alike.

Every build runs from the folder it was built in (a build may embed its own path: an RPATH, a
CMake cache), so the idle builds wait under sibling names (`<folder>.A`, `<folder>.B`) and folders
are swapped by renaming, which is atomic on one file system.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from . import gitops


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


class Locations:
    """Two folders P (the baseline's) and Q (the candidate's); after `prepare`, each arm has a
    build in each. `place(swap)` puts A at P and B at Q (swap False) or B at P and A at Q."""

    def __init__(self, p: Path, q: Path):
        self.p, self.q = Path(p), Path(q)
        self.swapped = False

    def _aside(self, folder: Path, arm: str) -> Path:
        return folder.with_name(f"{folder.name}.{arm}")

    def _clear(self) -> None:
        for folder in (self.p, self.q):
            for extra in ("A", "B", "fresh"):
                shutil.rmtree(self._aside(folder, extra), ignore_errors=True)

    def prepare(self, build: Callable[[Path, str], None]) -> None:
        """With A built at P and B at Q: build B at P and A at Q (`build(folder, arm)`), leaving A at P
        and B at Q in place and the two new builds aside."""
        self._clear()
        fresh_b = clean_copy(self.q, self._aside(self.p, "fresh"))
        fresh_a = clean_copy(self.p, self._aside(self.q, "fresh"))
        for folder, fresh, arm, other in ((self.p, fresh_b, "B", "A"), (self.q, fresh_a, "A", "B")):
            folder.rename(self._aside(folder, other))        # the build standing there steps aside
            fresh.rename(folder)
            try:
                build(folder, arm)
            finally:
                folder.rename(self._aside(folder, arm))
                self._aside(folder, other).rename(folder)

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
