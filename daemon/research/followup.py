"""Follow-ups and re-runs: a brief that starts where an earlier run ended (issue 12, parts 3 and 5).

A brief with `follows: ID` continues that brief: it starts from the evidence, estimate range and
open gaps of ID's latest run that finished `done`, aims its first queries at its `focus`, and
its report links to the earlier one. A brief asked again under the same id, with the same
question, context and focus, takes its last done run's plan instead of asking the model for
one: the plan prompt carries today's date, so the answer cache would never replay it, and a
scheduled re-run whose sources did not change should cost no model call at all.

Everything here is pure (plain data in, decisions out) except `check_follows`, the one store
read the inbox, `briefd submit` and the API share, and `check_follows_at_start`, the worker's.
The loop does the rest of the I/O (daemon/research/loop.py: Research.earlier_plan, start_follow_up,
follows_block).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from ...store import CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING

from ..rules import decide
from ..core.brief import Brief
from ..core.briefjson import BriefError
from ..report.markdown import followed_report

FIELD = "follows"
PLAN_READY = "plan ready"  # the event a run's plan is recorded with (Research.plan, Research.use_plan)
FOCUS_GAP = "focus"  # the id decide.fallback_queries gets for the focus (never stored: only its text is)
# evidence columns that belong to the run that stored a row, not to what it says
_RUN_COLUMNS = frozenset({"id", "run_id", "found_at", "round", "gap", "read_at", "reused_from"})
_AFTER_EVERY_RUN = 1 << 62  # a run id after every run: previous_report(id, it) is the latest done run
_NOT_DONE = {
    QUEUED: "is queued and has not run yet",
    RUNNING: "is running and has not finished yet",
    FAILED: "failed",
    CANCELLED: "was cancelled",
    REJECTED: "was rejected (its brief was not valid)",
}


class Runs(Protocol):
    """What check_follows reads from the store (store.Store has both)."""

    def latest_run(self, brief_id: str) -> Any: ...

    def previous_report(self, brief_id: str, before_run_id: int) -> tuple[int, dict[str, Any]] | None: ...


# ---- intake: may this brief follow that one? ---------------------------------------------------

def follows_refusal(follows: str, latest_state: str | None, has_done_report: bool) -> BriefError | None:
    """Why a brief may not follow `follows` (a BriefError naming the field, why and the fix), or None.

    `latest_state` is the state of `follows`'s latest run (None: no brief has that id);
    `has_done_report` whether one of its runs finished `done` with its report kept. A follow-up
    starts from a done run's evidence, so only such a run will do: a failed or cancelled one's
    evidence is partial. (The doors let a parent still queued or running through: check_follows.)
    Each fix says the follow-up may be submitted again at once, since it now waits for its parent."""
    if has_done_report:
        return None
    details = {"follows": follows, "state": latest_state}
    if latest_state is None:
        return BriefError(FIELD, f"follows names {follows!r}, and no brief with that id was ever received; "
                                 f"check the id: briefd list", details)
    if latest_state == DONE:  # done before this version kept reports (schema 7): nothing to start from
        return BriefError(FIELD, f"follows names {follows!r}, which finished before briefd kept its reports, so "
                                 f"there is nothing to start from; run it again (submit it with the same id), "
                                 f"then submit this follow-up once it is done", details)
    what = _NOT_DONE.get(latest_state, f"is {latest_state}")
    if latest_state in (QUEUED, RUNNING):
        fix = f"wait until {follows} is done (briefd status), then submit this brief again"
    elif latest_state == REJECTED:
        fix = (f"correct {follows} as its error.json says and submit it again, then this follow-up: it waits until "
               f"{follows} is done")
    else:
        fix = (f"run it again (briefd retry {follows}), then submit this follow-up again: it waits until "
               f"{follows} is done")
    return BriefError(FIELD, f"follows names {follows!r}, which {what}: a follow-up starts from a brief that "
                             f"finished done; {fix}", details)


def check_follows(store: Runs, brief: Brief) -> BriefError | None:
    """The doors' answer for a brief's `follows` (briefd submit, POST /briefs, the inbox): None when it
    has none or may follow it. A parent still queued or running is no refusal: the follow-up queues
    behind it (store.claim_next takes it once the parent has finished) and `check_follows_at_start`
    judges it then, so "submit both now" works without waiting by hand (issue 19 #17)."""
    if brief.follows is None:
        return None
    latest = store.latest_run(brief.follows)
    if latest is not None and latest.state in (QUEUED, RUNNING):
        return None
    return check_follows_at_start(store, brief)


def check_follows_at_start(store: Runs, brief: Brief) -> BriefError | None:
    """The daemon's answer when the follow-up's turn comes: only a parent run that finished done will do
    (one that failed, was cancelled or rejected meanwhile leaves nothing to start from)."""
    if brief.follows is None:
        return None
    latest = store.latest_run(brief.follows)
    found = latest_done(store, brief.follows)
    return follows_refusal(brief.follows, latest.state if latest is not None else None, found is not None)


def latest_done(store: Runs, brief_id: str) -> tuple[int, dict[str, Any]] | None:
    """The latest run of `brief_id` that finished done, with its report.json."""
    return store.previous_report(brief_id, _AFTER_EVERY_RUN)


# ---- the starting state ------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """A run's starting plan, as the plan step leaves it (and its `plan ready` event records it)."""

    research_question: str
    angles: list[str]
    gaps: list[str]
    queries: list[str]
    plan_relevance: float | None = None


def follow_up_plan(brief: Brief, parent: dict[str, Any]) -> Plan:
    """A follow-up's plan, without the model: the parent's research question (when the question is
    the same), its angles, its still-open gaps with the focus first, and first queries aimed at
    the focus, then the question. The parent's queries are not asked again (`asked_before`)."""
    same_question = _norm(parent.get("question")) == _norm(brief.question)
    research_question = str(parent.get("research_question") or "") if same_question else ""
    gaps = [str(g) for g in parent.get("gaps") or [] if str(g).strip()]
    if brief.focus:
        gaps = [brief.focus, *gaps]
    return Plan(research_question=research_question or brief.question,
                angles=[str(a) for a in parent.get("angles") or []],
                gaps=gaps or [f"direct answer to: {brief.question}"],
                queries=[*focus_queries(brief.question, brief.focus), brief.question],
                plan_relevance=None)


def focus_queries(question: str, focus: str) -> list[str]:
    """The focus as a search: its words after the question's first three, as a gap's fallback query
    is made (decide.fallback_queries), so "costs after 2024" searches what it is about."""
    if not focus.strip():
        return []
    return decide.fallback_queries(question, [decide.Gap(id=FOCUS_GAP, text=focus)])[1:]


def asked_before(parent: dict[str, Any]) -> list[str]:
    """The queries the parent searched: a follow-up does not ask them again."""
    return [str(q.get("text")) for q in parent.get("queries") or [] if isinstance(q, dict) and q.get("text")]


def units_match(parent: dict[str, Any], brief: Brief) -> bool:
    """Whether the parent's figures can be readings of this brief's estimate: both are estimates
    in the same unit (case and spacing aside)."""
    estimate = parent.get("estimate")
    if brief.estimate is None or not isinstance(estimate, dict):
        return False
    return _unit(estimate.get("unit")) == _unit(brief.estimate.unit)


def _norm(value: Any) -> str:
    """Text as compared between briefs: whitespace runs made one space (None: empty)."""
    return " ".join(str(value or "").split())


def _unit(value: Any) -> str:
    return _norm(value).casefold()


def carried_evidence(rows: Iterable[dict[str, Any]], parent_run_id: int, keep_figures: bool) -> list[dict[str, Any]]:
    """The parent's evidence rows as this run's round-0 rows: what they say (quote, source,
    labels) unchanged; `reused_from` the parent's run, `read_at` when the page was read (the
    parent's own reading date, kept through a chain of follow-ups). Without `keep_figures` (the
    units differ, or this brief is no estimate) a figure is dropped: it would not be a reading
    of this brief's range. The gap it answered was the parent's (ids differ here): not kept."""
    out = []
    for row in rows:
        item = {k: v for k, v in row.items() if k not in _RUN_COLUMNS}
        item.update(round=0, gap=None, reused_from=parent_run_id, read_at=row.get("read_at") or row.get("found_at"))
        if not keep_figures and (item.get("low") is not None or item.get("high") is not None):
            item.update(low=None, high=None, impact="neutral")
        out.append(item)
    return out


def visited_pages(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The pages the parent quoted: their quotes are carried, so reading them again would cost a
    model call for what is already known."""
    out: list[str] = []
    for row in rows:
        if row.get("url") and row["url"] not in out:
            out.append(str(row["url"]))
    return out


def follows_block(parent_id: str, parent: dict[str, Any]) -> dict[str, Any]:
    """report.json's `follows`: the earlier brief, when its run finished, and its report beside
    this one in the outbox (a relative path: the outbox can move)."""
    return {"id": parent_id, "finished_at": parent.get("finished_at"), "report": followed_report(parent_id)}


# ---- re-runs: the same brief again -------------------------------------------------------------

def same_brief(earlier: dict[str, Any], brief: Brief) -> bool:
    """Whether an earlier run asked what this one asks (question, context, focus, follows): then its
    plan is this run's plan. `earlier` is that run's normalised brief (Brief.to_json)."""
    return all(_norm(earlier.get(name)) == _norm(getattr(brief, name))
               for name in ("question", "context", "focus", "follows"))


def recorded_plan(events: Iterable[dict[str, Any]]) -> Plan | None:
    """The plan a run made, from its `plan ready` event (the last, if a resumed run made two)."""
    found = None
    for event in events:
        if event.get("type") == "signal" and event.get("message") == PLAN_READY:
            found = event
    if found is None or not isinstance(found.get("queries"), list):
        return None
    relevance = found.get("plan_relevance")
    return Plan(research_question=str(found.get("research_question") or ""),
                angles=[str(a) for a in found.get("angles") or []],
                gaps=[str(g) for g in found.get("gaps") or []],
                queries=[str(q) for q in found["queries"]],
                plan_relevance=float(relevance) if isinstance(relevance, (int, float)) else None)
