"""The tools a model agent works with in an experiment's worktree, enforced here, never by a prompt.

- every write goes through `guard.check_edit`; a refused edit is a tool error the model reads;
- reads stay inside the tree, follow no link and are capped (`jobs.guard.safefs`); files people write
  for agents (README, AGENTS.md, CLAUDE.md, ...) come back quoted as untrusted data;
- build and quick_check run the target's own commands in the run's sandbox;
- malformed input gets an error result, never an exception.

Provider-neutral: `IMPLEMENT_TOOLS` are `chat.ToolSpec`s with JSON schemas from the pydantic
models, and `Workbench.run(name, input)` returns `(text, is_error)`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobs.guard import safefs
from jobs.contract.config import TargetConfig
from ..research.sanitize import quote
from jobs.measure.isolation import Isolation
from jobs.measure.runner import run_step, tail
from jobs.contract.spec import SandboxSpec
from jobs.agent.transforms import rewrite as transforms
from .chat import ToolSpec
from .guard import EditRefused, check_edit

READ_LIMIT = 12_000       # characters of a file per read_file call
OUTPUT_LIMIT = 3_000      # characters of build/check output returned to the model
SEARCH_LIMIT = 40         # matches per search_code call
UNTRUSTED_NAMES = re.compile(r"(^|/)(AGENTS|CLAUDE|README|CONTRIBUTING)[^/]*$", re.IGNORECASE)


class ToolInput(BaseModel):       # no docstring: it would enter every tool's JSON schema
    model_config = ConfigDict(extra="forbid")


class ReadFile(ToolInput):
    path: str = Field(min_length=1, description="path relative to the repository root")
    start_line: int = Field(1, ge=1)
    end_line: int | None = Field(None, ge=1)


class SearchCode(ToolInput):
    pattern: str = Field(min_length=1, max_length=200, description="Python regular expression")
    glob: str = Field("**/*", description="which files, e.g. 'ggml/src/ggml-cpu/**/*.c'")


class ApplyEdit(ToolInput):
    path: str = Field(min_length=1)
    old: str = Field(description="exact text to replace (must occur exactly once); '' creates a new file")
    new: str


class NoInput(ToolInput):
    pass


class Transformation(ToolInput):
    kind: Literal["dispatch", "unroll", "ivdep", "prefetch", "inline", "hot", "flatten"] = Field(
        description="dispatch: target_clones(\"avx2\",\"default\") on the definition; unroll/ivdep: "
                    "#pragma GCC unroll 4 / ivdep before the innermost loop around `line`; prefetch: "
                    "__builtin_prefetch `distance` elements ahead of the arrays indexed on `line`; inline: "
                    "always_inline (and static inline) on a static function called often for little work, a "
                    "library's noinline macro on it written as static; hot/flatten: that attribute on the definition")
    path: str = Field(min_length=1, description="the C/C++ file defining the function")
    function: str = Field(min_length=1, max_length=200)
    line: int | None = Field(None, ge=1, description="1-based line in the function (unroll, ivdep, prefetch)")
    distance: int = Field(8, ge=1, le=4096, description="prefetch distance in elements")


def tool(name: str, description: str, model: type[BaseModel]) -> ToolSpec:
    return ToolSpec(name, description, model.model_json_schema())


IMPLEMENT_TOOLS = (
    tool("read_file", "Read a file of the repository (numbered lines).", ReadFile),
    tool("search_code", "Search the repository with a regular expression; returns file:line: text.", SearchCode),
    tool("apply_edit", "Replace one exact occurrence of `old` with `new` in a file, or create a new file "
                       "with old=''. Only the configured editable paths may change.", ApplyEdit),
    tool("apply_transformation", "Apply one of the catalogue's source transformations to a function (a "
                                 "mechanical, checked rewrite; refused where it cannot be applied confidently, "
                                 "e.g. dispatch on an inline function or one whose address is taken).", Transformation),
    tool("build", "Run the target's build command in the worktree; returns exit code and output tail.", NoInput),
    tool("quick_check", "Run the target's correctness checks; returns exit code and output tail.", NoInput),
)


class Workbench:
    """One hypothesis's worktree and the tools on it; `edited` is what apply_edit changed."""

    def __init__(self, tree: Path, config: TargetConfig, isolation: Isolation | None):
        self.tree = Path(tree)
        self.config = config
        self.isolation = isolation
        self.edited: set[str] = set()

    def run(self, name: str, raw: Any) -> tuple[str, bool]:
        handlers = {"read_file": (ReadFile, self._read_file), "search_code": (SearchCode, self._search_code),
                    "apply_edit": (ApplyEdit, self._apply_edit),
                    "apply_transformation": (Transformation, self._apply_transformation), "build": (NoInput, self._build),
                    "quick_check": (NoInput, self._quick_check)}
        if name not in handlers:
            return f"unknown tool {name!r}; available: {', '.join(handlers)}", True
        schema, handler = handlers[name]
        try:
            args = schema.model_validate(raw if isinstance(raw, dict) else {"_": raw})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
            return f"invalid input for {name}: {problems}", True
        try:
            return handler(args)
        except EditRefused as exc:
            return f"refused: {exc}", True
        except (OSError, UnicodeError, re.error) as exc:
            return f"{name} failed: {exc}", True

    def _inside(self, rel: str) -> Path:
        path = (self.tree / rel).resolve()
        if not path.is_relative_to(self.tree.resolve()) or ".git" in [p.lower() for p in Path(rel).parts]:
            raise EditRefused(f"{rel}: outside the repository")
        return path

    def _text(self, path: Path, errors: str = "replace") -> str:
        """A file of the tree, read without following links and at most TEXT_LIMIT bytes: the tree
        holds what builds wrote (a link to a key, a 10 GB file), never read through or in full."""
        rel = path.relative_to(self.tree.resolve()).as_posix()
        return safefs.read_text(self.tree.resolve(), rel, safefs.TEXT_LIMIT, errors=errors)

    def _read_file(self, a: ReadFile) -> tuple[str, bool]:
        path = self._inside(a.path)
        if not path.is_file():
            return f"{a.path}: no such file", True
        lines = self._text(path).splitlines()
        end = min(len(lines), a.end_line or len(lines))
        out, size = [], 0
        for n in range(a.start_line, end + 1):
            row = f"{n}: {lines[n - 1]}"
            size += len(row) + 1
            if size > READ_LIMIT:
                out.append(f"[... truncated at line {n}; read on with start_line={n}]")
                break
            out.append(row)
        text = "\n".join(out) or f"{a.path}: {len(lines)} lines; nothing in that range"
        if UNTRUSTED_NAMES.search(a.path):
            text = quote(text, a.path)
        return text, False

    def _search_code(self, a: SearchCode) -> tuple[str, bool]:
        if a.glob.startswith("/") or ".." in Path(a.glob).parts:
            return f"glob {a.glob!r}: must stay inside the repository", True
        rx = re.compile(a.pattern)
        hits = []
        for path in sorted(self.tree.glob(a.glob)):
            rel = path.relative_to(self.tree).as_posix()
            if rel.startswith(".git/") or not safefs.is_regular(self.tree, rel):
                continue
            try:
                text = safefs.read_text(self.tree, rel, safefs.TEXT_LIMIT, errors="replace")
            except OSError:
                continue                              # too large to search
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{n}: {line.strip()[:200]}")
                    if len(hits) >= SEARCH_LIMIT:
                        return "\n".join(hits + ["[... more matches; narrow the pattern or glob]"]), False
        return "\n".join(hits) or "no matches", False

    def _apply_edit(self, a: ApplyEdit) -> tuple[str, bool]:
        rel = check_edit(a.path, self.tree, self.config)          # raises EditRefused: the tool refuses
        path = self._inside(rel)
        if a.old == "":
            if path.exists():
                return f"{rel} exists; give the exact text to replace in `old`", True
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(a.new, encoding="utf-8")
        else:
            if not path.is_file():
                return f"{rel}: no such file (use old='' to create it)", True
            text = self._text(path, errors="strict")
            count = text.count(a.old)
            if count != 1:
                return f"`old` occurs {count} times in {rel}; it must occur exactly once", True
            path.write_text(text.replace(a.old, a.new, 1), encoding="utf-8")
        self.edited.add(rel)
        return f"edited {rel}", False

    def _apply_transformation(self, a: Transformation) -> tuple[str, bool]:
        rel = check_edit(a.path, self.tree, self.config)          # raises EditRefused: the tool refuses
        path = self._inside(rel)
        if not path.is_file():
            return f"{rel}: no such file", True
        text = self._text(path, errors="strict")
        if a.kind in ("unroll", "ivdep", "prefetch") and a.line is None:
            return f"{a.kind} needs `line` (a line inside the loop)", True
        new = {"dispatch": lambda: transforms.dispatch(text, a.function, rel),
               "unroll": lambda: transforms.with_pragma(text, a.function, a.line, "GCC unroll 4"),
               "ivdep": lambda: transforms.with_pragma(text, a.function, a.line, "GCC ivdep"),
               "prefetch": lambda: transforms.with_prefetch(text, a.function, a.line, a.distance),
               "inline": lambda: transforms.always_inline(text, a.function),
               "hot": lambda: transforms.with_attribute(text, a.function, "hot", refuse_inline=False),
               "flatten": lambda: transforms.with_attribute(text, a.function, "flatten")}[a.kind]()
        if new is None:
            return (f"{a.kind} does not apply to {a.function}() in {rel} (no single top-level definition read "
                    "confidently there, no suitable loop at that line, or not legal for it); use apply_edit"), True
        path.write_text(new, encoding="utf-8")
        self.edited.add(rel)
        return f"applied {a.kind} to {a.function}() in {rel}; build to see that it compiles", False

    def _step(self, command: str, timeout: float, label: str) -> tuple[str, bool]:
        # The target's own build/checks: in the run's sandbox as the operator decided it (the
        # pipeline sets it). Without one, the strictest: sandboxed, no declared paths, no variables;
        # never the repository's own `enabled`/`env` (issue 20: the repository only asks).
        isolation = self.isolation or Isolation.from_spec(SandboxSpec())
        step = run_step(command, self.tree, timeout, isolation=isolation)
        if step.returncode is None:
            return f"{label} timed out after {timeout:.0f} s\n{tail(step.output, OUTPUT_LIMIT)}", True
        return f"{label} exit {step.returncode}\n{tail(step.output, OUTPUT_LIMIT)}", step.returncode != 0

    def _build(self, a: NoInput) -> tuple[str, bool]:
        return self._step(self.config.build, self.config.timeouts.build, "build")

    def _quick_check(self, a: NoInput) -> tuple[str, bool]:
        return self._step(self.config.checks, self.config.timeouts.checks, "checks")
