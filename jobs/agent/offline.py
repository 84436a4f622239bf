"""The offline agent: implements a hypothesis from its recipe (or a maintainer's patch file).

Deterministic and free; the model agents (jobs/agent/llm.py) sit beside it behind the same `implement` call.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.guard import gitops, safefs
from jobs.contract.config import TargetConfig
from jobs.contract.model import Hypothesis
from jobs.contract.recipes import Recipe, RecipeError, planned_edits
from .guard import EditRefused, check_edit, check_patch


class NotImplementable(RuntimeError):
    """The agent cannot turn this hypothesis into a patch (no recipe, drifted tree, refused edit)."""


def commit_message(h: Hypothesis, recipe: Recipe | None) -> str:
    if recipe is not None:
        body = recipe.commit.strip()
    else:
        body = f"{h.title}\n\n{h.rationale}"
    evidence = "\n".join(f"- {e.where}: {e.note}" for e in h.evidence)
    return f"{body}\n\nHypothesis: {h.id} ({h.kind})\nEvidence:\n{evidence}\n"


class OfflineAgent:
    name = "offline"

    def __init__(self, recipes: dict[str, Recipe]):
        self.recipes = recipes

    def implement(self, h: Hypothesis, tree: Path, config: TargetConfig) -> str:
        """Make one commit in `tree` implementing `h`; returns the commit id."""
        if h.patch:
            return self._apply_patch(h, Path(h.patch), tree, config)
        recipe = self.recipes.get(h.recipe or "")
        if recipe is None:
            raise NotImplementable("no recipe implements this hypothesis offline; "
                                   "the Claude agent (--agent claude) can attempt it")
        try:
            contents = planned_edits(recipe, tree)
        except RecipeError as exc:
            raise NotImplementable(str(exc)) from None
        for rel in contents:
            try:
                check_edit(rel, tree, config)
            except EditRefused as exc:
                raise NotImplementable(f"edit refused: {exc}") from None
        for rel, text in contents.items():
            (Path(tree) / rel).write_text(text, encoding="utf-8")
        return gitops.commit_all(tree, commit_message(h, recipe))

    def revise(self, pending: list[Hypothesis], results: list[dict]) -> list[Hypothesis]:
        """Offline, the ranking stands; a recipe that already failed is not retried."""
        tried = {r["hypothesis"] for r in results}
        return [h for h in pending if h.id not in tried]

    def _apply_patch(self, h: Hypothesis, patch: Path, tree: Path, config: TargetConfig) -> str:
        try:
            text = safefs.read_file(patch, safefs.PATCH_LIMIT)
        except FileNotFoundError:
            raise NotImplementable(f"patch file {patch} not found") from None
        except (OSError, UnicodeError) as exc:
            raise NotImplementable(f"patch file {patch.name} cannot be used: {exc}") from None
        try:
            check_patch(text, tree, config)
        except EditRefused as exc:
            raise NotImplementable(f"{patch.name}: edit refused: {exc}") from None
        try:
            gitops.apply_patch(tree, text)
        except gitops.GitError as exc:
            raise NotImplementable(f"{patch.name} does not apply to the base commit: {exc}") from None
        return gitops.commit_all(tree, f"{h.id}: maintainer candidate\n\nFrom {patch.name}.\n")


def make(recipes: dict[str, Recipe], config: TargetConfig, **_: Any) -> OfflineAgent:
    """The registry's factory (jobs/contract/agentkinds.py), for `offline` and for `none` (which has no research:
    only maintainer patches reach it)."""
    return OfflineAgent(recipes)
