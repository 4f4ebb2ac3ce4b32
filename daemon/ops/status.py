"""What `briefd status` and the HTTP API's `GET /status` and `GET /briefs/{id}` say of the daemon and of
the briefs it works on: read from the store and the daemon's lock, for both doors, in one place. Opening the
store for reading (`open_store`, `from_history`: briefd list and search too) lives here, not in actions, so the
commands that only read load nothing of what submit, cancel and retry need (follow-ups, the report writer,
the model client): about 0.5 s at every start."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.settings import Settings
from ...store import DONE, QUEUED, RUNNING, Store
from ...store.history import BriefEntry, History
from ..core.files import lock_holder, store_lock_path
from ..intake import series
from ..intake.names import not_briefs

ORPHANED = "daemon not running: will resume when it starts"
NO_ANSWER = "no answer found"  # a done run whose report found none: list's state says so beside "done"


def open_store(settings: Settings) -> Store | None:
    """The store at settings.db, or None when none exists yet (nothing was ever accepted). Here, not in
    actions, so `briefd status` reads the store without loading what submit, cancel and retry need."""
    if not Path(settings.db).exists():
        return None
    return Store(settings.db)


T = TypeVar("T")


def from_history(settings: Settings, read: Callable[[History], list[T]]) -> list[T] | None:
    """What `read(History(store))` gives (briefd list and search, GET /briefs and /search), the store
    closed after; None when there is no store yet (nothing was ever accepted)."""
    store = open_store(settings)
    if store is None:
        return None
    try:
        return read(History(store))
    finally:
        store.close()


def daemon_data(settings: Settings) -> dict[str, Any]:
    """Whether a daemon holds the store (files.lock_holder): `running` (None: cannot tell), its pid
    (or the last daemon's, when none runs), the lock file."""
    state = lock_holder(store_lock_path(settings.db))
    return {"running": state.held, "pid": state.pid, "lock": str(state.path)}


def progress_of(checkpoint: dict[str, Any], events_round: int | None = None) -> dict[str, Any]:
    """What a running brief's checkpoint says about its progress (the fields `briefd status` shows).

    `round` is the round its events are in (Store.events_round, when the caller has it), else the
    round the checkpoint has under way, else the rounds it finished: the checkpoint's own `round`
    counts finished rounds, so it said "round 1" while the brief searched in round 2 (issue 19 #16)."""
    started = (checkpoint.get("current_round") or {}).get("round")
    under_way = max(checkpoint.get("round", 0), started or 0)
    return {"round": under_way if events_round is None else events_round, "phase": checkpoint.get("phase", "plan"),
            "next_action": checkpoint.get("next_action"), "why": checkpoint.get("why"),
            "estimate": (checkpoint.get("estimate_history") or [None])[-1],
            "remaining": checkpoint.get("remaining", {}),
            "open_gaps": [g["text"] for g in checkpoint.get("gaps", []) if g.get("answered_round") is None]}


def status_data(settings: Settings) -> dict[str, Any]:
    """`briefd status --json` and `GET /status`: the daemon, the queue, each running brief's progress."""
    daemon = daemon_data(settings)
    strays = not_briefs(Path(settings.inbox))  # files and folders in the inbox that will never be taken
    store = open_store(settings)
    if store is None:
        return {"counts": {}, "running": [], "queued": [], "series": [], "database": str(settings.db),
                "exists": False, "daemon": daemon, "inbox_not_briefs": strays}
    try:
        running = []
        for row in store.briefs_in_state(RUNNING):
            cp = store.load_checkpoint(row.run_id) or {}
            running.append({
                "id": row.brief_id, "run": row.run_id, "run_number": store.run_number(row.run_id),
                **progress_of(cp, store.events_round(row.run_id)),
                "waiting_for": row.waiting_for, "started_at": row.started_at, "attempts": row.attempts,
                "plan_relevance": cp.get("plan_relevance"),
                "asked": cp.get("asked", []), "visited": len(cp.get("visited", [])),
                "bad_urls": len(cp.get("bad", {})), "evaluator_failures": cp.get("evaluator_failures", 0),
                "daemon_running": daemon["running"], "note": ORPHANED if daemon["running"] is False else None,
            })
        queued = [{"id": r.brief_id, "run": r.run_id, "run_number": store.run_number(r.run_id),
                   "accepted_at": r.accepted_at,
                   "waiting_for": r.waiting_for}
                  for r in store.briefs_in_state(QUEUED)]
        return {"counts": store.counts_by_state(), "running": running, "queued": queued,
                "series": series.active(store), "database": str(settings.db), "exists": True, "daemon": daemon,
                "inbox_not_briefs": strays}
    finally:
        store.close()


def state_cell(entry: BriefEntry) -> str:
    """`briefd list`'s STATE: the state, why it stopped, and, for a done run whose report found no
    answer (report.json's answer.found), that it found none: "done" alone read as answered for an
    estimate left at its own prior."""
    state = f"{entry.state}: {entry.stop_reason}" if entry.stop_reason not in (None, entry.state) else entry.state
    return f"{state}, {NO_ANSWER}" if entry.answer_found is False and entry.state == DONE else state
