"""Builds and runs a flash-attention recipe's C++ harness on one ISA path (tests/kernels/fa_*_harness.cpp).

A recipe's helper text ends with the anchor line it is inserted before; the harness includes the
text without it. x86 paths the CPU lacks are skipped (such a binary would die with SIGILL); the
NEON path runs under qemu-aarch64-static."""
from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "kernels/recipes/llama.cpp"
ANCHOR = "static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(\n"
X86_ISAS = ["x86-64-scalar", "avx2-f16c", "avx512", "native"]
_FLAGS = {"x86-64-scalar": ["-march=x86-64"], "avx2-f16c": ["-mavx2", "-mfma", "-mf16c"],
          "avx512": ["-mavx512f", "-mavx2", "-mfma", "-mf16c"], "native": ["-march=native"]}
_NEEDS = {"avx2-f16c": {"avx2", "f16c"}, "avx512": {"avx512f", "f16c"}}


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def build_and_run(tmp_path: Path, harness: Path, helpers: dict[str, Path], compiler: str, flags: list[str],
                  prefix: list[str]) -> str:
    """Compile `harness` with each helper text (minus its anchor) as the include named by its key,
    run it (under `prefix`), and return its output, which starts with "OK: <cases>"."""
    for name, path in helpers.items():
        text = path.read_text()
        assert text.endswith(ANCHOR), f"{path.name} must end with the recipe's anchor line"
        (tmp_path / name).write_text(text[: -len(ANCHOR)])
    exe = tmp_path / "harness"
    build = subprocess.run([compiler, "-std=gnu++17", "-O2", "-Wall", "-Wextra", *flags, f"-I{tmp_path}",
                            str(harness), "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning:" not in build.stderr, build.stderr[-3000:]
    run = subprocess.run([*prefix, str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.startswith("OK:"), run.stdout[-3000:] + run.stderr[-2000:]
    return run.stdout


def require_x86(isa: str, need: set[str]) -> None:
    """Skip unless this is an x86-64 machine with g++ whose CPU has the `need` flags of path `isa`
    (a binary built for it would die with SIGILL)."""
    if platform.machine() not in ("x86_64", "AMD64") or shutil.which("g++") is None:
        pytest.skip(f"needs an x86-64 g++ (this is {platform.machine()})")
    if not need <= cpu_flags():
        pytest.skip(f"this CPU lacks {sorted(need - cpu_flags())} (the {isa} binary would die with SIGILL)")


def run_x86(tmp_path: Path, isa: str, harness: Path, helpers: dict[str, Path]) -> int:
    """The number of cases the harness checked on x86 path `isa` (one of X86_ISAS)."""
    require_x86(isa, _NEEDS.get(isa, set()))
    return int(build_and_run(tmp_path, harness, helpers, "g++", _FLAGS[isa], []).split()[1])


def run_neon(tmp_path: Path, harness: Path, helpers: dict[str, Path]) -> int:
    """The number of cases the harness checked on the NEON path, under qemu-aarch64-static."""
    missing = [t for t in ("aarch64-linux-gnu-g++", "qemu-aarch64-static") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: g++-aarch64-linux-gnu qemu-user-static)")
    return int(build_and_run(tmp_path, harness, helpers, "aarch64-linux-gnu-g++",
                             ["-static", "-march=armv8.2-a+fp16"], [shutil.which("qemu-aarch64-static")]).split()[1])
