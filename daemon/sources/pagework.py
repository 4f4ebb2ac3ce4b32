"""Reading fetched pages in child processes that a deadline can kill.

Extraction (lxml, trafilatura) and splitting are CPU-bound and run in C or in long
Python loops: in the daemon's process they would hold the event loop (or, in a
thread, the GIL and the daemon's exit) for as long as one hostile page makes them
take, and a thread cannot be stopped. A child process can: each read has a
deadline in the child's CPU time (a cap in wall time too), and a child that passes it is
killed and replaced. So one page costs at most `PAGE_DEADLINE_S` of CPU, however busy the
model keeps the cores, and SIGTERM never waits for a page.

The children are plain `python -m briefd.daemon.sources.pagework` processes (no fork of a
threaded daemon), started on first use, reused, and at most `PAGE_WORKERS` at once:
two keep a 2-core box's second core busy without doubling the memory for nothing. The
library's documents may take all but one of them (`RESEARCH_RESERVED`): a brief's pages
never wait behind the library's indexing.
A child exits when its stdin closes, so none outlives the daemon.

Protocol, both ways: frames of a 4-byte big-endian length and that many bytes. The
child first sends a ready frame; then per page the parent sends a JSON header frame
and a body frame, and the child answers one JSON frame. A document on disk is a job too
(`read_file`): the header names the path, the body frame is empty, and the child opens the
file itself, so a 200 MB PDF is never piped (PDFium reads it lazily from the path).

Documents get `DOCUMENT_DEADLINE_S`, and every child runs under an address-space limit
(`CHILD_MEMORY_BYTES`): past it an allocation fails in the child (a MemoryError, or PDFium
giving up on the page), never in the daemon, and the child is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import os
import resource
import struct
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .documents import DocumentRefused, is_document, load_readers, read_document
from .extract import Extracted, PageText, Passage, extract_page, mark_passages, split_passages, url_name
from .structure import marks_from_json, marks_json
from ..core.errors import BriefdError
from ..core.spawn import creations_done, spawn, stop_process

PAGE_DEADLINE_S = 15.0
"""CPU time one page may take to read (the child's, not the clock's). An article takes well under a
second, the worst tree trafilatura is still given (`MAX_TRAFILATURA_ELEMENTS`) a few seconds; past
this the page is given up for good. CPU, not wall: on a box whose cores the model takes (llama.cpp
runs a thread a core), a page of 6 s of work took over 15 s of wall and was given up, a good page
lost for the model's load; its cost is what the bound is about."""

DOCUMENT_DEADLINE_S = 120.0
"""CPU time one document may take. A 2,000-page PDF (`documents.MAX_PDF_PAGES`) reads in
a few seconds at the measured few ms a page; a document is chosen by the user (their library)
or is a PDF a search found, worth far more than a page, and `documents.MAX_PDF_SECONDS` stops
reading pages at half this, so slow pages give a partial text rather than none."""

WALL_FACTOR = 4.0
"""A read is also given up after this many times its deadline of wall time, whatever its CPU: a child
that waits rather than works (stopped, swapped out, blocked) must not hold a brief for ever."""

CPU_POLL_S = 0.5
"""How often the parent reads a busy child's CPU time (at most; a quarter of a short deadline)."""

CHILD_MEMORY_BYTES = 2 << 30
"""Address space a reading child may map (RLIMIT_AS). Measured: a child maps 120 MB at its peak
after reading a 200 MB PDF, a million-page tree and a DOCX (VmPeak; 105 MB resident: the bench,
`python -m lab.documents bench`). 2 GB leaves room for a DOCX carrying its 512 MB of images
(`documents.MAX_ZIP_BYTES`) and stops a hostile file long before it could starve the machine."""

PAGE_WORKERS = 2
"""Child processes reading pages at once (about 75 MB each, idle or between pages: see `_memory_trimmer`)."""

RESEARCH_RESERVED = 1
"""Children only research may take. The library's documents each run up to `DOCUMENT_DEADLINE_S`
(four hostile EPUBs held both children for 118 s, and a web brief waited behind them for a child:
0.7 s became 118.5 s); research's pages are read while a brief waits for them, the library's
whenever. So the library's reads queue for their own share and never take the last child."""

LIBRARY_WORKERS = max(1, PAGE_WORKERS - RESEARCH_RESERVED)
"""Children the library's reads (`read_file`, in the background) may take at once: the rest are research's."""

START_TIMEOUT_S = 60.0
"""How long a new child may take to import its libraries before it is counted as broken."""

MAX_ANSWER_BYTES = 64 << 20
"""The largest answer a child may send: a document's text is at most MAX_DOCUMENT_CHARS (4 million
characters, up to 6 bytes each as JSON escapes) plus its passages' offsets. Past it the child is
killed and the document refused: the daemon never holds more for one document."""

CLOSED = "the page readers are closed (briefd is stopping)"

_LENGTH = struct.Struct(">I")
_READY = b"ready"
_WARM_UP = b"<html><head><title>t</title></head><body><article><p>A first page. It is read once.</p></article></body></html>"


def read_page(body: bytes, url: str, content_type: str) -> PageText | None:
    """Everything CPU-heavy a fetched page costs, in one call: its text, then its passages.

    None when there is no readable text. Made to run away from the event loop (this module runs it
    in a child process that a deadline can kill). It lives here, not in extract, because it joins
    extract and documents, and documents builds on extract.
    PDFs, office files, EPUBs and Markdown are documents (`daemon.documents`): a PDF found
    on the web is read with its pages, and one that cannot be read raises
    `documents.DocumentRefused` with the reason.
    """
    if body and is_document(body, url, content_type):
        return read_document(body, None, url_name(url) or url, content_type)
    extracted = extract_page(body, url, content_type)
    if extracted is None or not extracted.text.strip():
        return None
    return PageText(extracted=extracted, passages=mark_passages(split_passages(extracted.text), extracted.regions))


class PageUnreadable(BriefdError):
    """This page cannot be read within the bound: too costly, or it broke the reader. Permanent."""


class PageRefused(PageUnreadable):
    """The reader refused this document, and `str()` says why in words for the user, naming the
    file: "report.pdf: no text layer (a scanned PDF?): briefd does no OCR". Permanent."""


@dataclass(eq=False)  # compared by identity: the busy set holds the children themselves
class _Child:
    process: asyncio.subprocess.Process

    async def stop(self) -> None:
        """Kill, reap, and close the pipes now (`spawn.stop_process`)."""
        await stop_process(self.process)


@dataclass
class PageWorkers:
    """A small pool of page-reading children; `await read(...)` reads one page within the deadline."""

    size: int = PAGE_WORKERS
    deadline_s: float = PAGE_DEADLINE_S
    _idle: list[_Child] = field(default_factory=list)
    _busy: set[_Child] = field(default_factory=set)
    document_deadline_s: float = DOCUMENT_DEADLINE_S
    wall_factor: float = WALL_FACTOR  # a read is given up at this many times its deadline of wall, whatever its CPU
    peak_rss_mb: float = 0.0
    """The highest peak RSS a child has reported (each answer carries its own): for the bench."""
    _slots: asyncio.Semaphore | None = None
    _background: asyncio.Semaphore | None = None  # the library's share (`library_share`)
    _research: asyncio.Semaphore | None = None    # research's: `size`, as before the library had a share
    _warming: asyncio.Task[None] | None = None    # the warm-up (`start`, `warm_soon`), cancelled by `close`
    _closed: bool = False                         # `close` was called: no child is started any more

    @property
    def library_share(self) -> int:
        """Children background reads may hold at once: all but `RESEARCH_RESERVED`, one at least."""
        return max(1, self.size - RESEARCH_RESERVED)

    @property
    def capacity(self) -> int:
        """Children at most: `size`, or one more where a pool of one would leave research none
        (research still reads `size` pages at once at most; the extra child is the library's)."""
        return max(self.size, self.library_share + RESEARCH_RESERVED)

    async def read(self, body: bytes, url: str, content_type: str) -> PageText | None:
        """`read_page` in a child: a PageText, or None when the page has no readable text.

        Raises PageUnreadable when it takes longer than `deadline_s` or the child dies on
        it; the child is killed either way, and also when the caller is cancelled. A document
        (a PDF found on the web) that cannot be read raises PageRefused with the reason.
        Documents get `document_deadline_s`: told by the same sniffing the child routes by.
        """
        document = is_document(body, url, content_type)
        job = {"url": url, "content_type": content_type}
        return await self._run(job, body, self.document_deadline_s if document else self.deadline_s, "page")

    async def read_file(self, path: Path, name: str, content_type: str = "", *,
                        background: bool = True) -> PageText | None:
        """`documents.read_document` on a file, in a child that opens the file itself.

        None when the file has no text; PageRefused with the reason (naming `name`) when it
        cannot be read; PageUnreadable past `document_deadline_s` or when the child dies on it.
        A file on disk is the library's, read in the `background` share (`library_share`
        children at most), so that research always finds a child of its own.
        """
        job = {"path": str(path), "name": name, "content_type": content_type}
        return await self._run(job, b"", self.document_deadline_s, "document", background=background)

    async def _run(self, job: dict[str, str], body: bytes, deadline_s: float, what: str, *,
                   background: bool = False) -> PageText | None:
        if self._slots is None or self._background is None or self._research is None:
            self._slots = asyncio.Semaphore(self.capacity)
            self._background = asyncio.Semaphore(self.library_share)
            self._research = asyncio.Semaphore(max(1, self.size))
        async with contextlib.AsyncExitStack() as shares:
            # its own share first, then a child's slot: a read never holds a slot while it queues
            await shares.enter_async_context(self._background if background else self._research)
            await shares.enter_async_context(self._slots)
            child = await self._take()
            self._busy.add(child)
            healthy = False
            try:
                answer = await _within(child, _ask(child, job, body), deadline_s, what, self.wall_factor)
                healthy = True
            except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
                raise PageUnreadable(f"the reader stopped on this {what} ({type(exc).__name__}: out of memory "
                                     "or a crash in a library)") from None
            finally:
                self._busy.discard(child)
                if healthy:
                    self._idle.append(child)
                else:
                    await child.stop()  # also when cancelled: the reap takes milliseconds
        self.peak_rss_mb = max(self.peak_rss_mb, float(answer.get("peak_rss_mb", 0.0)))
        if "refused" in answer:
            raise PageRefused(answer["refused"])
        if "error" in answer:
            raise PageUnreadable(f"the reader failed on this {what}: {answer['error']}")
        page = answer["page"]
        if page is None:
            return None
        text = page["text"]
        return PageText(
            extracted=Extracted(title=page["title"], text=text, method=page["method"]),
            passages=[Passage(seq=seq, start=s, end=e, text=text[s:e], page=number, marks=marks_from_json(marks))
                      for seq, s, e, number, marks in page["passages"]],
            notes=list(page["notes"]),
        )

    async def warm(self, spawned: asyncio.Event | None = None) -> None:
        """Start the children before the first page arrives: each takes about 0.3 s to import its
        readers, which the model would otherwise sit through at a brief's first pages. The daemon
        starts this as it claims its first brief (`warm_soon`), so it overlaps the first plan. A child that cannot start is
        left to the first read, which says why. `spawned` is set once every child's process exists."""
        missing = max(0, self.capacity - len(self._idle) - len(self._busy))
        count = 0

        def one_spawned() -> None:
            nonlocal count
            count += 1
            if spawned is not None and count == missing:
                spawned.set()

        if spawned is not None and missing == 0:
            spawned.set()
        starts = [asyncio.create_task(_start_child(one_spawned)) for _ in range(missing)]
        try:
            if starts:
                await asyncio.wait(starts)
        except BaseException:
            # A cancel (the daemon is closing, or failed to start): a start still under way stops its own child
            # as it is cancelled, and a child that was ready by then is stopped here. gather() would have
            # dropped the ready ones with its result, and left them running (one was, under load, in CI).
            for start in starts:
                start.cancel()
            await asyncio.gather(*starts, return_exceptions=True)
            ready = [start.result() for start in starts if not start.cancelled() and start.exception() is None]
            await asyncio.gather(*(child.stop() for child in ready))
            raise
        for start in starts:
            if start.exception() is not None:
                continue  # left to the first read, which says why
            child = start.result()
            if len(self._idle) + len(self._busy) < self.capacity and not self._closed:
                self._idle.append(child)
            else:  # a read started a child of its own meanwhile (the pool stays at its size), or it closed
                await child.stop()

    async def start(self) -> None:
        """`warm` in the background, returned from as soon as every child's process exists (not once they are ready).

        `briefd run` calls this before it imports the daemon's own modules (about 1 s on a busy 2-core
        box, in which the event loop runs nothing) when the inbox holds a brief: the children import theirs
        meanwhile on the other core, instead of after it, and are ready when the first brief's first pages
        are (issue 22: the model sat idle 0.6 s at the first pages for children still starting). The whole
        pool, not one child: with one reader for the first second, several briefs' first pages queued behind
        each other and came after their round (late, then given up at the synthesis), which cost pages a
        report would have read; the daemon's own imports take about 0.3 s longer beside two importing
        children. A spawn that fails ends the wait too; the first read says why."""
        spawned = asyncio.Event()
        self._warming = asyncio.create_task(self.warm(spawned))
        waiting = asyncio.create_task(spawned.wait())
        await asyncio.wait({self._warming, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    def warm_soon(self) -> None:
        """`warm` in the background, once: the daemon calls it as it claims a brief, so the children start
        while the brief's plan is asked and a daemon with nothing to do starts none. Half the daemons the
        test suite started never read a page, and each idle pair cost about a second of CPU and 150 MB held
        for as long as the daemon ran (a `run --once` from cron on an empty inbox, an idle service)."""
        if self._warming is None and not self._closed:
            self._warming = asyncio.create_task(self.warm())

    async def _take(self) -> _Child:
        """An idle child still alive (one killed meanwhile, by the OOM killer say, is replaced), or a new one;
        none once the pool is closed (a straggler's read after the daemon closed it: its child would be no one's)."""
        while self._idle:
            child = self._idle.pop()
            if child.process.returncode is None:
                return child
            await child.stop()
        if self.is_closed():
            raise PageUnreadable(CLOSED)
        child = await _start_child()
        if self.is_closed():  # closed while it started: no one would stop it
            await child.stop()
            raise PageUnreadable(CLOSED)
        return child

    def is_closed(self) -> bool:
        """Was `close` called (a method, not the field: a close may come during any await)?"""
        return self._closed

    async def close(self) -> None:
        """Stop the warm-up and every child (each also stops by itself when the daemon's end of its pipe closes),
        start no more, and wait for the processes being made to exist (`spawn.creations_done`): one cut off by
        the loop's end would hang the process at its exit. Those the readers still start stop as they come."""
        self._closed = True
        if self._warming is not None:  # a start under way stops its own child (`warm`)
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)
        await creations_done()
        children = [*self._idle, *self._busy]
        self._idle.clear()
        self._busy.clear()
        await asyncio.gather(*(child.stop() for child in children))


def child_environment() -> dict[str, str]:
    """The environment of a child that runs `python -m briefd...`: this one, with the folder that holds the
    `briefd` package first on PYTHONPATH, so the child imports the same code as the daemon. That folder is
    the checkout's root or site-packages, never the package's own folder: site-packages/briefd on the path
    would make its `daemon` importable as a top-level module, python-daemon's name. It is found from briefd's
    own __init__.py, not from this file: in a checkout this file is daemon/sources/pagework.py, outside briefd/."""
    briefd = sys.modules[(__package__ or __name__).partition(".")[0]]
    root = str(Path(briefd.__file__ or ".").parents[1])  # <root>/briefd/__init__.py
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


async def _start_child(spawned: Callable[[], None] | None = None) -> _Child:
    """A ready child; `spawned` is called once its process exists (it then imports its readers)."""
    env = child_environment()
    process = await spawn(sys.executable, "-m", "briefd.daemon.sources.pagework", stdin=asyncio.subprocess.PIPE,
                          stdout=asyncio.subprocess.PIPE, env=env)  # not create_subprocess_exec: its cancel hangs
    if spawned is not None:
        spawned()
    child = _Child(process)
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            ready = await _read_frame(process)
    except BaseException:
        await child.stop()
        raise
    if ready != _READY:
        await child.stop()
        raise RuntimeError("the page reader child did not start: run `python -m briefd.daemon.sources.pagework` to see why")
    return child


async def _within(child: _Child, asked: Coroutine[Any, Any, dict[str, Any]], deadline_s: float,
                  what: str, wall_factor: float) -> dict[str, Any]:
    """The child's answer to `asked`, or PageUnreadable once the child has spent `deadline_s` of CPU on it (or,
    where its CPU cannot be read, of wall), or `wall_factor` times that of wall.

    asyncio.wait, not wait_for: Python 3.11's wait_for can swallow a cancel that lands as the answer arrives,
    and SIGTERM must always stop a brief mid-page; a cancel here cancels the question too."""
    loop = asyncio.get_running_loop()
    started, spent_before = loop.time(), cpu_seconds(child.process.pid)
    task = asyncio.ensure_future(asked)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=max(0.01, min(CPU_POLL_S, deadline_s / 4)))
            if done:
                return task.result()
            wall = loop.time() - started
            spent = cpu_seconds(child.process.pid)
            cpu = spent - spent_before if spent is not None and spent_before is not None else None
            # its cost first: a read past its CPU bound is costly, whatever the wall says by the time it is seen
            if (cpu if cpu is not None else wall) > deadline_s:
                raise PageUnreadable(f"reading the {what} took over {deadline_s:g} s{' of CPU' if cpu is not None else ''}"
                                     f" (a {what} this costly is not read)")
            if wall > wall_factor * deadline_s:
                raise PageUnreadable(f"reading the {what} was not done after {wall_factor * deadline_s:g} s "
                                     f"(its reader waited rather than worked: {cpu or 0:.1f} s of CPU)")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def cpu_seconds(pid: int | None) -> float | None:
    """The CPU seconds (user and system) process `pid` has spent, from /proc; None where it cannot be read
    (another OS, a process gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
    except (OSError, IndexError, TypeError):
        return None
    try:  # utime and stime: fields 14 and 15 of the line, 12th and 13th after the name
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (IndexError, ValueError):
        return None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


async def _ask(child: _Child, job: dict[str, str], body: bytes) -> dict[str, Any]:
    stdin = child.process.stdin
    assert stdin is not None
    header = json.dumps(job).encode()
    stdin.write(_LENGTH.pack(len(header)) + header + _LENGTH.pack(len(body)))
    stdin.write(body)
    await stdin.drain()
    answer: dict[str, Any] = json.loads(await _read_frame(child.process))
    return answer


async def _read_frame(process: asyncio.subprocess.Process) -> bytes:
    stdout = process.stdout
    assert stdout is not None
    try:
        (length,) = _LENGTH.unpack(await stdout.readexactly(_LENGTH.size))
        if length > MAX_ANSWER_BYTES:  # a child gone wrong must not make the daemon allocate 4 GiB
            raise EOFError(f"the page reader sent a {length:,}-byte answer (at most {MAX_ANSWER_BYTES:,})")
        return await stdout.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise EOFError("the page reader exited") from exc


# --------------------------------------------------------------------------- the child


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def _read_child_frame(stream: BinaryIO) -> bytes | None:
    head = _read_exact(stream, _LENGTH.size)
    if head is None:
        return None
    return _read_exact(stream, _LENGTH.unpack(head)[0])


def _write_child_frame(stream: BinaryIO, data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _answer(header: bytes, body: bytes) -> dict[str, Any]:
    job = json.loads(header)
    try:
        if "path" in job:
            page = read_document(None, Path(job["path"]), job["name"], job["content_type"])
        else:
            page = read_page(body, job["url"], job["content_type"])
    except DocumentRefused as exc:
        return {"refused": str(exc)}
    except OSError as exc:  # the file went away or cannot be opened: said with its name
        return {"refused": f"{job.get('name') or job.get('url')}: cannot be opened ({exc.strerror or exc})"}
    except MemoryError:
        return {"error": f"out of memory (the reader's limit is {CHILD_MEMORY_BYTES >> 20} MB)"}
    except Exception as exc:  # noqa: BLE001 - said to the parent, which gives the page up
        return {"error": f"{type(exc).__name__}: {exc}"}
    if page is None:
        return {"page": None}
    return {"page": {"title": page.extracted.title, "text": page.extracted.text,
                     "method": page.extracted.method, "notes": page.notes,
                     "passages": [(p.seq, p.start, p.end, p.page, marks_json(p.marks)) for p in page.passages]}}


def peak_rss_mb() -> float:
    """This process's peak resident memory since it began running its program, in MB. Not ru_maxrss
    alone: Linux carries that across fork and exec, so a reader child started by a large parent (a
    test run of 600 MB) reported the parent's peak as its own. VmHWM is the high-water mark of this
    program's own memory map, which exec replaces; ru_maxrss where /proc is not there."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def limit_memory(limit_bytes: int = CHILD_MEMORY_BYTES) -> None:
    """Cap this process's address space (RLIMIT_AS, `CHILD_MEMORY_BYTES` unless told less), where the
    platform allows it: past it an allocation fails here (MemoryError, std::bad_alloc in C++), not in
    the daemon, and the kernel's OOM killer never has to choose. Every reading child calls it first:
    the page readers and the archive reader (daemon.sources.archives, whose tests pass a smaller limit)."""
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):  # pragma: no cover - a platform without RLIMIT_AS: unbounded, as before
        pass


def _memory_trimmer() -> Callable[[], object]:
    """glibc's malloc_trim, or a no-op where there is none.

    glibc keeps what a big page freed: a child's RSS stayed at 215 MB after a 4 MB page
    of links (75 MB before); trimming after each page brings it back.
    """
    try:
        trim: Callable[[int], object] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


def serve_child() -> None:
    """The child's loop: read pages from stdin until it closes, answer on the real stdout.

    Anything a library prints goes to stderr: fd 1 is pointed there, and the frames go
    to a private copy of the original stdout.
    """
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    source = sys.stdin.buffer
    trim = _memory_trimmer()
    limit_memory()
    load_readers()  # the document libraries, imported here rather than at a first document
    read_page(_WARM_UP, "http://warm-up.invalid/", "text/html")  # trafilatura's import and first call: not a page's
    _write_child_frame(out, _READY)
    while True:
        header = _read_child_frame(source)
        body = _read_child_frame(source) if header is not None else None
        if header is None or body is None:
            return
        result = _answer(header, body)
        result["peak_rss_mb"] = peak_rss_mb()
        answer = json.dumps(result).encode()
        del body
        trim()
        _write_child_frame(out, answer)


if __name__ == "__main__":
    try:
        serve_child()
    except BrokenPipeError:  # the daemon went (SIGKILL while this child started): no one to answer, nothing to say
        os._exit(0)  # not sys.exit: flushing the answer pipe at exit would raise again
