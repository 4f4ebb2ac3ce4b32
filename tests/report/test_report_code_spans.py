"""report.md's code spans and fences cannot be paired up by their neighbours (issue 19 #4).

CommonMark pairs backtick runs by length, so a code span is only as safe as what stands beside it:
the model's summary `` `a```<img src=x onerror=alert(1)>` `` was written as two spans side by side
whose backtick runs joined into one, the spans paired differently, and the tag between them came
out live. A span inside a table cell is split at its `|` by GFM, leaving its text outside any code.
Every untrusted string that reaches report.md is drawn here from backtick-heavy pieces, and the
file is read as a viewer that allows raw HTML would (markdown-it-py's CommonMark preset, `html`
on, GFM tables): briefd writes no HTML into report.md, so no HTML token may appear at all.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from briefd.daemon.report.markdown import render_markdown

TAG = "<img src=x onerror=alert(1)>"
# What a code span is made of, and what can stand next to one: backtick runs of each length, the
# spans themselves, a tag to leak, a pipe to split a table cell, and a little text.
PIECES = ["`", "``", "```", "`a`", "``b``", TAG, "|", "\\|", "\\", "x", " ", "**", "[1]", "~~~"]
TABLE_HEAD = "| a | b |\n|---|---|\n"

code_text = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
# a summary line, or the same text in a table cell (the summary is the one field with tables)
summary_line = st.one_of(code_text, code_text.map(lambda cell: f"{TABLE_HEAD}| {cell} | c |"))

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])  # the preset allows raw HTML


@st.composite
def code_reports(draw: st.DrawFn) -> dict[str, Any]:
    """A report whose every string that reaches report.md came from the model or a page."""
    text = lambda: draw(code_text)
    sources = [{"n": n, "url": f"https://ok.example/{n}", "title": text()} for n in (1, 2)]
    side = lambda: {"source": 1, "quote": text(), "tier": text(), "confidence": 0.5, "low": 1, "high": 2}
    return {
        "id": "spans", "status": draw(st.sampled_from(["done", "failed"])), "question": text(),
        "summary": "\n".join(draw(st.lists(summary_line, min_size=1, max_size=4))),
        "sources": sources,
        "evidence": [{"source": 1, "url": "https://ok.example/1", "quote": text(), "stance": text(),
                      "impact": text(), "confidence": 0.5, "round": 1, "summary": text(), "tier": text()}],
        "gaps": [text()], "open_questions": [text()], "error": text(), "disclaimer": text(),
        "research_question": text(), "angles": [text()], "stop_reason": text(),
        "distrusted": [{"url": text(), "reason": text()}],
        "sides": {"left_title": text(), "right_title": text(), "left": [side()], "right": [side()]},
    }


def html_tokens(markdown: str) -> list[str]:
    """The raw HTML a CommonMark viewer that allows it would pass to the browser."""
    tokens = _MD.parse(markdown)
    return [t.content for token in tokens for t in [token, *(token.children or [])]
            if t.type in ("html_inline", "html_block")]


def test_the_reported_summary_shows_its_tag_as_code() -> None:
    text = render_markdown({"id": "x", "question": "q", "status": "done", "summary": f"`a```{TAG}`"})
    assert html_tokens(text) == [], text
    code = [t.content for token in _MD.parse(text) for t in token.children or [] if t.type == "code_inline"]
    assert any(TAG in c for c in code), code  # shown, as code


def test_a_pipe_in_a_table_cells_code_does_not_split_the_cell() -> None:
    summary = f"{TABLE_HEAD}| `x\\|{TAG}` | c |"
    text = render_markdown({"id": "x", "question": "q", "status": "done", "summary": summary})
    assert html_tokens(text) == [], text
    cells = [t.content for token in _MD.parse(text) for t in token.children or [] if t.type == "code_inline"]
    assert f"x|{TAG}" in cells, cells


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code_reports())
def test_report_md_has_no_html_whatever_backticks_the_untrusted_text_holds(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    assert html_tokens(text) == [], text
