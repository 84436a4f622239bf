"""Load a module of the kernels tests' own from its file: the llama.cpp helpers in kernels/llama/
(kernels/ is not a package: it imports no project Python, ARCHITECTURE.md) and the slow A/B script
tests/kernels/llama_ab.py, which pytest does not collect."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_module(name: str, path: Path):
    """The module `name` from `path`, registered in sys.modules (an already loaded one is reused)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_ab():
    """tests/kernels/llama_ab.py, the slow A/B script."""
    return load_module("llama_ab", Path(__file__).with_name("llama_ab.py"))


def load_llama(name: str):
    """kernels/llama/<name>.py."""
    return load_module(name, ROOT / "kernels" / "llama" / f"{name}.py")
