"""Pure: whether a patch's build flags make a binary a project can ship by default (issue 44).

A build flag that ties the binary to the build machine's CPU (`-march=x86-64-v3`, `-march=native`,
a global `-mavx2`), or that changes floating-point semantics (`-Ofast`, `-ffast-math`), can win a
measurement honestly and still be wrong to merge as is: the run keeps its verdict but leaves it off
the branch (`jobs.run.stacking`), and pr.md says why. Decided from what the patch adds (its `+`
lines, less the flags its `-` lines already had), never from a hypothesis's name, so a maintainer's
own patch adding `-march=native` is caught as well as research's `build-march`.
"""
from __future__ import annotations

import re
from collections import Counter

from jobs.contract import diffs

# Baselines every CPU of the architecture runs: a binary built for these is portable.
GENERIC_ARCH = frozenset({"x86-64", "x86_64", "i386", "i486", "i586", "i686", "armv8-a", "armv8", "aarch64",
                          "generic", "rv64gc"})
# The x86-64 micro-architecture levels past the baseline, and what a CPU needs to run them.
LEVELS = {"x86-64-v2": "SSE4.2", "x86-64-v3": "AVX2", "x86-64-v4": "AVX-512"}
# Global instruction-set flags a baseline x86-64 CPU lacks (`-mavx2` in CFLAGS, not a `target` attribute).
ISA_FLAG = re.compile(r"^-m(avx\w*|fma4?|bmi2?|f16c|sse3|ssse3|sse4(?:\.\d|a)?|popcnt|lzcnt|movbe|adx|aes|pclmul|"
                      r"sha|vpclmulqdq|gfni|vaes)$")
FAST_MATH = ("-Ofast", "-ffast-math", "-funsafe-math-optimizations", "-ffinite-math-only")
SOURCE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".inl", ".ipp", ".s", ".S")
FLAG = re.compile(r"(?<![\w./=-])-[A-Za-z][\w=.,+-]*")
DISPATCH = "the runtime-dispatch form (target_clones) is the shippable way"


def _isa_name(name: str) -> str:
    return "AVX-512" if name.startswith("avx512") else name.upper()


def flag_problem(flag: str) -> str:
    """Why one compiler flag is not shippable by default ('' when it is)."""
    key, _, value = flag.partition("=")
    if key in ("-march", "-mcpu") and value:
        if value in GENERIC_ARCH:
            return ""
        if value == "native":
            return (f"{flag} makes a binary for the build machine's CPU, which may not run on other CPUs; "
                    f"{DISPATCH}")
        if value in LEVELS:
            return f"{flag} makes a binary that does not run on x86-64 CPUs without {LEVELS[value]}; {DISPATCH}"
        return f"{flag} makes a binary that needs {value}'s instruction set, which not every CPU has; {DISPATCH}"
    if key == "-mtune" and value == "native":
        return (f"{flag} tunes the code for the build machine's CPU: the binary depends on where it is built and "
                "its gain measured here may not hold on users' CPUs; a named -mtune (or none) is reproducible")
    if m := ISA_FLAG.match(flag):
        return (f"{flag} makes a binary that does not run on x86-64 CPUs without {_isa_name(m[1])}; {DISPATCH}")
    if flag in FAST_MATH:
        return (f"{flag} changes floating-point semantics (it lets the compiler assume no NaN or infinity and "
                "reorder arithmetic), so results may differ from the standard build's; that is the project's "
                "decision, not a default")
    return ""


def added_flags(patch: str) -> list[str]:
    """The compiler flags a patch adds to files that are not C/C++ sources (build files, scripts),
    less those its removed lines of the same file already had; in order, each once."""
    found: list[str] = []
    for fd in diffs.parse(patch):
        if fd.path.endswith(SOURCE_SUFFIXES):
            continue
        before = Counter(f for line in fd.removed for f in FLAG.findall(line))
        after = Counter(f for line in fd.added for f in FLAG.findall(line))
        found += [f for f in after if after[f] > before[f]]
    return list(dict.fromkeys(found))


def problems(patch: str) -> list[str]:
    """Why the patch's build is not shippable by default, one reason per flag ([] when it is)."""
    return [why for flag in added_flags(patch) if (why := flag_problem(flag))]


def problem(patch: str) -> str:
    """The reasons of `problems` in one sentence ('' when the patch is shippable by default)."""
    return "; and ".join(problems(patch))
