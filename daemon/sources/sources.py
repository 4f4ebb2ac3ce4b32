"""Where a brief may look, and how what each place found becomes one ranked list.

Three kinds of source answer the same question, "search(query) → hits": the web (through
SearXNG), the local library (documents indexed into the store, `daemon.library`) and
offline archives (Kiwix ZIM files, `daemon.archives`). A brief names the ones it may use
(`sources`); by default it uses every one configured. Which are configured is a matter of
settings: the web needs the network (`egress` other than `none`), the library needs
folders, the archives need files.

Hits are merged by reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009):
each list (one query at one source) gives a hit 1 / (RRF_K + rank), and a hit's score is
the sum over the lists that found it. Why RRF and not the sources' own scores: SearXNG's
score, SQLite's BM25 and Xapian's weights are on scales that cannot be compared, and the
lists differ in length; RRF needs only ranks, so no source can drown the others by
scoring loudly, every list's first hit stays near the top (as the round-robin merge it
replaces did), and a page found by two queries, or a document found by two sources'
queries, rises above one found once. k = 60 is the paper's value; the order it gives is
insensitive to k within a wide range.

Pure and typed: settings and hits in, decisions out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from ..core.brief import SOURCE_KINDS, Brief, SourceKind
from ..core.briefjson import BriefError
from ..rules.decide import relevance
from .search import SearchHit
from ..core.settings import Settings
from ..core.errors import BriefdError

WEB, LIBRARY, ARCHIVES = SOURCE_KINDS

RRF_K = 60
"""Reciprocal rank fusion's constant: a hit at rank r (0-based) of one list scores 1 / (RRF_K + r + 1)."""

STORE = "store"
"""A hit's source when it is a web page an earlier brief read: the store offers it (store_hits)."""
STORE_HITS_PER_QUERY = 10  # pages read before that the store offers per query
STORE_MIN_SHARE = 0.5
"""A stored page is offered for a query only when its best passage holds at least this share of
the query's content words: full-text search matches on any one word, and a store that has read
months of briefs would otherwise offer every page that says "2025" or "cost" to every brief."""

LIBRARY_SCHEME = "file"  # a library document's URL is its file URI (Path.as_uri)
ARCHIVE_SCHEME = "zim"  # an archive article's: zim://<archive file name>/<entry path> (daemon.archives)


Found = tuple[list[SearchHit], bool]
"""A source's answer to one query: its hits, best first, and whether they came from a cache (no one was asked)."""
Read = tuple[str, list[int]]
"""A page, document or article read: the title a citation uses, and the ids of its passages in the store
(each passage its text with its offsets in the page's text and, for a paged document, its page)."""


class Source(Protocol):
    """Where a brief may look, whatever it is (the web, the library, the archives, the pages earlier
    briefs read): the loop asks each the same two things and merges the hits by rank (fuse), so it
    never needs to know where a passage came from, except to cite it (`kind`, kind_of_url)."""

    @property
    def kind(self) -> str:
        """WEB, LIBRARY, ARCHIVES or STORE: what a hit's `source` says, and a report's citation."""
        ...

    async def search(self, query: str) -> Found:
        """The source's hits for free text."""
        ...

    async def read(self, round_no: int, url: str, hit: SearchHit | None) -> Read | None:
        """One hit read into the store as passages; None when it cannot be read (the reason is recorded)."""
        ...


class Searcher(Protocol):
    """A source on this machine: the library's index, or the archives."""

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """At most `limit` hits for free text (any text: it is never parsed as a query language)."""
        ...

    def take_notes(self) -> list[str]:
        """What the user should hear about the last searches (an archive searched by title only), once."""
        ...


class Entry(Protocol):
    """An archive article's bytes, to be extracted like a web page, and the title that cites it."""

    @property
    def url(self) -> str: ...

    @property
    def body(self) -> bytes: ...

    @property
    def mimetype(self) -> str: ...

    @property
    def citation_title(self) -> str: ...


class ArchiveShelf(Searcher, Protocol):
    """The archives: a Searcher whose hits are read back by URL."""

    async def read(self, url: str, *, max_bytes: int, max_redirects: int) -> Entry:
        """The article behind an archive URL; raises DocumentUnavailable with the reason."""
        ...


class DocumentUnavailable(BriefdError):
    """A library document or archive article that cannot be read; the message says why."""


def configured(settings: Settings) -> tuple[SourceKind, ...]:
    """The sources this daemon can search, in SOURCE_KINDS order."""
    found: list[SourceKind] = []
    if settings.egress != "none":
        found.append(WEB)
    if settings.library:
        found.append(LIBRARY)
    if settings.archives:
        found.append(ARCHIVES)
    return tuple(found)


def not_configured_fix(kind: SourceKind, settings: Settings) -> str:
    """Why `kind` cannot be searched here, and what makes it searchable."""
    if kind == WEB:
        return ("egress = none forbids every connection but the model server; set egress to private or open "
                "(BRIEFD_EGRESS), or leave \"web\" out of sources")
    if kind == LIBRARY:
        return ("no library is configured; set library to your document folders (BRIEFD_LIBRARY=/srv/docs, or "
                "library = [\"/srv/docs\"] in briefd.toml), or leave \"library\" out of sources")
    return ("no archives are configured; set archives to your ZIM files (BRIEFD_ARCHIVES=/srv/zim/wiki.zim, or "
            "archives = [\"/srv/zim/wiki.zim\"] in briefd.toml), or leave \"archives\" out of sources")


def unavailable(asked: Sequence[str] | None, settings: Settings) -> list[tuple[int | None, SourceKind, str]]:
    """What a brief's `sources` asks for that this daemon cannot give: (index in the list, kind, fix).

    Index None: the brief named no sources and none is configured at all.
    """
    have = configured(settings)
    if asked is None:
        if have:
            return []
        return [(None, LIBRARY, "egress = none leaves no source to search: configure a library or archives, "
                                "or set egress to private or open")]
    return [(i, cast(SourceKind, kind), not_configured_fix(cast(SourceKind, kind), settings))
            for i, kind in enumerate(asked) if kind not in have]


def refusal(brief: Brief, settings: Settings) -> BriefError | None:
    """The error a brief gets when it asks for a source this daemon does not have (inbox, API)."""
    problems = unavailable(brief.sources, settings)
    if not problems:
        return None
    index, kind, fix = problems[0]
    if index is None:
        return BriefError("sources", f"this briefd has no source to search: {fix}",
                          {"configured": list(configured(settings))})
    return BriefError(f"sources[{index}]", f'sources asks for "{kind}", which this briefd cannot search: {fix}',
                      {"asked": kind, "configured": list(configured(settings)),
                       "problems": [{"field": f"sources[{i}]", "asked": k} for i, k, _ in problems]})


def chosen(asked: Sequence[str] | None, settings: Settings) -> tuple[SourceKind, ...]:
    """The sources a brief's research uses: the ones it asked for that are configured, else all configured."""
    have = configured(settings)
    if asked is None:
        return have
    return tuple(kind for kind in SOURCE_KINDS if kind in asked and kind in have)


def kind_of_url(url: str) -> SourceKind:
    """Which source a URL belongs to: a file URI is a library document, zim: an archive article."""
    scheme = url[:8].split(":", 1)[0].lower() if ":" in url[:8] else ""
    if scheme == LIBRARY_SCHEME:
        return LIBRARY
    if scheme == ARCHIVE_SCHEME:
        return ARCHIVES
    return WEB


def is_local(url: str) -> bool:
    """Read from this machine's disk (library, archives): no fetch, no network, nothing to wait for."""
    return kind_of_url(url) != WEB


@dataclass(frozen=True)
class Fused:
    """A hit after fusion: `score` is its RRF sum, `lists` how many lists found it."""

    hit: SearchHit
    score: float
    lists: int


def fuse(ranked: Iterable[Sequence[SearchHit]]) -> list[SearchHit]:
    """One list from many by reciprocal rank fusion (see the module docstring), best first.

    A URL found by several lists keeps the first hit seen for it (its title and snippet).
    Equal scores keep the order in which the hits were first met, rank by rank and list by
    list, so one source or query never takes every top place on a tie.
    """
    return [f.hit for f in fuse_scored(ranked)]


def fuse_scored(ranked: Iterable[Sequence[SearchHit]]) -> list[Fused]:
    lists = [list(hits) for hits in ranked]
    first: dict[str, SearchHit] = {}
    for hits in lists:
        for hit in hits:
            first.setdefault(hit.url, hit)
    return [Fused(first[url], score, count) for url, score, count in rrf([[h.url for h in hits] for hits in lists])]


def rrf(ranked: Iterable[Sequence[str]]) -> list[tuple[str, float, int]]:
    """Reciprocal rank fusion of ranked keys: (key, score, lists that have it), best first.

    A list naming a key twice counts it once, at its best rank. Equal scores keep the
    order in which keys were first met, rank by rank and list by list.
    """
    scores: dict[str, float] = {}
    counts: dict[str, int] = {}
    order: dict[str, tuple[int, int]] = {}
    for index, keys in enumerate(ranked):
        seen_here: set[str] = set()
        for rank, key in enumerate(keys):
            if key in seen_here:
                continue
            seen_here.add(key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            counts[key] = counts.get(key, 0) + 1
            order.setdefault(key, (rank, index))
    best = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [(key, scores[key], counts[key]) for key in best]


class StoredPassage(Protocol):
    """A stored page's best passage for a query (store.PassageRow, from Store.search_pages)."""

    @property
    def url(self) -> str: ...

    @property
    def text(self) -> str: ...


def store_hits(query: str, found: Sequence[StoredPassage], title: Callable[[str], str]) -> list[SearchHit]:
    """Pages read before, offered for `query` as a source of their own, best first: fused with the
    web's hits, a page both offer rises (a page read before, and on topic, is read first, from the
    store), and one the web does not list (any more, or not yet) is offered all the same.

    On topic only: a page's best passage must hold STORE_MIN_SHARE of the query's content words
    (decide.relevance). `title(url)` is asked for the pages kept only.
    """
    hits: list[SearchHit] = []
    for row in found:
        share = relevance(row.text, [query])
        if share >= STORE_MIN_SHARE:
            hits.append(SearchHit(url=row.url, title=title(row.url), content=row.text[:300],
                                  engine=STORE, score=round(share, 3), source=STORE))
    return hits
