"""Atomic file writes: every file briefd puts in the outbox appears whole or not at all;
and bounded reads: no input file is ever read past its size limit.

The Maildir recipe: write under a temp name readers ignore (a dotfile ending in
.tmp), fsync it, os.replace it into place, fsync the directory so the rename
itself survives a power cut.

Reads: `read_at_most` is the one way briefd reads an input it did not write (a brief
given to `submit`, a file in the inbox, briefd.toml): never more than limit + 1 bytes,
so /dev/zero or a 5 GB file costs at most that much memory and time.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Self

from . import crashpoints

READ_CHUNK = 1 << 16


class WriteFailed(OSError):
    """An outbox file could not be written: disk full, read-only, no permission, I/O error.

    Distinct from every other OSError so the daemon can tell "the outbox needs the
    user" (the brief waits, nothing is lost) from a bug; `fix` says what to do.
    """

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, f"could not write {path}: {cause.strerror or cause}")
        self.path = Path(path)

    @property
    def fix(self) -> str:
        folder = self.path.parent
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"free space on the filesystem that holds {folder}"
        if self.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return f"make {folder} writable by the user briefd runs as"
        return f"check {folder} and the disk under it (see the error above)"


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part.

    Raises WriteFailed (an OSError) when the filesystem refuses; no temp file is left.
    """
    path = Path(path)

    def write(handle: BinaryIO) -> str:
        handle.write(data)
        return path.name

    atomic_write_with(path.parent, write, hint=path.name)


def atomic_write_with(folder: Path, write: Callable[[BinaryIO], str], hint: str = "write") -> Path:
    """The one atomic-write mechanism: `write` fills a temp file in `folder` and returns the
    name it should have (decided once the content is known, e.g. brief.json vs brief.bin);
    the file is fsynced, renamed into place and the folder fsynced. Raises WriteFailed."""
    folder = Path(folder)
    tmp: str | None = None
    path = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{hint}.", suffix=".tmp", dir=folder)  # hint: whose temp file
        with os.fdopen(fd, "wb") as handle:
            path = folder / write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        crashpoints.reached("before_rename")
        os.replace(tmp, path)
        tmp = None
        fsync_dir(folder)
        return path
    except OSError as exc:
        raise (exc if isinstance(exc, WriteFailed) else WriteFailed(path, exc)) from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def sweep_temp_files(folder: Path) -> int:
    """Remove temp files a crash left behind (`.<name>.<random>.tmp`); returns how many."""
    removed = 0
    if not folder.is_dir():
        return 0
    for tmp in folder.rglob(".*.tmp"):
        try:
            tmp.unlink()
            removed += 1
        except OSError:
            pass
    return removed


class TooLarge(ValueError):
    """An input over its size limit. `size` is its real size where stat knows it (a regular
    file), None where only reading could tell (a device such as /dev/zero, a pipe)."""

    def __init__(self, path: Path, size: int | None, limit: int) -> None:
        shown = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
        super().__init__(f"{path} is too large: {shown}, and the limit is {limit:,} bytes")
        self.path, self.size, self.limit = Path(path), size, limit


def read_at_most(handle: BinaryIO, limit: int) -> bytes:
    """Up to limit + 1 bytes from `handle`: the caller learns "over the limit" from the
    extra byte without ever holding more than that (a stream can be endless)."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = handle.read(min(left, READ_CHUNK))
        if not chunk:  # EOF (or None: a non-blocking stream with nothing yet)
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_file_at_most(path: Path, limit: int) -> bytes:
    """The whole of an input file of at most `limit` bytes, else TooLarge (OSError when it
    cannot be read). A regular file is judged by its size first, so a 5 GB (even sparse)
    file is refused before a byte is read; anything else is read up to limit + 1 bytes."""
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        regular = stat.S_ISREG(st.st_mode)
        if regular and st.st_size > limit:
            raise TooLarge(Path(path), st.st_size, limit)
        data = read_at_most(handle, limit)
    if len(data) > limit:  # a device or pipe, or a file that grew while read
        raise TooLarge(Path(path), None, limit)
    return data


class Locked(Exception):
    """Another live briefd holds a lock this one needs; the message names it and the fix."""

    def __init__(self, path: Path, holder: str, what: str, fix: str) -> None:
        super().__init__(f"another briefd ({holder}) is already {what} (lock {path}); {fix}")
        self.path, self.holder = Path(path), holder


@dataclass
class ProcessLock:
    """An flock held for the life of this process: the kernel releases it when the process
    dies, however it dies, so a crash never leaves a stale lock to clear by hand."""

    path: Path
    fd: int

    def release(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold_lock(path: Path, what: str, fix: str) -> ProcessLock:
    """The one lock mechanism (the inbox's and the store's): take `path`'s flock or raise
    Locked naming the holder's pid, which the holder writes into the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown pid"
        finally:
            os.close(fd)
        raise Locked(path, holder, what, fix) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same; a second daemon is told "unknown pid"
    return ProcessLock(path, fd)
