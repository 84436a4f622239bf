"""What an agent may edit. Enforced by the code that writes files, never by a prompt.

Allowed: paths matching the config's `editable` globs. Always refused, even inside them: the
autoresearch config itself and the files its build/benchmark/checks commands run, since a patch
that changes the yardstick makes the A/B comparison meaningless.
"""
from __future__ import annotations

import posixpath
import shlex
from pathlib import Path

from ..config import CONFIG_PATH, TargetConfig
from ..recipes import matches_any


class EditRefused(PermissionError):
    pass


def protected_files(tree: Path, config: TargetConfig) -> set[str]:
    protected = {CONFIG_PATH}
    for command in (config.build, config.benchmark, config.checks):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        for word in words:
            rel = posixpath.normpath(word.removeprefix("./"))
            if rel and not rel.startswith("..") and (Path(tree) / rel).is_file():
                protected.add(rel)
    return protected


def check_edit(rel_path: str, tree: Path, config: TargetConfig) -> str:
    """Normalised relative path if the edit is allowed; EditRefused with the reason otherwise."""
    rel = posixpath.normpath(rel_path.replace("\\", "/"))
    if rel.startswith("../") or rel == ".." or posixpath.isabs(rel) or rel.startswith(".git/"):
        raise EditRefused(f"{rel_path}: outside the target tree")
    if rel in protected_files(tree, config):
        raise EditRefused(f"{rel_path}: the benchmark/check/build scripts and the autoresearch config "
                          "are the yardstick and may not be edited")
    if not matches_any(rel, config.editable):
        raise EditRefused(f"{rel_path}: outside the editable paths {config.editable}")
    resolved = (Path(tree) / rel).resolve()
    if not resolved.is_relative_to(Path(tree).resolve()):
        raise EditRefused(f"{rel_path}: resolves outside the tree (symlink)")
    return rel
