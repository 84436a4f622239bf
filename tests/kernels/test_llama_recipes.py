"""The llama.cpp recipes against the real llama.cpp tree vendored by the llama-cpp-python sdist.

Detection must find the facts in the tree (not assume them): in llama-cpp-python 0.3.36
(llama.cpp 0c1e57098) softmax, rms_norm, the tiled flash-attention KQ tile and the repacked
from_float split are still unfused, while RMS_NORM+MUL is already fused on the CPU. Each
applicable recipe must apply through jobs.recipes (detect / planned_edits), then detect as
already present, keep the old path reachable under the reference flag, and compile: every
recipe alone is syntax-checked (native ISA), and all recipes stacked are compiled to objects
natively plus syntax-checked for AVX2, baseline x86-64 and (when aarch64-linux-gnu-g++ is
installed) AArch64/NEON. The full CMake build, test-backend-ops and llama-bench live in the
slow script tests/kernels/llama_ab.py (see kernels/README.md); `-m slow` runs its build + op checks.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobs.recipes import detect, load_recipe_set, planned_edits, touched_files
from loaders import load_ab, load_llama

llama_tree = load_llama("llama_tree")


EXPECTED = {
    "fuse-softmax": "applicable",
    "fuse-rmsnorm": "applicable",
    "fuse-rmsnorm-mul": "already_present",
    "fuse-fa-kq-tile": "applicable",
    "adaptive-from-float": "applicable",
}
CPU_DIR = "ggml/src/ggml-cpu"
CXX = shutil.which("g++") or shutil.which("c++")


@pytest.fixture(scope="session")
def tree() -> Path:
    try:
        return llama_tree.ensure_llama_tree()
    except (llama_tree.TreeUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"llama.cpp source unavailable (llama-cpp-python sdist download failed): {exc}")


@pytest.fixture(scope="session")
def recipes():
    return {r.id: r for r in load_recipe_set("llama.cpp")}


def _copy_ggml(tree: Path, dest: Path) -> Path:
    shutil.copytree(tree / "ggml", dest / "ggml", ignore=shutil.ignore_patterns(
        "ggml-cuda", "ggml-vulkan", "ggml-sycl", "ggml-metal", "ggml-opencl", "ggml-cann", "ggml-musa",
        "ggml-hip", "ggml-webgpu", "ggml-hexagon", "ggml-openvino", "ggml-zdnn", "ggml-zendnn",
        "ggml-virtgpu", "ggml-et", "ggml-rpc", "ggml-blas"))
    return dest


def _apply(recipe, tree: Path) -> list[str]:
    contents = planned_edits(recipe, tree)
    for rel, text in contents.items():
        (tree / rel).write_text(text, encoding="utf-8")
    return list(contents)


def _cxx(tree: Path, source: str, flags: list[str], out: Path | None, compiler: str | None = None) -> tuple[str, int, str]:
    cmd = [compiler or CXX, "-std=c++17", *flags, "-DGGML_USE_CPU_REPACK", f"-I{tree}/ggml/include",
           f"-I{tree}/ggml/src", f"-I{tree}/{CPU_DIR}", f"{tree}/{CPU_DIR}/{source}"]
    cmd += ["-c", "-o", str(out)] if out else ["-fsyntax-only"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return " ".join(cmd), proc.returncode, proc.stderr[-4000:]


def _native_flags() -> list[str]:
    return ["-march=native"] if platform.machine() in ("x86_64", "aarch64") else []


def test_detection_matches_the_tree(tree, recipes):
    assert set(recipes) == set(EXPECTED)
    for rid, recipe in recipes.items():
        found = detect(recipe, tree)
        assert found.status == EXPECTED[rid], (rid, found)
        assert found.evidence and all(":" in e for e in found.evidence), found
    # the fact behind already_present: the CPU graph executor fuses RMS_NORM+MUL itself
    assert "ggml_cpu_try_fuse_ops" in (tree / CPU_DIR / "ggml-cpu.c").read_text()


@pytest.mark.parametrize("rid", [r for r, s in EXPECTED.items() if s == "applicable"])
def test_recipe_applies_keeps_reference_path_and_compiles(tree, recipes, rid, tmp_path):
    if CXX is None:
        pytest.skip("no C++ compiler")
    work = _copy_ggml(tree, tmp_path)
    recipe = recipes[rid]
    assert detect(recipe, work).status == "applicable"
    changed = _apply(recipe, work)
    assert sorted(changed) == touched_files(recipe)
    assert detect(recipe, work).status == "already_present", "applied recipe must detect itself"
    text = "".join((work / f).read_text() for f in changed)
    if rid == "fuse-fa-kq-tile":
        # reference mode never takes the tiled path, so test-backend-ops compares against one_chunk
        assert "use_tiled = !use_ref" in (work / CPU_DIR / "ops.cpp").read_text()
    else:
        assert "params->use_ref" in text, "the old path must stay reachable under use_ref"
    for rel in changed:
        cmd, rc, err = _cxx(work, Path(rel).name, [*_native_flags(), "-Wall", "-Wextra"], None)
        assert rc == 0, f"{cmd}\n{err}"
        assert "warning:" not in err, f"the patched file compiles with warnings:\n{err}"


@pytest.fixture(scope="module")
def stacked(tree, recipes, tmp_path_factory) -> Path:
    work = _copy_ggml(tree, tmp_path_factory.mktemp("llama-stacked"))
    for rid, recipe in recipes.items():
        if detect(recipe, work).status == "applicable":
            _apply(recipe, work)
    return work


def test_stacked_recipes_compile_natively(stacked, tmp_path):
    if CXX is None:
        pytest.skip("no C++ compiler")
    jobs = [("ops.cpp", tmp_path / "ops.o"), ("repack.cpp", tmp_path / "repack.o")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda j: _cxx(stacked, j[0], [*_native_flags(), "-O2"], j[1]), jobs))
    for cmd, rc, err in results:
        assert rc == 0, f"{cmd}\n{err}"
    assert all(out.stat().st_size > 0 for _, out in jobs)


@pytest.mark.parametrize("isa", ["avx2", "x86-64-baseline", "aarch64-neon"])
def test_stacked_recipes_compile_for_other_isas(stacked, isa):
    if isa == "aarch64-neon":
        compiler = shutil.which("aarch64-linux-gnu-g++")
        if compiler is None:
            pytest.skip("aarch64-linux-gnu-g++ not installed (Debian package g++-aarch64-linux-gnu)")
        flags = ["-march=armv8.2-a+fp16+dotprod"]
    else:
        if platform.machine() != "x86_64" or CXX is None:
            pytest.skip(f"x86 syntax check needs an x86-64 g++ (this is {platform.machine()})")
        compiler = CXX
        flags = ["-mavx2", "-mfma", "-mf16c"] if isa == "avx2" else ["-march=x86-64"]
    for source in ("ops.cpp", "repack.cpp"):
        cmd, rc, err = _cxx(stacked, source, flags, None, compiler)
        assert rc == 0, f"{cmd}\n{err}"


@pytest.mark.slow
def test_full_build_and_backend_ops(tree, tmp_path):
    """Slow: CMake-build baseline and patched trees and run test-backend-ops -b CPU on the touched ops."""
    ab = load_ab()
    work = Path(os.environ.get("AB_WORKDIR", tmp_path))
    report = ab.check_ops(ab.prepare(tree, work))
    assert report["ok"], report
