"""The SQLite store: every brief, page, passage, evidence item, model call and loop state.

Nothing else in briefd touches SQL. Tables and columns are named for people, so
`datasette briefd.db` is a pleasant way to look around.

Why these choices (each keeps a file or a run from being lost):
- WAL once, `synchronous=FULL` on every connection (NORMAL can lose a commit on
  power loss), a 30 s busy timeout (sqlite-utils' default is 5 s).
- Claims are one `UPDATE ... RETURNING` statement, never SELECT-then-UPDATE.
- No transaction is held across a model or search call: every method here is
  short and commits before it returns.
- `PRAGMA user_version` numbers the schema; `migrate()` walks it forward.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlite_utils
from briefd.errors import BriefdError

SCHEMA_VERSION = 13
BUSY_TIMEOUT_S = 30.0

# Brief states. `rejected` rows record invalid files so nothing dropped is ever unaccounted for.
QUEUED, RUNNING, DONE, FAILED, CANCELLED, REJECTED = (
    "queued", "running", "done", "failed", "cancelled", "rejected",
)


# model_calls outcomes that are no request answered by the model: an answer or a kept failure given
# again from model_answers, a request the server refused every time. Usage and the canned queries count
# the rest as model calls (SQL: `outcome NOT IN NOT_MODEL_CALLS`).
NOT_MODEL_CALLS = "('cached', 'poisoned', 'replayed')"


def utc_now(after_s: float = 0.0) -> str:
    """ISO 8601 UTC with seconds, the one timestamp format of the store and the reports (now, or
    `after_s` seconds from now: when a mark expires, when a waiting brief is due)."""
    return iso_utc(datetime.now(timezone.utc) + timedelta(seconds=after_s))


def iso_utc(moment: datetime) -> str:
    """An aware datetime in the store's one format: UTC, to the second, with Z."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def fts_or_query(text: str, max_terms: int = 40) -> str:
    """Free text → an FTS5 query that ORs its words, each quoted, so user text can't break FTS syntax."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in seen:
            continue
        seen.append(word)
        if len(seen) >= max_terms:
            break
    return " OR ".join(f'"{w}"' for w in seen)


def connect(path: Path) -> sqlite_utils.Database:
    """Open the store with the pragmas every connection needs, creating or migrating the schema."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=True)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    db = sqlite_utils.Database(conn)
    migrate(db)
    return db


def _migration_1(db: sqlite_utils.Database) -> None:
    db.table("briefs").create(
        {
            "run_id": int,          # one row per accepted (or rejected) file: a run of a brief
            "brief_id": str,        # the brief's id: names the outbox folder
            "state": str,
            "question": str,
            "source_file": str,     # the inbox file name as dropped
            "received_sha256": str,
            "received_bytes": bytes,
            "brief_json": str,      # the normalised brief
            "error": str,
            "error_details": str,
            "attempts": int,
            "accepted_at": str,
            "started_at": str,
            "finished_at": str,
            "stop_reason": str,
            "waiting_for": str,     # what a running brief waits for (a service that is down)
            "inbox_path": str,
            "inbox_removed": int,   # 1 once the user's file has left the inbox
            "outdir_ready": int,    # 1 once earlier runs were archived and brief.json written
            "cancel_requested": int,
        },
        pk="run_id",
        defaults={"attempts": 0, "inbox_removed": 0, "outdir_ready": 0, "cancel_requested": 0},
        not_null={"brief_id", "state", "accepted_at"},
    )
    db.table("briefs").create_index(["state"])
    db.table("briefs").create_index(["brief_id"])
    db.table("pages").create(
        {
            "url": str,
            "final_url": str,
            "status": int,
            "content_type": str,
            "fetched_at": str,
            "title": str,
            "text": str,
            "text_sha256": str,
            "bytes": int,
            "extraction": str,      # trafilatura | plain | fallback | none
            "error": str,
        },
        pk="url",
    )
    db.table("passages").create(
        {
            "id": int,
            "url": str,             # the page (or search result, for snippets) it comes from
            "origin": str,          # page | snippet
            "seq": int,
            "start": int,           # offsets into the page text: text == pages.text[start:end]
            "end": int,
            "text": str,
        },
        pk="id",
    )
    db.table("passages").create_index(["url", "origin", "seq"], unique=True)
    db.table("passages").enable_fts(["text"], create_triggers=True, tokenize="porter")
    db.table("bad_urls").create({"url": str, "reason": str, "seen_at": str}, pk="url")
    db.table("search_cache").create(
        {"cache_key": str, "query": str, "params": str, "response": str, "searched_at": str},
        pk="cache_key",
    )
    db.table("queries").create(
        {"id": int, "run_id": int, "round": int, "text": str, "results": int, "searched_at": str,
         "from_cache": int, "error": str},
        pk="id", foreign_keys=[("run_id", "briefs")],
    )
    db.table("search_results").create(
        {"id": int, "run_id": int, "round": int, "query": str, "rank": int, "url": str,
         "title": str, "snippet": str, "engine": str},
        pk="id", foreign_keys=[("run_id", "briefs")],
    )
    db.table("evidence").create(
        {
            "id": int, "run_id": int, "round": int, "url": str, "title": str,
            "passage_id": int, "origin": str, "quote": str, "quote_start": int, "quote_end": int,
            "summary": str, "confidence": float, "stance": str, "impact": str, "gap": str,
            "found_at": str,
        },
        pk="id", foreign_keys=[("run_id", "briefs")],
    )
    db.table("model_calls").create(
        {
            "id": int, "run_id": int, "purpose": str, "model": str, "prompt_hash": str,
            "started_at": str, "seconds": float, "prompt_tokens": int, "completion_tokens": int,
            "outcome": str, "attempt": int, "truncated_prompt": int, "truncated_answer": int,
            "error": str, "answer": str,
        },
        pk="id",
    )
    db.table("model_calls").create_index(["run_id"])
    db.table("model_answers").create(
        {"prompt_hash": str, "answer": str, "prompt_tokens": int, "completion_tokens": int,
         "created_at": str},
        pk="prompt_hash",
    )
    db.table("events").create(
        {"run_id": int, "seq": int, "at": str, "type": str, "data": str},
        pk=("run_id", "seq"),
    )
    db.table("checkpoints").create(
        {"run_id": int, "round": int, "phase": str, "state": str, "saved_at": str},
        pk="run_id",
    )


def _migration_2(db: sqlite_utils.Database) -> None:
    """Estimates and verdicts (issue 3): the numbers an evidence item reads, its source tier."""
    for column, kind in (("low", float), ("high", float), ("tier", str)):
        db.table("evidence").add_column(column, kind)


def _migration_3(db: sqlite_utils.Database) -> None:
    """What an estimate reading says it measures: unit, scope and date, as the model read them."""
    for column in ("unit", "scope", "reading_date"):
        db.table("evidence").add_column(column, str)


def _migration_4(db: sqlite_utils.Database) -> None:
    """Outages: a brief waiting for a service is queued with a time not to claim it before."""
    db.table("briefs").add_column("not_before", str)
    db.table("briefs").add_column("waiting_since", str)
    db.table("briefs").add_column("outages", int, not_null_default=0)


def _migration_5(db: sqlite_utils.Database) -> None:
    """Documents and the local library (issue 10): a passage's page (PDFs), an evidence item's
    page, and one row per file of the library folders (what was read, what was refused and why)."""
    db.table("passages").add_column("page", int)
    db.table("evidence").add_column("page", int)
    db.table("library_files").create(
        {
            "path": str,            # absolute path of the file as found under a library folder
            "folder": str,          # the library folder it was found under
            "size": int,
            "mtime_ns": int,
            "sha256": str,          # of the content: a renamed or copied file is not read again
            "state": str,           # indexed | duplicate | refused | pending
            "reason": str,          # why refused (or why still pending)
            "url": str,             # the document its passages are stored under (file:// URL)
            "title": str,
            "pages": int,           # PDF pages; null for formats without pages
            "chars": int,
            "checked_at": str,
            "indexed_at": str,
        },
        pk="path",
    )
    # every request a brief made, by host (daemon/sources/egress.py), written as they happen: a round
    # redone after a crash takes its pages from the cache, so counts kept only at checkpoints
    # would lose the hosts it had contacted
    db.table("egress_counts").create({"run_id": int, "counts": str}, pk="run_id")
    db.table("library_files").create_index(["sha256"])
    db.table("library_files").create_index(["state"])


def _migration_6(db: sqlite_utils.Database) -> None:
    """Slow pages (issue 11): a URL whose fetch timed out is remembered until `expires_at`, then
    tried again; a row without one is bad for good, as before. And an index for the inbox's checks."""
    db.table("bad_urls").add_column("expires_at", str)
    # a file taken from the inbox is checked against the runs whose file may still be there
    # (known_inbox_file, inbox_leftovers): without an index that read every run ever stored,
    # 3.9 ms a file at 10,000 runs (lab/queue_bench.py); it holds only those few runs
    db.execute("CREATE INDEX idx_briefs_inbox_leftover ON briefs (inbox_path, received_sha256) "
               "WHERE inbox_removed = 0")


def _migration_7(db: sqlite_utils.Database) -> None:
    """Knowledge that compounds (issue 12): what each run reported, searchable; the series a brief
    with `every` belongs to; how a page can be checked again without downloading it; when a piece
    of evidence was read, and from which earlier run it was taken."""
    db.table("briefs").add_column("follows", str)   # the brief id this one follows up (brief field)
    db.table("briefs").add_column("every", str)     # its schedule, as given (brief field)
    db.table("reports").create(
        {
            "run_id": int,          # the run whose report this is (done, failed or cancelled)
            "brief_id": str,
            "kind": str,            # plain | estimate | hypothesis
            "status": str,
            "question": str,
            "answer": str,          # the answer line a report leads with
            "summary": str,
            "stop_reason": str,
            "started_at": str,
            "finished_at": str,
            "report_json": str,     # the whole report.json, for "what changed" and the HTTP API
        },
        pk="run_id", not_null={"brief_id"},
    )
    db.table("reports").create_index(["brief_id", "finished_at"])
    db.table("reports").create_index(["finished_at"])
    db.table("reports").enable_fts(["question", "answer", "summary"], create_triggers=True, tokenize="porter")
    db.table("evidence").add_column("read_at", str)      # when its page was read (fetched or last confirmed)
    db.table("evidence").add_column("reused_from", int)  # the earlier run it was taken from, if any
    db.table("evidence").enable_fts(["quote"], create_triggers=True, tokenize="porter")
    db.table("pages").add_column("etag", str)            # validators for a conditional re-fetch (304)
    db.table("pages").add_column("last_modified", str)
    db.table("pages").add_column("checked_at", str)      # last time the server said it is unchanged
    db.table("schedules").create(
        {
            "brief_id": str,        # one series per id
            "every": str,           # as the brief said it
            "brief_json": str,      # the brief each run is asked with
            "received_bytes": bytes,
            "source_file": str,
            "created_at": str,
            "next_run_at": str,     # when the next run is due (UTC)
            "last_run_id": int,
            "last_run_at": str,
            "runs": int,
            "cancelled_at": str,    # `briefd cancel`: the series ends
        },
        pk="brief_id", defaults={"runs": 0},
    )
    # a brief asked again finds the earlier run of its question (Store.earlier_checkpoint) by index
    db.execute("CREATE INDEX idx_briefs_done_question ON briefs (question, run_id) WHERE state = 'done'")
    # runs that ended before this version: their question is searchable and listed (their
    # report files are in the outbox; the store did not keep them)
    db.execute("INSERT INTO reports (run_id, brief_id, status, question, stop_reason, started_at, finished_at) "
               "SELECT run_id, brief_id, state, question, stop_reason, started_at, finished_at FROM briefs "
               "WHERE state IN ('done', 'failed', 'cancelled')")


def _migration_8(db: sqlite_utils.Database) -> None:
    """Reports that never dress up a miss (issue 21): whether a run's answer line states an answer
    (report.json's `answer.found`), so `briefd list` and the web page tell a run that found nothing
    from one that found its answer without reading each whole report.json. Runs reported before
    this version stay NULL: not known."""
    db.table("reports").add_column("answer_found", int)


def _migration_9(db: sqlite_utils.Database) -> None:
    """Failures kept (issue 22): a call that ended in a deterministic fallback (a bad answer after the
    retry, an answer cut at its budget with no shorter schema, a request refused for what it asks, a
    poisoned request) is kept by its prompt hash too, so a second pass or a resumed run replays the
    fallback instead of paying for the same failure. Rows of earlier versions are answers (failed NULL)."""
    db.table("model_answers").add_column("failed", str)        # fallback | poisoned; NULL: an answer
    db.table("model_answers").add_column("error", str)         # why the call failed, as model_calls said it
    db.table("model_answers").add_column("retry_skipped", int)  # 1: cut off and not asked again


def _migration_10(db: sqlite_utils.Database) -> None:
    """Reading that holds on unseen text (issue 27): an evidence item keeps the text before its quote in its
    passage (a definition's term line, the sentence that names the unit), so that a contract's verdict, computed
    again from the kept quotes, reads each figure as it was read when the quote was kept. Rows of earlier
    versions have none (NULL: the quote alone, as before)."""
    db.table("evidence").add_column("lead", str)


def _migration_11(db: sqlite_utils.Database) -> None:
    """Markup read (issue 27): a passage keeps which of its lines its document marks as code, an example, a
    heading or navigation (`marks`, JSON [[start, end, kind], ...] in the passage's offsets), and an evidence
    item the kind of the part its quote lies in (`unit_kind`), so that a verdict computed again reads each figure
    as it was read when the quote was kept. Rows of earlier versions have none (NULL: prose, as before)."""
    db.table("passages").add_column("marks", str)
    db.table("evidence").add_column("unit_kind", str)


def _migration_12(db: sqlite_utils.Database) -> None:
    """A second model API (issue 31): each model call keeps how its JSON was asked for (`structured`: schema,
    json or none; model.wire), since OpenAI-compatible servers take different kinds of structured output and
    the report's usage says which path the calls took. Rows of earlier versions have none (NULL: Ollama's
    `format` with the schema, the only path then)."""
    db.table("model_calls").add_column("structured", str)


def _migration_13(db: sqlite_utils.Database) -> None:
    """What a call's time went to (issue 32): the server's own seconds reading the prompt (`prompt_seconds`) and
    generating the answer (`eval_seconds`), where it says them (Ollama's durations, llama.cpp's timings), so
    that seconds per generated token can be compared between ways of asking for JSON. Rows of earlier versions,
    and servers that do not say, have none (NULL)."""
    db.table("model_calls").add_column("prompt_seconds", float)
    db.table("model_calls").add_column("eval_seconds", float)


MIGRATIONS = {1: _migration_1, 2: _migration_2, 3: _migration_3, 4: _migration_4, 5: _migration_5,
              6: _migration_6, 7: _migration_7, 8: _migration_8, 9: _migration_9, 10: _migration_10,
              11: _migration_11, 12: _migration_12, 13: _migration_13}


class SchemaTooNew(BriefdError, RuntimeError):
    """The store was written by a newer briefd: this one must not touch it."""


def migrate(db: sqlite_utils.Database) -> int:
    """Walk `PRAGMA user_version` forward, one migration per version, each in a transaction."""
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"was written by a newer briefd (schema {version}, this one knows {SCHEMA_VERSION})"
        )
    while version < SCHEMA_VERSION:
        version += 1
        conn = db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version](db)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return version


# ---- when the store fails ---------------------------------------------------------------------
# SQLite's primary result codes (the low byte of an extended code), as sqlite3 reports them.
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT = 5, 6, 8, 10, 11
_SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB, _SQLITE_PERM = 13, 14, 26, 3

LOCKED, DAMAGED, FULL, NOT_WRITABLE, DISK_ERROR, TOO_NEW = (
    "locked", "damaged", "full", "not writable", "disk error", "too new",
)


@dataclass(frozen=True)
class StoreProblem:
    """Why the store cannot be used right now, and what the user does about it.

    `kind` LOCKED is the one a daemon waits out (another process holds SQLite's lock);
    every other kind needs the user, so the daemon stops with exit 3 and this message
    rather than guess: a damaged store is never written to, so no brief is lost.
    """

    kind: str
    reason: str
    fix: str

    @property
    def locked(self) -> bool:
        return self.kind == LOCKED


class StoreUnavailable(BriefdError):
    """The store failed in a way only the user can fix: the message says why and how."""

    def __init__(self, path: Path, problem: StoreProblem) -> None:
        super().__init__(f"the store {path} {problem.reason}; to fix: {problem.fix}")
        self.path, self.problem = Path(path), problem


NEARLY_FULL_BYTES = 1 << 20  # less free space than this under the store: an I/O error there is a full disk


def _nearly_full(folder: Path) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < NEARLY_FULL_BYTES


def damaged(path: Path, reason: str) -> StoreProblem:
    """A store SQLite cannot trust: never written to again by briefd until the user acts."""
    return StoreProblem(DAMAGED, reason,
                        f"stop briefd, keep a copy of {Path(path).name}, and restore it from a backup (made with "
                        f"VACUUM INTO) or recover it (sqlite3 {path} .recover | sqlite3 recovered.db); "
                        f"`briefd check` shows the damage")


def diagnose(exc: BaseException, path: Path) -> StoreProblem | None:
    """What a failure of the store means to the user, or None when it is not the store's
    (a bug: a constraint or a misuse of the API is not something to tell the user to fix)."""
    path = Path(path)
    folder = path.parent
    if isinstance(exc, StoreUnavailable):
        return exc.problem
    if isinstance(exc, SchemaTooNew):
        return StoreProblem(TOO_NEW, str(exc), "run the newer briefd, or point --db at another store")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreProblem(FULL, f"cannot be written: {exc.strerror}",
                            f"free space on the filesystem that holds {folder}")
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.IntegrityError):
        return None
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in text:
        return StoreProblem(LOCKED, f"is locked by another process ({text})",
                            "wait, or stop the other program that holds it (another briefd, sqlite3, a backup tool)")
    # "Could not decode to UTF-8": Python's sqlite3 reading a text column whose bytes are not the
    # UTF-8 briefd wrote, i.e. a damaged page the B-tree itself did not notice.
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or any(
            sign in text for sign in ("malformed", "not a database", "Could not decode to UTF-8")):
        return damaged(path, f"is damaged ({text})")
    if code == _SQLITE_FULL or "disk is full" in text or (code in (_SQLITE_IOERR, _SQLITE_CANTOPEN)
                                                          and _nearly_full(folder)):
        # A full disk often reaches SQLite as an I/O error: growing the WAL's -shm file fails
        # (SQLITE_IOERR_SHMSIZE) before any write could say SQLITE_FULL. The free space tells.
        return StoreProblem(FULL, f"cannot be written: the disk is full ({text})",
                            f"free space on the filesystem that holds {folder}")
    if code in (_SQLITE_READONLY, _SQLITE_CANTOPEN, _SQLITE_PERM) or "readonly" in text or "unable to open" in text:
        return StoreProblem(NOT_WRITABLE, f"cannot be opened for writing ({text})",
                            f"make {path} and {folder} writable by the user briefd runs as, or set --db")
    if code == _SQLITE_IOERR or "I/O error" in text:
        return StoreProblem(DISK_ERROR, f"cannot be read or written ({text})",
                            f"check the disk under {folder} (dmesg); then `briefd check`")
    return None  # "no such column" and the like: a bug, handled where bugs are
