"""The outbox side of a brief: report.json/.md/.html, earlier runs kept, rejections kept.

Everything here treats page text and model text as hostile. A quote is a verbatim span of
some web page and the summary is what a small model wrote after reading such spans, so:
report.md folds and escapes them so they cannot add headings, links, images or raw HTML
to the report; report.html escapes every byte of them and turns only http(s) URLs into
links (plus a Content-Security-Policy that forbids scripts, in case anything slipped).

The report dict *is* report.json (CONTRACT.md): the renderers read it and never add to it.
Outbox paths go through `safe_outdir`, and nothing already in an outbox folder is ever
deleted: `archive_previous` moves an earlier run aside before a new one writes.
"""

from __future__ import annotations

import codecs
import html
import json
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

from daemon import files
from daemon.brief import ID_RE, id_from_filename, valid_id
from daemon.citations import CITATION_RE, find_citations

# report.json keys: the contract's, then the ones briefd adds. `blank_report` fills them all.
CONTRACT_KEYS: tuple[str, ...] = (
    "id", "source_file", "status", "question", "started_at", "finished_at", "stop_reason",
    "summary", "sources", "evidence", "estimate", "verdict", "gaps", "queries", "usage",
)
EXTRA_KEYS: tuple[str, ...] = (
    "research_question", "angles", "disclaimer", "error", "fallbacks", "model", "searxng_url",
    "open_questions", "plan_relevance", "sides",
)
REPORT_KEYS: tuple[str, ...] = CONTRACT_KEYS + EXTRA_KEYS
USAGE_KEYS: tuple[str, ...] = (
    "llm_calls", "prompt_tokens", "completion_tokens", "searches", "pages_fetched",
    "page_cache_hits", "llm_cache_hits", "wall_seconds", "llm_seconds",
    "repaired_answers", "retried_answers", "fallback_answers",
)
FORMATS: frozenset[str] = frozenset({"json", "md", "html"})

def utc_now_iso() -> str:
    """ISO 8601 UTC to the second with a Z: the one timestamp form report.json uses."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def blank_report(brief_id: str, source_file: str, question: str, started_at: str) -> dict[str, Any]:
    """A report.json with every key present, so a failed brief still has the full shape."""
    return {
        "id": brief_id,
        "source_file": source_file,
        "status": "failed",
        "question": question,
        "started_at": started_at,
        "finished_at": None,
        "stop_reason": None,
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
    }


# ---------------------------------------------------------------------------
# Small shared helpers


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def _fold(value: Any) -> str:
    """One line: every run of whitespace (newlines included) becomes one space, controls go."""
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "", _s(value))
    return " ".join(text.split())


def _num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _s(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    return _s(value)


def _seconds(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.1f} s"
    return _s(value)


def _confidence(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.2f}"
    return _s(value)


def safe_http_url(url: Any) -> str | None:
    """The URL when it may become a link (http/https, no whitespace or controls), else None."""
    if not isinstance(url, str):
        return None
    if re.fullmatch(r"(?i)https?://[^\s\x00-\x1f\x7f]+", url) is None:
        return None
    return url


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _is_n(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _source_numbers(report: Mapping[str, Any]) -> set[int]:
    numbers: set[int] = set()
    for source in _list(report.get("sources")):
        n = _dict(source).get("n")
        if isinstance(n, int) and not isinstance(n, bool):
            numbers.add(n)
    return numbers


def _stance(item: Mapping[str, Any]) -> str:
    return _fold(item.get("stance") or item.get("impact") or "")


_USAGE_LABELS: dict[str, str] = {
    "llm_calls": "Model calls",
    "prompt_tokens": "Prompt tokens",
    "completion_tokens": "Completion tokens",
    "searches": "Searches",
    "pages_fetched": "Pages fetched",
    "page_cache_hits": "Page cache hits",
    "llm_cache_hits": "Model cache hits",
    "wall_seconds": "Wall time",
    "llm_seconds": "Model time",
    "repaired_answers": "Answers repaired",
    "retried_answers": "Answers retried",
    "fallback_answers": "Answers replaced by a fallback",
}


def _usage_rows(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    usage = _dict(report.get("usage"))
    rows = []
    for key in USAGE_KEYS:
        if key in usage:
            value = usage[key]
            shown = _seconds(value) if key.endswith("seconds") else _num(value)
            rows.append((_USAGE_LABELS[key], shown))
    for key, value in usage.items():
        if key not in _USAGE_LABELS:
            rows.append((_fold(key), _num(value)))
    return rows


# ---------------------------------------------------------------------------
# Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
_MD_LINE_START = re.compile(r"^([#+-])")
_MD_ORDERED_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")


def md_text(value: Any) -> str:
    """Untrusted text as one inert line of Markdown: folded, and every character that could
    start emphasis, code, a link, an image, raw HTML or a table cell backslash-escaped
    (CommonMark renders `\\[` as `[`, so the reader sees the text unchanged)."""
    text = _MD_SPECIAL.sub(r"\\\1", _fold(value))
    text = _MD_LINE_START.sub(r"\\\1", text)
    return _MD_ORDERED_START.sub(r"\1\\\2", text)


def _md_url(url: str) -> str:
    # Percent-encode what would end or break a link destination: spaces, parens, brackets.
    return re.sub(r"[\s()<>\[\]`\\\"']", lambda m: "%{:02X}".format(ord(m.group(0))), url)


def md_link(title: Any, url: Any) -> str:
    """`[title](url)` for http(s) URLs; otherwise the title and the URL as plain text."""
    label = md_text(title) or md_text(url) or "untitled"
    href = safe_http_url(url)
    if href is None:
        return f"{label} ({md_text(url)})" if url and label != md_text(url) else label
    return f"[{label}]({_md_url(href)})"


_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING_RE = re.compile(r"^( {0,3})(#{1,6})(?=\s|$)")
_REF_DEF_RE = re.compile(r"^( {0,3})\[([^\]\n]*)\]:")
_SETEXT_RE = re.compile(r"^( {0,3})(=+|-+)[ \t]*$")
_RAW_HTML_RE = re.compile(r"<(?=[A-Za-z/!?])")
_IMAGE_RE = re.compile(r"!\[")
_MD_LINK_RE = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]*)(?:\s+[^()]*)?\)")


def _md_summary(summary: str) -> str:
    """The model's Markdown, kept as Markdown but unable to restructure the report:
    headings nest under "Summary", raw HTML and images are made literal, links go only to
    http(s), no reference definitions (they would hijack the [n] citations), and an
    unclosed code fence is closed so it cannot swallow the rest of the report."""
    out: list[str] = []
    fence: str | None = None
    for line in summary.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = line.replace("\x00", "")
        match = _FENCE_RE.match(line)
        if fence is not None:
            out.append(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            out.append(line)
            continue
        if out and out[-1].strip():
            # "Text\n===" would be a top-level heading (setext): keep the underline literal.
            line = _SETEXT_RE.sub(r"\1\\\2", line)
        line = _HEADING_RE.sub(lambda m: m.group(1) + "#" * min(6, len(m.group(2)) + 2), line)
        line = _REF_DEF_RE.sub(lambda m: m.group(1) + "\\[" + m.group(2) + "]:", line)
        line = _RAW_HTML_RE.sub(r"\\<", line)
        line = _IMAGE_RE.sub(r"!\\[", line)
        line = _MD_LINK_RE.sub(
            lambda m: m.group(0) if safe_http_url(m.group(2)) else "\\" + m.group(0), line
        )
        out.append(line)
    if fence is not None:
        out.append(fence)
    return "\n".join(out).strip("\n")


def _md_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _md_fenced(text: str) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text.replace("\r\n", "\n").rstrip("\n"), fence]


def _md_range(value: Any) -> str:
    rng = _dict(value)
    if not rng:
        return ""
    return f"{_num(rng.get('low'))} – {_num(rng.get('high'))}"


def _side_cell(item: Mapping[str, Any]) -> str:
    n = item.get("source")
    cite = f"[{md_text(n)}] " if _is_n(n) else ""
    value = ""
    if item.get("low") is not None:
        low, high = item.get("low"), item.get("high")
        value = f"**{_num(low)}**" if low == high else f"**{_num(low)}\u2013{_num(high)}**"
        value += " "
    quote = _fold(item.get("quote"))
    quote = quote if len(quote) <= 160 else quote[:157] + "..."
    return f"{value}{cite}{md_text(quote)} ({md_text(item.get('tier') or 'unrated')}, {_confidence(item.get('confidence'))})"


def _md_sides(sides: Mapping[str, Any]) -> list[str]:
    """Disagreeing sources side by side: a two-column table."""
    left, right = _list(sides.get("left")), _list(sides.get("right"))
    if not left and not right:
        return []
    lines = ["## Side by side", ""]
    rows = []
    for i in range(max(len(left), len(right))):
        rows.append((_side_cell(_dict(left[i])) if i < len(left) else "",
                     _side_cell(_dict(right[i])) if i < len(right) else ""))
    lines += _md_table((md_text(sides.get("left_title")), md_text(sides.get("right_title"))), rows)
    return lines + [""]


def render_markdown(report: Mapping[str, Any]) -> str:
    """report.md: the question as title, status, disclaimer, summary, evidence, sources,
    open gaps, queries and usage; a failed brief shows its error."""
    lines: list[str] = []
    question = md_text(report.get("question")) or "Untitled brief"
    lines += [f"# {question}", ""]

    status = md_text(report.get("status")) or "unknown"
    facts = [f"**Status:** {status}"]
    if report.get("stop_reason"):
        facts.append(f"**Stopped:** {md_text(report.get('stop_reason'))}")
    if report.get("started_at"):
        facts.append(f"**Started:** {md_text(report.get('started_at'))}")
    if report.get("finished_at"):
        facts.append(f"**Finished:** {md_text(report.get('finished_at'))}")
    lines += [" · ".join(facts), ""]
    details = []
    if report.get("id"):
        details.append(f"**Brief:** {md_text(report.get('id'))}")
    if report.get("model"):
        details.append(f"**Model:** {md_text(report.get('model'))}")
    if report.get("searxng_url"):
        details.append(f"**Search:** {md_text(report.get('searxng_url'))}")
    if details:
        lines += [" · ".join(details), ""]

    if report.get("disclaimer"):
        lines += [f"> **Note:** {md_text(report.get('disclaimer'))}", ""]

    if report.get("status") == "failed" or report.get("error"):
        lines += ["## Error", ""]
        lines += _md_fenced(_s(report.get("error")) or "The brief failed without an error message.")
        lines += [""]

    research_question = report.get("research_question")
    angles = _list(report.get("angles"))
    if (research_question and _fold(research_question) != _fold(report.get("question"))) or angles:
        lines += ["## Research plan", ""]
        if research_question:
            lines += [f"**Research question:** {md_text(research_question)}", ""]
        if angles:
            lines += [f"- {md_text(angle)}" for angle in angles] + [""]

    summary = _s(report.get("summary")).strip()
    lines += ["## Summary", "", _md_summary(summary) if summary else "_No summary._", ""]

    verdict = _dict(report.get("verdict"))
    if verdict:
        lines += ["## Verdict", ""]
        lines += [f"**{md_text(verdict.get('value'))}** (rule: {md_text(verdict.get('rule'))}; "
                  f"evidence level: {md_text(verdict.get('evidence_level'))})", ""]

    estimate = _dict(report.get("estimate"))
    if estimate:
        unit = md_text(estimate.get("unit"))
        lines += ["## Estimate", ""]
        rows = [(label, _md_range(estimate.get(key)))
                for label, key in (("Initial", "initial"), ("Target", "target"), ("Final", "final"))
                if estimate.get(key)]
        lines += _md_table(("", f"Range ({unit})" if unit else "Range"), rows) + [""]
        if estimate.get("progress_score") is not None:
            lines += [f"**Progress score:** {_num(estimate.get('progress_score'))}", ""]
        history = [_dict(step) for step in _list(estimate.get("history"))]
        if history:
            lines += _md_table(
                ("Round", "Low", "High", "Progress", "Tokens"),
                [(_num(h.get("round")), _num(h.get("low")), _num(h.get("high")),
                  _num(h.get("progress_score")), _num(h.get("tokens"))) for h in history],
            ) + [""]

    known = _source_numbers(report)
    lines += ["## Evidence", ""]
    evidence = [_dict(item) for item in _list(report.get("evidence"))]
    if not evidence:
        lines += ["_No evidence was found._", ""]
    for item in evidence:
        lines += [f"> {md_text(item.get('quote'))}", ""]
        n = item.get("source")
        where = f"[{n}]" if _is_n(n) and n in known else md_link(item.get("url"), item.get("url"))
        caption = [where, f"round {_num(item.get('round'))}"]
        if _stance(item):
            caption.append(md_text(_stance(item)))
        if item.get("confidence") is not None:
            caption.append(f"confidence {md_text(_confidence(item.get('confidence')))}")
        lines += ["— " + " · ".join(caption), ""]

    lines += ["## Sources", ""]
    sources = [_dict(source) for source in _list(report.get("sources"))]
    if not sources:
        lines += ["_No sources are cited._", ""]
    else:
        lines += [f"- [{md_text(s.get('n'))}] {md_link(s.get('title'), s.get('url'))}"
                  for s in sources] + [""]

    lines += _md_sides(_dict(report.get("sides")))

    gaps = _list(report.get("gaps"))
    lines += ["## Open gaps", ""]
    lines += ([f"- {md_text(gap)}" for gap in gaps] if gaps else ["_None._"]) + [""]

    asks = _list(report.get("open_questions"))
    if asks:
        lines += ["## Open questions", "", "_An unattended daemon cannot ask; these are what the requester "
                  "could clarify in a follow-up brief._", ""]
        lines += [f"- {md_text(ask)}" for ask in asks] + [""]

    queries = [_dict(q) for q in _list(report.get("queries"))]
    lines += ["## Queries", ""]
    if queries:
        lines += _md_table(("Round", "Query", "Results"),
                           [(_num(q.get("round")), md_text(q.get("text")), _num(q.get("results")))
                            for q in queries]) + [""]
    else:
        lines += ["_No searches were run._", ""]

    fallbacks = _dict(report.get("fallbacks"))
    if fallbacks:
        lines += ["## Fallbacks", ""]
        lines += _md_table(("Fallback", "Times"),
                           [(md_text(name), _num(count)) for name, count in fallbacks.items()]) + [""]

    usage = _usage_rows(report)
    if usage:
        lines += ["## Usage", ""]
        lines += _md_table(("Measure", "Value"), usage) + [""]

    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------
# HTML

def _e(value: Any) -> str:
    return html.escape(_s(value), quote=True)


def html_link(text: Any, url: Any) -> str:
    """An <a> for http(s) URLs; any other URL is shown as escaped text, never an href."""
    href = safe_http_url(url)
    label = _e(text) or _e(url)
    if href is None:
        return label
    return f'<a href="{_e(href)}" rel="noopener noreferrer nofollow">{label}</a>'


def _cite_html(numbers: Iterable[int], known: set[int]) -> str:
    parts = []
    for n in numbers:
        if n in known:
            parts.append(f'<a class="cite" href="#source-{n}">[{n}]</a>')
        else:
            parts.append(f"[{n}]")
    return "".join(parts)


_HTML_LINK_RE = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]*)\)")
_STRONG_RE = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM_RE = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")
_CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
_SLOT = "\x00"


def _inline_html(text: str, known: set[int]) -> str:
    """Escape first, then add the few tags we make ourselves: code, links to http(s),
    citations as #source-n links, bold, italics. No byte of the input is ever markup."""
    text = text.replace(_SLOT, "")
    slots: list[str] = []

    def slot(markup: str) -> str:
        slots.append(markup)
        return f"{_SLOT}{len(slots) - 1}{_SLOT}"

    pieces = []
    cursor = 0
    for match in _CODE_SPAN_RE.finditer(text):
        pieces.append(_e(text[cursor : match.start()]))
        pieces.append(slot(f"<code>{_e(match.group(2).strip())}</code>"))
        cursor = match.end()
    pieces.append(_e(text[cursor:]))
    escaped = "".join(pieces)

    def link(match: re.Match[str]) -> str:
        url = html.unescape(match.group(2))
        if safe_http_url(url) is None:
            return match.group(0)
        return slot(f'<a href="{_e(url)}" rel="noopener noreferrer nofollow">{match.group(1)}</a>')

    escaped = _HTML_LINK_RE.sub(link, escaped)
    escaped = CITATION_RE.sub(lambda m: slot(_cite_html(find_citations(m.group(0))[0].numbers, known)),
                              escaped)
    escaped = _STRONG_RE.sub(r"<strong>\1</strong>", escaped)
    escaped = _EM_RE.sub(r"<em>\1</em>", escaped)
    return re.sub(_SLOT + r"(\d+)" + _SLOT, lambda m: slots[int(m.group(1))], escaped)


_BULLET_RE = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_ORDERED_RE = re.compile(r"^\s{0,3}\d{1,9}[.)]\s+(.*)$")
_ATX_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def summary_html(summary: str, known: set[int]) -> str:
    """The summary's Markdown as safe HTML: paragraphs, headings (nested under the
    Summary heading), lists, code blocks, and [n] as links to #source-n."""
    out: list[str] = []
    paragraph: list[str] = []
    list_tag: str | None = None
    items: list[str] = []
    code: list[str] | None = None
    fence = ""

    def flush() -> None:
        nonlocal list_tag
        if paragraph:
            out.append("<p>" + _inline_html(" ".join(paragraph), known) + "</p>")
            paragraph.clear()
        if list_tag:
            body = "".join(f"<li>{_inline_html(item, known)}</li>" for item in items)
            out.append(f"<{list_tag}>{body}</{list_tag}>")
            items.clear()
            list_tag = None

    for line in summary.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if code is not None:
            if line.strip().startswith(fence):
                out.append("<pre><code>" + _e("\n".join(code)) + "</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        fence_match = _FENCE_RE.match(line)
        if fence_match:
            flush()
            fence = fence_match.group(1)
            code = []
            continue
        if not line.strip():
            flush()
            continue
        heading = _ATX_RE.match(line)
        bullet = _BULLET_RE.match(line)
        ordered = _ORDERED_RE.match(line)
        if heading:
            flush()
            level = min(6, len(heading.group(1)) + 2)
            out.append(f"<h{level}>{_inline_html(heading.group(2), known)}</h{level}>")
        elif bullet or ordered:
            tag = "ul" if bullet else "ol"
            if paragraph or list_tag != tag:
                flush()
                list_tag = tag
            items.append((bullet or ordered).group(1))  # type: ignore[union-attr]
        elif list_tag and line[:1].isspace():
            items[-1] += " " + line.strip()
        else:
            if list_tag:
                flush()
            paragraph.append(line.strip())
    flush()
    if code is not None:
        out.append("<pre><code>" + _e("\n".join(code)) + "</code></pre>")
    return "\n".join(out)


_CSS = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
main{max-width:52rem;margin:0 auto;padding:1.5rem;background:#fff}
h1{font-size:1.6rem;line-height:1.25}
.status{color:#555}.status strong{color:#222}
.failed{color:#a00}
.note{border-left:4px solid #d90;background:#fff8e6;padding:.5rem 1rem;margin:1rem 0}
blockquote{border-left:4px solid #ccc;margin:.5rem 0;padding:.25rem 1rem;color:#333;overflow-wrap:anywhere}
figure{margin:1rem 0}figcaption{font-size:.9rem;color:#555}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
pre{background:#f3f3f3;padding:.75rem;overflow:auto;white-space:pre-wrap}
.sources li{margin:.25rem 0;overflow-wrap:anywhere}.url{color:#666;font-size:.85rem}
a.cite{text-decoration:none}
""".strip()


def _html_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Mapping[str, Any]) -> str:
    """report.html: one standalone HTML5 page with inline CSS. Every value from the report
    is escaped; only http(s) URLs become hrefs; a CSP forbids scripts outright."""
    known = _source_numbers(report)
    question = _fold(report.get("question")) or "Untitled brief"
    failed = report.get("status") == "failed"
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src 'self' data:\">",
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(question)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body><main>",
        f"<h1>{_e(question)}</h1>",
    ]
    facts = [f"<strong>Status:</strong> <span class=\"{'failed' if failed else 'done'}\">"
             f"{_e(report.get('status') or 'unknown')}</span>"]
    for label, key in (("Stopped", "stop_reason"), ("Started", "started_at"),
                       ("Finished", "finished_at"), ("Brief", "id"), ("Model", "model"),
                       ("Search", "searxng_url")):
        if report.get(key):
            facts.append(f"<strong>{label}:</strong> {_e(report.get(key))}")
    parts.append('<p class="status">' + " · ".join(facts) + "</p>")

    if report.get("disclaimer"):
        parts.append(f'<div class="note"><strong>Note:</strong> {_e(report.get("disclaimer"))}</div>')

    if failed or report.get("error"):
        error = _s(report.get("error")) or "The brief failed without an error message."
        parts.append(f'<h2>Error</h2><pre class="failed">{_e(error)}</pre>')

    research_question = report.get("research_question")
    angles = _list(report.get("angles"))
    if (research_question and _fold(research_question) != _fold(report.get("question"))) or angles:
        parts.append("<h2>Research plan</h2>")
        if research_question:
            parts.append(f"<p><strong>Research question:</strong> {_e(research_question)}</p>")
        if angles:
            parts.append("<ul>" + "".join(f"<li>{_e(a)}</li>" for a in angles) + "</ul>")

    summary = _s(report.get("summary")).strip()
    parts.append("<h2>Summary</h2>")
    parts.append(summary_html(summary, known) if summary else "<p><em>No summary.</em></p>")

    verdict = _dict(report.get("verdict"))
    if verdict:
        parts.append("<h2>Verdict</h2>")
        parts.append(f"<p><strong>{_e(verdict.get('value'))}</strong> (rule: {_e(verdict.get('rule'))}; "
                     f"evidence level: {_e(verdict.get('evidence_level'))})</p>")

    estimate = _dict(report.get("estimate"))
    if estimate:
        unit = _e(estimate.get("unit"))
        parts.append("<h2>Estimate</h2>")
        rows = [(label, _e(_md_range(estimate.get(key))))
                for label, key in (("Initial", "initial"), ("Target", "target"), ("Final", "final"))
                if estimate.get(key)]
        parts.append(_html_table(("", f"Range ({unit})" if unit else "Range"), rows))
        if estimate.get("progress_score") is not None:
            parts.append(f"<p><strong>Progress score:</strong> {_e(_num(estimate.get('progress_score')))}</p>")
        history = [_dict(step) for step in _list(estimate.get("history"))]
        if history:
            parts.append(_html_table(
                ("Round", "Low", "High", "Progress", "Tokens"),
                [tuple(_e(_num(h.get(k))) for k in ("round", "low", "high", "progress_score", "tokens"))
                 for h in history],
            ))

    parts.append("<h2>Evidence</h2>")
    evidence = [_dict(item) for item in _list(report.get("evidence"))]
    if not evidence:
        parts.append("<p><em>No evidence was found.</em></p>")
    for item in evidence:
        n = item.get("source")
        caption = [_cite_html([n], known) if _is_n(n) and n in known else html_link(item.get("url"), item.get("url")),
                   f"round {_e(_num(item.get('round')))}"]
        if _stance(item):
            caption.append(_e(_stance(item)))
        if item.get("confidence") is not None:
            caption.append(f"confidence {_e(_confidence(item.get('confidence')))}")
        parts.append(f"<figure><blockquote>{_e(_fold(item.get('quote')))}</blockquote>"
                     f"<figcaption>{' · '.join(caption)}</figcaption></figure>")

    parts.append("<h2>Sources</h2>")
    sources = [_dict(source) for source in _list(report.get("sources"))]
    if not sources:
        parts.append("<p><em>No sources are cited.</em></p>")
    else:
        items = []
        for source in sources:
            n = source.get("n")
            anchor = f' id="source-{n}"' if isinstance(n, int) and not isinstance(n, bool) else ""
            items.append(f"<li{anchor}>[{_e(n)}] {html_link(_fold(source.get('title')) or source.get('url'), source.get('url'))}"
                         f' <span class="url">{_e(source.get("url"))}</span></li>')
        parts.append('<ul class="sources">' + "".join(items) + "</ul>")

    sides = _dict(report.get("sides"))
    left, right = _list(sides.get("left")), _list(sides.get("right"))
    if left or right:
        parts.append("<h2>Side by side</h2>")
        rows = [(_e(_side_cell(_dict(left[i]))) if i < len(left) else "",
                 _e(_side_cell(_dict(right[i]))) if i < len(right) else "")
                for i in range(max(len(left), len(right)))]
        parts.append(_html_table((_e(sides.get("left_title")), _e(sides.get("right_title"))), rows))

    gaps = _list(report.get("gaps"))
    parts.append("<h2>Open gaps</h2>")
    parts.append("<ul>" + "".join(f"<li>{_e(g)}</li>" for g in gaps) + "</ul>" if gaps
                 else "<p><em>None.</em></p>")

    asks = _list(report.get("open_questions"))
    if asks:
        parts.append("<h2>Open questions</h2>")
        parts.append("<p><em>An unattended daemon cannot ask; these are what the requester could clarify "
                     "in a follow-up brief.</em></p>")
        parts.append("<ul>" + "".join(f"<li>{_e(a)}</li>" for a in asks) + "</ul>")

    queries = [_dict(q) for q in _list(report.get("queries"))]
    parts.append("<h2>Queries</h2>")
    if queries:
        parts.append(_html_table(("Round", "Query", "Results"),
                                 [(_e(_num(q.get("round"))), _e(q.get("text")), _e(_num(q.get("results"))))
                                  for q in queries]))
    else:
        parts.append("<p><em>No searches were run.</em></p>")

    fallbacks = _dict(report.get("fallbacks"))
    if fallbacks:
        parts.append("<h2>Fallbacks</h2>")
        parts.append(_html_table(("Fallback", "Times"),
                                 [(_e(name), _e(_num(count))) for name, count in fallbacks.items()]))

    usage = _usage_rows(report)
    if usage:
        parts.append("<h2>Usage</h2>")
        parts.append(_html_table(("Measure", "Value"), [(_e(label), _e(value)) for label, value in usage]))

    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------
# Files


def _json_safe(value: Any) -> Any:
    """NaN and infinities become null: json.dumps would write them, and they are not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_report(outdir: Path, report: Mapping[str, Any], formats: Iterable[str]) -> list[Path]:
    """Write report.json always, report.md for "md", report.html for "html", each atomically.

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
    contents: list[tuple[Path, str]] = []
    if "md" in wanted:
        contents.append((outdir / "report.md", render_markdown(report)))
    if "html" in wanted:
        contents.append((outdir / "report.html", render_html(report)))
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
    runs.mkdir(parents=True, exist_ok=True)
    suffix = 1
    while True:
        target = runs / (stamp if suffix == 1 else f"{stamp}-{suffix}")
        try:
            target.mkdir()
            return target
        except FileExistsError:
            suffix += 1


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

    The inbox's hostile cases (daemon/inbox.py):
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
    if not repeat and (_read_json_field(outdir / "error.json", "source_file") == source_file
                       and _read_json_field(outdir / "error.json", "error") == error):
        return outdir / "error.json"
    now = utc_now_iso()
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
