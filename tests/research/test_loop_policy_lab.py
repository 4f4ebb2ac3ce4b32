"""daemon.loop run in this process against the lab's servers: the stop rule that runs is the one tested.

The loop is built exactly as the worker builds it (`worker._ServicesContext`, `Research`), with a
real store, the lab's SearXNG and web, and the scripted model, so what these tests see is what a
user's report says. Issue 9, finding 2: the northgate estimate ended at 410..520 (or 430..520)
against a 400..460 target and stopped `target_reached` on a 0.968 progress score; a brief with
`target_width: 60` stopped `target_reached` at width 90.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.rules import judge
from briefd.daemon.core.brief import parse_brief
from briefd.daemon.core.events import EventLog
from briefd.daemon.research.loop import Research
from briefd.daemon.core.outages import OutageLog
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.core.settings import load_settings
from briefd.daemon.ops.worker import _ServicesContext
from briefd.store import Store, utc_now
from tests.conftest import Workspace
from lab.corpus import TOPICS

TARGET = {"unit": "USD million", "low": 100, "high": 2000, "target_low": 400, "target_high": 460}
WIDTH = {"unit": "USD million", "low": 100, "high": 2000, "target_width": 60}


def run_in_process(ws: Workspace, brief_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """One brief through `Research.run()` in this process; returns its report.json dict."""
    data = json.dumps({"id": brief_id, **fields}).encode()
    brief = parse_brief(data, f"{brief_id}.json")
    settings = load_settings({}, ws.env())
    store = Store(settings.db)
    try:
        run_id = store.add_brief(brief_id=brief.id, question=brief.question, source_file=f"{brief_id}.json",
                                 received=data, brief_json=json.dumps(brief.to_json()), inbox_path="")
        events = EventLog(store, run_id, brief.id, ws.outbox / brief.id / "events.ndjson")

        async def go() -> dict[str, Any]:
            async with _ServicesContext(settings, store, OutageLog(patience_s=settings.patience_s)) as svc:
                return await Research(svc, run_id, brief, utc_now(), events).run()

        return asyncio.run(go())
    finally:
        store.close()


@pytest.fixture(scope="module")
def lab_ws(tmp_path_factory: pytest.TempPathFactory, search_lab, scripted_ollama) -> Workspace:
    root: Path = tmp_path_factory.mktemp("loop-policy")
    (root / "inbox").mkdir()
    return Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                     model="lab-scripted")


@pytest.fixture(scope="module")
def northgate(lab_ws: Workspace) -> dict[str, Any]:
    return run_in_process(lab_ws, "northgate-target",
                          {"question": TOPICS["northgate"].question, "depth": "standard", "estimate": TARGET})


@pytest.fixture(scope="module")
def northgate_width(lab_ws: Workspace) -> dict[str, Any]:
    return run_in_process(lab_ws, "northgate-width",
                          {"question": TOPICS["northgate"].question, "depth": "standard", "estimate": WIDTH})


def _final(report: dict[str, Any]) -> tuple[float, float]:
    return report["estimate"]["final"]["low"], report["estimate"]["final"]["high"]


def _supporting(report: dict[str, Any]) -> int:
    readings = [judge.Reading(low=e["low"], high=e["high"], confidence=e["confidence"] or 0.0,
                              impact=e["impact"] or "neutral", source=e["url"])
                for e in report["evidence"] if e["low"] is not None]
    initial = (report["estimate"]["initial"]["low"], report["estimate"]["initial"]["high"])
    return judge.supporting_sources(_final(report), readings, initial)


def test_a_range_outside_the_target_band_is_not_target_reached(northgate: dict[str, Any]) -> None:
    low, high = _final(northgate)
    assert (low, high) != (400, 460) and not (400 <= low and high <= 460), "the lab's range ends above the band"
    assert northgate["stop_reason"] != "target_reached", (
        f"stopped target_reached at {low:g}..{high:g} against the target 400..460")
    assert northgate["stop_reason"] in {"max_rounds", "converged", "stalled", "exhausted"}
    assert "did not reach the target" in " ".join(northgate["open_questions"])


def test_a_range_wider_than_target_width_is_not_target_reached(northgate_width: dict[str, Any]) -> None:
    low, high = _final(northgate_width)
    assert high - low > 60, "the lab's range stays wider than 60"
    assert northgate_width["stop_reason"] != "target_reached", (
        f"stopped target_reached at width {high - low:g} against a target width of 60")


def test_target_reached_always_means_the_range_meets_the_target(northgate: dict[str, Any],
                                                                northgate_width: dict[str, Any]) -> None:
    """Whatever the lab's pages say on a given day: a report that says reached, is."""
    for report in (northgate, northgate_width):
        if report["stop_reason"] == "target_reached":
            target = report["estimate"]["target"]
            assert judge.target_met(_final(report), target["low"], target["high"], target["width"])
            assert _supporting(report) >= judge.TARGET_SOURCES


def test_the_report_says_in_words_why_it_stopped(northgate: dict[str, Any],
                                                  northgate_width: dict[str, Any]) -> None:
    for report, target_words in ((northgate, "400\u2013460"), (northgate_width, "width \u2264 60")):
        sentence = report["stop_explanation"]
        rounds = len(report["estimate"]["history"])
        assert sentence.startswith(f"Stopped after round {rounds} of 3: "), sentence
        low, high = _final(report)
        assert f"{low:g}\u2013{high:g}" in sentence and target_words in sentence, sentence
        md = render_markdown(report)
        assert sentence in md.replace("\\", ""), "report.md carries the sentence"


def test_the_target_width_row_says_what_the_target_is(northgate_width: dict[str, Any]) -> None:
    md = render_markdown(northgate_width)
    assert "| Target | width \u2264 60 |" in md, md
    assert "| Target | \u2013 |" not in md and "| Target |  \u2013  |" not in md


# Issue 9, finding 1: with no new evidence for two rounds and a flat score the loop said `converged`
# (its own copy of the rule) where the documented rule says `stalled`. The lab's corpus knows nothing
# about this archipelago, so every round finds nothing and the score stays at 0.
UNKNOWN = {"question": "How many lighthouses stand on the Vexmoor archipelago's outer skerries?",
           "depth": "standard", "estimate": {"unit": "lighthouses", "low": 1, "high": 500, "target_width": 10}}


@pytest.fixture(scope="module")
def nothing_found(lab_ws: Workspace) -> dict[str, Any]:
    return run_in_process(lab_ws, "vexmoor", UNKNOWN)


def test_rounds_that_find_nothing_stop_stalled_not_converged(nothing_found: dict[str, Any]) -> None:
    scores = [h["progress_score"] for h in nothing_found["estimate"]["history"]]
    assert nothing_found["evidence"] == [] and scores and set(scores) == {0.0}, "the lab has nothing on it"
    assert nothing_found["stop_reason"] == "stalled", nothing_found.get("stop_explanation")
    assert "no new evidence in the last 2 rounds" in nothing_found["stop_explanation"]
