"""Cache backings made and opened without following a link (issue 41, A1).

A declared cache is backed by a folder under `<cache root>/repos/<repo key>/<arm>/` that target
code writes into. Anything in it may be a link the repository planted in an earlier run (`a/b ->`
the App's workdir), so no path under that base is ever handed to `mkdir(parents=True)`,
`os.chown` or bubblewrap as a string: the backing is walked one component at a time from the
base, each component opened with `O_NOFOLLOW | O_DIRECTORY` relative to the folder before it
(a link, or anything but a folder, is refused with its place named), made with `mkdirat` where
missing, chowned through its descriptor, and the descriptor itself is what the sandbox binds
(`bwrap --bind-fd`, which also checks after mounting that what it mounted is that inode).
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath

from jobs.guard import safefs


class CacheDirError(ValueError):
    """A backing cannot be walked safely (a link, a file, `..`); the message says where."""


def components(rel: str | Path) -> tuple[str, ...]:
    """The folder names of the relative path `rel`; absolute paths, `.` and `..` are refused."""
    path = PurePosixPath(str(rel))
    if path.is_absolute() or any(part in (".", "..") for part in path.parts) or str(rel).startswith("/"):
        raise CacheDirError(f"{rel} is not a plain relative path")
    return tuple(p for p in path.parts if p)


def open_beneath(base: str | Path, rel: str | Path, *, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of the folder `base/rel`, reached one component at a time from `base` (the
    operator's own folder, trusted) without following a link (`safefs.open_dir`); missing folders
    are made when `create`. The caller closes it."""
    return safefs.open_dir(Path(base), components(rel), str(Path(base) / rel), create=create, mode=mode,
                           explain=_refusal)


def _refusal(dir_fd: int, name: str, where: str, exc: OSError) -> OSError:
    """Why the walk to `where` stopped at `name`: a link or a non-folder is a CacheDirError."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
        return exc
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    return CacheDirError(f"{where}: {name} is {'a link' if link else 'not a folder'}; a cache's backing is never "
                         "followed through a link (something the repository's earlier build left there)")


def give(fd: int, uid: int) -> None:
    """Make the folder open at `fd`, and everything in it, owned by `uid` (its group too), without
    following a link: a cache made for an earlier uid of this repository becomes its uid's now.
    Only walked when the folder itself belongs to someone else, so a cache of the right owner
    costs one fstat per step."""
    if os.fstat(fd).st_uid == uid:
        return
    for _, dirs, files, dirfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, uid, dir_fd=dirfd, follow_symlinks=False)
    os.fchown(fd, uid, uid)
