"""The fa-tile-pack recipe's helpers against the element loops they replace, on every ISA path.

The recipe (kernels/recipes/llama.cpp/fa-tile-pack.yml) claims bit-identity: the K tile packed
transposed by 8x8 (AVX2+F16C, also taken by AVX-512 builds) or 4x4 (NEON) register transposes,
and mask rows converted by ggml's row helper with a branch-free liveness count, must equal the
scalar loops of the tiled flash-attention path for every DK, row count (tails included), row
stride and f16 bit pattern. The helper text is taken from the recipe itself and compiled with
tests/kernels/fa_tile_pack_harness.cpp; the NEON build runs under qemu-aarch64-static.
test-backend-ops' FLASH_ATTN_EXT cases cover the whole op in the slow script.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from fa_harness import RECIPES, X86_ISAS, run_neon, run_x86

HELPERS = {"fa_tile_pack_helper.inc": RECIPES / "fa-tile-pack.helper.cpp.txt"}
HARNESS = Path(__file__).with_name("fa_tile_pack_harness.cpp")


@pytest.mark.parametrize("isa", X86_ISAS)
def test_x86_paths_are_bit_identical(tmp_path, isa):
    assert run_x86(tmp_path, isa, HARNESS, HELPERS) > 4000


def test_neon_path_is_bit_identical_under_qemu(tmp_path):
    assert run_neon(tmp_path, HARNESS, HELPERS) > 4000
