"""The outbox side of a brief: report.json/.md/.html, earlier runs kept, rejections kept.

Everything here treats page text and model text as hostile. A quote is a verbatim span of
some web page and the summary is what a small model wrote after reading such spans, so
every string goes through daemon/core/untrusted.py: `clean` again (a stored report may predate
the door), then the one escape of the format. report.md folds and escapes them so they
cannot add headings, links, images or raw HTML to the report; the summary, the one field
that keeps structure, is parsed into a few pieces and each piece's text escaped.
report.html is that same Markdown rendered by markdown-it-py (raw HTML off, a link
validator that lets through only http(s) URLs, #source-n anchors and the charts), so the
two reports cannot disagree; a Content-Security-Policy forbids scripts and every load. The
charts (daemon/report/charts.py, SVG drawn from this same report) are files beside report.md and
inline figures in report.html.

Both lead with the answer: the question, the computed range against its target or the
verdict and what its evidence level means, why research stopped, then the summary; the
evidence that decided it, side by side, sources; the method (plan, queries, usage) last.

The report dict *is* report.json (docs/contract.md): the renderers read it and never add to it.
Outbox paths go through `safe_outdir`, and nothing already in an outbox folder is ever
deleted: `archive_previous` moves an earlier run aside before a new one writes.

This module is the report's shape (its keys, `blank_report`) and what a report says, read
the same way by every reader (`answer_text`, `history_row`, `evidence_by_source`); one job
a module beside it: the summary parsed and rendered (summary.py), Markdown's pieces
(markup.py), report.md (markdown.py, its "What changed" section in changes_md.py),
report.html (html.py), and the files in the outbox (outbox.py).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..core.untrusted import as_dict, as_list, clean, fold
from ..rules.decide import answers, leans_on_before
from ..rules.numbers import SPAN, finite, number_text


# report.json keys: the contract's, then the ones briefd adds. `blank_report` fills them all.
CONTRACT_KEYS: tuple[str, ...] = (
    "id", "source_file", "status", "question", "started_at", "finished_at", "stop_reason",
    "summary", "sources", "evidence", "estimate", "verdict", "gaps", "queries", "usage",
)
EXTRA_KEYS: tuple[str, ...] = (
    "research_question", "angles", "disclaimer", "error", "fallbacks", "model", "searxng_url",
    "open_questions", "plan_relevance", "sides", "chart", "stop_explanation", "distrusted", "searched",
    "egress", "changes", "follows", "answer",
)
REPORT_KEYS: tuple[str, ...] = CONTRACT_KEYS + EXTRA_KEYS
USAGE_KEYS: tuple[str, ...] = (
    "llm_calls", "prompt_tokens", "completion_tokens", "searches", "pages_fetched",
    "page_cache_hits", "pages_reused", "pages_not_modified", "page_bytes", "documents_read", "llm_cache_hits",
    "wall_seconds", "llm_seconds",
    "repaired_answers", "retried_answers", "fallback_answers", "poisoned_answers", "replayed_failures",
    "late_pages", "late_pages_given_up", "page_wait_seconds", "evidence_reused",
)

ANSWER_TEXT_CHARS = 200  # the answer line `briefd list` shows: the first sentence, cut here


def blank_report(brief_id: str, source_file: str, question: str, started_at: str | None,
                 status: str = "failed") -> dict[str, Any]:
    """A report.json with every key present, so a failed or cancelled brief still has the
    full shape: the worker fills in what is known (ending.ended_report)."""
    return {
        "id": brief_id,
        "source_file": source_file,
        "status": status,
        "question": question,
        "started_at": started_at,
        "finished_at": None,
        "stop_reason": None,
        "stop_explanation": None,
        "summary": "",
        "sources": [],
        "evidence": [],
        "estimate": None,
        "verdict": None,
        "gaps": [],
        "queries": [],
        "usage": {key: (0.0 if key.endswith("seconds") else 0) for key in USAGE_KEYS},
        "research_question": None,
        "angles": [],
        "disclaimer": None,
        "error": None,
        "fallbacks": {},
        "model": None,
        "searxng_url": None,
        "open_questions": [],
        "plan_relevance": None,
        "sides": None,
        "chart": None,
        "distrusted": [],
        "searched": [],
        "egress": None,
        "changes": None,  # what changed since the id's previous run (daemon/report/changes.py): done re-runs only
        "follows": None,  # the earlier brief a follow-up started from (daemon/research/followup.py)
        # what the run found, or that it found nothing (report/assemble.py's answer_of); docs/contract.md
        "answer": {"found": False, "text": "", "from": None},
    }


# ---------------------------------------------------------------------------
# Small shared helpers: a report's values as every rendering shows them


def value_text(value: Any) -> str:
    """A value of report.json as report.md shows it: numbers in the one form (rules/numbers.py)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return clean(value)


def safe_http_url(url: Any) -> str | None:
    """The URL when it may become a link (http/https, no whitespace, controls or bidi
    characters: nothing `clean` would change), else None."""
    if not isinstance(url, str) or clean(url) != url:
        return None
    if re.fullmatch(r"(?i)https?://[^\s\x00-\x1f\x7f]+", url) is None:
        return None
    return url


_list, _dict = as_list, as_dict  # reports are read back in any shape (daemon.untrusted)


def is_int(value: Any) -> bool:
    """A whole number and not a bool (True is an int to Python): what a source's `n` must be to be cited."""
    return isinstance(value, int) and not isinstance(value, bool)


def source_numbers(report: Mapping[str, Any]) -> set[int]:
    """The numbers of the report's sources: a citation links only to one of these, anything else stays text."""
    numbers: set[int] = set()
    for source in _list(report.get("sources")):
        n = _dict(source).get("n")
        if isinstance(n, int) and not isinstance(n, bool):
            numbers.add(n)
    return numbers


def range_text(value: Any) -> str:
    """A range as the estimate table shows it: low–high, as the stop sentence and the charts write it;
    a target given as a width reads width ≤ 60; nothing to show gives the empty string."""
    rng = _dict(value)
    if rng.get("low") is not None and rng.get("high") is not None:
        return f"{value_text(rng.get('low'))}{SPAN}{value_text(rng.get('high'))}"
    if rng.get("width") is not None:
        return f"width \u2264 {value_text(rng.get('width'))}"
    return ""


SIDE_QUOTE_CHARS = 160


def short_quote(quote: Any) -> str:
    """A quote folded to one line and cut at SIDE_QUOTE_CHARS, where a report shows it beside others."""
    text = fold(quote)
    return text[:SIDE_QUOTE_CHARS - 3] + "..." if len(text) > SIDE_QUOTE_CHARS else text


# ---------------------------------------------------------------------------
# What a report says, read the same way by `briefd list`, the store, the HTTP API and report.md


SYNTHESIS = "synthesis"  # the fallbacks and calls_skipped key of the summary's call (Research.ask's purpose)


def summary_written(report: Mapping[str, Any]) -> bool:
    """Whether the report's summary is one the model wrote: not the fallback list of quotes that stands in for a
    failed synthesis, and not the text of a run that asked for none (usage.calls_skipped: fewer than two quotes)."""
    skipped = bool(_dict(_dict(report.get("usage")).get("calls_skipped")).get(SYNTHESIS))
    return bool(fold(report.get("summary"))) and not _dict(report.get("fallbacks")).get(SYNTHESIS) and not skipped


def answer_text(report: Mapping[str, Any]) -> str:
    """The answer in one plain line, for `briefd list`, search results and the HTTP API: the
    computed range, the verdict, or the summary's first sentence (citations and Markdown left
    as they are: the caller escapes for its output). A report with an `answer` says its text,
    found or not; an older report's is derived as it was."""
    answer = _dict(report.get("answer"))
    if isinstance(answer.get("text"), str) and (answer.get("found") or fold(answer.get("text"))):
        return fold(answer.get("text"))
    estimate = _dict(report.get("estimate"))
    if estimate:
        final = range_text(estimate.get("final"))
        return f"{final} {fold(estimate.get('unit'))}".strip() if final else "no range was computed"
    verdict = _dict(report.get("verdict"))
    if verdict:
        return f"{fold(verdict.get('value')) or 'undecided'} ({fold(verdict.get('evidence_level')) or 'no level'})"
    return summary_first_sentence(report.get("summary"))


def summary_first_sentence(summary: Any) -> str:
    """A summary's first sentence, with the sentences after it that name nothing of their own ("... the port
    number to connect on the remote host. The default is 22 [1]."; decide.leans_on_before: the answer is often
    there), cut at ANSWER_TEXT_CHARS: a plain brief's answer line."""
    sentences = re.split(r"(?<=[.!?])\s", fold(summary))
    end = 1
    while end < len(sentences) and leans_on_before(sentences[end], sentences[end - 1]):
        end += 1
    first = " ".join(sentences[:end])
    return first[:ANSWER_TEXT_CHARS] + ("…" if len(first) > ANSWER_TEXT_CHARS else "")


def history_row(report: Mapping[str, Any], kind: str | None) -> dict[str, Any]:
    """A `reports` row (store.finish): what `briefd list` and `briefd search` show, and the
    whole report for "what changed" and the HTTP API. `kind` is the brief's (its policy's: a
    failed estimate brief has no estimate in its report); None when the brief could not be read."""
    return {"brief_id": report.get("id"), "kind": kind, "status": report.get("status"),
            "question": fold(report.get("question")), "answer": answer_text(report),
            "answer_found": _answer_found(report),
            "summary": fold(report.get("summary")), "stop_reason": report.get("stop_reason"),
            "started_at": report.get("started_at"), "finished_at": report.get("finished_at"),
            "report_json": json.dumps(report, ensure_ascii=False, default=str)}


def _answer_found(report: Mapping[str, Any]) -> bool | None:
    """report.json's `answer.found`, or None for a report without it (an older briefd's)."""
    found = _dict(report.get("answer")).get("found")
    return found if isinstance(found, bool) else None


def _strength(item: Mapping[str, Any], question: str) -> tuple[tuple[int, int, int], float]:
    """How strong a kept quote is, as a reader reads "strongest first": how well it answers the question
    (decide.answers: it bears on it, states a figure where one is asked, says its distinctive terms), then the
    confidence the rules give it."""
    value = finite(item.get("confidence"))
    context = f"{fold(item.get('title'))}\n{fold(item.get('lead'))}"
    return answers(fold(item.get("quote")), context, [question]), -1.0 if value is None else value


def evidence_by_source(report: Mapping[str, Any], *, weighed: bool | None = None) -> list[list[dict[str, Any]]]:
    """The evidence grouped by source (its number, else its URL), strongest first (_strength: how well each
    quote answers the question, then its confidence): groups by their strongest item, items within a group
    likewise; ties keep report order. `weighed`: only the items the rules give some weight (True) or none
    (False, confidence 0.00)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    known = source_numbers(report)
    for item in (_dict(e) for e in _list(report.get("evidence"))):
        if weighed is not None and (finite(item.get("confidence")) != 0) != weighed:
            continue
        n = item.get("source")
        key = ("n", n) if is_int(n) and n in known else ("url", fold(item.get("url")))
        groups.setdefault(key, []).append(item)
    question = fold(report.get("question"))
    ordered = [sorted(items, key=lambda item: _strength(item, question), reverse=True) for items in groups.values()]
    return sorted(ordered, key=lambda items: _strength(items[0], question), reverse=True)
