"""Offline hypotheses for any C/C++ code, made mechanically from a measured profile.

Two kinds, each only where it can be made honestly:

* **Build options** a maintainer can adopt, each a real patch of an editable build file (Makefile,
  *.mk, CMakeLists.txt, meson.build) at the line that sets the optimisation level: `-O3`, link-time
  optimisation (`-flto`), `-funroll-loops`, and target-specific code (`-march=x86-64-v3`, with its
  caveat: such a binary no longer runs on CPUs without AVX2, so a distributed build needs run-time
  dispatch). They act on the whole program, so their Amdahl bound is the whole workload.
* **`restrict`** on the pointer parameters of a hot function whose hot loop the compiler names as
  not vectorised, or versioned, because of possible aliasing: a patch, whose rationale says it is
  correct only if no caller passes overlapping buffers (the checks run; they cannot prove it).
* **Hot functions** of the callgrind profile (jobs/research/callgrind.py), each with its share of
  the simulated cycles, its hot lines, its cache-miss spots and the compiler's remarks on its
  loops. No mechanical patch is honest for these, so they are leads for the Claude agent, with
  the evidence, never a patch the offline agent pretends to have.
"""
from __future__ import annotations

import re
from pathlib import Path

from jobs.guard import safefs
from jobs.guard.mdsafe import Markdown, code, join, md
from jobs.contract.diffs import unified_patch
from jobs.contract.model import Evidence, Hypothesis
from jobs.research.recipes import matches_any
from .callgrind import CallProfile

BUILD_NAMES = ("Makefile", "makefile", "GNUmakefile", "CMakeLists.txt", "meson.build")
FLAGS_LINE = re.compile(r"^\s*(?:export\s+)?(?:C|CXX)FLAGS\s*[:?+]?=.*|.*CMAKE_C(?:XX)?_FLAGS.*|"
                        r"^\s*add_compile_options\(.*|^\s*c_args\s*[:=].*")
OPT = re.compile(r"(?<![\w-])-O([0-3s]|fast)\b")
OPTIONS = [   # id, flag, title, why, caveat
    ("o3", "-O3", "Build with -O3",
     "-O3 adds loop vectorisation, unrolling and more inlining to -O2; gcc and clang make hot loops of "
     "compression and hashing code faster with it or leave them alone", ""),
    ("lto", "-flto", "Build with link-time optimisation (-flto)",
     "link-time optimisation lets the compiler inline and specialise across translation units (the "
     "library's entry points into the caller's loop, static helpers into their one caller)", ""),
    ("unroll", "-funroll-loops", "Build with -funroll-loops",
     "unrolling the hot loops removes loop overhead (compare, branch, counter) per iteration", ""),
    ("march", "-march=x86-64-v3", "Build for x86-64-v3 (AVX2, BMI2, FMA)",
     "target-specific code lets the compiler use AVX2/BMI2 in the hot loops",
     "Caveat: a binary built this way does not run on x86-64 CPUs without AVX2; a distributed build "
     "needs run-time dispatch (function multi-versioning, `target_clones`, or one object per ISA)."),
]


MAX_SOURCE_BYTES = 2 << 20      # a build file or source file larger than this is not read


def build_files(tree: Path, editable: list[str]) -> list[str]:
    out = []
    for rel in safefs.walk_files(tree):     # the research worktree: links are not followed
        name = rel.rsplit("/", 1)[-1]
        if (name in BUILD_NAMES or name.endswith(".mk")) and matches_any(rel, editable):
            out.append(rel)
    return out


def _with_flag(line: str, flag: str) -> str:
    body = line.rstrip("\n")
    if flag == "-O3":
        return OPT.sub("-O3", body, count=1) + "\n"
    for end in ('")', ")"):
        if body.rstrip().endswith(end):
            cut = body.rstrip()
            return cut[: -len(end)] + f" {flag}" + end + "\n"
    return body + f" {flag}\n"


def flag_line(text: str) -> int | None:
    """Index of the line that sets the optimisation level in a flags assignment, or None."""
    for i, line in enumerate(text.splitlines()):
        if FLAGS_LINE.match(line) and OPT.search(line):
            return i
    return None


def build_option_hypotheses(tree: Path, editable: list[str], patches: Path, prof: CallProfile | None,
                            notes: list[str]) -> list[Hypothesis]:
    files = build_files(tree, editable)
    if not files:
        notes.append("build options: no editable build file (Makefile, *.mk, CMakeLists.txt, meson.build) is in "
                     "`editable`; add it there to get build-option patches")
        return []
    out: list[Hypothesis] = []
    for rel in files:
        try:
            text = safefs.read_text(tree, rel, MAX_SOURCE_BYTES, errors="replace")
        except OSError:
            continue
        index = flag_line(text)
        if index is None:
            continue
        lines = text.splitlines(keepends=True)
        level = OPT.search(lines[index])[0]
        for key, flag, title, why, caveat in OPTIONS:
            if flag == "-O3" and level in ("-O3", "-Ofast"):
                notes.append(f"build options: {rel}:{index + 1} already builds with {level}")
                continue
            if flag != "-O3" and flag.split("=")[0] in text:
                notes.append(f"build options: {rel} already uses {flag.split('=')[0]}")
                continue
            new = lines[:index] + [_with_flag(lines[index], flag)] + lines[index + 1:]
            patch = patches / f"build-{key}.patch"
            patch.parent.mkdir(parents=True, exist_ok=True)
            patch.write_text(unified_patch(rel, text, "".join(new)), encoding="utf-8")
            evidence = [Evidence(f"{rel}:{index + 1}", f"`{lines[index].strip()}` sets the optimisation level")]
            if prof is not None and prof.functions:
                hot = ", ".join(f"{s.function} {100 * s.share:.1f}%" for s in prof.functions[:3])
                evidence.append(Evidence("profile:simulated", f"acts on the whole program (bound: 100% of "
                                         f"{prof.total_cycles:,} simulated cycles); hottest: {hot}"))
            out.append(Hypothesis(id=f"build-{key}", title=f"{title} ({rel}:{index + 1})", kind="build",
                                  rationale=why + ". " + caveat if caveat else why + ".",
                                  expected="a few % on compute-bound hot loops, or nothing; the yardstick decides",
                                  evidence=evidence, score=2.0, patch=str(patch.resolve()),
                                  generated="a build-option patch of the offline research",
                                  measured_share=1.0 if prof is not None else None))
        break
    else:
        if not out:
            notes.append(f"build options: no line of {', '.join(files)} sets -O<level> in CFLAGS/CXXFLAGS, "
                         "CMAKE_C_FLAGS or add_compile_options; nothing to patch mechanically")
    return out


def _in_function(where: str, prof: CallProfile, function: str) -> bool:
    return any(s.where == where and s.function == function for s in prof.lines)


def editable_spot(spot, editable: list[str]) -> bool:
    where = spot.first_line or spot.where
    return matches_any(where.rsplit(":", 1)[0], editable)


def hot_function_hypotheses(prof: CallProfile, editable: list[str], notes: list[str], min_share: float = 0.03,
                            most: int = 4) -> list[Hypothesis]:
    """One lead per hot function of an editable file; hot code elsewhere (the benchmark's own, the C
    library) is named in a note, since no patch may change it."""
    out = []
    hot = [s for s in prof.functions if s.share >= min_share]
    # a function whose file callgrind could not name (a build without -g) is not known to be elsewhere
    unknown = [s for s in hot if not s.first_line or s.first_line.startswith("???")]
    elsewhere = [s for s in hot if s not in unknown and not editable_spot(s, editable)]
    if unknown:
        notes.append("hot functions whose source file the profile cannot name (the build has no debug info; "
                     "`simulate.profile_flags` with -g gives file:line), so not proposed: " + ", ".join(
                         f"{s.function} {100 * s.share:.1f}%" for s in unknown))
    if elsewhere:
        notes.append("hot functions outside the editable paths (not proposed): " + ", ".join(
            f"{s.function} ({s.first_line or '?'}) {100 * s.share:.1f}%" for s in elsewhere))
    for fn in [s for s in hot if editable_spot(s, editable)][:most]:
        lines = [s for s in prof.lines if s.function == fn.function][:4]
        misses = [s for s in prof.misses if s.function == fn.function][:3]
        files_lines = {(s.where.rsplit(":", 1)[0], int(s.where.rsplit(":", 1)[1])) for s in lines}
        near = [r for r in prof.remarks if any(r.file == f and abs(r.line - n) <= 3 for f, n in files_lines)][:4]
        pct = 100 * fn.share
        memory = fn.miss_share >= 0.3
        evidence = [Evidence(s.where, f"{100 * s.share:.1f}% of simulated cycles") for s in lines]
        evidence += [Evidence(s.where, f"data-cache-miss spot: {100 * s.share:.0f}% of all miss cycles") for s in misses]
        evidence += [Evidence(r.where, f"compiler: {r.message}") for r in near]
        evidence.append(Evidence("profile:simulated", f"{fn.function} is {pct:.1f}% of the simulated cycles: removing "
                                 f"it entirely saves at most {pct:.1f}%, making it 10% faster saves {pct / 10:.2f}%"))
        alias = any("alias" in r.message for r in near)
        why = (f"{fn.function}() ({fn.first_line}) is the {'memory-bound ' if memory else ''}hot spot of the "
               f"profiled workload: {pct:.1f}% of its simulated cycles, {100 * fn.miss_share:.0f}% of them in "
               "data-cache misses.")
        if near:
            why += " The compiler did not vectorise loops on its hot lines" + (
                " because of possible aliasing (a `restrict` on the pointer parameters may let it, if no caller "
                "passes overlapping buffers)" if alias else "") + "."
        out.append(Hypothesis(
            id=f"hot-{re.sub(r'[^A-Za-z0-9_]+', '-', fn.function)[:50]}",
            title=f"Speed up {fn.function}() ({pct:.1f}% of simulated cycles)",
            kind="memory" if memory else "micro", rationale=why,
            expected=f"at most {pct:.1f}% (Amdahl bound from the measured share)",
            evidence=evidence, score=round(min(3.0, 10 * fn.share), 3), measured_share=fn.share))
    return out


def research_c(tree: Path, config, patches: Path, run, derived: bool = False, cache: Path | None = None,
               ) -> tuple[list[Hypothesis], list[str], CallProfile | None]:
    """The callgrind profile (when `simulate` is configured, or `derived`: the benchmark command
    itself stands in for it) and the hypotheses made from it and from the editable build files:
    (hypotheses, notes saying why a part gave nothing, profile). `cache`: where the profile of this
    commit and workload is kept (`callgrind.cache_file`): reused when there, kept when measured."""
    from .callgrind import load_cached, measure, store
    notes: list[str] = []
    prof = None
    if config.simulate is None:
        notes.append("callgrind profile: not measured: the config declares no `simulate:` workload and "
                     "`timeouts.simulate` is 0 (`simulate: false`)")
    else:
        prof = load_cached(cache)
        if prof is not None:
            notes.append("callgrind profile: reused (measured by an earlier research of this commit, build, workload "
                         "and flags)")
        else:
            try:
                prof = measure(tree, config, run, native_only=derived)
                store(cache, prof)
            except RuntimeError as exc:
                notes.append(f"callgrind profile: not measured ({exc})")
    found: list[Hypothesis] = []
    if config.simulate is None or (derived and prof is None):
        notes.append("build options: proposed only with a simulated yardstick (their effects, a few %, are "
                     "below what wall-clock pairs on a shared machine can decide)" + (
                         "; the benchmark command did not run under callgrind, so none is derived" if derived else ""))
    else:
        found = build_option_hypotheses(tree, list(config.editable), patches, prof, notes)
    if prof is not None:
        found += restrict_hypotheses(tree, prof, list(config.editable), patches)
        hot = hot_function_hypotheses(prof, list(config.editable), notes)
        if not hot:
            notes.append("hot functions: no function takes 3% or more of the simulated cycles")
        found += hot
    return found, notes, prof


def scanned(tree: Path, config, *, sources_ran: bool, findings: int, candidates: int,
            prof: CallProfile | None, hypotheses: int) -> list[Markdown]:
    """research.md's account of what was looked at and what each source could give (the config's
    names, which the repository wrote, escaped by `md`)."""
    from .offline import editable_sources
    r = config.research
    files = editable_sources(tree, config)
    out = [md("## What was scanned"), md(""),
           md("- Memory-pass scan of {} editable C/C++ file(s): {} finding(s).", len(files), findings),
           md("- Recipe sets: {}", join(", ", r.recipes) if r.recipes else md(
               "none configured (`research.recipes`: kernels/recipes has sets for llama.cpp and the demo)")),
           md("- Other backends (gap scan): {}", join(", ", r.backends) if r.backends else md(
               "none configured (`research.backends`)")),
           md("- Forks: {}", join(", ", r.forks) if r.forks else md(
               "none named (`research.forks`); the origin remote's forks are compared only when it is a GitHub "
               "repository")),
           md("- Papers: {}", join(", ", r.papers) if r.papers else md("none configured (`research.papers`)")),
           md("- Roofline: {}", "configured" if r.roofline else md("not configured (`research.roofline`)")),
           md("- Op profile: {}", "configured" if r.profile else md(
               "not configured (`research.profile`, for ggml graphs)")),
           md("- Callgrind profile: {}", md("measured, {:,} simulated cycles of {}", prof.total_cycles,
                                            code(prof.command, 2000)) if prof else "not measured (see the notes)"),
           md("- Maintainer candidates: {}.", candidates),
           md("- Result: {} hypothesis(es).", hypotheses)]
    if not sources_ran:
        out.append(md("- Only the given candidates were evaluated (--agent none): no source was scanned."))
    if hypotheses == 0:
        out += [md(""), md("Nothing to try, so the run stops here (no calibration, no branch). What to do: declare a "
                           "reduced workload (`simulate: {{command: ...}}`) and put the build file in `editable` for a "
                           "profile and build-option patches, pass your own patches with `--candidate`, use the "
                           "Claude agent (`--agent claude`), or name a recipe set (`research.recipes`).")]
    return out + [md("")]


ALIAS = re.compile(r"alias|dependence", re.I)
PARAM_POINTER = re.compile(r"^(?P<type>[^*()\[\]]*?\*+)\s*(?P<name>[A-Za-z_]\w*)$")


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "(<[" and 1 or (-1 if ch in ")>]" else 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def restrict_definition(source: str, function: str, keyword: str = "restrict") -> str | None:
    """`source` with `keyword` added to the pointer parameters of `function`'s definition, or None
    when the definition is not found, has fewer than two such parameters, or already says so."""
    m = re.search(rf"(?m)^[^;#{{}}\n]*\b{re.escape(function)}\s*\(([^()]*)\)\s*\{{", source)
    if not m:
        return None
    params = _split_params(m.group(1))
    changed, pointers = [], 0
    for p in params:
        q = PARAM_POINTER.match(" ".join(p.split()))
        if q and "restrict" not in p and q["type"].count("*") == 1:
            pointers += 1
            lead = p[: len(p) - len(p.lstrip())]
            changed.append(f"{lead}{q['type']}{keyword} {q['name']}")
        else:
            changed.append(p)
    if pointers < 2:
        return None
    return source[: m.start(1)] + ",".join(changed) + source[m.end(1):]


def restrict_hypotheses(tree: Path, prof: CallProfile, editable: list[str], patches: Path,
                        min_share: float = 0.03) -> list[Hypothesis]:
    """A `restrict` patch for each hot editable function whose hot loops the compiler names as
    blocked (or versioned) by possible aliasing."""
    out = []
    for fn in prof.functions:
        if fn.share < min_share or not editable_spot(fn, editable) or not fn.first_line:
            continue
        rel = fn.first_line.rsplit(":", 1)[0]
        hot = {int(s.where.rsplit(":", 1)[1]) for s in prof.lines if s.function == fn.function
               and s.where.startswith(rel + ":")}
        blocked = [r for r in prof.remarks if r.file == rel and ALIAS.search(r.message)
                   and any(abs(r.line - n) <= 3 for n in hot)]
        path = Path(tree) / rel
        if not blocked:
            continue
        try:
            text = safefs.read_text(tree, rel, MAX_SOURCE_BYTES, errors="replace")
        except OSError:
            continue
        new = restrict_definition(text, fn.function, "__restrict" if path.suffix in (".cc", ".cpp", ".cxx", ".hpp")
                                  else "restrict")
        if new is None:
            continue
        patch = patches / f"restrict-{re.sub(r'[^A-Za-z0-9_]+', '-', fn.function)[:50]}.patch"
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text(unified_patch(rel, text, new), encoding="utf-8")
        pct = 100 * fn.share
        out.append(Hypothesis(
            id=patch.stem, title=f"restrict-qualify the pointer parameters of {fn.function}() ({pct:.1f}%)",
            kind="micro",
            rationale=(f"The compiler did not vectorise (or had to version) {fn.function}()'s hot loop because of "
                       "possible aliasing between its pointer parameters; `restrict` promises they never overlap. "
                       "Correct only if no caller passes overlapping buffers: review the callers before merging "
                       "(the checks run, but cannot prove it)."),
            expected=f"at most {pct:.1f}% (Amdahl bound from the measured share)",
            evidence=[Evidence(r.where, f"compiler: {r.message}") for r in blocked[:4]]
            + [Evidence("profile:simulated", f"{fn.function} is {pct:.1f}% of the simulated cycles: at most {pct:.1f}%")],
            score=round(min(3.0, 10 * fn.share), 3), patch=str(patch.resolve()),
            generated="a restrict patch of the offline research (from the compiler's remarks)",
            measured_share=fn.share))
    return out
