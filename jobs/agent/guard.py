"""What an agent may edit. Enforced by the code that writes files, never by a prompt.

Allowed: paths matching the config's `editable` globs. Always refused, even inside them: the
autoresearch config itself and the files its build/benchmark/checks commands run, since a patch
that changes the yardstick makes the A/B comparison meaningless; the rest of the yardstick
(`jobs.contract.yardstick`: the benchmark's and checks' folders, the config's `yardstick:` globs); and any
path with a `.git` component (git's own files, in any letter case).

A patch (`check_patch`) is checked on every path it touches, both sides of a rename or copy (moving
`bench.sh` into `src/` deletes the yardstick). Symbolic links (git mode 120000): a patch may delete
one, and may not create one, retarget one, turn a file into one, or rename or copy one. Where a link
points depends on the other links of the tree and, after a rename, on its new folder; a performance
patch has no need of one, and refusing them all is the rule that cannot be got wrong. (The trusted
side never reads through a link anyway: jobs/guard/safefs.py.)
"""
from __future__ import annotations

import os
import posixpath
import re
import shlex
from pathlib import Path

from jobs.guard import gitops
from jobs.contract import yardstick
from jobs.contract.config import CONFIG_PATH, TargetConfig
from jobs.research.recipes import matches_any


class EditRefused(PermissionError):
    pass


def protected_files(tree: Path, config: TargetConfig) -> set[str]:
    protected = {CONFIG_PATH}
    simulate = [config.simulate.command] if getattr(config, "simulate", None) else []   # the yardstick too
    for command in (config.build, config.benchmark, config.checks, *simulate):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        for word in words:
            rel = posixpath.normpath(word.removeprefix("./"))
            if rel and not rel.startswith("..") and (Path(tree) / rel).is_file():
                protected.add(rel)
    return protected


def in_yardstick(rel: str, tree: Path, config: TargetConfig):
    """The part of the yardstick (`jobs.contract.yardstick`) that holds `rel` in `tree`, or None."""
    root = Path(tree)
    return yardstick.covering(rel, yardstick.parts(config, lambda p: (root / p).is_file(),
                                                   lambda p: (root / p).is_dir()))


def check_edit(rel_path: str, tree: Path, config: TargetConfig) -> str:
    """Normalised relative path if the edit is allowed; EditRefused with the reason otherwise."""
    rel = posixpath.normpath(rel_path.replace("\\", "/"))
    if rel.startswith("../") or rel == ".." or posixpath.isabs(rel) or ".git" in rel.lower().split("/"):
        raise EditRefused(f"{rel_path}: outside the target tree")
    if rel in protected_files(tree, config):
        raise EditRefused(f"{rel_path}: the benchmark/check/build scripts and the autoresearch config "
                          "are the yardstick and may not be edited")
    part = in_yardstick(rel, tree, config)
    if part is not None:
        raise EditRefused(f"{rel_path}: part of the yardstick ({part.glob}: {part.why}); what measures or checks "
                          "a candidate may not be edited")
    if not matches_any(rel, config.editable):
        raise EditRefused(f"{rel_path}: outside the editable paths {config.editable}")
    resolved = (Path(tree) / rel).resolve()
    if not resolved.is_relative_to(Path(tree).resolve()):
        raise EditRefused(f"{rel_path}: resolves outside the tree (symlink)")
    real = resolved.relative_to(Path(tree).resolve()).as_posix()
    if real != rel and (real in protected_files(tree, config) or not matches_any(real, config.editable)):
        raise EditRefused(f"{rel_path}: a symlink to {real}, which may not be edited")
    return rel


_LINK = re.compile(r"^(?:new file mode 120000|new mode 120000|index [0-9a-f]+\.\.[0-9a-f]+ 120000)$", re.M)


def patch_paths(patch_text: str, tree: Path) -> list[str]:
    """Every path the patch touches: git's own reading (`git apply --numstat -z`, which names only
    the new side of a rename) plus the old side of every rename, copy and change in its headers."""
    out = gitops.git(tree, "apply", "--numstat", "-z", "-", input=patch_text, check=False)
    fields, paths = out.split("\0"), []
    i = 0
    while i < len(fields):
        stat = fields[i].split("\t")
        if len(stat) == 3 and stat[2]:
            paths.append(stat[2])
        elif len(stat) == 3:                         # -z rename form: old and new path follow
            paths += [p for p in fields[i + 1:i + 3] if p]
            i += 2
        i += 1
    if paths:
        paths += re.findall(r"^(?:rename from |copy from |--- a/)(.+)$", patch_text, re.M)
    return list(dict.fromkeys(paths))


def link_changes(patch_text: str, tree: Path) -> list[str]:
    """The paths where the patch creates, retargets, renames or copies a symbolic link."""
    found = []
    for block in re.split(r"^(?=diff --git )", patch_text, flags=re.M):
        name = re.search(r"^(?:\+\+\+ b/|rename to |copy to |diff --git a/.* b/)(.+)$", block, re.M)
        where = name.group(1) if name else "?"
        sources = re.findall(r"^(?:rename|copy) from (.+)$", block, re.M)
        if _LINK.search(block) or any(os.path.islink(Path(tree) / src) for src in sources):
            found.append(where)
    return found


def check_patch(patch_text: str, tree: Path, config: TargetConfig) -> list[str]:
    """The paths a patch touches if it may be applied; EditRefused with the first reason otherwise."""
    paths = patch_paths(patch_text, tree)
    if not paths:
        raise EditRefused("not a patch git can read")
    for path in paths:
        check_edit(path, tree, config)
    links = link_changes(patch_text, tree)
    if links:
        raise EditRefused(f"{links[0]}: the patch makes or changes a symbolic link (mode 120000), which patches "
                          "may not do; commit the file's content instead of a link")
    return paths
