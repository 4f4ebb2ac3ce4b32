"""chart.png for estimate briefs: the band narrowing round by round against tokens spent.

matplotlib with the Agg backend (no display, safe under systemd or cron). The file is
written atomically like every other outbox file.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Mapping

from .files import atomic_write_bytes


def render_chart(estimate: Mapping[str, Any], title: str) -> bytes:
    """A PNG: one bar per round from low to high at the tokens spent so far, the target band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    history = list(estimate.get("history") or [])
    initial = estimate.get("initial") or {}
    target = estimate.get("target") or {}
    unit = str(estimate.get("unit") or "")
    points = [{"round": 0, "low": initial.get("low"), "high": initial.get("high"), "tokens": 0}] + history
    xs = [p.get("tokens") or 0 for p in points]
    lows = [p["low"] for p in points]
    highs = [p["high"] for p in points]
    # steps-post draws each band until the next round's tokens: give the last band some width
    xs.append(xs[-1] + max(1.0, 0.08 * xs[-1]))
    lows.append(lows[-1])
    highs.append(highs[-1])
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        ax.fill_between(xs, lows, highs, step="post", alpha=0.25, color="tab:blue", label="estimate band")
        ax.plot(xs, lows, drawstyle="steps-post", color="tab:blue")
        ax.plot(xs, highs, drawstyle="steps-post", color="tab:blue")
        for p in points:
            ax.annotate(f"r{p['round']}", (p.get("tokens") or 0, p["high"]), textcoords="offset points",
                        xytext=(2, 4), fontsize=8)
        if target.get("low") is not None and target.get("high") is not None:
            ax.axhspan(target["low"], target["high"], color="tab:green", alpha=0.15, label="target band")
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


def write_chart(outdir: Path, estimate: Mapping[str, Any], title: str) -> Path:
    path = Path(outdir) / "chart.png"
    atomic_write_bytes(path, render_chart(estimate, title))
    return path
