"""The inbox: how a dropped file becomes a recorded brief without ever being lost.

Rules (RELIABILITY.md):
- Only top-level `*.json` regular files are candidates (an allow-list beats a deny-list
  of editor and sync junk); dotfiles are ignored, so `*.tmp`, `*.part`, `*~` never match.
- A file is taken only when complete: after a `closed` or `moved` event, or once its size
  and mtime have not changed for `settle_seconds` (a `created` event fires before any
  content, and a file moved in from elsewhere gives only `created`).
- Order of durability: a valid brief is recorded in SQLite (bytes included) before the
  file leaves the inbox; a rejected one has its error.json and bytes written to the
  outbox first. A crash in between is reconciled at start-up (same path, same bytes).
- One daemon per inbox: an flock the kernel releases when the process dies.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from store import Store, sha256_hex

from .brief import MAX_BRIEF_BYTES, BriefError, id_from_filename, parse_brief
from .report import write_rejection

log = logging.getLogger("briefd")

LOCK_NAME = ".briefd.lock"


class InboxLocked(Exception):
    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"another briefd ({holder}) is already serving this inbox (lock {path})")
        self.holder = holder


@dataclass
class InboxLock:
    path: Path
    fd: int

    def release(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)


def acquire_lock(inbox: Path) -> InboxLock:
    """Take the inbox's lock for the life of this process, or raise InboxLocked naming the holder."""
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown pid"
        finally:
            os.close(fd)
        raise InboxLocked(path, holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
    return InboxLock(path, fd)


def is_candidate(path: Path, inbox: Path) -> bool:
    """Top-level, not hidden, ends in .json (case-insensitive)."""
    return (path.parent == inbox and not path.name.startswith(".")
            and path.name.lower().endswith(".json"))


@dataclass
class Accepted:
    run_id: int
    brief_id: str
    rejected: bool
    error: str | None = None


@dataclass
class _Seen:
    size: int
    mtime_ns: int
    since: float
    ready: bool = False


@dataclass
class Inbox:
    """Tracks candidate files until they are stable, then accepts them."""

    folder: Path
    outbox: Path
    store: Store
    settle_seconds: float = 1.0
    on_accept: Callable[[Accepted], None] | None = None
    tracked: dict[Path, _Seen] = field(default_factory=dict)
    refused: dict[Path, tuple[int, str]] = field(default_factory=dict)

    def reconcile(self) -> int:
        """Finish what a crash interrupted: a recorded brief whose file is still in the inbox."""
        cleaned = 0
        for run_id, inbox_path, sha in self.store.inbox_leftovers():
            path = Path(inbox_path)
            try:
                if path.is_file() and not path.is_symlink() and sha256_hex(path.read_bytes()) == sha:
                    path.unlink()
                    cleaned += 1
            except OSError as exc:
                log.warning("could not tidy %s: %s", path, exc)
                continue
            self.store.mark_inbox_removed(run_id)
        return cleaned

    def scan(self) -> None:
        """Notice every candidate in the folder (start-up, timer, and when events may be lost)."""
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            self.folder.mkdir(parents=True, exist_ok=True)
            return
        for entry in entries:
            path = Path(entry.path)
            if is_candidate(path, self.folder):
                self.notice(path)

    def notice(self, path: Path, complete: bool = False) -> None:
        """A watcher event or a scan saw `path`; `complete` for closed/moved events."""
        path = Path(path)
        if not is_candidate(path, self.folder):
            return
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self.tracked.pop(path, None)
            return
        refused = self.refused.get(path)
        if refused is not None and refused[0] == st.st_mtime_ns:
            return  # already said why it can't be taken; wait until the file changes
        seen = self.tracked.get(path)
        now = time.monotonic()
        if seen is None or (seen.size, seen.mtime_ns) != (st.st_size, st.st_mtime_ns):
            self.tracked[path] = _Seen(st.st_size, st.st_mtime_ns, now, ready=complete)
        elif complete:
            seen.ready = True

    def ready_paths(self) -> list[Path]:
        """Tracked files whose size and mtime held still long enough (or that were closed/moved in)."""
        now = time.monotonic()
        ready: list[Path] = []
        for path, seen in list(self.tracked.items()):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                del self.tracked[path]
                continue
            if (st.st_size, st.st_mtime_ns) != (seen.size, seen.mtime_ns):
                self.tracked[path] = _Seen(st.st_size, st.st_mtime_ns, now)
                continue
            if seen.ready or now - seen.since >= self.settle_seconds:
                ready.append(path)
        return sorted(ready, key=lambda p: (self.tracked[p].mtime_ns, p.name))

    def take_ready(self) -> list[Accepted]:
        out = []
        for path in self.ready_paths():
            self.tracked.pop(path, None)
            result = self.accept(path)
            if result is not None:
                out.append(result)
                if self.on_accept:
                    self.on_accept(result)
        return out

    def accept(self, path: Path) -> Accepted | None:
        """Record one complete file as a brief (or a rejection), then take it out of the inbox."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return self._refuse(path, st, "not a regular file (a symlink, directory or FIFO): "
                                "drop the brief itself, not a link to it")
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BRIEF_BYTES + 1)
        except OSError as exc:
            return self._refuse(path, st, f"cannot be read: {exc.strerror or exc}")
        sha = sha256_hex(data)
        inbox_path = str(path)
        if self.store.known_inbox_file(inbox_path, sha) is not None:
            self._remove(path)  # recorded before a crash; only the unlink was missing
            for run_id, leftover, digest in self.store.inbox_leftovers():
                if leftover == inbox_path and digest == sha:
                    self.store.mark_inbox_removed(run_id)
            return None
        try:
            brief = parse_brief(data, path.name)
        except BriefError as err:
            brief_id = id_from_filename(path.name)
            details = {"field": err.field, **(err.details or {})}
            write_rejection(self.outbox, brief_id, path.name, str(err), details, data)
            run_id = self.store.add_rejection(brief_id=brief_id, source_file=path.name, received=data,
                                              error=str(err), details=details, inbox_path=inbox_path)
            self._remove(path)
            self.store.mark_inbox_removed(run_id)
            log.warning("%s rejected: %s", path.name, err)
            return Accepted(run_id, brief_id, rejected=True, error=str(err))
        run_id = self.store.add_brief(
            brief_id=brief.id, question=brief.question, source_file=path.name, received=data,
            brief_json=json.dumps(brief.to_json(), ensure_ascii=False), inbox_path=inbox_path,
        )
        self.store.add_event(run_id, "accepted", {"id": brief.id, "source_file": path.name,
                                                  "question": brief.question})
        self._remove(path)
        self.store.mark_inbox_removed(run_id)
        log.info("%s accepted from %s (run %d)", brief.id, path.name, run_id)
        return Accepted(run_id, brief.id, rejected=False)

    def _refuse(self, path: Path, st: os.stat_result, reason: str) -> None:
        """Say once per version of a file that it can't be taken; leave it where the user put it."""
        key = (st.st_mtime_ns, reason)
        if self.refused.get(path) != key:
            self.refused[path] = key
            log.warning("%s left in the inbox: %s", path.name, reason)
        return None

    def _remove(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass


def start_observer(inbox: Inbox, use_polling: bool, deliver: Callable[[Callable[[], None]], None]):
    """A watchdog observer whose handler only hands paths over (`deliver` runs them on the loop)."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer
    from watchdog.observers.polling import PollingObserver

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.is_directory:
                return
            kind = event.event_type
            if kind == "moved":
                path, complete = Path(os.fsdecode(event.dest_path)), True
            elif kind in ("created", "modified", "closed"):
                path, complete = Path(os.fsdecode(event.src_path)), kind == "closed"
            else:
                return
            deliver(lambda: inbox.notice(path, complete=complete))

    observer = PollingObserver(timeout=1.0) if use_polling else Observer()
    observer.schedule(Handler(), str(inbox.folder), recursive=False)
    observer.daemon = True
    observer.start()
    return observer
