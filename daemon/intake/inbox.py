"""The inbox: how a dropped file becomes a recorded brief without ever being lost.

Rules (how systems that never lose a file take one in):
- Only top-level `*.json` entries are candidates (an allow-list beats a deny-list of
  editor and sync junk); dotfiles are ignored, so `*.tmp`, `*.part`, `*~` never match.
- A file is taken only when complete: after a `closed` or `moved` event, or once its size
  and mtime have not changed for `settle_seconds` (a `created` event fires before any
  content, and a file moved in from elsewhere gives only `created`). A file whose mtime is
  already `settle_seconds` old when it is first seen counts as closed.
- A file that would be *rejected* is rejected only once it has also been still for
  `settle_seconds`, even after a `closed` event: a writer that closes and reopens
  (`echo '{' > b.json; echo '...}' >> b.json`, or a program that writes in bursts)
  closes a half brief first, and rejecting that half would take the file away from
  the writer. A valid brief is taken at once.
- The bytes recorded are the bytes read: the file is read through one descriptor, and
  when its size or mtime moved while being read it is left for the next look. It is
  removed from the inbox only while it is still the version that was read (same inode,
  size, mtime); a version written after the read stays and is taken as a new brief.
- Order of durability: a valid brief is recorded in SQLite (bytes included) before the
  file leaves the inbox; a rejected one has its error.json and bytes written to the
  outbox first. A crash in between is reconciled at start-up (same path, same bytes).
- One daemon per inbox: an flock the kernel releases when the process dies (files.hold_lock;
  the store has one too, daemon/ops/worker.py).
- One file that can't be handled is logged and left in place; it never stops the others.
- The daemon's own shortage (EMFILE, ENFILE, ENOMEM: an API flood took every descriptor) is no file's
  fault: a scan that fails is logged once a minute (supervise.RepeatLog) and tried again next turn, and
  a file whose open fails with it stays tracked, never refused, and is taken once the shortage passes.
- An entry that will never be taken (notes.txt, a folder) is left where it is, with one notice in the
  log per entry (not one per scan) and a line in `briefd status`; dotfiles and partial files
  (`*.tmp`, `*.part`, `*~`) stay silent, as a writer may be busy with them.

Hostile entries, decided (issue 4):
- A symlink named `*.json` is rejected and never followed, whatever it points to:
  outbox/<id>/error.json says it is a link and names its target, the link itself is
  removed from the inbox (a link's only content is that target text, which error.json
  and the store keep), and the target is never opened. Following it would let anyone
  who can write into the inbox make briefd, perhaps running as another user, copy any
  file it can read (`/etc/passwd`, a key) into the outbox as brief.json. The file is
  opened with O_NOFOLLOW, so a link swapped in after the check is not followed either.
- A hard link (a regular file with more than one name, st_nlink > 1) is rejected the same
  way and for the same reason: `ln /home/someone/secret.json inbox/x.json` needs no read
  access to the secret from whoever makes the link, and briefd would copy it out. It is
  never read: error.json says it is a hard link and to copy the file instead; the name in
  the inbox is removed (the file itself lives on under its other name). The link count is
  checked on lstat and again on the opened descriptor, so a link made in between is seen.
- A directory, FIFO, socket or device named `*.json` is left where it is (there are no
  bytes to keep, a FIFO would block a reader, and a user's folder is not briefd's to
  move); outbox/<id>/error.json says why, once per file and message.
- A file briefd cannot read (permissions) is left where it is with the same kind of
  notice, and tried again when it changes: size, mtime or ctime (chmod changes only ctime).
- A brief over MAX_BRIEF_BYTES is rejected from its size without being read whole; the
  whole file is still copied to the outbox (streamed), the store keeps its first
  MAX_BRIEF_BYTES + 1 bytes.
- A name that is not valid UTF-8 (any bytes are legal on Linux) is shown as `source_file`
  with U+FFFD for the bad bytes; the id comes from id_from_filename, always a safe folder
  name. (The store keeps that shown path too: a crash between recording such a file and
  removing it can take it a second time, never lose it.)
- A brief with `every` starts a series (daemon/intake/series.py): recorded with its first run in one
  transaction, its next run `every` after it was accepted. A brief of the same id accepted later
  replaces the series when it has `every` too (new schedule, counted from then); one without
  `every` is one more run of the id (its report says what changed) and the series goes on: only
  `briefd cancel` ends a series. A rejected file leaves the series as it was.
- A rejection whose id is in use by a run right now (the same name dropped again with a
  mistake while the first is researched) goes to outbox/<id>/runs/<now>-rejected/, so the
  running brief's files stay together and its report becomes outbox/<id>/report.*.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from ...store import QUEUED, RUNNING, Store, diagnose, sha256_hex

from ..core import crashpoints
# utf8_safe: a name or message with lone surrogates (a non-UTF-8 file name) made writable as UTF-8.
from ..core.brief import Brief, id_from_filename, parse_brief
from ..core.briefjson import MAX_BRIEF_BYTES, BriefError, too_large, utf8_safe
from ..core.files import ProcessLock, file_kind, hold_lock, read_at_most
from ..research.followup import check_follows
from ..report.outbox import write_rejection
from .names import is_brief_name, is_dir, not_a_brief
from .series import record_accepted
from ..core.supervise import RepeatLog
from ..core.untrusted import log_text

if TYPE_CHECKING:  # watchdog is imported where an observer starts, not for every CLI command
    from watchdog.observers.api import BaseObserver

log = logging.getLogger("briefd")

LOCK_NAME = ".briefd.lock"
# Files taken per call of take_ready: a burst of thousands is taken over several turns of
# the event loop (each file is ~2.5 ms), so running briefs and signals are not held up.
TAKE_PER_CALL = 100


def acquire_lock(inbox: Path) -> ProcessLock:
    """Take the inbox's lock for the life of this process, or raise files.Locked naming the
    holder (the one lock mechanism, shared with the store's lock)."""
    inbox.mkdir(parents=True, exist_ok=True)
    return hold_lock(inbox / LOCK_NAME, "serving this inbox",
                     "stop it first, or give this daemon an inbox of its own (--inbox)")


# What the store records as received from a hard link: nothing, since it is never read.
HARD_LINK_RECEIVED = b""


def is_hard_link(st: os.stat_result) -> bool:
    """A regular file with another name somewhere: never read from the inbox (module docstring)."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


# The daemon's own shortage, not the file's fault (an API flood took every descriptor: issue 19 #1): a file
# that meets one is neither refused nor left with a notice; it stays tracked and is taken once it passes.
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def shortage(exc: BaseException) -> bool:
    """Is `exc` the daemon running short (descriptors, memory), which passes, rather than the file's problem?"""
    return isinstance(exc, OSError) and exc.errno in SHORTAGE_ERRNOS


def stray_notice(shown: str) -> str:
    """The daemon's one notice about an entry of the inbox that is not a brief: what it is, what to do."""
    if shown.endswith("/"):
        return (f"{shown} is a folder in the inbox, not a brief: briefd takes only *.json files at the top of "
                f"the inbox, never from folders in it; it stays there untouched (move it out of the inbox, "
                f"or the briefs in it up into the inbox)")
    return (f"{shown} is in the inbox but is not a brief: briefd takes only files named *.json; it stays there "
            f"untouched (move it out of the inbox, or rename it to end in .json if it is a brief)")


def is_candidate(path: Path, inbox: Path) -> bool:
    """Top-level, not hidden, ends in .json (case-insensitive)."""
    return path.parent == inbox and is_brief_name(path.name)


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


# What identifies one version of an inbox entry. ctime is in it because chmod changes
# nothing else: a file refused as unreadable must be tried again once it is made readable.
_Version = tuple[int, int, int, int, int, int]


def _version(st: os.stat_result) -> _Version:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _same_content(a: os.stat_result, b: os.stat_result) -> bool:
    """The same file with the same size and mtime: nothing was written in between."""
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size, b.st_mtime_ns)


def _received(path: Path) -> bytes | None:
    """What `accept` records as received from `path` as it is now: a symlink's target, or a
    regular file's first MAX_BRIEF_BYTES + 1 bytes; None for anything else or unreadable.
    Never follows a link and never reads more than the cap (reconcile uses it at start-up)."""
    try:
        if os.path.islink(path):
            return os.fsencode(os.readlink(path))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if is_hard_link(st):
            return HARD_LINK_RECEIVED
        try:
            return read_at_most(handle, MAX_BRIEF_BYTES)
        except OSError:
            return None


@dataclass
class Inbox:
    """Tracks candidate files until they are stable, then accepts them."""

    folder: Path
    outbox: Path
    store: Store
    settle_seconds: float = 1.0
    on_accept: Callable[[Accepted], None] | None = None
    # What this daemon can do that a brief may ask beyond its schema (sources.refusal): None = all
    refusal: Callable[[Brief], BriefError | None] | None = None
    tracked: dict[Path, _Seen] = field(default_factory=dict)
    refused: dict[Path, tuple[_Version, str]] = field(default_factory=dict)
    store_problem: str | None = None  # the store failure last logged by take_ready (said once)
    strays: set[str] = field(default_factory=set)  # entries that are not briefs, noticed once each (scan)
    # The inbox that cannot be looked at (EMFILE under a flood, a share gone): said once per minute, not per turn
    errors: RepeatLog = field(default_factory=RepeatLog)

    def reconcile(self) -> int:
        """Finish what a crash interrupted: a recorded brief whose file is still in the inbox."""
        cleaned = 0
        for run_id, inbox_path, sha in self.store.inbox_leftovers():
            path = Path(inbox_path)
            received = _received(path)
            try:
                if received is not None and sha256_hex(received) == sha:
                    path.unlink()
                    cleaned += 1
            except OSError as exc:
                log.warning("could not tidy %s: %s", log_text(path), log_text(exc))
                continue
            self.store.mark_inbox_removed(run_id)
        return cleaned

    def scan(self) -> bool:
        """Notice every candidate in the folder (start-up, timer, and when events may be lost); False when
        the folder could not be read, which is logged (once per minute while it lasts) and tried again
        by the caller's next turn: intake outlives any OSError (issue 19 #1: EMFILE killed the watcher)."""
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            self.folder.mkdir(parents=True, exist_ok=True)
            return True
        except OSError as exc:
            self.errors.error("inbox scan", f"the inbox {log_text(self.folder)} cannot be read: "
                                            f"{log_text(exc.strerror or exc)}; briefs in it wait and are taken "
                                            f"once it can be ({self._fix(exc)})")
            return False
        self.errors.cleared("inbox scan", f"the inbox {log_text(self.folder)} can be read again")
        strays: set[str] = set()
        for entry in entries:
            path = Path(entry.path)
            if is_candidate(path, self.folder):
                self.notice(path)
            elif (shown := not_a_brief(entry.name, is_dir(entry))) is not None:
                strays.add(shown)
        for shown in sorted(strays - self.strays):
            log.info("%s", log_text(stray_notice(shown)))
        self.strays = strays  # one gone and put back is noticed again
        return True

    @staticmethod
    def _fix(exc: OSError) -> str:
        """What ends an inbox that cannot be read, by its error."""
        if shortage(exc):
            return ("the daemon is out of descriptors or memory: it passes when connections close; raise "
                    "LimitNOFILE= in the unit if it recurs")
        return "check that the inbox folder exists and that briefd's user can read it"

    def notice(self, path: Path, complete: bool = False) -> None:
        """A watcher event or a scan saw `path`; `complete` for closed/moved events."""
        path = Path(path)
        if not is_candidate(path, self.folder):
            return
        try:
            st = os.lstat(path)
        except OSError:
            self.tracked.pop(path, None)
            return
        refused = self.refused.get(path)
        if refused is not None:
            if refused[0] == _version(st):
                return  # already said why it can't be taken; wait until the file changes
            del self.refused[path]
        seen = self.tracked.get(path)
        now = time.monotonic()
        if seen is None or (seen.size, seen.mtime_ns) != (st.st_size, st.st_mtime_ns):
            self.tracked[path] = _Seen(st.st_size, st.st_mtime_ns, now, ready=complete or self.still_since_mtime(st))
        elif complete:
            seen.ready = True

    def still_since_mtime(self, st: os.stat_result) -> bool:
        """Was the file last written `settle_seconds` ago or more, by its own mtime? Then it is taken as a
        closed file is: a valid brief at once, one that cannot be taken (which a writer may still be
        finishing, or a clock that disagrees with the file's) only once this daemon has seen it still
        for `settle_seconds`. A file dropped before `run --once` started (cron) waited `settle_seconds`
        again, the model idle, for a stillness its mtime already showed (issue 22)."""
        return time.time() - st.st_mtime_ns / 1e9 >= self.settle_seconds

    def ready_paths(self) -> list[Path]:
        """Tracked files whose size and mtime held still long enough (or that were closed/moved in)."""
        now = time.monotonic()
        ready: list[Path] = []
        for path, seen in list(self.tracked.items()):
            try:
                st = os.lstat(path)
            except OSError:
                del self.tracked[path]
                continue
            if (st.st_size, st.st_mtime_ns) != (seen.size, seen.mtime_ns):
                self.tracked[path] = _Seen(st.st_size, st.st_mtime_ns, now)
                continue
            if seen.ready or now - seen.since >= self.settle_seconds:
                ready.append(path)
        return sorted(ready, key=lambda p: (self.tracked[p].mtime_ns, p.name))

    def take_ready(self) -> list[Accepted]:
        """Accept every ready file; one that fails in an unforeseen way is logged and left in place."""
        out = []
        for path in self.ready_paths()[:TAKE_PER_CALL]:
            seen = self.tracked.pop(path, None)
            try:
                result = self.accept(path, seen)
            except Exception as exc:  # a bug or a surprise must not stop the other files or the daemon
                if isinstance(exc, OSError) and shortage(exc):  # the daemon's, not the file's: taken once it passes
                    if seen is not None:
                        self.tracked[path] = seen
                    self.notice(path)
                    self.errors.error("inbox take", f"{log_text(path.name)} and the files after it wait: "
                                                    f"{log_text(exc)} ({self._fix(exc)})")
                    break
                problem = diagnose(exc, self.store.path)
                if problem is not None:  # the store's fault, not the file's: it stays tracked, tried again
                    self.notice(path)
                    if problem.reason != self.store_problem:
                        self.store_problem = problem.reason
                        log.warning("files stay in the inbox until the store can take them: the store %s "
                                    "(to fix: %s)", problem.reason, problem.fix)
                    break
                log.exception("%s could not be taken", log_text(path.name))
                self._leave(path, f"could not be taken ({type(exc).__name__}: {utf8_safe(str(exc))}); "
                                  f"it stays in the inbox and is tried again when it changes or briefd restarts")
                continue
            self.store_problem = None
            self.errors.cleared("inbox take", "files in the inbox can be taken again")
            if result is not None:
                out.append(result)
                if self.on_accept:
                    self.on_accept(result)
        return out

    def accept(self, path: Path, seen: _Seen | None = None) -> Accepted | None:
        """Record one complete file as a brief (or a rejection), then take it out of the inbox.

        `seen` is what the stability tracker saw (None: take it as complete now). Returns
        None when nothing was taken: gone, still changing, or left in place with a reason.
        """
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return self._reject_link(path, st)
        if is_hard_link(st):
            return self._reject_hard_link(path, st)
        if not stat.S_ISREG(st.st_mode):
            kind = file_kind(st.st_mode)
            self._leave(path, f"{utf8_safe(path.name)} is {kind}, not a file: briefd takes only files "
                              f"named *.json; it stays in the inbox untouched (rename or remove it)",
                        st, notice={"reason": "not a file", "kind": kind})
            return None
        try:
            # O_NOFOLLOW: a link swapped in since lstat is not followed; O_NONBLOCK: nor does a FIFO block.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.notice(path)  # it became a link since lstat: the next look rejects it as one
                return None
            self._leave_unreadable(path, st, exc)
            return None
        with os.fdopen(fd, "rb") as handle:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode) or (before.st_dev, before.st_ino) != (st.st_dev, st.st_ino):
                self.notice(path)  # replaced since lstat: look again
                return None
            if is_hard_link(before):  # linked since lstat: still never read
                return self._reject_hard_link(path, before)
            try:
                data = read_at_most(handle, MAX_BRIEF_BYTES)
            except OSError as exc:
                self._leave_unreadable(path, st, exc)
                return None
            after = os.fstat(fd)
            if not _same_content(before, after) or (
                    seen is not None and (after.st_size, after.st_mtime_ns) != (seen.size, seen.mtime_ns)):
                self.notice(path)  # written to while we looked: not complete yet
                return None
            return self._take(path, handle, after, data, seen)

    def _take(self, path: Path, handle: BinaryIO, st: os.stat_result, data: bytes,
              seen: _Seen | None) -> Accepted | None:
        name = utf8_safe(path.name)
        inbox_path = utf8_safe(str(path))
        if self._already_recorded(path, st, inbox_path, sha256_hex(data)):
            return None
        oversize = st.st_size > MAX_BRIEF_BYTES or len(data) > MAX_BRIEF_BYTES
        try:
            if oversize:
                raise too_large(max(st.st_size, len(data)))
            brief = parse_brief(data, path.name)
            refused = self.refusal(brief) if self.refusal is not None else None
            refused = refused or check_follows(self.store, brief)  # a follow-up of a brief not done
            if refused is not None:
                raise refused
        except BriefError as err:
            if seen is not None and time.monotonic() - seen.since < self.settle_seconds:
                # Closed or moved in, but not yet still for settle_seconds: a writer may reopen it.
                self.tracked[path] = _Seen(st.st_size, st.st_mtime_ns, seen.since)
                return None
            return self._reject(path, st, err, data, handle if oversize else None)
        run_id = record_accepted(self.store, brief, source_file=name, received=data,
                                 brief_json=json.dumps(brief.to_json(), ensure_ascii=False), inbox_path=inbox_path)
        crashpoints.reached("accepted")
        self._remove(path, st)
        self.store.mark_inbox_removed(run_id)
        log.info("%s accepted from %s (run %d)", log_text(brief.id), log_text(name), run_id)
        return Accepted(run_id, brief.id, rejected=False)

    def _already_recorded(self, path: Path, st: os.stat_result, inbox_path: str, sha: str) -> bool:
        """Recorded before a crash, and only the unlink was missing: finish that, record nothing."""
        if self.store.known_inbox_file(inbox_path, sha) is None:
            return False
        self._remove(path, st)
        for run_id, leftover, digest in self.store.inbox_leftovers():
            if leftover == inbox_path and digest == sha:
                self.store.mark_inbox_removed(run_id)
        return True

    def _reject(self, path: Path, st: os.stat_result, err: BriefError, data: bytes,
                source: BinaryIO | None) -> Accepted | None:
        """error.json and the bytes into the outbox, a row in the store, then out of the inbox."""
        details = {"field": err.field, **(err.details or {})}
        filed = self._file_rejection(
            path, st, str(err), details, data, data, utf8_safe(str(path)), source,
            lambda exc: f"its rejection ({err}) could not be written to the outbox: {exc}; it stays "
                        f"in the inbox and is tried again when it changes or briefd restarts")
        if filed is None:
            return None
        run_id, written = filed
        log.warning("%s rejected: %s (%s)", log_text(utf8_safe(path.name)), log_text(err), log_text(written))
        return Accepted(run_id, id_from_filename(path.name), rejected=True, error=str(err))

    def _reject_link(self, path: Path, st: os.stat_result) -> Accepted | None:
        """A symlink: rejected without ever opening what it points to (see the module docstring)."""
        try:
            target = os.readlink(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._leave_unreadable(path, st, exc)
            return None
        name, shown = utf8_safe(path.name), utf8_safe(target)
        error = (f"{name} is a symbolic link (to {json.dumps(shown, ensure_ascii=False)}), and briefd never "
                 f"follows links in the inbox, so that nothing outside it is read into the outbox; copy the brief "
                 f"file itself into the inbox (for example cp -L), not a link to it")
        details = {"field": "", "reason": "symlink", "link_target": shown}
        return self._reject_unread(path, st, os.fsencode(target), error, details, "a symbolic link")

    def _reject_hard_link(self, path: Path, st: os.stat_result) -> Accepted | None:
        """A hard link: rejected without reading a byte of it (see the module docstring)."""
        name = utf8_safe(path.name)
        error = (f"{name} is a hard link (the file has {st.st_nlink} names), and briefd never reads linked "
                 f"files in the inbox, so that nothing outside it is read into the outbox; copy the brief file "
                 f"into the inbox (cp, not ln). The name was removed from the inbox; the file itself is "
                 f"untouched under its other name")
        details = {"field": "", "reason": "hard link", "links": st.st_nlink}
        return self._reject_unread(path, st, HARD_LINK_RECEIVED, error, details, "a hard link")

    def _reject_unread(self, path: Path, st: os.stat_result, received: bytes, error: str,
                       details: dict[str, Any], what: str) -> Accepted | None:
        """A link of either kind: error.json and a store row that keep no content, then out of the inbox."""
        inbox_path = utf8_safe(str(path))
        if self._already_recorded(path, st, inbox_path, sha256_hex(received)):
            return None
        filed = self._file_rejection(
            path, st, error, details, None, received, inbox_path, None,
            lambda exc: f"it is {what} and its rejection could not be written to the outbox: {exc}")
        if filed is None:
            return None
        log.warning("%s rejected: %s", log_text(utf8_safe(path.name)), log_text(error))
        return Accepted(filed[0], id_from_filename(path.name), rejected=True, error=error)

    def _file_rejection(self, path: Path, st: os.stat_result, error: str, details: dict[str, Any],
                        content: bytes | None, received: bytes, inbox_path: str, source: BinaryIO | None,
                        unwritten: Callable[[Exception], str]) -> tuple[int, Path] | None:
        """error.json (with `content`, the bytes kept) into the outbox, a row in the store (`received`, what its
        hash is of), then the name out of the inbox: the run's id and where it was written, or None when the outbox
        could not be written (the file is left, `unwritten(exc)` says why)."""
        name = utf8_safe(path.name)
        brief_id = id_from_filename(path.name)
        try:
            written = write_rejection(self.outbox, brief_id, name, error, details, content, source=source,
                                      aside=self._outdir_busy(brief_id))
        except (OSError, ValueError) as exc:
            if shortage(exc):
                raise
            self._leave(path, unwritten(exc), st)
            return None
        run_id = self.store.add_rejection(brief_id=brief_id, source_file=name, received=received, error=error,
                                          details=details, inbox_path=inbox_path)
        self._remove(path, st)
        self.store.mark_inbox_removed(run_id)
        return run_id, written

    def _leave_unreadable(self, path: Path, st: os.stat_result, exc: OSError) -> None:
        if shortage(exc):
            raise exc  # the daemon's shortage: take_ready keeps the file tracked, never refused for it
        code = errno.errorcode.get(exc.errno or 0, "unknown")
        fix = ("make it readable by the user briefd runs as (for example chmod a+r)"
               if exc.errno in (errno.EACCES, errno.EPERM) else "check the file and the disk under it")
        return self._leave(path, f"{utf8_safe(path.name)} cannot be read: {exc.strerror or exc}; {fix}; it stays in "
                                 f"the inbox and is taken once it can be read", st,
                           notice={"reason": "unreadable", "errno": code})

    def _leave(self, path: Path, reason: str, st: os.stat_result | None = None,
               notice: dict[str, object] | None = None) -> None:
        """Leave a file where the user put it, saying why once per version of it.

        With `notice`, the reason also goes to outbox/<id>/error.json (once per file and
        message), for a user who watches the outbox rather than the daemon's log.
        """
        if st is None:
            try:
                st = os.lstat(path)
            except OSError:
                return None
        version = _version(st)
        if self.refused.get(path) == (version, reason):
            return None
        self.refused[path] = (version, reason)
        name = utf8_safe(path.name)
        log.warning("%s left in the inbox: %s", log_text(name), log_text(reason))
        if notice is not None:
            brief_id = id_from_filename(path.name)
            try:
                write_rejection(self.outbox, brief_id, name, reason,
                                {"field": "", **notice, "left_in_inbox": True}, None,
                                aside=self._outdir_busy(brief_id), repeat=False)
            except (OSError, ValueError) as exc:
                log.warning("%s: could not write the notice to the outbox: %s", log_text(name), log_text(exc))
        return None

    def _outdir_busy(self, brief_id: str) -> bool:
        """A run of this id has its files live in outbox/<id> (running, or waiting to resume)."""
        latest = self.store.latest_run(brief_id)
        if latest is None or latest.state not in (QUEUED, RUNNING):
            return False  # the common case: one cheap query
        return any(run.brief_id == brief_id and run.outdir_ready
                   for run in self.store.briefs_in_state(QUEUED, RUNNING))

    def _remove(self, path: Path, taken: os.stat_result) -> bool:
        """Unlink `path` if it is still the version that was taken; a newer one stays to be taken."""
        try:
            now = os.lstat(path)
        except FileNotFoundError:
            return False
        if not _same_content(now, taken):
            log.warning("%s changed after it was taken; the new version stays and is taken as a new brief",
                        log_text(path.name))
            return False
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass
        return True


def start_observer(inbox: Inbox, use_polling: bool,
                   deliver: Callable[[Callable[[], None]], object]) -> BaseObserver:
    """A watchdog observer whose handler only hands paths over (`deliver` runs them on the loop).

    `deliver` may return anything (loop.call_soon_threadsafe returns a Handle): it is ignored.
    """
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
