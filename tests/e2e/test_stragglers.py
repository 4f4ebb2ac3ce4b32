"""The model never waits for a straggler (issue 11): a running daemon on the lab, whose kestrel
results include a page that sends its headers at once and then trickles for a minute.

What a user would notice: the rounds go on as soon as the model has read every page that arrived
(the slow page is recorded as late); the synthesis does not wait for it either (it is recorded as
not read, and remembered as slow from then on); its fetch is left to end while the daemon works
on, and as it times out the mark stays, so a second brief that finds the same page does not fetch
it at all (daemon.research.pages.SLOW_PAGE_MEMORY_S). The first brief's event file still ends with its report.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from typing import Any

import pytest

from briefd.daemon.research.pages import GIVEN_UP_AT_SYNTHESIS
from briefd.store import Store
from tests.conftest import BRIEFD, OllamaLab, SearchLab, researched, wait_for
from lab.corpus import PAGES, TOPICS
from lab.web import SLOW_SECONDS
from lab.workspace import Workspace

# The slow page trickles for a minute: it times out, some seconds after its brief ended. The brief (two rounds and
# its synthesis) must end inside it: 3 s was too short once in a whole suite on two busy cores ("timeout after 3s"
# instead of given up at the synthesis); a synthesis that waited for the page would still be seen, at 8 s.
FETCH_TIMEOUT_S = 8
UNDER_THE_SLOW_PAGE_S = SLOW_SECONDS / 2  # a fetch timeout the slow page outlasts, and a run --once does not
SLOW_SLUG = next(p.slug for p in PAGES if p.topic == "kestrel" and p.kind == "slow")  # the lab's slow page


def brief(rounds: int) -> dict[str, Any]:
    return {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": rounds}


@pytest.fixture(scope="module")
def two_briefs(tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab,
               scripted_ollama: OllamaLab) -> Workspace:
    """The kestrel brief, then (once the slow page's fetch, left running by the daemon, has timed
    out) the same question under another id, both taken by one running daemon."""
    ws = Workspace(root=tmp_path_factory.mktemp("stragglers"), searxng_url=search_lab.searxng_url,
                   ollama_url=scripted_ollama.url, model="lab-scripted")
    log = ws.root / "daemon.log"
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_FETCH_TIMEOUT_S=str(FETCH_TIMEOUT_S)),
                                  cwd=ws.root, stdout=sink, stderr=sink)
    try:
        ws.drop("first.json", brief(rounds=2))
        wait_for(lambda: (ws.outbox / "first" / "report.json").exists(), 120, "the first report")
        url = slow_url(ws.events("first"))
        # remembered as slow from when the brief gave it up; the daemon lets its fetch run on
        # (past the report) until it times out, and the mark stays
        time.sleep(FETCH_TIMEOUT_S + 1)
        assert slow_until(ws, url) is not None
        ws.drop("second.json", brief(rounds=2))
        wait_for(lambda: (ws.outbox / "second" / "report.json").exists(), 120, "the second report")
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, log.read_text()[-3000:]
    for brief_id in ("first", "second"):
        assert ws.report(brief_id)["status"] == "done"
    return ws


def slow_until(ws: Workspace, url: str) -> str | None:
    store = Store(ws.db)
    try:
        return store.slow_until(url)
    finally:
        store.close()


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


def test_the_synthesis_does_not_wait_for_the_slow_page_and_its_event_file_ends_with_the_report(
        two_briefs: Workspace) -> None:
    events = two_briefs.events("first")
    url = slow_url(events)
    given_up = [e for e in events if e["type"] == "page_fetched" and e["url"] == url]
    assert given_up and GIVEN_UP_AT_SYNTHESIS in given_up[0]["error"], given_up
    assert events[-1]["type"] == "complete", "nothing is appended after the report, though the fetch went on"
    # every page given up at the synthesis is counted, the slow one among them (under load a normal page may
    # still be loading too: the count says how many, the events which)
    given_up_at_synthesis = [e for e in events if e["type"] == "page_fetched"
                             and GIVEN_UP_AT_SYNTHESIS in (e.get("error") or "")]
    assert two_briefs.report("first")["usage"]["late_pages_given_up"] == len(given_up_at_synthesis) >= 1


def test_a_second_brief_does_not_fetch_the_page_remembered_as_slow(two_briefs: Workspace) -> None:
    url = slow_url(two_briefs.events("first"))
    assert slow_until(two_briefs, url) is not None, "its fetch, left to end, timed out: remembered as slow"
    second = two_briefs.events("second")
    results = [u for e in second if e["type"] == "search_result" for u in e.get("urls", [])]
    assert url in results, "the second brief's search found the slow page again"
    fetched = [e["url"] for e in second if e["type"] in ("page_fetched", "page_late")]
    assert fetched and url not in fetched, "the remembered slow page is not fetched at all"
    with sqlite3.connect(two_briefs.db) as db:
        (expires,) = db.execute("SELECT expires_at FROM bad_urls WHERE url = ?", [url]).fetchone()
    assert expires, "remembered for a while, not for good"


def test_a_page_cut_off_as_run_once_ends_is_not_remembered_as_slow(
        tmp_path_factory: pytest.TempPathFactory, search_lab: SearchLab, scripted_ollama: OllamaLab) -> None:
    """`run --once` (cron) ends with its briefs and cuts off the fetches they left loading. The slow page
    was given up at the synthesis, but its fetch never ran to its timeout (the daemon's one measure of a
    slow page): cut off, it is not remembered as slow, and the next run fetches it again (before, no brief
    fetched it for SLOW_PAGE_MEMORY_S, whatever the page; a page 50 ms from arriving alike)."""
    timeout = f"{UNDER_THE_SLOW_PAGE_S:g}"  # still loading when the run ends
    ws = researched(tmp_path_factory.mktemp("cut-at-exit"), search_lab, scripted_ollama, {"first": brief(rounds=1)},
                    BRIEFD_FETCH_TIMEOUT_S=timeout)
    url = slow_url(ws.events("first"))
    given_up = [e for e in ws.events("first") if e["type"] == "page_fetched" and e["url"] == url]
    assert given_up and GIVEN_UP_AT_SYNTHESIS in given_up[0]["error"], given_up
    assert slow_until(ws, url) is None, "cut off before its fetch timeout: not known to be slow"
    ws.drop("second.json", brief(rounds=1))
    assert ws.briefd("run", "--once", BRIEFD_FETCH_TIMEOUT_S=timeout).returncode == 0
    second = ws.events("second")
    skipped = [u for e in second if e.get("message") == "pages known bad are not fetched" for u in e["urls"]]
    assert url not in skipped
    assert url in [e["url"] for e in second if e["type"] in ("page_fetched", "page_late")], "fetched again"
