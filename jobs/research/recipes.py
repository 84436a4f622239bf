"""Recipes: declarative descriptions of one optimization, read from `kernels/recipes/<set>/*.yml`.

A recipe says how to tell whether a tree still has the unfused form (regexes whose first match
is the evidence, as file:line), whether the tree already has the optimization (then it reports
"already present" and never patches), and how to apply it (exact-text find/replace edits, each
anchor required to occur exactly once so a drifted tree fails loudly instead of being
mis-patched). Loading and detection are pure functions of the files given; `apply` writes.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jobs.guard import safefs

RECIPES_DIR = Path(__file__).resolve().parents[2] / "kernels" / "recipes"


class RecipeError(ValueError):
    pass


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Probe(_Strict):
    file: str = Field(description="path (glob allowed) relative to the tree root")
    pattern: str = Field(description="Python regex, MULTILINE")
    note: str = ""


class Detect(_Strict):
    unfused: list[Probe] = Field(min_length=1, description="all must match for the recipe to apply")
    fused: list[Probe] = Field(default_factory=list, description="any match: already present")


class Edit(_Strict):
    file: str
    find: str = Field(min_length=1, description="exact text that must occur exactly once")
    replace: str | None = None
    replace_file: str | None = Field(None, description="file beside the recipe holding the new text")


class Recipe(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    title: str
    kind: Literal["fusion", "parallelism", "micro"]
    ops: list[str] = []
    covers: list[list[str]] = Field(default_factory=list,
                                    description="further op sequences the same edits fuse (longer chains)")
    why: str
    expected: str = ""
    # The graphs a change acts on, by tokens per graph (the op profile's workloads): a path taken
    # only by prompts (flash attention's 64-row tiles) or only by generation (one activation
    # row) has no Amdahl bound on the other workload, however much time its op takes there.
    min_tokens: int = Field(1, ge=1, description="acts only on graphs of at least this many tokens")
    max_tokens: int | None = Field(None, ge=1, description="acts only on graphs of at most this many tokens")
    # A change inside one architecture's code (arch/arm/, arch/x86/) compiles to nothing elsewhere:
    # research leaves it out of a run whose experiments all build for other machines (offline.other_arch).
    arches: list[Literal["x86_64", "aarch64"]] = Field(
        default_factory=list, description="machines (uname -m) whose builds compile the change; empty: all")
    detect: Detect
    edits: list[Edit] = Field(min_length=1)
    commit: str = Field(description="commit message: subject line, blank line, body")
    source_dir: str = ""

    @model_validator(mode="after")
    def _token_range(self) -> "Recipe":
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError(f"max_tokens ({self.max_tokens}) is below min_tokens ({self.min_tokens})")
        return self

    def acts_on(self, tokens: int) -> bool:
        return tokens >= self.min_tokens and (self.max_tokens is None or tokens <= self.max_tokens)

    def token_range(self) -> str:
        if self.max_tokens is None:
            return f"graphs of {self.min_tokens} or more tokens"
        if self.min_tokens == 1:
            return f"graphs of at most {self.max_tokens} token{'s' if self.max_tokens > 1 else ''}"
        return f"graphs of {self.min_tokens}-{self.max_tokens} tokens"


@dataclass
class Detection:
    recipe: str
    status: Literal["applicable", "already_present", "not_found"]
    evidence: list[str] = field(default_factory=list)   # "file:line: note"
    reason: str = ""


def load_recipe(path: Path) -> Recipe:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Recipe.model_validate({**data, "source_dir": str(path.parent)})
    except (yaml.YAMLError, ValidationError, TypeError) as exc:
        raise RecipeError(f"{path}: invalid recipe: {exc}") from None


def load_recipe_set(name: str, root: Path = RECIPES_DIR) -> list[Recipe]:
    folder = root / name
    if not folder.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise RecipeError(f"recipe set {name!r} not found under {root} (known: {known})")
    return [load_recipe(p) for p in sorted(folder.glob("*.yml"))]


def _files(tree: Path, pattern: str) -> list[Path]:
    """The regular files of `tree` matching `pattern` (links left out: jobs/guard/safefs.py)."""
    if any(ch in pattern for ch in "*?["):
        return sorted(p for p in tree.glob(pattern) if safefs.is_regular(tree, p.relative_to(tree).as_posix()))
    return [tree / pattern] if safefs.is_regular(tree, pattern) else []


def _first_match(tree: Path, probe: Probe) -> str | None:
    regex = re.compile(probe.pattern, re.MULTILINE)
    for path in _files(tree, probe.file):
        try:
            text = safefs.read_text(tree, path.relative_to(tree).as_posix(), safefs.TEXT_LIMIT, errors="replace")
        except OSError:
            continue
        match = regex.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            rel = path.relative_to(tree).as_posix()
            return f"{rel}:{line}" + (f": {probe.note}" if probe.note else "")
    return None


def detect(recipe: Recipe, tree: Path) -> Detection:
    tree = Path(tree)
    for probe in recipe.detect.fused:
        hit = _first_match(tree, probe)
        if hit:
            return Detection(recipe.id, "already_present", [hit], "the tree already has this optimization")
    evidence = []
    for probe in recipe.detect.unfused:
        hit = _first_match(tree, probe)
        if not hit:
            return Detection(recipe.id, "not_found", evidence,
                             f"unfused form not found: /{probe.pattern}/ in {probe.file}"
                             + (f" ({probe.note})" if probe.note else ""))
        evidence.append(hit)
    return Detection(recipe.id, "applicable", evidence, "the tree still has the unfused form")


def replacement_text(recipe: Recipe, edit: Edit) -> str:
    if (edit.replace is None) == (edit.replace_file is None):
        raise RecipeError(f"recipe {recipe.id}: edit of {edit.file} needs exactly one of replace/replace_file")
    if edit.replace is not None:
        return edit.replace
    return (Path(recipe.source_dir) / edit.replace_file).read_text(encoding="utf-8")


def planned_edits(recipe: Recipe, tree: Path) -> dict[str, str]:
    """New contents of every file the recipe touches, without writing. Raises on a drifted tree."""
    tree = Path(tree)
    contents: dict[str, str] = {}
    for edit in recipe.edits:
        if edit.file not in contents:
            try:       # the tree's file, never through a link and never unbounded
                contents[edit.file] = safefs.read_text(tree, edit.file, safefs.TEXT_LIMIT)
            except FileNotFoundError:
                raise RecipeError(f"recipe {recipe.id}: {edit.file} does not exist in the tree") from None
            except (OSError, UnicodeError) as exc:
                raise RecipeError(f"recipe {recipe.id}: {edit.file} cannot be edited: {exc}") from None
        text = contents[edit.file]
        count = text.count(edit.find)
        if count != 1:
            what = "not found" if count == 0 else f"found {count} times"
            raise RecipeError(f"recipe {recipe.id}: anchor in {edit.file} {what}: {edit.find[:60]!r}")
        contents[edit.file] = text.replace(edit.find, replacement_text(recipe, edit), 1)
    return contents


def touched_files(recipe: Recipe) -> list[str]:
    return sorted({e.file for e in recipe.edits})


def matches_any(path: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, g) for g in globs)
