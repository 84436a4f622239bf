"""The real llama.cpp source, from the `llama-cpp-python` sdist on PyPI (it vendors llama.cpp).

Cached under ~/.cache/autoresearch/ (sdist/ holds the tarball, src/ the extracted tree), the same
cache the kernels tests use. Downloaded with pip only when missing; a failed download skips the
calling test with the reason.
"""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

CACHE = Path.home() / ".cache" / "autoresearch"


def _tarball() -> Path | None:
    found = sorted((CACHE / "sdist").glob("llama_cpp_python-*.tar.gz"))
    return found[-1] if found else None


def llama_cpp_tree() -> Path:
    """Path of vendor/llama.cpp inside the extracted sdist (downloading/extracting if needed)."""
    for src in sorted((CACHE / "src").glob("llama_cpp_python-*"), reverse=True):
        tree = src / "vendor" / "llama.cpp"
        if (tree / "ggml" / "src" / "ggml-cpu").is_dir():
            return tree
    tarball = _tarball()
    if tarball is None:
        (CACHE / "sdist").mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "-d", str(CACHE / "sdist"), "llama-cpp-python"],
                              capture_output=True, text=True, timeout=600)
        tarball = _tarball()
        if proc.returncode != 0 or tarball is None:
            pytest.skip(f"could not download the llama-cpp-python sdist: {proc.stderr.strip()[-300:]}")
    dest = CACHE / "src"
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers() if "/vendor/llama.cpp/ggml/" in m.name]
        tf.extractall(dest, members=members, filter="data")
    name = tarball.name.removesuffix(".tar.gz")
    return dest / name / "vendor" / "llama.cpp"
