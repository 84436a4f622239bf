"""The q4-0-4x4-gemv-four-groups recipe's Q4_0 4x4 GEMV against llama.cpp's, bit for bit, on NEON under qemu.

The recipe (kernels/recipes/llama.cpp/q4-0-4x4-gemv-four-groups.yml) makes the AArch64 dot-product
GEMV of arch/arm/repack.cpp take 16 weight columns per pass over the activation row instead of 4,
and claims the output is bit-identical. The original kernel is cut out of the llama.cpp tree vendored
by the llama-cpp-python sdist at test time, and again from the same file with the recipe applied,
so no llama.cpp code lives here. tests/kernels/q4_0_4x4_gemv_harness.cpp compares both, and an
exact scalar reference, over 1 to 97 blocks and 4 to 256 columns (every remainder of 16), with
random and extreme nibbles and activations, the whole int8 range, and zero, subnormal, negative
and overflowing scales. Reading every group's weights from the first group's blocks must make the
harness fail (the mutation test).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jobs.recipes import load_recipe, planned_edits
from recipe_sources import RECIPES, function, original_and_patched, tree

RECIPE = RECIPES / "q4-0-4x4-gemv-four-groups.yml"
HARNESS = Path(__file__).with_name("q4_0_4x4_gemv_harness.cpp")
ARM_REPACK = "ggml/src/ggml-cpu/arch/arm/repack.cpp"
MARKER = "// autoresearch q4-0-4x4-gemv-four-groups"
GEMV = "void ggml_gemv_q4_0_4x4_q8_0("
GROUP_OFFSET = "b_ptr + (size_t) g*nb + b"


def kernel_source(text: str) -> str:
    """The 4x4 GEMV, preceded by the recipe's helper when applied (inserted just before it)."""
    helper = text[text.index(MARKER):text.index(GEMV)] if MARKER in text[:text.index(GEMV)] else ""
    return helper + function(text, GEMV)


@pytest.fixture(scope="module")
def sources() -> tuple[str, str]:
    return original_and_patched(ARM_REPACK, "q4-0-4x4-gemv-four-groups")


def _run(tmp_path: Path, orig: str, patched: str) -> subprocess.CompletedProcess:
    missing = [t for t in ("aarch64-linux-gnu-g++", "qemu-aarch64-static") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: g++-aarch64-linux-gnu qemu-user-static)")
    (tmp_path / "orig_kernel.inc").write_text(kernel_source(orig))
    (tmp_path / "patched_kernel.inc").write_text(kernel_source(patched))
    exe = tmp_path / "harness"
    # -O3 as ggml builds; the dot product as the GEMV's own #if requires
    build = subprocess.run(["aarch64-linux-gnu-g++", "-std=gnu++17", "-O3", "-Wall", "-Wextra", "-static",
                            "-march=armv8.2-a+dotprod", f"-I{tmp_path}", str(HARNESS), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning:" not in build.stderr, build.stderr[-3000:]
    return subprocess.run([shutil.which("qemu-aarch64-static"), str(exe)], capture_output=True, text=True,
                          timeout=600)


def test_recipe_gemv_is_bit_identical_to_llama_cpps(tmp_path, sources):
    run = _run(tmp_path, *sources)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    cases, columns = int(run.stdout.split()[1]), int(run.stdout.split()[3])
    assert cases == 4 * 7 * 13 and columns > 10000, run.stdout


def test_reading_one_group_for_all_fails_the_harness(tmp_path, sources):
    """The mutation check: if every group read the first group's weights, columns 4..15 of each
    16 would repeat columns 0..3, and the harness must report the patched kernel."""
    orig, patched = sources
    assert patched.count(GROUP_OFFSET) == 1
    run = _run(tmp_path, orig, patched.replace(GROUP_OFFSET, "b_ptr + b"))
    assert run.returncode == 1 and "MISMATCH patched " in run.stdout, run.stdout[-3000:]


def test_only_the_arm_gemv_changes(sources):
    """The recipe edits the AArch64 4x4 GEMV and nothing else: the 4x4 GEMM (assembly), the 4x8 and
    8x8 kernels and the other types' 4x4 GEMVs stay as they were, and x86 code is not touched."""
    orig, patched = sources
    for head in ("void ggml_gemm_q4_0_4x4_q8_0(", "void ggml_gemv_q4_0_4x8_q8_0(", "void ggml_gemv_q4_0_8x8_q8_0(",
                 "void ggml_gemv_iq4_nl_4x4_q8_0(", "void ggml_gemv_q8_0_4x4_q8_0("):
        assert function(orig, head) == function(patched, head), head
    assert function(orig, GEMV) != function(patched, GEMV)
    assert set(planned_edits(load_recipe(RECIPE), tree())) == {ARM_REPACK}
