"""Reading files out of trees that a repository or target code controls: never through a symbolic
link (at any component of the path), never anything but a regular file (no FIFO, no device such as
/dev/zero), never more than a stated number of bytes.

A committed symlink `candidates/x.patch -> /run/secrets/app.pem`, or one a build wrote, therefore
raises `UnsafeFile` naming the path and what it is, and the trusted side never opens its target.
Every path component is opened relative to the previous one with O_NOFOLLOW, so a directory
swapped for a link between a check and the read is refused too. The root passed in is the
caller's own (a clone or worktree it made); everything below it is untrusted.
"""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

PATCH_LIMIT = 8 << 20          # bytes of one candidate patch
TEXT_LIMIT = 2 << 20           # bytes of one source file the trusted side reads (research, the agent)
CONFIG_LIMIT = 1 << 20         # bytes of the repository's autoresearch config


class UnsafeFile(OSError):
    """The path is a link, not a regular file, escapes its root, or is larger than allowed."""


def _parts(rel: str) -> tuple[str, ...]:
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if not parts or parts[0] == "/" or any(p in ("..", "") for p in parts):
        raise UnsafeFile(f"{rel}: not a path inside the tree")
    return tuple(p for p in parts if p != ".") or (".",)


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
Explain = Callable[[int, str, str, OSError], OSError]


def open_dir(root: Path | str, parts: tuple[str, ...], rel: str, *, create: bool = False, mode: int = 0o755,
             explain: Explain | None = None) -> int:
    """A descriptor of the folder `parts` below `root` (the caller's own), each component opened
    relative to the one before with O_NOFOLLOW; with `create`, a missing one is made (`mkdirat`)
    and then opened the same way. A component that cannot be opened raises `explain(dir_fd, name,
    rel, exc)` (default: `UnsafeFile` for a link or a non-folder, the OSError itself otherwise)."""
    explain = explain or _explain
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            try:
                nxt = _open_or_make(fd, name, create, mode)
            except OSError as exc:
                raise explain(fd, name, rel, exc) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_or_make(dir_fd: int, name: str, create: bool, mode: int) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):      # made meanwhile: opened below like any other
            os.mkdir(name, mode, dir_fd=dir_fd)
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def _explain(dir_fd: int, name: str, rel: str, exc: OSError) -> OSError:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return exc                                          # missing: the caller's FileNotFoundError
    if stat.S_ISLNK(st.st_mode):
        return UnsafeFile(f"{rel}: {name} is a symbolic link; autoresearch does not follow links out of a tree")
    return UnsafeFile(f"{rel}: {name} is not a regular file or folder")


def open_regular(root: Path | str, rel: str) -> int:
    """A read-only descriptor of the regular file `rel` under `root`, opened without following any
    link; UnsafeFile otherwise (FileNotFoundError when it does not exist)."""
    parts = _parts(rel)
    dir_fd = open_dir(Path(root), parts[:-1], rel)
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise _explain(dir_fd, parts[-1], rel, exc) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UnsafeFile(f"{rel}: not a regular file (a device, pipe or folder)")
        return fd
    finally:
        os.close(dir_fd)



def head(root: Path | str, rel: str, n: int) -> bytes | None:
    """The first `n` bytes of the regular file `rel` under `root` (read like `open_regular`: no
    link followed), or None when it cannot be opened that way (a file's magic number, say)."""
    try:
        fd = open_regular(root, rel)
    except OSError:
        return None
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)

def read_bytes(root: Path | str, rel: str, limit: int) -> bytes:
    """The whole regular file `rel` under `root`; UnsafeFile if it is a link, not regular, or
    larger than `limit` bytes (then nothing of it is returned)."""
    fd = open_regular(root, rel)
    try:
        if os.fstat(fd).st_size > limit:
            raise UnsafeFile(f"{rel}: {os.fstat(fd).st_size} bytes, more than the {limit} allowed")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnsafeFile(f"{rel}: more than the {limit} bytes allowed")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(root: Path | str, rel: str, limit: int, errors: str = "strict") -> str:
    return read_bytes(root, rel, limit).decode("utf-8", errors=errors)


def read_file(path: Path | str, limit: int, errors: str = "strict") -> str:
    """`read_text` of one file whose folder the caller trusts (only the file itself may be a link)."""
    path = Path(path)
    return read_text(path.parent, path.name, limit, errors)


def is_regular(root: Path | str, rel: str) -> bool:
    try:
        os.close(open_regular(root, rel))
        return True
    except OSError:
        return False


def list_dir(root: Path | str, rel: str) -> list[str]:
    """The names in the folder `rel` under `root` (reached without following links); [] if absent."""
    try:
        fd = open_dir(Path(root), _parts(rel) if rel not in ("", ".") else (), rel)
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def walk_files(root: Path | str, skip_dirs: frozenset[str] = frozenset({".git"})) -> Iterator[str]:
    """The relative paths of the regular files under `root`, links (to files or folders) left out."""
    root = Path(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            full = os.path.join(folder, name)
            try:
                if stat.S_ISREG(os.lstat(full).st_mode):
                    yield os.path.relpath(full, root).replace(os.sep, "/")
            except OSError:
                continue
