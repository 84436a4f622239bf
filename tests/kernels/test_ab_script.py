"""The pure parts of the slow A/B script (tests/kernels/llama_ab.py): the llama-bench JSON parser (the
original study lost hours to a parser that reported 14 tok/s instead of 52) and the synthetic
GGUF model writer, on a tiny shape."""
from __future__ import annotations

import json

import pytest

from loaders import load_ab

ab = load_ab()


def _row(n_prompt, n_gen, ts, fa=1):
    return {"model_type": "llama ?B Q4_0", "n_threads": 2, "flash_attn": fa, "n_prompt": n_prompt,
            "n_gen": n_gen, "n_depth": 0, "avg_ns": 1, "stddev_ns": 0, "avg_ts": ts, "stddev_ts": 0.0,
            "samples_ts": [ts]}


def test_parse_llama_bench_picks_pp_and_tg_by_shape_not_position():
    out = json.dumps([_row(0, 128, 52.5), _row(512, 0, 240.25)])
    assert ab.parse_llama_bench(out, fa=1) == {"pp512": 240.25, "tg128": 52.5}


@pytest.mark.parametrize("rows, why", [
    ([_row(512, 0, 240.0)], "missing tg"),
    ([_row(512, 0, 240.0), _row(0, 128, 0.0)], "zero throughput"),
    ([_row(512, 0, 240.0), _row(0, 64, 50.0)], "wrong test shape"),
])
def test_parse_llama_bench_rejects_odd_output(rows, why):
    with pytest.raises(ValueError):
        ab.parse_llama_bench(json.dumps(rows), fa=1)


def test_parse_llama_bench_rejects_wrong_flash_attn_setting():
    out = json.dumps([_row(512, 0, 240.0, fa=0), _row(0, 128, 50.0, fa=0)])
    with pytest.raises(ValueError, match="flash_attn"):
        ab.parse_llama_bench(out, fa=1)


def test_synthetic_model_has_llama_shapes_and_q4_0_weights(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = ab.make_model(tmp_path / "tiny.gguf", n_layer=2, n_vocab=300, n_embd=64, n_head=4,
                         n_head_kv=2, n_ff=96)
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 2 * 9 + 3
    q = tensors["blk.0.attn_q.weight"]
    assert q.tensor_type == gguf.GGMLQuantizationType.Q4_0
    assert list(q.shape) == [64, 64]
    assert list(tensors["blk.1.attn_k.weight"].shape) == [64, 32]          # n_head_kv * head_dim rows
    assert list(tensors["blk.0.ffn_down.weight"].shape) == [96, 64]
    assert tensors["output_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    fields = reader.fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "llama"
    assert int(fields["llama.block_count"].parts[-1][0]) == 2
    assert int(fields["llama.attention.head_count_kv"].parts[-1][0]) == 2
    assert len(fields["tokenizer.ggml.tokens"].data) == 300
    # block scales are the fixed fp16 0.02 (finite activations, values irrelevant for speed)
    raw = q.data.reshape(-1, 18)
    import numpy as np
    assert np.all(raw[:, :2].copy().view(np.float16) == np.float16(0.02))


def test_synthetic_qwen3_has_qk_norm_and_its_own_head_dim(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = ab.make_model(tmp_path / "q.gguf", arch="qwen3", n_layer=2, n_vocab=300, n_embd=64, n_head=4,
                         n_head_kv=2, head_dim=32, n_ff=96)
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 2 * 11 + 3
    assert list(tensors["blk.0.attn_q_norm.weight"].shape) == [32]
    assert list(tensors["blk.1.attn_k_norm.weight"].shape) == [32]
    assert list(tensors["blk.0.attn_q.weight"].shape) == [64, 128]        # n_head * head_dim rows
    assert list(tensors["blk.0.attn_output.weight"].shape) == [128, 64]
    fields = reader.fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "qwen3"
    assert int(fields["qwen3.attention.key_length"].parts[-1][0]) == 32


def test_synthetic_gemma3_has_post_norms_and_tied_embeddings(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = ab.make_model(tmp_path / "g.gguf", arch="gemma3", n_layer=1, n_vocab=300, n_embd=64, n_head=2,
                         n_head_kv=1, head_dim=64, n_ff=96)
    tensors = {t.name for t in gguf.GGUFReader(str(path)).tensors}
    assert {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight"} <= tensors
    assert "output.weight" not in tensors and "token_embd.weight" in tensors


def test_model_writer_rejects_unknown_arch_and_non_block_sizes(tmp_path):
    with pytest.raises(ValueError, match="unknown arch"):
        ab.make_model(tmp_path / "x.gguf", arch="mamba")
    with pytest.raises(ValueError, match="n_ff=100 must be a multiple of 32"):
        ab.make_model(tmp_path / "x.gguf", n_layer=1, n_vocab=300, n_embd=64, n_head=2, n_head_kv=1, n_ff=100)
    assert not (tmp_path / "x.gguf").exists()


def test_named_shapes_are_the_real_layer_shapes():
    assert ab.SHAPES["qwen3"]["head_dim"] * ab.SHAPES["qwen3"]["n_head"] == 2048     # Qwen3-0.6B q_proj
    assert ab.SHAPES["gemma3"]["n_head_kv"] == 1 and ab.SHAPES["gemma3"]["head_dim"] == 256
    assert ab.model_path("tinyllama", 22).name == "synthetic-tinyllama-22L-q4_0.gguf"
    with pytest.raises(ValueError, match="unknown model shape"):
        ab.make_shape("llama4")


def _dump(path, rows):
    import numpy as np
    rows = np.asarray(rows, dtype=np.float32)
    with open(path, "wb") as fh:
        np.array([rows.shape[1], rows.shape[0]], dtype=np.int32).tofile(fh)
        rows.tofile(fh)
    return path


def test_logits_comparison_counts_differences_and_argmax(tmp_path):
    base = ab.read_logits(_dump(tmp_path / "b.bin", [[1.0, 2.0, 3.0], [4.0, 0.0, 1.0]]))
    same = ab.read_logits(_dump(tmp_path / "s.bin", [[1.0, 2.0, 3.0], [4.0, 0.0, 1.0]]))
    off = ab.read_logits(_dump(tmp_path / "o.bin", [[1.0, 2.0, 3.0], [4.0, 4.5, 1.0]]))
    assert ab.compare_logits(same, base) == {"rows": 2, "max_abs": 0.0, "max_rel": 0.0, "identical_rows": 2,
                                             "argmax_agree": 1.0}
    r = ab.compare_logits(off, base)
    assert r["max_abs"] == pytest.approx(4.5) and r["identical_rows"] == 1 and r["argmax_agree"] == 0.5


def test_logits_reader_rejects_a_truncated_dump(tmp_path):
    path = _dump(tmp_path / "t.bin", [[1.0, 2.0], [3.0, 4.0]])
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ValueError, match="header says 2 x 2"):
        ab.read_logits(path)


def test_sim_arms_parse_recipe_stacks_and_reject_bad_specs():
    assert ab.parse_arms("base=; k-once = fa-tile-pack, fa-k-pack-once ;") == {
        "base": [], "k-once": ["fa-tile-pack", "fa-k-pack-once"]}
    for bad in ("", "base", "=fa-tile-pack", "a=;a=fa-tile-pack"):
        with pytest.raises(ValueError):
            ab.parse_arms(bad)


def test_mm_workloads_parse_prompt_and_generation_and_reject_bad_specs():
    assert ab.parse_workloads("pp512, pp64,tg16") == [(512, 0), (64, 0), (0, 16)]
    for bad in ("", "pp", "tg0", "pp-5", "gen16", "pp512,x"):
        with pytest.raises(ValueError):
            ab.parse_workloads(bad)
    with pytest.raises(SystemExit):          # the command line rejects it before any build (usage error)
        ab.main(["--only", "profile-mm", "--mm-workloads", "tg0", "--workdir", "/nonexistent"])


def test_debug_build_keeps_release_optimisation_and_adds_line_tables():
    flags = ab.debug_flags(True)
    assert all(f.endswith(" -g") or f.endswith("=-g") for f in flags) and len(flags) == 2
    assert not any("-O" in f for f in flags)              # Release's -O3 stays in force
    assert ab.debug_flags(False) == list(ab.NO_AMX)


def test_mm_macs_split_the_qwen3_matmuls_between_gemm_and_gemv():
    m = ab.mm_macs(ab.SHAPES["qwen3"], 2, 512, 0)
    attn = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024                       # q, k, v, o
    ffn = 3 * 1024 * 3072                                                    # gate, up, down
    assert m["per_token"] == attn + ffn
    # warm-up + timed run; the last layer's FFN and the output matrix see the last token only
    assert m["gemm_macs"] == 2 * 512 * (attn + ffn + attn)
    assert m["gemv_macs"] == 2 * (ffn + 32000 * 1024)
    g = ab.mm_macs(ab.SHAPES["qwen3"], 2, 0, 16)
    assert g["gemm_macs"] == 0 and g["gemv_macs"] == 17 * (2 * (attn + ffn) + 32000 * 1024)


CALLGRIND = """# callgrind format
version: 1
positions: instr line
events: Ir D1mr
summary: 120 7

ob=(1) /bin/x
fl=(1) a.c
fn=(1) outer
0x1000 10 5
+4 * 3 1
cfn=(2) inner
calls=2 0x2000 20
* * 100 6
+2 +1 2

fn=(2)
0x2000 20 60 4
fi=(2) h.h
+3 7 40 2
"""


def test_callgrind_reader_splits_self_and_call_costs_and_decompresses_positions():
    import callgrind_mm as cm
    p = cm.parse(CALLGRIND)
    assert p.events == ["Ir", "D1mr"] and p.positions == ["instr", "line"]
    assert p.self_fn == {"outer": [10, 1], "inner": [100, 6]}
    assert sum(v[0] for v in p.self_fn.values()) == 110            # the call line's 100 is not outer's own
    assert p.calls == {("outer", "inner"): [100, 6]}
    assert cm.inclusive(p, "outer") == [110, 7]
    assert p.self_instr[("outer", 0x1004)] == [3, 1] and p.self_instr[("outer", 0x1006)] == [2, 0]
    assert p.self_line[("outer", "a.c", 11)] == [2, 0]
    assert p.self_line[("inner", "h.h", 7)] == [40, 2] and p.self_instr[("inner", 0x2003)] == [40, 2]
    assert cm.reachable(p, ["outer"]) == {"outer", "inner"}
    assert cm.exclusive_to(p, ["outer"]) == {"outer", "inner"}      # inner has no other caller
    p.calls[("main", "inner")] = [1, 0]
    assert cm.exclusive_to(p, ["outer"]) == {"outer"}               # now shared: only the edge counts
    assert cm.find_functions(p, "^inn") == ["inner"]


def test_mnemonics_need_every_profiled_address_on_an_instruction_start():
    import callgrind_mm as cm
    dump = ("  2000:\tc5 fd 6f 04 24       \tvmovdqa (%rsp),%ymm0\n"
            "  2003:\tc4 e2 7d 04 c1       \tvpmaddubsw %ymm1,%ymm0,%ymm0\n")
    mn = cm.disassembly(dump)
    assert mn == {0x2000: "vmovdqa", 0x2003: "vpmaddubsw"}
    p = cm.parse(CALLGRIND)
    assert cm.by_mnemonic(p, "inner", mn) == {"vmovdqa": 60, "vpmaddubsw": 40}
    assert cm.load_offset([0x10A000], {0x2000: "x"}) == 0x108000
    with pytest.raises(ValueError, match="no instruction start"):
        cm.load_offset([0x2001], mn)
