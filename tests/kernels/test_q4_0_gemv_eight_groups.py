"""The q4-0-gemv-eight-groups recipe (on q4-0-unsigned-nibble) against llama.cpp's LUT kernels, bit for bit, per x86 ISA.

q4-0-gemv-eight-groups edits q4-0-unsigned-nibble's Q4_0 GEMV to take 8 groups of 8 weight columns
per pass over the activation row and claims the output is unchanged. Both recipes are applied to
the llama.cpp tree vendored by the llama-cpp-python sdist at test time, and
tests/kernels/q4_0_unsigned_nibble_harness.cpp (see test_q4_0_unsigned_nibble.py) compares the
result with the tree's own LUT kernels and an exact scalar reference over its shapes (1 to 32
groups of 8 columns: fewer than 8, 8 and a remainder, whole multiples) on each x86 ISA the CPU
has. Reading every group's weights from the first group's blocks must make it fail.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobs.recipes import detect, load_recipe, planned_edits
from loaders import load_llama
from test_q4_0_unsigned_nibble import ISAS, RECIPE as NIBBLE, X86_REPACK, _run

llama_tree = load_llama("llama_tree")

RECIPE = Path(__file__).resolve().parents[2] / "kernels/recipes/llama.cpp/q4-0-gemv-eight-groups.yml"
GROUP_OFFSET = "w + (size_t) g*nb + b"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[str, str]:
    """The tree's arch/x86/repack.cpp, and the same with q4-0-unsigned-nibble then this recipe applied."""
    try:
        tree = llama_tree.ensure_llama_tree()
    except (llama_tree.TreeUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"llama.cpp source unavailable (llama-cpp-python sdist download failed): {exc}")
    work = tmp_path_factory.mktemp("eight-groups")
    (work / X86_REPACK).parent.mkdir(parents=True)
    (work / X86_REPACK).write_text(planned_edits(load_recipe(NIBBLE), tree)[X86_REPACK])
    (work / "ggml/src/ggml-cpu/repack.cpp").write_text((tree / "ggml/src/ggml-cpu/repack.cpp").read_text())
    recipe = load_recipe(RECIPE)
    assert detect(recipe, tree).status == "not_found"        # it stacks on q4-0-unsigned-nibble
    assert detect(recipe, work).status == "applicable"
    return (tree / X86_REPACK).read_text(), planned_edits(recipe, work)[X86_REPACK]


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_stacked_gemv_is_bit_identical_to_the_lut_kernel(tmp_path, sources, isa):
    run = _run(tmp_path, isa, *sources)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("paths gemm unsigned gemv unsigned"), run.stdout


def test_reading_one_group_for_all_fails_the_harness(tmp_path, sources):
    orig, patched = sources
    assert patched.count(GROUP_OFFSET) == 1
    run = _run(tmp_path, "avx2-f16c", orig, patched.replace(GROUP_OFFSET, "w + b"))
    assert run.returncode == 1 and "MISMATCH gemv " in run.stdout, run.stdout[-3000:]


def test_the_gemm_is_left_as_q4_0_unsigned_nibble_made_it(sources):
    from test_q4_0_unsigned_nibble import GEMM, _function
    tree = llama_tree.ensure_llama_tree()
    nibble = planned_edits(load_recipe(NIBBLE), tree)[X86_REPACK]
    _, patched = sources
    assert _function(nibble, GEMM) == _function(patched, GEMM)
    assert "gemm_q4_0_8x8_q8_0_unsigned" in patched and "q4_0_u_gemv_cols<GGML_Q4_0_U_GEMV_GROUPS>" in patched
