"""Cross-backend fusion gap scan for ggml-style trees. Pure over file text; deterministic; offline.

A ggml backend says which node sequences it fuses by passing an op list to a fusion check:
`ggml_can_fuse(cgraph, i, { GGML_OP_RMS_NORM, GGML_OP_MUL })`, a backend wrapper such as
`ggml_cuda_can_fuse(...)`, or a named list (`const enum ggml_op fuse_ops[] = {...}`,
`static const std::vector<ggml_op> ops_rms_norm_mul = {...}`) that a fusion check or a fusion
table uses. This module extracts those lists per backend and reports the sequences that some
other backend fuses and the CPU backend does not, each with file:line evidence.

The rule for "this op list is a fusion" (stated once, used everywhere below): a brace list of two
or more literal `GGML_OP_*` values that is
  (a) an argument of a call whose name contains `fuse`, or
  (b) assigned to a name that also appears on a line mentioning `fuse`/`fusion`/`is_equal`, or
      inside a function whose name contains `fuse`/`fusion`, or in a file named `*fusion*`.
Lists holding variables (`{ op, bias_op }`) are not resolved; they are counted in `skipped`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from jobs.guard import mdsafe, safefs
from jobs.guard.mdsafe import Markdown, join, md

SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".m", ".mm"}
CPU = "cpu"
# Backends whose fusions matter most as leads: mature, reviewed, same graph as the CPU's.
PRIMARY_BACKENDS = ("cuda", "metal", "vulkan")
# Ops that appear in a dense transformer's decode step (what a CPU user runs most).
DENSE_OPS = {"RMS_NORM", "NORM", "MUL", "ADD", "ROPE", "SOFT_MAX", "SCALE", "GLU", "UNARY",
             "MUL_MAT", "SET_ROWS", "VIEW", "CPY", "RESHAPE", "GET_ROWS", "FLASH_ATTN_EXT"}

_LIST = re.compile(r"\{\s*((?:GGML_OP_\w+\s*,\s*)+GGML_OP_\w+)\s*,?\s*\}")
_ANY_LIST = re.compile(r"\{([^{}]*\bGGML_OP_\w+[^{}]*)\}")
_NAME_BEFORE = re.compile(r"([A-Za-z_]\w*)\s*(?:\[\s*\w*\s*\])?\s*=?\s*$")
_CALLEE = re.compile(r"([A-Za-z_][\w:]*)\s*$")
_FUNC_DEF = re.compile(r"^[A-Za-z_][\w\s\*:<>,]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?\{", re.M)
_FUSE_WORD = re.compile(r"fuse|fusion|is_equal", re.I)


@dataclass(frozen=True)
class FusedSeq:
    backend: str
    ops: tuple[str, ...]          # without the GGML_OP_ prefix
    file: str                     # relative to the scanned tree
    line: int
    how: str                      # "call <name>" | "list <name>"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Gap:
    ops: tuple[str, ...]
    backends: dict[str, list[FusedSeq]]        # backend -> where it fuses this sequence
    extends: FusedSeq | None = None            # a shorter CPU fusion this one would extend
    score: float = 0.0
    variants: list[tuple[str, ...]] = field(default_factory=list)   # longer members of its family

    @property
    def name(self) -> str:
        return "+".join(self.ops)

    def evidence(self) -> list[tuple[str, str]]:
        out = []
        for backend, seqs in sorted(self.backends.items()):
            for s in seqs[:2]:
                out.append((s.where, f"{backend} fuses {self.name} ({s.how})"))
        if self.extends:
            out.append((self.extends.where, f"cpu already fuses {'+'.join(self.extends.ops)}"))
        return out


@dataclass
class GapScan:
    fused: dict[str, list[FusedSeq]] = field(default_factory=dict)   # backend -> sequences
    gaps: list[Gap] = field(default_factory=list)
    cpu_dir: str | None = None
    skipped: int = 0                                                  # lists with variables

    def cpu_ops(self) -> set[tuple[str, ...]]:
        return {s.ops for s in self.fused.get(CPU, [])}


def _strip_comments(text: str) -> str:
    """Blank out comments and string literals, keeping every newline (line numbers stay right)."""
    def blank(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith(("/", )):
            return re.sub(r"[^\n]", " ", s)
        return s[0] + re.sub(r"[^\n]", " ", s[1:-1]) + s[-1]
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def _enclosing_call(code: str, pos: int) -> str | None:
    """Name of the call whose parentheses enclose `pos`, if any (within the statement)."""
    depth = 0
    for k in range(pos - 1, max(-1, pos - 2000), -1):
        ch = code[k]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                m = _CALLEE.search(code[:k])
                return m.group(1) if m else None
            depth -= 1
        elif ch in ";}" and depth == 0:
            return None
        elif ch == "{" and depth == 0 and k < pos - 1:
            return None
    return None


def _assigned_name(code: str, pos: int) -> str | None:
    m = _NAME_BEFORE.search(code[max(0, pos - 200):pos])
    if not m or m.group(1) in ("return", "const", "static"):
        return None
    return m.group(1)


def _function_spans(code: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each function body, by brace matching from its opening brace."""
    spans = []
    for m in _FUNC_DEF.finditer(code):
        if m.group(1) in ("if", "for", "while", "switch", "return"):
            continue
        depth, k = 0, m.end() - 1
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        spans.append((m.start(), k, m.group(1)))
    return spans


def _function_at(spans: list[tuple[int, int, str]], pos: int) -> str:
    return next((name for start, end, name in reversed(spans) if start <= pos <= end), "")


def scan_file(backend: str, rel: str, text: str) -> tuple[list[FusedSeq], int]:
    """The fused op sequences one source file declares, and how many op lists it left unresolved."""
    code = _strip_comments(text)
    lines_with_fuse = [ln for ln in code.splitlines() if _FUSE_WORD.search(ln)]
    spans = _function_spans(code)
    fusion_file = "fusion" in Path(rel).name.lower()
    out: list[FusedSeq] = []
    literal_starts = set()
    for m in _LIST.finditer(code):
        literal_starts.add(m.start())
        ops = tuple(op.strip().removeprefix("GGML_OP_") for op in m.group(1).split(","))
        callee = _enclosing_call(code, m.start())
        how = None
        if callee and "fuse" in callee.lower():
            how = f"call {callee}"
        else:
            name = _assigned_name(code, m.start())
            if name and callee is None:
                used = any(re.search(rf"\b{re.escape(name)}\b", ln) for ln in lines_with_fuse
                           if not re.search(rf"\b{re.escape(name)}\s*(\[\s*\w*\s*\])?\s*=", ln))
                in_fuse_fn = bool(_FUSE_WORD.search(_function_at(spans, m.start())))
                if used or in_fuse_fn or fusion_file:
                    how = f"list {name}"
        if how:
            line = code.count("\n", 0, m.start(1)) + 1
            out.append(FusedSeq(backend, ops, rel, line, how))
    skipped = 0
    for m in _ANY_LIST.finditer(code):
        if m.start() in literal_starts:
            continue
        callee = _enclosing_call(code, m.start())
        if callee and "fuse" in callee.lower():
            skipped += 1
    return out, skipped


def find_backends(tree: Path, extra: list[str] | None = None) -> dict[str, Path]:
    """backend name -> folder: every `ggml-<name>` directory that holds sources (plus `extra`)."""
    tree = Path(tree)
    found: dict[str, Path] = {}
    for d in sorted(tree.rglob("ggml-*")):
        if d.is_symlink() or not d.is_dir() or ".git" in d.parts:
            continue                                  # a linked folder is never scanned (jobs/guard/safefs.py)
        name = d.name.removeprefix("ggml-")
        if name not in found and any(Path(p).suffix in SOURCE_SUFFIXES for p in safefs.walk_files(d)):
            found[name] = d
    for folder in extra or []:
        d = tree / folder
        if d.is_dir():
            found.setdefault(d.name.removeprefix("ggml-"), d)
    return found


def _gap_score(ops: tuple[str, ...], backends: dict[str, list[FusedSeq]], extends: bool) -> float:
    primary = sum(1 for b in backends if b in PRIMARY_BACKENDS)
    dense = sum(1 for op in ops if op in DENSE_OPS) / len(ops)
    # Dense-decoder ops weigh most (what CPU users run); then how many mature backends agree.
    return round(1.0 + 0.4 * primary + 0.1 * (len(backends) - primary) + 1.5 * dense + (0.5 if extends else 0.0), 3)


def family(ops: tuple[str, ...]) -> tuple[str, ...]:
    """The sequence with runs of one op collapsed: ADD+ADD+ADD -> ADD."""
    out: list[str] = []
    for op in ops:
        if not out or out[-1] != op:
            out.append(op)
    return tuple(out)


def compare(fused: dict[str, list[FusedSeq]]) -> list[Gap]:
    """Sequences fused by some non-CPU backend and not by the CPU backend, best leads first."""
    cpu = {s.ops: s for s in fused.get(CPU, [])}
    by_ops: dict[tuple[str, ...], dict[str, list[FusedSeq]]] = {}
    for backend, seqs in fused.items():
        if backend == CPU:
            continue
        for s in seqs:
            if s.ops not in cpu:
                by_ops.setdefault(s.ops, {}).setdefault(backend, []).append(s)
    # One family per shape: ADD+ADD, ADD+ADD+ADD, ... (or MUL+VIEW*k+ADD*k) is one lead, not six.
    families: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for ops in by_ops:
        families.setdefault(family(ops), []).append(ops)
    gaps = []
    for members in families.values():
        members.sort(key=len)
        ops = members[0]
        backends: dict[str, list[FusedSeq]] = {}
        for m in members:
            for backend, seqs in by_ops[m].items():
                backends.setdefault(backend, []).extend(seqs)
        extends = max((c for k, c in cpu.items() if len(k) < len(ops) and ops[:len(k)] == k),
                      key=lambda c: len(c.ops), default=None)
        gaps.append(Gap(ops, backends, extends, _gap_score(ops, backends, extends is not None), members[1:]))
    gaps.sort(key=lambda g: (-g.score, len(g.ops), g.name))
    return gaps


def scan_tree(tree: Path, extra_backends: list[str] | None = None) -> GapScan:
    tree = Path(tree)
    result = GapScan()
    for backend, folder in find_backends(tree, extra_backends).items():
        seqs: list[FusedSeq] = []
        for rel in sorted(safefs.walk_files(folder), key=Path):
            path = folder / rel
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            try:
                text = safefs.read_text(tree, path.relative_to(tree).as_posix(), safefs.TEXT_LIMIT, errors="replace")
            except OSError:
                continue
            if "GGML_OP_" not in text:
                continue
            found, skipped = scan_file(backend, path.relative_to(tree).as_posix(), text)
            seqs += found
            result.skipped += skipped
        if backend == CPU:
            result.cpu_dir = folder.relative_to(tree).as_posix()
        if seqs:
            result.fused[backend] = seqs
    if result.cpu_dir is None:
        return result          # not a ggml-style tree with a CPU backend: nothing to compare
    result.gaps = compare(result.fused)
    return result


def expected_effect(gap: Gap) -> str:
    views = {"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}
    real = [op for op in gap.ops if op not in views]
    saved = max(0, len(real) - 1)
    return (f"one pass instead of {len(real)}: the {saved} intermediate tensor(s) are neither written "
            "nor re-read, which pays off when the step is memory-bound (batch-1 generation); "
            "no effect on the matmuls themselves")


def render(scan: GapScan, limit: int | None = None) -> list[Markdown]:
    """Markdown lines for research.md (op, backend and file names come from the target's tree: `md`)."""
    if scan.cpu_dir is None:
        return []
    out = [md("## Cross-backend fusion gaps (fused elsewhere, not on CPU)"), md("")]
    cpu = scan.fused.get(CPU, [])
    fuses = (join(", ", [md("{} ({})", "+".join(s.ops), mdsafe.code(s.where)) for s in cpu]) if cpu
             else "nothing (no fusion checks found)")
    out.append(md("CPU backend {} fuses: {}", mdsafe.code(scan.cpu_dir), fuses))
    out.append(md(""))
    counts = join(", ", [md("{} {}", b, len({s.ops for s in seqs})) for b, seqs in sorted(scan.fused.items())])
    out += [md("Distinct fused sequences per backend: {}.", counts), md("")]
    for gap in scan.gaps[:limit]:
        where = join("; ", [md("{}: {}", b, join(", ", [mdsafe.code(s.where) for s in seqs[:2]]))
                            for b, seqs in sorted(gap.backends.items())])
        var = md(" (and {} longer variant(s) of the same shape)", len(gap.variants)) if gap.variants else md("")
        ext = (md(" — extends the CPU's {} ({})", "+".join(gap.extends.ops), mdsafe.code(gap.extends.where))
               if gap.extends else md(""))
        out.append(md("- **{}** ({:.2f}) {}{}{}", gap.name, gap.score, where, var, ext))
    if limit is not None and len(scan.gaps) > limit:
        out.append(md("- … {} more in hypotheses.json / gapscan output", len(scan.gaps) - limit))
    if scan.skipped:
        out += [md(""), md("({} fusion checks with variable op lists were not resolved.)", scan.skipped)]
    out.append(md(""))
    return out
