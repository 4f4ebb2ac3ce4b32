"""Citations in a synthesis: renumbered by first appearance, and every one resolves.

The model cites sources by the numbers it was shown in the synthesis prompt, which are
whatever numbers the evidence happened to carry. A reader wants [1] to be the first
source the text mentions, the sources list to hold only what the text cites, and never
a [7] that leads nowhere. `renumber` does all three; `cited_numbers` is what a checker
runs on the result. Pure functions, no I/O.

What counts as a citation: a bracket group made only of numbers, commas/semicolons and
ranges, e.g. `[3]`, `[ 2 ]`, `[1, 3]`, `[1-3]`, `[2–4; 7]`. Not a citation: a Markdown
link `[text](url)` (even `[1](url)`), a footnote `[^1]`, an escaped `[1\\]`.
The output writes every cited number as its own `[n]` (`[1][3]`), so that even the
simplest checker, a regex for `\\[(\\d+)\\]`, sees and can verify every one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

# A group: numbers or ranges separated by commas/semicolons, inside one pair of
# brackets, not followed by "(" (that would make it the text of a Markdown link).
# A number is any run of digits, however long, so that "[1000000000000000000000]" is a
# citation like any other and is removed for citing nothing; the run is matched
# possessively (`\d++`), so a long one costs one pass, never a backtracking search.
_NUM_OR_RANGE = r"\d++(?:[ \t]*[-\u2010-\u2015][ \t]*\d++)?"
CITATION_RE = re.compile(
    r"\[[ \t]*(" + _NUM_OR_RANGE + r"(?:[ \t]*[,;][ \t]*" + _NUM_OR_RANGE + r")*)[ \t]*\](?!\()"
)
_RANGE_RE = re.compile(r"(\d+)[ \t]*[-\u2010-\u2015][ \t]*(\d+)")

# A range wider than this is not a citation anyone meant ("[1990-2020]" is years);
# only its two ends are read, so a typo cannot expand into a million numbers.
MAX_RANGE_SPAN = 50

# No source has a number this long; longer digit runs all read as NO_SUCH_SOURCE
# (int() of a run past 4,300 digits raises, and none of them can resolve anyway).
MAX_CITATION_DIGITS = 30
NO_SUCH_SOURCE = 10**MAX_CITATION_DIGITS

# Marks a removed group while the text around it is tidied; stripped from input first.
_GONE = "\x00"


@dataclass(frozen=True)
class Source:
    """One entry of report.json's `sources`: `n` is the number the text cites it by.

    `cited` is False for a source the summary does not cite but whose evidence the report
    keeps (numbered after the cited ones by `number_sources`).
    """

    n: int
    url: str
    title: str
    cited: bool = True


@dataclass(frozen=True)
class Citation:
    """One bracket group found in a text: where it is and the numbers it cites, in order."""

    start: int
    end: int
    numbers: tuple[int, ...]


def _number(digits: str) -> int:
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= MAX_CITATION_DIGITS else NO_SUCH_SOURCE


def _parse_group(body: str) -> tuple[int, ...]:
    numbers: list[int] = []
    for part in re.split(r"[,;]", body):
        part = part.strip()
        match = _RANGE_RE.fullmatch(part)
        if match is None:
            numbers.append(_number(part))
            continue
        low, high = _number(match.group(1)), _number(match.group(2))
        step = 1 if high >= low else -1
        if abs(high - low) > MAX_RANGE_SPAN:
            numbers.extend([low, high])
        else:
            numbers.extend(range(low, high + step, step))
    return tuple(numbers)


def find_citations(text: str) -> list[Citation]:
    """Every citation group in `text`, in order (ranges expanded, repeats kept)."""
    return [
        Citation(m.start(), m.end(), _parse_group(m.group(1))) for m in CITATION_RE.finditer(text)
    ]


def iter_cited(text: str) -> Iterator[int]:
    """Every cited number, in order of appearance, repeats included."""
    for citation in find_citations(text):
        yield from citation.numbers


def cited_numbers(text: str) -> list[int]:
    """The distinct numbers `text` cites, in order of first appearance.

    After `renumber` this is exactly [1, 2, ..., k] and each one is a returned source:
    the check an outside reader can run on report.json.
    """
    seen: dict[int, None] = {}
    for n in iter_cited(text):
        seen.setdefault(n, None)
    return list(seen)


def _format_group(numbers: Sequence[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)


# Tidying around a removed group, applied in this order.
_TIDY_STEPS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "[9], [10]" both unknown, or "[9][10]": one hole, not two.
    (re.compile(_GONE + r"(?:[ \t]*[,;]?[ \t]*" + _GONE + r")+"), _GONE),
    # "[1], [9]" → "[1]": the separator belonged to the removed group.
    (re.compile(r"(\])[ \t]*[,;][ \t]*" + _GONE), r"\1" + _GONE),
    # "[9], [1]" → "[1]".
    (re.compile(_GONE + r"[ \t]*[,;][ \t]*(?=\[)"), _GONE),
    # "foo ([9])." → "foo.": an empty parenthetical is left-over punctuation.
    (re.compile(r"[ \t]*\([ \t]*" + _GONE + r"[ \t]*\)"), _GONE),
)
_HOLE_RE = re.compile(r"[ \t]*" + _GONE + r"[ \t]*")
_NO_SPACE_BEFORE = set(".,;:!?)]}\n\r" + _GONE)
_NO_SPACE_AFTER = set("([{\n\r")


def _close_hole(match: re.Match[str]) -> str:
    text = match.string
    before = text[match.start() - 1] if match.start() > 0 else "\n"
    after = text[match.end()] if match.end() < len(text) else "\n"
    if after in _NO_SPACE_BEFORE or before in _NO_SPACE_AFTER:
        return ""
    if before == "]" and after == "[":
        return ""  # "[1][9][2]" → "[1][2]", the neighbours stay one run
    return " "


def _tidy(text: str) -> str:
    for pattern, replacement in _TIDY_STEPS:
        text = pattern.sub(replacement, text)
    return _HOLE_RE.sub(_close_hole, text).replace(_GONE, "")


def _renumber_once(summary: str, sources: Sequence[Source]) -> tuple[str, list[Source]]:
    by_number: dict[int, Source] = {}
    for source in sources:
        by_number.setdefault(source.n, source)
    new_number: dict[int, int] = {}
    pieces: list[str] = []
    removed = False
    cursor = 0
    for citation in find_citations(summary):
        pieces.append(summary[cursor : citation.start])
        cursor = citation.end
        kept: set[int] = set()
        for old in citation.numbers:
            if old not in by_number:
                continue
            if old not in new_number:
                new_number[old] = len(new_number) + 1
            kept.add(new_number[old])
        if kept:
            # Sorted inside a group: numbers seen earlier are lower, new ones were just
            # assigned in order, so sorting never breaks first-appearance order.
            pieces.append(_format_group(sorted(kept)))
        else:
            pieces.append(_GONE)
            removed = True
    pieces.append(summary[cursor:])
    text = "".join(pieces)
    if removed:
        text = _tidy(text)
    cited = [
        Source(n=new, url=by_number[old].url, title=by_number[old].title)
        for old, new in sorted(new_number.items(), key=lambda item: item[1])
    ]
    return text, cited


def renumber(summary: str, sources: Sequence[Source]) -> tuple[str, list[Source]]:
    """Renumber `summary`'s citations 1..k by first appearance; keep only cited sources.

    Repeats map to the same new number; a number with no source is removed from the text
    (the spaces and punctuation it leaves are tidied: "foo [9]." → "foo."); a group with
    some unknown numbers keeps the known ones; sources never cited are dropped.
    Returns the new text and the cited sources in new order, each with its new `n`.

    Removing a group can, in contrived text, join brackets into a new group ("[[9]1]");
    so the pass repeats until nothing changes, which also makes the result idempotent.
    """
    text = summary.replace(_GONE, "")
    current = list(sources)
    # Each pass that changes the text either removes a group (fewer "[" left) or only
    # renumbers (the next pass is then the identity), so this ends quickly.
    for _ in range(text.count("[") + 2):
        new_text, new_sources = _renumber_once(text, current)
        if new_text == text and new_sources == current:
            break
        text, current = new_text, new_sources
    return text, current


def number_sources(cited: Sequence[Source], used: Sequence[Source]) -> list[Source]:
    """Every source the conclusions rest on, numbered: the cited ones, then the others.

    `cited` is `renumber`'s result (1..k by first appearance in the summary), kept as it is.
    Each source of `used` (every source that supplied kept evidence, strongest first) whose URL
    is not among them follows, numbered k+1, k+2, ... in the order given, with `cited=False`;
    a URL listed twice in `used` is numbered once. So every kept evidence item has a number
    that resolves, and a [n] in the summary still means the same source.
    """
    out = list(cited)
    seen = {source.url for source in cited}
    for source in used:
        if source.url in seen:
            continue
        seen.add(source.url)
        out.append(Source(n=len(out) + 1, url=source.url, title=source.title, cited=False))
    return out
