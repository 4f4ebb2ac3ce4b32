"""Follow-ups and re-runs (issue 12, part 3 and part 5's re-run plan): a brief that says `follows`
starts from the earlier brief's evidence, range and open gaps, and its report links to the
earlier one; a follow-up of a brief that never finished done is rejected with the fix; a brief
asked again with the same question, context and focus takes its last plan instead of asking
the model for one.

The pure parts of daemon/research/followup.py first (with a real store where the decision reads one),
then the real daemon on the lab: parents run first, follow-ups and a re-run in later passes of
`briefd run --once` over the same store, as a user would drop them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.rules import judge
from briefd.daemon.core.brief import parse_brief
from briefd.daemon.research.followup import (
    FIELD,
    carried_evidence,
    check_follows,
    focus_queries,
    follow_up_plan,
    follows_refusal,
    recorded_plan,
    same_brief,
    units_match,
)
from briefd.daemon.report.html import render_html, valid_link
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.report import USAGE_KEYS, history_row
from briefd.store import CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING, Store
from tests.conftest import Workspace, researched
from lab.corpus import TOPICS
from tests.e2e.test_decisions_e2e import NORTHGATE
from tests.report.test_report import realistic_report

KESTREL = {"question": TOPICS["kestrel"].question, "depth": "standard"}


def brief_of(**fields: Any) -> Any:
    return parse_brief(json.dumps({"question": "Why was the Kestrel River bridge closed in 2025?", **fields}).encode(),
                       "child.json")


# ---- intake --------------------------------------------------------------------------------------

@pytest.mark.parametrize("state, fix", [
    (None, "check the id: briefd list"),
    (QUEUED, "wait until parent is done"),
    (RUNNING, "wait until parent is done"),
    (FAILED, "briefd retry parent"),
    (CANCELLED, "briefd retry parent"),
    (REJECTED, "as its error.json says"),
    (DONE, "run it again"),  # done before the store kept reports: nothing to start from
])
def test_a_follow_up_of_a_brief_without_a_done_run_is_refused_naming_the_field_and_the_fix(state, fix) -> None:
    refused = follows_refusal("parent", state, has_done_report=False)
    assert refused is not None and refused.field == FIELD == "follows"
    assert fix in str(refused) and "'parent'" in str(refused)


def test_a_follow_up_of_a_brief_with_a_done_run_is_accepted_whatever_its_latest_run_does() -> None:
    for state in (DONE, QUEUED, RUNNING, FAILED):
        assert follows_refusal("parent", state, has_done_report=True) is None


def _finished(store: Store, brief_id: str, state: str) -> int:
    run_id = store.add_brief(brief_id=brief_id, question="q", source_file=f"{brief_id}.json", received=b"{}",
                             brief_json="{}", inbox_path=f"/nowhere/{brief_id}.json")
    report = {**realistic_report(), "id": brief_id, "status": state}
    store.finish(run_id, state=state, stop_reason="max_rounds", report=history_row(report, None))
    return run_id


def test_the_store_decides_whether_a_follow_up_may_start(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    try:
        child = brief_of(follows="parent")
        assert "briefd list" in str(check_follows(store, child))
        _finished(store, "parent", FAILED)
        assert "failed" in str(check_follows(store, child))
        _finished(store, "parent", DONE)
        assert check_follows(store, child) is None
        _finished(store, "parent", FAILED)  # a later run failed: the done one is still there to start from
        assert check_follows(store, child) is None
        assert check_follows(store, brief_of()) is None, "no follows: nothing to check"
    finally:
        store.close()


# ---- the starting state --------------------------------------------------------------------------

PARENT_ROW = {"id": 7, "run_id": 3, "round": 2, "url": "http://a.example/x", "title": "A", "passage_id": 11,
              "origin": "page", "quote": "The overrun was USD 431 million.", "quote_start": 0, "quote_end": 30,
              "summary": "s", "confidence": 0.9, "stance": None, "impact": "narrows_both", "gap": "G2",
              "low": 431.0, "high": 431.0, "tier": "official", "unit": "USD million", "scope": None,
              "reading_date": None, "page": None, "found_at": "2026-11-01T10:00:00Z", "read_at": None,
              "reused_from": None}


def test_carried_evidence_keeps_what_the_parent_read_and_when() -> None:
    [row] = carried_evidence([PARENT_ROW], parent_run_id=3, keep_figures=True)
    assert row["quote"] == PARENT_ROW["quote"] and (row["low"], row["high"]) == (431.0, 431.0)
    assert (row["round"], row["reused_from"], row["read_at"]) == (0, 3, "2026-11-01T10:00:00Z")
    assert "id" not in row and "run_id" not in row and row["gap"] is None
    [again] = carried_evidence([{**row, "id": 9, "run_id": 5}], parent_run_id=5, keep_figures=True)
    assert again["read_at"] == "2026-11-01T10:00:00Z", "a chain of follow-ups keeps the first reading's date"


def test_figures_in_another_unit_are_not_carried_as_readings() -> None:
    [row] = carried_evidence([PARENT_ROW], parent_run_id=3, keep_figures=False)
    assert (row["low"], row["high"], row["impact"]) == (None, None, "neutral")
    assert row["quote"] == PARENT_ROW["quote"]
    parent = {"estimate": {"unit": "USD million"}}
    assert units_match(parent, parse_brief(json.dumps(NORTHGATE).encode(), "n.json"))
    other = {**NORTHGATE, "estimate": {**NORTHGATE["estimate"], "unit": "EUR million"}}
    assert not units_match(parent, parse_brief(json.dumps(other).encode(), "n.json"))


def test_a_follow_up_aims_its_first_query_and_gap_at_its_focus() -> None:
    parent = {"question": TOPICS["kestrel"].question, "research_question": "What closed the bridge?",
              "angles": ["engineering"], "gaps": ["who inspected it"]}
    plan = follow_up_plan(brief_of(follows="kestrel", focus="repair cost estimate"), parent)
    assert plan.gaps == ["repair cost estimate", "who inspected it"]
    assert plan.queries[0] == focus_queries(TOPICS["kestrel"].question, "repair cost estimate")[0]
    assert {"repair", "cost", "estimate"} <= set(plan.queries[0].split()) and plan.queries[-1] == TOPICS["kestrel"].question
    assert (plan.research_question, plan.angles) == ("What closed the bridge?", ["engineering"])
    elsewhere = follow_up_plan(brief_of(question="What will the repair cost?", follows="kestrel"), parent)
    assert elsewhere.research_question == "What will the repair cost?", "another question is asked as itself"


def test_a_re_run_takes_the_plan_its_last_run_recorded_only_when_it_asks_the_same() -> None:
    events = [{"type": "signal", "message": "planning"},
              {"type": "signal", "message": "plan ready", "research_question": "rq", "angles": ["a"],
               "queries": ["q1", "q2"], "gaps": ["g"], "plan_relevance": 0.5}]
    plan = recorded_plan(events)
    assert plan is not None and (plan.queries, plan.gaps, plan.plan_relevance) == (["q1", "q2"], ["g"], 0.5)
    assert recorded_plan(events[:1]) is None
    brief = brief_of(context="for the council")
    assert same_brief(brief.to_json(), brief)
    assert not same_brief({**brief.to_json(), "context": "for the press"}, brief)
    assert not same_brief({**brief.to_json(), "focus": "costs"}, brief)


# ---- the report ----------------------------------------------------------------------------------

def test_a_follow_ups_report_links_the_earlier_one_and_dates_reused_evidence() -> None:
    report = realistic_report()
    report["follows"] = {"id": "kestrel", "finished_at": "2026-11-01T10:07:00Z", "report": "../kestrel/report.md"}
    report["evidence"][0].update(reused_from=3, read_at="2026-11-01T10:03:00Z")
    md = render_markdown(report)
    head = md.split("## Summary")[0]
    assert "**Follows:** [kestrel](../kestrel/report.md), finished 2026-11-01T10:07:00Z" in head
    assert "read 2026-11-01" in md and md.count("· read ") == 1, "only the reused item has a read date"
    assert 'href="../kestrel/report.md"' in render_html(report)
    assert not valid_link("../../etc/report.md") and not valid_link("../kestrel/report.html"), \
        "only a sibling brief's report.md is linked relatively"
    assert "evidence_reused" in USAGE_KEYS


# ---- on the lab ----------------------------------------------------------------------------------

FOCUS = "repair cost"
FOLLOW_UPS = {
    "kestrel-cost": {**KESTREL, "follows": "kestrel", "focus": FOCUS},
    "northgate-next": {**NORTHGATE, "follows": "northgate"},
    "orphan": {**KESTREL, "follows": "no-such-brief"},
    "after-failed": {**KESTREL, "follows": "broken"},
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    """Pass 1: the parents. Pass 2: their follow-ups, and two that follow nothing usable (a
    failed brief is recorded in the store first). Pass 3: kestrel asked again as it was."""
    ws = researched(tmp_path_factory.mktemp("followup"), search_lab, scripted_ollama,
                    {"kestrel": KESTREL, "northgate": NORTHGATE})
    store = Store(ws.db)
    try:
        run_id = store.add_brief(brief_id="broken", question="q", source_file="broken.json", received=b"{}",
                                 brief_json="{}", inbox_path=str(ws.root / "gone" / "broken.json"))
        store.finish(run_id, state=FAILED, stop_reason="error", error="the lab says so")
    finally:
        store.close()
    for brief_id, brief in FOLLOW_UPS.items():
        ws.drop(f"{brief_id}.json", brief)
    assert ws.briefd("run", "--once").returncode == 0
    ws.drop("kestrel.json", KESTREL)
    assert ws.briefd("run", "--once").returncode == 0
    return ws


def _runs(ws: Workspace, brief_id: str) -> list[int]:
    with sqlite3.connect(ws.db) as db:
        return [r[0] for r in db.execute("SELECT run_id FROM briefs WHERE brief_id = ? AND state = 'done' "
                                         "ORDER BY run_id", [brief_id])]


def _report_of(ws: Workspace, run_id: int) -> dict[str, Any]:
    store = Store(ws.db)
    try:
        report = store.report_of(run_id)
    finally:
        store.close()
    assert report is not None
    return report


@pytest.mark.slow
def test_a_follow_up_reuses_its_parents_evidence_with_the_dates_it_was_read(lab: Workspace) -> None:
    child = lab.report("kestrel-cost")
    parent_run = _runs(lab, "kestrel")[0]  # the run done when the follow-up started (pass 3 ran kestrel again)
    parent = _report_of(lab, parent_run)
    reused = [e for e in child["evidence"] if e["reused_from"] is not None]
    assert child["usage"]["evidence_reused"] == len(reused) > 0
    assert {e["reused_from"] for e in reused} == {parent_run}
    assert [(e["url"], e["quote"]) for e in reused] == [(e["url"], e["quote"]) for e in parent["evidence"]], \
        "every quote of the parent, as it was"
    assert all(e["round"] == 0 and parent["started_at"] <= e["read_at"] <= parent["finished_at"] for e in reused)
    md = (lab.outbox / "kestrel-cost" / "report.md").read_text(encoding="utf-8")
    assert f"read {reused[0]['read_at'][:10]}" in md


def _asked(ws: Workspace, run_id: int) -> list[str]:
    """The questions a run put to the model (first attempts; paid or replayed), by purpose."""
    with sqlite3.connect(ws.db) as db:
        return [r[0] for r in db.execute("SELECT purpose FROM model_calls WHERE run_id = ? AND attempt = 1 AND "
                                         "purpose != 'health_probe' ORDER BY id", [run_id])]


def test_a_follow_up_finishes_with_fewer_model_calls_than_its_parent(lab: Workspace) -> None:
    """Counted the same way on both sides (model_calls). The estimate follow-up starts from the
    range its parent's readings give and stops sooner: fewer calls, whatever the pages' timing.
    Both skip the plan and never read again a page the parent quoted (its evidence is carried)."""
    for parent_id, child_id in (("kestrel", "kestrel-cost"), ("northgate", "northgate-next")):
        parent_run, child_run = _runs(lab, parent_id)[0], _runs(lab, child_id)[0]
        child = lab.report(child_id)
        assert "plan" not in _asked(lab, child_run) and child["usage"]["calls_skipped"].get("plan") == 1
        carried = {e["url"] for e in _report_of(lab, parent_run)["evidence"]}
        read = {url for e in lab.events(child_id) if e["type"] == "signal" and e.get("message") == "reading"
                for url in e["urls"]}
        assert carried and not carried & read, (child_id, carried & read)
    parent, child = _asked(lab, _runs(lab, "northgate")[0]), _asked(lab, _runs(lab, "northgate-next")[0])
    assert len(child) < len(parent), (child, parent)


def test_a_follow_ups_first_search_and_gap_aim_at_its_focus(lab: Workspace) -> None:
    child = lab.report("kestrel-cost")
    first = [q["text"] for q in child["queries"] if q["round"] == 1][0]
    assert first == focus_queries(KESTREL["question"], FOCUS)[0]
    started = [e for e in lab.events("kestrel-cost") if e.get("message") == "plan ready"][0]
    assert started["gaps"][0] == FOCUS


def test_a_follow_up_estimate_starts_from_the_range_its_parents_readings_give(lab: Workspace) -> None:
    child = lab.report("northgate-next")
    start = child["estimate"]["history"][0]
    assert start["round"] == 0
    readings = [judge.Reading(low=e["low"], high=e["high"], confidence=e["confidence"], impact=e["impact"],
                              source=e["url"], round=0)
                for e in child["evidence"] if e["reused_from"] is not None and e["low"] is not None]
    assert readings, "the parent's figures are the follow-up's readings"
    initial = (NORTHGATE["estimate"]["low"], NORTHGATE["estimate"]["high"])
    assert (start["low"], start["high"]) == judge.update_range(initial, readings)
    parent_final = lab.report("northgate")["estimate"]["final"]
    assert (start["low"], start["high"]) == (parent_final["low"], parent_final["high"]), \
        "the same rule over the same readings: where the parent ended"


def test_a_follow_ups_report_links_its_parents(lab: Workspace) -> None:
    child = lab.report("kestrel-cost")
    assert child["follows"]["id"] == "kestrel" and child["follows"]["report"] == "../kestrel/report.md"
    assert (lab.outbox / "kestrel-cost" / child["follows"]["report"]).resolve() == \
        (lab.outbox / "kestrel" / "report.md").resolve()
    md = (lab.outbox / "kestrel-cost" / "report.md").read_text(encoding="utf-8")
    assert "**Follows:** [kestrel](../kestrel/report.md)" in md.split("## Summary")[0]
    assert lab.report("kestrel")["follows"] is None


@pytest.mark.parametrize("brief_id, parent, why", [("orphan", "no-such-brief", "briefd list"),
                                                     ("after-failed", "broken", "failed")])
def test_a_follow_up_of_a_missing_or_failed_brief_is_rejected(lab: Workspace, brief_id, parent, why) -> None:
    error = json.loads((lab.outbox / brief_id / "error.json").read_text(encoding="utf-8"))
    assert error["details"]["field"] == "follows", error
    assert parent in error["error"] and why in error["error"]
    assert not (lab.outbox / brief_id / "report.json").exists()


def test_submit_refuses_a_follow_up_of_a_missing_brief(lab: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps(FOLLOW_UPS["orphan"]), encoding="utf-8")
    result = lab.briefd("submit", str(path))
    assert result.returncode == 2 and "follows" in result.stderr and "briefd list" in result.stderr
    assert not list(lab.inbox.glob("orphan*.json"))
    path.write_text(json.dumps(FOLLOW_UPS["kestrel-cost"]), encoding="utf-8")
    assert lab.briefd("submit", str(path)).returncode == 0, "kestrel is done: accepted"


def test_a_re_run_of_the_same_brief_makes_no_plan_call(lab: Workspace) -> None:
    first, again = _runs(lab, "kestrel")
    assert "plan" in _asked(lab, first) and "plan" not in _asked(lab, again)
    report = lab.report("kestrel")
    assert report["usage"]["calls_skipped"].get("plan") == 1
    told = [e for e in lab.events("kestrel") if "plan taken from" in str(e.get("message"))]
    assert told and told[0]["from_run"] == first
    plans = {run: recorded_plan(_events(lab, run)) for run in (first, again)}
    assert plans[first] == plans[again], "the same plan, so the same first round"


def _events(ws: Workspace, run_id: int) -> list[dict[str, Any]]:
    with sqlite3.connect(ws.db) as db:
        return [{"type": r[0], **json.loads(r[1])} for r in db.execute(
            "SELECT type, data FROM events WHERE run_id = ? ORDER BY seq", [run_id])]


def test_a_follow_up_resumed_before_its_plan_was_saved_carries_the_evidence_once(tmp_path: Path) -> None:
    """A crash between carrying the parent's evidence and the first checkpoint: the resumed run
    carries it again, and still holds each item once."""
    from briefd.daemon.rules.decide import LoopState
    from tests.sources.test_sources import _research

    research = _research(tmp_path, ["web"])
    store = research.store
    try:
        parent_run = store.add_brief(brief_id="p", question="How deep is the Kestrel River?", source_file="p.json",
                                     received=b"{}", brief_json="{}", inbox_path=str(tmp_path / "p.json"))
        store.add_evidence(parent_run, [{k: v for k, v in PARENT_ROW.items() if k not in ("id", "run_id", "found_at")}])
        store.finish(parent_run, state=DONE, stop_reason="max_rounds",
                     report=history_row({**realistic_report(), "id": "p"}, None))
        research.brief = parse_brief(json.dumps({"id": "b", "question": "How deep is the Kestrel River?",
                                                 "follows": "p", "focus": "in winter"}).encode(), "b.json")
        for _ in range(2):
            research.state = LoopState(began_s=0.0)  # what a resumed run finds: no checkpoint yet
            plan = research.planning.earlier_plan()
        assert plan is not None and plan.gaps[0] == "in winter"
        [row] = store.evidence(research.run_id)
        assert (row["quote"], row["reused_from"], row["round"]) == (PARENT_ROW["quote"], parent_run, 0)
        assert research.ledger.usage()["evidence_reused"] == 1 and research.state.calls_skipped == {"plan": 1}
        assert PARENT_ROW["url"] in research.state.visited, "a page whose quotes are carried is not read again"
    finally:
        store.close()


def test_the_follows_line_escapes_what_it_shows() -> None:
    report = realistic_report()
    report["follows"] = {"id": "kestrel", "finished_at": "<script>alert(1)</script>", "report": "x"}
    assert "<script" not in render_html(report).lower()
    report["follows"] = {"id": "../../etc", "finished_at": None, "report": "x"}
    assert "Follows" not in render_markdown(report), "an id no brief can have is not linked"
