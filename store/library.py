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
  could be listed, for `briefd library status` in another process than the daemon's.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class FileRow:
    """A `library_files` row as the indexer compares it with what is on disk."""

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
    return FileRow(path=r["path"], folder=r["folder"], size=r["size"], mtime_ns=r["mtime_ns"],
                   sha256=r["sha256"], state=r["state"], reason=r["reason"], url=r["url"])


@dataclass
class LibraryFiles:
    """SQL for the library, over one Store (the same thread-bound connection)."""

    store: Store

    def known(self) -> dict[str, FileRow]:
        """Every file row (folder rows aside), by path: what a scan compares the disk with."""
        return {r["path"]: _row(r) for r in self.store.db.query(
            "SELECT * FROM library_files WHERE state != ?", [FOLDER])}

    def get(self, path: str) -> FileRow | None:
        rows = list(self.store.db.query("SELECT * FROM library_files WHERE path = ?", [path]))
        return _row(rows[0]) if rows else None

    def holder_of(self, sha256: str, other_than: str) -> FileRow | None:
        """The indexed file with this content, under another path (the oldest such row)."""
        rows = list(self.store.db.query(
            "SELECT * FROM library_files WHERE sha256 = ? AND state = ? AND path != ? ORDER BY rowid LIMIT 1",
            [sha256, INDEXED, other_than]))
        return _row(rows[0]) if rows else None

    def record(self, *, path: str, folder: str, size: int | None, mtime_ns: int | None, sha256: str | None,
               state: str, reason: str | None = None, url: str | None = None, title: str | None = None,
               pages: int | None = None, chars: int | None = None, indexed: bool = False) -> None:
        """Upsert one file's row; `indexed` stamps indexed_at (the document was just read)."""
        now = utc_now()
        row: dict[str, Any] = {"path": path, "folder": folder, "size": size, "mtime_ns": mtime_ns,
                               "sha256": sha256, "state": state, "reason": reason, "url": url,
                               "checked_at": now}
        if state != INDEXED or indexed:
            row.update(title=title, pages=pages, chars=chars, indexed_at=now if indexed else None)
        self.store.db.table("library_files").upsert(row, pk="path")

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new size/mtime (touched, or rewritten identically): nothing else changes."""
        self.store.db.execute("UPDATE library_files SET size = ?, mtime_ns = ?, checked_at = ? WHERE path = ?",
                              [size, mtime_ns, utc_now(), path])

    def move(self, old: FileRow, path: str, folder: str, url: str, size: int, mtime_ns: int) -> None:
        """A renamed file: its document (page row, passages, duplicates) follows it to `url`."""
        db = self.store.db
        with self.store.immediate():
            _forget(db, url)
            if path != old.path:  # a stale row of a file that was at the new path before
                db.execute("DELETE FROM library_files WHERE path = ?", [path])
            if old.url is not None and old.url != url:
                db.execute("UPDATE pages SET url = ?, final_url = ? WHERE url = ?", [url, url, old.url])
                db.execute("UPDATE passages SET url = ? WHERE url = ? AND origin = 'page'", [url, old.url])
                db.execute("UPDATE library_files SET url = ? WHERE url = ? AND state = ?", [url, old.url, DUPLICATE])
            db.execute("UPDATE library_files SET path = ?, folder = ?, size = ?, mtime_ns = ?, url = ?, "
                       "checked_at = ? WHERE path = ?", [path, folder, size, mtime_ns, url, utc_now(), old.path])

    def release(self, row: FileRow) -> None:
        """`row`'s file is gone or no longer holds its document: hand the document to a duplicate
        of it (renamed to the duplicate's path), or drop its page and passages. The row stays."""
        if row.state != INDEXED or row.url is None:
            return
        heirs = list(self.store.db.query(
            "SELECT * FROM library_files WHERE url = ? AND state = ? AND path != ? ORDER BY rowid LIMIT 1",
            [row.url, DUPLICATE, row.path]))
        if heirs:
            heir = _row(heirs[0])
            new_url = Path(heir.path).as_uri()
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
                           [INDEXED, row.path, row.path, row.path, heir.path])
                db.execute("UPDATE library_files SET url = NULL WHERE path = ?", [row.path])
            return
        with self.store.immediate():
            _forget(self.store.db, row.url)
            self.store.db.execute("UPDATE library_files SET url = NULL WHERE path = ?", [row.path])

    def drop(self, rows: Iterable[FileRow]) -> int:
        """Files that are gone: their documents released (to a duplicate, or dropped), rows deleted."""
        n = 0
        for row in rows:
            self.release(row)
            self.store.db.execute("DELETE FROM library_files WHERE path = ?", [row.path])
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
            {"path": folder, "folder": folder, "state": FOLDER, "reason": problem, "checked_at": utc_now()},
            pk="path")

    def forget_folders(self, keep: Iterable[str]) -> None:
        """Folder rows of folders no longer configured."""
        kept = list(keep)
        marks = ",".join("?" for _ in kept) or "''"
        self.store.db.execute(f"DELETE FROM library_files WHERE state = ? AND path NOT IN ({marks})",
                              [FOLDER, *kept])

    # ---- what a user asks ---------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Counts by state, the refused and pending files with reasons, the folders' last scans."""
        db = self.store.db
        counts = {state: 0 for state in FILE_STATES}
        counts.update({r[0]: r[1] for r in db.execute(
            "SELECT state, count(*) FROM library_files WHERE state != ? GROUP BY state", [FOLDER]).fetchall()})
        listed = [{"path": r["path"], "state": r["state"], "reason": r["reason"]} for r in db.query(
            "SELECT path, state, reason FROM library_files WHERE state IN (?, ?) ORDER BY path", [REFUSED, PENDING])]
        folders = [{"path": r["path"], "problem": r["reason"], "scanned_at": r["checked_at"]}
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
        return [PassageHit(url=u, title=named.get(u, ("", ""))[0] or "", path=named.get(u, ("", u))[1],
                           page=pg, text=x, rank=r) for u, pg, x, r in rows]


def _forget(db: Any, url: str) -> None:
    """A document's page row and passages (a web page is never stored under a file:// URL)."""
    db.execute("DELETE FROM passages WHERE url = ? AND origin = 'page'", [url])
    db.execute("DELETE FROM pages WHERE url = ?", [url])
