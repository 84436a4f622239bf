"""Papers as research leads: the arXiv API (https://info.arxiv.org/help/api/user-manual.html).

GET {base}/api/query?search_query=all:"..."&max_results=N returns an Atom feed; each entry gives a
title, abstract, authors and links. Abstracts are untrusted text: cleaned before they are kept.
arXiv asks clients to keep to about one request every three seconds; queries here run in
sequence with that pause between them.
"""
from __future__ import annotations

import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from jobs.guard import mdsafe
from jobs.guard.mdsafe import Markdown, md, spans
from .sanitize import clean

ARXIV = "https://export.arxiv.org"
_NS = {"atom": "http://www.w3.org/2005/Atom"}
USER_AGENT = "autoresearch (research phase; https://github.com/)"


@dataclass
class Paper:
    query: str
    title: str
    url: str
    abstract: str
    authors: list[str] = field(default_factory=list)
    published: str = ""
    pdf: str = ""

    def digest(self) -> str:
        who = ", ".join(self.authors[:4]) + (" et al." if len(self.authors) > 4 else "")
        return f"{self.title} ({who}, {self.published[:10]}) {self.url}\nabstract: {self.abstract}"


def query_url(query: str, max_results: int, base: str = ARXIV) -> str:
    terms = f'all:"{query}"' if " " in query else f"all:{query}"   # a phrase search for multi-word queries
    params = {"search_query": terms, "start": 0, "max_results": max_results, "sortBy": "relevance"}
    return f"{base.rstrip('/')}/api/query?{urllib.parse.urlencode(params)}"


def parse_feed(xml_text: str, query: str, abstract_chars: int = 1200) -> list[Paper]:
    root = ET.fromstring(xml_text)
    papers = []
    for entry in root.findall("atom:entry", _NS):
        def text(tag: str) -> str:
            node = entry.find(tag, _NS)
            return " ".join((node.text or "").split()) if node is not None else ""
        url, pdf = text("atom:id"), ""
        for link in entry.findall("atom:link", _NS):
            if link.get("rel") == "alternate" and link.get("href"):
                url = link.get("href")
            if link.get("title") == "pdf":
                pdf = link.get("href", "")
        authors = [" ".join((a.findtext("atom:name", "", _NS)).split()) for a in entry.findall("atom:author", _NS)]
        papers.append(Paper(query, clean(text("atom:title"), 300), url, clean(text("atom:summary"), abstract_chars),
                            [clean(a, 100) for a in authors], text("atom:published"), pdf))
    return papers


def search(queries: list[str], max_results: int = 5, base: str = ARXIV, timeout: float = 20.0,
           pause: float = 3.0) -> tuple[list[Paper], list[str]]:
    """Papers for each query, and notes for queries that failed (a failure never stops research)."""
    papers: list[Paper] = []
    notes: list[str] = []
    seen: set[str] = set()
    for k, q in enumerate(queries):
        if k and pause:
            time.sleep(pause)
        request = urllib.request.Request(query_url(q, max_results, base), headers={"User-Agent": USER_AGENT})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                found = parse_feed(response.read().decode("utf-8", "replace"), q)
        except (OSError, ET.ParseError, ValueError) as exc:
            notes.append(f"arXiv query {q!r}: failed ({exc})")
            continue
        for p in found:
            if p.url not in seen:
                seen.add(p.url)
                papers.append(p)
    return papers, notes


def render(papers: list[Paper], notes: list[str]) -> list[Markdown]:
    """research.md's section: titles, queries and abstracts escaped by `md`, links only to https pages."""
    if not papers and not notes:
        return []
    out = [md("## Papers (arXiv)"), md("")]
    for p in papers:
        out.append(md("- {} — query “{}”; {}{}", mdsafe.link(p.title, p.url), p.query, p.abstract[:300],
                      "…" if len(p.abstract) > 300 else ""))
    out += [md("- {}", spans(n)) for n in notes] + [md("")]
    return out
