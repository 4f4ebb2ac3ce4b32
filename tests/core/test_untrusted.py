"""Untrusted text has one door: hostile strings in every report field, rendered and read back.

report.md is parsed the way a viewer that allows raw HTML would (markdown-it-py, CommonMark,
`html: true`) and report.html the way a browser builds elements; neither may hold a tag, a
link or an image that briefd did not write itself. `briefd show` (a real subprocess) may
never hand a terminal an escape sequence, a control character or a bidi override.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from briefd.daemon.report.charts import report_charts
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.outbox import write_report
from briefd.daemon.report.report import safe_http_url
from briefd.daemon.core.untrusted import clean, md_escape, terminal_text
from tests.conftest import BRIEFD
from tests.report.test_report import ALLOWED_ATTRS, ALLOWED_TAGS

# ---------------------------------------------------------------------------- hostile strings

# What a terminal acts on, or what shows text in an order other than the one stored.
TERMINAL_HOSTILE = ["\x07", "\x1b[31m", "\x1b]0;owned\x07", "\x1b]8;;http://evil.example/\x1b\\", "\x9b31m",
                    "\u202e", "\u202d", "\u2066", "\u2069", "\u200f", "\u061c", "\u2028", "\u2029", "\ufeff",
                    "\x00", "\x7f", "\x85", "\r", "\x0b", "\x0c", "\ud800"]
# A byte that must never reach report.md, report.html or a terminal.
UNSAFE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                       "\u2028\u2029\ufeff\ud800-\udfff]")

MARKUP_HOSTILE = [
    "<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)>", "\\\\<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>", "<div onclick=\"alert(1)\">d</div>", "<!-- c -->", "<?php ?>",
    "[x](javascript:alert(1))", "[x](https://evil.example/)", "[x]( https://evil.example/ )",
    "![i](http://evil.example/p.png)", "!\\[i](http://evil.example/p.png)", "<http://evil.example/>",
    "<mailto:a@evil.example>", "<a@evil.example>", "&lt;img src=x onerror=alert(1)&gt;", "&#60;script&#62;",
    "&amp;", "\\", "\\\\", "[1]: javascript:alert(1)", "[1]: https://evil.example/", "[x]: <https://evil.example/>",
    "`", "``", "```", "~~~", "# h", "## h", "> q", "- l", "* l", "+ l", "1. o", "1) o", "|", "| a | b |",
    "---", "===", "***", "|---|---|", "| <b>x</b> \\| y |", "    indented", "\n", "\n\n", " ", "[1]", "[2]", "[1](https://evil.example/)",
    "**", "*", "_", "__", "(", ")", "[", "]", "!", "\"", "'", "https://evil.example/x", "www.evil.example",
    "javascript:alert(1)", "[1000000000000000000000]", "[99]",
]
SOURCE_URLS = ["https://ok.example/a", "http://ok.example/b?x=1&y=(2)", 'https://ok.example/c"onmouseover="x"']

hostile_text = st.lists(
    st.one_of(st.sampled_from(MARKUP_HOSTILE), st.sampled_from(TERMINAL_HOSTILE), st.text(max_size=4)),
    max_size=8,
).map("".join)
any_url = st.one_of(st.sampled_from(SOURCE_URLS), hostile_text,
                    st.builds(lambda tail: "https://ok.example/" + tail, hostile_text))


@st.composite
def hostile_reports(draw: st.DrawFn) -> dict[str, Any]:
    """A report whose every string field came from a page, a search result or the model."""
    text = lambda: draw(hostile_text)
    texts = lambda: draw(st.lists(hostile_text, max_size=3))
    sources = [{"n": n, "url": draw(any_url), "title": text()} for n in range(1, draw(st.integers(0, 3)) + 1)]
    evidence = [{"source": draw(st.one_of(st.none(), st.integers(0, 4))), "url": draw(any_url), "quote": text(),
                 "stance": text(), "impact": text(), "confidence": 0.5, "round": 1, "summary": text(),
                 "tier": text(), "low": None, "high": None}
                for _ in range(draw(st.integers(0, 2)))]
    side = lambda: {"source": 1, "quote": text(), "tier": text(), "confidence": 0.5, "low": 1, "high": 2}
    return {
        "id": "hostile", "source_file": text(), "status": draw(st.sampled_from(["done", "failed", text()])),
        "question": text(), "started_at": text(), "finished_at": text(), "stop_reason": text(),
        "summary": "\n".join(draw(st.lists(hostile_text, max_size=6))),
        "sources": sources, "evidence": evidence,
        "estimate": {"unit": text(), "initial": {"low": 1, "high": 9}, "final": {"low": 2, "high": 8},
                     "progress_score": 0.5, "history": []},
        "verdict": {"value": text(), "rule": text(), "evidence_level": text()},
        "gaps": texts(), "queries": [{"round": 1, "text": text(), "results": 3}],
        "usage": {"llm_calls": 1, text(): 2},
        "research_question": text(), "angles": texts(), "disclaimer": text(), "error": text(),
        "fallbacks": {text(): 1}, "model": text(), "searxng_url": text(), "open_questions": texts(),
        "plan_relevance": 0.5,
        "sides": {"left_title": text(), "right_title": text(), "left": [side()], "right": [side()]},
    }


def url_fields(report: dict[str, Any]) -> set[str]:
    """The URLs briefd itself may link: the http(s) URL fields of sources and evidence."""
    urls = [s["url"] for s in report["sources"]] + [e["url"] for e in report["evidence"]]
    return {unquote(u) for u in urls if safe_http_url(u)}


# ---------------------------------------------------------------------------- report.md

# CommonMark with raw HTML on, plus the GFM tables and strikethrough most viewers add.
_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
MD_SECTIONS = {"Error", "Summary", "Verdict", "Estimate", "Evidence", "Side by side", "Sources",
               "Distrusted sources", "Open gaps", "Open questions", "Method"}


def flat(tokens: list[Any]) -> list[Any]:
    return [t for token in tokens for t in [token, *(token.children or [])]]


def on_hostile_reports(test: Callable[[dict[str, Any]], None]) -> Any:
    """A rendering test run on 300 hostile reports (one setting for both renderings; 20 to 30 s each under
    coverage, so `slow`)."""
    examples = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    return pytest.mark.slow(examples(given(hostile_reports())(test)))


@on_hostile_reports
def test_report_md_holds_no_tag_link_or_image_briefd_did_not_write(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    assert not UNSAFE_RE.search(text), f"a control or bidi character reached report.md: {text!r}"
    tokens = _MD.parse(text)
    everything = flat(tokens)
    assert not [t for t in everything if t.type in ("html_inline", "html_block")], text
    images = [t.attrs["src"] for t in everything if t.type == "image"]
    assert images == [name for name, _ in report_charts(report)], "no image but briefd's own charts"
    allowed = url_fields(report)
    anchors = {f"#source-{s['n']}" for s in report["sources"]}  # citations link to the sources' entries
    for token in everything:
        if token.type == "link_open":
            href = token.attrs["href"]
            assert isinstance(href, str), (href, text)
            if href in anchors:
                continue
            assert href.startswith(("http://", "https://")), (href, text)
            assert unquote(href) in allowed, (href, allowed, text)
    # the report's structure is still briefd's: one title, and only its own sections
    levels = [(t.tag, everything[i + 1].content) for i, t in enumerate(everything) if t.type == "heading_open"]
    assert [tag for tag, _ in levels].count("h1") == 1, levels
    assert {content for tag, content in levels if tag == "h2"} <= MD_SECTIONS, levels
    # the method comes last, its usage table at the very end
    assert ("h2", "Method") in levels and levels[-1] == ("h3", "Usage"), \
        "a code fence or an HTML block swallowed the end of the report"


def test_a_backslash_before_a_tag_in_the_summary_stays_text() -> None:
    """The reported case: `\\<img ...>` through the model's summary became `\\\\<img ...>` (live HTML)."""
    report = {"question": "q", "status": "done", "summary": "See \\<img src=x onerror=alert(1)> here [1].",
              "sources": [{"n": 1, "url": "https://ok.example/", "title": "t"}], "usage": {"llm_calls": 1}}
    text = render_markdown(report)
    assert not [t for t in flat(_MD.parse(text)) if t.type in ("html_inline", "html_block")], text
    shown = "".join(t.content for t in flat(_MD.parse(text)) if t.type == "text")
    assert "See \\<img src=x onerror=alert(1)> here [1]." in shown


def test_citations_and_source_links_still_read_as_briefd_writes_them() -> None:
    report = {"question": "q", "status": "done",
              "summary": "## Outlook\n\nPrices fell [1] and **rose [2]** again; see [the survey](https://ok.example/a).\n\n"
                         "- one [1]\n- two `code <b>` [2]\n\n[1]: javascript:alert(1)",
              "sources": [{"n": 1, "url": "https://ok.example/a", "title": "A"},
                          {"n": 2, "url": "https://ok.example/b", "title": "B"}], "usage": {"llm_calls": 1}}
    text = render_markdown(report)
    summary = text.split("## Summary")[1].split("## Evidence")[0]
    # a citation is a link to its source's entry (#source-n), in report.md as in report.html
    assert ("Prices fell [[1]](#source-1) and **rose [[2]](#source-2)** again; "
            "see [the survey](https://ok.example/a).") in summary
    assert "- one [[1]](#source-1)" in summary and "- two ` code <b> ` [[2]](#source-2)" in summary
    hrefs = [t.attrs["href"] for t in flat(_MD.parse(text)) if t.type == "link_open"]
    summary_hrefs = ["#source-1", "#source-2", "https://ok.example/a", "#source-1", "#source-2", "#source-1"]
    assert hrefs == summary_hrefs + ["https://ok.example/a", "https://ok.example/b"]
    assert "#### Outlook" in summary


def test_a_table_in_the_summary_stays_a_table_of_text() -> None:
    report = {"question": "q", "status": "done", "usage": {"llm_calls": 1},
              "summary": "| Year | Cost \\| note |\n|---|---|\n| 2024 | <img src=x onerror=alert(1)> [1] |",
              "sources": [{"n": 1, "url": "https://ok.example/", "title": "t"}]}
    tokens = flat(_MD.parse(render_markdown(report)))
    assert not [t for t in tokens if t.type in ("html_inline", "html_block")]
    cells = [tokens[i + 1] for i, t in enumerate(tokens) if t.type in ("th_open", "td_open")]
    shown = ["".join(c.content for c in cell.children or [] if c.type == "text") for cell in cells]
    assert shown[:4] == ["Year", "Cost | note", "2024", "<img src=x onerror=alert(1)> [1]"]
    html_text = render_html(report)
    assert "<td>&lt;img src=x onerror=alert(1)&gt; <a href=\"#source-1\" class=\"cite\">[1]</a></td>" in html_text


# ---------------------------------------------------------------------------- report.html

class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@on_hostile_reports
def test_report_html_holds_no_element_attribute_or_link_briefd_did_not_write(report: dict[str, Any]) -> None:
    text = render_html(report)
    assert not UNSAFE_RE.search(text), f"a control or bidi character reached report.html: {text!r}"
    page = Elements()
    page.feed(text)
    page.close()
    tags = [tag for tag, _ in page.tags]
    assert set(tags) <= ALLOWED_TAGS, set(tags) - ALLOWED_TAGS
    assert tags.count("style") == 1 and tags.count("title") == 1 and tags.count("meta") == 4
    assert tags.count("svg") == len(report_charts(report)), "the charts briefd drew, and no other"
    allowed = url_fields(report)
    anchors = {f"#source-{s['n']}" for s in report["sources"]}
    for _, attrs in page.tags:
        assert set(attrs) <= ALLOWED_ATTRS, attrs
        if "href" in attrs:
            href = attrs["href"] or ""
            assert href in anchors or unquote(href) in allowed, (href, allowed)


# ---------------------------------------------------------------------------- the cleaning rule


@given(st.lists(st.sampled_from([*TERMINAL_HOSTILE, "a", " ", "\t", "\n", "[", "\x1b", "]", "3", ";"]),
                max_size=40).map("".join))
def test_clean_removes_every_unsafe_character_and_is_idempotent(text: str) -> None:
    once = clean(text)
    assert not UNSAFE_RE.search(once)
    assert "\t" not in once
    assert clean(once) == once


@pytest.mark.parametrize(("raw", "expected"), [
    ("red \x1b[31mALERT\x1b[0m done", "red ALERT done"),
    ("title\x1b]0;owned\x07 text", "title text"),
    ("ring\x07\x07 bell", "ring bell"),
    ("abc\u202edcba\u202c end", "abcdcba end"),
    ("one\u2028two\u2029three\r\nfour\rfive", "one\ntwo\nthree\nfour\nfive"),
    ("\ufeffBOM and\ttab", "BOM and tab"),
    ("caf\u00e9 \u05e9\u05dc\u05d5\u05dd \u2014 \U0001f600", "caf\u00e9 \u05e9\u05dc\u05d5\u05dd \u2014 \U0001f600"),
])
def test_clean_keeps_what_a_reader_sees(raw: str, expected: str) -> None:
    assert clean(raw) == expected


def test_md_escape_shows_the_text_exactly() -> None:
    for raw in MARKUP_HOSTILE:
        if "\n" in raw or raw.strip() != raw:
            continue
        tokens = flat(_MD.parse(md_escape(raw)))
        assert [t.type for t in tokens] in (["paragraph_open", "inline", "text", "paragraph_close"], []), raw
        assert "".join(t.content for t in tokens if t.type == "text") == raw


# ---------------------------------------------------------------------------- briefd show


def show(outbox: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    env.update({"BRIEFD_OUTBOX": str(outbox), "BRIEFD_INBOX": str(outbox.parent / "inbox"),
                "BRIEFD_DB": str(outbox.parent / "briefd.db")})
    return subprocess.run([BRIEFD, "show", *args], env=env, cwd=outbox.parent, capture_output=True,
                          timeout=60, check=False)


TERMINAL_BYTES = [b"\x07", b"\x1b", "\u202e".encode(), "\u2028".encode(), "\u2029".encode(), b"\r",
                  "\x9b".encode()]


def assert_terminal_safe(out: bytes) -> None:
    for raw in TERMINAL_BYTES:
        assert raw not in out, f"{raw!r} reached the terminal: {out!r}"


HOSTILE_SUMMARY = "Rates rose\x07 \x1b[31mred\x1b[0m and \u202etxt.exe\u202c fell\u2028[1] \x9b2J done."


def test_show_never_hands_the_terminal_an_escape_or_a_bidi_override(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    report = {"id": "hostile", "question": "Rates \x1b[2J?", "status": "done", "summary": HOSTILE_SUMMARY,
              "sources": [{"n": 1, "url": "https://ok.example/", "title": "T\u202eitle\x07"}],
              "usage": {"llm_calls": 1}}
    write_report(outbox / "hostile", report, ["md", "html"])
    shown = show(outbox, "hostile")
    assert shown.returncode == 0, shown.stderr
    assert_terminal_safe(shown.stdout)
    text = shown.stdout.decode("utf-8")
    assert "Rates rose red and txt.exe fell" in text and "[1]" in text
    assert "\\u202e" not in text, "a report written now carries nothing to escape: it was cleaned"


def test_show_escapes_what_an_older_report_or_event_log_still_holds(tmp_path: Path) -> None:
    """report.json and events.ndjson written before the cleaning rule (or edited by hand):
    shown with the hostile characters as visible escapes, still valid JSON."""
    outbox = tmp_path / "outbox"
    (outbox / "old").mkdir(parents=True)
    stored = {"id": "old", "status": "done", "summary": HOSTILE_SUMMARY, "sources": []}
    (outbox / "old" / "report.json").write_text(json.dumps(stored, ensure_ascii=False), encoding="utf-8")
    event = {"seq": 1, "type": "evidence_found", "quote": "a\u202eb\u2028c", "title": "\x9b2J"}
    (outbox / "old" / "events.ndjson").write_text(json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    (outbox / "md").mkdir()
    (outbox / "md" / "report.md").write_text(f"# Old\n\n{HOSTILE_SUMMARY}\n", encoding="utf-8")

    report = show(outbox, "old")
    assert report.returncode == 0, report.stderr
    assert_terminal_safe(report.stdout)
    assert json.loads(report.stdout) == json.loads(json.dumps(stored)), "the JSON on screen means the same"
    assert "\\u202e" in report.stdout.decode(), "the override is visible, not silently obeyed"

    events = show(outbox, "old", "--events")
    assert events.returncode == 0, events.stderr
    assert_terminal_safe(events.stdout)
    assert [json.loads(line) for line in events.stdout.decode().splitlines()] == [event]

    markdown = show(outbox, "md")
    assert markdown.returncode == 0, markdown.stderr
    assert_terminal_safe(markdown.stdout)
    assert markdown.stdout.decode().startswith("# Old\n\nRates rose\\u0007 \\u001b[31mred")


def test_terminal_text_keeps_newlines_and_tabs() -> None:
    assert terminal_text("a\tb\nc\x1bd\u202ee") == "a\tb\nc\\u001bd\\u202ee"
