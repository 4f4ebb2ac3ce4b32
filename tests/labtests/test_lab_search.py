"""The lab's search stack behaves like the web briefd will meet.

One lab (web + datasette + SearXNG, real subprocesses on loopback) serves the
whole module. Every hostile behaviour is measured with short timeouts: no test
waits for the slow page or the endless one to finish.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import trafilatura

from lab.corpus import (
    INJECTION_TEXT,
    LATIN1_MARKERS,
    PAGES,
    TOPICS,
    hostile_pages,
    page_by_kind,
    pages_for,
)
from lab.search_index import build_corpus_db
from lab.searxng import SearxngServer
from lab.servers import REPO_ROOT, SearchLab, free_port, start_search_lab
from lab.web import HUGE_BYTES, LYING_LENGTH, SLOW_SECONDS

# Starts the lab servers itself (a module-scoped fixture), not through the conftest fixtures.
pytestmark = pytest.mark.lab

FAST = httpx.Timeout(5.0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchLab]:
    with start_search_lab(tmp_path_factory.mktemp("search-lab")) as running:
        yield running


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=FAST, trust_env=False) as c:
        yield c


def search(client: httpx.Client, base_url: str, query: str, **params: str) -> httpx.Response:
    return client.get(f"{base_url}/search", params={"q": query, "format": "json", **params})


def slugs_of(results: list[dict[str, object]]) -> list[str]:
    """Page slugs of SearXNG results, in rank order."""
    out = []
    for result in results:
        path = urlsplit(str(result["url"])).path
        if path.startswith("/loop/"):
            out.append(path.split("/")[2])
        else:
            out.append(path.rsplit("/", 1)[-1].rsplit(".", 1)[0])
    return out


# --------------------------------------------------------------------------- search


def test_lab_starts_in_seconds(lab: SearchLab) -> None:
    assert lab.startup_seconds < 20, lab.startup_seconds
    for url in (lab.web_url, lab.datasette_url, lab.searxng_url):
        assert urlsplit(url).hostname == "127.0.0.1"


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_searxng_answers_a_natural_language_question_with_corpus_pages(
    lab: SearchLab, client: httpx.Client, topic: str
) -> None:
    response = search(client, lab.searxng_url, TOPICS[topic].question)
    assert response.status_code == 200
    data = response.json()
    assert data["unresponsive_engines"] == []
    results = data["results"]
    found = slugs_of(results)
    good = [p.slug for p in pages_for(topic) if p.kind not in {"not_found", "binary", "binary_html", "wrong_type"}]
    assert len(set(found) & set(good)) >= 5, found
    # Results point at the lab web and carry the corpus snippet as content.
    by_slug = {p.slug: p for p in PAGES}
    for result, slug in zip(results, found, strict=True):
        page = by_slug[slug]
        assert result["url"] == lab.page_url(page)
        assert result["title"] == page.title
        assert result["content"] == page.snippet
        assert result["engine"] == "localcorpus"


@pytest.mark.parametrize("topic", ["kestrel", "northgate", "lakeside", "orbital"])
def test_hostile_pages_rank_high_like_spam(lab: SearchLab, client: httpx.Client, topic: str) -> None:
    results = search(client, lab.searxng_url, TOPICS[topic].question).json()["results"]
    top5 = slugs_of(results)[:5]
    hostile = {p.slug for p in hostile_pages() if p.topic == topic}
    assert hostile & set(top5), top5


def test_every_hostile_page_is_reachable_through_search(lab: SearchLab, client: httpx.Client) -> None:
    seen: set[str] = set()
    for topic in TOPICS.values():
        seen.update(slugs_of(search(client, lab.searxng_url, topic.question).json()["results"]))
    missing = {p.slug for p in hostile_pages()} - seen
    assert not missing


def test_estimate_topic_results_carry_every_kind_of_claim(lab: SearchLab, client: httpx.Client) -> None:
    results = search(client, lab.searxng_url, TOPICS["northgate"].question).json()["results"]
    text = " ".join(r["content"] for r in results)
    for claim in ("$431 million", "US$0.43bn", "$410 million", "430 million dollars", "$450 million",
                  "$520 million", "ten billion", INJECTION_TEXT):
        assert claim in text, claim


def test_hypothesis_claim_finds_pages_on_both_sides(lab: SearchLab, client: httpx.Client) -> None:
    results = search(client, lab.searxng_url, TOPICS["lakeside"].claim).json()["results"]
    roles = {p.slug: p.role for p in pages_for("lakeside")}
    found_roles = {roles[slug] for slug in slugs_of(results)[:10] if slug in roles}
    assert {"supports", "contradicts"} <= found_roles


def test_results_come_from_two_domains(lab: SearchLab, client: httpx.Client) -> None:
    for topic in TOPICS.values():
        results = search(client, lab.searxng_url, topic.question).json()["results"]
        hosts = {urlsplit(r["url"]).hostname for r in results}
        assert hosts == {"127.0.0.1", "localhost"}, (topic.key, hosts)


def test_snippets_alone_answer_the_snippets_topic(lab: SearchLab, client: httpx.Client) -> None:
    results = search(client, lab.searxng_url, TOPICS["orbital"].question).json()["results"]
    saying_ocaml = [r for r in results if "written in OCaml" in r["content"] or "OCaml 94.1%" in r["content"]]
    assert len(saying_ocaml) >= 3


@pytest.mark.parametrize(
    "params",
    [
        {"language": "en"},
        {"language": "de-DE"},
        {"language": "all"},
        {"time_range": "day"},
        {"time_range": "year"},
        {"categories": "general"},
        {"categories": "news"},
        {"categories": "general,news"},
        {"engines": "localcorpus"},
        {"pageno": "1", "safesearch": "1"},
    ],
)
def test_searxng_accepts_search_options(lab: SearchLab, client: httpx.Client, params: dict[str, str]) -> None:
    response = search(client, lab.searxng_url, TOPICS["kestrel"].question, **params)
    assert response.status_code == 200
    data = response.json()
    assert data["unresponsive_engines"] == []
    assert "kestrel-county-notice" in slugs_of(data["results"])


def test_searxng_html_page_shows_corpus_results(lab: SearchLab, client: httpx.Client) -> None:
    response = client.get(f"{lab.searxng_url}/search", params={"q": TOPICS["kestrel"].question})
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    assert 'class="result result-default' in response.text
    assert lab.page_url("kestrel-county-notice") in response.text


def test_datasette_canned_query_ors_terms_where_plain_search_ands_them(lab: SearchLab, client: httpx.Client) -> None:
    question = TOPICS["northgate"].question
    canned = client.get(lab.search_api_url, params={"q": question, "_shape": "objects"})
    assert canned.status_code == 200
    rows = canned.json()["rows"]
    assert len(rows) >= 10 and set(rows[0]) == {"url", "title", "content"}
    # Datasette's own _search needs every word on one page: only the spam page
    # that repeats the question word for word matches it.
    plain = client.get(f"{lab.datasette_url}/corpus/pages.json", params={"_search": question, "_shape": "objects"})
    assert plain.status_code == 200
    assert [row["slug"] for row in plain.json()["rows"]] == ["northgate-overrun-final-figures"]


@pytest.mark.parametrize("query", ['" OR NEAR(', "title:*", "AND", "", "?!", "x" * 5000])
def test_canned_query_survives_fts_syntax_in_user_text(lab: SearchLab, client: httpx.Client, query: str) -> None:
    response = client.get(lab.search_api_url, params={"q": query, "_shape": "objects"})
    assert response.status_code == 200
    assert response.json()["ok"] is True


def test_index_urls_follow_the_web_port(tmp_path: Path) -> None:
    import sqlite_utils

    db = sqlite_utils.Database(build_corpus_db(tmp_path / "c.db", 12345))
    urls = [row["url"] for row in db["pages"].rows]
    assert len(urls) == len(PAGES)
    assert all(urlsplit(u).port == 12345 for u in urls)
    assert {urlsplit(u).hostname for u in urls} == {"127.0.0.1", "localhost"}


# ------------------------------------------------------------------------------ web


def test_article_is_a_real_html_document_that_trafilatura_extracts(lab: SearchLab, client: httpx.Client) -> None:
    page = page_by_kind("article")
    response = client.get(lab.page_url(page))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert f"<title>{page.title}" in response.text
    assert "<nav>" in response.text and "cookie" in response.text
    text = trafilatura.extract(response.content, url=str(response.url))
    assert text is not None
    assert "found corrosion in the steel anchorages" in text
    assert "We use cookies" not in text and "All rights reserved" not in text


@pytest.mark.parametrize(
    "slug", [p.slug for p in PAGES if p.kind in {"article", "moved", "injection", "latin1"}]
)
def test_every_readable_page_extracts_whole_without_boilerplate(
    lab: SearchLab, client: httpx.Client, slug: str
) -> None:
    page = next(p for p in PAGES if p.slug == slug)
    response = client.get(lab.page_url(page), follow_redirects=True)
    text = trafilatura.extract(response.content, url=str(response.url)) or ""
    for paragraph in page.text.split("\n\n"):
        assert paragraph[:40] in text, paragraph[:40]
    for boilerplate in ("We use cookies", "Related articles", "Sign up", "All rights reserved"):
        assert boilerplate not in text


def test_page_on_localhost_is_served(lab: SearchLab, client: httpx.Client) -> None:
    page = next(p for p in PAGES if p.host == "localhost" and p.kind == "article")
    response = client.get(lab.page_url(page))
    assert response.status_code == 200
    assert page.paragraphs[0][:60] in response.text


def test_moved_page_redirects_once_to_its_final_url(lab: SearchLab, client: httpx.Client) -> None:
    page = page_by_kind("moved")
    first = client.get(lab.page_url(page))
    assert first.status_code == 301
    assert first.headers["location"] == page.final_path
    followed = client.get(lab.page_url(page), follow_redirects=True)
    assert followed.status_code == 200
    assert str(followed.url) == page.final_url(lab.web_port)
    assert len(followed.history) == 1


def test_redirect_loop_never_lands(lab: SearchLab, client: httpx.Client) -> None:
    page = page_by_kind("redirect_loop")
    first = client.get(lab.page_url(page))
    assert first.status_code == 302 and first.headers["location"].endswith("/b")
    second = client.get(f"http://{page.host}:{lab.web_port}{first.headers['location']}")
    assert second.status_code == 302 and second.headers["location"] == page.path
    with httpx.Client(timeout=FAST, trust_env=False, max_redirects=10) as c:
        with pytest.raises(httpx.TooManyRedirects):
            c.get(lab.page_url(page), follow_redirects=True)


def test_not_found_page_answers_404(lab: SearchLab, client: httpx.Client) -> None:
    response = client.get(lab.page_url(page_by_kind("not_found")))
    assert response.status_code == 404


@pytest.mark.parametrize("kind,content_type", [("binary", "application/octet-stream"), ("binary_html", "text/html")])
def test_binary_pages_are_random_bytes(lab: SearchLab, client: httpx.Client, kind: str, content_type: str) -> None:
    url = lab.page_url(page_by_kind(kind))
    first, second = client.get(url), client.get(url)
    assert first.status_code == 200
    assert first.headers["content-type"].startswith(content_type)
    with pytest.raises(UnicodeDecodeError):
        first.content.decode("utf-8")
    assert first.content == second.content  # seeded: the same bytes every time
    assert len(first.content) > 100_000


def test_latin1_page_has_no_charset_and_decodes_as_windows_1252(lab: SearchLab, client: httpx.Client) -> None:
    page = page_by_kind("latin1")
    response = client.get(lab.page_url(page))
    assert response.headers["content-type"] == "text/html"
    assert b"charset" not in response.content.lower()
    with pytest.raises(UnicodeDecodeError):
        response.content.decode("utf-8")
    text = response.content.decode("cp1252")
    for marker in LATIN1_MARKERS:
        assert marker in text, marker


def test_injection_page_carries_the_injection_in_its_text(lab: SearchLab, client: httpx.Client) -> None:
    response = client.get(lab.page_url(page_by_kind("injection")))
    text = trafilatura.extract(response.content, url=str(response.url))
    assert text is not None and INJECTION_TEXT in text


def test_wrong_type_page_is_a_png_at_an_html_url(lab: SearchLab, client: httpx.Client) -> None:
    page = page_by_kind("wrong_type")
    assert page.path.endswith(".html")
    response = client.get(lab.page_url(page))
    assert response.headers["content-type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")


def test_lying_length_page_sends_more_than_its_content_length(lab: SearchLab) -> None:
    page = page_by_kind("lying_length")
    raw = b""
    with socket.create_connection(("127.0.0.1", lab.web_port), timeout=5) as sock:
        sock.sendall(f"GET {page.path} HTTP/1.1\r\nHost: {page.host}\r\n\r\n".encode())
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert f"Content-Length: {LYING_LENGTH}".encode() in head
    assert len(body) > 10 * LYING_LENGTH
    assert b"</html>" in body


def test_huge_page_announces_and_streams_30_mb(lab: SearchLab) -> None:
    url = lab.page_url(page_by_kind("huge"))
    received = 0
    started = time.monotonic()
    with httpx.stream("GET", url, timeout=FAST, trust_env=False) as response:
        assert int(response.headers["content-length"]) >= HUGE_BYTES * 0.95
        for chunk in response.iter_bytes():
            received += len(chunk)
            if received >= 4 * 1024 * 1024:
                break  # a fetcher with a size cap stops here
    assert received >= 4 * 1024 * 1024
    assert time.monotonic() - started < 5


def test_slow_page_trickles_without_blocking_other_requests(lab: SearchLab, client: httpx.Client) -> None:
    url = lab.page_url(page_by_kind("slow"))
    started = time.monotonic()
    received = 0
    with httpx.stream("GET", url, timeout=httpx.Timeout(5.0), trust_env=False) as response:
        headers_after = time.monotonic() - started
        total = int(response.headers["content-length"])
        # Meanwhile another page answers at once.
        quick_started = time.monotonic()
        assert client.get(lab.page_url(page_by_kind("article"))).status_code == 200
        assert time.monotonic() - quick_started < 1.0
        for chunk in response.iter_bytes():
            received += len(chunk)
            if time.monotonic() - started > 1.5:
                break
    assert headers_after < 1.0
    assert 0 < received < total * 0.1  # at this pace the whole page takes about a minute
    assert SLOW_SECONDS >= 60


def test_stream_forever_page_never_ends(lab: SearchLab) -> None:
    url = lab.page_url(page_by_kind("stream_forever"))
    received = 0
    with httpx.stream("GET", url, timeout=FAST, trust_env=False) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in response.headers
        for chunk in response.iter_bytes():
            received += len(chunk)
            if received > 2 * 1024 * 1024:
                break
        else:
            pytest.fail("the endless page ended")
    assert received > 2 * 1024 * 1024


# ------------------------------------------------------------- other SearXNG setups


@dataclass
class Variants:
    json_off: SearxngServer
    limited: SearxngServer
    dead_index: SearxngServer


@pytest.fixture(scope="module")
def variants(lab: SearchLab) -> Iterator[Variants]:
    """Three more SearXNGs, started in parallel: json off, limiter on, index down."""
    from lab.searxng import SearxngOptions, start_searxng

    dead_index = f"http://127.0.0.1:{free_port()}"
    servers = Variants(
        json_off=lab.start_searxng(json_format=False, wait=False),
        # 198.51.100.7 (TEST-NET-2) stands for a client the admin let through.
        limited=lab.start_searxng(limiter=True, pass_ips=("198.51.100.7",), wait=False),
        dead_index=start_searxng(
            lab.workdir, dead_index, options=SearxngOptions(), name="searxng-dead-index", wait=False
        ),
    )
    try:
        for server in (servers.json_off, servers.limited, servers.dead_index):
            server.wait_ready()
        yield servers
    finally:
        servers.dead_index.stop()  # the others stop with the lab


def test_searxng_without_json_format_answers_403(variants: Variants, client: httpx.Client) -> None:
    assert search(client, variants.json_off.url, "kestrel bridge").status_code == 403
    html = client.get(f"{variants.json_off.url}/search", params={"q": "kestrel bridge"})
    assert html.status_code == 200


def test_searxng_with_limiter_answers_429(variants: Variants, client: httpx.Client) -> None:
    response = search(client, variants.limited.url, "kestrel bridge")
    assert response.status_code == 429


def test_limiter_lets_a_pass_listed_address_through(variants: Variants, client: httpx.Client) -> None:
    # The lab's SearXNG trusts loopback as a proxy, so X-Forwarded-For names the client.
    for _ in range(6):  # more than the limiter's 4 API requests an hour
        response = client.get(
            f"{variants.limited.url}/search",
            params={"q": "kestrel bridge", "format": "json"},
            headers={"X-Forwarded-For": "198.51.100.7"},
        )
        assert response.status_code == 200
        assert response.json()["results"]


def test_engine_outage_shows_in_unresponsive_engines(variants: Variants, client: httpx.Client) -> None:
    response = search(client, variants.dead_index.url, "kestrel bridge")
    assert response.status_code == 200
    data = response.json()
    assert data["results"] == []
    assert [e[0] for e in data["unresponsive_engines"]] == ["localcorpus"]


# ---------------------------------------------------------------- the demo entry


def test_servers_main_prints_urls_and_stops_everything_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.servers", "--workdir", str(tmp_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no URLs printed within 60 s"
        info = json.loads(proc.stdout.readline())
        urls = [info["web_url"], info["datasette_url"], info["searxng_url"]]
        with httpx.Client(timeout=FAST, trust_env=False) as c:
            assert c.get(f"{info['web_url']}/healthz").status_code == 200
            results = search(c, info["searxng_url"], TOPICS["northgate"].question).json()["results"]
            assert results
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        for url in urls:
            with pytest.raises(httpx.ConnectError):
                httpx.get(url, timeout=2, trust_env=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
