"""Atomic file writes: every file briefd puts in the outbox appears whole or not at all;
and bounded reads: no input file is ever read past its size limit.

The Maildir recipe: write under a temp name readers ignore (a dotfile ending in
.tmp), fsync it, os.replace it into place, fsync the directory so the rename
itself survives a power cut.

Modes: a file or folder briefd creates gets the mode any program's would: 0666 / 0777 less
the umask (or what a default ACL on the folder says), so 0644 under umask 022 and a shared
outbox is readable by whoever may read it. `tempfile.mkstemp` would make every file 0600
whatever the umask, so temp files are created here with the same O_EXCL recipe but mode
0666, and the kernel applies the umask (briefd never reads or changes it: os.umask is
process-wide and racy with other threads). `use_file_mode` (the `file_mode` setting) fixes
one mode instead, for deployments whose umask is not the one reports should have.

Reads: `read_at_most` is the one way briefd reads an input it did not write (a brief
given to `submit`, a file in the inbox, briefd.toml): never more than limit + 1 bytes,
so /dev/zero or a 5 GB file costs at most that much memory and time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import Any, BinaryIO, Callable, Self

from . import crashpoints
from .errors import BriefdError, ServiceUnavailable

READ_CHUNK = 1 << 16
NEW_FILE_MODE = 0o666  # what every program asks for; the kernel takes the umask (or a default ACL) off it
NEW_FOLDER_MODE = 0o777
TEMP_NAME_TRIES = 100  # O_EXCL collisions of 48 random bits: one try in practice
# A lock is tried this many times, LOCK_TRY_PAUSE_S apart, before it counts as held: `briefd status`
# tests the store's lock by taking it for an instant (lock_holder), which must not turn a daemon away.
LOCK_TRIES, LOCK_TRY_PAUSE_S = 10, 0.05

# The `file_mode` setting, process-wide like the umask it stands in for: set once at start-up
# (use_file_mode), read by every write below, so no caller can forget to pass it.
_file_mode: int | None = None


def use_file_mode(mode: int | None) -> None:
    """From now on, files briefd creates get exactly `mode` (folders it creates for them get
    `folder_mode(mode)`); None: the umask decides, as for any program."""
    global _file_mode
    _file_mode = mode


def folder_mode(mode: int) -> int:
    """The folder mode that goes with a file mode: an x bit wherever there is an r bit
    (0640 -> 0750), since a folder that can be read but not entered is no use."""
    return mode | ((mode & 0o444) >> 2)


def _set_mode(fd: int) -> None:
    """Give a file briefd has just created the `file_mode` setting's mode (if set). fchmod is
    not subject to the umask, so the setting wins over it, which is what it is for."""
    if _file_mode is not None:
        os.fchmod(fd, _file_mode)


def make_folders(path: Path) -> None:
    """`mkdir -p path`: folders are created as any program's are (0777 less the umask); with
    `file_mode` set, the ones created here get folder_mode(file_mode), keeping a setgid bit
    inherited from the parent (a shared group folder's files must stay in its group)."""
    path = Path(path)
    missing: list[Path] = []
    probe = path
    while not os.path.isdir(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            make_folder(folder)
        except FileExistsError:
            if not folder.is_dir():
                raise  # another process made it meanwhile: its mode is its own


def make_folder(path: Path) -> None:
    """`mkdir path` (FileExistsError when taken) with the mode make_folders gives."""
    os.mkdir(path, NEW_FOLDER_MODE)
    if _file_mode is not None:
        os.chmod(path, folder_mode(_file_mode) | (os.stat(path).st_mode & stat.S_ISGID))


def create_temp(folder: Path, hint: str) -> tuple[int, str]:
    """A new empty temp file `.<hint>.<random>.tmp` in `folder` (which must exist), opened
    for writing: mkstemp's O_EXCL recipe, but with the mode any program's file would get
    (see the module doc) instead of mkstemp's fixed 0600. Returns (fd, path)."""
    for _ in range(TEMP_NAME_TRIES):
        name = os.path.join(folder, f".{hint}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, NEW_FILE_MODE)
        except FileExistsError:
            continue
        try:
            _set_mode(fd)
        except OSError:
            os.close(fd)
            os.unlink(name)
            raise
        return fd, name
    raise FileExistsError(errno.EEXIST, f"no free temp name in {folder} after {TEMP_NAME_TRIES} tries")


def open_append(path: Path) -> int:
    """An fd appending to `path` (created as any file briefd writes when missing): the live
    event log. With `file_mode` set, a file briefd owns is given that mode."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, NEW_FILE_MODE)
    try:
        if _file_mode is not None and os.fstat(fd).st_uid == os.geteuid():
            _set_mode(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


class WriteFailed(ServiceUnavailable, OSError):
    """An outbox file could not be written: disk full, read-only, no permission, I/O error.

    Distinct from every other OSError so the daemon can tell "the outbox needs the
    user" (the brief waits, nothing is lost) from a bug; `fix` says what to do.
    """

    def __init__(self, path: Path, cause: OSError) -> None:
        OSError.__init__(self, cause.errno, f"could not write {path}: {cause.strerror or cause}")
        self.path = Path(path)
        self.service, self.reason, self.fix = "outbox", str(self), self.fix_for_errno()

    def fix_for_errno(self) -> str:
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
        make_folders(folder)
        fd, tmp = create_temp(folder, hint)  # hint: whose temp file
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


def file_kind(mode: int) -> str:
    """What a directory entry that is not a regular file is, in words for a refusal ("notes.txt is a
    named pipe (FIFO), not a regular file"): the inbox and the library refuse such entries unopened
    (a FIFO's open waits for a writer), and both say what the entry is the same way."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def secret_line(path: Path, setting: str, what: str) -> str:
    """The first line of a file that holds a secret (serve_token_file, openai_api_key_file), stripped; a
    file that cannot be read, or is not UTF-8 text, raises ValueError naming `setting`, the path and the fix
    (never a line of the file)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline(4096).strip()
    except OSError as exc:
        raise ValueError(f"{setting} {path}: cannot read it ({exc.strerror or exc}); write {what} on its first "
                         "line, readable by briefd alone (chmod 600)") from None
    except UnicodeDecodeError:
        raise ValueError(f"{setting} {path}: not UTF-8 text; write {what} on its first line") from None


def readable_by_others(path: Path | None, setting: str) -> str | None:
    """A warning when a file holding a secret can be read by others than its owner (the docs say chmod 600)."""
    if path is None:
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if mode & 0o077:
        return f"{setting} {path} can be read by other users (mode {mode & 0o777:04o}): chmod 600 {path}"
    return None


class TooLarge(BriefdError, ValueError):
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


class Locked(BriefdError):
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


def store_lock_path(db: Path) -> Path:
    """The lock that makes one daemon per store: `<db>.lock`, next to the database, after
    symlinks are resolved (a link to the store is the same store)."""
    real = Path(db).resolve()
    return real.with_name(real.name + ".lock")


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on `folder` itself for the time of a block: writers that choose a free
    name in it (actions.drop_into_inbox) take turns. Nothing else locks a folder (the daemon's
    locks are files), so this never waits on a daemon."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the flock goes with the descriptor


def hold_lock(path: Path, what: str, fix: str) -> ProcessLock:
    """The one lock mechanism (the inbox's and the store's): take `path`'s flock or raise
    Locked naming the holder's pid, which the holder writes into the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    for tries_left in range(LOCK_TRIES - 1, -1, -1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if tries_left:
                time.sleep(LOCK_TRY_PAUSE_S)
                continue
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


@dataclass(frozen=True)
class LockState:
    """Who holds a lock file of hold_lock's: `held` None when that cannot be told (unreadable);
    `pid` the process the file names (the holder when held, else the last holder, now gone)."""

    path: Path
    held: bool | None
    pid: int | None


def acquire_store_lock(db: Path) -> ProcessLock:
    """Take the store's lock for the life of this process, or raise Locked naming the holder.

    Two daemons on one store (each with its own inbox) would each re-queue and run the
    other's running brief: two `complete` events, the model paid twice. The inbox lock
    cannot see that; this one can, by the same mechanism (files.hold_lock).
    """
    return hold_lock(store_lock_path(db), f"using the store {db}",
                     "stop it first, or give this daemon a store of its own (--db)")


def lock_holder(path: Path) -> LockState:
    """Is `path` (hold_lock's file) held, and by which pid? Never creates or writes the file.

    The flock is the truth (the kernel drops it when its holder dies, however it dies), so the
    pid written in the file is only trusted while the lock is held. Testing it means taking a
    shared lock for an instant; hold_lock tries LOCK_TRIES times, so a daemon starting at that
    instant is not turned away.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return LockState(path, False, None)
    except OSError:
        return LockState(path, None, None)
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
        pid = int(text[1]) if len(text) > 1 and text[0] == "pid" and text[1].isdigit() else None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return LockState(path, True, pid)
        except OSError:
            return LockState(path, None, pid)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return LockState(path, False, pid)
    finally:
        os.close(fd)
