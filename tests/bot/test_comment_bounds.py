"""N14: reading a comment for commands is bounded. Without the prefix nothing is parsed; over
`MAX_COMMENT_CHARS` nothing is parsed and a command line is answered with help (post it alone);
within the bound the parser runs without its superlinear rules. Through the App: a 65 KB
pathological comment is accepted and answered, not parsed. (Costs: tests/bot/parse_cost.py.)"""
from __future__ import annotations

import pytest

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
