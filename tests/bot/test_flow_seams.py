"""The seams between the flow and its helper modules: one command registry (grammar in
`bot.commands`, handlers registered in `bot.flow`), and the protocol of `bot.ports` that says what
`bot.bench` uses of the flow (`bot.planning` and `bot.execution` are handed ports, not the flow:
tests/bot/test_execution_outcomes.py)."""
from __future__ import annotations

import dataclasses
from typing import Protocol

import pytest

from bot import commands, flow, ports
from bot.commands import Command, Invalid, Verb
from bot.flow import Flow
from bot.ports import Outcome
from bot.routing import route
from bot.settings import Settings


def _comment(body: str, pr: bool = False) -> dict:
    issue = {"number": 7, **({"pull_request": {"url": "x"}} if pr else {})}
    return {"action": "created", "issue": issue, "installation": {"id": 5},
            "comment": {"id": 0, "body": body, "user": {"login": "alice", "type": "User"}},
            "repository": {"name": "r", "owner": {"login": "o"}, "default_branch": "trunk"}}


def test_a_new_command_is_a_verb_in_the_grammar_and_its_handler(monkeypatch):
    """What adding `/autoresearch ping N` takes: a `Verb` in GRAMMAR and a handler; help, parsing,
    routing (pull requests only) and dispatch follow from them."""
    def parse_ping(line: str, verb: str, rest: list[str]) -> Command | Invalid:
        return Command(verb, plan=rest[0]) if len(rest) == 1 else Invalid(line, "`ping` takes one word")

    monkeypatch.setitem(commands.GRAMMAR, "ping", Verb("ping", "`/autoresearch ping WORD` — answer", parse_ping,
                                                       pull_requests_only=True))
    monkeypatch.setattr(flow, "HANDLERS", dict(flow.HANDLERS))
    answered = []

    @flow.handles("ping")
    def ping(f: Flow, cmd) -> Outcome:
        answered.append(cmd.command.plan)
        return Outcome("pong")

    assert "`/autoresearch ping WORD` — answer" in commands.help_text()
    assert isinstance(commands.parse_line("/autoresearch ping a b"), Invalid)
    on_issue = route("issue_comment", _comment("/autoresearch ping x"))
    assert on_issue.command is None and "pull request" in on_issue.error
    cmd = route("issue_comment", _comment("/autoresearch ping x", pr=True))
    nothing = Flow(place=None, store=None, gh=None, token=None, launcher=None, git=None)   # ping uses none
    assert nothing.handle(cmd) == Outcome("pong") and answered == ["x"]


def test_a_handler_names_a_verb_of_the_grammar_and_every_verb_has_one():
    with pytest.raises(ValueError, match="not a verb"):
        flow.handles("pong")
    assert set(flow.HANDLERS) == set(commands.GRAMMAR)


def _members(protocol: type) -> set[str]:
    names: set[str] = set()
    for base in protocol.__mro__:
        if base in (object, Protocol) or not issubclass(base, Protocol):
            continue
        names |= {n for n in vars(base) if not n.startswith("_")} | set(getattr(base, "__annotations__", {}))
    return names


def _provided(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")} | {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("protocol", [ports.BenchFlow])
def test_the_flow_is_what_its_helpers_ask_for(protocol):
    assert _members(protocol) and _members(protocol) - _provided(Flow) == set()


def test_the_settings_are_a_place():
    assert _members(ports.Place) - _provided(Settings) == set()
    assert "operator" in _members(ports.Place)          # handed to every run: the operator's, not the repo's
