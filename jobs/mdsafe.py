"""Untrusted text made inert before it reaches GitHub Markdown. Pure: strings in, strings out.

A repository names its config, platforms, candidate files and hypotheses; a commenter types the
words of a command. Any of these reaches a plan or status comment, a PR title or body, where
GitHub would turn it into an @mention (a notification to anyone), a cross-reference (`#12`,
`owner/repo#12`: a timeline entry elsewhere), a link or image (a tracking pixel), raw HTML, or a
new block (a heading, a table row). Each helper here is for one context and keeps the text
readable while none of that can happen:

- `text(s)`: prose, list items, headings, table cells. One line (control characters become
  spaces); the characters that open markup backslash-escaped (CommonMark renders `\\x` as `x`):
  `[ ] < > & | # ! \\` and backticks, so links, images, autolinks, HTML, entities such as
  `&#64;`, code spans and table pipes stay literal, and a first character that would start a
  block (`- + = * >`, `1.`); a WORD JOINER (U+2060, invisible) after `@` and `#` and inside
  `://` and `www.`, so GitHub's mention, reference and bare-URL linkers find nothing. Emphasis
  (`* _ ~`) is left alone: it changes how text looks, never what it does.
- `code(s)`: an inline code span whose fence is longer than any run of backticks inside, so the
  text cannot close it early (GitHub renders nothing inside a code span: no mentions, no links).
- `fence(lines)`: a fenced code block, its fence longer than any backtick run in the lines.
- `html(s)`: text inside raw HTML (`<summary>...</summary>`), where Markdown escapes do not
  apply: `& < > " '` as entities, and the same word joiners.
- `prose(s)`: the bot's own sentences that carry untrusted values (a run's message, an error):
  as `text`, but lines and backticks are kept, so the bot's code spans still render (an untrusted
  backtick can at worst move where a code span ends; what it shows is still escaped).
- `plain(s)`: a PR title (not rendered as Markdown, but mentions and references are linked):
  one line, the word joiners only.

Every helper also bounds the length (`limit` characters, then `…`).
"""
from __future__ import annotations

import re

WORD_JOINER = "\u2060"
ESCAPED = frozenset("[]<>&|#!\\`")          # what opens a link, image, HTML, entity, code span, cell
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
_LINKERS = re.compile(r"(?i)([@#])|(:)(//)|(www)(\.)|(gh)(-)(?=\d)")
_BACKTICKS = re.compile(r"`+")
_BLOCK_START = re.compile(r"^( *\d*)([-+=*>.)])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
DEFAULT_LIMIT = 300


def one_line(s: object, limit: int = DEFAULT_LIMIT) -> str:
    """`s` as one line of at most `limit` characters (control characters, newlines included,
    become one space; a longer text is cut and ends with `…`)."""
    line = _CONTROL.sub(" ", str(s))
    return line if len(line) <= limit else line[: max(0, limit - 1)] + "…"


def _unlink(s: str) -> str:
    """A word joiner where GitHub's linkers would start: after @ and #, in `://`, `www.`, `GH-1`."""
    def join(m: re.Match) -> str:
        parts = [p for p in m.groups() if p is not None]
        return parts[0] + WORD_JOINER + "".join(parts[1:])
    return _LINKERS.sub(join, s)


def plain(s: object, limit: int = DEFAULT_LIMIT) -> str:
    """For text GitHub does not render as Markdown but still links (a PR title)."""
    return _unlink(one_line(s, limit))


def text(s: object, limit: int = DEFAULT_LIMIT) -> str:
    """For Markdown prose, headings, list items and table cells: renders as exactly `one_line(s)`
    (plus invisible word joiners), nothing of it markup."""
    out = "".join("\\" + ch if ch in ESCAPED else ch for ch in _unlink(one_line(s, limit)))
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), out, count=1)


def prose(s: object, limit: int = 3000) -> str:
    """For the bot's sentences with untrusted values inside: lines kept, backticks kept."""
    lines = [one_line(line, limit) for line in str(s)[:limit].splitlines()]
    return "\n".join("".join("\\" + ch if ch in ESCAPED and ch != "`" else ch for ch in _unlink(line))
                     for line in lines)


def code(s: object, limit: int = DEFAULT_LIMIT, in_table: bool = False) -> str:
    """An inline code span showing exactly `one_line(s)`. `in_table`: `|` escaped too (a GFM table
    splits cells at `|` even inside code spans; `\\|` there renders as `|`)."""
    body = one_line(s, limit)
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    tick = "`" * (longest + 1)
    if not body.strip(" "):
        body = body or " "
    elif body[0] in "` " or body[-1] in "` ":
        body = f" {body} "                        # CommonMark strips one space from each side
    if in_table:
        body = body.replace("|", "\\|")
    return f"{tick}{body}{tick}"


def fence(lines: list[str], info: str = "") -> str:
    """A fenced code block holding `lines` verbatim; no line can close it."""
    longest = max((len(run) for line in lines for run in _BACKTICKS.findall(line)), default=0)
    tick = "`" * max(3, longest + 1)
    info = re.sub(r"[^A-Za-z0-9_+-]", "", info)
    return "\n".join([tick + info, *[_CONTROL.sub(" ", line) for line in lines], tick])


def html(s: object, limit: int = DEFAULT_LIMIT) -> str:
    """For text inside raw HTML (Markdown escapes do not work there)."""
    return "".join(_HTML.get(ch, ch) for ch in _unlink(one_line(s, limit)))
