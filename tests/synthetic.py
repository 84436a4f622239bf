"""A tiny synthetic target whose speed is a number in a file, so every status can be provoked."""
from __future__ import annotations

from pathlib import Path

from conftest import git, make_repo

# The speed a "faster" candidate writes to src/speed.txt: double the base's 100. Every keep also waits
# for the runner's CPU clock to confirm that the process did less work, and on a loaded host the CPU
# time of this tiny process tree varies by ~17% per process: a +30% candidate (the awk loop 23% shorter,
# bash's start-up unchanged) took 16-22 pairs to confirm, a doubling takes the ~9 the score needs (6 in
# the stack), so each end-to-end test measures about half as many pairs. Tests about small effects
# write their own speeds (e.g. 101-104).
FASTER = "200\n"

# repeats.max 40: a keep waits for the runner's CPU clock to confirm it, and on a loaded 2-core host
# (two CPU hogs, or the suite's other worker) the whole tree's CPU time of a ~20 ms process varies so
# much that 24 pairs sometimes could neither confirm nor exclude a real +30% (seen in CI-like runs;
# hence FASTER above). A quiet host decides in ~9 pairs; only a noisy one pays for the extra pairs.
CONFIG = """\
name: synthetic
build: bash build.sh
benchmark: ./bench.sh
checks: ./checks.sh
metrics:
  - {name: score, direction: higher, primary: true, clock: cpu}
  - {name: ms, direction: lower, clock: cpu}
editable: ["src/**"]
timeouts: {build: 20, benchmark: 3, checks: 20}
repeats: {min: 3, max: 40, warmup: 1, calibration: 8}
thresholds: {min_effect_pct: 1.0, target_mde_pct: 3.0}
sanity:
  inverse_pairs: [{a: score, b: ms, product: 1000, tolerance: 0.05}]
"""

FILES = {
    ".github/autoresearch.yml": CONFIG,
    "build.sh": "set -e\nmkdir -p build\n[ ! -e src/broken ]\ncp src/speed.txt build/speed\n"
                "for f in wrong crash slow nan; do rm -f build/$f; [ -e src/$f ] && touch build/$f; done; true\n",
    # ~1% noise from bash's RANDOM; the value comes from the built artefact, as a real benchmark's
    # would. The loop is work in proportion to 1/speed (~20 ms at 100), so a faster build really
    # takes less process time: the runner's clock check (jobs/stats/integrity.py) would rightly call a
    # score that rises while the process does the same work a cheat. The metrics declare the CPU
    # clock: on a loaded machine the wall time of a ~20 ms loop inside a sandboxed process is mostly
    # scheduling, and the clock test must be able to confirm a real speed-up.
    "bench.sh": "#!/usr/bin/env bash\n[ -e build/crash ] && { echo boom >&2; exit 3; }\n"
                "[ -e build/slow ] && sleep 10\n"
                "[ -e build/nan ] && { echo 'METRIC score=nan'; exit 0; }\n"
                "s=$(cat build/speed)\n"
                "awk -v s=$s -v r=$RANDOM 'BEGIN { for (i = 0; i < 6e7 / s; i++) w += i;"
                " v = s * (1 + (r % 200 - 100) / 10000);"
                " printf \"METRIC score=%.4f\\nMETRIC ms=%.4f\\n\", v, 1000 / v }'\n",
    "checks.sh": "#!/usr/bin/env bash\n[ ! -e build/wrong ] || { echo 'output differs from reference'; exit 1; }\n",
    "src/speed.txt": "100\n",
    "src/code.c": "int main(void) { return 0; }\n",
}


def synthetic_target(path: Path) -> Path:
    return make_repo(path, FILES)


def with_timeouts(config_text: str, **seconds: int) -> str:
    """The synthetic target's config with some of its step timeouts (`build`, `benchmark`, `checks`)
    replaced, for a test whose steps are slow on purpose or must not race a loaded machine (the
    replacement is checked: a changed CONFIG must not leave the old limit in silence)."""
    line = "timeouts: {build: 20, benchmark: 3, checks: 20}"
    assert line in config_text, "the synthetic config's timeouts moved"
    limits = {"build": 20, "benchmark": 3, "checks": 20}
    unknown = set(seconds) - set(limits)
    assert not unknown, f"no such step timeout: {sorted(unknown)}"
    limits.update(seconds)
    return config_text.replace(line, "timeouts: {" + ", ".join(f"{k}: {v}" for k, v in limits.items()) + "}")


def patch_for(repo: Path, out: Path, changes: dict[str, str | None]) -> Path:
    """Write a patch file that makes `changes` (None deletes) against HEAD, leaving the repo clean."""
    for rel, text in changes.items():
        f = repo / rel
        if text is None:
            f.unlink()
        else:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "--binary")
    git(repo, "reset", "-q", "--hard", "HEAD")
    out.write_text(diff + "\n")
    return out
