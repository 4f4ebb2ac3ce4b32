"""The library's rows: one per file found under a library folder, and the documents they point at.

A library document is stored like a web page (`Store.save_page`, origin "page"), under its
file URI, so the loop reads, ranks and cites it the way it does a page. This module keeps
`library_files` (what was found, read, refused, and why) in step with those rows:
- a renamed file keeps its passages: `move` rewrites the url of its page and passages in
  place (one transaction), so nothing is read again and a citation names where the file
  is now (the old file:// URL would name nothing);
- a copy is a `duplicate` row pointing at the first copy's url (its passages are not
  stored twice, so a search finds the document once); when the first copy goes or
  changes, `release` hands the document to a duplicate instead of dropping it;
- a folder gets a row of its own (state `folder`): when it was last scanned and whether it
  could be listed, for `briefd library status` in another process than the daemon's;
- a path is text here, and a file name need not be (issue 29 #14): on a Latin-1 share a
  folder named b"caf\\xe9" reaches Python as "caf\\udce9" (os.fsdecode), which SQLite cannot
  keep, and every scan of it raised. The methods take and give file-system paths as Python
  has them; `path_text` and `text_path` turn one into the text a row keeps and back, and
  `shown_path` is how a path is shown (`briefd library status`, `search`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .briefs import Store
from .db import fts_or_query, utc_now

INDEXED, DUPLICATE, REFUSED, PENDING, SKIPPED, FOLDER = (
    "indexed", "duplicate", "refused", "pending", "skipped", "folder",
)
FILE_STATES = (INDEXED, DUPLICATE, PENDING, REFUSED, SKIPPED)

LIBRARY_SEARCH_LIMIT = 10
"""Passages `briefd library search` shows when not told (`--limit N`)."""

PASSAGES_PER_DOCUMENT = 3
"""Passages of one document `briefd library search` shows: the best of a manual is often its index or
contents page (a function's name beside a page number); the pages that explain it come next."""


_ESCAPED_BYTE = re.compile(r"\\x([0-9a-fA-F]{2})")


def shown_path(path: str) -> str:
    """A path as a person reads it: bytes that are not UTF-8 written as \\xNN (b"caf\\xe9" → "caf\\xe9"),
    the rest as it is; always text a terminal, a log and SQLite take."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def path_text(path: str) -> str:
    """The text a row keeps for a file-system path: the path itself when it is UTF-8 without a backslash (every
    path on a UTF-8 system but a few); otherwise its bytes with each one that is not UTF-8, and each
    backslash, written \\xNN. So every row's text has one path (`text_path` gives it back): a name
    that merely spells "\\xe9" in UTF-8 keeps a row of its own."""
    if "\\" not in path:
        try:
            path.encode("utf-8")
            return path
        except UnicodeEncodeError:  # os.fsdecode's lone surrogates: bytes that are not UTF-8
            pass
    return "\\x5c".join(shown_path(os.fsdecode(part)) for part in os.fsencode(path).split(b"\\"))


def text_path(text: str) -> str:
    """The file-system path `path_text` wrote (a text with no backslash is the path itself)."""
    if "\\" not in text:
        return text
    raw = bytearray()
    last = 0
    for found in _ESCAPED_BYTE.finditer(text):
        raw += text[last:found.start()].encode("utf-8")
        raw.append(int(found.group(1), 16))
        last = found.end()
    raw += text[last:].encode("utf-8")
    return os.fsdecode(bytes(raw))


@dataclass(frozen=True)
class FileRow:
    """A `library_files` row as the indexer compares it with what is on disk (`path`, `folder`: file-system
    paths, as os.fsdecode gives them)."""

    path: str
    folder: str
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    state: str
    reason: str | None
    url: str | None


@dataclass(frozen=True)
class PassageHit:
    """A library document's passage found for a query (lower `rank` is better: bm25)."""

    url: str
    title: str
    path: str
    page: int | None
    text: str
    rank: float


def _row(r: dict[str, Any]) -> FileRow:
    return FileRow(path=text_path(r["path"]), folder=text_path(r["folder"]), size=r["size"], mtime_ns=r["mtime_ns"],
                   sha256=r["sha256"], state=r["state"], reason=r["reason"], url=r["url"])


@dataclass
class LibraryFiles:
    """SQL for the library, over one Store (the same thread-bound connection)."""

    store: Store

    def known(self) -> dict[str, FileRow]:
        """Every file row (folder rows aside), by path: what a scan compares the disk with."""
        rows: dict[str, FileRow] = {}
        for r in list(self.store.db.query("SELECT * FROM library_files WHERE state != ?", [FOLDER])):
            row = _row(r)
            if (r["path"], r["folder"]) != (path_text(row.path), path_text(row.folder)):
                self._rekey(r["path"], row)
            rows[row.path] = row
        return rows

    def _rekey(self, text: str, row: FileRow) -> None:
        """A row kept before `path_text` (a backslash in a UTF-8 name as it was) under its text now, so that
        the next `record` of its file updates it rather than adding a second row for the same file."""
        now = path_text(row.path)
        if self.store.db.execute("SELECT 1 FROM library_files WHERE path = ?", [now]).fetchone():
            self.store.db.execute("DELETE FROM library_files WHERE path = ?", [text])
        else:
            self.store.db.execute("UPDATE library_files SET path = ?, folder = ? WHERE path = ?",
                                  [now, path_text(row.folder), text])

    def get(self, path: str) -> FileRow | None:
        rows = list(self.store.db.query("SELECT * FROM library_files WHERE path = ?", [path_text(path)]))
        return _row(rows[0]) if rows else None

    def holder_of(self, sha256: str, other_than: str) -> FileRow | None:
        """The indexed file with this content, under another path (the oldest such row)."""
        rows = list(self.store.db.query(
            "SELECT * FROM library_files WHERE sha256 = ? AND state = ? AND path != ? ORDER BY rowid LIMIT 1",
            [sha256, INDEXED, path_text(other_than)]))
        return _row(rows[0]) if rows else None

    def record(self, *, path: str, folder: str, size: int | None, mtime_ns: int | None, sha256: str | None,
               state: str, reason: str | None = None, url: str | None = None, title: str | None = None,
               pages: int | None = None, chars: int | None = None, indexed: bool = False) -> None:
        """Upsert one file's row; `indexed` stamps indexed_at (the document was just read)."""
        now = utc_now()
        row: dict[str, Any] = {"path": path_text(path), "folder": path_text(folder), "size": size, "mtime_ns": mtime_ns,
                               "sha256": sha256, "state": state, "reason": reason, "url": url,
                               "checked_at": now}
        if state != INDEXED or indexed:
            row.update(title=title, pages=pages, chars=chars, indexed_at=now if indexed else None)
        self.store.db.table("library_files").upsert(row, pk="path")

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new size/mtime (touched, or rewritten identically): nothing else changes."""
        self.store.db.execute("UPDATE library_files SET size = ?, mtime_ns = ?, checked_at = ? WHERE path = ?",
                              [size, mtime_ns, utc_now(), path_text(path)])

    def move(self, old: FileRow, path: str, folder: str, url: str, size: int, mtime_ns: int) -> None:
        """A renamed file: its document (page row, passages, duplicates) follows it to `url`."""
        db = self.store.db
        path, folder, old_path = path_text(path), path_text(folder), path_text(old.path)
        with self.store.immediate():
            _forget(db, url)
            if path != old_path:  # a stale row of a file that was at the new path before
                db.execute("DELETE FROM library_files WHERE path = ?", [path])
            if old.url is not None and old.url != url:
                db.execute("UPDATE pages SET url = ?, final_url = ? WHERE url = ?", [url, url, old.url])
                db.execute("UPDATE passages SET url = ? WHERE url = ? AND origin = 'page'", [url, old.url])
                db.execute("UPDATE library_files SET url = ? WHERE url = ? AND state = ?", [url, old.url, DUPLICATE])
            db.execute("UPDATE library_files SET path = ?, folder = ?, size = ?, mtime_ns = ?, url = ?, "
                       "checked_at = ? WHERE path = ?", [path, folder, size, mtime_ns, url, utc_now(), old_path])

    def release(self, row: FileRow) -> None:
        """`row`'s file is gone or no longer holds its document: hand the document to a duplicate
        of it (renamed to the duplicate's path), or drop its page and passages. The row stays."""
        if row.state != INDEXED or row.url is None:
            return
        here = path_text(row.path)
        heirs = list(self.store.db.query(
            "SELECT * FROM library_files WHERE url = ? AND state = ? AND path != ? ORDER BY rowid LIMIT 1",
            [row.url, DUPLICATE, here]))
        if heirs:
            heir = _row(heirs[0])
            new_url = Path(heir.path).as_uri()  # a file URI of the path's bytes: b"caf\xe9" is caf%E9
            db = self.store.db
            with self.store.immediate():
                _forget(db, new_url)
                db.execute("UPDATE pages SET url = ?, final_url = ? WHERE url = ?", [new_url, new_url, row.url])
                db.execute("UPDATE passages SET url = ? WHERE url = ? AND origin = 'page'", [new_url, row.url])
                db.execute("UPDATE library_files SET url = ? WHERE url = ? AND state = ?",
                           [new_url, row.url, DUPLICATE])
                db.execute("UPDATE library_files SET state = ?, reason = NULL, title = "
                           "(SELECT title FROM library_files WHERE path = ?), pages = "
                           "(SELECT pages FROM library_files WHERE path = ?), chars = "
                           "(SELECT chars FROM library_files WHERE path = ?) WHERE path = ?",
                           [INDEXED, here, here, here, heirs[0]["path"]])
                db.execute("UPDATE library_files SET url = NULL WHERE path = ?", [here])
            return
        with self.store.immediate():
            _forget(self.store.db, row.url)
            self.store.db.execute("UPDATE library_files SET url = NULL WHERE path = ?", [here])

    def drop(self, rows: Iterable[FileRow]) -> int:
        """Files that are gone: their documents released (to a duplicate, or dropped), rows deleted."""
        n = 0
        for row in rows:
            self.release(row)
            self.store.db.execute("DELETE FROM library_files WHERE path = ?", [path_text(row.path)])
            n += 1
        return n

    def mark_stale(self) -> int:
        """`briefd library reindex`: forget every file's size, mtime and hash, so the next scan
        hashes and reads each file again (a known hash would otherwise spare the read). States,
        urls and passages stay, so search keeps answering while the library is read again."""
        return self.store.db.execute(
            "UPDATE library_files SET size = NULL, mtime_ns = NULL, sha256 = NULL WHERE state != ?",
            [FOLDER]).rowcount

    def record_folder(self, folder: str, problem: str | None) -> None:
        """A scan of `folder` finished (problem None) or could not list it (the reason)."""
        self.store.db.table("library_files").upsert(
            {"path": path_text(folder), "folder": path_text(folder), "state": FOLDER, "reason": problem,
             "checked_at": utc_now()}, pk="path")

    def forget_folders(self, keep: Iterable[str]) -> None:
        """Folder rows of folders no longer configured."""
        kept = [path_text(folder) for folder in keep]
        marks = ",".join("?" for _ in kept) or "''"
        self.store.db.execute(f"DELETE FROM library_files WHERE state = ? AND path NOT IN ({marks})",
                              [FOLDER, *kept])

    # ---- what a user asks ---------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Counts by state, the refused and pending files with reasons, the folders' last scans (paths
        as `shown_path` shows them)."""
        db = self.store.db
        counts = {state: 0 for state in FILE_STATES}
        counts.update({r[0]: r[1] for r in db.execute(
            "SELECT state, count(*) FROM library_files WHERE state != ? GROUP BY state", [FOLDER]).fetchall()})
        listed = [{"path": _shown_text(r["path"]), "state": r["state"], "reason": r["reason"]} for r in db.query(
            "SELECT path, state, reason FROM library_files WHERE state IN (?, ?) ORDER BY path", [REFUSED, PENDING])]
        folders = [{"path": _shown_text(r["path"]), "problem": r["reason"], "scanned_at": r["checked_at"]}
                   for r in db.query("SELECT * FROM library_files WHERE state = ? ORDER BY path", [FOLDER])]
        passages = db.execute(
            "SELECT count(*) FROM passages WHERE origin = 'page' AND url IN "
            "(SELECT url FROM library_files WHERE state = ?)", [INDEXED]).fetchone()[0]
        return {"counts": counts, "passages": passages, "refused": [x for x in listed if x["state"] == REFUSED],
                "pending": [x for x in listed if x["state"] == PENDING], "folders": folders}

    def search(self, text: str, limit: int, per_document: int = 1) -> list[PassageHit]:
        """The best passages of library documents for free text, best first (bm25), at most `per_document`
        of each document and `limit` in all.

        One a document is what a brief's search takes (a hit names a document, which is then read whole);
        more is what a person looking for a passage wants (`briefd library search`): a manual's index page
        matches a function's name best, and the pages that explain it come after it.

        FTS5 finds the passages (its `rank` column is bm25), the IN keeps those of indexed library files
        (one small list, built once per query). One a document: GROUP BY with min() keeps each document's
        best (SQLite takes the other columns of an aggregate query with a lone min() from the row holding
        the min). More: row_number() over each document's passages, best first, which costs about a third
        more (31 ms against 24 at the median over 100,000 passages here), so a brief's search keeps the
        first. (bm25() itself may not sit in an aggregate; a join on library_files.url, which has no index,
        was 40x slower.)
        """
        query = fts_or_query(text)
        if not query or limit <= 0 or per_document <= 0:
            return []
        matching = ("SELECT p.id AS id, p.url AS url, p.page AS page, p.text AS text, passages_fts.rank AS r "
                    "FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid "
                    "WHERE passages_fts MATCH ? AND p.origin = 'page' "
                    "AND p.url IN (SELECT url FROM library_files WHERE state = ?)")
        if per_document == 1:
            rows = self.store.db.execute(
                f"SELECT url, page, text, min(r) AS best FROM ({matching}) GROUP BY url ORDER BY best LIMIT ?",
                [query, INDEXED, limit]).fetchall()
        else:
            rows = self.store.db.execute(
                f"SELECT url, page, text, r FROM (SELECT url, page, text, r, row_number() OVER "
                f"(PARTITION BY url ORDER BY r, id) AS n FROM ({matching})) WHERE n <= ? ORDER BY r, url, n LIMIT ?",
                [query, INDEXED, per_document, limit]).fetchall()
        if not rows:
            return []
        urls = list(dict.fromkeys(r[0] for r in rows))
        marks = ",".join("?" for _ in urls)
        named = {u: (t, p) for u, t, p in self.store.db.execute(
            f"SELECT url, title, path FROM library_files WHERE state = ? AND url IN ({marks})",
            [INDEXED, *urls]).fetchall()}
        return [PassageHit(url=u, title=named.get(u, ("", ""))[0] or "", path=_shown_text(named.get(u, ("", u))[1]),
                           page=pg, text=x, rank=r) for u, pg, x, r in rows]


def _shown_text(text: str) -> str:
    """A row's path text (`path_text`) as a person reads it (`shown_path`)."""
    return shown_path(text_path(text))


def _forget(db: Any, url: str) -> None:
    """A document's page row and passages (a web page is never stored under a file:// URL)."""
    db.execute("DELETE FROM passages WHERE url = ? AND origin = 'page'", [url])
    db.execute("DELETE FROM pages WHERE url = ?", [url])
