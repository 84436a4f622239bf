"""The comment command grammar. Pure: performs no I/O of its own.

A command is one line of a comment that starts with ``/autoresearch``::

    /autoresearch optimize cpu [metric=NAME] [platforms=x86,arm] [budget=USD]
    /autoresearch approve | cancel | status | bench

Comment text is data, never instructions: only a line that parses here steers the bot, and
lines inside fenced code blocks or quotes (``>``) are not commands. The first command line
of a comment is the one that counts.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jobs.config import Overrides

PREFIX = "/autoresearch"
VERBS = ("optimize", "approve", "cancel", "status", "bench")
TARGETS = ("cpu",)
_METRIC = re.compile(r"^[\w.µ]+$")
_PLATFORM = re.compile(r"^[A-Za-z0-9_-]+$")

HELP = (
    "Commands (one per comment, on a line of its own):\n"
    "- `/autoresearch optimize cpu [metric=NAME] [platforms=x86,arm] [budget=USD]` — plan and start a run\n"
    "- `/autoresearch approve` — approve the plan shown (maintainers and configured approvers)\n"
    "- `/autoresearch cancel` — stop queued and running jobs of this issue's run\n"
    "- `/autoresearch status` — refresh the status comment\n"
    "- `/autoresearch bench` — on an autoresearch pull request: re-measure its head against its base"
)


@dataclass(frozen=True)
class Command:
    verb: str                                   # one of VERBS
    target: str | None = None                   # "cpu" for optimize
    overrides: Overrides = Overrides()          # metric=, platforms=, budget= (optimize only)


@dataclass(frozen=True)
class Invalid:
    """A line that starts with the prefix but does not parse; answered with `reason` + HELP."""
    line: str
    reason: str


def command_lines(body: str) -> list[str]:
    """Lines that start with the prefix, outside fenced code blocks and quotes."""
    out, fenced = [], False
    for raw in (body or "").splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            fenced = not fenced
            continue
        if fenced or line.startswith(">"):
            continue
        if line == PREFIX or line.startswith(PREFIX + " ") or line.startswith(PREFIX + "\t"):
            out.append(line)
    return out


def parse_line(line: str) -> Command | Invalid:
    words = line.split()[1:]
    if not words:
        return Invalid(line, "no command given")
    verb, rest = words[0].lower(), words[1:]
    if verb not in VERBS:
        return Invalid(line, f"unknown command `{verb}`")
    if verb != "optimize":
        if rest:
            return Invalid(line, f"`{verb}` takes no arguments")
        return Command(verb)
    if not rest or rest[0].lower() not in TARGETS:
        return Invalid(line, "say what to optimize: `/autoresearch optimize cpu`")
    args: dict[str, str] = {}
    for word in rest[1:]:
        key, eq, value = word.partition("=")
        key = key.lower()
        if not eq or not value:
            return Invalid(line, f"`{word}`: arguments look like `name=value`")
        if key not in ("metric", "platforms", "budget"):
            return Invalid(line, f"unknown argument `{key}` (known: metric, platforms, budget)")
        if key in args:
            return Invalid(line, f"`{key}` given twice")
        args[key] = value
    metric = args.get("metric")
    if metric is not None and not _METRIC.match(metric):
        return Invalid(line, f"metric=`{metric}`: use letters, digits, '_' and '.'")
    platforms = None
    if "platforms" in args:
        platforms = tuple(p for p in args["platforms"].split(",") if p)
        if not platforms or not all(_PLATFORM.match(p) for p in platforms) or len(set(platforms)) != len(platforms):
            return Invalid(line, f"platforms=`{args['platforms']}`: a comma-separated list of distinct names")
    budget = None
    if "budget" in args:
        try:
            budget = float(args["budget"].removeprefix("$"))
        except ValueError:
            budget = math.nan
        if not math.isfinite(budget) or budget < 0:
            return Invalid(line, f"budget=`{args['budget']}`: a number of USD, 0 or more")
    return Command("optimize", rest[0].lower(), Overrides(metric, platforms, budget))


def parse_comment(body: str) -> Command | Invalid | None:
    """The comment's command, an Invalid to answer with help, or None (not addressed to us)."""
    lines = command_lines(body)
    return parse_line(lines[0]) if lines else None
