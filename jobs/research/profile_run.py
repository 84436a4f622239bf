"""The op profile's adapter: build the instrumented tree, run one benchmark process, parse what it
wrote (`jobs.research.profile`, pure, reads the text), and keep it for the same inputs.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Iterable

from .profile import MAX_PROFILE_BYTES, Profile, ProfileError, from_text

Runner = Callable[[str, Path, float], object]     # jobs.measure.runner.run_step: (command, cwd, timeout) -> Step


def measure(tree: Path, instrument, *, build: str, command: str, variable: str, metric_names: Iterable[str],
            explicit: dict[str, int] | None = None, build_timeout: float = 1800, run_timeout: float = 1800,
            run: Runner | None = None, on_step: Callable[[str], None] | None = None,
            cache: Path | None = None) -> Profile:
    """Apply the instrumentation recipe to `tree` (a throw-away worktree), run `build`, then run
    `command` once with `variable` naming the output file, and parse what it wrote. Raises
    ProfileError saying which step failed (with the tail of its output). `on_step` hears each step's
    name before it starts (the build can take many minutes on a large target). `cache` (see
    `cache_file`) holds the profile text of an earlier measurement of the same inputs: when it
    exists nothing is built or run; after a measurement the text is stored there."""
    on_step = on_step or (lambda name: None)
    if cache is not None and cache.is_file():
        on_step(f"profile reused from {cache} (same commit, recipe, build and command)")
        profile = from_text(cache.read_text(encoding="utf-8", errors="replace"), metric_names, explicit)
        profile.command = command
        profile.notes.append(f"reused from {cache}")
        return profile
    from jobs.guard import safefs
    from jobs.research.recipes import RecipeError, detect, planned_edits
    if run is None:
        from jobs.measure.runner import run_step as run
    tree = Path(tree)
    found = detect(instrument, tree)
    if found.status == "not_found":
        raise ProfileError(f"instrumentation {instrument.id} does not fit this tree: {found.reason}")
    if found.status == "applicable":
        try:
            contents = planned_edits(instrument, tree)
        except RecipeError as exc:
            raise ProfileError(f"instrumentation {instrument.id}: {exc}") from None
        for rel, text in contents.items():
            (tree / rel).write_text(text, encoding="utf-8")
    out = tree / ".autoresearch-profile" / "ops.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    on_step("profile build (instrumented copy of the base commit)")
    step = run(build, tree, build_timeout)
    if step.returncode != 0:
        raise ProfileError(f"build of the instrumented tree {'timed out' if step.returncode is None else 'failed'}: "
                           + step.output[-1500:])
    quoted = "'" + str(out).replace("'", "'\\''") + "'"
    on_step("profile run (one benchmark process)")
    step = run(f"export {variable}={quoted}; {command}", tree, run_timeout)
    if step.returncode != 0:
        raise ProfileError(f"profiled run {'timed out' if step.returncode is None else 'failed'}: " + step.output[-1500:])
    if not out.is_file():
        raise ProfileError(f"the profiled run wrote no {out.name}: is the hook's variable {variable} read by the target?")
    if out.stat().st_size > MAX_PROFILE_BYTES:
        raise ProfileError(f"{out.name} is {out.stat().st_size >> 20} MiB, above the {MAX_PROFILE_BYTES >> 20} MiB cap")
    try:            # the target wrote it: read without following a link, and no more than the cap
        text = safefs.read_text(tree, out.relative_to(tree).as_posix(), MAX_PROFILE_BYTES, errors="replace")
    except OSError as exc:
        raise ProfileError(f"{out.name} cannot be read: {exc}") from None
    profile = from_text(text, metric_names, explicit)
    profile.command = command
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(text, encoding="utf-8")
    return profile


def cache_file(folder: Path, *inputs: str) -> Path:
    """Where the profile of these inputs (commit, instrumentation recipe, build and benchmark
    commands, declared environment) is kept: one file per distinct set of inputs."""
    digest = hashlib.sha256("\0".join(inputs).encode("utf-8", "replace")).hexdigest()[:24]
    return Path(folder) / f"ops-{digest}.txt"
