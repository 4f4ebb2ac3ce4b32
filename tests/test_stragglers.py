"""The model never waits for a straggler (issue 11): `briefd run --once` on the lab, whose kestrel
results include a page that sends its headers at once and then trickles for a minute.

What a user would notice: with the daemon's default fetch timeout (20 s), the rounds go on as soon
as the model has read every page that arrived (the slow page is recorded as late, then given up or
timed out, after its round ended), and a second brief that finds the same page does not fetch it at
all: it is remembered as slow for a day (daemon.loop.SLOW_PAGE_MEMORY_S).
"""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from typing import Any

import pytest

from daemon.settings import Settings
from store import Store
from tests.conftest import OllamaLab, SearchLab
from tests.lab.corpus import TOPICS
from tests.lab.workspace import Workspace

DEFAULT_FETCH_TIMEOUT_S = next(f.default for f in fields(Settings) if f.name == "fetch_timeout_s")
SLOW_SLUG = "kestrel-bridge-live-updates"  # the lab's "slow" page (tests/lab/corpus.py)


def brief(rounds: int) -> dict[str, Any]:
    return {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": rounds}


@pytest.fixture(scope="module")
def two_briefs(tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab,
               scripted_ollama: OllamaLab) -> Workspace:
    """The kestrel brief, then the same question under another id, each by its own `run --once`."""
    ws = Workspace(root=tmp_path_factory.mktemp("stragglers"), searxng_url=search_lab.searxng_url,
                   ollama_url=scripted_ollama.url, model="lab-scripted")
    for brief_id in ("first", "second"):
        ws.drop(f"{brief_id}.json", brief(rounds=2))
        result = ws.briefd("run", "--once", timeout=300, BRIEFD_FETCH_TIMEOUT_S=str(DEFAULT_FETCH_TIMEOUT_S))
        assert result.returncode == 0, result.stderr[-4000:]
        assert ws.report(brief_id)["status"] == "done"
    return ws


def slow_url(events: list[dict[str, Any]]) -> str:
    urls = {e["url"] for e in events if e["type"] in ("page_fetched", "page_late") and SLOW_SLUG in e["url"]}
    assert len(urls) == 1, f"the slow page is among the kestrel results: {urls}"
    return urls.pop()


def test_a_round_goes_on_without_a_slow_page_and_records_it(two_briefs: Workspace) -> None:
    events = two_briefs.events("first")
    url = slow_url(events)
    late = [e for e in events if e["type"] == "page_late" and e["url"] == url]
    assert late and late[0]["round"] == 1, "round 1 went on without the slow page"
    round_done = next(e["seq"] for e in events if e["type"] == "signal" and e.get("message") == "round 1 done")
    ended = [e for e in events if e["type"] == "page_fetched" and e["url"] == url]
    assert len(ended) == 1 and ended[0]["ok"] is False, ended
    assert ended[0]["seq"] > round_done, "round 1 ended before the slow page's fetch did"
    # the model read what arrived: round 1's other pages gave evidence while the slow one still loaded
    assert any(e["type"] == "evidence_found" and e["seq"] < round_done for e in events)
    usage = two_briefs.report("first")["usage"]
    assert usage["late_pages"] >= 1 and usage["late_pages_given_up"] + usage["pages_fetched"] >= 1


def test_a_second_brief_does_not_fetch_the_page_remembered_as_slow(two_briefs: Workspace) -> None:
    url = slow_url(two_briefs.events("first"))
    store = Store(two_briefs.db)
    try:
        assert store.slow_until(url) is not None, store.bad_url_reason(url)
    finally:
        store.close()
    second = two_briefs.events("second")
    results = [u for e in second if e["type"] == "search_result" for u in e.get("urls", [])]
    assert url in results, "the second brief's search found the slow page again"
    fetched = [e["url"] for e in second if e["type"] in ("page_fetched", "page_late")]
    assert fetched and url not in fetched, "the remembered slow page is not fetched at all"
    with sqlite3.connect(two_briefs.db) as db:
        (expires,) = db.execute("SELECT expires_at FROM bad_urls WHERE url = ?", [url]).fetchone()
    assert expires, "remembered for a while, not for good"
