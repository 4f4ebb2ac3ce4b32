"""The store as a reader sees it in datasette: what each table and column means, and the
questions an operator asks of it, as datasette metadata (`briefd datasette` prints it).

Why here: the descriptions and the canned queries are about the schema that store/db.py
migrates, and canned queries are SQL, which lives in store/ and nowhere else. Why in code
and not a shipped file: the database's name in datasette is the file's stem (`briefd` for
briefd.db, `store` for /var/lib/briefd/store.db), and metadata is keyed by that name, so
`metadata_for(path)` keys it for the store the operator actually opens.

tests/store/test_browse.py holds this to the schema both ways: every table and column a fresh store
has is described here, and everything described here exists (so neither can drift), and every
canned query runs in a real datasette on a store with rows in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .db import NOT_MODEL_CALLS

_RUN = "the run (briefs.run_id) it belongs to"
_ROUND = "the research round (1, 2, ...) it belongs to"

# table -> column -> description. Hidden tables (full-text indexes) are in HIDDEN below.
COLUMNS: dict[str, dict[str, str]] = {
    "briefs": {
        "run_id": "one row per file taken from the inbox (accepted or rejected): a run of a brief",
        "brief_id": "the brief's id: names its outbox folder; a brief asked again is a new run with the same id",
        "state": "queued, running, done, failed, cancelled, or rejected (the file was not a valid brief)",
        "question": "what the brief asks",
        "source_file": "the inbox file name as dropped",
        "received_sha256": "sha256 of the bytes received: the same file seen again is not taken twice",
        "received_bytes": "the file exactly as received (kept in the outbox as brief.json or brief.bin)",
        "brief_json": "the brief after validation, with its defaults filled in",
        "error": "why the brief failed or was rejected",
        "error_details": "a rejection's details as JSON (the field, what was expected, the nearest valid name)",
        "attempts": "how many times a worker took it (an outage does not count)",
        "accepted_at": "when it was taken from the inbox (UTC)",
        "started_at": "when a worker first took it (UTC)",
        "finished_at": "when it ended (UTC); empty while queued or running",
        "stop_reason": "why the research stopped (report.json stop_reason: max_rounds, budget, stalled, "
                       "target_reached, gaps_closed, exhausted, cancelled, error, ...)",
        "waiting_for": "the service a brief waits for while it is down (the model server or SearXNG)",
        "inbox_path": "the path of the inbox file it was read from",
        "inbox_removed": "1 once the file has left the inbox",
        "outdir_ready": "1 once earlier runs' files were archived and brief.json written to the outbox",
        "cancel_requested": "1 after `briefd cancel`: a running brief stops at its next step",
        "not_before": "a brief waiting for a service is not taken again before this time (UTC)",
        "waiting_since": "when the current outage began for this brief (UTC)",
        "outages": "how many times in a row a service was found down for this brief",
        "follows": "the brief id this brief follows up (its `follows` field), if any",
        "every": "its schedule as the brief gave it (`every`), if it repeats",
    },
    "pages": {
        "url": "the page as it was asked for (a library document: its file:// URL)",
        "final_url": "where the page was read after redirects",
        "status": "the HTTP status of the fetch (empty for library documents)",
        "content_type": "the media type the server sent (or the document's type)",
        "fetched_at": "when this copy was downloaded (UTC)",
        "title": "the page title, as cited in reports",
        "text": "the main text extracted from the page: quotes are verbatim spans of it",
        "text_sha256": "sha256 of the text: a re-run compares it to say whether a source changed",
        "bytes": "size of the body downloaded",
        "extraction": "how the text was extracted: trafilatura, fallback, document, plain, ...",
        "error": "why the stored copy is not usable, if it is not (failed fetches are in bad_urls and the "
                 "page_fetched events)",
        "etag": "the server's ETag: a later read asks whether the page changed (304) instead of downloading it",
        "last_modified": "the server's Last-Modified, used the same way",
        "checked_at": "when the server last said the stored copy is unchanged (UTC)",
    },
    "passages": {
        "id": "the passage's number: evidence points at it",
        "url": "the page (or search result, for snippets) it comes from",
        "origin": "page (a span of a page's text) or snippet (a search result's snippet, fetch_pages: false)",
        "seq": "its place in the page",
        "start": "offset of its first character in pages.text",
        "end": "offset after its last character: text is pages.text[start:end]",
        "text": "the passage, ranked against the question and open gaps by full-text search (BM25)",
        "page": "the PDF page it is on (empty for formats without pages)",
        "marks": "the lines its document marks as code, an example, a heading or navigation: "
                 "[[start, end, kind], ...] in the passage's own offsets (empty: all prose)",
    },
    "bad_urls": {
        "url": "a page briefd does not fetch again (for good, or until expires_at)",
        "reason": "why: the HTTP status, a redirect loop, a refused address, too large, too slow, unreadable, ...",
        "seen_at": "when it failed (UTC)",
        "expires_at": "empty: bad for good; a time: it was too slow and is tried again after then (UTC)",
    },
    "search_cache": {
        "cache_key": "hash of the normalised query and its search settings",
        "query": "the query sent to SearXNG",
        "params": "the search settings sent with it (JSON)",
        "response": "SearXNG's answer, as kept (JSON)",
        "searched_at": "when SearXNG answered (UTC): older than the cache age, it is asked again",
    },
    "queries": {
        "id": "row number",
        "run_id": _RUN,
        "round": _ROUND,
        "text": "the query",
        "results": "how many results came back",
        "searched_at": "when it was searched (UTC)",
        "from_cache": "1 when the answer came from search_cache, not from SearXNG",
        "error": "why the search failed (rows written by versions before 0.1; outages are now events)",
    },
    "search_results": {
        "id": "row number",
        "run_id": _RUN,
        "round": _ROUND,
        "query": "the query that found it",
        "rank": "its place in that query's results (1 is first)",
        "url": "the result's URL",
        "title": "the result's title",
        "snippet": "the result's snippet",
        "engine": "the SearXNG engine (or the library, or an archive) that returned it",
    },
    "evidence": {
        "id": "row number",
        "run_id": _RUN,
        "round": "the round it was found in",
        "url": "the source it quotes",
        "title": "the source's title",
        "passage_id": "the passage (passages.id) the quote was taken from",
        "origin": "page or snippet: what the quote was read from",
        "quote": "a verbatim span of the source's text",
        "quote_start": "offset of the quote in pages.text",
        "quote_end": "offset after the quote in pages.text",
        "summary": "what the model says the quote shows",
        "confidence": "0 to 1, capped by the source's tier; readings under 0.5 do not move an estimate",
        "stance": "hypothesis briefs: supports, contradicts or neutral (decided from the quote's figures "
                  "when the hypothesis has a contract)",
        "impact": "estimate briefs: narrows_low, narrows_high, narrows_both, widens or neutral",
        "gap": "the open question it answers, if any",
        "found_at": "when it was stored (UTC)",
        "low": "estimate briefs: the low figure read from the quote, in the brief's unit",
        "high": "estimate briefs: the high figure read from the quote, in the brief's unit",
        "tier": "the source's tier: regulator, peer_reviewed, industry, news or social",
        "unit": "the unit the quote states its figure in, as the model read it",
        "scope": "what the figure measures (place, population), as the model read it",
        "reading_date": "the date the figure is for, as the model read it",
        "page": "the PDF page the quote is on",
        "read_at": "when the source's text was read (fetched, or last confirmed unchanged) (UTC)",
        "reused_from": "the earlier run this item was taken from (a re-run or follow-up), if any",
        "lead": "the text before the quote in its passage (a definition's term line, the sentence naming the unit): "
                "what its figure was read with",
        "unit_kind": "what the document marks the quote's part as: code, example, heading or navigation "
                     "(empty: prose)",
    },
    "model_calls": {
        "id": "row number",
        "run_id": "the run it was made for (empty for health probes outside a brief)",
        "purpose": "what it was for: plan, evidence, synthesis, health_probe",
        "model": "the model asked",
        "prompt_hash": "hash of the prompt, schema and model settings: the key of model_answers",
        "started_at": "when the call began (UTC)",
        "seconds": "how long the model took",
        "prompt_tokens": "tokens read (Ollama's prompt_eval_count)",
        "completion_tokens": "tokens written (Ollama's eval_count)",
        "outcome": "ok, repaired (fixed JSON), retried, error (the first attempt; a retry follows), "
                   "fallback (a default was used), cached (answered from model_answers, no model time), "
                   "poisoned (the server refused the request every time), probe, "
                   "replayed (a failure kept in model_answers given again: its fallback, no model time)",
        "attempt": "1, or 2 for the retry that quotes the parse error",
        "truncated_prompt": "1 when the prompt was cut to fit the model's context",
        "truncated_answer": "1 when the answer was cut off at its token budget",
        "error": "what went wrong with this attempt",
        "answer": "the model's raw answer",
        "structured": "how its JSON was asked for: schema (decoding held to it), json (JSON mode, the schema in "
                      "the prompt) or none (the schema in the prompt only); empty before issue 31",
        "prompt_seconds": "the server's own seconds reading the prompt (Ollama's prompt_eval_duration, llama.cpp's "
                          "timings); empty where it does not say",
        "eval_seconds": "the server's own seconds generating the answer (Ollama's eval_duration, llama.cpp's "
                        "timings); empty where it does not say",
    },
    "model_answers": {
        "prompt_hash": "the prompt's key (model_calls.prompt_hash)",
        "answer": "the answer kept: the same prompt is answered from here, so a restart never pays twice",
        "prompt_tokens": "tokens the original call read",
        "completion_tokens": "tokens the original call wrote",
        "created_at": "when it was kept (UTC)",
        "failed": "empty for an answer; fallback or poisoned for a failure kept so that the same prompt "
                  "is not paid again (replayed for a day, then asked again)",
        "error": "why the kept failure failed",
        "retry_skipped": "1 when the kept failure was an answer cut off and not asked again",
    },
    "events": {
        "run_id": _RUN,
        "seq": "its number in the run's event log, from 1, without gaps",
        "at": "when it happened (UTC)",
        "type": "accepted, round_started, search_query, search_result, page_fetched, evidence_found, "
                "evidence_skipped, iteration_update, signal, waiting, complete, failed, ...",
        "data": "the event's fields (JSON): the line of events.ndjson without seq, at and type",
    },
    "checkpoints": {
        "run_id": _RUN,
        "round": "the last round saved",
        "phase": "where the brief was: plan, rounds, synthesis or done",
        "state": "the loop's whole state (JSON): a restart resumes from it",
        "saved_at": "when it was saved (UTC)",
    },
    "library_files": {
        "path": "the file (or, for a folder row, the folder) as found",
        "folder": "the library folder it was found under",
        "size": "its size in bytes when last read",
        "mtime_ns": "its modification time when last read (ns)",
        "sha256": "hash of its content: a renamed or copied file is not read again",
        "state": "indexed, duplicate (a copy of another file), pending, refused, skipped, or folder",
        "reason": "why refused or still pending (for a folder: why it could not be listed)",
        "url": "the document its passages are stored under (pages.url, file://)",
        "title": "the document's title, as cited",
        "pages": "PDF pages (empty for formats without pages)",
        "chars": "characters of text read",
        "checked_at": "when it was last looked at (UTC)",
        "indexed_at": "when its text was read into the index (UTC)",
    },
    "egress_counts": {
        "run_id": _RUN,
        "counts": "requests made for the brief, by host, and hosts refused by the egress policy (JSON): "
                  "report.json's egress block",
    },
    "reports": {
        "run_id": "the run whose report this is (done, failed or cancelled)",
        "brief_id": "the brief's id",
        "kind": "plain, estimate or hypothesis",
        "status": "done, failed or cancelled",
        "question": "what the brief asked",
        "answer": "the answer line the report leads with",
        "answer_found": "1 when that line states an answer, 0 when it says none was found (report.json's "
                        "answer.found); NULL for runs reported before schema 8",
        "summary": "the report's summary (Markdown, cites sources as [n])",
        "stop_reason": "why the research stopped",
        "started_at": "when the run started (UTC)",
        "finished_at": "when it ended (UTC)",
        "report_json": "the whole report.json",
    },
    "schedules": {
        "brief_id": "one series per brief id",
        "every": "how often, as the brief said it",
        "brief_json": "the brief each run is asked with",
        "received_bytes": "the file as received",
        "source_file": "the inbox file name it came from",
        "created_at": "when the series began (UTC)",
        "next_run_at": "when the next run is due (UTC)",
        "last_run_id": "the latest run queued by the series (briefs.run_id)",
        "last_run_at": "when it was queued (UTC)",
        "runs": "how many runs the series has queued",
        "cancelled_at": "when `briefd cancel` ended the series (UTC)",
    },
}

TABLES: dict[str, str] = {
    "briefs": "Every file taken from the inbox: one row per run of a brief, with its state and why it stopped.",
    "pages": "Every page and library document read, with its extracted text: the page cache.",
    "passages": "Pages split into passages: what the model is shown, and what evidence points at.",
    "bad_urls": "Pages not fetched again, and why (for good, or until they are tried again).",
    "search_cache": "SearXNG's answers, cached per normalised query.",
    "queries": "Every search a run made, by round.",
    "search_results": "What each search returned, in rank order.",
    "evidence": "What the model found: verbatim quotes with their source, confidence and labels.",
    "model_calls": "Every model call (and cache hit): what it was for, what it cost, how it ended.",
    "model_answers": "The model's answers cached by prompt: a restart replays them instead of paying again.",
    "events": "Each run's event log (events.ndjson), one row per event.",
    "checkpoints": "The loop's state after its last step, per run: what a restart resumes from.",
    "library_files": "Files found under the library folders: read, duplicated, refused (and why), pending.",
    "egress_counts": "Every host each run contacted (and each the egress policy refused).",
    "reports": "What each finished run reported: what `briefd list`, `briefd search` and re-runs read.",
    "schedules": "Briefs that repeat (`every`): the series, when it runs next, how many runs it queued.",
}

# The full-text indexes (sqlite-utils' enable_fts: an FTS5 table and its shadow tables each).
_FTS_SHADOWS = ("data", "idx", "docsize", "config")
FTS_TABLES: dict[str, str] = {"passages": "text", "reports": "question, answer and summary",
                              "evidence": "quotes"}


def _hidden() -> dict[str, str]:
    """The FTS tables and their shadows: machinery, hidden from the table list (datasette uses
    them for the search box on the table they index)."""
    out: dict[str, str] = {}
    for table, what in FTS_TABLES.items():
        out[f"{table}_fts"] = f"Full-text index (FTS5, porter) of {table}: {what}."
        for shadow in _FTS_SHADOWS:
            out[f"{table}_fts_{shadow}"] = f"Internal storage of {table}_fts (SQLite FTS5)."
    return out


HIDDEN: dict[str, str] = _hidden()

# What links show: a run's brief id rather than its number.
LABELS: dict[str, str] = {"briefs": "brief_id", "pages": "title", "library_files": "title",
                          "reports": "brief_id", "schedules": "brief_id"}
FACETS: dict[str, list[str]] = {
    "briefs": ["state", "stop_reason"], "evidence": ["tier", "origin"], "model_calls": ["purpose", "outcome"],
    "events": ["type"], "library_files": ["state"], "reports": ["kind", "status", "stop_reason"],
    "pages": ["extraction"],
}
NEWEST_FIRST: dict[str, str] = {"briefs": "run_id", "reports": "run_id", "model_calls": "id", "evidence": "id",
                                "queries": "id"}

# `:brief_id` left empty means every brief: `(:brief_id = '' OR b.brief_id = :brief_id)`.
_ANY_BRIEF = "(:brief_id = '' OR b.brief_id = :brief_id)"

QUERIES: dict[str, dict[str, str]] = {
    "briefs_by_stop_reason": {
        "title": "Briefs by state and stop reason",
        "description": "How runs ended: how many stopped for each reason, and when the first and last did.",
        "sql": """
select state, coalesce(stop_reason, '') as stop_reason, count(*) as runs,
       count(distinct brief_id) as briefs, min(finished_at) as first_finished, max(finished_at) as last_finished
from briefs
group by state, stop_reason
order by runs desc, state, stop_reason""",
    },
    "evidence_by_source": {
        "title": "Evidence by source",
        "description": "Which sources the evidence came from: items, briefs, tiers and confidence per source. "
                       "Leave brief_id empty for every brief.",
        "sql": f"""
select e.url, max(e.title) as title, group_concat(distinct e.tier) as tiers, count(*) as items,
       count(distinct e.run_id) as runs, round(avg(e.confidence), 2) as mean_confidence,
       max(e.confidence) as best_confidence, min(e.found_at) as first_found
from evidence e join briefs b on b.run_id = e.run_id
where {_ANY_BRIEF}
group by e.url
order by items desc, best_confidence desc""",
    },
    "evidence_by_tier": {
        "title": "Evidence by source tier",
        "description": "How much of the evidence comes from regulators, peer review, industry, news and social "
                       "sources. Leave brief_id empty for every brief.",
        "sql": f"""
select coalesce(e.tier, '') as tier, count(*) as items, count(distinct e.url) as sources,
       round(avg(e.confidence), 2) as mean_confidence
from evidence e join briefs b on b.run_id = e.run_id
where {_ANY_BRIEF}
group by e.tier
order by items desc""",
    },
    "model_calls_by_purpose": {
        "title": "Model calls by purpose and cost",
        "description": "What the model was asked for and what it cost: calls, cache hits, tokens and seconds "
                       "per purpose, and how many answers needed repair, a retry or a fallback. "
                       "Leave brief_id empty for every brief.",
        "sql": f"""
select m.purpose,
       sum(m.outcome not in {NOT_MODEL_CALLS}) as calls,
       sum(m.outcome = 'cached') as cache_hits,
       coalesce(sum(m.prompt_tokens), 0) as prompt_tokens,
       coalesce(sum(m.completion_tokens), 0) as completion_tokens,
       round(coalesce(sum(case when m.outcome not in {NOT_MODEL_CALLS} then m.seconds end), 0), 1)
         as seconds,
       round(avg(case when m.outcome not in {NOT_MODEL_CALLS} then m.seconds end), 2) as mean_seconds,
       sum(m.outcome = 'repaired') as repaired, sum(m.outcome = 'retried') as retried,
       sum(m.outcome = 'fallback') as fallbacks, sum(m.outcome = 'replayed') as failures_replayed,
       sum(m.truncated_prompt) as prompts_cut,
       sum(m.truncated_answer) as answers_cut
from model_calls m left join briefs b on b.run_id = m.run_id
where {_ANY_BRIEF}
group by m.purpose
order by seconds desc""",
    },
    "cost_by_brief": {
        "title": "What each run cost",
        "description": "Per run, newest first: model calls, tokens, model seconds, wall seconds, searches "
                       "and evidence.",
        "sql": f"""
select b.run_id, b.brief_id, b.state, b.stop_reason,
       (select count(*) from model_calls m where m.run_id = b.run_id
          and m.outcome not in {NOT_MODEL_CALLS}) as model_calls,
       (select coalesce(sum(m.prompt_tokens), 0) + coalesce(sum(m.completion_tokens), 0)
          from model_calls m where m.run_id = b.run_id) as tokens,
       (select round(coalesce(sum(m.seconds), 0), 1) from model_calls m where m.run_id = b.run_id
          and m.outcome not in {NOT_MODEL_CALLS}) as model_seconds,
       round((julianday(b.finished_at) - julianday(b.started_at)) * 86400) as wall_seconds,
       (select count(*) from queries q where q.run_id = b.run_id) as searches,
       (select count(*) from evidence e where e.run_id = b.run_id) as evidence
from briefs b
where b.state != 'rejected'
order by b.run_id desc
limit 200""",
    },
    "failed_pages": {
        "title": "Pages that failed, and why",
        "description": "Every page a run could not read (from its page_fetched events): the status, the "
                       "error, and whether briefd will try it again. Leave brief_id empty for every brief.",
        "sql": f"""
select ev.at, b.brief_id, ev.run_id, json_extract(ev.data, '$.round') as round,
       json_extract(ev.data, '$.url') as url, json_extract(ev.data, '$.status') as status,
       json_extract(ev.data, '$.error') as error,
       case when bu.url is null then 'yes'
            when bu.expires_at is null then 'no: bad for good'
            else 'after ' || bu.expires_at end as tried_again
from events ev join briefs b on b.run_id = ev.run_id
  left join bad_urls bu on bu.url = json_extract(ev.data, '$.url')
where ev.type = 'page_fetched' and json_extract(ev.data, '$.ok') = 0 and {_ANY_BRIEF}
order by ev.at desc, ev.run_id desc, ev.seq desc
limit 500""",
    },
    "failures_by_reason": {
        "title": "Page failures by reason",
        "description": "The pages not fetched again, counted by reason: what the web does to briefd.",
        "sql": """
select reason, count(*) as pages, sum(expires_at is null) as for_good, max(seen_at) as last_seen
from bad_urls
group by reason
order by pages desc""",
    },
    "waiting_and_running": {
        "title": "Running, queued and waiting briefs",
        "description": "What is in the queue now, and what each brief waits for (a service that is down).",
        "sql": """
select run_id, brief_id, state, question, attempts, waiting_for, waiting_since, not_before, outages,
       accepted_at, started_at
from briefs
where state in ('queued', 'running')
order by state desc, run_id""",
    },
    "failed_and_rejected": {
        "title": "Failed and rejected briefs",
        "description": "Runs that failed and files that were not valid briefs, with the reason.",
        "sql": """
select run_id, brief_id, state, source_file, error, error_details, accepted_at, finished_at
from briefs
where state in ('failed', 'rejected')
order by run_id desc
limit 200""",
    },
    "brief_timeline": {
        "title": "A brief's event log",
        "description": "The events of a brief's latest run, in order (what `briefd show ID --events` prints).",
        "sql": """
select ev.seq, ev.at, ev.type, ev.data
from events ev
where ev.run_id = (select max(run_id) from briefs where brief_id = :brief_id)
order by ev.seq""",
    },
    "model_busy_share": {
        "title": "How busy the model was",
        "description": "Per finished run: model seconds as a share of wall seconds (how much the model waited "
                       "for the network).",
        "sql": f"""
select b.run_id, b.brief_id,
       round(sum(case when m.outcome not in {NOT_MODEL_CALLS} then m.seconds else 0 end), 1)
         as model_seconds,
       round((julianday(b.finished_at) - julianday(b.started_at)) * 86400) as wall_seconds,
       round(100.0 * sum(case when m.outcome not in {NOT_MODEL_CALLS} then m.seconds else 0 end)
             / max((julianday(b.finished_at) - julianday(b.started_at)) * 86400, 1), 1) as busy_pct
from briefs b join model_calls m on m.run_id = b.run_id
where b.finished_at is not null and b.started_at is not null
group by b.run_id
order by b.run_id desc
limit 200""",
    },
    "library_problems": {
        "title": "Library files refused or pending",
        "description": "Files under the library folders that were not read, and why.",
        "sql": """
select path, folder, state, reason, size, checked_at
from library_files
where state in ('refused', 'pending', 'skipped') or (state = 'folder' and reason is not null)
order by state, path""",
    },
    "schedules_next": {
        "title": "Repeating briefs",
        "description": "Each series (`every`): when it runs next, its latest run and how it ended.",
        "sql": """
select s.brief_id, s.every, s.next_run_at, s.runs, s.cancelled_at, s.last_run_at, b.state as last_state,
       b.stop_reason as last_stop_reason
from schedules s left join briefs b on b.run_id = s.last_run_id
order by s.cancelled_at is not null, s.next_run_at""",
    },
}


def table_metadata(table: str) -> dict[str, Any]:
    """One table's block: its description, its columns', and how datasette shows it."""
    if table in HIDDEN:
        return {"description": HIDDEN[table], "hidden": True}
    block: dict[str, Any] = {"description": TABLES[table], "columns": dict(COLUMNS[table])}
    if table in LABELS:
        block["label_column"] = LABELS[table]
    if table in FACETS:
        block["facets"] = list(FACETS[table])
    if table in NEWEST_FIRST:
        block["sort_desc"] = NEWEST_FIRST[table]
    return block


def database_name(path: Path) -> str:
    """The name datasette gives a database file: its stem (briefd.db -> briefd)."""
    return Path(path).stem


def metadata_for(path: Path) -> dict[str, Any]:
    """datasette metadata (0.64+: `datasette STORE --metadata FILE`) for the store at `path`."""
    tables = {name: table_metadata(name) for name in [*COLUMNS, *HIDDEN]}
    queries = {name: {**query, "sql": query["sql"].strip()} for name, query in QUERIES.items()}
    return {
        "title": "briefd",
        "description": "briefd's store: the queue, every brief's runs, the pages read, the evidence found, "
                       "every model call and what it cost. The canned queries below answer the questions an "
                       "operator asks; each table and column says what it holds.",
        "databases": {
            database_name(path): {
                "description": "Tables are named for what they hold. A run (briefs.run_id) is one attempt at "
                               "a brief; most tables point at it.",
                "tables": tables,
                "queries": queries,
            }
        },
    }
