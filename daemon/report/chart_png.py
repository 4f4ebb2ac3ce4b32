"""chart.png for estimate briefs, when matplotlib is installed (the `png` extra).

The chart every brief gets is chart.svg (daemon/report/charts.py: the standard library draws it);
this module draws the same layout (`charts.chart_layout`), in the same colours (its
RANGE_COLOUR and TARGET_COLOUR), with matplotlib for whoever wants a raster image beside it,
and writes the report's `chart` note. matplotlib is about 170 MB of a 300 MB install for one
picture, so it is an extra: without it, chart.png is simply not written and report.json's
`chart.png_missing` says how to get it.

matplotlib runs with the Agg backend (no display, safe under systemd or cron). Drawing is
total: any estimate gives either a PNG or the reason there is none (`Chart.missing`), never an
exception. Evidence can move a range anywhere a page's numbers reach (a band from -1e308 to
1e308 makes matplotlib's tick locator fail with "arange: cannot compute length"), and a chart
that cannot be drawn must not fail a brief whose report is fine. Writing the file is another
matter: a full or read-only outbox raises WriteFailed, as it does for every outbox file, so
the brief waits for the disk instead of losing the chart.
"""

from __future__ import annotations

import importlib.util
import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .charts import CHART_FILE, RANGE_COLOUR, TARGET_COLOUR, ChartLayout, chart_layout
from ..core.files import atomic_write_bytes
from ..core.untrusted import fold

PNG_FILE = "chart.png"
NO_MATPLOTLIB = "matplotlib is not installed; chart.png comes with the png extra: pip install 'briefd[png]'"


@dataclass(frozen=True)
class Chart:
    """A drawn chart (`png`) or why none could be drawn (`missing`): exactly one is set."""

    png: bytes | None
    missing: str | None = None


def matplotlib_installed() -> bool:
    """Is matplotlib importable here (the png extra)? Asked without importing it."""
    return importlib.util.find_spec("matplotlib") is not None


def _draw(layout: ChartLayout, unit: str, title: str) -> bytes:
    with warnings.catch_warnings():  # numpy overflow warnings on spans near 1e308: the failure says it once
        warnings.simplefilter("ignore", RuntimeWarning)
        return _draw_figure(layout, unit, title)


def _draw_figure(layout: ChartLayout, unit: str, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    # steps-post draws each round's band until the next round: the last one gets half a round
    xs = [*layout.xs, layout.xs[-1] + 0.5]
    lows, highs = [*layout.lows, layout.lows[-1]], [*layout.highs, layout.highs[-1]]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        if layout.band is not None:
            ax.axhspan(*layout.band, color=TARGET_COLOUR, alpha=0.15, label=layout.band_label)
        ax.fill_between(xs, lows, highs, step="post", alpha=0.25, color=RANGE_COLOUR, label="estimate range")
        ax.plot(xs, lows, drawstyle="steps-post", color=RANGE_COLOUR)
        ax.plot(xs, highs, drawstyle="steps-post", color=RANGE_COLOUR)
        ax.annotate(layout.final_label, (layout.xs[-1], layout.highs[-1]), textcoords="offset points",
                    xytext=(0, 8), fontsize=9, fontweight="bold", ha="left")
        ax.set_xticks(layout.xs, layout.tick_labels, fontsize=8)
        ax.set_xlim(layout.xs[0] - 0.1, xs[-1] + 0.6)
        ax.set_xlabel("round (tokens spent so far)")
        ax.set_ylabel(unit or "value")
        ax.set_title(title[:90], fontsize=10)
        ax.legend(loc="best", fontsize=8)
        ax.grid(True, alpha=0.3)
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def render_chart(estimate: Mapping[str, Any], title: str) -> Chart:
    """A PNG: the range round by round (tokens spent in the labels), the final range
    annotated, the target band shaded (see charts.chart_layout).

    Never raises: numbers that cannot be plotted, no matplotlib, or a matplotlib failure of
    any kind come back as `Chart(png=None, missing=<why>)`.
    """
    try:
        layout = chart_layout(estimate)
        if isinstance(layout, str):
            return Chart(None, layout)
        if not matplotlib_installed():
            return Chart(None, NO_MATPLOTLIB)
        return Chart(_draw(layout, fold(estimate.get("unit")), title))
    except Exception as exc:  # noqa: BLE001 -- matplotlib's limits (huge spans, tick overflow, a user's rc): never the brief's
        return Chart(None, f"matplotlib could not draw it: {type(exc).__name__}: {exc}"[:500])


def write_chart(outdir: Path, estimate: Mapping[str, Any], title: str) -> dict[str, Any]:
    """Write outdir/chart.png when it can be drawn, and return report.json's `chart` note:

    `file` chart.svg (written with the reports, charts.report_charts) or None, `missing` why
    the estimate has no chart at all (its numbers cannot be plotted), `png` chart.png or None,
    `png_missing` why chart.png alone is missing (no matplotlib, or matplotlib failed).

    Raises WriteFailed only when the outbox refuses the file (as for every outbox file).
    """
    layout = chart_layout(estimate)
    if isinstance(layout, str):
        return {"file": None, "missing": layout, "png": None, "png_missing": None}
    chart = render_chart(estimate, title)
    if chart.png is not None:
        atomic_write_bytes(Path(outdir) / PNG_FILE, chart.png)
    return {"file": CHART_FILE, "missing": None, "png": PNG_FILE if chart.png is not None else None,
            "png_missing": None if chart.png is not None else (chart.missing or "chart.png could not be drawn")}
