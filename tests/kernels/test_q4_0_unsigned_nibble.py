"""The q4-0-unsigned-nibble recipe's Q4_0 GEMM and GEMV against llama.cpp's, bit for bit, per x86 ISA.

The recipe (kernels/recipes/llama.cpp/q4-0-unsigned-nibble.yml) replaces the repacked Q4_0 8x8
GEMM (AVX2 builds) and GEMV of arch/x86/repack.cpp by kernels that multiply the unsigned nibbles
and start each integer sum from -8 x the activation row's block sum, and claims the output is
bit-identical. The original kernels are cut out of the llama.cpp tree vendored by the
llama-cpp-python sdist (kernels/llama/llama_tree.py) at test time, and again from the same file
with the recipe applied, so no llama.cpp code lives in this repository.
tests/kernels/q4_0_unsigned_nibble_harness.cpp compares both (and an exact scalar reference) over
shapes from 1 to 128 blocks, 4 to 64 rows (16-row and 4-row tiles; 1-3 rows for the GEMV), 8 to
256 columns and strided output, with random and extreme values (nibbles 0 and 15, activations
+-127, the whole int8 range including -128, where the LUT GEMV itself is off and the recipe's is held to the exact result), on AVX2
(with and without AVX-VNNI) and AVX-512 (with and without AVX512-VNNI), where the GEMM takes 16
columns at a time with 512 bits and the rest 8 at a time. Dropping the -8 x sum correction of
either kernel must make the harness fail (the mutation test).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fa_harness import require_x86
from jobs.research.recipes import load_recipe, planned_edits
from loaders import load_llama

llama_tree = load_llama("llama_tree")

RECIPE = Path(__file__).resolve().parents[2] / "kernels/recipes/llama.cpp/q4-0-unsigned-nibble.yml"
HARNESS = Path(__file__).with_name("q4_0_unsigned_nibble_harness.cpp")
X86_REPACK = "ggml/src/ggml-cpu/arch/x86/repack.cpp"
MARKER = "// autoresearch q4-0-unsigned-nibble"
GEMM = "void ggml_gemm_q4_0_8x8_q8_0("
GEMV = "void ggml_gemv_q4_0_8x8_q8_0("
LUT_GEMM = "template<typename block_tx8>\nstatic void gemm_q4_b32_8x8_q8_0_lut_avx("
LUT_GEMV = "template<typename block_tx8>\nstatic void gemv_q4_b32_8x8_q8_0_lut_avx("
# the kernels' paths per ISA (the harness reports them): the recipe's on all of them, the GEMM's
# 512-bit form on AVX-512BW/DQ builds, its vpdpbusd form with AVX512-VNNI / AVX-VNNI
_AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma", "-mf16c"]
_AVX512_CPU = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "f16c", "fma"}
ISAS = {"avx2-f16c": (["-mavx2", "-mfma", "-mf16c"], {"avx2", "f16c", "fma"}),
        "avx2-vnni": (["-mavx2", "-mfma", "-mf16c", "-mavxvnni"], {"avx2", "f16c", "fma", "avx_vnni"}),
        "avx512": (_AVX512, _AVX512_CPU),
        "avx512-vnni": ([*_AVX512, "-mavx512vnni"], _AVX512_CPU | {"avx512_vnni"})}


def _function(text: str, head: str) -> str:
    """The definition starting at `head` through its closing brace."""
    start = text.index(head)
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1] + "\n"
        i += 1


def kernel_source(text: str) -> str:
    """The Q4_0 GEMM and GEMV and what they need from arch/x86/repack.cpp: the f16 load macros and
    int8 dot helpers (the file's head up to the activation quantiser), the LUT kernels, the
    recipe's kernels when applied (inserted before the GEMV), and the two entry points."""
    head = text[text.index("#if defined(__AVX__)\n"):text.index("void ggml_quantize_mat_q8_0_4x8(")]
    recipe = text[text.index(MARKER):text.index(GEMV)] if MARKER in text else ""
    return head + _function(text, LUT_GEMV) + _function(text, LUT_GEMM) + recipe + _function(text, GEMV) + _function(text, GEMM)


@pytest.fixture(scope="module")
def sources() -> tuple[str, str]:
    try:
        tree = llama_tree.ensure_llama_tree()
    except (llama_tree.TreeUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"llama.cpp source unavailable (llama-cpp-python sdist download failed): {exc}")
    return (tree / X86_REPACK).read_text(), planned_edits(load_recipe(RECIPE), tree)[X86_REPACK]


def _run(tmp_path: Path, isa: str, orig: str, patched: str) -> subprocess.CompletedProcess:
    flags, needs = ISAS[isa]
    require_x86(isa, needs)
    (tmp_path / "orig_kernel.inc").write_text(kernel_source(orig))
    (tmp_path / "patched_kernel.inc").write_text(kernel_source(patched))
    exe = tmp_path / "harness"
    build = subprocess.run(["g++", "-std=gnu++17", "-O2", "-ffp-contract=off", *flags, f"-I{tmp_path}", str(HARNESS),
                            "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_recipe_kernel_is_bit_identical_to_the_lut_kernel(tmp_path, sources, isa):
    run = _run(tmp_path, isa, *sources)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    assert int(run.stdout.split()[1]) > 100000
    assert run.stdout.strip().endswith("paths gemm unsigned gemv unsigned"), run.stdout


@pytest.mark.parametrize("kernel,bias", [("gemm", "static inline __m128i q4_0_u_row_bias("),
                                         ("gemv", "static inline int32_t q4_0_u_block_bias(")])
def test_dropping_the_correction_fails_the_harness(tmp_path, sources, kernel, bias):
    """The mutation check: without the -8 x sum(a) start the sums are sum q*a, and the harness
    must say so for the kernel that lost it."""
    orig, patched = sources
    body = _function(patched, bias)
    assert body.count("_mm256_set1_epi16(-8)") == 1
    mutant = patched.replace(body, body.replace("_mm256_set1_epi16(-8)", "_mm256_set1_epi16(0)"))
    run = _run(tmp_path, "avx2-f16c", orig, mutant)
    assert run.returncode == 1 and f"MISMATCH {kernel} " in run.stdout, run.stdout[-3000:]


def test_other_kernels_keep_their_code(sources):
    """IQ4_NL and MXFP4 share the LUT kernels and read the same layout: the recipe leaves them,
    the LUT kernels and the activation quantiser as they were."""
    orig, patched = sources
    for head in (LUT_GEMM, LUT_GEMV, "void ggml_gemm_iq4_nl_8x8_q8_0(", "void ggml_gemv_iq4_nl_8x8_q8_0(",
                 "void ggml_gemm_mxfp4_8x8_q8_0(", "void ggml_gemv_mxfp4_8x8_q8_0(", "void ggml_quantize_mat_q8_0_4x8("):
        assert _function(orig, head) == _function(patched, head), head
    assert _function(orig, GEMM) != _function(patched, GEMM) and _function(orig, GEMV) != _function(patched, GEMV)
