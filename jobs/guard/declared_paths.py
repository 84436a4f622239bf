"""Which paths a repository may declare for its sandbox (`sandbox.caches`, `sandbox.read_only`).

A declared path is bound into the sandbox of target code, so it must lie under the operator's
cache root and never be, contain or lie in anything of the operator's side:

- the cache root itself and the per-repository cache namespaces (`jobs.measure.isolation.Isolation.backing`);
- `protected`: the run's trees, its out folder, the App's workdir (clones and runs of every
  repository);
- `secrets`: the operator's secret files (the App's private key, cloud credentials, whatever
  `jobs.guard.sandbox.hide` masks). Masks alone would not do: `hide` masks only inside the system
  directories, so an operator who keeps the key under the cache root would see a repository's
  `read_only: [<the key's folder>]` show it to target code.

Pure: the caller (`Isolation.from_spec`) resolves every path first (links followed), so a link
under the cache root that points at a protected path is judged by where it points.
"""
from __future__ import annotations

from typing import Iterable

AVOID = "declare a separate folder under the cache root ($AUTORESEARCH_CACHE_ROOT)"


def relation(path: str, other: str) -> str:
    """How absolute, resolved `path` overlaps `other`: 'is', 'contains', 'lies in', or '' (apart)."""
    if path == other:
        return "is"
    if other.startswith(path.rstrip("/") + "/"):
        return "contains"
    if path.startswith(other.rstrip("/") + "/"):
        return "lies in"
    return ""


def refusal(field: str, raw: str, real: str, *, root: str, namespaces: str,
            protected: Iterable[str] = (), secrets: Iterable[str] = ()) -> str:
    """Why the path `raw` a repository declared in `sandbox.<field>` (resolved: `real`) may not be
    bound into a sandbox, or '' when it may. Secrets are checked first, so a key kept inside a
    protected folder is named as the key."""
    said = raw if raw == real else f"{raw} (that is {real})"
    if relation(real, root) != "lies in":
        where = "the cache root itself" if real == root else f"outside the cache root {root}"
        return (f"sandbox.{field}: {said} is {where}; declared paths must be folders or files under it "
                "($AUTORESEARCH_CACHE_ROOT)")
    if relation(real, namespaces) in ("is", "lies in"):
        return (f"sandbox.{field}: {said} lies in the per-repository cache namespaces ({namespaces}); "
                f"declare a path of your own under {root} instead")
    for kinds, what in ((secrets, "a secret file of the operator's (such as the App's private key)"),
                        (protected, "which holds the run's trees or the App's own files")):
        for guarded in kinds:
            how = relation(real, guarded)
            if how:
                return (f"sandbox.{field}: {said} {how} {guarded}, {what}; no declared path is, contains or "
                        f"lies in one; {AVOID}")
    return ""


def overlap(caches: Iterable[str], read_only: Iterable[str]) -> str:
    """Why these declarations (resolved) may not be granted together, or '' when they may: one
    cache inside another (the outer cache's build could plant a link where the inner one is
    bound, and each would hide part of the other), or a cache that is, contains or lies in a
    read-only path. Pure."""
    caches, read_only = list(caches), list(read_only)
    for i, path in enumerate(caches):
        for others, what in ((caches[i + 1:], "another declared cache; caches must not overlap"),
                             (read_only, "a declared read-only path; a cache and a read-only path must not overlap")):
            for other in others:
                how = relation(path, other)
                if how:
                    return f"sandbox.caches: {path} {how} {other}, {what}; {AVOID}"
    return ""
