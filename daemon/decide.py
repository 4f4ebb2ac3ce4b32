"""The decision core: pure, typed, no I/O. The model proposes; these rules decide.

Everything that chooses what happens next in a brief lives here, so it can be
tested with plain tables of cases: which queries to run (never one already
asked), which URLs to fetch (never one visited or known bad), when to stop and
why, and the loop state itself (seed 4), which is explicit and serialisable so
it can be checkpointed after every step and shown by `briefd status`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

STOPWORDS = frozenset(
    """a an and are as at be been by can could did do does for from had has have how i if in
    into is it its of on or over per so than that the their there these this those to was were
    what when where which who why will with would about after before between during than
    under vs versus""".split()
)

# Stop reasons (report.json `stop_reason`).
MAX_ROUNDS, BUDGET, STALLED, GAPS_CLOSED, EXHAUSTED, CANCELLED = (
    "max_rounds", "budget", "stalled", "gaps_closed", "exhausted", "cancelled",
)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def content_words(text: str) -> list[str]:
    """Lower-cased words minus stopwords, in order, without repeats."""
    out: list[str] = []
    for word in _TOKEN.findall(text.lower()):
        if word not in STOPWORDS and word not in out:
            out.append(word)
    return out


def normalize_query(query: str) -> str:
    """Two queries are the same search when they have the same content words in any order."""
    return " ".join(sorted(content_words(query)))


def is_duplicate_query(query: str, asked: Iterable[str], threshold: float = 0.8) -> bool:
    """Same content words, or near enough (Jaccard ≥ threshold), as a query already used."""
    words = set(content_words(query))
    if not words:
        return True
    for other in asked:
        other_words = set(content_words(other))
        if not other_words:
            continue
        if words == other_words:
            return True
        if len(words & other_words) / len(words | other_words) >= threshold:
            return True
    return False


def relevance(text: str, topics: Sequence[str]) -> float:
    """Share of the topics' content words that `text` contains (0..1): a cheap, explainable
    measure used to order evidence and to refuse quotes that are about something else."""
    wanted = {w for topic in topics for w in content_words(topic)}
    if not wanted:
        return 0.0
    return len(wanted & set(content_words(text))) / len(wanted)


PLAN_RELEVANCE_MIN = 0.6


def plan_relevance(question: str, queries: Sequence[str]) -> float:
    """Seed 5's relevancy gate, computed: how much of the question the planned queries cover (0..1).

    Each query scores twice its share of the question's content words, capped at 1 (a query
    carrying half the question's words is fully on topic); the plan scores their mean.
    """
    if not queries:
        return 0.0
    return sum(min(1.0, 2 * relevance(q, [question])) for q in queries) / len(queries)


def is_related(text: str, topics: Sequence[str]) -> bool:
    """A quote that shares no content word with the question or any open gap is not evidence for it."""
    return relevance(text, topics) > 0.0


# Text that talks to a model rather than about the world: the usual shapes of a prompt
# injection planted in a page. Narrow on purpose (a page *about* prompt injection may still
# be quoted when it describes rather than commands); a false positive costs one quote.
_ADDRESSES_A_MODEL = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+)?"
    r"(previous|prior|above|earlier|preceding|system)\s+(instructions?|prompts?|messages?|rules)"
    r"|\b(system|developer|admin)\s+(note|prompt|message|instructions?|override)\s*:"
    r"|\bnew\s+instructions?\s*:"
    r"|(^|[.!?]\s+)(please\s+)?(report|answer|respond|reply|say|state|conclude|tell\s+the\s+user)\s+that\b",
    re.IGNORECASE,
)


def addresses_a_model(text: str) -> bool:
    """True when a quote is an instruction to the reader-model (a prompt injection), not evidence.

    briefd's model only points at sentence ids and the rules compute every number and verdict,
    so an injection cannot steer them; this keeps it out of the quotes and the summary too.
    """
    return _ADDRESSES_A_MODEL.search(" ".join(text.split())) is not None


def clean_query(query: str, max_chars: int = 200) -> str:
    return " ".join(query.split())[:max_chars].strip()


@dataclass
class Gap:
    """Something the brief still needs to know. Answered gaps stay, marked with the round."""

    id: str
    text: str
    answered_round: int | None = None

    @property
    def open(self) -> bool:
        return self.answered_round is None


@dataclass
class LoopState:
    """Seed 4's explicit state: everything the loop knows, checkpointed after every step."""

    phase: str = "plan"                  # plan → rounds → synthesis → done
    round: int = 0                       # rounds completed
    research_question: str = ""
    angles: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    pending_queries: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    bad: dict[str, str] = field(default_factory=dict)
    new_evidence_per_round: list[int] = field(default_factory=list)
    results_per_round: list[int] = field(default_factory=list)
    evaluator_failures: int = 0
    pages_fetched: int = 0
    page_cache_hits: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    next_action: str = "plan"
    why: str = "a new brief starts with a plan"
    stop_reason: str | None = None
    current_round: dict[str, Any] = field(default_factory=dict)  # {round, queries, urls}: replayed on resume
    remaining: dict[str, Any] = field(default_factory=dict)  # budgets left: rounds, tokens, seconds, pages
    plan_relevance: float | None = None  # seed 5's gate: how well the plan covers the question
    estimate_history: list[dict[str, Any]] = field(default_factory=list)  # {round, low, high, progress_score, tokens}
    numbers_discarded: int = 0           # numbers the model proposed that code discarded (judge.read_figure)
    figures_discarded: dict[str, int] = field(default_factory=dict)  # the same, counted by their reason

    def open_gaps(self) -> list[Gap]:
        return [g for g in self.gaps if g.open]

    def count_fallback(self, name: str) -> None:
        self.fallbacks[name] = self.fallbacks.get(name, 0) + 1

    def add_gaps(self, texts: Iterable[str], max_open: int = 8) -> list[Gap]:
        """Add new gaps (not duplicates of known ones), keeping at most `max_open` open."""
        added: list[Gap] = []
        known = [g.text for g in self.gaps]
        for text in texts:
            text = " ".join(str(text).split())[:300]
            if not text or is_duplicate_query(text, known, threshold=0.7):
                continue
            if len(self.open_gaps()) >= max_open:
                break
            gap = Gap(id=f"G{len(self.gaps) + 1}", text=text)
            self.gaps.append(gap)
            known.append(text)
            added.append(gap)
        return added

    def answer_gap(self, gap_id: str, round_: int) -> bool:
        for gap in self.gaps:
            if gap.id == gap_id and gap.open:
                gap.answered_round = round_
                return True
        return False

    def add_queries(self, queries: Iterable[str]) -> list[str]:
        """Queue new queries, dropping any that repeat an asked or already queued one."""
        added: list[str] = []
        for query in queries:
            query = clean_query(str(query))
            if not query or is_duplicate_query(query, [*self.asked, *self.pending_queries]):
                continue
            self.pending_queries.append(query)
            added.append(query)
        return added

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoopState":
        data = dict(data)
        data["gaps"] = [Gap(**g) for g in data.get("gaps", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Limits:
    """A brief's caps and budgets, resolved from its depth preset and fields."""

    max_rounds: int
    max_searches_per_round: int
    pages_per_round: int
    budget_tokens: int | None = None
    budget_seconds: float | None = None
    budget_pages: int | None = None


@dataclass(frozen=True)
class Usage:
    tokens: int
    seconds: float
    pages: int


def stop_reason(state: LoopState, limits: Limits, usage: Usage) -> str | None:
    """Why the rounds should stop now, or None to run another round.

    Checked before every round, in this order: a hard budget beats everything; then the
    round cap; then stalling (no new evidence for 2 rounds: more of the same won't help);
    then success (every gap answered). Running out of queries is checked by the caller,
    which knows whether it could still make one.
    """
    if limits.budget_tokens is not None and usage.tokens >= limits.budget_tokens:
        return BUDGET
    if limits.budget_seconds is not None and usage.seconds >= limits.budget_seconds:
        return BUDGET
    if limits.budget_pages is not None and usage.pages >= limits.budget_pages:
        return BUDGET
    if state.round >= limits.max_rounds:
        return MAX_ROUNDS
    if len(state.new_evidence_per_round) >= 2 and not any(state.new_evidence_per_round[-2:]):
        return STALLED
    if state.round >= 1 and state.gaps and not state.open_gaps():
        return GAPS_CLOSED
    return None


def fallback_queries(question: str, gaps: Sequence[Gap]) -> list[str]:
    """Queries made without the model: the question's content words, then each open gap's."""
    words = content_words(question)
    queries = [" ".join(words[:8])] if words else []
    for gap in gaps:
        gap_words = [w for w in content_words(gap.text) if w not in words[:3]]
        if gap_words:
            queries.append(" ".join((words[:3] + gap_words)[:8]))
    return [q for q in queries if q]


def take_queries(state: LoopState, question: str, n: int) -> list[str]:
    """This round's queries: pending ones first, then fallbacks from open gaps; never a repeat."""
    if not state.pending_queries:
        state.add_queries(fallback_queries(question, state.open_gaps() or state.gaps))
    chosen = state.pending_queries[:n]
    state.pending_queries = state.pending_queries[n:]
    return chosen


def choose_urls(candidates: Sequence[str], state: LoopState, known_bad: dict[str, str], n: int) -> list[str]:
    """Up to n URLs in search-rank order, skipping visited ones and those known to be bad."""
    out: list[str] = []
    for url in candidates:
        if url in out or url in state.visited or url in state.bad or url in known_bad:
            continue
        out.append(url)
        if len(out) >= n:
            break
    return out


def next_action(state: LoopState, reason: str | None) -> tuple[str, str]:
    """Seed 4's reflect step, in words: what happens next and why (shown by `briefd status`)."""
    if reason is not None:
        return "finalize", f"stop: {reason}"
    open_gaps = state.open_gaps()
    if state.round == 0:
        return "search_more", "first round: search the planned queries"
    if open_gaps:
        return "search_more", f"{len(open_gaps)} open gap(s): {open_gaps[0].text[:80]}"
    return "search_more", "no gaps recorded; searching for more evidence"


def open_questions(question: str, research_question: str, open_gaps: Sequence[str], *,
                   had_evidence: bool, verdict: str | None = None,
                   estimate: tuple[float, float, str, bool] | None = None) -> list[str]:
    """What the requester could clarify: an unattended daemon cannot ask, so the report says.

    `estimate` is (low, high, unit, target_reached)."""
    asks: list[str] = []
    if research_question and normalize_query(research_question) != normalize_query(question):
        asks.append(f"The question was researched as \u201c{research_question}\u201d; say so in a new brief "
                    f"if you meant something else.")
    if not had_evidence:
        asks.append("No usable sources were found: which documents or domains should be searched "
                    "(search.include_domains), or what other words describe the subject?")
    for gap in list(open_gaps)[:5]:
        asks.append(f"Still open: {gap}. A source you trust, or a narrower scope, would help.")
    if estimate is not None and not estimate[3]:
        low, high, unit, _ = estimate
        asks.append(f"The range {low:g}\u2013{high:g} {unit} did not reach the target width: a narrower "
                    f"definition (period, place, what counts) would let it narrow further.")
    if verdict == "inconclusive":
        asks.append("The evidence does not decide the claim: which kind of source would you accept as "
                    "authoritative, or which part of the claim matters most?")
    return asks


def remaining_budgets(state: LoopState, limits: Limits, usage: Usage) -> dict[str, Any]:
    """What is left of each budget (None: no such budget), for checkpoints and `briefd status`."""
    def left(cap: float | None, used: float) -> float | None:
        return None if cap is None else max(0, round(cap - used, 1))
    return {
        "rounds": max(0, limits.max_rounds - state.round),
        "tokens": left(limits.budget_tokens, usage.tokens),
        "seconds": left(limits.budget_seconds, usage.seconds),
        "pages": left(limits.budget_pages, usage.pages),
    }
