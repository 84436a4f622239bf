"""The q4-0-gemv-row-once recipe (on q4-0-unsigned-nibble) against llama.cpp's LUT kernels, bit for bit, per x86 ISA.

q4-0-gemv-row-once makes q4-0-unsigned-nibble's Q4_0 GEMV write the activation row's shuffled
vectors, bias and scale to a buffer once per row and read them back for every 8 weight columns,
and claims the output is unchanged. Both recipes are applied to the llama.cpp tree vendored by the
llama-cpp-python sdist at test time, and tests/kernels/q4_0_unsigned_nibble_harness.cpp (see
test_q4_0_unsigned_nibble.py) compares the result with the tree's own LUT kernels and an exact
scalar reference over its shapes (1 to 128 blocks, 1 to 32 groups of 8 columns, 1-3 rows) on each
x86 ISA the CPU has. Reading every block's activations from the first block's buffer entry must
make it fail.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from jobs.recipes import detect, load_recipe
from recipe_sources import RECIPES, function, original_and_patched, tree
from test_q4_0_unsigned_nibble import GEMM, ISAS, X86_REPACK, _run

RECIPE = RECIPES / "q4-0-gemv-row-once.yml"
BLOCK_ENTRY = "(shuffled.data() + (size_t) 64 * b)"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[str, str]:
    """The tree's arch/x86/repack.cpp, and the same with q4-0-unsigned-nibble then this recipe applied."""
    work = tmp_path_factory.mktemp("row-once")
    original, patched = original_and_patched(X86_REPACK, "q4-0-unsigned-nibble", "q4-0-gemv-row-once", work=work)
    recipe = load_recipe(RECIPE)
    assert detect(recipe, tree()).status == "not_found"      # it stacks on q4-0-unsigned-nibble
    assert detect(recipe, work).status == "applicable"
    return original, patched


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_stacked_gemv_is_bit_identical_to_the_lut_kernel(tmp_path, sources, isa):
    run = _run(tmp_path, isa, *sources)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("paths gemm unsigned gemv unsigned"), run.stdout


def test_reading_the_first_blocks_entry_for_all_fails_the_harness(tmp_path, sources):
    orig, patched = sources
    assert patched.count(BLOCK_ENTRY) == 2           # written, then read
    reader = "const __m256i * ab = (const __m256i *)" + BLOCK_ENTRY
    assert patched.count(reader) == 1
    run = _run(tmp_path, "avx2-f16c", orig, patched.replace(reader, "const __m256i * ab = (const __m256i *)(shuffled.data())"))
    assert run.returncode == 1 and "MISMATCH gemv " in run.stdout, run.stdout[-3000:]


def test_the_gemm_is_left_as_q4_0_unsigned_nibble_made_it(sources):
    _, nibble = original_and_patched(X86_REPACK, "q4-0-unsigned-nibble")
    _, patched = sources
    assert function(nibble, GEMM) == function(patched, GEMM)
    assert "gemm_q4_0_8x8_q8_0_unsigned" in patched and "autoresearch q4-0-gemv-row-once" in patched
