"""What a document says of its own parts: which lines of page text are code, an example, a heading, navigation.

Why: the rules used to guess from flattened text whether a figure sat in a command example or a quote was a
table of contents. The markup says it: a listing block is code, Texinfo's and DocBook's `class="example"` is an example,
a section headed "Examples" holds examples, an <h2> is a heading, a <nav> or a block of nothing but links is
navigation; a man page rendered to text says it by its section headings ("EXAMPLES"). Each kind is read here,
once, while the markup is at hand, and carried as regions of the page text (`Region`), so that every citable
unit (a passage's sentences, a kept quote) knows what it is: navigation is never evidence, and a figure in an
example or in code is judged as one (daemon/rules/figures.py).

A region is found by its line: extraction writes one block element a line, so the lines of the page text are
matched, whitespace folded, with the lines of each marked element's text. A line that cannot be matched stays
prose: the kinds only ever take a line out of prose, so a miss costs what the flat reading cost before.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import lxml.etree

from ..rules.layout import CODE, EXAMPLE, HEADING, KINDS, NAVIGATION, RANK, Region

if TYPE_CHECKING:
    import lxml.html

LINK_SHARE = 0.5
"""A block whose letters and digits are at least this share link text, with two links or more or one link and
nothing else, and no digit outside its links, is navigation (a table of contents' line, Texinfo's "Next: ...,
Previous: ..., Up: ..." panel, an index's row): link density, the measure trafilatura's boilerplate test is
built on, read as structure, not words. A sentence (it ends in a full stop) or a figure of the block's own is
never navigation."""

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_SECTION_BLOCKS = frozenset({"p", "pre", "div", "table", "tr", "ul", "ol", "li", "dl", "dt", "dd", "blockquote"})
_LINK_BLOCKS = ("p", "li", "tr", "dt", "div", "td")
_EXAMPLE_WORD = re.compile(r"(?<![\w-])examples?(?![\w-])", re.IGNORECASE)
_NAV_ROLES = frozenset({"navigation", "doc-toc", "doc-index"})
_NOT_ALNUM = re.compile(r"[\W_]+")
_DIGIT = re.compile(r"\d")
_LIST_MARK = re.compile(r"^(?:- |\| )")
_EXAMPLE_CLASSES = frozenset({"example", "smallexample", "exampleblock", "programlisting", "screen"})
_CODE_CLASSES = frozenset({"highlight", "listing", "listingblock", "sourcecode", "source", "code", "verbatim", "lisp"})


def _fold(text: str) -> str:
    return " ".join(text.split())


def line_key(line: str) -> str:
    """A line as it is matched: whitespace folded, extraction's list and table marks and its cell bars gone."""
    folded = _LIST_MARK.sub("", _fold(line))
    return _fold(folded.replace(" | ", " ").rstrip("|"))


def _lines_of(element: lxml.html.HtmlElement) -> list[str]:
    """The lines an element becomes in page text, as matched: a table row is one line of its cells."""
    if element.tag == "tr":
        return [key] if (key := line_key(" ".join(cell.text_content() for cell in element))) else []
    if element.find(".//tr") is not None:  # the rows apart (their cells run together in text_content), then the rest
        rows = list(element.iter("tr"))
        rest = copy.deepcopy(element)
        for row in list(rest.iter("tr")):
            if row.getparent() is not None:
                row.drop_tree()
        return [line for row in rows for line in _lines_of(row)] + _lines_of(rest)
    return [key for line in element.text_content().split("\n") if (key := line_key(line))]


def _classes(element: lxml.html.HtmlElement) -> set[str]:
    return set((element.get("class") or "").lower().split())


def _is_link_block(element: lxml.html.HtmlElement) -> bool:
    """Whether a block holds links and little else (see LINK_SHARE)."""
    links = [a for a in element.iter("a") if a.get("href") is not None]
    if not links or any(child.tag in _SECTION_BLOCKS for child in element):
        return False  # a block of blocks: its own blocks are read (each element's children only: linear)
    full = element.text_content()
    if full.rstrip().endswith((".", "!", "?")):
        return False
    linked = "".join(a.text_content() for a in links)
    letters, linked_letters = len(_NOT_ALNUM.sub("", full)), len(_NOT_ALNUM.sub("", linked))
    if not letters or len(_DIGIT.findall(full)) > len(_DIGIT.findall(linked)):
        return False
    return linked_letters >= LINK_SHARE * letters and (len(links) >= 2 or linked_letters == letters)


def _example_section(heading: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """The elements after a heading that names examples, up to the next heading of its level or higher."""
    level = _HEADINGS.index(str(heading.tag)) + 1
    out: list[lxml.html.HtmlElement] = []
    for sibling in heading.itersiblings():
        if not isinstance(sibling.tag, str):
            continue
        if sibling.tag in _HEADINGS and int(sibling.tag[1]) <= level:
            break
        if sibling.find(".//h1") is not None or any(sibling.find(f".//{h}") is not None for h in _HEADINGS[:level]):
            break
        out.append(sibling)
    return out


def _own_kind(element: lxml.html.HtmlElement) -> str | None:
    """What an element's markup says its whole text is, or None.

    Code only where the markup says code: a block whose class names an example or a listing (Texinfo's
    `example`, DocBook's `programlisting` and `screen`, AsciiDoc's `listingblock`, a highlighter's `highlight` or
    `language-*`), or a <pre> holding nothing but a <code> (Markdown's fenced code). A bare <pre> says only that
    its lines are laid out: HAProxy's manual writes every keyword's prose in `<pre class="text">`, and an RFC is
    one <pre>; read as code, their sentences would be cut at each line and their figures refused."""
    tag, classes = element.tag, _classes(element)
    if tag == "nav" or (element.get("role") or "").lower() in _NAV_ROLES:
        return NAVIGATION
    if classes & _EXAMPLE_CLASSES:
        return EXAMPLE
    if tag in ("pre", "div") and (classes & _CODE_CLASSES or any(c.startswith("language-") for c in classes)):
        return CODE
    if tag == "pre" and not (element.text or "").strip() and len(element) == 1 and element[0].tag == "code" \
            and not (element[0].tail or "").strip():
        return CODE
    if tag in _HEADINGS:
        return HEADING
    if tag in _LINK_BLOCKS and _is_link_block(element):
        return NAVIGATION
    return None


def html_kinds(tree: lxml.html.HtmlElement) -> dict[str, str]:
    """Folded line text -> kind, for the lines the markup marks (`KINDS`); read before extraction flattens it.

    One walk: an element inside one already marked is not read again (a hostile page of 10,000 nested <nav>s
    costs its size, not its square); a line marked twice keeps the kind that ranks first (RANK)."""
    found: dict[str, str] = {}

    def mark(lines: Iterable[str], kind: str) -> None:
        for line in lines:
            if line not in found or RANK[kind] < RANK[found[line]]:
                found[line] = kind

    marked_depth = 0
    opened: list[bool] = []
    for event, element in lxml.etree.iterwalk(tree, events=("start", "end")):
        if not isinstance(element.tag, str):
            continue
        if event == "end":
            if opened.pop():
                marked_depth -= 1
            continue
        kind = _own_kind(element) if marked_depth == 0 else None
        opened.append(kind is not None)
        if kind is None:
            continue
        marked_depth += 1
        mark(_lines_of(element), kind)
        if kind == HEADING and _EXAMPLE_WORD.search(element.text_content()):
            for part in _example_section(element):
                mark(_lines_of(part), EXAMPLE)
    return found


_PLAIN_HEADING = re.compile(r"^[A-Z][A-Z0-9]*(?:[ /&,-]+[A-Z0-9][A-Z0-9]*){0,4}$")


def plain_regions(text: str) -> list[Region]:
    """Regions of a plain-text document (a man page as groff renders it, a README): a line in capitals alone,
    five words at most, is a section heading ("OPTIONS", "SEE ALSO"), and the lines under a heading that names
    examples ("EXAMPLES", "EXAMPLE CONFIGURATION") are examples, up to the next heading."""
    regions: list[Region] = []
    in_example = False
    offset = 0
    for line in text.split("\n"):
        end = offset + len(line)
        stripped = line.strip()
        if stripped and _PLAIN_HEADING.match(stripped) and sum(c.isalpha() for c in stripped) >= 3:
            regions.append(Region(offset, end, HEADING))
            in_example = bool(_EXAMPLE_WORD.search(stripped))
        elif stripped and in_example:
            regions.append(Region(offset, end, EXAMPLE))
        offset = end + 1
    return _merged(regions)


def text_regions(text: str, kinds: dict[str, str]) -> list[Region]:
    """The regions of page text whose lines `kinds` (html_kinds) marks."""
    if not kinds:
        return []
    regions: list[Region] = []
    offset = 0
    for line in text.split("\n"):
        kind = kinds.get(line_key(line)) if line.strip() else None
        if kind:
            regions.append(Region(offset, offset + len(line), kind))
        offset += len(line) + 1
    return _merged(regions)


def _merged(regions: Sequence[Region]) -> list[Region]:
    """Adjacent regions of one kind (lines one or two newlines apart) as one."""
    out: list[Region] = []
    for region in regions:
        if out and out[-1].kind == region.kind and region.start - out[-1].end <= 2:
            out[-1] = Region(out[-1].start, region.end, region.kind)
        else:
            out.append(region)
    return out


def marks_json(marks: Sequence[Region]) -> str | None:
    """A passage's marks as the store keeps them ([[start, end, kind], ...]); None where it has none."""
    return json.dumps([[m.start, m.end, m.kind] for m in marks], separators=(",", ":")) if marks else None


def marks_from_json(stored: str | None) -> tuple[Region, ...]:
    """A passage's marks from the store; a row of an earlier version (NULL) or a damaged value has none."""
    if not stored:
        return ()
    try:
        rows = json.loads(stored)
        return tuple(Region(int(s), int(e), str(k)) for s, e, k in rows if str(k) in KINDS)
    except (ValueError, TypeError):
        return ()
