"""Turning fetched bytes into page text, passages and sentences.

The page text made here is the text briefd quotes from: evidence quotes are
spans of it, named by offsets, so `split_passages` and `split_sentences` never
change a character and their offsets are exact (`text[start:end]`).

Shape of the page text: one paragraph per line, paragraphs separated by a blank
line; rows of a table and items of a list stay together in one block, one per
line. Whitespace inside a line is collapsed to single spaces; a line never
starts or ends with whitespace. A sentence never crosses a line break, so a
sentence can always be shown to the model on one line.
"""

from __future__ import annotations

import codecs
import copy
import logging
import re
from dataclasses import dataclass, field, replace
from collections.abc import Mapping, Sequence
from typing import Any

import lxml.etree
import lxml.html

from ..core.untrusted import clean, fold
from ..rules.layout import Region
from .structure import html_kinds, line_key, plain_regions, text_regions


def load_trafilatura() -> Any:
    """trafilatura, imported where a page is read (the page-reading children: their warm-up page imports it
    as they start), not with this module: the daemon's own process never extracts a page, and the import
    cost every `briefd` start 0.2 s."""
    try:  # trafilatura needs lxml.html.clean, which lxml 5.2+ moved to lxml_html_clean
        import trafilatura
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise ImportError(
            f"trafilatura cannot be imported ({exc}); install the 'lxml_html_clean' package next to lxml"
        ) from exc
    return trafilatura


LOGGER = logging.getLogger(__name__)

MAX_TEXT_CHARS = 200_000
"""Page text is cut here: enough for any article, and a bound on what a page can make us store."""

MIN_GOOD_CHARS = 250
"""Below this much text from trafilatura, the simpler extraction gets a chance to do better."""

MAX_TITLE_CHARS = 300

MAX_TRAFILATURA_ELEMENTS = 20_000
"""A bigger HTML tree gets the simple extraction, not trafilatura.

trafilatura's cost grows faster than the page: about 0.1 ms an element at 5,000
elements, 0.2 ms at 20,000, and 9 s of CPU for a 4 MB page of 100,000 links. Long
articles stay well under this; the simple extraction is linear in the page.
"""


@dataclass
class Extracted:
    """The readable text of a page. `title` is "" when the page has none."""

    title: str
    text: str
    method: str  # "trafilatura" | "plain" | "fallback"
    regions: tuple[Region, ...] = ()  # what the document marks its lines as (structure.py): code, examples, ...


@dataclass(frozen=True)
class Passage:
    """A piece of page text small enough to rank and show to the model."""

    seq: int
    start: int
    end: int
    text: str
    page: int | None = None  # the document page it lies on (PDFs: 1-based); None where there are no pages
    marks: tuple[Region, ...] = ()  # its lines the document marks (structure.py), in the passage's offsets


@dataclass(frozen=True)
class PageText:
    """A page read: its text and the passages cut from it (what `pagework.read_page` makes).

    `notes` say what of a document was not read though the rest was ("pages 2001-5000 not
    read"), for the caller to tell the user; a web page has none.
    """

    extracted: Extracted
    passages: list[Passage]
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- routing



def url_name(url: str) -> str:
    """The last segment of a URL's path ("report.pdf"): names a fetched document in titles and notices."""
    path = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1] if "/" in path else path

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/xml", "text/xml"})
_TEXT_TYPES = frozenset({"application/json", "application/ld+json"})
_BINARY_MAGIC = (
    b"%PDF-",
    b"\x89PNG",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",  # JPEG
    b"PK\x03\x04",  # zip, docx, xlsx, epub
    b"\x1f\x8b",  # gzip
    b"RIFF",  # webp, wav, avi
    b"OggS",
    b"ID3",
    b"fLaC",
    b"\x7fELF",
    b"wOFF",
    b"wOF2",
    b"\x00\x00\x01\x00",  # ico
    b"BZh",
    b"\xfd7zXZ",
    b"7z\xbc\xaf",
    b"Rar!",
    b"\xd0\xcf\x11\xe0",  # old MS Office
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_HTML_SNIFF = re.compile(r"<(?:!doctype\s+html|html|head|body|title|meta|p|div|article)[\s>]", re.IGNORECASE)


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _bom_encoding(body: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if body.startswith(bom):
            return encoding
    return None


def _looks_binary(body: bytes) -> bool:
    """Magic numbers, or NUL bytes early on (text never has them, unless UTF-16/32 with a BOM)."""
    head = body[:1024]
    if any(head.lstrip().startswith(magic) for magic in _BINARY_MAGIC) or b"%PDF-" in head:
        return True
    return _bom_encoding(body) not in ("utf-16", "utf-32") and b"\x00" in head


def _looks_html(body: bytes) -> bool:
    """Markup from the first byte: HTML served as text/plain or with no type at all."""
    head = body[:2048]
    text = head.decode(_bom_encoding(head) or "latin-1", errors="ignore").lstrip("\ufeff \t\r\n")
    return text.startswith("<") and bool(_HTML_SNIFF.search(text))


def is_readable_type(content_type: str) -> bool:
    """A media type whose body `extract_page` reads as text (HTML, XML, text/*, JSON)."""
    media = media_type(content_type)
    return media in _HTML_TYPES or media.startswith("text/") or media in _TEXT_TYPES


def extract_page(body: bytes, url: str, content_type: str, max_chars: int = MAX_TEXT_CHARS) -> Extracted | None:
    """The readable text of a fetched page, or None when there is none to read.

    CPU-bound and synchronous: run it in a thread. Routes on the media type and
    the bytes themselves (a PNG served as text/html is still a PNG); PDFs and
    other binaries give None, as does a page with no text at all. The text is cut at
    `max_chars`: a web page's cap by default; a library's HTML file passes the documents'
    own (documents.MAX_DOCUMENT_CHARS), since a manual on one page is read whole.
    """
    if not body or _looks_binary(body):
        return None
    media = media_type(content_type)
    if media in _HTML_TYPES:
        return _extract_html(body, url, content_type, max_chars)
    if media in ("", "text/plain") and _looks_html(body):
        return _extract_html(body, url, content_type, max_chars)  # HTML served as text/plain, or untyped
    if media.startswith("text/") or media in _TEXT_TYPES or media == "":
        return _extract_plain(body, content_type, max_chars)
    return None  # images, audio, video, fonts, octet-stream, PDF, office files...


# --------------------------------------------------------------------------- decoding

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_WESTERN = frozenset({"ascii", "iso8859-1", "cp1252", "iso8859-15"})  # codecs.lookup() names


def _charset_param(content_type: str) -> str | None:
    match = re.search(r"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", content_type, re.IGNORECASE)
    return match.group(1) if match else None


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def decode_body(body: bytes, content_type: str, *, sniff_meta: bool = True) -> str:
    """Bytes to text: BOM, then the declared charset (header, then meta), then UTF-8, then cp1252.

    A page that declares latin-1 or ASCII but is valid UTF-8 is decoded as UTF-8
    (a common server misconfiguration), and latin-1 labels mean cp1252, as browsers
    do. Undeclared pages that are not valid UTF-8 are almost always cp1252; one
    that is mostly UTF-8 with a stray bad byte keeps its UTF-8 with a replacement
    character instead of turning every accent into mojibake.
    """
    bom = _bom_encoding(body)
    if bom:
        return body.decode(bom, errors="replace")
    declared = [_codec(_charset_param(content_type))]
    if sniff_meta:
        head = body[:4096]
        for pattern in (_META_CHARSET, _XML_ENCODING):
            match = pattern.search(head)
            declared.append(_codec(match.group(1).decode("ascii", "ignore")) if match else None)
    candidates: list[str] = []
    for name in declared:
        if name is None or name.startswith(("utf-16", "utf-32")):  # an ASCII-compatible page cannot be UTF-16
            continue
        candidates.extend(["utf-8", "cp1252"] if name in _WESTERN else [name])
    candidates.append("utf-8")
    for name in candidates:
        try:
            return body.decode(name)
        except (UnicodeDecodeError, LookupError):
            continue
    lenient = body.decode("utf-8", errors="replace")
    bad = lenient.count("\ufffd")
    good = sum(1 for c in lenient if ord(c) > 127) - bad
    if good >= 10 * bad:
        return lenient
    return body.decode("cp1252", errors="replace")


# --------------------------------------------------------------------------- text shape

_INLINE_SPACE = re.compile(r"[^\S\n]+")
_LIST_MARKER = re.compile(r"^(?:[-*+•·▪◦‣]\s|\d{1,3}[.)]\s|[a-z][.)]\s|\|)")
_TERMINAL = ".!?:;…。！？\"'”’)]"


def _clean_lines(raw: str) -> list[str]:
    """Lines with unified newlines, no control characters and single spaces (blank lines kept as '')."""
    return [_INLINE_SPACE.sub(" ", line).strip() for line in clean(raw).split("\n")]


def _is_continuation(previous: str, line: str) -> bool:
    """A <br> or a hard wrap in the middle of a sentence: the next line starts in lower case."""
    return bool(previous) and bool(line) and line[0].islower() and not previous.endswith(tuple(_TERMINAL))


def _assemble(blocks: list[list[str]], max_chars: int = MAX_TEXT_CHARS) -> str:
    """Blocks of lines to page text: lines joined by newlines, blocks by blank lines, capped."""
    text = "\n\n".join("\n".join(block) for block in blocks if block)
    if len(text) > max_chars:
        cut = text.rfind("\n", 0, max_chars)
        text = text[: cut if cut > max_chars // 2 else max_chars].rstrip()
    return text


def _shape_extracted(raw: str, max_chars: int = MAX_TEXT_CHARS, kinds: Mapping[str, str] | None = None) -> str:
    """trafilatura's and the fallback's output (one element a line) to page text.

    Consecutive table rows and list items become one block; other lines are
    paragraphs; mid-sentence line breaks are joined back with a space, except where the markup marks one line and
    not the other (`kinds`: structure.html_kinds): a code example is never joined to the sentence that leads into
    it ("Thus" / "define(`foo', ...)dnl"), while the wrapped lines of one block still are. Joined lines
    are gathered as pieces and joined once: growing a string per piece was quadratic
    (a page of 100,000 short lower-case lines).
    """
    kinds = kinds or {}
    lines: list[list[str]] = []
    for line in _clean_lines(raw):
        if not line:
            continue
        if lines and _is_continuation(lines[-1][-1], line) \
                and not (kinds and kinds.get(line_key(line)) != kinds.get(line_key(lines[-1][-1]))):
            lines[-1].append(line)
        else:
            lines.append([line])
    blocks: list[list[str]] = []
    previous_kind = ""
    for pieces in lines:
        line = " ".join(pieces)
        kind = "table" if line.startswith("|") else "list" if line.startswith("- ") else ""
        if kind and kind == previous_kind:
            blocks[-1].append(line)
        else:
            blocks.append([line])
        previous_kind = kind
    return _assemble(blocks, max_chars)


def shape_plain(raw: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """Plain text to page text: hard-wrapped prose is unwrapped, lists and indented lines kept.

    Blank lines separate paragraphs. Documents use it too (a PDF page's lines, a DOCX's
    paragraphs), with their own, larger cap.

    Unwrapped lines are gathered as pieces and joined once (see `_shape_extracted`).
    """
    blocks: list[list[list[str]]] = [[]]
    normalised = clean(raw)
    for original in normalised.split("\n"):
        line = _INLINE_SPACE.sub(" ", original).strip()
        if not line:
            if blocks[-1]:
                blocks.append([])
            continue
        block = blocks[-1]
        keep_break = _LIST_MARKER.match(line) or original[:1] in (" ", "\t")
        if block and not keep_break:
            block[-1].append(line)
        else:
            block.append([line])
    return _assemble([[" ".join(pieces) for pieces in block] for block in blocks], max_chars)


def clean_title(title: str | None) -> str:
    """A title as briefd keeps one: cleaned, on one line, at most MAX_TITLE_CHARS."""
    if not title:
        return ""
    return fold(title)[:MAX_TITLE_CHARS]


# --------------------------------------------------------------------------- HTML

_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object",
              "embed", "head", "nav", "select", "button", "input", "textarea", "option")
_BLOCK_TAGS = frozenset({"p", "div", "section", "article", "main", "aside", "header", "footer", "li", "ul",
                         "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre",
                         "table", "tr", "td", "th", "caption", "figure", "figcaption", "br", "hr", "address",
                         "details", "summary", "body", "form", "fieldset", "center"})


def _parse_html(text: str) -> lxml.html.HtmlElement | None:
    """Parse decoded HTML (re-encoded as UTF-8 so meta charsets cannot mislead lxml)."""
    try:
        return lxml.html.document_fromstring(text.encode("utf-8", errors="replace"), parser=_PARSER)
    except (lxml.etree.ParserError, ValueError):
        return None


def _drop_hidden(tree: lxml.html.HtmlElement) -> None:
    """Remove what a reader never sees: a favourite hiding place for text aimed at the model."""
    for element in tree.xpath("//*[@hidden or @style]"):
        if element.getparent() is None:
            continue
        if element.get("hidden") is not None or _HIDDEN_STYLE.search(element.get("style") or ""):
            element.drop_tree()


_PERMALINK_MARKS = frozenset("¶#§🔗")
"""What a heading's permalink anchor shows (Sphinx "¶", others "#", "§"): no part of the heading's words."""


def _page_title(tree: lxml.html.HtmlElement) -> str:
    """The page's own title: og:title, else the whole <title>, else its first <h1>, else (a page with none:
    git's AsciiDoc pages "reftable.html" and "coordinate-embargoed-releases.html" have an empty <title> and
    start at <h2>) its first <h2>; permalink marks left out.

    Not trafilatura's: it takes a page's only <h1> over its <title> (a Sphinx page's first section,
    "Abstract¶", named a whole manual) and cuts a <title> at the first " | " or " - " in it ("The |
    operator is not doing what I want" became "The"). So trafilatura is not asked for metadata at all
    (_trafilatura): that took a third of its time on the docset's 1,138 HTML pages.
    """
    for xpath in ("//meta[@property='og:title']/@content", "//title//text()"):
        found = " ".join(str(t) for t in tree.xpath(xpath)).strip()
        if found:
            return found
    for tag in ("h1", "h2"):
        for heading in tree.iter(tag):
            words = [str(t) for t in heading.xpath(".//text()") if str(t).strip() not in _PERMALINK_MARKS]
            found = " ".join(" ".join(words).split())
            if found:
                return found
    return ""


_INLINE_CODE = " | ".join(f"//{tag}[not(ancestor::pre)]" for tag in ("code", "samp", "kbd", "var", "tt"))
"""Inline code: trafilatura keeps the line breaks of the HTML source inside it and after it."""

_NOT_PROSE = ".//pre | .//ul | .//ol | .//table | .//dl | .//blockquote"
"""What keeps a definition's paragraphs apart: code, lists, tables (their lines mean something)."""

_TERM_END = ":.?!;"
"""A term ending in one of these is followed by its definition as it is; any other gets ": "."""


def _is_permalink(element: lxml.html.HtmlElement) -> bool:
    """A heading's or a term's link to itself ("¶", "#"): in-page, and no word of the text."""
    return (element.get("href") or "").startswith("#") and element.text_content().strip() in _PERMALINK_MARKS


def _remove(element: lxml.html.HtmlElement) -> None:
    """An element out of the tree, its tail kept where it was."""
    parent = element.getparent()
    if parent is not None:
        element.drop_tree()


def _shape_definitions(tree: lxml.html.HtmlElement) -> None:
    """Definition lists as paragraphs that open with their term; permalink marks and code's line breaks gone.

    A manual's settings live in <dl>s (Texinfo's options, AsciiDoc's config variables, a database's
    settings): read as they are, a term became a line of its own, away from the definition that says
    "The default value is 50." (a passage cut between them lost it for good), trafilatura cut a term
    with markup inside ("name (integer)" became "name ("), and Texinfo's permalink "¶" and two
    <dt>s with no space between ("-H num--hashsize=num") made terms nobody would search for. So each
    group of <dt>s becomes the start of its definition's first paragraph (m4's "-H num, --hashsize=num: Make
    the internal hash table ... The default is 65537 entries."), a quote of which names its setting
    on its own line; a definition of prose paragraphs only is one paragraph (git's "core.deltaBaseCacheLimit:
    Maximum number of bytes ..." and its "Default is 96 MiB on all platforms." were two, and a passage
    boundary fell between them). Table cells open with their column's header (`_headed_cells`). Inline code outside
    <pre> (<code>, <samp>, <var>...) had the line breaks of the HTML source in it and after it kept as
    lines ("git gc" / "--auto consolidates them"; "MAIL variables." / "The default is 60 seconds."):
    they are spaces, as a browser shows them.
    """
    for link in tree.xpath("//a[@href]"):
        if _is_permalink(link):
            _remove(link)
    for code in tree.xpath(_INLINE_CODE):
        for node in code.iter():
            node.text = node.text and node.text.replace("\n", " ")
            node.tail = node.tail and node.tail.replace("\n", " ")
    for dl in reversed(tree.xpath("//dl")):  # innermost first: a nested list is a paragraph before its parent
        _definition_paragraphs(dl)
    for table in tree.iter("table"):
        _headed_cells(table)


def _headed_cells(table: lxml.html.HtmlElement) -> None:
    """Each body cell of a table with a header row opens with its column's header ("size: 5 M").

    A row read alone ("| reftable | 5 M | 37 bytes |") states figures of nothing; with its headers
    ("| format: reftable | size: 5 M | avg entry: 37 bytes |") a quote of it says what each figure is.
    Only a plain grid is headed: a first row of <th>s only, and body rows of as many cells, none
    spanning rows or columns (a spanning cell shifts the columns under it).
    """
    rows = table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
    if len(rows) < 2 or table.xpath(".//table"):
        return
    head = [cell for cell in rows[0] if isinstance(cell.tag, str)]
    if not head or any(cell.tag != "th" or _spans(cell) for cell in head):
        return
    names = [" ".join(cell.text_content().split()) for cell in head]
    for row in rows[1:]:
        cells = [cell for cell in row if isinstance(cell.tag, str)]
        if len(cells) != len(names) or any(cell.tag not in ("td", "th") or _spans(cell) for cell in cells):
            continue
        for cell, name in zip(cells, names):
            if name and cell.text_content().strip():
                _open_with(cell, name)


def _spans(cell: lxml.html.HtmlElement) -> bool:
    return cell.get("colspan", "1").strip() not in ("", "1") or cell.get("rowspan", "1").strip() not in ("", "1")


def _definition_paragraphs(dl: lxml.html.HtmlElement) -> None:
    """One <dl> rewritten in place as a <div> of paragraphs (see `_shape_definitions`)."""
    terms: list[str] = []
    for child in list(dl):
        if child.tag == "dt":
            term = " ".join(child.text_content().split())
            if term:
                terms.append(term)
            _remove(child)
        elif child.tag == "dd":
            if not child.xpath(_NOT_PROSE):  # paragraphs of prose only: one paragraph, one line
                tail, words = child.tail, " ".join(child.text_content().split())
                child.clear()
                child.text, child.tail = words, tail
                child.tag = "p"
            else:
                child.tag = "div"
            if terms:
                _open_with(child, ", ".join(terms))
            terms = []
    if terms:  # terms with no definition after them: a paragraph of their own
        lead = lxml.html.Element("p")
        lead.text = ", ".join(terms)
        dl.append(lead)
    dl.tag = "div"


def _open_with(definition: lxml.html.HtmlElement, term: str) -> None:
    """Put `term` at the start of a definition's (or a cell's) first paragraph; a new paragraph opens it
    when it starts with a list or code."""
    joined = term if term.endswith(tuple(_TERM_END)) else term + ":"
    target = definition
    while not (target.text or "").strip():
        first = next((child for child in target if not _is_empty(child)), None)
        if first is None or first.tag not in ("div", "p"):
            break
        target = first
    if (target.text or "").strip() or (target is not definition and target.tag == "p"):
        target.text = f"{joined} {(target.text or '').lstrip()}"
        return
    lead = lxml.html.Element("p")
    lead.text = joined
    definition.insert(0, lead)


def _is_empty(element: lxml.html.HtmlElement) -> bool:
    """An element that shows nothing: an anchor's empty <span id>, a comment."""
    return not isinstance(element.tag, str) or not (element.text_content().strip() or (element.tail or "").strip())


def _text_with_tails(root: lxml.html.HtmlElement) -> str:
    """Text and tails in document order, with a newline around every block element.

    Iterative, so no page can nest deep enough to exhaust the Python stack.
    """
    pieces: list[str] = []
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else None
        if event == "start":
            if tag in _BLOCK_TAGS:
                pieces.append("\n")
            if tag and element.text:
                pieces.append(element.text)
        else:
            if tag in _BLOCK_TAGS:
                pieces.append("\n")
            if element.tail and element is not root:
                pieces.append(element.tail)
    return "".join(pieces)


def _extract_html(body: bytes, url: str, content_type: str, max_chars: int = MAX_TEXT_CHARS) -> Extracted | None:
    tree = _parse_html(decode_body(body, content_type))
    if tree is None:
        return None
    _drop_hidden(tree)
    _shape_definitions(tree)
    kinds = html_kinds(tree)
    document = None
    elements = sum(1 for _ in tree.iter())
    if elements > MAX_TRAFILATURA_ELEMENTS:
        LOGGER.info("%s has %d elements (over %d): using the simple extraction", url, elements,
                    MAX_TRAFILATURA_ELEMENTS)
    else:
        document = _trafilatura(tree, url)
    text = _shape_extracted(document.text or "", max_chars, kinds) if document is not None else ""
    title = clean_title(_page_title(tree))
    if len(text) >= MIN_GOOD_CHARS:
        return Extracted(title=title, text=text, method="trafilatura", regions=tuple(text_regions(text, kinds)))
    fallback = _shape_extracted(_text_with_tails(_without(tree, _DROP_TAGS)), max_chars, kinds)
    if fallback and (not text or len(fallback) > max(2 * len(text), len(text) + 100)):
        return Extracted(title=title, text=fallback, method="fallback", regions=tuple(text_regions(fallback, kinds)))
    if text:
        return Extracted(title=title, text=text, method="trafilatura", regions=tuple(text_regions(text, kinds)))
    return None


def html_document(body: bytes, max_chars: int) -> Extracted | None:
    """A document's HTML (an EPUB chapter, rendered Markdown) read whole: the simple extraction.

    Not trafilatura: a document has no boilerplate to remove, and trafilatura's rules drop
    short chapters and headings. Hidden elements go, as on web pages. The title is the
    document's <title>, else its first heading.
    """
    tree = _parse_html(decode_body(body, "text/html"))
    if tree is None:
        return None
    _drop_hidden(tree)
    _shape_definitions(tree)
    pruned = _without(tree, _DROP_TAGS)
    kinds = html_kinds(pruned)
    _mark_rows_and_items(pruned)
    text = _shape_extracted(_text_with_tails(pruned), max_chars, kinds)
    return Extracted(title=clean_title(_page_title(tree)), text=text, method="document",
                     regions=tuple(text_regions(text, kinds))) if text else None


def _mark_rows_and_items(tree: lxml.html.HtmlElement) -> None:
    """Table rows to "| a | b |" lines and list items to "- item" lines, as trafilatura writes them.

    `_shape_extracted` keeps a run of such lines together as one block, one per line; without
    the marks a row's cells became one paragraph each and a list's items ran into one line.
    A row or an item that holds a nested table or list keeps its structure (only marked).
    """
    for row in tree.iter("tr"):
        if row.find(".//table") is not None:
            continue
        cells = [" ".join(cell.text_content().split()) for cell in row if cell.tag in ("td", "th")]
        tail = row.tail
        row.clear()
        row.text, row.tail = "| " + " | ".join(cells) + " |", tail
    for item in tree.iter("li"):
        if item.find(".//ul") is None and item.find(".//ol") is None and item.find(".//table") is None:
            tail = item.tail
            text = " ".join(item.text_content().split())
            item.clear()
            item.text, item.tail = text, tail
        item.text = "- " + (item.text or "").lstrip()


def _trafilatura(tree: lxml.html.HtmlElement, url: str) -> Any:
    """trafilatura's reading of the tree, or None when it fails."""
    trafilatura = load_trafilatura()  # outside the try: a broken install is said, not read as a page's failure
    try:
        return trafilatura.bare_extraction(
            tree,
            url=url or None,
            with_metadata=False,  # the title is _page_title's; author, date and the rest were never used
            include_comments=False,  # reader comments: noise, and a door for text aimed at the model
            include_tables=True,  # numbers live in tables, and estimate briefs want numbers
            include_images=False,
            include_links=False,
        )
    except Exception:  # noqa: BLE001 - a library bug on one hostile page must not lose it: fall back
        LOGGER.warning("trafilatura failed on %s; using the simple extraction", url, exc_info=True)
        return None


def _without(tree: lxml.html.HtmlElement, tags: tuple[str, ...]) -> lxml.html.HtmlElement:
    """A copy of `tree` without the given elements (their tails kept)."""
    pruned = copy.deepcopy(tree)
    for element in pruned.xpath(" | ".join(f"//{tag}" for tag in tags)):
        if element.getparent() is not None:
            element.drop_tree()
    return pruned


def _extract_plain(body: bytes, content_type: str, max_chars: int = MAX_TEXT_CHARS) -> Extracted | None:
    text = shape_plain(decode_body(body, content_type, sniff_meta=False), max_chars)
    return Extracted(title="", text=text, method="plain", regions=tuple(plain_regions(text))) if text else None


# --------------------------------------------------------------------------- passages and sentences

_NEVER_END = frozenset(
    "mr mrs ms mx dr prof sr st rev gen col capt cpt lt sgt maj hon sen rep gov pres supt messrs mme mlle "
    "e.g eg i.e ie cf vs v viz approx ca al resp incl esp".split()
)
"""Abbreviations after which a sentence (practically) never ends, whatever follows."""

_NUMBER_ABBREVS = frozenset(
    "no nos fig figs vol vols p pp ch chap sec art para ed op ref tab eq "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
"""Abbreviations usually followed by a number ("No. 5", "Fig. 2", "Oct. 14"): no break before a digit."""

_BOUNDARY = re.compile(
    r"(?:(?<![.!?])(?:\.{2,}|[.!?]+)|…)[\"'”’»)\]]*(?=\s)|[。！？]+[\"'”’」』)\]]*"
)
"""Terminal punctuation, then closing quotes or brackets, then space (CJK needs no space).

A run of . ! ? is only tried from its first character (the lookbehind): a match from
inside a run ends where one from its start does, so the result is the same, and a run
of 100,000 dots costs one scan instead of one per dot (which was quadratic).
"""

_WORD_STOP = frozenset("([\"'“‘«")
"""What ends the word before a full stop, besides space: an opening bracket or quote."""

_LONGEST_WORD = 32
"""The word before a full stop is read back at most this far. Every word a rule below looks
at (abbreviations, initials, list numbers) is far shorter, so a longer one is an ordinary
word, and no full stop costs more than this however long the line."""

_LIST_LEAD = " -*•"
"""What may precede a list number on its line ("- 1. item")."""


def _next_visible(line: str, pos: int) -> int:
    """Index of the first non-space character at or after `pos`, or len(line).

    Only the space right after one full stop is scanned, and a stop is never inside
    the space after another, so a whole line costs one pass.
    """
    while pos < len(line) and line[pos].isspace():
        pos += 1
    return pos


def _word_start(line: str, end: int) -> int | None:
    """Where the word ending at `end` starts, or None when it is longer than _LONGEST_WORD."""
    start = end
    floor = max(0, end - _LONGEST_WORD - 1)
    while start > floor and not line[start - 1].isspace() and line[start - 1] not in _WORD_STOP:
        start -= 1
    if start == floor and floor > 0 and not line[start - 1].isspace() and line[start - 1] not in _WORD_STOP:
        return None
    return start


def _is_boundary(line: str, match: re.Match[str], lead: int) -> bool:
    """Does a sentence end at this match of terminal punctuation? Abbreviations and lists say no.

    `lead` is where the line's text starts after list bullets and spaces (`_LIST_LEAD`).
    Looks only at the next visible character and at most _LONGEST_WORD characters back,
    so one match costs O(1) and a line O(len): slicing the line around every full stop
    made a 64 KB line of "Mr. Mr. ..." take a minute.
    """
    after = _next_visible(line, match.end())
    if after == len(line):
        return False
    punct = match.group()
    if punct[0] in "。！？":
        return True
    if line[after].islower():
        return False  # "e.g. construction", "the U.S. firm", "million... or"
    if "!" in punct or "?" in punct or punct.startswith("..") or punct.startswith("…"):
        return True
    # here punct is one "." (and closers): the character before it is never a "." (that "." would
    # have started the match), so a word too long for any rule below is just an ordinary word
    start = _word_start(line, match.start())
    if start is None:
        return True
    word = line[start:match.start()].lower()
    if word.rstrip(".") in _NEVER_END or word in _NEVER_END:
        return False
    if word in _NUMBER_ABBREVS and line[after].isdigit():
        return False
    if len(word) == 1 and word.isalpha():
        return False  # an initial: "J. Smith"
    if word.isdigit() and len(word) <= 3 and start <= lead:
        return False  # "1. First item" at the start of a line
    return True


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans (start, end) in `text`, in order, non-empty, trimmed of whitespace.

    A line break always ends a sentence (page text puts a paragraph on a line, and
    the prompt shows a sentence on a line). Inside a line, a sentence ends at . ! ?
    or an ellipsis followed by space and something that is not lower case, unless
    the word before is a known abbreviation, an initial, or a list number.
    Decimals ("1.2bn", "$4.5 million") never break: the point is not followed by space.
    """
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.split("\n"):
        cursor = 0
        lead = len(line) - len(line.lstrip(_LIST_LEAD))
        for match in _BOUNDARY.finditer(line):
            if _is_boundary(line, match, lead):
                start, end = _strip_span(text, line_start + cursor, line_start + match.end())
                if start < end:
                    spans.append((start, end))
                cursor = match.end()
        start, end = _strip_span(text, line_start + cursor, line_start + len(line))
        if start < end:
            spans.append((start, end))
        line_start += len(line) + 1
    return spans


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    offset = 0
    for line in text.split("\n"):
        start, end = _strip_span(text, offset, offset + len(line))
        if start < end:
            spans.append((start, end))
        offset += len(line) + 1
    return spans


def _hard_split(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut a span with no usable sentence break into pieces of at most max_chars, at spaces if any."""
    pieces = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = limit
        for i in range(limit, start, -1):  # the last space that keeps the piece within the limit
            if text[i].isspace() and not text[i - 1].isspace():
                cut = i
                break
        piece = _strip_span(text, start, cut)
        if piece[0] < piece[1]:
            pieces.append(piece)
        start, end = _strip_span(text, cut, end)
    if start < end:
        pieces.append((start, end))
    return pieces


def split_passages(text: str, max_chars: int = 900) -> list[Passage]:
    """Page text to passages of at most `max_chars`, with exact offsets.

    Paragraphs (lines) are the units; short ones are merged up to the limit, long
    ones are cut at sentence breaks, and a sentence longer than the limit is cut
    at spaces. Every non-space character of `text` lands in exactly one passage,
    and `text[p.start:p.end] == p.text`. A paragraph too long for one passage starts
    a passage of its own: its opening sentences (a definition's term) never end the
    passage before it, apart from the sentences that follow them.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    pieces: list[tuple[int, int, bool]] = []  # start, end, whether it opens a passage of its own
    for start, end in _line_spans(text):
        if end - start <= max_chars:
            pieces.append((start, end, False))
            continue
        cut = [piece for s_start, s_end in split_sentences(text[start:end])
               for piece in _hard_split(text, start + s_start, start + s_end, max_chars)]
        pieces.extend((a, b, n == 0) for n, (a, b) in enumerate(cut))
    merged: list[tuple[int, int]] = []
    for start, end, opens in pieces:
        if merged and end - merged[-1][0] <= max_chars and not opens:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return [Passage(seq=i, start=s, end=e, text=text[s:e]) for i, (s, e) in enumerate(merged)]


def mark_passages(passages: Sequence[Passage], regions: Sequence[Region]) -> list[Passage]:
    """Each passage with the regions that fall in it (structure.py), in its own offsets.

    One sweep: passages and regions both run in text order, so a 4 MB manual's thousands of each cost
    a pass over them, not their product."""
    if not regions:
        return list(passages)
    ordered = sorted(regions, key=lambda r: r.start)
    out: list[Passage] = []
    first = 0
    for passage in passages:
        while first < len(ordered) and ordered[first].end <= passage.start:
            first += 1
        inside: list[Region] = []
        for region in ordered[first:]:
            if region.start >= passage.end:
                break
            if region.end > passage.start:
                inside.append(Region(max(region.start, passage.start) - passage.start,
                                     min(region.end, passage.end) - passage.start, region.kind))
        out.append(replace(passage, marks=tuple(inside)) if inside else passage)
    return out
