"""Untrusted text has one door: one cleaning rule, one escape per output format.

Every string briefd did not write itself (page text and titles, search results, the
model's answers, and whatever a stored report holds) can carry bytes that act instead of
read: a terminal obeys ESC sequences and BEL, a bidi override (U+202E) makes text show in
an order other than the one stored, U+2028 breaks a line only for some readers. `clean`
removes them once, where the text enters briefd, and the renderers run it again on what
they read back (a report stored before this rule, or edited by hand).

Each output then gets one escaping function: `md_escape` (an inert line of Markdown),
`html_escape` (text and attribute values), `xml_escape` (the SVG charts), `terminal_text` (what `briefd show` prints),
`log_text` (untrusted text in one line of the daemon's log).
Pure functions, no I/O.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

# The characters the rule is about, each set written once (the patterns below combine them).
# Line breaks other than "\n": CR, VT, FF, the C0 separators FS/GS/RS, NEL, and the
# Unicode line and paragraph separators (one line to one reader, two to another).
_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Controls: C0 but tab and LF (ESC and BEL among them), DEL, and C1 but NEL.
_CONTROLS = "\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f"
# Invisible characters that change what is shown: the BOM, and every bidi control
# (the Arabic letter mark, LRM/RLM, embeddings and overrides, isolates).
_INVISIBLE = "\ufeff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Lone surrogates ("\\ud800" in a model's JSON): they cannot even be written as UTF-8.
_SURROGATES = "\ud800-\udfff"

_NEWLINES = re.compile("\r\n|[" + _BREAKS + "]")
# A terminal escape sequence goes whole, so "\x1b[31m" leaves nothing behind: CSI
# (parameters, intermediates, final byte), OSC up to its terminator (BEL or ESC \), and the
# two-byte forms. An ESC that starts none of these is removed with the other controls.
_ESCAPE_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])")
_CONTROL = re.compile("[" + _CONTROLS + _INVISIBLE + "]")
LONE_SURROGATE = re.compile("[" + _SURROGATES + "]")
# What a terminal must never receive raw: every set above (CR too: it rewrites the line).
_TERMINAL_UNSAFE = re.compile("[" + _BREAKS + _CONTROLS + _INVISIBLE + _SURROGATES + "]")
_WHITESPACE = re.compile(r"\s+")
# In one line of the daemon's log not even a newline or a tab may pass (a name could start a forged line).
_LOG_UNSAFE = re.compile("[\n\t" + _BREAKS + _CONTROLS + _INVISIBLE + _SURROGATES + "]")


def clean(value: Any) -> str:
    """The one cleaning rule for untrusted text: every line break becomes "\\n", a tab a
    space; escape sequences (whole), controls, bidi controls and the BOM go; a lone
    surrogate becomes U+FFFD. Everything a reader sees is kept; `None` becomes "".
    Idempotent, so text cleaned at the door passes the renderers' second clean unchanged
    (evidence quotes stay verbatim spans of the page text)."""
    if value is None:
        return ""
    text = _NEWLINES.sub("\n", str(value))
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = _CONTROL.sub("", text).replace("\t", " ")
    return LONE_SURROGATE.sub("\ufffd", text)


def clean_json(value: Any, *, finite: bool = False) -> Any:
    """`clean` on every string (keys too) of a JSON-shaped value; other values unchanged, except
    that with `finite` NaN and infinities become None (json.dumps would write them: not JSON)."""
    if isinstance(value, str):
        return clean(value)
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {clean(k) if isinstance(k, str) else k: clean_json(v, finite=finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v, finite=finite) for v in value]
    return value


# ---------------------------------------------------------------------------- Markdown

# Every ASCII character that can start or end Markdown syntax inline: emphasis (* _ ~),
# code (`), links and images ([ ] !), raw HTML and autolinks (< >), entities (&), table
# cells (|), and the backslash itself, in the same pass: a backslash before "<" in the input
# comes out as three backslashes and "<" (a shown backslash, then a shown "<"), never as
# two and "<" (a shown backslash, then a live tag).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&!])")
# At the start of a block's text: a heading, list item, setext underline, or ordered item;
# and "[x]:", which would be a link reference definition (and so hijack every "[x]").
_MD_BLOCK_START = re.compile(r"^([#+=-])")
_MD_ORDERED_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
_MD_DEFINITION_START = re.compile(r"^\[(?=[^\]\n]*\]:)")


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object read back from a report (any shape: an older briefd's, a damaged file), or {}."""
    return dict(value) if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """A JSON array read back from a report, or []."""
    return list(value) if isinstance(value, (list, tuple)) else []


def fold(value: Any) -> str:
    """Cleaned, on one line: every run of whitespace (newlines included) becomes one space."""
    return " ".join(clean(value).split())


def md_inline(value: Any) -> str:
    """Untrusted text as a piece of one Markdown line that shows exactly the text: cleaned,
    whitespace runs made one space (ends kept, so pieces join), and every character that
    could start emphasis, code, a link, an image, raw HTML, an entity or a table cell
    backslash-escaped (CommonMark shows `\\[` as `[`, so the reader sees the text)."""
    return _MD_SPECIAL.sub(r"\\\1", _WHITESPACE.sub(" ", clean(value)))


def md_block_start(line: str) -> str:
    """A line of Markdown made unable to open a block by its first characters: a leading
    `#`, `+`, `-`, `=`, `1.`/`1)` or `[x]:` is escaped. Text inside the line is untouched."""
    line = _MD_BLOCK_START.sub(r"\\\1", line)
    line = _MD_DEFINITION_START.sub(r"\\[", line)
    return _MD_ORDERED_START.sub(r"\1\\\2", line)


def md_escape(value: Any) -> str:
    """Untrusted text as one whole inert line of Markdown (a title, a quote, a table cell):
    folded to one line, so it cannot open a block, and escaped as `md_inline` does."""
    return md_block_start(md_inline(fold(value)))


# ---------------------------------------------------------------------------- HTML


def html_escape(value: Any) -> str:
    """Untrusted text for HTML element content or a quoted attribute value."""
    return html.escape(clean(value), quote=True)


# XML 1.0 forbids two characters `clean` keeps (it keeps everything a reader sees): U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\ufffe\uffff]")


def xml_escape(value: Any) -> str:
    """Untrusted text for SVG (XML) text or a quoted attribute value: `html_escape`, and the two
    characters XML forbids made U+FFFD, so a chart file always parses."""
    return _NOT_XML.sub("\ufffd", html_escape(value))


# ---------------------------------------------------------------------------- terminal


def terminal_text(text: str) -> str:
    """Text for a terminal: every byte that a terminal would act on (ESC, BEL, CR and the
    other controls, bidi controls, line separators, lone surrogates) shown as a visible
    `\\uXXXX` instead. Newlines and tabs pass. Inside a JSON string that escape means the
    same character, so report.json and events.ndjson stay valid JSON on screen."""
    return _TERMINAL_UNSAFE.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    """One unsafe character as the visible `\\uXXXX` JSON would write for it."""
    return f"\\u{ord(match.group(0)):04x}"


def log_text(value: Any) -> str:
    """Untrusted text (an inbox file's name, an error quoting it) inside one line of the daemon's log:
    `terminal_text`'s escape, applied to newlines and tabs too, so a name such as
    "x\\nbriefd ERROR forged" shows as one line with a visible `\\u000a` and never starts a line of
    its own, and no escape sequence reaches the journal or the terminal that tails it."""
    return _LOG_UNSAFE.sub(_visible, str(value))
