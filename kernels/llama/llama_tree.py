"""The real llama.cpp source tree, as vendored by the llama-cpp-python sdist on PyPI.

`ensure_llama_tree()` downloads the sdist once with pip (`pip download --no-deps --no-binary
:all:`), extracts only `vendor/llama.cpp/` and caches it under ~/.cache/autoresearch/
($AUTORESEARCH_CACHE_ROOT overrides, as for the sandbox). The llama.cpp source stays in the cache: it is never copied into
this repository. Standard library only.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

DEFAULT_VERSION = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")


def cache_dir() -> Path:
    """The operator's cache root, named as jobs/guard/sandbox.py names it ($AUTORESEARCH_CACHE_ROOT, else
    $XDG_CACHE_HOME/autoresearch); $AUTORESEARCH_CACHE is the older name and still honoured."""
    root = os.environ.get("AUTORESEARCH_CACHE_ROOT") or os.environ.get("AUTORESEARCH_CACHE")
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autoresearch"


class TreeUnavailable(RuntimeError):
    pass


def _download_sdist(version: str, dest: Path) -> Path:
    existing = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if existing:
        return existing[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"llama-cpp-python=={version}", "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if proc.returncode != 0 and not found:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-3:]
        why = " | ".join(e if len(e) < 200 else e[:200] + "..." for e in errors[-2:])
        raise TreeUnavailable(f"pip download llama-cpp-python=={version} failed: {why}")
    if not found:
        raise TreeUnavailable(f"pip download produced no llama_cpp_python-{version}.tar.gz in {dest}")
    return found[0]


def ensure_llama_tree(version: str = DEFAULT_VERSION) -> Path:
    """Path of the vendored llama.cpp tree of llama-cpp-python==version (downloads once)."""
    root = cache_dir()
    tree = root / f"llama.cpp-from-llama-cpp-python-{version}"
    if (tree / "ggml" / "src" / "ggml-cpu" / "ops.cpp").is_file():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".llama-tree.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one extractor at a time (tests, the A/B script)
        if (tree / "ggml" / "src" / "ggml-cpu" / "ops.cpp").is_file():
            return tree
        sdist = _download_sdist(version, root / "sdist")
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".extract-"))
        try:
            with tarfile.open(sdist) as tar:
                members = []
                for m in tar.getmembers():
                    if not m.name.startswith(prefix) or not (m.isfile() or m.isdir()):
                        continue
                    m.name = m.name[len(prefix):]
                    if m.name and not m.name.startswith("/") and ".." not in Path(m.name).parts:
                        members.append(m)
                if not members:
                    raise TreeUnavailable(f"{sdist.name} has no vendor/llama.cpp/")
                tar.extractall(tmp, members=members,
                               **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
            if tree.exists():
                shutil.rmtree(tree)
            tmp.rename(tree)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return tree


if __name__ == "__main__":
    print(ensure_llama_tree(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_VERSION))
