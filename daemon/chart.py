"""chart.png for estimate briefs: the range narrowing round by round, against the target band.

matplotlib with the Agg backend (no display, safe under systemd or cron). The file is
written atomically like every other outbox file.

The chart is an illustration of numbers report.json already holds, so drawing it is
total: any estimate gives either a PNG or the reason there is none (`Chart.missing`),
never an exception. Evidence can move a range anywhere a page's numbers reach (a band
from -1e308 to 1e308 makes matplotlib's tick locator fail with "arange: cannot compute
length"), and a chart that cannot be drawn must not fail a brief whose report is fine.
Writing the file is another matter: a full or read-only outbox raises WriteFailed, as it
does for every outbox file, so the brief waits for the disk instead of losing the chart.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import atomic_write_bytes

CHART_FILE = "chart.png"


@dataclass(frozen=True)
class Chart:
    """A drawn chart (`png`) or why none could be drawn (`missing`): exactly one is set."""

    png: bytes | None
    missing: str | None = None


@dataclass(frozen=True)
class ChartLayout:
    """What the chart shows, decided before matplotlib draws it (pure, so tests read it).

    x is the round (0 is the brief's initial range): a cached re-run spends no tokens, and a
    chart over tokens would stack every round on one spot. The tokens spent by each round
    are in its tick label.
    """

    xs: list[float]
    lows: list[float]
    highs: list[float]
    tick_labels: list[str]
    band: tuple[float, float] | None  # the target band, drawn shaded
    band_label: str
    final_label: str  # the annotation at the last round: the final range and its unit


def _fmt(value: float) -> str:
    return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:.3g}"


def chart_layout(estimate: Mapping[str, Any]) -> ChartLayout | str:
    """The layout to draw, or why it cannot be drawn (missing, not numbers, not finite, too far apart).

    The target band: target_low..target_high when the brief gave them; for a brief that
    gave `target_width` only, a band of that width centred on the final range's midpoint
    (where the range would have to end to meet the target)."""
    history = list(estimate.get("history") or [])
    initial = estimate.get("initial") or {}
    target = estimate.get("target") or {}
    unit = str(estimate.get("unit") or "")
    points = [{"round": 0, "low": initial.get("low"), "high": initial.get("high"), "tokens": 0}, *history]
    xs, lows, highs, labels = [], [], [], []
    for i, p in enumerate(points):
        values = (p.get("tokens") or 0, p.get("low"), p.get("high"))
        if not all(_finite_number(v) for v in values):
            return f"round {p.get('round')} has no finite low, high and tokens to plot"
        round_no = p.get("round") if _finite_number(p.get("round")) else i
        xs.append(float(round_no))
        lows.append(float(values[1]))
        highs.append(float(values[2]))
        labels.append("start" if i == 0 else f"r{round_no}\n{int(values[0]):,} tok")
    band: tuple[float, float] | None = None
    band_label = ""
    if _finite_number(target.get("low")) and _finite_number(target.get("high")):
        band = (float(target["low"]), float(target["high"]))
        band_label = f"target {_fmt(band[0])}\u2013{_fmt(band[1])}"
    elif _finite_number(target.get("width")):
        width, middle = float(target["width"]), (lows[-1] + highs[-1]) / 2
        band = (middle - width / 2, middle + width / 2)
        band_label = f"target width \u2264 {_fmt(width)} (centred on the final range)"
    ys = lows + highs + list(band or ())
    if not math.isfinite(max(ys) - min(ys)):
        return (f"the values run from {min(ys):g} to {max(ys):g}, a span too large to plot "
                f"(report.json has the numbers)")
    final = f"final {_fmt(lows[-1])}\u2013{_fmt(highs[-1])} {unit}".rstrip()
    return ChartLayout(xs, lows, highs, labels, band, band_label, final)


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
            ax.axhspan(*layout.band, color="tab:green", alpha=0.15, label=layout.band_label)
        ax.fill_between(xs, lows, highs, step="post", alpha=0.25, color="tab:blue", label="estimate range")
        ax.plot(xs, lows, drawstyle="steps-post", color="tab:blue")
        ax.plot(xs, highs, drawstyle="steps-post", color="tab:blue")
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
    annotated, the target band shaded (see chart_layout).

    Never raises: numbers that cannot be plotted, or a matplotlib failure of any kind,
    come back as `Chart(png=None, missing=<why>)`.
    """
    try:
        layout = chart_layout(estimate)
        if isinstance(layout, str):
            return Chart(None, layout)
        return Chart(_draw(layout, str(estimate.get("unit") or ""), title))
    except Exception as exc:  # noqa: BLE001 -- matplotlib's limits (huge spans, tick overflow, a user's rc): never the brief's
        return Chart(None, f"matplotlib could not draw it: {type(exc).__name__}: {exc}"[:500])


def write_chart(outdir: Path, estimate: Mapping[str, Any], title: str) -> str | None:
    """Draw and write outdir/chart.png; None when written, else why the chart is missing.

    Raises WriteFailed only when the outbox refuses the file (as for every outbox file).
    """
    chart = render_chart(estimate, title)
    if chart.png is None:
        return chart.missing or "the chart could not be drawn"
    atomic_write_bytes(Path(outdir) / CHART_FILE, chart.png)
    return None
