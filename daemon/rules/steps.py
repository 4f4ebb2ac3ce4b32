"""The research loop's own rules, one pure function each (issue 20: "Research only sequences").

The loop (daemon/research/loop.py) used to decide these inline, where only the lab could reach
them. Each takes plain data (the loop state, the limits, counts, labels, texts) and returns a
decision, so each has a table test (tests/rules/test_loop_rules.py) and a change of rule is one
function and one table row. Nothing here does I/O or imports the loop; the kind-dependent
rules (when to stop, which queries to aim) stay in research/policy.py, the stop rule in decide.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import decide, layout
from .decide import Gap, Limits, LoopState

SNIPPETS_PER_PAGE = 2  # fetch_pages: false reads up to this many snippets for each page a round may read


def pages_read(state: LoopState) -> int:
    """Pages this run has read, however they came (fetched, cached, confirmed unchanged, on this
    machine): what the page budget counts."""
    return state.pages_fetched + state.page_cache_hits + state.pages_not_modified + state.local_reads


def pages_allowed(limits: Limits, read: int) -> int:
    """How many pages a round may choose: its pages per round, cut to what the page budget has left
    after `read` pages (never below 0)."""
    n = limits.pages_per_round
    if limits.budget_pages is not None:
        n = min(n, max(0, limits.budget_pages - read))
    return n


def snippets_allowed(limits: Limits) -> int:
    """How many search snippets a round of a fetch_pages: false brief reads (its best-ranked ones)."""
    return limits.pages_per_round * SNIPPETS_PER_PAGE


# A page's fate after its read failed: what the store remembers of it (mark_bad)
FATE_THIS_BRIEF = "this brief"  # a passing failure: not read again by this brief, tried again by the next
FATE_SLOW = "slow"              # too slow: no brief fetches it for a while, then it is tried again
FATE_BAD = "bad"                # a permanent failure: no brief fetches it again


def page_fate(transient: bool, slow: bool) -> str:
    """What becomes of a page whose read failed. Too slow outranks transient (a timeout is both):
    a slow page is remembered for a while, so the next briefs do not wait for it again; another
    passing failure (a 503, a reset) is not remembered past this brief; any other is for good."""
    if slow:
        return FATE_SLOW
    return FATE_THIS_BRIEF if transient else FATE_BAD


# ---- what evidence is kept (integrate) ----------------------------------------------------------

UNRELATED = "unrelated to the question and gaps"
QUOTES_WORTH_A_SUMMARY = 2
"""A summary is asked for only from this many kept quotes: from none the model could only answer alone, and one
quote is its own best statement (issue 28's decision: no synthesis call for a report of zero quotes or one)."""
DUPLICATE = "duplicate quote"
CONTAINED = "contained in a quote kept from the same page"
GAP_ANSWER_CONFIDENCE = 0.5  # the model's confidence at which its item answers the gap it names


def topics(question: str, brief_question: str, gaps: Sequence[Gap]) -> list[str]:
    """What evidence must be about: the research question, the brief's question, the open gaps."""
    return [question, brief_question, *[g.text for g in gaps]]


def skipped_quote(quote: str, url: str, title: str, from_page: bool, distrusted: Mapping[str, str],
                  about: Sequence[str], known: Collection[tuple[str, str]], *,
                  context: str = "", unit_kind: str = "") -> dict[str, Any] | None:
    """Why a quote the model chose is not kept, as its evidence_skipped event says it; None: keep it.

    The filters, in order: from a page distrusted (an injection, even one found in this very
    answer); not a statement (a heading, a headline, a menu: decide.not_a_statement); not bearing on
    the question or an open gap (`about`: decide.bears_on), read with the page's title and its
    `context`, the passage it was quoted from (the loop should pass it: without it, a quote that
    names its subject only in the sentence before has the title alone to name it); the same quote
    of the same page kept already (`known`: (url, quote) pairs), or a part of one (CONTAINED). A quote whose
    sentence ids the
    prompt did not have never gets here (the loop counts it as an evaluator failure). `unit_kind`: what the
    document marks the quote's part as (rules/layout.py): its navigation and its headings are never evidence,
    whatever their words."""
    if url in distrusted:
        return {"url": url, "quote": quote[:200], "reason": f"from a distrusted page: {distrusted[url]}"}
    not_evidence = layout.not_evidence(unit_kind) or decide.not_a_statement(quote, title, from_page=from_page)
    if not_evidence:
        return {"reason": not_evidence, "url": url, "quote": quote[:200]}
    if not decide.bears_on(quote, about, context=f"{title}\n{context}", document=f"{title}\n{url}"):
        return {"reason": UNRELATED, "url": url, "quote": quote[:200]}
    if decide.states_no_figure(quote, [t for t in about if t]):
        return {"reason": decide.STATES_NO_FIGURE, "url": url, "quote": quote[:200]}
    if (url, quote) in known:
        return {"reason": DUPLICATE, "url": url}
    if any(u == url and quote in kept for u, kept in known):
        return {"reason": CONTAINED, "url": url, "quote": quote[:200]}
    return None


def contained_quotes(url: str, quote: str, known: Collection[tuple[str, str]]) -> list[str]:
    """The quotes kept from the same page that a new quote contains: the new one says all they say, so a report
    shows it alone (a model that quotes a sentence, then that sentence with the one before it, kept both, and
    a report showed the second quote's sentence twice)."""
    return [kept for u, kept in known if u == url and kept != quote and kept in quote]


def answers_gap(gap: str, confidence: float) -> bool:
    """Whether a kept item answers the gap it names: named, and the model at least
    GAP_ANSWER_CONFIDENCE sure (its own confidence, before the tier cap)."""
    return bool(gap) and confidence >= GAP_ANSWER_CONFIDENCE


def off_topic(proposals: Sequence[str], about: Sequence[str]) -> list[str]:
    """The proposed queries and gaps that share no word with the question or an open gap, by the
    rule a quote is judged by (decide.is_related): a small model echoes "what should I do next"."""
    return [p for p in proposals if not decide.is_related(p, about)]


# ---- which passages a call reads, and when a call is skipped (read_batch) -------------------------

def focus(question: str, gaps: Sequence[Gap]) -> str:
    """What a batch's passages are ranked against: the research question and the open gaps."""
    return " ".join([question, *[g.text for g in gaps]])


@dataclass(frozen=True)
class PassageCut:
    """A batch's passages as one evidence call takes them (passage_cut)."""

    ranked: tuple[int, ...]  # the matching passages, best first, cut to the call's limit
    read: tuple[int, ...]    # of those, the ones the call reads: they could give a quote the rules keep

    @property
    def skip_call(self) -> bool:
        """Passages matched, none could give a kept quote: a call cannot change the outcome."""
        return bool(self.ranked) and not self.read


def passage_cut(passages: Mapping[int, str], matches: Collection[int], focus_text: str, about: Sequence[str],
                limit: int, kinds: Mapping[int, str] | None = None) -> PassageCut:
    """Which of a batch's passages (id → text, in batch order) an evidence call reads. Which match
    is the index's word (`matches`); their order is decide.bm25_order's among themselves, so the
    same passages always make the same prompt however much the store holds; the top `limit` are
    taken, and of those only the ones that bear on the question or an open gap (decide.bears_on,
    the rule a quote is kept by: a passage sharing one common word holds no quote it would keep). A passage
    its document marks as navigation or headings only (`kinds`: layout.kind_of of each whole passage) holds no
    quote either, and is never shown."""
    kinds = kinds or {}
    matching = [i for i in passages if i in matches and not layout.not_evidence(kinds.get(i, ""))]
    ranked = [matching[n] for n in decide.bm25_order([passages[i] for i in matching], focus_text)][:limit]
    return PassageCut(ranked=tuple(ranked), read=tuple(i for i in ranked if decide.bears_on(passages[i], about)))
