"""Benchmark (not a test): what the power simulation costs, as METRIC lines.

    .venv/bin/python tests/benchmarks/power_cost.py [--repeats N]

Every calibration computes an MDE per metric by bisection over `jobs.stats.power.simulate` (400 simulated
paths per step), so its cost is paid once per run and metric, and in every end-to-end test. Prints
the MDE (it must not change when the code only gets faster) and the median seconds per bisection.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from jobs.stats import power, sequential  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    residuals = np.random.default_rng(2).normal(0, 0.01, 16)      # 16 A/A pairs of 1% noise
    rule = sequential.Rule(alpha_keep=0.0125, floor=math.log(1.01), target=math.log(1.05))
    seconds, found = [], None
    for _ in range(args.repeats):
        start = time.perf_counter()
        found = power.mde(residuals, rule)
        seconds.append(time.perf_counter() - start)
    print(f"METRIC mde_pct={found.effect_pct:.6f}")
    print(f"METRIC mde_power={found.power:.4f}")
    print(f"METRIC mde_seconds={statistics.median(seconds):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
