"""The units a model cites: sentences, with the ones that cannot stand alone kept with what they need.

Manuals state a setting's value in a sentence that names nothing: "The default is 22.", "Defaults to 50.
Maximum value is 4095.", "The maximum value for n is 255." Shown to the model as sentences of their own,
such a sentence shares no word with the question (so a model that reads sentence by sentence, as small
models do, never picks it), and quoted alone it tells the report's reader a number without saying of
what. So an evidence prompt numbers *units*: a sentence that leans on what came before
(`leans_on_before`) is one unit with the sentences of its paragraph before it (or, when it opens its
paragraph, with the unit before: man pages often give "The default is 50." a paragraph of its own); and
a term line ("-b, --blocking-factor=BLOCKS", "max connections": a short line that ends no sentence)
is one unit with the line under it. A unit never passes `CITABLE_MAX_CHARS` (a merge that would is
not made), so a prompt's room is spent as before.

Units are spans of the passage text, like sentences: a quote is still `text[start:end]`, verbatim.
"""

from __future__ import annotations

import re

from ..rules.decide import ENTRY_MAX_CHARS, is_term_line, leans_on_before
from .extract import split_sentences

CITABLE_MAX_CHARS = ENTRY_MAX_CHARS
"""A unit's most characters: a setting's whole entry in a manual (term, what it does, its default) fits;
a merge past this is not made, so no unit crowds a prompt."""

def citable_spans(text: str, max_chars: int = CITABLE_MAX_CHARS) -> list[tuple[int, int]]:
    """The units of `text` a model may cite, as (start, end) spans in order, covering every sentence.

    Each unit is one sentence (`split_sentences`) or several adjacent ones joined by the two rules in
    the module's docstring; a join that would make a unit longer than `max_chars` is not made.
    """
    units: list[list[int]] = []   # [start, end] of each unit
    ends_on: list[int] = []       # the line each unit's last sentence is on
    term_before = False
    line, counted = 0, 0
    for start, end in split_sentences(text):
        line += text.count("\n", counted, start)
        counted = start
        first = None  # the unit this sentence joins, if any
        if units and term_before:
            first = len(units) - 1
        elif units and leans_on_before(text[start:end], text[units[-1][0]:units[-1][1]]):
            first = len(units) - 1
            if ends_on[first] == line:  # back to the paragraph's first unit, as far as the cap allows
                while first > 0 and ends_on[first - 1] == line and end - units[first - 1][0] <= max_chars:
                    first -= 1
        if first is not None and end - units[first][0] <= max_chars:
            units[first][1] = end
            ends_on[first] = line
            del units[first + 1:], ends_on[first + 1:]
        else:
            units.append([start, end])
            ends_on.append(line)
        term_before = _whole_line(text, start, end) and is_term_line(text[start:end])
    return [(a, b) for a, b in units]


def _whole_line(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return not text[line_start:start].strip() and not text[end:line_end].strip()
