"""A watch on folder trees, bounded in depth: the library's inotify watch (Linux).

Why not watchdog's recursive observer, which the inbox uses: it walks a new tree with the
recursive `os.walk` of Python 3.11, in its threads. A chain of 1,200 nested folders in the
library (anyone who can write to the share can make one) raised RecursionError in the set-up,
which stopped the daemon at every start, and, made while the daemon ran, killed the thread
that reads inotify; since watchdog 7 that thread is shared by every observer in the process,
so the inbox's watch went with it. Here the walk is a loop over a stack, never deeper than
`max_depth` folders below a root (the library's MAX_FOLDER_DEPTH, the depth its own walk
stops at), hidden folders are left out as the library leaves them out, and one thread reads
one inotify descriptor that nothing else shares.

What it hands over is only a hint, as the library's watchdog handler gave: a file's path
(created, written, moved, deleted), or None when a folder came, went or moved, or events were
lost (queue overflow), which only a full scan of the library sees whole. The library keeps a
periodic rescan besides, so anything this misses is seen within `rescan_s`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("briefd")

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = (
    0x40, 0x80, 0x100, 0x200, 0x400, 0x800)
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x4000, 0x8000, 0x1000000, 0x2000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC

MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
"""What changes a document (written, renamed, deleted, its permissions: an unreadable file is
looked at again), on folders only (IN_ONLYDIR), never through a link (IN_DONT_FOLLOW)."""

_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
READ_BYTES = 64 * 1024
"""Bytes of events read at once (a few hundred events; the kernel queues 16,384 before overflowing)."""

Deliver = Callable[[Path | None], None]


class _Libc:
    """inotify_init1 / inotify_add_watch / inotify_rm_watch through ctypes (glibc has them since 2.9)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes, self.init1.restype = [ctypes.c_int], ctypes.c_int
        self.add = libc.inotify_add_watch
        self.add.argtypes, self.add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
        self.rm = libc.inotify_rm_watch
        self.rm.argtypes, self.rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int


def _raise_errno(what: str) -> None:
    code = ctypes.get_errno()
    if code == errno.ENOSPC:
        raise OSError(code, f"{what}: the inotify watch limit is reached (raise the sysctl "
                            "fs.inotify.max_user_watches)")
    if code == errno.EMFILE:
        raise OSError(code, f"{what}: the inotify instance limit is reached (raise the sysctl "
                            "fs.inotify.max_user_instances)")
    raise OSError(code, f"{what}: {os.strerror(code)}")


@dataclass(frozen=True)
class _Watched:
    path: str
    depth: int  # folders below its root (the root is 0)
    root: bool


@dataclass
class FolderWatch:
    """Watches on every folder of the trees down to `max_depth`, read by one thread of its own."""

    roots: tuple[str, ...]
    deliver: Deliver
    max_depth: int
    failure: str | None = None        # why the thread ended, when it ended by itself
    _libc: _Libc = field(default_factory=_Libc)
    _fd: int = -1
    _wakeup: tuple[int, int] = (-1, -1)
    _watched: dict[int, _Watched] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    @classmethod
    def start(cls, roots: Iterable[str | Path], deliver: Deliver, max_depth: int) -> FolderWatch:
        """Watch each root that is a folder, down to `max_depth`; raises OSError when inotify cannot
        be had or a watch limit is reached (the caller falls back to its rescan). Blocking (a walk)."""
        watch = cls(tuple(str(r) for r in roots), deliver, max_depth)
        watch._fd = watch._libc.init1(IN_NONBLOCK | IN_CLOEXEC)
        if watch._fd < 0:
            _raise_errno("inotify")
        watch._wakeup = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            for root in watch.roots:
                if os.path.isdir(root):
                    watch._add_tree(root, 0)
        except BaseException:
            watch._close()
            raise
        watch._thread = threading.Thread(target=watch._run, name="briefd-library-watch", daemon=True)
        watch._thread.start()
        return watch

    @property
    def watches(self) -> int:
        return len(self._watched)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """End the thread and close the descriptors (blocking, briefly)."""
        if self._wakeup[1] >= 0:
            os.write(self._wakeup[1], b"x")
        if self._thread is not None:
            self._thread.join(5)
            if self._thread.is_alive():  # still adding a huge new tree: its descriptors are left to it, never
                return                   # closed under it (a number reused meanwhile would be read as inotify)
        self._close()

    # ---- the set-up, and new folders ------------------------------------------------------

    def _add_tree(self, top: str, depth: int) -> None:
        """Watch `top` and its folders down to `max_depth`: a loop over a stack, no recursion."""
        stack = [(top, depth)]
        while stack:
            path, level = stack.pop()
            if not self._add(path, level, root=level == 0 and path in self.roots):
                continue
            if level + 1 > self.max_depth:
                continue  # deeper folders are refused by the library's walk; their events unheard
            try:
                with os.scandir(path) as entries:
                    below = [e.path for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
            except OSError:
                continue  # gone, or unreadable: the walk says so
            stack.extend((p, level + 1) for p in below)

    def _add(self, path: str, depth: int, *, root: bool) -> bool:
        wd = self._libc.add(self._fd, os.fsencode(path), MASK)
        if wd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOSPC, errno.ENOMEM) or root:
                _raise_errno(f"watching {path}")
            return False  # gone meanwhile, not a folder, not readable: the rescan sees it
        with self._lock:
            self._watched[wd] = _Watched(path, depth, root)
        return True

    def _forget_under(self, path: str) -> None:
        """A folder moved away (maybe out of the trees): its watches go; moved back in, it is watched anew."""
        prefix = path + os.sep
        with self._lock:
            gone = [wd for wd, w in self._watched.items() if w.path == path or w.path.startswith(prefix)]
            for wd in gone:
                del self._watched[wd]
        for wd in gone:
            self._libc.rm(self._fd, wd)

    # ---- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        """Read and hand over events until stopped; any failure ends the thread, saying why (the
        library sees it dead and keeps itself current by rescans)."""
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            poller.register(self._wakeup[0], select.POLLIN)
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if self._wakeup[0] in ready:
                    return
                try:
                    data = os.read(self._fd, READ_BYTES)
                except BlockingIOError:
                    continue
                self._handle(data)
        except Exception as exc:  # noqa: BLE001 - said by the library, which falls back to its rescan
            self.failure = f"{type(exc).__name__}: {exc}"

    def _handle(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            self._event(wd, mask, os.fsdecode(name))

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.deliver(None)  # events were lost: only a full scan knows what changed
            return
        with self._lock:
            watched = self._watched.get(wd)
            if mask & IN_IGNORED:
                self._watched.pop(wd, None)
        if watched is None or mask & IN_IGNORED:
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            if watched.root:
                self.deliver(None)
            return
        path = os.path.join(watched.path, name) if name else watched.path
        if not mask & IN_ISDIR:
            self.deliver(Path(path))
            return
        if name.startswith("."):
            return
        if mask & IN_MOVED_FROM:
            self._forget_under(path)
        elif mask & (IN_CREATE | IN_MOVED_TO) and watched.depth + 1 <= self.max_depth:
            self._add_tree(path, watched.depth + 1)  # before the rescan it asks for: nothing falls between
        self.deliver(None)

    def _close(self) -> None:
        for fd in (self._fd, *self._wakeup):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd, self._wakeup = -1, (-1, -1)
