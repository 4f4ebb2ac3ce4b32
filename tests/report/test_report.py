"""report.json/.md/.html, earlier runs kept, rejections kept, outbox paths that stay put."""

from __future__ import annotations

import copy
import json
import os
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from briefd.daemon.report.charts import CHART_NAMES, report_charts
from briefd.daemon.rules.citations import cited_numbers
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import ALSO_USED, render_markdown
from briefd.daemon.report.outbox import archive_previous, safe_outdir, write_rejection, write_report
from briefd.daemon.report.report import REPORT_KEYS, blank_report


def realistic_report() -> dict[str, Any]:
    """A finished estimate brief as the worker would hand it over."""
    return {
        "id": "ev-battery-cost",
        "source_file": "ev-battery-cost.json",
        "status": "done",
        "question": "What will an EV battery pack cost per kWh in 2027?",
        "started_at": "2026-11-22T10:00:00Z",
        "finished_at": "2026-11-22T10:07:31Z",
        "stop_reason": "converged",
        "summary": (
            "## Outlook\n\nPack prices fell to about $115/kWh in 2024 [1], and forecasts for "
            "2027 cluster between $80 and $95 [2][3].\n\n"
            "- LFP chemistry pulls the average down [1]\n"
            "- Raw-material prices remain the main risk [3]\n\n"
            "Analysts expect **continued** declines [2]."
        ),
        "sources": [
            {"n": 1, "url": "https://about.bnef.com/battery-survey-2024", "title": "Battery Price Survey 2024"},
            {"n": 2, "url": "https://www.iea.org/reports/global-ev-outlook-2025", "title": "Global EV Outlook 2025"},
            {"n": 3, "url": "https://example.com/materials?q=lithium&y=2027", "title": "Lithium (and cobalt) prices"},
        ],
        "evidence": [
            {"source": 1, "url": "https://about.bnef.com/battery-survey-2024",
             "quote": "Average pack prices fell 20% to $115/kWh in 2024.",
             "impact": "narrows_high", "confidence": 0.85, "round": 1},
            {"source": 2, "url": "https://www.iea.org/reports/global-ev-outlook-2025",
             "quote": "Prices could reach $80-95 per kWh by 2027\nunder current trends.",
             "impact": "narrows_both", "confidence": 0.7, "round": 2},
        ],
        "estimate": {
            "unit": "USD/kWh",
            "initial": {"low": 50, "high": 200},
            "target": {"low": 80, "high": 100},
            "final": {"low": 78.5, "high": 96},
            "progress_score": 0.91,
            "history": [
                {"round": 1, "low": 60, "high": 150, "progress_score": 0.52, "tokens": 4210},
                {"round": 2, "low": 78.5, "high": 96, "progress_score": 0.91, "tokens": 9388},
            ],
        },
        "verdict": None,
        "gaps": ["Sodium-ion pack prices at scale"],
        "queries": [
            {"round": 1, "text": "battery pack price per kWh 2024 survey", "results": 10},
            {"round": 2, "text": "EV battery cost forecast 2027 | lithium", "results": 8},
        ],
        "usage": {"llm_calls": 7, "prompt_tokens": 18230, "completion_tokens": 2114, "searches": 6,
                  "pages_fetched": 14, "page_cache_hits": 3, "llm_cache_hits": 1,
                  "wall_seconds": 451.2, "llm_seconds": 212.75},
        "research_question": "Expected 2027 average lithium-ion EV pack price (USD/kWh)",
        "angles": ["historical price curve", "analyst forecasts", "raw-material risk"],
        "disclaimer": None,
        "error": None,
        "fallbacks": {"plan": 0, "synthesis": 1},
        "model": "qwen2.5:3b-instruct",
        "searxng_url": "http://127.0.0.1:8888",
        "open_questions": ["Still open: the final audited figure. A source you trust would help."],
        "plan_relevance": 0.9,
        "sides": None,
        "chart": {"file": "chart.svg", "missing": None, "png": "chart.png", "png_missing": None},
        "stop_explanation": "Stopped after round 3 of 4: no new evidence in the last 2 rounds.",
        "distrusted": [],
        "searched": ["web"],
        "egress": {"policy": "open", "hosts": [{"host": "127.0.0.1:11434", "requests": 9, "role": "model server"},
                                               {"host": "news.example", "requests": 2}], "refused": []},
        "changes": None,
        "follows": None,
        "answer": {"found": True, "text": "78.5\u201396 USD/kWh"},
    }


SCRIPT = "<script>alert(1)</script>"
ATTR_BREAK = '" onmouseover="alert(1)" x="'
QUOTED_URL = 'https://ok.example/a"onmouseover="alert(1)"'


def hostile_report() -> dict[str, Any]:
    """Page text and model text trying to become markup, in every field that shows them."""
    report = realistic_report()
    report["question"] = f"Is this safe? {SCRIPT}"
    report["disclaimer"] = f"Model only {SCRIPT}"
    report["summary"] = (
        f"# Takeover\n\nSneaky setext\n===\n\nIntro {SCRIPT} with <img src=x onerror=alert(1)> and [1].\n\n"
        "[click](javascript:alert(1)) and ![pixel](https://tracker.example/p.png) [2]\n\n"
        "[1]: javascript:alert(1)\n\n"
        "<div onclick=\"alert(1)\">raw</div>\n\n"
        "```\nunclosed fence eats everything after it"
    )
    report["sources"] = [
        {"n": 1, "url": "javascript:alert(1)", "title": f"Evil](javascript:alert(1)) {SCRIPT}"},
        {"n": 2, "url": QUOTED_URL, "title": f"Quote {ATTR_BREAK}"},
        {"n": 4, "url": f"https://spaces.example/{ATTR_BREAK}", "title": "spaces in URL"},
        {"n": 3, "url": "data:text/html,<script>alert(1)</script>", "title": "data url"},
    ]
    report["evidence"] = [
        {"source": 1, "url": "javascript:alert(1)",
         "quote": f"Line one\n\n# Injected heading\n\n- list\n{SCRIPT}\n![x](https://tracker.example/q.png)"
                  "\n[link](javascript:alert(1))\n```",
         "stance": f"supports {SCRIPT}", "confidence": 0.5, "round": 1},
        {"source": 99, "url": f"javascript:alert('{ATTR_BREAK}')", "quote": ATTR_BREAK, "stance": "refutes",
         "confidence": 0.2, "round": 2},
    ]
    report["gaps"] = [f"gap {SCRIPT}", "---"]
    report["queries"] = [{"round": 1, "text": f"q | {SCRIPT} \n## injected", "results": 3}]
    report["angles"] = [f"angle {SCRIPT}"]
    report["model"] = SCRIPT
    report["fallbacks"] = {SCRIPT: 1}
    return report


# ---------------------------------------------------------------------------
# Markdown

_MD = MarkdownIt("commonmark")  # raw HTML enabled, as in most viewers


def md_tokens(text: str) -> list[Any]:
    tokens = []
    for token in _MD.parse(text):
        tokens.append(token)
        tokens.extend(token.children or [])
    return tokens


def shown(inline: Any) -> str:
    """The text a Markdown viewer shows for an inline token (escapes resolved)."""
    return "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))


def headings(text: str) -> list[tuple[str, str]]:
    tokens = _MD.parse(text)
    return [(tok.tag, shown(tokens[i + 1])) for i, tok in enumerate(tokens) if tok.type == "heading_open"]


def test_markdown_report_reads_well() -> None:
    text = render_markdown(realistic_report())
    assert text.startswith("# What will an EV battery pack cost per kWh in 2027?\n")
    assert headings(text) == [
        ("h1", "What will an EV battery pack cost per kWh in 2027?"),
        ("h2", "Estimate"),
        ("h2", "Summary"),
        ("h4", "Outlook"),  # the summary's own "##" nests under Summary
        ("h2", "Evidence"),
        ("h2", "Sources"),
        ("h2", "Open gaps"),
        ("h2", "Open questions"),
        ("h2", "Method"),
        ("h3", "Research plan"),
        ("h3", "Queries"),
        ("h3", "Fallbacks"),
        ("h3", "Usage"),
    ]
    assert "**Status:** done · **Stopped:** converged" in text
    assert "> Average pack prices fell 20% to $115/kWh in 2024." in text
    assert ("**From** [[1]](#source-1) [Battery Price Survey 2024](https://about.bnef.com/battery-survey-2024)\n\n"
            "> Average pack prices fell 20% to $115/kWh in 2024.\n\n"
            "— round 1 · narrows\\_high · confidence 0.85") in text
    # the quote's newline is folded, so the whole quote stays one blockquote line
    assert "> Prices could reach $80-95 per kWh by 2027 under current trends." in text
    assert "- [1] [Battery Price Survey 2024](https://about.bnef.com/battery-survey-2024)" in text
    # parentheses in titles and URLs cannot end the link early
    assert "- [3] [Lithium (and cobalt) prices](https://example.com/materials?q=lithium&y=2027)" in text
    assert "- Sodium-ion pack prices at scale" in text
    assert "| 2 | EV battery cost forecast 2027 \\| lithium | 8 |" in text
    assert "| Model calls | 7 |" in text and "| Wall time | 451.2 s |" in text
    assert "| 2 | 78.5 | 96 | 0.91 | 9,388 |" in text
    assert cited_numbers(text.split("## Summary")[1].split("## Evidence")[0]) == [1, 2, 3]
    links = [t.attrs["href"] for t in md_tokens(text) if t.type == "link_open"]
    assert [link for link in links if not link.startswith("#source-")] == [
        "https://about.bnef.com/battery-survey-2024",  # the evidence, by source
        "https://www.iea.org/reports/global-ev-outlook-2025",
        "https://about.bnef.com/battery-survey-2024",  # the sources list
        "https://www.iea.org/reports/global-ev-outlook-2025",
        "https://example.com/materials?q=lithium&y=2027",
    ]


def test_markdown_shows_disclaimer_and_error_for_a_failed_brief() -> None:
    report = blank_report("b1", "b1.json", "Why is the sky blue?", "2026-11-22T10:00:00Z")
    report["disclaimer"] = "This report rests on the model alone: no search results were available."
    report["error"] = "Traceback (most recent call last):\n  ```\nRuntimeError: boom"
    text = render_markdown(report)
    assert "> **Note:** This report rests on the model alone: no search results were available." in text
    assert "**Status:** failed" in text
    fences = [t for t in _MD.parse(text) if t.type == "fence"]
    assert fences and fences[0].content == report["error"] + "\n"
    assert [h for h in headings(text) if h[0] == "h2"][-1] == ("h2", "Method")
    assert headings(text)[-1] == ("h3", "Usage")


def test_markdown_page_text_cannot_restructure_the_report() -> None:
    text = render_markdown(hostile_report())
    tokens = md_tokens(text)
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    assert [t.attrs["src"] for t in tokens if t.type == "image"] == list(CHART_NAMES), "briefd's charts, no other image"
    hrefs = [t.attrs["href"] for t in tokens if t.type == "link_open"]
    assert hrefs and all(h.startswith(("https://", "#source-")) for h in hrefs)
    assert not any("javascript" in h for h in hrefs)
    found = headings(text)
    assert [h for h in found if h[0] == "h1"] == [("h1", f"Is this safe? {SCRIPT}")]
    # every section heading is still ours: the unclosed fence did not swallow them
    assert [h[1] for h in found if h[0] == "h2"] == [
        "Estimate", "Summary", "Evidence", "Sources", "Open gaps", "Open questions", "Method"]
    assert found[-4:] == [("h3", "Research plan"), ("h3", "Queries"), ("h3", "Fallbacks"), ("h3", "Usage")]
    assert ("h3", "Takeover") in found
    assert not [h for h in found if "Injected" in h[1] or "injected" in h[1]]
    # the hostile quote is one blockquote paragraph with its text intact
    quotes = [t for t in _MD.parse(text) if t.type == "blockquote_open"]
    assert len(quotes) == 3  # the disclaimer and the two quotes, nothing nested or split
    inline = [shown(t) for t in _MD.parse(text) if t.type == "inline"]
    assert (f"Line one # Injected heading - list {SCRIPT} ![x](https://tracker.example/q.png) "
            "[link](javascript:alert(1)) ```") in inline
    assert f"gap {SCRIPT}" in inline and "---" in inline
    # "[1]: javascript:" in the summary did not become a link definition for the citations
    assert "[1]" in text.split("## Summary")[1] and not any(
        t.type == "link_open" and t.attrs["href"].startswith("javascript") for t in tokens)


# ---------------------------------------------------------------------------
# HTML


class Page(HTMLParser):
    """What a browser would build: the elements, their attributes, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._stack: list[str] = []
        self.by_tag: dict[str, list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._stack:
            self.by_tag.setdefault(self._stack[-1], []).append(data)

    def hrefs(self) -> list[str]:
        return [a["href"] or "" for t, a in self.tags if t == "a" and "href" in a]


def parse(html_text: str) -> Page:
    page = Page()
    page.feed(html_text)
    page.close()
    return page


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "h4",
                "h5", "h6", "p", "div", "span", "strong", "em", "code", "pre", "a", "ul", "ol", "li",
                "blockquote", "figure", "figcaption", "table", "thead", "tbody", "tr", "th", "td",
                "svg", "rect", "line", "path", "text"}  # the charts briefd draws (daemon/report/charts.py)
ALLOWED_ATTRS = {"lang", "charset", "http-equiv", "content", "name", "href", "rel", "target", "id", "class",
                 # the charts' presentation attributes: no event handler, no link, no style sheet
                 "xmlns", "viewbox", "width", "height", "role", "aria-label", "font-family", "font-size",
                 "font-weight", "fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray",
                 "stroke-linejoin", "paint-order", "x", "y", "x1", "y1", "x2", "y2", "d", "text-anchor",
                 "transform", "data-tier"}


def test_html_report_is_a_standalone_page_with_linked_citations() -> None:
    text = render_html(realistic_report())
    assert text.startswith("<!DOCTYPE html>")
    page = parse(text)
    assert page.by_tag["title"] == ["What will an EV battery pack cost per kWh in 2027?"]
    assert page.by_tag["h1"] == ["What will an EV battery pack cost per kWh in 2027?"]
    assert page.by_tag["h2"] == ["Estimate", "Summary", "Evidence", "Sources", "Open gaps", "Open questions",
                                 "Method"]
    assert page.by_tag["h3"] == ["Research plan", "Queries", "Fallbacks", "Usage"]
    assert page.by_tag["h4"] == ["Outlook"]
    ids = [a["id"] for _, a in page.tags if "id" in a]
    assert ids == ["source-1", "source-2", "source-3"]
    hrefs = page.hrefs()
    # the summary cites 1, 2, 3, 1, 3, 2; the evidence captions 1 and 2
    assert [h for h in hrefs if h.startswith("#")] == [
        "#source-1", "#source-2", "#source-3", "#source-1", "#source-3", "#source-2", "#source-1", "#source-2"]
    assert "https://example.com/materials?q=lithium&y=2027" in hrefs
    for _, attrs in page.tags:  # a source opens beside the report, told nothing of it; a citation stays in it
        if attrs.get("href", "").startswith("https://"):
            assert attrs.get("target") == "_blank" and "noopener" in attrs.get("rel", ""), attrs
        elif attrs.get("href", "").startswith("#"):
            assert "target" not in attrs
    assert "<blockquote>\n<p>Average pack prices fell 20% to $115/kWh in 2024.</p>\n</blockquote>" in text
    assert any(t.startswith("Pack prices fell to about $115/kWh") for t in page.by_tag["p"])
    assert page.by_tag["strong"].count("continued") == 1
    assert "historical price curve" in page.by_tag["li"]
    assert "<style>" in text and "<link" not in text and "<script" not in text.lower()


def test_html_escapes_everything_from_pages_and_model() -> None:
    report = hostile_report()
    text = render_html(report)
    page = parse(text)
    tags = {t for t, _ in page.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    assert "script" not in tags and "img" not in tags
    attrs = {name for _, a in page.tags for name in a}
    assert attrs <= ALLOWED_ATTRS, attrs - ALLOWED_ATTRS
    for href in page.hrefs():
        assert href.startswith(("#source-", "https://")), href
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert "javascript:" not in " ".join(page.hrefs())
    # the reader still sees the hostile text, as text
    alltext = "".join(page.text)
    assert SCRIPT in alltext
    assert "javascript:alert(1)" in alltext
    assert "<img src=x onerror=alert(1)>" in alltext
    assert ATTR_BREAK.strip() in alltext
    # an http URL with quotes in it stays one attribute value, not new attributes
    source2 = [a for t, a in page.tags if t == "a" and (a.get("href") or "").startswith("https://ok.example/")]
    assert source2 and unquote(source2[0]["href"] or "") == QUOTED_URL
    # one with whitespace is not a usable URL at all: shown, never linked
    assert not [h for h in page.hrefs() if "spaces.example" in h]
    assert f"https://spaces.example/{ATTR_BREAK}" in alltext
    # the CSP forbids scripts even if something were to slip through
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0] or "")


def test_html_failed_brief_shows_escaped_error() -> None:
    report = blank_report("b1", "b1.json", "Q?", "2026-11-22T10:00:00Z")
    report["error"] = f"crashed on {SCRIPT}"
    page = parse(render_html(report))
    assert page.by_tag["code"] == [f"crashed on {SCRIPT}\n"]  # <pre><code>, as a code block ends
    assert "script" not in {t for t, _ in page.tags}


# ---------------------------------------------------------------------------
# Writing files


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_write_report_writes_requested_formats_whole(tmp_path: Path) -> None:
    outdir = tmp_path / "outbox" / "ev-battery-cost"
    report = realistic_report()
    written = write_report(outdir, report, ["md", "html"])
    assert [p.name for p in written] == [*CHART_NAMES, "report.md", "report.html", "report.json"]
    assert listing(outdir) == sorted([*CHART_NAMES, "report.html", "report.json", "report.md"])  # no temp files left
    assert [(outdir / name).read_text(encoding="utf-8") for name in CHART_NAMES] == [
        svg for _, svg in report_charts(report)]
    assert json.loads((outdir / "report.json").read_text(encoding="utf-8")) == report
    assert (outdir / "report.md").read_text(encoding="utf-8") == render_markdown(report)
    assert (outdir / "report.html").read_text(encoding="utf-8") == render_html(report)


def test_write_report_json_always_and_only_what_is_asked(tmp_path: Path) -> None:
    written = write_report(tmp_path, realistic_report(), [])
    assert written == [*(tmp_path / name for name in CHART_NAMES), tmp_path / "report.json"], "charts always"
    assert listing(tmp_path) == sorted([*CHART_NAMES, "report.json"])


def test_write_report_report_json_has_every_key_and_valid_json(tmp_path: Path) -> None:
    report = realistic_report()
    report["estimate"]["progress_score"] = float("nan")
    write_report(tmp_path, report, ["json"])
    raw = (tmp_path / "report.json").read_text(encoding="utf-8")
    loaded = json.loads(raw, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert loaded["estimate"]["progress_score"] is None
    assert list(loaded) == list(REPORT_KEYS)


def test_write_report_refuses_unknown_format_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pdf"):
        write_report(tmp_path, realistic_report(), ["md", "pdf"])
    assert listing(tmp_path) == []


def test_write_report_that_cannot_serialize_leaves_the_old_files(tmp_path: Path) -> None:
    write_report(tmp_path, realistic_report(), ["md"])
    before = {name: (tmp_path / name).read_bytes() for name in ("report.md", "report.json")}
    broken = realistic_report()
    broken["usage"]["odd"] = {1, 2}  # a set is not JSON
    broken["question"] = "A different question"
    with pytest.raises(TypeError):
        write_report(tmp_path, broken, ["md"])
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert listing(tmp_path) == sorted([*CHART_NAMES, "report.json", "report.md"])


# ---------------------------------------------------------------------------
# Earlier runs


def test_archive_previous_keeps_earlier_runs(tmp_path: Path) -> None:
    outdir = tmp_path / "x"
    first = realistic_report()
    write_report(outdir, first, ["md"])
    (outdir / "brief.json").write_text('{"question": "first"}')
    (outdir / "events.ndjson").write_text('{"seq": 1}\n')
    (outdir / "chart.png").write_bytes(b"\x89PNG first")

    archived = archive_previous(outdir)
    assert archived == outdir / "runs" / "2026-11-22T10-00-00Z"
    assert listing(outdir) == ["runs", "runs/2026-11-22T10-00-00Z"] + [
        f"runs/2026-11-22T10-00-00Z/{n}" for n in
        sorted(("brief.json", "chart.png", *CHART_NAMES, "events.ndjson", "report.json", "report.md"))]
    assert json.loads((archived / "report.json").read_text()) == first

    # a second run, same started_at, archived again: both earlier runs survive
    second = copy.deepcopy(first)
    second["summary"] = "Second run [1]."
    write_report(outdir, second, ["html"])
    again = archive_previous(outdir)
    assert again == outdir / "runs" / "2026-11-22T10-00-00Z-2"
    assert json.loads((again / "report.json").read_text())["summary"] == "Second run [1]."
    assert json.loads((archived / "report.json").read_text()) == first
    assert sorted(p.name for p in outdir.iterdir()) == ["runs"]

    # and the latest report is written into the clean folder
    write_report(outdir, second, ["md"])
    assert sorted(p.name for p in outdir.iterdir()) == sorted([*CHART_NAMES, "report.json", "report.md", "runs"])


def test_archive_previous_nothing_to_move(tmp_path: Path) -> None:
    assert archive_previous(tmp_path / "missing") is None
    (tmp_path / "empty" / "runs" / "old").mkdir(parents=True)
    (tmp_path / "empty" / ".report.json.abc.tmp").write_text("partial")
    assert archive_previous(tmp_path / "empty") is None
    assert listing(tmp_path / "empty") == [".report.json.abc.tmp", "runs", "runs/old"]


def test_archive_previous_stamp_from_started_at_with_offset(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"started_at": "2026-11-22T12:30:05+02:00"}))
    assert archive_previous(tmp_path) == tmp_path / "runs" / "2026-11-22T10-30-05Z"


def test_archive_previous_stamp_from_error_json(tmp_path: Path) -> None:
    (tmp_path / "error.json").write_text(json.dumps({"rejected_at": "2026-11-21T08:00:00Z"}))
    (tmp_path / "brief.bin").write_bytes(b"\xff\xfe")
    target = archive_previous(tmp_path)
    assert target == tmp_path / "runs" / "2026-11-21T08-00-00Z"
    assert (target / "brief.bin").read_bytes() == b"\xff\xfe"


def test_archive_previous_stamp_from_newest_mtime(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{not json")
    (tmp_path / "events.ndjson").write_text("")
    moment = time.mktime((2026, 3, 4, 5, 6, 7, 0, 0, -1))
    os.utime(tmp_path / "report.json", (moment - 100, moment - 100))
    os.utime(tmp_path / "events.ndjson", (moment, moment))
    expected = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(moment))
    target = archive_previous(tmp_path)
    assert target == tmp_path / "runs" / expected
    assert (target / "report.json").read_text() == "{not json"


# ---------------------------------------------------------------------------
# Outbox paths


@pytest.mark.parametrize("bad", ["..", ".", "...", "a/b", "../x", "", "a" * 101, "a\n", "a b",
                                 "/etc", "a\\b", "é", ".hidden", ".x", "-rf", "--help"])
def test_safe_outdir_refuses_bad_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        safe_outdir(tmp_path, bad)


def test_safe_outdir_accepts_plain_ids(tmp_path: Path) -> None:
    assert safe_outdir(tmp_path, "brief-1.v2_x") == tmp_path.resolve() / "brief-1.v2_x"
    assert safe_outdir(tmp_path, "_private") == tmp_path.resolve() / "_private"
    assert safe_outdir(tmp_path, "a" * 100).name == "a" * 100


def test_safe_outdir_refuses_symlinks_out_of_the_outbox(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (outbox / "evil").symlink_to(elsewhere)
    (outbox / "real").mkdir()
    (outbox / "alias").symlink_to(outbox / "real")
    (outbox / "dangling").symlink_to(tmp_path / "nowhere" / "deep")
    for name in ("evil", "alias", "dangling"):
        with pytest.raises(ValueError, match="outside the outbox"):
            safe_outdir(outbox, name)
    assert safe_outdir(outbox, "real") == outbox.resolve() / "real"


def test_safe_outdir_follows_a_symlinked_outbox(tmp_path: Path) -> None:
    real = tmp_path / "real-outbox"
    real.mkdir()
    (tmp_path / "outbox").symlink_to(real)
    assert safe_outdir(tmp_path / "outbox", "b1") == real.resolve() / "b1"


# ---------------------------------------------------------------------------
# Rejections


def test_write_rejection_keeps_the_bytes_and_says_why(tmp_path: Path) -> None:
    raw = b'{"question": 42, "depht": "quick"}\n'
    path = write_rejection(tmp_path, "b1", "b1.json", "question: expected a string",
                           {"field": "question", "did_you_mean": {"depht": "depth"}}, raw)
    assert path == tmp_path.resolve() / "b1" / "error.json"
    error = json.loads(path.read_text(encoding="utf-8"))
    assert set(error) == {"source_file", "error", "details", "rejected_at"}
    assert error["source_file"] == "b1.json"
    assert error["error"] == "question: expected a string"
    assert error["details"]["did_you_mean"] == {"depht": "depth"}
    assert error["rejected_at"].endswith("Z")
    assert (tmp_path / "b1" / "brief.json").read_bytes() == raw
    assert listing(tmp_path / "b1") == ["brief.json", "error.json"]


def test_write_rejection_binary_bytes_go_to_brief_bin(tmp_path: Path) -> None:
    raw = b"\xff\xd8\xff\xe0 not a brief"
    write_rejection(tmp_path, "photo", "photo.json", "not UTF-8", {}, raw)
    assert listing(tmp_path / "photo") == ["brief.bin", "error.json"]
    assert (tmp_path / "photo" / "brief.bin").read_bytes() == raw


def test_write_rejection_archives_an_earlier_result(tmp_path: Path) -> None:
    outdir = tmp_path / "b1"
    write_report(outdir, realistic_report(), ["md"])
    write_rejection(tmp_path, "b1", "b1.json", "bad", {}, b"{}")
    assert sorted(p.name for p in outdir.iterdir()) == ["brief.json", "error.json", "runs"]
    assert (outdir / "runs" / "2026-11-22T10-00-00Z" / "report.md").exists()


def test_write_rejection_with_an_unusable_id_still_lands_in_the_outbox(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    path = write_rejection(outbox, "../../etc/passwd", "my brief.json", "id has a path in it", {}, b"{}")
    assert path.parent.parent == outbox.resolve()
    # sanitized, and not hidden: the user must be able to see the rejection
    assert listing(tmp_path) == ["outbox", "outbox/passwd", "outbox/passwd/brief.json",
                                 "outbox/passwd/error.json"]


def report_with_uncited_and_distrusted() -> dict[str, Any]:
    report = realistic_report()
    for source in report["sources"]:
        source["cited"] = True
    report["sources"].append({"n": 4, "url": "https://regulator.example/statement", "title": "Regulator statement",
                              "cited": False})
    report["evidence"].append({"source": 4, "url": "https://regulator.example/statement",
                               "quote": "The regulator accepts a cost of $90 per kWh.", "impact": "narrows_both",
                               "confidence": 0.9, "round": 2})
    report["distrusted"] = [{"url": "https://spam.example/figures?x=<b>",
                             "reason": 'carries instructions to a model (a prompt injection): '
                                       '\u201cIgnore all previous instructions. <script>\u201d'}]
    return report


def test_markdown_lists_uncited_sources_under_their_label_and_distrusted_pages_unlinked() -> None:
    text = render_markdown(report_with_uncited_and_distrusted())
    sources = text.split("## Sources", 1)[1].split("\n## ", 1)[0]
    assert ALSO_USED in sources
    cited_part, also_part = sources.split(ALSO_USED)
    assert "[3] [Lithium" in cited_part and "[4]" not in cited_part
    assert "- [4] [Regulator statement](https://regulator.example/statement)" in also_part
    distrusted = text.split("## Distrusted sources", 1)[1].split("\n## ", 1)[0]
    assert "- ` https://spam.example/figures?x=<b> ` (not linked)" in distrusted and "prompt injection" in distrusted
    html = MarkdownIt("commonmark").render(text)
    assert 'href="https://spam' not in html and "<script>" not in html
    assert "## Distrusted sources" not in render_markdown(realistic_report())


def test_html_lists_uncited_sources_with_anchors_and_distrusted_pages_as_text() -> None:
    page = parse(render_html(report_with_uncited_and_distrusted()))
    assert page.by_tag["h2"][page.by_tag["h2"].index("Sources") + 1] == "Distrusted sources"
    assert [a["id"] for _, a in page.tags if "id" in a] == ["source-1", "source-2", "source-3", "source-4"]
    assert ALSO_USED in page.by_tag["strong"]
    assert "#source-4" in page.hrefs(), "the uncited source's evidence links to its number"
    assert not [h for h in page.hrefs() if "spam.example" in h], "a distrusted page is never a link"
    assert "<script>" not in render_html(report_with_uncited_and_distrusted())


def test_a_quote_from_a_document_says_its_page_in_the_evidence_and_the_sources() -> None:
    report = realistic_report()
    report["sources"].append({"n": 9, "url": "file:///srv/library/inspection%20report.pdf",
                              "title": "Principal inspection report", "cited": False, "kind": "library"})
    for page, quote in ((12, "Seven of the 32 anchorages were corroded."), (3, "The bridge was closed.")):
        report["evidence"].append({**report["evidence"][0], "source": 9, "url": report["sources"][-1]["url"],
                                   "quote": quote, "page": page})
    md = render_markdown(report)
    assert "— p. 12 · round" in md and "— p. 3 · round" in md
    # a file is named, not linked: the reader's browser must not open paths from a report
    assert "Principal inspection report (file:///srv/library/inspection%20report.pdf) (pp. 3, 12)" in md
    assert 'href="file:' not in render_html(report)


def test_the_method_names_every_host_contacted_with_its_count_escaped() -> None:
    report = realistic_report()
    report["egress"]["hosts"].append({"host": "evil_[x](y).example", "requests": 1})
    md = render_markdown(report)
    assert "Network (egress = open): hosts contacted, 127.0.0.1:11434 (model server): 9 requests; " in md
    assert "news.example: 2 requests" in md and "No other host was contacted." in md
    assert "looked up through this machine's resolver (DNS)" in md  # lookups happen and are not counted
    assert "evil\\_\\[x\\](y).example" in md  # a host name from a page cannot make a link


def test_evidence_from_a_page_read_before_this_run_says_when_it_was_read() -> None:
    """Issue 12: reused evidence is cited with the date it was read (a page an earlier brief
    read, taken from the store); evidence whose page this run read has no date."""
    report = realistic_report()
    report["started_at"] = "2026-11-24T06:00:00Z"
    old, new = report["evidence"][0], report["evidence"][1]
    old["read_at"], new["read_at"] = "2026-11-17T09:30:00Z", "2026-11-24T06:00:05Z"
    text = render_markdown(report)
    assert text.count("read 2026-11-17") == 1 and "read 2026-11-24" not in text
