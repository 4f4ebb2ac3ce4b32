"""The model's summary: a small Markdown subset, parsed once, rendered as report.md's Markdown.

The summary is the one field that keeps structure (headings, lists, code, emphasis,
citations). Rather than patching the model's Markdown (a filter that misses one
spelling, such as a backslash before a tag, lets it through), it is read into the few
pieces briefd renders, and every piece of text in them goes through the one escaping
function of the output format. Nothing the model wrote is ever copied into either
output as markup; links survive only to the report's own sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..core.untrusted import as_dict as _dict, as_list as _list, clean, fold, md_block_start, md_inline
from ..rules.citations import CITATION_RE, find_citations
from .markup import md_cite_link, md_code_span, md_fenced, md_table, md_url
from .report import safe_http_url


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


def source_urls(report: Mapping[str, Any]) -> frozenset[str]:
    """The URLs a summary link may point to: the report's own sources, http(s) only."""
    urls = (safe_http_url(_dict(source).get("url")) for source in _list(report.get("sources")))
    return frozenset(url for url in urls if url is not None)


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
            out.append(md_code_span(fold(piece.text), in_table=in_table))
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
    return "".join(md_cite_link(n) if n in known else md_inline(f"[{n}]") for n in piece.numbers)


def _md_summary_link(piece: Inline, links: frozenset[str]) -> str:
    """A link survives only to one of the report's sources; otherwise label and URL as text."""
    label = md_inline(piece.text.strip()) or md_inline(piece.url)
    if piece.url in links:
        return f"[{label}]({md_url(piece.url)})"
    if not piece.url or piece.url == piece.text.strip():
        return label
    return f"{label} ({md_inline(piece.url)})"


def md_summary(summary: str, known: set[int], links: frozenset[str]) -> str:
    """The model's summary as Markdown that cannot restructure the report: headings nest
    under "Summary", every piece of text is escaped (no raw HTML, image, autolink or
    reference definition can form), links only to the sources, code fences always closed."""
    out: list[str] = []
    for block in parse_summary(summary):
        if block.kind == "code":
            out += md_fenced("\n".join(block.lines))
        elif block.kind == "heading":
            level = _summary_heading_level(block.level)
            out.append("#" * level + " " + _md_inline(parse_inline(block.lines[0]), known, links))
        elif block.kind == "table":
            cells = [tuple(_md_inline(parse_inline(cell), known, links, in_table=True) for cell in row)
                     for row in block.rows]
            out += md_table(cells[0], cells[1:])
        elif block.kind in ("bullets", "numbers"):
            for i, item in enumerate(block.lines, start=1):
                marker = "-" if block.kind == "bullets" else f"{i}."
                out.append(f"{marker} " + md_block_start(_md_inline(parse_inline(item), known, links)))
        else:
            out.append(md_block_start(_md_inline(parse_inline(block.lines[0]), known, links)))
        out.append("")
    return "\n".join(out).strip("\n")
