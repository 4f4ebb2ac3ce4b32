"""A report leads with its answer, and report.html is report.md rendered (issue 9, part C).

The first screen of report.md (its first 25 lines) and of report.html (the text before the
first section heading after the answer) holds the question and the answer: the computed
range with its unit against the target and why research stopped, or the verdict with its
evidence level in plain words, or for a plain brief the first lines of the summary. The
reports are built from realistic report dicts and written with the real charts; report.html's
text must be exactly what markdown-it renders from report.md, so the two cannot disagree (the
charts are figures: report.md shows their files, report.html inlines the same SVG).
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from markdown_it import MarkdownIt

from briefd.daemon.report.chart_png import PNG_FILE, write_chart
from briefd.daemon.report.charts import CHART_FILE, ChartLayout, chart_layout, report_charts
from briefd.daemon.report.html import CSP, render_html
from briefd.daemon.report.markdown import NOT_READ_NOTE, render_markdown
from briefd.daemon.report.outbox import write_report
from briefd.daemon.report.report import evidence_by_source
from briefd.daemon.rules.judge import EVIDENCE_LEVEL_WORDS
from tests.report.test_report import realistic_report
from tests.core.test_untrusted import hostile_reports

FIRST_SCREEN_LINES = 25
# What a viewer does with report.md: CommonMark, raw HTML off, GFM tables.
VIEWER = MarkdownIt("commonmark", {"html": False}).enable("table")


def estimate_report() -> dict[str, Any]:
    """A finished estimate brief after four rounds, with a target range and a long summary."""
    report = realistic_report()
    report["estimate"]["history"] = [
        {"round": i, "low": low, "high": high, "progress_score": p, "tokens": 4000 * i}
        for i, (low, high, p) in enumerate([(60, 150, 0.4), (70, 120, 0.6), (75, 104, 0.8), (78.5, 96, 0.91)], 1)]
    report["stop_reason"] = "stalled"
    report["stop_explanation"] = ("Stopped after round 4 of 4: the range 78.5\u201396 is not yet inside the "
                                  "target 80\u2013100.")
    report["summary"] += "\n\n" + "\n\n".join(f"Further context paragraph {i} on prices [2]." for i in range(6))
    return report


def hypothesis_report() -> dict[str, Any]:
    report = realistic_report()
    report.update(
        question="Did the Lakeside water plant upgrade cut lead levels below 5 ppb?",
        estimate=None, chart=None, stop_reason="converged",
        stop_explanation="Stopped after round 2 of 3: no new evidence in the last 2 rounds.",
        verdict={"value": "supported", "rule": "support 1.60 >= 1.2 and >= 2 x contradiction 0.00",
                 "evidence_level": "advisory", "support": 1.6, "contradiction": 0.0},
    )
    report["summary"] += "\n\n" + "\n\n".join(f"Background paragraph {i} on the plant [1]." for i in range(6))
    return report


def plain_report() -> dict[str, Any]:
    report = realistic_report()
    report.update(question="Why did the kestrel population decline in the valley?", estimate=None, chart=None,
                  stop_reason="converged", stop_explanation=None,
                  summary="Kestrel numbers fell by a third after 2019 [1], mostly from lost hedgerows [2].\n\n"
                          + "\n\n".join(f"Detail paragraph {i} [3]." for i in range(8)))
    return report


class Text(HTMLParser):
    """The text a browser shows inside <main>, and each <h2>'s position in it; a chart's
    labels are not the report's text (report.md shows the chart as an image, its file)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.h2_at: list[int] = []
        self.inside = False
        self.in_chart = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "main":
            self.inside = True
        if tag == "h2":
            self.h2_at.append(len(self.parts))
        if tag == "svg":
            self.in_chart += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self.inside = False
        if tag == "svg":
            self.in_chart -= 1

    def handle_data(self, data: str) -> None:
        if self.inside and not self.in_chart:
            self.parts.append(data)


def visible(html_text: str) -> Text:
    if "<main>" not in html_text:  # a bare fragment, as markdown-it renders it
        html_text = f"<main>{html_text}</main>"
    page = Text()
    page.feed(html_text)
    page.close()
    return page


def words(text: str) -> str:
    return " ".join(text.split())


def before_h2(page: Text, index: int) -> str:
    end = page.h2_at[index] if index < len(page.h2_at) else len(page.parts)
    return words("".join(page.parts[:end]))


def first_lines(markdown: str) -> str:
    """The first screen of report.md as its reader sees it (escapes resolved)."""
    head = "\n".join(markdown.splitlines()[:FIRST_SCREEN_LINES])
    return words("".join(visible(VIEWER.render(head)).parts))


# ---------------------------------------------------------------------------- the first screen


def test_an_estimate_leads_with_its_range_against_the_target_and_why_it_stopped() -> None:
    report = estimate_report()
    expected = ["What will an EV battery pack cost per kWh in 2027?", "78.5–96 USD/kWh",
                "target of 80–100 USD/kWh", words(report["stop_explanation"])]
    md_screen = first_lines(render_markdown(report))
    html_screen = before_h2(visible(render_html(report)), 0)
    for screen in (md_screen, html_screen):
        for text in expected:
            assert text in screen, (text, screen)


def test_a_hypothesis_leads_with_its_verdict_and_what_its_evidence_level_means() -> None:
    report = hypothesis_report()
    md_screen = first_lines(render_markdown(report))
    html_screen = before_h2(visible(render_html(report)), 0)
    for screen in (md_screen, html_screen):
        assert report["question"] in screen
        assert "the claim is supported" in screen, screen
        assert words(EVIDENCE_LEVEL_WORDS["advisory"]) in screen, "advisory, said in plain words"
        assert words(report["stop_explanation"]) in screen


def test_a_plain_brief_leads_with_the_first_lines_of_its_summary() -> None:
    report = plain_report()
    first = "Kestrel numbers fell by a third after 2019 [1], mostly from lost hedgerows [2]."
    md_screen = first_lines(render_markdown(report))
    assert report["question"] in md_screen and first in md_screen
    page = visible(render_html(report))
    assert "".join(page.parts[page.h2_at[0]:page.h2_at[0] + 1]) == "Summary", "the first section is the summary"
    html_screen = before_h2(page, 1)
    assert report["question"] in html_screen and first in html_screen


@pytest.mark.parametrize("make", [estimate_report, hypothesis_report, plain_report])
def test_the_method_comes_last(make: Any) -> None:
    page = visible(render_html(make()))
    sections = ["".join(page.parts[i:i + 1]) for i in page.h2_at]
    assert sections[-1] == "Method", sections
    assert sections.index("Evidence") < sections.index("Sources") < sections.index("Method")
    method = "".join(page.parts[page.h2_at[-1]:])
    assert "Research plan" in method and "Queries" in method and "Model calls" in method


def test_evidence_is_grouped_by_source_strongest_first() -> None:
    report = realistic_report()
    report["evidence"] = [
        {"source": 2, "url": "https://b.example/", "quote": "B weak.", "confidence": 0.4, "round": 1},
        {"source": 1, "url": "https://a.example/", "quote": "A mid.", "confidence": 0.6, "round": 1},
        {"source": 2, "url": "https://b.example/", "quote": "B strong.", "confidence": 0.9, "round": 2},
        {"source": 1, "url": "https://a.example/", "quote": "A weak.", "confidence": 0.3, "round": 2},
    ]
    groups = evidence_by_source(report)
    assert [[e["quote"] for e in g] for g in groups] == [["B strong.", "B weak."], ["A mid.", "A weak."]]
    text = render_markdown(report)
    order = [text.index(q) for q in ("B strong.", "B weak.", "A mid.", "A weak.")]
    assert order == sorted(order)


def test_a_snippets_only_report_says_the_pages_were_not_read() -> None:
    report = plain_report()
    report["usage"].update(pages_fetched=0, page_cache_hits=0)
    assert words(NOT_READ_NOTE) in first_lines(render_markdown(report))
    assert words(NOT_READ_NOTE) in before_h2(visible(render_html(report)), 1)
    assert words(NOT_READ_NOTE) not in words(render_markdown(plain_report())), "pages were read there"


# ---------------------------------------------------------------------------- one Markdown, two reports


def written(tmp_path: Path, report: dict[str, Any]) -> tuple[str, str, str | None]:
    """The reports as the worker writes them: chart.png and the chart note first (estimate
    briefs), then the reports with the SVG charts; and chart.svg's text, when written."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    if report.get("estimate"):
        report["chart"] = write_chart(outdir, report["estimate"], report["question"])
    write_report(outdir, report, ["md", "html"])
    chart = outdir / CHART_FILE
    return ((outdir / "report.md").read_text(encoding="utf-8"), (outdir / "report.html").read_text(encoding="utf-8"),
            chart.read_text(encoding="utf-8") if chart.exists() else None)


@pytest.mark.parametrize("make", [estimate_report, hypothesis_report, plain_report])
def test_report_html_text_is_what_markdown_it_renders_from_report_md(make: Any, tmp_path: Path) -> None:
    markdown, html_text, _ = written(tmp_path, make())
    assert words("".join(visible(html_text).parts)) == words("".join(visible(VIEWER.render(markdown)).parts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_reports())
def test_hostile_reports_read_the_same_in_both_formats(report: dict[str, Any]) -> None:
    html_text = render_html(report)
    markdown = render_markdown(report)
    assert words("".join(visible(html_text).parts)) == words("".join(visible(VIEWER.render(markdown)).parts))


def test_the_chart_is_inlined_in_report_html_and_linked_from_report_md(tmp_path: Path) -> None:
    markdown, html_text, chart = written(tmp_path, estimate_report())
    assert chart is not None and chart.startswith("<svg ")
    assert f"]({CHART_FILE})" in markdown, "report.md links the chart beside it"
    assert html_text.count(chart) == 1, "report.html shows that very chart, inline"
    assert (tmp_path / "out" / PNG_FILE).read_bytes().startswith(b"\x89PNG"), "chart.png beside it (png extra)"
    # an inline SVG loads nothing: the CSP allows no load at all, and no script
    assert "default-src 'none'" in CSP and "img-src" not in CSP and "script" not in CSP
    assert "'self'" not in CSP and "<img" not in html_text


def test_report_html_draws_its_charts_from_the_report_alone() -> None:
    report = estimate_report()
    html_text = render_html(report)
    assert "<img" not in html_text
    for _name, svg in report_charts(report):
        assert svg in html_text


# ---------------------------------------------------------------------------- the chart


def layout(estimate: dict[str, Any]) -> ChartLayout:
    result = chart_layout(estimate)
    assert isinstance(result, ChartLayout), result
    return result


def test_the_chart_has_rounds_on_the_x_axis_and_annotates_the_final_range() -> None:
    chart = layout(estimate_report()["estimate"])
    assert chart.xs == [0, 1, 2, 3, 4]
    assert chart.tick_labels == ["start", "r1\n4,000 tok", "r2\n8,000 tok", "r3\n12,000 tok", "r4\n16,000 tok"]
    assert chart.final_label == "final 78.5\u201396 USD/kWh"
    assert chart.band == (80, 100)


def test_a_target_width_gets_a_band_centred_on_the_final_range() -> None:
    estimate = copy.deepcopy(estimate_report()["estimate"])
    estimate["target"] = {"low": None, "high": None, "width": 10}
    chart = layout(estimate)
    assert chart.band == (82.25, 92.25) and "width \u2264 10" in chart.band_label


def test_a_cached_rerun_spends_no_tokens_and_still_draws_one_step_per_round(tmp_path: Path) -> None:
    estimate = copy.deepcopy(estimate_report()["estimate"])
    for step in estimate["history"]:
        step["tokens"] = 0
    chart = layout(estimate)
    assert chart.xs == [0, 1, 2, 3, 4], "rounds spread out even at zero tokens"
    assert write_chart(tmp_path, estimate, "q")["file"] == CHART_FILE and (tmp_path / PNG_FILE).exists()
    svg = dict(report_charts({"question": "q", "estimate": estimate}))[CHART_FILE]
    assert svg.count('class="round"') == 5
