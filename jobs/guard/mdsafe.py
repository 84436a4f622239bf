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

**The seam.** Untrusted text reaches a document only through these builders, and their results
are `Markdown` (a `str` the project wrote, every untrusted value in it already inert):

- `md(template, *values)`: the template is the project's own markup (a literal; `{}` fields);
  every value that is not already `Markdown` is escaped as `text`, numbers are formatted by their
  spec. So interpolating a config value, a file or patch name into a sentence or a table row is
  escaped by default; a `code` span put in a table row has its `|` escaped there and only there.
- `join(sep, values)`: the same for a list (`", "`), `spans(s)`: the bot's own notes that mark
  code with backticks (`` `CFLAGS ?= -O2 -g` sets ... ``) as code spans and escaped text, read as
  written; `details(template, *values)`: a `<details><summary>` line, values as `html`.
- `document(pieces)`: a document (or a section) from `Markdown` pieces only: a plain `str` (an
  f-string, a `+`, a `str.join`: every `str` operation drops the type) raises TypeError, so a
  value interpolated by hand fails the tests instead of reaching GitHub.
- `rendered(s)`: a document this project rendered and wrote to its own run folder (pr.md,
  research.md), read back to be posted; `clip(m, n)` cuts one at a line boundary.
"""
from __future__ import annotations

import re
import string
from collections.abc import Iterable

WORD_JOINER = "\u2060"
ESCAPED = frozenset("[]<>&|#!\\`")          # what opens a link, image, HTML, entity, code span, cell
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
_LINKERS = re.compile(r"(?i)([@#])|(:)(//)|(www)(\.)|(gh)(-)(?=\d)")
_BACKTICKS = re.compile(r"`+")
# What makes a line's first characters a block: a list item (`- `, `+ `, `* `, `1. `, `1) `, or the
# marker alone), a quote (`>`: escaped anyway), a thematic break or setext underline (a line of
# `-`, `=`, `*`, `_`). `-O3` or `12.3%` starts none of them and is left as written.
_BLOCK_START = re.compile(r"^( *(?:\d{1,9}(?=[.)](?: |$))|(?=[-+*](?: |$))|(?=[-=*_][-=*_ ]*$)))([-+*.)=_])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
DEFAULT_LIMIT = 300
LONG = 2000                                  # what `md` and `join` let through of one value


class Markdown(str):
    """Markup this project wrote, every untrusted value in it made inert by this module. Made
    only by this module's builders (never constructed elsewhere: tests/jobs/report/test_markdown_seam.py);
    any `str` operation on it gives a plain `str` back, which `document` refuses. `cell`: the same
    markup as it must read inside a GFM table row (a code span's `|` escaped), when it differs."""
    cell: "Markdown | None" = None

    def __repr__(self) -> str:
        return f"Markdown({str.__repr__(self)})"


def _markup(s: str, cell: str | None = None) -> Markdown:
    m = Markdown(s)
    if cell is not None and cell != s:
        m.cell = Markdown(cell)
    return m


def _in_cell(m: Markdown) -> Markdown:
    return m.cell if m.cell is not None else m


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


def _escape(line: str, at_start: bool = True) -> str:
    """One line made inert; `at_start`: it may begin a block (`- `, `1.`, `>`), so that is escaped
    too (mid-line, as in `Why: -O3 ...`, it means nothing and stays as written)."""
    out = "".join("\\" + ch if ch in ESCAPED else ch for ch in _unlink(line))
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), out, count=1) if at_start else out


def text(s: object, limit: int = DEFAULT_LIMIT) -> Markdown:
    """For Markdown prose, headings, list items and table cells: renders as exactly `one_line(s)`
    (plus invisible word joiners), nothing of it markup."""
    return _markup(_escape(one_line(s, limit)))


def spans(s: object, limit: int = LONG, at_start: bool = True) -> Markdown:
    """One line of the project's own notes with untrusted values in it, whose backticks mark code
    (`` `Makefile:1` `CFLAGS ?= -O2 -g` sets the optimisation level ``): each backtick-delimited
    part a `code` span (CommonMark's rule: a run of n backticks closes at the next run of exactly
    n), the rest `text`. It reads as written; an untrusted backtick can only make more code."""
    line, out, cell, at = one_line(s, limit), [], [], 0
    runs = list(_BACKTICKS.finditer(line))
    rest = at_start
    i = 0
    while i < len(runs):
        opener = runs[i]
        closer = next((r for r in runs[i + 1:] if len(r.group()) == len(opener.group())), None)
        if closer is None:
            i += 1
            continue
        body = line[opener.end():closer.start()]
        if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
            body = body[1:-1]                     # CommonMark strips one space from each side
        lead = _escape(line[at:opener.start()], rest)
        out += [lead, _span(body, limit, False)]
        cell += [lead, _span(body, limit, True)]
        at, rest = closer.end(), False
        i = runs.index(closer) + 1
    tail = _escape(line[at:], rest)
    return _markup("".join(out + [tail]), "".join(cell + [tail]))


def prose(s: object, limit: int = 3000) -> Markdown:
    """For the bot's sentences with untrusted values inside: lines kept, each line as `spans`."""
    return _markup("\n".join(spans(line, limit) for line in str(s)[:limit].splitlines()))


def code(s: object, limit: int = DEFAULT_LIMIT, in_table: bool = False) -> Markdown:
    """An inline code span showing exactly `one_line(s)`. `in_table`: `|` escaped too (a GFM table
    splits cells at `|` even inside code spans; `\\|` there renders as `|`); `md` does that itself
    for a span it puts in a table row."""
    return _markup(_span(s, limit, in_table), _span(s, limit, True))


def _span(s: object, limit: int, in_table: bool) -> str:
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


def fence(lines: list[str], info: str = "") -> Markdown:
    """A fenced code block holding `lines` verbatim; no line can close it."""
    lines = [_CONTROL.sub(" ", line) for line in lines]
    longest = max((len(run) for line in lines for run in _BACKTICKS.findall(line)), default=0)
    tick = "`" * max(3, longest + 1)
    info = re.sub(r"[^A-Za-z0-9_+-]", "", info)
    return _markup("\n".join([tick + info, *lines, tick]))


def html(s: object, limit: int = DEFAULT_LIMIT) -> str:
    """For text inside raw HTML (Markdown escapes do not work there)."""
    return "".join(_HTML.get(ch, ch) for ch in _unlink(one_line(s, limit)))


# -- the seam: templates, lists, documents -----------------------------------------------------------

_FIELDS = string.Formatter()
_MARKERS = re.compile(r"[ \t]*(?:(?:[-+*>]|\d{1,9}[.)]|#{1,6})[ \t]+)*")   # what may precede a block's text


def _fill(value: object, spec: str, conversion: str | None, at_start: bool) -> tuple[str, str]:
    """(as it reads, as it reads in a table row) of one value put into a template."""
    if isinstance(value, Markdown):
        if spec or conversion:
            raise TypeError(f"markup takes no format spec or conversion: {value!r}")
        return value, _in_cell(value)
    if isinstance(value, (int, float)) and conversion is None:      # digits, sign, point, inf, nan
        return format(value, spec), format(value, spec)
    if conversion:
        value = _FIELDS.convert_field(value, conversion)
    safe = _escape(one_line(format(value, spec) if spec else str(value), LONG), at_start)
    return safe, safe


def md(template: str, /, *values: object, **named: object) -> Markdown:
    """`template` (the project's own markup, a literal: `{}` and `{name}` fields, `{:+.1f}` specs)
    with every value that is not `Markdown` escaped as `text` (its block start only where the field
    begins a line's text); a value in a table row (a line starting with `|`) as it reads in one."""
    plain, cell, auto = [], [], 0
    for literal, field, spec, conversion in _FIELDS.parse(template):
        plain.append(literal)
        cell.append(literal)
        if field is None:
            continue
        if field == "":
            field, auto = str(auto), auto + 1
        value = _FIELDS.get_field(field, values, named)[0]
        line = "".join(plain).rpartition("\n")[2]
        as_is, in_row = _fill(value, spec or "", conversion, bool(_MARKERS.fullmatch(line)))
        plain.append(in_row if line.lstrip().startswith("|") else as_is)
        cell.append(in_row)
    return _markup("".join(plain), "".join(cell))


def join(sep: str, values: Iterable[object]) -> Markdown:
    """`sep` (the project's own, e.g. `", "`) between `values`, each escaped as in `md`."""
    filled = [_fill(v, "", None, i == 0) for i, v in enumerate(values)]
    return _markup(sep.join(p for p, _ in filled), sep.join(c for _, c in filled))


def details(template: str, /, *values: object) -> Markdown:
    """`<details><summary>` + `template` + `</summary>`, each value as `html` (numbers formatted)."""
    filled = [format(v, "") if isinstance(v, (int, float)) else html(v) for v in values]
    return _markup("<details><summary>" + template.format(*filled) + "</summary>")


_URL_KEEP = re.compile(r"[^A-Za-z0-9\-._~:/?#@!$&'*+,;=%]")


def link(label: object, url: str) -> Markdown:
    """A link the project means to make (a fork's page on GitHub, a paper on arXiv): `label` as
    `text`; `url` only when it is an http(s) URL, every character that could end or reshape the
    link's destination (a space, `()<>`, a backtick, a control character) percent-encoded. Any
    other URL (`javascript:`, a relative one): the label alone."""
    label_md = text(label, LONG)
    if not re.match(r"https?://[A-Za-z0-9.-]+(/|$)", url or ""):
        return label_md
    href = _URL_KEEP.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), url)
    return _markup(f"[{label_md}]({href})", f"[{_in_cell(label_md)}]({href})")


_OWN_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~%/-]*)?")


def own_url(url: str) -> Markdown:
    """A URL GitHub gave the bot about its own work (a pull request's `html_url`), printed bare for
    GitHub to link; anything but a plain https URL of path characters is `text`."""
    return _markup(url) if _OWN_URL.fullmatch(url or "") else text(url)


def document(pieces: Iterable[Markdown], sep: str = "\n") -> Markdown:
    """Lines (or sections) joined, each already `Markdown`: a plain `str` raises TypeError."""
    out = []
    for i, piece in enumerate(pieces):
        if not isinstance(piece, Markdown):
            raise TypeError(f"piece {i} is a plain {type(piece).__name__}, not Markdown (build it with "
                            f"mdsafe.md, never an f-string): {str(piece)[:120]!r}")
        out.append(piece)
    return _markup(sep.join(out))


def lines(m: Markdown) -> list[Markdown]:
    """The lines of a document (each inline construct of this module is one line; `document`
    puts a fence's lines back together)."""
    document([m])
    return [_markup(line) for line in m.split("\n")]


def indent(m: Markdown, prefix: str) -> Markdown:
    """Every line of `m` behind `prefix` (the project's own: spaces under a list item)."""
    document([m])
    return _markup("\n".join(prefix + line for line in m.split("\n")))


def rendered(s: str) -> Markdown:
    """A document this project rendered through this module and wrote to its own run folder
    (pr.md, research.md), read back to be posted. Never for text from anywhere else."""
    return _markup(s)


def clip(m: Markdown, limit: int, note: str = "…") -> Markdown:
    """`m` cut at a line boundary to at most `limit` characters (a cut inside a line could leave a
    code span open, and what followed it live), `note` after it."""
    document([m])
    if len(m) <= limit:
        return m
    cut = m[: max(0, limit - len(note) - 2)].rpartition("\n")[0]
    return _markup(f"{cut}\n\n{note}")
