"""How a brief that does not finish ends: the report of a failed or cancelled run, and `briefd cancel`.

Why a module of its own (issue 20 #4): both doors that end a brief need it. The daemon's worker ends a
run that failed or was cancelled while it ran (Daemon.run_brief); `briefd cancel` and `POST
/briefs/{id}/cancel` (ops/actions.py) end a queued brief that never started, with no daemon involved.
When this lived in worker.py, actions imported the whole daemon inside a function to reach it, which
closed an import circle. Here it sits below both: it imports the report and the store, never a door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...store import CANCELLED, BriefRow, Store, utc_now
from . import onfinish
from ..core.brief import Brief, parse_brief
from ..core.briefjson import BriefError
from ..core.events import EventLog
from ..core.files import atomic_write_bytes
from ..core.settings import Settings
from ..research.policy import policy_for
from ..report.outbox import archive_previous, safe_outdir, write_report
from ..report.report import REPORT_KEYS, blank_report, history_row

if TYPE_CHECKING:  # only its round counts are read
    from ..research.loop import Research


def brief_of(store: Store, run: BriefRow) -> Brief:
    """The brief as it was accepted (validated again: the bytes are the record)."""
    return parse_brief(store.received_bytes(run.run_id), run.source_file)


CANCEL_NOTE = ("Cancelled at the requester's request (briefd cancel) after {rounds} finished round{s} "
               "(of at most {max_rounds}): this report holds everything found until then. The model "
               "was not asked for a summary after the cancel.")
CANCEL_UNSTARTED_NOTE = ("Cancelled at the requester's request (briefd cancel) before it started: "
                         "nothing was searched or read.")
FAILED_NOTE = "The brief failed before its summary was written: this report holds everything found until then."


def ended_report(run: BriefRow, settings: Settings, *, status: str, stop_reason: str,
                 error: str | None, note: str | None, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report of a brief that did not finish (failed or cancelled): one shape for all.

    `report.blank_report` (every key of a done report) filled with what is known: the run,
    the model and search service it used, and `found`, the research so far
    (Research.report_so_far) when there was any. docs/contract.md's readers can then rely on
    the same keys whatever the status.
    """
    report = blank_report(run.brief_id, run.source_file, run.question, run.started_at, status=status)
    if found is not None:
        report.update({key: found[key] for key in REPORT_KEYS if key in found})
    report.update(id=run.brief_id, source_file=run.source_file, status=status, stop_reason=stop_reason,
                  error=error, finished_at=utc_now(), model=settings.model, disclaimer=note)
    if found is None or "web" in (found.get("searched") or ["web"]):  # SearXNG named only where it was used
        report["searxng_url"] = settings.searxng_url
    return report


def kind_of(brief: Brief | None) -> str | None:
    """The brief's kind as `briefd list` shows it (plain, estimate, hypothesis): its policy's."""
    return policy_for(brief).kind if brief is not None else None


def cancel_note(research: Research) -> str:
    rounds = research.state.round
    return CANCEL_NOTE.format(rounds=rounds, s="" if rounds == 1 else "s", max_rounds=research.brief.max_rounds)


def cancel_brief(settings: Settings, store: Store, brief_id: str) -> BriefRow | None:
    """`briefd cancel`: stop a queued or running brief (None when it is neither).

    A queued brief that never started ends here, with its report (the full shape, empty
    research), brief.json and events.ndjson in the outbox, as a daemon would have
    written them. Anything that had started is flagged for the daemon, which stops it at
    its next step and keeps what it found (Daemon.run_brief).
    """
    event = ("cancelled", {"state": CANCELLED, "stop_reason": CANCELLED, "reason": CANCEL_UNSTARTED_NOTE})
    ended: dict[str, Any] = {}

    def history(queued: BriefRow) -> dict[str, Any]:
        """The report of the run as it ends, and its `reports` row (saved with the end: one transaction)."""
        try:
            ended["brief"] = brief_of(store, queued)
        except BriefError:
            ended["brief"] = None
        ended["report"] = ended_report(queued, settings, status=CANCELLED, stop_reason=CANCELLED, error=None,
                                       note=CANCEL_UNSTARTED_NOTE)
        return history_row(ended["report"], kind_of(ended["brief"]))

    run = store.request_cancel(brief_id, event, report=history)
    if run is None or run.state != CANCELLED:
        return run
    outdir = safe_outdir(settings.outbox, run.brief_id)
    archive_previous(outdir)  # an earlier run's report under this id is kept, never overwritten
    atomic_write_bytes(outdir / "brief.json", store.received_bytes(run.run_id))
    EventLog(store, run.run_id, run.brief_id, outdir / "events.ndjson").resync()
    brief: Brief | None = ended["brief"]
    write_report(outdir, ended["report"], brief.formats if brief else ("json", "md"))
    if settings.on_finish:  # the command line has no event loop to run it beside: it runs now
        onfinish.run_now(settings.on_finish, onfinish.Ended(run.brief_id, CANCELLED, outdir,
                                                              onfinish.answer_found(ended["report"])),
                         settings.on_finish_timeout_s)
    return run


