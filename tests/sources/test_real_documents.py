"""Real documents through extraction and the library (issue 21, part 4: the answer in front of the model).

The inputs are the real-document set's manuals (lab/docset.py: Debian's documentation packages, downloaded
and cached at run time), read by the library's own reader (`read_document`) and searched through the store, and
the answers asserted are the set's own verified patterns (lab/docset/questions.json), so a check here is
what `briefd eval` counts at its `extract` and `shown` stages. Where the documents cannot be had, the tests skip
saying why (tests/labtests/test_docset.py's rule).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from briefd.daemon.ops import evaluate
from briefd.daemon.sources.documents import MAX_DOCUMENT_CHARS, read_document
from briefd.daemon.sources.extract import MAX_TEXT_CHARS, PageText, extract_page, split_sentences
from briefd.daemon.sources.library import Library, find, search
from briefd.store import Store
from briefd.store.library import PASSAGES_PER_DOCUMENT
from tests.conftest import docset_or_skip
from lab.docset import QUESTIONS, Docset
from lab.workspace import BRIEFD
from tests.sources.test_library import read_text_in_thread

SPHINX_PAGE = Path("/usr/share/doc/python3/python-policy.html")
"""A Sphinx page as Debian installs it (python3-dev): the issue's "Abstract¶" title came from such a page."""


def docset(*packages: str) -> Docset:
    """The corpus of these packages, or a skip that says why it cannot be had here and where it runs."""
    return docset_or_skip(packages)


def read(corpus: Docset, path: str) -> PageText:
    """A corpus file as the library reads it."""
    page = read_document(None, corpus.folder / path, Path(path).name)
    assert page is not None
    return page


def cases(*ids: str) -> list[evaluate.Case]:
    by_id = {case.id: case for case in evaluate.parse_eval_set(QUESTIONS.read_bytes()).cases}
    return [by_id[i] for i in ids]


# --------------------------------------------------------------------------- the library's cap on an HTML file

BASH_HTML_CASES = ("bash-mailcheck", "bash-ignoreeof", "readline-keyseq-timeout", "bash-histsize")
"""Answers the Bash manual's one-page HTML states past its 200,000th character of text."""


def test_a_library_html_manual_is_read_to_the_documents_cap_not_a_web_pages() -> None:
    corpus = docset("bash-doc")
    page = read(corpus, "bash-doc/bashref.html")
    assert MAX_TEXT_CHARS < len(page.extracted.text) <= MAX_DOCUMENT_CHARS
    for case in cases(*BASH_HTML_CASES):
        assert evaluate.matches(case.patterns, page.extracted.text), case.id
        assert any(evaluate.matches(case.patterns, p.text) for p in page.passages), case.id


def test_a_fetched_web_page_keeps_the_web_pages_cap() -> None:
    corpus = docset("bash-doc")
    page = extract_page((corpus.folder / "bash-doc/bashref.html").read_bytes(), "http://example.org/bashref.html",
                        "text/html")
    assert page is not None and len(page.text) <= MAX_TEXT_CHARS


# --------------------------------------------------------------------------- titles


def test_an_html_documents_title_is_its_whole_title_element_not_a_piece_of_it() -> None:
    corpus = docset("flex-doc")
    page = read(corpus, "flex-doc/The-_007c-operator-is-not-doing-what-I-want.html")
    assert page.extracted.title == ("The | operator is not doing what I want (Lexical Analysis With Flex, "
                                    "for Flex 2.6.4)")
    page = read(corpus, "flex-doc/Memory-leak-_002d-16386-bytes-allocated-by-malloc_002e.html")
    assert page.extracted.title.startswith("Memory leak - 16386 bytes allocated by malloc.")


def test_an_html_documents_title_is_its_title_element_not_its_only_heading() -> None:
    corpus = docset("m4-doc")
    assert read(corpus, "m4-doc/Arithmetic.html").extracted.title == "Arithmetic (GNU M4 1.4.19 macro processor)"


def test_a_page_with_an_empty_title_element_and_no_h1_is_titled_by_its_first_h2() -> None:
    """git's AsciiDoc pages have an empty <title> and start at <h2>: the heading, on the web as in the library
    (trafilatura, whose metadata named such pages before, is no longer asked for it: extract._page_title)."""
    corpus = docset("git-doc")
    assert read(corpus, "git-doc/reftable.html").extracted.title == "reftable"
    path = "git-doc/coordinate-embargoed-releases.html"
    web_page = extract_page((corpus.folder / path).read_bytes(), "http://example.org/c.html", "text/html")
    assert web_page is not None
    assert read(corpus, path).extracted.title == web_page.title == "How we coordinate embargoed releases"


@pytest.mark.skipif(not SPHINX_PAGE.is_file(), reason=f"{SPHINX_PAGE} is not installed here (Debian's python3-dev)")
def test_a_sphinx_page_is_titled_by_its_title_element_not_abstract_and_a_permalink_mark() -> None:
    body = SPHINX_PAGE.read_bytes()
    document = read_document(body, None, SPHINX_PAGE.name)
    web_page = extract_page(body, "http://example.org/policy.html", "text/html")
    assert document is not None and web_page is not None
    assert document.extracted.title == web_page.title == "Debian Python Policy 0.12.0.0 documentation"


# --------------------------------------------------------------------------- definition lists and tables


def line_of(text: str, needle: str) -> str:
    """The line (a paragraph of page text) holding `needle`: what a sentence of it shares, never crosses."""
    at = text.index(needle)
    return text[text.rfind("\n", 0, at) + 1:text.find("\n", at) if "\n" in text[at:] else len(text)]


DEFINITIONS = (  # (document, the answer's sentence, the term its paragraph must open with)
    ("m4-doc/Limits-control.html", "The default is 65537 entries.", "-H num, --hashsize=num: Make the internal"),
    ("m4-doc/Limits-control.html", "and to 1024 levels otherwise.", "-L num, --nesting-limit=num: Artificially"),
    ("git-doc/git-config.html", "The default value is 50.", "gc.autoPackLimit: When there are more"),
    ("git-doc/git-config.html", "Default is 1 MiB, which is sufficient", "http.postBuffer: Maximum size in bytes"),
    ("bash-doc/bashref.html", "The default is 60 seconds.", "MAILCHECK: How often (in seconds)"),
    ("git-doc/git-config.html", "Default is 96 MiB on all platforms.", "core.deltaBaseCacheLimit: Maximum number"),
)


@pytest.mark.parametrize(("path", "answer", "term"), DEFINITIONS, ids=[d[1][:24] for d in DEFINITIONS])
def test_a_definition_keeps_its_term_on_its_line(path: str, answer: str, term: str) -> None:
    """Texinfo (m4, Bash) and AsciiDoc (git) <dl>s: the term opens its definition's paragraph, whole (no
    permalink "¶", a space between two <dt>s), so the sentence stating a default lies beside its setting.
    The web's extraction does the same where its cap leaves the sentence in (Bash's is past it)."""
    corpus = docset(path.split("/")[0])
    web = extract_page((corpus.folder / path).read_bytes(), f"http://example.org/{path}", "text/html")
    assert web is not None
    for text in (read(corpus, path).extracted.text, *([web.text] if answer in web.text else [])):
        line = line_of(text, answer)
        assert line.startswith(term), line[:120]
        assert "¶" not in line


def test_a_definitions_default_shares_a_passage_with_its_term() -> None:
    """git-config's core.deltaBaseCacheLimit: its second paragraph, "Default is 96 MiB on all platforms.", opened
    a passage of its own, the term at the foot of the passage before; the answer then ranked 92nd of the page's
    passages for its question."""
    corpus = docset("git-doc")
    [case] = cases("git-delta-base-cache")
    page = read(corpus, "git-doc/git-config.html")
    [answer] = [p for p in page.passages if evaluate.matches(case.patterns, p.text)]
    assert "core.deltaBaseCacheLimit: Maximum number of bytes per thread" in answer.text


def test_inline_code_broken_over_source_lines_stays_in_its_sentence() -> None:
    """git-config's `git gc\n--auto` (a <code> wrapped in the HTML source) split a sentence in two."""
    corpus = docset("git-doc")
    [case] = cases("git-autopacklimit")
    text = read(corpus, "git-doc/git-config.html").extracted.text
    line = line_of(text, "The default value is 50.")
    sentences = [line[a:b] for a, b in split_sentences(line)]
    assert "When there are more than this many packs" in sentences[0] and "git gc --auto consolidates" in sentences[0]
    assert evaluate.matches(case.patterns, line)


REFTABLE_ROWS = (  # rows of git's reftable.html tables as the page text must carry them: each figure named
    "| repository: git | packed-refs: 78.7 K | reftable: 48.1 K | % original: 61.0% | avg ref: 50 bytes "
    "| avg obj: 4 bytes |",
    "| format: reftable | cache: hot | | by name: 20.2 usec | by SHA-1: 320.8 usec |",
    "| format: reftable | size: 5 M | avg entry: 37 bytes |",
)


def test_a_table_row_carries_its_columns_headers() -> None:
    corpus = docset("git-doc")
    path = "git-doc/reftable.html"
    page = extract_page((corpus.folder / path).read_bytes(), f"http://example.org/{path}", "text/html")
    assert page is not None
    for text in (read(corpus, path).extracted.text, page.text):
        lines = text.split("\n")
        for row in REFTABLE_ROWS:
            assert row in lines


# --------------------------------------------------------------------------- library search: passages, not documents


def indexed(corpus: Docset, package: str, tmp_path: Path) -> tuple[Path, Store]:
    """A library folder holding one package of the corpus, indexed by the library's own reader."""
    folder = tmp_path / "lib"
    shutil.copytree(corpus.folder / package, folder / package)
    store = Store(tmp_path / "briefd.db")
    asyncio.run(Library((folder,), store, read_text_in_thread).scan())
    return folder, store


def test_library_search_finds_a_manuals_explaining_passage_not_only_its_index_page(tmp_path: Path) -> None:
    """HISTSIZE: bashref.pdf's best passage is its index page (dot leaders and page numbers); the passage
    that states the default is the document's second or third. One passage a document never showed it."""
    corpus = docset("bash-doc")
    _, store = indexed(corpus, "bash-doc", tmp_path)
    try:
        [case] = cases("bash-histsize")
        hits = find(store, "HISTSIZE", 10, PASSAGES_PER_DOCUMENT)
        pdf = [h for h in hits if h.path.endswith("bashref.pdf")]
        assert 1 < len(pdf) <= PASSAGES_PER_DOCUMENT and len({h.page for h in pdf}) == len(pdf)
        assert any(evaluate.matches(case.patterns, h.text) for h in hits)
        assert [h.rank for h in hits] == sorted(h.rank for h in hits), "best first"
        documents = search(store, "HISTSIZE", 10)
        assert len(documents) == len({h.url for h in documents}) == 2, "a brief's search: a hit names a document"
    finally:
        store.close()


def test_cli_library_search_shows_up_to_limit_passages(tmp_path: Path) -> None:
    corpus = docset("bash-doc")
    folder = tmp_path / "lib"
    shutil.copytree(corpus.folder / "bash-doc", folder / "bash-doc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    env["BRIEFD_LIBRARY"] = str(folder)

    def briefd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([BRIEFD, "library", *args, "--db", str(tmp_path / "briefd.db")], cwd=tmp_path,
                              env=env, text=True, capture_output=True, timeout=300)

    assert briefd("reindex").returncode == 0
    for limit in (1, 5):
        shown = briefd("search", "HISTSIZE", "--limit", str(limit))
        assert shown.returncode == 0, shown.stderr
        entries = re.findall(r"^\d+\. .*\((.*?)(?:, p\. (\d+))?\)$", shown.stdout, re.MULTILINE)
        assert len(entries) == limit
    assert sum(path.endswith("bashref.pdf") for path, _ in entries) > 1, "more than one passage of a document"
    for bad in ("0", "x", "-3"):
        refused = briefd("search", "HISTSIZE", "--limit", bad)
        assert refused.returncode == 2 and "limit" in refused.stderr
