"""Benchmark (not a test): what the sandbox costs per step, and that it does not move benchmark
figures, as METRIC lines.

    .venv/bin/python tests/benchmarks/sandbox_cost.py [--rounds 20] [--pairs 20]

1. Per-step overhead: the same step run alternately with and without the sandbox (`true`, a
   clean build of the demo target, its checks, one benchmark process); medians of wall time.
2. A/A with and without it: the demo's benchmark, one process sandboxed and one not, as
   coin-ordered pairs with the same input seed (the runner's own design); the paired estimate and
   its 95% interval of tg_tps and of the process's wall time, sandboxed vs not.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from jobs.cli import demo_target  # noqa: E402
from jobs.contract.metrics import parse_metrics  # noqa: E402
from jobs.measure.isolation import Isolation  # noqa: E402
from jobs.measure.runner import run_step  # noqa: E402
from jobs.stats.sequential import Pair, adjusted, confidence_sequence, hodges_lehmann, pair_schedule, to_pct  # noqa: E402

ON, OFF = Isolation(enabled=True), Isolation(enabled=False)


def step_overhead(tree: Path, rounds: int) -> None:
    steps = {"true": ("true", "build"), "build": ("make -s clean >/dev/null; make -s", "build"),
             "checks": ("./checks.sh", "checks"), "benchmark": ("./bench.sh", "benchmark")}
    for name, (command, kind) in steps.items():
        times = {"on": [], "off": []}
        for i in range(rounds):
            for label in (("on", "off") if i % 2 else ("off", "on")):
                done = run_step(command, tree, 300, isolation=ON if label == "on" else OFF, step=kind)
                assert done.returncode == 0, done.output[-2000:]
                times[label].append(done.seconds)
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        print(f"METRIC sandbox.{name}.plain_s={off:.4f}")
        print(f"METRIC sandbox.{name}.sandboxed_s={on:.4f}")
        print(f"METRIC sandbox.{name}.overhead_ms={1000 * (on - off):.1f}", flush=True)


def aa(tree: Path, pairs: int) -> None:
    rows: dict[str, list[Pair]] = {"tg_tps": [], "pp_tps": [], "wall": []}
    for first, seed in pair_schedule(pairs, seed=2026):
        got = {}
        for label in ((first, "A" if first == "B" else "B")):
            done = run_step("./bench.sh", tree, 300, isolation=ON if label == "B" else OFF, step="benchmark",
                            extra_env={"AUTORESEARCH_SEED": str(seed)})
            got[label] = (parse_metrics(done.output).values, done.seconds)
        (ma, wa), (mb, wb) = got["A"], got["B"]
        for name in ("tg_tps", "pp_tps"):
            rows[name].append(Pair(math.log(mb[name] / ma[name])))
        rows["wall"].append(Pair(math.log(wb / wa)))
    for name, prs in rows.items():
        y, s = adjusted(prs)
        lo, hi = confidence_sequence(y, s, 0.025)
        print(f"METRIC sandbox.aa.{name}.delta_pct={to_pct(hodges_lehmann(y)):.2f}")
        print(f"METRIC sandbox.aa.{name}.ci_low_pct={to_pct(lo):.2f}")
        print(f"METRIC sandbox.aa.{name}.ci_high_pct={to_pct(hi):.2f}", flush=True)
    print(f"METRIC sandbox.aa.pairs={pairs}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = demo_target(Path(tmp) / "tinyllm")
        run_step("make -s", tree, 300, isolation=OFF)
        step_overhead(tree, args.rounds)
        aa(tree, args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
