"""A done run's report.json, in the one shape every report has (report.blank_report).

The research loop used to write a done report's every key itself, a second copy of the shape
that `blank_report` (failed and cancelled briefs) keeps: a new key was two edits, and a key
missed in one of them went unnoticed until a reader met it. Here a done report is the blank
report filled with what the run found, and a key the shape does not have is refused. The parts
read from the evidence rows (each quote's entry, each source's) are pure functions of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...store import Store, utc_now
from ..core.brief import Brief
from ..core.settings import Settings
from ..core.untrusted import as_dict, as_list, fold
from ..model.hosts import model_hosts
from ..model.llm import ModelConfig
from ..rules import decide
from ..rules.citations import CITATION_RE, Source
from ..rules.amounts import SAME_FIGURE, SCALES, parse_amounts
from ..rules.decide import LoopState, answers, entry_of
from ..rules.judge import TIER_CAPS, TIERS, normalize_tier, tier_confidence, tier_rule
from ..rules.numbers import finite
from ..sources import egress
from ..sources.egress import EgressLog
from ..sources.sources import WEB, kind_of_url
from .report import REPORT_KEYS, blank_report, range_text, summary_first_sentence, summary_written


def weighed_confidence(tier: str | None, confidence: Any, *, contract: bool = False) -> float:
    """The confidence the rules give a quote, the one a report shows: the model's, capped by the
    source's tier (judge.tier_confidence: an estimate's and a hypothesis's rows are stored capped
    already, a plain brief's are not, so a library page the model called 1.00 showed 1.00 where any
    rule weighs it 0.6); under a contract the model's confidence is not read at all, the quote
    weighs its tier's cap (judge.contract_verdict)."""
    if contract:
        return TIER_CAPS[normalize_tier(tier)]
    return tier_confidence(tier, confidence if isinstance(confidence, (int, float)) else 0.0)


def evidence_items(rows: Sequence[Mapping[str, Any]], sources: Sequence[Source], *,
                   contract: bool = False) -> list[dict[str, Any]]:
    """report.json's `evidence`: each stored row as a reader sees it, with its source's number.
    `confidence` is the one the rules weigh (weighed_confidence; `contract`: the brief's hypothesis
    has a contract), `model_confidence` the model's own, as stored; `lead` the entry the quote lies in, before
    it (decide.entry_of: a definition's term line), which says what "The default is 65537 entries." is of."""
    by_url = {s.url: s.n for s in sources}
    return [
        {"source": by_url.get(e["url"]), "url": e["url"], "title": e["title"], "quote": e["quote"],
         "stance": e["stance"], "impact": e["impact"],
         "confidence": weighed_confidence(e["tier"], e["confidence"], contract=contract),
         "model_confidence": e["confidence"],
         "round": e["round"], "summary": e["summary"], "low": e["low"], "high": e["high"],
         "tier": e["tier"], "unit": e["unit"], "scope": e["scope"], "date": e["reading_date"],
         "page": e.get("page"), "read_at": e.get("read_at"), "reused_from": e.get("reused_from"),
         "lead": entry_of(e.get("lead") or "") or None}
        for e in rows
    ]


def source_items(sources: Sequence[Source], hashes: Mapping[str, str], rows: Sequence[Mapping[str, Any]] = (),
                 source_tiers: Sequence[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """report.json's `sources`; text_sha256: the page text each was read as, so a re-run can tell
    an edited page. Given the settings' `source_tiers` (and the evidence rows), each source also
    says what it weighed as: `tier` (the best tier among its evidence, None without any) and
    `tier_rule`, the source_tiers key that set it, None when the document is unrated (its tier is
    the model's label, capped: judge.capped_tier), so a reader sees why a manual weighed little."""
    items = [{"n": s.n, "url": s.url, "title": s.title, "cited": s.cited, "kind": kind_of_url(s.url),
              "text_sha256": hashes.get(s.url)} for s in sources]
    if source_tiers is not None:
        for item, s in zip(items, sources):
            tiers = [normalize_tier(e["tier"]) for e in rows if e["url"] == s.url and e["tier"]]
            rule = tier_rule(s.url, source_tiers)
            item.update(tier=min(tiers, key=TIERS.index, default=None), tier_rule=rule[0] if rule else None)
    return items


PLAN_KEYS = ("angles", "gaps", "open_questions")  # report.json's lists the model's plan and gaps fill


def done_report(brief_id: str, question: str, started_at: str | None, **found: Any) -> dict[str, Any]:
    """A done run's report: blank_report, status done, with `found` filled in, and its `answer`
    (answer_of) read from them. `source_file` is the worker's to fill (it knows the file). A key
    outside the shape (REPORT_KEYS) is refused."""
    unknown = sorted(set(found) - set(REPORT_KEYS))
    if unknown:
        raise ValueError(f"not keys of report.json: {', '.join(unknown)}; add them to report.REPORT_KEYS "
                         f"and blank_report first")
    report = blank_report(brief_id, "", question, started_at, status="done")
    report.update(source_file=None, **found)
    for key in PLAN_KEYS:  # what the model planned, as text: never its JSON's punctuation
        report[key] = plan_text(as_list(report[key]))
    report["answer"] = answer_of(report).as_dict()  # read from the report it heads: one rule for every reader
    return report


def usage_block(model: Mapping[str, Any], searches: int, state: LoopState, wall_seconds: float,
                evidence: Sequence[Mapping[str, Any]], given_up: str) -> dict[str, Any]:
    """report.json's `usage`: the model calls as the store counted them (`model`), the searches,
    what the state counted of pages, fallbacks and skipped calls, the wall time, and the evidence
    taken from an earlier run. `given_up`: the word the loop marks a straggler never read with."""
    return {
        "llm_calls": model["llm_calls"],
        "prompt_tokens": model["prompt_tokens"],
        "completion_tokens": model["completion_tokens"],
        "searches": searches,
        "pages_fetched": state.pages_fetched,
        "page_cache_hits": state.page_cache_hits,
        # of those, the pages the store's own search offered (read by earlier briefs, on this
        # brief's topic): what looking in the store first found, read without a fetch
        "pages_reused": state.pages_reused,
        # stored pages past max_age that their server said are unchanged (304: read from the store)
        "pages_not_modified": state.pages_not_modified,
        "page_bytes": state.page_bytes,  # bytes of page bodies downloaded (decoded)
        "documents_read": state.local_reads,
        "llm_cache_hits": model["llm_cache_hits"],
        "wall_seconds": round(wall_seconds, 3),
        "llm_seconds": model["llm_seconds"],
        # how the model's answers were made usable (a replayed answer counts where it was paid for)
        "repaired_answers": model["repaired_answers"],
        "retried_answers": model["retried_answers"],
        "fallback_answers": model["fallback_answers"],
        "poisoned_answers": model["poisoned_answers"],  # refused by the server every time: fallback used
        # failures kept by an earlier run of the same prompt (model and options unchanged): its fallback again
        "replayed_failures": model["replayed_failures"],
        "fallbacks": dict(state.fallbacks),
        # answered model calls by how their JSON was asked for: schema (constrained by it), json (JSON mode, the
        # schema in the prompt), none (the schema in the prompt only): a server that refuses a kind is asked the next
        "structured_output": model["structured"],
        "calls_skipped": dict(state.calls_skipped),  # model calls not made: they could not help
        # pages a round went on without (stragglers), and those of them never read
        "late_pages": len(state.late),
        "late_pages_given_up": sum(1 for what in state.late.values() if what == given_up),
        "page_wait_seconds": round(state.page_wait_s, 3),  # the model idle, waiting for a page
        # evidence taken from an earlier run (a follow-up's parent), not read again
        "evidence_reused": sum(1 for e in evidence if e.get("reused_from") is not None),
    }


# ---- a run's report: assembled here from the run, which the loop hands over whole ---------------


@dataclass(frozen=True)
class Judged:
    """What the brief's kind computes for its report from the evidence (the research policy's blocks): the
    verdict of a hypothesis, the range of an estimate, and the evidence side by side; None where the kind has
    none."""

    verdict: dict[str, Any] | None
    estimate: dict[str, Any] | None
    sides: dict[str, Any] | None


class Spending(Protocol):
    """What a run has spent, as report.json's `usage` says it (usage_block), from its evidence rows."""

    def usage(self, evidence: list[dict[str, Any]] | None = None) -> dict[str, Any]: ...


class Clients(Protocol):
    """The settings and the model a run was given."""

    settings: Settings
    model: ModelConfig


class ReportedRun(Protocol):
    """A run as its report.json is assembled from it (the research loop's Research implements it): the brief,
    the store holding the run's rows, the loop's state, what it was given and what it spent, and the two things
    only the research side can say, the kind's judgement and the parent a follow-up started from. The loop
    hands itself over rather than each of report.json's keys, so a new key is written here, once."""

    brief: Brief
    started_at: str
    run_id: int
    store: Store
    state: LoopState
    egress: EgressLog

    @property
    def svc(self) -> Clients: ...

    @property
    def sources(self) -> Sequence[str]: ...  # the kinds of source the brief searched (sources.chosen)

    @property
    def ledger(self) -> Spending: ...

    def judged(self, rows: list[dict[str, Any]], evidence: list[dict[str, Any]], tokens: int) -> Judged: ...

    def follows_block(self) -> dict[str, Any] | None: ...


def run_report(run: ReportedRun, summary: str, sources: list[Source], note: str | None) -> dict[str, Any]:
    """report.json of a run (done_report's shape), from the store's rows of the run and its state: `summary`
    and its numbered `sources` as the synthesis left them (none for a run that ended before it), `note` what
    a run that ended early says before its evidence (report.json's `disclaimer`)."""
    rows = run.store.evidence(run.run_id)
    hypothesis = run.brief.hypothesis
    evidence = evidence_items(rows, sources, contract=bool(hypothesis and hypothesis.contract))
    usage = run.ledger.usage(rows)
    judged = run.judged(rows, evidence, usage["prompt_tokens"] + usage["completion_tokens"])
    verdict, estimate, state, settings = judged.verdict, judged.estimate, run.state, run.svc.settings
    gaps = [g.text for g in state.open_gaps()]
    asks = decide.open_questions(
        run.brief.question, state.research_question, gaps,
        had_evidence=bool(evidence), verdict=verdict["value"] if verdict else None,
        estimate=(estimate["final"]["low"], estimate["final"]["high"], estimate["unit"],
                  state.stop_reason == decide.TARGET_REACHED) if estimate else None)
    return done_report(
        run.brief.id, run.brief.question, run.started_at,
        sides=judged.sides,
        research_question=state.research_question,
        angles=state.angles,
        plan_relevance=state.plan_relevance,
        finished_at=utc_now(),
        stop_reason=state.stop_reason,
        stop_explanation=state.stop_explanation,
        summary=summary,
        disclaimer=note,
        sources=source_items(sources, run.store.page_hashes([s.url for s in sources]), rows, settings.source_tiers),
        searched=list(run.sources),
        egress=run.egress.block(egress.service_roles(settings.searxng_url, model_hosts(settings))),
        distrusted=[{"url": url, "reason": reason} for url, reason in state.distrusted.items()],
        evidence=evidence,
        estimate=estimate,
        verdict=verdict,
        open_questions=asks,
        gaps=gaps,
        queries=run.store.queries(run.run_id),
        usage=usage,
        fallbacks=dict(state.fallbacks),
        model=run.svc.model.model,
        searxng_url=settings.searxng_url if WEB in run.sources else None,  # only if used
        error=None,
        follows=run.follows_block(),
    )


# ---- the answer line ------------------------------------------------------------------------------

DECIDED = frozenset({"supported", "refuted"})  # a verdict that answers the claim; inconclusive does not
SUMMARY, QUOTE, RANGE, VERDICT = "summary", "quote", "range", "verdict"  # where an answer line comes from


@dataclass(frozen=True)
class Answer:
    """report.json's `answer` (docs/contract.md): whether the run found an answer, and the line that
    says it, or says that none was found. What `briefd list`, the web page, on_finish and
    report.md lead with, so a miss is never shown as an answer (an estimate that read nothing
    used to lead with its own prior, in the same words as a range the sources gave)."""

    found: bool
    text: str
    source: str | None = None  # report.json's `from`: summary | quote | range | verdict; None for a miss

    def as_dict(self) -> dict[str, Any]:
        return {"found": self.found, "text": self.text, "from": self.source}


def answer_of(report: Mapping[str, Any]) -> Answer:
    """The answer a report states, by the brief's kind: an estimate's range only where the
    sources moved it from the prior, a decided verdict, a plain brief's summary only where the
    model wrote one from kept evidence. Anything else is a miss, said in words."""
    estimate = as_dict(report.get("estimate"))
    if estimate:
        return _estimate_answer(estimate, as_list(report.get("evidence")))
    verdict = as_dict(report.get("verdict"))
    if verdict:
        return _verdict_answer(verdict, as_list(report.get("evidence")))
    return _plain_answer(report)


def _estimate_answer(estimate: Mapping[str, Any], evidence: list[Any]) -> Answer:
    """A range the sources moved, or the prior said to be the prior."""
    unit = fold(estimate.get("unit"))
    final, initial = range_text(estimate.get("final")), range_text(estimate.get("initial"))
    if not final:
        return Answer(False, "No range was computed")
    moved = _bounds(estimate.get("final")) != _bounds(estimate.get("initial"))
    if moved or not initial:
        return Answer(True, f"{final} {unit}".strip(), RANGE)
    read = sum(1 for e in evidence if as_dict(e).get("low") is not None)
    prior = f"the range is your prior, unchanged ({initial} {unit})".replace(" )", ")")
    if not evidence:
        return Answer(False, f"No source was kept; {prior}")
    if not read:  # a kept quote may state it in words the figure rules did not read: not "no source stated it"
        quotes = f"{len(evidence)} quote{'' if len(evidence) == 1 else 's'}"
        return Answer(False, f"No figure in {unit or 'the unit'} was read from the {quotes} kept; {prior}")
    figures = "figure" if read == 1 else "figures"
    return Answer(False, f"The {read} {figures} read did not move the range; {prior}")


def _bounds(value: Any) -> tuple[Any, Any]:
    rng = as_dict(value)
    return rng.get("low"), rng.get("high")


def _verdict_answer(verdict: Mapping[str, Any], evidence: list[Any]) -> Answer:
    """A decided verdict, or a verdict that decided nothing, said so."""
    value = fold(verdict.get("value")) or "undecided"
    level = fold(verdict.get("evidence_level")) or "no level"
    if value in DECIDED:
        return Answer(True, f"{value} ({level})", VERDICT)
    if not evidence:
        return Answer(False, f"No source was kept; the verdict is {value} ({level})")
    return Answer(False, f"The sources kept did not decide the claim; the verdict is {value} ({level})")


def _plain_answer(report: Mapping[str, Any]) -> Answer:
    """A summary the model wrote from kept evidence; where it wrote none, the kept quote that best answers the
    question (best_quote), verbatim and cited, as a quote; else what there is instead, in words. A reader who
    stops at the first line was told "none found" above a quote that states the answer."""
    evidence = as_list(report.get("evidence"))
    summary = summary_first_sentence(report.get("summary"))
    wrote = summary_written(report)
    if not evidence:
        searched = list(dict.fromkeys(fold(as_dict(q).get("text")) for q in as_list(report.get("queries"))))
        said = f"; searched: {'; '.join(searched[:5])}{' …' if len(searched) > 5 else ''}" if searched else ""
        return Answer(False, "No source was found" + ("; the summary rests on the model alone" if wrote else said))
    best = best_quote(evidence, fold(report.get("question")))
    if wrote and not drops_figure(summary, best):
        return Answer(True, summary, SUMMARY)
    if best is not None:
        n = best.get("source")
        cite = f" [{n}]" if isinstance(n, int) and not isinstance(n, bool) else ""
        return Answer(True, f"\u201c{fold(best.get('quote'))}\u201d{cite}", QUOTE)
    sources = len({fold(as_dict(e).get("url")) for e in evidence})
    quotes = f"{len(evidence)} quote{'' if len(evidence) == 1 else 's'}"
    return Answer(False, f"The model wrote no summary; {quotes} from {sources} source"
                         f"{'' if sources == 1 else 's'} kept, none of them bearing on the question itself")


def _figures(text: str) -> list[float]:
    """The numbers `text` states, each at its scale ("2 million": 2e6)."""
    return [a.value * SCALES.get(a.scale_word or "", 1.0) for a in parse_amounts(text)]


def drops_figure(summary: str, best: Mapping[str, Any] | None) -> bool:
    """Whether a summary's first sentence states none of the figures of the kept quote that best answers the
    question (best_quote), where that quote states one: the model said what the quote is about and left out what
    it says ("According to tcp, tcp_syn_retries (integer [1]." above "tcp_syn_retries (integer; default: 6; ...)").
    A figure of the summary's own words does not count ("According to source 1", "Lua 5.2 Reference Manual"), nor
    do its citation marks. Code checks what the model wrote; the answer line is then that quote, verbatim, and
    the summary stays below it."""
    stated = _figures(fold(best.get("quote"))) if best is not None else []
    said = _figures(CITATION_RE.sub("", summary))
    return bool(stated) and not any(math.isclose(x, y, rel_tol=SAME_FIGURE) for x in stated for y in said)


def best_quote(evidence: Sequence[Any], question: str) -> dict[str, Any] | None:
    """The kept quote that best answers `question` (decide.answers, then the rules' confidence, then report
    order), or None when none bears on the question itself (a quote kept for an open gap only)."""
    items = [as_dict(e) for e in evidence if fold(as_dict(e).get("quote"))]
    scored = [(answers(fold(e.get("quote")), f"{fold(e.get('title'))}\n{fold(e.get('lead'))}", [question]),
               finite(e.get("confidence")) or 0.0, -i, e) for i, e in enumerate(items)]
    if not scored:
        return None
    strength, _, _, best = max(scored, key=lambda row: row[:3])
    return best if strength[0] else None


# ---- the plan as the report shows it -------------------------------------------------------------

_WORD = re.compile(r"[^\W\d_]{2,}")  # two letters in a row, in any script: a word, not a bracket or a digit


def plan_text(fragments: Iterable[Any]) -> list[str]:
    """The plan's angles and gaps that are text: a small model's plan can leave JSON's punctuation
    behind as items (`},`, `][`), which a report listed as the angles researched."""
    return [fold(f) for f in fragments if _WORD.search(fold(f))]
