"""One uid per repository for a root worker's sandboxes (issue 41, A4 and A5).

A root worker runs target code as an unprivileged uid. Were that one uid for every repository,
the kernel would count their processes together (RLIMIT_NPROC is per uid: one repository parking
processes makes another's build fail with EAGAIN) and they would share one user keyring. So each
repository gets a uid of its own from the operator's range (`AUTORESEARCH_SANDBOX_UIDS`,
`first-last`), claimed once and kept: a file `<cache root>/repos/.uids/<uid>` holding the
repository's key, made with `O_EXCL` so two workers cannot claim one uid for two repositories.
The search starts at a place the key hashes to, so a repository finds its own claim in one look;
a uid that belongs to an account of this machine (`/etc/passwd`) is never handed out. The claims
live under the per-repository namespaces, which no repository may declare or bind.

Keeping the uid keeps the repository's cache backings its own across runs; keyrings do not carry
over at all, since every step runs in a fresh user namespace with a fresh session keyring
(`jobs.guard.sandboxinit`).
"""
from __future__ import annotations

import hashlib
import os
import pwd
from pathlib import Path

REGISTRY = ".uids"


class TenantError(RuntimeError):
    """No uid can be given to a repository; the message names the setting to change."""


def _free(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def uid_for(key: str, namespaces: Path, first: int, last: int) -> int:
    """The uid of the repository whose cache key is `key`: its earlier claim, else the first free
    one from where the key hashes to in `first..last`."""
    registry = namespaces / REGISTRY
    registry.mkdir(mode=0o700, parents=True, exist_ok=True)
    size = last - first + 1
    start = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) % size
    for i in range(size):
        uid = first + (start + i) % size
        claim = registry / str(uid)
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            if _owner(claim) == key:
                return uid
            continue
        with os.fdopen(fd, "w") as fh:
            if _free(uid):
                fh.write(key)
                return uid
            fh.write("# an account of this machine\n")      # never handed out; looked past next time
    raise TenantError(f"every uid of AUTORESEARCH_SANDBOX_UIDS={first}-{last} is taken by another repository "
                      f"(claims in {registry}); widen the range")


def _owner(claim: Path) -> str:
    try:
        fd = os.open(claim, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd) as fh:
        return fh.read(256).strip()
