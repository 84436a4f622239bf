"""Benchmark (not a test): wall time of the demo run, per experiment, as METRIC lines.

    .venv/bin/python tests/benchmarks/demo_walltime.py

Runs `autoresearch demo` once and reads the ledger's per-experiment seconds (build + checks +
every interleaved benchmark invocation), so the figures are this run's own.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "bot.cli", "demo", "--workdir", f"{tmp}/w", "--out", str(out)],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        total = time.monotonic() - start
        for line in (out / "experiments.jsonl").read_text().splitlines():
            rec = json.loads(line)
            print(f"METRIC demo_seconds.{rec['kind']}.{rec['name']}={rec['seconds']:.2f}")
        print(f"METRIC demo_seconds.total={total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
