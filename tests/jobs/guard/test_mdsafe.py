"""jobs.guard.mdsafe: hostile strings in every context they reach (plan and status comments, PR body and
title) render as their own text and nothing else. Checked by a CommonMark parser with GFM tables
(markdown-it-py), on a table of known attacks and on seeded random strings of the dangerous
characters (the property: no link, image, HTML or new block; no live mention, reference or URL;
the visible text is exactly the input's one-line form)."""
from __future__ import annotations

import random
import re

import pytest
from markdown_it import MarkdownIt

from jobs.guard import mdsafe

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
WJ = mdsafe.WORD_JOINER
LIVE = [re.compile(r"@[A-Za-z0-9]"), re.compile(r"#\d"), re.compile(r"://"), re.compile(r"(?i)www\."),
        re.compile(r"(?i)\bgh-\d")]

from mdattacks import ATTACKS  # noqa: E402


def fuzz(n: int = 600, seed: int = 20) -> list[str]:
    rng = random.Random(seed)
    alphabet = list("`@#[]()!<>:/\\|*_&~-.=w\n \t\"'") + ["http", "www.", "GH-1", "@a", "#1", "<img ", "](x)"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(n)]


def visible(tokens, code: bool = True) -> str:
    """The text a reader sees (inline text and, with `code`, code spans), word joiners included.
    GitHub links nothing inside a code span, so what may be live is the text without them."""
    out = []
    for tok in tokens:
        for child in tok.children or []:
            if child.type == "text" or (code and child.type == "code_inline"):
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
    assert not any(p.search(visible(tokens, code=False)) for p in LIVE), (s, safe)     # backticks make code: inert


# -- the seam: md, join, spans, details, link, document, clip ------------------------------------------

def test_md_escapes_every_value_unless_it_is_markup():
    row = mdsafe.md("| {} | {} | {:+.1f}% |", "@octocat | #1", mdsafe.code("a|b"), 3.14159)
    assert row == f"| @{WJ}octocat \\| \\#{WJ}1 | `a\\|b` | +3.1% |"      # a code span in a row: its `|` escaped there
    assert mdsafe.md("x {} y", mdsafe.code("a|b")) == "x `a|b` y"               # and only there
    assert mdsafe.md("| {} |", mdsafe.join(", ", [mdsafe.code("p|q"), "r"])) == "| `p\\|q`, r |"
    assert mdsafe.md("Why: {}", "-O3 adds") == "Why: -O3 adds" and mdsafe.md("- {}", "- x") == "- \\- x"
    assert mdsafe.md("{name} {{x}}", name="[a](b)") == "\\[a\\](b) {x}"
    with pytest.raises(TypeError):
        mdsafe.md("{:>9}", mdsafe.code("x"))                                       # markup takes no spec


def test_spans_keeps_the_notes_code_as_code_and_the_rest_as_text():
    assert mdsafe.spans("`Makefile:1` `CFLAGS ?= -O2 -g` sets it @me") == \
        f"`Makefile:1` `CFLAGS ?= -O2 -g` sets it @{WJ}me"
    assert mdsafe.spans("an open ` tick [x](y)") == "an open \\` tick \\[x\\](y)"
    assert mdsafe.spans("`` a`b `` ok") == "``a`b`` ok"


@pytest.mark.parametrize("s", ATTACKS + fuzz(seed=24))
def test_spans_and_details_keep_hostile_text_inert(s):
    tokens = MD.parse(f"x {mdsafe.spans(s)} y")
    assert not kinds(tokens) & FORBIDDEN and not any(p.search(visible(tokens, code=False)) for p in LIVE), s
    folded = MD.parse(mdsafe.details("{} on {}: {}", s, s, 3) + "\n\nbody\n\n</details>")
    assert sum(t.type == "html_block" for t in folded) == 2
    assert re.fullmatch(r"<details><summary>[^<>]*</summary>\n", folded[0].content), folded[0].content


def test_link_only_to_an_http_url_and_it_stays_one_link():
    assert mdsafe.link("a", "javascript:alert(1)") == "a"
    odd = mdsafe.link("[x]", "https://a.example/p) [b](https://evil.example")
    links = [c for t in MD.parse(odd) for c in (t.children or []) if c.type == "link_open"]
    assert len(links) == 1 and links[0].attrs["href"].startswith("https://a.example/p%29%20%5Bb%5D%28")
    assert mdsafe.own_url("https://github.com/o/r/pull/3") == "https://github.com/o/r/pull/3"
    assert mdsafe.own_url("https://x.example/a)<img>") != "https://x.example/a)<img>"


def test_document_takes_markup_only_and_clip_cuts_between_lines():
    with pytest.raises(TypeError):
        mdsafe.document([mdsafe.md("a"), "b"])
    doc = mdsafe.document([mdsafe.md("{}", mdsafe.code("@octocat " * 3)) for _ in range(50)])
    cut = mdsafe.clip(doc, 200, "(cut)")
    assert len(cut) <= 200 and cut.endswith("\n\n(cut)") and all(line.startswith("`") for line in cut.split("\n")[:-2])
    assert mdsafe.clip(doc, 10_000) is doc
    assert mdsafe.indent(mdsafe.fence(["a", "b"]), "   ") == "   ```\n   a\n   b\n   ```"
