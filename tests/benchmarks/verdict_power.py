"""Benchmark (not a test): how often the verdict keeps what it should and nothing else, as METRIC lines.

    .venv/bin/python tests/benchmarks/verdict_power.py simulate            # ~1 min, tables only
    .venv/bin/python tests/benchmarks/verdict_power.py demo --runs 10 --nulls 3
    .venv/bin/python tests/benchmarks/verdict_power.py demo --runs 2 --nulls 3 --load states

`simulate`: the production decision procedure (coin-ordered pairs, nuisance adjustment,
anytime-valid test, futility stop, pair cap) on simulated pair noise of the kinds seen on shared
machines; keep rate and mean pairs per true effect, at the first and the eighth slot's level of a
run with `max_experiments` 8. Validity does not come from this table (it comes from the coin and
Ville's inequality); the table shows what the guarantee costs.

`demo`: the real loop on this machine, `--runs` times: `autoresearch run` on the bundled demo
target with the offline agent (all recipes) plus `--nulls` maintainer candidates that change only
a comment (identical binaries: any keep is false). Prints per run whether fuse-softmax was kept
and whether the stack was confirmed, the false keeps, and what it cost (processes per arm,
minutes). `--load states` runs a load generator beside it that puts two CPU hogs on and off at
random (0.5-3 s), so processes land in slow and fast states as on a busy shared host.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from jobs import sequential as sq  # noqa: E402


def pair_noise(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "quiet":        # measured here on a quiet day: pair log-ratio sd ~0.046
        return rng.normal(0, 0.046, n)
    if kind == "noisy":        # the busy day, interleaved pairs: sd 0.41
        return rng.normal(0, 0.41, n)
    if kind == "heavy":
        return 0.1 * rng.standard_t(3, n) / math.sqrt(3)
    if kind == "order":        # quiet, plus the second process of a pair 4% faster (adjusted for)
        return rng.normal(0, 0.03, n)
    if kind == "states":       # each process in a 2.9x slower state 30% of the time
        a = (rng.random(n) < 0.3).astype(float)
        b = (rng.random(n) < 0.3).astype(float)
        return (a - b) * math.log(2.9) + rng.normal(0, 0.03, n)
    raise ValueError(kind)


def simulate(args) -> None:
    rng = np.random.default_rng(args.seed)
    for kind in ("quiet", "order", "heavy", "states", "noisy"):
        order_effect = 0.04 if kind == "order" else 0.0
        # As calibration would pre-register: adjust for the order only where there is one.
        def z(o: float) -> tuple[float, ...]:
            return (o,) if order_effect else ()
        orders = rng.choice([-1.0, 1.0], 10)
        prior = sq.Prior(tuple(sq.Pair(float(v + order_effect * o), z(o))
                               for v, o in zip(pair_noise(kind, rng, 10), orders)))
        for slot in (1, 8):
            alpha = sq.slot_alpha(0.05, slot, 8)
            rule = sq.Rule(alpha_keep=alpha, floor=sq.to_log(1.0), target=sq.to_log(5.0), max_pairs=args.max_pairs)
            for effect_pct in (0.0, 5.0, 14.5, 100.0):
                kept, pairs = 0, []
                for _ in range(args.sims):
                    order = rng.choice([-1.0, 1.0], rule.max_pairs)
                    ys = sq.to_log(effect_pct) + pair_noise(kind, rng, rule.max_pairs) + order_effect * order
                    y, s = sq.adjusted([sq.Pair(float(v), z(o)) for v, o in zip(ys, order)], prior)
                    d = sq.decide(y, s, rule)
                    kept += d.kind == sq.KEEP
                    pairs.append(d.at or d.n)
                tag = f"sim.{kind}.slot{slot}.effect{effect_pct:g}"
                print(f"METRIC {tag}.keep_rate={kept / args.sims:.3f}")
                print(f"METRIC {tag}.mean_pairs={np.mean(pairs):.1f}", flush=True)


def load_generator(stop) -> None:
    """Two CPU hogs (plain shell busy loops) switched on and off at random: the benchmark's
    processes land in slow and fast states, as on a busy shared host."""
    rnd = random.Random(1)
    while not stop.is_set():
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)] \
            if rnd.random() < 0.5 else []
        stop.wait(rnd.uniform(0.5, 3.0))
        for h in hogs:
            h.kill()
            h.wait()
        stop.wait(rnd.uniform(0.5, 3.0))


def demo(args) -> None:
    from conftest import git
    from jobs.cli import demo_target
    from synthetic import patch_for
    stop = threading.Event()
    loader = threading.Thread(target=load_generator, args=(stop,), daemon=True) if args.load == "states" else None
    if loader:
        loader.start()
    totals = {"softmax_kept": 0, "stack_confirmed": 0, "nulls": 0, "null_keeps": 0, "pairs": 0, "minutes": 0.0}
    try:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                repo = demo_target(Path(tmp) / "tinyllm")
                cands = []
                for k in range(args.nulls):
                    text = (repo / "src" / "ops.c").read_text() + f"\n/* null candidate {k}: a comment only */\n"
                    cands.append(patch_for(repo, Path(tmp) / f"null{k}.patch", {"src/ops.c": text}))
                out = Path(tmp) / "out"
                cmd = [sys.executable, "-m", "jobs.cli", "run", str(repo), "--agent", "offline", "--out", str(out),
                       "--run-id", f"power{run}"] + [a for c in cands for a in ("--candidate", str(c))]
                start = time.monotonic()
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                minutes = (time.monotonic() - start) / 60
                if proc.returncode != 0:
                    print(f"# run {run}: failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}", flush=True)
                    continue
                summary = json.loads((out / "summary.json").read_text())
                status = {e["name"]: e for e in summary["experiments"]}
                softmax = status.get("fuse-softmax", {}).get("status")
                nulls = [status[f"null{k}"] for k in range(args.nulls) if f"null{k}" in status]
                false = sum(n["status"] == "keep" for n in nulls)
                pairs = sum((r.get("runner") or {}).get("pairs", 0)
                            for r in [*summary["experiments"], *summary["attribution"], *summary["stacks"].values()])
                in_branch = git(repo, "log", "--format=%B", f"{summary['base_commit']}..{summary['branch']}") \
                    if summary.get("branch_left", True) else ""      # no branch is left when nothing is kept
                confirmed = bool(summary["stack_confirmed"]) and "Hypothesis: fuse-softmax " in in_branch
                totals["softmax_kept"] += softmax == "keep"
                totals["stack_confirmed"] += confirmed
                totals["nulls"] += len(nulls)
                totals["null_keeps"] += false
                totals["pairs"] += pairs
                totals["minutes"] += minutes
                print(f"# run {run}: fuse-softmax {softmax} ({status.get('fuse-softmax', {}).get('reason', '')}); "
                      f"stack confirmed with it: {confirmed}; null keeps {false}/{len(nulls)}; {pairs} pairs "
                      f"(processes per arm); {minutes:.1f} min", flush=True)
                kept = [e["name"] for e in summary["experiments"] if e["status"] == "keep"]
                stack = "; ".join(f"{p}: {s['status']} ({s['reason']})" for p, s in summary["stacks"].items())
                loo = "; ".join(f"{a['name']}: {a['status']}" for a in summary["attribution"])
                print(f"#   kept alone: {kept}; leave-one-out: {loo or '-'}; stack: {stack or '-'}", flush=True)
    finally:
        stop.set()
        if loader:
            loader.join(timeout=10)
    runs = max(1, args.runs)
    print(f"METRIC demo.runs={args.runs}")
    print(f"METRIC demo.softmax_kept_runs={totals['softmax_kept']}")
    print(f"METRIC demo.stack_confirmed_runs={totals['stack_confirmed']}")
    print(f"METRIC demo.null_candidates={totals['nulls']}")
    print(f"METRIC demo.null_false_keeps={totals['null_keeps']}")
    print(f"METRIC demo.pairs_per_run={totals['pairs'] / runs:.1f}")
    print(f"METRIC demo.minutes_per_run={totals['minutes'] / runs:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("simulate")
    s.add_argument("--sims", type=int, default=400)
    s.add_argument("--max-pairs", type=int, default=60)
    s.add_argument("--seed", type=int, default=0)
    d = sub.add_parser("demo")
    d.add_argument("--runs", type=int, default=10)
    d.add_argument("--nulls", type=int, default=3)
    d.add_argument("--load", choices=["none", "states"], default="none")
    args = parser.parse_args()
    (simulate if args.what == "simulate" else demo)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
