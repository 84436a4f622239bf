"""examples/llama.cpp/digest.cpp, the llama.cpp contract's own program (bench.sh's DIGEST and the
yardstick's workload), against the llama.cpp this project tests with: it must compile against that
llama.h, since a build that cannot link it makes every benchmark sample fail. The program's behaviour
on a real build (same seed, same digest; another seed or a GEMM one block short, another digest) is
measured by `SIM=1 matrix.sh run` (examples/llama.cpp/README.md, the `-sim-digest` cell)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loaders import load_llama

llama_tree = load_llama("llama_tree")
DIGEST = Path(__file__).resolve().parents[2] / "examples" / "llama.cpp" / "digest.cpp"


def test_digest_program_compiles_against_the_vendored_llama_h():
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    try:
        tree = llama_tree.ensure_llama_tree()
    except (llama_tree.TreeUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"llama.cpp source unavailable (llama-cpp-python sdist download failed): {exc}")
    done = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{tree / 'include'}",
                           f"-I{tree / 'ggml' / 'include'}", str(DIGEST)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
