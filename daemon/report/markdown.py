"""report.md: the report dict as Markdown, top to bottom, every string escaped (daemon/core/untrusted.py).

It leads with the answer: the question, the computed range against its target or the verdict
and what its evidence level means, why research stopped, then the summary; the evidence that
decided it, side by side, sources; the method (plan, queries, usage) last. `MarkdownDoc` keeps,
beside the lines, the HTML attributes report.html adds to some blocks (html.py renders these
very lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..core.brief import valid_id
from ..core.untrusted import as_dict as _dict, as_list as _list, clean, fold, md_escape
from ..rules.judge import EVIDENCE_LEVEL_MEANING, EVIDENCE_LEVEL_WORDS
from ..rules.numbers import SPAN, is_finite
from ..sources.egress import method_line
from .changes_md import md_changes
from .charts import (CHART_ALT, CHART_FILE, RELEVANCE_ALT, RELEVANCE_FILE, SOURCES_ALT, SOURCES_FILE, band_missing,
                     has_evidence_points)
from .markup import SOURCE_ANCHOR, md_cite_link, md_code_span, md_fenced, md_link, md_num, md_table, md_url
from .report import (USAGE_KEYS, evidence_by_source, is_int, range_text, short_quote, source_numbers, summary_written,
                     value_text)
from .summary import md_summary, source_urls


def _seconds(value: Any) -> str:
    if is_finite(value):
        return f"{value:.1f} s"
    return clean(value)


def _confidence(value: Any) -> str:
    if is_finite(value):
        return f"{value:.2f}"
    return clean(value)


ALSO_USED = "Also used (their evidence is in this report; the summary does not cite them)"
DISTRUSTED_NOTE = ("Pages caught carrying instructions to a model: none of their text is evidence, "
                   "a query or a source of this report.")


def _sources_by_use(report: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sources the summary cites, and the others whose evidence the report keeps.

    A source without `cited` (a report written before the key existed) counts as cited."""
    sources = [_dict(source) for source in _list(report.get("sources"))]
    return ([s for s in sources if s.get("cited") is not False],
            [s for s in sources if s.get("cited") is False])


def _distrusted(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_dict(d) for d in _list(report.get("distrusted")) if _dict(d).get("url")]


def _stance(item: Mapping[str, Any]) -> str:
    return fold(item.get("stance") or item.get("impact") or "")


_USAGE_LABELS: dict[str, str] = {
    "llm_calls": "Model calls",
    "prompt_tokens": "Prompt tokens",
    "completion_tokens": "Completion tokens",
    "searches": "Searches",
    "pages_fetched": "Pages fetched",
    "page_cache_hits": "Page cache hits",
    "pages_not_modified": "Pages checked again and unchanged (not downloaded)",
    "page_bytes": "Bytes of pages downloaded",
    "pages_reused": "Pages read before, found in the store (no fetch)",
    "documents_read": "Library documents and archive articles read",
    "llm_cache_hits": "Model cache hits",
    "wall_seconds": "Wall time",
    "llm_seconds": "Model time",
    "repaired_answers": "Answers repaired",
    "retried_answers": "Answers retried",
    "fallback_answers": "Answers replaced by a fallback",
    "poisoned_answers": "Requests the model server always refused (fallback used)",
    "replayed_failures": "Failed calls replayed from an earlier run (same prompt, model and options; fallback used)",
    "late_pages": "Slow pages a round went on without",
    "late_pages_given_up": "Slow pages never read (still loading at the synthesis)",
    "page_wait_seconds": "Time the model waited for a page",
    "evidence_reused": "Evidence items taken from an earlier run",
}


def _usage_rows(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    usage = _dict(report.get("usage"))
    rows = []
    for key in USAGE_KEYS:
        if key in usage:
            value = usage[key]
            shown = _seconds(value) if key.endswith("seconds") else value_text(value)
            rows.append((_USAGE_LABELS[key], shown))
    structured = _dict(usage.get("structured_output"))
    if structured:
        rows.append(("Model calls by how their JSON was asked for",
                     ", ".join(f"{fold(path)} {value_text(n)}" for path, n in structured.items())))
    skipped = _dict(usage.get("calls_skipped"))
    if skipped:
        rows.append(("Model calls skipped (they could not change the outcome)",
                     ", ".join(f"{fold(purpose)} {value_text(n)}" for purpose, n in skipped.items())))
    for key, value in usage.items():
        if key not in _USAGE_LABELS and key not in ("calls_skipped", "fallbacks"):
            rows.append((fold(key), value_text(value)))
    return rows


def _discarded_rows(estimate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The estimate's discarded figures as (reason, count) rows, most first, with their total."""
    reasons = [(str(k), v) for k, v in _dict(estimate.get("discarded_reasons")).items()
               if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if not reasons:
        return []
    reasons.sort(key=lambda kv: (-kv[1], kv[0]))
    return [(reason, str(n)) for reason, n in reasons] + [("Total", str(sum(n for _, n in reasons)))]


def _estimate_rows(estimate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The estimate table's rows (label, text); a row with nothing to say is left out."""
    rows = [(label, range_text(estimate.get(key)))
            for label, key in (("Initial", "initial"), ("Target", "target"), ("Final", "final"))]
    return [(label, text) for label, text in rows if text]


@dataclass(frozen=True)
class SideCell:
    """One side-by-side cell as plain text pieces; each format renders and escapes it once.

    report.md and report.html used to share one Markdown string, which the HTML then
    escaped: the reader saw `**410**` and `\\[final\\]`. Keeping the pieces apart lets
    each renderer use its own escape (md_escape, html_escape) on untouched text.
    """

    value: str | None   # the figure the source states ("410" or "380–450"), or None
    source: int | None  # its number in `sources`, when it has one
    quote: str          # folded and shortened
    tier: str
    confidence: str


def side_cell(item: Mapping[str, Any]) -> SideCell:
    """An evidence item as its side-by-side cell: the figure it states, its source, the quote cut short."""
    n = item.get("source")
    value = None
    if item.get("low") is not None:
        low, high = item.get("low"), item.get("high")
        value = value_text(low) if low == high else f"{value_text(low)}{SPAN}{value_text(high)}"
    return SideCell(value=value, source=n if is_int(n) else None, quote=short_quote(item.get("quote")),
                    tier=fold(item.get("tier")) or "unrated", confidence=_confidence(item.get("confidence")))


def _md_side_cell(cell: SideCell, known: set[int]) -> str:
    value = f"**{md_escape(cell.value)}** " if cell.value is not None else ""
    cite = f"{md_cite_link(cell.source)} " if cell.source in known else ""
    return f"{value}{cite}{md_escape(cell.quote)} ({md_escape(cell.tier)}, {md_escape(cell.confidence)})"


def _md_sides(sides: Mapping[str, Any], known: set[int]) -> list[str]:
    """Disagreeing sources side by side: a two-column table."""
    left, right = _list(sides.get("left")), _list(sides.get("right"))
    if not left and not right:
        return []
    lines = ["## Side by side", ""]
    rows = []
    for i in range(max(len(left), len(right))):
        rows.append((_md_side_cell(side_cell(_dict(left[i])), known) if i < len(left) else "",
                     _md_side_cell(side_cell(_dict(right[i])), known) if i < len(right) else ""))
    lines += md_table((md_escape(sides.get("left_title")), md_escape(sides.get("right_title"))), rows)
    return lines + [""]


NOT_READ_NOTE = ("No page was read: the evidence comes from the snippets the search engine returned, "
                 "which are cut mid-sentence and may lack context.")


@dataclass
class MarkdownDoc:
    """report.md's lines, plus HTML attributes for the blocks that start on some lines
    (`#source-n` ids on the sources' list items, classes for CSS): report.html is these
    very lines rendered by markdown-it, and these marks only add attributes."""

    lines: list[str]
    marks: dict[int, tuple[str, dict[str, str]]]

    def mark(self, token_type: str, **attrs: str) -> None:
        """Attributes for the `token_type` block that starts on the next line added (an
        entry of `lines` may hold several lines: the summary, a fenced error)."""
        self.marks[sum(line.count("\n") + 1 for line in self.lines)] = (token_type, attrs)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"


def _labelled(report: Mapping[str, Any], fields: tuple[tuple[str, str], ...]) -> list[str]:
    """`**Label:** value` for each (label, key) the report has a value for, escaped."""
    return [f"**{label}:** {md_escape(report.get(key))}" for label, key in fields if report.get(key)]


QUOTE_ANSWER_NOTE = "the kept quote that best answers the question, verbatim: the model wrote no summary"
FIGURE_QUOTE_NOTE = ("the kept quote that best answers the question, verbatim: the model's summary, below, states none "
                     "of its figures")
ONE_QUOTE_NOTE = "the one quote kept, verbatim: it rests on one source"


def _answer_lines(report: Mapping[str, Any]) -> list[str]:
    """The answer, first after the question: the computed range against its target, or the
    verdict and what its evidence level means. A plain brief's answer is its summary, which
    comes right after the status lines. A run that found no answer (`answer.found` false) says
    so instead, in the words of its `answer`: its prior is not an answer."""
    stated = _dict(report.get("answer"))
    if stated.get("found") is False and fold(stated.get("text")):
        return [f"**Answer:** none found. {md_escape(stated.get('text'))}.", ""]
    if stated.get("found") is True and stated.get("from") == "quote" and fold(stated.get("text")):
        one = len(_list(report.get("evidence"))) == 1
        note = ONE_QUOTE_NOTE if one else FIGURE_QUOTE_NOTE if summary_written(report) else QUOTE_ANSWER_NOTE
        return [f"**Answer:** {md_escape(stated.get('text'))} ({note})", ""]
    estimate = _dict(report.get("estimate"))
    if estimate:
        final = range_text(estimate.get("final"))
        unit = fold(estimate.get("unit"))
        if not final:
            return ["**Answer:** no range was computed.", ""]
        answer = f"{final} {unit}".strip()
        target = range_text(estimate.get("target"))
        against = f", against a target of {target} {unit}".rstrip() if target else ", with no target set"
        return [f"**Answer:** {md_escape(answer)}{md_escape(against)}.", ""]
    verdict = _dict(report.get("verdict"))
    if verdict:
        level = fold(verdict.get("evidence_level"))
        words = EVIDENCE_LEVEL_WORDS.get(level)
        meaning = f" ({md_escape(level)}: {md_escape(words)})" if words else (
            f" (evidence level: {md_escape(level)})" if level else "")
        return [f"**Answer:** the claim is **{md_escape(verdict.get('value')) or 'undecided'}**{meaning}.", ""]
    return []


def _pages_not_read(report: Mapping[str, Any]) -> bool:
    """Evidence kept although no page was fetched or taken from the cache: it came from
    search snippets (fetch_pages: false, or every fetch failed)."""
    usage = _dict(report.get("usage"))
    return bool(_list(report.get("evidence"))) and "pages_fetched" in usage and not (
        usage.get("pages_fetched") or usage.get("page_cache_hits") or usage.get("documents_read"))


def _md_evidence(report: Mapping[str, Any]) -> list[str]:
    lines = ["## Evidence", ""]
    groups, unweighed = evidence_by_source(report, weighed=True), evidence_by_source(report, weighed=False)
    if not groups and not unweighed:
        return lines + ["_No evidence was found._", ""]
    if groups:
        lines += ["_Strongest first, grouped by source._", ""]
    lines += _md_evidence_groups(report, groups)
    if unweighed:  # kept, but no rule counts them: never among "the strongest"
        lines += [f"_{md_escape(UNWEIGHED_NOTE)}_", ""]
    return lines + _md_evidence_groups(report, unweighed)


UNWEIGHED_NOTE = "Kept, but given no weight (confidence 0.00): no rule counted these quotes."


def _md_evidence_groups(report: Mapping[str, Any], groups: list[list[dict[str, Any]]]) -> list[str]:
    """Evidence groups, each under its source, each quote with its caption."""
    known = source_numbers(report)
    by_n = {_dict(s).get("n"): _dict(s) for s in _list(report.get("sources"))}
    lines: list[str] = []
    for items in groups:
        n = items[0].get("source")
        if is_int(n) and n in known:
            source = by_n.get(n, {})
            head = f"{md_cite_link(n)} {md_link(source.get('title'), source.get('url'))}"
        else:
            head = md_link(items[0].get("url"), items[0].get("url"))
        tier = fold(items[0].get("tier"))
        lines += [f"**From** {head}" + (f" · {md_escape(tier)}" if tier else ""), ""]
        for item in items:
            lines += [f"> {md_escape(item.get('quote'))}", ""]
            caption = [f"round {md_num(item.get('round'))}"]
            if is_int(item.get("page")):
                caption.insert(0, f"p. {md_num(item.get('page'))}")
            if _stance(item):
                caption.append(md_escape(_stance(item)))
            if item.get("confidence") is not None:
                caption.append(f"confidence {md_escape(_confidence(item.get('confidence')))}")
            read = _read_date(item, fold(report.get("started_at")))
            if read:
                caption.append(f"read {md_escape(read)}")
            lines += ["— " + " · ".join(caption), ""]
    return lines


def _read_date(item: Mapping[str, Any], started_at: str) -> str:
    """When reused evidence was read, as a date: evidence taken from an earlier run, or quoted
    from a page read (or last confirmed by its server) before this run began; "" for evidence
    whose page this run read."""
    read_at = fold(item.get("read_at"))
    if item.get("reused_from") is None and not (read_at and started_at and read_at < started_at):
        return ""
    return read_at[:10]


def _md_source_tier(source: Mapping[str, Any]) -> str:
    """" · tier news (unrated: ...)" after a source whose report.json says how it was tiered
    (assemble.source_items: `tier`, `tier_rule`), so the reader sees why a document weighed little; ""
    for a source without evidence or a report from before the keys."""
    tier = fold(source.get("tier"))
    if not tier or "tier_rule" not in source:
        return ""
    rule = fold(source.get("tier_rule"))
    why = (f"set by source_tiers: {rule}" if rule else
           "unrated: no source_tiers rule covers it, so the tier is the model's label")
    return f" · tier {md_escape(tier)} ({md_escape(why)})"


def _md_follows(report: Mapping[str, Any]) -> list[str]:
    """The line that links a follow-up's report to the earlier one it started from."""
    follows = _dict(report.get("follows"))
    parent = follows.get("id")
    if not follows or not valid_id(parent):
        return []
    finished = fold(follows.get("finished_at"))
    when = f", finished {md_escape(finished)}" if finished else ""
    return [f"**Follows:** [{md_escape(parent)}]({md_url(followed_report(parent))}){when}: this brief "
            f"started from its evidence and open gaps.", ""]


def followed_report(brief_id: str) -> str:
    """The earlier report a follow-up links to, relative to its own folder in the outbox."""
    return f"../{brief_id}/report.md"


def quoted_pages(report: Mapping[str, Any]) -> dict[int, list[int]]:
    """Source number → the document pages its quotes come from (PDFs), in order."""
    pages: dict[int, set[int]] = {}
    for item in (_dict(e) for e in _list(report.get("evidence"))):
        n, page = item.get("source"), item.get("page")
        if isinstance(n, int) and isinstance(page, int):
            pages.setdefault(n, set()).add(page)
    return {n: sorted(found) for n, found in pages.items()}


def _md_pages(pages: list[int] | None) -> str:
    if not pages:
        return ""
    return f" (p. {pages[0]})" if len(pages) == 1 else f" (pp. {', '.join(str(p) for p in pages)})"


def _md_chart(doc: MarkdownDoc, name: str, alt: str) -> None:
    """A chart beside the report, as an image paragraph (report.html inlines the SVG there)."""
    doc.mark("paragraph_open", **{"class": "chart"})
    doc.lines += [f"![{alt}]({name})", ""]


def markdown_doc(report: Mapping[str, Any]) -> MarkdownDoc:
    """report.md, top to bottom: the question, the answer and why it stopped, the status, on
    a re-run what changed since the previous run, the verdict or estimate, the summary; then
    the evidence that decided it (strongest first, by source), side by side, sources,
    distrusted sources; the method last."""
    doc = MarkdownDoc([], {})
    lines = doc.lines
    question = md_escape(report.get("question")) or "Untitled brief"
    lines += [f"# {question}", ""]
    lines += _answer_lines(report)
    if report.get("stop_explanation"):
        lines += [md_escape(report.get("stop_explanation")), ""]

    status = md_escape(report.get("status")) or "unknown"
    facts = [f"**Status:** {status}",
             *_labelled(report, (("Stopped", "stop_reason"), ("Started", "started_at"), ("Finished", "finished_at")))]
    doc.mark("paragraph_open", **{"class": "status"})
    lines += [" · ".join(facts), ""]
    lines += _md_follows(report)

    if report.get("disclaimer"):
        doc.mark("blockquote_open", **{"class": "note"})
        lines += [f"> **Note:** {md_escape(report.get('disclaimer'))}", ""]
    if _pages_not_read(report):
        doc.mark("blockquote_open", **{"class": "note"})
        lines += [f"> **Note:** {md_escape(NOT_READ_NOTE)}", ""]
    lines += md_changes(report)  # a re-run: what differs from the previous run, before the details

    if report.get("status") == "failed" or report.get("error"):
        lines += ["## Error", ""]
        lines += md_fenced(clean(report.get("error")) or "The brief failed without an error message.")
        lines += [""]

    verdict = _dict(report.get("verdict"))
    if verdict:
        lines += ["## Verdict", ""]
        lines += [f"**{md_escape(verdict.get('value'))}** (rule: {md_escape(verdict.get('rule'))}; "
                  f"evidence level: {md_escape(verdict.get('evidence_level'))})", ""]
        meaning = EVIDENCE_LEVEL_MEANING.get(str(verdict.get("evidence_level")))
        if meaning:
            lines += [md_escape(meaning), ""]

    estimate = _dict(report.get("estimate"))
    if estimate:
        unit = md_escape(estimate.get("unit"))
        lines += ["## Estimate", ""]
        rows = [(label, md_escape(text)) for label, text in _estimate_rows(estimate)]
        lines += md_table(("", f"Range ({unit})" if unit else "Range"), rows) + [""]
        if estimate.get("progress_score") is not None:
            lines += [f"**Progress score:** {md_num(estimate.get('progress_score'))}", ""]
        if estimate.get("note"):
            lines += [f"> **Note:** {md_escape(estimate.get('note'))}", ""]
        discarded = _discarded_rows(estimate)
        if discarded:
            lines += ["**Discarded figures**", ""]
            lines += md_table(("Reason", "Figures"), [(md_escape(r), md_escape(n)) for r, n in discarded]) + [""]
        history = [_dict(step) for step in _list(estimate.get("history"))]
        if history:
            lines += md_table(
                ("Round", "Low", "High", "Progress", "Tokens"),
                [tuple(md_num(h.get(k)) for k in ("round", "low", "high", "progress_score", "tokens"))
                 for h in history],
            ) + [""]
        missing = band_missing(report)
        if missing:
            lines += [f"_No chart: {md_escape(missing)}_", ""]

    if estimate and band_missing(report) is None:
        _md_chart(doc, CHART_FILE, CHART_ALT)

    summary = clean(report.get("summary")).strip()
    summary_md = md_summary(summary, source_numbers(report), source_urls(report)) if summary else ""
    lines += ["## Summary", "", summary_md or "_No summary._", ""]

    lines += _md_evidence(report)
    if has_evidence_points(report):  # seed 5's charts, as charts.report_charts draws them
        _md_chart(doc, SOURCES_FILE, SOURCES_ALT)
        _md_chart(doc, RELEVANCE_FILE, RELEVANCE_ALT)
    lines += _md_sides(_dict(report.get("sides")), source_numbers(report))

    lines += ["## Sources", ""]
    cited, also_used = _sources_by_use(report)
    pages = quoted_pages(report)
    if not cited and not also_used:
        lines += ["_No sources are cited._", ""]
    for label, group in (("", cited), (ALSO_USED, also_used)):
        if group:
            lines += [f"**{label}**", ""] if label else []
            for s in group:
                n = s.get("n")
                if is_int(n):
                    doc.mark("list_item_open", id=f"{SOURCE_ANCHOR}{n}")
                lines.append(f"- [{md_escape(n)}] {md_link(s.get('title'), s.get('url'))}{_md_pages(pages.get(n) if isinstance(n, int) else None)}")
                lines[-1] += _md_source_tier(s)
            lines += [""]
    distrusted = _distrusted(report)
    if distrusted:
        lines += ["## Distrusted sources", "", f"_{DISTRUSTED_NOTE}_", ""]
        # a code span: GitHub-style renderers turn a bare URL into a link, never one in code
        lines += [f"- {md_code_span(fold(d.get('url')))} (not linked): {md_escape(d.get('reason'))}"
                  for d in distrusted] + [""]

    gaps = _list(report.get("gaps"))
    lines += ["## Open gaps", ""]
    lines += ([f"- {md_escape(gap)}" for gap in gaps] if gaps else ["_None._"]) + [""]

    asks = _list(report.get("open_questions"))
    if asks:
        lines += ["## Open questions", "", "_An unattended daemon cannot ask; these are what the requester "
                  "could clarify in a follow-up brief._", ""]
        lines += [f"- {md_escape(ask)}" for ask in asks] + [""]

    lines += ["## Method", ""]
    details = _labelled(report, (("Brief", "id"), ("Model", "model"), ("Search", "searxng_url")))
    if details:
        lines += [" · ".join(details), ""]
    searched = [md_escape(kind) for kind in _list(report.get("searched"))]
    if searched:
        lines += [f"**Sources searched:** {', '.join(searched)}", ""]
    network = _dict(report.get("egress"))
    if network:
        lines += [md_escape(method_line(network)), ""]  # host names come from pages: escaped

    research_question = report.get("research_question")
    angles = _list(report.get("angles"))
    if (research_question and fold(research_question) != fold(report.get("question"))) or angles:
        lines += ["### Research plan", ""]
        if research_question:
            lines += [f"**Research question:** {md_escape(research_question)}", ""]
        if angles:
            lines += [f"- {md_escape(angle)}" for angle in angles] + [""]

    queries = [_dict(q) for q in _list(report.get("queries"))]
    lines += ["### Queries", ""]
    if queries:
        lines += md_table(("Round", "Query", "Results"),
                           [(md_num(q.get("round")), md_escape(q.get("text")), md_num(q.get("results")))
                            for q in queries]) + [""]
    else:
        lines += ["_No searches were run._", ""]

    fallbacks = _dict(report.get("fallbacks"))
    if fallbacks:
        lines += ["### Fallbacks", ""]
        lines += md_table(("Fallback", "Times"),
                           [(md_escape(name), md_num(count)) for name, count in fallbacks.items()]) + [""]

    usage = _usage_rows(report)
    if usage:
        lines += ["### Usage", ""]
        lines += md_table(("Measure", "Value"), [(md_escape(label), md_escape(value)) for label, value in usage]) + [""]
    return doc


def render_markdown(report: Mapping[str, Any]) -> str:
    """report.md (see `markdown_doc` for its order); a failed brief shows its error."""
    return markdown_doc(report).text
