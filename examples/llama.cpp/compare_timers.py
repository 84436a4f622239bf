#!/usr/bin/env python3
"""Does `llama-digest --bench` (bench.sh's timed program) measure what llama-bench measures?

    python3 compare_timers.py BUILD_BIN MODEL [--rounds 5] [--threads 1 2]

runs `BUILD_BIN/llama-bench -p 512 -n 128 -r 1 -o json -fa -1 -t T` and `BUILD_BIN/llama-digest
--bench MODEL SEED 512 128 T -1` interleaved (A B, then B A, ...; one process each per round, seed =
the round) and prints, per thread count and test, both medians and their min-max, and the median
(min-max) of each round's ratio digest/bench, the ratio also as a METRIC line. Build both first:
`cmake --build build --target llama llama-bench` and `bash .github/autoresearch/digest.sh build build`.
Run it again after moving to a newer llama.cpp: the program follows llama-bench's way of running a
test (README, "Benchmark"), and upstream may change it. Run from this project's checkout, installed
(`pip install -e '.[test]'`): it reads llama-bench's JSON with tests/kernels/llama_ab.py's parser.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "kernels"))
from jobs.contract.metrics import parse_metrics  # noqa: E402  (the runner's own METRIC parser)
from llama_ab import run_bench  # noqa: E402  (the A/B script's llama-bench run and JSON parser)

TESTS = ("pp512", "tg128")
AUTO_FA = -1   # llama-bench's default -fa, and llama-digest's


def digest_rates(bin_dir: Path, model: Path, seed: int, threads: int) -> dict[str, float]:
    cmd = [str(bin_dir / "llama-digest"), "--bench", str(model), str(seed), "512", "128", str(threads), str(AUTO_FA)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
    rates = parse_metrics(done.stdout).values
    missing = [n for n in TESTS if n not in rates]
    if missing:
        raise ValueError(f"llama-digest --bench printed no METRIC {', '.join(missing)}")
    return rates


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin", type=Path, help="the build's bin folder (llama-bench and llama-digest)")
    ap.add_argument("model", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    for exe in ("llama-bench", "llama-digest"):
        if not (args.bin / exe).is_file():
            ap.error(f"{args.bin / exe} not found (see the build steps at the top of this script)")
    if not args.model.is_file():
        ap.error(f"model {args.model} not found")
    if args.rounds < 1 or min(args.threads) < 1:
        ap.error("--rounds and --threads must be positive")
    samples: dict[tuple[int, str, str], list[float]] = {}
    try:
        for threads in args.threads:
            for r in range(args.rounds):
                order = [("llama-bench", lambda: run_bench(args.bin, args.model, AUTO_FA, threads)),
                         ("llama-digest", lambda: digest_rates(args.bin, args.model, r + 1, threads))]
                for prog, measure in order if r % 2 == 0 else order[::-1]:
                    for name, rate in measure().items():
                        if name in TESTS:
                            samples.setdefault((threads, prog, name), []).append(rate)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"compare_timers: {exc}", file=sys.stderr)
        return 1
    for threads in args.threads:
        for name in TESTS:
            b, d = samples[(threads, "llama-bench", name)], samples[(threads, "llama-digest", name)]
            # each round's two processes ran back to back: their ratio cancels the host's slow drift
            paired = [x / y for x, y in zip(d, b)]
            ratio = statistics.median(paired)
            print(f"-t {threads} {name}: llama-bench median {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}), "
                  f"llama-digest --bench median {statistics.median(d):.2f} ({min(d):.2f}-{max(d):.2f}); "
                  f"ratio per round median {ratio:.3f} ({min(paired):.3f}-{max(paired):.3f}), {len(b)} rounds")
            print(f"METRIC {name}_t{threads}_ratio={ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
