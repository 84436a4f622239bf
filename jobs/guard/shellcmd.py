"""Shell command lines this project prints for a reader to paste: the Reproduce block of pr.md
(the CLI's and the bot's), the command that resumes a CLI run. Pure: words in, one line out.

A repository, a pull request or an operator names what goes into them (a branch, a URL, a path,
a candidate's file name); pasted into a shell, a `$(…)`, a backtick, a `;` or a space in one of
them must stay part of one literal word. So every word goes through `quote` (`shlex.quote`),
except a `Raw` fragment the project wrote itself (`"$work/target"`: a variable its own printed
lines set), and `command` is the one way a printed command line is made.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Raw(str):
    """Shell text this project wrote (an expansion of its own variable, a redirection): printed as it is."""
    __slots__ = ()


def quote(word: object) -> str:
    """One literal shell word (a `Raw` fragment as it is)."""
    return word if isinstance(word, Raw) else shlex.quote(str(word))


def under(prefix: Raw, rel: object) -> Raw:
    """`prefix` (e.g. `"$work/target"/`) followed by `rel` as one quoted word."""
    return Raw(prefix + quote(rel))


def env_prefix(names: Iterable[str]) -> Raw:
    """`A="$A" B="$B" `: the variables the benchmark was given, by name only, taken from the
    reader's shell (their values never reach a report, a PR or a log: issue 20, N8); a name that
    is not a shell variable's is left out."""
    return Raw("".join(f'{k}="${k}" ' for k in sorted(names) if _NAME.fullmatch(k)))


def command(*words: object, env: Iterable[str] = ()) -> str:
    """One command line: `env`'s variables by name, then every word quoted (`None` left out)."""
    return env_prefix(env) + " ".join(quote(w) for w in words if w is not None)
