"""Reading documents: PDF, DOCX, ODT, EPUB, Markdown, plain text and HTML, into page text.

The text made here has the shape of `daemon.extract`'s page text (one paragraph a line,
a blank line between paragraphs) and is cut into passages by the same splitter, so quotes
are exact spans of it. A PDF's pages are read one by one and joined by a blank line; each
page is split on its own, so a passage never crosses a page and every passage carries its
page number (1-based), which is what lets a citation say "p. 12".

The libraries, and why each (checked against the versions in pyproject.toml):

- **PDF: pypdfium2** (PDFium, Chrome's PDF engine). Wheels for every platform with PDFium
  inside, no build step; a 3-page PDF in a few milliseconds; it opens a file by path and
  reads objects as pages ask for them, so a 200 MB PDF is never held in memory whole; it
  tells an encrypted file (error 4, "Incorrect password") from a corrupted one (error 3,
  "Data format error"). PDFium marks a hyphen it judged to be a line-end hyphenation with
  U+FFFE and already joins the two halves ("recon\\ufffestruction"): see `_dehyphenate`.
  Its object parser has its own recursion limit: arrays nested 200,000 deep read as a
  normal page (tests/sources/test_documents.py).
- **DOCX: python-docx**: well kept, pure Python over lxml, and its XML parser is built with
  `resolve_entities=False` (an entity bomb stays one unexpanded entity). It opens the zip
  itself, so the zip guard (`_open_zip`) runs on the file first.
- **ODT: lxml on content.xml directly**: odfpy is heavy for reading text, slow to release and
  parses with its own SAX handlers; the text of an ODF document is a handful of elements
  (text:h, text:p, list items, table rows), and reading the zip ourselves puts the zip guard
  between the zip and the parser.
- **EPUB: zipfile and lxml**: container.xml names the OPF, whose spine gives the chapters in
  reading order; each chapter is XHTML read by extract's HTML path (hidden elements dropped).
  ebooklib would add a dependency to do the same three lookups and reads every member.
- **Markdown: markdown-it-py** (already the report's renderer), CommonMark with raw HTML off,
  then extract's HTML path, so the text carries no markup and a quote none either.
- **Plain text and HTML**: extract's own paths (HTML files get trafilatura, like pages).

Documents go through the simple HTML extraction, never trafilatura: a chapter has no
boilerplate, and trafilatura's boilerplate rules drop short chapters and headings.

A file that cannot be read raises `DocumentRefused` with a reason a user can act on, naming
the file. What was read with something missing (pages over the limit, pages with no text)
comes back with the text as `PageText.notes`.

Untrusted text passes `daemon.untrusted.clean` once: document text in extract's shaping
(`shape_plain`, the HTML path), titles in `extract.clean_title`, reasons in `DocumentRefused`.
"""

from __future__ import annotations

import codecs
import functools
import io
import posixpath
import re
import time
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

import lxml.etree

from .extract import (
    Extracted,
    PageText,
    Passage,
    clean_title,
    decode_body,
    extract_page,
    html_document,
    mark_passages,
    media_type,
    shape_plain,
    split_passages,
    url_name,
)
from ..rules.layout import Region
from .structure import plain_regions
from ..core.untrusted import fold
from ..core.errors import BriefdError

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    from markdown_it import MarkdownIt


def load_readers() -> None:
    """Import the document libraries (python-docx, pypdfium2, markdown-it) now.

    They are imported where a document is read, not with this module: the daemon's own process only
    routes by `is_document` and builds PageText from a child's answer, and importing them cost every
    `briefd` start (each daemon, each command) 0.1-0.15 s. A page-reading child calls this as it starts,
    so its first document is read at the speed of its next one, and a broken install is found there."""
    import docx  # noqa: F401
    import markdown_it  # noqa: F401
    import pypdfium2  # noqa: F401


MAX_DOCUMENT_CHARS = 4_000_000
"""A document's text is cut here (about 2,000 dense pages): a bound on what one file can make
us store and pipe, twenty times a web page's (`extract.MAX_TEXT_CHARS`) because a report or a
standard is worth reading far past an article's length."""

MAX_PDF_PAGES = 2_000
"""Pages read from one PDF; the rest are named in a note. Reading, not refusing: a 3,000-page
standard is still worth its first 2,000 pages, and a page tree that claims a million pages (in
a 20 KB file) costs 2,000 page loads, a second or two, not a million."""

MAX_PDF_SECONDS = 60.0
"""After this long reading one PDF's pages, the rest are left unread with a note: half of the
child's deadline (`pagework.DOCUMENT_DEADLINE_S`), so slow pages give a partial document instead
of a killed child and nothing."""

PDF_PAGES_PER_OPEN = 50
"""Pages read before a PDF is closed and opened again, which frees what PDFium parsed (see
`read_pdf`). Opening costs the cross-reference table only: well under a millisecond for a
200 MB file of 400 pages."""

MAX_ZIP_MEMBERS = 10_000
"""A DOCX, ODT or EPUB with more members than this is refused: a long novel is a few hundred."""

MAX_ZIP_BYTES = 512 << 20
"""Total uncompressed size a package may declare (images included)."""

MAX_ZIP_RATIO = 100
"""A member over `_RATIO_FLOOR` bytes that inflates more than this is a bomb: XML compresses
10-20 times, zeros about 1,000."""

_RATIO_FLOOR = 1 << 20

MAX_TEXT_FILE_BYTES = 4 * MAX_DOCUMENT_CHARS
"""Bytes read from a text, Markdown or HTML file (at most four bytes a character in UTF-8)."""

DOCUMENT_FORMATS = frozenset({"pdf", "docx", "odt", "epub", "markdown"})
"""Formats `pagework.read_page` hands to this module when a fetched page is one; HTML and plain
text fetched from the web keep the web page paths (trafilatura, the web's text cap)."""

# the file names briefd reads as documents, by format (the library indexes these)
SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".odt": "odt", ".epub": "epub", ".md": "markdown",
             ".markdown": "markdown", ".html": "html", ".htm": "html", ".xhtml": "html", ".txt": "text",
             ".text": "text", ".rst": "text", ".csv": "text", ".log": "text"}
_TYPES = {"application/pdf": "pdf", "application/x-pdf": "pdf",
          "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
          "application/vnd.oasis.opendocument.text": "odt", "application/epub+zip": "epub",
          "text/markdown": "markdown", "text/x-markdown": "markdown", "text/html": "html",
          "application/xhtml+xml": "html", "text/plain": "text"}
FORMAT_TYPES = {"pdf": "application/pdf",
                "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                "odt": "application/vnd.oasis.opendocument.text", "epub": "application/epub+zip",
                "markdown": "text/markdown", "html": "text/html", "text": "text/plain"}
"""Each format's content type, as a document of it is stored (the library's pages)."""
_BINARY_FORMATS = frozenset({"pdf", "docx", "odt", "epub"})
_ZIP_TYPES = {"application/vnd.oasis.opendocument.text": "odt", "application/epub+zip": "epub"}


class DocumentRefused(BriefdError):
    """A document briefd will not read, and why, in words for the user (the file is named).

    Both are cleaned and put on one line here: a reason can quote the file (a member's name in
    a zip, a parser's message), and the file's name is untrusted too.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name = fold(name)
        self.reason = fold(reason)
        super().__init__(f"{self.name}: {self.reason}")


# --------------------------------------------------------------------------- routing


def sniff_format(head: bytes, content_type: str, name: str) -> str | None:
    """The document format by magic bytes, then the content type, then the file's suffix.

    A zip is named by its `mimetype` member when it comes first (ODF and EPUB require it),
    else by type or suffix, else taken as DOCX (whose first member is not fixed); None for
    what is not a document format here (images, archives, ...).
    """
    media = media_type(content_type)
    suffix = PurePosixPath(name.lower()).suffix
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        for mime, kind in _ZIP_TYPES.items():
            if head[30:38] == b"mimetype" and mime.encode() in head[38:100]:
                return kind
        by_name = _TYPES.get(media) or SUFFIXES.get(suffix)
        return by_name if by_name in ("docx", "odt", "epub") else "docx"
    if _TYPES.get(media) in _BINARY_FORMATS:
        return None  # typed PDF or office file without its magic bytes: an error page, say
    by_type = _TYPES.get(media)
    if by_type and by_type != "text":
        return by_type
    by_suffix = SUFFIXES.get(suffix)
    if by_suffix in _BINARY_FORMATS:
        return None  # "report.pdf" holding text or HTML: read it as what it is, below
    return by_suffix or by_type


def is_document(body: bytes, url: str, content_type: str) -> bool:
    """Is this fetched body a document this module reads (a PDF, DOCX, ODT, EPUB, Markdown)?"""
    return sniff_format(body[:2048], content_type, url_name(url)) in DOCUMENT_FORMATS


def read_document(data: bytes | None, path: Path | None, name: str, content_type: str = "") -> PageText | None:
    """The text and passages of a document given as bytes or as a path (which is opened lazily).

    None when the document has no text at all (an empty file); raises `DocumentRefused` when it
    cannot be read. `name` names the file in titles and reasons.
    """
    if data is None and path is None:
        raise ValueError("read_document needs data or a path")
    head = data[:2048] if data is not None else _head(path)
    kind = sniff_format(head, content_type, name)
    if kind is None:
        claimed = SUFFIXES.get(PurePosixPath(name.lower()).suffix)
        if claimed in _BINARY_FORMATS:  # "x.epub" that is no zip, "x.pdf" with no PDF header
            raise DocumentRefused(name, f"corrupted: its name says {claimed.upper()} but its bytes are not one")
        what = content_type or PurePosixPath(name).suffix or "no type, no suffix"
        raise DocumentRefused(name, f"not a document briefd reads ({what})")
    if kind == "pdf":
        return read_pdf(data, path, name)
    if kind in ("docx", "odt", "epub"):
        with _open_zip(data, path, name) as package:
            if kind == "odt":
                return _read_odt(package, name)
            if kind == "epub":
                return _read_epub(package, name)
            if "word/document.xml" not in package.namelist():
                raise DocumentRefused(name, "a zip archive that is not a DOCX, ODT or EPUB document")
        return _read_docx(data, path, name)  # python-docx opens the zip itself, after the guard
    body, notes = _read_bytes(data, path)
    if kind == "markdown":
        page = _from_html(_markdown().render(_decode_text(body, content_type)).encode(), name)
    elif kind == "html":
        extracted = extract_page(body, name, "text/html", MAX_DOCUMENT_CHARS)
        page = _page(extracted.title or name, extracted.text, extracted.method, regions=extracted.regions) \
            if extracted else None
    else:
        text = shape_plain(_decode_text(body, content_type), MAX_DOCUMENT_CHARS)
        page = _page(name, text, "plain", regions=plain_regions(text))
    if page is not None:
        page.notes.extend(notes)
    return page


def _head(path: Path | None) -> bytes:
    assert path is not None
    with path.open("rb") as stream:
        return stream.read(2048)


def _read_bytes(data: bytes | None, path: Path | None) -> tuple[bytes, list[str]]:
    if data is None:
        assert path is not None
        with path.open("rb") as stream:
            data = stream.read(MAX_TEXT_FILE_BYTES + 1)
    if len(data) > MAX_TEXT_FILE_BYTES:
        return data[:MAX_TEXT_FILE_BYTES], [f"only the first {MAX_TEXT_FILE_BYTES >> 20} MB were read"]
    return data, []


def _page(title: str, text: str, method: str, notes: list[str] | None = None,
          regions: Sequence[Region] = ()) -> PageText | None:
    """A document's text as a page, its passages marked with what the document marks (structure.py)."""
    if not text.strip():
        return None
    return PageText(extracted=Extracted(title=clean_title(title), text=text, method=method, regions=tuple(regions)),
                    passages=mark_passages(split_passages(text), regions), notes=notes or [])


# --------------------------------------------------------------------------- text files

@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _decode_text(body: bytes, content_type: str) -> str:
    """A text file's characters: BOM first, then UTF-16 told by its NUL bytes, then extract's rule.

    UTF-16 without a BOM (Windows tools write it) has a NUL in every other byte of ASCII text:
    half the even (big-endian) or odd (little-endian) bytes being NUL is that and nothing else.
    """
    head = body[:4096]
    if not head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and b"\x00" in head:
        pairs = len(head) // 2 or 1
        if head[1::2].count(0) > pairs // 2:
            return body.decode("utf-16-le", errors="replace")
        if head[0::2].count(0) > pairs // 2:
            return body.decode("utf-16-be", errors="replace")
    return decode_body(body, content_type, sniff_meta=False)


def _from_html(body: bytes, name: str) -> PageText | None:
    extracted = html_document(body, MAX_DOCUMENT_CHARS)
    if extracted is None:
        return None
    return _page(extracted.title or name, extracted.text, extracted.method, regions=extracted.regions)


# --------------------------------------------------------------------------- PDF

_PDF_ERRORS = {
    3: "corrupted or truncated: PDFium cannot parse it",
    4: "encrypted: it needs a password, and briefd does not guess passwords",
    5: "encrypted with a security handler PDFium does not support",
}
_TERMINAL = ".!?:;…\"'”’)"
_PDFIUM_HYPHEN = re.compile("(.)\ufffe(?:\r\n|\n)?(.)")
_SOFT_HYPHEN = re.compile("\u00ad(?:\r\n|\n)?")
_HEADING_SHARE = 0.7  # a heading is shorter than this share of a full line (a paragraph's first line is full)
_LINE_BREAK = re.compile("\r\n|[\r\n]")


def _dehyphenate(raw: str) -> str:
    """PDFium's line-end hyphen marks (U+FFFE, halves already joined) and soft hyphens (U+00AD) resolved.

    Between two lower-case letters the hyphen was the typesetter's ("recon-struction"): it goes.
    Anywhere else ("COVID-19", "1990-2000") it was a real hyphen: it stays as "-".
    """
    def resolve(match: re.Match[str]) -> str:
        before, after = match.group(1), match.group(2)
        return before + after if before.islower() and after.islower() else before + "-" + after

    text = _PDFIUM_HYPHEN.sub(resolve, raw).replace("\ufffe", "-")
    return _SOFT_HYPHEN.sub("", text)  # a soft hyphen is invisible, and at a line end it joins the halves


def _pdf_paragraphs(raw: str) -> str:
    """A PDF page's hard-wrapped lines as extract's plain text wants them: a blank line between paragraphs.

    PDFium gives one line per printed line and nothing between paragraphs. A line that ends a
    sentence and falls short of the page's long lines ends its paragraph, and so does a heading:
    a short line that starts a paragraph, ends no sentence and is followed by a line that starts
    with a capital or a digit ("Findings" over "The inspectors found ..."). Unwrapped, a heading
    would become the first words of the sentence under it, and of every quote of that sentence.
    The rest is unwrapped by `extract.shape_plain` (list items and indented lines keep their
    breaks there).
    """
    lines = _LINE_BREAK.split(_dehyphenate(raw))  # cleaned once, by shape_plain
    widths = sorted(len(line.strip()) for line in lines if line.strip())
    if not widths:
        return ""
    full = widths[min(len(widths) - 1, int(len(widths) * 0.9))]  # a full line, whatever a few outliers do
    stripped = [line.strip() for line in lines]
    after = [""] * len(lines)  # the next line with text after each line
    for i in range(len(lines) - 2, -1, -1):
        after[i] = stripped[i + 1] or after[i + 1]
    out: list[str] = []
    starts_paragraph = True
    for line, text, next_text in zip(lines, stripped, after):
        out.append(line)
        if not text:
            starts_paragraph = True
            continue
        ends = len(text) < 0.8 * full and text.endswith(tuple(_TERMINAL))
        if not ends and starts_paragraph and len(text) < _HEADING_SHARE * full:
            ends = bool(next_text) and (next_text[0].isupper() or next_text[0].isdigit())
        if ends:
            out.append("")
        starts_paragraph = ends
    return "\n".join(out)


def _open_pdf(data: bytes | None, path: Path | None, name: str) -> Any:
    import pypdfium2 as pdfium  # ships no types: pyproject.toml's mypy override reads it as Any
    try:
        return pdfium.PdfDocument(data if data is not None else str(path))
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        raise DocumentRefused(name, _PDF_ERRORS.get(code or 0, f"PDFium cannot open it ({exc})")) from None


def read_pdf(data: bytes | None, path: Path | None, name: str) -> PageText:
    """A PDF's text layer, page by page (at most MAX_PDF_PAGES pages, MAX_PDF_SECONDS long).

    The document is opened again every `PDF_PAGES_PER_OPEN` pages: PDFium keeps every object
    it parsed until the document closes, so one open document grows by each page's content
    (220 MB of RSS after the 400 pages of a 200 MB PDF, 45 MB when reopened every 50).
    """
    import pypdfium2 as pdfium
    document = _open_pdf(data, path, name)
    notes: list[str] = []
    pages: list[tuple[int, str]] = []
    unreadable = 0
    last = 0
    try:
        count = len(document)
        title = str(document.get_metadata_dict().get("Title") or "")
        if count == 0:
            raise DocumentRefused(name, "the PDF has no pages")
        started = time.monotonic()
        limit = min(count, MAX_PDF_PAGES)
        size = 0
        for index in range(limit):
            if index and time.monotonic() - started > MAX_PDF_SECONDS:  # the first page is always tried
                notes.append(f"pages {index + 1}-{count} not read: reading took over {MAX_PDF_SECONDS:g} s")
                break
            if size > MAX_DOCUMENT_CHARS:
                notes.append(f"pages {index + 1}-{count} not read: the text passed "
                             f"{MAX_DOCUMENT_CHARS:,} characters")
                break
            if index and index % PDF_PAGES_PER_OPEN == 0:
                document.close()
                document = _open_pdf(data, path, name)
            last = index + 1
            try:
                text = _pdf_page_text(document, index)
            except pdfium.PdfiumError:
                unreadable += 1
                continue
            if text:
                pages.append((index + 1, text))
                size += len(text) + 2
        else:
            if count > limit:
                notes.append(f"pages {limit + 1}-{count} not read: briefd reads at most {MAX_PDF_PAGES:,} pages "
                             "of a PDF")
    finally:
        document.close()
    if not pages:
        if unreadable:
            raise DocumentRefused(name, "corrupted: PDFium could not load any of its pages")
        raise DocumentRefused(name, "no text layer (a scanned PDF?): briefd does no OCR")
    blank = last - len(pages) - unreadable
    if unreadable:
        notes.append(f"{unreadable} of {last} pages could not be loaded (damaged)")
    if blank:
        notes.append(f"{blank} of {last} pages have no text (scanned pages? briefd does no OCR)")
    return _paged(title or name, pages, notes)


def _pdf_page_text(document: Any, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            raw = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    return shape_plain(_pdf_paragraphs(raw), MAX_DOCUMENT_CHARS)


def _paged(title: str, pages: list[tuple[int, str]], notes: list[str]) -> PageText:
    """Pages joined by a blank line; each page split alone, so a passage never crosses a page."""
    pieces: list[str] = []
    passages: list[Passage] = []
    offset = 0
    for number, text in pages:
        for passage in mark_passages(split_passages(text), plain_regions(text)):
            passages.append(Passage(seq=len(passages), start=offset + passage.start, end=offset + passage.end,
                                    text=passage.text, page=number, marks=passage.marks))
        pieces.append(text)
        offset += len(text) + 2
    return PageText(extracted=Extracted(title=clean_title(title), text="\n\n".join(pieces), method="pdf"),
                    passages=passages, notes=notes)


# --------------------------------------------------------------------------- zip packages


def _open_zip(data: bytes | None, path: Path | None, name: str) -> zipfile.ZipFile:
    """The package, opened only after its central directory passed the bomb checks.

    zipfile never inflates a member past its declared size (it stops there and reports a bad
    CRC), so bounding the declared sizes and ratios bounds what any reader can inflate.
    """
    source: IO[bytes] | str = io.BytesIO(data) if data is not None else str(path)
    try:
        package = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentRefused(name, f"corrupted or truncated: not a readable zip package ({exc})") from None
    try:
        members = package.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise DocumentRefused(name, f"a package of {len(members):,} files (over {MAX_ZIP_MEMBERS:,}): "
                                  "a zip bomb or not a document")
        total = sum(member.file_size for member in members)
        if total > MAX_ZIP_BYTES:
            raise DocumentRefused(name, f"it would inflate to {total >> 20:,} MB (over {MAX_ZIP_BYTES >> 20} MB): "
                                  "a zip bomb")
        for member in members:
            if member.file_size > _RATIO_FLOOR and member.file_size > MAX_ZIP_RATIO * max(1, member.compress_size):
                raise DocumentRefused(name, f"{member.filename} inflates {member.file_size // max(1, member.compress_size):,} "
                                      "times: a zip bomb")
    except DocumentRefused:
        package.close()
        raise
    return package


def _member(package: zipfile.ZipFile, member: str, name: str) -> bytes:
    try:
        return package.read(member)
    except KeyError:
        raise DocumentRefused(name, f"corrupted: the package has no {member}") from None
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        raise DocumentRefused(name, f"corrupted: {member} cannot be inflated ({exc})") from None


_XML_PARSER = lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
                                   remove_comments=True, remove_pis=True)


def _xml(package: zipfile.ZipFile, member: str, name: str) -> lxml.etree._Element:
    """A package member parsed with no entity expansion, no DTD, no network and libxml2's size limits."""
    try:
        return lxml.etree.fromstring(_member(package, member, name), parser=_XML_PARSER)
    except lxml.etree.XMLSyntaxError as exc:
        raise DocumentRefused(name, _xml_problem(member, exc)) from None


def _xml_problem(member: str, exc: Exception) -> str:
    """An XML error in words: libxml2 stops entity bombs itself ("amplification factor exceeded")."""
    if "amplification" in str(exc):
        return f"{member} is an XML entity bomb (entities that expand without end): not read"
    return f"corrupted: {member} is not well-formed XML ({exc})"


def _table_row(cells: list[str]) -> str:
    """A table row as web pages have theirs: "| a | b |" (extract keeps a run of them as one block)."""
    return "| " + " | ".join(cell.replace("\n", " ").strip() for cell in cells) + " |"


def _blocks_page(title: str, lines: list[str], notes: list[str] | None = None) -> PageText | None:
    """Lines of a document (paragraphs, headings, "| row |", "- item") through extract's plain shaping."""
    text = shape_plain("\n\n".join(_join_runs(lines)), MAX_DOCUMENT_CHARS)
    return _page(title, text, "document", notes)


def _join_runs(lines: list[str]) -> Iterator[str]:
    """Consecutive table rows (or list items) as one block, one per line; other lines alone.

    Plain shaping keeps a row or an item on its own line: "|" and "- " start one there.
    """
    block: list[str] = []
    kind = ""
    for line in lines:
        line = " ".join(line.split())  # cleaned once, by shape_plain
        if not line:
            continue
        line_kind = "table" if line.startswith("|") else "list" if line.startswith("- ") else ""
        if block and line_kind and line_kind == kind:
            block.append(line)
            continue
        if block:
            yield "\n".join(block)
        block, kind = [line], line_kind
    if block:
        yield "\n".join(block)


# DOCX ---------------------------------------------------------------------

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _read_docx(data: bytes | None, path: Path | None, name: str) -> PageText | None:
    """Body paragraphs and tables in document order; the core title, else the first heading."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    try:
        document = docx.Document(io.BytesIO(data) if data is not None else str(path))
    except lxml.etree.XMLSyntaxError as exc:
        raise DocumentRefused(name, _xml_problem("a part of the DOCX", exc)) from None
    except Exception as exc:  # noqa: BLE001 - python-docx raises many kinds on a broken package
        raise DocumentRefused(name, f"corrupted: python-docx cannot open it ({type(exc).__name__}: {exc})") from None
    lines: list[str] = []
    heading = ""
    for element in document.element.body.iterchildren():
        if element.tag == _W + "p":
            paragraph = Paragraph(element, document)
            text = _visible_text(paragraph)
            style = paragraph.style.name if paragraph.style is not None else ""
            if text.strip() and not heading and style.startswith(("Heading", "Title")):
                heading = text
            lines.append(text)
        elif element.tag == _W + "tbl":
            lines.extend(_docx_rows(Table(element, document)))
    title = document.core_properties.title or heading or name
    return _blocks_page(title, lines)


def _visible_text(paragraph: Paragraph) -> str:
    """A paragraph's text without runs marked hidden (w:vanish: a reader never sees them)."""
    from docx.text.hyperlink import Hyperlink
    from docx.text.run import Run
    pieces = []
    for item in paragraph.iter_inner_content():
        if isinstance(item, Run):
            if not item.font.hidden:
                pieces.append(item.text)
        elif isinstance(item, Hyperlink):
            pieces.extend(run.text for run in item.runs if not run.font.hidden)
    return "".join(pieces)


def _docx_rows(table: Table) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        seen: list[object] = []
        for cell in row.cells:
            if any(cell._tc is s for s in seen):  # a merged cell repeats: once is enough
                continue
            seen.append(cell._tc)
            cells.append(" ".join(p.text for p in cell.paragraphs))
        yield _table_row(cells)


# ODT ----------------------------------------------------------------------

_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_T = "{" + _ODF_TEXT + "}"
_TB = "{" + _ODF_TABLE + "}"


def _odf_inline(element: lxml.etree._Element) -> str:
    """A text:p or text:h's text: text:s as its count of spaces, tabs and line breaks as spaces;
    hidden text and footnote citations left out (a reader does not see them in the line)."""
    pieces: list[str] = []
    walker = lxml.etree.iterwalk(element, events=("start", "end"))
    for event, node in walker:
        tag = node.tag if isinstance(node.tag, str) else ""
        if event == "start":
            if tag in (_T + "hidden-text", _T + "note-citation"):
                walker.skip_subtree()  # its "end" still comes: the tail is kept there
            elif tag == _T + "s":
                pieces.append(" " * min(int(node.get(_T + "c", "1") or 1), 100))
            elif tag in (_T + "tab", _T + "line-break"):
                pieces.append(" ")
            elif node.text:
                pieces.append(node.text)
        elif node is not element and node.tail:
            pieces.append(node.tail)
    return "".join(pieces)


def _read_odt(package: zipfile.ZipFile, name: str) -> PageText | None:
    content = _xml(package, "content.xml", name)
    lines: list[str] = []
    heading = ""
    walker = lxml.etree.iterwalk(content, events=("start",))
    for _event, element in walker:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag == _TB + "table-row":
            cells = [" ".join(_odf_inline(p) for p in cell.iter(_T + "p", _T + "h"))
                     for cell in element.iterchildren(_TB + "table-cell", _TB + "covered-table-cell")]
            lines.append(_table_row(cells))
            walker.skip_subtree()
        elif tag in (_T + "hidden-paragraph", _T + "tracked-changes"):
            walker.skip_subtree()
        elif tag in (_T + "h", _T + "p"):
            text = _odf_inline(element)
            inside_list = any(a.tag == _T + "list-item" for a in element.iterancestors())
            if tag == _T + "h" and not heading and text.strip():
                heading = text
            lines.append("- " + text if inside_list and text.strip() else text)
            walker.skip_subtree()
    title = ""
    if "meta.xml" in package.namelist():
        meta = _xml(package, "meta.xml", name)
        title = " ".join(meta.xpath("//*[local-name()='title']//text()")).strip()
    return _blocks_page(title or heading or name, lines)


# EPUB ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Chapter:
    member: str
    media_type: str


def _read_epub(package: zipfile.ZipFile, name: str) -> PageText | None:
    container = _xml(package, "META-INF/container.xml", name)
    rootfiles = container.xpath("//*[local-name()='rootfile']/@full-path")
    if not rootfiles:
        raise DocumentRefused(name, "corrupted: container.xml names no package document")
    opf_path = str(rootfiles[0])
    opf = _xml(package, opf_path, name)
    base = posixpath.dirname(opf_path)
    manifest = {str(item.get("id")): _Chapter(posixpath.normpath(posixpath.join(base, str(item.get("href") or ""))),
                                              str(item.get("media-type") or ""))
                for item in opf.xpath("//*[local-name()='manifest']/*[local-name()='item']")}
    spine = [manifest[str(ref)] for ref in opf.xpath("//*[local-name()='spine']/*[local-name()='itemref']/@idref")
             if str(ref) in manifest]
    title = " ".join(str(t) for t in opf.xpath("//*[local-name()='metadata']/*[local-name()='title']//text()"))
    texts: list[str] = []
    notes: list[str] = []
    size = 0
    heading = ""
    for chapter in spine:
        if "html" not in chapter.media_type and not chapter.member.endswith((".xhtml", ".html", ".htm")):
            continue
        if size > MAX_DOCUMENT_CHARS:
            notes.append(f"chapters after {len(texts)} not read: the text passed {MAX_DOCUMENT_CHARS:,} characters")
            break
        extracted = html_document(_member(package, chapter.member, name), MAX_DOCUMENT_CHARS)
        if extracted is not None:
            heading = heading or extracted.title
            texts.append(extracted.text)
            size += len(extracted.text) + 2
    if not spine:
        raise DocumentRefused(name, "corrupted: its spine lists no chapters")
    return _page(title.strip() or heading or name, "\n\n".join(texts), "document", notes)
