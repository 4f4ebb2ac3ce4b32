"""What briefd has researched: the list of briefs and full-text search over what they found.

`briefd list` and `briefd search` print these objects, and the HTTP API (`GET /briefs`,
`GET /search?q=`) serves the same ones through `to_json()`, so both read one set of rules:
which run of a brief is listed, what a filter means, how a query is read and ranked.

Listing reads `briefs` (every run, queued and running ones included: they have no report yet),
joined with `reports` (the answer line a finished run reported) and `schedules` (the next run of
a series not cancelled). Search reads the two FTS5 indexes of migration 7: `reports_fts` over
question, answer and summary, and `evidence_fts` over evidence quotes.

Why search is AND first: `fts_or_query` (one word matching is enough) suits ranking passages
for the model, where recall matters; a person who types "lead pipes lakeside" means all three,
and with OR a common word alone fills the first page. So the words are searched together first,
and only when that finds fewer than `limit` results are runs with some of the words added, after
them (ranked by the rarest few: see _Match). Both passes read the same words, quoted by `fts_or_query`, so user text cannot break FTS5's
syntax.

Why a word found in more than half of an index's rows ranks nothing: bm25's idf clamps it to
almost zero there (FTS5's bm25), so it cannot order results, yet ranking by it reads every row it
is in ("the": 83,000 of 110,000 quotes, 170 ms). Such a word still has to be there when all the
words are asked for, but the pass with some of them leaves it out, and when a pass has nothing
else to rank by, its newest rows come first (FTS5 walks its rowids backwards and stops at the limit).

Why two steps per index: ordering by `rank, rowid DESC` (bm25, then the latest run first when
ranks tie: the same quote or question in each run of a series ranks the same) keeps only rowids
and ranks in SQLite's sorter; `snippet()` then runs for the few rows kept, not for every match.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from .briefs import Store
from .db import CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING, fts_or_query, iso_utc
from briefd.errors import BriefdError

KINDS = ("plain", "estimate", "hypothesis")
STATES = (QUEUED, RUNNING, DONE, FAILED, CANCELLED, REJECTED)
DEFAULT_LIST_LIMIT = 50
DEFAULT_SEARCH_LIMIT = 20
MAX_LIMIT = 10_000
QUESTION, ANSWER, SUMMARY, QUOTE = "question", "answer", "summary", "quote"
REPORT_FIELDS = (QUESTION, ANSWER, SUMMARY)  # reports_fts's columns, in order
# which field a hit names when several hold as much of the match: the question says what the brief
# was about; a plain brief's answer is its summary's first sentence, and the summary says more
TIE_ORDER = (QUESTION, SUMMARY, ANSWER)
SNIPPET_TOKENS = 20
PARTIAL_WORDS = 8  # the words the pass with some of them ranks by: the rarest
CANDIDATES_PER_RESULT = 3  # rows read per result asked for: room for the repeats a series makes
_OPEN, _CLOSE = "\x02", "\x03"  # marks snippet() puts around a match: controls never stored (untrusted.clean)
DATE_EXAMPLE = "a date such as 2026-11-24, or a time such as 2026-11-24T06:00:00Z"


class HistoryError(BriefdError, ValueError):
    """A filter or a search text that can't be used: the message names the fix."""


@dataclass(frozen=True)
class BriefEntry:
    """One run of a brief, as `briefd list` shows it (the latest of its id, unless every run is asked)."""

    id: str
    run: int
    kind: str | None          # plain | estimate | hypothesis (None: rejected, never read as a brief)
    state: str
    stop_reason: str | None
    answer: str | None        # the report's answer line; None before the run ends
    answer_found: bool | None  # whether that line states an answer (report.json's answer.found); None: not known
    question: str
    error: str | None
    accepted_at: str
    started_at: str | None
    finished_at: str | None
    runs: int                 # how many runs this id has (rejected ones counted only when listing those)
    next_run_at: str | None   # the next run of its series (`every`), while the series is not cancelled

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SearchHit:
    """Where a search's words were found: a run's question, answer or summary, or an evidence quote."""

    id: str                   # the brief
    run: int
    at: str                   # when that run ended (or started, or was accepted, while it has not)
    matched: str              # question | answer | summary | quote
    snippet: str              # a short excerpt around the match, whitespace folded
    url: str | None           # a quote's source
    title: str | None
    rank: float               # bm25 (lower is better) within its pass (all the words, then some); 0 when
                              # only words in most rows matched: bm25 gives those no weight
    all_words: bool           # found with every word of the search (the first pass)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ListQuery:
    """What `list` shows: checked by `list_query`, so the CLI and the HTTP API refuse the same input."""

    state: str | None = None
    kind: str | None = None
    since: str | None = None  # store timestamp: runs that finished at or after it, or have not finished
    until: str | None = None  # store timestamp, exclusive: runs accepted before it
    limit: int = DEFAULT_LIST_LIMIT
    runs: bool = False        # every run, not only each id's latest


def list_query(*, state: str | None = None, kind: str | None = None, since: str | None = None,
               until: str | None = None, limit: int | str | None = None, runs: bool = False) -> ListQuery:
    """User text → a ListQuery, or HistoryError naming the value expected. A date alone covers
    that whole day (UTC): `--until 2026-11-24` includes runs accepted on the 24th."""
    if state is not None and state not in STATES:
        raise HistoryError(f"unknown state {state!r}: use one of {', '.join(STATES)}")
    if kind is not None and kind not in KINDS:
        raise HistoryError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    start = parse_when(since, "since")[0] if since is not None else None
    end = parse_when(until, "until")[1] if until is not None else None
    if start is not None and end is not None and start >= end:
        raise HistoryError(f"since ({since}) is not before until ({until}): swap them")
    return ListQuery(state=state, kind=kind, since=start, until=end,
                     limit=check_limit(limit, DEFAULT_LIST_LIMIT), runs=runs)


def check_limit(limit: int | str | None, default: int) -> int:
    """How many rows to show: a whole number from 1 to MAX_LIMIT."""
    if limit is None:
        return default
    try:
        value = int(limit)
    except (TypeError, ValueError):
        value = 0
    if not 1 <= value <= MAX_LIMIT or (isinstance(limit, str) and not limit.strip().isdigit()):
        raise HistoryError(f"limit must be a whole number from 1 to {MAX_LIMIT:,}, got {limit!r}")
    return value


def parse_when(text: str, name: str) -> tuple[str, str]:
    """A date or a time → (its start, its end, exclusive) as store timestamps: a date spans its
    day; a time its second (the store keeps seconds). A time without a zone is UTC, as stored."""
    value = text.strip() if isinstance(text, str) else ""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
            return iso_utc(start), iso_utc(start + timedelta(days=1))
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise HistoryError(f"{name}: expected {DATE_EXAMPLE}, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.replace(microsecond=0)
    return iso_utc(moment), iso_utc(moment + timedelta(seconds=1))


def search_words(text: str) -> list[str]:
    """The words a search looks for, each quoted for FTS5 (fts_or_query's one reading of user
    text); HistoryError when there are none, so an empty search is refused, not "nothing found"."""
    query = fts_or_query(text or "")
    if not query:
        raise HistoryError(f"nothing to search for in {text!r}: give at least one word of two letters or more")
    return query.split(" OR ")


# The kind of a run without a report (queued, running, or ended before schema 7): what its brief
# asks for. A report's own kind (report.history_row) is preferred: it is what the run answered.
_KIND = ("COALESCE(r.kind, CASE WHEN b.state = 'rejected' OR NOT json_valid(b.brief_json) THEN NULL "
         "WHEN json_type(b.brief_json, '$.estimate') IS NOT NULL THEN 'estimate' "
         "WHEN json_type(b.brief_json, '$.hypothesis') IS NOT NULL THEN 'hypothesis' ELSE 'plain' END)")


def _list_sql(query: ListQuery) -> tuple[str, list[Any]]:
    """The one statement `list` runs. Newest first by run_id (the order runs were accepted), read
    backwards along the table's rowid, so with a LIMIT it stops early; "latest of its id" and the
    run count are lookups in the brief_id index (EXPLAIN QUERY PLAN: lab/history_bench.py)."""
    rejected = "=" if query.state == REJECTED else "!="  # rejected files are listed only when asked for
    where, params = [f"b.state {rejected} 'rejected'"], []
    if not query.runs:
        where.append("NOT EXISTS (SELECT 1 FROM briefs n WHERE n.brief_id = b.brief_id AND n.run_id > b.run_id "
                     f"AND n.state {rejected} 'rejected')")
    if query.state is not None:
        where.append("b.state = ?")
        params.append(query.state)
    if query.kind is not None:
        where.append(f"{_KIND} = ?")
        params.append(query.kind)
    if query.since is not None:
        where.append("(b.finished_at IS NULL OR b.finished_at >= ?)")
        params.append(query.since)
    if query.until is not None:
        where.append("b.accepted_at < ?")
        params.append(query.until)
    sql = (f"SELECT b.brief_id, b.run_id, {_KIND} AS kind, b.state, b.stop_reason, r.answer, b.question, b.error, "
           "b.accepted_at, b.started_at, b.finished_at, "
           f"(SELECT count(*) FROM briefs c WHERE c.brief_id = b.brief_id AND c.state {rejected} 'rejected'), "
           "s.next_run_at, r.answer_found FROM briefs b LEFT JOIN reports r ON r.run_id = b.run_id "
           "LEFT JOIN schedules s ON s.brief_id = b.brief_id AND s.cancelled_at IS NULL "
           f"WHERE {' AND '.join(where)} ORDER BY b.run_id DESC LIMIT ?")
    return sql, [*params, query.limit]


@dataclass
class History:
    """The history's reads, over one Store (the same thread-bound connection)."""

    store: Store

    def briefs(self, query: ListQuery | None = None) -> list[BriefEntry]:
        """The briefs `query` selects, newest first."""
        sql, params = _list_sql(query or ListQuery())
        return [BriefEntry(id=row[0], run=row[1], kind=row[2], state=row[3], stop_reason=row[4], answer=row[5],
                           question=row[6] or "", error=row[7], accepted_at=row[8], started_at=row[9],
                           finished_at=row[10], runs=row[11], next_run_at=row[12],
                           answer_found=None if row[13] is None else bool(row[13]))
                for row in self.store.db.execute(sql, params).fetchall()]

    def search(self, text: str, limit: int | str | None = None) -> list[SearchHit]:
        """Runs whose question, answer, summary or evidence quotes hold the words of `text`: those
        with every word first, then (when they are fewer than `limit`) those with some; each pass
        ranked by bm25, the latest run first on a tie. The same text found again in another run
        of the same brief (a series asks the same question, reuses the same quotes) is shown once,
        at its best-ranked, latest run."""
        words = search_words(text)
        limit = check_limit(limit, DEFAULT_SEARCH_LIMIT)
        counts = {table: self._counts(table, words) for table in ("reports_fts", "evidence_fts")}
        hits: list[SearchHit] = []
        seen_rows: set[tuple[str, int]] = set()
        seen_text: set[tuple[str, str, str | None, str]] = set()
        for all_words in (True, False) if len(words) > 1 else (True,):
            found = (self._reports(_Match(words, counts["reports_fts"], all_words), limit)
                     + self._quotes(_Match(words, counts["evidence_fts"], all_words), limit))
            found.sort(key=lambda pair: (pair[1].rank, -pair[1].run))
            for row_key, hit in found:
                if row_key in seen_rows:
                    continue
                seen_rows.add(row_key)
                text_key = (hit.id, hit.matched, hit.url, hit.snippet)
                if text_key in seen_text:
                    continue
                seen_text.add(text_key)
                hits.append(hit)
                if len(hits) >= limit:
                    return hits
        return hits

    def _counts(self, table: str, words: list[str]) -> _Counts:
        """How many of `table`'s rows hold each word, and how many rows it has (bm25's n and N)."""
        db = self.store.db
        rows = db.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]
        return _Counts(rows, {w: db.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", [w]).fetchone()[0]
                              for w in words})

    def _best(self, table: str, match: _Match, limit: int) -> list[tuple[int, float]]:
        """The best rowids of an FTS5 table for `match`: bm25 then latest first, or latest first
        when only words too common to rank are left."""
        if not match.text:
            return []
        if not match.ranked:  # rank 0 for all: the merge then orders them by run, latest first
            return [(r[0], 0.0) for r in self.store.db.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid DESC LIMIT ?",
                [match.text, limit * CANDIDATES_PER_RESULT]).fetchall()]
        return [(r[0], r[1]) for r in self.store.db.execute(
            f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY rank, rowid DESC LIMIT ?",
            [match.text, limit * CANDIDATES_PER_RESULT]).fetchall()]

    def _reports(self, match: _Match, limit: int) -> list[tuple[tuple[str, int], SearchHit]]:
        all_words, best = match.all_words, dict(self._best("reports_fts", match, limit))
        if not best:
            return []
        marks = ",".join("?" for _ in best)
        snippets = ", ".join(f"snippet(reports_fts, {n}, '{_OPEN}', '{_CLOSE}', '…', {SNIPPET_TOKENS})"
                             for n in range(len(REPORT_FIELDS)))
        rows = self.store.db.execute(
            f"SELECT reports_fts.rowid, r.brief_id, {_RUN_AT}, {snippets} FROM reports_fts "
            "JOIN reports r ON r.run_id = reports_fts.rowid LEFT JOIN briefs b ON b.run_id = r.run_id "
            f"WHERE reports_fts MATCH ? AND reports_fts.rowid IN ({marks})", [match.text, *best]).fetchall()
        out = []
        for run_id, brief_id, at, *fields in rows:
            field, snippet = _matched_field(fields)
            out.append((("r", run_id), SearchHit(id=brief_id, run=run_id, at=at, matched=field, snippet=snippet,
                                                 url=None, title=None, rank=best[run_id], all_words=all_words)))
        return out

    def _quotes(self, match: _Match, limit: int) -> list[tuple[tuple[str, int], SearchHit]]:
        all_words, best = match.all_words, dict(self._best("evidence_fts", match, limit))
        if not best:
            return []
        marks = ",".join("?" for _ in best)
        rows = self.store.db.execute(
            f"SELECT e.id, e.run_id, b.brief_id, {_RUN_AT}, e.url, e.title, "
            f"snippet(evidence_fts, 0, '{_OPEN}', '{_CLOSE}', '…', {SNIPPET_TOKENS}) FROM evidence_fts "
            "JOIN evidence e ON e.id = evidence_fts.rowid JOIN briefs b ON b.run_id = e.run_id "
            f"WHERE evidence_fts MATCH ? AND evidence_fts.rowid IN ({marks})", [match.text, *best]).fetchall()
        return [(("e", row_id), SearchHit(id=brief_id, run=run_id, at=at, matched=QUOTE, snippet=_plain(snippet),
                                          url=url, title=title, rank=best[row_id], all_words=all_words))
                for row_id, run_id, brief_id, at, url, title, snippet in rows]


@dataclass(frozen=True)
class _Counts:
    """bm25's N (rows of an index) and n (rows holding each word)."""

    rows: int
    per_word: dict[str, int]

    def common(self, word: str) -> bool:
        """In more than half the rows: bm25 gives it no weight."""
        return 2 * self.per_word[word] > self.rows


@dataclass(frozen=True)
class _Match:
    """One pass over one index: every word (AND); or some (OR): the PARTIAL_WORDS rarest of
    those found and not too common to rank (the rarest carry bm25's weight; ranking by thirty
    words of a pasted sentence read every row: 230 ms at 110,000 quotes)."""

    words: list[str]
    counts: _Counts
    all_words: bool

    @property
    def chosen(self) -> list[str]:
        if self.all_words:
            return self.words if all(self.counts.per_word[w] for w in self.words) else []
        rare = [w for w in self.words if not self.counts.common(w)]
        if not rare:  # only words in most rows: they find the newest of those rows
            return self.words
        return sorted((w for w in rare if self.counts.per_word[w]), key=self.counts.per_word.__getitem__)[:PARTIAL_WORDS]

    @property
    def text(self) -> str:
        return (" AND " if self.all_words else " OR ").join(self.chosen)

    @property
    def ranked(self) -> bool:
        """Whether a word bm25 weighs is in the match."""
        return any(not self.counts.common(w) for w in self.chosen)


_RUN_AT = "COALESCE(b.finished_at, b.started_at, b.accepted_at)"


def _matched_field(snippets: list[str]) -> tuple[str, str]:
    """Which of a report's fields holds most of the match (a tie: the earlier in TIE_ORDER), and its snippet."""
    counts = [(s or "").count(_OPEN) for s in snippets]
    best = max(range(len(snippets)), key=lambda n: (counts[n], -TIE_ORDER.index(REPORT_FIELDS[n])))
    return REPORT_FIELDS[best], _plain(snippets[best] or "")


def _plain(snippet: str) -> str:
    """A snippet without its match marks, whitespace folded to one line."""
    return " ".join(snippet.replace(_OPEN, "").replace(_CLOSE, "").split())
