"""Known Markdown attacks on untrusted text, and what of a rendered body GitHub would make live:
shared by tests/jobs/guard/test_mdsafe.py, tests/jobs/report/test_report_untrusted.py, tests/jobs/report/test_markdown_seam.py
and tests/bot/test_markdown_bodies.py."""
from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

ATTACKS = [
    "@octocat please look", "cc @org/team", "fixes #1 and owner/repo#2", "GH-12",
    "[click](https://evil.example/x)", "![pixel](https://evil.example/p.png)", "<https://evil.example>",
    "https://evil.example/a?b=c", "www.evil.example", "mailto:a@b.example", "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>", "<!-- hidden -->", "&#64;octocat", "&commat;octocat", "a`b``c```d",
    "`", "``", " `x` ", "name\n# heading", "x | y | z", "line\r\n- item", "**bold** _it_ ~~s~~",
    "[ref]: https://evil.example", "\\@escaped", "a\\", "<details><summary>x</summary>", "", "   ",
    "\u2028@octocat", "a" * 500, "- item", "1. first", "> quote", "===", "---", "+ x", "* x", "12) x", "  - x",
    "@octocat-and-#1-x.patch", "`@octocat` and `#1`", "x$(touch /tmp/pwned)`id`;@octocat",
]

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
# The project's own raw HTML: folded sections, hidden comment markers, a line break in a table cell.
OWN_HTML = re.compile(r"</?(details|summary)>|<!-- autoresearch:[a-z-]+ [^<>]*-->|<br>")
LIVE_TEXT = re.compile(r"@[A-Za-z0-9][\w-]*|#\d+|https?://\S+|(?i:www\.)\S+|(?i:\bgh-\d+)")


def live(markdown: str, links: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What of `markdown` GitHub would make live: links and images (but those to `links`, which
    the project means to make), raw HTML other than its own (`OWN_HTML`), and mentions,
    references and URLs in the visible text (a code span is inert: GitHub links nothing in it)."""
    found = []
    for tok in MD.parse(markdown):
        if tok.type == "html_block":           # the project's <summary> lines: no other tag, no live text in them
            rest = OWN_HTML.sub("", tok.content)
            found += ["html_block:" + tok.content] if "<" in rest else LIVE_TEXT.findall(html.unescape(rest))
        for child in tok.children or []:
            href = child.attrs.get("href") or child.attrs.get("src") or ""
            if child.type in ("link_open", "image") and href not in links:
                found.append(f"{child.type}:{href}")
            if child.type == "html_inline" and OWN_HTML.sub("", child.content).strip():
                found.append("html_inline:" + child.content)
            if child.type == "text":
                found += LIVE_TEXT.findall(child.content)
    return found


def visible(markdown: str) -> str:
    """The text a reader sees, code spans included, word joiners removed."""
    out = []
    for tok in MD.parse(markdown):
        for child in tok.children or []:
            if child.type in ("text", "code_inline"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append("\n")
    return "".join(out).replace("\u2060", "")
