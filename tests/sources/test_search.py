"""daemon/sources/search.py against the real SearXNG of the lab."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from briefd.daemon.sources import search
from briefd.daemon.core.brief import SearchOptions
from briefd.daemon.sources.extract import MAX_TITLE_CHARS
from lab import web
from lab.corpus import TOPICS
from tests.httpstub import QuietHandler, serving


def run(coro):
    return asyncio.run(coro)


async def _search(url: str, query: str, opts: SearchOptions = SearchOptions()) -> search.SearchResponse:
    async with httpx.AsyncClient(trust_env=False) as client:
        return await search.search(client, url, query, opts, 20.0)


def test_a_question_finds_corpus_pages_with_titles_and_snippets(search_lab) -> None:
    response = run(_search(search_lab.searxng_url, TOPICS["kestrel"].question))
    assert len(response.hits) >= 5
    assert all(h.url.startswith("http://") and h.title and h.engine == "localcorpus" for h in response.hits)
    assert any("anchor" in h.content.lower() for h in response.hits)


def test_domain_filters_and_options_are_applied(search_lab) -> None:
    question = TOPICS["northgate"].question
    only = run(_search(search_lab.searxng_url, question, SearchOptions(include_domains=("localhost",))))
    assert only.hits and all(search.host_of(h.url) == "localhost" for h in only.hits)
    without = run(_search(search_lab.searxng_url, question,
                          SearchOptions(exclude_domains=("localhost",), categories=("general",),
                                        language="en", time_range="year")))
    assert without.hits and all(search.host_of(h.url) == "127.0.0.1" for h in without.hits)


@pytest.mark.parametrize("host, domain, match", [
    ("example.org", "example.org", True), ("news.example.org", "example.org", True),
    ("badexample.org", "example.org", False), ("example.org", "EXAMPLE.ORG.", True),
])
def test_domain_matching_covers_subdomains_only(host: str, domain: str, match: bool) -> None:
    assert search.domain_matches(host, domain) is match


def test_json_format_off_is_a_refusal_with_the_fix(search_lab) -> None:
    server = search_lab.start_searxng(json_format=False)
    with pytest.raises(search.SearchRefused) as info:
        run(_search(server.url, "anything"))
    assert info.value.status == 403 and "formats: [html, json]" in info.value.fix
    probe = run(search.probe(server.url))
    assert not probe.ok and probe.fix == search.FIX_JSON_FORMAT


def test_a_down_searxng_is_unavailable_not_refused() -> None:
    with pytest.raises(search.SearchUnavailable):
        run(_search("http://127.0.0.1:9", "anything"))


@pytest.mark.parametrize("payload", [None, [], "x", {"results": "x"}, {"results": [1, {"url": 5}, {"title": "t"}]},
                                     {"results": [{"url": "http://a/", "title": None, "content": 3}],
                                      "unresponsive_engines": [["localcorpus", "timeout"], 7]}])
def test_malformed_responses_are_no_results_never_a_crash(payload) -> None:
    response = search.parse_response("q", payload)
    assert all(h.url.startswith("http") for h in response.hits)


def test_unresponsive_engines_are_reported() -> None:
    response = search.parse_response("q", {"results": [], "unresponsive_engines": [["localcorpus", "timeout"]]})
    assert response.unresponsive_engines == ["localcorpus: timeout"]


def test_cache_key_normalises_the_query_but_not_the_options() -> None:
    a = search.cache_key("Kestrel  Bridge", SearchOptions())
    assert a == search.cache_key("kestrel bridge", SearchOptions())
    assert a != search.cache_key("kestrel bridge", SearchOptions(language="de"))


def test_titles_and_snippets_are_cleaned_where_they_enter() -> None:
    """A search engine's title or snippet with terminal escapes or bidi overrides: the hit
    briefd keeps (shown to the model, quoted in reports) has none of them."""
    payload = json.dumps({"results": [{
        "url": "http://a.example/", "engine": "x",
        "title": "Rates\u0007 \u001b[31mrise\u001b[0m \u202eexe.txt",
        "content": "Rates rose\u2028three\u2066 points\u2069\ufeff today.\u009b2J",
    }]}).encode()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_json(payload)

    with serving(Handler) as httpd:
        response = run(_search(f"http://127.0.0.1:{httpd.server_address[1]}", "rates"))
    [hit] = response.hits
    assert hit.title == "Rates rise exe.txt"
    assert hit.content == "Rates rose\nthree points today.2J"


# --------------------------------------------------------------------------- a SearXNG that floods

@pytest.fixture
def flood(hostile_web: str) -> str:
    """The lab web's flooding SearXNG: every answer holds web.FLOOD_RESULTS results (about 90 MB)."""
    return f"{hostile_web}/hostile/searxng"


MEASURE_SEARCH = r"""
import asyncio, json, resource, sys
import httpx
from briefd.daemon.sources import search
from briefd.daemon.core.brief import SearchOptions
from briefd.daemon.sources.extract import MAX_TITLE_CHARS

base_url, headroom = sys.argv[1], int(sys.argv[2])
with open("/proc/self/status") as status:
    vm_bytes = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes + headroom, resource.RLIM_INFINITY))


async def main() -> dict:
    async with httpx.AsyncClient(trust_env=False) as client:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            response = await search.search(client, base_url, "flood", SearchOptions(), 60.0)
        except MemoryError:
            return {"escaped": "MemoryError"}
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    stored = [h.as_dict() for h in response.hits]  # what the loop caches and records for the query
    return {"hits": len(response.hits), "stored_bytes": len(json.dumps(stored)), "note": getattr(response, "note", None),
            "grew_kb": grew}


print(json.dumps(asyncio.run(main())))
"""


def test_a_flood_of_results_is_cut_to_what_briefd_uses_with_memory_bounded(flood: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", MEASURE_SEARCH, flood, str(1 << 30)],
                          capture_output=True, text=True, timeout=180, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "escaped" not in outcome, "reading the answer ran out of memory"
    assert outcome["hits"] == search.MAX_HITS_PER_QUERY
    assert outcome["stored_bytes"] < 100_000  # fifty results of ~450 bytes, not 90 MB
    assert outcome["note"] == (f"SearXNG's answer to 'flood' was too large (>{search.SEARCH_MAX_BYTES} bytes): "
                               f"read the first {search.SEARCH_MAX_BYTES} bytes, kept the "
                               f"{search.MAX_HITS_PER_QUERY} results in them")
    assert outcome["grew_kb"] < 60_000  # the 4 MiB read and 50 hits; 90 MB parsed would be ~900 MB


def test_an_answer_cut_mid_result_keeps_the_results_that_arrived_whole() -> None:
    whole = b'{"results": [' + b",".join(web.flood_result(n, f"http://a.example/{n}") for n in range(3)) + b"]}"
    cut = whole[: whole.index(b"Flood result 2")]
    payload = search.read_answer(cut)
    response = search.parse_response("q", payload)
    assert [h.title for h in response.hits] == ["Flood result 0", "Flood result 1"]


def test_each_hit_keeps_only_what_briefd_can_use() -> None:
    payload = {"results": [
        {"url": "http://a.example/" + "x" * 5000, "title": "too long a URL to fetch"},
        {"url": "http://b.example/", "title": "T" * 10_000, "content": "C" * 1_000_000, "engine": "E" * 1000},
    ] + [{"url": f"http://c.example/{n}", "title": str(n)} for n in range(1000)]}
    response = search.parse_response("q", payload)
    assert len(response.hits) == search.MAX_HITS_PER_QUERY
    first = response.hits[0]
    assert first.url == "http://b.example/"
    assert len(first.content) == search.SNIPPET_MAX_CHARS
    assert len(first.title) <= MAX_TITLE_CHARS and len(first.engine) <= MAX_TITLE_CHARS


def test_names_of_failing_engines_are_cleaned_where_they_enter() -> None:
    """`unresponsive_engines` reach the `signal` event and `briefd status`: through the same door as titles."""
    payload = {"results": [], "unresponsive_engines": [["wiki\u001b[31m", "timeout\u202e"], "news\u0007"]}
    response = search.parse_response("rates", payload)
    assert response.unresponsive_engines == ["wiki: timeout", "news"]
