"""What a pathological comment costs `bot.commands` to read, before and after issue 20's bound
(N14), side by side in one run on this machine. Prints METRIC lines; asserts nothing about speed.

    PYTHONPATH=. python tests/bot/parse_cost.py

before: the old path, CommonMark with every rule over the whole body (`command_lines` with
        `MarkdownIt("commonmark")`, no size check);
after:  `parse_comment` as it is now (no parse without the prefix or over `MAX_COMMENT_CHARS`,
        link/image/emphasis rules off), on the same 65 KB body and on the worst body it still
        parses (the same pattern cut to `MAX_COMMENT_CHARS`).
"""
from __future__ import annotations

import time

from markdown_it import MarkdownIt

from bot import commands

SIZE = 65_000
COMMAND = "/autoresearch status\n"
PATTERNS = {"brackets": "[", "nested_images": "![", "bracket_lines": "[\n", "emphasis_lines": "*a\n"}


def body(pattern: str, size: int) -> str:
    return COMMAND + pattern * ((size - len(COMMAND)) // len(pattern))


def seconds(fn, text: str) -> float:
    t0 = time.perf_counter()
    fn(text)
    return time.perf_counter() - t0


def before(text: str):
    new, commands._MD = commands._MD, MarkdownIt("commonmark")
    try:
        return commands.command_lines(text)
    finally:
        commands._MD = new


def main() -> None:
    for name, pattern in PATTERNS.items():
        big, capped = body(pattern, SIZE), body(pattern, commands.MAX_COMMENT_CHARS)
        print(f"METRIC parse_s_before_{name}_65k={seconds(before, big):.4f}")
        print(f"METRIC parse_s_after_{name}_65k={seconds(commands.parse_comment, big):.4f}")
        print(f"METRIC parse_s_after_{name}_{len(capped)}={seconds(commands.parse_comment, capped):.4f}")


if __name__ == "__main__":
    main()
