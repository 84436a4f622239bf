"""Cross-backend fusion gap scan: small hand-written trees, then the real llama.cpp source."""
from __future__ import annotations

from pathlib import Path

from jobs.research.gapscan import compare, family, render, scan_file, scan_tree
from llama_source import llama_cpp_tree

CUDA = """\
static bool ggml_cuda_can_fuse(const struct ggml_cgraph * cgraph, int i, std::initializer_list<enum ggml_op> ops) {
    return true;
}
static void eval(ggml_cgraph * cgraph, int i) {
    // a comment mentioning { GGML_OP_SOFT_MAX, GGML_OP_MUL } must not count
    if (ggml_cuda_can_fuse(cgraph, i, { GGML_OP_RMS_NORM, GGML_OP_MUL, GGML_OP_ADD }, {})) {
        return;
    }
    if (ggml_cuda_can_fuse(cgraph, i, { GGML_OP_RMS_NORM,
                                        GGML_OP_MUL }, {})) {
        return;
    }
    for (ggml_op op : { GGML_OP_MUL_MAT, GGML_OP_MUL_MAT_ID }) {   // a loop, not a fusion
        if (ggml_cuda_can_fuse(cgraph, i, { op, GGML_OP_ADD }, {})) { return; }
    }
}
"""
METAL = """\
static const std::vector<ggml_op> ops_rms_norm_scale = { GGML_OP_RMS_NORM, GGML_OP_SCALE };
static const std::vector<ggml_op> ops_add_2 = { GGML_OP_ADD, GGML_OP_ADD };
static const std::vector<ggml_op> ops_add_3 = { GGML_OP_ADD, GGML_OP_ADD, GGML_OP_ADD };
"""
CPU = """\
static int ggml_cpu_try_fuse_ops(const struct ggml_cgraph * cgraph, const int node_n) {
    const enum ggml_op fuse_ops[] = { GGML_OP_RMS_NORM, GGML_OP_MUL };
    if (ggml_can_fuse(cgraph, node_n, fuse_ops, 2)) {
        return 1;
    }
    return 0;
}
static const enum ggml_op unary_like[] = { GGML_OP_ADD, GGML_OP_SUB, GGML_OP_MUL };  // a table, not a fusion
"""


def make_tree(root: Path) -> Path:
    files = {"ggml/src/ggml-cuda/ggml-cuda.cu": CUDA, "ggml/src/ggml-metal/ggml-metal-fusion.cpp": METAL,
             "ggml/src/ggml-cpu/ggml-cpu.c": CPU}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_scan_file_reads_calls_named_lists_and_ignores_comments_and_tables():
    seqs, skipped = scan_file("cuda", "x.cu", CUDA)
    assert [(s.ops, s.line) for s in seqs] == [(("RMS_NORM", "MUL", "ADD"), 6), (("RMS_NORM", "MUL"), 9)]
    assert skipped == 1
    cpu, _ = scan_file("cpu", "ggml-cpu.c", CPU)
    assert [(s.ops, s.how) for s in cpu] == [(("RMS_NORM", "MUL"), "list fuse_ops")]


def test_gaps_exclude_what_cpu_fuses_and_cite_file_line(tmp_path):
    scan = scan_tree(make_tree(tmp_path))
    assert scan.cpu_dir == "ggml/src/ggml-cpu"
    names = [g.name for g in scan.gaps]
    assert "RMS_NORM+MUL" not in names
    assert names[0] == "RMS_NORM+MUL+ADD"           # fused by CUDA, extends the CPU's fusion
    top = scan.gaps[0]
    assert top.extends is not None and top.extends.where == "ggml/src/ggml-cpu/ggml-cpu.c:2"
    assert ("ggml/src/ggml-cuda/ggml-cuda.cu:6", "cuda fuses RMS_NORM+MUL+ADD (call ggml_cuda_can_fuse)") \
        in top.evidence()
    add = next(g for g in scan.gaps if g.name == "ADD+ADD")
    assert add.variants == [("ADD", "ADD", "ADD")]   # one family, not two leads
    assert "RMS_NORM+SCALE" in names
    text = "\n".join(render(scan))
    assert "ggml/src/ggml-metal/ggml-metal-fusion.cpp:1" in text


def test_no_cpu_backend_means_no_gaps(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.c").write_text("int main(void) { return 0; }\n")
    scan = scan_tree(tmp_path)
    assert scan.gaps == [] and render(scan) == []
    assert family(("MUL", "VIEW", "VIEW", "ADD", "ADD")) == ("MUL", "VIEW", "ADD")
    assert compare({}) == []


def test_real_llama_cpp_cuda_metal_fusions_missing_on_cpu():
    tree = llama_cpp_tree()
    scan = scan_tree(tree)
    assert scan.cpu_dir == "ggml/src/ggml-cpu"
    cpu = scan.cpu_ops()
    assert ("RMS_NORM", "MUL") in cpu, "upstream CPU fuses RMS_NORM+MUL via ggml_can_fuse"
    names = {g.name for g in scan.gaps}
    assert "RMS_NORM+MUL" not in names
    by_name = {g.name: g for g in scan.gaps}
    # Fused by CUDA and Metal upstream, not by the CPU backend.
    for name in ("RMS_NORM+MUL+ADD", "RMS_NORM+SCALE"):
        assert {"cuda", "metal"} <= set(by_name[name].backends), name
    assert "cuda" in by_name["RMS_NORM+MUL+ROPE"].backends
    for gap in scan.gaps:
        assert gap.backends and all(b != "cpu" for b in gap.backends)
        for where, _ in gap.evidence():
            file, line = where.rsplit(":", 1)
            text = (tree / file).read_text(errors="replace").splitlines()
            assert "GGML_OP_" + gap.ops[0] in text[int(line) - 1] or "GGML_OP_" in text[int(line) - 1]
