"""Pages read before are checked again, not downloaded again (issue 12): conditional requests.

A stored page younger than `max_age` is used as it is; an older one with validators (ETag,
Last-Modified) is asked for with If-None-Match / If-Modified-Since, and a 304 costs no body
and no extraction: the stored text and passages are read, and the page's age restarts. A page
that changed answers 200 and is read again.

Checked on the real lab web (lab/web.py), at the fetch level and end to end with
`briefd run --once`: a brief asked again with max_age "0" downloads no page body and quotes
what it quoted before; once an article changes on the lab web, that page is downloaded and
its new text quoted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from briefd.daemon.sources.fetch import (MAX_ETAG_CHARS, FetchLimits, FetchResult, Validators, clean_etag, clean_last_modified,
                          fetch_page, make_client)
from briefd.daemon.report.report import USAGE_KEYS
from briefd.store import Store
from tests.conftest import OllamaLab, researched
from lab import web
from lab.corpus import PAGES_BY_SLUG, TOPICS
from lab.servers import SearchLab, start_search_lab
from lab.workspace import Workspace

pytestmark = pytest.mark.lab

ARTICLE = PAGES_BY_SLUG["orbital-homepage"]
MOVED = next(p for p in PAGES_BY_SLUG.values() if p.kind == "moved")
LIMITS = FetchLimits(timeout_s=10.0)
# the sentence a changed article gains: about the question, with figures (what the lab's model quotes first)
CHANGED = "Since 2026 the Orbital text editor is written in Rust: 12 of its 40 modules were rewritten."
CHANGED_MARK = "written in Rust"  # in no corpus page


# ---- the validators a page sends are untrusted ----------------------------------------------------


@pytest.mark.parametrize("sent, kept", [
    ('"v1-abc"', '"v1-abc"'), ('W/"weak"', 'W/"weak"'), ('  "padded"  ', '"padded"'),
    ("unquoted", None), ('"a", "b"', None), ('"line\r\nSet-Cookie: x"', None), ('"tab\there"', None),
    ('"caf\u00e9"', None), ('"' + "x" * MAX_ETAG_CHARS + '"', None), ("", None), (None, None),
])
def test_an_etag_is_kept_only_as_one_well_formed_bounded_tag(sent: str | None, kept: str | None) -> None:
    assert clean_etag(sent) == kept


@pytest.mark.parametrize("sent, kept", [
    ("Tue, 11 Mar 2025 09:00:00 GMT", "Tue, 11 Mar 2025 09:00:00 GMT"),
    ("Tuesday, 11-Mar-25 09:00:00 GMT", "Tue, 11 Mar 2025 09:00:00 GMT"),  # RFC 850, obsolete
    ("Tue Mar 11 09:00:00 2025", "Tue, 11 Mar 2025 09:00:00 GMT"),  # asctime, obsolete
    ("Tue, 11 Mar 2025 11:00:00 +0200", "Tue, 11 Mar 2025 09:00:00 GMT"),
    ("2025-03-11", None), ("yesterday", None), ("Tue, 11 Mar 2025 09:00:00 GMT" + " " * 60, None), (None, None),
])
def test_a_last_modified_is_kept_only_as_a_date_briefd_writes_itself(sent: str | None, kept: str | None) -> None:
    assert clean_last_modified(sent) == kept


# ---- fetch level, against the real lab web --------------------------------------------------------


@pytest.fixture
def lab_web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The lab web in this process, with an overrides folder of its own: (origin, folder)."""
    folder = tmp_path / "overrides"
    server, thread = web.serve_in_thread(overrides=folder)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def fetch(url: str, validators: Validators | None = None) -> FetchResult:
    async def go() -> FetchResult:
        async with make_client(LIMITS) as client:
            return await fetch_page(client, url, LIMITS, validators)
    return asyncio.run(go())


def validators_of(result: FetchResult) -> Validators:
    return Validators(result.final_url, result.etag, result.last_modified)


def test_an_unchanged_article_answers_304_and_no_body_is_read(lab_web: tuple[str, Path]) -> None:
    origin, _ = lab_web
    first = fetch(origin + ARTICLE.path)
    assert first.ok and first.etag and first.last_modified and ARTICLE.paragraphs[0].encode() in first.body
    again = fetch(origin + ARTICLE.path, validators_of(first))
    assert again.not_modified and again.status == 304
    assert again.error is None and again.body == b"" and not again.ok
    assert again.etag == first.etag  # a 304 repeats the validators, so the store can keep them current
    # Last-Modified alone is a validator too (If-Modified-Since)
    by_date = fetch(origin + ARTICLE.path, Validators(first.final_url, None, first.last_modified))
    assert by_date.not_modified and by_date.body == b""


def test_a_changed_article_is_downloaded_with_new_validators(lab_web: tuple[str, Path]) -> None:
    origin, folder = lab_web
    first = fetch(origin + ARTICLE.path)
    web.write_override(folder, ARTICLE.slug, [CHANGED, *ARTICLE.paragraphs[1:]])
    changed = fetch(origin + ARTICLE.path, validators_of(first))
    assert changed.ok and not changed.not_modified and changed.status == 200
    assert f"<p>{CHANGED}</p>".encode() in changed.body
    assert f"<p>{ARTICLE.paragraphs[0]}</p>".encode() not in changed.body
    assert changed.etag and changed.etag != first.etag
    assert changed.last_modified and first.last_modified
    assert parsedate_to_datetime(changed.last_modified) > parsedate_to_datetime(first.last_modified)
    # an old date alone (If-Modified-Since before the change) does not hide the change either
    assert fetch(origin + ARTICLE.path, Validators(first.final_url, None, first.last_modified)).ok


def test_a_page_without_validators_is_fetched_whole(lab_web: tuple[str, Path]) -> None:
    origin, _ = lab_web
    index = fetch(origin + "/")  # the lab web's index page sends neither ETag nor Last-Modified
    assert index.ok and index.etag is None and index.last_modified is None
    # a server that does not do conditional requests answers them in full
    asked = fetch(origin + "/", Validators(index.final_url, '"stale"', format_datetime(datetime.now(timezone.utc),
                                                                                       usegmt=True)))
    assert asked.ok and not asked.not_modified and asked.body == index.body


def test_the_validators_go_to_the_hop_the_stored_copy_came_from(lab_web: tuple[str, Path]) -> None:
    """A moved page: the redirect is followed as before, and the copy at its end is confirmed."""
    origin, _ = lab_web
    first = fetch(origin + MOVED.path)
    assert first.ok and first.redirects and first.final_url.endswith(MOVED.final_path)
    again = fetch(origin + MOVED.path, validators_of(first))
    assert again.not_modified and again.redirects == first.redirects and again.body == b""
    # validators of another URL are not sent: the page comes whole
    elsewhere = fetch(origin + MOVED.path, Validators(origin + ARTICLE.path, first.etag, first.last_modified))
    assert elsewhere.ok and elsewhere.body == first.body


# ---- the store: a confirmed page is as young as its confirmation ------------------------------------


def test_a_confirmed_page_is_trusted_for_max_age_from_its_confirmation(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    url = "http://127.0.0.1:9/pages/a.html"
    store.save_page(url=url, final_url=url, status=200, content_type="text/html", title="A", text="alpha beta",
                    size=10, extraction="plain", error=None, passages=[(0, 0, 10, "alpha beta", None)],
                    etag='"e1"', last_modified="Tue, 11 Mar 2025 09:00:00 GMT")
    week_ago = (datetime.now(timezone.utc) - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    store.db.execute("UPDATE pages SET fetched_at = ? WHERE url = ?", [week_ago, url])
    assert store.get_page(url, 3600) is None  # a week old: too old for an hour's max_age
    assert store.page_validators(url) == (url, '"e1"', "Tue, 11 Mar 2025 09:00:00 GMT")
    confirmed_at = store.confirm_page(url, etag='"e2"')
    page = store.get_page(url, 3600)
    assert page is not None and page.read_at == confirmed_at and page.fetched_at == week_ago
    assert page.etag == '"e2"' and page.last_modified == "Tue, 11 Mar 2025 09:00:00 GMT"
    assert store.page_read_at([url, "http://elsewhere/"]) == {url: confirmed_at}
    # a fresh download replaces the copy: its own validators (none here), not confirmed since
    store.save_page(url=url, final_url=url, status=200, content_type="text/html", title="A", text="gamma",
                    size=5, extraction="plain", error=None, passages=[(0, 0, 5, "gamma", None)])
    page = store.get_page(url, 3600)
    assert page is not None and page.checked_at is None and page.etag is None
    assert store.page_validators(url) is None  # nothing to ask with: the next fetch is a plain one
    store.close()


# ---- end to end: briefd run --once on the lab, asked again ------------------------------------------


BRIEF = {"question": TOPICS["orbital"].question, "depth": "quick", "max_rounds": 1, "max_searches_per_round": 1,
         "fetch_pages": True}  # one search, one batch of pages: the model reads them in one call
ACCESS = re.compile(r'\[(?P<at>[0-9T:.\-]+Z)\] "GET (?P<path>/pages/\S+) HTTP/1\.1" (?P<status>\d{3}) ')


@dataclass
class Rerun:
    ws: Workspace
    lab: SearchLab
    changed_url: str  # the page the first run quoted first: changed on the lab web before the third run
    changed_at: str   # when the lab web's pages changed (UTC, as its access log writes time)


@pytest.fixture(scope="module")
def rerun(tmp_path_factory: pytest.TempPathFactory, scripted_ollama: OllamaLab) -> Iterator[Rerun]:
    """A lab of its own (its articles are changed here), started with an overrides folder: a brief,
    the same brief again (a new id) with max_age "0", then once more after the articles it read
    changed.

    Every page the brief read is changed, not one alone: a round whose other pages are 304s and
    whose model answers are replayed from the cache has read them before a lone changed page is
    extracted (the page readers of `run --once` start cold), and the straggler rule (issue 11)
    then goes on without it."""
    root = tmp_path_factory.mktemp("revalidate")
    overrides = root / "overrides"
    lab = start_search_lab(root / "lab", overrides=overrides)
    try:
        ws = researched(root / "ws", lab, scripted_ollama, {"first": BRIEF}, timeout=300)
        run_once(ws, "again", {**BRIEF, "max_age": "0"})
        quoted = [e["url"] for e in ws.report("first")["evidence"] if e["url"].endswith(".html")]
        assert quoted, "the first run quoted a web page"
        changed_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for url in read_pages(ws, "first"):
            slug = url.rsplit("/", 1)[1].removesuffix(".html")
            web.write_override(overrides, slug, [CHANGED, *PAGES_BY_SLUG[slug].paragraphs])
        run_once(ws, "changed", {**BRIEF, "max_age": "0"})
        yield Rerun(ws=ws, lab=lab, changed_url=quoted[0], changed_at=changed_at)
    finally:
        lab.stop()


def read_pages(ws: Workspace, brief_id: str) -> set[str]:
    """The web pages a run downloaded and read."""
    return {e["url"] for e in ws.events(brief_id)
            if e["type"] == "page_fetched" and e.get("from_cache") is False and e.get("ok", True)}


def run_once(ws: Workspace, brief_id: str, brief: dict) -> None:
    ws.drop(f"{brief_id}.json", brief)
    result = ws.briefd("run", "--once", timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert ws.report(brief_id)["status"] == "done"


def quotes(report: dict) -> list[tuple[str, str]]:
    return sorted((e["url"], e["quote"]) for e in report["evidence"])


def test_usage_counts_checks_and_downloaded_bytes() -> None:
    assert {"pages_not_modified", "page_bytes"} <= set(USAGE_KEYS)


def test_the_first_run_downloads_its_pages_and_counts_their_bytes(rerun: Rerun) -> None:
    usage = rerun.ws.report("first")["usage"]
    assert usage["pages_fetched"] > 0 and usage["page_bytes"] > 0 and usage["pages_not_modified"] == 0


def test_a_brief_asked_again_past_max_age_downloads_no_page_and_quotes_the_same(rerun: Rerun) -> None:
    first, again = rerun.ws.report("first"), rerun.ws.report("again")
    usage = again["usage"]
    assert usage["pages_fetched"] == 0 and usage["page_bytes"] == 0
    assert usage["pages_not_modified"] > 0 and usage["page_cache_hits"] == 0  # asked, not taken unchecked
    assert quotes(again) == quotes(first) and again["evidence"]
    checked = [e for e in rerun.ws.events("again") if e["type"] == "page_fetched" and e.get("not_modified")]
    assert len(checked) == usage["pages_not_modified"] and all(e["status"] == 304 for e in checked)


def answers(rerun: Rerun) -> list[tuple[str, str, int]]:
    """The lab web's access log: (time, path, status) of every page asked for."""
    log = (rerun.lab.workdir / "logs" / "web.log").read_text(encoding="utf-8")
    return [(m["at"], m["path"], int(m["status"])) for m in ACCESS.finditer(log)]


def test_the_lab_web_log_shows_the_304s(rerun: Rerun) -> None:
    answered = {path for _, path, status in answers(rerun) if status == 304}
    checked = {urlsplit(e["url"]).path for e in rerun.ws.events("again")
               if e["type"] == "page_fetched" and e.get("not_modified")}
    assert checked and checked <= answered


def test_evidence_says_when_its_page_was_read(rerun: Rerun) -> None:
    store = Store(rerun.ws.db)
    try:
        runs = {row["brief_id"]: row["run_id"] for row in store.db.query("SELECT brief_id, run_id FROM briefs")}
        first = store.evidence(runs["first"])
        again = store.evidence(runs["again"])
    finally:
        store.close()
    assert first and again and all(e["read_at"] for e in first + again)
    # the second run's quotes were read when their pages were confirmed, after the first run's
    assert min(e["read_at"] for e in again) >= max(e["read_at"] for e in first)


def test_a_changed_article_is_downloaded_and_its_new_text_quoted(rerun: Rerun) -> None:
    report = rerun.ws.report("changed")
    usage = report["usage"]
    assert usage["page_bytes"] > 0 and usage["pages_fetched"] > 0 and usage["pages_not_modified"] == 0
    # the page quoted first was asked for again and answered in full: its new copy was downloaded
    path = urlsplit(rerun.changed_url).path
    assert [status for at, asked, status in answers(rerun) if asked == path and at > rerun.changed_at] == [200]
    new = [e["quote"] for e in report["evidence"] if CHANGED_MARK in e["quote"]]
    assert new, [e["quote"] for e in report["evidence"]]
    assert not any(CHANGED_MARK in e["quote"] for e in rerun.ws.report("again")["evidence"])
