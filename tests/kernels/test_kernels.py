"""Fused kernels vs their unfused references, for every instruction set reachable here.

The C test binary (kernels/tests/test_kernels.c) does the numerics: odd lengths, unaligned
pointers, -inf masks, fully masked rows, tiny (subnormal) and huge values, NaN propagation, and
the from_float work split. Native x86 variants run directly (AVX-512 only where the CPU and OS
enable it); the NEON variant is cross-compiled with aarch64-linux-gnu-gcc and run under
qemu-aarch64-static (Debian packages gcc-aarch64-linux-gnu and qemu-user-static, installed by
tests/system-deps.sh).
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="make and a C compiler are required to build kernels/")


def _build(target: str, build_dir: Path, **make_vars: str) -> None:
    args = ["make", "-s", "-C", str(KERNELS), target, *(f"{k}={v}" for k, v in make_vars.items())]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _run(cmd: list[str], env_extra: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KF_ISA"}
    env.update(env_extra or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert proc.returncode == 0 and not fails, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-6000:]}"
    assert re.search(r"^OK: \d+ variants, 0 failures$", out, re.M), out[-3000:]
    return out


def _verdict(out: str, isa: str) -> None:
    skip = re.search(rf"^SKIP {isa}: (.*)$", out, re.M)
    if skip:
        pytest.skip(f"{isa} variant not run here: {skip.group(1)}")
    passed = re.findall(rf"^PASS {isa} (\S+) (\d+)$", out, re.M)
    kernels = {name for name, _ in passed}
    assert kernels == {"softmax_prep", "rms_scale+rms_scale_mul", "fa_kq_tile",
                       "quantize_q8_0+from_float_split"}, out
    assert all(int(n) > 0 for _, n in passed)


@pytest.fixture(scope="module")
def native_exe(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("kfuse-native")
    _build(f"{build}/test_kernels", build, BUILD=str(build))
    return build / "test_kernels"


@pytest.fixture(scope="module")
def native_output(native_exe) -> str:
    return _run([str(native_exe)])


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_native_variant_matches_reference(native_output, isa):
    if isa != "scalar" and platform.machine() not in ("x86_64", "AMD64", "i686"):
        pytest.skip(f"{isa} needs an x86 CPU; this is {platform.machine()}")
    _verdict(native_output, isa)


def test_dispatch_picks_best_and_honours_isa_cap(native_exe, native_output):
    best = re.search(r"^BEST (\S+)$", native_output, re.M).group(1)
    supported = [isa for isa in ("avx512", "avx2") if re.search(rf"^PASS {isa} ", native_output, re.M)]
    assert best == (supported[0] if supported else "scalar")
    capped = _run([str(native_exe)], {"KF_ISA": "scalar"})
    assert re.search(r"^BEST scalar$", capped, re.M)


def test_neon_variant_under_qemu(tmp_path_factory):
    missing = [tool for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64-static") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: gcc-aarch64-linux-gnu qemu-user-static; "
                    "tests/system-deps.sh installs them)")
    build = tmp_path_factory.mktemp("kfuse-aarch64")
    _build("aarch64", build, AARCH64_BUILD=str(build))
    out = _run(["qemu-aarch64-static", str(build / "test_kernels")])
    assert re.search(r"^BEST neon$", out, re.M), out
    _verdict(out, "scalar")
    _verdict(out, "neon")
