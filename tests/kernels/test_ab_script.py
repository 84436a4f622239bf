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
