"""A report's charts as SVG that briefd writes itself: the estimate band and seed 5's evidence charts.

Every chart is a function of report.json alone (`report_charts`), so the files in the outbox,
the figures inlined in report.html and what a web page serves for the same report cannot
disagree. The SVG is plain text made with the standard library: no script, no link, no font
or image to fetch, no element id (several charts share one HTML page), and a fixed viewBox so
it scales to its container. Every string in it that briefd did not choose (the question, the
unit, host names, tier labels read back from a report) goes through `untrusted.xml_escape`,
and every coordinate is a finite number formatted by one function, so a hostile or damaged
report can neither break the XML nor add markup to it.

Drawing is total: a report of any shape gives its charts, or for the band the reason there is
none (numbers too far apart to plot, which `chart_layout` says); never a NaN coordinate, never
a division by zero.

The charts:
- chart.svg (estimate briefs): the range round by round (tokens spent under each round), the
  final range annotated, the target band shaded.
- evidence-sources.svg: evidence items per source host, each bar split by the source's tier.
- evidence-relevance.svg: how the evidence items spread over relevance to the question (the
  measure briefd orders evidence by for the summary, decide.relevance) and over confidence
  (capped by the source's tier), split by tier. report.json keeps no relevance score per item:
  it is computed here from each item's quote and the report's question, as briefd computes it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..rules.decide import relevance
from ..rules.judge import CREDIBLE, TIERS, normalize_tier
from ..rules.numbers import finite, is_finite, number_text, span_text
from ..core.untrusted import as_dict, as_list, fold, xml_escape

CHART_FILE = "chart.svg"  # the estimate band
SOURCES_FILE = "evidence-sources.svg"
RELEVANCE_FILE = "evidence-relevance.svg"
CHART_NAMES: tuple[str, ...] = (CHART_FILE, SOURCES_FILE, RELEVANCE_FILE)
CHART_ALT = "The estimate's range round by round, with the target band"
SOURCES_ALT = "Evidence items per source, by the source's tier"
RELEVANCE_ALT = "Evidence items by relevance to the question and by confidence, by tier"

UNRATED = "unrated"  # an evidence item without a tier (a stored report's, or a plain question's)
TIER_COLOURS: dict[str, str] = {
    "regulator": "#1b7a43", "peer_reviewed": "#2f7fb8", "industry": "#7a5aa6", "news": "#d98a1f",
    "social": "#c2453d", UNRATED: "#8c8c8c",
}
MAX_SOURCE_ROWS = 15  # hosts beyond these are summed into one "N more hosts" row
BINS = 10  # the relevance and confidence histograms: 0-0.1, ..., 0.9-1.0

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"  # local fonts only: nothing is fetched
INK, MUTED, GRID = "#222222", "#555555", "#e3e3e3"
RANGE_COLOUR, TARGET_COLOUR = "#1f6fb4", "#2e8b3a"


# ---------------------------------------------------------------------------- numbers


def tick_label(value: float, step: float) -> str:
    """An axis tick: as many decimals as the step between ticks needs (so neighbouring ticks
    never read the same), in exponent form for numbers from a million up and below 0.001, or
    where it would take more than 10 decimals."""
    if value == 0:
        return "0"
    if not step > 0:
        return number_text(value)
    decimals = max(0, -math.floor(math.log10(step)))
    if 1e-3 <= abs(value) < 1e6 and decimals <= 10:
        return f"{value:,.{decimals}f}"
    digits = min(17, max(1, math.floor(math.log10(abs(value))) - math.floor(math.log10(step)) + 1))
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", f"{value:.{digits - 1}e}").replace("e0", "")


def nice_ticks(low: float, high: float, count: int = 5) -> tuple[list[float], float]:
    """About `count` round ticks (1, 2 or 5 times a power of ten apart) inside low..high, and
    their step; the two ends, a step apart, when no round step exists (a span of denormals, or
    one below the numbers' precision)."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [low], 0.0
    raw = span / count
    try:
        magnitude = 10.0 ** math.floor(math.log10(raw))
    except (OverflowError, ValueError):
        return [low, high], span
    if not (magnitude > 0 and math.isfinite(magnitude)):
        return [low, high], span
    ratio = raw / magnitude  # 1 <= ratio < 10: the nearest of 1, 2, 5 and 10 gives about `count` ticks
    step = magnitude * (1.0 if ratio < 1.5 else 2.0 if ratio < 3.5 else 5.0 if ratio < 7.5 else 10.0)
    first = math.ceil(low / step)
    ticks = [(first + i) * step for i in range(count * 3)]
    ticks = [t for t in ticks if low - step * 1e-9 <= t <= high + step * 1e-9 and math.isfinite(t)]
    if len({tick_label(t, step) for t in ticks}) < max(2, len(ticks)):  # steps below the numbers' precision
        return [low, high], span
    return ticks, step


def padded_domain(values: Sequence[float]) -> tuple[float, float]:
    """The axis range for `values`: their span with a margin each side, a span around a single
    value, and no margin where adding one would leave the finite floats. Never empty."""
    low, high = min(values), max(values)
    span = high - low
    margin = span * 0.08 if span > 0 else (abs(low) * 0.1 or 1.0)
    padded = (low - margin, high + margin)
    if math.isfinite(padded[1] - padded[0]) and padded[1] > padded[0]:
        return padded
    if high > low:
        return low, high
    margin = abs(low) * 0.1 or 1.0  # a single value at the float limit: the margin on the side that fits
    return (low - margin, low) if low > 0 else (low, low + margin)


class Scale:
    """A linear map from a domain onto pixels; the domain is never empty and the result is clamped."""

    def __init__(self, domain: tuple[float, float], pixels: tuple[float, float]) -> None:
        self.low, self.high = domain
        self.start, self.end = pixels

    def __call__(self, value: float) -> float:
        span = self.high - self.low
        share = (value - self.low) / span if span > 0 else 0.5
        share = min(1.05, max(-0.05, share)) if math.isfinite(share) else 0.0
        return self.start + share * (self.end - self.start)


# ---------------------------------------------------------------------------- SVG pieces


def _n(value: float) -> str:
    """A coordinate: one decimal, never NaN or infinite (a bug upstream draws at 0, not a broken file)."""
    return f"{value:.1f}".rstrip("0").rstrip(".") if math.isfinite(value) else "0"


def _attrs(attrs: Mapping[str, Any]) -> str:
    parts = []
    for key, value in attrs.items():
        text = _n(value) if isinstance(value, float) else str(value)
        parts.append(f' {key.rstrip("_").replace("_", "-")}="{xml_escape(text)}"')
    return "".join(parts)


def rect(x: float, y: float, width: float, height: float, **attrs: Any) -> str:
    return f"<rect{_attrs({'x': x, 'y': y, 'width': max(0.0, width), 'height': max(0.0, height), **attrs})}/>"


def line(x1: float, y1: float, x2: float, y2: float, **attrs: Any) -> str:
    return f"<line{_attrs({'x1': x1, 'y1': y1, 'x2': x2, 'y2': y2, **attrs})}/>"


def text(x: float, y: float, content: Any, **attrs: Any) -> str:
    """A text element; `content` is escaped (it may be a page's or the user's words)."""
    return f"<text{_attrs({'x': x, 'y': y, **attrs})}>{xml_escape(content)}</text>"


def shorten(value: Any, limit: int) -> str:
    """Untrusted text on one line, cut at `limit` characters with an ellipsis."""
    folded = fold(value)
    return folded if len(folded) <= limit else folded[:limit - 1].rstrip() + "\u2026"


def document(width: int, height: int, label: str, body: list[str]) -> str:
    """A standalone SVG document (and an element HTML can inline as it is): its label as the
    accessible name (aria-label: a <title> would add to the page's title in report.html), a
    white background, the system's sans-serif font."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{xml_escape(label)}" font-family="{FONT}" '
            f'font-size="12" fill="{INK}">')
    return "\n".join([head, rect(0, 0, width, height, fill="#ffffff"), *body, "</svg>"]) + "\n"


def legend(x: float, y: float, entries: Sequence[tuple[str, str]], max_x: float,
           opacity: str = "1") -> tuple[list[str], float]:
    """Colour swatches (as opaque as what they stand for) with their labels, left to right,
    wrapping at max_x; the elements and the y of the last row."""
    out: list[str] = []
    cx, cy = x, y
    for colour, label in entries:
        width = 20 + 6.5 * len(label)
        if cx > x and cx + width > max_x:
            cx, cy = x, cy + 18
        out += [rect(cx, cy - 10, 12, 12, fill=colour, fill_opacity=opacity), text(cx + 17, cy, label)]
        cx += width + 14
    return out, cy


def y_axis(scale: Scale, ticks: list[float], step: float, x0: float, x1: float) -> list[str]:
    """Horizontal grid lines with their labels right-aligned left of the plot."""
    out = []
    for tick in ticks:
        y = scale(tick)
        out += [line(x0, y, x1, y, stroke=GRID), text(x0 - 6, y + 4, tick_label(tick, step),
                                                      text_anchor="end", fill=MUTED, font_size="11")]
    return out


# ---------------------------------------------------------------------------- the estimate band


@dataclass(frozen=True)
class ChartLayout:
    """What the band chart shows, decided before anything draws it (pure, so tests read it).

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


def chart_layout(estimate: Mapping[str, Any]) -> ChartLayout | str:
    """The layout to draw, or why it cannot be drawn (missing, not numbers, not finite, too far apart).

    The target band: target_low..target_high when the brief gave them; for a brief that
    gave `target_width` only, a band of that width centred on the final range's midpoint
    (where the range would have to end to meet the target)."""
    history = [as_dict(step) for step in as_list(estimate.get("history"))]
    initial = as_dict(estimate.get("initial"))
    target = as_dict(estimate.get("target"))
    unit = fold(estimate.get("unit"))
    points = [{"round": 0, "low": initial.get("low"), "high": initial.get("high"), "tokens": 0}, *history]
    xs, lows, highs, labels = [], [], [], []
    for i, p in enumerate(points):
        tokens, low, high = finite(p.get("tokens") or 0), finite(p.get("low")), finite(p.get("high"))
        if tokens is None or low is None or high is None:
            shown = i if p.get("round") is None else p.get("round")
            return f"round {fold(shown)} has no finite low, high and tokens to plot"
        round_no = finite(p.get("round"))
        xs.append(float(i) if round_no is None else round_no)
        lows.append(low)
        highs.append(high)
        labels.append("start" if i == 0 else f"r{number_text(xs[-1])}\n{int(tokens):,} tok")
    band: tuple[float, float] | None = None
    band_label = ""
    if is_finite(target.get("low")) and is_finite(target.get("high")):
        band = (float(target["low"]), float(target["high"]))
        band_label = f"target {span_text(*band)}"
    elif is_finite(target.get("width")):
        width, middle = float(target["width"]), lows[-1] / 2 + highs[-1] / 2
        band = (middle - width / 2, middle + width / 2)
        band_label = f"target width \u2264 {number_text(width)} (centred on the final range)"
    ys = lows + highs + list(band or ())
    if not math.isfinite(max(ys) - min(ys)):
        return (f"the values run from {number_text(min(ys))} to {number_text(max(ys))}, a span too large to plot "
                f"(report.json has the numbers)")
    final = f"final {span_text(lows[-1], highs[-1])} {unit}".rstrip()
    return ChartLayout(xs, lows, highs, labels, band, band_label, final)


BAND_SIZE = (760, 400)
BAND_PLOT = (104.0, 736.0, 70.0, 330.0)  # left, right, top, bottom of the plotting area
MAX_ROUND_LABELS = 14  # more rounds than this: every k-th round is labelled


def band_svg(layout: ChartLayout, unit: str, title: str) -> str:
    """The band chart: each round's range as a shaded step from its round to the next (the
    last one half a round wide), the target band across the plot, the final range annotated.

    Rounds are placed one step apart in report order (their numbers are in the labels), so a
    report whose round numbers repeat or jump still draws one step per row of history."""
    width, height = BAND_SIZE
    x0, x1, y0, y1 = BAND_PLOT
    n = len(layout.lows)
    xscale = Scale((-0.1, n - 0.5 + 0.6), (x0, x1))
    ys = layout.lows + layout.highs + list(layout.band or ())
    yscale = Scale(padded_domain(ys), (y1, y0))
    ticks, step = nice_ticks(yscale.low, yscale.high)
    body = [text(16, 26, shorten(title, 100) or "Estimate", font_size="15", font_weight="bold")]
    entries = [(RANGE_COLOUR, "estimate range")]
    if layout.band is not None:
        entries.append((TARGET_COLOUR, layout.band_label))
    legend_items, _ = legend(16, 50, entries, width - 16, opacity="0.45")
    body += legend_items
    body += y_axis(yscale, ticks, step, x0, x1)
    if layout.band is not None:
        top, bottom = yscale(max(layout.band)), yscale(min(layout.band))
        body.append(rect(x0, top - (1 if bottom - top < 2 else 0), x1 - x0, max(2.0, bottom - top),
                         fill=TARGET_COLOUR, fill_opacity="0.16", class_="target"))
    edges_high, edges_low = [], []
    label_every = math.ceil(n / MAX_ROUND_LABELS)
    for i in range(n):
        left, right = xscale(i), xscale(i + 1 if i + 1 < n else i + 0.5)
        top, bottom = yscale(layout.highs[i]), yscale(layout.lows[i])
        top, bottom = min(top, bottom), max(top, bottom)
        if bottom - top < 2:  # a point value (low == high) still shows as a line
            top, bottom = (top + bottom) / 2 - 1, (top + bottom) / 2 + 1
        body.append(rect(left, top, right - left, bottom - top, fill=RANGE_COLOUR, fill_opacity="0.25",
                         class_="round"))
        start = f"M{_n(left)} " if i == 0 else "V"  # the first step starts the path, the others go on from it
        edges_high.append(f"{start}{_n(top)} H{_n(right)}")
        edges_low.append(f"{start}{_n(bottom)} H{_n(right)}")
        if i % label_every == 0 or i == n - 1:
            middle = (left + right) / 2
            first, _, second = layout.tick_labels[i].partition("\n")
            body.append(text(middle, y1 + 16, first, text_anchor="middle", fill=MUTED, font_size="11"))
            if second:
                body.append(text(middle, y1 + 30, second, text_anchor="middle", fill=MUTED, font_size="10"))
    for edges in (edges_high, edges_low):
        body.append(f'<path d="{" ".join(edges)}" fill="none" stroke="{RANGE_COLOUR}" stroke-width="1.6"/>')
    body += [line(x0, y1, x1, y1, stroke=MUTED), line(x0, y0, x0, y1, stroke=MUTED)]
    top, bottom = yscale(max(layout.highs[-1], layout.lows[-1])), yscale(min(layout.highs[-1], layout.lows[-1]))
    label_y = top - 8 if top - 8 > y0 + 12 else bottom + 18
    # right-aligned at the plot's edge, past the last step, with a white halo over the lines it crosses
    body.append(text(x1 - 4, label_y, shorten(layout.final_label, 70), text_anchor="end", font_weight="bold",
                     class_="final", stroke="#ffffff", stroke_width="4", paint_order="stroke",
                     stroke_linejoin="round"))
    body.append(text((x0 + x1) / 2, height - 14, "round (tokens spent so far)", text_anchor="middle", fill=MUTED))
    axis = shorten(unit, 40) or "value"
    body.append(text(18, (y0 + y1) / 2, axis, text_anchor="middle", fill=MUTED,
                     transform=f"rotate(-90 18 {_n((y0 + y1) / 2)})"))
    return document(width, height, f"{CHART_ALT}: {layout.final_label}", body)


def band_missing(report: Mapping[str, Any]) -> str | None:
    """Why an estimate report has no band chart (its numbers cannot be plotted), else None
    (drawn, or no estimate: then there is no band to draw)."""
    estimate = as_dict(report.get("estimate"))
    if not estimate:
        return None
    layout = chart_layout(estimate)
    return layout if isinstance(layout, str) else None


# ---------------------------------------------------------------------------- the evidence


@dataclass(frozen=True)
class EvidencePoint:
    """One evidence item as the evidence charts see it."""

    host: str
    tier: str  # one of TIERS, or UNRATED
    confidence: float | None  # 0..1 (capped by the tier when the report was made), None when absent
    relevance: float  # 0..1: decide.relevance of the quote to the question


def host_of(url: Any) -> str:
    """The host an evidence item came from, without "www."; "(no host)" for a URL without one."""
    try:
        host = urlsplit(fold(url)).hostname or ""
    except ValueError:
        host = ""
    host = host.rstrip(".")
    return (host[4:] if host.startswith("www.") else host) or "(no host)"


def tier_of(value: Any) -> str:
    """An item's tier as briefd ranks it (judge.normalize_tier); UNRATED when it has none."""
    return normalize_tier(value) if isinstance(value, str) and value.strip() else UNRATED


def evidence_points(report: Mapping[str, Any]) -> list[EvidencePoint]:
    """The report's evidence items, read from any shape of report.json (what is not an item is skipped).

    Relevance is computed against the research question and the question, as briefd orders the
    evidence it shows the summary (decide.strongest_first)."""
    topics = [fold(report.get("research_question")) or fold(report.get("question")), fold(report.get("question"))]
    points = []
    for item in _evidence_items(report):
        confidence = finite(item.get("confidence"))
        points.append(EvidencePoint(
            host=host_of(item.get("url")), tier=tier_of(item.get("tier")),
            confidence=None if confidence is None else min(1.0, max(0.0, confidence)),
            relevance=relevance(fold(item.get("quote")), topics)))
    return points


def has_evidence_points(report: Mapping[str, Any]) -> bool:
    """Does the report get the evidence charts (evidence_points is not empty)? Asked without
    computing any quote's relevance, for report.md's image lines (markdown.markdown_doc)."""
    return bool(_evidence_items(report))


def _evidence_items(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's evidence entries that are items (objects); anything else in the list is skipped."""
    return [item for item in as_list(report.get("evidence")) if isinstance(item, Mapping)]


TIER_ORDER: tuple[str, ...] = (*TIERS, UNRATED)


@dataclass(frozen=True)
class SourceRow:
    """One bar of the sources chart: a host (or the hosts past MAX_SOURCE_ROWS) and its items per tier."""

    label: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def source_rows(points: Sequence[EvidencePoint]) -> list[SourceRow]:
    """Hosts by how many items they gave (most first; then by best tier, then name), the ones
    past MAX_SOURCE_ROWS summed into a last row."""
    by_host: dict[str, dict[str, int]] = {}
    for p in points:
        counts = by_host.setdefault(p.host, {})
        counts[p.tier] = counts.get(p.tier, 0) + 1
    rank = {tier: i for i, tier in enumerate(TIER_ORDER)}
    ordered = sorted(by_host.items(), key=lambda hc: (-sum(hc[1].values()), min(rank[t] for t in hc[1]), hc[0]))
    rows = [SourceRow(host, counts) for host, counts in ordered[:MAX_SOURCE_ROWS]]
    rest = ordered[MAX_SOURCE_ROWS:]
    if rest:
        merged: dict[str, int] = {}
        for _, counts in rest:
            for tier, count in counts.items():
                merged[tier] = merged.get(tier, 0) + count
        rows.append(SourceRow(f"{len(rest)} more hosts", merged))
    return rows


def tier_legend(points: Sequence[EvidencePoint]) -> list[tuple[str, str]]:
    """The tiers present, best first, each with its count of items."""
    counts = {tier: sum(1 for p in points if p.tier == tier) for tier in TIER_ORDER}
    return [(TIER_COLOURS[tier], f"{tier.replace('_', ' ')} ({count})") for tier, count in counts.items() if count]


def _no_evidence(width: int, title: str, label: str) -> str:
    return document(width, 90, label, [text(16, 26, title, font_size="15", font_weight="bold"),
                                       text(16, 60, "No evidence was kept.", fill=MUTED)])


SOURCES_WIDTH = 760


def sources_svg(points: Sequence[EvidencePoint]) -> str:
    """Horizontal bars, one per source host, its length the number of evidence items from it,
    split by tier (best tier leftmost); the count at the bar's end; the tiers' totals below."""
    title = "Evidence by source and tier"
    if not points:
        return _no_evidence(SOURCES_WIDTH, title, SOURCES_ALT)
    rows = source_rows(points)
    hosts = len({p.host for p in points})
    label_right, x0, x1, top, row_h = 236.0, 246.0, 700.0, 78.0, 22.0
    bottom = top + row_h * len(rows)
    most = max(row.total for row in rows)
    ticks, step = nice_ticks(0, most, min(5, most))
    ticks = [t for t in ticks if t == int(t)]
    xscale = Scale((0.0, float(most)), (x0, x1))
    body = [text(16, 26, title, font_size="15", font_weight="bold"),
            text(16, 46, f"{len(points)} evidence item{'s' if len(points) != 1 else ''} from {hosts} "
                         f"host{'s' if hosts != 1 else ''}", fill=MUTED)]
    for tick in ticks:
        x = xscale(tick)
        body += [line(x, top - 6, x, bottom, stroke=GRID),
                 text(x, top - 10, tick_label(tick, max(step, 1.0)), text_anchor="middle", fill=MUTED,
                      font_size="11")]
    for r, row in enumerate(rows):
        y = top + r * row_h
        body.append(text(label_right, y + 15, shorten(row.label, 36), text_anchor="end"))
        start = 0
        for tier in TIER_ORDER:
            count = row.counts.get(tier, 0)
            if count:
                body.append(rect(xscale(start), y + 4, xscale(start + count) - xscale(start), row_h - 8,
                                 fill=TIER_COLOURS[tier], class_="bar", data_tier=tier))
                start += count
        body.append(text(xscale(row.total) + 6, y + 15, str(row.total), fill=MUTED, font_size="11"))
    body.append(line(x0, top - 6, x0, bottom, stroke=MUTED))
    items, last_y = legend(16, bottom + 30, tier_legend(points), SOURCES_WIDTH - 16)
    body += items
    return document(SOURCES_WIDTH, int(last_y + 20), f"{SOURCES_ALT}: {len(points)} items, {hosts} hosts", body)


def histogram(values: Sequence[tuple[float, str]]) -> list[dict[str, int]]:
    """Items per bin of width 1/BINS over 0..1 (1.0 in the last bin), counted per tier."""
    bins: list[dict[str, int]] = [{} for _ in range(BINS)]
    for value, tier in values:
        counts = bins[min(BINS - 1, max(0, int(value * BINS)))]
        counts[tier] = counts.get(tier, 0) + 1
    return bins


RELEVANCE_SIZE = (760, 330)


def _histogram_panel(x0: float, x1: float, y0: float, y1: float, title: str, values: Sequence[tuple[float, str]],
                     most: int, mark: float | None) -> list[str]:
    """One histogram: stacked bars per bin (coloured by tier), its mean, and an optional dashed
    mark (the credible threshold on the confidence panel)."""
    bins = histogram(values)
    yscale = Scale((0.0, float(max(1, most))), (y1, y0))
    xscale = Scale((0.0, 1.0), (x0, x1))
    ticks, step = nice_ticks(0, max(1, most), min(4, max(1, most)))
    ticks = [t for t in ticks if t == int(t)]
    mean = sum(v for v, _ in values) / len(values) if values else None
    out = [text(x0, y0 - 26, title, font_weight="bold"),
           text(x0, y0 - 10, f"mean {mean:.2f}" if mean is not None else "no values", fill=MUTED, font_size="11")]
    out += y_axis(yscale, ticks, max(step, 1.0), x0, x1)
    for b, counts in enumerate(bins):
        left, right = xscale(b / BINS) + 2, xscale((b + 1) / BINS) - 2
        start = 0
        for tier in TIER_ORDER:
            count = counts.get(tier, 0)
            if count:
                out.append(rect(left, yscale(start + count), right - left, yscale(start) - yscale(start + count),
                                fill=TIER_COLOURS[tier], class_="bar", data_tier=tier))
                start += count
    for tick in (0.0, 0.5, 1.0):
        out.append(text(xscale(tick), y1 + 16, f"{tick:.1f}", text_anchor="middle", fill=MUTED, font_size="11"))
    out.append(line(x0, y1, x1, y1, stroke=MUTED))
    if mark is not None:
        x = xscale(mark)
        out += [line(x, y0, x, y1, stroke=INK, stroke_dasharray="4 3"),
                text(x + 4, y0 + 10, f"credible \u2265 {number_text(mark)}", font_size="11")]
    return out


def relevance_svg(points: Sequence[EvidencePoint]) -> str:
    """Two histograms side by side: the items' relevance to the question, and their confidence
    (capped by the source's tier; the credible threshold marked: items under it decide nothing)."""
    title = "Evidence relevance and confidence"
    width, height = RELEVANCE_SIZE
    if not points:
        return _no_evidence(width, title, RELEVANCE_ALT)
    relevances = [(p.relevance, p.tier) for p in points]
    confidences = [(p.confidence, p.tier) for p in points if p.confidence is not None]
    most = max(max(sum(c.values()) for c in histogram(relevances)),
               max((sum(c.values()) for c in histogram(confidences)), default=0))
    y0, y1 = 96.0, 250.0
    body = [text(16, 26, title, font_size="15", font_weight="bold"),
            text(16, 46, "relevance: the share of the question's words a quote contains (how briefd ranks "
                         "evidence for the summary)", fill=MUTED, font_size="11")]
    body += _histogram_panel(56, 356, y0, y1, "Relevance to the question", relevances, most, None)
    body += _histogram_panel(436, 736, y0, y1, "Confidence (capped by the source's tier)", confidences, most,
                             CREDIBLE)
    without = len(points) - len(confidences)
    if without:
        body.append(text(436, y1 + 34, f"{without} item{'s' if without != 1 else ''} without a confidence",
                         fill=MUTED, font_size="11"))
    items, _ = legend(16, height - 20, tier_legend(points), width - 16)
    body += items
    return document(width, height, f"{RELEVANCE_ALT}: {len(points)} items", body)


# ---------------------------------------------------------------------------- a report's charts


def report_charts(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every chart of a report as (file name, SVG text): the band for an estimate whose numbers
    can be plotted, the two evidence charts when there is evidence. What the worker writes into
    the outbox, what report.html inlines, and what a web page can serve."""
    charts: list[tuple[str, str]] = []
    estimate = as_dict(report.get("estimate"))
    if estimate:
        layout = chart_layout(estimate)
        if isinstance(layout, ChartLayout):
            charts.append((CHART_FILE, band_svg(layout, fold(estimate.get("unit")), fold(report.get("question")))))
    points = evidence_points(report)
    if points:
        charts += [(SOURCES_FILE, sources_svg(points)), (RELEVANCE_FILE, relevance_svg(points))]
    return charts
