"""The comment command grammar. Pure: performs no I/O of its own.

A command is one line of a comment that starts with ``/autoresearch``::

    /autoresearch optimize cpu [metric=NAME] [platforms=x86,arm] [budget=USD]
    /autoresearch approve PLAN-ID
    /autoresearch cancel | status | bench

`approve` names the plan it approves (the id its plan comment shows): a bare `approve` approves
nothing and is answered with the id of the plan awaiting approval, so nobody approves a plan they
have not seen (issue 12).

Comment text is data, never instructions: only a line that parses here steers the bot. Lines are
found the way GitHub renders the comment, by a CommonMark parser (markdown-it-py): a line counts
only if it starts a line of a top-level paragraph, so text in fenced or indented code, HTML blocks
and comments, block quotes (lazy continuation lines included), list items and headings is not a
command. The first command line of a comment is the one that counts.

Parsing is bounded (issue 20, N14: a 65 KB comment of `[` took seconds in the CommonMark parser,
in the web process): a comment without the prefix is not parsed at all; one longer than
`MAX_COMMENT_CHARS` is not parsed either, but answered with help if a line of it starts with the
prefix (post the command in a comment of its own); and the parser runs without its link, image
and emphasis rules, whose bracket and delimiter matching made the pathological bodies dear (with
markdown-it-py 4.3 the cost grows about linearly but ~10x more per character). So a command is
a plain line: one wrapped in emphasis or link brackets keeps its `*` or `[` and is not a command.
`tests/bot/parse_cost.py` prints the cost before and after.

The verbs are one registry, `GRAMMAR`: each `Verb` has its help line, how its arguments parse,
and where it may be used. The help and the parser read it; `bot.flow` answers each verb with the
method registered for it (`bot.flow.handles`). A new command is a `Verb` here and its handler.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt

from jobs.contract.config import Overrides
from jobs.guard.mdsafe import Markdown, code, document, md, spans

PREFIX = "/autoresearch"
TARGETS = ("cpu",)
_METRIC = re.compile(r"^[\w.µ]+$")
_PLATFORM = re.compile(r"^[A-Za-z0-9_-]+$")
_PLAN_ID = re.compile(r"^[0-9a-f]{16}$")          # `bot.approval.plan_id`
_MD = MarkdownIt("commonmark").disable(["link", "image", "emphasis"])
MAX_COMMENT_CHARS = 8000



@dataclass(frozen=True)
class Command:
    verb: str                                   # one of GRAMMAR
    target: str | None = None                   # "cpu" for optimize
    overrides: Overrides = Overrides()          # metric=, platforms=, budget= (optimize only)
    plan: str = ""                              # the plan id `approve` names ("" if none given)


@dataclass(frozen=True)
class Invalid:
    """A line that starts with the prefix but does not parse; answered with `reason` + HELP."""
    line: str
    reason: str


def command_lines(body: str) -> list[str]:
    """Lines that start with the prefix, at the start of a line of a top-level paragraph."""
    out, depth = [], 0
    for tok in _MD.parse(body or ""):
        if tok.type.endswith("_open") and tok.type != "paragraph_open":
            depth += 1                      # blockquote, list, item, heading...: not top level
        elif tok.type.endswith("_close") and tok.type != "paragraph_close":
            depth -= 1
        elif tok.type == "inline" and depth == 0 and tok.level == 1:
            out += [line for line in _paragraph_lines(tok.children or []) if _is_command(line)]
    return out


def _paragraph_lines(children: list) -> list[str]:
    """The paragraph's lines as rendered text; a line that starts inside inline HTML or code (a
    `<!-- ... -->` spanning lines, a code span) gets a leading NUL, so it is never a command."""
    lines, cur = [], ""
    for child in children:
        if child.type in ("softbreak", "hardbreak"):
            lines.append(cur)
            cur = ""
        elif child.type == "text":
            cur += child.content
        elif child.type in ("html_inline", "code_inline"):
            parts = child.content.split("\n")
            cur += "\0"
            for _ in parts[1:]:
                lines.append(cur)
                cur = "\0"
    lines.append(cur)
    return [line.strip() for line in lines]


def _is_command(line: str) -> bool:
    return line == PREFIX or line.startswith(PREFIX + " ") or line.startswith(PREFIX + "\t")


def parse_line(line: str) -> Command | Invalid:
    words = line.split()[1:]
    if not words:
        return Invalid(line, "no command given")
    verb, rest = words[0].lower(), words[1:]
    if verb not in GRAMMAR:
        return Invalid(line, f"unknown command {code(verb, 40)}")
    return GRAMMAR[verb].parse(line, verb, rest)


def _no_arguments(line: str, verb: str, rest: list[str]) -> Command | Invalid:
    if rest:
        return Invalid(line, f"`{verb}` takes no arguments")
    return Command(verb)


def _approve(line: str, verb: str, rest: list[str]) -> Command | Invalid:
    if len(rest) > 1 or (rest and not _PLAN_ID.match(rest[0].lower())):
        return Invalid(line, "`approve` takes the plan's id, as its plan comment shows it: "
                       "`/autoresearch approve 0123456789abcdef`")
    return Command(verb, plan=rest[0].lower() if rest else "")


def _optimize(line: str, verb: str, rest: list[str]) -> Command | Invalid:
    if not rest or rest[0].lower() not in TARGETS:
        return Invalid(line, "say what to optimize: `/autoresearch optimize cpu`")
    args: dict[str, str] = {}
    for word in rest[1:]:
        key, eq, value = word.partition("=")
        key = key.lower()
        if not eq or not value:
            return Invalid(line, f"{code(word, 60)}: arguments look like `name=value`")
        if key not in ("metric", "platforms", "budget"):
            return Invalid(line, f"unknown argument {code(key, 40)} (known: metric, platforms, budget)")
        if key in args:
            return Invalid(line, f"{code(key, 40)} given twice")
        args[key] = value
    metric = args.get("metric")
    if metric is not None and not _METRIC.match(metric):
        return Invalid(line, f"metric={code(metric, 60)}: use letters, digits, '_' and '.'")
    platforms = None
    if "platforms" in args:
        platforms = tuple(p for p in args["platforms"].split(",") if p)
        if not platforms or not all(_PLATFORM.match(p) for p in platforms) or len(set(platforms)) != len(platforms):
            return Invalid(line, f"platforms={code(args['platforms'], 60)}: a comma-separated list of distinct names")
    budget = None
    if "budget" in args:
        try:
            budget = float(args["budget"].removeprefix("$"))
        except ValueError:
            budget = math.nan
        if not math.isfinite(budget) or budget < 0:
            return Invalid(line, f"budget={code(args['budget'], 60)}: a number of USD, 0 or more")
    return Command(verb, rest[0].lower(), Overrides(metric, platforms, budget))


@dataclass(frozen=True)
class Verb:
    """One command of the grammar."""
    name: str
    help: str                                                   # its line in the help
    parse: Callable[[str, str, list[str]], Command | Invalid]   # (line, verb, words after it)
    pull_requests_only: bool = False                            # answered on a pull request, not an issue


GRAMMAR: dict[str, Verb] = {v.name: v for v in (
    Verb("optimize", "`/autoresearch optimize cpu [metric=NAME] [platforms=x86,arm] [budget=USD]` — plan and "
         "start a run", _optimize),
    Verb("approve", "`/autoresearch approve PLAN-ID` — approve the plan with this id, as its plan comment shows "
         "it (maintainers and configured approvers)", _approve),
    Verb("cancel", "`/autoresearch cancel` — stop queued and running jobs of this issue's run", _no_arguments),
    Verb("status", "`/autoresearch status` — refresh the status comment", _no_arguments),
    Verb("bench", "`/autoresearch bench` — on an autoresearch pull request: re-measure its head against its base",
         _no_arguments, pull_requests_only=True),
)}


def help_text() -> Markdown:
    """Every command of `GRAMMAR`, one line each (its backticks mark the command as code)."""
    return document([md("Commands (one per comment, on a line of its own):"),
                     *[md("- {}", spans(v.help, at_start=False)) for v in GRAMMAR.values()]])


def parse_comment(body: str) -> Command | Invalid | None:
    """The comment's command, an Invalid to answer with help, or None (not addressed to us)."""
    body = body or ""
    if PREFIX not in body:
        return None
    if len(body) > MAX_COMMENT_CHARS:
        if not any(_is_command(line.strip()) for line in body.splitlines()):
            return None
        return Invalid("", f"this comment is {len(body)} characters long; commands are read only from comments "
                       f"of at most {MAX_COMMENT_CHARS}: post the command in a comment of its own")
    lines = command_lines(body)
    return parse_line(lines[0]) if lines else None
