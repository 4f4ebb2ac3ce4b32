"""Series: a brief with `every` asked again on its schedule (issue 12), kept in the store so that
the schedule survives restarts.

SQL only. When a run is due is the daemon's to compute (daemon/intake/series.py, with
daemon/core/schedule.py's reading of `every`): it hands the moments in, in the store's one timestamp
format, and this module never reads a clock of its own (`now` is always a parameter, so tests
pass a simulated one).

- One series per brief id (`schedules`, primary key brief_id). Accepting a brief with `every`
  creates or replaces its series, in the same transaction as the accepted brief's run, so a crash
  never leaves a run without its series; one without `every` is one more run of the id, and the
  series goes on (a resubmission by hand is a re-run like a scheduled one: only cancel ends it).
- A due series gets a new queued run of its id, recorded from the bytes the series was accepted
  with as the inbox records a brief (Store.add_brief), and its next run moved on, in ONE
  transaction: a crash leaves both or neither, never a run started twice or a turn lost.
- Never a burst: the caller counts the next run from the moment the due one starts, not from the
  turns it missed, so any length of downtime costs one catch-up run.
- A series whose previous run is still queued or running is not run again on top of it: that
  turn is skipped, and the next one scheduled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .briefs import Store

# What a series run's row keeps as its inbox path: it never was a file in the inbox.
NO_INBOX_FILE = ""


@dataclass(frozen=True)
class Series:
    """A `schedules` row, with the state of its last run (for `briefd status`)."""

    brief_id: str
    every: str
    created_at: str
    next_run_at: str
    runs: int
    last_run_id: int | None
    last_run_at: str | None
    last_run_state: str | None
    cancelled_at: str | None


@dataclass(frozen=True)
class Turn:
    """What became of a due series' turn: `run_id` is its new run, or None when the turn was
    skipped because `busy_run` (its previous run) is still queued or running."""

    brief_id: str
    run_id: int | None
    next_run_at: str
    busy_run: int | None = None


_SELECT = ("SELECT s.brief_id, s.every, s.created_at, s.next_run_at, s.runs, s.last_run_id, s.last_run_at, "
           "s.cancelled_at, b.state AS last_run_state FROM schedules s "
           "LEFT JOIN briefs b ON b.run_id = s.last_run_id")


def _series(row: dict[str, Any]) -> Series:
    return Series(brief_id=row["brief_id"], every=row["every"], created_at=row["created_at"],
                  next_run_at=row["next_run_at"], runs=int(row["runs"] or 0), last_run_id=row["last_run_id"],
                  last_run_at=row["last_run_at"], last_run_state=row["last_run_state"],
                  cancelled_at=row["cancelled_at"])


@dataclass
class Schedules:
    """SQL for series, over one Store (the same thread-bound connection)."""

    store: Store

    def record_brief(self, *, brief_id: str, question: str, source_file: str, received: bytes,
                     brief_json: str, inbox_path: str, every: str | None, next_run_at: str | None,
                     now: str) -> int:
        """Record an accepted brief (Store.add_brief) and what it does to its id's series, in one
        transaction: with `every`, this run is the series' first and the next is at `next_run_at`
        (a series of the same id is replaced); without, the series of its id (if any) goes on."""
        with self.store.immediate():
            run_id = self.store.add_brief(brief_id=brief_id, question=question, source_file=source_file,
                                          received=received, brief_json=brief_json, inbox_path=inbox_path)
            if every is None:
                return run_id
            assert next_run_at is not None, "a series needs its next run"
            self.store.db.table("schedules").upsert({
                "brief_id": brief_id, "every": every, "brief_json": brief_json, "received_bytes": received,
                "source_file": source_file, "created_at": now, "next_run_at": next_run_at,
                "last_run_id": run_id, "last_run_at": now, "runs": 1, "cancelled_at": None,
            }, pk="brief_id")
            self.store.db.execute("UPDATE briefs SET every = ? WHERE run_id = ?", [every, run_id])
            return run_id

    def get(self, brief_id: str) -> Series | None:
        rows = list(self.store.db.query(f"{_SELECT} WHERE s.brief_id = ?", [brief_id]))
        return _series(rows[0]) if rows else None

    def active(self) -> list[Series]:
        """Every series not ended, soonest next run first (`briefd status`)."""
        return [_series(r) for r in self.store.db.query(
            f"{_SELECT} WHERE s.cancelled_at IS NULL ORDER BY s.next_run_at, s.brief_id")]

    def due(self, now: str) -> list[Series]:
        """The active series whose next run is at or before `now`, longest overdue first."""
        return [_series(r) for r in self.store.db.query(
            f"{_SELECT} WHERE s.cancelled_at IS NULL AND s.next_run_at <= ? ORDER BY s.next_run_at, s.brief_id",
            [now])]

    def take_turn(self, brief_id: str, *, now: str, next_run_at: str) -> Turn | None:
        """Start a due series' run, or skip its turn while its previous run is still queued or
        running; either way its next run becomes `next_run_at`. One transaction. None when the
        series is not due at `now` (ended, or taken meanwhile)."""
        db = self.store.db
        with self.store.immediate():
            rows = list(db.query("SELECT * FROM schedules WHERE brief_id = ? AND cancelled_at IS NULL "
                                 "AND next_run_at <= ?", [brief_id, now]))
            if not rows:
                return None
            series = rows[0]
            busy = db.execute("SELECT run_id FROM briefs WHERE brief_id = ? AND state IN ('queued', 'running') "
                              "ORDER BY run_id DESC LIMIT 1", [brief_id]).fetchone()
            if busy is not None:
                db.execute("UPDATE schedules SET next_run_at = ? WHERE brief_id = ?", [next_run_at, brief_id])
                return Turn(brief_id, None, next_run_at, busy_run=busy[0])
            run_id = self._queue_run(series, now)
            db.execute("UPDATE schedules SET next_run_at = ?, last_run_id = ?, last_run_at = ?, runs = runs + 1 "
                       "WHERE brief_id = ?", [next_run_at, run_id, now, brief_id])
            return Turn(brief_id, run_id, next_run_at)

    def _queue_run(self, series: dict[str, Any], now: str) -> int:
        """A queued run of the series' brief, as the inbox records one, marked as started by the
        schedule in its events (inside take_turn's transaction)."""
        received = bytes(series["received_bytes"] or b"")
        brief_json: str = series["brief_json"]
        run_id = self.store.add_brief(
            brief_id=series["brief_id"], question=str(json.loads(brief_json).get("question") or ""),
            source_file=series["source_file"] or "", received=received, brief_json=brief_json,
            inbox_path=NO_INBOX_FILE)
        self.store.mark_inbox_removed(run_id)  # no file to tidy at start-up: it never was in the inbox
        self.store.db.execute("UPDATE briefs SET every = ? WHERE run_id = ?", [series["every"], run_id])
        self.store._insert_event(run_id, "signal", {
            "message": "started by its schedule", "every": series["every"], "due_at": series["next_run_at"],
            "started_at": now, "series_run": int(series["runs"] or 0) + 1})
        return run_id

    def cancel(self, brief_id: str, now: str) -> Series | None:
        """`briefd cancel`: end the id's active series (its rows stay, with `cancelled_at`).
        Returns the series as it was, or None when the id has no active series."""
        with self.store.immediate():
            series = self.get(brief_id)
            if series is None or series.cancelled_at is not None:
                return None
            self._end(brief_id, now)
            return series

    def _end(self, brief_id: str, now: str) -> None:
        self.store.db.execute("UPDATE schedules SET cancelled_at = ? WHERE brief_id = ? AND cancelled_at IS NULL",
                              [now, brief_id])
