"""Estimates narrowed and verdicts computed by rules, end to end through the lab (scripted model).

The scripted model is a dumb but honest reader: it reads the first money amount of a sentence
in the brief's unit, labels the source's tier from its title and address, and a stance from
contrary words. The corpus has agreeing, disagreeing, lying and injecting pages; the rules
(daemon/rules/judge.py), not the model, must land on the consensus.
"""

from __future__ import annotations

import json
import struct

import pytest

from briefd.daemon.report.charts import CHART_FILE, report_charts
from tests.conftest import Workspace, researched
from lab.corpus import TOPICS

NORTHGATE = {
    "question": TOPICS["northgate"].question, "depth": "standard",
    "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_low": 400, "target_high": 460},
}
CLAIMS = {
    "claim-corrosion": ("Why was the Kestrel River bridge closed in 2025?",
                        "Corrosion in the cable anchorages closed the Kestrel River bridge"),
    "claim-barge": ("Was the Kestrel River bridge closed by a barge strike?",
                    "A barge strike closed the Kestrel River bridge"),
    "claim-lakeside": (TOPICS["lakeside"].question, TOPICS["lakeside"].claim),
}


@pytest.fixture(scope="module")
def decided(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    claims = {brief_id: {"question": question, "depth": "standard", "hypothesis": {"claim": claim}}
              for brief_id, (question, claim) in CLAIMS.items()}
    return researched(tmp_path_factory.mktemp("decisions"), search_lab, scripted_ollama,
                      {"northgate": NORTHGATE, **claims})


def test_the_estimate_lands_on_the_consensus_and_excludes_the_outliers(decided: Workspace) -> None:
    report = decided.report("northgate")
    estimate = report["estimate"]
    low, high = estimate["final"]["low"], estimate["final"]["high"]
    assert low <= 431 <= high, "the audit office's figure, which most sources agree with"
    assert high - low < 2000 - 100, "narrowed"
    assert high < 10_000 and low > 1, "the anonymous blog's ten billion and the injected $1 cannot drag it"
    assert estimate["initial"] == {"low": 100, "high": 2000}
    assert estimate["history"] and [h["round"] for h in estimate["history"]] == \
        list(range(1, len(estimate["history"]) + 1))
    assert estimate["history"][-1]["low"] == low and estimate["history"][-1]["high"] == high
    assert 0.0 <= estimate["progress_score"] <= 1.0
    assert report["stop_reason"] in {"target_reached", "converged", "max_rounds", "stalled", "budget", "exhausted"}
    readings = [e for e in report["evidence"] if e["impact"] and e["impact"] != "neutral"]
    assert readings, "evidence carries the numbers it read"


def test_iteration_updates_stream_the_band(decided: Workspace) -> None:
    updates = [e for e in decided.events("northgate") if e["type"] == "iteration_update"]
    history = decided.report("northgate")["estimate"]["history"]
    # a round's band is streamed when the round ends, and again if stragglers read just before the
    # synthesis revise it (Research.last_stragglers): the last update of each round is its history row
    last = {e["round"]: e for e in updates}
    assert sorted(last) == [row["round"] for row in history]
    assert [e["round"] for e in updates] == sorted(e["round"] for e in updates)
    for event, row in zip(last.values(), history):
        assert {"low", "high", "progress_score", "width_reduction_pct", "tokens_so_far"} <= set(event)
        assert (event["low"], event["high"]) == (row["low"], row["high"])
        assert event["low"] <= event["high"]
    tokens = [e["tokens_so_far"] for e in updates]
    assert tokens == sorted(tokens) and tokens[-1] > 0


def test_chart_is_a_real_png_of_the_right_shape(decided: Workspace) -> None:
    data = (decided.outbox / "northgate" / "chart.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (800, 450)
    assert not (decided.outbox / "claim-barge" / "chart.png").exists(), "only estimate briefs get a chart"
    svg = (decided.outbox / "northgate" / CHART_FILE).read_text(encoding="utf-8")
    report = json.loads((decided.outbox / "northgate" / "report.json").read_text(encoding="utf-8"))
    assert svg == dict(report_charts(report))[CHART_FILE], "chart.svg is drawn from report.json"
    assert svg.count('class="round"') == len(report["estimate"]["history"]) + 1
    assert not (decided.outbox / "claim-barge" / CHART_FILE).exists()


@pytest.mark.parametrize("brief_id, expected", [
    ("claim-corrosion", "supported"), ("claim-barge", "refuted"), ("claim-lakeside", "inconclusive"),
])
def test_verdicts_are_computed_by_the_rule(decided: Workspace, brief_id: str, expected: str) -> None:
    report = decided.report(brief_id)
    verdict = report["verdict"]
    assert verdict["value"] == expected, (verdict, [(e["stance"], e["confidence"], e["quote"][:80])
                                                    for e in report["evidence"]])
    assert verdict["rule"] and verdict["evidence_level"] in {"deterministic", "advisory"}
    assert all(e["stance"] in {"supports", "contradicts", "neutral"} for e in report["evidence"])
    assert report["estimate"] is None


def test_the_injection_changes_neither_numbers_nor_verdicts(decided: Workspace) -> None:
    estimate = decided.report("northgate")["estimate"]
    assert all(h["low"] > 1 for h in estimate["history"])
    text = json.dumps(decided.report("claim-lakeside"))
    assert "exactly $1" not in decided.report("northgate")["summary"]
    assert '"value": "supported"' not in text or decided.report("claim-lakeside")["verdict"]["value"] != "supported"


def test_disagreeing_sources_are_shown_side_by_side(decided: Workspace) -> None:
    lakeside = decided.report("claim-lakeside")["sides"]
    assert lakeside["left"] and lakeside["right"], "the lab's lakeside evidence is mixed"
    assert all(item["quote"] for item in lakeside["left"] + lakeside["right"])
    md = (decided.outbox / "claim-lakeside" / "report.md").read_text()
    assert "## Side by side" in md and "| Supports the claim | Contradicts the claim |" in md
    northgate = decided.report("northgate")
    low, high = northgate["estimate"]["final"]["low"], northgate["estimate"]["final"]["high"]
    assert all(low <= i["low"] and i["high"] <= high for i in northgate["sides"]["left"])
    assert all(not (low <= i["low"] and i["high"] <= high) for i in northgate["sides"]["right"])
    assert "Within the final range" in (decided.outbox / "northgate" / "report.md").read_text()
