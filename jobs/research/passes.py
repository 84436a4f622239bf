"""Offline scan of C/C++ sources for memory-pass fusion candidates. Pure: text in, findings out.

A "pass" is a loop (or a memcpy/memset) that writes or reduces an array. Two or more passes in a row that
write or read the same buffer each stream it through memory again; when the buffer is larger
than cache, fusing them into one loop removes whole memory passes, which is what pays off when
the code is memory-bound. The scan is a heuristic over source text: it reports where to look,
with file:line evidence, and the agent decides whether a fusion is legal.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_FOR = re.compile(r"^\s*for\s*\(")
_MEMCALL = re.compile(r"^\s*(memcpy|memmove|memset)\s*\(\s*([A-Za-z_]\w*)\s*(?:\+[^,]*)?,\s*([A-Za-z_]\w*)?")
_STORE = re.compile(r"\b([A-Za-z_]\w*)\s*\[[^\]]+\]\s*(?:[-+*/]?=)(?!=)")
_LOAD = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
_FUNC = re.compile(r"^[A-Za-z_][\w\s\*]*\b([A-Za-z_]\w*)\s*\([^;]*\)\s*\{?\s*$")
_TRIVIAL = re.compile(r"^\s*(//.*|/\*.*|\*.*|\}|\{|)\s*$|^\s*[A-Za-z_][\w\s\*]*=\s*[^\[;]*;\s*$|^\s*(float|int|double|size_t|const)\b[^\[]*;\s*$")


@dataclass
class Pass:
    line: int
    end: int
    writes: set[str]
    reads: set[str]
    text: str


@dataclass
class Finding:
    file: str
    function: str
    start: int
    end: int
    buffer: str
    passes: list[Pass] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.start}"

    def describe(self) -> str:
        lines = ", ".join(str(p.line) for p in self.passes)
        return (f"{len(self.passes)} consecutive passes over `{self.buffer}` in {self.function}() "
                f"(lines {lines}) could be one")


def _loop_end(lines: list[str], start: int) -> int:
    """Index of the last line of the loop that starts at `start` (brace matching)."""
    depth, seen_brace = 0, False
    for i in range(start, len(lines)):
        code = lines[i].split("//", 1)[0]
        depth += code.count("{") - code.count("}")
        seen_brace = seen_brace or "{" in code
        if seen_brace and depth <= 0:
            return i
        if not seen_brace and i > start and code.strip().endswith(";"):
            return i   # single-statement body on the next line
        if not seen_brace and i == start and code.rstrip().endswith(";") and ")" in code:
            return i   # `for (...) x[i] = ...;` on one line
    return len(lines) - 1


def _header_end(text: str) -> int:
    """Index of the parenthesis closing the first `for (`."""
    depth = 0
    for k, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def _pass_at(lines: list[str], i: int) -> Pass | None:
    line = lines[i]
    mem = _MEMCALL.match(line)
    if mem:
        reads = {mem.group(3)} if mem.group(1) != "memset" and mem.group(3) else set()
        return Pass(i + 1, i + 1, {mem.group(2)}, reads, line.strip())
    if not _FOR.match(line):
        return None
    end = _loop_end(lines, i)
    body = "\n".join(lines[i:end + 1])
    body = body[_header_end(body) + 1:]   # the loop header indexes nothing we care about
    writes = set(_STORE.findall(body))
    reads = set(_LOAD.findall(body))
    if not (writes or reads):
        return None
    # A read-only loop (a max or sum reduction) is a pass too: it streams the buffer again.
    return Pass(i + 1, end + 1, writes, reads, line.strip())


def _function_at(lines: list[str], i: int) -> str:
    for j in range(i, -1, -1):
        m = _FUNC.match(lines[j])
        if m and not lines[j].startswith((" ", "\t")) and m.group(1) not in ("if", "for", "while", "switch"):
            return m.group(1)
    return "?"


def scan_source(path: str, text: str, min_passes: int = 2) -> list[Finding]:
    lines = text.splitlines()
    findings: list[Finding] = []
    i = 0
    while i < len(lines):
        first = _pass_at(lines, i)
        if not first:
            i += 1
            continue
        chain = [first]
        j = first.end
        while j < len(lines):
            if _TRIVIAL.match(lines[j]) and not _FOR.match(lines[j]):
                j += 1
                continue
            nxt = _pass_at(lines, j)
            if not nxt:
                break
            touched = set().union(*(p.writes for p in chain))   # a reduction does not end the chain
            if not (touched & (nxt.writes | nxt.reads)):
                break
            chain.append(nxt)
            j = nxt.end
        if len(chain) >= min_passes:
            shared = set.intersection(*[p.writes | p.reads for p in chain]) or chain[0].writes
            buffer = sorted(shared & chain[0].writes or shared)[0]
            findings.append(Finding(path, _function_at(lines, i), chain[0].line, chain[-1].end, buffer, chain))
            i = chain[-1].end
        else:
            i = first.end if first.end > i + 1 else i + 1
    return findings
