"""What each kind of brief decides: pure, typed, no I/O (DESIGN: "the loop sequences, policies decide").

A brief is plain (a question), an estimate (a range to narrow) or a hypothesis (a claim to
test). The loop asks its brief's policy the questions whose answers depend on the kind: why
stop now, which aimed queries to queue, what an evidence prompt asks for, what the synthesis
must state, and which estimate / verdict / side-by-side blocks the report gets. A policy
takes plain data (the brief, the loop state, the readings or stances, the usage) and returns
decisions; it never imports the loop, so the arrows run one way: loop -> policy ->
judge/decide. The rules themselves stay in judge (numbers, ranges, verdicts) and decide (the
one stop rule and its order); a policy only says which of them apply to its kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..rules import contracts, decide, figures

from ..rules import judge
from ..rules.numbers import number_text, span_text

from . import followup, planner
from ..core.brief import Brief, Estimate
from ..rules.citations import Source
from ..rules.decide import Limits, LoopState, Usage
from ..model.llm import PROSE_CHARS, answer_token_bound


@dataclass(frozen=True)
class Facts:
    """All a policy decides from, gathered by the loop: plain data, read only."""

    state: LoopState
    limits: Limits
    usage: Usage
    readings: Sequence[judge.Reading] = ()   # estimate briefs: every evidence item with a figure
    stances: Sequence[judge.Stance] = ()     # hypothesis briefs: every evidence item's stance
    quotes: Sequence[judge.Quoted] = ()      # hypothesis briefs with a contract: every kept quote


@dataclass(frozen=True)
class Aim:
    """Queries aimed by the brief's kind: `lead` goes to the front of this round's queue,
    `refill` is queued only when nothing else is pending."""

    lead: tuple[str, ...] = ()
    refill: tuple[str, ...] = ()


def stop_head(reason: str | None, state: LoopState, limits: Limits, usage: Usage) -> str:
    """The first half of the stop sentence: when, and which rule ended the rounds, in words."""
    when = (f"Stopped after round {state.round} of {limits.max_rounds}" if state.round
            else "Stopped before the first round")
    budget = decide.spent_budget(limits, usage)
    spent = {"tokens": f"the token budget ({limits.budget_tokens}) was spent",
             "seconds": f"the time budget ({number_text(limits.budget_seconds or 0)} s) was spent",
             "pages": f"the page budget ({limits.budget_pages} pages) was spent"}
    words = {
        decide.TARGET_REACHED: "the target was reached",
        decide.BUDGET: spent.get(budget or "", "a budget was spent"),
        decide.STALLED: f"no new evidence in the last {decide.STALL_ROUNDS} rounds",
        decide.CONVERGED: (f"the range stopped narrowing (its progress score moved less than "
                           f"{number_text(judge.PLATEAU_GAIN)} over the last {judge.PLATEAU_ROUNDS} rounds)"),
        decide.GAPS_CLOSED: "every open question of the plan was answered",
        decide.MAX_ROUNDS: "the round limit",
        decide.EXHAUSTED: "no new search query was left to try",
        figures.NO_USABLE_FIGURES: "no source gave a usable figure in the brief's unit",
    }
    return f"{when}: {words.get(reason or '', reason or 'no reason was recorded')}"


@dataclass(frozen=True)
class Policy:
    """A plain question's policy, and the interface every kind's policy offers (the others extend it).

    For a plain brief the planner's gaps are its measure of done, and nothing is computed.
    """

    brief: Brief
    kind: str = "plain"

    def progress(self, facts: Facts) -> decide.Progress:
        return decide.Progress()

    def stop_reason(self, facts: Facts) -> str | None:
        """The one stop rule (decide.stop_reason), fed with what this kind knows."""
        return decide.stop_reason(facts.state, facts.limits, facts.usage, self.progress(facts))

    def settle(self, facts: Facts, reason: str | None) -> str | None:
        """The stop reason as the report states it, once the rounds stop for `reason` (the stop
        rule's, or the loop's `exhausted`): a kind may name what its answer lacks instead."""
        return reason

    def aimed_queries(self, facts: Facts) -> Aim:
        return Aim()

    def evidence_task(self, state: LoopState) -> tuple[str, str]:
        """What an evidence prompt adds for this kind: a section, and what to ask of each item."""
        return "", ""

    def synthesis_line(self, facts: Facts) -> str:
        """The computed result the synthesis must state (nothing for a plain brief)."""
        return ""

    def estimate_block(self, facts: Facts) -> dict[str, Any] | None:
        return None

    def verdict_block(self, facts: Facts) -> dict[str, Any] | None:
        return None

    def sides(self, evidence: Sequence[dict[str, Any]], estimate: dict[str, Any] | None) -> dict[str, Any] | None:
        return None

    def stop_detail(self, facts: Facts, reason: str | None) -> str:
        """What the answer stands at when the rounds stop (after the stop head)."""
        return ""

    def explain_stop(self, facts: Facts, reason: str | None) -> str:
        """One plain sentence for the report: when and why the rounds stopped, and where that left
        the answer ("Stopped after round 3 of 3: the round limit; the range 430–520 USD million
        is still wider than the target 400–460.")."""
        detail = self.stop_detail(facts, reason)
        head = stop_head(reason, facts.state, facts.limits, facts.usage)
        return f"{head}; {detail}." if detail else f"{head}."


def _side_item(e: dict[str, Any]) -> dict[str, Any]:
    return {"source": e["source"], "url": e["url"], "title": e["title"], "quote": e["quote"],
            "confidence": e["confidence"], "tier": e["tier"], "low": e["low"], "high": e["high"]}


@dataclass(frozen=True)
class EstimatePolicy(Policy):
    """Seed 1: narrow a range. Done when the range meets the target with credible support."""

    kind: str = "estimate"

    @property
    def est(self) -> Estimate:
        assert self.brief.estimate is not None
        return self.brief.estimate

    @property
    def initial(self) -> tuple[float, float]:
        return (self.est.low, self.est.high)

    def current_range(self, state: LoopState) -> tuple[float, float]:
        """The range after the last round (the brief's own before the first)."""
        if state.estimate_history:
            last = state.estimate_history[-1]
            return (last["low"], last["high"])
        return self.initial

    def score(self, current: tuple[float, float]) -> float:
        return judge.progress_score(self.initial, current, target_low=self.est.target_low,
                                    target_high=self.est.target_high, target_width=self.est.target_width)

    def range_after(self, readings: Sequence[judge.Reading]) -> tuple[float, float]:
        """The range from all evidence so far (judge.update_range: order-free, rule-computed)."""
        return judge.update_range(self.initial, readings)

    def supported_by(self, facts: Facts) -> int:
        return judge.supporting_sources(self.current_range(facts.state), facts.readings, self.initial)

    def meets_target(self, current: tuple[float, float]) -> bool:
        return judge.target_met(current, self.est.target_low, self.est.target_high, self.est.target_width)

    def progress(self, facts: Facts) -> decide.Progress:
        """target_reached only when the range itself meets the target (inside the band, or no wider
        than target_width) and TARGET_SOURCES independent credible sources lie inside it; a high
        progress score alone is not the answer. converged: the score moved under 0.005 over 2
        rounds (the leading 0.0 is the score before any evidence)."""
        if not facts.state.estimate_history:
            return decide.Progress(answered_ends_it=False)
        current = self.current_range(facts.state)
        reached = self.meets_target(current) and (self.supported_by(facts) >= judge.TARGET_SOURCES
                                                  or judge.settled_by(facts.readings, self.initial) is not None)
        scores = [h["progress_score"] for h in facts.state.estimate_history]
        return decide.Progress(target_reached=reached, converged=judge.plateau([0.0, *scores]),
                               answered_ends_it=False)

    def aimed_queries(self, facts: Facts) -> Aim:
        """After round 1 each round leads with a query at the bound the evidence supports least;
        when nothing else is pending, all of them."""
        aimed = tuple(self.bound_queries(facts))
        return Aim(lead=aimed[:1] if facts.state.round >= 1 else (), refill=aimed)

    def bound_queries(self, facts: Facts) -> list[str]:
        """Queries aimed at what keeps the range wide: the bound the evidence supports least."""
        topic = " ".join(decide.content_words(self.brief.question)[:6])
        bound = judge.weakest_bound(self.current_range(facts.state), facts.readings)
        aim = {"narrow_low": ["minimum", "lowest estimate"], "narrow_high": ["maximum", "highest estimate"],
               "both": ["official figure", "audited total"]}.get(bound, ["official figure"])
        return [f"{topic} {word} {self.est.unit}" for word in aim] + [f"{topic} final figure report"]

    def evidence_task(self, state: LoopState) -> tuple[str, str]:
        low, high = self.current_range(state)
        unit = self.est.unit
        return (f"ESTIMATE: {unit}, current range {span_text(low, high, '..')}",
                (f"For each item give the figure it states, in {unit} (value, or low and high), what the figure "
                 f"is of (of), which figure it is (kind), how it moves the ESTIMATE (impact) and the source's "
                 f"tier."))

    def synthesis_line(self, facts: Facts) -> str:
        low, high = self.current_range(facts.state)
        return (f"COMPUTED RANGE: {span_text(low, high, ' to ')} {self.est.unit} (computed by rule from the "
                f"evidence; state this range, do not invent another)")

    def settle(self, facts: Facts, reason: str | None) -> str | None:
        """`no_usable_figures` when sources did state figures but none in the brief's unit was kept:
        the range never moved, and that, not the round count or a flat score, is why. A spent
        budget stays the reason (it is what stopped the rounds, and it is true), and so does the
        rule's reason when no figure was proposed at all (`stalled`: nothing was found; the
        estimate's note still says no source stated a figure)."""
        discarded = sum(facts.state.figures_discarded.values())
        if (reason is not None and reason != decide.BUDGET and facts.state.round >= 1 and discarded
                and self.figures_note(facts)):
            return figures.NO_USABLE_FIGURES
        return reason

    def figures_note(self, facts: Facts) -> str | None:
        """figures.no_usable_figures for this brief: the sentence when no figure in its unit was kept."""
        return figures.no_usable_figures(len(facts.readings), facts.state.figures_discarded, self.est.unit)

    def estimate_block(self, facts: Facts) -> dict[str, Any] | None:
        est = self.est
        low, high = self.current_range(facts.state)
        return {
            "unit": est.unit,
            "initial": {"low": est.low, "high": est.high},
            "target": {"low": est.target_low, "high": est.target_high, "width": est.target_width},
            "final": {"low": low, "high": high},
            "progress_score": round(self.score((low, high)), 4),
            "history": list(facts.state.estimate_history),
            "numbers_discarded": facts.state.numbers_discarded,
            "discarded_reasons": dict(facts.state.figures_discarded),
            "note": self.figures_note(facts),
        }

    def sides(self, evidence: Sequence[dict[str, Any]], estimate: dict[str, Any] | None) -> dict[str, Any] | None:
        """Inside vs outside the final range."""
        if estimate is None:
            return None
        low, high = estimate["final"]["low"], estimate["final"]["high"]
        read = [e for e in evidence if e["low"] is not None]
        inside = [_side_item(e) for e in read if low <= e["low"] and e["high"] <= high]
        outside = [_side_item(e) for e in read if not (low <= e["low"] and e["high"] <= high)]
        return {"left_title": f"Within the final range ({span_text(low, high)})", "left": inside,
                "right_title": "Outside it (not corroborated, or low confidence)", "right": outside}

    def target_text(self) -> str:
        """The target as the report's table and sentence show it: "400–460" or "width ≤ 60"."""
        est = self.est
        if est.target_low is not None and est.target_high is not None:
            return span_text(est.target_low, est.target_high)
        if est.target_width is not None:
            return f"width \u2264 {number_text(est.target_width)}"
        return ""

    def stop_detail(self, facts: Facts, reason: str | None) -> str:
        """Where the range stands against the target, in words, whatever stopped the rounds."""
        low, high = self.current_range(facts.state)
        rng = f"the range {span_text(low, high)} {self.est.unit}"
        target = self.target_text()
        if not target:
            return f"{rng} is the result (the brief set no target)"
        sources = self.supported_by(facts)
        need = judge.TARGET_SOURCES
        authority = judge.settled_by(facts.readings, self.initial)
        if self.meets_target((low, high)):
            verb = "lies inside" if self.est.target_width is None else "meets"
            if authority is not None and sources < need:
                return (f"{rng} {verb} the target {target}; it rests on one source, {authority}, tiered as an "
                        f"authority that decides alone, with nothing credible against it")
            if sources >= need:
                return f"{rng} {verb} the target {target}, supported by {sources} credible sources"
            return (f"{rng} {verb} the target {target}, but it rests on {sources} credible source"
                    f"{'' if sources == 1 else 's'} ({need} needed)")
        if self.est.target_width is not None:
            return f"{rng} (width {number_text(high - low)}) is still wider than the target, {target}"
        t_lo, t_hi = sorted((self.est.target_low or 0.0, self.est.target_high or 0.0))
        if high - low > t_hi - t_lo:
            return f"{rng} is still wider than the target {target}"
        return f"{rng} lies outside the target {target}"


@dataclass(frozen=True)
class HypothesisPolicy(Policy):
    """Seed 2: test a claim. Closed gaps end it only once the verdict is decided."""

    kind: str = "hypothesis"

    @property
    def claim(self) -> str:
        assert self.brief.hypothesis is not None
        return self.brief.hypothesis.claim

    @property
    def contract(self) -> contracts.Contract | None:
        assert self.brief.hypothesis is not None
        return self.brief.hypothesis.contract

    def verdict(self, facts: Facts) -> judge.Verdict:
        """Seed 2: with a contract, computed from the figures code reads in the quotes against the
        target (deterministic); without one, weighed from the model's stance labels (advisory)."""
        if self.contract is not None:
            return judge.contract_verdict(self.contract, facts.quotes)
        return judge.verdict(facts.stances)

    def progress(self, facts: Facts) -> decide.Progress:
        """The gaps are answered but the claim is not decided yet: look further."""
        return decide.Progress(answered_ends_it=self.verdict(facts).value != "inconclusive")

    def aimed_queries(self, facts: Facts) -> Aim:
        return Aim(refill=tuple(self.claim_queries()))

    def claim_queries(self) -> list[str]:
        """Queries for both sides of a claim: what would support it and what would refute it."""
        words = " ".join(decide.content_words(self.claim)[:8])
        return [words, f"{words} evidence", f"{words} denied false", f"{words} confirmed official"]

    def evidence_task(self, state: LoopState) -> tuple[str, str]:
        contract = self.contract
        measured = f" (measured as: {planner.one_line(contract.describe(), 300)})" if contract else ""
        return (f"CLAIM: {planner.one_line(self.claim, 500)}{measured}",
                ("For each item say whether it supports or contradicts the CLAIM (stance), and the "
                 "source's tier."))

    def verdict_block(self, facts: Facts) -> dict[str, Any] | None:
        result = self.verdict(facts)
        return {"value": result.value, "rule": result.rule, "evidence_level": result.evidence_level,
                "contract": self.contract.describe() if self.contract else None,
                "claim": self.claim,
                "support": round(result.support, 3), "contradiction": round(result.contradiction, 3)}

    def synthesis_line(self, facts: Facts) -> str:
        verdict = self.verdict_block(facts)
        assert verdict is not None
        return (f"COMPUTED VERDICT: the claim \"{planner.one_line(verdict['claim'], 300)}\" is "
                f"{verdict['value']} ({verdict['rule']}); state this verdict, do not judge it yourself")

    def sides(self, evidence: Sequence[dict[str, Any]], estimate: dict[str, Any] | None) -> dict[str, Any] | None:
        """For vs against the claim."""
        return {"left_title": "Supports the claim",
                "left": [_side_item(e) for e in evidence if e["stance"] == "supports"],
                "right_title": "Contradicts the claim",
                "right": [_side_item(e) for e in evidence if e["stance"] == "contradicts"]}

    def stop_detail(self, facts: Facts, reason: str | None) -> str:
        return f"the verdict is {self.verdict(facts).value}"


def policy_for(brief: Brief) -> Policy:
    """The policy of the brief's kind: estimate, hypothesis or plain."""
    if brief.estimate is not None:
        return EstimatePolicy(brief)
    if brief.hypothesis is not None:
        return HypothesisPolicy(brief)
    return Policy(brief)


def limits_for(brief: Brief) -> Limits:
    """A brief's caps and budgets: its rounds and searches, its budgets, and the pages a round
    reads: two per search, at least 3 (a round of one search still has a batch to read)."""
    budget = brief.budget
    return Limits(
        max_rounds=brief.max_rounds,
        max_searches_per_round=brief.max_searches_per_round,
        pages_per_round=max(3, 2 * brief.max_searches_per_round),
        budget_tokens=getattr(budget, "llm_tokens", None) if budget else None,
        budget_seconds=getattr(budget, "seconds", None) if budget else None,
        budget_pages=getattr(budget, "pages", None) if budget else None,
    )


@dataclass(frozen=True)
class Step:
    """What the rounds do next (next_step): search `queries`, or stop for `stop_reason`.

    `pending` is the query queue once this step's queries are taken: the loop keeps it.
    `next_action` and `why` are what `briefd status` shows; `explanation` the stop sentence."""

    queries: tuple[str, ...]
    pending: tuple[str, ...]
    stop_reason: str | None
    explanation: str | None
    next_action: str
    why: str


def next_step(policy: Policy, facts: Facts, question: str) -> Step:
    """The query queue and when research is exhausted: the stop rule first (the kind's); else the
    kind's aimed queries go to the front of the queue (its refill only when nothing else is
    pending) and the round takes up to max_searches_per_round of them (decide.take_queries, with
    its fallbacks from the question and open gaps). None left to take: `exhausted`. The kind then
    settles the reason as the report states it. The state given is not changed."""
    reason = policy.stop_reason(facts)
    queue = dataclasses.replace(facts.state, pending_queries=list(facts.state.pending_queries))
    queries: list[str] = []
    if reason is None:
        aim = policy.aimed_queries(facts)
        lead = queue.add_queries(aim.lead)
        queue.pending_queries = lead + [q for q in queue.pending_queries if q not in lead]
        if not queue.pending_queries:
            queue.add_queries(aim.refill)
        queries = decide.take_queries(queue, question, facts.limits.max_searches_per_round)
        if not queries:
            reason = decide.EXHAUSTED
    reason = policy.settle(facts, reason)
    action, why = decide.next_action(facts.state, reason)
    return Step(queries=tuple(queries), pending=tuple(queue.pending_queries), stop_reason=reason,
                explanation=policy.explain_stop(facts, reason) if reason is not None else None,
                next_action=action, why=why)


@dataclass(frozen=True)
class Discarded:
    """A figure the model proposed that code discarded (figures.read_figure), and why."""

    field: str                # value, low or high
    proposed: float
    reason: str               # figures.NOT_IN_QUOTE, "in another unit (USD)", ...
    written: str | None       # the amount as the quote writes it, when one was found


@dataclass(frozen=True)
class Labels:
    """An evidence item's labels as kept: the model's, checked (accept_labels)."""

    tier: str
    confidence: float
    stance: str | None = None
    low: float | None = None
    high: float | None = None
    impact: str | None = None
    discarded: tuple[Discarded, ...] = ()


FIGURE_FIELDS = ("value", "low", "high")


def accept_labels(brief: Brief, item: planner.EvidenceItem, quote: str, url: str,
                  source_tiers: Sequence[tuple[str, str]] = (), lead: str = "", unit_kind: str = "") -> Labels | None:
    """The model's labels on a quote, checked. None for a plain brief: it keeps the model's.

    The tier is capped (judge.capped_tier: the organisation's rule, else the model's label up to
    the host's ceiling) and confidence follows it (judge.tier_confidence). A hypothesis's stance
    is the quote's figures' under a contract (contracts.quote_stance), else the model's (neutral if
    none). An estimate keeps a figure only where its quote states it (figures.read_figure, in the
    brief's unit); a value stands for both ends, one end alone for both; its impact is the
    model's (narrows_both if none) when a figure was kept, else neutral. `lead`: the passage before the quote,
    where the figure's unit or setting may be named (a definition's term line); `unit_kind`: what the document
    marks the quote's part as (an example's or code's figures are read as such: figures.stated_amounts)."""
    kind = policy_for(brief).kind
    if kind == "plain":
        return None
    tier = judge.capped_tier(url, item.tier, source_tiers)
    confidence = judge.tier_confidence(tier, item.confidence)
    if kind == "hypothesis":
        contract = brief.hypothesis.contract if brief.hypothesis else None
        stance = contracts.quote_stance(contract, quote, url, lead, unit_kind).stance if contract \
            else (item.stance or "neutral")
        return Labels(tier=tier, confidence=confidence, stance=stance)
    assert brief.estimate is not None, "an estimate brief always has its estimate block"
    kept: dict[str, float] = {}
    discarded: list[Discarded] = []
    for name in FIGURE_FIELDS:
        number = getattr(item, name)
        if number is None:
            continue
        figure = figures.read_figure(number, quote, brief.estimate.unit, asked=brief.question, lead=lead,
                                     said=figures.ModelReading(kind=item.kind, of=item.of), unit_kind=unit_kind)
        if figure.value is not None:
            kept[name] = figure.value  # code's conversion: a figure copied in another scale is kept
        else:
            discarded.append(Discarded(field=name, proposed=number, reason=figure.reason or figures.NOT_IN_QUOTE,
                                       written=figure.written))
    low = high = None
    if "value" in kept:
        low = high = kept["value"]
    elif "low" in kept or "high" in kept:  # one end alone stands for both
        ends = [kept[name] for name in ("low", "high") if name in kept]
        low, high = min(ends), max(ends)
    impact = (item.impact or "narrows_both") if low is not None else "neutral"
    return Labels(tier=tier, confidence=confidence, low=low, high=high, impact=impact, discarded=tuple(discarded))


# ---- the plan: when to ask again, and when an earlier run's plan is this run's -------------------

PLAN_KEPT = "kept"            # on topic: the plan as the model made it
PLAN_TRIMMED = "trimmed"      # off topic, and a second plan could not change round 1: its off-topic queries go
PLAN_ASK_AGAIN = "ask again"  # off topic: the model is asked again for the queries round 1 can use


def replan_slots(limits: Limits) -> int:
    """How many planned queries round 1 searches: its searches less the question's own."""
    return max(0, limits.max_searches_per_round - 1)


def replan_choice(question: str, queries: Sequence[str], score: float, slots: int) -> str:
    """Seed 5's gate on a plan whose queries score `score` (decide.plan_relevance): kept at
    decide.PLAN_RELEVANCE_MIN or over; under it, asked again only when a second plan could change
    what round 1 searches (decide.replan_can_help, `slots` planned queries), else trimmed."""
    if score >= decide.PLAN_RELEVANCE_MIN:
        return PLAN_KEPT
    return PLAN_ASK_AGAIN if decide.replan_can_help(question, queries, slots) else PLAN_TRIMMED


def replanned(question: str, plan: planner.Plan, score: float, asked: Sequence[str]) -> tuple[planner.Plan, float]:
    """The plan after the model was asked again (`asked`: its new queries) and its score. Its queries
    are the on-topic ones of both tries, the new first (decide.on_topic_queries, the rule a trimmed
    plan follows): a plan was asked again because it was off topic, so neither try's off-topic
    queries are searched, whichever scores higher (a small model's second try can be "1", "d" or
    an echo of the prompt; none left: round 1 searches the question alone). The score is the
    better of the first plan's and the kept queries'. A plan whose queries missed the question
    went off topic as a whole, as a rule: its rewrite of the question gives way to the brief's
    own, and its gaps keep only those sharing a word with it."""
    kept = decide.on_topic_queries(question, plan.queries)
    new = decide.on_topic_queries(question, asked)
    queries = [*new, *[q for q in kept if q not in new]]
    plan, score = dataclasses.replace(plan, queries=queries), max(score, decide.plan_relevance(question, queries))
    if not decide.on_topic_queries(question, [plan.research_question]):
        plan = dataclasses.replace(plan, research_question=question)
    return dataclasses.replace(plan, gaps=[g for g in plan.gaps if decide.is_related(g, [question])]), score


def starting_plan(question: str, plan: planner.Plan, score: float) -> followup.Plan:
    """The plan the rounds start from: the question itself searched first (a weak model's plan
    cannot steer round 1 off topic), and a gap to answer it when the plan named none."""
    return followup.Plan(research_question=plan.research_question, angles=plan.angles,
                         gaps=plan.gaps or [f"direct answer to: {question}"],
                         queries=[question, *plan.queries], plan_relevance=round(score, 3))


def reusable_plan(brief: Brief, earlier_brief: dict[str, Any] | None, plan: followup.Plan | None,
                  earlier_report: dict[str, Any], today: str) -> followup.Plan | None:
    """The plan of this brief's last done run, when this run may take it instead of asking the
    model: the same question, context, focus and follows (followup.same_brief), made by the model
    (a template plan, its fallback, is asked for again) in this year (the answer cache keys plans
    by the date, and a plan of another year may aim its queries at that year). None: plan afresh."""
    if earlier_brief is None or plan is None or not followup.same_brief(earlier_brief, brief):
        return None
    if (earlier_report.get("fallbacks") or {}).get("plan") or str(earlier_report.get("finished_at"))[:4] != today[:4]:
        return None
    return plan


# ---- the synthesis: its sources and its length ----------------------------------------

SUMMARY_MIN_FIT_CHARS = PROSE_CHARS  # shorter, a summary's budget would be counted at 3 characters a token
SUMMARY_STEP_CHARS = 50  # a summary too long for the answer budget is shortened by this much at a time


def numbered_sources(evidence: Sequence[Mapping[str, Any]], cited: bool = True,
                     last_title: bool = False) -> list[Source]:
    """The evidence's pages numbered by first appearance, each titled by its first row's title (its
    URL when it has none), or its last row's (`last_title`: what the synthesis has always used):
    the numbers a summary cites, or, with no summary, those a report lists."""
    numbers: dict[str, int] = {}
    titles: dict[str, str] = {}
    for e in evidence:
        numbers.setdefault(e["url"], len(numbers) + 1)
        if last_title:
            titles[e["url"]] = e["title"] or e["url"]
        else:
            titles.setdefault(e["url"], e["title"] or e["url"])
    return [Source(n=n, url=url, title=titles[url], cited=cited) for url, n in numbers.items()]


def synthesis_lines(evidence: Sequence[Mapping[str, Any]]) -> list[planner.EvidenceLine]:
    """The quotes the synthesis prompt shows, in the order given, each with its source's number
    (numbered_sources) and its own row's title."""
    numbers = {s.url: s.n for s in numbered_sources(evidence)}
    return [planner.EvidenceLine(source_n=numbers[e["url"]], quote=e["quote"], title=e["title"] or e["url"])
            for e in evidence]


def summary_chars(quotes: int, ceiling: int) -> int:
    """The summary's length: what its quotes call for (planner.synthesis_chars), shortened until its
    largest answer fits the `num_predict` setting, so the grammar ends it before the budget does."""
    chars = planner.synthesis_chars(quotes)
    while chars > SUMMARY_MIN_FIT_CHARS and (answer_token_bound(planner.synthesis_schema(chars)) or 0) > ceiling:
        chars -= SUMMARY_STEP_CHARS
    return chars
