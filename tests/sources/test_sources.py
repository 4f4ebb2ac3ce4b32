"""Choosing where a brief looks (`sources`) and merging what each place found (daemon/sources/sources.py).

A brief that asks for a source this daemon does not have is refused at the inbox with the
fix; hits from several queries and sources come back as one list by reciprocal rank fusion.
"""

from __future__ import annotations

import contextvars
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from briefd.daemon.core.brief import SOURCE_KINDS, parse_brief
from briefd.daemon.core.briefjson import BriefError
from briefd.daemon.intake.inbox import Inbox
from briefd.daemon.sources.search import SearchHit
from briefd.daemon.core.settings import Settings
from briefd.daemon.sources.sources import RRF_K, chosen, configured, fuse, fuse_scored, kind_of_url, refusal
from briefd.store import Store

from tests.intake.test_inbox_edges import error_json

if TYPE_CHECKING:
    from briefd.daemon.research.loop import Research

WEB_ONLY = Settings()
EVERYTHING = Settings(library=(Path("/srv/library"),), archives=(Path("/srv/zim/wiki.zim"),))
AIR_GAPPED = Settings(egress="none", library=(Path("/srv/library"),))
NOTHING = Settings(egress="none")


def brief(**fields: object) -> bytes:
    return json.dumps({"question": "How deep is the Kestrel River at the bridge?", **fields}).encode()


def hit(url: str, source: str = "web") -> SearchHit:
    return SearchHit(url=url, title=url, content="", engine=source, source=source)


# --------------------------------------------------------------------------- the brief field


def test_sources_is_a_set_of_known_kinds_in_canonical_order() -> None:
    parsed = parse_brief(brief(sources=["archives", "web"]), "b.json")
    assert parsed.sources == ("web", "archives")
    assert parse_brief(brief(), "b.json").sources is None
    assert parsed.to_json()["sources"] == ["web", "archives"]
    assert "sources" not in parse_brief(brief(), "b.json").to_json()  # the default depends on the daemon


@pytest.mark.parametrize(("value", "field", "words"), [
    (["web", "intranet"], "sources[1]", 'must be one of "web", "library", "archives"'),
    (["libary"], "sources[0]", "did you mean"),
    (["web", "web"], "sources[1]", 'lists "web" more than once'),
    ([], "sources", "is empty: name at least one"),
    ("library", "sources", 'write ["library"]'),
])
def test_a_bad_sources_field_names_the_item_and_the_fix(value: object, field: str, words: str) -> None:
    with pytest.raises(BriefError) as caught:
        parse_brief(brief(sources=value), "b.json")
    assert caught.value.field == field
    assert words in str(caught.value)


# --------------------------------------------------------------------------- what is configured


def test_what_is_configured_follows_the_settings() -> None:
    assert configured(WEB_ONLY) == ("web",)
    assert configured(EVERYTHING) == SOURCE_KINDS
    assert configured(AIR_GAPPED) == ("library",)  # egress = none: the web is out of reach
    assert configured(NOTHING) == ()


def test_a_brief_asking_for_a_source_not_configured_is_refused_with_the_fix() -> None:
    err = refusal(parse_brief(brief(sources=["web", "library"]), "b.json"), WEB_ONLY)
    assert err is not None and err.field == "sources[1]"
    assert "no library is configured" in str(err) and "BRIEFD_LIBRARY" in str(err)
    err = refusal(parse_brief(brief(sources=["web"]), "b.json"), AIR_GAPPED)
    assert err is not None and "egress = none" in str(err)
    assert refusal(parse_brief(brief(sources=["library"]), "b.json"), AIR_GAPPED) is None
    assert refusal(parse_brief(brief(), "b.json"), WEB_ONLY) is None
    nothing = refusal(parse_brief(brief(), "b.json"), NOTHING)
    assert nothing is not None and "no source to search" in str(nothing)


def test_the_default_is_everything_configured_and_a_choice_narrows_it() -> None:
    assert chosen(None, EVERYTHING) == SOURCE_KINDS
    assert chosen(["library", "archives"], EVERYTHING) == ("library", "archives")
    assert chosen(None, AIR_GAPPED) == ("library",)


def test_the_inbox_refuses_a_brief_for_a_source_it_does_not_have(tmp_path: Path) -> None:
    (tmp_path / "inbox").mkdir()
    store = Store(tmp_path / "briefd.db")
    try:
        inbox = Inbox(tmp_path / "inbox", tmp_path / "outbox", store, settle_seconds=0,
                      refusal=lambda b: refusal(b, WEB_ONLY))
        (tmp_path / "inbox" / "docs.json").write_bytes(brief(id="docs", sources=["library"]))
        (tmp_path / "inbox" / "web.json").write_bytes(brief(id="web", sources=["web"]))
        inbox.scan()
        taken = {a.brief_id: a.rejected for a in inbox.take_ready()}
    finally:
        store.close()
    assert taken == {"docs": True, "web": False}
    error = error_json(tmp_path / "outbox" / "docs")
    assert "no library is configured" in error["error"]
    assert not (tmp_path / "inbox" / "docs.json").exists()  # answered, not left to be retried forever


# --------------------------------------------------------------------------- one list from many


def test_fusion_keeps_every_lists_first_hit_on_top() -> None:
    web = [hit("https://a.example/1"), hit("https://a.example/2"), hit("https://a.example/3")]
    library = [hit("file:///srv/library/x.pdf", "library"), hit("file:///srv/library/y.docx", "library")]
    merged = fuse([web, library])
    assert [h.url for h in merged] == ["https://a.example/1", "file:///srv/library/x.pdf",
                                      "https://a.example/2", "file:///srv/library/y.docx",
                                      "https://a.example/3"]


def test_a_hit_found_by_two_lists_rises_above_one_found_once() -> None:
    first = [hit("https://a.example/top"), hit("https://a.example/both")]
    second = [hit("https://b.example/top"), hit("https://a.example/both")]
    scored = fuse_scored([first, second])
    assert scored[0].hit.url == "https://a.example/both"
    assert scored[0].lists == 2
    assert scored[0].score == pytest.approx(2 / (RRF_K + 2))


def test_fusion_keeps_the_first_hit_seen_and_counts_a_repeated_url_once_per_list() -> None:
    web = [hit("https://a.example/1"), hit("https://a.example/1")]
    other = [SearchHit(url="https://a.example/1", title="later title", content="", engine="x")]
    scored = fuse_scored([web, other])
    assert len(scored) == 1 and scored[0].lists == 2 and scored[0].hit.title == "https://a.example/1"


def test_urls_say_which_source_they_belong_to() -> None:
    assert kind_of_url("https://example.org/report.pdf") == "web"
    assert kind_of_url("file:///srv/library/report.pdf") == "library"
    assert kind_of_url("zim://wikipedia.zim/A/Anchorage") == "archives"


# --------------------------------------------------------------------------- a URL's source is the brief's to choose


def _research(tmp_path: Path, sources: list[str], model_url: str = "http://127.0.0.1:9") -> "Research":
    import httpx

    from briefd.daemon.core.events import EventLog
    from briefd.daemon.sources.fetch import FetchLimits, make_client
    from briefd.daemon.model.llm import ModelConfig, make_client as make_llm_client
    from briefd.daemon.research.loop import Research, Services

    settings = Settings(db=tmp_path / "briefd.db", outbox=tmp_path / "outbox", library=(tmp_path / "lib",))
    store = Store(settings.db)
    raw = json.dumps({"id": "b", "question": "How deep is the Kestrel River?", "sources": sources}).encode()
    run_id = store.add_brief(brief_id="b", question="How deep?", source_file="b.json", received=raw,
                             brief_json=raw.decode(), inbox_path=str(tmp_path / "b.json"))
    model = ModelConfig(host=model_url, model="lab-scripted", num_ctx=2048, num_predict=256,
                        timeout_s=1.0, temperature=0.0, seed=1)
    svc = Services(settings=settings, store=store, http=httpx.AsyncClient(), fetch_client=make_client(FetchLimits()),
                   llm_client=make_llm_client(model), model=model, fetch_limits=FetchLimits())
    # built in a context of its own: Research starts its egress log in the context it is made in,
    # as the worker's task does; made here, the log would outlive this test and count later ones'
    return contextvars.copy_context().run(Research, svc, run_id, parse_brief(raw, "b.json"), "2026-01-01T00:00:00Z",
                                          EventLog(store, run_id, "b", tmp_path / "events.ndjson"))


@pytest.mark.parametrize(("sources", "read"), [(["web"], False), (["web", "library"], True)])
def test_a_library_url_is_read_only_for_a_brief_that_searches_the_library(
        tmp_path: Path, sources: list[str], read: bool) -> None:
    """A hit's URL alone never chooses the source: a file:// URL offered to a web-only brief (by a
    search engine over a document store, say) is not read from the library."""
    import asyncio

    research = _research(tmp_path, sources)
    url = (tmp_path / "lib" / "memo.md").as_uri()
    research.store.save_page(url=url, final_url=url, status=None, content_type="text/markdown", title="Memo",
                             text="The river is 14 metres deep.", size=28, extraction="plain", error=None,
                             passages=[(0, 0, 28, "The river is 14 metres deep.", None)])
    try:
        got = asyncio.run(research.reader.fetch_one(1, url, None))
    finally:
        research.store.close()
    assert (got is not None) == read
    if not read:
        assert "does not search library" in research.state.bad[url]
