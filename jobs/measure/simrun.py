"""The runner's side of the deterministic yardstick: run the reduced workload under cachegrind in
the sandbox (jobs/measure/simulate.py has the model and the verdict), and hash the declared build outputs.

The step runner is passed in (jobs.measure.runner.run_step with the run's Isolation), so this module never
runs target code outside the sandbox the run chose. The workload runs in the benchmark's sandbox
(read-only tree, fresh /tmp and $HOME), and Valgrind runs inside the workload's own processes, as
its uid: what cachegrind writes, the workload can reach. So the records are kept apart and checked
(jobs/measure/cgoutput.py) and the arms compared (jobs/measure/simulate.py):

What holds. The workload's output goes to a folder of its own, so the folder `/proc/self/fd/1`
leads to holds no record (issue finding A6: a forged `cg.0` there summed as -52.6%). The records
lie in a randomly named folder inside another that cannot be listed while the workload runs.
Only `cg.<pid>` and `vg.<pid>` are read; a stray entry, a file without Valgrind's log of the same
process or a log without its file, a file and log that disagree on any count, a count that is
negative, not a plain integer or not below 2**63 (A8: 4,299 digits crashed the run), or a listing
not framed as the runner printed it fail the step with the reason. A forged record for a process
that never ran (a file and a matching log) makes one process more than the baseline's run: the
candidate is invalid (`process_problems`), and two A/A runs that disagree fail the calibration.

What does not. The folder's name is in a Valgrind process's command line (`/proc/<pid>/cmdline`)
and its log's descriptor (`/proc/self/fd`), the folders are the workload's to chmod, and the
runner's marker is in the wrapper's command line: a workload that sets out to find them can
rewrite, consistently, the file and the log of one of its own processes that has already ended
(or forge a process's pair while starting one process fewer than the baseline), and that is not
seen here; nor is a process that lowers its counts from inside (Valgrind 3.22 and later, the
arm64 yardstick's 3.24 and 3.27 among them, answer cachegrind's client requests to stop counting;
3.19 has none). Against such a workload the count is as trustworthy as the sandbox, which is why a
keep also needs the counted process's DIGESTs to equal the baseline's, the wall-clock guard and the
checks.
"""
from __future__ import annotations

import fnmatch
import hashlib
import os
import secrets
import shutil
import threading
from pathlib import Path
from typing import Callable

from jobs.measure.together import usable_cores
from jobs.measure.simulate import SLOWED_TIMEOUT, SimulateError, extract, extract_digests, wrapped_command

CANCELLED = "cancelled"     # a run stopped because another arm's had failed
VALGRIND_HINT = "install valgrind (Debian: apt-get install valgrind), or remove `simulate:` from the config"


class SimulationFailed(RuntimeError):
    """The reduced workload did not run to the end under cachegrind; `status` is timeout or crash."""

    def __init__(self, status: str, reason: str, log: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


def simulate(command: str, tree: Path, timeout: float, run_step: Callable, seed: int, who: str,
             slowed: bool = False, cancel: threading.Event | None = None) -> dict:
    """One simulated run of `command` in `tree`: cachegrind's totals + `cycles` + the run's wall time,
    and the DIGEST lines the workload printed (`digests`, compared with the other arm's). `slowed`: the
    A/A's second run, slowed on purpose (jobs.measure.simulate.SLOWED) and allowed SLOWED_TIMEOUT times
    `timeout`; its record says so (`slowed`). `cancel`: set when another arm's run failed, which makes
    this one useless: it is stopped, and fails as `cancelled`."""
    if shutil.which("valgrind") is None:
        raise SimulationFailed("crash", f"simulate: valgrind is not installed; {VALGRIND_HINT}")
    marker = "AUTORESEARCH-CACHEGRIND-" + secrets.token_hex(12)
    limit = timeout * SLOWED_TIMEOUT if slowed else timeout
    done = run_step(wrapped_command(command, marker, slowed=slowed), tree, limit, step="benchmark",
                    extra_env={"AUTORESEARCH_SEED": str(seed)}, cancel=cancel)
    if done.returncode is None and cancel is not None and cancel.is_set():
        raise SimulationFailed(CANCELLED, f"{who} simulated run stopped: the other arm's run had failed")
    if done.overflow:
        raise SimulationFailed("crash", f"{who} simulated run stopped: {done.overflow}", done.output[-3000:])
    if done.returncode is None:
        raise SimulationFailed("timeout", f"{who} simulated run exceeded {limit:.0f} s (simulate.timeout"
                               f"{f' x {SLOWED_TIMEOUT:g}: the run slowed on purpose' if slowed else ''})",
                               done.output[-3000:])
    if done.returncode != 0:
        raise SimulationFailed("crash", f"{who} simulated run exited with status {done.returncode}",
                               done.output[-3000:])
    try:
        counts = extract(done.output, marker)
    except SimulateError as exc:
        raise SimulationFailed("crash", f"{who} simulated run: {exc}", done.output[-3000:]) from None
    return {**counts.to_dict(), "wall_s": round(done.seconds, 3), "cpu_s": round(done.cpu_s, 3),
            "digests": extract_digests(done.output, marker), **({"slowed": True} if slowed else {})}


def side_by_side(runs: dict[str, Callable[[threading.Event], dict]],
                 workers: int | None = None) -> dict[str, dict | SimulationFailed]:
    """Each arm's simulated run, at the same time up to the cores this process may use: simulated
    counts do not depend on the machine's load (nor on a neighbour), so unlike wall-clock pairs they
    need not take turns. Each run gets an event that is set once any run has failed (the others' counts
    are of no use then: a run that honours it stops as `cancelled`, instead of taking up to its time
    limit). A failed run is returned (not raised) so the caller sees every arm's outcome; `first_failure`
    picks the one to report."""
    from concurrent.futures import ThreadPoolExecutor
    workers = workers or max(1, min(len(runs), usable_cores()))
    failed = threading.Event()

    def attempt(run: Callable[[threading.Event], dict]) -> dict | SimulationFailed:
        try:
            return run(failed)
        except SimulationFailed as exc:
            failed.set()
            return exc
    if workers == 1:
        return {arm: attempt(run) for arm, run in runs.items()}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simulate") as pool:
        futures = {arm: pool.submit(attempt, run) for arm, run in runs.items()}
        return {arm: future.result() for arm, future in futures.items()}


def first_failure(outcomes: dict[str, dict | SimulationFailed]) -> SimulationFailed | None:
    """The failed run that says why (one stopped only because another failed comes last), or None."""
    failed = [o for o in outcomes.values() if isinstance(o, SimulationFailed)]
    return min(failed, key=lambda f: f.status == CANCELLED) if failed else None


ELF_MAGIC = b"\x7fELF"
MAX_FILES_LOOKED_AT = 50_000


def makes_native_code(tree: Path) -> bool:
    """The build left an ELF file (a program or a shared library) in `tree`: what cachegrind counts is
    then the target's own machine code, not an interpreter's. Links are not followed (jobs/guard/safefs.py)."""
    from jobs.guard import safefs
    for count, rel in enumerate(safefs.walk_files(Path(tree))):
        if count >= MAX_FILES_LOOKED_AT:
            break
        if safefs.head(tree, rel, 4) == ELF_MAGIC:
            return True
    return False


def why_not_derived(failure: SimulationFailed, timeout: float) -> str:
    """Why the benchmark command itself did not fit as the yardstick, with what to do instead."""
    if "Unrecognised instruction" in failure.log or "unhandled instruction" in failure.log:
        return ("the build uses an instruction Valgrind cannot run (on an AVX-512 machine, usually AVX-512: "
                "Valgrind has none); build without it for a `simulate:` workload (e.g. -mno-avx512f, "
                "`simulate.separate_build`)")
    if failure.status == "timeout":
        return (f"the benchmark command took longer than timeouts.simulate={timeout:g} s under cachegrind "
                "(~20-100x its native time); declare a reduced `simulate:` workload or raise timeouts.simulate")
    return f"the benchmark command failed under cachegrind ({failure.reason})"


def native_view(output: str, returncode: int | None) -> dict:
    """What the same workload printed natively (same seed), kept beside its simulated counts for
    `jobs.measure.simulate.native_problems`."""
    from jobs.contract.metrics import parse_metrics
    return {"returncode": returncode, "digests": parse_metrics(output).digests if returncode == 0 else {}}


MAX_ARTIFACT_BYTES = 4 << 30       # a build output larger than this is not hashed (and so never "identical")


def artifact_hashes(tree: Path, globs: list[str]) -> dict[str, str]:
    """sha256 of every regular file under `tree` matching one of `globs` (fnmatch from the root).
    The build wrote these files: links are not followed (jobs/guard/safefs.py) and a file is read in
    chunks up to MAX_ARTIFACT_BYTES, so neither a link to a secret nor /dev/zero is read."""
    from jobs.guard import safefs
    tree = Path(tree)
    out: dict[str, str] = {}
    for rel in safefs.walk_files(tree):
        if not any(fnmatch.fnmatch(rel, g) for g in globs):
            continue
        try:
            fd = safefs.open_regular(tree, rel)
        except OSError:
            continue
        digest, size = hashlib.sha256(), 0
        try:
            while size <= MAX_ARTIFACT_BYTES and (chunk := os.read(fd, 1 << 20)):
                digest.update(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        out[rel] = digest.hexdigest() if size <= MAX_ARTIFACT_BYTES else f"too large ({size}+ bytes)"
    return out


def compare_artifacts(base: Path, head: Path, globs: list[str]) -> dict:
    """{"identical": bool, "files": [...], "differ": [...]}: identical only when both trees built the
    same non-empty set of files with the same bytes."""
    a, b = artifact_hashes(base, globs), artifact_hashes(head, globs)
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return {"identical": bool(a) and not differ, "files": sorted(a), "differ": differ}
