"""What a document marks its own parts as: navigation never evidence, an example's figures read as examples (issue 27).

The rules used to tell a table of contents or a command example from the text by its shape alone. Extraction now
reads the markup (daemon/sources/structure.py): Texinfo's navigation panel and `<pre class="example">`, a section
headed "Examples", a man page's EXAMPLES section; each passage keeps which of its lines are what, and a kept quote
its part's kind (daemon/rules/layout.py). The documents here are the real-document set's dev half (m4's Texinfo
manual, sysstat's man pages: lab/docset.py), read by both readers a brief uses: the web's extraction and
the library's; where they cannot be had, those tests skip saying why (tests/conftest.py's docset_or_skip).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from briefd.daemon.rules import decide, figures, layout, steps
from briefd.daemon.rules.layout import Region, kind_of
from briefd.daemon.sources.documents import read_document
from briefd.daemon.sources.extract import extract_page, mark_passages, split_passages
from briefd.daemon.sources.structure import marks_from_json, marks_json, plain_regions
from briefd.store import Store
from tests.conftest import docset_or_skip
from tests.sources.test_sources import _research


def _both_readers(path: Path, name: str) -> dict[str, tuple[str, tuple[Region, ...]]]:
    """The page text and regions of a corpus file as the web reads it (extract_page) and as the library does."""
    library = read_document(None, path, path.name)
    assert library is not None
    out = {"library": (library.extracted.text, library.extracted.regions)}
    if path.name.endswith(".html"):
        web = extract_page(path.read_bytes(), f"http://docs.example/{name}", "text/html")
    else:
        web = extract_page(path.read_bytes(), f"http://docs.example/{name}", "text/plain")
    assert web is not None
    out["web"] = (web.text, web.regions)
    return out


def _kind(text: str, regions: tuple[Region, ...], words: str) -> str:
    at = text.find(words)
    assert at >= 0, f"{words!r} is not in the page text"
    return kind_of(regions, at, at + len(words))


# --------------------------------------------------------------------------- real documents, both readers


def test_a_texinfo_pages_navigation_panel_is_navigation_and_its_examples_are_examples() -> None:
    corpus = docset_or_skip(("m4-doc",))
    for reader, (text, regions) in _both_readers(corpus.folder / "m4-doc" / "Dnl.html", "m4-doc/Dnl.html").items():
        panel = next(line for line in text.splitlines() if line.startswith("Next: "))
        assert _kind(text, regions, panel) == layout.NAVIGATION, reader
        assert _kind(text, regions, "define(`foo', `Macro `foo'.')dnl A very simple macro, indeed.") == layout.EXAMPLE
        assert _kind(text, regions, "The expansion of dnl is void.") == "", reader  # the manual's prose
        # the example is a line of its own: never run into the sentence that leads into it ("Thus define(...")
        assert "\ndefine(`foo'" in text and "Thus define(" not in text, reader


def test_an_answer_sentence_of_the_set_is_prose_in_every_reader() -> None:
    corpus = docset_or_skip(("m4-doc",))
    for reader, (text, regions) in _both_readers(corpus.folder / "m4-doc" / "Limits-control.html",
                                                 "m4-doc/Limits-control.html").items():
        assert _kind(text, regions, "The default is 65537 entries.") == "", reader


def test_a_man_pages_examples_section_is_examples_and_its_options_are_prose() -> None:
    corpus = docset_or_skip(("sysstat",))
    path = corpus.folder / "sysstat" / "sar.sysstat.1.txt"
    for reader, (text, regions) in _both_readers(path, "sysstat/sar.sysstat.1.txt").items():
        assert _kind(text, regions, "EXAMPLES") == layout.HEADING, reader
        assert _kind(text, regions, "Report CPU utilization for each 2 seconds.") == layout.EXAMPLE, reader
        assert _kind(text, regions, "sar -u 2 5") == layout.EXAMPLE, reader
        options = text.find("OPTIONS")
        assert options >= 0 and kind_of(regions, options + 10, options + 200) == "", reader


HAPROXY_ENTRY = ('<div class="keyword"><b><a href="#3.2-tune.h2.header-table-size">tune.h2.header-table-size</a></b> '
                 '&lt;number&gt;</div><pre class="text">Sets the HTTP/2 dynamic header table size. It defaults to 4096 '
                 'bytes and\ncannot be larger than 65536 bytes. A larger value may help certain clients\nsend more '
                 'compact requests, depending on their capabilities.\n</pre>')
"""HAProxy's configuration manual as its generator writes every keyword (haproxy-doc, the vectors' dev half): the
prose of each entry in a <pre class="text">, hard-wrapped."""


def test_prose_laid_out_in_a_pre_stays_prose_and_is_unwrapped() -> None:
    """A bare or `text` <pre> says only that its lines are laid out, not that they are code: HAProxy's entries,
    an RFC. Read as code, a sentence was cut at each line and its figures refused as an example's."""
    body = f"<html><head><title>HAProxy</title></head><body>{HAPROXY_ENTRY}</body></html>".encode()
    page = read_document(body, None, "configuration.html", "text/html")
    assert page is not None
    sentence = "It defaults to 4096 bytes and cannot be larger than 65536 bytes."
    assert sentence in page.extracted.text
    assert _kind(page.extracted.text, page.extracted.regions, sentence) == ""


def test_fenced_code_is_code() -> None:
    """Markdown's fenced code (CommonMark renders it as <pre><code>) is code, read by the library's Markdown path."""
    markdown = b"# Tuning\n\nThe default is 4096 bytes.\n\n```\ntune.h2.header-table-size 16384\n```\n"
    page = read_document(markdown, None, "tuning.md", "text/markdown")
    assert page is not None
    text, regions = page.extracted.text, page.extracted.regions
    assert _kind(text, regions, "tune.h2.header-table-size 16384") == layout.CODE
    assert _kind(text, regions, "The default is 4096 bytes.") == ""
    assert _kind(text, regions, "Tuning") == layout.HEADING


# --------------------------------------------------------------------------- what the rules do with a kind


SAR_QUESTION = "How many seconds apart are sar's CPU utilization reports by default?"
SAR_EXAMPLE = "Report CPU utilization for each 2 seconds."


def test_a_figure_in_an_example_is_an_examples_value_and_the_same_words_in_prose_state_it() -> None:
    """sar(1)'s EXAMPLES section: "sar -u 2 5 / Report CPU utilization for each 2 seconds." is what one command
    line does, not sar's default interval. Read flat, the rules keep it; read with its kind, they refuse it."""
    flat = figures.read_figure(2, SAR_EXAMPLE, "seconds", asked=SAR_QUESTION, lead="sar -u 2 5\n")
    marked = figures.read_figure(2, SAR_EXAMPLE, "seconds", asked=SAR_QUESTION, lead="sar -u 2 5\n",
                                 unit_kind=layout.EXAMPLE)
    assert flat.value == 2
    assert marked.value is None and marked.reason is not None and "example" in marked.reason


def test_a_default_said_in_an_example_or_code_is_still_the_default() -> None:
    """A figure whose own words say it is the default (dnsmasq(8), a dev-half vector) is the default whatever part
    holds it: the figure's own words outrank its part's kind."""
    quote = "Set the size of dnsmasq's cache. The default is 150 names."
    asked = "How many names does dnsmasq's DNS cache hold by default?"
    for kind in (layout.CODE, layout.EXAMPLE):
        assert figures.read_figure(150, quote, "names", asked=asked, lead="-c, --cache-size=<cachesize>\n",
                                   unit_kind=kind).value == 150


def test_navigation_and_headings_are_never_kept_whatever_their_words() -> None:
    about = ["What is the default size of GNU m4's internal symbol hash table?"]
    quote = "Next: Command line options for frozen state, Previous: Command line options for macro definitions"
    for kind, reason in ((layout.NAVIGATION, decide.NOT_EVIDENCE_NAVIGATION),
                         (layout.HEADING, decide.NOT_A_STATEMENT_HEADING)):
        skipped = steps.skipped_quote(quote, "http://docs.example/m4", "Limits control", True, {}, about, (),
                                      unit_kind=kind)
        assert skipped is not None and skipped["reason"] == reason
    kept_as_prose = steps.skipped_quote("The default is 65537 entries for GNU m4's symbol hash table size.",
                                        "http://docs.example/m4", "Limits control", True, {}, about, ())
    assert kept_as_prose is None


def test_a_passage_of_navigation_only_is_never_shown_to_the_model() -> None:
    passages = {1: "Symbol hash table: Next: Limits control, Up: Invoking m4 [Contents][Index]",
                2: "The default is 65537 entries in the internal symbol hash table."}
    about = ["What is the default size of the internal symbol hash table?"]
    plain = steps.passage_cut(passages, {1, 2}, about[0], about, 12)
    marked = steps.passage_cut(passages, {1, 2}, about[0], about, 12, kinds={1: layout.NAVIGATION, 2: ""})
    assert set(plain.ranked) == {1, 2} and marked.ranked == (2,) and marked.read == (2,)


def test_a_span_is_of_a_kind_only_where_the_kind_covers_all_of_it() -> None:
    marks = (Region(0, 10, layout.EXAMPLE), Region(11, 20, layout.EXAMPLE), Region(30, 40, layout.NAVIGATION))
    assert kind_of(marks, 0, 10) == layout.EXAMPLE
    assert kind_of(marks, 0, 20) == layout.EXAMPLE   # two example lines and the line break between them
    assert kind_of(marks, 0, 30) == ""               # an example and a sentence after it: prose
    assert kind_of(marks, 32, 38) == layout.NAVIGATION
    assert kind_of(marks, 22, 28) == ""
    assert kind_of((), 0, 5) == ""


# --------------------------------------------------------------------------- carried and kept


def test_plain_text_sections_end_at_the_next_heading() -> None:
    text = "NAME\nsar - report\nEXAMPLES\nsar -u 2 5\nReport CPU utilization for each 2 seconds.\nBUGS\nNone 3 known."
    regions = plain_regions(text)
    assert [text[r.start:r.end] for r in regions if r.kind == layout.EXAMPLE] == \
        ["sar -u 2 5\nReport CPU utilization for each 2 seconds."]
    assert kind_of(tuple(regions), text.find("None 3"), len(text)) == ""


def test_passages_carry_their_marks_in_their_own_offsets_and_the_store_keeps_them(tmp_path: Path) -> None:
    text = "Prose first.\nsar -u 2 5\nReport CPU utilization for each 2 seconds.\n" + "More prose. " * 100
    regions = [Region(13, 67, layout.EXAMPLE)]
    passages = mark_passages(split_passages(text, max_chars=300), regions)
    first = passages[0]
    assert [first.text[m.start:m.end] for m in first.marks] == \
        ["sar -u 2 5\nReport CPU utilization for each 2 seconds."]
    assert all(not p.marks for p in passages[1:])
    store = Store(tmp_path / "briefd.db")
    try:
        store.save_page(url="http://x/sar", final_url="http://x/sar", status=200, content_type="text/plain",
                        title="sar", text=text, size=len(text), extraction="plain", error=None,
                        passages=[(p.seq, p.start, p.end, p.text, p.page, marks_json(p.marks)) for p in passages])
        rows = store.passages(store.passage_ids("http://x/sar", "page"))
        assert marks_from_json(rows[0].marks) == first.marks and rows[1].marks is None
    finally:
        store.close()


@pytest.mark.parametrize("stored", ["not json", "[[1, 2]]", '[["a", 2, "example"]]', '[[0, 5, "sidebar"]]', "{}"])
def test_a_damaged_marks_value_reads_as_prose(stored: str) -> None:
    assert marks_from_json(stored) == ()


def test_an_evidence_item_keeps_its_quotes_kind_and_navigation_is_not_read(tmp_path: Path, scripted_ollama) -> None:
    """Through a research run's evidence call (the scripted lab model quotes the sentences sharing most words with
    the question): a passage that is navigation is not shown, and the kept quote records its part's kind (a plain
    question keeps an example's quote: it is what the document says; only a figure read from it is an example's)."""
    research = _research(tmp_path, ["web"], scripted_ollama.url)
    try:
        nav = "Kestrel River depth: Next: Kestrel River bridge, Previous: Kestrel River mouth [Contents][Index]"
        prose = "Gauges are read at dawn."
        example = "Example: the Kestrel River gauge reads 99 metres deep in the sample log."
        text = f"{nav}\n\n{prose}\n{example}"
        start = len(nav) + 2
        regions = [Region(0, len(nav), layout.NAVIGATION), Region(start + len(prose) + 1, len(text), layout.EXAMPLE)]
        passages = mark_passages(split_passages(text, max_chars=len(prose) + len(example) + 1), regions)
        research.store.save_page(url="http://a.example/k", final_url="http://a.example/k", status=200,
                                 content_type="text/html", title="Kestrel", text=text, size=len(text),
                                 extraction="trafilatura", error=None,
                                 passages=[(p.seq, p.start, p.end, p.text, p.page, marks_json(p.marks))
                                           for p in passages])
        ids = research.store.passage_ids("http://a.example/k", "page")
        assert len(ids) == 2  # the navigation line, then the prose and the example
        asyncio.run(research.evidence.read_batch(1, ids, {}, research.state.open_gaps()))
        kept = {row["quote"]: row["unit_kind"] for row in research.store.evidence(research.run_id)}
        assert not any("Next:" in quote for quote in kept), kept
        assert kept == {example: layout.EXAMPLE}
        events = [json.loads(line) for line in (tmp_path / "events.ndjson").read_text().splitlines()]
        shown = [p for e in events if e.get("message") == "reading" for p in e["passages"]]
        assert shown == [ids[1]]
    finally:
        research.store.close()
