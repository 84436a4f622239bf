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

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "kernels/recipes/llama.cpp"
HELPERS = {"fa_tile_pack_helper.inc": RECIPES / "fa-tile-pack.helper.cpp.txt",
           "fa_k_pack_once_helper.inc": RECIPES / "fa-k-pack-once.helper.cpp.txt"}
HARNESS = Path(__file__).with_name("fa_k_pack_once_harness.cpp")
ANCHOR = "static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(\n"
X86 = platform.machine() in ("x86_64", "AMD64")


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _build_and_run(tmp_path: Path, compiler: str, flags: list[str], prefix: list[str]) -> str:
    for name, path in HELPERS.items():
        text = path.read_text()
        assert text.endswith(ANCHOR), f"{path.name} must end with the recipe's anchor line"
        (tmp_path / name).write_text(text[: -len(ANCHOR)])
    exe = tmp_path / "harness"
    build = subprocess.run([compiler, "-std=gnu++17", "-O2", "-Wall", "-Wextra", *flags, f"-I{tmp_path}",
                            str(HARNESS), "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning:" not in build.stderr, build.stderr[-3000:]
    run = subprocess.run([*prefix, str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("isa", ["x86-64-scalar", "avx2-f16c", "avx512", "native"])
def test_x86_paths_hand_the_gemm_the_original_tiles(tmp_path, isa):
    if not X86 or shutil.which("g++") is None:
        pytest.skip(f"needs an x86-64 g++ (this is {platform.machine()})")
    flags = {"x86-64-scalar": ["-march=x86-64"], "avx2-f16c": ["-mavx2", "-mfma", "-mf16c"],
             "avx512": ["-mavx512f", "-mavx2", "-mfma", "-mf16c"], "native": ["-march=native"]}[isa]
    have = _cpu_flags()
    need = {"avx2-f16c": {"avx2", "f16c"}, "avx512": {"avx512f", "f16c"}}.get(isa, set())
    if not need <= have:
        pytest.skip(f"this CPU lacks {sorted(need - have)} (the {isa} binary would die with SIGILL)")
    out = _build_and_run(tmp_path, "g++", flags, [])
    assert int(out.split()[1]) > 10000


def test_neon_path_hands_the_gemm_the_original_tiles_under_qemu(tmp_path):
    missing = [t for t in ("aarch64-linux-gnu-g++", "qemu-aarch64-static") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: g++-aarch64-linux-gnu qemu-user-static)")
    out = _build_and_run(tmp_path, "aarch64-linux-gnu-g++", ["-static", "-march=armv8.2-a+fp16"],
                         [shutil.which("qemu-aarch64-static")])
    assert int(out.split()[1]) > 10000
