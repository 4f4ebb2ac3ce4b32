"""Page scheduling: which fetches run while the model reads, and what becomes of a page still loading.

The research loop never waits for a page while the model has something to read (issue 11). That
takes fetches that outlive the step that started them: the question's search and its pages,
fetched while the model plans (search-ahead); a round's stragglers, which keep loading for a
later round or the synthesis; the pages an earlier run of the same question read late, read late
again where it read them (a replayed round). Those tasks, and what is known of the earlier run,
are the loop's only transient state: they live here, in one object (PageScheduler), so the loop's
own attributes are the brief's story and its checkpointed state.

This module sits below the loop: it imports nothing of it. What it needs of the brief's run (its
events, its store) it is handed; the words it shares with the loop (the straggler states, the
batch size, the grace a round gives a slow page) are defined here, and the loop imports them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..sources.fetch import FetchResult
from ..sources.search import SearchHit

PAGES_PER_BATCH = 3        # pages whose passages the model reads in one call
# Stragglers (issue 11): the model never waits for a slow page while it has something to read
STRAGGLER_GRACE_S = 1.0    # a round that has read nothing yet waits this long for its next page, no more
SLOW_PAGE_MEMORY_S = 24 * 3600  # a page that timed out is not fetched again for a day
LATE_WAITING, LATE_READ, LATE_FAILED, LATE_GIVEN_UP = "waiting", "read", "failed", "given up"

Read = tuple[str, list[int]]
"""A page read: the title a citation uses, and the ids of its stored passages."""
PageTask = asyncio.Task[Read | None]  # a page's fetch and reading; None: the page could not be read
Searched = tuple[list[SearchHit], bool]  # a search's hits, and whether they came from the search cache


@dataclass
class PageScheduler:
    """The fetches a brief has started and not yet taken, and what its earlier run of the same
    question did with its pages (round_pages replays it). Nothing here is checkpointed: a run
    resumed after a crash starts these again from its checkpoint (LoopState.late, current_round)."""

    # fetches that outlive the round that started them: its stragglers, by URL, and when each began
    inflight: dict[str, PageTask] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    # what is fetched while the model plans (search_ahead): the question's search, and its pages
    ahead: asyncio.Task[None] | None = None
    early_searches: dict[str, asyncio.Task[Searched]] = field(default_factory=dict)
    early_downloads: dict[str, asyncio.Task[FetchResult]] = field(default_factory=dict)
    # how the rounds of the latest earlier run of the same question went (round_pages)
    # (loaded for a resumed run too: its next rounds replay as a fresh run's would)
    earlier_rounds: list[dict[str, Any]] = field(default_factory=list)
    earlier_given_up: set[str] = field(default_factory=set)
    replayed: set[str] = field(default_factory=set)  # pages this run reads late because the earlier run did

    @classmethod
    def after(cls, earlier: Mapping[str, Any] | None) -> PageScheduler:
        """A brief's scheduler, given the checkpoint of the latest earlier run of its question."""
        late: Mapping[str, str] = (earlier or {}).get("late", {})
        return cls(earlier_rounds=list((earlier or {}).get("past_rounds", [])),
                   earlier_given_up={url for url, what in late.items() if what == LATE_GIVEN_UP})

    def loading_for(self, url: str) -> float:
        """Seconds since this run began fetching `url` (0 when it did not)."""
        return round(time.monotonic() - self.started.get(url, time.monotonic()), 1)

    def cut_off(self) -> None:
        """A stop, a cancel or an outage: nothing keeps loading."""
        for task in self.inflight.values():
            task.cancel()
        self.inflight.clear()

    def drop_early(self) -> list[str]:
        """The rounds are over: a download no round took is cut off. Returns those that had been made."""
        if self.ahead is not None:
            self.ahead.cancel()
        for task in self.early_searches.values():
            task.cancel()
        unread = [url for url, task in self.early_downloads.items() if task.done() and not task.cancelled()]
        for download in self.early_downloads.values():
            download.cancel()
        self.early_searches.clear()
        self.early_downloads.clear()
        return unread

    def hand_over(self, trailing: set[asyncio.Task[Any]], retrieved: Callable[[asyncio.Task[Any]], None]) -> None:
        """The stragglers still loading go on in `trailing` (the daemon's), their failures to `retrieved`."""
        for task in self.inflight.values():
            trailing.add(task)
            task.add_done_callback(trailing.discard)
            task.add_done_callback(retrieved)
        self.inflight.clear()


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
