"""Markdown as briefd writes it: links, code spans, tables, fences, numbers and citations.

The small pieces report.md is built of (markdown.py, summary.py, changes_md.py), each written
so that the text in it means only itself: a link goes where it says, a code span shows its
code exactly, a citation links to the source's entry (#source-n) in the report.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..core.untrusted import md_escape
from .report import safe_http_url, value_text


SOURCE_ANCHOR = "source-"  # a source's entry in the reports is #source-<n>


def md_url(url: str) -> str:
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
    return f"[{label}]({md_url(href)})"


def md_code_span(code: str, *, in_table: bool = False) -> str:
    """`code` as one code span that shows it exactly: its backtick run one longer than any inside, and
    padded with a space each side (CommonMark strips one), so a backtick at either end stays code.
    In a table cell a `|` is written `\\|`: GFM splits a row at every unescaped pipe, code spans
    included, and a split span would leave its text (a tag among it) outside any code.
    The caller never puts a backtick beside the span (see `_joined_code`)."""
    if in_table:
        code = code.replace("|", "\\|")
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", code)), default=0) + 1)
    return f"{ticks} {code} {ticks}"


def md_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """A pipe table of cells already written as Markdown (the caller escapes each: a table has no escape of its own)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def md_fenced(text: str) -> list[str]:
    """`text` verbatim in a code fence longer than any backtick run inside it, so nothing in it can close the fence."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text.replace("\r\n", "\n").rstrip("\n"), fence]


def md_num(value: Any) -> str:
    """A number as report.md shows it; a stored value that is not a number is escaped text."""
    return md_escape(value_text(value))


def md_cite_link(n: int) -> str:
    """A citation as briefd writes it: `[[n]](#source-n)`, a link to the source's entry."""
    return f"[[{n}]](#{SOURCE_ANCHOR}{n})"
