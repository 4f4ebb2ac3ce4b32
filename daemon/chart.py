"""chart.png for estimate briefs: the band narrowing round by round against tokens spent.

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
class _Series:
    xs: list[float]
    lows: list[float]
    highs: list[float]
    rounds: list[Any]
    target: tuple[float, float] | None


def _series(estimate: Mapping[str, Any]) -> _Series | str:
    """The numbers to plot, or why they cannot be plotted (missing, not numbers, not finite, too far apart)."""
    history = list(estimate.get("history") or [])
    initial = estimate.get("initial") or {}
    target = estimate.get("target") or {}
    points = [{"round": 0, "low": initial.get("low"), "high": initial.get("high"), "tokens": 0}, *history]
    xs, lows, highs, rounds = [], [], [], []
    for p in points:
        values = (p.get("tokens") or 0, p.get("low"), p.get("high"))
        if not all(_finite_number(v) for v in values):
            return f"round {p.get('round')} has no finite low, high and tokens to plot"
        xs.append(float(values[0]))
        lows.append(float(values[1]))
        highs.append(float(values[2]))
        rounds.append(p.get("round"))
    band: tuple[float, float] | None = None
    if _finite_number(target.get("low")) and _finite_number(target.get("high")):
        band = (float(target["low"]), float(target["high"]))
    ys = lows + highs + list(band or ())
    if not math.isfinite(max(ys) - min(ys)):
        return (f"the values run from {min(ys):g} to {max(ys):g}, a span too large to plot "
                f"(report.json has the numbers)")
    # steps-post draws each band until the next round's tokens: give the last band some width
    xs.append(xs[-1] + max(1.0, 0.08 * xs[-1]))
    lows.append(lows[-1])
    highs.append(highs[-1])
    return _Series(xs, lows, highs, rounds, band)


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _draw(series: _Series, unit: str, title: str) -> bytes:
    with warnings.catch_warnings():  # numpy overflow warnings on spans near 1e308: the failure says it once
        warnings.simplefilter("ignore", RuntimeWarning)
        return _draw_figure(series, unit, title)


def _draw_figure(series: _Series, unit: str, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        ax.fill_between(series.xs, series.lows, series.highs, step="post", alpha=0.25, color="tab:blue",
                        label="estimate band")
        ax.plot(series.xs, series.lows, drawstyle="steps-post", color="tab:blue")
        ax.plot(series.xs, series.highs, drawstyle="steps-post", color="tab:blue")
        for x, high, round_no in zip(series.xs, series.highs, series.rounds):
            ax.annotate(f"r{round_no}", (x, high), textcoords="offset points", xytext=(2, 4), fontsize=8)
        if series.target is not None:
            ax.axhspan(*series.target, color="tab:green", alpha=0.15, label="target band")
        ax.set_xlabel("tokens spent")
        ax.set_ylabel(unit or "value")
        ax.set_title(title[:90], fontsize=10)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(True, alpha=0.3)
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def render_chart(estimate: Mapping[str, Any], title: str) -> Chart:
    """A PNG: one bar per round from low to high at the tokens spent so far, the target band shaded.

    Never raises: numbers that cannot be plotted, or a matplotlib failure of any kind,
    come back as `Chart(png=None, missing=<why>)`.
    """
    try:
        series = _series(estimate)
        if isinstance(series, str):
            return Chart(None, series)
        return Chart(_draw(series, str(estimate.get("unit") or ""), title))
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
