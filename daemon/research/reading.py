"""Every source a brief may look in, behind one interface: search(query) → hits, read(hit) → passages.

The web (SearXNG, then a fetch), the local library (documents indexed into the store), the ZIM
archives and the pages earlier briefs read each answer the same two questions (sources.Source).
The loop asks them through `Reader`, which merges nothing and decides nothing: it asks every source
the brief may use, records what each found, and reads a hit with the source its URL belongs to.
So the loop never branches on where a passage came from, except to cite it; a new kind of source
is one class here and one line in `Reader.__init__`.

What the sources share is here too: a page taken from the page cache, and the extraction and
storing of a fetched page or an archive article (in a child process, with a deadline: pagework).
This module sits below the loop and imports nothing of it: what it needs of the brief's run
(its state, events, the age a stored page may have, mark_bad, the waiting status) it asks of the
run itself, handed to it as a `ReadingRun`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from abc import ABC, abstractmethod
from typing import Protocol

import httpx

from ...store.briefs import search_pages_at
from ..core.outages import OutageLog
from ..core.retry import call_with_retries
from ..core.settings import Settings
from ..sources.fetch import FetchLimits, FetchResult, Validators, fetch_page
from ..sources.pagework import PageUnreadable, PageWorkers
from ..sources.search import SearchHit, SearchRefused, SearchUnavailable, cache_key, query_params, search
from ..sources.structure import marks_json
from ..sources.sources import (ARCHIVES, LIBRARY, STORE, STORE_HITS_PER_QUERY, WEB, ArchiveShelf, DocumentUnavailable,
                               Found, Read, Searcher, Source, fuse, is_local, kind_of_url,
                               store_hits)
from .evidence import title_for
from .pages import LATE_GIVEN_UP, PageScheduler
from .run import Cancelled, Outage, PageRules, RunView

log = logging.getLogger("briefd")

SEARCH_CACHE_S = 24 * 3600
LOCAL_HITS_PER_QUERY = 10  # documents the library (and each archive search) offers per query


class Clients(Protocol):
    """The clients and limits the sources use (the loop's Services)."""

    settings: Settings
    http: httpx.AsyncClient
    fetch_client: httpx.AsyncClient
    fetch_limits: FetchLimits
    fetch_slots: asyncio.Semaphore
    pages: PageWorkers
    library: Searcher | None
    archives: ArchiveShelf | None
    outages: OutageLog


class Waits(Protocol):
    """The run's model door as the sources use it (calls.ModelCalls): a search that waits to try again
    says so in the brief's status and events, and once in the daemon's outage log."""

    def on_wait(self, service: str, retry_at: float, reason: str, fix: str | None) -> None: ...


class ReadingRun(RunView, PageRules, Protocol):
    """What reading asks of the brief's run (loop.Research), beyond what every part reads: its clients,
    its page scheduler (whose early searches and downloads are taken before asking again), the titles
    a citation must use where the source decides them, and its model door's waits."""

    @property
    def svc(self) -> Clients: ...

    @property
    def pages(self) -> PageScheduler: ...

    @property
    def titles(self) -> dict[str, str]: ...

    @property
    def calls(self) -> Waits: ...


class Reader:
    """The sources a brief may use, asked as one: every search at each of them, every read by its own."""

    def __init__(self, run: ReadingRun) -> None:
        self.run = run
        self.web = WebPages(run)
        self.stored: Source = StoredPages(run, self.web)  # searched apart: it asks no one (search_one)
        readers: list[Source] = [self.web]
        if LIBRARY in run.sources:
            readers.append(LibraryDocuments(run))
        if ARCHIVES in run.sources:
            readers.append(ArchiveArticles(run))
        self.readers = {source.kind: source for source in readers}
        # the sources searched, in SOURCE_KINDS order: an index or a shelf that is configured
        self.searching = [source for source in readers if source.kind in run.sources and (
            not isinstance(source, LocalSource) or source.shelf() is not None)]

    async def search_one(self, round_no: int, query: str) -> list[list[SearchHit]]:
        """One query at each source (the web through SearXNG, the library, the archives); a list per source,
        then the stored pages' list (found in a thread while the others answer)."""
        run = self.run
        run.emit("search_query", round=round_no, query=query)
        asks = [source.search(query) for source in self.searching]
        looking = asyncio.ensure_future(self.stored.search(query))  # in a thread, while the others answer
        try:
            answers: list[Found] = await asyncio.gather(*asks)
        except BaseException:
            looking.cancel()
            raise
        lists = [hits for hits, _ in answers]
        from_cache = bool(answers) and all(cached for _, cached in answers)  # the store asks no one
        stored, _ = await looking
        lists.append(stored)
        found = [h for hits in lists for h in hits]
        run.store.record_query(run.run_id, round_no, query, [h.as_dict() for h in found], from_cache=from_cache)
        by_source = {kind: sum(1 for h in found if h.source == kind) for kind in (*run.sources, STORE)}
        run.emit("search_result", round=round_no, query=query, results=len(found),
                 from_cache=from_cache, sources=by_source,
                 urls=[h.url for h in fuse(lists)[:10]],
                 **({"from_store": [h.url for h in stored]} if stored else {}))
        return lists

    def read_whole(self, hits: list[SearchHit], fetch_pages: bool) -> list[SearchHit]:
        """The hits read whole: all of them for a brief that reads pages; else the library's documents
        and the archives' articles only (on this machine, reading them costs no fetch)."""
        return hits if fetch_pages else [h for h in hits if is_local(h.url)]

    def snippets_only(self, hits: list[SearchHit]) -> list[SearchHit]:
        """The hits a brief that reads no pages reads by their snippets: the web's."""
        return [h for h in hits if not is_local(h.url)]

    async def fetch_safely(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        """`fetch_one`, where whatever one page does wrong marks that URL bad and nothing else.

        A page's failure (MemoryError included: a page that costs too much is bad for good)
        must never fail the round, or the brief would be retried and fetch it again. A store
        error or a cancellation is the brief's, not the page's: those still propagate.
        """
        fatal = (sqlite3.Error, Cancelled, Outage)
        try:
            return await self.fetch_one(round_no, url, hit)
        except fatal:
            raise
        except Exception as exc:  # noqa: BLE001 - any page failure, by design (see above)
            reason = f"page failed: {type(exc).__name__}: {exc}"[:500]
            log.warning("%s: %s", url, reason)
            self.run.mark_bad(url, reason, transient=False)
            self.run.emit("page_fetched", round=round_no, url=url, ok=False, error=reason)
            return None

    async def fetch_one(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        """Read a hit with the source its URL belongs to (a web page, a library document, an
        archive article); returns (title, passage ids) or None."""
        state = self.run.state
        if url not in state.visited:
            state.visited.append(url)
        kind = kind_of_url(url)
        source = self.readers.get(kind)
        if source is None:  # a local URL offered by another source: not this brief's
            why = f"a {kind} URL, and this brief does not search {kind}"
            self.run.mark_bad(url, why, transient=True)
            self.run.emit("page_fetched", round=round_no, url=url, ok=False, error=why)
            return None
        return await source.read(round_no, url, hit)


def cached_page(run: ReadingRun, round_no: int, url: str) -> Read | None:
    """A page or article read before, within max_age: taken from the page cache, no fetch."""
    cached = run.store.get_page(url, run.max_age)
    if cached is None or not cached.ok:
        return None
    run.state.page_cache_hits += 1
    run.emit("page_fetched", round=round_no, url=url, final_url=cached.final_url,
             status=cached.status, title=cached.title, chars=len(cached.text),
             from_cache=True)
    return cached.title, run.store.passage_ids(url, "page")


async def keep_page(run: ReadingRun, round_no: int, url: str, hit: SearchHit | None, result: FetchResult) -> Read | None:
    """A fetched page's or an archive article's bytes extracted, split and stored; None (and
    marked bad) when it failed or holds no readable text."""
    if not result.ok:
        run.mark_bad(url, result.error or f"HTTP {result.status}", transient=result.transient,
                     slow=result.timed_out)
        run.emit("page_fetched", round=round_no, url=url, final_url=result.final_url,
                 status=result.status, ok=False, error=result.error,
                 seconds=round(result.elapsed_s, 3))
        return None
    # extraction and splitting run in a child process: never on the event loop, and killed
    # at a deadline, so one page can neither freeze the daemon nor cost more than the bound
    run.pages.being_read.add(url)  # a straggler now is one the synthesis gives a short grace (last_stragglers)
    try:
        page = await run.svc.pages.read(result.body, result.final_url, result.content_type)
        reason = None if page else f"no readable text ({result.content_type or 'unknown type'})"
    except PageUnreadable as exc:
        page, reason = None, str(exc)
    if page is None:
        run.mark_bad(url, reason or "no readable text", transient=False)
        run.emit("page_fetched", round=round_no, url=url, final_url=result.final_url,
                 status=result.status, ok=False, error=reason)
        return None
    extracted, passages = page.extracted, page.passages
    title = run.titles.get(url) or extracted.title or (hit.title if hit else "") or result.final_url
    run.store.save_page(
        url=url, final_url=result.final_url, status=result.status,
        content_type=result.content_type, title=title, text=extracted.text,
        size=len(result.body), extraction=extracted.method, error=None,
        passages=[(p.seq, p.start, p.end, p.text, p.page, marks_json(p.marks)) for p in passages],
        etag=result.etag, last_modified=result.last_modified,
    )
    run.pages.forget_given_up(url)  # given up at the synthesis, it arrived after all: not slow
    run.emit("page_fetched", round=round_no, url=url, final_url=result.final_url,
             status=result.status, title=title, chars=len(extracted.text),
             passages=len(passages), from_cache=False, truncated=result.truncated,
             seconds=round(result.elapsed_s, 3), **({"notes": page.notes} if page.notes else {}))
    return title, run.store.passage_ids(url, "page")


class WebPages:
    """The web: SearXNG's hits (through the search cache), pages fetched (through the page cache,
    a conditional request for a stored page past max_age)."""

    kind = WEB

    def __init__(self, run: ReadingRun) -> None:
        self.run = run

    async def search(self, query: str) -> Found:
        """SearXNG's hits for a query: the one search_ahead started for it, or asked now."""
        early = self.run.pages.early_searches.pop(query, None)
        return await early if early is not None else await self.search_now(query)

    async def search_now(self, query: str) -> Found:
        """SearXNG's hits for a query (from the search cache when fresh); an outage ends the round."""
        run = self.run
        key = cache_key(query, run.brief.search)
        cached = run.store.cached_search(key, SEARCH_CACHE_S)
        if cached is not None:
            return [SearchHit(**h) for h in cached["hits"]], True
        try:
            response = await call_with_retries(
                lambda: search(run.svc.http, run.svc.settings.searxng_url, query,
                               run.brief.search, run.svc.settings.search_timeout_s),
                service="searxng", on_wait=run.calls.on_wait)
        except (SearchRefused, SearchUnavailable) as exc:  # each carries its own fix, if it has one
            raise Outage("searxng", str(exc), exc.fix) from exc
        run.store.set_waiting(run.run_id, None)
        run.svc.outages.came_back("searxng")
        run.store.cache_search(key, query, query_params(run.brief.search),
                               {"hits": [h.as_dict() for h in response.hits],
                                "unresponsive_engines": response.unresponsive_engines})
        if response.unresponsive_engines:
            run.emit("signal", message="unresponsive search engines",
                     engines=response.unresponsive_engines)
        if response.note:
            run.emit("signal", message=response.note)
        return response.hits, False

    async def read(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        """A web page: from the page cache, else fetched (or confirmed unchanged by its server)."""
        cached = cached_page(self.run, round_no, url)
        if cached is not None:
            return cached
        state = self.run.state
        early = self.run.pages.early_downloads.pop(url, None)
        result = await early if early is not None else await self.download(url)
        if result.not_modified:
            unchanged = self.unchanged(round_no, url, result)
            if unchanged is not None:
                return unchanged
            result = await self.download(url, conditional=False)  # its stored copy went meanwhile
        if state.late.get(url) != LATE_GIVEN_UP:  # one arriving after it was given up is not read
            state.pages_fetched += 1
        return await keep_page(self.run, round_no, url, hit, result)

    async def download(self, url: str, conditional: bool = True) -> FetchResult:
        """A web page's bytes, within the fetch limits and the daemon's concurrent-fetch slots.

        A page stored with validators (older than max_age, or read would not ask) is asked
        for conditionally: unchanged, the server answers 304 and no body is downloaded."""
        run = self.run
        stored = run.store.page_validators(url) if conditional else None
        validators = Validators(*stored) if stored else None
        async with run.svc.fetch_slots:
            result = await fetch_page(run.svc.fetch_client, url, run.svc.fetch_limits, validators)
        # every body downloaded for this brief, read or not (an early download no round took, a
        # straggler given up that arrived): what the network carried, not what the model read
        run.state.page_bytes += len(result.body)
        return result

    def unchanged(self, round_no: int, url: str, result: FetchResult) -> Read | None:
        """A 304: the stored copy is still the page, so its text and passages are read as they
        are (no body, no extraction) and its age restarts now (Store.confirm_page). None when
        the stored copy is no longer readable (the caller then downloads the page)."""
        run = self.run
        page = run.store.get_page(url, float("inf"))
        ids = run.store.passage_ids(url, "page") if page is not None and page.ok else []
        if page is None or not ids:
            return None
        run.store.confirm_page(url, result.etag, result.last_modified)
        if not run.pages.forget_given_up(url):  # a page given up that answered after all is no 304 read
            run.state.pages_not_modified += 1
        run.emit("page_fetched", round=round_no, url=url, final_url=page.final_url,
                 status=result.status, title=page.title, chars=len(page.text), passages=len(ids),
                 from_cache=True, not_modified=True, seconds=round(result.elapsed_s, 3))
        return page.title, ids


class StoredPages:
    """Web pages earlier briefs read (within max_age), offered as a source of their own: read from
    the store without a download (they are web pages: WebPages reads them, from its page cache)."""

    kind = STORE

    def __init__(self, run: ReadingRun, web: WebPages) -> None:
        self.run = run
        self.web = web

    async def search(self, query: str) -> Found:
        """Stored pages ranked against the query like fresh passages (BM25) and kept when on topic
        (sources.store_hits), whether the web lists them again or not. Only for a brief that reads
        web pages; an empty store offers nothing, so a first-ever brief does what it did before."""
        run = self.run
        if WEB not in run.sources or not run.brief.fetch_pages:
            return [], False
        # on a connection of its own in a thread: at 200,000 stored passages a search costs 0.1-0.3 s
        # of CPU, which must not stop the event loop
        found = await asyncio.to_thread(search_pages_at, run.store.path, query, run.max_age_given,
                                        STORE_HITS_PER_QUERY)
        state = run.state
        found = [row for row in found if row.url not in state.visited]  # read by earlier briefs only
        hits = store_hits(query, found, lambda url: title_for(run.store, url, {}))
        state.offered.extend(h.url for h in hits if h.url not in state.offered)
        return hits, False

    async def read(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        return await self.web.read(round_no, url, hit)


class LocalSource(ABC):
    """A source on this machine (the library's index, the archives): searched, never cached (the
    index is the cache), and what it says about a search (an archive searched by title only) told once."""

    kind: str = ""

    def __init__(self, run: ReadingRun) -> None:
        self.run = run

    @abstractmethod
    def shelf(self) -> Searcher | None:
        """The index or shelf behind this source; None when none is configured (it is not searched)."""

    async def search(self, query: str) -> Found:
        shelf = self.shelf()
        if shelf is None:
            return [], False
        hits = await shelf.search(query, LOCAL_HITS_PER_QUERY)
        for note in shelf.take_notes():
            self.run.emit("signal", message=note)
        return hits, False


class LibraryDocuments(LocalSource):
    """The local library: documents read and split when they were indexed, so reading one costs a store read."""

    kind = LIBRARY

    def shelf(self) -> Searcher | None:
        return self.run.svc.library

    async def read(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        run = self.run
        page = run.store.get_page(url, float("inf"))
        ids = run.store.passage_ids(url, "page") if page is not None and page.ok else []
        if not ids:  # removed or changed since the search: the index will catch up, nothing is wrong with it
            run.mark_bad(url, "no longer in the library index", transient=True)
            run.emit("page_fetched", round=round_no, url=url, ok=False, source="library",
                     error="no longer in the library index")
            return None
        assert page is not None
        run.state.local_reads += 1
        run.emit("page_fetched", round=round_no, url=url, final_url=url, title=page.title,
                 chars=len(page.text), passages=len(ids), from_cache=False, source="library")
        return page.title, ids


class ArchiveArticles(LocalSource):
    """The ZIM archives: an article is extracted and cached like a web page, and cited with its archive."""

    kind = ARCHIVES

    def shelf(self) -> Searcher | None:
        return self.run.svc.archives

    async def read(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        cached = cached_page(self.run, round_no, url)
        if cached is not None:
            return cached
        result = await self.article(url)
        self.run.state.local_reads += 1
        return await keep_page(self.run, round_no, url, hit, result)

    async def article(self, url: str) -> FetchResult:
        """An archive article's HTML as a fetch result, so it is extracted and cached like a web page."""
        run = self.run
        if run.svc.archives is None:
            return FetchResult(url=url, final_url=url, error="no archives are configured")
        try:
            entry = await run.svc.archives.read(url, max_bytes=run.svc.settings.fetch_max_bytes,
                                                max_redirects=run.svc.settings.fetch_max_redirects)
        except DocumentUnavailable as exc:
            # transient: an archive is replaced by a newer download under the same name; the next
            # brief tries the article again rather than remembering it as bad for good
            return FetchResult(url=url, final_url=url, error=str(exc), transient=True)
        run.titles[url] = entry.citation_title  # "Article (Archive)": a citation names both
        return FetchResult(url=url, final_url=entry.url, status=200, content_type=entry.mimetype, body=entry.body)
