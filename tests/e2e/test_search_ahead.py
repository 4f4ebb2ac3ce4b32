"""The model never waits for round 1's pages (issue 11): while it writes the plan, the question's
own search and the pages it ranks highest are fetched, so it reads them as soon as the plan is made.

Checked by order, not by speed: with a model that takes a second to plan, the lab web's access log
(to the microsecond) shows round 1's pages requested before the model's plan answer was sent, and
the brief's own record still says what round 1 did (its search made, not taken from a cache; the
pages fetched by it and read in round 1).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Iterator
from urllib.parse import urlsplit

import pytest

from tests.conftest import OllamaLab, SearchLab, researched, serve_ollama
from lab.corpus import TOPICS
from lab.workspace import Workspace

pytestmark = pytest.mark.lab

PLAN_SECONDS = 1.0  # every answer takes this long: ample time for a search and a few pages on loopback
ACCESS = re.compile(r'\[(?P<at>[0-9T:.\-]+Z)\] "GET (?P<path>\S+) HTTP')


def when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def slow_planner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaLab]:
    yield from serve_ollama(tmp_path_factory.mktemp("slow-planner"), extra=("--seconds-per-answer", str(PLAN_SECONDS)))


@pytest.fixture(scope="module")
def one_brief(tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab, slow_planner: OllamaLab) -> Workspace:
    ws = researched(tmp_path_factory.mktemp("ahead"), search_lab, slow_planner,
                    {"ahead": {"question": TOPICS["northgate"].question, "depth": "quick", "max_rounds": 1}},
                    timeout=300)
    assert ws.report("ahead")["status"] == "done"
    return ws


def test_round_one_pages_are_fetched_while_the_model_plans(one_brief: Workspace, search_lab: SearchLab,
                                                           slow_planner: OllamaLab) -> None:
    ws = one_brief
    plan = slow_planner.stats()["calls"][0]  # a brief's first call is its plan
    plan_answered = when(plan["at"]) + plan["seconds"]
    events = ws.events("ahead")
    read = {urlsplit(e["url"]).path for e in events
            if e["type"] == "page_fetched" and e.get("round") == 1 and e.get("ok", True) and not e.get("from_cache")}
    assert read, "round 1 fetched pages"
    requested: dict[str, float] = {}
    for line in (search_lab.workdir / "logs" / "web.log").read_text(encoding="utf-8").splitlines():
        match = ACCESS.search(line)
        if match and match["path"] in read and when(match["at"]) >= when(plan["at"]):
            requested.setdefault(match["path"], when(match["at"]))
    early = [path for path, at in requested.items() if at < plan_answered]
    assert early, f"some page round 1 read was requested before the plan was answered: {requested}, {plan_answered}"
    # and the record says what round 1 did: the question searched by this brief, its pages read in round 1
    plan_ready = next(e["seq"] for e in events if e.get("message") == "plan ready")
    question_search = next(e for e in events if e["type"] == "search_result" and e["query"] == TOPICS["northgate"].question)
    assert question_search["round"] == 1 and question_search["from_cache"] is False
    assert all(e["seq"] > plan_ready for e in events if e["type"] == "page_fetched")
    assert ws.report("ahead")["usage"]["searches"] >= 1
