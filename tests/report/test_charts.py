"""The SVG charts (daemon/report/charts.py): what a reader sees, from report.json alone, for any report.

Issue 13 #6 and #7: briefd draws its charts itself (matplotlib was about 170 MB of the
install for one chart), and seed 5's evidence charts (by source and tier, by relevance) sit
beside the estimate band. Each chart must parse as XML, show the shapes its numbers call for,
show hostile text as text, and draw any numbers without NaN or a division by zero.
"""

from __future__ import annotations

import copy
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from briefd.daemon.core.brief import ESTIMATE_MAX_ABS, estimate_min_width
from briefd.daemon.report.charts import (
    CHART_FILE,
    MAX_SOURCE_ROWS,
    RELEVANCE_FILE,
    SOURCES_FILE,
    TIER_COLOURS,
    UNRATED,
    band_missing,
    nice_ticks,
    report_charts,
    tick_label,
)
from briefd.daemon.rules.judge import CREDIBLE, TIERS
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.outbox import write_report
from tests.core.test_untrusted import hostile_reports

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "</svg><script>alert(1)</script><svg onload=alert(2)>&amp; \ufffe"


def estimate(initial: tuple[float, float], rounds: list[tuple[float, float]],
             target: dict[str, float | None] | None = None, unit: str = "USD/kWh") -> dict[str, Any]:
    return {"unit": unit, "initial": {"low": initial[0], "high": initial[1]},
            "target": target or {"low": 80, "high": 100, "width": None},
            "final": {"low": (rounds or [initial])[-1][0], "high": (rounds or [initial])[-1][1]},
            "progress_score": 0.5,
            "history": [{"round": i, "low": lo, "high": hi, "progress_score": 0.5, "tokens": 4000 * i}
                        for i, (lo, hi) in enumerate(rounds, 1)]}


def item(url: str, tier: str | None, confidence: float | None,
         quote: str = "battery pack price per kWh") -> dict[str, Any]:
    return {"source": 1, "url": url, "title": "t", "quote": quote, "stance": None, "impact": "narrows_both",
            "confidence": confidence, "round": 1, "tier": tier}


def report(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"question": "What will an EV battery pack cost per kWh in 2027?",
                            "research_question": None, "estimate": None, "evidence": []}
    return {**base, **fields}


EVIDENCE = [
    item("https://www.iea.org/reports/ev", "regulator", 0.9, "EV battery pack cost per kWh in 2027"),
    item("https://iea.org/other", "regulator", 0.8, "pack prices"),
    item("https://news.example.com/a", "news", 0.55, "battery cost"),
    item("https://news.example.com/b", "social", 0.3, "unrelated words"),
    item("https://journal.example.edu/x", "peer_reviewed", 0.7, "EV battery pack cost kWh 2027"),
]


def charts_of(rep: dict[str, Any]) -> dict[str, ET.Element]:
    """Each chart parsed as XML (a chart that does not parse fails here)."""
    return {name: ET.fromstring(svg) for name, svg in report_charts(rep)}


def shapes(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == cls]


def texts(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(f"{SVG}text")]


def numbers_in(svg: str) -> list[str]:
    """Every numeric attribute value in a chart."""
    return re.findall(r'\b(?:x|y|x1|x2|y1|y2|width|height)="([^"]*)"', svg)


# ---------------------------------------------------------------------------- which charts


def test_an_estimate_report_with_evidence_gets_three_charts_and_a_plain_one_two() -> None:
    both = report(estimate=estimate((60, 150), [(70, 120), (78.5, 96)]), evidence=EVIDENCE)
    assert [name for name, _ in report_charts(both)] == [CHART_FILE, SOURCES_FILE, RELEVANCE_FILE]
    assert [name for name, _ in report_charts(report(evidence=EVIDENCE))] == [SOURCES_FILE, RELEVANCE_FILE]
    assert report_charts(report()) == [], "no estimate, no evidence: nothing to draw"


def test_every_chart_is_a_standalone_scalable_svg_with_nothing_to_run_or_load() -> None:
    rep = report(estimate=estimate((60, 150), [(70, 120)]), evidence=EVIDENCE)
    for name, svg in report_charts(rep):
        root = ET.fromstring(svg)
        assert root.tag == f"{SVG}svg" and re.fullmatch(r"0 0 \d+ \d+", root.get("viewBox") or ""), name
        assert root.get("aria-label"), "a name for screen readers"
        lowered = svg.lower()
        for banned in ("<script", "href", "url(", "@import", "<image", "<foreignobject", " on", "<style"):
            assert banned not in lowered, (name, banned)
        assert not any(e.get("id") for e in root.iter()), "no ids: several charts share report.html"


# ---------------------------------------------------------------------------- the estimate band


def test_the_band_chart_draws_a_step_per_round_the_target_band_and_the_final_range() -> None:
    rep = report(estimate=estimate((60, 150), [(70, 120), (75, 104), (78.5, 96)]))
    root = charts_of(rep)[CHART_FILE]
    rounds = shapes(root, "round")
    assert len(rounds) == 4, "the start and three rounds"
    heights = [float(r.get("height") or 0) for r in rounds]
    assert heights == sorted(heights, reverse=True) and heights[0] > 2 * heights[-1], "the range narrows"
    lefts = [float(r.get("x") or 0) for r in rounds]
    assert lefts == sorted(lefts) and len(set(lefts)) == 4, "one step after another"
    target = shapes(root, "target")
    assert len(target) == 1
    # the target band (80..100) lies inside the start's range (60..150) on the page
    start, band = rounds[0], target[0]
    assert float(start.get("y") or 0) < float(band.get("y") or 0)
    assert float(band.get("y") or 0) + float(band.get("height") or 0) < float(start.get("y") or 0) + heights[0]
    words = texts(root)
    assert "final 78.5\u201396 USD/kWh" in [w for e in shapes(root, "final") for w in e.itertext()]
    assert "target 80\u2013100" in words and "USD/kWh" in words
    assert ["start", "r1", "4,000 tok", "r3", "12,000 tok"] == [w for w in words if w in
                                                             ("start", "r1", "4,000 tok", "r3", "12,000 tok")]


def test_a_target_width_gets_a_band_of_that_width_centred_on_the_final_range() -> None:
    rep = report(estimate=estimate((60, 150), [(78.5, 96)], target={"low": None, "high": None, "width": 10}))
    root = charts_of(rep)[CHART_FILE]
    assert any("target width \u2264 10" in w for w in texts(root))
    final, band = shapes(root, "round")[-1], shapes(root, "target")[0]
    middle = float(final.get("y") or 0) + float(final.get("height") or 0) / 2
    assert float(band.get("y") or 0) + float(band.get("height") or 0) / 2 == pytest.approx(middle, abs=0.2)
    # 10 wide against the final range's 17.5: a little more than half its height
    assert float(band.get("height") or 0) / float(final.get("height") or 1) == pytest.approx(10 / 17.5, rel=0.05)


@pytest.mark.parametrize("initial, rounds, target", [
    pytest.param((5, 5), [], None, id="one round, a point (low == high)"),
    pytest.param((0, 0), [(0, 0)], {"low": 0, "high": 0, "width": None}, id="everything zero"),
    pytest.param((-ESTIMATE_MAX_ABS, ESTIMATE_MAX_ABS), [(410, 520)], None, id="the widest valid range"),
    pytest.param((0.0, estimate_min_width(0.0, 1e-9)), [], {"low": None, "high": None, "width": 1e-12},
                 id="the narrowest valid range near 0"),
    pytest.param((5e-324, 1e-323), [(5e-324, 5e-324)], None, id="denormals"),
    pytest.param((-8e307, 8e307), [(1e307, 2e307)], None, id="a span matplotlib's tick locator overflows on"),
    pytest.param((1.7e308, 1.7976931348623157e308), [], None, id="at the float limit"),
    pytest.param((1.7976931348623157e308, 1.7976931348623157e308), [], None, id="a point at the float limit"),
    pytest.param((-1.7976931348623157e308, -1.7976931348623157e308), [], None, id="a point at the negative limit"),
    pytest.param((1e15, 1e15 + 1), [(1e15, 1e15 + 0.5)], None, id="a step below the numbers' precision"),
])
def test_any_plottable_numbers_give_a_finite_drawing(initial: tuple[float, float], rounds: list[tuple[float, float]],
                                                    target: dict[str, float | None] | None) -> None:
    rep = report(estimate=estimate(initial, rounds, target=target or {"low": None, "high": None, "width": None}))
    assert band_missing(rep) is None
    svg = dict(report_charts(rep))[CHART_FILE]
    root = ET.fromstring(svg)
    assert len(shapes(root, "round")) == len(rounds) + 1
    values = numbers_in(svg)
    assert values and all(math.isfinite(float(v)) for v in values), "no NaN or infinity on the page"
    for r in shapes(root, "round"):
        assert float(r.get("height") or 0) >= 2, "a point range still shows"
        assert 60 <= float(r.get("y") or 0) <= 340, "inside the plot"
    assert "nan" not in svg.lower() and "inf" not in svg.lower()


FLOATS = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.tuples(FLOATS, FLOATS), st.lists(st.tuples(FLOATS, FLOATS), max_size=4),
       st.one_of(st.none(), st.tuples(FLOATS, FLOATS), FLOATS))
def test_any_finite_numbers_give_a_finite_band_or_the_reason(initial: tuple[float, float],
                                                             rounds: list[tuple[float, float]],
                                                             target: tuple[float, float] | float | None) -> None:
    aim: dict[str, float | None] = {"low": None, "high": None, "width": None}
    if isinstance(target, tuple):
        aim.update(low=target[0], high=target[1])
    elif target is not None:
        aim["width"] = target
    rep = report(estimate=estimate(initial, rounds, target=aim))
    charts = dict(report_charts(rep))
    assert (CHART_FILE in charts) == (band_missing(rep) is None)
    if CHART_FILE in charts:
        svg = charts[CHART_FILE]
        assert len(shapes(ET.fromstring(svg), "round")) == len(rounds) + 1
        assert all(math.isfinite(float(v)) for v in numbers_in(svg)) and "nan" not in svg.lower()


@pytest.mark.parametrize("est, why", [
    (estimate((-1e308, 1e308), []), "too large to plot"),
    (estimate((100, 2000), [(float("nan"), 520)]), "round 1 has no finite low"),
    (estimate((100, 2000), [(410, 520)], target={"low": -1.7e308, "high": 1.7e308, "width": None}),
     "too large to plot"),
    ({"unit": "x", "initial": {"low": "100", "high": 2000}, "history": "not a list"}, "round 0 has no finite"),
])
def test_numbers_that_cannot_be_plotted_give_the_reason_and_no_band(est: dict[str, Any], why: str) -> None:
    rep = report(estimate=est)
    assert why in (band_missing(rep) or "")
    assert report_charts(rep) == []
    said = [line for line in render_markdown(rep).replace("\\", "").splitlines() if line.startswith("_No chart: ")]
    assert len(said) == 1 and why in said[0], "report.md says why there is no chart"


def test_many_rounds_label_only_some_so_labels_do_not_overlap() -> None:
    rep = report(estimate=estimate((0, 1000), [(i, 1000 - i) for i in range(1, 40)]))
    root = charts_of(rep)[CHART_FILE]
    assert len(shapes(root, "round")) == 40
    labels = [w for w in texts(root) if re.fullmatch(r"r\d+|start", w)]
    assert 10 <= len(labels) <= 15 and labels[-1] == "r39", "the last round is always labelled"


# ---------------------------------------------------------------------------- axis numbers


@pytest.mark.parametrize("low, high", [(52.8, 157.2), (0, 1), (-1e300, 1e300), (1e-310, 3e-310), (5, 5.000000001),
                                       (1e15, 1e15 + 3), (0, 5e-324), (-3, -2)])
def test_ticks_are_round_inside_the_range_and_read_differently(low: float, high: float) -> None:
    ticks, step = nice_ticks(low, high)
    assert ticks and all(low - abs(step) <= t <= high + abs(step) for t in ticks)
    labels = [tick_label(t, step) for t in ticks]
    assert len(set(labels)) == len(labels), labels
    assert all("nan" not in label and "inf" not in label for label in labels)


def test_tick_labels_read_as_people_write_numbers() -> None:
    assert [tick_label(v, 20) for v in (60, 80, 1000)] == ["60", "80", "1,000"]
    assert tick_label(0.25, 0.05) == "0.25" and tick_label(-0.2, 0.2) == "-0.2"
    assert tick_label(2e6, 1e6) == "2e6" and tick_label(1e-300, 1e-301) == "1.0e-300"
    assert nice_ticks(52.8, 157.2) == ([60.0, 80.0, 100.0, 120.0, 140.0], 20.0)


# ---------------------------------------------------------------------------- the evidence


def test_sources_chart_has_a_bar_per_host_split_by_tier_most_items_first() -> None:
    root = charts_of(report(evidence=EVIDENCE))[SOURCES_FILE]
    words = texts(root)
    hosts = [w for w in words if w in ("iea.org", "news.example.com", "journal.example.edu")]
    assert hosts == ["iea.org", "news.example.com", "journal.example.edu"], "www. dropped; by count, then tier"
    bars = shapes(root, "bar")
    assert [b.get("data-tier") for b in bars] == ["regulator", "news", "social", "peer_reviewed"]
    assert {b.get("fill") for b in bars if b.get("data-tier") == "regulator"} == {TIER_COLOURS["regulator"]}
    width = {b.get("data-tier"): float(b.get("width") or 0) for b in bars}
    assert width["regulator"] == pytest.approx(2 * width["news"], rel=0.01), "iea.org gave two items, one bar"
    assert "5 evidence items from 3 hosts" in words
    assert {"regulator (2)", "peer reviewed (1)", "news (1)", "social (1)"} <= set(words), "the tiers' totals"


def test_sources_past_the_limit_are_summed_into_one_row() -> None:
    evidence = [item(f"https://site{i}.example/p", "news", 0.6) for i in range(MAX_SOURCE_ROWS + 7)]
    root = charts_of(report(evidence=evidence))[SOURCES_FILE]
    assert len(shapes(root, "bar")) == MAX_SOURCE_ROWS + 1
    assert "7 more hosts" in texts(root)


def test_relevance_chart_bins_relevance_and_confidence_by_tier_and_marks_the_credible_line() -> None:
    root = charts_of(report(evidence=EVIDENCE))[RELEVANCE_FILE]
    words = texts(root)
    assert "Relevance to the question" in words and "Confidence (capped by the source's tier)" in words
    assert f"credible \u2265 {CREDIBLE:g}" in words
    # five items in each histogram: bar heights add up to the same total in both panels
    bars = shapes(root, "bar")
    left = [b for b in bars if float(b.get("x") or 0) < 400]
    right = [b for b in bars if float(b.get("x") or 0) >= 400]
    assert sum(float(b.get("height") or 0) for b in left) == pytest.approx(
        sum(float(b.get("height") or 0) for b in right), rel=0.01)
    assert sorted(b.get("data-tier") for b in right) == sorted(["regulator", "regulator", "news", "social",
                                                                "peer_reviewed"])
    assert "mean 0.65" in words, "confidence: (0.9 + 0.8 + 0.55 + 0.3 + 0.7) / 5"


def test_evidence_without_tier_or_confidence_is_counted_as_such() -> None:
    evidence = [item("https://a.example/", None, None), item("not a url", "made-up tier", float("nan")),
                "not an item", item("https://b.example/", "social", 7.0)]
    charts = charts_of(report(evidence=evidence))
    sources = charts[SOURCES_FILE]
    tiers = sorted(b.get("data-tier") or "" for b in shapes(sources, "bar"))
    assert tiers == sorted([UNRATED, "news", "social"]), "no tier: unrated; a made-up one counts as news"
    assert "(no host)" in texts(sources)
    relevance = charts[RELEVANCE_FILE]
    assert "2 items without a confidence" in texts(relevance)
    assert "mean 1.00" in texts(relevance), "a confidence of 7 is drawn at 1"


def test_no_evidence_draws_a_chart_that_says_so() -> None:
    from briefd.daemon.report.charts import relevance_svg, sources_svg

    for svg in (sources_svg([]), relevance_svg([])):
        root = ET.fromstring(svg)
        assert "No evidence was kept." in texts(root) and not shapes(root, "bar")


def test_every_tier_has_a_colour() -> None:
    assert set(TIER_COLOURS) == {*TIERS, UNRATED}


# ---------------------------------------------------------------------------- hostile text


def test_hostile_strings_are_text_in_every_chart() -> None:
    rep = report(question=HOSTILE, estimate=estimate((60, 150), [(70, 120)], unit=HOSTILE),
                 evidence=[item(f"https://{HOSTILE}.example/", HOSTILE, 0.5),
                           item("https://x.example/", "news", 0.5, quote=HOSTILE)])
    for name, svg in report_charts(rep):
        root = ET.fromstring(svg)  # parses: U+FFFE is replaced, markup escaped
        assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "foreignObject", "a", "image")]
        assert not [a for e in root.iter() for a in e.attrib if a.lower().startswith("on")], name
        assert "<script" not in svg and "\ufffe" not in svg
    band = charts_of(rep)[CHART_FILE]
    assert any("</svg><script>alert(1)</script>" in w for w in texts(band)), "the question, shown as text"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_reports())
def test_reports_of_any_shape_give_charts_that_parse(rep: dict[str, Any]) -> None:
    for name, svg in report_charts(rep):
        root = ET.fromstring(svg)
        assert not [e for e in root.iter() if e.tag.split("}")[-1] == "script"], name
        assert all(math.isfinite(float(v)) for v in numbers_in(svg)), name


# ---------------------------------------------------------------------------- in the reports


def test_report_html_inlines_the_very_files_written_beside_it(tmp_path: Path) -> None:
    rep = report(estimate=estimate((60, 150), [(70, 120), (78.5, 96)]), evidence=EVIDENCE, question=HOSTILE,
                 status="done", summary="", sources=[])
    write_report(tmp_path, rep, ["md", "html"])
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    for name in (CHART_FILE, SOURCES_FILE, RELEVANCE_FILE):
        svg = (tmp_path / name).read_text(encoding="utf-8")
        ET.fromstring(svg)
        assert svg in page, f"{name} inline in report.html"
        assert f"]({name})" in markdown, f"report.md shows {name} beside it"
    assert page.count("<svg ") == 3
    assert "<script" not in page.lower() and "<img" not in page


def test_write_report_draws_each_chart_once_and_reads_each_quote_once(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """report.md, report.html and the chart files come from one drawing: the charts are drawn once
    and inlined as drawn, and each quote's relevance (the costly part) is computed once, not once
    per file plus once for report.md's image lines."""
    from briefd.daemon.report import charts as charts_module

    counted = {"band": 0, "relevance": 0}
    band, relevance = charts_module.band_svg, charts_module.relevance

    def counting_band(*args: Any) -> str:
        counted["band"] += 1
        return band(*args)

    def counting_relevance(*args: Any) -> float:
        counted["relevance"] += 1
        return relevance(*args)

    monkeypatch.setattr(charts_module, "band_svg", counting_band)
    monkeypatch.setattr(charts_module, "relevance", counting_relevance)
    rep = report(estimate=estimate((60, 150), [(78.5, 96)]), evidence=EVIDENCE)
    write_report(tmp_path, rep, ["md", "html"])
    assert counted == {"band": 1, "relevance": len(EVIDENCE)}
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert all((tmp_path / name).read_text(encoding="utf-8") in page
               for name in (CHART_FILE, SOURCES_FILE, RELEVANCE_FILE))
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == render_markdown(rep)
    assert page == render_html(rep), "the page is the one render_html makes, charts given or drawn"


def test_charts_in_report_html_do_not_need_their_files() -> None:
    rep = report(estimate=estimate((60, 150), [(78.5, 96)]), evidence=EVIDENCE)
    assert render_html(rep).count("<svg ") == 3


def test_a_report_without_evidence_shows_no_evidence_charts() -> None:
    rep = report(estimate=estimate((60, 150), [(78.5, 96)]))
    assert render_html(rep).count("<svg ") == 1
    assert SOURCES_FILE not in render_markdown(rep)


def test_the_charts_do_not_change_the_report_dict() -> None:
    rep = report(estimate=estimate((60, 150), [(78.5, 96)]), evidence=EVIDENCE)
    before = copy.deepcopy(rep)
    report_charts(rep)
    render_html(rep)
    assert rep == before
