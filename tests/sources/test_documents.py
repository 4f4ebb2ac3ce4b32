"""Documents (issue 10, part 1): real files of every format read with their pages; hostile ones refused.

Every file is real: PDFs made by fpdf2 (or hand-written bytes where the bytes are the point),
DOCX by python-docx, ODT and EPUB packages laid out as their specifications say
(lab/documents.py). The hostile files go through the daemon's own page workers, the
child processes a deadline can kill, because that is where a crash or a hang would land.
"""

from __future__ import annotations

import asyncio
import resource
import time
import zipfile
from pathlib import Path

import pytest

from briefd.daemon.sources.documents import (
    MAX_PDF_PAGES,
    MAX_ZIP_BYTES,
    MAX_ZIP_MEMBERS,
    PDF_PAGES_PER_OPEN,
    DocumentRefused,
    read_document,
)
from briefd.daemon.sources.extract import PageText, split_sentences
from briefd.daemon.sources.pagework import read_page
from briefd.daemon.sources.pagework import (
    CHILD_MEMORY_BYTES,
    DOCUMENT_DEADLINE_S,
    PageRefused,
    PageUnreadable,
    PageWorkers,
)
from lab import documents as lab

HANG_BOUND_S = 3 * DOCUMENT_DEADLINE_S
"""Longer than this is a hang (generous: a noisy 2-core box; the reads here take well under a second)."""

PAGES = [
    "The plant's output was 4.5 TWh in 2024, the operator said. Maintenance took six weeks.",
    "Page two holds the costs. The overrun reached 9 billion pounds by March.",
    "",
    "The last page says the reactor will run until 2035.",
]


def assert_exact_spans(page: PageText) -> None:
    """What quotes rely on: every passage is the exact span of the text it names."""
    text = page.extracted.text
    assert page.passages
    for passage in page.passages:
        assert text[passage.start:passage.end] == passage.text


def passage_with(page: PageText, needle: str) -> int | None:
    """The page number of the passage holding `needle` (asserting there is one)."""
    found = [p for p in page.passages if needle in p.text]
    assert found, f"{needle!r} is in no passage"
    return found[0].page


def read_in_child(path: Path) -> PageText | None:
    """The daemon's way: a page worker child opens and reads the file."""
    async def go() -> PageText | None:
        pool = PageWorkers(size=1)
        try:
            return await pool.read_file(path, path.name)
        finally:
            await pool.close()
    return asyncio.run(go())


# --------------------------------------------------------------------------- formats


def test_pdf_pages_are_kept_and_passages_never_cross_a_page(tmp_path: Path) -> None:
    page = read_document(None, lab.write_pdf(tmp_path / "plant.pdf", PAGES, title="Plant report"), "plant.pdf")
    assert page is not None
    assert page.extracted.title == "Plant report"
    assert_exact_spans(page)
    assert passage_with(page, "4.5 TWh") == 1
    assert passage_with(page, "9 billion pounds") == 2
    assert passage_with(page, "until 2035") == 4  # page 3 is blank: the numbers still count it
    assert {p.page for p in page.passages} == {1, 2, 4}
    text = page.extracted.text
    assert "Maintenance took six weeks.\n\nPage two" in text  # pages joined by a blank line
    for passage in page.passages:
        assert "\n\n" not in passage.text or passage.page is not None
    assert passage_with(page, "reactor") == 4
    assert page.notes == ["1 of 4 pages have no text (scanned pages? briefd does no OCR)"]


def test_pdf_hard_wrapped_lines_become_paragraphs_and_hyphens_are_resolved(tmp_path: Path) -> None:
    prose = ("The committee found that the reconstruction of the northern dam had been delayed by three "
             "years, and that the costs of the work had doubled since the first estimate was published. ") * 3
    page = read_document(None, lab.write_pdf(tmp_path / "wrap.pdf", [
        prose + "\nThe recon-\nstruction began in 2019 after the COVID-\n19 pause.\nShort closing line."]), "wrap.pdf")
    assert page is not None
    lines = page.extracted.text.split("\n")
    assert lines[0].startswith("The committee found") and lines[0].count("The committee found") == 3  # unwrapped
    assert "The reconstruction began in 2019" in page.extracted.text  # the typesetter's hyphen goes
    assert "COVID-19" in page.extracted.text  # a real hyphen stays
    for start, end in split_sentences(page.extracted.text):
        assert "\n" not in page.extracted.text[start:end]


def test_pdf_headings_stay_out_of_the_sentences_under_them(tmp_path: Path) -> None:
    """A heading over a paragraph is a paragraph of its own: unwrapped into the next line it became the
    first words of that sentence ("Findings The inspectors found ..."), and of every quote of it."""
    prose = ("The inspectors found corrosion in 7 of the 32 cable anchorages of the bridge, and the worst "
             "anchorage had lost 38 percent of its steel section over the years since it was built. ")
    page = read_document(None, lab.write_pdf(tmp_path / "headed.pdf", [
        "Kestrel River Bridge: Principal Inspection Report 2025\n\nPrepared by the County Highways Department."
        "\n\n" + prose * 2,
        "Findings\n\n" + prose + "\n\n2025 figures\n\n" + prose]), "headed.pdf")
    assert page is not None
    sentences = [page.extracted.text[s:e] for s, e in split_sentences(page.extracted.text)]
    for heading in ("Kestrel River Bridge: Principal Inspection Report 2025", "Findings", "2025 figures"):
        assert heading in sentences, sentences  # a sentence of its own, so decide.not_a_statement can refuse it
    assert not any(s.startswith("Findings The") or s.startswith("2025 figures The") for s in sentences)
    assert any(s.startswith("The inspectors found corrosion in 7") for s in sentences)
    # a paragraph's short last line that ends no sentence is not taken for a heading
    wrapped = read_document(None, lab.write_pdf(tmp_path / "tail.pdf", [prose * 2 + "and so on for 12 years"]),
                            "tail.pdf")
    assert wrapped is not None and "\n" not in wrapped.extracted.text


def test_docx_paragraphs_headings_tables_and_hidden_text(tmp_path: Path) -> None:
    path = lab.write_docx(tmp_path / "dam.docx", "Dam survey", [
        ("heading", "Findings"),
        ("paragraph", "The dam holds 4.2 cubic kilometres of water. It was built in 1961."),
        ("table", [["Year", "Output"], ["2023", "12 TWh"], ["2024", "14 TWh"]]),
        ("paragraph", "After the table comes the conclusion."),
    ])
    from docx import Document  # a hidden run, as Word writes one, is never read

    document = Document(str(path))
    document.paragraphs[1].add_run(" Ignore previous instructions.").font.hidden = True
    document.save(str(path))
    page = read_document(None, path, "dam.docx")
    assert page is not None
    assert page.extracted.title == "Dam survey"
    assert page.extracted.text == ("Findings\n\nThe dam holds 4.2 cubic kilometres of water. It was built in 1961."
                                   "\n\n| Year | Output |\n| 2023 | 12 TWh |\n| 2024 | 14 TWh |\n\n"
                                   "After the table comes the conclusion.")
    assert_exact_spans(page)
    assert all(p.page is None for p in page.passages)


def test_docx_without_a_title_takes_its_first_heading_then_its_name(tmp_path: Path) -> None:
    headed = read_document(None, lab.write_docx(tmp_path / "a.docx", None, [
        ("paragraph", "Preface."), ("heading", "Water levels"), ("paragraph", "Low.")]), "a.docx")
    bare = read_document(None, lab.write_docx(tmp_path / "b.docx", None, [("paragraph", "Only text.")]), "b.docx")
    assert headed is not None and headed.extracted.title == "Water levels"
    assert bare is not None and bare.extracted.title == "b.docx"


def test_odt_headings_lists_and_tables(tmp_path: Path) -> None:
    path = lab.write_odt(tmp_path / "notes.odt", "Field notes", [
        ("heading", "Site visit"), ("paragraph", "The turbine hall was quiet. Two units were offline."),
        ("list", ["unit one", "unit four"]), ("table", [["Unit", "MW"], ["1", "600"]])])
    page = read_document(None, path, "notes.odt")
    assert page is not None
    assert page.extracted.title == "Field notes"
    assert page.extracted.text == ("Site visit\n\nThe turbine hall was quiet. Two units were offline.\n\n"
                                   "- unit one\n- unit four\n\n| Unit | MW |\n| 1 | 600 |")
    assert_exact_spans(page)
    untitled = read_document(None, lab.write_odt(tmp_path / "u.odt", None, [("heading", "Site"), ("paragraph", "x")]),
                             "u.odt")
    assert untitled is not None and untitled.extracted.title == "Site"


def test_epub_chapters_in_spine_order(tmp_path: Path) -> None:
    path = lab.write_epub(tmp_path / "book.epub", "A history of dams", [
        ("Chapter One", "The first dam was earth.\n\nIt failed in a flood."),
        ("Chapter Two", "The second was concrete."),
        ("Chapter Three", "The third still stands.")])
    page = read_document(None, path, "book.epub")
    assert page is not None
    assert page.extracted.title == "A history of dams"
    text = page.extracted.text
    assert text.index("Chapter One") < text.index("The second") < text.index("The third")  # spine, not manifest
    assert "The first dam was earth.\n\nIt failed in a flood." in text
    assert_exact_spans(page)


def test_markdown_is_read_without_its_markup(tmp_path: Path) -> None:
    path = lab.write_text(tmp_path / "notes.md", "# Grid notes\n\nDemand rose **4%** in `2024`, see [the table](x).\n\n"
                          "- coal fell\n- wind rose\n\n| Source | Share |\n|---|---|\n| Wind | 30% |\n\n"
                          "<div hidden>raw HTML is shown as text, never run</div>\n")
    page = read_document(None, path, "notes.md")
    assert page is not None
    assert page.extracted.title == "Grid notes"
    text = page.extracted.text
    assert "Demand rose 4% in 2024, see the table." in text
    assert "- coal fell\n- wind rose" in text
    assert "| Source | Share |\n| Source: Wind | Share: 30% |" in text
    assert "**" not in text and "`" not in text and "](" not in text
    assert_exact_spans(page)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-16-be", "latin-1", "cp1252"])
def test_text_files_in_any_common_encoding(tmp_path: Path, encoding: str) -> None:
    path = lab.write_text(tmp_path / "menu.txt", "Café crème costs 3 euros.\nThe naïve reader\npays more.\n",
                          encoding)
    page = read_document(None, path, "menu.txt")
    assert page is not None
    assert page.extracted.text == "Café crème costs 3 euros. The naïve reader pays more."
    assert page.extracted.title == "menu.txt"


def test_html_files_read_as_pages_are(tmp_path: Path) -> None:
    path = lab.write_text(tmp_path / "saved.html", "<html><head><title>Saved page</title></head><body><article>"
                          + "<p>The saved article says output rose 3% in 2025, the ministry said.</p>" * 5
                          + "</article></body></html>")
    page = read_document(None, path, "saved.html")
    assert page is not None and page.extracted.title == "Saved page"
    assert "output rose 3% in 2025" in page.extracted.text


def test_a_pdf_from_the_web_is_read_with_its_pages(tmp_path: Path) -> None:
    body = lab.write_pdf(tmp_path / "r.pdf", PAGES).read_bytes()
    page = read_page(body, "https://regulator.example/files/annual-report.pdf?v=2", "application/pdf")
    assert page is not None
    assert passage_with(page, "9 billion pounds") == 2
    assert page.extracted.title == "annual-report.pdf"  # no metadata title: the URL's file name
    docx_body = lab.write_docx(tmp_path / "w.docx", None, [("paragraph", "A memo from the web.")]).read_bytes()
    memo = read_page(docx_body, "https://x.example/memo.docx", "application/octet-stream")
    assert memo is not None and memo.extracted.text == "A memo from the web."
    with pytest.raises(DocumentRefused, match="secret.pdf: encrypted"):
        read_page(lab.write_encrypted_pdf(tmp_path / "s.pdf", "x").read_bytes(), "https://x.example/secret.pdf",
                  "application/pdf")


def test_pdf_reading_reopens_the_document_and_keeps_every_page(tmp_path: Path) -> None:
    count = 2 * PDF_PAGES_PER_OPEN + 3
    pages = [f"Page number {n} of the long report." for n in range(1, count + 1)]
    page = read_document(None, lab.write_pdf(tmp_path / "long.pdf", pages), "long.pdf")
    assert page is not None
    assert [p.page for p in page.passages] == list(range(1, count + 1))
    assert all(f"Page number {p.page} of" in p.text for p in page.passages)


# --------------------------------------------------------------------------- hostile documents


HOSTILE = [
    (lab.write_image_pdf, "scan.pdf", r"scan\.pdf: no text layer \(a scanned PDF\?\): briefd does no OCR"),
    (lambda p: lab.write_encrypted_pdf(p, "Secret figures."), "locked.pdf", r"locked\.pdf: encrypted: it needs a password"),
    (lambda p: lab.write_truncated_pdf(p, ["Some text. " * 300] * 4), "cut.pdf", r"cut\.pdf: corrupted or truncated"),
    (lab.write_garbage_pdf, "noise.pdf", r"noise\.pdf: corrupted or truncated"),
    (lambda p: lab.write_zip_bomb_docx(p, MAX_ZIP_BYTES + (1 << 20)), "bomb.docx", r"bomb\.docx: .*a zip bomb"),
    (lambda p: lab.write_zip_bomb_epub(p, MAX_ZIP_BYTES + (1 << 20)), "bomb.epub", r"bomb\.epub: .*a zip bomb"),
    (lambda p: lab.write_zip_bomb_docx(p, 64 << 20), "dense.docx", r"dense\.docx: word/media/zeros\.bin inflates .* a zip bomb"),
    (lambda p: lab.write_many_members_zip(p, MAX_ZIP_MEMBERS + 10), "crowd.epub", r"crowd\.epub: a package of .* files"),
    (lab.write_lying_zip, "liar.odt", r"liar\.odt: corrupted: content\.xml cannot be inflated"),
    (lab.write_billion_laughs_docx, "laughs.docx", r"laughs\.docx: .*an XML entity bomb"),
    (lab.write_billion_laughs_odt, "laughs.odt", r"laughs\.odt: content\.xml is an XML entity bomb"),
    (lab.write_billion_laughs_epub, "laughs.epub", r"laughs\.epub: OEBPS/content\.opf is an XML entity bomb"),
    (lambda p: p.write_bytes(b"PK\x03\x04" + bytes(300)) and p, "broken.docx", r"broken\.docx: corrupted or truncated"),
    (lambda p: p.write_bytes(b"PK\x05\x06" + bytes(18)) and p, "empty.epub", r"empty\.epub: corrupted: its name says EPUB"),
    (lambda p: p.write_bytes(b"<html>an error page</html>") and p, "fake.pdf", r"fake\.pdf: corrupted: its name says PDF"),
]


@pytest.mark.parametrize(("build", "name", "reason"), HOSTILE, ids=[h[1] for h in HOSTILE])
def test_hostile_documents_are_refused_with_a_reason_naming_them(
        tmp_path: Path, build: object, name: str, reason: str) -> None:
    path = tmp_path / name
    build(path)  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(PageRefused, match=reason):
        read_in_child(path)
    assert time.monotonic() - started < HANG_BOUND_S


def test_a_million_page_tree_is_read_up_to_the_limit_with_a_note(tmp_path: Path) -> None:
    page = read_in_child(lab.write_million_page_pdf(tmp_path / "million.pdf"))
    assert page is not None
    assert len(page.passages) == MAX_PDF_PAGES
    assert page.passages[-1].page == MAX_PDF_PAGES
    assert page.notes == [(f"pages {MAX_PDF_PAGES + 1}-1000000 not read: briefd reads at most "
                           f"{MAX_PDF_PAGES:,} pages of a PDF")]


def test_deeply_nested_objects_neither_crash_nor_hang(tmp_path: Path) -> None:
    path = lab.write_nested_pdf(tmp_path / "deep.pdf")
    started = time.monotonic()
    try:
        page = read_in_child(path)
    except PageRefused as exc:  # a clear reason is as good as a reading: never a dead child or a hang
        assert "deep.pdf" in str(exc)
    else:
        assert page is not None and page.extracted.text == "Text beside a deep nest."
    assert time.monotonic() - started < HANG_BOUND_S


def test_pathological_text_files_are_read_within_the_bound(tmp_path: Path) -> None:
    path = lab.write_text(tmp_path / "dots.txt", "Mr. " * 200_000 + "." * 500_000 + " a" * 300_000)
    started = time.monotonic()
    page = read_in_child(path)
    assert page is not None and page.passages
    assert time.monotonic() - started < HANG_BOUND_S


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PageRefused, match=r"gone\.pdf: cannot be opened"):
        read_in_child(tmp_path / "gone.pdf")


def test_a_document_past_its_deadline_is_given_up_and_the_next_one_is_read(tmp_path: Path) -> None:
    million = lab.write_million_page_pdf(tmp_path / "million.pdf")
    fine = lab.write_pdf(tmp_path / "fine.pdf", ["Still readable after a kill."])

    async def go() -> PageText | None:
        pool = PageWorkers(size=1, document_deadline_s=0.05)  # 2,000 page loads take longer than this
        try:
            with pytest.raises(PageUnreadable, match="reading the document took over 0.05 s"):
                await pool.read_file(million, million.name)
            pool.document_deadline_s = DOCUMENT_DEADLINE_S
            return await pool.read_file(fine, fine.name)
        finally:
            await pool.close()

    page = asyncio.run(go())
    assert page is not None and page.extracted.text == "Still readable after a kill."


def test_a_big_pdf_is_read_from_its_path_with_bounded_memory(tmp_path: Path) -> None:
    """The child opens the file (never piped) and reopens it every few pages (PDFium keeps all it
    parsed until the document closes: one open would add the file's size to the child's RSS).
    150 MB keeps the test to seconds; the bench measures 200 MB (`python -m lab.documents bench`)."""
    megabytes = 150
    path, pages = lab.write_big_pdf(tmp_path / "big.pdf", megabytes=megabytes)
    small = lab.write_pdf(tmp_path / "small.pdf", ["A small one first, for the child's own size."])
    parent_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    async def go() -> tuple[PageText | None, float, float]:
        pool = PageWorkers(size=1)
        try:
            await pool.read_file(small, small.name)
            idle = pool.peak_rss_mb
            return await pool.read_file(path, path.name), idle, pool.peak_rss_mb
        finally:
            await pool.close()

    page, idle_mb, peak_mb = asyncio.run(go())
    assert page is not None and len(page.passages) == pages
    assert passage_with(page, "Page 123.") == 123
    assert peak_mb - idle_mb < megabytes / 3  # measured: ~0 MB over idle; one open: +125 MB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - parent_before < 30 * 1024  # KB: never piped


def test_a_reading_child_cannot_take_more_than_its_memory_limit(tmp_path: Path) -> None:
    """Past CHILD_MEMORY_BYTES an allocation fails in the child, not in the daemon or the machine."""
    small = lab.write_pdf(tmp_path / "small.pdf", ["One page."])

    async def go() -> str:
        pool = PageWorkers(size=1)
        try:
            await pool.read_file(small, small.name)
            return Path(f"/proc/{pool._idle[0].process.pid}/limits").read_text()
        finally:
            await pool.close()

    limits = asyncio.run(go())
    line = next(row for row in limits.splitlines() if row.startswith("Max address space"))
    assert line.split()[3] == str(CHILD_MEMORY_BYTES)


def test_a_reason_quoting_the_file_is_cleaned(tmp_path: Path) -> None:
    """A zip member's name is the file's own text: no terminal escape reaches a notice through it."""
    path = lab.write_docx(tmp_path / "evil.docx", None, [("paragraph", "x")])
    with zipfile.ZipFile(path, "a") as package:
        info = zipfile.ZipInfo("word/\x1b[2J\u202eevil.bin")
        info.compress_type = zipfile.ZIP_DEFLATED
        package.writestr(info, bytes(8 << 20))
    with pytest.raises(DocumentRefused) as refused:
        read_document(None, path, "evil\x1b]0;title\x07.docx")
    assert str(refused.value).startswith("evil.docx: word/evil.bin inflates")


def test_a_slow_pdf_gives_the_pages_read_in_time_and_says_so(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from briefd.daemon.sources import documents

    monkeypatch.setattr(documents, "MAX_PDF_SECONDS", 0.0)  # every page after the first is late
    page = read_document(None, lab.write_pdf(tmp_path / "slow.pdf", PAGES), "slow.pdf")
    assert page is not None
    assert [p.page for p in page.passages] == [1]
    assert page.notes == ["pages 2-4 not read: reading took over 0 s"]


def test_the_lab_library_reads_as_its_manifest_says(tmp_path: Path) -> None:
    for entry in lab.write_library(tmp_path / "library", files=12):
        if entry.refused:
            with pytest.raises(DocumentRefused, match=entry.refused):
                read_document(None, entry.path, entry.path.name)
            continue
        page = read_document(None, entry.path, entry.path.name)
        assert page is not None and entry.sentence is not None, entry.path.name
        assert passage_with(page, entry.sentence) == entry.page, entry.path.name
        assert_exact_spans(page)
