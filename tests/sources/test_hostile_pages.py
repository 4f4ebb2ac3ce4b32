"""One hostile page can neither freeze the daemon nor cost more than the bound (issue 8, #2).

A real HTTP server on loopback serves pathological pages; the research loop's own
`Reader.fetch_one` fetches, reads and stores them in a real SQLite store, while a ticker
coroutine measures how long the event loop was kept from running it. A loop held for
seconds is what made SIGTERM, intake and every other brief wait on one page.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

from briefd.daemon.core.brief import parse_brief
from briefd.daemon.core.events import EventLog
from briefd.daemon.sources.extract import MAX_TRAFILATURA_ELEMENTS
from briefd.daemon.sources.fetch import FetchLimits, make_client
from briefd.daemon.model.llm import ModelConfig
from briefd.daemon.model.llm import make_client as make_llm_client
from briefd.daemon.research.loop import Research, Services
from briefd.daemon.sources.pagework import PageWorkers
from briefd.daemon.core.settings import Settings
from briefd.store import Store

MAX_LOOP_LAG_S = 1.0
"""The longest the event loop may be held by one page (generous: a noisy 2-core box)."""

ARTICLE = ("<html><head><title>Steel output</title></head><body><article>"
           + "<p>Steel output rose 4.5% in 2025, the trade body said. Mills ran at full capacity.</p>" * 8
           + "</article></body></html>").encode()


def link_page(links: int) -> bytes:
    """A page that is nothing but links: what trafilatura spends the most per byte on."""
    items = "".join(f'<li><a href="/p/{i}">Link {i}</a></li>' for i in range(links))
    return f"<html><head><title>Links</title></head><body><ul>{items}</ul></body></html>".encode()


def linked_paragraphs(paragraphs: int) -> bytes:
    """An article of short paragraphs with a link each (two elements a paragraph)."""
    items = "".join(f'<p>See <a href="/a/{i}">story {i}</a> and more text here.</p>' for i in range(paragraphs))
    return f"<html><head><title>Stories</title></head><body><article>{items}</article></body></html>".encode()


PAGES: dict[str, tuple[bytes, str]] = {
    "/article": (ARTICLE, "text/html; charset=utf-8"),
    # 48 KB on one line: every full stop made the old splitter re-read the line (18 s on the loop)
    "/abbreviations": (("Mr. " * 12_000).encode(), "text/plain; charset=utf-8"),
    # just under the cap trafilatura is still given: over a second of CPU, more than the test's deadline
    "/costly": (linked_paragraphs(MAX_TRAFILATURA_ELEMENTS // 2 - 100), "text/html; charset=utf-8"),
    # 4 MB, 100,000 links: 9 s of trafilatura's CPU before the cap
    "/link-farm": (link_page(100_000), "text/html; charset=utf-8"),
}


class Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body, content_type = PAGES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class LoopLag:
    """A coroutine that ticks every 20 ms and records the longest gap between ticks."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            self.worst = max(self.worst, now - last - 0.02)
            last = now

    def __enter__(self) -> Self:
        self.task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()


@asynccontextmanager
async def research_on(tmp_path: Path, pages: PageWorkers | None = None) -> AsyncIterator[Research]:
    """A brief's Research with real clients and a real store, as the worker builds it."""
    settings = Settings(db=tmp_path / "briefd.db", outbox=tmp_path / "outbox")
    store = Store(settings.db)
    raw = json.dumps({"id": "hostile", "question": "What did steel output do in 2025?"}).encode()
    run_id = store.add_brief(brief_id="hostile", question="What did steel output do in 2025?",
                             source_file="hostile.json", received=raw, brief_json=raw.decode(),
                             inbox_path=str(tmp_path / "hostile.json"))
    limits = FetchLimits()
    model = ModelConfig(host="http://127.0.0.1:9", model="none", num_ctx=2048, num_predict=64,
                        timeout_s=1.0, temperature=0.0, seed=1)
    extra = {"pages": pages} if pages is not None else {}
    async with httpx.AsyncClient() as http, make_client(limits) as fetch_client:
        svc = Services(settings=settings, store=store, http=http, fetch_client=fetch_client,
                       llm_client=make_llm_client(model), model=model, fetch_limits=limits, **extra)
        events = EventLog(store, run_id, "hostile", tmp_path / "events.ndjson")
        try:
            yield Research(svc, run_id, parse_brief(raw, "hostile.json"), "2026-01-01T00:00:00Z", events)
        finally:
            readers = getattr(svc, "pages", None)  # the worker closes them the same way
            if readers is not None:
                await readers.close()


async def fetch_with(tmp_path: Path, site: str, paths: list[str], pages: PageWorkers | None = None,
                     ) -> tuple[list[Any], float, Store, Research]:
    """Run `Reader.fetch_one` (research.reader) on each path in turn while measuring the event loop's lag."""
    async with research_on(tmp_path, pages) as research:
        results = []
        with LoopLag() as lag:
            for path in paths:
                results.append(await research.reader.fetch_one(1, site + path, None))
    return results, lag.worst, research.store, research


def test_a_page_of_pathological_text_never_holds_the_event_loop(tmp_path: Path, site: str) -> None:
    results, worst_lag, store, _ = asyncio.run(fetch_with(tmp_path, site, ["/abbreviations", "/article"]))
    abbreviations, article = results
    assert abbreviations is not None and article is not None, "both pages are read and kept"
    assert len(abbreviations[1]) >= 48_000 // 900, "the 48 KB page is cut into passages"
    assert worst_lag < MAX_LOOP_LAG_S, f"the event loop was held {worst_lag:.1f} s by one page"
    store.close()


def test_a_page_past_the_deadline_is_given_up_for_good_and_the_brief_goes_on(tmp_path: Path, site: str) -> None:
    deadline = 0.25
    results, worst_lag, store, research = asyncio.run(
        fetch_with(tmp_path, site, ["/costly", "/article"], pages=PageWorkers(size=1, deadline_s=deadline)))
    costly, article = results
    assert costly is None, "a page that costs more than the bound is not read"
    reason = store.bad_url_reason(site + "/costly")
    assert reason is not None and f"took over {deadline:g} s" in reason, reason
    assert research.state.bad[site + "/costly"] == reason
    assert article is not None and article[1], "the reader was replaced: the next page is read"
    assert worst_lag < MAX_LOOP_LAG_S, f"the event loop was held {worst_lag:.1f} s"
    store.close()


def test_a_four_megabyte_link_farm_is_read_within_the_bound(tmp_path: Path, site: str) -> None:
    results, worst_lag, store, _ = asyncio.run(fetch_with(tmp_path, site, ["/link-farm"]))
    (farm,) = results
    assert farm is not None, f"the page was given up: {store.bad_url_reason(site + '/link-farm')}"
    page = store.get_page(site + "/link-farm", float("inf"))
    assert page is not None and "Link 99" in page.text
    assert worst_lag < MAX_LOOP_LAG_S, f"the event loop was held {worst_lag:.1f} s"
    store.close()


def test_a_brief_stopped_while_a_costly_page_is_read_stops_at_once(tmp_path: Path, site: str) -> None:
    """SIGTERM cancels the running briefs: nothing may keep the daemon waiting on a page being read."""

    async def stop_mid_page() -> None:
        async with research_on(tmp_path) as research:
            reading = asyncio.get_running_loop().create_task(research.reader.fetch_one(1, site + "/link-farm", None))
            await asyncio.sleep(0.3)  # fetched (4 MB on loopback: tens of ms), now being read (over a second)
            assert not reading.done(), "the costly page should still be being read"
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            research.store.close()

    started = time.monotonic()
    asyncio.run(stop_mid_page())  # returns when nothing of the brief is left running, threads included
    elapsed = time.monotonic() - started
    assert elapsed < 0.3 + MAX_LOOP_LAG_S, f"stopping took {elapsed - 0.3:.1f} s after the brief was cancelled"
