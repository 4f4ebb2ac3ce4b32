"""The research loop's rules as tables (issue 20, item 1: "Research only sequences").

Each rule the loop used to hold inline is a pure function now (daemon/rules/steps.py, or the
kind's policy in daemon/research/policy.py); each gets its table here, so a change of rule is
one function and one row, seen without a lab.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from briefd.daemon.core.brief import Brief, validate_brief
from briefd.daemon.model.llm import answer_token_bound
from briefd.daemon.research import followup, planner, policy
from briefd.daemon.research.planner import EvidenceItem, Plan
from briefd.daemon.research.policy import Discarded, Facts, Labels, accept_labels, limits_for, next_step, policy_for
from briefd.daemon.rules import decide, figures, judge, steps
from briefd.daemon.report.assemble import done_report, evidence_items, source_items, usage_block
from briefd.daemon.report.report import USAGE_KEYS, blank_report
from briefd.daemon.rules.citations import Source
from briefd.daemon.sources.sources import kind_of_url
from briefd.daemon.rules.decide import Gap, Limits, LoopState, Usage

QUESTION = "How much did the Northgate rail tunnel overrun its budget?"


def brief(**fields: Any) -> Brief:
    return validate_brief({"question": QUESTION, **fields}, "b.json")


# ---- pages per round, budgets --------------------------------------------------------------------

@pytest.mark.parametrize("searches, pages", [
    (1, 3),   # one search still reads a batch of 3
    (2, 4),   # two pages per search
    (3, 6),
    (5, 10),
])
def test_pages_per_round(searches: int, pages: int) -> None:
    limits = limits_for(brief(max_searches_per_round=searches))
    assert (limits.max_searches_per_round, limits.pages_per_round) == (searches, pages)


@pytest.mark.parametrize("budget, expected", [
    (None, (None, None, None)),
    ({"llm_tokens": 5000}, (5000, None, None)),
    ({"seconds": 60, "pages": 4}, (None, 60, 4)),
])
def test_limits_carry_the_budgets(budget: dict[str, int] | None, expected: tuple[Any, ...]) -> None:
    limits = limits_for(brief(**({"budget": budget} if budget else {}), max_rounds=2))
    assert (limits.budget_tokens, limits.budget_seconds, limits.budget_pages) == expected
    assert limits.max_rounds == 2


@pytest.mark.parametrize("fetched, cached, unchanged, local, read", [
    (0, 0, 0, 0, 0),
    (3, 0, 0, 0, 3),
    (1, 2, 3, 4, 10),  # every way a page is read counts against the page budget
])
def test_pages_read(fetched: int, cached: int, unchanged: int, local: int, read: int) -> None:
    state = LoopState(pages_fetched=fetched, page_cache_hits=cached, pages_not_modified=unchanged,
                      local_reads=local)
    assert steps.pages_read(state) == read


@pytest.mark.parametrize("per_round, budget, read, allowed", [
    (6, None, 100, 6),  # no page budget: the round's pages
    (6, 10, 0, 6),
    (6, 10, 7, 3),      # the budget's rest
    (6, 10, 10, 0),
    (6, 10, 12, 0),     # overspent (a round reads what it chose): never below 0
])
def test_pages_allowed(per_round: int, budget: int | None, read: int, allowed: int) -> None:
    limits = Limits(max_rounds=3, max_searches_per_round=3, pages_per_round=per_round, budget_pages=budget)
    assert steps.pages_allowed(limits, read) == allowed


@pytest.mark.parametrize("per_round, snippets", [(3, 6), (6, 12), (10, 20)])
def test_snippets_allowed(per_round: int, snippets: int) -> None:
    limits = Limits(max_rounds=3, max_searches_per_round=3, pages_per_round=per_round)
    assert steps.snippets_allowed(limits) == snippets


# ---- a page's fate after a failure ---------------------------------------------------------------

@pytest.mark.parametrize("transient, slow, fate", [
    (False, False, steps.FATE_BAD),         # a 404, a page that is no page: never fetched again
    (True, False, steps.FATE_THIS_BRIEF),   # a 503, a reset: the next brief tries it
    (True, True, steps.FATE_SLOW),          # a timeout: remembered as slow for a while
    (False, True, steps.FATE_SLOW),         # slow outranks the rest
])
def test_page_fate(transient: bool, slow: bool, fate: str) -> None:
    assert steps.page_fate(transient, slow) == fate


# ---- the query queue and when research is exhausted (next_step) ---------------------------------

LIMITS = Limits(max_rounds=3, max_searches_per_round=2, pages_per_round=4)
NO_USE = Usage(tokens=0, seconds=0.0, pages=0)
FROM_QUESTION = decide.fallback_queries(QUESTION, [])  # what an empty queue falls back to


@pytest.mark.parametrize("done, pending, asked, gaps, queries, left, reason", [
    # the queue's first max_searches_per_round queries, the rest kept for later rounds
    (1, ["a b", "c d", "e f"], [], [], ["a b", "c d"], ["e f"], None),
    (1, ["a b"], [], [], ["a b"], [], None),
    # an empty queue falls back to the question's words (then each open gap's)
    (1, [], [], [], FROM_QUESTION, [], None),
    # ... and when those were asked already, research is exhausted
    (1, [], FROM_QUESTION, [], [], [], decide.EXHAUSTED),
    # the round limit stops first, whatever is queued, and the queue is left as it was
    (3, ["a b"], [], [], [], ["a b"], decide.MAX_ROUNDS),
    # every gap of the plan answered ends a plain brief
    (1, ["a b"], [], [Gap(id="G1", text="cost", answered_round=1)], [], ["a b"], decide.GAPS_CLOSED),
])
def test_next_step(done: int, pending: list[str], asked: list[str], gaps: list[Gap], queries: list[str],
                   left: list[str], reason: str | None) -> None:
    state = LoopState(phase="rounds", round=done, pending_queries=list(pending), asked=list(asked),
                      gaps=gaps, new_evidence_per_round=[1] * done)
    step = next_step(policy_for(brief()), Facts(state=state, limits=LIMITS, usage=NO_USE), QUESTION)
    assert (list(step.queries), list(step.pending), step.stop_reason) == (queries, left, reason)
    assert state.pending_queries == pending, "next_step changes nothing it is given"
    if reason is None:
        assert (step.next_action, step.explanation) == ("search_more", None)
    else:
        assert step.next_action == "finalize" and step.why == f"stop: {reason}"
        assert step.explanation and step.explanation.startswith(f"Stopped after round {done} of 3")


# ---- label acceptance: tier cap, confidence, stance, figures (accept_labels) ---------------------

ESTIMATE = {"estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 60}}
CLAIM = {"hypothesis": {"claim": "Lead stayed below the limit"}}
CONTRACT = {"hypothesis": {"claim": "Lead stayed below the limit", "metric": "90th-percentile lead level",
                           "comparator": "<", "target": 5, "unit": "ppb"}}
GOV, BLOG = "https://www.epa.gov/lead", "https://blog.example.com/lead"
OVERRUN = "The tunnel's overrun reached $431 million by 2019."
LEAD = "The 90th-percentile lead level was 5.2 ppb."


def item(**labels: Any) -> EvidenceItem:
    return EvidenceItem(sentence_ids=["S1"], summary="s", confidence=labels.pop("confidence", 0.9), gap="",
                        **labels)


@pytest.mark.parametrize("fields, given, url, quote, labels", [
    # a plain brief keeps the model's labels
    ({}, item(tier="regulator"), BLOG, OVERRUN, None),
    # the model's "regulator" on a blog is capped at industry, and its confidence with it
    (CLAIM, item(tier="regulator", stance="supports"), BLOG, LEAD,
     Labels(tier=judge.MODEL_TIER_CEILING, confidence=judge.TIER_CAPS[judge.MODEL_TIER_CEILING], stance="supports")),
    # a government host may be a regulator; confidence under the cap is the model's
    (CLAIM, item(tier="regulator", confidence=0.5), GOV, LEAD, Labels(tier="regulator", confidence=0.5,
                                                                     stance="neutral")),
    # under a contract the stance is the quote's figures', not the model's (5.2 is not below 5)
    (CONTRACT, item(tier="news", stance="supports", confidence=0.5), BLOG, LEAD,
     Labels(tier="news", confidence=0.5, stance="contradicts")),
    # an estimate keeps a figure its quote states; a value stands for both ends
    (ESTIMATE, item(tier="news", value=431.0, confidence=0.5), BLOG, OVERRUN,
     Labels(tier="news", confidence=0.5, low=431.0, high=431.0, impact="narrows_both")),
    # the same figure copied in another scale is kept in the brief's unit
    (ESTIMATE, item(tier="news", value=431_000_000.0, impact="narrows_low", confidence=0.5), BLOG, OVERRUN,
     Labels(tier="news", confidence=0.5, low=431.0, high=431.0, impact="narrows_low")),
    # a figure the quote does not state is discarded and said; one end alone stands for both
    (ESTIMATE, item(tier="news", low=431.0, high=999.0, confidence=0.5), BLOG, OVERRUN,
     Labels(tier="news", confidence=0.5, low=431.0, high=431.0, impact="narrows_both",
            discarded=(Discarded(field="high", proposed=999.0, reason=figures.NOT_IN_QUOTE, written=None),))),
    # no figure kept: neutral, whatever the model said
    (ESTIMATE, item(tier="news", value=999.0, impact="narrows_low", confidence=0.5), BLOG, OVERRUN,
     Labels(tier="news", confidence=0.5, impact="neutral",
            discarded=(Discarded(field="value", proposed=999.0, reason=figures.NOT_IN_QUOTE, written=None),))),
])
def test_accept_labels(fields: dict[str, Any], given: EvidenceItem, url: str, quote: str,
                       labels: Labels | None) -> None:
    assert accept_labels(brief(**fields), given, quote, url) == labels


def test_an_organisations_tier_rule_outranks_the_model() -> None:
    rule = (("blog.example.com", "peer_reviewed"),)
    got = accept_labels(brief(**CLAIM), item(tier="social", confidence=0.9), LEAD, BLOG, rule)
    assert got is not None and (got.tier, got.confidence) == ("peer_reviewed", judge.TIER_CAPS["peer_reviewed"])


# ---- the quote filters, when a gap is answered, proposals kept (integrate) ------------------------

PAGE = "https://news.example.com/northgate"
KEPT = "The Northgate tunnel overran its budget by 431 million."
ABOUT = steps.topics("Northgate rail tunnel budget overrun", QUESTION, [Gap(id="G1", text="audit findings")])


@pytest.mark.parametrize("quote, url, title, distrusted, known, skipped", [
    (KEPT, PAGE, "Northgate", {}, set(), None),
    # a page distrusted (even in this very answer): nothing of it is kept
    (KEPT, PAGE, "Northgate", {PAGE: "an injection"}, set(),
     {"url": PAGE, "quote": KEPT, "reason": "from a distrusted page: an injection"}),
    # the page's own headline, a heading: not statements
    ("Northgate tunnel budget overrun", PAGE, "Northgate tunnel budget overrun", {}, set(),
     {"reason": "the page's headline, not a statement", "url": PAGE, "quote": "Northgate tunnel budget overrun"}),
    ("Home | News | Contact", PAGE, "", {}, set(),
     {"reason": "a heading, not a statement", "url": PAGE, "quote": "Home | News | Contact"}),
    # no word shared with the question or an open gap
    ("The weather in Paris was sunny all week.", PAGE, "", {}, set(),
     {"reason": steps.UNRELATED, "url": PAGE, "quote": "The weather in Paris was sunny all week."}),
    # the same quote of the same page kept already; of another page it is kept
    (KEPT, PAGE, "", {}, {(PAGE, KEPT)}, {"reason": steps.DUPLICATE, "url": PAGE}),
    (KEPT, PAGE, "", {}, {("https://other.example.org/", KEPT)}, None),
    # an event carries 200 characters of a quote, no more
    (KEPT + " x" * 200, PAGE, "", {PAGE: "an injection"}, set(),
     {"url": PAGE, "quote": (KEPT + " x" * 200)[:200], "reason": "from a distrusted page: an injection"}),
])
def test_skipped_quote(quote: str, url: str, title: str, distrusted: dict[str, str],
                       known: set[tuple[str, str]], skipped: dict[str, Any] | None) -> None:
    assert steps.skipped_quote(quote, url, title, True, distrusted, ABOUT, known) == skipped


@pytest.mark.parametrize("gap, confidence, answered", [
    ("G1", 0.9, True),
    ("G1", steps.GAP_ANSWER_CONFIDENCE, True),   # at the bar, answered
    ("G1", 0.49, False),
    ("", 0.9, False),                            # names no gap
])
def test_answers_gap(gap: str, confidence: float, answered: bool) -> None:
    assert steps.answers_gap(gap, confidence) is answered


@pytest.mark.parametrize("proposals, dropped", [
    (["Northgate audit report 2019", "what should I do next"], ["what should I do next"]),
    (["audit findings for the tunnel"], []),
    ([], []),
])
def test_off_topic_proposals(proposals: list[str], dropped: list[str]) -> None:
    assert steps.off_topic(proposals, ABOUT) == dropped


def test_topics_are_the_questions_and_the_open_gaps() -> None:
    assert ABOUT == ["Northgate rail tunnel budget overrun", QUESTION, "audit findings"]


# ---- which passages a call reads, and when a call is skipped (passage_cut) -------------------------

OPENED, OVERRUN_TWICE, TALKS = ("The tunnel opened to trains in 2019.",
                                "The tunnel budget overrun reached 431 million, an overrun of the budget.",
                                "Budget talks went on.")
BATCH = {11: OPENED, 12: OVERRUN_TWICE, 13: TALKS}
FOCUS = "tunnel budget overrun"
TWO_TERMS = "tunnel budget"


@pytest.mark.parametrize("matches, about, limit, ranked, read, skip", [
    # the matching passages, best first by BM25 among themselves
    ({11, 12, 13}, [TWO_TERMS], 12, (12, 13, 11), (12, 13, 11), False),
    # cut to the call's limit
    ({11, 12, 13}, [TWO_TERMS], 2, (12, 13), (12, 13), False),
    # what the index did not match is not offered
    ({11, 13}, [TWO_TERMS], 12, (13, 11), (13, 11), False),
    # only passages that bear on the question or a gap are read: one term of a two-term topic
    ({11, 12, 13}, ["trains timetable"], 12, (12, 13, 11), (11,), False),
    # two of a longer one: "tunnel" alone, "budget" alone do not bear on the tunnel's budget overrun
    ({11, 12, 13}, [FOCUS], 12, (12, 13, 11), (12,), False),
    # none does: the call is skipped (it could not change the outcome)
    ({11, 12, 13}, ["harbour dredging"], 12, (12, 13, 11), (), True),
    # nothing matched: no call, and nothing to say about it
    (set(), [FOCUS], 12, (), (), False),
])
def test_passage_cut(matches: set[int], about: list[str], limit: int, ranked: tuple[int, ...],
                     read: tuple[int, ...], skip: bool) -> None:
    cut = steps.passage_cut(BATCH, matches, FOCUS, about, limit)
    assert (cut.ranked, cut.read, cut.skip_call) == (ranked, read, skip)


def test_focus_is_the_question_and_the_open_gaps() -> None:
    assert steps.focus("tunnel overrun", [Gap(id="G1", text="audit"), Gap(id="G2", text="delay")]) == \
        "tunnel overrun audit delay"


# ---- the plan: asked again or trimmed (replan_choice, replanned, starting_plan) ---------------------

ON_TOPIC = "Northgate rail tunnel budget overrun"


@pytest.mark.parametrize("queries, slots, choice", [
    ([ON_TOPIC], 2, policy.PLAN_KEPT),                           # covers the question
    (["celebrity gossip", "football scores"], 2, policy.PLAN_ASK_AGAIN),  # off topic, round 1 has room
    (["celebrity gossip", "football scores"], 0, policy.PLAN_TRIMMED),    # round 1 searches the question alone
    # round 1's one planned query is on topic already: a second plan could not change it
    (["Northgate tunnel overrun", "football scores", "recipes"], 1, policy.PLAN_TRIMMED),
])
def test_replan_choice(queries: list[str], slots: int, choice: str) -> None:
    score = decide.plan_relevance(QUESTION, queries)
    assert policy.replan_choice(QUESTION, queries, score, slots) == choice


@pytest.mark.parametrize("searches, slots", [(1, 0), (2, 1), (4, 3)])
def test_replan_slots(searches: int, slots: int) -> None:
    assert policy.replan_slots(Limits(max_rounds=3, max_searches_per_round=searches, pages_per_round=4)) == slots


OFF_PLAN = Plan(research_question="Celebrity diets in 2024", angles=["a"], queries=["celebrity gossip"],
                gaps=["celebrity diets", "tunnel audit findings"])


@pytest.mark.parametrize("asked, queries, research_question, gaps", [
    # the new queries score higher: they replace the plan's; the off-topic rewrite and gaps go
    ([ON_TOPIC], [ON_TOPIC], QUESTION, ["tunnel audit findings"]),
    # the model's second try is no better: neither try's off-topic queries are searched (issue 21: a
    # re-plan that scored no better kept the first plan's junk); the rewrite and gaps go all the same
    (["more celebrity gossip"], [], QUESTION, ["tunnel audit findings"]),
    # a small model's second try, as Gemma 3 270M wrote them: only its on-topic query is kept
    (["1", "d", "1-4", "http://127.0.0.1:8888/search", ON_TOPIC], [ON_TOPIC], QUESTION, ["tunnel audit findings"]),
    (["1", "d", "e"], [], QUESTION, ["tunnel audit findings"]),
])
def test_replanned(asked: list[str], queries: list[str], research_question: str, gaps: list[str]) -> None:
    score = decide.plan_relevance(QUESTION, OFF_PLAN.queries)
    plan, new_score = policy.replanned(QUESTION, OFF_PLAN, score, asked)
    assert (plan.queries, plan.research_question, plan.gaps) == (queries, research_question, gaps)
    assert new_score == max(score, decide.plan_relevance(QUESTION, queries))
    assert all(2 * decide.relevance(q, [QUESTION]) >= 1.0 for q in plan.queries), "no off-topic query is searched"


def test_an_on_topic_rewrite_survives_a_replan() -> None:
    rewrite = dataclasses.replace(OFF_PLAN, research_question="Northgate rail tunnel cost overrun")
    plan, _ = policy.replanned(QUESTION, rewrite, 0.0, [ON_TOPIC])
    assert plan.research_question == "Northgate rail tunnel cost overrun"


@pytest.mark.parametrize("gaps, started_gaps", [
    (["audit findings"], ["audit findings"]),
    ([], [f"direct answer to: {QUESTION}"]),  # a plan with no gap gets one: the question's answer
])
def test_starting_plan(gaps: list[str], started_gaps: list[str]) -> None:
    plan = Plan(research_question="rq", angles=["a"], queries=[ON_TOPIC], gaps=gaps)
    started = policy.starting_plan(QUESTION, plan, 0.61234)
    assert started == followup.Plan(research_question="rq", angles=["a"], gaps=started_gaps,
                                    queries=[QUESTION, ON_TOPIC], plan_relevance=0.612)


# ---- plan reuse (reusable_plan) -------------------------------------------------------------------

EARLIER_PLAN = followup.Plan(research_question="rq", angles=[], gaps=["g"], queries=[QUESTION])
THIS_YEAR = "2026-11-27"
DONE = {"finished_at": "2026-03-01T10:00:00Z", "fallbacks": {}}


@pytest.mark.parametrize("earlier, plan, report, reused", [
    ({"question": QUESTION}, EARLIER_PLAN, DONE, True),
    ({"question": QUESTION}, None, DONE, False),                              # no plan recorded
    (None, EARLIER_PLAN, DONE, False),                                        # its brief is gone
    ({"question": "Another question?"}, EARLIER_PLAN, DONE, False),           # another question
    ({"question": QUESTION, "context": "rail only"}, EARLIER_PLAN, DONE, False),  # another context
    ({"question": QUESTION}, EARLIER_PLAN, {**DONE, "fallbacks": {"plan": 1}}, False),  # a template plan
    ({"question": QUESTION}, EARLIER_PLAN, {**DONE, "finished_at": "2025-12-31T23:00:00Z"}, False),  # last year
])
def test_reusable_plan(earlier: dict[str, Any] | None, plan: followup.Plan | None, report: dict[str, Any],
                       reused: bool) -> None:
    got = policy.reusable_plan(brief(), earlier, plan, report, THIS_YEAR)
    assert got == (plan if reused else None)


# ---- the synthesis: its sources and its length --------------------------------------------------------

def row(url: str, title: str | None, quote: str = "q") -> dict[str, Any]:
    return {"url": url, "title": title, "quote": quote}


A, B = "https://a.example/", "https://b.example/"


@pytest.mark.parametrize("evidence, cited, last_title, sources", [
    ([], True, False, []),
    # numbered by first appearance; a row without a title is named by its URL
    ([row(B, "Bee"), row(A, None), row(B, "Bee")], True, False,
     [Source(n=1, url=B, title="Bee"), Source(n=2, url=A, title=A)]),
    # a report with no summary lists them uncited
    ([row(A, "Ay")], False, False, [Source(n=1, url=A, title="Ay", cited=False)]),
    # a page whose rows carry two titles: the first, or the last (the synthesis's)
    ([row(A, "First"), row(A, "Second")], True, False, [Source(n=1, url=A, title="First")]),
    ([row(A, "First"), row(A, "Second")], True, True, [Source(n=1, url=A, title="Second")]),
])
def test_numbered_sources(evidence: list[dict[str, Any]], cited: bool, last_title: bool,
                          sources: list[Source]) -> None:
    assert policy.numbered_sources(evidence, cited=cited, last_title=last_title) == sources


def test_synthesis_lines_cite_their_sources_numbers() -> None:
    lines = policy.synthesis_lines([row(B, "Bee", "one"), row(A, None, "two"), row(B, "Bee 2", "three")])
    assert [(line.source_n, line.quote, line.title) for line in lines] == [
        (1, "one", "Bee"), (2, "two", A), (1, "three", "Bee 2")]



@pytest.mark.parametrize("quotes, ceiling, fits", [
    (4, 1024, True),    # room enough: what the quotes call for
    (4, 384, True),     # shortened until its largest answer fits
    (40, 64, False),    # never below SUMMARY_MIN_FIT_CHARS, even when that cannot fit
])
def test_summary_chars(quotes: int, ceiling: int, fits: bool) -> None:
    chars = policy.summary_chars(quotes, ceiling)
    wanted = planner.synthesis_chars(quotes)
    bound = answer_token_bound(planner.synthesis_schema(chars))
    assert chars <= wanted and bound is not None and (bound <= ceiling) is fits
    if chars < wanted:  # shortened no more than it had to be
        longer = answer_token_bound(planner.synthesis_schema(chars + policy.SUMMARY_STEP_CHARS))
        assert longer is not None and longer > ceiling


# ---- report.json's one shape (report/assemble.py) ---------------------------------------------------

def test_a_done_report_has_the_blank_reports_shape() -> None:
    report = done_report("b1", QUESTION, "2026-11-27T10:00:00Z", summary="s", stop_reason="max_rounds")
    assert list(report) == list(blank_report("b1", "b1.json", QUESTION, None))
    assert (report["status"], report["source_file"], report["summary"], report["stop_reason"]) == (
        "done", None, "s", "max_rounds")


def test_a_key_outside_the_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="not keys of report.json: colour; add them to report.REPORT_KEYS"):
        done_report("b1", QUESTION, None, colour="blue")


EVIDENCE_ROW = {"url": A, "title": "Ay", "quote": "q", "stance": None, "impact": None, "confidence": 0.5,
                "round": 1, "summary": "s", "low": None, "high": None, "tier": "news", "unit": None, "scope": None,
                "reading_date": "2024", "page": 3}


@pytest.mark.parametrize("sources, source_n", [([Source(n=4, url=A, title="Ay")], 4), ([], None)])
def test_evidence_items(sources: list[Source], source_n: int | None) -> None:
    [item] = evidence_items([EVIDENCE_ROW], sources)
    assert (item["source"], item["date"], item["page"], item["read_at"], item["reused_from"]) == (
        source_n, "2024", 3, None, None)


def test_source_items() -> None:
    items = source_items([Source(n=1, url=A, title="Ay"), Source(n=2, url="library:doc.pdf", title="D",
                                                                  cited=False)], {A: "abc"})
    assert [(i["n"], i["cited"], i["kind"], i["text_sha256"]) for i in items] == [
        (1, True, kind_of_url(A), "abc"), (2, False, kind_of_url("library:doc.pdf"), None)]


MODEL_USAGE = {"llm_calls": 3, "prompt_tokens": 900, "completion_tokens": 100, "llm_cache_hits": 1,
               "llm_seconds": 2.5, "repaired_answers": 1, "retried_answers": 0, "fallback_answers": 0,
               "poisoned_answers": 0, "replayed_failures": 2, "structured": {"schema": 3}}


@pytest.mark.parametrize("late, evidence, given_up, reused", [
    ({}, [], 0, 0),
    ({A: "given up", B: "read"}, [{"reused_from": 7}, {"reused_from": None}], 1, 1),
])
def test_usage_block(late: dict[str, str], evidence: list[dict[str, Any]], given_up: int, reused: int) -> None:
    state = LoopState(pages_fetched=2, page_cache_hits=1, local_reads=4, late=late, fallbacks={"replan": 1},
                      calls_skipped={"evidence": 2})
    usage = usage_block(MODEL_USAGE, 5, state, 12.34567, evidence, "given up")
    assert set(usage) == {*USAGE_KEYS, "fallbacks", "calls_skipped", "structured_output"}
    assert (usage["searches"], usage["pages_fetched"], usage["documents_read"], usage["wall_seconds"]) == (
        5, 2, 4, 12.346)
    assert (usage["late_pages"], usage["late_pages_given_up"], usage["evidence_reused"]) == (len(late), given_up,
                                                                                             reused)
    assert (usage["fallbacks"], usage["calls_skipped"], usage["llm_calls"]) == ({"replan": 1}, {"evidence": 2}, 3)
    assert usage["replayed_failures"] == 2
    assert usage["structured_output"] == {"schema": 3}, "the calls by how their JSON was asked for"
