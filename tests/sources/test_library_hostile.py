"""A hostile library (issue 19 #2, #7, #12): what anyone who can write to the share can put there.

A chain of 1,200 nested folders (before the daemon starts, and moved in while it runs), named
pipes, a unix socket, hard links to a file outside the folders, and documents that take as long
as their deadline to read. Each test builds its own input in a tmp folder; none may stop the
index, block it, leak what lies outside, or keep research waiting for a page-reading child.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from briefd.daemon.sources.folderwatch import FolderWatch
from briefd.daemon.sources.library import DEBOUNCE_S, MAX_FOLDER_DEPTH, WATCH_CHECK_S, Library, find
from briefd.daemon.sources.pagework import PageWorkers
from briefd.store import Store
from briefd.store.library import DUPLICATE, INDEXED, REFUSED, LibraryFiles
from lab.library import folder_chain
from tests.conftest import BRIEFD
from tests.polling import until
from tests.sources.test_library import BRIDGE, CountingReader, briefd, make_library, rows

DEEP = 1_200
"""Levels in the chain: past Python 3.11's recursion limit (1,000), where os.walk raises."""

SECRET = "The payroll password is hunter2, kept outside the library.\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "briefd.db")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def remove_chains(tmp_path: Path) -> Iterator[None]:
    """Remove the chains after each test: shutil.rmtree, which pytest cleans its old folders with,
    recurses as os.walk does and raises RecursionError on them; GNU rm walks without recursing."""
    yield
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmp_path)], check=False, timeout=120)


def deep_chain(top: Path, levels: int = DEEP) -> list[str]:
    """`top`/d/d/.../d, `levels` folders below `top`, with a document at the bottom; returns each
    folder's path, `top` first (`top` one level below the library folder: [MAX_FOLDER_DEPTH] is
    the first one too deep). Built one level at a time through descriptors: os.makedirs
    recurses too, and stops at about the same depth as os.walk."""
    return folder_chain(top, levels, ("buried.md", BRIDGE.encode()))


def refused(store: Store) -> dict[str, str]:
    return {r["path"]: r["reason"] for r in LibraryFiles(store).status()["refused"]}


# --------------------------------------------------------------------------- deep folders (#2)


def test_a_folder_chain_1200_deep_at_start_is_refused_by_name_and_the_rest_indexed_and_watched(
        tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """Before: `the library index could not be kept: maximum recursion depth exceeded; stopping
    (exit 3)` at every start (watchdog's set-up walked the chain with the recursive os.walk)."""
    lib = make_library(tmp_path)
    chain = deep_chain(lib / "trap")
    late = lib / "late.md"
    library = Library((lib,), store, CountingReader())

    async def scenario() -> tuple[bool, bool, int]:
        stopping = asyncio.Event()
        task = asyncio.create_task(library.run(stopping, rescan_s=3600))  # no rescan: the watch alone
        first = await until(lambda: task.done() or ("bread.txt" in rows(store) and refused(store)))
        late.write_text("# Late\n\nA note on gusset plates, written after the start.\n")
        later = await until(lambda: task.done() or find(store, "gusset plates", 5))
        watches = library.watch.watches if library.watch is not None else 0
        stopping.set()
        await asyncio.wait_for(task, 30)  # re-raises what stopped it, if anything did
        return first, later, watches

    with caplog.at_level(logging.WARNING, logger="briefd"):
        first, later, watches = asyncio.run(scenario())
    assert first and later, "the index went on, and the watch heard a file written after the start"
    assert rows(store)["bread.txt"][0] == rows(store)["bridge.md"][0] == INDEXED
    too_deep = refused(store)
    assert list(too_deep) == [chain[MAX_FOLDER_DEPTH]], "the first folder not looked into is named"
    assert f"deeper than {MAX_FOLDER_DEPTH} folders" in too_deep[chain[MAX_FOLDER_DEPTH]]
    assert "buried.md" not in rows(store), "nothing below the bound is read"
    assert 0 < watches <= MAX_FOLDER_DEPTH + 10, f"{watches} inotify watches: the watch is bounded in depth too"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_folder_chain_moved_in_while_running_is_refused_and_the_watch_goes_on(
        tmp_path: Path, store: Store) -> None:
    """Moved in while the daemon ran, the chain killed watchdog's threads (its os.walk of the new
    tree), silently: the index went on only by its rescans, a minute apart."""
    lib = make_library(tmp_path)
    chain = deep_chain(tmp_path / "trap")
    (tmp_path / "trap" / "with-the-trap.md").write_text("# Moved in\n\nA note about rivets and rust.\n")
    library = Library((lib,), store, CountingReader())

    async def scenario() -> tuple[bool, bool, bool, bool]:
        stopping = asyncio.Event()
        task = asyncio.create_task(library.run(stopping, rescan_s=3600))  # no rescan: the watch alone
        watched = await until(lambda: "bread.txt" in rows(store))
        await asyncio.sleep(DEBOUNCE_S)
        os.rename(tmp_path / "trap", lib / "trap")
        seen = await until(lambda: task.done() or (find(store, "rivets rust", 5) and refused(store)))
        (lib / "after.md").write_text("# After\n\nA note about cable saddles.\n")
        after = await until(lambda: task.done() or find(store, "cable saddles", 5))
        watch = getattr(library, "watch", None)
        alive = not task.done() and watch is not None and watch.alive()
        stopping.set()
        await asyncio.wait_for(task, 30)
        return watched, seen, after, alive

    watched, seen, after, alive = asyncio.run(scenario())
    assert watched and seen, "the moved-in tree was seen, down to the bound"
    assert after and alive, "the watch lived on and heard the next file"
    moved = str(lib / "trap") + chain[MAX_FOLDER_DEPTH][len(chain[0]):]
    assert list(refused(store)) == [moved]


def test_a_watch_that_dies_or_cannot_start_leaves_the_library_on_rescans(
        tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch's thread ends (here its inotify descriptor is replaced under it): said once, and
    what it missed is seen by a rescan at once; a watch that cannot start (the inotify watch
    limit) is said once too, and the rescan keeps the library current."""
    lib = make_library(tmp_path)
    library = Library((lib,), store, CountingReader())

    async def dies() -> tuple[bool, bool, bool]:
        stopping = asyncio.Event()
        task = asyncio.create_task(library.run(stopping, rescan_s=3600))
        watched = await until(lambda: library.watch is not None and "bread.txt" in rows(store))
        assert library.watch is not None
        with open(os.devnull, "wb") as sink:  # its inotify descriptor swapped for one it cannot read: the thread ends
            os.dup2(sink.fileno(), library.watch._fd)
        (lib / "missed.md").write_text("# Missed\n\nA note on bearing pads.\n")
        seen = await until(lambda: task.done() or find(store, "bearing pads", 5), timeout=WATCH_CHECK_S + 60)
        alive = not task.done()
        stopping.set()
        await asyncio.wait_for(task, 30)
        return watched, seen, alive

    with caplog.at_level(logging.WARNING, logger="briefd"):
        watched, seen, alive = asyncio.run(dies())
    assert watched and seen and alive
    said = [r.getMessage() for r in caplog.records if "watch on the folders stopped" in r.getMessage()]
    assert len(said) == 1 and "rescan every 3600 s" in said[0], said

    def no_watches(*_args: object) -> FolderWatch:
        raise OSError(errno.ENOSPC, "watching /srv: the inotify watch limit is reached (raise the sysctl "
                                    "fs.inotify.max_user_watches)")

    monkeypatch.setattr(FolderWatch, "start", no_watches)
    (lib / "later.md").write_text("# Later\n\nA note on expansion joints.\n")

    async def never_watched() -> bool:
        stopping = asyncio.Event()
        task = asyncio.create_task(library.run(stopping, rescan_s=0.5))
        found = await until(lambda: task.done() or find(store, "expansion joints", 5))
        (lib / "later2.md").write_text("# Later still\n\nA note on drainage scuppers.\n")
        found = found and await until(lambda: task.done() or find(store, "drainage scuppers", 5))
        stopping.set()
        await asyncio.wait_for(task, 30)
        return found

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="briefd"):
        assert asyncio.run(never_watched()), "indexed by the rescan alone"
    said = [r.getMessage() for r in caplog.records if "cannot be watched" in r.getMessage()]
    assert len(said) == 1 and "max_user_watches" in said[0], said


def test_the_daemon_starts_over_a_folder_chain_1200_deep_and_indexes_the_rest(tmp_path: Path) -> None:
    """The whole daemon, as systemd starts it: before, exit 3 within a second, at every start."""
    lib = make_library(tmp_path)
    chain = deep_chain(lib / "trap")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    env.update(BRIEFD_INBOX=str(tmp_path / "inbox"), BRIEFD_OUTBOX=str(tmp_path / "outbox"),
               BRIEFD_DB=str(tmp_path / "briefd.db"), BRIEFD_LIBRARY=str(lib), BRIEFD_EGRESS="none",
               OLLAMA_HOST="http://127.0.0.1:9")  # no brief is dropped: no server is asked anything
    daemon = subprocess.Popen([BRIEFD, "run"], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wanted = {str(lib / "bread.txt"): INDEXED, str(lib / "reports" / "bridge.md"): INDEXED,
              chain[MAX_FOLDER_DEPTH]: REFUSED}
    try:
        deadline, states = time.monotonic() + 90, dict[str, str]()
        while time.monotonic() < deadline and daemon.poll() is None and states != states | wanted:
            time.sleep(0.5)
            states = library_states(tmp_path / "briefd.db")
        alive = daemon.poll() is None
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)
    assert alive, f"the daemon stopped (exit {daemon.returncode}): {stderr[-2000:]}"
    assert daemon.returncode == 0 and "CRITICAL" not in stderr, stderr[-2000:]
    assert {p: states.get(p) for p in wanted} == wanted, "the rest indexed, the first folder too deep refused"


def library_states(db: Path) -> dict[str, str]:
    """The daemon's library rows, read as `briefd library status` reads them (another process)."""
    if not db.exists():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            return dict(conn.execute("SELECT path, state FROM library_files WHERE state != 'folder'").fetchall())
    except sqlite3.OperationalError:  # not created yet
        return {}


def test_library_status_names_the_folder_too_deep(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    chain = deep_chain(lib / "trap")
    reindexed = briefd("library", "reindex", cwd=tmp_path, library=lib)
    assert reindexed.returncode == 0, reindexed.stderr
    assert "2 indexed" in reindexed.stdout
    status = briefd("library", "status", cwd=tmp_path, library=lib)
    assert status.returncode == 0, status.stderr
    assert chain[MAX_FOLDER_DEPTH] in status.stdout and f"deeper than {MAX_FOLDER_DEPTH}" in status.stdout


def test_an_event_from_below_the_bound_reads_nothing(tmp_path: Path, store: Store) -> None:
    """The watch may still hear a chain it could walk (900 levels): its events below the bound
    are not looked at, so what the walk refuses the watch cannot index."""
    lib = make_library(tmp_path)
    chain = deep_chain(lib / "trap", levels=MAX_FOLDER_DEPTH + 3)
    library = Library((lib,), store, CountingReader())
    asyncio.run(library.scan())
    counts = asyncio.run(library.check([Path(chain[-1]) / "buried.md", lib / "bread.txt"]))
    assert counts.documents == 1 and "buried.md" not in rows(store)


# --------------------------------------------------------------------------- special files (#12)


def test_pipes_sockets_and_hard_links_out_of_the_library_are_refused_with_their_own_reasons(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = make_library(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "payroll.md").write_text(SECRET)
    os.mkfifo(lib / "notes.txt")  # a .txt the reader would open, and wait on forever
    os.mkfifo(lib / "pipe")
    monkeypatch.chdir(lib)  # a unix socket's path is limited to 108 bytes: bound by a short relative name
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("chat.md")
    os.link(outside / "payroll.md", lib / "payroll.md")
    os.link(lib / "reports" / "bridge.md", lib / "bridge-again.md")  # both names inside: a copy
    reader = CountingReader()
    library = Library((lib,), store, reader)
    try:
        counts = asyncio.run(asyncio.wait_for(library.scan(), 60))
    finally:
        server.close()
    got = rows(store)
    assert got["notes.txt"][0] == REFUSED and "named pipe (FIFO), not a regular file" in (got["notes.txt"][1] or "")
    assert got["pipe"][0] == REFUSED and "named pipe" in (got["pipe"][1] or "")
    assert got["chat.md"][0] == REFUSED and "a socket, not a regular file" in (got["chat.md"][1] or "")
    assert got["payroll.md"][0] == REFUSED and "hard link" in (got["payroll.md"][1] or "")
    assert "names outside the library folders (1 of the file's 2" in (got["payroll.md"][1] or "")
    assert find(store, "payroll password hunter2", 5) == [], "what lies outside is never indexed"
    assert {got["bridge.md"][0], got["bridge-again.md"][0]} == {INDEXED, DUPLICATE}
    read = [p.name for p in reader.calls]
    assert len(read) == 2 and set(read) <= {"bridge.md", "bridge-again.md", "bread.txt"}, \
        f"no special file reached the reader, and the two names of one file were read once: {read}"
    assert counts.indexed == 2
    status = {Path(r["path"]).name for r in LibraryFiles(store).status()["refused"]}
    assert status >= {"notes.txt", "pipe", "chat.md", "payroll.md"}


def test_a_hard_link_named_by_a_watch_event_waits_for_the_full_walk(tmp_path: Path, store: Store) -> None:
    """An event names one path; where the file's other names lie only a walk of every folder can
    tell, so the event reads nothing and asks for a rescan, which refuses it."""
    lib = make_library(tmp_path)
    (tmp_path / "payroll.md").write_text(SECRET)
    library = Library((lib,), store, CountingReader())
    asyncio.run(library.scan())
    os.link(tmp_path / "payroll.md", lib / "linked-later.md")
    counts = asyncio.run(library.check([lib / "linked-later.md"]))
    assert counts.indexed == 0 and library._rescan, "a rescan is asked for, nothing read"
    asyncio.run(library.scan())
    assert rows(store)["linked-later.md"][0] == REFUSED
    assert find(store, "payroll password hunter2", 5) == []


# --------------------------------------------------------------------------- research's child (#7)

ARTICLE = ("<html><head><title>Gusset plates</title></head><body><article>"
           + "<p>Gusset plates join the members of a truss bridge; their thickness was the flaw.</p>" * 8
           + "</article></body></html>").encode()


def test_research_reads_a_page_promptly_while_slow_library_documents_hold_their_share(tmp_path: Path) -> None:
    """Four library documents that each run to the document deadline took both page-reading
    children, and a web brief's page waited up to 118 s for one. A FIFO named like a document is a
    real file that takes its whole deadline: the child's open waits for a writer that never comes."""
    slow = []
    for i in range(4):
        os.mkfifo(tmp_path / f"slow{i}.epub")
        slow.append(tmp_path / f"slow{i}.epub")
    deadline = 60.0

    async def scenario() -> tuple[float, bool, int]:
        pool = PageWorkers(document_deadline_s=deadline)
        await pool.warm()
        library = [asyncio.create_task(pool.read_file(path, path.name)) for path in slow]
        try:
            await asyncio.sleep(1.0)  # the library's reads take what they may
            started = time.monotonic()
            page = await asyncio.wait_for(pool.read(ARTICLE, "https://example.org/gusset", "text/html"), deadline)
            took = time.monotonic() - started
            still = sum(not task.done() for task in library)
            return took, page is not None, still
        finally:
            for task in library:
                task.cancel()
            await asyncio.gather(*library, return_exceptions=True)
            await pool.close()

    took, read, still = asyncio.run(scenario())
    assert read and still == 4, "the page was read while every slow document was still being read"
    assert took < deadline / 4, f"research waited {took:.1f} s for a child (the documents' deadline is {deadline:g} s)"


def test_a_reading_child_whose_daemon_is_gone_exits_quietly() -> None:
    """A daemon killed while its page-reading children start: each child's ready frame met a closed
    pipe and printed a BrokenPipeError traceback into the journal (make soak --hostile-library)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-m", "briefd.daemon.sources.pagework"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert child.stdout is not None and child.stdin is not None
    child.stdout.close()  # the daemon's end of the answers, gone before the child is ready
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 0 and b"Traceback" not in stderr, stderr.decode(errors="replace")[-2000:]
