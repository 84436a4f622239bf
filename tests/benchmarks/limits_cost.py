"""Benchmark (not a test): what the limits of issue 20 cost per sandboxed step, as METRIC lines.

    .venv/bin/python tests/benchmarks/limits_cost.py [--rounds 40] [--files 5000]

The same step (`true`, as a build: writable tree) run alternately with the limits (rlimits,
tmpfs sizes, output cap; for a root worker the unprivileged uid, which also makes the tree
group-writable before each writable step) and without them (no rlimits, no tmpfs sizes, the
user-namespace mode as before), side by side in one process; medians of the runner's wall time.
Once on an empty tree and once on a tree of `--files` files (what `grant_tree` walks).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from jobs.guard import sandbox  # noqa: E402
from jobs.guard.limits import Limits  # noqa: E402
from jobs.measure.isolation import Isolation  # noqa: E402
from jobs.measure.runner import run_step  # noqa: E402

LIMITED = Isolation()
_real_argv, _real_check, _real_wrap = sandbox.bwrap_argv, sandbox.check, Limits.wrap


def unlimited(on: bool) -> None:
    """Switch the limits off (on=True) or back on, process-wide."""
    if on:
        def argv(*a, **kw):
            out = _real_argv(*a, **kw)
            while "--size" in out:
                i = out.index("--size")
                del out[i:i + 2]
            return out
        sandbox.bwrap_argv = argv
        sandbox.check = lambda: True           # the user-namespace mode: no uid drop, no grant_tree
        Limits.wrap = lambda self, argv: argv
    else:
        sandbox.bwrap_argv, sandbox.check, Limits.wrap = _real_argv, _real_check, _real_wrap


def measure(tree: Path, rounds: int, label: str) -> None:
    times = {"with": [], "without": []}
    for i in range(rounds):
        for variant in (("with", "without") if i % 2 else ("without", "with")):
            unlimited(variant == "without")
            try:
                done = run_step("true", tree, 60, isolation=LIMITED, step="build")
            finally:
                unlimited(False)
            assert done.returncode == 0, done.output
            times[variant].append(done.seconds)
    on, off = statistics.median(times["with"]), statistics.median(times["without"])
    print(f"METRIC limits.{label}.without_s={off:.4f}")
    print(f"METRIC limits.{label}.with_s={on:.4f}")
    print(f"METRIC limits.{label}.cost_ms={1000 * (on - off):.1f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    sandbox.check()
    print(f"# euid {os.geteuid()}, root mode: {os.geteuid() == 0 and not sandbox.check()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty"
        empty.mkdir()
        measure(empty, args.rounds, "empty_tree")
        big = Path(tmp) / "big"
        for i in range(args.files):
            d = big / f"d{i % 50}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.c").write_text("int x;\n")
        measure(big, args.rounds, f"tree_{args.files}_files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
