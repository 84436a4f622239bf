"""Pure: build options as families (issue 44), and what the stack leaves off the branch.

Build-option patches (`-O3`, `-flto`, `-funroll-loops`, a maintainer's own flag) each edit the one
line of a build file that sets the flags, so their commits conflict: cherry-picked one after another,
only the first would stack. Patches whose whole change is that one line of one build file form a
*family* (by file and old line number). When two or more portable members were kept alone, the run
measures their *combination* (one patch editing that line with every member's edit applied) as one
more experiment (`jobs.run.pipeline.Run.experiments_phase`); the stack then takes the family's best
(the combination, or the best single member when the combination is not better) and leaves the
others off with "superseded by <member> (same line)" (`jobs.run.stacking`).

Nothing here runs git or reads files: patches come in as text, decisions go out as values.
"""
from __future__ import annotations

import difflib
import hashlib
import math
from dataclasses import dataclass

from jobs.contract import diffs, portability

BUILD_NAMES = ("Makefile", "makefile", "GNUmakefile", "CMakeLists.txt", "meson.build", "meson_options.txt",
               "configure.ac", "SConstruct", "BUILD", "BUILD.bazel")
BUILD_SUFFIXES = (".mk", ".cmake", ".make")
COMBINED = "combined-"                   # the id prefix of a family's combination


@dataclass(frozen=True)
class LineEdit:
    """A patch whose whole change is one line of one build file: `old` at `line` (1-based) -> `new`."""
    file: str
    line: int
    old: str
    new: str


@dataclass
class Family:
    file: str
    line: int
    old: str
    members: list[str]                   # hypothesis ids, in the order given
    edits: dict[str, str]                # member -> its new line

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def is_build_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in BUILD_NAMES or name.endswith(BUILD_SUFFIXES) or name.startswith("Makefile.")


def line_edit(patch: str) -> LineEdit | None:
    """The one build-file line `patch` edits, or None when it changes anything else (more lines,
    more files, a source file)."""
    files = diffs.parse(patch)
    if len(files) != 1 or not is_build_file(files[0].path) or len(files[0].changes) != 1:
        return None
    [change] = files[0].changes
    if len(change.removed) != 1 or len(change.added) != 1:
        return None
    return LineEdit(files[0].path, change.line, change.removed[0], change.added[0])


def families(patches: dict[str, str]) -> list[Family]:
    """Hypotheses (id -> patch text) grouped by the build-file line they edit: only groups of two or
    more, in the order of their first member."""
    groups: dict[tuple[str, int, str], Family] = {}
    for name, patch in patches.items():
        edit = line_edit(patch)
        if edit is None:
            continue
        fam = groups.setdefault((edit.file, edit.line, edit.old),
                                Family(edit.file, edit.line, edit.old, [], {}))
        fam.members.append(name)
        fam.edits[name] = edit.new
    return [f for f in groups.values() if len(f.members) >= 2]


def _edits(old: str, new: str) -> list[tuple[int, int, str]]:
    """`new` as replacements of character ranges of `old`: (start, end, text)."""
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [(i1, i2, new[j1:j2]) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def combine(old: str, news: list[str]) -> str | None:
    """`old` with every edit of `news` applied together (e.g. `-O2` -> `-O3` and ` -flto` appended:
    `-O3 ... -flto`); None when two edits overlap (both rewrite the same characters differently),
    or when a flag one member adds does not survive the combination."""
    edits: list[tuple[int, int, str]] = []
    for new in news:
        for e in _edits(old, new):
            if e not in edits:
                edits.append(e)
    edits.sort(key=lambda e: (e[0], e[1]))            # stable: same-place inserts keep the members' order
    reach = 0
    for start, end, _ in edits:
        if start < reach:                             # inside or across an earlier edit's range
            return None
        reach = max(reach, end)
    out, at = [], 0
    for start, end, text in edits:
        out += [old[at:start], text]
        at = end
    line = "".join(out) + old[at:]
    flags = set(portability.FLAG.findall(line))
    for new in news:
        added = set(portability.FLAG.findall(new)) - set(portability.FLAG.findall(old))
        if not added <= flags:
            return None
    return line


def added_flags(old: str, new: str) -> list[str]:
    """The flags `new` has that `old` has not (what a member adds to its line)."""
    before = set(portability.FLAG.findall(old))
    return [f for f in dict.fromkeys(portability.FLAG.findall(new)) if f not in before]


def combined_id(members: list[str]) -> str:
    """The combination's hypothesis id (a git branch component): its members' ids, or a digest of
    them when that would be long."""
    name = COMBINED + "+".join(members)
    if len(name) <= 80:
        return name
    return COMBINED + hashlib.sha256("\n".join(members).encode()).hexdigest()[:12]


def combined_patch(path: str, text: str, line: int, new_line: str) -> str:
    """A unified diff of `path` (whose content is `text`) with line `line` (1-based) replaced by
    `new_line`, as `git apply` takes it."""
    lines = text.splitlines(keepends=True)
    ending = lines[line - 1][len(lines[line - 1].rstrip("\r\n")):] or ""
    new = lines[:line - 1] + [new_line + ending] + lines[line:]
    return diffs.unified_patch(path, text, "".join(new))


def best(members: list[str], gain: dict[str, float]) -> str:
    """The member with the largest measured gain (the first of equals; one without a gain last)."""
    return max(members, key=lambda n: (gain.get(n, -math.inf), -members.index(n)))


def kept_off(names: list[str], patches: dict[str, str], gain: dict[str, float],
             combinations: dict[str, str] | None = None) -> dict[str, str]:
    """Of the kept hypotheses `names` (in stacking order), those the stack leaves off the branch,
    each with why: a build that is not shippable by default (`jobs.contract.portability`), and, of a
    family of the rest, every member but the best ("superseded by <best> (same line)").
    `combinations`: a combination's id -> what became of it when it is not among `names` (refused by
    the budget, not kept), said beside its members' reason."""
    off = {n: why for n in names if (why := portability.problem(patches.get(n, "")))}
    portable = {n: patches[n] for n in names if n not in off and n in patches}
    for fam in families(portable):
        winner = best(fam.members, gain)
        combo = combined_id([m for m in fam.members if not m.startswith(COMBINED)])
        note = f"; {combinations[combo]}" if combo in (combinations or {}) and combo not in fam.members else ""
        off.update({m: f"superseded by {winner} (same line{note})" for m in fam.members if m != winner})
    return off


def to_combine(kept: list[str], patches: dict[str, str]) -> list[Family]:
    """Families whose portable kept members (two or more, combinations excluded) can be combined
    into one line: each family with only those members."""
    out = []
    portable = {n: patches[n] for n in kept if n in patches and not n.startswith(COMBINED)
                and not portability.problem(patches[n])}
    for fam in families(portable):
        if combine(fam.old, [fam.edits[m] for m in fam.members]) is not None:
            out.append(fam)
    return out
