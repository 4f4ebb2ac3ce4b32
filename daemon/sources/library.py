"""The local library: folders of documents, indexed into the store and kept current.

How a file is judged (cheapest test first, so an unchanged library costs a walk and no reads):
1. (path, size, mtime_ns) as recorded → unchanged: not opened at all.
2. Otherwise its content is hashed (in a thread, in chunks). A hash the store knows is not
   read again: the same file touched → only size/mtime are updated; a copy of an indexed
   file → a `duplicate` row; a file whose indexed twin is gone → a rename: the document's
   page and passages are moved to the new file URI in place (store/library.py says why).
3. Otherwise the injected reader reads it (a child process with a deadline in the daemon)
   and the document is saved like a web page, under its file URI.
A file whose size or mtime moved while it was hashed or read is left `pending` and read
on the next look. Refused, with the reason kept in `library_files` (`briefd library
status` lists them): symbolic links that leave the library folders, symbolic link loops,
hard links whose file has names outside them, named pipes, sockets and device nodes (never
opened: a FIFO's open waits for a writer), folders deeper than MAX_FOLDER_DEPTH (the folder
is named; nothing below it is read), files that cannot be read, files over MAX_FILE_BYTES
(judged by their size: a sparse file is not read), documents the reader refuses. Files of
other types are recorded as `skipped`; hidden files and folders are not looked at. Files
that are gone are dropped with their passages (a duplicate inherits the document instead,
when there is one).

Kept current by an inotify watch on the folders (daemon.folderwatch: bounded in depth like
the walk; events debounced, handed to the event loop with call_soon_threadsafe) plus
a full rescan every `rescan_s`, for shares without inotify and for events lost in between.
The watch is a convenience, never a condition: one that cannot be set up (no inotify, its
limits reached) or whose thread ends later is said once, and the rescan alone keeps the index.
Every file-system call runs in a thread; store calls run on the loop's thread (the
connection is bound to it) and are short.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...store import Store, diagnose
from ...store.library import (DUPLICATE, INDEXED, PENDING, REFUSED, SKIPPED, FileRow, LibraryFiles, PassageHit,
                              shown_path)

from .documents import FORMAT_TYPES, SUFFIXES
from .extract import PageText
from .folderwatch import FolderWatch
from .pagework import LIBRARY_WORKERS, PAGE_WORKERS, PageUnreadable, PageWorkers
from .search import SNIPPET_MAX_CHARS, SearchHit
from .sources import LIBRARY
from .structure import marks_json
from ..core.files import Locked, acquire_store_lock, file_kind
from ..core.untrusted import clean

log = logging.getLogger("briefd")

# The document types the library reads, by file suffix (lower case), with the content type
# the reader is told. The one list: anything else is `skipped`.
MAX_FILE_BYTES = 512 * 1024 * 1024
"""A file larger than this is refused from its size, unread (a 200 MB PDF is still read)."""

HASH_CHUNK = 1 << 20
"""Bytes hashed per read: memory stays at one chunk whatever the file's size."""

RESCAN_S = 60.0
"""Seconds between full rescans: the watch on shares without inotify (use_polling), and the
safety net for events lost elsewhere. A rescan of an unchanged library reads no content."""

DEBOUNCE_S = 1.0
"""Events are gathered this long before the paths they name are looked at: a file being
written gives a burst of them, and a file still changing would only be left pending."""

READ_CONCURRENCY = LIBRARY_WORKERS
"""Documents read at once: as many as the page workers lend the library (pagework keeps one for research)."""

MAX_FOLDER_DEPTH = 64
"""Folders below a library folder that are walked and watched. A filing tree is a few levels deep
(year/client/project/drafts is 4); a chain of hundreds is made to hurt: every level is listed on
every rescan and holds one of the user's inotify watches (fs.inotify.max_user_watches), and a
recursive walk of it (Python 3.11's os.walk, which watchdog's set-up used) raised RecursionError
past 1,000 levels and stopped the daemon. A deeper folder gets a refused row naming it (`briefd
library status`); nothing below it is read, and its events are not heard."""

WATCH_CHECK_S = 5.0
"""Seconds between looks at the watch's thread: one that ended (its descriptor failed, a watch
limit reached by a new folder) leaves the library on the rescan, said once."""

UNREADABLE = "cannot be read"
CHANGED_WHILE_READ = "changed while being read; it is read again on the next look"

Reader = Callable[[Path, str], Awaitable[PageText | None]]
"""Reads one document (a path to open, the file's name for routing and messages): its text and
passages, None when it has no readable text; raises PageUnreadable (refused, with the reason) or
OSError (cannot be read). The path is the descriptor the indexer opened and vetted
(/proc/<pid>/fd/<n>, see `Library._read`), so what is read is the file that was checked."""


def document_type(path: Path) -> str | None:
    """The content type of a document file by its name (daemon.documents' formats), or None:
    not a type briefd reads, so the library skips it."""
    fmt = SUFFIXES.get(path.suffix.lower())
    return FORMAT_TYPES[fmt] if fmt else None


def _shown(path: str | Path) -> str:
    """A path for a log line or a reason: bytes that are not UTF-8 escaped (b"caf\\xe9" → caf\\xe9), never
    dropped or replaced, so the user can find the file (store.library.shown_path)."""
    return clean(shown_path(os.fsdecode(path)))


# --------------------------------------------------------------------------- walking


@dataclass(frozen=True)
class Found:
    """A document file under a folder: `real` is what is opened (the target, for a link inside)."""

    path: str
    folder: str
    real: str
    size: int
    mtime_ns: int
    links: int = 1                      # st_nlink: names the file has (hard links), see `_other_names`
    inode: tuple[int, int] = (0, 0)     # (st_dev, st_ino): the file itself, whatever its names


@dataclass
class Walk:
    """What one walk of the folders found; `present` is every path that has or may get a row."""

    found: list[Found] = field(default_factory=list)
    refused: list[tuple[str, str, str]] = field(default_factory=list)   # path, folder, reason
    skipped: list[tuple[str, str, int, int]] = field(default_factory=list)  # path, folder, size, mtime_ns
    unavailable: dict[str, str] = field(default_factory=dict)  # folder → why it could not be listed
    present: set[str] = field(default_factory=set)
    folders_seen: list[Path] = field(default_factory=list)  # directories to descend into (walk only)


def _inside(real: str, roots: Iterable[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _classify(path: str, folder: str, roots: tuple[str, ...], into: Walk) -> None:
    """One directory entry, decided from lstat/stat alone (nothing is opened). A name in another
    encoding (Latin-1 on an old share: bytes os.fsdecode keeps as lone surrogates) is read like any
    other: the store keeps its text form (store.library.path_text), users see it escaped (`_shown`)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        into.present.add(path)
        into.refused.append((path, folder, f"{UNREADABLE}: {exc.strerror or exc}"))
        return
    real = path
    if stat.S_ISLNK(st.st_mode):
        into.present.add(path)
        target = "?"
        try:
            target = os.readlink(path)
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                into.refused.append((path, folder, "a symbolic link loop: it never reaches a file"))
            elif exc.errno == errno.ENOENT:
                into.refused.append((path, folder, f"a broken symbolic link (to {_shown(target)})"))
            else:
                into.refused.append((path, folder, f"{UNREADABLE}: {exc.strerror or exc}"))
            return
        real = os.path.realpath(path)
        if not _inside(real, roots):
            into.refused.append((path, folder, f"a symbolic link to {_shown(real)}, outside the library "
                                               f"folders: briefd reads only what lies in them"))
            return
        if stat.S_ISDIR(st.st_mode):
            into.present.discard(path)  # its target is walked under its own path (and a link to an
            return                      # ancestor would be an endless walk)
    if stat.S_ISDIR(st.st_mode):
        into.folders_seen.append(Path(path))
        return
    into.present.add(path)
    if not stat.S_ISREG(st.st_mode):  # never opened: a FIFO's open would wait for a writer
        kind = file_kind(st.st_mode)
        into.refused.append((path, folder, f"{kind}, not a regular file: briefd reads only regular files "
                                           f"and opens nothing else"))
    elif document_type(Path(path)) is not None:
        into.found.append(Found(path, folder, real, st.st_size, st.st_mtime_ns, st.st_nlink, (st.st_dev, st.st_ino)))
    else:
        into.skipped.append((path, folder, st.st_size, st.st_mtime_ns))


def _too_deep(folder: str) -> str:
    return (f"a folder nested deeper than {MAX_FOLDER_DEPTH} folders below {_shown(folder)}: not looked into, "
            f"its files are not read (move them higher up to have them read)")


def _other_names(into: Walk) -> None:
    """Refuse the files with names outside what the walk saw (hard links to a file elsewhere).

    A hard link is the file itself under one more name: a link inside the library to a file outside
    it would be read as if it were the library's, as a symbolic link leaving the folders would, and
    the folders' own rule is that briefd reads only what lies in them. Unlike the inbox (which takes
    and deletes files, and so refuses every name of a file with more than one), the library keeps
    its copies: names of one file that all lie in the walked folders are one document and its
    duplicates. So a file is refused when it has more names (st_nlink) than the walk found for it."""
    names: dict[tuple[int, int], set[str]] = {}
    for item in into.found:
        names.setdefault(item.inode, set()).add(item.real)
    kept: list[Found] = []
    for item in into.found:
        seen = len(names[item.inode])
        if item.links <= seen:
            kept.append(item)
            continue
        into.refused.append((item.path, item.folder, (
            f"a hard link with names outside the library folders ({item.links - seen} of the file's {item.links}: "
            f"in another folder, a hidden one, or one deeper than {MAX_FOLDER_DEPTH}): briefd reads only files "
            f"that lie in the folders; copy the file in instead of linking it")))
    into.found = kept


def _roots(folders: Iterable[Path]) -> tuple[str, ...]:
    return tuple(os.path.realpath(f) for f in folders)


def walk_folders(folders: Iterable[Path]) -> Walk:
    """Every entry under the folders, hidden ones left out, links not descended into. Blocking."""
    folders = tuple(folders)
    roots = _roots(folders)
    out = Walk()
    for folder in folders:
        name = str(folder)
        try:
            with os.scandir(folder):
                pass
        except OSError as exc:
            out.unavailable[name] = f"cannot be listed: {exc.strerror or exc}"
            continue
        stack = [(str(folder), 0)]  # (folder, its depth below the library folder): no recursion
        while stack:
            current, depth = stack.pop()
            try:
                with os.scandir(current) as entries:
                    names = sorted(e.name for e in entries if not e.name.startswith("."))
            except OSError as exc:
                out.present.add(current)
                out.refused.append((current, name, f"folder {UNREADABLE}: {exc.strerror or exc}"))
                continue
            for entry in names:
                _classify(os.path.join(current, entry), name, roots, out)
            for below in reversed(out.folders_seen):
                if depth + 1 > MAX_FOLDER_DEPTH:
                    out.present.add(str(below))
                    out.refused.append((str(below), name, _too_deep(name)))
                else:
                    stack.append((str(below), depth + 1))
            out.folders_seen.clear()
    _other_names(out)
    return out


def look_at(paths: Iterable[Path], folders: Iterable[Path]) -> tuple[Walk, list[str], bool]:
    """Paths named by watch events: (what they are now, the ones that are gone, whether a
    folder appeared among them so that only a full scan can see its files). Blocking."""
    folders = tuple(folders)
    roots = _roots(folders)
    out, gone, rescan = Walk(), [], False
    for path in paths:
        folder = next((f for f in folders if path.is_relative_to(f)), None)
        if folder is None:
            continue
        parts = path.relative_to(folder).parts
        if any(part.startswith(".") for part in parts) or len(parts) - 1 > MAX_FOLDER_DEPTH:
            continue  # hidden, or in a folder too deep to be looked into (the rescan's row says so)
        if not os.path.lexists(path):
            gone.append(str(path))
            continue
        _classify(str(path), str(folder), roots, out)
        rescan = rescan or bool(out.folders_seen)
    linked = [item for item in out.found if item.links > 1]
    if linked:  # where a file's other names lie only a walk of every folder can tell (`_other_names`)
        out.found = [item for item in out.found if item.links <= 1]
        rescan = True
    return out, gone, rescan


# --------------------------------------------------------------------------- hashing


@dataclass(frozen=True)
class Hashed:
    sha256: str | None  # None: refused or changed (see `problem`)
    size: int
    mtime_ns: int
    bytes_read: int
    problem: str | None = None
    pending: bool = False
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of what was hashed: what may be read


def open_vetted(real: str, roots: tuple[str, ...]) -> int:
    """A descriptor on `real`, opened without following a last-component link, and checked to
    lie inside the library where it actually is (the kernel's own name for the open file).

    The walk checked the path, but a folder on the way can be swapped for a link between the
    walk and the open; the descriptor is what is hashed and read, so it is what is checked.
    Raises OSError (PermissionError, naming the problem, for a file outside the folders).
    """
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        where = os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else os.path.realpath(real)
        if not _inside(where, roots):
            raise PermissionError(errno.EPERM, f"it now leads to {_shown(where)}, outside the library folders")
    except BaseException:
        os.close(fd)
        raise
    return fd


def hash_file(found: Found, roots: tuple[str, ...]) -> Hashed | None:
    """The content's sha256, read in chunks through one vetted descriptor; None when the file is
    gone. Changed while hashed (or since the walk): pending. Blocking."""
    try:
        fd = open_vetted(found.real, roots)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Hashed(None, found.size, found.mtime_ns, 0, f"{UNREADABLE}: {exc.strerror or exc}")
    digest, n = hashlib.sha256(), 0
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return Hashed(None, found.size, found.mtime_ns, 0, "not a regular file")
        while chunk := os.read(fd, HASH_CHUNK):
            digest.update(chunk)
            n += len(chunk)
        after = os.fstat(fd)
    except OSError as exc:
        return Hashed(None, found.size, found.mtime_ns, n, f"{UNREADABLE}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    versions = {(found.size, found.mtime_ns), (before.st_size, before.st_mtime_ns), (after.st_size, after.st_mtime_ns)}
    linked = after.st_nlink > found.links  # a name given since the walk: where it lies is the next walk's to say
    if len(versions) > 1 or n != after.st_size or linked:
        return Hashed(None, after.st_size, after.st_mtime_ns, n, CHANGED_WHILE_READ, pending=True)
    return Hashed(digest.hexdigest(), after.st_size, after.st_mtime_ns, n, identity=(after.st_dev, after.st_ino))


def _version_now(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


# --------------------------------------------------------------------------- the indexer


@dataclass
class ScanCounts:
    """What one pass did. `bytes_read`: file content read by briefd (hashing, and the size
    of each document handed to the reader); 0 for a rescan of an unchanged library."""

    documents: int = 0   # document files looked at
    unchanged: int = 0
    indexed: int = 0     # read and saved
    moved: int = 0       # renamed: the document followed, nothing read
    duplicates: int = 0
    refused: int = 0
    pending: int = 0
    dropped: int = 0
    skipped: int = 0     # files of other types (counted, not read)
    bytes_read: int = 0
    reader_calls: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _unchanged(row: FileRow | None, size: int, mtime_ns: int) -> bool:
    """Recorded with this size and mtime, and in a state that a later look would not change
    (an unreadable file is looked at again: chmod changes neither size nor mtime)."""
    if row is None or (row.size, row.mtime_ns) != (size, mtime_ns):
        return False
    if row.state == REFUSED:
        return not (row.reason or "").startswith(UNREADABLE)
    return row.state in (INDEXED, DUPLICATE, SKIPPED)


@dataclass
class Library:
    """The indexer of the `library` folders over one store; `read` reads one document."""

    folders: tuple[Path, ...]
    store: Store
    read: Reader
    max_bytes: int = MAX_FILE_BYTES
    concurrency: int = READ_CONCURRENCY
    bytes_read: int = 0      # since start: what the tests and `make bench` measure
    reader_calls: int = 0
    _dirty: set[Path] = field(default_factory=set)
    watch: FolderWatch | None = None  # while `run` runs: the live watch (None: the rescan alone keeps it current)
    _rescan: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.files = LibraryFiles(self.store)
        self.roots = _roots(self.folders)

    # ---- one pass ------------------------------------------------------------------------

    async def scan(self) -> ScanCounts:
        """Walk every folder and bring the store in line with it; returns what was done."""
        async with self._lock:
            walk = await asyncio.to_thread(walk_folders, self.folders)
            counts = ScanCounts()
            await self._settle(walk, counts)
            gone = [row for path, row in self.files.known().items()
                    if path not in walk.present and row.folder not in walk.unavailable]
            counts.dropped += self.files.drop(gone)
            for folder in self.folders:
                self.files.record_folder(str(folder), walk.unavailable.get(str(folder)))
            self.files.forget_folders(str(f) for f in self.folders)
            for name, why in walk.unavailable.items():
                log.warning("library folder %s %s; its documents are kept until it can be listed again",
                            _shown(name), why)
            self._log(counts)
            return counts

    async def check(self, paths: Iterable[Path]) -> ScanCounts:
        """Look at the paths watch events named (the cheap path; a folder among them asks a scan)."""
        async with self._lock:
            walk, gone, rescan = await asyncio.to_thread(look_at, list(paths), self.folders)
            counts = ScanCounts()
            await self._settle(walk, counts)
            known = self.files.known()
            counts.dropped += self.files.drop(known[p] for p in gone if p in known)
            self._log(counts)
        if rescan:
            self.rescan_soon()
        return counts

    def _log(self, counts: ScanCounts) -> None:
        self.bytes_read += counts.bytes_read
        self.reader_calls += counts.reader_calls
        if counts.indexed or counts.moved or counts.dropped or counts.refused or counts.pending:
            log.info("library: %d indexed, %d moved, %d dropped, %d refused, %d pending (%d unchanged)",
                     counts.indexed, counts.moved, counts.dropped, counts.refused, counts.pending, counts.unchanged)

    async def _settle(self, walk: Walk, counts: ScanCounts) -> None:
        known = self.files.known()
        for path, folder, reason in walk.refused:
            row = known.get(path)
            if row is not None and (row.state, row.reason) == (REFUSED, reason):
                counts.refused += 1  # decided from its name and links alone: nothing to redo
                continue
            self._refuse_row(known.get(path), path, folder, None, None, reason, counts)
        for path, folder, size, mtime_ns in walk.skipped:
            counts.skipped += 1
            row = known.get(path)
            if not _unchanged(row, size, mtime_ns):
                if row is not None:
                    self.files.release(row)
                suffix = Path(path).suffix.lower() or "no suffix"
                self.files.record(path=path, folder=folder, size=size, mtime_ns=mtime_ns, sha256=None,
                                  state=SKIPPED, reason=f"not a document type ({_shown(suffix)})")
        await self._documents(walk.found, known, counts)

    async def _documents(self, found: list[Found], known: dict[str, FileRow], counts: ScanCounts) -> None:
        """Hash what changed; spare the read of every known content; read the rest."""
        to_read: dict[str, tuple[Found, Hashed]] = {}
        later: list[Found] = []  # more files with a content being read now: decided once it is
        # Files before links to them: a document is the file's, a link inside the library a duplicate.
        for item in sorted(found, key=lambda f: f.real != f.path):
            counts.documents += 1
            row = known.get(item.path)
            if _unchanged(row, item.size, item.mtime_ns):
                counts.unchanged += 1
                continue
            if item.size > self.max_bytes:
                self._refuse_row(row, item.path, item.folder, item.size, item.mtime_ns,
                                 f"larger than the library's limit ({item.size:,} bytes, the limit is "
                                 f"{self.max_bytes:,}): not read", counts)
                continue
            hashed = await asyncio.to_thread(hash_file, item, self.roots)
            if hashed is None:  # gone since the walk
                if row is not None:
                    counts.dropped += self.files.drop([row])
                continue
            counts.bytes_read += hashed.bytes_read
            if hashed.sha256 is None:
                self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                 hashed.problem or UNREADABLE, counts, pending=hashed.pending)
                continue
            sha = hashed.sha256
            if row is not None and row.sha256 == sha and row.state in (INDEXED, DUPLICATE):
                self.files.touch(item.path, hashed.size, hashed.mtime_ns)
                counts.unchanged += 1
                continue
            if row is not None and row.sha256 is not None:
                # its content changed: the old document is not this file's (a duplicate inherits
                # it). A row without a hash (reindex) keeps its document until it is read again.
                self.files.release(row)
            if sha in to_read:
                later.append(item)
            elif not await self._known_content(item, row, hashed, counts):
                to_read[sha] = (item, hashed)
        slots = asyncio.Semaphore(max(1, self.concurrency))

        async def read_one(item: Found, hashed: Hashed) -> None:
            async with slots:
                await self._read(item, hashed, counts)

        await asyncio.gather(*(read_one(item, hashed) for item, hashed in to_read.values()))
        if later:
            await self._documents(later, self.files.known(), counts)
            counts.documents -= len(later)

    async def _known_content(self, item: Found, row: FileRow | None, hashed: Hashed, counts: ScanCounts) -> bool:
        """A content already indexed under another path: a rename (that path is gone) moves the
        document here; a copy is recorded as a duplicate. False: the content is new."""
        holder = self.files.holder_of(hashed.sha256 or "", item.path)
        if holder is None or holder.url is None:
            return False
        if not await asyncio.to_thread(os.path.lexists, holder.path):
            self.files.move(holder, item.path, item.folder, Path(item.path).as_uri(), hashed.size, hashed.mtime_ns)
            counts.moved += 1
            log.info("library: %s renamed to %s (not read again)", _shown(holder.path), _shown(item.path))
            return True
        if row is not None and row.state == INDEXED and row.url != holder.url:
            self.files.release(row)  # it held a document of its own (before a reindex): not any more
        self.files.record(path=item.path, folder=item.folder, size=hashed.size, mtime_ns=hashed.mtime_ns,
                          sha256=hashed.sha256, state=DUPLICATE, url=holder.url,
                          reason=f"the same content as {_shown(holder.path)}")
        counts.duplicates += 1
        return True

    async def _read(self, item: Found, hashed: Hashed, counts: ScanCounts) -> None:
        row = self.files.get(item.path)
        counts.reader_calls += 1
        counts.bytes_read += hashed.size
        try:
            fd = await asyncio.to_thread(open_vetted, item.real, self.roots)
        except OSError as exc:
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    f"{UNREADABLE}: {clean(exc.strerror or str(exc))}", counts)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != hashed.identity:  # replaced since it was hashed
                return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                        CHANGED_WHILE_READ, counts, pending=True)
            # the reader opens this very descriptor (its child process, by /proc): no path is
            # looked up again, so nothing swapped in meanwhile can be read in its place
            pinned = Path(f"/proc/{os.getpid()}/fd/{fd}") if os.path.isdir("/proc/self/fd") else Path(item.real)
            page = await self.read(pinned, shown_path(Path(item.path).name))  # the name in titles and reasons
        except PageUnreadable as exc:
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    clean(str(exc)), counts, sha256=hashed.sha256)
        except OSError as exc:
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    f"{UNREADABLE}: {clean(exc.strerror or str(exc))}", counts)
        except Exception as exc:  # a reader's bug must not stop the library: the file says why
            log.exception("library: reading %s failed", _shown(item.path))
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    f"the reader failed ({type(exc).__name__}: {clean(str(exc))})", counts,
                                    sha256=hashed.sha256)
        finally:
            os.close(fd)
        if await asyncio.to_thread(_version_now, item.real) != (hashed.size, hashed.mtime_ns):
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    CHANGED_WHILE_READ, counts, pending=True)
        if page is None:
            return self._refuse_row(row, item.path, item.folder, hashed.size, hashed.mtime_ns,
                                    "no readable text (a scanned PDF has no text layer; briefd does no OCR)",
                                    counts, sha256=hashed.sha256)
        url = Path(item.path).as_uri()
        text = page.extracted.text
        title = clean(page.extracted.title).strip() or _shown(Path(item.path).name)
        pages = [p.page for p in page.passages if p.page is not None]
        self.store.save_page(url=url, final_url=url, status=None, content_type=document_type(
            Path(item.path)) or "", title=title, text=text, size=hashed.size,
            extraction=page.extracted.method, error=None,
            passages=[(p.seq, p.start, p.end, p.text, p.page, marks_json(p.marks)) for p in page.passages])
        self.files.record(path=item.path, folder=item.folder, size=hashed.size, mtime_ns=hashed.mtime_ns,
                          sha256=hashed.sha256, state=INDEXED, url=url, title=title,
                          pages=max(pages) if pages else None, chars=len(text), indexed=True)
        counts.indexed += 1
        return None

    def _refuse_row(self, row: FileRow | None, path: str, folder: str, size: int | None, mtime_ns: int | None,
                    reason: str, counts: ScanCounts, *, pending: bool = False, sha256: str | None = None) -> None:
        """Refused (or pending): its old document, if any, released; said once per reason."""
        state = PENDING if pending else REFUSED
        if pending:
            counts.pending += 1
        else:
            counts.refused += 1
        if row is not None:
            self.files.release(row)
        if row is None or (row.state, row.reason) != (state, reason):
            (log.info if pending else log.warning)("library: %s %s: %s", _shown(path),
                                                   "left for later" if pending else "refused", reason)
        # sha256 is kept only for a refusal of the content itself: the same bytes are not read again
        self.files.record(path=path, folder=folder, size=size, mtime_ns=mtime_ns, sha256=sha256,
                          state=state, reason=reason)

    # ---- kept current --------------------------------------------------------------------

    def notice(self, path: Path) -> None:
        """A watch event named `path` (on the loop's thread)."""
        self._dirty.add(path)
        self._wake.set()

    def rescan_soon(self) -> None:
        self._rescan = True
        self._wake.set()

    async def run(self, stopping: asyncio.Event, rescan_s: float = RESCAN_S, use_polling: bool = False) -> None:
        """Index the folders, then keep them current until `stopping` is set: the daemon's task.

        With `use_polling` (shares without inotify) no watch is started and the rescan
        every `rescan_s` is the watch (watchdog's PollingObserver would stat the whole
        library every second). The watch (daemon.folderwatch) is bounded in depth like the walk;
        one that cannot be set up, or whose thread dies later, is said once and leaves the library
        on the rescan: the index never stops for its watch."""
        loop = asyncio.get_running_loop()

        def deliver(path: Path | None) -> None:  # the watch's thread → this loop
            loop.call_soon_threadsafe(self.rescan_soon if path is None else (lambda: self.notice(path)))

        self.watch = None if use_polling else await self._start_watch(deliver, rescan_s)
        try:
            next_scan = loop.time()
            while not stopping.is_set():
                self._wake.clear()  # before the work: an event that comes during it wakes the wait below
                if self.watch is not None and not self.watch.alive():
                    log.warning("library: the watch on the folders stopped (%s); they are kept current by a rescan "
                                "every %g s from now (a restart of briefd watches them again)",
                                clean(self.watch.failure or "its thread ended"), rescan_s)
                    await asyncio.to_thread(self.watch.stop)
                    self.watch, self._rescan = None, True  # what it missed is seen now
                if loop.time() >= next_scan or self._rescan:
                    self._rescan = False
                    self._dirty.clear()
                    await self.guarded(self.scan())
                    next_scan = loop.time() + rescan_s
                elif self._dirty:
                    paths, self._dirty = self._dirty, set()
                    await self.guarded(self.check(paths))
                wait = max(0.0, next_scan - loop.time())
                if await _wait_either(self._wake, stopping, wait if self.watch is None else min(wait, WATCH_CHECK_S)):
                    await _wait_either(stopping, stopping, DEBOUNCE_S)  # gather the burst
        finally:
            if self.watch is not None:
                await asyncio.to_thread(self.watch.stop)
                self.watch = None

    async def _start_watch(self, deliver: Callable[[Path | None], None], rescan_s: float) -> FolderWatch | None:
        """The watch on the folders, or None: a failure to set it up (no inotify, its limits
        reached) is said once, never raised; the rescan every `rescan_s` keeps the library current."""
        try:
            return await asyncio.to_thread(FolderWatch.start, self.folders, deliver, MAX_FOLDER_DEPTH)
        except Exception as exc:
            log.warning("library: the folders cannot be watched (%s); they are kept current by a rescan every %g s",
                        clean(str(exc)), rescan_s)
            return None

    async def guarded(self, work: Awaitable[ScanCounts]) -> None:
        """A pass that fails is logged and tried again later; a store only the user can fix
        (damaged, full) is raised for the daemon to stop on, as everywhere else."""
        try:
            await work
        except Exception as exc:
            problem = diagnose(exc, self.store.path)
            if problem is not None and not problem.locked:
                raise
            if problem is not None:
                log.warning("library: the store %s; tried again on the next look", problem.reason)
            else:
                log.exception("library: a pass failed; tried again on the next look")


async def _wait_either(first: asyncio.Event, second: asyncio.Event, timeout: float) -> bool:
    """Wait until either event is set or `timeout` passes; True when one was set."""
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return bool(done)


# --------------------------------------------------------------------------- readers


@contextlib.asynccontextmanager
async def open_reader() -> AsyncIterator[Reader]:
    """The reader `briefd library reindex` uses when no daemon runs: the daemon's own, the
    page workers' child processes (a deadline, bounded memory), closed at the end. No brief
    runs beside the command, so its reads take research's share too (`PAGE_WORKERS` at once)."""
    workers = PageWorkers()

    async def read(path: Path, name: str) -> PageText | None:
        return await workers.read_file(path, name, background=False)

    try:
        yield read
    finally:
        await workers.close()


# --------------------------------------------------------------------------- search


def snippet(text: str) -> str:
    """A passage as a search result's content: whitespace folded, cut to a snippet's length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_MAX_CHARS else flat[:SNIPPET_MAX_CHARS - 1].rstrip() + "…"


@dataclass
class LibrarySource:
    """The library as a brief's research searches it (sources.Searcher): its index in the store.

    Synchronous underneath, on the store's thread like every other store read: a search
    over 100,000 passages takes milliseconds (`make bench`: lab/library_bench.py)."""

    store: Store

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        return search(self.store, query, limit)

    def take_notes(self) -> list[str]:
        return []


def find(store: Store, query: str, limit: int, per_document: int = 1) -> list[PassageHit]:
    """The best matching passages of library documents (bm25), best first: at most `per_document` of each
    document and `limit` in all (store/library.py)."""
    return LibraryFiles(store).search(query, limit, per_document)


def search(store: Store, query: str, limit: int) -> list[SearchHit]:
    """The library as a search source beside SearXNG: one hit per document, its best passage
    as the snippet, tagged `library`. Any text is safe (fts_or_query quotes every word)."""
    return [SearchHit(url=h.url, title=h.title, content=snippet(h.text), engine=LIBRARY, score=-h.rank,
                      source=LIBRARY) for h in find(store, query, limit)]


def health(store: Store | None, folders: Iterable[Path]) -> tuple[bool, str, str | None]:
    """`briefd check`'s library line: folders that can be listed, and the index's counts."""
    folders = tuple(folders)
    if not folders:
        return True, "library: none configured (set `library` to folders of documents to search them)", None
    bad = [f"{_shown(f)} ({why})" for f in folders if (why := _folder_problem(f))]
    counts: dict[str, int] = LibraryFiles(store).status()["counts"] if store is not None else {}
    said = (f"{counts.get(INDEXED, 0)} indexed, {counts.get(DUPLICATE, 0)} duplicates, "
            f"{counts.get(PENDING, 0)} pending, {counts.get(REFUSED, 0)} refused" if counts else "not indexed yet")
    if bad:
        return False, f"library folder(s) not readable: {', '.join(bad)}; {said}", \
            "create the folder or give briefd's user read access to it, or remove it from `library`"
    return True, f"library: {len(folders)} folder(s) readable; {said} (`briefd library status` lists refusals)", None


def _folder_problem(folder: Path) -> str | None:
    if not folder.exists():
        return "missing"
    if not folder.is_dir():
        return "not a folder"
    if not os.access(folder, os.R_OK | os.X_OK):
        return "not readable"
    return None


# --------------------------------------------------------------------------- measured


# --------------------------------------------------------------------------- the commands


def status(store: Store | None, folders: Iterable[Path]) -> dict[str, Any]:
    """`briefd library status`: the folders (and their last scan), counts by state, refusals."""
    data: dict[str, Any] = LibraryFiles(store).status() if store is not None else {
        "counts": {}, "passages": 0, "refused": [], "pending": [], "folders": []}
    scanned = {f["path"]: f for f in data["folders"]}  # by the path as shown (LibraryFiles.status)
    data["folders"] = [{"path": shown_path(str(f)),
                        "problem": _folder_problem(f) or (scanned.get(shown_path(str(f))) or {}).get("problem"),
                        "scanned_at": (scanned.get(shown_path(str(f))) or {}).get("scanned_at")} for f in folders]
    return data


async def _scan_once(folders: tuple[Path, ...], store: Store) -> ScanCounts:
    async with open_reader() as read:
        return await Library(folders, store, read, concurrency=PAGE_WORKERS).scan()


def reindex(store: Store, folders: tuple[Path, ...], db: Path) -> str:
    """`briefd library reindex`: every file is hashed and read again. The store is told first
    (mark_stale), so a running daemon re-reads them on its next scan; when no daemon holds the
    store's lock, the scan runs here and now. Returns what happened, for the user."""
    marked = LibraryFiles(store).mark_stale()
    try:
        lock = acquire_store_lock(db)
    except Locked as exc:
        return (f"{marked} file(s) marked to be read again; the running briefd ({exc.holder}) reads them "
                f"on its next scan of the library (within {RESCAN_S:g} s)")
    try:
        counts = asyncio.run(_scan_once(folders, store))
    finally:
        lock.release()
    return (f"library read again: {counts.indexed} indexed, {counts.duplicates} duplicates, {counts.refused} "
            f"refused, {counts.pending} pending, {counts.dropped} dropped, {counts.skipped} skipped "
            f"({counts.bytes_read} bytes read)")
