"""What the kernel recipes' harness tests compare: one file of the real llama.cpp tree (the one the
llama-cpp-python sdist vendors) as it is and with recipes applied, and C++ functions cut out of it."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobs.recipes import load_recipe, planned_edits
from loaders import load_llama

llama_tree = load_llama("llama_tree")
RECIPES = Path(__file__).resolve().parents[2] / "kernels/recipes/llama.cpp"


def tree() -> Path:
    """The real tree, or a skip saying why it is unavailable."""
    try:
        return llama_tree.ensure_llama_tree()
    except (llama_tree.TreeUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"llama.cpp source unavailable (llama-cpp-python sdist download failed): {exc}")


def original_and_patched(rel: str, *recipe_ids: str, work: Path | None = None) -> tuple[str, str]:
    """`rel` as the tree has it, and after `recipe_ids` applied in order (a stacked recipe after the
    one it stacks on; `work` is where the intermediate files go then)."""
    base = tree()
    original = (base / rel).read_text()
    current = base
    for i, rid in enumerate(recipe_ids):
        edits = planned_edits(load_recipe(RECIPES / f"{rid}.yml"), current)
        if i == len(recipe_ids) - 1:
            return original, edits[rel]
        assert work is not None, "stacked recipes need a work folder"
        for path, text in edits.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
        current = work
    raise ValueError("no recipe given")


def function(text: str, head: str) -> str:
    """The definition starting at `head` through its closing brace."""
    start = text.index(head)
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1] + "\n"
        i += 1
