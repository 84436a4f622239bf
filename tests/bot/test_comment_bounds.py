"""N14: reading a comment for commands is bounded. Without the prefix nothing is parsed; over
`MAX_COMMENT_CHARS` nothing is parsed and a command line is answered with help (post it alone);
within the bound the parser runs without its link, image and emphasis rules (the dear ones). Through the App: a 65 KB
pathological comment is accepted and answered, not parsed. (Costs: tests/bot/parse_cost.py.)

Within the bound, what holds the rules off is counted, not timed (this host is noisy): the parser
the code actually calls has none of them active, their code never runs on pathological bodies
of up to `MAX_COMMENT_CHARS`, and the work (lines of markdown-it's code executed, a
deterministic count) grows in proportion to the body. A control switches each rule back on and
checks the tracer sees it, so a renamed rule module fails loudly instead of passing quietly."""
from __future__ import annotations

import sys
from pathlib import Path

import markdown_it
import pytest
from markdown_it import MarkdownIt

from bot import commands
from bot.commands import MAX_COMMENT_CHARS, Command, Invalid, parse_comment
from botfixtures import BOT_LOGIN, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from test_e2e import REPO, _setup


class NoParse:
    def parse(self, text):
        raise AssertionError("the CommonMark parser ran")


@pytest.fixture()
def no_parser(monkeypatch):
    monkeypatch.setattr(commands, "_MD", NoParse())


@pytest.mark.parametrize("body", ["[" * 65_000, "just a comment", "see /autoresearch in the docs " * 3000, ""])
def test_comments_without_a_command_line_are_not_parsed(no_parser, body):
    assert parse_comment(body) is None


def test_an_oversized_comment_with_a_command_is_answered_not_parsed(no_parser):
    body = "/autoresearch approve 0123456789abcdef\n" + "![" * 32_000
    got = parse_comment(body)
    assert isinstance(got, Invalid) and "comment of its own" in got.reason and str(MAX_COMMENT_CHARS) in got.reason


def test_within_the_bound_commands_still_parse():
    assert parse_comment("/autoresearch status\n" + "[\n" * 3900) == Command("status")
    assert parse_comment("```\n/autoresearch status\n```\n") is None               # code is still not a command
    assert parse_comment("> /autoresearch status") is None
    assert parse_comment("*/autoresearch status*") is None                         # a command is a plain line
    assert parse_comment("[x](y)\n/autoresearch cancel") == Command("cancel")


def test_a_pathological_comment_through_the_app(bot_env, tmp_path):
    _setup(bot_env, tmp_path, candidate=False)
    first = bot_env.comment(REPO, 4, "bob", "/autoresearch status\n" + "[" * 64_000)
    assert first.status == 202, first.body
    bot_env.work()
    reply = bot_env.bot_comments(REPO, 4)[-1]["body"]
    assert "comment of its own" in reply and "/autoresearch optimize cpu" in reply


# The rules whose bracket and delimiter matching `bot.commands` keeps off (and the two GFM ones
# of the same kind, never to be added), as markdown-it's rule names and as its source files.
OFF_RULES = {"link", "image", "emphasis", "strikethrough", "linkify"}
OFF_FILES = {"rules_inline/link.py", "rules_inline/image.py", "rules_inline/emphasis.py",
             "rules_inline/strikethrough.py", "rules_inline/linkify.py", "helpers/parse_link_label.py"}
MD_ROOT = str(Path(markdown_it.__file__).parent) + "/"
STATUS = "/autoresearch status\n"
PATHOLOGICAL = {"brackets": "[", "nested_images": "![", "bracket_lines": "[\n", "emphasis_lines": "*a\n",
                "link_openers": "[a ", "unclosed_links": "[a](b", "mismatched_emphasis": "*a_ ",
                "mixed": "*[![`<_"}


def _body(pattern: str, size: int) -> str:
    return STATUS + pattern * ((size - len(STATUS)) // len(pattern))


def _traced(body: str, count_lines: bool = True) -> tuple[object, int, set[str]]:
    """parse_comment(body), the number of lines of markdown-it's code it executed, and which of
    markdown-it's files ran (relative to the package)."""
    lines, ran = 0, set()

    def local(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def calls(frame, event, arg):
        name = frame.f_code.co_filename
        if name.startswith(MD_ROOT):
            ran.add(name[len(MD_ROOT):])
            return local if count_lines else None
        return None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        got = parse_comment(body)
    finally:
        sys.settrace(before)
    return got, lines, ran


def test_the_parser_the_code_calls_has_the_bracket_and_delimiter_rules_off(monkeypatch):
    used = []
    real = MarkdownIt.parse
    monkeypatch.setattr(MarkdownIt, "parse", lambda self, *a, **k: used.append(self) or real(self, *a, **k))
    assert parse_comment("[x](y) *z*\n/autoresearch status") == Command("status")
    assert used, "parse_comment no longer parses with markdown-it: check this test still means something"
    for md in used:
        active = md.get_active_rules()
        assert not OFF_RULES & set(active["inline"] + active["inline2"]), active
        assert not md.options.get("linkify"), md.options


@pytest.mark.parametrize("pattern", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_pathological_bodies_within_the_bound_never_run_those_rules_and_cost_in_proportion(pattern):
    small, big = _body(pattern, 2000), _body(pattern, MAX_COMMENT_CHARS)
    got_small, lines_small, ran_small = _traced(small)
    got_big, lines_big, ran_big = _traced(big)
    assert got_small == got_big == Command("status")
    assert not OFF_FILES & (ran_small | ran_big), sorted(OFF_FILES & (ran_small | ran_big))
    size_ratio, work_ratio = len(big) / len(small), lines_big / lines_small
    # Measured with markdown-it-py 4.3.0: the work ratio is 0.99-1.01 times the size ratio (4x).
    # A quadratic path would give 4x that; 1.15 leaves room for fixed costs, none for a power.
    assert work_ratio <= 1.15 * size_ratio, (lines_small, lines_big, size_ratio)


@pytest.mark.parametrize("rule", ["link", "image", "emphasis"])
def test_the_tracer_sees_each_rule_when_it_is_switched_back_on(monkeypatch, rule):
    """The control: with one rule back on, its code runs on the bodies above, so the test above
    would fail. (With markdown-it-py 4.3.0 the stock parser's work also grows only about 4x from
    2000 to 8000 characters here, 10x dearer per character, so the proportion alone would not
    catch a rule coming back: the rule's code running is what does.)"""
    monkeypatch.setattr(commands, "_MD", MarkdownIt("commonmark").disable(sorted({"link", "image", "emphasis"} - {rule})))
    ran = set()
    for pattern in PATHOLOGICAL.values():
        got, _, files = _traced(_body(pattern, 2000), count_lines=False)
        assert got == Command("status")
        ran |= files
    own = {"link": "rules_inline/link.py", "image": "rules_inline/image.py", "emphasis": "rules_inline/emphasis.py"}[rule]
    assert own in ran and own in OFF_FILES, sorted(ran)
