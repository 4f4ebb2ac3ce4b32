"""chart.png (daemon/report/chart_png.py, the png extra) is total: any estimate gives a PNG or the reason there is none.

Issue 8 #6: a band from -1e308 to 1e308 made matplotlib fail ("arange: cannot compute length")
and the brief end `failed`. Evidence can move a range anywhere a page's numbers reach, so
validation alone cannot keep the chart's numbers sane: the chart must never raise. Issue 13:
chart.svg (daemon/report/charts.py) is the chart every brief gets; chart.png is drawn beside it only
where matplotlib is installed, and report.json's `chart` note says which were written and why not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.core.brief import ESTIMATE_MAX_ABS, estimate_min_width
from briefd.daemon.report.chart_png import NO_MATPLOTLIB, PNG_FILE, render_chart, write_chart
from briefd.daemon.report.charts import CHART_FILE, RANGE_COLOUR, TARGET_COLOUR
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.report import blank_report

PNG = b"\x89PNG\r\n\x1a\n"


def estimate(low: float, high: float, history: list[tuple[float, float]] | None = None,
             target: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    """An estimate as report.json holds it: the initial range, then one row per round."""
    return {
        "unit": "USD million", "initial": {"low": low, "high": high},
        "target": {"low": target[0], "high": target[1], "width": None}, "final": {"low": low, "high": high},
        "progress_score": 0.0,
        "history": [{"round": i + 1, "low": lo, "high": hi, "progress_score": 0.0, "tokens": 1000 * (i + 1)}
                    for i, (lo, hi) in enumerate(history or [])],
    }


MAX = 1.7976931348623157e308
EXTREME = [
    pytest.param(estimate(-1e308, 1e308), id="the issue's band: -1e308..1e308"),
    pytest.param(estimate(-8e307, 8e307), id="a finite span matplotlib's tick locator still overflows on"),
    pytest.param(estimate(0, 1.7e308), id="0..1.7e308"),
    pytest.param(estimate(100, 2000, [(410, 520), (-MAX, MAX)]), id="evidence moved a sane range to the float limits"),
    pytest.param(estimate(100, 2000, [(410, 520)], target=(-MAX, MAX)), id="a target band at the float limits"),
    pytest.param(estimate(100, 2000, [(None, 520)]), id="a round without a low"),  # type: ignore[list-item]
    pytest.param(estimate(100, 2000, [(float("nan"), 520)]), id="nan"),
    pytest.param(estimate(100, 2000, [(float("-inf"), float("inf"))]), id="infinities"),
]


@pytest.mark.parametrize("est", EXTREME)
def test_extreme_ranges_give_a_reason_instead_of_raising(est: dict[str, Any], tmp_path: Path) -> None:
    chart = render_chart(est, "How much did the Northgate tunnel overrun?")
    assert chart.png is None and chart.missing, "no picture, and a reason"
    note = write_chart(tmp_path, est, "How much did the Northgate tunnel overrun?")
    assert note["png"] is None
    why = note["missing"] or note["png_missing"]  # no chart at all, or chart.svg only (matplotlib failed)
    assert why and len(why) <= 500 and (note["missing"] is None) == (note["file"] == CHART_FILE)
    assert not (tmp_path / PNG_FILE).exists(), "no chart file when the chart could not be drawn"


def test_the_reason_says_what_went_wrong() -> None:
    assert "too large to plot" in (render_chart(estimate(-1e308, 1e308), "q").missing or "")
    assert "arange" in (render_chart(estimate(-8e307, 8e307), "q").missing or ""), "matplotlib's own words"
    note = write_chart(Path("/nonexistent"), estimate(-8e307, 8e307), "q")  # nothing is written: it fails
    assert note["file"] == CHART_FILE and note["missing"] is None, "chart.svg draws what matplotlib cannot"
    assert "arange" in (note["png_missing"] or "")


@pytest.mark.parametrize("low, high", [
    (-ESTIMATE_MAX_ABS, ESTIMATE_MAX_ABS),                            # the widest valid range
    (0.0, estimate_min_width(0.0, 1e-9)),                             # the narrowest valid range near 0
    (ESTIMATE_MAX_ABS - estimate_min_width(0, ESTIMATE_MAX_ABS), ESTIMATE_MAX_ABS),  # narrowest at the top
])
def test_valid_ranges_at_the_edges_of_validation_are_drawn(low: float, high: float, tmp_path: Path) -> None:
    est = estimate(low, high, [(low, high), (410, 520)])
    assert write_chart(tmp_path, est, "q") == {"file": CHART_FILE, "missing": None, "png": PNG_FILE,
                                               "png_missing": None}
    assert (tmp_path / PNG_FILE).read_bytes().startswith(PNG)


def test_without_matplotlib_the_note_says_how_to_get_chart_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from briefd.daemon.report import chart_png

    monkeypatch.setattr(chart_png, "matplotlib_installed", lambda: False)
    note = write_chart(tmp_path, estimate(100, 2000, [(410, 520)]), "q")
    assert note == {"file": CHART_FILE, "missing": None, "png": None, "png_missing": NO_MATPLOTLIB}
    assert "pip install 'briefd[png]'" in NO_MATPLOTLIB
    assert not (tmp_path / PNG_FILE).exists()


def test_a_missing_chart_is_noted_in_every_report_format() -> None:
    report = blank_report("cost", "cost.json", "How much?", "2026-11-23T10:00:00Z")
    report.update(status="done", estimate=estimate(-1e308, 1e308))
    report["chart"] = write_chart(Path("/nonexistent"), report["estimate"], "How much?")
    assert report["chart"]["file"] is None and "too large to plot" in report["chart"]["missing"]
    assert "No chart: the values run from" in render_markdown(report)
    assert "No chart: the values run from" in render_html(report)
    assert "<svg" not in render_html(report)
    report.update(estimate=estimate(100, 2000, [(410, 520)]))
    assert "No chart" not in render_markdown(report) and "<svg" in render_html(report)


def test_chart_png_is_drawn_in_chart_svgs_colours(tmp_path: Path) -> None:
    """chart.png and chart.svg are the same picture: the range's edges in RANGE_COLOUR (charts.py), and
    the target band a light tint of TARGET_COLOUR, not matplotlib's own palette."""
    from matplotlib import image

    write_chart(tmp_path, estimate(100, 2000, [(400, 900), (410, 520)], target=(300, 700)), "q")
    pixels = image.imread(tmp_path / PNG_FILE)[:, :, :3]
    colours = {tuple(round(float(c) * 255) for c in px) for row in pixels for px in row}

    def rgb(hex_colour: str, alpha: float = 1.0) -> tuple[int, ...]:
        return tuple(round(alpha * int(hex_colour[i:i + 2], 16) + (1 - alpha) * 255) for i in (1, 3, 5))

    assert rgb(RANGE_COLOUR) in colours, "the range's edges"
    assert any(max(abs(a - b) for a, b in zip(c, rgb(TARGET_COLOUR, 0.15))) <= 1 for c in colours), "the band"
