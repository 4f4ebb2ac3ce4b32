"""Questions asked again: when a brief with `every` runs next, between daemon.schedule (what
`every` means) and store.schedules (the series' rows and their one-transaction turns).

The inbox records an accepted brief through `record_accepted` (its series created, replaced or
ended with it); the daemon calls `start_due` between briefs and `run --once` when it starts.
Moments are parameters with "now" as their default, so tests run a series across weeks of a
simulated clock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from ...store import Store
from ...store.db import iso_utc
from ...store.schedules import Schedules, Series, Turn

from ..core.brief import Brief
from ..core.schedule import ScheduleError, parse_every

log = logging.getLogger("briefd")


def _moment(now: datetime | None) -> datetime:
    """`now` (or the clock) to the second: the store's timestamps have no finer grain."""
    return (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(microsecond=0)


def next_run(every: str, after: datetime) -> str:
    """The series' next run after `after`, in the store's format. Counted from the moment a run
    starts, never from the turns it missed: downtime costs one catch-up run, not a burst."""
    return iso_utc(parse_every(every).next_after(after))


def record_accepted(store: Store, brief: Brief, *, source_file: str, received: bytes, brief_json: str,
                    inbox_path: str, now: datetime | None = None) -> int:
    """Record an accepted brief; with `every` it is the first run of its series (created, or
    replacing one of the same id); without it, a series of its id goes on. One transaction."""
    moment = _moment(now)
    return Schedules(store).record_brief(
        brief_id=brief.id, question=brief.question, source_file=source_file, received=received,
        brief_json=brief_json, inbox_path=inbox_path, every=brief.every,
        next_run_at=next_run(brief.every, moment) if brief.every is not None else None, now=iso_utc(moment))


def start_due(store: Store, now: datetime | None = None) -> list[Turn]:
    """Take the turn of every series due at `now`: a new queued run each, or a skipped turn
    while its previous run is still queued or running. Returns what was done."""
    moment = _moment(now)
    stamp = iso_utc(moment)
    schedules = Schedules(store)
    turns: list[Turn] = []
    for series in schedules.due(stamp):
        try:
            following = next_run(series.every, moment)
        except ScheduleError as exc:  # accepted by a briefd that read `every` differently
            schedules.cancel(series.brief_id, stamp)
            log.warning("%s: its series ended: its schedule %r can no longer be read (%s); submit the brief "
                        "again with a valid `every` to go on", series.brief_id, series.every, exc)
            continue
        turn = schedules.take_turn(series.brief_id, now=stamp, next_run_at=following)
        if turn is None:
            continue
        turns.append(turn)
        if turn.run_id is None:
            log.info("%s: scheduled run skipped: its previous run (run %d) is still queued or running; "
                     "next run at %s", turn.brief_id, turn.busy_run, turn.next_run_at)
        else:
            log.info("%s: scheduled run started (run %d, every %s); next run at %s", turn.brief_id,
                     turn.run_id, series.every, turn.next_run_at)
    return turns


def end(store: Store, brief_id: str, now: datetime | None = None) -> Series | None:
    """`briefd cancel`: end the id's series; returns it as it was (None: it had no active series)."""
    return Schedules(store).cancel(brief_id, iso_utc(_moment(now)))


def active(store: Store) -> list[dict[str, object]]:
    """The active series as `briefd status --json` shows them, soonest next run first."""
    return [{"id": s.brief_id, "every": s.every, "next_run_at": s.next_run_at, "runs": s.runs,
             "last_run": s.last_run_id, "last_run_at": s.last_run_at, "last_run_state": s.last_run_state,
             "since": s.created_at} for s in Schedules(store).active()]
