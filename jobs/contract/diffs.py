"""Pure: the changed lines of a unified diff (`git diff`, a `--candidate` patch), with the line
numbers of the old side, for the checks that read what a patch does (`jobs.contract.portability`,
`jobs.run.families`); and `unified_patch`, the one writer of the patches research makes.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Change:
    """One run of changed lines: `removed` starting at old line `line` (1-based), replaced by `added`."""
    line: int
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


@dataclass
class FileDiff:
    path: str
    changes: list[Change] = field(default_factory=list)

    @property
    def removed(self) -> list[str]:
        return [x for c in self.changes for x in c.removed]

    @property
    def added(self) -> list[str]:
        return [x for c in self.changes for x in c.added]


def _path(header: str) -> str:
    path = header[4:].split("\t", 1)[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse(patch: str) -> list[FileDiff]:
    """The files a unified diff changes, each with its runs of changed lines (the new path, or the
    old one for a deleted file)."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    old_line, left, change = 0, 0, None
    lines = patch.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if left <= 0 and line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            new = _path(lines[i + 1])
            current = FileDiff(_path(line) if new == "/dev/null" else new)
            files.append(current)
            i += 2
            continue
        m = HUNK.match(line) if left <= 0 else None
        if m and current is not None:
            old_line = int(m[1]) if m[2] != "0" else int(m[1]) + 1
            left = int(m[2] if m[2] is not None else 1) + int(m[4] if m[4] is not None else 1)
            change = None
        elif left > 0 and current is not None and line[:1] in (" ", "-", "+", ""):
            kind, text = line[:1], line[1:]
            if kind == "-" or kind == "+":
                if change is None:
                    change = Change(old_line)
                    current.changes.append(change)
                (change.removed if kind == "-" else change.added).append(text)
                if kind == "-":
                    old_line += 1
                left -= 1
            else:
                change = None
                old_line += 1
                left -= 2
        elif line.startswith("\\"):
            pass                              # "\ No newline at end of file"
        else:
            left, change = 0, None
        i += 1
    return files


def unified_patch(rel: str, old: str, new: str) -> str:
    """`git apply`'s form of the change from `old` to `new` in file `rel` (a text without a final
    newline gets git's marker, or the patch would not apply)."""
    diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=3)
    return f"diff --git a/{rel} b/{rel}\n" + "".join(
        d if d.endswith("\n") else d + "\n\\ No newline at end of file\n" for d in diff)
