"""Real documents, and hostile ones, written to disk for the tests, the lab library and the bench.

Every builder writes a real file with a real library where one exists (PDFs by fpdf2, DOCX
by python-docx) or by hand where the point is the bytes themselves (ODT and EPUB are zip
packages written with zipfile, exactly as their specifications lay them out; the hostile
PDFs are hand-written objects). Each returns the path it wrote.

`measure_big_pdf` is the bench's measurement (`python -m lab.documents bench`): it
builds a PDF of a given size and reads it through the page workers, reporting time per
page and the reading child's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from docx import Document
from fpdf import FPDF

# --------------------------------------------------------------------------- real documents


def pdf_bytes(pages: list[str], title: str | None = None) -> bytes:
    """A PDF with one page per text (fpdf2's core font: latin-1 text), and a metadata title if given.

    The creation date is fixed, so the same texts make the same bytes (the lab web's PDFs)."""
    pdf = FPDF()
    pdf.set_creation_date(datetime(2025, 3, 10, tzinfo=timezone.utc))
    pdf.set_font("helvetica", size=11)
    if title is not None:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def write_pdf(path: Path, pages: list[str], title: str | None = None) -> Path:
    """`pdf_bytes` written to `path`."""
    path.write_bytes(pdf_bytes(pages, title))
    return path


def write_docx(path: Path, title: str | None, blocks: list[tuple[str, object]]) -> Path:
    """A DOCX: `blocks` are ("heading", text), ("paragraph", text) or ("table", [[cell, ...], ...])."""
    document = Document()
    if title is not None:
        document.core_properties.title = title
    for kind, value in blocks:
        if kind == "heading":
            document.add_heading(str(value), level=1)
        elif kind == "paragraph":
            document.add_paragraph(str(value))
        elif kind == "table":
            rows = value if isinstance(value, list) else []
            table = document.add_table(rows=len(rows), cols=max(len(r) for r in rows))
            for row, cells in zip(table.rows, rows, strict=True):
                for cell, text in zip(row.cells, cells, strict=False):
                    cell.text = str(text)
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    document.save(str(path))
    return path


_ODT_MIME = "application/vnd.oasis.opendocument.text"
_ODT_MANIFEST = f"""<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
 <manifest:file-entry manifest:full-path="/" manifest:media-type="{_ODT_MIME}"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
 <manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>
</manifest:manifest>
"""
_ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
           'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
           'xmlns:dc="http://purl.org/dc/elements/1.1/" '
           'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"')


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def odt_content(blocks: list[tuple[str, object]]) -> str:
    """content.xml for `write_odt` (blocks as in `write_docx`, plus ("list", [item, ...]))."""
    body: list[str] = []
    for kind, value in blocks:
        if kind == "heading":
            body.append(f'<text:h text:outline-level="1">{_xml(str(value))}</text:h>')
        elif kind == "paragraph":
            body.append(f"<text:p>{_xml(str(value))}</text:p>")
        elif kind == "list":
            items = "".join(f"<text:list-item><text:p>{_xml(str(i))}</text:p></text:list-item>"
                            for i in (value if isinstance(value, list) else []))
            body.append(f"<text:list>{items}</text:list>")
        elif kind == "table":
            rows = "".join(
                "<table:table-row>" + "".join(
                    f"<table:table-cell><text:p>{_xml(str(c))}</text:p></table:table-cell>" for c in row)
                + "</table:table-row>" for row in (value if isinstance(value, list) else []))
            body.append(f'<table:table table:name="T">{rows}</table:table>')
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content {_ODF_NS} office:version="1.2">'
            f"<office:body><office:text>{''.join(body)}</office:text></office:body></office:document-content>")


def write_odt(path: Path, title: str | None, blocks: list[tuple[str, object]],
              content_xml: str | None = None) -> Path:
    """A minimal valid ODF text package: `mimetype` stored first, the manifest, content.xml, meta.xml."""
    meta_title = f"<dc:title>{_xml(title)}</dc:title>" if title else ""
    meta = (f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-meta {_ODF_NS} office:version="1.2">'
            f"<office:meta>{meta_title}</office:meta></office:document-meta>")
    with zipfile.ZipFile(path, "w") as package:
        package.writestr(zipfile.ZipInfo("mimetype"), _ODT_MIME, compress_type=zipfile.ZIP_STORED)
        package.writestr("META-INF/manifest.xml", _ODT_MANIFEST, compress_type=zipfile.ZIP_DEFLATED)
        package.writestr("content.xml", content_xml or odt_content(blocks), compress_type=zipfile.ZIP_DEFLATED)
        package.writestr("meta.xml", meta, compress_type=zipfile.ZIP_DEFLATED)
    return path


_CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
 <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""


def write_epub(path: Path, title: str | None, chapters: list[tuple[str, str]]) -> Path:
    """An EPUB 3: mimetype stored first, container.xml, an OPF whose spine lists the chapters in order.

    `chapters` are (heading, body paragraphs separated by blank lines). The manifest lists the
    chapters in reverse order on purpose: reading order is the spine's, not the manifest's.
    """
    ids = [f"ch{i}" for i in range(1, len(chapters) + 1)]
    manifest = "".join(f'<item id="{i}" href="text/{i}.xhtml" media-type="application/xhtml+xml"/>'
                       for i in reversed(ids))
    spine = "".join(f'<itemref idref="{i}"/>' for i in ids)
    opf = ('<?xml version="1.0" encoding="UTF-8"?>\n'
           '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:uuid:lab</dc:identifier>'
           + (f"<dc:title>{_xml(title)}</dc:title>" if title else "")
           + '<dc:language>en</dc:language></metadata>'
           f"<manifest>{manifest}</manifest><spine>{spine}</spine></package>")
    with zipfile.ZipFile(path, "w") as package:
        package.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        package.writestr("META-INF/container.xml", _CONTAINER, compress_type=zipfile.ZIP_DEFLATED)
        package.writestr("OEBPS/content.opf", opf, compress_type=zipfile.ZIP_DEFLATED)
        for chapter_id, (heading, body) in zip(ids, chapters, strict=True):
            paragraphs = "".join(f"<p>{_xml(p)}</p>" for p in body.split("\n\n"))
            xhtml = ('<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
                     f"<head><title>{_xml(heading)}</title></head><body><h1>{_xml(heading)}</h1>{paragraphs}"
                     "</body></html>")
            package.writestr(f"OEBPS/text/{chapter_id}.xhtml", xhtml, compress_type=zipfile.ZIP_DEFLATED)
    return path


def write_text(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """A text (or Markdown) file in the given encoding ("utf-16" writes a BOM, "latin-1" none)."""
    path.write_bytes(text.encode(encoding))
    return path


# --------------------------------------------------------------------------- hostile documents


def write_image_pdf(path: Path, pages: int = 3) -> Path:
    """A 'scanned' PDF: pages of drawn shapes and no text layer at all."""
    pdf = FPDF()
    for number in range(pages):
        pdf.add_page()
        pdf.set_fill_color(40 * number % 255, 90, 160)
        pdf.rect(20, 20, 170, 250, style="F")
    pdf.output(str(path))
    return path


def write_encrypted_pdf(path: Path, text: str, user_password: str = "secret") -> Path:
    """A PDF that needs a password to open (fpdf2's AES-128 encryption)."""
    pdf = FPDF()
    pdf.set_encryption(owner_password="owner-" + user_password, user_password=user_password)
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def write_truncated_pdf(path: Path, pages: list[str], keep: float = 0.4) -> Path:
    """A real PDF cut short, as a download that stopped would leave it."""
    write_pdf(path, pages)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def write_garbage_pdf(path: Path) -> Path:
    """A PDF header followed by noise: it says PDF and is not one."""
    path.write_bytes(b"%PDF-1.7\n" + bytes((i * 7919) % 251 for i in range(20_000)))
    return path


def _write_pdf_objects(stream: BinaryIO, objects: Iterable[bytes]) -> None:
    """Hand-written PDF: numbered objects, an exact xref table, a trailer naming object 1 as root.

    Objects are written as they come, so a big file is never held in memory.
    """
    written = stream.write(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(written)
        written += stream.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    stream.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1))
    stream.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    stream.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(offsets) + 1, written))


def _pdf_file(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    _write_pdf_objects(out, objects)
    return out.getvalue()


def _stream(data: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def write_million_page_pdf(path: Path, fanout: int = 1000) -> Path:
    """A small file whose page tree claims fanout**2 pages (a million by default).

    The root's kids are `fanout` references to one intermediate node, whose kids are
    `fanout` references to one page: a tree of a million leaves in about 20 KB.
    """
    kids_of_root = b" ".join([b"3 0 R"] * fanout)
    kids_of_node = b" ".join([b"4 0 R"] * fanout)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>" % (fanout * fanout, kids_of_root),
        b"<< /Type /Pages /Parent 2 0 R /Count %d /Kids [%s] >>" % (fanout, kids_of_node),
        (b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 6 0 R >> >>"
        b" /Contents 5 0 R >>"),
        _stream(b"BT /F1 12 Tf 72 720 Td (The same page, again and again.) Tj ET"),
        _FONT,
    ]
    path.write_bytes(_pdf_file(objects))
    return path


def write_nested_pdf(path: Path, depth: int = 200_000) -> Path:
    """One page whose resources hold arrays and dictionaries nested `depth` deep (a stack-overflow probe)."""
    nested = b"[" * depth + b"]" * depth
    dicts = b"<< /A " * (depth // 2) + b"1" + b" >>" * (depth // 2)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /Deep 7 0 R >>",
        b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
        (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >>"
        b" /Deep 6 0 R >> /Contents 4 0 R >>"),
        _stream(b"BT /F1 12 Tf 72 720 Td (Text beside a deep nest.) Tj ET " + nested[:2000] + b" Tj"),
        _FONT,
        nested,
        dicts,
    ]
    path.write_bytes(_pdf_file(objects))
    return path


def _write_zero_member(package: zipfile.ZipFile, name: str, size: int) -> None:
    chunk = bytes(1 << 20)
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED  # a bare ZipInfo says stored, whatever the archive's default
    with package.open(info, "w", force_zip64=True) as member:
        left = size
        while left > 0:
            member.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)


def write_zip_bomb_docx(path: Path, size: int = 3 << 30) -> Path:
    """A real DOCX whose document part is padded with `size` bytes of zeros (3 GB by default, ~3 MB on disk).

    The zeros are deflated a megabyte at a time, so writing it never holds the bomb in memory.
    """
    write_docx(path, "Bomb", [("paragraph", "An innocent paragraph.")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as package:
        _write_zero_member(package, "word/media/zeros.bin", size)
    return path


def write_zip_bomb_epub(path: Path, size: int = 3 << 30) -> Path:
    """A real EPUB plus a chapter file of `size` zeros (the zeros are deflated a megabyte at a time)."""
    write_epub(path, "Bomb", [("One", "An innocent chapter.")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as package:
        _write_zero_member(package, "OEBPS/text/zeros.xhtml", size)
    return path


def write_many_members_zip(path: Path, members: int = 50_000) -> Path:
    """An EPUB with tens of thousands of tiny members: a central directory that costs to walk."""
    write_epub(path, "Crowd", [("One", "An innocent chapter.")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_STORED) as package:
        for number in range(members):
            package.writestr(f"OEBPS/x/{number}.txt", b"")
    return path


def _raw_zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip written byte by byte: (name, raw deflated data or b"" for stored, crc, declared size).

    Only for files whose headers must lie; honest packages are written by zipfile.
    """
    out = bytearray()
    central = bytearray()
    for name, data, crc, declared in members:
        method = 8 if data else 0
        encoded = name.encode()
        fields = (method.to_bytes(2, "little") + bytes(4) + crc.to_bytes(4, "little")
                  + len(data).to_bytes(4, "little") + declared.to_bytes(4, "little")
                  + len(encoded).to_bytes(2, "little"))
        central += (b"PK\x01\x02" + (20).to_bytes(2, "little") * 2 + bytes(2) + fields + bytes(2 + 2 + 2 + 2 + 4)
                    + len(out).to_bytes(4, "little") + encoded)
        out += b"PK\x03\x04" + (20).to_bytes(2, "little") + bytes(2) + fields + bytes(2) + encoded + data
    start = len(out)
    out += central
    out += (b"PK\x05\x06" + bytes(4) + len(members).to_bytes(2, "little") * 2
            + len(central).to_bytes(4, "little") + start.to_bytes(4, "little") + bytes(2))
    return bytes(out)


def write_lying_zip(path: Path, inflated: int = 50 << 20, declared: int = 1 << 10) -> Path:
    """An ODT whose content.xml inflates to `inflated` bytes while its headers declare `declared`.

    Its declared sizes pass every check; zipfile stops the member at the declared size (and
    reports a bad CRC), so the reader still stays bounded by what was declared.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    content = b"<x>" + b" " * inflated + b"</x>"
    data = compressor.compress(content) + compressor.flush()
    mimetype = _ODT_MIME.encode()
    # a stored member's data is itself: _raw_zip stores when given b"", so the mimetype is deflated here too
    mime_compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    mime_data = mime_compressor.compress(mimetype) + mime_compressor.flush()
    path.write_bytes(_raw_zip([("mimetype", mime_data, zlib.crc32(mimetype), len(mimetype)),
                               ("content.xml", data, zlib.crc32(content), declared)]))
    return path


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]>"
)
"""A DTD whose entity &lol9; expands to 10**9 "lol"s (3 GB) if a parser resolves entities."""


def write_billion_laughs_docx(path: Path) -> Path:
    """A DOCX whose document part declares the billion-laughs entities and uses &lol9;."""
    write_docx(path, None, [("paragraph", "PLACEHOLDER")])
    with zipfile.ZipFile(path) as package:
        parts = {info.filename: package.read(info) for info in package.infolist()}
    xml = parts["word/document.xml"].decode()
    body = xml[xml.index("<w:document"):].replace("PLACEHOLDER", "&lol9;")
    parts["word/document.xml"] = (BILLION_LAUGHS + body).encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return path


def write_billion_laughs_odt(path: Path) -> Path:
    """An ODT whose content.xml declares the billion-laughs entities and uses &lol9;."""
    content = odt_content([("paragraph", "PLACEHOLDER")])
    body = content[content.index("<office:document-content"):].replace("PLACEHOLDER", "&lol9;")
    return write_odt(path, None, [], content_xml=BILLION_LAUGHS + body)


def write_billion_laughs_epub(path: Path) -> Path:
    """An EPUB whose OPF declares the billion-laughs entities and uses &lol9; in its title."""
    write_epub(path, "PLACEHOLDER", [("One", "An innocent chapter.")])
    with zipfile.ZipFile(path) as package:
        parts = {info.filename: package.read(info) for info in package.infolist()}
    opf = parts["OEBPS/content.opf"].decode()
    parts["OEBPS/content.opf"] = (BILLION_LAUGHS + opf[opf.index("<package"):].replace("PLACEHOLDER", "&lol9;")).encode()
    with zipfile.ZipFile(path, "w") as package:
        for name, data in parts.items():
            package.writestr(name, data, compress_type=zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return path


# --------------------------------------------------------------------------- a library folder

_SUBJECTS = ["reservoir", "turbine hall", "tunnel", "substation", "water main", "bridge deck", "sea wall",
             "pumping station"]


def _facts(seed: int, count: int) -> list[str]:
    """Distinct sentences with a number each, so a search can tell the files apart."""
    return [f"The {_SUBJECTS[(seed + i) % len(_SUBJECTS)]} of site {seed} recorded {seed * 7 + i * 3} "
            f"units in inspection {i + 1}, the engineer's log says." for i in range(count)]


@dataclass(frozen=True)
class LibraryFile:
    """A file `write_library` wrote and what reading it must give: a sentence and its page, or a refusal."""

    path: Path
    sentence: str | None  # a sentence the text holds (None for a hostile file)
    page: int | None  # the PDF page that sentence is on
    refused: str | None  # a regular expression the refusal's reason matches (hostile files)


def write_library(folder: Path, files: int = 12, hostile: bool = True) -> list[LibraryFile]:
    """A library folder of real documents, `files` of them in turn PDF (3 pages), DOCX, Markdown,
    ODT, EPUB and text, plus (with `hostile`) one of each hostile kind that is quick to build.

    The lab's library and the indexing bench (1,000 files) are made by this; each file's entry
    says what reading it must give.
    """
    folder.mkdir(parents=True, exist_ok=True)
    made: list[LibraryFile] = []
    for n in range(files):
        facts = _facts(n, 6)
        kind = ("pdf", "docx", "md", "odt", "epub", "txt")[n % 6]
        path = folder / f"doc-{n:04d}.{kind}"
        page = None
        if kind == "pdf":
            write_pdf(path, [" ".join(facts[0:2]), " ".join(facts[2:4]), " ".join(facts[4:6])], title=f"Site {n} log")
            page = 3
        elif kind == "docx":
            write_docx(path, f"Site {n} log", [("heading", "Inspections"), *(("paragraph", f) for f in facts)])
        elif kind == "md":
            write_text(path, f"# Site {n} log\n\n" + "\n\n".join(facts) + "\n")
        elif kind == "odt":
            write_odt(path, f"Site {n} log", [("paragraph", f) for f in facts])
        elif kind == "epub":
            write_epub(path, f"Site {n} log", [("Inspections", "\n\n".join(facts[:3])), ("Later", "\n\n".join(facts[3:]))])
        else:
            write_text(path, "\n\n".join(facts) + "\n", "utf-16" if n % 12 == 5 else "utf-8")
        made.append(LibraryFile(path, facts[5], page, None))
    if hostile:
        for build, name, reason in (
            (write_image_pdf, "scanned.pdf", "no text layer"),
            (lambda p: write_encrypted_pdf(p, "Secret."), "locked.pdf", "encrypted"),
            (lambda p: write_truncated_pdf(p, ["Cut short. " * 200] * 3), "cut.pdf", "corrupted or truncated"),
            (lambda p: write_zip_bomb_docx(p, 64 << 20), "bomb.docx", "a zip bomb"),
            (write_billion_laughs_odt, "laughs.odt", "an XML entity bomb"),
        ):
            path = folder / name
            build(path)
            made.append(LibraryFile(path, None, None, reason))
    return made


# --------------------------------------------------------------------------- the bench


def write_big_pdf(path: Path, megabytes: int, pages: int = 400) -> tuple[Path, int]:
    """A PDF of about `megabytes` MB and `pages` text pages; returns the path and the page count.

    Each page's content stream carries its text and then a comment of incompressible filler to
    make up the size (as bulky as the images of a scanned-and-OCRed report, and as costly to
    scan past). Written by hand, one object at a time: fpdf2 would hold the whole file in memory.
    """
    page_text = ("Page {n}. The reactor's annual output was {v} terawatt hours, the operator said. "
                 "Maintenance took the plant offline for six weeks in the spring.")
    filler = max(0, megabytes * (1 << 20) // pages - 1000) // 64

    def objects() -> Iterator[bytes]:
        yield b"<< /Type /Catalog /Pages 2 0 R >>"
        kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))  # page n is object 2n+2
        yield b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, kids)
        yield _FONT
        for n in range(1, pages + 1):
            line = page_text.format(n=n, v=n * 3 + 1).encode("latin-1")
            noise = bytes((n * 31 + i * 17) % 94 + 33 for i in range(64)).replace(b"%", b"!") * filler
            yield (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                   b" /Contents %d 0 R >>" % (2 * n + 3))
            yield _stream(b"BT /F1 10 Tf 14 TL 40 760 Td (" + line + b") Tj ET\n%" + noise + b"\n")

    with path.open("wb") as stream:
        _write_pdf_objects(stream, objects())
    return path, pages


def measure_big_pdf(directory: Path, megabytes: int = 200) -> dict[str, float]:
    """Read a `megabytes` MB PDF through the page workers; time per page and the child's peak RSS."""
    from briefd.daemon.sources.pagework import (
        PageWorkers,  # the daemon's import: only the bench needs it here
    )

    path, pages = write_big_pdf(directory / f"big-{megabytes}mb.pdf", megabytes)

    async def run() -> dict[str, float]:
        workers = PageWorkers(size=1)
        try:
            started = time.perf_counter()
            page = await workers.read_file(path, path.name)
            seconds = time.perf_counter() - started
            peak = workers.peak_rss_mb
        finally:
            await workers.close()
        assert page is not None
        return {"megabytes": path.stat().st_size / (1 << 20), "pages": pages, "seconds": seconds,
                "ms_per_page": 1000 * seconds / pages, "child_peak_rss_mb": peak,
                "passages": len(page.passages)}

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="documents for the lab; `bench` measures a big PDF")
    parser.add_argument("command", choices=["bench"])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    args = parser.parse_args(argv)
    print(json.dumps(measure_big_pdf(args.dir, args.megabytes), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
