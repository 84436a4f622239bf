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
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from jobs.guard import gitops


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
