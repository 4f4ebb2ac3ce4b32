"""SearXNG's JSON API, in one small module (there is no client package worth depending on).

Why it looks like this:
- SearXNG answers 403 to `format=json` unless `search.formats` includes json, and 429
  when its limiter is on; both have a known fix, so they are raised as `SearchRefused`
  carrying it. Briefs wait for either (a 429 may also pass by itself); the daemon
  reports the fix once.
- A broken engine shows up in `unresponsive_engines` with HTTP 200, not as an error:
  we surface it so the user can see why a search came back thin. When no result came
  back *and* engines failed, the empty answer says nothing about the web: it is an
  outage (`EnginesFailing`, a `SearchUnavailable` whose fix points at the engines, SearXNG's log
  and the network, since SearXNG itself is running), never cached as "no results".
- A malformed or empty response never crashes a brief: it is just no results.
- An answer is read through fetch's one bounded reader (`read_limited`) and cut at
  `SEARCH_MAX_BYTES`; only the first `MAX_HITS_PER_QUERY` results are parsed into
  objects (ijson, a streaming parser, so a cut answer still yields the results that
  arrived whole), and each one's text is capped. A 90 MB answer of 200,000 results
  costs a few MB and stores fifty rows.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import httpx
import ijson

from ..core.brief import SearchOptions
from .extract import MAX_TITLE_CHARS
from .fetch import ACCEPT_ENCODING, MAX_URL_CHARS, BodyRefused, read_limited
from ..core.retry import Transient
from ..core.untrusted import clean
from ..core.errors import ServiceUnavailable

SEARCH_MAX_BYTES = 4 * 1024 * 1024
"""Most bytes of one SearXNG answer read (decoded). Real answers are tens of KB; the rest is cut."""

MAX_HITS_PER_QUERY = 50
"""Results kept per query: more than a round can use (it fetches at most 16 pages and reads at most
32 snippets, see loop.limits_for), with room for the ones that turn out visited, bad or filtered."""

SNIPPET_MAX_CHARS = 1000
"""A result's snippet is a sentence or two; in snippet-only briefs it is the text the model reads."""

MAX_UNRESPONSIVE_ENGINES = 20
"""Engines named in a "search engines failed" signal; SearXNG has a few dozen at most."""

FIX_JSON_FORMAT = (
    "enable the JSON format in SearXNG's settings.yml: under `search:` set "
    "`formats: [html, json]`, then restart SearXNG"
)
FIX_LIMITER = (
    "SearXNG's limiter is rate-limiting briefd: set `server.limiter: false` in settings.yml, "
    "or add briefd's address to `botdetection.ip_lists.pass_ip` in limiter.toml, then restart SearXNG"
)


def query_params(opts: SearchOptions) -> dict[str, str]:
    """The brief's search options as SearXNG query parameters (domains are filtered here, not there)."""
    params: dict[str, str] = {}
    if opts.categories:
        params["categories"] = ",".join(opts.categories)
    if opts.engines:
        params["engines"] = ",".join(opts.engines)
    if opts.language:
        params["language"] = opts.language
    if opts.time_range:
        params["time_range"] = opts.time_range
    return params


@dataclass
class SearchHit:
    url: str
    title: str
    content: str
    engine: str
    score: float | None = None
    source: str = "web"  # which source found it: web | library | archives (daemon.sources)

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "title": self.title, "content": self.content,
                "engine": self.engine, "score": self.score, "source": self.source}


@dataclass
class SearchResponse:
    query: str
    hits: list[SearchHit]
    unresponsive_engines: list[str] = field(default_factory=list)
    from_cache: bool = False
    note: str | None = None  # what was cut from an over-size answer, for a signal event


class SearchUnavailable(Transient, ServiceUnavailable):
    """SearXNG could not be reached or answered 5xx: transient, worth waiting for (the retry policy's).

    Its `fix` (Transient's) is None: starting SearXNG, or pointing briefd at it, ends it. An outage
    whose fix lies elsewhere (EnginesFailing) carries its own, which the daemon's log and
    `run --once`'s give-up line say instead (research.run.Outage, ops.worker.restart_fix)."""

    def __init__(self, said: str) -> None:
        ServiceUnavailable.__init__(self, "searxng", said, said=said)


class EnginesFailing(SearchUnavailable):
    """SearXNG answered, but every engine it asked failed and no result came back: an outage to wait
    out like any other, whose fix is not SearXNG itself (it is running) but its engines (`fix`)."""

    def __init__(self, base_url: str, engines: list[str]) -> None:
        super().__init__(f"SearXNG at {base_url}: every engine that answered failed ({'; '.join(engines)})")
        self.engines = engines
        self.fix = engines_fix(engines)


def engines_fix(engines: list[str]) -> str:
    """What to do when SearXNG runs but its engines fail: which ones (SearXNG names them "name: why"),
    and where to look: SearXNG's log, the network or proxy between it and them, other engines."""
    names = list(dict.fromkeys(entry.split(":", 1)[0].strip() for entry in engines if entry.strip()))
    return (f"SearXNG is running, but its engines are not answering it ({', '.join(names) or 'none named'}): "
            "read SearXNG's log for why (journalctl -u searxng, or `docker logs` of its container); check that "
            "SearXNG's host can reach those engines (DNS, firewall, or the proxy under `outgoing: proxies` in "
            "its settings.yml); or enable other engines in settings.yml and restart SearXNG")


class SearchRefused(ServiceUnavailable):
    """SearXNG answered but refuses us (403 json off, 429 limiter): a misconfiguration with a fix.

    Briefs wait for it like an outage; the fix is what the daemon and `briefd check` print.
    """

    def __init__(self, status: int, fix: str) -> None:
        said = f"SearXNG answered HTTP {status}: {fix}"
        super().__init__("searxng", said, fix, said=said)
        self.status = status
        self.fix: str = fix


def cache_key(query: str, params: SearchOptions) -> str:
    """Results are cached per normalised query and parameters."""
    norm = " ".join(query.lower().split())
    blob = json.dumps([norm, query_params(params)], sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def domain_matches(host: str, domain: str) -> bool:
    domain = domain.lower().strip(".")
    return host == domain or host.endswith("." + domain)


def filter_hits(hits: list[SearchHit], params: SearchOptions) -> list[SearchHit]:
    """Apply the brief's include/exclude domains, drop non-http(s) and duplicate URLs."""
    out: list[SearchHit] = []
    seen: set[str] = set()
    for hit in hits:
        if not hit.url.lower().startswith(("http://", "https://")) or hit.url in seen:
            continue
        host = host_of(hit.url)
        if params.include_domains and not any(domain_matches(host, d) for d in params.include_domains):
            continue
        if any(domain_matches(host, d) for d in params.exclude_domains):
            continue
        seen.add(hit.url)
        out.append(hit)
    return out


def parse_response(query: str, payload: Any) -> SearchResponse:
    """Turn SearXNG JSON into hits, tolerating any shape (a malformed response is no results)."""
    hits: list[SearchHit] = []
    unresponsive: list[str] = []
    if isinstance(payload, dict):
        results = payload.get("results") or []
        for item in results if isinstance(results, list) else []:
            if len(hits) >= MAX_HITS_PER_QUERY:
                break
            if not isinstance(item, dict):
                continue
            url = item.get("url")
            if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
                continue  # fetch refuses longer URLs: such a hit is of no use
            title = _text(item.get("title"), MAX_TITLE_CHARS)
            hits.append(SearchHit(url=url, title=title or url[:MAX_TITLE_CHARS],
                                  content=_text(item.get("content"), SNIPPET_MAX_CHARS),
                                  engine=_text(item.get("engine"), MAX_TITLE_CHARS),
                                  score=_score(item.get("score"))))
        engines = payload.get("unresponsive_engines") or []
        for entry in islice(engines if isinstance(engines, list) else [], MAX_UNRESPONSIVE_ENGINES):
            if isinstance(entry, (list, tuple)) and entry:
                unresponsive.append(_text(": ".join(str(x) for x in entry), MAX_TITLE_CHARS))
            elif isinstance(entry, str):
                unresponsive.append(_text(entry, MAX_TITLE_CHARS))
    return SearchResponse(query=query, hits=hits, unresponsive_engines=unresponsive)


def _text(value: Any, limit: int) -> str:
    """A title or snippet from SearXNG: shown to the model and quoted, so through the one door, and bounded."""
    return clean(value).strip()[:limit].strip() if isinstance(value, str) else ""


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_answer(data: bytes) -> dict[str, Any] | None:
    """The parts of a SearXNG answer briefd uses, parsed without building the rest.

    Only the first MAX_HITS_PER_QUERY results become objects, however many the
    answer holds; an answer cut at SEARCH_MAX_BYTES keeps the results that arrived
    whole. None when the bytes are not a JSON object at all.
    """
    if not data.lstrip().startswith(b"{"):
        return None
    return {"results": _items(data, "results.item", MAX_HITS_PER_QUERY),
            "unresponsive_engines": _items(data, "unresponsive_engines.item", MAX_UNRESPONSIVE_ENGINES)}


def _items(data: bytes, prefix: str, most: int) -> list[Any]:
    """Up to `most` items at `prefix`, stopping quietly where the JSON breaks off or goes wrong."""
    found: list[Any] = []
    try:
        for item in ijson.items(io.BytesIO(data), prefix, use_float=True):
            found.append(item)
            if len(found) >= most:
                break
    except ijson.JSONError:
        pass
    return found


async def search(client: httpx.AsyncClient, base_url: str, query: str, params: SearchOptions,
                 timeout_s: float) -> SearchResponse:
    """One SearXNG search. Raises SearchUnavailable (transient) or SearchRefused (fix it)."""
    url = base_url.rstrip("/") + "/search"
    wanted = {"q": query, "format": "json", **query_params(params)}
    body = bytearray()
    try:
        request = client.build_request("GET", url, params=wanted, timeout=timeout_s,
                                       headers={"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING})
        resp = await client.send(request, stream=True)
        try:
            _check_status(resp, base_url)
            cut = await read_limited(resp, SEARCH_MAX_BYTES, body)
        finally:
            await resp.aclose()
    except httpx.HTTPError as exc:
        raise SearchUnavailable(f"SearXNG at {base_url} unreachable: {type(exc).__name__}: {exc}") from exc
    except BodyRefused as exc:
        raise SearchUnavailable(f"SearXNG at {base_url} sent an answer briefd cannot read: {exc}") from exc
    payload = read_answer(bytes(body))
    response = parse_response(query, payload)
    if cut is not None:
        response.note = (f"SearXNG's answer to {query!r} was {cut}: read the first {SEARCH_MAX_BYTES} bytes, "
                         f"kept the {len(response.hits)} results in them")
    if not response.hits and response.unresponsive_engines:
        raise EnginesFailing(base_url, response.unresponsive_engines)
    response.hits = filter_hits(response.hits, params)
    return response


def _check_status(resp: httpx.Response, base_url: str) -> None:
    """Raise for an answer that is not a result list: a refusal with a fix, or an outage."""
    if resp.status_code == 403:
        raise SearchRefused(403, FIX_JSON_FORMAT)
    if resp.status_code == 429:
        raise SearchRefused(429, FIX_LIMITER)
    if resp.status_code != 200:
        raise SearchUnavailable(f"SearXNG at {base_url} answered HTTP {resp.status_code}")


@dataclass
class SearchProbe:
    ok: bool
    message: str
    fix: str | None = None


async def probe(base_url: str, timeout_s: float = 10.0) -> SearchProbe:
    """For `briefd check`: reachable? JSON format enabled? limiter in the way?"""
    async with httpx.AsyncClient() as client:
        try:
            resp = await search(client, base_url, "briefd check", SearchOptions(), timeout_s)
        except SearchRefused as exc:
            return SearchProbe(False, f"SearXNG at {base_url} refuses JSON searches (HTTP {exc.status})", exc.fix)
        except EnginesFailing as exc:
            return SearchProbe(False, str(exc), exc.fix)
        except SearchUnavailable as exc:
            return SearchProbe(False, str(exc), "start SearXNG or point BRIEFD_SEARXNG_URL / --searxng-url at it")
    note = f"SearXNG at {base_url}: JSON search works ({len(resp.hits)} results for a test query)"
    if resp.unresponsive_engines:
        note += f"; unresponsive engines: {', '.join(resp.unresponsive_engines)}"
    return SearchProbe(True, note)
