"""Benchmark (not a test): experiments per hour of the local pipeline, two code versions side by side.

    .venv/bin/python tests/benchmarks/experiments_per_hour.py --before HEAD~5             # lz4 and xxHash
    .venv/bin/python tests/benchmarks/experiments_per_hour.py --before REV --target /tmp/t --patch a.patch ...
    .venv/bin/python tests/benchmarks/experiments_per_hour.py --before REV --libs xxhash --candidates 1 --repeats 3
    .venv/bin/python tests/benchmarks/experiments_per_hour.py --before REV --build objects --from research

Issue 43 ("each build once"): for each target (default: the lz4 and xxHash examples, made with
examples/clibs/setup.sh) and N candidate patches (default: flag patches of the Makefile's CFLAGS,
as the offline research proposes them), runs `autoresearch run --agent none --candidate ...` once with
this checkout's code ("after") and once with the code of `--before REV` (checked out with `git
worktree add` into /tmp), one after the other, neither reusing the other's calibration, and prints from each run's experiments.jsonl:
experiments per hour (experiments over their own seconds, and over the whole run's wall time), the
build seconds per experiment (`runner.steps`, every `build_*` step), and the speed-up. Nothing is
asserted: the figures are this machine's, now.

`speedup_pairs_only_bound` is the most a faster build side could give with the pairs these verdicts
sampled: each "after" experiment reduced to its wall-clock processes (`runner.steps["sampling"]`:
warm-up, screening and pairs, which run alone), against the "before" rate. Below a goal, only fewer
pairs (or shorter processes) reach it.

`speedup_cores_bound` is the most this machine's cores allow with the pairs sampled and the work done:
each "after" experiment as its wall-clock processes (which run alone) plus its other work (builds,
checks, the candidate's simulated run) spread over every core the runner may use
(`jobs.measure.together.usable_cores`) with none idle, against the "before" rate. A rate near it has
nothing left to overlap: only less work, or fewer pairs, goes faster.

`pair_overhead_ms` is what each pair costs beyond its two benchmark processes (the runner's stop
rule, probes, journal and sandbox set-up): sampling seconds less the pairs times the arms' median
process walls. On a 90 ms benchmark such as xxHash's, it is a share of every pair.

The examples build with one compile-and-link command, which neither a compiler cache nor an
incremental build can shorten; `--build objects` builds the vendored library as objects with header
dependencies and an archive instead (as the library's own build would), and `--from research`
measures the source patches the offline research proposes instead of flag patches.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from jobs.contract.config import load_config  # noqa: E402  (the contract's warm-up pairs)
from jobs.measure.together import usable_cores  # noqa: E402  (the cores the runner runs work at once on)
from jobs.run import calcache  # noqa: E402

FLAGS = ["-O3", "-O2 -funroll-loops", "-O2 -march=x86-64-v3", "-O2 -fno-plt", "-O2 -flto"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def flag_patches(target: Path, out: Path, n: int) -> list[Path]:
    """Up to `n` patches of the Makefile's `CFLAGS ?= -O2` line, written against the target's HEAD."""
    makefile = target / "Makefile"
    text = makefile.read_text()
    if "CFLAGS ?= -O2" not in text:
        raise SystemExit(f"{makefile}: no `CFLAGS ?= -O2` line to patch; give --patch files")
    patches = []
    for k, flags in enumerate(FLAGS[:n]):
        makefile.write_text(text.replace("CFLAGS ?= -O2", f"CFLAGS ?= {flags}", 1))
        diff = git(target, "diff")
        makefile.write_text(text)
        path = out / f"{target.name}-flags{k}.patch"
        path.write_text(diff + "\n")
        patches.append(path)
    return patches


OBJECTS_MAKEFILE = """\
# The library built as a real one is: every vendored source compiled to an object (header
# dependencies recorded with -MMD), archived, and the benchmark linked against the archive.
CC ?= cc
CFLAGS ?= -O2
LIBSRC := $(wildcard {vendored}/*.c)
LIBOBJ := $(LIBSRC:.c=.o)
bench: bench.o lib.a
\t$(CC) $(CFLAGS) -o $@ bench.o lib.a
lib.a: $(LIBOBJ)
\tar rcs $@ $(LIBOBJ)
%.o: %.c
\t$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<
-include $(LIBOBJ:.o=.d) bench.d
"""


def as_objects(target: Path, dest: Path) -> Path:
    """A clone of `target` whose Makefile builds the vendored library as objects and an archive (the
    way the library's own build, CMake or automake would), committed: a build a compiler cache and an
    incremental build can shorten, unlike the examples' one compile-and-link command."""
    subprocess.run(["git", "clone", "-q", str(target), str(dest)], check=True)
    vendored = next(p.name for p in sorted(dest.iterdir()) if p.is_dir() and p.name != ".git" and list(p.glob("*.c")))
    (dest / "Makefile").write_text(OBJECTS_MAKEFILE.format(vendored=vendored))
    (dest / ".gitignore").write_text("bench\n*.o\n*.d\n*.a\n")
    git(dest, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qam",
        "build the library as objects and an archive")
    return dest


def research_patches(code: Path, target: Path, out: Path, n: int) -> list[Path]:
    """Up to `n` of the source patches (C/C++ files only, no build file) that the offline research
    of `code` proposes for `target`: the candidates the product's own loop would measure."""
    done = subprocess.run([sys.executable, "-m", "jobs.cli", "research", str(target), "--agent", "offline",
                           "--out", str(out)], cwd=code, env={**os.environ, "PYTHONPATH": str(code)},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise SystemExit(f"research of {target} failed: {done.stdout[-800:]}")
    hypotheses = json.loads((out / "hypotheses.json").read_text())
    hypotheses = hypotheses.get("hypotheses", hypotheses) if isinstance(hypotheses, dict) else hypotheses
    patches = []
    for h in hypotheses:
        path = Path(h.get("patch") or "")
        if not path.is_file():
            continue
        files = [line.split(" b/", 1)[-1] for line in path.read_text().splitlines() if line.startswith("diff --git ")]
        if files and all(f.endswith((".c", ".h", ".cc", ".cpp", ".hpp")) for f in files):
            patches.append(path)
    return patches[:n]


def without_simulate(target: Path, dest: Path) -> Path:
    """A clone of `target` whose contract declares no `simulate:` workload, committed: the contract a
    maintainer who writes none has (issue 43: 'the yardstick without writing it')."""
    import yaml
    subprocess.run(["git", "clone", "-q", str(target), str(dest)], check=True)
    config = dest / ".github" / "autoresearch.yml"
    data = yaml.safe_load(config.read_text())
    if "simulate" not in data:
        return dest
    del data["simulate"]
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    git(dest, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qam", "no simulate: workload")
    return dest


def forget_calibrations(target: Path) -> None:
    """A run stores its calibration in the target's git folder and a later run of the same base reuses it
    (jobs.run.calcache): removed before each run, so that "after" makes its own as "before" did. The
    target's other caches stay, as they do between a maintainer's research and run: the offline research
    of `--from research` builds each source rewrite it proposes (jobs.agent.transforms.check) through the
    repository's compiler cache, which then holds them when a run with a compiler cache builds them."""
    shutil.rmtree(calcache.calibrations_folder(target), ignore_errors=True)


def one_run(code: Path, target: Path, patches: list[Path], out: Path, repeats: int) -> dict:
    argv = [sys.executable, "-m", "jobs.cli", "run", str(target), "--agent", "none", "--run-id", out.name,
            "--out", str(out)]
    for patch in patches:
        argv += ["--candidate", str(patch)]
    if repeats:
        argv += ["--repeats", str(repeats)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.monotonic()
    done = subprocess.run(argv, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    total = time.monotonic() - start
    if done.returncode != 0:
        print(f"# {out.name}: run failed (exit {done.returncode}): {done.stdout[-800:]}", file=sys.stderr)
    ledger = out / "experiments.jsonl"
    records = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    experiments = [r for r in records if r.get("kind") == "experiment"]
    builds = [sum(v for k, v in ((r.get("runner") or {}).get("steps") or {}).items() if k.startswith("build"))
              for r in experiments]
    seconds = sum(r.get("seconds") or 0 for r in experiments)
    # The wall-clock processes' seconds (warm-up, screening and pairs; recorded since issue 43's
    # `steps["sampling"]`, None before): they run alone, so no build-side saving shortens them.
    sampling = [((r.get("runner") or {}).get("steps") or {}).get("sampling") for r in experiments]
    for r, b, s in zip(experiments, builds, sampling):
        print(f"#   {out.name} {r['name']}: {r['status']}, {r.get('seconds', 0):.1f} s, builds {b:.1f} s, "
              f"pairs {'?' if s is None else f'{s:.1f}'} s "
              f"({', '.join(k for k in sorted(((r.get('runner') or {}).get('steps') or {})) if k.startswith('build'))}): "
              f"{r.get('reason', '')[:160]}")
    unknown = None in sampling or not experiments
    return {"n": len(experiments), "seconds": seconds, "total": total, "builds": builds,
            "sampling": None if unknown else sum(sampling),
            "pair_overhead": None if unknown else pair_overhead(experiments, load_config(target).repeats.warmup),
            "cores_bound": None if unknown else sum(s + side_work(r) / usable_cores()
                                                    for r, s in zip(experiments, sampling))}


def pair_overhead(experiments: list[dict], warmup: int) -> float | None:
    """The runner's own seconds per pair beyond its two benchmark processes, over the run: each
    experiment's sampling seconds less its pairs (warm-up and screening ones included) times its two
    arms' median process walls. What a pair costs that the contract's benchmark does not."""
    over = rounds = 0.0
    for r in experiments:
        runner = r.get("runner") or {}
        steps = runner.get("steps") or {}
        walls = (runner.get("wall_base_s") or 0.0) + (runner.get("wall_head_s") or 0.0)
        screened = steps.get("screening_pairs") or 0
        n = (runner.get("pairs") or 0) + screened + warmup * (2 if screened else 1)
        if not walls or not n:
            continue
        over += steps["sampling"] - n * walls
        rounds += n
    return over / rounds if rounds else None


def side_work(record: dict) -> float:
    """Seconds of an experiment's work besides its pairs, wherever it ran (its own turn, or beside the
    previous experiment): every build, its checks and the candidate's simulated run (the baseline's is
    counted once, by the calibration). Wall seconds of each, so work that waited for a core counts as
    longer than it is: the bound it sets is, if anything, low."""
    runner = record.get("runner") or {}
    steps = runner.get("steps") or {}
    simulated = ((runner.get("simulated") or {}).get("seconds") or {}).get("B") or 0.0
    return sum(v for k, v in steps.items() if k.startswith("build") or k == "checks") + simulated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the older revision to compare with (e.g. HEAD~3)")
    parser.add_argument("--target", type=Path, action="append", default=[], help="a target repository (default: "
                        "the lz4 and xxHash examples, made by examples/clibs/setup.sh)")
    parser.add_argument("--libs", default="lz4,xxhash", help="which examples to make when no --target is given")
    parser.add_argument("--patch", type=Path, action="append", default=[], help="candidate patches (default: flags)")
    parser.add_argument("--candidates", type=int, default=3, help="flag patches per target when no --patch")
    parser.add_argument("--repeats", type=int, default=0, help="pair cap per experiment (0: the target's own; "
                        "the run refuses fewer than 9)")
    parser.add_argument("--contract", choices=["no-simulate", "as-is"], default="no-simulate",
                        help="no-simulate (default): each target's contract without its `simulate:` workload, as a "
                             "maintainer who writes none has it; as-is: the contract as the example ships it")
    parser.add_argument("--build", choices=["as-is", "objects"], default="as-is",
                        help="as-is (default): each example's one compile-and-link command; objects: the vendored "
                             "library compiled to objects with header dependencies and archived, as real builds are")
    parser.add_argument("--from", dest="source", choices=["flags", "research"], default="flags",
                        help="where the candidates come from when no --patch: flags (default: patches of the "
                             "Makefile's CFLAGS) or research (the source patches this checkout's offline research "
                             "proposes)")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (their path is printed)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="autoresearch-eph-"))
    before = tmp / "before"
    git(ROOT, "worktree", "add", "--detach", str(before), args.before)
    totals = {"before": [], "after": []}
    try:
        targets = [t.resolve() for t in args.target]
        if not targets:
            for lib in args.libs.split(","):
                made = tmp / f"{lib}-target"
                subprocess.run([str(ROOT / "examples" / "clibs" / "setup.sh"), lib, str(made)], check=True,
                               stdout=subprocess.DEVNULL)
                targets.append(made)
        if args.build == "objects":
            targets = [as_objects(t, tmp / f"{t.name}-objects") for t in targets]
        if args.contract == "no-simulate":
            targets = [without_simulate(t, tmp / f"{t.name}-nosim") for t in targets]
        print(f"# contract: {args.contract}; build: {args.build}; candidates: "
              f"{'given' if args.patch else args.source}; before: {args.before} "
              f"({git(ROOT, 'rev-parse', '--short', args.before)}), "
              f"after: this checkout ({git(ROOT, 'rev-parse', '--short', 'HEAD')} + its uncommitted changes)", flush=True)
        for target in targets:
            patches = [p.resolve() for p in args.patch] or (
                research_patches(ROOT, target, tmp / f"{target.name}-research", args.candidates)
                if args.source == "research" else flag_patches(target, tmp, args.candidates))
            if not patches:
                print(f"# {target.name}: no candidate patches", file=sys.stderr)
                continue
            for label, code in (("before", before), ("after", ROOT)):
                forget_calibrations(target)
                run = one_run(code, target, patches, tmp / f"{target.name}-{label}", args.repeats)
                totals[label].append(run)
                if run["n"]:
                    print(f"METRIC {target.name}.build_seconds_per_experiment_{label}="
                          f"{statistics.mean(run['builds']):.2f}")
                    print(f"METRIC {target.name}.experiments_per_hour_{label}={3600 * run['n'] / run['seconds']:.2f}")
                    if run["sampling"]:
                        print(f"METRIC {target.name}.experiments_per_hour_pairs_only_{label}="
                              f"{3600 * run['n'] / run['sampling']:.2f}")
                        print(f"METRIC {target.name}.experiments_per_hour_cores_bound_{label}="
                              f"{3600 * run['n'] / run['cores_bound']:.2f}")
                    if run["pair_overhead"] is not None:
                        print(f"METRIC {target.name}.pair_overhead_ms_{label}={1000 * run['pair_overhead']:.1f}")
                print(f"METRIC {target.name}.run_seconds_{label}={run['total']:.1f}")
            first, last = totals["before"][-1], totals["after"][-1]
            if first["n"] and last["n"] and last["sampling"]:
                print(f"METRIC {target.name}.speedup_pairs_only_bound="
                      f"{(last['n'] / last['sampling']) / (first['n'] / first['seconds']):.3f}")
                print(f"METRIC {target.name}.speedup_cores_bound="
                      f"{(last['n'] / last['cores_bound']) / (first['n'] / first['seconds']):.3f}")
    finally:
        git(ROOT, "worktree", "remove", "--force", str(before))
        if args.keep:
            print(f"# run folders kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    rates = {}
    for label, runs in totals.items():
        n, seconds = sum(r["n"] for r in runs), sum(r["seconds"] for r in runs)
        builds = [b for r in runs for b in r["builds"]]
        rates[label] = 3600 * n / seconds if seconds else 0.0
        print(f"METRIC experiments_per_hour_{label}={rates[label]:.2f}")
        print(f"METRIC experiments_per_hour_wall_{label}="
              f"{3600 * n / max(1e-9, sum(r['total'] for r in runs)):.2f}")
        if builds:
            print(f"METRIC build_seconds_per_experiment_{label}={statistics.mean(builds):.2f}")
    if rates["before"]:
        print(f"METRIC speedup={rates['after'] / rates['before']:.3f}")
        # The most any build-side change could give with the pairs these verdicts sampled: each experiment
        # reduced to its wall-clock processes, which run alone, against the "before" rate.
        runs = totals["after"]
        if runs and all(r["sampling"] for r in runs):
            bound = 3600 * sum(r["n"] for r in runs) / sum(r["sampling"] for r in runs)
            print(f"METRIC speedup_pairs_only_bound={bound / rates['before']:.3f}")
            bound = 3600 * sum(r["n"] for r in runs) / sum(r["cores_bound"] for r in runs)
            print(f"METRIC speedup_cores_bound={bound / rates['before']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
