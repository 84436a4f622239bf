"""jobs.mdsafe: hostile strings in every context they reach (plan and status comments, PR body and
title) render as their own text and nothing else. Checked by a CommonMark parser with GFM tables
(markdown-it-py), on a table of known attacks and on seeded random strings of the dangerous
characters (the property: no link, image, HTML or new block; no live mention, reference or URL;
the visible text is exactly the input's one-line form)."""
from __future__ import annotations

import random
import re

import pytest
from markdown_it import MarkdownIt

from jobs import mdsafe

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
WJ = mdsafe.WORD_JOINER
LIVE = [re.compile(r"@[A-Za-z0-9]"), re.compile(r"#\d"), re.compile(r"://"), re.compile(r"(?i)www\."),
        re.compile(r"(?i)\bgh-\d")]

from mdattacks import ATTACKS  # noqa: E402


def fuzz(n: int = 600, seed: int = 20) -> list[str]:
    rng = random.Random(seed)
    alphabet = list("`@#[]()!<>:/\\|*_&~-.=w\n \t\"'") + ["http", "www.", "GH-1", "@a", "#1", "<img ", "](x)"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(n)]


def visible(tokens) -> str:
    """The text a reader sees (inline text and code), word joiners included."""
    out = []
    for tok in tokens:
        for child in tok.children or []:
            if child.type in ("text", "code_inline"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append("\n")
    return "".join(out)


def kinds(tokens) -> set[str]:
    return {t.type for t in tokens} | {c.type for t in tokens for c in (t.children or [])}


FORBIDDEN = {"link_open", "image", "html_inline", "html_block"}
CONTEXTS = ["{}", "{} tail", "before {} after", "> quote {}", "# heading {}", "- item {}", "| a | b |\n|---|---|\n| {} | x |"]


@pytest.mark.parametrize("s", ATTACKS + fuzz())
def test_text_renders_as_its_own_line_and_nothing_more(s):
    safe = mdsafe.text(s)
    for ctx in CONTEXTS:
        plain_tokens = MD.parse(ctx.format("x"))
        tokens = MD.parse(ctx.format(safe))
        assert not kinds(tokens) & FORBIDDEN, (s, ctx, safe)
        assert [t.type for t in tokens] == [t.type for t in plain_tokens] or not safe.strip(), (s, ctx)   # no new block
        seen = visible(tokens)
        assert not any(p.search(seen) for p in LIVE), (s, ctx, seen)
    alone = unstyled(visible(MD.parse(f"x {safe} y")).replace(WJ, ""))      # emphasis may style it, no more
    assert alone == unstyled(f"x {mdsafe.one_line(s)} y") or not mdsafe.one_line(s).strip(), (s, alone)


def unstyled(s: str) -> str:
    return re.sub(r"[*_~\s]", "", s)


@pytest.mark.parametrize("s", ATTACKS + fuzz(seed=21))
def test_code_span_cannot_be_closed_early(s):
    span = mdsafe.code(s)
    tokens = MD.parse(f"x {span} y")
    codes = [c for t in tokens for c in (t.children or []) if c.type == "code_inline"]
    assert len(codes) == 1 and not kinds(tokens) & FORBIDDEN, (s, span)
    expect = mdsafe.one_line(s)
    assert codes[0].content == (expect if expect.strip(" ") else codes[0].content), (s, span, codes[0].content)
    cell = MD.parse(f"| a | b |\n|---|---|\n| {mdsafe.code(s, in_table=True)} | x |")
    assert sum(1 for t in cell if t.type == "td_open") == 2, (s, "the table row gained or lost cells")


@pytest.mark.parametrize("lines", [["make", "```", "@octocat"], ["````x", "~~~", "<img src=x>"], [], ["`"]])
def test_fence_holds_every_line(lines):
    tokens = MD.parse("before\n\n" + mdsafe.fence(lines) + "\n\n@after")
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "".join(f"{line}\n" for line in lines)


@pytest.mark.parametrize("s", ATTACKS + fuzz(seed=22))
def test_html_and_plain_contexts(s):
    inside = mdsafe.html(s)
    assert "<" not in inside and ">" not in inside and '"' not in inside
    tokens = MD.parse(f"<details><summary>{inside}</summary>\n\nbody\n\n</details>")
    assert sum(t.type == "html_block" for t in tokens) == 2
    title = mdsafe.plain(s)
    assert "\n" not in title and not any(p.search(title) for p in LIVE[:2] + LIVE[2:]), title
    assert title.replace(WJ, "") == mdsafe.one_line(s)


def test_length_is_bounded():
    assert len(mdsafe.one_line("x" * 10_000, limit=50)) == 50
    assert mdsafe.one_line("x" * 10_000, limit=50).endswith("…")


@pytest.mark.parametrize("s", ATTACKS + fuzz(seed=23))
def test_prose_keeps_lines_but_nothing_is_live(s):
    safe = mdsafe.prose(f"run `7-abc` failed: {s}\nsecond line {s}")
    tokens = MD.parse(safe)
    assert not kinds(tokens) & FORBIDDEN, (s, safe)
    assert not any(p.search(visible(tokens)) for p in LIVE), (s, safe)
