"""The local library as a user meets it: real folders and files, a real store, a real watch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from briefd.daemon.sources.extract import PageText
from briefd.daemon.sources.folderwatch import FolderWatch
from briefd.daemon.sources.library import (
    CHANGED_WHILE_READ, MAX_FILE_BYTES, MAX_FOLDER_DEPTH, UNREADABLE, Library, find, health, search, status,
)
from briefd.daemon.sources.documents import DocumentRefused, read_document
from briefd.daemon.sources.pagework import PageRefused, PageUnreadable
from briefd.store import Store
from briefd.store.library import DUPLICATE, INDEXED, PENDING, REFUSED, LibraryFiles, path_text, shown_path, text_path
from tests.conftest import BRIEFD
from lab.library_bench import kernel_read_bytes

BRIDGE = ("The Tacoma Narrows bridge failed in 1940 under aeroelastic flutter. "
          "Engineers studied the anchorage and the cable corrosion for years afterwards.\n\n")
OTHER = "Sourdough bread needs a starter, flour, water and salt, and a long slow rise.\n\n"


async def read_text_in_thread(path: Path, name: str) -> PageText | None:
    """The daemon's document reader (daemon.documents) in a thread, refusals as the page
    workers raise them: the real reading, without a child process per test."""
    try:
        return await asyncio.to_thread(read_document, None, path, name)
    except DocumentRefused as exc:
        raise PageRefused(str(exc)) from None


class CountingReader:
    """Today's text reader, counting its calls (what "not read again" means)."""

    def __init__(self) -> None:
        self.calls: list[Path] = []  # by file name: the path read is the indexer's pinned descriptor

    async def __call__(self, path: Path, name: str) -> PageText | None:
        self.calls.append(Path(name))
        return await read_text_in_thread(path, name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "briefd.db")
    yield s
    s.close()


def make_library(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    (lib / "reports").mkdir(parents=True)
    (lib / "reports" / "bridge.md").write_text("# Bridge report\n\n" + BRIDGE * 3)
    (lib / "bread.txt").write_text(OTHER * 2)
    (lib / "photo.jpg").write_bytes(b"\xff\xd8\xff" + b"\0" * 100)
    (lib / ".hidden.md").write_text(BRIDGE)
    (lib / ".git").mkdir()
    (lib / ".git" / "notes.md").write_text(BRIDGE)
    return lib


def rows(store: Store) -> dict[str, tuple[str, str | None]]:
    return {Path(r.path).name: (r.state, r.reason) for r in LibraryFiles(store).known().values()}


def scan(library: Library) -> dict[str, int]:
    return asyncio.run(library.scan()).as_dict()


def test_a_rescan_of_an_unchanged_library_reads_nothing(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    for i in range(20):  # a few MB, so that reading them again would show in /proc/self/io
        (lib / f"filler{i}.txt").write_text(f"Filler document {i}. " * 20_000)
    reader = CountingReader()
    library = Library((lib,), store, reader)
    first = scan(library)
    assert first["indexed"] == 22 and first["skipped"] == 1 and first["bytes_read"] > 4_000_000
    assert rows(store)["bridge.md"] == (INDEXED, None)
    assert ".hidden.md" not in rows(store) and "notes.md" not in rows(store), "hidden files are not looked at"
    before = kernel_read_bytes()
    again = scan(library)
    after = kernel_read_bytes()
    assert again["bytes_read"] == 0 and again["reader_calls"] == 0
    assert again["unchanged"] == 22 and again["indexed"] == 0
    assert len(reader.calls) == 22
    if before is not None and after is not None:  # the kernel's count: the store's own reads only
        assert after - before < first["bytes_read"] // 20


def test_touched_renamed_and_copied_files_are_not_read_again(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    reader = CountingReader()
    library = Library((lib,), store, reader)
    scan(library)
    calls = len(reader.calls)
    os.utime(lib / "bread.txt", ns=(1, 1))
    touched = scan(library)
    assert touched["unchanged"] == 2 and touched["bytes_read"] > 0 and len(reader.calls) == calls
    (lib / "reports" / "bridge.md").rename(lib / "tacoma.md")
    moved = scan(library)
    assert moved["moved"] == 1 and len(reader.calls) == calls, "a renamed file is not re-extracted"
    [hit] = find(store, "anchorage corrosion", 5)
    assert hit.url == (lib / "tacoma.md").as_uri(), "the citation names where the file is now"
    assert store.passage_ids((lib / "reports" / "bridge.md").as_uri(), "page") == []
    (lib / "copy.md").write_bytes((lib / "tacoma.md").read_bytes())
    copied = scan(library)
    assert copied["duplicates"] == 1 and len(reader.calls) == calls
    assert rows(store)["copy.md"][0] == DUPLICATE
    assert len(find(store, "anchorage corrosion", 5)) == 1, "a copy is found once"
    (lib / "tacoma.md").unlink()
    scan(library)
    [hit] = find(store, "anchorage corrosion", 5)
    assert hit.url == (lib / "copy.md").as_uri(), "the copy inherits the document when the first goes"
    assert rows(store)["copy.md"][0] == INDEXED and len(reader.calls) == calls


def test_deleted_and_changed_files(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    library = Library((lib,), store, CountingReader())
    scan(library)
    (lib / "bread.txt").unlink()
    gone = scan(library)
    assert gone["dropped"] == 1 and "bread.txt" not in rows(store)
    assert find(store, "sourdough starter", 5) == []
    assert store.passage_ids((lib / "bread.txt").as_uri(), "page") == []
    (lib / "reports" / "bridge.md").write_text("# Bridge report\n\nNow it is about suspension cables only.\n")
    changed = scan(library)
    assert changed["indexed"] == 1
    assert find(store, "aeroelastic flutter", 5) == [], "the old text is gone with the old version"
    assert find(store, "suspension cables", 5)[0].url == (lib / "reports" / "bridge.md").as_uri()


def test_a_file_changing_while_read_is_retried(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    target = lib / "bread.txt"

    async def writer_meanwhile(path: Path, name: str) -> PageText | None:
        page = await read_text_in_thread(path, name)
        if name == "bread.txt" and not getattr(writer_meanwhile, "done", False):
            with open(target, "a") as handle:  # the user saves again while briefd reads
                handle.write("More about rye flour.\n")
            setattr(writer_meanwhile, "done", True)
        return page

    library = Library((lib,), store, writer_meanwhile)
    first = scan(library)
    assert first["pending"] == 1 and rows(store)["bread.txt"] == (PENDING, CHANGED_WHILE_READ)
    assert find(store, "sourdough", 5) == []
    second = scan(library)
    assert second["indexed"] == 1 and rows(store)["bread.txt"] == (INDEXED, None)
    assert "rye" in find(store, "rye flour", 5)[0].text
    assert target.exists()


def test_hostile_entries_are_refused_with_reasons(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    secret = tmp_path / "secret.md"
    secret.write_text("The root password is hunter2.\n")
    (lib / "leak.md").symlink_to(secret)
    (lib / "loop.md").symlink_to(lib / "loop.md")
    (lib / "a.md").symlink_to(lib / "b.md")
    (lib / "b.md").symlink_to(lib / "a.md")
    (lib / "up").symlink_to(lib)  # a link to a folder inside: not walked again (it would never end)
    (lib / "inside.md").symlink_to(lib / "reports" / "bridge.md")
    with open(lib / "huge.pdf", "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: refused from its size, never read
    (lib / "locked.md").write_text(BRIDGE)
    os.chmod(lib / "locked.md", 0)
    (lib / "refused.html").write_text("<html><body><p>x</p></body></html>")

    async def reader(path: Path, name: str) -> PageText | None:
        if name == "locked.md" and os.geteuid() == 0:  # root reads through chmod 000
            raise PermissionError(13, "Permission denied")
        if name == "refused.html":
            raise PageUnreadable("reading the page took over 15 s (a page this costly is not read)")
        return await read_text_in_thread(path, name)

    library = Library((lib,), store, reader)
    counts = scan(library)
    got = rows(store)
    assert got["leak.md"][0] == REFUSED and "outside the library" in (got["leak.md"][1] or "")
    assert got["loop.md"][0] == REFUSED and "loop" in (got["loop.md"][1] or "")
    assert got["a.md"][0] == got["b.md"][0] == REFUSED
    assert got["huge.pdf"][0] == REFUSED and "limit" in (got["huge.pdf"][1] or "")
    assert got["locked.md"][0] == REFUSED and (got["locked.md"][1] or "").startswith(UNREADABLE)
    assert got["refused.html"] == (REFUSED, "reading the page took over 15 s (a page this costly is not read)")
    assert got["inside.md"][0] == DUPLICATE, "a link inside the library is its target's document"
    assert "up" not in got
    assert counts["bytes_read"] < 1_000_000, "the sparse file was not read"
    assert find(store, "hunter2 password", 5) == []
    status = LibraryFiles(store).status()
    assert {Path(r["path"]).name for r in status["refused"]} >= {"leak.md", "loop.md", "huge.pdf", "locked.md"}
    again = scan(library)
    assert again["reader_calls"] == (1 if os.geteuid() == 0 else 0), "only the unreadable file is tried again"
    os.chmod(lib / "locked.md", 0o644)


def test_search_ranks_groups_and_survives_hostile_text(tmp_path: Path, store: Store) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "flutter.md").write_text("# Flutter\n\n" + ("Aeroelastic flutter destroyed the bridge deck. " * 3 + "\n\n") * 8)
    (lib / "mention.md").write_text("# Mention\n\nA bridge is mentioned once here.\n\n" + OTHER * 5)
    scan(Library((lib,), store, CountingReader()))
    url = "https://example.org/page"  # a web page with the same words is not a library hit
    store.save_page(url=url, final_url=url, status=200, content_type="text/html", title="web", text="bridge flutter",
                    size=14, extraction="plain", error=None, passages=[(0, 0, 14, "bridge flutter", None)])
    hits = search(store, "bridge flutter", 10)
    assert [h.url.rsplit("/", 1)[1] for h in hits] == ["flutter.md", "mention.md"], \
        "one hit per document, the better first"
    assert all(h.source == h.engine == "library" and h.url.startswith("file://") for h in hits)
    assert "flutter" in hits[0].content.lower()
    for hostile in ['"', "bridge AND (", "NEAR(flutter", "*", "-bridge", "flutter:*", "\x00\x1b[31m", "", "' OR 1=1 --"]:
        search(store, hostile, 5)  # never an FTS syntax error
    assert search(store, 'bridge" OR "x', 5)


def test_the_watch_picks_up_new_renamed_and_deleted_files(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    reader = CountingReader()
    library = Library((lib,), store, reader)
    new, renamed = lib / "reports" / "new.md", lib / "renamed.md"

    async def until(query: str, urls: list[str]) -> list[str]:
        found: list[str] = []
        for _ in range(150):  # a bound that only a hang reaches
            await asyncio.sleep(0.1)
            found = [h.url for h in find(store, query, 5)]
            if found == urls:
                break
        return found

    async def scenario() -> list[list[str]]:
        stopping = asyncio.Event()
        task = asyncio.create_task(library.run(stopping, rescan_s=3600))  # no rescan: the watch alone
        seen = [await until("sourdough", [(lib / "bread.txt").as_uri()])]
        new.write_text("# New\n\nA fresh note on gusset plates.\n")
        seen.append(await until("gusset plates", [new.as_uri()]))
        new.rename(renamed)
        seen.append(await until("gusset plates", [renamed.as_uri()]))
        (lib / "bread.txt").unlink()
        seen.append(await until("sourdough", []))
        stopping.set()
        await asyncio.wait_for(task, 10)
        return seen

    assert asyncio.run(scenario()) == [[(lib / "bread.txt").as_uri()], [new.as_uri()], [renamed.as_uri()], []]
    assert [p.name for p in reader.calls].count("new.md") == 1 and "renamed.md" not in [p.name for p in reader.calls]


def briefd(*args: str, cwd: Path, library: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    if library is not None:
        env["BRIEFD_LIBRARY"] = str(library)
    return subprocess.run([BRIEFD, *args, "--db", str(cwd / "briefd.db")], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120)


def test_cli_library_status_search_reindex(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    (lib / "leak.md").symlink_to(tmp_path)
    none = briefd("library", "status", cwd=tmp_path, library=None)
    assert none.returncode == 0 and "no library configured" in none.stdout
    assert briefd("library", "search", "bridge", cwd=tmp_path, library=None).returncode == 2
    first = briefd("library", "reindex", cwd=tmp_path, library=lib)
    assert first.returncode == 0, first.stderr
    assert "2 indexed" in first.stdout
    status = briefd("library", "status", cwd=tmp_path, library=lib)
    assert status.returncode == 0, status.stderr
    assert "indexed: 2" in status.stdout and "skipped: 1" in status.stdout
    assert "leak.md" in status.stdout and "outside the library" in status.stdout
    found = briefd("library", "search", "anchorage corrosion", cwd=tmp_path, library=lib)
    assert found.returncode == 0, found.stderr
    assert "bridge.md" in found.stdout and "anchorage" in found.stdout
    nothing = briefd("library", "search", "zeppelin", cwd=tmp_path, library=lib)
    assert nothing.returncode == 0 and "nothing" in nothing.stdout
    again = briefd("library", "reindex", cwd=tmp_path, library=lib)
    assert again.returncode == 0 and "2 indexed" in again.stdout, "reindex reads every file again"


def test_cli_reindex_beside_a_running_daemon_only_marks_the_files(tmp_path: Path) -> None:
    """A daemon holds the store's lock: reindex tells the store, the daemon's next scan reads."""
    from briefd.daemon.core.files import acquire_store_lock

    lib = make_library(tmp_path)
    assert briefd("library", "reindex", cwd=tmp_path, library=lib).returncode == 0
    lock = acquire_store_lock(tmp_path / "briefd.db")  # as `briefd run` holds it
    try:
        marked = briefd("library", "reindex", cwd=tmp_path, library=lib)
    finally:
        lock.release()
    assert marked.returncode == 0, marked.stderr
    assert "marked to be read again" in marked.stdout and str(os.getpid()) in marked.stdout
    store = Store(tmp_path / "briefd.db")
    try:
        reader = CountingReader()
        counts = scan(Library((lib,), store, reader))
        assert counts["indexed"] == 2 and len(reader.calls) == 2, "the daemon's next scan reads them all"
        assert find(store, "anchorage", 5), "search kept answering meanwhile"
    finally:
        store.close()


def test_reindex_reads_every_file_again_and_leaves_no_orphan_passages(tmp_path: Path, store: Store) -> None:
    lib = make_library(tmp_path)
    reader = CountingReader()
    library = Library((lib,), store, reader)
    scan(library)
    # a copy made later, but walked before the original: a reindex reads it first
    (lib / "a-copy.md").write_bytes((lib / "reports" / "bridge.md").read_bytes())
    scan(library)
    for _ in range(2):
        LibraryFiles(store).mark_stale()
        again = scan(library)
        assert again["indexed"] == 2 and again["duplicates"] + again["moved"] <= 1
        states = sorted(state for state, _ in rows(store).values())
        assert states == [DUPLICATE, INDEXED, INDEXED, "skipped"]
        assert len(find(store, "anchorage corrosion", 5)) == 1
        stored = store.db.execute("SELECT count(DISTINCT url) FROM passages WHERE url LIKE 'file:%'").fetchone()[0]
        assert stored == 2, "each document's passages once, none left under a file that is a duplicate now"


def latin1_share(tmp_path: Path) -> tuple[Path, bytes]:
    """A library folder named in Latin-1 (b"caf\\xe9", as on an old share) holding a document named in
    Latin-1, a sub-folder named in Latin-1 with a UTF-8 named document, and a UTF-8 name that merely
    spells the Latin-1 one's escaped form ("r\\xe9sum\\xe9.md"): the folder as Python names it, and its bytes."""
    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.makedirs(os.path.join(folder, b"ann\xe9e"))
    with open(os.path.join(folder, "r\xe9sum\xe9.md".encode("latin-1")), "w") as handle:
        handle.write("# R\u00e9sum\u00e9\n\n" + BRIDGE * 2)
    with open(os.path.join(folder, b"ann\xe9e", b"bread.txt"), "w") as handle:
        handle.write(OTHER * 2)
    with open(os.path.join(folder, b"r\\xe9sum\\xe9.md"), "w") as handle:
        handle.write("Gusset plates hold the truss members together.\n")
    return Path(os.fsdecode(folder)), folder


def test_a_library_folder_and_file_names_in_another_encoding_are_read_and_shown_escaped(
        tmp_path: Path, store: Store) -> None:
    """Issue 29 #14: a library folder whose own name is not UTF-8 raised at every pass (SQLite keeps text)
    and nothing was indexed, while `briefd check` said ok; a file so named was refused. Both are read now,
    kept and shown with the undecodable bytes escaped, and followed through a rename and a copy."""
    lib, raw = latin1_share(tmp_path)
    reader = CountingReader()
    library = Library((lib,), store, reader)
    first = scan(library)
    assert (first["indexed"], first["refused"], first["pending"]) == (3, 0, 0)
    resume = Path(os.fsdecode(os.path.join(raw, "r\xe9sum\xe9.md".encode("latin-1"))))
    [hit] = find(store, "anchorage corrosion", 5)
    assert hit.url == resume.as_uri() and "/caf%E9/r%E9sum%E9.md" in hit.url, "the file URI of the name's bytes"
    assert hit.path == os.fsencode(resume).decode("latin-1").replace("\xe9", "\\xe9"), "shown escaped"
    assert [h.path.rsplit("/", 2)[-2:] for h in find(store, "sourdough", 5)] == [["ann\\xe9e", "bread.txt"]]
    [spelled] = find(store, "gusset plates", 5)
    assert spelled.url.endswith("/r%5Cxe9sum%5Cxe9.md"), "a UTF-8 name spelling the escape is a file of its own"
    shown = status(store, (lib,))
    assert [f["path"] for f in shown["folders"]] == [os.fsencode(lib).decode("latin-1").replace("\xe9", "\\xe9")]
    assert shown["folders"][0]["scanned_at"] and not shown["refused"]
    assert health(store, (lib,))[0] and "3 indexed" in health(store, (lib,))[1]
    again = scan(library)
    assert (again["unchanged"], again["indexed"], again["reader_calls"]) == (3, 0, 0), "the next look is calm"

    renamed = Path(os.fsdecode(os.path.join(raw, b"r\xe9sum\xe9-1940.md")))
    resume.rename(renamed)
    moved = scan(library)
    assert (moved["moved"], moved["reader_calls"]) == (1, 0), "a renamed file is followed, not read again"
    assert [h.url for h in find(store, "anchorage corrosion", 5)] == [renamed.as_uri()]
    copy = Path(os.fsdecode(os.path.join(raw, b"copie-\xe9.md")))
    copy.write_bytes(renamed.read_bytes())
    assert scan(library)["duplicates"] == 1
    renamed.unlink()
    assert scan(library)["reader_calls"] == 0
    assert [h.url for h in find(store, "anchorage corrosion", 5)] == [copy.as_uri()], "the copy took the document"
    assert len(reader.calls) == 3


def test_a_watch_event_under_a_folder_named_in_another_encoding_is_read(tmp_path: Path, store: Store) -> None:
    """The watch names files under the Latin-1 folder as os.fsdecode does; the cheap look at them reads one."""
    lib, raw = latin1_share(tmp_path)
    library = Library((lib,), store, CountingReader())
    scan(library)
    new = Path(os.fsdecode(os.path.join(raw, b"ann\xe9e", b"note-\xe9.md")))
    new.write_text("# Note\n\nThe cable saddles were replaced in 1950.\n")
    seen: list[Path | None] = []
    arrived = threading.Event()

    def deliver(path: Path | None) -> None:
        seen.append(path)
        arrived.set()

    watch = FolderWatch.start((lib,), deliver, MAX_FOLDER_DEPTH)
    try:
        new.write_text("# Note\n\nThe cable saddles were replaced in 1951.\n")
        assert arrived.wait(10), "the watch heard nothing under the Latin-1 folder"
    finally:
        watch.stop()
    assert new in seen
    counts = asyncio.run(library.check([new]))
    assert counts.indexed == 1 and [h.url for h in find(store, "saddles", 5)] == [new.as_uri()]


@pytest.mark.parametrize("raw", [b"/srv/docs/bridge.md", "/srv/caf\u00e9/\u00fc.md".encode(), b"/srv/caf\xe9/r\xe9sum\xe9.md",
                                 b"/srv/a\\b.md", b"/srv/r\\xe9sum\\xe9.md", b"/srv/a\\\xe9\\x41"])
def test_every_path_has_one_text_in_the_store_and_back(raw: bytes) -> None:
    path = os.fsdecode(raw)
    text = path_text(path)
    text.encode("utf-8")  # what SQLite can keep
    assert text_path(text) == path and os.fsencode(text_path(text)) == raw
    assert (text == path) == (b"\\" not in raw and path == raw.decode("utf-8", "replace"))
    assert shown_path(path) == raw.decode("utf-8", "backslashreplace")


def test_a_row_kept_before_path_text_with_a_backslash_in_its_name_is_not_doubled(tmp_path: Path, store: Store) -> None:
    """Rows written by an earlier briefd kept a UTF-8 name with a backslash as it was; `path_text` now writes
    the backslash as \\x5c. Such a row is taken over, not left beside a second row for the same file."""
    lib = make_library(tmp_path)
    odd = lib / "a\\b.md"
    odd.write_text("Gusset plates hold the truss members together.\n")
    library = Library((lib,), store, CountingReader())
    assert scan(library)["indexed"] == 3
    store.db.execute("UPDATE library_files SET path = ? WHERE path = ?", [str(odd), path_text(str(odd))])
    assert (scan(library)["unchanged"], library.reader_calls) == (3, 3)
    odd.write_text("Gusset plates hold the truss members together, riveted.\n")  # changed: its row is written
    assert scan(library)["indexed"] == 1
    assert LibraryFiles(store).status()["counts"][INDEXED] == 3, "one row for the file, not two"
    assert [h.path for h in find(store, "gusset", 5)] == [str(odd)]


def test_cli_library_status_and_search_show_a_latin1_folder_escaped(tmp_path: Path) -> None:
    lib, _ = latin1_share(tmp_path)
    assert "3 indexed" in briefd("library", "reindex", cwd=tmp_path, library=lib).stdout
    escaped = os.fsencode(lib).decode("latin-1").replace("\xe9", "\\xe9")
    listed = briefd("library", "status", cwd=tmp_path, library=lib)
    assert listed.returncode == 0 and f"folder {escaped}: readable" in listed.stdout, listed.stderr
    found = briefd("library", "search", "anchorage", cwd=tmp_path, library=lib)
    assert found.returncode == 0 and f"{escaped}/r\\xe9sum\\xe9.md" in found.stdout, found.stderr


def test_a_file_swapped_for_a_link_outside_after_it_was_checked_is_not_what_gets_read(tmp_path: Path,
                                                                                       store: Store) -> None:
    """The race a writer of the library can win: a decoy with the secret's size and mtime is checked
    and hashed, then replaced by a link to the secret before the reader opens it. The reader reads
    the descriptor the indexer vetted, so the secret never reaches the index."""
    lib, outside = tmp_path / "lib", tmp_path / "outside"
    lib.mkdir()
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("The payroll password is hunter2.\n")
    decoy = lib / "notes.txt"
    decoy.write_text("x" * secret.stat().st_size)
    os.utime(decoy, ns=(secret.stat().st_atime_ns, secret.stat().st_mtime_ns))

    async def swapping_reader(path: Path, name: str) -> PageText | None:
        decoy.unlink()
        decoy.symlink_to(secret)  # the attacker wins the race, after the check, before the read
        return await read_text_in_thread(path, name)

    scan(Library((lib,), store, swapping_reader))
    assert find(store, "payroll password hunter2", 5) == []
    assert scan(Library((lib,), store, CountingReader()))["refused"] == 1  # seen for what it now is
    assert "outside the library" in (rows(store)["notes.txt"][1] or "")
    assert find(store, "payroll password hunter2", 5) == []
