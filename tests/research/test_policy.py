"""The policy of each kind of brief (daemon/research/policy.py): tables of cases, as for judge and decide.

Issue 9: one stop rule (decide.stop_reason, in decide.STOP_ORDER) fed by each kind's policy;
`target_reached` only when the range itself meets the target with two credible sources; and
one sentence that says in words why the rounds stopped and where that left the answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.rules import decide, figures

from briefd.daemon.rules import judge
from briefd.daemon.core.brief import Brief, validate_brief
from briefd.daemon.rules.decide import Gap, Limits, LoopState, Usage
from briefd.daemon.rules.judge import Reading, Stance
from briefd.daemon.research.policy import EstimatePolicy, Facts, HypothesisPolicy, Policy, policy_for

QUESTION = "How much did the Northgate rail tunnel overrun its budget?"
BAND = {"unit": "USD million", "low": 100, "high": 2000, "target_low": 400, "target_high": 460}
WIDTH = {"unit": "USD million", "low": 100, "high": 2000, "target_width": 60}
NO_TARGET = {"unit": "USD million", "low": 100, "high": 2000}
LIMITS = Limits(max_rounds=3, max_searches_per_round=3, pages_per_round=6, budget_tokens=5000)
NO_USE = Usage(tokens=0, seconds=0.0, pages=0)


def brief(**fields: Any) -> Brief:
    return validate_brief({"question": QUESTION, **fields}, "b.json")


def history(*ranges: tuple[float, float, float]) -> list[dict[str, Any]]:
    return [{"round": i, "low": lo, "high": hi, "progress_score": score, "tokens": 100 * i}
            for i, (lo, hi, score) in enumerate(ranges, start=1)]


def _r(value: float, confidence: float, source: str) -> Reading:
    return Reading(low=value, high=value, confidence=confidence, impact="narrows_both", source=source, round=1)


# What the lab's northgate estimate read (issue 9, finding 2): it ended at 430..520.
LAB_READINGS = [_r(431, 0.85, "economist"), _r(520, 0.85, "economist"), _r(430, 0.9, "regulator"),
                _r(430, 0.9, "courier"), _r(431, 0.6, "ledger"), _r(440, 0.3, "forum")]
TWO_AGREE = [_r(430, 0.9, "regulator"), _r(431, 0.95, "audit-office")]
ONE_SOURCE = [_r(430, 0.9, "regulator"), _r(431, 0.9, "regulator")]


def estimate_facts(rounds: list[tuple[float, float, float]], new: list[int], readings: list[Reading],
                   usage: Usage = NO_USE) -> Facts:
    state = LoopState(phase="rounds", round=len(rounds), estimate_history=history(*rounds),
                      new_evidence_per_round=new)
    return Facts(state=state, limits=LIMITS, usage=usage, readings=readings)


@pytest.mark.parametrize("target, rounds, new, readings, expected", [
    # finding 2: 430..520 scores 0.968 against 400..460 but 520 lies outside it: research goes on
    (BAND, [(100, 2000, 0.0), (430, 520, 0.9679)], [0, 7], LAB_READINGS, None),
    (BAND, [(100, 2000, 0.0), (300, 900, 0.5), (430, 520, 0.9679)], [0, 7, 2], LAB_READINGS, decide.MAX_ROUNDS),
    (BAND, [(430, 520, 0.9679)] * 3, [7, 2, 1], LAB_READINGS, decide.CONVERGED),
    (BAND, [(430, 520, 0.9679)] * 3, [7, 2, 0], LAB_READINGS, decide.CONVERGED),  # one empty round: not stalled
    (BAND, [(430, 520, 0.9679)] * 3, [7, 0, 0], LAB_READINGS, decide.STALLED),    # finding 1
    # inside the band with two credible sources: reached; with one source (two readings): not yet
    (BAND, [(430, 431, 1.0)], [2], TWO_AGREE, decide.TARGET_REACHED),
    (BAND, [(430, 431, 1.0)], [2], ONE_SOURCE, None),
    (BAND, [(430, 431, 1.0)], [2], TWO_AGREE + [_r(440, 0.3, "forum")], decide.TARGET_REACHED),
    # finding 2's width case: 430..520 is 90 wide against target_width 60
    (WIDTH, [(430, 520, 0.9837)], [5], LAB_READINGS, None),
    (WIDTH, [(430, 470, 1.0)], [5], [_r(430, 0.9, "a"), _r(470, 0.9, "b")], decide.TARGET_REACHED),
    # finding 1: nothing new for two rounds and a flat score is stalled, not converged
    (BAND, [(100, 2000, 0.0), (100, 2000, 0.0)], [0, 0], [], decide.STALLED),
    (BAND, [(100, 2000, 0.0), (100, 2000, 0.0)], [3, 1], [_r(50, 0.3, "forum")], decide.CONVERGED),
    # no target: a point two sources agree on is still not "reached"
    (NO_TARGET, [(430, 431, 0.9995)], [2], TWO_AGREE, None),
])
def test_estimate_stop_reason(target: dict[str, Any], rounds: list[tuple[float, float, float]], new: list[int],
                              readings: list[Reading], expected: str | None) -> None:
    policy = policy_for(brief(estimate=target))
    assert isinstance(policy, EstimatePolicy)
    assert policy.stop_reason(estimate_facts(rounds, new, readings)) == expected


def test_a_budget_stops_an_estimate_that_has_not_met_its_target() -> None:
    policy = policy_for(brief(estimate=BAND))
    facts = estimate_facts([(430, 520, 0.9679)], [7], LAB_READINGS, Usage(tokens=5000, seconds=1, pages=1))
    assert policy.stop_reason(facts) == decide.BUDGET
    reached = estimate_facts([(430, 431, 1.0)], [2], TWO_AGREE, Usage(tokens=5000, seconds=1, pages=1))
    assert policy.stop_reason(reached) == decide.TARGET_REACHED


def test_an_estimate_is_not_done_when_the_planners_gaps_are() -> None:
    state = LoopState(phase="rounds", round=1, gaps=[Gap("G1", "x", answered_round=1)],
                      estimate_history=history((300, 900, 0.5)), new_evidence_per_round=[3])
    assert policy_for(brief(estimate=BAND)).stop_reason(Facts(state, LIMITS, NO_USE, readings=[])) is None


SUPPORTS = [Stance("supports", 0.9, "regulator", "a"), Stance("supports", 0.85, "peer_reviewed", "b")]
MIXED = [Stance("supports", 0.9, "regulator", "a"), Stance("contradicts", 0.9, "regulator", "b")]


@pytest.mark.parametrize("stances, expected", [
    (SUPPORTS, decide.GAPS_CLOSED),   # answered and decided
    (MIXED, None),                    # answered but inconclusive: look further
    ([], None),
])
def test_a_hypothesis_is_done_when_its_gaps_are_answered_and_its_verdict_decided(stances, expected) -> None:
    state = LoopState(phase="rounds", round=1, gaps=[Gap("G1", "x", answered_round=1)], new_evidence_per_round=[3])
    policy = policy_for(brief(hypothesis={"claim": "Corrosion closed the bridge"}))
    assert isinstance(policy, HypothesisPolicy)
    assert policy.stop_reason(Facts(state, LIMITS, NO_USE, stances=stances)) == expected


def test_a_plain_brief_is_done_when_its_gaps_are_answered() -> None:
    state = LoopState(phase="rounds", round=1, gaps=[Gap("G1", "x", answered_round=1)], new_evidence_per_round=[3])
    policy = policy_for(brief())
    assert type(policy) is Policy and policy.kind == "plain"
    assert policy.stop_reason(Facts(state, LIMITS, NO_USE)) == decide.GAPS_CLOSED


# ----------------------------------------------------------------- the sentence


@pytest.mark.parametrize("target, rounds, new, readings, usage, expected", [
    (BAND, [(100, 2000, 0.0), (300, 900, 0.5), (430, 520, 0.9679)], [0, 7, 2], LAB_READINGS, NO_USE,
     ("Stopped after round 3 of 3: the round limit; the range 430\u2013520 USD million is still wider than "
      "the target 400\u2013460.")),
    (WIDTH, [(430, 520, 0.98), (430, 520, 0.98)], [0, 0], LAB_READINGS, NO_USE,
     ("Stopped after round 2 of 3: no new evidence in the last 2 rounds; the range 430\u2013520 USD million "
      "(width 90) is still wider than the target, width \u2264 60.")),
    (BAND, [(430, 431, 1.0)], [2], TWO_AGREE, NO_USE,
     ("Stopped after round 1 of 3: the target was reached; the range 430\u2013431 USD million lies inside the "
      "target 400\u2013460, supported by 2 credible sources.")),
    (BAND, [(430, 431, 1.0)], [2], ONE_SOURCE, Usage(tokens=6000, seconds=1, pages=1),
     ("Stopped after round 1 of 3: the token budget (5000) was spent; the range 430\u2013431 USD million lies "
      "inside the target 400\u2013460, but it rests on 1 credible source (2 needed).")),
    (BAND, [(470, 480, 0.6)], [2], [_r(470, 0.9, "a"), _r(480, 0.9, "b")], Usage(tokens=6000, seconds=1, pages=1),
     ("Stopped after round 1 of 3: the token budget (5000) was spent; the range 470\u2013480 USD million lies "
      "outside the target 400\u2013460.")),
    (NO_TARGET, [(412.5, 431, 0.99)], [2], TWO_AGREE, Usage(tokens=6000, seconds=1, pages=1),
     ("Stopped after round 1 of 3: the token budget (5000) was spent; the range 412.5\u2013431 USD million is "
      "the result (the brief set no target).")),
])
def test_the_estimate_stop_sentence(target, rounds, new, readings, usage, expected) -> None:
    policy = policy_for(brief(estimate=target))
    facts = estimate_facts(rounds, new, readings, usage)
    assert policy.explain_stop(facts, policy.stop_reason(facts)) == expected


@pytest.mark.parametrize("fields, state, reason, stances, expected", [
    ({}, LoopState(round=1), decide.GAPS_CLOSED, [],
     "Stopped after round 1 of 3: every open question of the plan was answered."),
    ({}, LoopState(round=0), decide.EXHAUSTED, [],
     "Stopped before the first round: no new search query was left to try."),
    ({"hypothesis": {"claim": "Corrosion closed the bridge"}}, LoopState(round=3), decide.MAX_ROUNDS, MIXED,
     "Stopped after round 3 of 3: the round limit; the verdict is inconclusive."),
    ({"hypothesis": {"claim": "Corrosion closed the bridge"}}, LoopState(round=2), decide.STALLED, SUPPORTS,
     "Stopped after round 2 of 3: no new evidence in the last 2 rounds; the verdict is supported."),
])
def test_the_stop_sentence_of_other_kinds(fields, state, reason, stances, expected) -> None:
    policy = policy_for(brief(**fields))
    assert policy.explain_stop(Facts(state, LIMITS, NO_USE, stances=stances), reason) == expected


def test_every_stop_reason_has_words() -> None:
    policy = policy_for(brief())
    for reason in (*decide.STOP_ORDER, decide.EXHAUSTED):
        sentence = policy.explain_stop(Facts(LoopState(round=1), LIMITS, NO_USE), reason)
        assert sentence != f"Stopped after round 1 of 3: {reason}." and sentence.endswith("."), sentence
        assert "no reason was recorded" not in sentence


# ----------------------------------------------------------------- aimed queries, prompts, blocks


def test_an_estimate_leads_each_round_after_the_first_with_a_query_at_its_weakest_bound() -> None:
    policy = policy_for(brief(estimate=BAND))
    first = policy.aimed_queries(estimate_facts([], [], []))
    assert first.lead == () and first.refill, "round 1 runs the plan; the aimed queries only refill"
    # 410..520: the low end has four sources at it, the top one: research the high bound
    later = policy.aimed_queries(estimate_facts([(410, 520, 0.95)], [6], [
        _r(410, 0.9, "a"), _r(412, 0.9, "b"), _r(415, 0.9, "c"), _r(420, 0.9, "d"), _r(520, 0.6, "e")]))
    assert len(later.lead) == 1 and "maximum" in later.lead[0] and "USD million" in later.lead[0]
    assert later.lead[0] == later.refill[0]


def test_a_hypothesis_refills_with_queries_for_both_sides_of_its_claim() -> None:
    aim = policy_for(brief(hypothesis={"claim": "Corrosion closed the Kestrel bridge"})).aimed_queries(
        Facts(LoopState(), LIMITS, NO_USE))
    assert aim.lead == ()
    assert any("denied" in q for q in aim.refill) and any("confirmed" in q for q in aim.refill)
    assert policy_for(brief()).aimed_queries(Facts(LoopState(), LIMITS, NO_USE)) == type(aim)()


def test_the_synthesis_is_told_the_computed_result() -> None:
    est = policy_for(brief(estimate=BAND)).synthesis_line(estimate_facts([(430, 520, 0.96)], [7], LAB_READINGS))
    assert est.startswith("COMPUTED RANGE: 430 to 520 USD million")
    hyp = policy_for(brief(hypothesis={"claim": "Corrosion closed the bridge"})).synthesis_line(
        Facts(LoopState(round=1), LIMITS, NO_USE, stances=SUPPORTS))
    assert hyp.startswith('COMPUTED VERDICT: the claim "Corrosion closed the bridge" is supported')
    assert policy_for(brief()).synthesis_line(Facts(LoopState(round=1), LIMITS, NO_USE)) == ""


def test_the_estimate_block_keeps_the_target_as_given() -> None:
    block = policy_for(brief(estimate=WIDTH)).estimate_block(estimate_facts([(430, 520, 0.98)], [5], LAB_READINGS))
    assert block is not None
    assert block["target"] == {"low": None, "high": None, "width": 60}
    assert block["final"] == {"low": 430, "high": 520}
    assert block["progress_score"] == round(judge.progress_score((100, 2000), (430, 520), target_width=60), 4)


def test_policies_never_import_the_loop() -> None:
    """The arrows run one way: loop -> policy -> judge/decide (docs/development.md, "Layout")."""
    source = (Path(__file__).parents[2] / "daemon" / "research" / "policy.py").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from|import)\s+(daemon\.|\.)?(loop|worker)\b", source, re.MULTILINE)


def test_the_docs_list_the_stop_reasons_in_the_rules_order() -> None:
    """docs/conclusions.md ("How conclusions are decided") names the stop reasons in decide.STOP_ORDER."""
    readme = (Path(__file__).parents[2] / "docs" / "conclusions.md").read_text(encoding="utf-8")
    paragraph = readme[readme.index("**When it stops.**"):].split("\n\n")[0]
    named = [name for name in re.findall(r"`([a-z_]+)`", paragraph) if name in decide.STOP_ORDER]
    assert list(dict.fromkeys(named)) == list(decide.STOP_ORDER), paragraph


@pytest.mark.parametrize("discarded,readings,reason,expected", [
    # figures were stated, none in the brief's unit: that is why, whatever flat score or round cap fired
    ({"in another unit (USD)": 6}, [], decide.CONVERGED, figures.NO_USABLE_FIGURES),
    ({"in another unit (USD)": 6}, [], decide.MAX_ROUNDS, figures.NO_USABLE_FIGURES),
    ({"not in its quote": 2}, [], decide.EXHAUSTED, figures.NO_USABLE_FIGURES),
    # a spent budget is what stopped the rounds, and it is true
    ({"in another unit (USD)": 6}, [], decide.BUDGET, decide.BUDGET),
    # nothing was proposed at all: the rule's reason stands (the note says no source stated a figure)
    ({}, [], decide.STALLED, decide.STALLED),
    # a figure was kept: the range moved, so the rule's reason is about it
    ({"in another unit (USD)": 1}, TWO_AGREE, decide.CONVERGED, decide.CONVERGED),
    # not stopping is never relabelled
    ({"in another unit (USD)": 6}, [], None, None),
])
def test_an_estimate_without_a_usable_figure_says_so_as_its_stop_reason(
        discarded: dict[str, int], readings: list[Reading], reason: str | None, expected: str | None) -> None:
    state = LoopState(phase="rounds", round=2, figures_discarded=dict(discarded))
    facts = Facts(state=state, limits=LIMITS, usage=NO_USE, readings=readings)
    assert policy_for(brief(estimate=BAND)).settle(facts, reason) == expected
    if expected == figures.NO_USABLE_FIGURES:
        assert "usable figure" in policy_for(brief(estimate=BAND)).explain_stop(facts, expected)
