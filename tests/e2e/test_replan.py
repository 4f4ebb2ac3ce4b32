"""A plan off topic is asked again for its queries only (issue 11, seed 5): `briefd run --once` on
the lab, whose model answers the first plan with one about something else.

What a user would notice: the second call asks for just the queries round 1 can still use (its
budget is a fraction of a whole plan's), round 1 searches the question and the new queries and none
of the off-topic ones, and the off-topic rewrite of the question does not steer the brief. And a
query or gap an evidence answer proposes about nothing in the brief is dropped, and the event says so.
"""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from briefd.daemon.research import planner
from briefd.daemon.core.brief import DEPTH_PRESETS
from briefd.daemon.rules.decide import PLAN_RELEVANCE_MIN
from briefd.daemon.model.llm import output_budget
from briefd.daemon.core.settings import load_settings
from briefd.daemon.model.hosts import model_config
from tests.conftest import OllamaLab, SearchLab, researched, serve_ollama
from lab.corpus import TOPICS
from lab.workspace import Workspace

pytestmark = pytest.mark.lab

OFF_TOPIC = {"research_question": "How long should pasta boil?", "angles": ["cooking times"],
             "queries": ["pasta boiling time", "al dente minutes", "italian cooking water salt"],
             "gaps": ["how long to boil pasta"]}
SLOTS = DEPTH_PRESETS["quick"][1] - 1  # round 1: the question, then this many planned queries
DEFAULT = model_config(load_settings({}, {}))  # what the daemon sends with the default settings


@pytest.fixture(scope="module")
def ollama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaLab]:
    yield from serve_ollama(tmp_path_factory.mktemp("replan"))


@pytest.fixture(scope="module")
def replanned(tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab, ollama: OllamaLab) -> Workspace:
    ollama.fault(kind="answer", message=json.dumps(OFF_TOPIC), count=1)
    return researched(tmp_path_factory.mktemp("replan-ws"), search_lab, ollama,
                      {"offtopic": {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1,
                                    "fetch_pages": False}}, timeout=300)


def test_an_off_topic_plan_is_asked_again_for_its_queries_only(replanned: Workspace, ollama: OllamaLab) -> None:
    report = replanned.report("offtopic")
    assert report["status"] == "done" and report["usage"]["fallbacks"].get("replan") == 1
    first, second = [c for c in ollama.stats()["calls"] if c.get("reached_model")][:2]
    assert first["num_predict"] == output_budget(DEFAULT, planner.PLAN_SCHEMA)
    assert second["num_predict"] == output_budget(DEFAULT, planner.replan_schema(SLOTS))
    assert second["num_predict"] < first["num_predict"] // 3, "a few queries, not a whole plan"
    events = replanned.events("offtopic")
    assert any(e.get("message") == "plan off topic; asking again for its queries" for e in events)
    round1 = next(e for e in events if e["type"] == "round_started" and e["round"] == 1)
    assert round1["queries"][0] == TOPICS["kestrel"].question
    assert len(round1["queries"]) <= 1 + SLOTS  # the scripted model's own first query is the question
    assert not set(round1["queries"]) & set(OFF_TOPIC["queries"]), round1["queries"]
    assert report["plan_relevance"] >= PLAN_RELEVANCE_MIN


def test_the_off_topic_rewrite_of_the_question_does_not_steer_the_brief(replanned: Workspace) -> None:
    report = replanned.report("offtopic")
    assert report["research_question"] == TOPICS["kestrel"].question
    plan = next(e for e in replanned.events("offtopic") if e.get("message") == "plan ready")
    assert not any("pasta" in gap for gap in plan["gaps"]), "its off-topic gaps do not aim later rounds"
    assert "pasta" not in json.dumps(report["queries"]).lower()


PROPOSALS = {"items": [], "new_gaps": ["what is the weather like today"],
             "new_queries": ["what should I do next", "kestrel bridge anchorage inspection"]}


@pytest.fixture(scope="module")
def proposed(tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab, ollama: OllamaLab) -> Workspace:
    """The first evidence answer proposes a query and a gap about nothing in the brief, and one about it."""
    ollama.fault(kind="answer", message=json.dumps(PROPOSALS), count=1, after=1)  # the plan goes through
    return researched(tmp_path_factory.mktemp("proposals-ws"), search_lab, ollama,
                      {"proposals": {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 2,
                                     "fetch_pages": False}}, timeout=300)


def test_a_models_proposal_about_nothing_in_the_brief_is_dropped_and_said(proposed: Workspace) -> None:
    events = proposed.events("proposals")
    updated = next(e for e in events if e.get("message") == "plan updated")
    assert updated["new_queries"] == ["kestrel bridge anchorage inspection"]
    assert set(updated["dropped_off_topic"]) == {"what should I do next", "what is the weather like today"}
    assert updated["new_gaps"] == []
    searched = [q["text"] for q in proposed.report("proposals")["queries"]]
    assert "what should I do next" not in searched and "kestrel bridge anchorage inspection" in searched
