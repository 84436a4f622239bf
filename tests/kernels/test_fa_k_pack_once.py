"""The fa-k-pack-once recipe's helper against the element loop it stands in for, on every ISA path.

The recipe (kernels/recipes/llama.cpp/fa-k-pack-once.yml) keeps each thread's packed K tiles of
one KV head and hands the tiled flash-attention path's GEMM a tile from there (packing it on
first use) instead of packing every (Q tile, KV tile) pair. It claims the GEMM sees the same
values. tests/kernels/fa_k_pack_once_harness.cpp replays the path's walk (GQA heads, Q tiles,
skipped KV tiles, tiles past the buffer) and checks every tile bit for bit against the original
element loop, the zero padding of a cached last tile and the number of packs. The helper text
is taken from the recipes themselves (it stacks on fa-tile-pack, whose vector pack it calls), so
the AVX2+F16C / AVX-512 / NEON (under qemu-aarch64-static) / scalar packs all run under it.
test-backend-ops' FLASH_ATTN_EXT cases cover the whole op in the slow script.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from fa_harness import RECIPES, X86_ISAS, run_neon, run_x86

HELPERS = {"fa_tile_pack_helper.inc": RECIPES / "fa-tile-pack.helper.cpp.txt",
           "fa_k_pack_once_helper.inc": RECIPES / "fa-k-pack-once.helper.cpp.txt"}
HARNESS = Path(__file__).with_name("fa_k_pack_once_harness.cpp")


@pytest.mark.parametrize("isa", X86_ISAS)
def test_x86_paths_hand_the_gemm_the_original_tiles(tmp_path, isa):
    assert run_x86(tmp_path, isa, HARNESS, HELPERS) > 10000


def test_neon_path_hands_the_gemm_the_original_tiles_under_qemu(tmp_path):
    assert run_neon(tmp_path, HARNESS, HELPERS) > 10000
