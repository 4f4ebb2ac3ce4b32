"""Offline archives (Kiwix ZIM files) as a source: the daemon's side, a pool of reader children.

What a child does with an archive (open, search, read, the frames it answers) is zim.py's; this
module starts the children, holds them to their limits and says what an archive that fails did.
Run as a module (`python -m briefd.daemon.sources.archives`) it is that child (zim.serve_child).

Why it looks like this:
- libzim runs in child processes of its own (`python -m briefd.daemon.sources.archives`, at most
  ARCHIVE_READERS, the archives shared among them), never in the daemon. Fuzzing showed why
  (tests/sources/test_archive_fuzz.py): of damaged copies of a valid archive, about one in a hundred makes
  a libzim search abort the whole process (SIGABRT, "terminate called after throwing an instance of
  'std::out_of_range'"), and python-libzim keeps the GIL during its calls, so a slow call stalls
  the event loop even from a thread. A child that crashes (CRASH_SIGNALS), or passes
  `READER_DEADLINE_S` while running, is killed and replaced; the archive it was working on is set
  aside (named, with the fix, logged once) and the others keep answering. A child killed or stopped
  from outside (the OOM killer's SIGKILL, a SIGSTOP) says nothing about the archive: it is replaced
  and the request asked again (issue 29 #6).
- A child runs under the page readers' address-space limit (pagework.limit_memory,
  CHILD_MEMORY_BYTES): libzim unpacks a whole cluster up to the article asked for, and a 124 KB
  archive whose cluster held 2,000 MB of zeros made one search allocate 2 GB. Past the limit the
  archive is set aside with the reason; snippets stop at SNIPPET_DEADLINE_S (issue 29 #4).
- The archives open in the background (`from_settings(background=True)`), each joining the
  searchable set as it opens: opening them before READY=1 let two hung network shares hold the
  daemon's start for 124 s, past systemd's start timeout. An open that passes the deadline is
  said to be that (a hung share or a slow disk: check the mount), not damage (issue 29 #5).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from .search import MAX_HITS_PER_QUERY, SearchHit
from ..core.settings import Settings
from .pagework import CHILD_MEMORY_BYTES, child_environment
from .sources import fuse
from ..core.untrusted import clean
from ..rules.numbers import number_text
from .zim import (
    FIX_DAMAGED, MAX_ANSWER_BYTES, READY, SNIPPET_DEADLINE_S, ArchiveEntry, ArchiveError, ArchiveHealth,
    BadArchiveUrl, EntryRefused, archive_problem, parse_url, query_text, receive_frame, send_frames, serve_child,
)

log = logging.getLogger("briefd")
T = TypeVar("T")

READER_DEADLINE_S = 60.0
"""Wall-clock time one request to the archive reader may take: opening an archive, one archive's
search (nine Xapian queries), reading one article. Each takes milliseconds on a warm cache and
under a few seconds on a cold disk; past this libzim is taken to be looping on a damaged file:
the child is killed and the archive set aside."""

ARCHIVE_READERS = 4
"""Reader children at most; archives share them in turn (the first four archives have one each). More
than one: an archive whose open never returns (a hung network share) holds only its own reader, and the
archives open at once, not one after another. Not one per archive: each child costs about 65 MB, and a
shelf of 400 archives (the fuzz test's) would start 400."""

OPENING_WAIT_S = 10.0
"""How long a search waits for archives still opening. At the daemon's start a brief's first search can
come within a second or two, before an archive has opened (its reader starts in about a second): without
a wait it would miss the archive. An archive still opening after this (a hung share) is not searched,
and the brief's events say so."""

START_DEADLINE_S = 60.0
"""How long a new reader child may take to import its libraries (under a second when idle)."""

FIX_SAME_NAME = "rename one of them: archives are named by their file name in citations and URLs"
FIX_HUNG = ("check that the disk or network share holding it is mounted and answering (`ls -l` on the file "
            "should return at once); briefd tries it again when it restarts")
FIX_MEMORY = ("no Kiwix archive needs this (their clusters unpack to a few MB): check it with `zimcheck` from "
              "zim-tools, or remove it from the `archives` setting")
FIX_KILLED = ("see what killed it (`journalctl -k` shows the kernel's OOM killer); briefd restarts the reader at "
              "the next request")
FIX_READER = "run `python -m briefd.daemon.sources.archives < /dev/null` to see why the archive reader cannot start"


# ---------------------------------------------------------------------------- the daemon's side


CRASH_SIGNALS = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                           signal.SIGTRAP, signal.SIGSYS})
"""Signals a process raises on itself when its own code fails: libzim's uncaught C++ exceptions abort
(SIGABRT), a bad read of a damaged file faults (SIGSEGV, SIGBUS). A reader ended by one of these was
ended by the archive it was reading. Any other signal came from outside (the kernel's OOM killer and
an operator's `kill` send SIGKILL, a shutdown SIGTERM) and says nothing about the archive."""


class ReaderUnavailable(ArchiveError):
    """The archive reader cannot start, is closed (briefd is stopping), or was killed from outside twice
    in a row: no archive's fault, and the archive stays configured."""


class _ReaderDied(Exception):
    """The reader child ended during a request by the archive's doing: libzim crashed (a signal in
    CRASH_SIGNALS), sent a malformed answer, or ran past the deadline while it ran (`hung`)."""

    def __init__(self, why: str, *, hung: bool = False) -> None:
        super().__init__(why)
        self.hung = hung


class _ReaderKilled(Exception):
    """The reader child ended during a request by something outside it: a signal not in CRASH_SIGNALS
    (the OOM killer's SIGKILL), a stop (SIGSTOP) that held it past the deadline, an exit. Nothing is
    known about the archive: the reader is restarted and the request asked again."""


class _Fault(Exception):
    """The archive itself failed a request (crashed or hung libzim, unpacked past the memory limit, no
    longer opens): `problem` and `fix` are what the user is told, and it is set aside."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name
        return f"signal {number}"


def _stop_signal(pid: int) -> int | None:
    """The signal that has this child stopped now (SIGSTOP, SIGTSTP...), or None when it is not stopped
    (or the platform has no waitid: a stop then reads as a hang, as before).

    Asked with waitid's WNOWAIT, so the child's state is left for Popen to reap; only the parent can ask."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return None
    try:
        found = waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT)
    except OSError:  # already reaped
        return None
    return found.si_status if found is not None and found.si_code == os.CLD_STOPPED else None


@dataclass(eq=False)
class _Reader:
    """The child process running libzim for one archive; one request at a time (Archives holds the lock)."""

    deadline_s: float
    memory_bytes: int = CHILD_MEMORY_BYTES
    process: subprocess.Popen[bytes] | None = None
    closed: bool = False
    timed_out: bool = False
    stopped_by: int | None = None  # the signal that had the child stopped when the deadline came
    holding: set[str] = field(default_factory=set)  # the archives the current child has open (their paths)
    lock: threading.Lock = field(default_factory=threading.Lock)  # held by Archives for each request
    peak_rss_mb: float = 0.0
    """The child's peak RSS as its last answer gave it (for the tests and the bench)."""

    def ensure(self) -> bool:
        """Start a child unless one is alive; True when one was started (it has no archive open)."""
        self._refuse_if_closed()
        if self.process is not None and self.process.poll() is None:
            return False
        self._stop()  # one killed while idle (the OOM killer) is replaced
        self.holding.clear()  # a new child has nothing open
        env = child_environment()
        self.process = subprocess.Popen([sys.executable, "-m", "briefd.daemon.sources.archives", str(self.memory_bytes)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._refuse_if_closed()  # closed while it started: close() may not have seen this process
        ready = self._within(START_DEADLINE_S, lambda out: receive_frame(out, len(READY)))
        if ready != READY:
            why = self._ended(START_DEADLINE_S)
            self._stop()
            raise ReaderUnavailable(f"the archive reader did not start ({why}); {FIX_READER}")
        return True

    def _refuse_if_closed(self) -> None:
        if self.closed:
            self._stop()
            raise ReaderUnavailable("the archives are closed (briefd is stopping)")

    def ask(self, request: dict[str, Any], body_limit: int = 0) -> tuple[dict[str, Any], bytes | None]:
        """The child's answer to one request (and the body frame it announced), within `deadline_s`.

        Raises _ReaderDied when the archive ended the child, _ReaderKilled when something else did,
        ReaderUnavailable when the reader was closed meanwhile."""
        process = self.process
        assert process is not None and process.stdin is not None
        try:
            send_frames(process.stdin, json.dumps(request).encode())
        except OSError:
            pass  # it died: the read below says how
        got = self._within(self.deadline_s, lambda out: _answer_from(out, body_limit))
        if got is None:
            ended = self._ended(self.deadline_s)
            self._stop()
            if self.closed:
                raise ReaderUnavailable("the archives are closed (briefd is stopping)")
            raise ended
        self.peak_rss_mb = float(got[0].get("peak_rss_mb", 0.0))
        return got

    def _within(self, deadline_s: float, read: Callable[[IO[bytes]], T | None]) -> T | None:
        """`read(stdout)`, with the child killed at the deadline (the read then sees the end of the pipe).
        A child found stopped at the deadline (SIGSTOP from outside) is noted as that before it is killed."""
        process = self.process
        assert process is not None and process.stdout is not None
        self.timed_out, self.stopped_by = False, None

        def too_late() -> None:
            self.stopped_by = _stop_signal(process.pid)
            self.timed_out = True
            process.kill()

        timer = threading.Timer(deadline_s, too_late)
        timer.daemon = True
        timer.start()
        try:
            return read(process.stdout)
        except (OSError, ValueError):  # a closed pipe, a frame that is not JSON: the child is broken
            return None
        finally:
            timer.cancel()

    def _ended(self, deadline_s: float) -> _ReaderDied | _ReaderKilled:
        """Why the child gave no answer, and whether that is the archive's doing (_ReaderDied) or not."""
        process = self.process
        if process is None:
            return _ReaderKilled("it was stopped")
        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return _ReaderDied("it sent a malformed answer")
        if self.timed_out and self.stopped_by is not None:
            return _ReaderKilled(f"it was stopped from outside briefd ({_signal_name(self.stopped_by)}) and gave "
                                 f"no answer within {number_text(deadline_s)} s")
        if self.timed_out:
            return _ReaderDied(f"it took over {number_text(deadline_s)} s and was stopped", hung=True)
        if code < 0 and -code in CRASH_SIGNALS:
            return _ReaderDied(f"libzim crashed ({_signal_name(-code)})")
        if code < 0:
            return _ReaderKilled(f"it was killed by {_signal_name(-code)} from outside briefd (the kernel's OOM "
                                 "killer, or a kill)")
        return _ReaderKilled(f"it exited with status {code}")

    def _stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass  # a broken pipe to a dead child

    def close(self) -> None:
        """Stop the child now; a request waiting on it ends with ReaderUnavailable."""
        self.closed = True
        if self.lock.acquire(blocking=False):
            try:
                self._stop()
            finally:
                self.lock.release()
        elif (process := self.process) is not None:
            process.kill()  # the requesting thread sees the end of the pipe and cleans up


def _answer_from(stdout: IO[bytes], body_limit: int) -> tuple[dict[str, Any], bytes | None] | None:
    frame = receive_frame(stdout, MAX_ANSWER_BYTES)
    if frame is None:
        return None
    answer: dict[str, Any] = json.loads(frame)
    if not answer.get("body"):
        return answer, None
    body = receive_frame(stdout, body_limit)
    return None if body is None else (answer, body)


def _close_readers(readers: dict[str, _Reader]) -> None:
    for reader in list(readers.values()):
        reader.close()


class Archives:
    """The configured archives, each opened once in a reader child (ARCHIVE_READERS at most): search them,
    read their entries, say how they are. Blocking calls (`open`, `close`) belong in a thread from async code.

    Up to ARCHIVE_READERS readers, the archives shared among them in turn, so that a hung archive (a
    network share that never answers) holds only its own reader and the archives open at the same time.
    A reader answers one request at a time, so its death names the one archive it was working on; a
    restarted reader opens each archive again before that archive's next request.
    `open` returns once every archive has opened or failed (`briefd check`); the daemon calls
    `from_settings(..., background=True)`, which returns at once: each archive joins the searchable set
    as it opens, so systemd hears READY=1 before a slow archive has opened (a hung share delayed it past
    systemd's start timeout, and the daemon was killed and restarted for ever)."""

    def __init__(self, files: Iterable[Path] = (), *, deadline_s: float = READER_DEADLINE_S,
                 memory_bytes: int = CHILD_MEMORY_BYTES, snippet_deadline_s: float = SNIPPET_DEADLINE_S) -> None:
        self._files = [Path(file) for file in files]
        self._deadline_s = deadline_s
        self._memory_bytes = memory_bytes
        self._snippet_deadline_s = snippet_deadline_s
        self._readers: dict[str, _Reader] = {}  # by file name (what URLs name); archives share ARCHIVE_READERS
        self._opened: dict[str, ArchiveHealth] = {}  # by file name: the searchable set
        self._opening: dict[str, Path] = {}  # by file name: asked to open, no answer yet
        self._problems: list[ArchiveHealth] = []
        self._said: set[str] = set()  # every notice ever noted (each is told once)
        self._fresh: list[str] = []  # notices not handed to a caller yet (take_notes)
        self._state = threading.Condition()  # the opening threads and the searches share the dicts above
        self._closed = False
        weakref.finalize(self, _close_readers, self._readers)  # no child outlives the object

    @classmethod
    def open(cls, files: Iterable[Path], *, deadline_s: float = READER_DEADLINE_S,
             memory_bytes: int = CHILD_MEMORY_BYTES, snippet_deadline_s: float = SNIPPET_DEADLINE_S) -> Archives:
        """Open every file, each in a new reader child, all at once; return when each has opened or
        failed (blocking: a child starts in about a second, a hung file takes `deadline_s`)."""
        shelf = cls(files, deadline_s=deadline_s, memory_bytes=memory_bytes, snippet_deadline_s=snippet_deadline_s)
        for thread in shelf.start_opening():
            thread.join()
        return shelf

    @classmethod
    def from_settings(cls, settings: Settings, *, background: bool = False) -> Archives:
        """The configured archives: all opened (`open`), or, `background`, opening in threads of their
        own while this returns at once, each outcome logged as it comes (the daemon's start)."""
        if not background:
            return cls.open(settings.archives)
        shelf = cls(settings.archives)
        shelf.start_opening(tell=True)
        return shelf

    def start_opening(self, *, tell: bool = False) -> list[threading.Thread]:
        """Start opening every configured archive, each in a thread of its own (its reader child does
        the work), and return the threads. A second file with an archive's file name is refused now.
        `tell`: each outcome is logged as it comes (a problem or a title-only index as a warning, an
        archive that opened at info) instead of being kept for `take_notes`."""
        threads: list[threading.Thread] = []
        for file in self._files:
            if file.name in self._readers:
                self._settle(archive_problem(file, f"has the same file name as another archive ({file.name})",
                                             FIX_SAME_NAME), tell)
                continue
            if len(self._readers) < ARCHIVE_READERS:
                reader = _Reader(self._deadline_s, self._memory_bytes)
            else:
                reader = list(self._readers.values())[len(self._readers) % ARCHIVE_READERS]
            self._readers[file.name] = reader
            self._opening[file.name] = file
            thread = threading.Thread(target=self._add, args=(file, tell), name=f"open archive {file.name}",
                                      daemon=True)  # a hung open never holds the daemon's exit
            threads.append(thread)
        for thread in threads:
            thread.start()
        return threads

    def close(self) -> None:
        """Stop every reader child (also done when the object is collected); opens still waiting end.
        A reader shared by several archives is closed once per archive: the second time is a no-op."""
        self._closed = True
        _close_readers(self._readers)

    def __enter__(self) -> Archives:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def names(self) -> list[str]:
        """The file names URLs use, of the archives that opened and were not set aside, in the order given."""
        with self._state:
            return [name for name in self._readers if name in self._opened]

    @property
    def reader_peak_rss_mb(self) -> float:
        """The highest peak RSS a reader child gave at its last answer (a restarted child starts again from its own)."""
        return max((reader.peak_rss_mb for reader in list(self._readers.values())), default=0.0)

    def take_notes(self) -> list[str]:
        """The notices not handed out before (sources.Searcher): each reaches the events once."""
        with self._state:
            fresh, self._fresh = self._fresh, []
        return fresh

    def health(self) -> list[ArchiveHealth]:
        """For `briefd check`: every configured archive that has opened or failed, in the order given
        (problems after)."""
        order = {file: n for n, file in enumerate(self._files)}
        with self._state:
            opened = [self._opened[name] for name in self._readers if name in self._opened]
            problems = sorted(self._problems, key=lambda health: order.get(health.file, len(order)))
        return opened + problems

    def _note(self, text: str, *, hand_out: bool = True) -> bool:
        """Keep a notice for take_notes (unless `hand_out` is False: told elsewhere); False when it was
        noted before."""
        with self._state:
            if text in self._said:
                return False
            self._said.add(text)
            if hand_out:
                self._fresh.append(text)
        return True

    def _warn(self, text: str) -> None:
        """A problem found while the daemon runs: noted for the brief's events, and logged once."""
        if self._note(text):
            log.warning("%s", text)

    # ------------------------------------------------------------------ the children

    def _ask(self, file: Path, request: dict[str, Any], doing: str,
             body_limit: int = 0) -> tuple[dict[str, Any], bytes | None]:
        """One request to `file`'s reader, after reopening the archive in a child that was (re)started.

        Raises _Fault when the archive failed it (`doing` says when, for the problem's words), and
        ReaderUnavailable when the reader is closed, cannot start, or was killed from outside twice: a
        reader killed or stopped from outside is restarted and asked again, and the archive is not blamed."""
        reader = self._readers[file.name]
        with reader.lock:  # one request at a time, and a restarted child reopens first
            try:
                return self._once(reader, file, request, doing, body_limit)
            except _ReaderKilled as exc:
                said = f"archive reader of {file}: {exc}; that says nothing about the archive, which stays in use"
                self._warn(f"{said}; the reader was restarted and asked again")
            try:
                return self._once(reader, file, request, doing, body_limit)
            except _ReaderKilled as exc:
                raise ReaderUnavailable(f"archive reader of {file}: {exc}, twice in a row {doing}; that says "
                                        f"nothing about the archive, which stays in use; {FIX_KILLED}") from None

    def _once(self, reader: _Reader, file: Path, request: dict[str, Any], doing: str,
              body_limit: int) -> tuple[dict[str, Any], bytes | None]:
        """One try of `_ask` (its lock held): what the archive did is turned into a _Fault, what was done
        to the reader from outside passes as _ReaderKilled."""
        try:
            reader.ensure()
            if request["op"] != "open" and str(file) not in reader.holding:
                self._reopen(reader, file)  # a restarted reader: this archive opens again first
            answer, body = reader.ask(request, body_limit)
            if request["op"] == "open" and answer.get("health", {}).get("ok"):
                reader.holding.add(str(file))
        except _ReaderDied as exc:
            if exc.hung and request["op"] == "open":
                raise _Fault(f"did not open within {number_text(self._deadline_s)} s (a hung network share or a "
                             "very slow disk?)", FIX_HUNG) from None
            raise _Fault(f"stopped the archive reader {doing} ({exc})", FIX_DAMAGED) from None
        if answer.get("out_of_memory"):
            raise _Fault(self._too_big(doing), FIX_MEMORY)
        return answer, body

    def _too_big(self, doing: str) -> str:
        return (f"needed more than the archive reader's memory limit ({self._memory_bytes >> 20} MB) {doing}: "
                "a cluster of it unpacks past that")

    def _reopen(self, reader: _Reader, file: Path) -> None:
        """A new child has nothing open: open the archive again (_Fault when it no longer opens)."""
        answer, _ = reader.ask({"op": "open", "file": str(file)})
        if answer.get("out_of_memory"):
            raise _Fault(self._too_big("when opened again"), FIX_MEMORY)
        if not answer["health"]["ok"]:
            raise _Fault(f"can no longer be opened ({answer['health']['problem']})", FIX_DAMAGED)
        reader.holding.add(str(file))

    def _set_aside(self, health: ArchiveHealth, fault: _Fault) -> None:
        """An archive that crashed or hung the reader, or unpacked past its memory limit, is not asked
        again until briefd restarts: it would do so again, and each time costs a new child."""
        with self._state:
            self._opened.pop(health.file.name, None)
            self._problems.append(archive_problem(health.file, f"{fault.problem}; set aside until briefd restarts",
                                                  fault.fix))
        self._warn(f"archive {health.name} ({health.file}): {fault.problem}; set aside until briefd restarts; "
                   f"{fault.fix}")

    def _add(self, file: Path, tell: bool) -> None:
        """Open one archive (in an opening thread); it joins the searchable set, or becomes a problem."""
        try:
            answer, _ = self._ask(file, {"op": "open", "file": str(file)}, "when opened")
            health = ArchiveHealth(file=file, **answer["health"])
        except _Fault as fault:
            health = archive_problem(file, f"is damaged: it {fault.problem}" if fault.fix == FIX_DAMAGED
                                     else fault.problem, fault.fix)
        except ReaderUnavailable as exc:
            health = archive_problem(file, f"could not be opened: {exc}", FIX_READER)
        self._settle(health, tell)

    def _settle(self, health: ArchiveHealth, tell: bool) -> None:
        """An archive's opening ended: searchable, or a problem; said (logged when `tell`) unless the
        shelf was closed meanwhile (briefd is stopping: an open cut short is no news)."""
        with self._state:
            own = self._opening.get(health.file.name) == health.file  # not a second file of that name
            if own:
                del self._opening[health.file.name]
            if health.ok:
                self._opened[health.file.name] = health
            else:
                self._problems.append(health)
            self._state.notify_all()  # a search waiting for the openings (_wait_opening)
        if self._closed:
            return
        said = [health.line()] if not health.ok else []
        if health.ok and not health.fulltext:
            said.append(f"archive {health.name} ({health.file.name}) has no full-text index: searched by title only")
        for text in said:
            if self._note(text, hand_out=not tell) and tell:
                log.warning("%s", text)
        if tell and health.ok:
            log.info("%s", health.line())

    # ------------------------------------------------------------------ search

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """Up to `limit` (at most MAX_HITS_PER_QUERY) hits from all archives, merged by rank fusion
        (each archive's first, then each one's second...). Any query text is safe: it is cleaned,
        cut, and handed to libzim's query parser, which treats what it cannot parse as words.
        The archives are searched at once by their readers; one still opening after OPENING_WAIT_S
        is not searched, and the brief's events say so (once)."""
        text, limit = query_text(query), min(limit, MAX_HITS_PER_QUERY)
        if self._opening:
            await asyncio.to_thread(self._wait_opening, OPENING_WAIT_S)
        with self._state:
            opening = list(self._opening.values())
            opened = [self._opened[name] for name in self._readers if name in self._opened]
        for file in opening:
            self._note(f"archive {file} is still opening (a slow disk or network share?): not searched yet")
        if not text or limit <= 0 or not opened:
            return []
        ranked = await asyncio.gather(*(asyncio.to_thread(self._search_archive, health, text, limit)
                                        for health in opened))
        return fuse(ranked)[:limit]

    def _wait_opening(self, timeout_s: float) -> None:
        with self._state:
            self._state.wait_for(lambda: not self._opening, timeout=timeout_s)

    def _search_archive(self, health: ArchiveHealth, text: str, limit: int) -> list[SearchHit]:
        """One archive's hits; a failure is this archive's alone (named, with the fix, logged once)."""
        request = {"op": "search", "file": str(health.file), "text": text, "limit": limit,
                   "snippet_deadline_s": self._snippet_deadline_s}
        try:
            answer, _ = self._ask(health.file, request, "while searching")
        except _Fault as fault:
            self._set_aside(health, fault)
            return []
        except ReaderUnavailable as exc:
            self._warn(str(exc))
            return []
        if "error" in answer:
            self._warn(f"archive {health.name} ({health.file}) failed a search ({answer['error']}); {FIX_DAMAGED}")
            return []
        if answer.get("unsnipped"):
            self._warn(f"archive {health.name} ({health.file}): making snippets took over "
                       f"{number_text(self._snippet_deadline_s)} s in a search, so some hits came without one "
                       "(a slow disk, or articles costly to unpack)")
        return [SearchHit(**hit) for hit in answer["hits"]]

    # ------------------------------------------------------------------ read

    async def read(self, url: str, *, max_bytes: int = Settings.fetch_max_bytes,
                   max_redirects: int = Settings.fetch_max_redirects) -> ArchiveEntry:
        """The entry a `zim://` URL names, after at most `max_redirects` redirect entries.

        Raises BadArchiveUrl (malformed, or an archive that is not configured), EntryRefused
        (missing, larger than `max_bytes`, not text, too many redirects, unreadable) or
        ReaderUnavailable (the archive is still opening, or its reader cannot answer)."""
        ref = parse_url(url)
        with self._state:
            health = self._opened.get(ref.archive)
            opening = self._opening.get(ref.archive)
        if opening is not None:
            raise ReaderUnavailable(f"archive {opening} is still opening (a slow disk or network share?); "
                                    "try again once it has opened")
        if health is None:
            raise BadArchiveUrl(f"{clean(url)[:200]!r} names an archive that is not configured "
                                f"({clean(ref.archive)!r}); configured: {', '.join(self.names) or 'none'}")
        return await asyncio.to_thread(self._read, health, ref.path, max_bytes, max_redirects)

    def _read(self, health: ArchiveHealth, path: str, max_bytes: int, max_redirects: int) -> ArchiveEntry:
        request = {"op": "read", "file": str(health.file), "path": path, "max_bytes": max_bytes,
                   "max_redirects": max_redirects}
        try:
            answer, body = self._ask(health.file, request, f"while reading {clean(path)[:200]!r}", body_limit=max_bytes)
        except _Fault as fault:
            self._set_aside(health, fault)
            raise EntryRefused(f"{health.name}: {clean(path)[:200]!r}: unreadable ({fault.problem}); {fault.fix}") from None
        if "refused" in answer:
            raise EntryRefused(answer["refused"])
        if "error" in answer or body is None:
            raise EntryRefused(f"{health.name}: {clean(path)[:200]!r}: unreadable ({answer.get('error')})")
        return ArchiveEntry(url=answer["url"], body=body, mimetype=answer["mimetype"], title=answer["title"],
                            archive=answer["archive"])


if __name__ == "__main__":  # the reader child (zim.serve_child), under the name its command line and FIX_READER give
    serve_child(int(sys.argv[1]) if len(sys.argv) > 1 else CHILD_MEMORY_BYTES)  # the limit _Reader passes
