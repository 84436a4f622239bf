"""Pure: a catalogue of profile-guided source transformations of a C/C++ library's hot code.

Each rewrites one source text where the callgrind profile points (a hot function, the loop
around its hottest line, the line holding its data-cache misses) and refuses (None) whatever it
cannot parse confidently:

* **dispatch**: `__attribute__((target_clones("avx2","default")))` on a hot function's definition:
  what `-march=x86-64-v3` gives the loop, but shippable (the default clone keeps the portable
  code; the ifunc resolver picks at load time, and Valgrind, which runs AVX2, picks the AVX2 one).
  Not on an inline function, a template, one whose address is taken or compared, nor in a header.
* **unroll** / **ivdep**: `#pragma GCC unroll 4` before the innermost `for`/`while`/`do` enclosing the
  hottest line; `#pragma GCC ivdep` there when the compiler's remark on it names aliasing or a
  dependence.
* **prefetch**: `__builtin_prefetch(&a[i + D])` before a data-cache-miss line of a braced loop
  whose induction variable indexes a plain array on that line (`a[i]`, `p[i + k]`), one patch per
  distance D.
* **inline**: `__attribute__((always_inline))` on the static functions the call graph shows called
  often for little work a call (`inline_callees`), one patch for up to four of them; a library's own
  noinline macro on one is replaced by `static`.
* **hot** / **flatten**: `__attribute__((hot))` on the hot functions, `__attribute__((flatten))`
  on the hottest one.

`plan` chooses what to apply from the profile; jobs/agent/transforms/check.py builds each one
and keeps it only when it compiles and the function's machine code changes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobs.contract.model import Evidence, Hypothesis

IDENT = re.compile(r"[A-Za-z_]\w*")
HEADERS = (".h", ".hh", ".hpp", ".hxx", ".inl")
CXX = (".cc", ".cpp", ".cxx", ".C")
DISTANCES = (8, 32)
MIN_CALLS = 1000        # a callee called fewer times in the workload saves too little by inlining
MOST_PER_CALL = 1000    # simulated cycles per call above which a call's own overhead is under ~1% of it
MOST_INLINED = 4        # callees forced inline in one patch
MIN_TAKEN = 0.25        # of its caller's calls that reach a callee: inlined where rarely reached, its frame costs every call
LINES_TRIED = 8         # a hot function's hottest lines looked at for a loop to put a pragma on
ALIAS = re.compile(r"alias|dependence", re.I)
_DIRECTIVE = re.compile(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*")
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(source: str) -> str:
    """`source` with comments, string/char literals and preprocessor lines turned into spaces (newlines kept), so
    braces, parentheses and names are counted in code only; offsets are the source's."""
    spaces = lambda m: re.sub(r"[^\n]", " ", m[0])       # noqa: E731
    code = _DIRECTIVE.sub(spaces, _TOKEN.sub(spaces, source))
    # `extern "C" { ... }` (its string now blank) wraps file-scope definitions in headers: its braces
    # are not a scope, so they are blanked too (xxhash.h defines every function inside one)
    for m in reversed(list(re.finditer(r"\bextern\s+\{", code))):
        close = _match(code, m.end() - 1)
        if close is not None:
            code = code[:m.end() - 1] + " " + code[m.end():close] + " " + code[close + 1:]
    return code


def _match(text: str, open_at: int) -> int | None:
    """Offset of the bracket closing the one at `open_at`, or None (unbalanced)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    want = [pairs[text[open_at]]]
    for i in range(open_at + 1, len(text)):
        ch = text[i]
        if ch in pairs:
            want.append(pairs[ch])
        elif ch in ")}]":
            if ch != want[-1]:
                return None
            want.pop()
            if not want:
                return i
    return None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)          # 0-based


@dataclass
class Definition:
    start_line: int     # 0-based first line of the declaration (specifiers, return type)
    name_at: int        # offset of the function's name
    body_open: int      # offset of `{`
    body_close: int     # offset of `}`
    specifiers: str     # the code from the declaration's start to the name


def find_definition(source: str, function: str, code: str | None = None) -> Definition | None:
    """The one top-level definition of `function` in `source`; None if there is none, more than one
    (e.g. under #if), or one this parser does not read confidently (K&R parameters, a trailing
    qualifier, a preprocessor line inside its declaration)."""
    if not IDENT.fullmatch(function):
        return None
    code = blank(source) if code is None else code
    found, depth, last = [], 0, 0
    for m in re.finditer(rf"\b{re.escape(function)}\s*\(", code):
        depth += code.count("{", last, m.start()) - code.count("}", last, m.start())
        last = m.start()
        if depth != 0:
            continue                                      # not at file scope (a call, a class, a namespace)
        close = _match(code, m.end() - 1)
        if close is None:
            continue
        rest = code[close + 1:]
        body = close + 1 + (len(rest) - len(rest.lstrip()))
        if body >= len(code) or code[body] != "{":
            continue                                      # a declaration, a call, or something unread
        end = _match(code, body)
        if end is None:
            return None
        found.append((m.start(), body, end))
    if len(found) != 1:
        return None
    name_at, body, end = found[0]
    lines, clines = source.splitlines(keepends=True), code.splitlines()
    first = start = _line_of(code, name_at)
    if re.search(r"[;{}]", code[code.rfind("\n", 0, name_at) + 1:name_at]):
        return None                       # another statement ends on the name's line
    for i in range(first - 1, -1, -1):    # the specifiers above the name, up to the previous statement
        if lines[i].lstrip().startswith("#") or not clines[i].strip() or re.search(r"[;{}]", clines[i]):
            break
        start = i
    spec = code[sum(len(x) for x in lines[:start]):name_at]
    if re.search(r"\btemplate\b|::|\boperator\b|=", spec) or spec.rstrip().endswith((",", "(")):
        return None
    return Definition(start, name_at, body, end, " ".join(spec.split()))


def with_attribute(source: str, function: str, attribute: str, refuse_inline: bool = True) -> str | None:
    """`source` with `__attribute__((attribute))` on its own line before `function`'s definition."""
    d = find_definition(source, function)
    if d is None or attribute.split("(")[0] in d.specifiers or (refuse_inline and re.search(r"\binline\b", d.specifiers)):
        return None
    lines = source.splitlines(keepends=True)
    return "".join(lines[:d.start_line] + [f"__attribute__(({attribute}))\n"] + lines[d.start_line:])


def _expansions(source: str, macro: str) -> list[str]:
    """What each `#define macro ...` (an object-like macro) in `source` expands to."""
    return [m[1] for m in re.finditer(rf"(?m)^[ \t]*#[ \t]*define[ \t]+{re.escape(macro)}(?![\w(])[ \t]*(.*)$", source)]


def always_inline(source: str, function: str) -> str | None:
    """`source` with `function` forced inline into its callers: `__attribute__((always_inline))` on
    its own line before the definition, and `static inline` for its `static`. Only a function of
    internal linkage (in C an `inline` function without `static` emits no copy for other files to
    call); a specifier macro that every `#define` of it in the file expands to `static` with a
    noinline attribute (the library's own "do not inline", e.g. for code size) is written as plain
    `static`. None where it does not apply (already forced, not static, not read confidently)."""
    d = find_definition(source, function)
    if d is None:
        return None
    code = blank(source)
    start = sum(len(x) for x in source.splitlines(keepends=True)[:d.start_line])
    words = list(IDENT.finditer(code, start, d.name_at))
    edits: list[tuple[int, int, str]] = []          # (from, to, text) in `source`, applied right to left
    static = next((w for w in words if w[0] == "static"), None)
    inline = any(w[0] == "inline" for w in words)
    for w in words:
        expansions = _expansions(source, w[0])
        if any(re.search(r"always_inline|__forceinline", e) for e in expansions):
            return None
        if static is None and expansions and all(re.search(r"\bstatic\b", e) for e in expansions):
            static = w
            if any("noinline" in e for e in expansions):
                edits.append((w.start(), w.end(), "static" if inline else "static inline"))
                inline = True
    if static is None or re.search(r"always_inline|noinline", code[start:d.name_at]):
        return None
    if static[0] == "static" and not inline:
        edits.append((static.start(), static.end(), "static inline"))
    edits.append((start, start, "__attribute__((always_inline))\n"))
    for a, b, text in sorted(edits, key=lambda e: -e[0]):
        source = source[:a] + text + source[b:]
    return source


def address_taken(source: str, function: str, d: Definition) -> bool:
    """Is `function` named anywhere but in a call or its own definition (its address taken, stored,
    compared)? A multi-versioned function's address is its resolver's, so such a use is refused."""
    code = blank(source)
    outside = code[:d.name_at] + " " * (d.body_open - d.name_at) + code[d.body_open:]
    return any(not re.match(r"\s*\(", outside[m.end():]) for m in re.finditer(rf"\b{re.escape(function)}\b", outside))


def dispatch(source: str, function: str, rel: str) -> str | None:
    if rel.endswith(HEADERS):
        return None
    d = find_definition(source, function)
    if d is None or re.search(r"\binline\b|\btarget", d.specifiers) or address_taken(source, function, d):
        return None
    return with_attribute(source, function, 'target_clones("avx2","default")')


@dataclass
class Loop:
    header: int          # 0-based line of `for`/`while`
    end: int             # 0-based last line of its body
    braced: bool
    open_paren: int      # offset of the header's `(`
    close_paren: int


def loops(source: str, d: Definition, code: str | None = None) -> list[Loop]:
    """The `for`/`while`/`do` loops of a definition's body whose keyword starts its line (loops
    inside macros are left out; a do-while's `while (…);` tail is its loop, not another)."""
    code = blank(source) if code is None else code
    lines = code.splitlines()
    out = []
    for m in re.finditer(r"\b(for|while)\s*\(", code[d.body_open:d.body_close]):
        at = d.body_open + m.start()
        line = _line_of(code, at)
        if lines[line].strip()[:len(m[1])] != m[1] or line == 0 or lines[line - 1].rstrip().endswith("\\"):
            continue
        close = _match(code, d.body_open + m.end() - 1)
        if close is None:
            continue
        nxt = close + 1 + (len(code[close + 1:]) - len(code[close + 1:].lstrip()))
        if nxt >= len(code) or code[nxt] == ";":
            continue                                   # `while (x);`: a do-while's tail or an empty loop
        if code[nxt] == "{":
            end, braced = _match(code, nxt), True
        else:
            depth, end, braced = 0, None, False
            for i in range(nxt, d.body_close):
                ch = code[i]
                depth += ch in "([" and 1 or (-1 if ch in ")]" else 0)
                if depth == 0 and ch == ";":
                    end = i
                    break
                if depth == 0 and ch == "{":
                    end = _match(code, i)
                    break
        if end is not None:
            out.append(Loop(line, _line_of(code, end), braced, code.index("(", at), close))
    for m in re.finditer(r"\bdo\s*\{", code[d.body_open:d.body_close]):   # `do { … } while (…);` (gcc's
        at = d.body_open + m.start()                                       # unroll pragma takes it too)
        line = _line_of(code, at)
        if not lines[line].lstrip().startswith("do") or (line and lines[line - 1].rstrip().endswith("\\")):
            continue
        body_end = _match(code, d.body_open + m.end() - 1)
        tail = re.match(r"\s*while\s*\(", code[body_end + 1:]) if body_end is not None else None
        if tail is None:
            continue
        open_paren = body_end + 1 + tail.end() - 1
        close = _match(code, open_paren)
        if close is not None:
            out.append(Loop(line, _line_of(code, close), True, open_paren, close))
    return out


def containing_function(source: str, line: int) -> str | None:
    """The function whose top-level definition holds 1-based `line` in `source`, or None. A profile
    names the function a hot line was *counted in*; when a callee was inlined there (lz4's
    LZ4_compress_generic into LZ4_compress_fast_extState), the line lies in the callee's text, and a
    pragma or prefetch goes there: it applies wherever the callee is inlined."""
    code = blank(source)
    for name in dict.fromkeys(m[1] for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code)):
        if name in KEYWORDS:
            continue
        d = find_definition(source, name, code)
        if d is not None and _line_of(code, d.body_open) <= line - 1 <= _line_of(code, d.body_close):
            return name
    return None


KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "defined",
                      "__attribute__", "__builtin_expect", "alignof", "_Alignof", "typeof", "__typeof__"})


def enclosing_loop(source: str, d: Definition, line: int, code: str | None = None) -> Loop | None:
    """The innermost loop whose header or body holds the 0-based `line`."""
    inside = [lp for lp in loops(source, d, code) if lp.header <= line <= lp.end]
    return max(inside, key=lambda lp: lp.header) if inside else None


def with_pragma(source: str, function: str, line: int, pragma: str) -> str | None:
    """`#pragma <pragma>` before the innermost loop of `function` enclosing 1-based `line`."""
    d = find_definition(source, function)
    if d is None or not _line_of(source, d.body_open) <= line - 1 <= _line_of(source, d.body_close):
        return None
    lp = enclosing_loop(source, d, line - 1)
    lines = source.splitlines(keepends=True)
    if lp is None or lines[lp.header - 1].lstrip().startswith("#pragma"):
        return None
    head = blank(source)[lp.open_paren + 1:lp.close_paren].split(";")
    if len(head) == 3 and not head[1].strip():
        return None             # `for (;;)`: gcc refuses an unroll pragma on a loop without a condition
    indent = lines[lp.header][:len(lines[lp.header]) - len(lines[lp.header].lstrip())]
    return "".join(lines[:lp.header] + [f"{indent}#pragma {pragma}\n"] + lines[lp.header:])


STEP = re.compile(r"^\s*(?:\+\+\s*(?P<a>\w+)|(?P<b>\w+)\s*\+\+|(?P<c>\w+)\s*\+=\s*\w+)\s*$")
INDEX = r"(?<![\w.>\]])(?P<base>[A-Za-z_]\w*)\s*\[\s*{v}\s*(?:\+\s*(?P<off>[A-Za-z_]\w*|\d+)\s*)?\]"


def with_prefetch(source: str, function: str, line: int, distance: int) -> str | None:
    """`__builtin_prefetch(&a[i + k + distance], rw)` for each plain array indexed by the loop
    variable on 1-based `line`, inserted before it, when the line starts a statement inside a
    braced `for` loop of `function` that steps its variable by `++` or `+=`."""
    d = find_definition(source, function)
    code = blank(source)
    if d is None or not _line_of(code, d.body_open) < line - 1 < _line_of(code, d.body_close):
        return None
    lp = enclosing_loop(source, d, line - 1, code)
    clines, lines = code.splitlines(), source.splitlines(keepends=True)
    if lp is None or not lp.braced or lp.header >= line - 1 or not clines[lp.header].lstrip().startswith("for"):
        return None
    parts = code[lp.open_paren + 1:lp.close_paren].split(";")
    step = STEP.match(parts[2]) if len(parts) == 3 else None
    if step is None:
        return None
    var = step["a"] or step["b"] or step["c"]
    prev = next((x for x in reversed(clines[lp.header:line - 1]) if x.strip()), "")
    here = clines[line - 1].strip()
    if not prev.rstrip().endswith((";", "{", "}")) or not re.match(r"[\w*(]", here) or \
            re.match(r"(?:else|case|default|return)\b", here):
        return None
    seen, calls = set(), []
    for m in re.finditer(INDEX.format(v=re.escape(var)), clines[line - 1]):
        if m["base"] in seen or m["base"] in ("sizeof", "return"):
            continue
        seen.add(m["base"])
        write = re.match(r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", clines[line - 1][m.end():]) is not None
        offset = f" + {m['off']}" if m["off"] else ""
        calls.append(f"__builtin_prefetch(&{m['base']}[{var}{offset} + {distance}], {int(write)});")
    if not calls or len(calls) > 3:
        return None
    indent = lines[line - 1][:len(lines[line - 1]) - len(lines[line - 1].lstrip())]
    return "".join(lines[:line - 1] + [indent + " ".join(calls) + "\n"] + lines[line - 1:])


@dataclass
class Transform:
    """One proposed rewrite: the new text of each file it changes, the functions whose machine code
    must change for it to count as applied, and what research.md and the PR say about it."""
    key: str
    what: str                   # dispatch | unroll | ivdep | prefetch | inline | hot | flatten
    files: dict[str, str]       # rel -> new source
    functions: list[str]
    title: str
    rationale: str
    evidence: list[Evidence]
    share: float
    weight: float = 1.0
    notes: list[str] = field(default_factory=list)
    variant_of: str | None = None   # the transform this one applies at another setting (a factor, a distance)

    def hypothesis(self, patch: str) -> Hypothesis:
        pct = 100 * self.share
        return Hypothesis(id=self.key, title=self.title, kind="micro", rationale=self.rationale,
                          expected=f"at most {pct:.1f}% (Amdahl bound from the measured share)",
                          evidence=self.evidence, score=round(self.weight * min(3.0, 10 * self.share), 3),
                          patch=patch, generated=f"a {self.what} transformation of the offline research "
                                                 "(profile-guided, checked to compile and change the code)",
                          variant_of=self.variant_of)


def bare(function: str) -> str:
    """A profile's function name without a C++ argument list (`dot(int const*, int)` -> `dot`) or a
    suffix gcc gives its clones of it (`finalize.constprop.0` -> `finalize`)."""
    return re.sub(r"\.(?:constprop|isra|part|cold|lto_priv|avx2|default)\b.*$", "", function.split("(", 1)[0].strip())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text)[:50]


def _bound(fn, also: str = "") -> Evidence:
    pct = 100 * fn.share
    return Evidence("profile:simulated", f"{fn.function} is {pct:.1f}% of the simulated cycles{also}: this "
                    f"transformation saves at most {pct:.1f}%")


def inline_callees(prof, callees: list, sources: dict[str, str]) -> tuple[Transform | None, list[str]]:
    """One patch forcing inline the functions (`callees`: spots of editable functions defined in
    `sources`) that the profile's call graph shows called at least MIN_CALLS times for at most
    MOST_PER_CALL simulated cycles a call: the work per call is small, so the call itself (argument
    moves, saved registers, a jump out of the loop and back, and no optimisation across it) is a
    measurable part of it. Only from a caller that reaches it on at least MIN_TAKEN of its own calls:
    a rarely taken path inlined into a hot function (a long-input branch of a hash) makes its frame
    and register saves cost every call. At most MOST_INLINED, the heaviest first."""
    spots = {bare(s.function): s for s in callees}
    # A caller the profile places in a file outside `sources` (the benchmark's main calling the
    # library's entry point) is in another file: nothing there can be inlined into it from here.
    elsewhere = {bare(s.function) for s in prof.functions
                 if s.first_line and s.first_line.rsplit(":", 1)[0] not in sources}
    entered: dict[str, int] = {}                 # function -> calls into it
    for _, callee, n, _ in prof.calls:
        entered[bare(callee)] = entered.get(bare(callee), 0) + n
    into: dict[str, list] = {}                   # callee -> [calls, inclusive cycles, callers]
    for caller, callee, n, cycles in prof.calls:
        name, by = bare(callee), bare(caller)
        if name in spots and by != name and by not in elsewhere and n >= MIN_TAKEN * entered.get(by, n):
            e = into.setdefault(name, [0, 0, []])
            e[0], e[1] = e[0] + n, e[1] + cycles
            if by not in e[2]:
                e[2].append(by)
    files: dict[str, str] = {}
    chosen: list[tuple[str, list]] = []
    notes: list[str] = []
    for name, e in sorted(into.items(), key=lambda kv: -kv[1][1]):
        calls, cycles, _ = e
        if calls < MIN_CALLS or cycles > MOST_PER_CALL * calls or len(chosen) == MOST_INLINED:
            continue
        rel = spots[name].first_line.rsplit(":", 1)[0]
        new = always_inline(files.get(rel, sources[rel]), name)
        if new is None:
            notes.append(f"transformations: {name}() is called {calls:,} times for {cycles // calls:,} simulated "
                         "cycles a call, but is not forced inline (not static, already forced, or not read confidently)")
            continue
        files[rel] = new
        chosen.append((name, e))
    if not chosen:
        return None, notes
    share = sum(e[1] for _, e in chosen) / max(1, prof.total_cycles)
    names = ", ".join(f"{n}()" for n, _ in chosen)
    callers = sorted({c for _, e in chosen for c in e[2]})
    evidence = [Evidence(spots[n].first_line, f"{n}() is called {e[0]:,} times from "
                         + ", ".join(f"{c}()" for c in e[2][:3]) + f" for {e[1] // e[0]:,} simulated cycles a call "
                         f"({100 * e[1] / max(1, prof.total_cycles):.1f}% of all, inclusive)") for n, e in chosen]
    evidence.append(Evidence("profile:simulated", f"the calls to {names} are {100 * share:.1f}% of the simulated "
                             f"cycles: inlining saves a part of that, at most {100 * share:.1f}%"))
    return Transform(
        f"inline-{_slug(chosen[0][0])}" + (f"-and-{len(chosen) - 1}" if len(chosen) > 1 else ""), "inline", files,
        callers,
        f"inline {names} into their callers (always_inline) ({100 * share:.1f}%)",
        f"`__attribute__((always_inline))` (and `static inline`) on {names}: the call graph of the profile "
        "shows each called many times for little work a call, so the call itself (argument set-up, saved "
        "registers, a jump out of the caller's loop and back) is a measurable part of it, and inlined the "
        "compiler optimises callee and caller together. Where the library marked one noinline (its own "
        "macro), that choice, usually made for code size, is what this patch reverses: code size grows.",
        evidence, share, 0.95), notes


def plan(prof, hot: list, sources: dict[str, str], x86_64: bool = True, most: int = 10,
         callees: list | None = None) -> tuple[list[Transform], list[str]]:
    """What to try, best first, at most `most`: for each hot function (`hot`: spots of the profile's
    editable functions, hottest first) whose definition is in `sources` (rel -> text), dispatch,
    the unroll/ivdep pragmas at its hottest line's loop, prefetches at its miss lines; then `hot`
    on the set and `flatten` on the hottest. Refusals become notes."""
    out: list[Transform] = []
    notes: list[str] = []
    for fn in hot:
        rel = fn.first_line.rsplit(":", 1)[0]
        src, name, pct = sources.get(rel), bare(fn.function), 100 * fn.share
        if src is None or find_definition(src, name) is None:
            notes.append(f"transformations: {name}() has no definition this parser reads confidently in {rel}; "
                         "none applied")
            continue
        lines = [s for s in prof.lines if s.function == fn.function and s.where.rsplit(":", 1)[0] == rel]
        if x86_64:
            new = dispatch(src, name, rel)
            if new is None:
                notes.append(f"transformations: no run-time dispatch for {name}() (inline, a template, its address "
                             "taken, a header, or already targeted)")
            else:
                out.append(Transform(
                    f"clones-{_slug(name)}", "dispatch", {rel: new}, [name],
                    f"dispatch {name}() for AVX2 at run time (target_clones) ({pct:.1f}%)",
                    f"`__attribute__((target_clones(\"avx2\",\"default\")))` on {name}() ({fn.first_line}) compiles "
                    "it twice, for AVX2 and for the baseline ISA, and an ifunc resolver picks one when the library "
                    "loads: the hot loops get AVX2 (what -march=x86-64-v3 gives) while the library still runs on "
                    "any x86-64 CPU. Valgrind runs AVX2 (not AVX-512), so the yardstick counts the AVX2 clone. A "
                    "multi-versioned function is no longer inlined into its callers.",
                    [Evidence(s.where, f"{100 * s.share:.1f}% of simulated cycles") for s in lines[:2]] + [_bound(fn)],
                    fn.share, 0.95))   # below the lead of the same function on a tie
        # The hottest line of the function that a loop encloses (the hottest may be straight-line code,
        # e.g. a hash computed once per position); it may lie in a callee inlined here: the pragma goes
        # into the callee's text (it applies wherever that is inlined), the check compares `name`'s code.
        looped = [(s, h) for s in lines[:LINES_TRIED] for h in [name, containing_function(src, int(s.where.rsplit(":", 1)[1]))]
                  if h and with_pragma(src, h, int(s.where.rsplit(":", 1)[1]), "GCC unroll 4") is not None]
        if lines and not looped:
            notes.append(f"transformations: no loop of {name}() (or a function inlined into it) encloses any of its "
                         f"{min(len(lines), LINES_TRIED)} hottest lines; no unroll")
        if looped:
            top, holder = looped[0]
            n = int(top.where.rsplit(":", 1)[1])
            remarks = [r for r in prof.remarks if r.file == rel and abs(r.line - n) <= 3]
            for key, what, pragma, weight in (("unroll", "unroll", "GCC unroll 4", 0.9),
                                              ("unroll8", "unroll", "GCC unroll 8", 0.85),
                                              ("ivdep", "ivdep", "GCC ivdep", 0.9)):
                blocked = [r for r in remarks if ALIAS.search(r.message)]
                if what == "ivdep" and not blocked:
                    continue
                new = with_pragma(src, holder, n, pragma)
                if new is None:
                    notes.append(f"transformations: no loop of {holder}() encloses {top.where} where a pragma can go; "
                                 f"no {what}")
                    break
                ev = [Evidence(top.where, f"hottest line of {name}(): {100 * top.share:.1f}% of simulated cycles")]
                ev += [Evidence(r.where, f"compiler: {r.message}") for r in (blocked if what == "ivdep" else remarks)[:2]]
                inlined = f" (in {holder}(), inlined there)" if holder != name else ""
                why = (f"`#pragma {pragma}` on the loop around {top.where}{inlined}, the hottest line of {name}(): "
                       + (f"unrolled {pragma.rsplit(' ', 1)[1]} times, the loop runs that fraction of its "
                          "compare-and-branch steps and the compiler can schedule that many iterations' loads "
                          "together (gcc's own heuristics unroll little at -O2)." if what == "unroll" else
                          "tells the compiler the loop carries no dependence through memory, so it may vectorise "
                          "it without the aliasing check its remark names. Correct only if no iteration writes "
                          "what another reads: review the callers before merging."))
                out.append(Transform(f"{key}-{_slug(name)}", what, {rel: new}, [name],
                                     f"{'unroll ' + pragma.rsplit(' ', 1)[1] + 'x' if what == 'unroll' else 'ivdep on'} "
                                     f"the hot loop of {name}() at "
                                     f"{top.where} ({pct:.1f}%)", why, ev + [_bound(fn)], fn.share, weight,
                                     variant_of=f"unroll-{_slug(name)}" if key == "unroll8" else None))
        for miss in [s for s in prof.misses if s.function == fn.function and s.where.rsplit(":", 1)[0] == rel][:1]:
            at = int(miss.where.rsplit(":", 1)[1])
            holder = name if with_prefetch(src, name, at, DISTANCES[0]) is not None else (
                containing_function(src, at) or name)
            for dist in DISTANCES:
                new = with_prefetch(src, holder, at, dist)
                if new is None:
                    notes.append(f"transformations: no prefetch at {miss.where} ({name}()): not a plain array indexed "
                                 "by the variable of a braced for loop there")
                    break
                out.append(Transform(
                    f"prefetch{dist}-{_slug(name)}", "prefetch", {rel: new}, [name],
                    f"prefetch {dist} elements ahead at {miss.where} in {name}() ({pct:.1f}%)",
                    f"`__builtin_prefetch` {dist} iterations ahead of the loads at {miss.where}, which hold "
                    f"{100 * miss.share:.0f}% of the run's data-cache-miss cycles. A prefetch past the array's end "
                    "does not fault. The simulated yardstick has no prefetcher and counts only the added "
                    "instructions, so let the wall clock decide this one.",
                    [Evidence(miss.where, f"data-cache-miss spot: {100 * miss.share:.0f}% of all miss cycles"),
                     _bound(fn, f", {100 * fn.miss_share:.0f}% of it in data-cache misses")], fn.share, 0.6,
                    variant_of=None if dist == DISTANCES[0] else f"prefetch{DISTANCES[0]}-{_slug(name)}"))
    inlined, more = inline_callees(prof, [fn for fn in callees or [] if fn.first_line.rsplit(":", 1)[0] in sources
                                          and find_definition(sources[fn.first_line.rsplit(":", 1)[0]],
                                                              bare(fn.function)) is not None], sources)
    notes += more
    if inlined is not None:
        out.append(inlined)
    defined = [fn for fn in hot if fn.first_line.rsplit(":", 1)[0] in sources
               and find_definition(sources[fn.first_line.rsplit(":", 1)[0]], bare(fn.function)) is not None]
    files: dict[str, str] = {}
    marked = []
    for fn in defined:
        rel = fn.first_line.rsplit(":", 1)[0]
        new = with_attribute(files.get(rel, sources[rel]), bare(fn.function), "hot", refuse_inline=False)
        if new is not None:
            files[rel], marked = new, marked + [fn]
    if marked:
        names = ", ".join(f"{bare(fn.function)}()" for fn in marked)
        out.append(Transform(
            "hot-attribute", "hot", files, [bare(fn.function) for fn in marked],
            f"mark the hot functions {names} __attribute__((hot)) ({100 * sum(f.share for f in marked):.1f}%)",
            f"`__attribute__((hot))` on {names}, the hot functions of the profile: the compiler optimises them "
            "more aggressively and places them together (.text.hot), away from cold code.",
            [Evidence(fn.first_line, f"{fn.function}: {100 * fn.share:.1f}% of simulated cycles") for fn in marked]
            + [Evidence("profile:simulated", f"these functions are {100 * sum(f.share for f in marked):.1f}% of the "
                        "simulated cycles: the bound")], sum(f.share for f in marked), 0.5))
    if defined:
        fn = defined[0]
        rel = fn.first_line.rsplit(":", 1)[0]
        name = bare(fn.function)
        new = with_attribute(sources[rel], name, "flatten")
        if new is not None:
            out.append(Transform(
                f"flatten-{_slug(name)}", "flatten", {rel: new}, [name],
                f"flatten {name}(): inline every call in it ({100 * fn.share:.1f}%)",
                f"`__attribute__((flatten))` on {name}(), the hottest function: every call inside it is "
                "inlined (where the callee's body is visible), so its loop pays no call overhead and the compiler "
                "optimises callee and loop together. Code size grows.", [_bound(fn)], fn.share, 0.7))
    out.sort(key=lambda t: -t.weight * min(3.0, 10 * t.share))
    if len(out) > most:
        notes.append(f"transformations: {len(out) - most} more not tried (at most {most}): "
                     + ", ".join(t.key for t in out[most:]))
    return out[:most], notes
