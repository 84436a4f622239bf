"""The real llama.cpp source, from the `llama-cpp-python` sdist on PyPI (it vendors llama.cpp).

Cached under ~/.cache/autoresearch/ ($AUTORESEARCH_CACHE_ROOT overrides), shared with the kernels
tests: `sdist/` holds the tarball and `llama.cpp-from-llama-cpp-python-<version>/` the extracted
`vendor/llama.cpp`. Downloaded with pip only when missing; a failed download skips the calling
test with the reason.
"""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT


def cache() -> Path:
    """The cache root, named as kernels/llama/llama_tree.py names it (the kernels tests share it)."""
    spec = importlib.util.spec_from_file_location("llama_tree", ROOT / "kernels" / "llama" / "llama_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cache_dir()


def _usable(tree: Path) -> bool:
    return (tree / "ggml" / "src" / "ggml-cpu" / "ggml-cpu.c").is_file()


def llama_cpp_tree() -> Path:
    """Path of a vendored llama.cpp tree (downloading and extracting the sdist if needed)."""
    root = cache()
    candidates = sorted(root.glob("llama.cpp-from-llama-cpp-python-*"), reverse=True)
    candidates += [p / "vendor" / "llama.cpp" for p in sorted(root.glob("src/llama_cpp_python-*"), reverse=True)]
    for tree in candidates:
        if _usable(tree):
            return tree
    sdists = sorted((root / "sdist").glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        (root / "sdist").mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "-d", str(root / "sdist"), "llama-cpp-python"],
                              capture_output=True, text=True, timeout=900)
        sdists = sorted((root / "sdist").glob("llama_cpp_python-*.tar.gz"))
        if not sdists:
            pytest.skip(f"could not download the llama-cpp-python sdist (exit {proc.returncode}): "
                        f"{(proc.stdout + proc.stderr).strip()[-300:]}")
    sdist = sdists[-1]
    version = sdist.name.removeprefix("llama_cpp_python-").removesuffix(".tar.gz")
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".extract-research-"))
    try:
        with tarfile.open(sdist) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
            tf.extractall(tmp, members=members, filter="data")
        dest = root / f"llama.cpp-from-llama-cpp-python-{version}"
        if not _usable(dest):
            shutil.rmtree(dest, ignore_errors=True)
            (tmp / prefix).rename(dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
