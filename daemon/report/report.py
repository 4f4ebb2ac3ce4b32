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

The report dict *is* report.json (CONTRACT.md): the renderers read it and never add to it.
Outbox paths go through `safe_outdir`, and nothing already in an outbox folder is ever
deleted: `archive_previous` moves an earlier run aside before a new one writes.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping, Sequence

from ...store.db import utc_now
from ..core import files
from ..core.brief import ID_RE, id_from_filename, valid_id
from .charts import (CHART_ALT, CHART_FILE, CHART_NAMES, RELEVANCE_ALT, RELEVANCE_FILE, SOURCES_ALT,
                           SOURCES_FILE, band_missing, has_evidence_points, report_charts)
from ..rules.citations import CITATION_RE, find_citations
from ..rules.decide import answers, leans_on_before
from ..sources.egress import method_line
from ..rules.judge import EVIDENCE_LEVEL_MEANING, EVIDENCE_LEVEL_WORDS
from ..rules.numbers import SPAN, finite, is_finite, number_text
from ..core.schedule import parse_iso
from ..core.untrusted import (
    as_dict,
    as_list,
    clean,
    clean_json,
    fold,
    html_escape,
    md_block_start,
    md_escape,
    md_inline,
)

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
FORMATS: frozenset[str] = frozenset({"json", "md", "html"})
ANSWER_TEXT_CHARS = 200  # the answer line `briefd list` shows: the first sentence, cut here
SOURCE_ANCHOR = "source-"  # a source's entry in the reports is #source-<n>

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
        # what the run found, or that it found nothing (report/assemble.py's answer_of); CONTRACT.md
        "answer": {"found": False, "text": "", "from": None},
    }


# ---------------------------------------------------------------------------
# Small shared helpers


def _num(value: Any) -> str:
    """A value of report.json as report.md shows it: numbers in the one form (rules/numbers.py)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return clean(value)


def _seconds(value: Any) -> str:
    if is_finite(value):
        return f"{value:.1f} s"
    return clean(value)


def _confidence(value: Any) -> str:
    if is_finite(value):
        return f"{value:.2f}"
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


def _is_n(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _source_numbers(report: Mapping[str, Any]) -> set[int]:
    numbers: set[int] = set()
    for source in _list(report.get("sources")):
        n = _dict(source).get("n")
        if isinstance(n, int) and not isinstance(n, bool):
            numbers.add(n)
    return numbers


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
            shown = _seconds(value) if key.endswith("seconds") else _num(value)
            rows.append((_USAGE_LABELS[key], shown))
    skipped = _dict(usage.get("calls_skipped"))
    if skipped:
        rows.append(("Model calls skipped (they could not change the outcome)",
                     ", ".join(f"{fold(purpose)} {_num(n)}" for purpose, n in skipped.items())))
    for key, value in usage.items():
        if key not in _USAGE_LABELS and key not in ("calls_skipped", "fallbacks"):
            rows.append((fold(key), _num(value)))
    return rows


# ---------------------------------------------------------------------------
# The model's summary: a small Markdown subset, parsed once, rendered per format
#
# The summary is the one field that keeps structure (headings, lists, code, emphasis,
# citations). Rather than patching the model's Markdown (a filter that misses one
# spelling, such as a backslash before a tag, lets it through), it is read into the few
# pieces briefd renders, and every piece of text in them goes through the one escaping
# function of the output format. Nothing the model wrote is ever copied into either
# output as markup; links survive only to the report's own sources.


@dataclass(frozen=True)
class Inline:
    """A piece of a summary line: text, code, a citation group, a link, or emphasis."""

    kind: str  # "text" | "code" | "cite" | "link" | "strong" | "em"
    text: str = ""  # the text, the code, the link's label, the citation group as written
    url: str = ""
    numbers: tuple[int, ...] = ()
    children: tuple[Inline, ...] = ()


@dataclass(frozen=True)
class Block:
    """A block of the summary: its lines of inline text (one for a heading or paragraph,
    one per item for a list) or, for code, its lines verbatim."""

    kind: str  # "heading" | "paragraph" | "bullets" | "numbers" | "code" | "table"
    lines: tuple[str, ...]
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()  # a table's cells, the header row first


_INLINE_RE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?P<code_body>.+?)(?P=ticks))"
    r"|(?P<link>\[(?P<label>[^\[\]\n]*)\]\((?P<url>[^()\s]*)\))"
    r"|(?P<cite>" + CITATION_RE.pattern + r")"
    r"|(?P<strong>\*\*(?=\S)(?P<strong_body>.+?)(?<=\S)\*\*)"
    r"|(?P<em>(?<![*\w])\*(?=\S)(?P<em_body>[^*]+?)(?<=\S)\*(?![*\w]))"
)
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BULLET_RE = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_ORDERED_RE = re.compile(r"^\s{0,3}\d{1,9}[.)]\s+(.*)$")
_ATX_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_ROW_RE = re.compile(r"^\|.*\|$")
_TABLE_RULE_RE = re.compile(r"^\|?(?:\s*:?-+:?\s*\|)*\s*:?-+:?\s*\|?$")
_CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")


def parse_inline(text: str) -> tuple[Inline, ...]:
    """A summary line as pieces; anything not recognised is text."""
    pieces: list[Inline] = []
    cursor = 0
    for m in _INLINE_RE.finditer(text):
        if m.start() > cursor:
            pieces.append(Inline("text", text[cursor : m.start()]))
        if m.group("code") is not None:
            pieces.append(Inline("code", m.group("code_body").strip() or m.group("code_body")))
        elif m.group("link") is not None:
            pieces.append(Inline("link", m.group("label"), url=m.group("url")))
        elif m.group("cite") is not None:
            pieces.append(Inline("cite", m.group("cite"), numbers=find_citations(m.group("cite"))[0].numbers))
        elif m.group("strong") is not None:
            pieces.append(Inline("strong", children=parse_inline(m.group("strong_body"))))
        else:
            pieces.append(Inline("em", children=parse_inline(m.group("em_body"))))
        cursor = m.end()
    if cursor < len(text):
        pieces.append(Inline("text", text[cursor:]))
    return tuple(pieces)


def _table(lines: list[str]) -> Block | None:
    """Lines that are a pipe table (rows, the second a `|---|` rule) as one, else None."""
    if len(lines) < 2 or not all(_TABLE_ROW_RE.match(line) for line in lines) or not _TABLE_RULE_RE.match(lines[1]):
        return None
    rows = [tuple(cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT_RE.split(line[1:-1]))
            for line in lines[:1] + lines[2:]]
    width = len(rows[0])
    return Block("table", (), rows=tuple((row + ("",) * width)[:width] for row in rows))


def parse_summary(summary: str) -> list[Block]:
    """The summary's blocks: ATX headings, paragraphs (lines joined), bullet and numbered
    lists (indented lines continue an item), pipe tables, fenced code (an unclosed fence
    ends with the summary). Everything else, setext underlines included, is paragraph text."""
    blocks: list[Block] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_kind = ""
    code: list[str] | None = None
    fence = ""

    def flush() -> None:
        nonlocal list_kind
        if paragraph:
            blocks.append(_table(paragraph) or Block("paragraph", (" ".join(paragraph),)))
            paragraph.clear()
        if list_kind:
            blocks.append(Block(list_kind, tuple(items)))
            items.clear()
            list_kind = ""

    for line in clean(summary).split("\n"):
        if code is not None:
            if line.strip().startswith(fence):
                blocks.append(Block("code", tuple(code)))
                code = None
            else:
                code.append(line)
            continue
        fence_match = _FENCE_RE.match(line)
        heading, bullet, ordered = _ATX_RE.match(line), _BULLET_RE.match(line), _ORDERED_RE.match(line)
        if fence_match:
            flush()
            fence, code = fence_match.group(1), []
        elif not line.strip():
            flush()
        elif heading:
            flush()
            blocks.append(Block("heading", (heading.group(2),), level=len(heading.group(1))))
        elif listed := bullet or ordered:
            kind = "bullets" if bullet else "numbers"
            if paragraph or list_kind != kind:
                flush()
                list_kind = kind
            items.append(listed.group(1).strip())
        elif list_kind and line[:1].isspace():
            items[-1] += " " + line.strip()
        else:
            if list_kind:
                flush()
            paragraph.append(line.strip())
    flush()
    if code is not None:
        blocks.append(Block("code", tuple(code)))
    return blocks


def _summary_heading_level(level: int) -> int:
    """The summary's own headings nest under the report's "Summary" (an h2)."""
    return min(6, level + 2)


def _source_urls(report: Mapping[str, Any]) -> frozenset[str]:
    """The URLs a summary link may point to: the report's own sources, http(s) only."""
    urls = (safe_http_url(_dict(source).get("url")) for source in _list(report.get("sources")))
    return frozenset(url for url in urls if url is not None)


# ---------------------------------------------------------------------------
# Markdown


def _md_url(url: str) -> str:
    """A link destination that means exactly `url`: what would end or break it (spaces,
    parens, brackets, quotes, backslashes) percent-encoded, and an `&` that would start
    an entity ("&#60;" reads as "<") backslash-escaped, so the link goes where it says."""
    url = re.sub(r"[\s()<>\[\]`\\\"']", lambda m: f"%{ord(m.group(0)):02X}", url)
    return re.sub(r"&(?=#?[A-Za-z0-9]+;)", r"\\&", url)


def md_link(title: Any, url: Any) -> str:
    """`[title](url)` for http(s) URLs; otherwise the title and the URL as plain text."""
    label = md_escape(title) or md_escape(url) or "untitled"
    href = safe_http_url(url)
    if href is None:
        return f"{label} ({md_escape(url)})" if url and label != md_escape(url) else label
    return f"[{label}]({_md_url(href)})"


def _md_code_span(code: str, *, in_table: bool = False) -> str:
    """`code` as one code span that shows it exactly: its backtick run one longer than any inside, and
    padded with a space each side (CommonMark strips one), so a backtick at either end stays code.
    In a table cell a `|` is written `\\|`: GFM splits a row at every unescaped pipe, code spans
    included, and a split span would leave its text (a tag among it) outside any code.
    The caller never puts a backtick beside the span (see `_joined_code`)."""
    if in_table:
        code = code.replace("|", "\\|")
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", code)), default=0) + 1)
    return f"{ticks} {code} {ticks}"


def _joined_code(pieces: Iterable[Inline]) -> list[Inline]:
    """The pieces with every run of adjacent code pieces made one. Two spans side by side put their
    backtick runs together (`a` and ``b`` wrote "` a ``` b ``"): CommonMark reads the joined run
    as one delimiter, the spans pair up differently, and what lay between them, a tag among it,
    came out as raw HTML (issue 19 #4). One span holding both texts shows the same characters."""
    out: list[Inline] = []
    for piece in pieces:
        if piece.kind == "code" and out and out[-1].kind == "code":
            out[-1] = Inline("code", out[-1].text + piece.text)
        else:
            out.append(piece)
    return out


def _md_inline(pieces: Iterable[Inline], known: set[int], links: frozenset[str], in_table: bool = False) -> str:
    out: list[str] = []
    for piece in _joined_code(pieces):
        if piece.kind == "code":
            out.append(_md_code_span(fold(piece.text), in_table=in_table))
        elif piece.kind == "cite":
            out.append(_md_cite(piece, known))
        elif piece.kind == "link":
            out.append(_md_summary_link(piece, links))
        elif piece.kind in ("strong", "em"):
            mark = "**" if piece.kind == "strong" else "*"
            out.append(mark + _md_inline(piece.children, known, links, in_table) + mark)
        else:
            out.append(md_inline(piece.text))
    return "".join(out)


def _md_cite(piece: Inline, known: set[int]) -> str:
    """Known numbers as briefd's own `[[n]](#source-n)`; a group citing nothing known stays text."""
    if not any(n in known for n in piece.numbers):
        return md_inline(piece.text)
    return "".join(_md_cite_link(n) if n in known else md_inline(f"[{n}]") for n in piece.numbers)


def _md_summary_link(piece: Inline, links: frozenset[str]) -> str:
    """A link survives only to one of the report's sources; otherwise label and URL as text."""
    label = md_inline(piece.text.strip()) or md_inline(piece.url)
    if piece.url in links:
        return f"[{label}]({_md_url(piece.url)})"
    if not piece.url or piece.url == piece.text.strip():
        return label
    return f"{label} ({md_inline(piece.url)})"


def _md_summary(summary: str, known: set[int], links: frozenset[str]) -> str:
    """The model's summary as Markdown that cannot restructure the report: headings nest
    under "Summary", every piece of text is escaped (no raw HTML, image, autolink or
    reference definition can form), links only to the sources, code fences always closed."""
    out: list[str] = []
    for block in parse_summary(summary):
        if block.kind == "code":
            out += _md_fenced("\n".join(block.lines))
        elif block.kind == "heading":
            level = _summary_heading_level(block.level)
            out.append("#" * level + " " + _md_inline(parse_inline(block.lines[0]), known, links))
        elif block.kind == "table":
            cells = [tuple(_md_inline(parse_inline(cell), known, links, in_table=True) for cell in row)
                     for row in block.rows]
            out += _md_table(cells[0], cells[1:])
        elif block.kind in ("bullets", "numbers"):
            for i, item in enumerate(block.lines, start=1):
                marker = "-" if block.kind == "bullets" else f"{i}."
                out.append(f"{marker} " + md_block_start(_md_inline(parse_inline(item), known, links)))
        else:
            out.append(md_block_start(_md_inline(parse_inline(block.lines[0]), known, links)))
        out.append("")
    return "\n".join(out).strip("\n")


def _discarded_rows(estimate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The estimate's discarded figures as (reason, count) rows, most first, with their total."""
    reasons = [(str(k), v) for k, v in _dict(estimate.get("discarded_reasons")).items()
               if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if not reasons:
        return []
    reasons.sort(key=lambda kv: (-kv[1], kv[0]))
    return [(reason, str(n)) for reason, n in reasons] + [("Total", str(sum(n for _, n in reasons)))]


def _md_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _md_fenced(text: str) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text.replace("\r\n", "\n").rstrip("\n"), fence]


def _md_num(value: Any) -> str:
    """A number as report.md shows it; a stored value that is not a number is escaped text."""
    return md_escape(_num(value))


def range_text(value: Any) -> str:
    """A range as the estimate table shows it: low–high, as the stop sentence and the charts write it;
    a target given as a width reads width ≤ 60; nothing to show gives the empty string."""
    rng = _dict(value)
    if rng.get("low") is not None and rng.get("high") is not None:
        return f"{_num(rng.get('low'))}{SPAN}{_num(rng.get('high'))}"
    if rng.get("width") is not None:
        return f"width \u2264 {_num(rng.get('width'))}"
    return ""


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


SIDE_QUOTE_CHARS = 160


def short_quote(quote: Any) -> str:
    """A quote folded to one line and cut at SIDE_QUOTE_CHARS, where a report shows it beside others."""
    text = fold(quote)
    return text[:SIDE_QUOTE_CHARS - 3] + "..." if len(text) > SIDE_QUOTE_CHARS else text


def side_cell(item: Mapping[str, Any]) -> SideCell:
    n = item.get("source")
    value = None
    if item.get("low") is not None:
        low, high = item.get("low"), item.get("high")
        value = _num(low) if low == high else f"{_num(low)}{SPAN}{_num(high)}"
    return SideCell(value=value, source=n if _is_n(n) else None, quote=short_quote(item.get("quote")),
                    tier=fold(item.get("tier")) or "unrated", confidence=_confidence(item.get("confidence")))


def _md_side_cell(cell: SideCell, known: set[int]) -> str:
    value = f"**{md_escape(cell.value)}** " if cell.value is not None else ""
    cite = f"{_md_cite_link(cell.source)} " if cell.source in known else ""
    return f"{value}{cite}{md_escape(cell.quote)} ({md_escape(cell.tier)}, {md_escape(cell.confidence)})"


def _md_cite_link(n: int) -> str:
    """A citation as briefd writes it: `[[n]](#source-n)`, a link to the source's entry."""
    return f"[[{n}]](#{SOURCE_ANCHOR}{n})"


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
    lines += _md_table((md_escape(sides.get("left_title")), md_escape(sides.get("right_title"))), rows)
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
SYNTHESIS = "synthesis"  # the fallbacks and calls_skipped key of the summary's call (Research.ask's purpose)


def summary_written(report: Mapping[str, Any]) -> bool:
    """Whether the report's summary is one the model wrote: not the fallback list of quotes that stands in for a
    failed synthesis, and not the text of a run that asked for none (usage.calls_skipped: fewer than two quotes)."""
    skipped = bool(_dict(_dict(report.get("usage")).get("calls_skipped")).get(SYNTHESIS))
    return bool(fold(report.get("summary"))) and not _dict(report.get("fallbacks")).get(SYNTHESIS) and not skipped


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


def _pages_not_read(report: Mapping[str, Any]) -> bool:
    """Evidence kept although no page was fetched or taken from the cache: it came from
    search snippets (fetch_pages: false, or every fetch failed)."""
    usage = _dict(report.get("usage"))
    return bool(_list(report.get("evidence"))) and "pages_fetched" in usage and not (
        usage.get("pages_fetched") or usage.get("page_cache_hits") or usage.get("documents_read"))


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
    known = _source_numbers(report)
    for item in (_dict(e) for e in _list(report.get("evidence"))):
        if weighed is not None and (finite(item.get("confidence")) != 0) != weighed:
            continue
        n = item.get("source")
        key = ("n", n) if _is_n(n) and n in known else ("url", fold(item.get("url")))
        groups.setdefault(key, []).append(item)
    question = fold(report.get("question"))
    ordered = [sorted(items, key=lambda item: _strength(item, question), reverse=True) for items in groups.values()]
    return sorted(ordered, key=lambda items: _strength(items[0], question), reverse=True)


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
    known = _source_numbers(report)
    by_n = {_dict(s).get("n"): _dict(s) for s in _list(report.get("sources"))}
    lines: list[str] = []
    for items in groups:
        n = items[0].get("source")
        if _is_n(n) and n in known:
            source = by_n.get(n, {})
            head = f"{_md_cite_link(n)} {md_link(source.get('title'), source.get('url'))}"
        else:
            head = md_link(items[0].get("url"), items[0].get("url"))
        tier = fold(items[0].get("tier"))
        lines += [f"**From** {head}" + (f" · {md_escape(tier)}" if tier else ""), ""]
        for item in items:
            lines += [f"> {md_escape(item.get('quote'))}", ""]
            caption = [f"round {_md_num(item.get('round'))}"]
            if _is_n(item.get("page")):
                caption.insert(0, f"p. {_md_num(item.get('page'))}")
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
    return [f"**Follows:** [{md_escape(parent)}]({_md_url(followed_report(parent))}){when}: this brief "
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


# ---------------------------------------------------------------------------
# What changed since the previous run (report.json's `changes`: daemon/report/changes.py)

CHANGES_SHOWN = 5  # items a list of the section shows; report.json has them all
NOTHING_CHANGED = "Nothing changed: the same answer, from the same sources and quotes"


def changes_when(value: Any) -> str:
    """The previous run's date as the heading says it ("2026-11-20 09:00 UTC"), else as stored."""
    text = fold(value)
    try:
        moment = parse_iso(text)
    except ValueError:
        return text or "the previous run"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _md_quote_ref(ref: Mapping[str, Any], known: set[int]) -> str:
    """A quote `changes` names: cited by its number in this report, else linked to its page."""
    n = ref.get("source")
    where = _md_cite_link(n) if _is_n(n) and n in known else md_link(ref.get("title"), ref.get("url"))
    return f"{where} “{md_escape(short_quote(ref.get('quote')))}”"


def _md_source_ref(ref: Mapping[str, Any], known: set[int]) -> str:
    n = ref.get("n")
    cite = f"{_md_cite_link(n)} " if _is_n(n) and n in known else ""
    return cite + md_link(ref.get("title"), ref.get("url"))


def _md_some(texts: list[str]) -> str:
    """At most CHANGES_SHOWN of the texts, then how many more there are."""
    more = len(texts) - CHANGES_SHOWN
    return "; ".join(texts[:CHANGES_SHOWN]) + (f"; and {more} more in report.json" if more > 0 else "")


def _md_why(label: str, refs: list[Any], known: set[int]) -> str:
    texts = [_md_quote_edit(_dict(r), known) if _dict(r).get("diff") else _md_quote_ref(_dict(r), known)
             for r in refs]
    return f"{label}: {_md_some(texts)}" if texts else ""


def _md_range_change(change: Mapping[str, Any], known: set[int]) -> str:
    """`400 – 460 → 410 – 440 t (because: [2] “…”; no longer: [title](url) “…”)`."""
    old_unit, unit = fold(change.get("old_unit")), fold(change.get("unit"))
    old = f"{range_text(change.get('old')) or 'none'} {old_unit if old_unit != unit else ''}".strip()
    new = f"{range_text(change.get('new')) or 'none'} {unit}".strip()
    why = [w for w in (_md_why("because", _list(change.get("because")), known),
                       _md_why("no longer", _list(change.get("withdrawn")), known)) if w]
    return f"**Range:** {md_escape(old)} → {md_escape(new)}" + (f" ({'; '.join(why)})" if why else "")


def _md_verdict_change(change: Mapping[str, Any], known: set[int]) -> str:
    def side(value: Any, level: Any) -> str:
        return f"{md_escape(value) or 'none'} ({md_escape(level) or 'no level'})"

    why = _md_why("because", _list(change.get("because")), known)
    return (f"**Verdict:** {side(change.get('old'), change.get('old_level'))} → "
            f"{side(change.get('new'), change.get('new_level'))}" + (f" ({why})" if why else ""))


def _md_change_items(changes: Mapping[str, Any], known: set[int]) -> list[str]:
    """The section's bullets, answer first: question, range, verdict, sources, quotes."""
    items = []
    question = _dict(changes.get("question"))
    if question:
        items.append(f"**Question:** “{md_escape(question.get('old'))}” → "
                     f"“{md_escape(question.get('new'))}”")
    if _dict(changes.get("range")):
        items.append(_md_range_change(_dict(changes.get("range")), known))
    if _dict(changes.get("verdict")):
        items.append(_md_verdict_change(_dict(changes.get("verdict")), known))
    sources, quotes = _dict(changes.get("sources")), _dict(changes.get("quotes"))
    for label, refs in (("New sources", sources.get("new")), ("Sources gone", sources.get("gone")),
                        ("Sources changed (the page's text differs from the previous read)", sources.get("changed"))):
        if _list(refs):
            items.append(f"**{label}:** " + _md_some([_md_source_ref(_dict(r), known) for r in _list(refs)]))
    for label, refs in (("Quotes added", quotes.get("added")), ("Quotes withdrawn", quotes.get("withdrawn"))):
        if _list(refs):
            items.append(f"**{label}:** " + _md_some([_md_quote_ref(_dict(r), known) for r in _list(refs)]))
    if _list(quotes.get("edited")):
        items.append("**Quotes edited:** " + _md_some([_md_quote_edit(_dict(r), known)
                                                       for r in _list(quotes.get("edited"))]))
    return items


EDIT_CONTEXT_WORDS = 6  # words kept on each side of a change in a quote "What changed" shows edited


def _md_quote_edit(ref: Mapping[str, Any], known: set[int]) -> str:
    """A quote edited since the previous run, where its words changed: `“… after **9 → 12** seconds”`,
    the unchanged words around each change cut to EDIT_CONTEXT_WORDS a side."""
    n = ref.get("source")
    where = _md_cite_link(n) if _is_n(n) and n in known else md_link(ref.get("title"), ref.get("url"))
    runs = [_dict(r) for r in _list(ref.get("diff"))]
    return f"{where} “{' '.join(_md_diff_pieces(runs))}”"


def _context(words: list[str], k: int, *, before: bool, after: bool) -> list[str]:
    """Unchanged words of an edited quote: k next to a change `before` them (their first k) and k
    next to one `after` them (their last k), the rest an ellipsis."""
    if len(words) <= k * (before + after) or not (before or after):
        return words
    head, tail = (words[:k] if before else []), (words[-k:] if after else [])
    return [*head, "…", *tail]


def _md_diff_pieces(runs: list[dict[str, Any]]) -> list[str]:
    """The pieces of an edited quote as report.md writes them: kept words (cut around the changes),
    a replacement as `**old → new**`, words only removed or only added said so."""
    pieces: list[str] = []
    k = EDIT_CONTEXT_WORDS
    for i, run in enumerate(runs):
        op, words = run.get("op"), fold(run.get("text")).split()
        if op == "=":
            pieces.append(md_escape(" ".join(_context(words, k, before=i > 0, after=i < len(runs) - 1))))
        elif op == "-" and i + 1 < len(runs) and _dict(runs[i + 1]).get("op") == "+":
            pieces.append(f"**{md_escape(' '.join(words))} → {md_escape(fold(_dict(runs[i + 1]).get('text')))}**")
        elif op == "-":
            pieces.append(f"**(removed: {md_escape(' '.join(words))})**")
        elif op == "+" and not (i > 0 and _dict(runs[i - 1]).get("op") == "-"):
            pieces.append(f"**(added: {md_escape(' '.join(words))})**")
    return [p for p in pieces if p]


def _md_changes(report: Mapping[str, Any]) -> list[str]:
    """The "What changed since <date>" section a re-run opens with; nothing on a first run."""
    changes = _dict(report.get("changes"))
    if not changes:
        return []
    lines = [f"## What changed since {md_escape(changes_when(changes.get('since')))}", ""]
    files = fold(_dict(changes.get("previous")).get("files"))
    where = f"previous run's files: {_md_code_span(files)}" if files else ""
    items = [] if changes.get("nothing_changed") else _md_change_items(changes, _source_numbers(report))
    if not items:
        # what "the same sources" rests on: the pages' servers were asked (a re-run checks them)
        checked = _dict(report.get("usage")).get("pages_not_modified")
        said = f"; {_md_num(checked)} page{'' if checked == 1 else 's'} checked with their servers, unchanged" \
            if _is_n(checked) and checked else ""
        return lines + [NOTHING_CHANGED + said + (f" ({where})." if where else "."), ""]
    return lines + [f"- {item}" for item in items] + [""] + ([f"_The {where}_", ""] if where else [])


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
    lines += _md_changes(report)  # a re-run: what differs from the previous run, before the details

    if report.get("status") == "failed" or report.get("error"):
        lines += ["## Error", ""]
        lines += _md_fenced(clean(report.get("error")) or "The brief failed without an error message.")
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
        lines += _md_table(("", f"Range ({unit})" if unit else "Range"), rows) + [""]
        if estimate.get("progress_score") is not None:
            lines += [f"**Progress score:** {_md_num(estimate.get('progress_score'))}", ""]
        if estimate.get("note"):
            lines += [f"> **Note:** {md_escape(estimate.get('note'))}", ""]
        discarded = _discarded_rows(estimate)
        if discarded:
            lines += ["**Discarded figures**", ""]
            lines += _md_table(("Reason", "Figures"), [(md_escape(r), md_escape(n)) for r, n in discarded]) + [""]
        history = [_dict(step) for step in _list(estimate.get("history"))]
        if history:
            lines += _md_table(
                ("Round", "Low", "High", "Progress", "Tokens"),
                [tuple(_md_num(h.get(k)) for k in ("round", "low", "high", "progress_score", "tokens"))
                 for h in history],
            ) + [""]
        missing = band_missing(report)
        if missing:
            lines += [f"_No chart: {md_escape(missing)}_", ""]

    if estimate and band_missing(report) is None:
        _md_chart(doc, CHART_FILE, CHART_ALT)

    summary = clean(report.get("summary")).strip()
    summary_md = _md_summary(summary, _source_numbers(report), _source_urls(report)) if summary else ""
    lines += ["## Summary", "", summary_md or "_No summary._", ""]

    lines += _md_evidence(report)
    if has_evidence_points(report):  # seed 5's charts, as charts.report_charts draws them
        _md_chart(doc, SOURCES_FILE, SOURCES_ALT)
        _md_chart(doc, RELEVANCE_FILE, RELEVANCE_ALT)
    lines += _md_sides(_dict(report.get("sides")), _source_numbers(report))

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
                if _is_n(n):
                    doc.mark("list_item_open", id=f"{SOURCE_ANCHOR}{n}")
                lines.append(f"- [{md_escape(n)}] {md_link(s.get('title'), s.get('url'))}{_md_pages(pages.get(n) if isinstance(n, int) else None)}")
                lines[-1] += _md_source_tier(s)
            lines += [""]
    distrusted = _distrusted(report)
    if distrusted:
        lines += ["## Distrusted sources", "", f"_{DISTRUSTED_NOTE}_", ""]
        # a code span: GitHub-style renderers turn a bare URL into a link, never one in code
        lines += [f"- {_md_code_span(fold(d.get('url')))} (not linked): {md_escape(d.get('reason'))}"
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
        lines += _md_table(("Round", "Query", "Results"),
                           [(_md_num(q.get("round")), md_escape(q.get("text")), _md_num(q.get("results")))
                            for q in queries]) + [""]
    else:
        lines += ["_No searches were run._", ""]

    fallbacks = _dict(report.get("fallbacks"))
    if fallbacks:
        lines += ["### Fallbacks", ""]
        lines += _md_table(("Fallback", "Times"),
                           [(md_escape(name), _md_num(count)) for name, count in fallbacks.items()]) + [""]

    usage = _usage_rows(report)
    if usage:
        lines += ["### Usage", ""]
        lines += _md_table(("Measure", "Value"), [(md_escape(label), md_escape(value)) for label, value in usage]) + [""]
    return doc


def render_markdown(report: Mapping[str, Any]) -> str:
    """report.md (see `markdown_doc` for its order); a failed brief shows its error."""
    return markdown_doc(report).text


# ---------------------------------------------------------------------------
# HTML: the same Markdown, rendered by markdown-it-py
#
# report.html is report.md rendered, so the two cannot disagree. markdown-it-py is a
# CommonMark renderer made for this (the spec's escaping and link rules, tested against
# the spec): briefd's own escaping decides what the Markdown means, and the renderer only
# turns it into HTML. Raw HTML is off (`html: False`: a tag in the Markdown is text), no
# linkify or typographer, and its link validator lets through only http(s) URLs,
# briefd's own #source-n anchors and the charts beside the report; the CSP forbids
# scripts and any load but inline styles (the charts are inline SVG: nothing to load).


def _e(value: Any) -> str:
    return html_escape(value)


_ANCHOR_RE = re.compile(rf"#{SOURCE_ANCHOR}\d{{1,9}}")
_FOLLOWED_RE = re.compile(re.escape(followed_report("ID")).replace("ID", ID_RE.pattern))  # a follow-up's parent


def valid_link(url: str) -> bool:
    """markdown-it's link validator for report.html: http(s) URLs (as safe_http_url allows),
    briefd's own #source-n anchors, the charts (the SVG files beside the report), and the earlier
    report a follow-up links to (../<id>/report.md, an id as brief.valid_id allows: no way out
    of the outbox)."""
    return (url in CHART_NAMES or _ANCHOR_RE.fullmatch(url) is not None or safe_http_url(url) is not None
            or _FOLLOWED_RE.fullmatch(url) is not None)


def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    # markdown-it-py documents replacing validateLink on an instance; its types declare it a
    # method, so mypy calls the documented assignment method-assign.
    md.validateLink = valid_link  # type: ignore[method-assign]
    return md


_CSS = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
main{max-width:52rem;margin:0 auto;padding:1.5rem;background:#fff}
h1{font-size:1.6rem;line-height:1.25}
.status{color:#555}.status strong{color:#222}
.note{border-left:4px solid #d90;background:#fff8e6;padding:.5rem 1rem;margin:1rem 0}
blockquote{border-left:4px solid #ccc;margin:.5rem 0;padding:.25rem 1rem;color:#333;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
pre{background:#f3f3f3;padding:.75rem;overflow:auto;white-space:pre-wrap}
li{overflow-wrap:anywhere}.chart svg{display:block;max-width:100%;height:auto}
""".strip()
# Nothing loads: no script, image, font, frame or connection; styles are the inline sheet
# above, and the charts are inline SVG elements (drawn by briefd, text escaped, no script).
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _html_tokens(doc: MarkdownDoc, charts: Mapping[str, str]) -> tuple[Any, list[Any]]:
    """The Markdown's tokens, with the doc's marks set as attributes, links given rel, and
    each chart image replaced by its SVG inline (`charts`: file name to SVG text); any other
    image (none is made by briefd) becomes its alt text."""
    from markdown_it.token import Token

    md = _markdown_renderer()
    tokens = md.parse(doc.text)
    for token in tokens:
        mark = doc.marks.get(token.map[0]) if token.map else None
        if mark is not None and mark[0] == token.type:
            for name, value in mark[1].items():
                token.attrSet(name, value)
        children = token.children or []
        for i, child in enumerate(children):
            if child.type == "link_open":
                internal = str(child.attrGet("href") or "").startswith("#")
                if internal:
                    child.attrSet("class", "cite")
                else:  # a source opens beside the report (and out of the web page's frame), telling it nothing
                    child.attrSet("rel", "noopener noreferrer nofollow")
                    child.attrSet("target", "_blank")
            elif child.type == "image":
                svg = charts.get(str(child.attrGet("src")))
                inline = Token("html_inline" if svg is not None else "text", "", 0)
                inline.content = svg if svg is not None else child.content
                children[i] = inline
    return md, tokens


def render_html(report: Mapping[str, Any], charts: Sequence[tuple[str, str]] | None = None) -> str:
    """report.html: report.md rendered by markdown-it-py in one standalone HTML5 page with
    inline CSS; each chart report.md shows beside it is inlined there as SVG: `charts` as
    report_charts drew them (write_report draws them once for the files and the page), or
    drawn here for a caller that has none yet."""
    return _html_page(report, markdown_doc(report), report_charts(report) if charts is None else charts)


def _html_page(report: Mapping[str, Any], doc: MarkdownDoc, charts: Sequence[tuple[str, str]]) -> str:
    md, tokens = _html_tokens(doc, dict(charts))
    body = md.renderer.render(tokens, md.options, {})
    question = fold(report.get("question")) or "Untitled brief"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(question)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body><main>",
        body.rstrip("\n"),
        "</main></body></html>",
    ]) + "\n"


# ---------------------------------------------------------------------------
# Files


def _json_safe(value: Any) -> Any:
    """Every string cleaned, like everything else a report shows (a no-op on text that came
    through the door; it matters for a report built from older stored data), and NaN and
    infinities made null."""
    return clean_json(value, finite=True)


def write_report(outdir: Path, report: Mapping[str, Any], formats: Iterable[str]) -> list[Path]:
    """Write the charts (SVG, charts.report_charts), report.json always, report.md for "md",
    report.html for "html", each atomically.

    report.json goes last: its presence means the other files of this run are complete.
    Returns the paths written, in the order written. An unknown format is refused before
    anything is written.
    """
    wanted = set(formats)
    unknown = wanted - FORMATS
    if unknown:
        raise ValueError(f"unknown report format(s): {', '.join(sorted(unknown))}; expected md, json, html")
    outdir = Path(outdir)
    # Render everything first: a report that cannot be rendered or serialized fails here,
    # before any file of the earlier state is replaced.
    # Each chart drawn once (for its file and report.html), report.md's document built once (for both).
    drawn = report_charts(report)
    contents: list[tuple[Path, str]] = [(outdir / name, svg) for name, svg in drawn]
    doc = markdown_doc(report) if wanted & {"md", "html"} else None
    if doc is not None and "md" in wanted:
        contents.append((outdir / "report.md", doc.text))
    if doc is not None and "html" in wanted:
        contents.append((outdir / "report.html", _html_page(report, doc, drawn)))
    contents.append((outdir / "report.json",
                     json.dumps(_json_safe(report), indent=2, ensure_ascii=False) + "\n"))
    for path, text in contents:
        files.atomic_write_text(path, text)
    return [path for path, _ in contents]


def _stamp_from_iso(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", value.strip()).strip(".-")[:64]
        return cleaned or None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")


def _read_json_field(path: Path, field: str) -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value.get(field) if isinstance(value, dict) else None


def _movable(entry: os.DirEntry[str]) -> bool:
    # Hidden names are left alone: temp files from a crash (swept elsewhere) or the user's own.
    return not entry.name.startswith(".") and not entry.is_dir(follow_symlinks=False)


def archive_previous(outdir: Path) -> Path | None:
    """Move an earlier run's top-level files into outdir/runs/<stamp>/ so a new run with the
    same id starts clean without destroying anything.

    The stamp is the earlier report.json's started_at, else error.json's rejected_at, else
    the newest file's mtime, all in UTC and filename-safe ("2026-11-22T10-00-00Z"); a taken
    name gets "-2", "-3", ... Returns the folder, or None when there was nothing to move.
    report.json moves last, so a crash half-way leaves it behind to name the next attempt.
    A refusing filesystem raises files.WriteFailed, like every other outbox write.
    """
    try:
        return _archive_previous(Path(outdir))
    except files.WriteFailed:
        raise
    except OSError as exc:
        raise files.WriteFailed(Path(exc.filename or outdir), exc) from exc


def _archive_previous(outdir: Path) -> Path | None:
    if not outdir.is_dir():
        return None
    with os.scandir(outdir) as scan:
        entries = sorted((e for e in scan if _movable(e)), key=lambda e: (e.name == "report.json", e.name))
    if not entries:
        return None
    stamp = (_stamp_from_iso(_read_json_field(outdir / "report.json", "started_at"))
             or _stamp_from_iso(_read_json_field(outdir / "error.json", "rejected_at")))
    if stamp is None:
        newest = max(e.stat(follow_symlinks=False).st_mtime for e in entries)
        stamp = datetime.fromtimestamp(newest, timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    runs = outdir / "runs"
    target = _fresh_run_folder(runs, stamp)
    for entry in entries:
        os.rename(entry.path, target / entry.name)
    files.fsync_dir(target)
    files.fsync_dir(runs)
    files.fsync_dir(outdir)
    return target


def _fresh_run_folder(runs: Path, stamp: str) -> Path:
    """Create runs/<stamp>, or <stamp>-2, -3, ... when taken: an earlier run is never overwritten."""
    files.make_folders(runs)
    suffix = 1
    while True:
        target = runs / (stamp if suffix == 1 else f"{stamp}-{suffix}")
        try:
            files.make_folder(target)
            return target
        except FileExistsError:
            suffix += 1


def archived_run(outdir: Path, started_at: Any) -> str | None:
    """Where archive_previous put the run that started at `started_at`: "runs/<stamp>/",
    relative to outdir (the report's own folder), or None when no folder there holds its
    report.json (archived by an older briefd under another stamp, or moved by the user)."""
    stamp = _stamp_from_iso(started_at)
    runs = Path(outdir) / "runs"
    if stamp is None or not runs.is_dir():
        return None
    try:
        names = sorted((p.name for p in runs.iterdir() if re.fullmatch(re.escape(stamp) + r"(-\d+)?", p.name)),
                       key=lambda name: (len(name), name))
    except OSError:  # an unreadable runs/ folder costs the report this pointer, never the brief
        return None
    for name in names:
        if _read_json_field(runs / name / "report.json", "started_at") == started_at:
            return f"runs/{name}/"
    return None


def safe_outdir(outbox: Path, brief_id: str) -> Path:
    """outbox/<id>, after making sure it is exactly one folder directly inside the outbox.

    Refuses (ValueError) an id that breaks the id rule (brief.valid_id: no hidden or
    option-like names, no "..") and an entry that resolves anywhere else (a symlink out
    of the outbox, or to a sibling).
    """
    if not valid_id(brief_id):
        raise ValueError(f"invalid brief id {brief_id!r}: expected ^{ID_RE.pattern}$ (1-100 of A-Z a-z 0-9 . _ -, "
                         "not starting with '.' or '-')")
    root = Path(outbox).resolve()
    candidate = root / brief_id
    resolved = candidate.resolve()
    if resolved.parent != root or resolved.name != brief_id:
        raise ValueError(f"brief id {brief_id!r} resolves outside the outbox ({resolved})")
    return candidate


def write_raw_brief(outdir: Path, raw: bytes) -> Path:
    """Keep the bytes a brief arrived as: brief.json when they are UTF-8 text, else brief.bin."""
    try:
        text = raw.decode("utf-8")
        is_text = "\x00" not in text
    except UnicodeDecodeError:
        is_text = False
    path = Path(outdir) / ("brief.json" if is_text else "brief.bin")
    files.atomic_write_bytes(path, raw)
    return path


def _copy_raw_brief(outdir: Path, source: BinaryIO) -> Path:
    """write_raw_brief for a file too large to hold in memory (an oversize brief, up to any
    size a user can drop): streamed to a temp name, fsynced, renamed to brief.json when the
    whole stream is UTF-8 text without NUL, else brief.bin. `source` is the inbox file as
    the inbox opened it (never reopened by name: that could follow a link swapped in)."""

    def copy(out: BinaryIO) -> str:
        decoder = codecs.getincrementaldecoder("utf-8")()
        is_text = True
        source.seek(0)
        while chunk := source.read(1 << 20):
            out.write(chunk)
            if is_text:
                try:
                    is_text = "\x00" not in decoder.decode(chunk)
                except UnicodeDecodeError:
                    is_text = False
        if is_text:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                is_text = False
        return "brief.json" if is_text else "brief.bin"

    return files.atomic_write_with(Path(outdir), copy, hint="brief")


def write_rejection(outbox: Path, brief_id: str, source_file: str, error: str,
                    details: Mapping[str, Any], raw: bytes | None, *, source: BinaryIO | None = None,
                    aside: bool = False, repeat: bool = True) -> Path:
    """Record a rejected brief: outbox/<id>/error.json ({source_file, error, details,
    rejected_at}) and the received bytes (brief.json, or brief.bin when not text).

    An earlier run in that folder is archived first. An invalid id (the very reason for
    some rejections) is sanitized rather than refused, so a rejection is never lost;
    the folder is returned via error.json's parent. error.json goes last, so when it
    exists the bytes are already kept.

    The inbox's hostile cases (daemon/intake/inbox.py):
    - `raw=None`: nothing was received to keep (a symlink that is never followed, a file
      that cannot be read and stays in the inbox); only error.json is written.
    - `source`: keep this open file's whole content instead of `raw`, streamed (a brief
      over the size cap: the inbox read only its head, and the user's bytes must be kept
      in full before the file leaves the inbox).
    - `aside=True`: a run of the same id is using outbox/<id> right now (its brief.json and
      events.ndjson are live there); archiving them mid-run would split that run's files,
      so the rejection goes to outbox/<id>/runs/<now>-rejected/ instead.
    - `repeat=False`: when outbox/<id>/error.json already says this very error about this
      very file, write nothing (a notice about a file left in the inbox is said once, not
      again at every restart, each archiving the last).
    """
    outdir = safe_outdir(outbox, brief_id if valid_id(brief_id) else id_from_filename(brief_id))
    if not repeat and (_read_json_field(outdir / "error.json", "source_file") == clean(source_file)
                       and _read_json_field(outdir / "error.json", "error") == clean(error)):
        return outdir / "error.json"
    now = utc_now()
    if aside:
        outdir = _fresh_run_folder(outdir / "runs", now.replace(":", "-") + "-rejected")
    else:
        archive_previous(outdir)
    if source is not None:
        _copy_raw_brief(outdir, source)
    elif raw is not None:
        write_raw_brief(outdir, raw)
    path = outdir / "error.json"
    files.atomic_write_json(path, _json_safe({
        "source_file": source_file,
        "error": error,
        "details": dict(details),
        "rejected_at": now,
    }))
    return path
