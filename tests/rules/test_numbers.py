"""One number form and one finite-number reader (issue 20 #5): the table both ways, and the places that
once wrote one estimate of 1,250,000–1,500,000 four ways (stop sentence, the model's line, the
side-by-side title, report.md) now writing it one way."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from briefd.daemon.core.brief import validate_brief
from briefd.daemon.report.changes import what_changed
from briefd.daemon.report.charts import CHART_FILE, report_charts
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.report import blank_report
from briefd.daemon.research.planner import _number as proposed_number
from briefd.daemon.research.policy import Facts, policy_for
from briefd.daemon.rules.decide import Limits, LoopState, Usage
from briefd.daemon.rules.numbers import LARGEST, SIGNIFICANT, SMALLEST, finite, is_finite, number_text, span_text
from tests.report.test_changes import previous_report

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("value, text, exact", [
    (1250000, "1,250,000", "1,250,000"),
    (1.25e6, "1,250,000", "1,250,000"),  # a whole float: never 1.25e+06
    (0.1 + 0.2, "0.3", "0.30000000000000004"),  # rounded for prose, exact where two values must read apart
    (430, "430", "430"),
    (0.43, "0.43", "0.43"),
    (1234.5, "1,234.5", "1,234.5"),
    (-1234.56789, "-1,234.57", "-1,234.56789"),
    (1234567.891, "1,234,568", "1,234,567.891"),  # rounding never reaches into the whole part
    (999999.7, "1,000,000", "999,999.7"),
    (0.12345678, "0.123457", "0.12345678"),
    (0.00042, "0.00042", "0.00042"),
    (SMALLEST, "0.0001", "0.0001"),
    (1.5e-7, "1.5e-07", "1.5e-07"),  # below SMALLEST: exponent, as :g writes it
    (1.0000000000000001e-07, "1e-07", "1.0000000000000001e-07"),
    (LARGEST - 1, "999,999,999,999,999", "999,999,999,999,999"),
    (LARGEST, "1e+15", "1e+15"),
    (2e20, "2e+20", "2e+20"),
    (0.0, "0", "0"),
    (-0.0, "0", "0"),
    (NAN, "NaN", "NaN"),
    (INF, "inf", "inf"),
    (-INF, "-inf", "-inf"),
])
def test_one_number_form(value: float, text: str, exact: str) -> None:
    assert number_text(value) == text
    assert number_text(value, exact=True) == exact
    if math.isfinite(value) and "e" not in exact:
        assert float(exact.replace(",", "")) == value, "the exact form reads back as the same float"


def test_prose_keeps_significant_digits_and_no_more() -> None:
    assert number_text(1 / 3) == "0." + "3" * SIGNIFICANT
    assert number_text(2 / 3 * 1000) == "666.667"
    assert span_text(1.25e6, 1.5e6) == "1,250,000\u20131,500,000"
    assert span_text(430, 520, " to ") == "430 to 520"


@pytest.mark.parametrize("value, text, expected", [
    (410, False, 410.0), (-0.5, False, -0.5), (True, False, None), (None, False, None),
    (NAN, False, None), (INF, False, None), (-INF, False, None), (10 ** 400, False, None),
    ("410", False, None), ("410", True, 410.0), (" 1e3 ", True, 1000.0), ("nan", True, None),
    ("inf", True, None), ("1,5", True, None), ("four", True, None), ([1], True, None),
])
def test_one_finite_reader(value: Any, text: bool, expected: float | None) -> None:
    assert finite(value, text=text) == expected
    assert is_finite(value) == (finite(value) is not None)


def test_a_proposed_figure_accepts_thousands_separators_and_refuses_nan() -> None:
    assert proposed_number("1,250,000") == 1250000.0
    assert [proposed_number(v) for v in ("NaN", "inf", NAN, True, None, "about 400")] == [None] * 6


@pytest.mark.parametrize("final", [{"low": NAN, "high": INF}, {"low": -INF, "high": 460}, {"low": 400, "high": NAN}])
def test_changes_reads_no_range_from_nan_or_inf(final: dict[str, float]) -> None:
    """A damaged or hand-edited report.json (Python's json reads NaN and Infinity) ran twice unchanged:
    `changes` once called the range moved (NaN is not equal to itself) and showed NaN as a bound."""
    previous = previous_report()
    previous["estimate"]["final"] = final
    current = copy.deepcopy(previous)
    changes = what_changed(previous, current, previous_run_id=1, files=None)
    assert changes["range"] is None and changes["nothing_changed"]
    previous_ok = previous_report()
    appeared = what_changed(previous, previous_ok, previous_run_id=1, files=None)["range"]
    assert appeared["old"] is None and appeared["new"] == {"low": 400, "high": 460}


# ---------------------------------------------------------------------------- one estimate, one form

ESTIMATE = {"unit": "people", "low": 1_000_000, "high": 2_000_000, "target_width": 50_000}
LIMITS = Limits(max_rounds=3, max_searches_per_round=3, pages_per_round=6, budget_tokens=5000)
HISTORY = [{"round": 1, "low": 1_250_000, "high": 1_500_000, "progress_score": 0.5, "tokens": 100}]


def test_one_estimate_reads_the_same_in_every_place() -> None:
    """1,250,000–1,500,000 was "1250000–1500000" in the stop sentence, "1.25e+06 to 1.5e+06" in the line
    the model is told to state, "1.25e+06–1.5e+06" in the side-by-side title, "1,250,000" in report.md."""
    brief = validate_brief({"question": "How many people live in the valley?", "estimate": ESTIMATE}, "b.json")
    policy = policy_for(brief)
    facts = Facts(LoopState(phase="rounds", round=1, estimate_history=HISTORY, new_evidence_per_round=[2]),
                  LIMITS, Usage(tokens=100, seconds=1.0, pages=1))
    one = "1,250,000", "1,500,000"
    assert f"{one[0]}\u2013{one[1]} people" in policy.explain_stop(facts, "max_rounds")
    assert f"current range {one[0]}..{one[1]}" in policy.evidence_task(facts.state)[0]
    assert policy.synthesis_line(facts).startswith(f"COMPUTED RANGE: {one[0]} to {one[1]} people")
    estimate = policy.estimate_block(facts)
    sides = policy.sides([], estimate)
    assert sides is not None and sides["left_title"] == f"Within the final range ({one[0]}\u2013{one[1]})"
    report = {**blank_report("valley", "valley.json", brief.question, "2026-11-27T09:00:00Z", "done"),
              "estimate": estimate}
    markdown = render_markdown(report)
    assert f"{one[0]}\u2013{one[1]}" in markdown
    for old in ("1250000", "1.25e+06", "1.5e+06"):
        assert old not in markdown + policy.explain_stop(facts, "max_rounds") + policy.synthesis_line(facts)
    svg = dict(report_charts(report))[CHART_FILE]
    assert f"final {one[0]}\u2013{one[1]} people" in svg and "1.25e+06" not in svg
