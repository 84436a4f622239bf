"""The bundled demo target (examples/tinyllm) and its recipe set (kernels/recipes/tinyllm).

Real builds and real runs, each in a temporary copy of the target: the config loads, the
program builds, the benchmark prints the metrics the config declares, the checks pass on the
pristine tree and fail on a broken one, and every recipe is detected, applies, builds, passes
the checks and is then detected as already present.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jobs.contract.config import load_config
from jobs.contract.metrics import missing_metrics, parse_metrics
from jobs.research.recipes import detect, load_recipe_set, planned_edits

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "examples" / "tinyllm"
RECIPES = load_recipe_set("tinyllm")

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="needs make and a C compiler")


def copy_target(dest: Path) -> Path:
    shutil.copytree(TARGET, dest, ignore=shutil.ignore_patterns("tinyllm", "tinyllm_ref"))
    return dest


def sh(tree: Path, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=tree, capture_output=True, text=True, timeout=timeout)


def build(tree: Path) -> None:
    result = sh(tree, load_config(tree).build, timeout=120)
    assert result.returncode == 0, result.stderr


def apply(recipe, tree: Path) -> None:
    for rel, text in planned_edits(recipe, tree).items():
        (tree / rel).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    tree = copy_target(tmp_path_factory.mktemp("pristine") / "tinyllm")
    build(tree)
    return tree


def test_config_loads():
    cfg = load_config(TARGET)
    assert (cfg.build, cfg.benchmark, cfg.checks) == ("make -s", "./bench.sh", "./checks.sh")
    assert cfg.primary.name == "tg_tps"
    assert {m.name: m.direction for m in cfg.metrics} == {
        "tg_tps": "higher", "pp_tps": "higher", "tg_ms_per_tok": "lower"}
    assert cfg.editable == ["src/**"]
    assert cfg.research.recipes == ["tinyllm"]
    pair = cfg.sanity.inverse_pairs[0]
    assert (pair.a, pair.b, pair.product) == ("tg_tps", "tg_ms_per_tok", 1000)


def test_bench_prints_the_declared_metrics(pristine):
    cfg = load_config(pristine)
    result = sh(pristine, cfg.benchmark, timeout=cfg.timeouts.benchmark)
    assert result.returncode == 0, result.stderr
    parsed = parse_metrics(result.stdout)
    assert parsed.rejected == []
    assert missing_metrics(parsed, [m.name for m in cfg.metrics]) == []
    v = parsed.values
    assert all(v[name] > 0 for name in ("pp_tps", "tg_tps", "tg_ms_per_tok"))
    assert v["tg_tps"] * v["tg_ms_per_tok"] == pytest.approx(1000, rel=0.01)


def test_checks_pass_on_pristine(pristine):
    result = sh(pristine, load_config(pristine).checks)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all cases passed" in result.stdout


def test_checks_fail_on_broken_math(tmp_path):
    """A 0.1% error in the softmax scale is enough to fail the checks."""
    tree = copy_target(tmp_path / "tinyllm")
    ops = tree / "src" / "ops.c"
    text = ops.read_text()
    broken = text.replace("out[i] *= scale;", "out[i] *= scale * 1.001f;", 1)
    assert broken != text
    ops.write_text(broken)
    build(tree)
    result = sh(tree, "./checks.sh")
    assert result.returncode != 0
    assert "FAIL" in result.stdout


def test_checks_fail_when_a_pass_is_dropped(tmp_path):
    tree = copy_target(tmp_path / "tinyllm")
    ops = tree / "src" / "ops.c"
    text = ops.read_text()
    broken = text.replace("for (int i = 0; i < dim; i++) yr[i] *= w[i];", "", 1)
    assert broken != text
    ops.write_text(broken)
    build(tree)
    assert sh(tree, "./checks.sh").returncode != 0


def test_recipe_set_has_fusions_and_a_decoy():
    kinds = {r.id: r.kind for r in RECIPES}
    assert {"fuse-softmax", "fuse-rmsnorm"} <= set(kinds)
    assert kinds["fuse-softmax"] == kinds["fuse-rmsnorm"] == "fusion"
    assert "micro" in kinds.values()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.id)
def test_recipe_applies_builds_and_passes_checks(recipe, tmp_path):
    tree = copy_target(tmp_path / "tinyllm")
    found = detect(recipe, tree)
    assert found.status == "applicable", found.reason
    assert found.evidence and all(e.split(":")[0].startswith("src/") for e in found.evidence)
    apply(recipe, tree)
    again = detect(recipe, tree)
    assert again.status == "already_present", again.reason
    build(tree)
    result = sh(tree, "./checks.sh")
    assert result.returncode == 0, result.stdout + result.stderr


def test_all_recipes_stack_in_either_order(tmp_path):
    for order, name in ((RECIPES, "forward"), (RECIPES[::-1], "reverse")):
        tree = copy_target(tmp_path / name)
        for recipe in order:
            assert detect(recipe, tree).status == "applicable", recipe.id
            apply(recipe, tree)
        assert all(detect(r, tree).status == "already_present" for r in RECIPES)
    # The forward stack must also build and stay correct.
    tree = tmp_path / "forward"
    build(tree)
    result = sh(tree, "./checks.sh")
    assert result.returncode == 0, result.stdout + result.stderr


def git(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid",
                           "-c", "commit.gpgsign=false", *args],
                          cwd=tree, capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_recipe_commits_cherry_pick_onto_each_other(tmp_path):
    """The loop stacks winners by cherry-picking each experiment's commit (made from the
    pristine tree): no two recipes may touch neighbouring lines, or git reports a conflict."""
    tree = copy_target(tmp_path / "tinyllm")
    assert git(tree, "init", "-q", "-b", "main").returncode == 0
    git(tree, "add", "-A")
    assert git(tree, "commit", "-qm", "pristine").returncode == 0
    for recipe in RECIPES:
        git(tree, "checkout", "-q", "-b", recipe.id, "main")
        apply(recipe, tree)
        assert git(tree, "commit", "-qam", recipe.id).returncode == 0
        git(tree, "checkout", "-q", "main")
    for order, name in ((RECIPES, "stack-forward"), (RECIPES[::-1], "stack-reverse")):
        git(tree, "checkout", "-q", "-b", name, "main")
        for recipe in order:
            picked = git(tree, "cherry-pick", recipe.id)
            assert picked.returncode == 0, f"{name}: {recipe.id} conflicts: {picked.stdout}{picked.stderr}"
        assert all(detect(r, tree).status == "already_present" for r in RECIPES)
