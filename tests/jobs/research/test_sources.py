"""The research phase with every source wired in: a small ggml-style target, a fake GitHub and a
fake arXiv on loopback, through `Run(..., research_only=True)` (what `autoresearch research` runs)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from conftest import git, make_repo
from fake_github import FakeGitHub
from jobs.contract.model import Evidence, Hypothesis
from jobs.run.pipeline import Run, RunOptions
from jobs.research.offline import Research, merge_sources
from jobs.research.roofline import roofline
from jobs.research.sources import Sources, gather
from test_forks import ROUTES
from test_gapscan import CPU, CUDA, METAL
from test_papers import Arxiv

CONFIG = """\
name: tiny-ggml
build: "true"
benchmark: ./bench.sh
checks: "true"
metrics: [{name: tg, primary: true}]
editable: ["ggml/src/ggml-cpu/**"]
research:
  forks: [ikawrakow/ik_llama.cpp]
  papers: ["operator fusion llm inference cpu"]
  max_hypotheses: 4
"""


def ggml_target(path):
    return make_repo(path, {
        ".github/autoresearch.yml": CONFIG, "bench.sh": "echo METRIC tg=1\n",
        "ggml/src/ggml-cuda/ggml-cuda.cu": CUDA, "ggml/src/ggml-metal/ggml-metal-fusion.cpp": METAL,
        "ggml/src/ggml-cpu/ggml-cpu.c": CPU})


def test_research_phase_writes_all_sources(tmp_path, monkeypatch):
    target = ggml_target(tmp_path / "t")
    git(target, "remote", "add", "origin", "https://github.com/ggml-org/llama.cpp.git")
    arxiv = Arxiv()
    monkeypatch.setenv("AUTORESEARCH_ARXIV_URL", arxiv.url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_sourcestoken99")
    try:
        with FakeGitHub(ROUTES) as gh:
            monkeypatch.setenv("GITHUB_API_URL", gh.base_url)
            out = tmp_path / "out"
            Run(RunOptions(target=target, out=out, run_id="r1", research_only=True)).execute()
    finally:
        arxiv.server.shutdown()
    md = (out / "research.md").read_text()
    for section in ("## Cross-backend fusion gaps", "## Forks and competing repositories", "## Papers (arXiv)"):
        assert section in md, section
    assert "RMS_NORM+MUL+ADD" in md and "**RMS_NORM+MUL**" not in md
    assert "fast/llama.cpp" in md and "Blockbuster" in md
    assert "ghs_sourcestoken99" not in md
    hyps = json.loads((out / "hypotheses.json").read_text())
    top = hyps[0]
    assert top["id"] == "gap-rmsnorm-mul-add" and top["kind"] == "fusion"
    assert top["ops"] == ["RMS_NORM", "MUL", "ADD"]
    assert {"where": "ggml/src/ggml-cuda/ggml-cuda.cu:6", "note": "cuda fuses RMS_NORM+MUL+ADD (call "
            "ggml_cuda_can_fuse)"} in top["evidence"]
    assert top["expected"].startswith("one pass instead of 3")
    assert len(hyps) <= 4
    assert all(h["evidence"] for h in hyps)
    auth = {h.get("authorization", "") for _, _, h in gh.requests}
    assert auth and all("ghs_sourcestoken99" in a for a in auth)


def test_merge_applies_the_roofline_and_folds_duplicate_gaps(tmp_path):
    tree = ggml_target(tmp_path / "t")
    config = SimpleNamespace(research=SimpleNamespace(backends=[], forks=[], papers=[], max_hypotheses=8),
                             editable=["ggml/src/ggml-cpu/**"])
    sources = gather(tree, config)
    assert sources.gaps is not None and not sources.leads and not sources.papers
    recipe = Hypothesis(id="fuse-rms-mul-add", title="recipe", kind="fusion", rationale="r", score=3.0,
                        ops=["RMS_NORM", "MUL", "ADD"], evidence=[Evidence("x.c:1", "recipe")], recipe="fuse-rms-mul-add")
    micro = Hypothesis(id="prefetch", title="prefetch", kind="micro", rationale="r", score=3.0)
    sources.roofline = roofline(606 * 2**20, 49, 35)           # memory-bound
    merged = merge_sources(Research([recipe, micro]), sources, config)
    ids = [h.id for h in merged.hypotheses]
    assert "gap-rmsnorm-mul-add" not in ids                    # folded into the recipe that does it
    assert any(e.where == "ggml/src/ggml-cuda/ggml-cuda.cu:6" for e in merged.hypotheses[0].evidence)
    assert merged.hypotheses[0].id == "fuse-rms-mul-add" and merged.hypotheses[0].score == 3.9
    assert ids[-1] == "prefetch" and merged.hypotheses[-1].score == 1.5
    assert "## Roofline" in sources.markdown() and "memory-bound" in sources.digests()["roofline"]
    assert Sources().markdown() == ""


def test_leads_never_push_out_implementable_recipes(tmp_path):
    tree = ggml_target(tmp_path / "t")
    config = SimpleNamespace(research=SimpleNamespace(backends=[], forks=[], papers=[], max_hypotheses=2),
                             editable=["ggml/src/ggml-cpu/**"])
    low = Hypothesis(id="fuse-softmax", title="recipe", kind="fusion", rationale="r", score=0.5, recipe="fuse-softmax")
    merged = merge_sources(Research([low]), gather(tree, config), config)
    assert [h.id for h in merged.hypotheses] == ["gap-rmsnorm-mul-add", "fuse-softmax"]
