"""What the store recorded of one run, read for `briefd eval` (daemon/ops/evaluate.py judges it).

briefd keeps every search result, page, passage, prompt's passages, quote and refusal of a run; this
module reads them back as plain typed records, so that the judging stays a pure function of data and
no new instrumentation is needed beyond what the loop already records (its events and tables):

- `search_results`: what each query returned (URL, title, snippet, rank);
- `page_fetched` events: which pages the run read (a library document included), or why one failed;
- `pages` / `passages`: the text extraction kept for each page read;
- the `reading` signal: the passages each evidence prompt showed the model (its `passages` field);
- `evidence_found` / `evidence_skipped` events: the quotes the model pointed at, and the rule that
  refused one (its `reason`); the `page distrusted` signal: a page whose evidence was dropped;
- `evidence`: the quotes kept; `reports`: the report as written (answer line, summary, range, verdict).

Nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .briefs import Store

READING = "reading"          # the loop's signal before an evidence call (daemon/research/loop.py read_batch)
DISTRUSTED = "page distrusted"


@dataclass(frozen=True)
class ResultRow:
    """One search result the run was given."""

    round: int
    query: str
    rank: int
    url: str
    title: str
    snippet: str


@dataclass(frozen=True)
class QuoteRow:
    """A text at a URL: a passage shown, a quote chosen or kept."""

    url: str
    text: str


@dataclass(frozen=True)
class Refusal:
    """A quote the model chose that a rule dropped (`rule`: the loop's recorded reason)."""

    url: str
    quote: str
    rule: str


@dataclass(frozen=True)
class KeptQuote:
    """An evidence row, with whether its quote is the span of its page's stored text it claims to be."""

    url: str
    quote: str
    verbatim: bool
    low: float | None = None      # the figure code read from it (estimates), if any
    high: float | None = None


@dataclass(frozen=True)
class RunTrace:
    """Everything one run recorded on the way from its searches to its report."""

    run_id: int
    brief_id: str
    state: str
    fetch_pages: bool
    queries: tuple[str, ...]
    results: tuple[ResultRow, ...]
    read: frozenset[str]                       # URLs the run read (fetched, from cache, library, snippet)
    fetch_errors: dict[str, str]               # URL -> why its fetch failed
    unread_early: frozenset[str]               # fetched ahead while planning, and no round took them
    texts: dict[str, str]                      # URL read -> its stored extracted text
    shown: tuple[QuoteRow, ...]                # passages an evidence prompt showed the model
    prompts_recorded: bool                     # the run's reading signals carry their passages
    chosen: tuple[QuoteRow, ...]               # quotes the rules took (evidence_found)
    refused: tuple[Refusal, ...]               # quotes a rule dropped, with the rule (evidence_skipped)
    distrusted: dict[str, str]                 # URL -> why the page was distrusted (its evidence dropped)
    kept: tuple[KeptQuote, ...]                # evidence rows at the end
    report: dict[str, Any] = field(default_factory=dict)   # report.json as stored ({} when none)
    answer_line: str = ""                      # the reports table's answer line


def runs_by_brief(store: Store, brief_ids: list[str], after_run_id: int = 0) -> dict[str, int]:
    """The latest run of each brief id (only runs numbered above `after_run_id`)."""
    found: dict[str, int] = {}
    for brief_id in brief_ids:
        row = store.db.execute("SELECT max(run_id) FROM briefs WHERE brief_id = ? AND run_id > ? "
                               "AND state != 'rejected'", [brief_id, after_run_id]).fetchone()
        if row and row[0] is not None:
            found[brief_id] = int(row[0])
    return found


def last_run_id(store: Store) -> int:
    """The highest run id so far (0 in an empty store): runs made after it are this eval's."""
    row = store.db.execute("SELECT max(run_id) FROM briefs").fetchone()
    return int(row[0] or 0) if row else 0


def rejection(store: Store, brief_id: str, after_run_id: int = 0) -> str | None:
    """Why a brief file of this id was rejected (the latest such run), if it was."""
    row = store.db.execute("SELECT error FROM briefs WHERE brief_id = ? AND run_id > ? AND state = 'rejected' "
                           "ORDER BY run_id DESC LIMIT 1", [brief_id, after_run_id]).fetchone()
    return str(row[0] or "rejected") if row else None


def run_trace(store: Store, run_id: int) -> RunTrace:
    """The run's record, read from its tables and events."""
    brief = store.get_brief(run_id)
    assert brief is not None, f"run {run_id} is not in the store"
    events = store.events(run_id)
    results = tuple(ResultRow(r["round"], r["query"] or "", r["rank"] or 0, r["url"] or "", r["title"] or "",
                              r["snippet"] or "")
                    for r in store.db.query("SELECT round, query, rank, url, title, snippet FROM search_results "
                                            "WHERE run_id = ? ORDER BY id", [run_id]))
    queries = tuple(q["text"] for q in store.queries(run_id))
    fetch_pages = _fetch_pages(brief.brief_json)
    read, errors = _pages_read(events)
    if not fetch_pages:  # snippets are the text: those the run saved as passages were read
        read |= _snippets_saved([r.url for r in results], store)
    signals = [e for e in events if e["type"] == "signal"]
    readings = [e for e in signals if e.get("message") == READING]
    shown_ids = sorted({int(i) for e in readings for i in e.get("passages") or []})
    report_row = store.db.execute("SELECT answer, report_json FROM reports WHERE run_id = ?", [run_id]).fetchone()
    return RunTrace(
        run_id=run_id, brief_id=brief.brief_id, state=brief.state, fetch_pages=fetch_pages, queries=queries,
        results=results, read=frozenset(read), fetch_errors=errors,
        unread_early=frozenset(u for e in signals if str(e.get("message", "")).startswith("fetched while")
                               for u in e.get("urls") or []),
        texts=_texts(store, sorted(read)),
        shown=tuple(QuoteRow(p.url, p.text) for p in store.passages(shown_ids)),
        prompts_recorded=bool(readings) and all("passages" in e for e in readings),
        chosen=tuple(QuoteRow(e.get("url") or "", e.get("quote") or "")
                     for e in events if e["type"] == "evidence_found"),
        refused=tuple(Refusal(e.get("url") or "", e["quote"], str(e.get("reason") or "a rule"))
                      for e in events if e["type"] == "evidence_skipped" and e.get("quote")),
        distrusted={str(e.get("url")): str(e.get("reason") or "") for e in signals
                    if e.get("message") == DISTRUSTED},
        kept=tuple(_kept(store, row) for row in store.evidence(run_id)),
        report=json.loads(report_row[1]) if report_row and report_row[1] else {},
        answer_line=str(report_row[0] or "") if report_row else "",
    )


def _fetch_pages(brief_json: str | None) -> bool:
    try:
        return bool(json.loads(brief_json or "{}").get("fetch_pages", True))
    except ValueError:
        return True


def _pages_read(events: list[dict[str, Any]]) -> tuple[set[str], dict[str, str]]:
    """The URLs a `page_fetched` event says were read, and why the others failed."""
    read: set[str] = set()
    errors: dict[str, str] = {}
    for event in events:
        if event["type"] != "page_fetched":
            continue
        url = str(event.get("url") or "")
        if event.get("ok") is False:
            errors.setdefault(url, str(event.get("error") or "failed"))
        else:
            read.add(url)
    return read, {u: why for u, why in errors.items() if u not in read}


def _snippets_saved(urls: list[str], store: Store) -> set[str]:
    saved: set[str] = set()
    for url in dict.fromkeys(urls):
        if store.db.execute("SELECT 1 FROM passages WHERE url = ? AND origin = 'snippet' LIMIT 1", [url]).fetchone():
            saved.add(url)
    return saved


def _texts(store: Store, urls: list[str]) -> dict[str, str]:
    """Each URL's stored text: the page's extracted text, else its passages (snippets) joined."""
    texts: dict[str, str] = {}
    for url in urls:
        row = store.db.execute("SELECT text FROM pages WHERE url = ? AND text IS NOT NULL", [url]).fetchone()
        if row and row[0]:
            texts[url] = str(row[0])
            continue
        parts = [str(r[0]) for r in store.db.execute(
            "SELECT text FROM passages WHERE url = ? ORDER BY origin, seq", [url]).fetchall()]
        if parts:
            texts[url] = "\n".join(parts)
    return texts


def _kept(store: Store, row: dict[str, Any]) -> KeptQuote:
    """An evidence row, checked: its quote is its page's stored text at its offsets (a page), or a span of
    its URL's stored passages (a snippet)."""
    url, quote = str(row["url"]), str(row["quote"] or "")
    verbatim = False
    if row.get("origin") == "page" and row.get("quote_start") is not None:
        page = store.db.execute("SELECT text FROM pages WHERE url = ?", [url]).fetchone()
        text = str(page[0] or "") if page else ""
        verbatim = text[int(row["quote_start"]):int(row["quote_end"])] == quote
    if not verbatim:
        verbatim = bool(quote) and any(quote in str(r[0]) for r in store.db.execute(
            "SELECT text FROM passages WHERE url = ?", [url]).fetchall())
    return KeptQuote(url, quote, verbatim, row.get("low"), row.get("high"))
