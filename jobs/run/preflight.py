"""What a run needs, checked before anything is built or measured.

A calibration costs a minute or more; an argument or a candidate patch that cannot work must not
cost it. Every check here reads the target (git, the config), none runs target code. Problems are
collected, not raised one by one, so one attempt shows them all, each as "what: why; fix: how".
"""
from __future__ import annotations

from pathlib import Path

from jobs.contract import branches, yardstick
from jobs.guard import gitops, safefs
from jobs.agent.guard import EditRefused, check_edit
from jobs.contract.config import CONFIG_PATH, TargetConfig
from jobs.contract.errors import RunError
from jobs.research.recipes import matches_any
from jobs.stats.sequential import min_pairs_to_keep, slot_alpha
from jobs.contract.runstate import RunState

PATCH_FORMAT = ("the output of `git diff` or `git format-patch` made in the target repository "
                "(a unified diff whose a/ b/ paths are relative to its root)")


class PreflightError(RunError):
    """The run cannot start; `problems` holds one line per fault, each with its fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("cannot start the run:\n" + "\n".join(f"  - {p}" for p in problems))


def target_repo(path: Path) -> Path:
    """The git toplevel of TARGET, or a PreflightError saying what is missing and how to make it."""
    path = Path(path)
    if not path.exists():
        raise PreflightError([f"TARGET {path}: no such directory; fix: give the path of the target's git "
                              "repository (the folder holding .github/autoresearch.yml)"])
    if not path.is_dir():
        raise PreflightError([f"TARGET {path}: is a file, not a directory; fix: give the repository's folder"])
    top = gitops.toplevel(path)
    if top is None:
        raise PreflightError([f"TARGET {path}: not a git repository (a run measures a commit); fix: "
                              f"git -C {path} init && git -C {path} add -A && git -C {path} commit -m initial"])
    if not gitops.has_commits(top):
        raise PreflightError([f"TARGET {top}: the repository has no commits yet (a run measures a commit); "
                              f"fix: git -C {top} add -A && git -C {top} commit -m initial"])
    return top


def out_problems(out: Path | None) -> list[str]:
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        return [f"--out {out}: is a file, not a directory; fix: name a new folder, or the folder of a run "
                "to resume it"]
    return []


def resume_problems(repo: Path, out: Path, state: RunState, head: str) -> list[str]:
    """An existing run folder resumes its own run only, on the commit that run started at: one that
    holds another target's run (say a variant of the same matrix cell given the same --out) or a run
    of an older commit is named as such, before its base is looked up in a repository that may not
    have it (git's bare "not a tree object" said nothing of the folder)."""
    base = state.base_commit or ""
    if not state.begun or base == head:
        return []
    run_id, recorded = state.run_id or "?", state.target or ""
    other = recorded and Path(recorded).resolve() != Path(repo).resolve()
    where = f"of {recorded}, " if other else ""
    return [f"--out {out}: holds run {run_id} {where}started at {base[:12]}, and {repo} is at {head[:12]}; a run's "
            "folder resumes only that run, on its own commit; fix: give this run another --out (or remove that "
            f"folder to start afresh){'' if other else f', or check out {base[:12]} to resume the run'}"]


def editable_problems(config: TargetConfig, files: list[str], base: str) -> list[str]:
    """Each `editable` glob must match a file of the base commit: one that matches nothing is almost
    always a typo, and every edit the agent makes would be refused."""
    return [f"{CONFIG_PATH}: editable: {glob!r} matches no file in the base commit {base[:12]}; fix: correct the "
            "glob (fnmatch, relative to the repository root, e.g. 'src/**')"
            for glob in config.editable if not any(matches_any(f, [glob]) for f in files)]


def candidate_problems(repo: Path, base: str, patches: list[Path], config: TargetConfig) -> list[str]:
    """Each --candidate must be a patch that `git apply` (what the run uses) applies to the base
    commit, touching only `editable` paths and none of the yardstick files."""
    problems: list[str] = []
    stems: dict[str, Path] = {}
    for patch in patches:
        where = f"--candidate {patch}"
        if not patch.is_file():
            problems.append(f"{where}: no such file; fix: give the path of a patch file ({PATCH_FORMAT})")
            continue
        named = branches.candidate_problem(patch.name, patch.stem)
        if named:
            problems.append(f"{where}: {named}")
            continue
        if patch.stem in stems:
            problems.append(f"{where}: has the same name as {stems[patch.stem]} (the experiment is named after the "
                            "file's stem); fix: rename one of them")
        stems[patch.stem] = patch
        try:
            text = safefs.read_file(patch, safefs.PATCH_LIMIT)
        except safefs.UnsafeFile as exc:
            problems.append(f"{where}: {exc}; fix: give the patch file itself ({PATCH_FORMAT})")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{where}: unreadable as UTF-8 text ({exc}); fix: give {PATCH_FORMAT}")
            continue
        touched = gitops.git(repo, "apply", "--numstat", "-", input=text, check=False)
        if not touched.strip():
            problems.append(f"{where}: not a patch git can read; fix: give {PATCH_FORMAT}")
            continue
        complaint = gitops.patch_check(repo, base, text)
        if complaint:
            first = complaint.splitlines()[0]
            problems.append(f"{where}: does not apply to the base commit {base[:12]} ({first}); fix: make the patch "
                            f"against that commit (`git diff {base[:12]}` in the target), or commit the target "
                            "to the state the patch was made from")
            continue
        for line in touched.splitlines():
            rel = line.split("\t")[-1]
            try:
                check_edit(rel, repo, config)
            except EditRefused as exc:
                problems.append(f"{where}: touches {exc}; fix: leave that file out of the patch, or widen "
                                f"`editable` in {CONFIG_PATH} when it is source the run may change")
    return problems


def repeats_problems(config: TargetConfig, repeats: int | None) -> list[str]:
    """A pair cap in which no keep is possible at the first experiment's level is refused: the run
    would measure every candidate and keep none (a 1.9x fusion was reported "+74.8%, interval
    -100%...+inf%" and discarded in 5 pairs)."""
    cap = repeats if repeats is not None else config.repeats.max
    alpha1 = slot_alpha(config.thresholds.alpha, 1, config.budget.max_experiments)
    need = max(min_pairs_to_keep(alpha1), config.repeats.min)
    if cap >= need:
        return []
    where = f"--repeats {cap}" if repeats is not None else f"{CONFIG_PATH}: repeats.max: {cap}"
    fix = f"--repeats {need} or more" if repeats is not None else f"repeats.max: {need} or more"
    return [f"{where}: no keep is possible in {cap} pairs: the first experiment is kept at level {alpha1:.3g} "
            f"(alpha {config.thresholds.alpha:g} over budget.max_experiments {config.budget.max_experiments}), "
            f"which even a huge speed-up reaches only after {need} pairs; fix: {fix} (sampling stops as soon as "
            "the test decides, so a higher cap costs pairs only where they are needed)"]


def check_run(repo: Path, config: TargetConfig, *, candidates: list[Path], out: Path | None,
              repeats: int | None = None) -> None:
    """Everything about a run's inputs that can be known before measuring; PreflightError if any fails."""
    base = gitops.head_commit(repo)
    problems = out_problems(out)
    if not problems and out is not None and Path(out).is_dir():
        problems = resume_problems(repo, out, RunState.load(Path(out)), base)
    if problems:                    # the rest would be checked against a base this run does not have
        raise PreflightError(problems)
    files = gitops.files_at(repo, base)
    problems += editable_problems(config, files, base)
    problems += yardstick.overlaps(config, files)
    problems += repeats_problems(config, repeats)
    problems += candidate_problems(repo, base, [Path(p) for p in candidates], config)
    if problems:
        raise PreflightError(problems)
