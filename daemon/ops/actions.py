"""What a user asks of the queue, whichever door they use: the command line or the HTTP API.

`briefd submit` and `POST /briefs` are two doors to one queue, the inbox: a brief is checked
the same way (the schema, and a follow-up's earlier brief) and dropped into the inbox the same
way (a temp name, then a rename), and the daemon takes it from there as it takes any file.
Cancel and retry likewise: one function each, an `Outcome` that the CLI prints and the API
returns as JSON, so the two can never answer the same request differently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Collection
from typing import BinaryIO

from ..core.brief import Brief, parse_brief
from ..core.settings import Settings
from ..core.files import WriteFailed, atomic_write_with, folder_lock, lock_holder, make_folders
from ..core.untrusted import terminal_text
from ..intake import series
from ..intake.inbox import LOCK_NAME
from ..research.followup import check_follows
from ..sources.sources import refusal
from .ending import cancel_brief
from .status import open_store



@dataclass(frozen=True)
class Outcome:
    """The answer to a request: `ok`, the lines a person reads, and the run it touched (if any).

    `found` is False when the id names nothing the request can act on (the API's 404/409 differ
    by it: an unknown id against a brief in the wrong state).
    """

    ok: bool
    lines: list[str] = field(default_factory=list)
    run: int | None = None
    state: str | None = None
    found: bool = True


def check_brief(settings: Settings, data: bytes, name: str, ahead: Collection[str] = ()) -> Brief:
    """The brief in `data` as the daemon will read it, or BriefError naming the field and the fix.

    Whatever the daemon's inbox would refuse beyond the schema is refused here by the same rule, so
    a door never answers "accepted" for a brief the daemon then rejects: a source these settings
    cannot search (sources.refusal: `"library"` with no library, `"web"` under egress = none), and a
    follow-up of an earlier brief that never finished done (followup.check_follows), when the store
    can be read. A follow-up of a brief still queued or running is accepted: it queues behind it;
    so is one of a brief in `ahead`, the ids going into the inbox before it in the same request
    (`briefd submit parent.json child.json`): the inbox takes files oldest first, the parent first.
    """
    brief = parse_brief(data, name)
    unavailable = refusal(brief, settings)
    if unavailable is not None:
        raise unavailable
    if brief.follows is None or brief.follows in ahead:
        return brief
    try:
        store = open_store(settings)
        if store is None:
            return brief
        try:
            refused = check_follows(store, brief)
        finally:
            store.close()
    except Exception:  # noqa: BLE001 - a store this door cannot read (locked, damaged, newer): the daemon decides
        return brief
    if refused is not None:
        raise refused
    return brief


def unserved_inbox(settings: Settings) -> str | None:
    """What to tell someone about to drop a brief into an inbox no daemon serves (None: one does, or
    that cannot be told). Its lock (inbox.LOCK_NAME) is held by `briefd run` and `run --once` while
    they run; without one the brief waits, which is right for cron's `run --once` and wrong for a
    `briefd submit` run from a folder the daemon does not use (it made ./inbox there, silently)."""
    inbox = Path(settings.inbox).absolute()
    if lock_holder(inbox / LOCK_NAME).held is not False:
        return None
    made = "" if inbox.is_dir() else " (it did not exist: it is made now)"
    return (f"no daemon serves the inbox {inbox}{made}, so the brief waits there until briefd run (or cron's "
            f"briefd run --once) starts with this inbox; briefd status says whether a daemon runs. If one runs "
            f"elsewhere, submit with its inbox (--inbox, BRIEFD_INBOX) or from its folder")


def drop_into_inbox(inbox: Path, name: str, data: bytes, after: Path | None = None) -> Path:
    """Write `data` into the inbox as `name` (or name-2, name-3 ... when taken), whole or not at all.

    `after`: a file this request dropped just before, which the daemon must take first (a follow-up's
    parent). The inbox takes the oldest file first, then by name, and two files written within one
    tick of the kernel's coarse clock share their mtime ("kestrel-more.json" then sorts before
    "kestrel.json"), so this file's mtime is set past that one's before it is renamed into place.

    The files module's atomic write: a temp name the daemon ignores, then a rename; with the mode
    any file gets (0644 under umask 022), so a daemon running as another user can read it.
    Choosing the free name and renaming onto it happen under one lock (an flock on the inbox
    folder), so two submissions of the same name at once (two `briefd submit`, a double click in
    the web page, concurrent POSTs) get two files: a rename replaces what it lands on, and
    without the lock both saw the same name free and one brief was lost.
    Raises OSError when the inbox cannot be written.
    """
    make_folders(inbox)
    with folder_lock(inbox):
        target = free_name(inbox, name if name.lower().endswith(".json") else name + ".json")

        def write(handle: BinaryIO) -> str:
            handle.write(data)
            if after is not None:
                handle.flush()  # no later write may stamp the mtime again
                _stamp_after(handle.fileno(), after.stat().st_mtime_ns)
            return target.name

        return atomic_write_with(inbox, write, hint=target.name)


def _stamp_after(fd: int, earlier_ns: int) -> None:
    """The open file's mtime made later than `earlier_ns` when the clock has not moved past it yet."""
    st = os.fstat(fd)
    if st.st_mtime_ns <= earlier_ns:
        os.utime(fd, ns=(st.st_atime_ns, earlier_ns + 1))


def free_name(folder: Path, name: str) -> Path:
    """`folder/name`, or the first of name-2, name-3 ... that does not exist yet."""
    target = folder / name
    stem, suffix = target.stem, target.suffix
    n = 2
    while target.exists():
        target = folder / f"{stem}-{n}{suffix}"
        n += 1
    return target


def retry(settings: Settings, brief_id: str) -> Outcome:
    """Re-queue the latest failed or cancelled run of `brief_id`, from its last checkpoint."""
    store = open_store(settings)
    if store is None:
        return Outcome(False, [f"no database at {settings.db}: nothing has been accepted yet"], found=False)
    try:
        latest = store.latest_run(brief_id)
        run = store.retry(brief_id)
    finally:
        store.close()
    if run is None:
        if latest is None:
            return Outcome(False, [f"no brief with id '{brief_id}' (briefd list shows them)"], found=False)
        return Outcome(False, [f"'{brief_id}' has no failed or cancelled run to retry (it is {latest.state})"],
                       run=latest.run_id, state=latest.state)
    return Outcome(True, [f"{brief_id}: re-queued (run {run.run_id}); it resumes from its last checkpoint"],
                   run=run.run_id, state=run.state)


def cancel(settings: Settings, brief_id: str) -> Outcome:
    """Stop a queued or running brief, and end its series when it is asked again on a schedule.

    A cancelled queued brief gets its report at once; a running one stops at its next step and
    its report keeps what was found so far. The series ends first, so no turn of it starts
    while its run is being cancelled.
    """
    store = open_store(settings)
    if store is None:
        return Outcome(False, [f"no database at {settings.db}: nothing has been accepted yet"], found=False)
    lines: list[str] = []
    try:
        ended = series.end(store, brief_id)
        if ended is not None:
            times = f"{ended.runs} run{'' if ended.runs == 1 else 's'}"
            lines.append(terminal_text(f"{brief_id}: its series ended (every {ended.every}, after {times}): "
                                       "it is not asked again"))
        run = cancel_brief(settings, store, brief_id)
        latest = store.latest_run(brief_id) if run is None else None
    except (WriteFailed, OSError, ValueError) as exc:  # cancelled in the store; the outbox refused the report
        return Outcome(True, [*lines, f"'{brief_id}' is cancelled, but its report could not be written: {exc}"],
                       state="cancelled")
    finally:
        store.close()
    if run is None:
        if ended is not None:
            return Outcome(True, [*lines, f"{brief_id}: no run of it is queued or running"])
        if latest is None:
            return Outcome(False, [f"no brief with id '{brief_id}' (briefd list shows them)"], found=False)
        return Outcome(False, [f"'{brief_id}' is not queued or running (it is {latest.state}), "
                               "and is not asked again on a schedule"], run=latest.run_id, state=latest.state)
    if run.state == "cancelled":
        lines.append(f"{brief_id}: cancelled before it started; report in {settings.outbox / brief_id}")
    else:
        lines.append(f"{brief_id}: will stop at its next step; its report keeps what was found so far")
    return Outcome(True, lines, run=run.run_id, state=run.state)
