"""Page scheduling: which fetches run while the model reads, and what becomes of a page still loading.

The research loop never waits for a page while the model has something to read (issue 11). That
takes fetches that outlive the step that started them: the question's search and its pages,
fetched while the model plans (search-ahead); a round's stragglers, which keep loading for a
later round or the synthesis; the pages an earlier run of the same question read late, read late
again where it read them (a replayed round). Those tasks, and what is known of the earlier run,
are the loop's only transient state: they live here, in one object (PageScheduler), so the loop's
own attributes are the brief's story and its checkpointed state.

This module sits below the loop: it imports nothing of it. What it needs of the brief's run (its
events, its store, the parts that fetch and read pages) it asks of the run itself, handed to it as a
`PageRun`; the words it shares with the loop (the straggler states, the
batch size, the grace a round gives a slow page) are defined here, and the loop imports them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..rules import decide
from ..sources.fetch import FetchResult
from ..sources.search import SearchHit
from ..sources.sources import WEB, Found, Read, kind_of_url
from .run import Outage, PageRules, Rounds, RunPart, RunView

log = logging.getLogger("briefd")

PAGES_PER_BATCH = 3        # pages whose passages the model reads in one call
# Stragglers (issue 11): the model never waits for a slow page while it has something to read
STRAGGLER_GRACE_S = 1.0    # the model waits this long for its next page, no more (wait_for_page)
# the longer grace, where going on without a page costs more than the wait: a page a replayed brief's
# earlier run read in time (a stored page, a 304, or one changed since, which a re-run is for: else its
# batches, and so its prompts, differ and it pays again), and any page of a brief with no evidence yet
# (else its synthesis has nothing to say: pages slow to come on a loaded machine are still read)
PATIENT_GRACE_S = 5.0
SLOW_PAGE_MEMORY_S = 24 * 3600  # a page that timed out is not fetched again for a day
LATE_WAITING, LATE_READ, LATE_FAILED, LATE_GIVEN_UP = "waiting", "read", "failed", "given up"
GIVEN_UP_AT_SYNTHESIS = "when the synthesis began: not read"  # in the page_fetched error of a page given up

PageTask = asyncio.Task[Read | None]  # a page's fetch and reading; None: the page could not be read


class Web(Protocol):
    """The web's own asks (reading.WebPages), which search_ahead starts before any round asks them."""

    async def search_now(self, query: str) -> Found: ...

    async def download(self, url: str, conditional: bool = ...) -> FetchResult: ...


class Fetching(Protocol):
    """The sources as the scheduler sets them to work (reading.Reader): a page fetched, extracted and
    stored by the source its URL belongs to, whatever it does wrong its own failure."""

    @property
    def web(self) -> Web: ...

    async def fetch_safely(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None: ...


class BatchReading(Protocol):
    """The model reading a batch of fetched pages (evidence.EvidenceReader), and how many calls it has made
    (a batch of failed pages makes none: a round that has read nothing yet waits longer)."""

    @property
    def batches_read(self) -> int: ...

    async def read_batch(self, round_no: int, ids: list[int], titles: dict[str, str],
                         gaps: list[decide.Gap]) -> object: ...


class PageRun(RunView, PageRules, Rounds, Protocol):
    """What the scheduler asks of the brief's run (loop.Research), beyond what every part reads: its
    state as last checkpointed (amended when a round goes on without a page), which of a round's
    candidates it takes, and the two parts that fetch the pages and read them."""

    @property
    def saved(self) -> dict[str, Any]: ...

    def choose_pages(self, candidates: list[str]) -> list[str]: ...

    @property
    def reader(self) -> Fetching: ...

    @property
    def evidence(self) -> BatchReading: ...


@dataclass
class PageScheduler(RunPart[PageRun]):
    """The fetches a brief has started and not yet taken, and what its earlier run of the same
    question did with its pages (round_pages replays it). Nothing here is checkpointed: a run
    resumed after a crash starts these again from its checkpoint (LoopState.late, current_round)."""

    run: PageRun  # the brief's run (loop.Research); never a copy of its values, which change under it
    # fetches that outlive the round that started them: its stragglers, by URL, and when each began
    inflight: dict[str, PageTask] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    # what is fetched while the model plans (search_ahead): the question's search, and its pages
    ahead: asyncio.Task[None] | None = None
    early_searches: dict[str, asyncio.Task[Found]] = field(default_factory=dict)
    early_downloads: dict[str, asyncio.Task[FetchResult]] = field(default_factory=dict)
    # how the rounds of the latest earlier run of the same question went (round_pages)
    # (loaded for a resumed run too: its next rounds replay as a fresh run's would)
    earlier_rounds: list[dict[str, Any]] = field(default_factory=list)
    earlier_given_up: set[str] = field(default_factory=set)
    replayed: set[str] = field(default_factory=set)  # pages this run reads late because the earlier run did
    # pages whose bytes are here and whose reading (extraction and splitting, in a child process with a
    # deadline) has begun (reading.keep_page): what is left of them is bounded work on this machine
    being_read: set[str] = field(default_factory=set)

    @classmethod
    def after(cls, run: PageRun, earlier: Mapping[str, Any] | None) -> PageScheduler:
        """A brief's scheduler, given the checkpoint of the latest earlier run of its question."""
        late: Mapping[str, str] = (earlier or {}).get("late", {})
        return cls(run, earlier_rounds=list((earlier or {}).get("past_rounds", [])),
                   earlier_given_up={url for url, what in late.items() if what == LATE_GIVEN_UP})

    def loading_for(self, url: str) -> float:
        """Seconds since this run began fetching `url` (0 when it did not)."""
        return round(time.monotonic() - self.started.get(url, time.monotonic()), 1)

    def cut_off(self) -> None:
        """A stop, a cancel or an outage: nothing keeps loading."""
        for task in self.inflight.values():
            task.cancel()
        self.inflight.clear()

    def drop_early(self) -> None:
        """The rounds are over: a download no round took is cut off (or named, if it was made)."""
        if self.ahead is not None:
            self.ahead.cancel()
        for task in self.early_searches.values():
            task.cancel()
        unread = [url for url, task in self.early_downloads.items() if task.done() and not task.cancelled()]
        for download in self.early_downloads.values():
            download.cancel()
        self.early_searches.clear()
        self.early_downloads.clear()
        if unread:
            self.run.emit("signal", message="fetched while the model planned, and not read: no round chose "
                                              "these pages", urls=unread)

    def hand_over(self, trailing: set[asyncio.Task[Any]]) -> None:
        """The stragglers still loading go on in `trailing` (the daemon's), their failures logged."""
        for url, task in self.inflight.items():
            trailing.add(task)
            task.add_done_callback(trailing.discard)
            task.add_done_callback(retrieved)
            task.add_done_callback(functools.partial(self.cut_before_its_timeout, url))
        self.inflight.clear()

    def cut_before_its_timeout(self, url: str, task: asyncio.Task[Any]) -> None:
        """A straggler's fetch that the daemon cut off (`run --once` ending, a stop) never took its
        fetch timeout, so a page given up at the synthesis is not slow (forget_given_up). Kept, a page
        50 ms from arriving when a fast model's synthesis began was not fetched by any brief for
        SLOW_PAGE_MEMORY_S: the next cron run skipped it as known bad."""
        if task.cancelled():
            self.forget_given_up(url)

    def forget_given_up(self, url: str) -> bool:
        """A page is remembered as slow when given up at the synthesis only while its fetch runs
        (give_up): a fetch that then ends without its fetch timeout, the one measure of a slow page
        (it arrived, its server answered 304, or the daemon cut it off), takes the mark back. True
        when the page was given up; a fetch that times out on its own keeps the mark (keep_page)."""
        if self.state.late.get(url) != LATE_GIVEN_UP:
            return False
        self.store.forget_slow_url(url)
        return True

    async def search_ahead(self) -> None:
        """While the model plans, the question's web search and the pages it ranks highest are
        fetched: round 1 always searches the question first, so its pages are mostly these, and
        the model reads them as soon as the plan is made instead of waiting for them (issue 11).

        Only the downloads are early: round 1 takes the search (search_web) and the pages
        (download) from these tasks, and records and reads them as if it had asked then, so the
        events, the store and `usage` say what round 1 did. A page round 1 does not choose may
        serve a later round; one no round takes is named when the rounds end (drop_early).
        """
        if WEB not in self.run.sources:
            return
        question = decide.clean_query(self.run.brief.question)  # as round 1 will ask it (LoopState.add_queries)
        search = self.early_searches[question] = asyncio.create_task(self.run.reader.web.search_now(question))
        search.add_done_callback(retrieved)
        if not self.run.brief.fetch_pages:
            return
        try:
            hits, _ = await asyncio.shield(search)
        except Exception:  # noqa: BLE001 - round 1 awaits the same task and handles its outage
            return
        candidates = [h.url for h in hits if kind_of_url(h.url) == WEB]
        chosen = self.run.choose_pages(candidates)
        replay = decide.replayed_round(self.earlier_rounds, 1, [question], [], candidates, len(chosen))
        urls = replay[0] if replay else chosen  # round 1 asks the question first
        known_bad = self.store.bad_urls(urls)
        for url in urls:
            # a page known bad is not fetched; a cached page costs round 1 nothing
            if url not in known_bad and self.store.get_page(url, self.run.max_age) is None:
                self.early_downloads[url] = asyncio.create_task(self.run.reader.web.download(url))

    def skip_known_bad(self, round_no: int, urls: list[str]) -> set[str]:
        """The web pages among `urls` the store knows are bad (for good, or slow for now): recorded
        as this run's bad pages, as a fetch that failed would have been, and not fetched."""
        known = self.store.bad_urls([u for u in urls if kind_of_url(u) == WEB])
        for url, reason in known.items():
            if url not in self.state.visited:
                self.state.visited.append(url)
            self.state.bad[url] = reason
            if self.state.late.get(url) == LATE_WAITING:  # a replayed straggler: it failed, as a fetch would
                self.state.late[url] = LATE_FAILED
        if known:
            self.run.emit("signal", message="pages known bad are not fetched", round=round_no,
                            urls=list(known))
        return set(known)

    async def fetch_and_read(self, round_no: int, urls: list[str], hits: dict[str, SearchHit]) -> None:
        """Fetch concurrently; the model reads each batch of pages as soon as that batch is fetched,
        and never waits for a straggler while it has nothing else to read.

        Batches are fixed by search rank (pages 1-3, 4-6, ...) and read with the gaps as they
        stood when the round began, so a batch's prompt depends only on what its pages say,
        never on which fetch happened to finish first. That keeps the model busy while slower
        pages are still downloading, and makes a resumed round send the very same prompts,
        which the answer cache then replays instead of paying for them again.

        Once the model has read a batch (made a call: pages that all failed give it nothing to
        read) and every other batch whose pages all arrived, the round does not wait for a page
        still loading: it goes on without it at once (go_on_without), and so it does for an
        earlier round's straggler. Only a round that has read nothing yet waits, each page that
        arrives giving the rest STRAGGLER_GRACE_S more (PATIENT_GRACE_S for a page a replayed round
        read in time then): the model has nothing else to do then, and never waits longer.
        The batches are read without the stragglers, whose fetches keep running for the next
        round (or the synthesis) to take in. The stragglers are checkpointed before any batch is
        read without them, so a batch's pages are always "its rank group less the round's
        stragglers", and a resumed round re-forms the very same batches.
        """
        late = set(self.state.current_round.get("late", []))
        fresh = [u for u in urls if u not in late and u not in self.inflight]
        skipped = late | self.skip_known_bad(round_no, fresh)
        fetches = {url: self.start_fetch(round_no, url, hits.get(url)) for url in urls if url not in skipped}
        batches = [[u for u in batch if u not in skipped]
                   for batch in rank_batches(urls, self.state.current_round.get("carried", []))]
        unread = [n for n, batch in enumerate(batches) if batch]
        carried = set(self.waiting_stragglers())
        expected = set(self.state.current_round.get("expected", []))
        order = self.state.current_round.get("order", [])  # the earlier run's, for a replayed round
        gaps = self.state.open_gaps()
        read_before = self.run.evidence.batches_read
        try:
            while unread:
                ready = [n for n in unread if all(fetches[u].done() for u in batches[n])]
                if expected and order and ready:
                    # a replayed round reads its batches in the earlier run's order, strictly: the
                    # order of the answers makes the order of the evidence and of the next queries,
                    # and a page checked by its server (304) may come a moment after another
                    following = first_to_read(unread, order)
                    ready = [following] if following in ready else []
                if ready:
                    n = first_to_read(ready, order)
                    unread.remove(n)
                    self.state.current_round["read"] = [*self.state.current_round.get("read", []), n]
                    await self.read_pages(round_no, batches[n], fetches, gaps)
                    continue
                loading = [u for n in unread for u in batches[n] if not fetches[u].done()]
                # the same round as the earlier run of this question (round_pages) waits for the pages
                # that run read in time: their other batches are replayed answers that cost the model
                # nothing, and a page among them that is slow now is mostly one that changed (200, not
                # 304: read again), which is what a re-run is for. A round that has read nothing yet
                # (pages that all failed, or none worth a call, gave the model nothing) waits for a
                # page that is not an earlier round's straggler. Each wait is bounded (wait_for_page)
                grace = (PATIENT_GRACE_S if expected.intersection(loading) else
                         STRAGGLER_GRACE_S if self.run.evidence.batches_read == read_before
                         and not carried.issuperset(loading) else 0.0)
                if not grace or not await self.wait_for_page(round_no, {u: fetches[u] for u in loading}, grace):
                    self.go_on_without(round_no, loading)
                    late.update(loading)
                    batches = [[u for u in batch if u not in late] for batch in batches]
                    unread = [n for n in unread if batches[n]]
        finally:
            for url, task in fetches.items():
                if url in late:
                    self.inflight[url] = task  # a straggler keeps loading for a later read
                else:
                    task.cancel()

    def round_pages(self, round_no: int, queries: list[str], candidates: list[str],
                    carried: list[str]) -> tuple[list[str], list[str], list[int], list[str]]:
        """The round's fresh pages, those it goes on without from its start, the order to read its
        batches in, and the pages it waits for (fetch_and_read): the earlier run's of this question
        when this round is the same as one of its rounds (decide.replayed_round), else the best-ranked
        candidates (choose_pages), none, rank order and none. The read order decides the order of the
        evidence and of the queries the answers propose (first_to_read). A page read late then is
        recorded as a straggler and read (from the cache) where that run read it; one that run gave
        up is known bad now (skip_known_bad) or, having arrived since, given up again (last_stragglers).
        Every other page of the round, an earlier round's straggler it carries included, was read in
        this round then: it is waited for, or its batch, and every prompt after it, would depend on
        whether its fetch (from the store) beat the replayed answers (issue 22)."""
        chosen = self.run.choose_pages(candidates)
        replay = decide.replayed_round(self.earlier_rounds, round_no, queries, self.state.visited, candidates,
                                       len(chosen))
        if replay is None:
            return chosen, [], [], []
        fresh, then_late, order = replay
        # a page late then and known bad now is a straggler all the same: it took its place in the
        # batches of the stragglers read at the synthesis (last_stragglers), where it fails unfetched
        late = [url for url in then_late if url in [*fresh, *carried]]
        self.replayed.update(late)
        self.run.emit("signal", message="the same round as the earlier run of this question: the same pages",
                        round=round_no, urls=fresh)
        known_bad = self.store.bad_urls(late)  # not fetched at all (skip_known_bad): no page_late for it
        for url in late:
            if url not in self.state.visited:
                self.state.visited.append(url)
            self.state.late[url] = LATE_WAITING
            if url in known_bad:
                continue
            self.run.emit("page_late", round=round_no, url=url, loading_s=0.0, replayed=True,
                            message="read late, where the earlier run of this question read it: the same "
                                    "prompts, replayed from the answer cache")
        return fresh, late, order, [url for url in [*fresh, *carried] if url not in then_late]

    async def wait_for_page(self, round_no: int, loading: Mapping[str, PageTask], grace: float) -> bool:
        """The model waits for the next of `loading` to arrive, `grace` seconds at most: whether one
        did. No rule makes it wait longer on a page (issue 22); each wait is an event
        (`waiting_for_page`, with its seconds) and counted in usage (page_wait_seconds)."""
        began = time.monotonic()
        arrived, _ = await asyncio.wait(loading.values(), timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        waited = time.monotonic() - began
        self.state.page_wait_s = round(self.state.page_wait_s + waited, 3)
        self.run.emit("waiting_for_page", round=round_no, seconds=round(waited, 2), urls=list(loading),
                        arrived=[url for url, task in loading.items() if task in arrived])
        return bool(arrived)

    async def wait_while_arriving(self, round_no: int, fetches: Mapping[str, PageTask], grace: float) -> None:
        """Wait for `fetches` while they keep arriving: each that arrives gives the rest `grace` more."""
        while loading := {url: task for url, task in fetches.items() if not task.done()}:
            if not await self.wait_for_page(round_no, loading, grace):
                return

    def waiting_stragglers(self) -> list[str]:
        """Pages earlier rounds went on without, not yet read nor given up (their fetches still run)."""
        return [url for url, what in self.state.late.items() if what == LATE_WAITING]

    def start_fetch(self, round_no: int, url: str,
                    hit: SearchHit | None) -> PageTask:
        """The fetch of a page: a straggler's own if one is still running, else a new one (none for a
        page known bad: a straggler replayed from an earlier run that has failed since, skip_known_bad)."""
        task = self.inflight.pop(url, None)
        if task is None and url in self.skip_known_bad(round_no, [url]):
            task = asyncio.create_task(nothing())
        elif task is None:
            task = asyncio.create_task(self.run.reader.fetch_safely(round_no, url, hit))
            self.started[url] = time.monotonic()
        return task

    def go_on_without(self, round_no: int, urls: list[str]) -> None:
        """Record stragglers: in the state, and in the last checkpoint as amended (not the live
        state, which has moved on since the round began: a resumed round must start where this
        one did, less these pages)."""
        for url in urls:
            self.state.late[url] = LATE_WAITING
            self.run.emit("page_late", round=round_no, url=url, loading_s=self.loading_for(url),
                            message="the model has read every page that arrived; the round goes on without this one")
        self.state.current_round["late"] = [*self.state.current_round.get("late", []), *urls]
        saved = self.run.saved
        if saved.get("current_round", {}).get("round") == round_no:
            saved["current_round"]["late"] = list(self.state.current_round["late"])
            saved["late"] = {**saved.get("late", {}), **{url: LATE_WAITING for url in urls}}
            self.store.save_checkpoint(self.run.run_id, saved["round"], saved["phase"], saved)

    async def read_pages(self, round_no: int, batch: list[str],
                         fetches: dict[str, PageTask],
                         gaps: list[decide.Gap]) -> None:
        """The model reads one batch of fetched pages (a straggler among them is taken in)."""
        pages = [fetches[u].result() for u in batch]
        for url, page in zip(batch, pages):
            if self.state.late.get(url) == LATE_WAITING:
                self.state.late[url] = LATE_READ if page else LATE_FAILED
            if page and url in self.state.offered:  # the store offered it: a page read before, no fetch
                self.state.pages_reused += 1
        ids = [i for page in pages if page for i in page[1]]
        titles = {u: page[0] for u, page in zip(batch, pages) if page}
        await self.run.evidence.read_batch(round_no, ids, titles, gaps)

    async def last_stragglers(self) -> None:
        """Before the synthesis: the stragglers that arrived are read (as part of the last round);
        the rest are not waited for (the synthesis is the model's next work): they are given up,
        and their fetches left to end on their own (hand_over). A brief with no evidence at all
        waits for them while they keep arriving (each giving the rest PATIENT_GRACE_S more: there
        is nothing to synthesize yet, but a page that does not come is not waited for); a re-run so
        waits for those the run it replays read here.

        A straggler already downloaded and only being read (being_read) gets STRAGGLER_GRACE_S while
        such pages keep arriving: its reading is bounded work on this machine, not a server's delay.

        Given up first and checkpointed, so a run resumed here reads the same arrived pages
        (from the page cache) in the same batches; their evidence from an interrupted attempt
        is dropped first, so nothing is counted twice.
        """
        round_no = self.state.round
        again = [url for url in self.waiting_stragglers()
                 if url in self.replayed and url in self.earlier_given_up]
        known_bad = self.store.bad_urls(again)  # still slow: not fetched at all, nothing to say
        for url in again:
            self.state.late[url] = LATE_GIVEN_UP
            if url not in known_bad:
                self.run.emit("page_fetched", round=round_no, url=url, ok=False, late=True, replayed=True,
                                error="not read: the earlier run of this question gave it up at its synthesis")
        waiting = self.waiting_stragglers()
        if not waiting:
            return
        fetches = {url: self.start_fetch(round_no, url, None) for url in waiting}
        # a fetch started here (a resumed run) takes its first step: a cached page is done in it
        await asyncio.sleep(0)
        if replayed := {url: fetches[url] for url in waiting if url in self.replayed}:
            # the earlier run of this question read these here (those it gave up are given up above):
            # waited for, as a replayed round waits for the pages that run read in time, or the
            # synthesis prompt differs and the re-run pays the model for nothing (a 304 slower than
            # the synthesis's turn, seen in tests/e2e/test_integration's second run)
            await self.wait_while_arriving(round_no, replayed, PATIENT_GRACE_S)
        if not self.store.evidence_count(self.run.run_id):
            # nothing to synthesize yet: the pages still loading are waited for while they keep
            # coming, never longer than the grace for one that does not (issue 22: a page slower
            # than the fetch timeout held the synthesis 18 s)
            await self.wait_while_arriving(round_no, fetches, PATIENT_GRACE_S)
        if being_read := {url: fetches[url] for url in waiting if url in self.being_read and not fetches[url].done()}:
            # downloaded, and only being read here: a big manual (bashref.html, 866 KB, takes a second to
            # extract) or a page queued behind one. Given up now, it is lost for a wait its server has
            # no part in, so the synthesis gives them STRAGGLER_GRACE_S while they keep arriving; a page
            # still downloading (a slow server) is not waited for
            await self.wait_while_arriving(round_no, being_read, STRAGGLER_GRACE_S)
        arrived = [url for url in waiting if fetches[url].done()]
        for url in waiting:
            if url not in arrived:
                self.inflight[url] = fetches[url]
                self.give_up(round_no, url)
        self.run.checkpoint()
        gaps = self.state.open_gaps()
        for url in arrived:
            self.store.drop_evidence(self.run.run_id, url)
        for i in range(0, len(arrived), PAGES_PER_BATCH):
            await self.read_pages(round_no, arrived[i:i + PAGES_PER_BATCH], fetches, gaps)
        if arrived and round_no > 0:
            self.state.new_evidence_per_round[round_no - 1:] = [self.store.evidence_count(self.run.run_id, round_no)]
            if self.run.brief.estimate:
                self.run.update_estimate(round_no)

    def give_up(self, round_no: int, url: str) -> None:
        """A straggler still loading when the synthesis begins: recorded as not read, and
        remembered as slow while its fetch, left to end (hand_over), goes on, so no other brief
        fetches it meanwhile; if it arrives it is cached and forgotten as slow (fetch_one)."""
        reason = (f"still loading after {self.loading_for(url):g} s {GIVEN_UP_AT_SYNTHESIS} "
                  f"(the fetch goes on; until it ends the page is remembered as slow)")
        self.state.late[url] = LATE_GIVEN_UP
        self.run.mark_bad(url, reason, transient=True, slow=True)
        self.run.emit("page_fetched", round=round_no, url=url, ok=False, error=reason, late=True)


def rank_batches(urls: list[str], carried: list[str], size: int = PAGES_PER_BATCH) -> list[list[str]]:
    """A round's batches: its fresh pages in rank groups of `size`, then the stragglers it carried
    from earlier rounds in groups of their own, so a page's lateness never reshapes the others'."""
    fresh = [u for u in urls if u not in carried]
    late = [u for u in urls if u in carried]
    return [group[i:i + size] for group in (fresh, late) for i in range(0, len(group), size)]


def first_to_read(ready: list[int], order: list[int]) -> int:
    """Which of the batches whose pages all arrived the model reads next: the first by `order` (the
    order an earlier run of the same round read them in, replayed), else the best-ranked."""
    return min(ready, key=lambda n: (order.index(n) if n in order else len(order), n))


async def nothing() -> None:
    """A fetch not made (a page known bad): done at its first step, with no page."""
    return None


def retrieved(task: asyncio.Task[Any]) -> None:
    """A task nobody may await (an early search, a trailing fetch): its failure is logged, not lost.
    An outage is the round's to report (it awaits the same search): only the log's debug level has it."""
    failure = None if task.cancelled() else task.exception()
    if isinstance(failure, Outage):
        log.debug("a background fetch met an outage: %s", failure)
    elif failure is not None:
        log.warning("a background fetch failed: %r", failure)
