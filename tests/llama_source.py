"""The real llama.cpp source, from the `llama-cpp-python` sdist (it vendors llama.cpp).

One copy of the download and extraction: kernels/llama/llama_tree.py (the kernels tests and the
A/B script use it too, and `make test` fetches it beside the package installs). Cached under
~/.cache/autoresearch/ ($AUTORESEARCH_CACHE_ROOT overrides); a failed download skips the calling
test with the reason. Shared by the tests of every folder (the research gap scan, matrix.sh).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import ROOT


def _llama_tree_module():
    spec = importlib.util.spec_from_file_location("llama_tree", ROOT / "kernels" / "llama" / "llama_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def llama_cpp_tree() -> Path:
    """Path of the pinned vendored llama.cpp tree (downloading and extracting the sdist if needed)."""
    module = _llama_tree_module()
    try:
        return module.ensure_llama_tree()
    except module.TreeUnavailable as exc:
        pytest.skip(f"no llama.cpp source: {exc}")
