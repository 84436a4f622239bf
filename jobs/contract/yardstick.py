"""The yardstick: the files that measure and check a candidate, which no candidate may change. Pure.

A benchmark compiled by the target's own build (a compression library's `bench/bench.c`, built by
its Makefile and printing MB/s) is as much the yardstick as the script that runs it: a patch that
multiplies the printed number by 1.5 was kept at +50% when only the files named literally in the
commands were protected (issue 21). So the yardstick is, by default:

* the autoresearch config itself;
* every file the build, benchmark and checks commands name;
* for the benchmark and checks commands, the *folder* of every path they name (below the
  repository root): `./bench/bench` or `bash bench/run.sh` makes `bench/**` the yardstick, since
  what lives beside a benchmark is what it is built from. A command at the root protects only its
  own file (the root holds the code too);
* the config's `yardstick:` globs, for what the build compiles into the benchmark from elsewhere.

`editable` and the yardstick must not overlap (`overlaps`, refused before anything is measured), and
every edit is checked against it (`jobs.agent.guard.check_edit`).
"""
from __future__ import annotations

import fnmatch
import posixpath
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jobs.contract.config import CONFIG_PATH, TargetConfig

Exists = Callable[[str], bool]


@dataclass(frozen=True)
class Part:
    glob: str            # fnmatch glob from the repository root
    why: str             # where it comes from, for messages


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _relative(word: str) -> str:
    """The repository-relative path a command word names, or '' when it cannot name one."""
    if "$" in word or "=" in word or word.startswith("-") or posixpath.isabs(word):
        return ""
    rel = posixpath.normpath(word.removeprefix("./"))
    return "" if rel in (".", "") or rel == ".." or rel.startswith("../") else rel


def parts(config: TargetConfig, is_file: Exists, is_dir: Exists) -> list[Part]:
    """The yardstick of `config` in a tree where `is_file`/`is_dir` say what exists (a checkout of
    the base commit, or the agent's worktree)."""
    out = [Part(CONFIG_PATH, "the autoresearch config")]
    for step, command in (("build", config.build), ("benchmark", config.benchmark), ("checks", config.checks)):
        for word in _words(command):
            rel = _relative(word)
            if not rel:
                continue
            if is_file(rel):
                out.append(Part(rel, f"a file the {step} command names"))
            folder = posixpath.dirname(rel)
            if step != "build" and folder and is_dir(folder):
                out.append(Part(f"{folder}/**", f"the folder of {rel}, which the {step} command names"))
    out += [Part(g, "`yardstick:` in the config") for g in config.yardstick]
    unique: dict[str, Part] = {}
    for p in out:
        unique.setdefault(p.glob, p)
    return list(unique.values())


def covering(rel: str, yardstick: Iterable[Part]) -> Part | None:
    """The part of the yardstick that holds `rel`, or None."""
    return next((p for p in yardstick if fnmatch.fnmatchcase(rel, p.glob) or rel == p.glob), None)


def overlaps(config: TargetConfig, files: Iterable[str]) -> list[str]:
    """Problems (`what: why; fix: how`) for every editable glob that reaches into the yardstick,
    judged on the base commit's `files`."""
    files = list(files)
    present = set(files)
    folders = {posixpath.dirname(f) for f in files}
    folders |= {"/".join(d.split("/")[:i]) for d in list(folders) for i in range(1, d.count("/") + 1)}
    ys = parts(config, present.__contains__, folders.__contains__)
    problems = []
    for glob in config.editable:
        hits = [(f, covering(f, ys)) for f in files if fnmatch.fnmatchcase(f, glob)]
        hits = [(f, p) for f, p in hits if p is not None and f != CONFIG_PATH]   # the config: never editable
        if not hits:
            continue
        f, p = hits[0]
        more = f" and {len(hits) - 1} more" if len(hits) > 1 else ""
        problems.append(
            f"{CONFIG_PATH}: editable: {glob!r} includes {f}{more}, which is part of the yardstick "
            f"({p.glob}: {p.why}); a candidate could change what measures it; fix: narrow editable to the "
            f"library's own sources (e.g. 'src/**' or 'lib/**' instead of {glob!r}), or move the benchmark's "
            "files out of the editable paths")
    return problems
