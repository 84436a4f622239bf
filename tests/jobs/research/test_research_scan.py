from pathlib import Path

from jobs.contract.config import parse_config
from jobs.research.recipes import detect, load_recipe_set
from jobs.research.offline import research
from jobs.research.passes import scan_source
from conftest import ROOT, make_repo

SOFTMAX = """\
void softmax(float *x, const float *s, const float *mask, int n, float scale) {
    memcpy(x, s, n * sizeof(float));
    for (int i = 0; i < n; i++) x[i] *= scale;
    for (int i = 0; i < n; i++) {
        x[i] += mask[i];
    }
    float max = -INFINITY;
    for (int i = 0; i < n; i++) if (x[i] > max) max = x[i];
    float sum = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - max); sum += x[i]; }
}

void independent(float *a, float *b, int n) {
    for (int i = 0; i < n; i++) a[i] = 1;
    for (int i = 0; i < n; i++) b[i] = 2;
}
"""


def test_scan_finds_consecutive_passes_over_one_buffer():
    findings = scan_source("ops.c", SOFTMAX)
    assert len(findings) == 1
    f = findings[0]
    assert (f.function, f.buffer, f.start) == ("softmax", "x", 2)
    assert [p.line for p in f.passes] == [2, 3, 4, 8, 10]
    assert f.where == "ops.c:2" and "5 consecutive passes over `x`" in f.describe()


def test_scan_ignores_passes_over_unrelated_buffers():
    assert scan_source("x.c", SOFTMAX.split("void independent")[0].replace("x[i] +=", "y[i] +=")[:0]) == []
    assert all(f.function != "independent" for f in scan_source("ops.c", SOFTMAX))


def test_research_on_demo_target_ranks_fusions_above_the_decoy():
    tree = ROOT / "examples" / "tinyllm"
    config = parse_config((tree / ".github" / "autoresearch.yml").read_text())
    found = research(tree, config)
    kinds = [h.kind for h in found.hypotheses]
    assert "micro" in kinds and kinds.index("micro") > kinds.index("fusion")
    softmax = next(h for h in found.hypotheses if h.id == "fuse-softmax")
    assert softmax.recipe == "fuse-softmax"
    assert all(":" in e.where and e.where.split(":")[1].isdigit() for e in softmax.evidence)
    assert any("consecutive passes" in e.note for e in softmax.evidence)   # the scan agrees


def test_recipe_reports_already_present_after_applying(tmp_path):
    import shutil
    from jobs.research.recipes import planned_edits
    tree = tmp_path / "t"
    shutil.copytree(ROOT / "examples" / "tinyllm", tree)
    recipe = next(r for r in load_recipe_set("tinyllm") if r.id == "fuse-softmax")
    assert detect(recipe, tree).status == "applicable"
    for rel, text in planned_edits(recipe, tree).items():
        (tree / rel).write_text(text)
    assert detect(recipe, tree).status == "already_present"


def test_research_on_a_tree_without_recipes_still_finds_scan_hypotheses(tmp_path):
    cfg = "build: 'true'\nbenchmark: 'true'\nchecks: 'true'\nmetrics: [{name: t, primary: true}]\neditable: ['**']\n"
    tree = make_repo(tmp_path / "t", {".github/autoresearch.yml": cfg, "ops.c": SOFTMAX})
    found = research(tree, parse_config(cfg))
    assert [h.recipe for h in found.hypotheses] == [None]
    assert found.hypotheses[0].evidence[0].where == "ops.c:2"


def test_run_arches_and_a_recipe_for_another_machine():
    """What a run's experiments build for, from its platforms, and the reason research gives for
    leaving out a recipe none of them compiles (no reason when one does, or when unknown)."""
    import pytest
    from jobs.research.recipes import Recipe
    from jobs.research.offline import other_arch, run_arches
    base = "build: 'true'\nbenchmark: 'true'\nchecks: 'true'\nmetrics: [{name: t, primary: true}]\neditable: ['**']\n"
    def arches(platforms, local):
        return run_arches(parse_config(base + f"platforms: {platforms}\n").platforms, local)
    assert arches("[local]", "x86_64") == {"x86_64"}
    assert arches("[local]", "aarch64") == {"aarch64"}
    assert arches("[x86, arm]", "riscv64") == {"x86_64", "aarch64"}
    assert arches("[x86, {name: big-box, instance_type: m7g.large}]", "x86_64") is None
    # a platform's arch is its instance type's in the shipped catalog, whatever the platform is called
    assert arches("[{name: big-box, instance_type: c7g.2xlarge}]", "x86_64") == {"aarch64"}
    assert arches("[{name: x86, instance_type: c7g.2xlarge}]", "x86_64") == {"aarch64"}
    recipe = Recipe(id="neon", title="n", kind="micro", why="w", detect={"unfused": [{"file": "x", "pattern": "x"}]},
                    edits=[{"file": "x", "find": "x", "replace": "y"}], commit="c", arches=["aarch64"])
    assert other_arch(recipe, {"x86_64"}) == ("its code compiles only for aarch64 builds, and this run's "
                                              "experiments build for x86_64")
    assert other_arch(recipe, {"x86_64", "aarch64"}) == "" and other_arch(recipe, None) == ""
    assert other_arch(recipe.model_copy(update={"arches": []}), {"x86_64"}) == ""
    with pytest.raises(ValueError, match="arches"):
        Recipe(**{**recipe.model_dump(), "arches": ["arm64"]})
