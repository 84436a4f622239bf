"""Forks and competing repositories as research leads, via the GitHub REST API (githubkit).

For the upstream repository: its most-starred forks, each compared with upstream (commits ahead,
files changed) and narrowed to the paths the agent may edit (the CPU path). For each configured
competing repository: the same comparison when GitHub can compare it with upstream (same fork
network), else its recent commits under those paths. READMEs are untrusted: cleaned and kept
short; they are data for the researcher, never instructions.

Endpoints (https://docs.github.com/en/rest/repos): GET /repos/{o}/{r}/forks?sort=stargazers,
GET /repos/{o}/{r}, GET /repos/{o}/{r}/compare/{base}...{owner}:{branch}, GET /repos/{o}/{r}/commits?path=,
GET /repos/{o}/{r}/readme.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from jobs.guard.mdsafe import Markdown, code, link, md, spans
from jobs.research.recipes import matches_any
from .sanitize import clean

GITHUB_URL = re.compile(r"github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")


@dataclass
class ChangedFile:
    path: str
    additions: int = 0
    deletions: int = 0


@dataclass
class Lead:
    repo: str
    url: str
    stars: int = 0
    relation: str = "fork"             # fork | competitor
    ahead_by: int | None = None
    behind_by: int | None = None
    commits: list[tuple[str, str, str]] = field(default_factory=list)   # sha, subject, url
    files: list[ChangedFile] = field(default_factory=list)               # under the editable paths
    description: str = ""
    readme: str = ""
    note: str = ""

    def digest(self) -> str:
        lines = [f"{self.relation} {self.repo} ({self.stars} stars) {self.url}"]
        if self.description:
            lines.append(f"description: {self.description}")
        if self.ahead_by is not None:
            lines.append(f"{self.ahead_by} commits ahead, {self.behind_by} behind upstream")
        lines += [f"changed: {f.path} (+{f.additions} -{f.deletions})" for f in self.files[:30]]
        lines += [f"commit {sha[:10]} {subject} {url}" for sha, subject, url in self.commits[:20]]
        if self.readme:
            lines.append(f"readme excerpt: {self.readme}")
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


def upstream_from_remote(url: str) -> str | None:
    """owner/name of a github.com remote URL, or None."""
    m = GITHUB_URL.search(url.strip())
    return f"{m.group(1)}/{m.group(2)}" if m else None


def path_prefixes(globs: list[str]) -> list[str]:
    """Literal directory prefixes of editable globs: 'ggml/src/ggml-cpu/**' -> 'ggml/src/ggml-cpu'."""
    out = []
    for g in globs:
        literal = re.split(r"[*?\[]", g, maxsplit=1)[0].rstrip("/")
        if literal and literal not in out:
            out.append(literal)
    return out


def _json(response) -> Any:
    return response.json()


def _commit(c: dict[str, Any]) -> tuple[str, str, str]:
    subject = (c.get("commit", {}).get("message") or "").splitlines()
    return c["sha"], clean(subject[0], 200) if subject else "", c.get("html_url", "")


def _readme(gh, owner: str, name: str, limit: int) -> str:
    try:
        data = _json(gh.rest.repos.get_readme(owner, name))
    except Exception:   # noqa: BLE001 - a missing README is normal (404); other errors are not leads
        return ""
    raw = data.get("content", "")
    text = base64.b64decode(raw).decode("utf-8", "replace") if data.get("encoding") == "base64" else raw
    return clean(text, limit).replace("\n", " ")


def _compare(gh, upstream: str, base_branch: str, head_owner: str, head_branch: str,
             editable: list[str]) -> tuple[int, int, list[tuple[str, str, str]], list[ChangedFile]]:
    owner, name = upstream.split("/")
    data = _json(gh.rest.repos.compare_commits(owner, name, f"{base_branch}...{head_owner}:{head_branch}",
                                               per_page=100))
    files = [ChangedFile(f["filename"], f.get("additions", 0), f.get("deletions", 0))
             for f in data.get("files", []) if matches_any(f["filename"], editable)]
    commits = [_commit(c) for c in data.get("commits", [])]
    return data.get("ahead_by", 0), data.get("behind_by", 0), commits, files


def _commits_under(gh, repo: str, prefixes: list[str], per_path: int = 10) -> list[tuple[str, str, str]]:
    owner, name = repo.split("/")
    seen, out = set(), []
    for prefix in prefixes or [""]:
        kw = {"path": prefix} if prefix else {}
        for c in _json(gh.rest.repos.list_commits(owner, name, per_page=per_path, **kw)):
            if c["sha"] not in seen:
                seen.add(c["sha"])
                out.append(_commit(c))
    return out


def research_forks(gh, upstream: str | None, competitors: list[str], editable: list[str],
                   max_forks: int = 5, readme_chars: int = 1500) -> tuple[list[Lead], list[str]]:
    """Leads from forks and competitors, and notes on what could not be read (never raises on a
    single repository's failure)."""
    leads: list[Lead] = []
    notes: list[str] = []
    base_branch = "master"
    if upstream:
        owner, name = upstream.split("/")
        try:
            info = _json(gh.rest.repos.get(owner, name))
            base_branch = info.get("default_branch", base_branch)
            forks = _json(gh.rest.repos.list_forks(owner, name, sort="stargazers", per_page=max_forks))
        except Exception as exc:   # noqa: BLE001 - reported as a note, research goes on
            notes.append(f"forks of {upstream}: not read ({_why(exc)})")
            forks = []
        for fork in sorted(forks, key=lambda f: -f.get("stargazers_count", 0))[:max_forks]:
            lead = Lead(fork["full_name"], fork.get("html_url", ""), fork.get("stargazers_count", 0), "fork",
                        description=clean(fork.get("description") or "", 300))
            try:
                lead.ahead_by, lead.behind_by, lead.commits, lead.files = _compare(
                    gh, upstream, base_branch, fork["owner"]["login"], fork.get("default_branch", base_branch),
                    editable)
            except Exception as exc:   # noqa: BLE001
                lead.note = f"compare failed: {_why(exc)}"
            if lead.ahead_by == 0 and not lead.note:
                continue                                  # a fork with nothing of its own
            leads.append(lead)
    prefixes = path_prefixes(editable)
    for repo in competitors:
        try:
            owner, name = repo.split("/")
            info = _json(gh.rest.repos.get(owner, name))
        except Exception as exc:   # noqa: BLE001
            notes.append(f"{repo}: not read ({_why(exc)})")
            continue
        lead = Lead(repo, info.get("html_url", f"https://github.com/{repo}"), info.get("stargazers_count", 0),
                    "competitor", description=clean(info.get("description") or "", 300))
        try:
            if upstream and info.get("fork") and (info.get("parent") or {}).get("full_name") == upstream:
                lead.ahead_by, lead.behind_by, lead.commits, lead.files = _compare(
                    gh, upstream, base_branch, owner, info.get("default_branch", "master"), editable)
            else:
                lead.commits = _commits_under(gh, repo, prefixes)
                lead.note = "not in upstream's fork network: recent commits under the editable paths"
        except Exception as exc:   # noqa: BLE001
            lead.note = f"history not read: {_why(exc)}"
        lead.readme = _readme(gh, owner, name, readme_chars)
        leads.append(lead)
    return leads, notes


def _why(exc: Exception) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return f"HTTP {status}" if status else type(exc).__name__


def make_github(token: str | None = None, base_url: str | None = None, **kw):
    from githubkit import GitHub
    return GitHub(token, base_url=base_url, http_cache=False, auto_retry=False, **kw)


def render(leads: list[Lead], notes: list[str]) -> list[Markdown]:
    """research.md's section: fork names, file paths and commit subjects are their owners' words
    (`md` escapes them); the links are GitHub's own pages (`mdsafe.link`)."""
    if not leads and not notes:
        return []
    out = [md("## Forks and competing repositories"), md("")]
    for lead in leads:
        ahead = md(", {} ahead / {} behind", lead.ahead_by, lead.behind_by) if lead.ahead_by is not None else md("")
        out.append(md("- {} ({}, {} stars{})", link(lead.repo, lead.url), lead.relation, lead.stars, ahead))
        for f in lead.files[:10]:
            out.append(md("  - changes {} (+{} -{})", code(f.path), f.additions, f.deletions))
        for sha, subject, url in lead.commits[:5]:
            out.append(md("  - {} {}", link(sha[:10], url), subject))
        if lead.note:
            out.append(md("  - note: {}", spans(lead.note, at_start=False)))
    out += [md("- {}", spans(n)) for n in notes] + [md("")]
    return out
