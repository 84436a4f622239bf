"""The offline loop's source transformations of the hot code (jobs/agent/transforms/rewrite.py), each
shown to apply before an experiment is spent on it.

`transform_hypotheses` reads the hot functions' editable sources, plans at most `MOST` rewrites,
then builds a scratch copy of the tracked files once as they are (the baseline) and once per
rewrite, with the target's build command through `run` (the run's sandbox). A rewrite is kept only
when its build succeeds and the disassembly of its function (`objdump -d` of every ELF file the
build wrote, the function's symbols and its compiler-made clones, addresses left out) differs from
the baseline's; the others are dropped with a note saying why. ELF files are read through
`safefs` descriptors (never through a link) and objdump reads them from the descriptor.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from jobs.contract import diffs
from jobs.contract.model import Hypothesis
from jobs.research.recipes import matches_any
from jobs.guard import gitops, safefs
from jobs.research.callgrind import CallProfile
from jobs.agent.transforms.rewrite import HEADERS, Transform, plan

MOST = 10                   # rewrites built and checked per research (two unroll factors per hot loop)
MOST_FUNCTIONS = 3          # hot editable functions transformed
MIN_SHARE = 0.03
SOURCE_LIMIT = 2 << 20
FILE_LIMIT = 256 << 20      # bytes of one tracked file copied into a scratch tree
ELF_LIMIT = 256 << 20       # bytes of one ELF file disassembled
MOST_ELF = 200
ELF_MAGIC = b"\x7fELF"
SYMBOL = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
PADDING = re.compile(r"\bnop|^xchg %ax,%ax$|^int3$")   # alignment between functions moves with placement
SOURCES = (".c", ".cc", ".cpp", ".cxx", ".C", *HEADERS)   # a header-only library's hot code too (no dispatch there)


def unified_patch(files: dict[str, tuple[str, str]]) -> str:
    """One patch of several files' changes (rel -> (old, new))."""
    return "".join(diffs.unified_patch(rel, old, new) for rel, (old, new) in sorted(files.items()))


def _files(tree: Path) -> list[str]:
    """What a scratch copy takes: the files git tracks, or (a tree that is not a git checkout) every
    regular file but ELF objects and archives, so that the scratch build makes them again."""
    try:
        return [rel for rel in gitops.git(tree, "ls-files", "-z").split("\0") if rel]
    except gitops.GitError:
        pass
    out = []
    for rel in safefs.walk_files(tree):
        magic = safefs.head(tree, rel, 8)
        if magic is not None and not magic.startswith(ELF_MAGIC) and magic != b"!<arch>\n":
            out.append(rel)
    return out


def copy_tracked(tree: Path, dest: Path, files: list[str]) -> None:
    """`files` of `tree` into `dest`, links recreated as links and never followed, regular files
    read through `safefs`."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        full = Path(tree) / rel
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if os.path.islink(full):
            os.symlink(os.readlink(full), target)
        else:
            try:
                target.write_bytes(safefs.read_bytes(tree, rel, FILE_LIMIT))
            except OSError:
                continue                    # not a regular file, or too large to copy
            os.chmod(target, st.st_mode & 0o755)


def _symbol_matches(symbol: str, functions: list[str]) -> str | None:
    for fn in functions:
        if symbol == fn or symbol.startswith((fn + ".", fn + "(")):
            return fn
    return None


def normalise(line: str) -> str:
    """One instruction line without its address and with absolute targets left out, so the same
    code placed elsewhere compares equal."""
    body = line.split(":", 1)[1] if re.match(r"^\s*[0-9a-f]+:", line) else line
    body = re.sub(r"\b[0-9a-f]+ <", "<", body)
    body = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "X(%rip)", body)
    return " ".join(body.split())


def disassembly(objdump: str, functions: list[str]) -> dict[str, list[str]]:
    """Per function, the normalised instructions of its symbols (and gcc's clones of it:
    `foo.avx2.0`, `foo.part.0`, ...) in objdump's output, each symbol's name first."""
    out: dict[str, list[str]] = {}
    current = None
    for line in objdump.splitlines():
        m = SYMBOL.match(line.strip())
        if m:
            fn = _symbol_matches(m["name"], functions)
            current = out.setdefault(fn, []) if fn else None
            if current is not None:
                current.append("<" + m["name"] + ">")
        elif current is not None and line.strip() and not line.startswith("Disassembly of"):
            code = normalise(line)
            if not PADDING.search(code):
                current.append(code)
    return out


def clones_differ(code: str) -> bool:
    """Does the AVX2 clone of a target_clones function differ from its default clone (in the first
    ELF file that holds both)?"""
    for block in code.split("\n== ")[0:]:
        bodies: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("<") and line.endswith(">"):
                kind = "avx2" if ".avx2" in line else "default" if ".default" in line else ""
                current = bodies.setdefault(kind, []) if kind and kind not in bodies else None
            elif current is not None:
                current.append(line)
        if "avx2" in bodies and "default" in bodies:
            return bodies["avx2"] != bodies["default"]
    return False


def machine_code(tree: Path, functions: list[str], objdump: str = "objdump") -> dict[str, str]:
    """Per function, its normalised code in every ELF file below `tree` (relative path first)."""
    parts: dict[str, list[str]] = {fn: [] for fn in functions}
    elves = 0
    for rel in safefs.walk_files(tree):
        try:
            fd = safefs.open_regular(tree, rel)
        except OSError:
            continue
        try:
            if os.read(fd, 4) != ELF_MAGIC or os.fstat(fd).st_size > ELF_LIMIT or elves >= MOST_ELF:
                continue
            elves += 1
            done = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", f"/dev/fd/{fd}"], pass_fds=(fd,),
                                  capture_output=True, text=True, errors="replace", timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        finally:
            os.close(fd)
        for fn, code in disassembly(done.stdout, functions).items():
            parts[fn] += [f"== {rel}", *code]
    return {fn: "\n".join(p) for fn, p in parts.items()}


def check(tree: Path, transforms: list[Transform], run, build: str, build_timeout: float,
          budget_s: float | None = None) -> tuple[list[Transform], list[str]]:
    """The transforms that build and change their function's code; notes on the others."""
    notes: list[str] = []
    if not transforms:
        return [], notes
    scratch = Path(tempfile.mkdtemp(prefix="autoresearch-transforms-"))
    try:
        base, files = scratch / "base", _files(tree)
        copy_tracked(tree, base, files)
        t0 = time.monotonic()
        done = run(build, base, build_timeout, extra_env={}, step="build")
        if done.returncode != 0:
            return [], [f"transformations: not checked: the unpatched build failed in a scratch copy of the tracked "
                        f"files (exit {done.returncode}): {' '.join(done.output[-300:].split())}"]
        took = time.monotonic() - t0
        functions = sorted({fn for t in transforms for fn in t.functions})
        before = machine_code(base, functions)
        shutil.rmtree(base, ignore_errors=True)
        missing = [fn for fn in functions if not before.get(fn)]
        if missing:
            notes.append("transformations: no machine code of " + ", ".join(f"{fn}()" for fn in missing)
                         + " in the ELF files the build wrote (inlined everywhere, or the build left no object)")
        deadline = time.monotonic() + (budget_s if budget_s is not None else min(2 * build_timeout,
                                                                                 max(300.0, 10 * took)))
        kept: list[Transform] = []
        for i, t in enumerate(transforms):
            if time.monotonic() > deadline:
                notes.append("transformations: not checked within the time budget, so not proposed: "
                             + ", ".join(x.key for x in transforms[i:]))
                break
            work = scratch / f"t{i}"
            copy_tracked(tree, work, files)
            for rel, text in t.files.items():
                (work / rel).write_text(text, encoding="utf-8")
            done = run(build, work, build_timeout, extra_env={}, step="build")
            if done.returncode != 0:
                tail = " ".join(done.output[-300:].split())
                notes.append(f"transformations: {t.key} dropped: the patched build failed (exit {done.returncode}): "
                             f"{tail}")
            else:
                after = machine_code(work, t.functions)
                changed = [fn for fn in t.functions if after.get(fn) != before.get(fn)]
                same = t.what == "dispatch" and not clones_differ(after.get(t.functions[0], ""))
                if same:
                    notes.append(f"transformations: {t.key} dropped: its AVX2 clone is the same code as its default "
                                 "clone (nothing in it gains from AVX2)")
                elif not changed:
                    notes.append(f"transformations: {t.key} dropped: the machine code of "
                                 + ", ".join(f"{fn}()" for fn in t.functions)
                                 + " is the same with it (the compiler already did this, or cannot)")
                else:
                    if len(changed) < len(t.functions):
                        t.rationale += (" Its machine code changed in " + ", ".join(f"{fn}()" for fn in changed)
                                        + " only.")
                    kept.append(t)
            shutil.rmtree(work, ignore_errors=True)
        return kept, notes
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def transform_hypotheses(tree: Path, prof: CallProfile, editable: list[str], patches: Path, run, build: str,
                         build_timeout: float, budget_s: float | None = None) -> tuple[list[Hypothesis], list[str]]:
    """One patch per transformation that applies (builds, and changes its function's code), as
    `micro` hypotheses with the profile's evidence; notes on what was refused or dropped."""
    hot = [s for s in prof.functions if s.share >= MIN_SHARE and s.first_line and not s.first_line.startswith("???")
           and s.first_line.rsplit(":", 1)[0].endswith(SOURCES) and matches_any(s.first_line.rsplit(":", 1)[0], editable)]
    hot = hot[:MOST_FUNCTIONS]
    if not hot:
        return [], ["transformations: no hot function (3% or more) defined in an editable C/C++ file"]
    # Any editable function the call graph may show called often for little work (the inline transformation)
    callees = [s for s in prof.functions if s.first_line and s.first_line.rsplit(":", 1)[0].endswith(SOURCES)
               and matches_any(s.first_line.rsplit(":", 1)[0], editable)]
    sources: dict[str, str] = {}
    for rel in {s.first_line.rsplit(":", 1)[0] for s in hot + callees}:
        try:
            sources[rel] = safefs.read_text(tree, rel, SOURCE_LIMIT)
        except (OSError, UnicodeDecodeError):
            continue
    planned, notes = plan(prof, hot, sources, x86_64=platform.machine() in ("x86_64", "AMD64"), most=MOST,
                          callees=callees)
    if planned and shutil.which("objdump") is None:
        return [], notes + ["transformations: not proposed: objdump (binutils) is not installed, so no rewrite could "
                            "be shown to change the code"]
    try:
        kept, more = check(Path(tree), planned, run, build, build_timeout, budget_s)
    except (OSError, RuntimeError) as exc:          # a tree that cannot be copied, git refusing it
        return [], notes + [f"transformations: not checked ({exc}), so none proposed"]
    notes += more
    out = []
    for t in kept:
        patch = patches / f"{t.key}.patch"
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text(unified_patch({rel: (sources[rel], new) for rel, new in t.files.items()}), encoding="utf-8")
        out.append(t.hypothesis(str(patch.resolve())))
    return out, notes
