"""The kinds of a document's parts a quote can lie in, and which kind a span of a passage is.

A document marks some of its lines as code, an example, a heading or navigation (daemon/sources/structure.py
reads the marks: <pre>, `class="example"`, a section headed "Examples", <nav>, a block of links, a man page's
"EXAMPLES"). The rules read that kind as what a citable unit is: navigation and headings are never evidence,
and a figure in an example or in code illustrates rather than states (figures.stated_amounts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import decide

CODE = "code"
EXAMPLE = "example"
HEADING = "heading"
NAVIGATION = "navigation"
KINDS = (CODE, EXAMPLE, HEADING, NAVIGATION)
"""The kinds a line can be besides prose. An example outranks code (a <pre> in an Examples section is an
example), and both outrank a heading; navigation is what a line is when nothing else marks it."""

EXAMPLE_KINDS = frozenset({CODE, EXAMPLE})
"""Kinds whose figures illustrate rather than state: a command's arguments, a sample configuration's values."""

RANK = {EXAMPLE: 0, CODE: 1, HEADING: 2, NAVIGATION: 3}


@dataclass(frozen=True)
class Region:
    """Characters start..end of a page text (or of a passage, once marked) are of `kind`."""

    start: int
    end: int
    kind: str


WHOLE = 0.9
"""A span is of a kind when marks cover this share of it: all of it but the line breaks between marked lines."""


def kind_of(marks: Sequence[Region], start: int, end: int) -> str:
    """The kind of the span start..end of a passage (a quote): the kind that covers most of it, where marks cover
    all of it (WHOLE); "" (prose) otherwise. A quote of a sentence and the example line after it is prose: its
    sentence's figure is the text's, and a kind only ever takes a part out of prose where the part is all there is."""
    if not marks or end <= start:
        return ""
    covered: dict[str, int] = {}
    for mark in marks:
        overlap = min(end, mark.end) - max(start, mark.start)
        if overlap > 0:
            covered[mark.kind] = covered.get(mark.kind, 0) + overlap
    if not covered or sum(covered.values()) < WHOLE * (end - start):
        return ""
    return max(covered.items(), key=lambda item: (item[1], -RANK[item[0]]))[0]


def not_evidence(kind: str) -> str | None:
    """Why a part of this kind is never evidence (its document marks it as navigation or a heading), or None."""
    if kind == NAVIGATION:
        return decide.NOT_EVIDENCE_NAVIGATION
    if kind == HEADING:
        return decide.NOT_A_STATEMENT_HEADING
    return None
