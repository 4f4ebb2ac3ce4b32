"""Reading evidence: the passages a model call reads, and the rows its answer becomes.

A batch's passages are checked for injections before any reaches a prompt (a page carrying one is
distrusted whole), ranked against the question and the open gaps, cut to what one call may read
(steps.passage_cut, which also says when a call is not worth making), and read by the model; its
answer becomes evidence rows whose quotes are the pages' own text by construction (sentence ids,
never copied words), each label kept or discarded by policy.accept_labels and each quote by
steps.skipped_quote. The rules live in those pure functions; this module does the I/O around them
for the loop and the page scheduler (it imports neither): the loop hands it the run, as an
`EvidenceRun`, and the run's model door.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...store import PassageRow, Store, utc_now
from ..rules import decide, layout, steps
from ..rules.decide import Limits
from ..sources.search import SearchHit
from ..sources.structure import marks_from_json
from . import planner
from .calls import Ask, today
from .policy import Policy, accept_labels
from .run import RunPart, RunView

PASSAGES_PER_BATCH = 12    # top BM25 passages offered to one call (then cut to the prompt budget)


class EvidenceRun(RunView, Protocol):
    """What the evidence reader asks of the brief's run (loop.Research), beyond what every part reads:
    the question its passages are ranked against (the plan's rewrite, once there is one)."""

    @property
    def question(self) -> str: ...


class EvidenceReader(RunPart[EvidenceRun]):
    """Reads a run's batches of passages into evidence. The run is asked for its state, brief, event log
    and question as they are now (each changes under the reader); the model door (`ask`, `fits`) is
    the run's, kept here so a test can put a model of its own in front of the evidence calls."""

    def __init__(self, run: EvidenceRun, *, limits: Limits, policy: Policy,
                 source_tiers: Sequence[tuple[str, str]], ask: Ask, fits: Callable[[str], bool]) -> None:
        super().__init__(run)
        self.limits, self.policy = limits, policy
        self.kind = policy.kind
        self.source_tiers = source_tiers
        self.ask, self.fits = ask, fits
        self.batches_read = 0  # evidence calls made (a batch of failed or distrusted pages makes none)

    @property
    def question(self) -> str:
        return self.run.question

    async def read_snippets(self, round_no: int, hits: list[SearchHit]) -> None:
        """fetch_pages: false. The snippets SearXNG returned are the text, read in as few calls as
        the prompt budget allows: each call takes the best-ranked snippets that fit, the next the rest.

        The gaps stay as they stood when the round began, so a call's prompt depends only on the
        snippets (a resumed round sends the same prompts, and the answer cache replays them)."""
        gaps = self.state.open_gaps()
        usable = [h for h in hits if h.content][: steps.snippets_allowed(self.limits)]
        ids = [self.store.save_snippet(h.url, h.content) for h in usable]
        titles = {h.url: h.title for h in usable}
        while ids:
            left = await self.read_batch(round_no, ids, titles, gaps, limit=len(ids))
            if len(left) >= len(ids):
                break  # nothing more fits a prompt: an oversize snippet alone
            ids = left

    async def read_batch(self, round_no: int, ids: list[int], titles: dict[str, str],
                         gaps: list[decide.Gap], limit: int = PASSAGES_PER_BATCH) -> list[int]:
        """Rank a batch's passages by BM25 against the question and gaps; the model reads the top
        `limit` of them that fit the prompt. Returns the ranked ones the prompt had no room for."""
        trusted = self.trusted_passages(round_no, ids, titles)
        if not trusted:
            return []
        focus = steps.focus(self.question, gaps)
        matches = set(self.store.rank_passages(list(trusted), focus, limit=len(trusted), matching_only=True))
        about = steps.topics(self.question, self.brief.question, gaps)
        marks = {i: marks_from_json(row.marks) for i, row in trusted.items()}
        cut = steps.passage_cut({i: row.text for i, row in trusted.items()}, matches, focus, about, limit,
                                kinds={i: layout.kind_of(m, 0, len(trusted[i].text)) for i, m in marks.items()})
        rows = [trusted[i] for i in cut.read]
        if cut.skip_call:  # usage says so
            self.state.count_skipped("evidence")
            self.emit("signal", message="evidence call skipped: no passage bears on the question or an open gap",
                      round=round_no, passages=len(cut.ranked))
        if not rows:
            return []
        passages = [planner.PassageIn(id=r.id, url=r.url, title=title_for(self.store, r.url, titles),
                                      origin=r.origin, text=r.text, marks=marks[r.id]) for r in rows]
        line, ask = self.policy.evidence_task(self.state)
        prompt = planner.evidence_prompt(self.question, today(), gaps, passages, self.fits, extra=line, ask=ask)
        if not prompt.used_passages:
            return []
        # the schema allows no more items than the prompt has sentences: the answer's budget follows
        schema = planner.evidence_schema(self.kind, len(prompt.refs))
        self.batches_read += 1
        # which pages this call reads: what tells why a prompt differs from an earlier run's (make bench);
        # and which passages it shows the model (the prompt itself is not kept): `briefd eval` tells
        # from them whether an answer sentence was ever in front of the model (daemon/rules/evaluate.py)
        self.emit("signal", message="reading", round=round_no,
                         urls=list(dict.fromkeys(p.url for p in passages if p.id in prompt.used_passages)),
                         passages=list(prompt.used_passages))
        answer = await self.ask("evidence", prompt.text, schema, planner.coerce_evidence,
                                lambda: planner.EvidenceAnswer(items=[], new_gaps=[], new_queries=[]))
        self.integrate(round_no, prompt, answer, gaps)
        used = set(prompt.used_passages)
        return [r.id for r in rows if r.id not in used]

    def trusted_passages(self, round_no: int, ids: list[int], titles: dict[str, str]) -> dict[int, PassageRow]:
        """The passages (by id, in batch order) whose page is not distrusted; a page carrying an
        injection is distrusted here.

        Every passage of the batch's pages (and each page's title) is checked before the model reads
        any of them, so an injected page's text never reaches a prompt: none of its sentences can be
        quoted, and none of its words can come back as a proposed query or gap.
        """
        rows = self.store.passages(ids)
        for row in rows:
            if row.url in self.state.distrusted:
                continue
            reason = decide.distrust_reason(row.text) or decide.distrust_reason(titles.get(row.url) or "")
            if reason:
                self.distrust(round_no, row.url, reason)
        return {row.id: row for row in rows if row.url not in self.state.distrusted}

    def distrust(self, round_no: int, url: str, reason: str) -> None:
        """Distrust a page whole for this brief: its evidence so far goes, and it is never read again."""
        if url in self.state.distrusted:
            return
        self.state.distrusted[url] = reason
        self.state.count_fallback("distrusted_pages")
        dropped = self.store.drop_evidence(self.run.run_id, url)
        self.emit("signal", message="page distrusted", round=round_no, url=url, reason=reason,
                         evidence_dropped=dropped)


    def read_labels(self, round_no: int, item: planner.EvidenceItem, quote: str, row: dict[str, Any]) -> None:
        """The model's labels on `row`, as policy.accept_labels keeps them (read with the passage before the quote,
        row["lead"]); a figure it discarded is counted and told (evidence_skipped)."""
        labels = accept_labels(self.brief, item, quote, row["url"], self.source_tiers, row["lead"],
                               unit_kind=row["unit_kind"] or "")
        if labels is None:
            return
        for figure in labels.discarded:
            self.state.figures_discarded[figure.reason] = self.state.figures_discarded.get(figure.reason, 0) + 1
            self.emit("evidence_skipped", round=round_no, reason=f"number {figure.reason}",
                             proposed=figure.proposed, field=figure.field, written=figure.written, quote=quote[:200])
        row.update(tier=labels.tier, confidence=labels.confidence, stance=labels.stance, low=labels.low,
                   high=labels.high, impact=labels.impact)

    def integrate(self, round_no: int, prompt: planner.EvidencePrompt, answer: planner.EvidenceAnswer,
                  gaps: list[decide.Gap]) -> None:
        """Evidence rows from sentence ids (quotes verbatim by construction), gaps, new queries."""
        quoted = [(item, planner.quote_span(prompt, item.sentence_ids)) for item in answer.items]
        for item, span in quoted:
            # trusted_passages checks every sentence before the model reads it; a quote is checked
            # again, so that no rule change there can let an injected page's quote through
            if span is not None:
                quote = prompt.passages[span[0].passage_id].text[span[1]:span[2]]
                reason = decide.distrust_reason(quote)
                if reason:
                    self.state.count_fallback("injection_skipped")
                    self.distrust(round_no, span[0].url, reason)
        # the model read an injected page in this answer: what it proposes next may carry its text
        tainted = any(p.url in self.state.distrusted for p in prompt.passages.values())
        about = steps.topics(self.question, self.brief.question, gaps)
        known = {(e["url"], e["quote"]) for e in self.store.evidence(self.run.run_id)}
        # when each quote's text was read: its page's last fetch or confirmation (a snippet: now,
        # the round's search having just returned it)
        read_at = self.store.page_read_at(sorted({p.url for p in prompt.passages.values() if p.origin == "page"}))
        now = utc_now()
        rows: list[dict[str, Any]] = []
        for item, span in quoted:
            if span is None:
                self.state.evaluator_failures += 1
                self.emit("evidence_skipped", round=round_no, reason="no known sentence ids",
                                 sentence_ids=item.sentence_ids)
                continue
            ref, start, end = span
            passage = prompt.passages[ref.passage_id]
            # a heading or headline the model took along at either end is not part of the quote
            lead, tail = decide.statement_bounds(passage.text[start:end], passage.title,
                                                 from_page=ref.origin == "page")
            start, end = start + lead, start + tail
            quote = passage.text[start:end]
            unit_kind = layout.kind_of(passage.marks, start, end)
            skipped = steps.skipped_quote(quote, ref.url, passage.title, ref.origin == "page", self.state.distrusted,
                                          about, known, context=passage.text, unit_kind=unit_kind)
            if skipped is not None:
                self.emit("evidence_skipped", round=round_no, **skipped)
                continue
            contained = steps.contained_quotes(ref.url, quote, known)
            if contained:  # this quote says all they say: it stands for them
                known.difference_update((ref.url, q) for q in contained)
                rows = [r for r in rows if not (r["url"] == ref.url and r["quote"] in contained)]
                self.store.drop_quotes(self.run.run_id, ref.url, contained)
                self.emit("signal", message="quotes replaced by a longer quote of the same page", round=round_no,
                          url=ref.url, replaced=[q[:200] for q in contained])
            known.add((ref.url, quote))
            stored = self.store.passages([ref.passage_id])[0]
            offset = stored.start
            row = {
                "round": round_no, "url": ref.url, "title": passage.title, "passage_id": ref.passage_id,
                "origin": ref.origin, "quote": quote, "quote_start": offset + start,
                "quote_end": offset + end, "summary": item.summary, "confidence": item.confidence,
                "stance": None, "impact": None, "gap": item.gap or None, "low": None, "high": None,
                "tier": item.tier, "unit": item.unit, "scope": item.scope, "reading_date": item.date,
                "page": stored.page, "read_at": read_at.get(ref.url, now) if ref.origin == "page" else now,
                "lead": passage.text[max(0, start - decide.ENTRY_MAX_CHARS):start],
                "unit_kind": unit_kind or None,
            }
            self.read_labels(round_no, item, quote, row)
            rows.append(row)
            if steps.answers_gap(item.gap, item.confidence) and self.state.answer_gap(item.gap, round_no):
                self.emit("signal", message="gap answered", gap=item.gap, round=round_no)
            self.emit("evidence_found", round=round_no, url=ref.url, title=passage.title,
                             quote=quote, summary=item.summary, confidence=row["confidence"],
                             gap=item.gap or None, stance=row["stance"], impact=row["impact"],
                             low=row["low"], high=row["high"], tier=row["tier"])
        self.store.add_evidence(self.run.run_id, rows)
        if tainted:
            if answer.new_gaps or answer.new_queries:
                self.emit("signal", message="proposals dropped: the model read a distrusted page",
                                 new_gaps=answer.new_gaps, new_queries=answer.new_queries)
            return
        off_topic = steps.off_topic([*answer.new_queries, *answer.new_gaps], about)
        added = self.state.add_gaps([g for g in answer.new_gaps if g not in off_topic])
        queued = self.state.add_queries([q for q in answer.new_queries if q not in off_topic])
        if added or queued or off_topic:
            self.emit("signal", message="plan updated", new_gaps=[g.text for g in added],
                             new_queries=queued, **({"dropped_off_topic": off_topic} if off_topic else {}))


def title_for(store: Store, url: str, titles: dict[str, str]) -> str:
    """The title a passage's page is cited with: the one given (a search hit's, a source's own), else the
    stored page's, else its URL (a citation always names something)."""
    if url in titles and titles[url]:
        return titles[url]
    page = store.get_page(url, float("inf"))
    return page.title if page and page.title else url
