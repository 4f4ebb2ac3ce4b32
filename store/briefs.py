"""The store's API: short methods, each one transaction, named for what the daemon does.

Callers never see SQL. All methods run on the thread that opened the store (the
daemon's event loop thread); each commits before returning, so no transaction is
ever held across a model or search call.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict

import sqlite_utils
from sqlite_utils.db import Table

from .db import (
    BUSY_TIMEOUT_S, CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING,
    NOT_MODEL_CALLS, connect, fts_or_query, sha256_hex, utc_now,
)


def inserted_pk(table: Table) -> int:
    """The integer primary key of the row `table.insert(...)` just wrote.

    sqlite-utils types `last_pk` as optional (it is None before any insert); after an
    insert into a table with an integer pk it is always set, so None here is a bug.
    """
    pk = table.last_pk
    if pk is None:
        raise RuntimeError(f"sqlite-utils reported no primary key for the row just inserted into "
                           f"{table.name!r}: insert the row before reading its key")
    return int(pk)


class ModelUsage(TypedDict):
    """What a run's model calls cost (Store.model_usage): the report's usage block reads these keys."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_cache_hits: int
    llm_seconds: float
    repaired_answers: int
    retried_answers: int
    fallback_answers: int
    poisoned_answers: int
    replayed_failures: int
    structured: dict[str, int]  # answered calls by how their JSON was asked for (model.wire): schema, json, none


@dataclass
class BriefRow:
    run_id: int
    brief_id: str
    state: str
    question: str
    source_file: str
    brief_json: str
    attempts: int
    accepted_at: str
    started_at: str | None
    finished_at: str | None
    stop_reason: str | None
    error: str | None
    waiting_for: str | None
    outdir_ready: bool
    cancel_requested: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "BriefRow":
        return cls(
            run_id=row["run_id"], brief_id=row["brief_id"], state=row["state"],
            question=row.get("question") or "", source_file=row.get("source_file") or "",
            brief_json=row.get("brief_json") or "{}", attempts=row.get("attempts") or 0,
            accepted_at=row["accepted_at"], started_at=row.get("started_at"),
            finished_at=row.get("finished_at"), stop_reason=row.get("stop_reason"),
            error=row.get("error"), waiting_for=row.get("waiting_for"),
            outdir_ready=bool(row.get("outdir_ready")),
            cancel_requested=bool(row.get("cancel_requested")),
        )


@dataclass
class PageRow:
    url: str
    final_url: str
    status: int | None
    content_type: str
    fetched_at: str
    title: str
    text: str
    error: str | None
    etag: str | None = None           # the validators its server sent (daemon.fetch cleaned them)
    last_modified: str | None = None
    checked_at: str | None = None     # last time its server said the stored copy is the page (304)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.text)

    @property
    def read_at(self) -> str:
        """When its text was last known to be the page's: fetched, or confirmed since."""
        return self.checked_at or self.fetched_at


@dataclass
class PassageRow:
    id: int
    url: str
    origin: str
    seq: int
    start: int
    end: int
    text: str
    page: int | None = None  # the PDF page it is on (1-based); None for formats without pages
    marks: str | None = None  # what its document marks (JSON, daemon/sources/structure.py); None: all prose


# The id a queued run `b` follows (its normalised brief's `follows`; NULL for none, or a brief_json
# that is not JSON), and whether an earlier run of that id is still queued or running: then `b` waits.
_FOLLOWS = "(CASE WHEN json_valid(b.brief_json) THEN json_extract(b.brief_json, '$.follows') END)"
_BEHIND_PARENT = (f"EXISTS (SELECT 1 FROM briefs AS parent WHERE parent.brief_id = {_FOLLOWS} "
                  "AND parent.state IN ('queued', 'running') AND parent.run_id < b.run_id)")


class Store:
    """One connection to briefd.db; see store/db.py for the why of its settings."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.db: sqlite_utils.Database = connect(self.path)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def immediate(self) -> Iterator[None]:
        """BEGIN IMMEDIATE: take the write lock up front (a deferred BEGIN deadlocks under contention).

        Inside a transaction already begun here, it joins it (one COMMIT or ROLLBACK for both):
        store.schedules records a brief (add_brief) and its series together."""
        conn = self.db.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- briefs -------------------------------------------------------------------------

    def add_brief(self, *, brief_id: str, question: str, source_file: str, received: bytes,
                  brief_json: str, inbox_path: str) -> int:
        """Record an accepted brief (bytes included) before its file leaves the inbox.

        Its `accepted` event (seq 1) is committed with it: a crash cannot leave a brief
        whose event log does not begin with its acceptance.
        """
        with self.immediate():
            table = self.db.table("briefs")
            table.insert({
                "brief_id": brief_id, "state": QUEUED, "question": question,
                "source_file": source_file, "received_sha256": sha256_hex(received),
                "received_bytes": received, "brief_json": brief_json,
                "accepted_at": utc_now(), "inbox_path": inbox_path,
            })
            run_id = inserted_pk(table)
            self._insert_event(run_id, "accepted", {"id": brief_id, "source_file": source_file,
                                                    "question": question})
            return run_id

    def add_rejection(self, *, brief_id: str, source_file: str, received: bytes, error: str,
                      details: dict[str, Any], inbox_path: str) -> int:
        with self.immediate():
            table = self.db.table("briefs")
            now = utc_now()
            table.insert({
                "brief_id": brief_id, "state": REJECTED, "question": "",
                "source_file": source_file, "received_sha256": sha256_hex(received),
                "received_bytes": received, "error": error,
                "error_details": json.dumps(details, ensure_ascii=False),
                "accepted_at": now, "finished_at": now, "inbox_path": inbox_path,
            })
            return inserted_pk(table)

    def mark_inbox_removed(self, run_id: int) -> None:
        self.db.execute("UPDATE briefs SET inbox_removed = 1 WHERE run_id = ?", [run_id])

    def inbox_leftovers(self) -> list[tuple[int, str, str]]:
        """(run_id, inbox_path, sha256) of recorded briefs whose file may still sit in the inbox."""
        rows = self.db.execute(
            "SELECT run_id, inbox_path, received_sha256 FROM briefs WHERE inbox_removed = 0"
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def known_inbox_file(self, inbox_path: str, sha256: str) -> int | None:
        """A run already recorded from this very file (same path and bytes) whose file wasn't removed."""
        row = self.db.execute(
            "SELECT run_id FROM briefs WHERE inbox_path = ? AND received_sha256 = ? AND inbox_removed = 0",
            [inbox_path, sha256],
        ).fetchone()
        return row[0] if row else None

    def claim_next(self, skip: Collection[int] = ()) -> BriefRow | None:
        """Take the oldest queued brief whose id is not already running, in one statement.

        A follow-up waits behind its parent: not taken while a run of the id it follows that was
        accepted before it is queued or running (_BEHIND_PARENT). Only earlier runs count, so two
        briefs following each other's later runs can never wait on each other for ever.
        `skip`: runs this daemon set aside (`run --once` gave up on their service: they stay
        queued for the next run)."""
        marks = ",".join("?" for _ in skip)
        row = self.db.execute(
            f"""
            UPDATE briefs SET state = 'running', attempts = attempts + 1,
                   started_at = COALESCE(started_at, ?), waiting_for = NULL
            WHERE run_id = (
                SELECT run_id FROM briefs AS b
                WHERE state = 'queued'
                  AND (not_before IS NULL OR not_before <= ?)
                  AND brief_id NOT IN (SELECT brief_id FROM briefs WHERE state = 'running')
                  AND run_id NOT IN ({marks})
                  AND NOT {_BEHIND_PARENT}
                ORDER BY run_id LIMIT 1)
            RETURNING run_id
            """,
            [utc_now(), utc_now(), *skip],
        ).fetchone()
        return self.get_brief(row[0]) if row else None

    def requeue_running(self) -> int:
        """At start-up, under the daemon lock: what was running when we died goes back to the queue."""
        cur = self.db.execute("UPDATE briefs SET state = 'queued', waiting_for = NULL WHERE state = 'running'")
        return cur.rowcount

    def get_brief(self, run_id: int) -> BriefRow | None:
        rows = list(self.db.query("SELECT * FROM briefs WHERE run_id = ?", [run_id]))
        return BriefRow.from_row(rows[0]) if rows else None

    def latest_run(self, brief_id: str) -> BriefRow | None:
        rows = list(self.db.query(
            "SELECT * FROM briefs WHERE brief_id = ? ORDER BY run_id DESC LIMIT 1", [brief_id]))
        return BriefRow.from_row(rows[0]) if rows else None

    def received_bytes(self, run_id: int) -> bytes:
        row = self.db.execute("SELECT received_bytes FROM briefs WHERE run_id = ?", [run_id]).fetchone()
        return bytes(row[0]) if row and row[0] is not None else b""

    def set_outdir_ready(self, run_id: int) -> None:
        self.db.execute("UPDATE briefs SET outdir_ready = 1 WHERE run_id = ?", [run_id])

    def set_waiting(self, run_id: int, waiting_for: str | None) -> None:
        self.db.execute("UPDATE briefs SET waiting_for = ? WHERE run_id = ?", [waiting_for, run_id])

    def finish(self, run_id: int, *, state: str, stop_reason: str | None, error: str | None = None,
               event: tuple[str, dict[str, Any]] | None = None,
               before_commit: Callable[[int, str], None] | None = None,
               report: dict[str, Any] | None = None) -> None:
        """End a run; with `event`, its final event is committed in the same transaction, and
        with `report` (a `reports` row: report.history_row) what it reported, for history,
        search and "what changed", so the store never says a run ended without its report.

        A crash can then never leave a finished brief without its `complete`/`failed`
        event, nor an event for a brief that is still running. `before_commit(seq, at)`
        runs inside the transaction (the event log appends its line there): if the
        process dies before COMMIT the run is still 'running', and its resume rewrites
        the file from the store, dropping the line.
        """
        assert state in (DONE, FAILED, CANCELLED)
        with self.immediate():
            self.db.execute(
                "UPDATE briefs SET state = ?, stop_reason = ?, error = ?, finished_at = ?, waiting_for = NULL "
                "WHERE run_id = ?",
                [state, stop_reason, error, utc_now(), run_id],
            )
            if report is not None:
                self.save_report(run_id, report)
            if event is not None:
                seq, at = self._insert_event(run_id, *event)
                if before_commit is not None:
                    before_commit(seq, at)

    def save_report(self, run_id: int, row: dict[str, Any]) -> None:
        """What a run reported (report.history_row), replacing what an earlier attempt saved."""
        self.db.table("reports").upsert({**row, "run_id": run_id}, pk="run_id")

    def report_of(self, run_id: int) -> dict[str, Any] | None:
        """The report.json a run ended with (None: it has not ended, or ended before schema 7)."""
        row = self.db.execute("SELECT report_json FROM reports WHERE run_id = ?", [run_id]).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def previous_report(self, brief_id: str, before_run_id: int) -> tuple[int, dict[str, Any]] | None:
        """The latest run of `brief_id` before `before_run_id` that finished done, with its report:
        what a re-run (by hand or on schedule) is compared with, and what a follow-up starts from."""
        row = self.db.execute(
            "SELECT run_id, report_json FROM reports WHERE brief_id = ? AND run_id < ? AND status = 'done' "
            "AND report_json IS NOT NULL ORDER BY run_id DESC LIMIT 1", [brief_id, before_run_id]).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def wait_for_service(self, run_id: int, waiting_for: str, not_before: str) -> None:
        """A service is down: back to the queue, not claimed before `not_before`, the attempt not counted."""
        self.db.execute(
            "UPDATE briefs SET state = 'queued', waiting_for = ?, not_before = ?, "
            "waiting_since = COALESCE(waiting_since, ?), outages = outages + 1, "
            "attempts = MAX(attempts - 1, 0) WHERE run_id = ?",
            [waiting_for, not_before, utc_now(), run_id])

    def service_back(self, run_id: int) -> None:
        self.db.execute(
            "UPDATE briefs SET waiting_since = NULL, not_before = NULL, outages = 0 WHERE run_id = ? "
            "AND waiting_since IS NOT NULL", [run_id])

    def outage_state(self, run_id: int) -> tuple[str | None, int]:
        row = self.db.execute("SELECT waiting_since, outages FROM briefs WHERE run_id = ?", [run_id]).fetchone()
        return (row[0], int(row[1] or 0)) if row else (None, 0)

    def next_wake(self) -> str | None:
        """The earliest time a waiting brief may be claimed again."""
        row = self.db.execute("SELECT MIN(not_before) FROM briefs WHERE state = 'queued' "
                              "AND not_before IS NOT NULL").fetchone()
        return row[0] if row else None

    def resume_waiting(self, service: str) -> int:
        """Briefs queued for `service` (waiting_for "<service>: ...", worker.wait_or_fail) may be claimed
        now, not at their retry time: it answers again. Their outage count and patience are kept (a
        brief that meets the outage again waits longer); returns how many were waiting."""
        prefix, now = f"{service}: ", utc_now()
        cur = self.db.execute(
            "UPDATE briefs SET not_before = ? WHERE state = 'queued' AND not_before > ? "
            "AND substr(waiting_for, 1, ?) = ?", [now, now, len(prefix), prefix])
        return cur.rowcount

    def run_number(self, run_id: int) -> int:
        """Which run of its brief `run_id` is (1 for its first): run ids count every brief's runs, and
        `briefd status` says the brief's own (a rejected file under the same id is no run of it)."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM briefs WHERE brief_id = (SELECT brief_id FROM briefs WHERE run_id = ?) "
            "AND run_id <= ? AND state != ?", [run_id, run_id, REJECTED]).fetchone()
        return int(row[0]) if row else 0

    def events_round(self, run_id: int) -> int | None:
        """The round a run's events are in: its latest `round_started` (None before its first round).
        The checkpoint says the rounds finished, and is saved only after a round's search."""
        row = self.db.execute(
            "SELECT json_extract(data, '$.round') FROM events WHERE run_id = ? AND type = 'round_started' "
            "ORDER BY seq DESC LIMIT 1", [run_id]).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def requeue(self, run_id: int) -> None:
        self.db.execute(
            "UPDATE briefs SET state = 'queued', waiting_for = NULL WHERE run_id = ?", [run_id])

    def retry(self, brief_id: str) -> BriefRow | None:
        """Re-queue the latest failed or cancelled run of a brief, from its checkpoint, attempts reset."""
        run = self.latest_run(brief_id)
        if run is None or run.state not in (FAILED, CANCELLED):
            return None
        self.db.execute(
            "UPDATE briefs SET state = 'queued', attempts = 0, error = NULL, finished_at = NULL, "
            "cancel_requested = 0 WHERE run_id = ?", [run.run_id])
        return self.get_brief(run.run_id)

    def request_cancel(self, brief_id: str, event: tuple[str, dict[str, Any]] | None = None,
                       report: Callable[[BriefRow], dict[str, Any]] | None = None) -> BriefRow | None:
        """Stop a queued or running brief; None when its latest run is neither.

        A queued run that never started ends `cancelled` now, with `event` as its last
        event in the same transaction (nothing was found, so there is nothing to keep). A
        run that is running, or queued after it had started (waiting for a service,
        re-queued by a stop), is flagged: the daemon takes it at once (`not_before`
        cleared), stops at its next step and writes the report of what it found so far.
        `report(run)` gives the ended run's `reports` row, saved in the same transaction.
        """
        run = self.latest_run(brief_id)
        if run is None or run.state not in (QUEUED, RUNNING):
            return None
        with self.immediate():
            ended = 0
            if run.state == QUEUED and not run.outdir_ready:
                ended = self.db.execute(
                    "UPDATE briefs SET state = 'cancelled', finished_at = ?, stop_reason = 'cancelled', "
                    "waiting_for = NULL WHERE run_id = ? AND state = 'queued' AND outdir_ready = 0",
                    [utc_now(), run.run_id]).rowcount
                if ended and event is not None:
                    self._insert_event(run.run_id, *event)
                if ended and report is not None:
                    self.save_report(run.run_id, report(run))
            if not ended:  # running, started before, or claimed meanwhile: the worker ends it
                self.db.execute("UPDATE briefs SET cancel_requested = 1, not_before = NULL WHERE run_id = ?",
                                [run.run_id])
        return self.get_brief(run.run_id)

    def cancel_requested(self, run_id: int) -> bool:
        row = self.db.execute("SELECT cancel_requested FROM briefs WHERE run_id = ?", [run_id]).fetchone()
        return bool(row and row[0])

    def counts_by_state(self) -> dict[str, int]:
        counts = {s: 0 for s in (QUEUED, RUNNING, DONE, FAILED, CANCELLED, REJECTED)}
        for state, n in self.db.execute("SELECT state, count(*) FROM briefs GROUP BY state").fetchall():
            counts[state] = n
        return counts

    def briefs_in_state(self, *states: str) -> list[BriefRow]:
        marks = ",".join("?" for _ in states)
        return [BriefRow.from_row(r) for r in self.db.query(
            f"SELECT * FROM briefs WHERE state IN ({marks}) ORDER BY run_id", list(states))]

    def pending_work(self, skip: Collection[int] = ()) -> int:
        """Runs queued or running, less those in `skip` (see claim_next) and the follow-ups queued behind
        one of them, however deep: `run --once` would otherwise wait for ever on a follow-up whose
        parent it set aside. One pass in run order: a follow-up waits only on runs accepted before it."""
        aside: set[str] = set()  # ids with a run set aside so far
        pending = 0
        for run_id, brief_id, state, follows in self.db.execute(
                f"SELECT run_id, brief_id, state, {_FOLLOWS} FROM briefs AS b "
                "WHERE state IN ('queued', 'running') ORDER BY run_id"):
            if run_id in skip or (state == QUEUED and follows in aside):
                aside.add(brief_id)
            else:
                pending += 1
        return pending

    def reset_round(self, run_id: int, round_: int) -> None:
        """Clear what an interrupted attempt wrote for this round or later, before redoing it.

        A query row of a search that really went out is kept: the redone round takes that
        search from the cache (record_query does not add it twice), and usage must still
        count the search that was made, not report it as a cache hit.
        """
        with self.immediate():
            for table in ("evidence", "search_results"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id = ? AND round >= ?", [run_id, round_])
            self.db.execute("DELETE FROM queries WHERE run_id = ? AND round >= ? AND NOT "
                            "(from_cache = 0 AND error IS NULL)", [run_id, round_])

    # ---- checkpoints ----------------------------------------------------------------------

    def save_checkpoint(self, run_id: int, round_: int, phase: str, state: dict[str, Any]) -> None:
        self.db.table("checkpoints").upsert(
            {"run_id": run_id, "round": round_, "phase": phase,
             "state": json.dumps(state, ensure_ascii=False), "saved_at": utc_now()},
            pk="run_id",
        )

    def save_egress(self, run_id: int, counts: dict[str, dict[str, int]]) -> None:
        self.db.execute("INSERT INTO egress_counts (run_id, counts) VALUES (?, ?) "
                        "ON CONFLICT(run_id) DO UPDATE SET counts = excluded.counts",
                        [run_id, json.dumps(counts, sort_keys=True)])

    def load_egress(self, run_id: int) -> dict[str, dict[str, int]] | None:
        row = self.db.execute("SELECT counts FROM egress_counts WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            return None
        counts: dict[str, dict[str, int]] = json.loads(row[0])
        return counts

    def load_checkpoint(self, run_id: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT state FROM checkpoints WHERE run_id = ?", [run_id]).fetchone()
        return json.loads(row[0]) if row else None

    # ---- events ---------------------------------------------------------------------------

    def add_event(self, run_id: int, type_: str, data: dict[str, Any]) -> tuple[int, str]:
        """Append an event; returns (seq, at). seq is per run and gap-free."""
        with self.immediate():
            return self._insert_event(run_id, type_, data)

    def _insert_event(self, run_id: int, type_: str, data: dict[str, Any]) -> tuple[int, str]:
        """The INSERT of add_event, for callers already inside a transaction."""
        row = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", [run_id]).fetchone()
        seq = int(row[0]) + 1
        at = utc_now()
        self.db.execute(
            "INSERT INTO events (run_id, seq, at, type, data) VALUES (?, ?, ?, ?, ?)",
            [run_id, seq, at, type_, json.dumps(data, ensure_ascii=False)],
        )
        return seq, at

    def events(self, run_id: int, since: int = 0) -> list[dict[str, Any]]:
        """A run's events in order, from seq `since` on (the HTTP API's live stream asks for what is new)."""
        out = []
        for r in self.db.query("SELECT seq, at, type, data FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq",
                               [run_id, since]):
            out.append({"seq": r["seq"], "at": r["at"], "type": r["type"], **json.loads(r["data"])})
        return out

    # ---- model calls ----------------------------------------------------------------------

    def record_model_call(self, run_id: int | None, rec: Any) -> None:
        """Store one daemon.llm.CallRecord (duck-typed: the store does not import the daemon)."""
        self.db.table("model_calls").insert({
            "run_id": run_id, "purpose": rec.purpose, "model": rec.model,
            "prompt_hash": rec.prompt_hash, "started_at": rec.started_at, "seconds": rec.seconds,
            "prompt_tokens": rec.prompt_tokens, "completion_tokens": rec.completion_tokens,
            "outcome": rec.outcome, "attempt": rec.attempt,
            "truncated_prompt": int(bool(rec.truncated_prompt)),
            "truncated_answer": int(bool(rec.truncated_answer)),
            "error": rec.error, "answer": rec.answer, "structured": getattr(rec, "structured", None),
            "prompt_seconds": getattr(rec, "prompt_seconds", None), "eval_seconds": getattr(rec, "eval_seconds", None),
        })

    def model_usage(self, run_id: int) -> ModelUsage:
        """What the run's model calls cost, from the store: the report's usage is this, not a tally in memory.

        A "poisoned" row is a request the server refused every time (no answer, no tokens): it is
        counted apart, as poisoned_answers, not as a model call nor as a bad-output fallback. A
        "replayed" row is a kept failure given again (no model time): replayed_failures.
        """
        row = self.db.execute(
            f"""SELECT
                 SUM(CASE WHEN outcome NOT IN {NOT_MODEL_CALLS} THEN 1 ELSE 0 END),
                 COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),
                 SUM(CASE WHEN outcome = 'cached' THEN 1 ELSE 0 END),
                 COALESCE(SUM(CASE WHEN outcome NOT IN {NOT_MODEL_CALLS} THEN seconds ELSE 0 END), 0),
                 SUM(CASE WHEN outcome = 'repaired' THEN 1 ELSE 0 END),
                 SUM(CASE WHEN outcome = 'retried' THEN 1 ELSE 0 END),
                 SUM(CASE WHEN outcome = 'fallback' THEN 1 ELSE 0 END),
                 SUM(CASE WHEN outcome = 'poisoned' THEN 1 ELSE 0 END),
                 SUM(CASE WHEN outcome = 'replayed' THEN 1 ELSE 0 END)
               FROM model_calls WHERE run_id = ?""",
            [run_id],
        ).fetchone()
        return {
            "llm_calls": int(row[0] or 0), "prompt_tokens": int(row[1] or 0),
            "completion_tokens": int(row[2] or 0), "llm_cache_hits": int(row[3] or 0),
            "llm_seconds": round(float(row[4] or 0.0), 3),
            "repaired_answers": int(row[5] or 0), "retried_answers": int(row[6] or 0),
            "fallback_answers": int(row[7] or 0), "poisoned_answers": int(row[8] or 0),
            "replayed_failures": int(row[9] or 0),
            "structured": {path: count for path, count in self.db.execute(
                f"""SELECT structured, count(*) FROM model_calls WHERE run_id = ? AND structured IS NOT NULL
                    AND outcome NOT IN {NOT_MODEL_CALLS} GROUP BY structured ORDER BY structured""", [run_id])},
        }

    def model_outcomes(self, run_id: int) -> dict[str, int]:
        return {o: n for o, n in self.db.execute(
            "SELECT outcome, count(*) FROM model_calls WHERE run_id = ? GROUP BY outcome", [run_id]).fetchall()}

    def cached_answer(self, prompt_hash: str, since: str | None = None) -> str | None:
        """The kept answer to this prompt; with `since` (an ISO time), only one kept at or after it."""
        newer = " AND created_at >= ?" if since else ""
        row = self.db.execute("SELECT answer FROM model_answers WHERE prompt_hash = ? AND failed IS NULL" + newer,
                              [prompt_hash, *([since] if since else [])]).fetchone()
        return row[0] if row else None

    def cache_answer(self, prompt_hash: str, answer: str, prompt_tokens: int | None,
                     completion_tokens: int | None) -> None:
        self.db.table("model_answers").upsert(
            {"prompt_hash": prompt_hash, "answer": answer, "prompt_tokens": prompt_tokens,
             "completion_tokens": completion_tokens, "created_at": utc_now(), "failed": None, "error": None,
             "retry_skipped": None},
            pk="prompt_hash",
        )

    def cached_failure(self, prompt_hash: str, max_age_s: float,
                       since: str | None = None) -> tuple[str, str, bool] | None:
        """(outcome, error, retry_skipped) of this prompt's kept failure when it is younger than
        `max_age_s` (an older one is asked again: the server or the model may have been fixed) and, with
        `since`, kept at or after it."""
        newer = " AND created_at >= ?" if since else ""
        row = self.db.execute("SELECT failed, error, retry_skipped, created_at FROM model_answers "
                              "WHERE prompt_hash = ? AND failed IS NOT NULL" + newer,
                              [prompt_hash, *([since] if since else [])]).fetchone()
        if not row or _age_seconds(row[3]) > max_age_s:
            return None
        return str(row[0]), str(row[1] or ""), bool(row[2])

    def cache_failure(self, prompt_hash: str, outcome: str, error: str, retry_skipped: bool) -> None:
        """Keep a deterministic failure by its prompt (llm.KEPT_FAILURES): replayed, not paid again."""
        self.db.table("model_answers").upsert(
            {"prompt_hash": prompt_hash, "answer": "", "prompt_tokens": None, "completion_tokens": None,
             "created_at": utc_now(), "failed": outcome, "error": error, "retry_skipped": int(retry_skipped)},
            pk="prompt_hash",
        )

    # ---- searches -------------------------------------------------------------------------

    def cached_search(self, cache_key: str, max_age_s: float) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT response, searched_at FROM search_cache WHERE cache_key = ?", [cache_key]).fetchone()
        if not row or _age_seconds(row[1]) > max_age_s:
            return None
        response: dict[str, Any] = json.loads(row[0])  # cache_search wrote this dict
        return response

    def cache_search(self, cache_key: str, query: str, params: dict[str, Any], response: dict[str, Any]) -> None:
        self.db.table("search_cache").upsert(
            {"cache_key": cache_key, "query": query, "params": json.dumps(params, sort_keys=True),
             "response": json.dumps(response, ensure_ascii=False), "searched_at": utc_now()},
            pk="cache_key",
        )

    def record_query(self, run_id: int, round_: int, text: str, results: list[dict[str, Any]],
                     *, from_cache: bool) -> None:
        """A search that answered. A refused or failed one is an outage and is not recorded
        (the `error` column is kept for rows written by earlier versions)."""
        with self.immediate():
            searched = self.db.execute(  # kept by reset_round: this round's search, made before a restart
                "SELECT 1 FROM queries WHERE run_id = ? AND round = ? AND text = ?", [run_id, round_, text]).fetchone()
            if searched is None:
                self.db.table("queries").insert({
                    "run_id": run_id, "round": round_, "text": text, "results": len(results),
                    "searched_at": utc_now(), "from_cache": int(from_cache),
                })
            self.db.table("search_results").insert_all(
                [{"run_id": run_id, "round": round_, "query": text, "rank": i + 1,
                  "url": r.get("url", ""), "title": r.get("title", ""),
                  "snippet": r.get("content", ""), "engine": r.get("engine", "")}
                 for i, r in enumerate(results)],
            )

    def queries(self, run_id: int) -> list[dict[str, Any]]:
        return [
            {"round": r["round"], "text": r["text"], "results": r["results"]}
            for r in self.db.query(
                "SELECT round, text, results FROM queries WHERE run_id = ? ORDER BY id", [run_id])
        ]

    def search_count(self, run_id: int) -> int:
        return int(self.db.execute(
            "SELECT count(*) FROM queries WHERE run_id = ? AND from_cache = 0 AND error IS NULL",
            [run_id]).fetchone()[0])

    # ---- pages and passages -----------------------------------------------------------------

    def get_page(self, url: str, max_age_s: float) -> PageRow | None:
        """The stored page, if it was fetched or confirmed (PageRow.read_at) at most `max_age_s` ago."""
        rows = list(self.db.query("SELECT * FROM pages WHERE url = ?", [url]))
        if not rows or _age_seconds(rows[0]["checked_at"] or rows[0]["fetched_at"]) > max_age_s:
            return None
        r = rows[0]
        return PageRow(url=r["url"], final_url=r["final_url"] or r["url"], status=r["status"],
                       content_type=r["content_type"] or "", fetched_at=r["fetched_at"],
                       title=r["title"] or "", text=r["text"] or "", error=r["error"],
                       etag=r["etag"], last_modified=r["last_modified"], checked_at=r["checked_at"])

    def save_page(self, *, url: str, final_url: str, status: int | None, content_type: str,
                  title: str, text: str, size: int, extraction: str, error: str | None,
                  passages: Sequence[tuple[int, int, int, str, int | None]
                                     | tuple[int, int, int, str, int | None, str | None]],
                  etag: str | None = None, last_modified: str | None = None) -> PageRow:
        """Cache a page and replace its passages (seq, start, end, text, page[, marks]) in one transaction.

        A fresh copy: its validators are the ones given (None: it came without), and it has
        not been confirmed since (checked_at is cleared)."""
        now = utc_now()
        with self.immediate():
            self.db.table("pages").upsert({
                "url": url, "final_url": final_url, "status": status, "content_type": content_type,
                "fetched_at": now, "title": title, "text": text, "text_sha256": sha256_hex(text),
                "bytes": size, "extraction": extraction, "error": error,
                "etag": etag, "last_modified": last_modified, "checked_at": None,
            }, pk="url")
            self.db.execute("DELETE FROM passages WHERE url = ? AND origin = 'page'", [url])
            self.db.table("passages").insert_all(
                [{"url": url, "origin": "page", "seq": p[0], "start": p[1], "end": p[2], "text": p[3], "page": p[4],
                  "marks": p[5] if len(p) > 5 else None} for p in passages])
        return PageRow(url=url, final_url=final_url, status=status, content_type=content_type,
                       fetched_at=now, title=title, text=text, error=error, etag=etag,
                       last_modified=last_modified)

    def page_validators(self, url: str) -> tuple[str, str | None, str | None] | None:
        """(final URL, ETag, Last-Modified) of a readable stored page that has either validator:
        what a conditional re-fetch asks with. None: nothing stored to confirm."""
        row = self.db.execute(
            "SELECT coalesce(final_url, url), etag, last_modified FROM pages WHERE url = ? AND error IS NULL "
            "AND coalesce(text, '') != '' AND (etag IS NOT NULL OR last_modified IS NOT NULL)", [url]).fetchone()
        return (str(row[0]), row[1], row[2]) if row else None

    def confirm_page(self, url: str, etag: str | None = None, last_modified: str | None = None) -> str:
        """The server said the stored copy is still the page (a 304): its age restarts now
        (checked_at), and validators the answer carried replace the stored ones. Returns the time."""
        now = utc_now()
        self.db.execute("UPDATE pages SET checked_at = ?, etag = coalesce(?, etag), "
                        "last_modified = coalesce(?, last_modified) WHERE url = ?",
                        [now, etag, last_modified, url])
        return now

    def page_read_at(self, urls: list[str]) -> dict[str, str]:
        """url -> when its stored text was last fetched or confirmed (PageRow.read_at), for those stored."""
        out: dict[str, str] = {}
        for i in range(0, len(urls), 500):
            chunk = urls[i:i + 500]
            marks = ",".join("?" for _ in chunk)
            out.update(dict(self.db.execute(
                f"SELECT url, coalesce(checked_at, fetched_at) FROM pages WHERE url IN ({marks})",
                chunk).fetchall()))
        return out

    def save_snippet(self, url: str, text: str) -> int:
        """A search snippet as a passage of its own (fetch_pages: false); returns its passage id."""
        with self.immediate():
            row = self.db.execute(
                "SELECT id, text FROM passages WHERE url = ? AND origin = 'snippet' AND seq = 0", [url]).fetchone()
            if row and row[1] == text:
                return int(row[0])
            self.db.execute("DELETE FROM passages WHERE url = ? AND origin = 'snippet'", [url])
            row = self.db.execute(
                "INSERT INTO passages (url, origin, seq, start, \"end\", text) VALUES (?, 'snippet', 0, 0, ?, ?) "
                "RETURNING id", [url, len(text), text]).fetchone()
            return int(row[0])

    def page_hashes(self, urls: list[str]) -> dict[str, str]:
        """URL → the sha256 of the page text the cache holds (report sources: "what changed")."""
        marks = ",".join("?" for _ in urls)
        rows = self.db.execute(f"SELECT url, text_sha256 FROM pages WHERE url IN ({marks}) AND text_sha256 IS NOT NULL",
                               urls).fetchall() if urls else []
        return {str(url): str(sha) for url, sha in rows}

    def passage_ids(self, url: str, origin: str) -> list[int]:
        return [r[0] for r in self.db.execute(
            "SELECT id FROM passages WHERE url = ? AND origin = ? ORDER BY seq", [url, origin]).fetchall()]

    def passages(self, ids: list[int]) -> list[PassageRow]:
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = self.db.query(f"SELECT * FROM passages WHERE id IN ({marks})", ids)
        by_id = {r["id"]: PassageRow(**{k: r[k] for k in ("id", "url", "origin", "seq", "start", "end", "text",
                                                          "page", "marks")})
                 for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def rank_passages(self, ids: list[int], text: str, limit: int, matching_only: bool = False) -> list[int]:
        """BM25 rank of the given passages against free text (question + open gaps), best first.

        Passages that share no word with the text come last, in their original order
        (or not at all with `matching_only`: a passage with none of the question's words
        is not worth a model's time).
        """
        if not ids:
            return []
        query = fts_or_query(text)
        ranked: list[int] = []
        if query:
            marks = ",".join("?" for _ in ids)
            ranked = [r[0] for r in self.db.execute(
                f"SELECT rowid FROM passages_fts WHERE passages_fts MATCH ? AND rowid IN ({marks}) "
                f"ORDER BY bm25(passages_fts) LIMIT ?",
                [query, *ids, limit]).fetchall()]
        if matching_only:
            return ranked
        rest = [i for i in ids if i not in set(ranked)]
        return (ranked + rest)[:limit]

    def bad_url_reason(self, url: str) -> str | None:
        row = self.db.execute(f"SELECT reason FROM bad_urls WHERE url = ? AND {_UNEXPIRED}",
                              [url, utc_now()]).fetchone()
        return row[0] if row else None

    def bad_urls(self, urls: list[str]) -> dict[str, str]:
        """Which of these URLs not to fetch: found bad for good (404, loop, binary, too large), or
        remembered as slow and not yet due for another try (mark_slow_url)."""
        out: dict[str, str] = {}
        now = utc_now()
        for i in range(0, len(urls), 500):
            chunk = urls[i:i + 500]
            marks = ",".join("?" for _ in chunk)
            out.update(dict(self.db.execute(
                f"SELECT url, reason FROM bad_urls WHERE url IN ({marks}) AND {_UNEXPIRED}",
                [*chunk, now]).fetchall()))
        return out

    def mark_bad_url(self, url: str, reason: str) -> None:
        self.db.execute("INSERT INTO bad_urls (url, reason, seen_at, expires_at) VALUES (?, ?, ?, NULL) "
                        "ON CONFLICT(url) DO UPDATE SET reason = excluded.reason, seen_at = excluded.seen_at, "
                        "expires_at = NULL", [url, reason, utc_now()])

    def mark_slow_url(self, url: str, reason: str, seconds: float) -> None:
        """Remember a page that did not answer in time for `seconds`: no brief waits for it again
        until then, and after that it is tried again (a slow server may have recovered). A URL
        already bad for good stays so."""
        self.db.execute("INSERT INTO bad_urls (url, reason, seen_at, expires_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT(url) DO UPDATE SET reason = excluded.reason, seen_at = excluded.seen_at, "
                        "expires_at = excluded.expires_at WHERE bad_urls.expires_at IS NOT NULL",
                        [url, reason, utc_now(), utc_now(seconds)])

    def forget_slow_url(self, url: str) -> None:
        """A page that answered in time is no longer slow (a bad-for-good mark is not touched)."""
        self.db.execute("DELETE FROM bad_urls WHERE url = ? AND expires_at IS NOT NULL", [url])

    def slow_until(self, url: str) -> str | None:
        """Until when a URL is remembered as slow (ISO 8601 UTC), or None."""
        row = self.db.execute(f"SELECT expires_at FROM bad_urls WHERE url = ? AND expires_at IS NOT NULL "
                              f"AND {_UNEXPIRED}", [url, utc_now()]).fetchone()
        return str(row[0]) if row else None

    # ---- evidence -------------------------------------------------------------------------

    def add_evidence(self, run_id: int, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        now = utc_now()
        self.db.table("evidence").insert_all([{**it, "run_id": run_id, "found_at": now} for it in items])

    def evidence(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM evidence WHERE run_id = ? ORDER BY id", [run_id]))

    def evidence_count(self, run_id: int, round_: int | None = None) -> int:
        """Evidence rows of a run, or of one round of it."""
        if round_ is None:
            return int(self.db.execute("SELECT count(*) FROM evidence WHERE run_id = ?", [run_id]).fetchone()[0])
        return int(self.db.execute("SELECT count(*) FROM evidence WHERE run_id = ? AND round = ?",
                                   [run_id, round_]).fetchone()[0])

    def drop_quotes(self, run_id: int, url: str, quotes: Collection[str]) -> int:
        """Remove a run's evidence rows of these quotes of one page (a longer quote of the page, kept after them,
        contains them); returns how many rows went."""
        if not quotes:
            return 0
        marks = ",".join("?" for _ in quotes)
        with self.immediate():
            cursor = self.db.execute(f"DELETE FROM evidence WHERE run_id = ? AND url = ? AND quote IN ({marks})",
                                     [run_id, url, *quotes])
        return int(cursor.rowcount)

    def drop_evidence(self, run_id: int, url: str) -> int:
        """Remove a run's evidence from one page (a page found distrusted); returns how many rows went."""
        with self.immediate():
            cursor = self.db.execute("DELETE FROM evidence WHERE run_id = ? AND url = ?", [run_id, url])
        return int(cursor.rowcount)

    # ---- health ---------------------------------------------------------------------------

    def integrity_check(self) -> str:
        return str(self.db.execute("PRAGMA integrity_check").fetchone()[0])

    def quick_check(self, max_lines: int = 20) -> list[str]:
        """`PRAGMA quick_check`: ["ok"], or up to `max_lines` lines naming the damage. It reads
        every page once (about a second per GB) but skips integrity_check's index cross-checks."""
        return [str(row[0]) for row in self.db.execute(f"PRAGMA quick_check({int(max_lines)})").fetchall()]

    @contextlib.contextmanager
    def busy_timeout(self, seconds: float) -> Iterator[None]:
        """Wait at most `seconds` for another process's lock during the block (then SQLite
        says "database is locked"), for callers that wait their own way and must stay
        responsive meanwhile; the usual BUSY_TIMEOUT_S is restored after."""
        conn = self.db.conn
        conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    # ---- pages read before, searched like a source ----------------------------------------

    def search_pages(self, text: str, max_age_s: float, limit: int) -> list[PassageRow]:
        """The stored web pages (http(s), read within `max_age_s`, not known bad) whose passages
        match free text, best BM25 first: one row a page, its best passage (search_pages_at)."""
        return _search_pages(self.db.conn, text, max_age_s, limit)

    def earlier_checkpoint(self, question: str, before_run_id: int,
                           brief_id: str | None = None) -> dict[str, Any] | None:
        """The last checkpoint (its final loop state) of the latest run before `before_run_id` that
        asked the same question and finished done: how a brief asked again learns how its earlier
        run's rounds went (daemon.decide.replayed_round)."""
        # the same id's own previous run first (what a re-run is compared with), else any id's
        sql = ("SELECT c.state FROM briefs b JOIN checkpoints c ON c.run_id = b.run_id WHERE b.question = ? "
               "AND b.run_id < ? AND b.state = 'done' {} ORDER BY b.run_id DESC LIMIT 1")
        row = (self.db.execute(sql.format("AND b.brief_id = ?"), [question, before_run_id, brief_id]).fetchone()
               if brief_id is not None else None) or self.db.execute(sql.format(""), [question, before_run_id]).fetchone()
        return json.loads(row[0]) if row else None


def search_pages_at(path: Path, text: str, max_age_s: float, limit: int) -> list[PassageRow]:
    """Store.search_pages on a connection of its own, so a loop can run it in a thread (WAL lets
    it read while the loop's connection writes): at 200,000 passages a query takes 0.1-0.3 s of
    CPU, which must not stop the event loop."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    try:
        return _search_pages(conn, text, max_age_s, limit)
    finally:
        conn.close()


def _search_pages(conn: sqlite3.Connection, text: str, max_age_s: float, limit: int) -> list[PassageRow]:
    """What a new brief finds in the store before the web lists it again (daemon.sources.store_hits
    decides which are on topic); library documents, archives and snippets are not pages read."""
    query = fts_or_query(text)
    if not query or limit <= 0:
        return []
    rows = conn.execute(
        f"""SELECT p.id, p.url, p.origin, p.seq, p.start, p."end", p.text, p.page
            FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid
            JOIN pages g ON g.url = p.url
            WHERE passages_fts MATCH ? AND p.origin = 'page'
              AND (p.url LIKE 'http://%' OR p.url LIKE 'https://%')
              AND g.error IS NULL AND COALESCE(g.checked_at, g.fetched_at) >= ?
              AND p.url NOT IN (SELECT url FROM bad_urls WHERE {_UNEXPIRED})
            ORDER BY bm25(passages_fts) LIMIT ?""",
        [query, utc_now(-min(max_age_s, 1e10)), utc_now(), limit * 20]).fetchall()
    best: dict[str, PassageRow] = {}
    for r in rows:
        if r[1] not in best:
            best[r[1]] = PassageRow(id=r[0], url=r[1], origin=r[2], seq=r[3], start=r[4], end=r[5], text=r[6], page=r[7])
    return list(best.values())[:limit]


_UNEXPIRED = "(expires_at IS NULL OR expires_at > ?)"  # ISO 8601 UTC strings of one format compare as times


def _age_seconds(iso: str | None) -> float:
    from datetime import datetime, timezone
    if not iso:
        return float("inf")
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return float("inf")
    return (datetime.now(timezone.utc) - then).total_seconds()


__all__ = ["Store", "BriefRow", "PageRow", "PassageRow", "QUEUED", "RUNNING", "DONE", "FAILED",
           "CANCELLED", "REJECTED", "utc_now", "sha256_hex"]
