"""A done run's report.json, in the one shape every report has (report.blank_report).

The research loop used to write a done report's every key itself, a second copy of the shape
that `blank_report` (failed and cancelled briefs) keeps: a new key was two edits, and a key
missed in one of them went unnoticed until a reader met it. Here a done report is the blank
report filled with what the run found, and a key the shape does not have is refused. The parts
read from the evidence rows (each quote's entry, each source's) are pure functions of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..rules.citations import Source
from ..rules.decide import LoopState
from ..sources.sources import kind_of_url
from .report import REPORT_KEYS, blank_report


def evidence_items(rows: Sequence[Mapping[str, Any]], sources: Sequence[Source]) -> list[dict[str, Any]]:
    """report.json's `evidence`: each stored row as a reader sees it, with its source's number."""
    by_url = {s.url: s.n for s in sources}
    return [
        {"source": by_url.get(e["url"]), "url": e["url"], "title": e["title"], "quote": e["quote"],
         "stance": e["stance"], "impact": e["impact"], "confidence": e["confidence"],
         "round": e["round"], "summary": e["summary"], "low": e["low"], "high": e["high"],
         "tier": e["tier"], "unit": e["unit"], "scope": e["scope"], "date": e["reading_date"],
         "page": e.get("page"), "read_at": e.get("read_at"), "reused_from": e.get("reused_from")}
        for e in rows
    ]


def source_items(sources: Sequence[Source], hashes: Mapping[str, str]) -> list[dict[str, Any]]:
    """report.json's `sources`; text_sha256: the page text each was read as, so a re-run can tell
    an edited page."""
    return [{"n": s.n, "url": s.url, "title": s.title, "cited": s.cited, "kind": kind_of_url(s.url),
             "text_sha256": hashes.get(s.url)} for s in sources]


def done_report(brief_id: str, question: str, started_at: str | None, **found: Any) -> dict[str, Any]:
    """A done run's report: blank_report, status done, with `found` filled in. `source_file` is
    the worker's to fill (it knows the file). A key outside the shape (REPORT_KEYS) is refused."""
    unknown = sorted(set(found) - set(REPORT_KEYS))
    if unknown:
        raise ValueError(f"not keys of report.json: {', '.join(unknown)}; add them to report.REPORT_KEYS "
                         f"and blank_report first")
    report = blank_report(brief_id, "", question, started_at, status="done")
    report.update(source_file=None, **found)
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
        "calls_skipped": dict(state.calls_skipped),  # model calls not made: they could not help
        # pages a round went on without (stragglers), and those of them never read
        "late_pages": len(state.late),
        "late_pages_given_up": sum(1 for what in state.late.values() if what == given_up),
        # evidence taken from an earlier run (a follow-up's parent), not read again
        "evidence_reused": sum(1 for e in evidence if e.get("reused_from") is not None),
    }
