"""A brief's event log: one JSON object a line in outbox/<id>/events.ndjson, and in the store.

The store is the record (seq numbers come from it, gap-free per run); the file is
appended live so `tail -f` follows a brief. On resume after a crash the file is
rewritten from the store first, so it never lacks an event the store has.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from ...store import Store

from . import crashpoints
from .files import atomic_write_text, make_folders, open_append

log = logging.getLogger("briefd")


class EventLog:
    def __init__(self, store: Store, run_id: int, brief_id: str, path: Path) -> None:
        self.store = store
        self.run_id = run_id
        self.brief_id = brief_id
        self.path = Path(path)

    def resync(self) -> None:
        """Rewrite the file from the store (used when a run resumes)."""
        lines = [json.dumps(e, ensure_ascii=False) for e in self.store.events(self.run_id)]
        atomic_write_text(self.path, "".join(line + "\n" for line in lines))

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        seq, at = self.store.add_event(self.run_id, type_, fields)
        return self._show(seq, at, type_, fields)

    def finish(self, type_: str, *, state: str, stop_reason: str | None, error: str | None = None,
               history: dict[str, Any] | None = None, **fields: Any) -> None:
        """The run's last event, committed together with its end state (see Store.finish).

        The event carries `state`, `stop_reason` and, when there is one, `error`. The line
        is appended before the commit: a crash in between leaves a running
        brief whose resume rewrites the file from the store, so the file never ends up
        with two final events or a finished brief with none.
        """
        # the final event says how the run ended and why, like the store's row does
        fields = {"state": state, "stop_reason": stop_reason, **({"error": error} if error else {}), **fields}

        def append(seq: int, at: str) -> None:
            self._show(seq, at, type_, fields)
            crashpoints.reached("final_event")

        self.store.finish(self.run_id, state=state, stop_reason=stop_reason, error=error,
                          event=(type_, fields), before_commit=append, report=history)

    def _show(self, seq: int, at: str, type_: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Append the event to the live file and the daemon's log."""
        event = {"seq": seq, "at": at, "type": type_, **fields}
        line = json.dumps(event, ensure_ascii=False)
        try:
            make_folders(self.path.parent)
            with os.fdopen(open_append(self.path), "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:  # the store has it; the file is a live view
            log.warning("%s: could not append to %s: %s", self.brief_id, self.path, exc)
        # a wait is said once per outage by daemon.outages; each brief's retries only at debug
        log.log(logging.DEBUG if type_ == "waiting" else logging.INFO, "%s %s %s", self.brief_id, type_,
                _brief(fields))
        return event


def _brief(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."


class LoggedOnly(EventLog):
    """A finished brief's events: its report is made and its event file ends with it, so what
    still happens on its behalf (a straggler's fetch ending, daemon.loop.Research.hand_over) goes
    to the daemon's log only."""

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        log.debug("%s (after its report): %s %s", self.brief_id, type_, fields)
        return {"type": type_, **fields}
