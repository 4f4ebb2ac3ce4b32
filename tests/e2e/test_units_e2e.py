"""A percent estimate whose every figure is in dollars, end to end through the lab (issue 9, finding 3).

The scripted model is an honest reader that only reads money: asked for the Northgate overrun in
percent, it proposes the dollar amounts its quotes state ("$431 million", "US$0.43bn"). Each is
discarded, and the report must say so truly: the stop reason, one sentence, and the count of
discarded figures with their reasons ("in another unit", never "not in its quote", since every
quote does state its figure).
"""

from __future__ import annotations

import re

import pytest

from briefd.daemon.rules import figures, judge, stated
from tests.conftest import Workspace, researched
from lab.corpus import TOPICS

PERCENT = {
    "question": TOPICS["northgate"].question + " As a percent of the approved budget?", "depth": "standard",
    "formats": ["json", "md", "html"],
    "estimate": {"unit": "percent", "low": 0, "high": 100, "target_low": 20, "target_high": 30},
}


@pytest.fixture(scope="module")
def percent_run(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    return researched(tmp_path_factory.mktemp("units"), search_lab, scripted_ollama, {"overrun-percent": PERCENT})


def test_a_percent_estimate_with_only_dollar_figures_says_so(percent_run: Workspace) -> None:
    report = percent_run.report("overrun-percent")
    estimate = report["estimate"]
    skipped = [e for e in percent_run.events("overrun-percent")
               if e["type"] == "evidence_skipped" and e["reason"].startswith("number ")]
    assert skipped, "the lab's reader proposed dollar figures for a percent brief"

    # every figure is discarded for its true reason: the quote states it, in dollars
    reasons = estimate["discarded_reasons"]
    assert sum(reasons.values()) == estimate["numbers_discarded"] == len(skipped)
    # which pages a round reads can differ on a busy machine (a page past the fetch timeout is
    # skipped), and with them the figures: every one is still in another unit, most in dollars
    assert f"{stated.OTHER_UNIT} (USD)" in reasons, reasons
    assert all(reason.startswith(f"{stated.OTHER_UNIT} (") for reason in reasons), reasons
    assert all(e["reason"].removeprefix("number ") in reasons for e in skipped)
    assert all(e["written"] and e["written"] in e["quote"] for e in skipped), "the event shows what was written"

    # the stop reason and a sentence say what happened, not "converged"
    assert report["stop_reason"] == figures.NO_USABLE_FIGURES
    assert estimate["final"] == {"low": 0, "high": 100}
    assert estimate["note"] == figures.no_usable_figures(0, reasons, "percent")
    count = len(skipped)
    assert f"{count} figure{'s' if count != 1 else ''} discarded: {count} in another unit (USD)" in estimate["note"]

    # and report.md shows them, in the estimate block
    md = (percent_run.outbox / "overrun-percent" / "report.md").read_text(encoding="utf-8")
    block = md.split("## Estimate", 1)[1].split("\n## ", 1)[0]
    assert "**Stopped:** no\\_usable\\_figures" in md or "**Stopped:** no_usable_figures" in md
    assert "No usable figure in percent" in block
    assert "**Discarded figures**" in block
    assert f"| in another unit (USD) | {count} |" in block and f"| Total | {count} |" in block
    assert "not in its quote" not in md
    html = (percent_run.outbox / "overrun-percent" / "report.html").read_text(encoding="utf-8")
    packed = re.sub(r">\s+<", "><", html)  # report.html is markdown-it's rendering: a newline between cells
    assert "No usable figure in percent" in html and f"<td>in another unit (USD)</td><td>{count}</td>" in packed
