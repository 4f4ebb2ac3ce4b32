"""Real Kiwix ZIM archives for the lab and the tests, made with libzim's own writer.

Why the real writer: an archive briefd reads in the field was made by the same C++
library (Kiwix's scrapers use it), with a real Xapian full-text index, a real title
index and real redirect entries. A mock would agree with whatever briefd expects.

`build_zim(path, articles)` writes any list of articles (with or without the full-text
index, plus redirects and non-HTML items for the hostile cases); `build_corpus_zim(path)`
writes the lab corpus's readable pages (tests/lab/corpus.py), so a brief can find the
same facts offline that the lab web serves.

The writer prints progress lines to the process's stdout from C++ (not through
sys.stdout, and whatever `config_verbose` says): `quiet=True` points file descriptor 1 at
/dev/null for the build.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from libzim.writer import Creator, Hint, Item, StringProvider  # type: ignore[attr-defined]

from tests.lab.corpus import ARTICLE_KINDS, PAGES, Page
from tests.lab.web import render_article

LANGUAGE = "eng"
CORPUS_TITLE = "Lab Encyclopedia"
"""The corpus archive's Title metadata: what citations name it by."""


@dataclass(frozen=True)
class Article:
    """One item of an archive: HTML articles by default; any mimetype for hostile cases."""

    path: str
    title: str
    content: str | bytes
    mimetype: str = "text/html"

    @property
    def is_front(self) -> bool:
        """Only front articles are full-text indexed and counted as articles (as Kiwix does)."""
        return self.mimetype.startswith("text/html")


@dataclass(frozen=True)
class Redirect:
    path: str
    title: str
    target: str


class _Item(Item):  # type: ignore[misc]
    def __init__(self, article: Article) -> None:
        super().__init__()
        self.article = article

    def get_path(self) -> str:
        return self.article.path

    def get_title(self) -> str:
        return self.article.title

    def get_mimetype(self) -> str:
        return self.article.mimetype

    def get_contentprovider(self) -> StringProvider:
        return StringProvider(self.article.content)

    def get_hints(self) -> dict[Hint, int]:
        return {Hint.FRONT_ARTICLE: self.article.is_front}


@contextlib.contextmanager
def _stdout_silenced(quiet: bool) -> Iterator[None]:
    if not quiet:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def build_zim(
    path: Path,
    articles: Iterable[Article],
    *,
    fulltext: bool = True,
    title: str | None = "Lab archive",
    redirects: Iterable[Redirect] = (),
    main_path: str | None = None,
    quiet: bool = True,
) -> Path:
    """Write a ZIM archive at `path` (replaced if there) and return the path.

    `fulltext=False` makes an archive with only the title index (as some Kiwix
    "nopic"/"mini" archives and old scrapers ship); `title=None` leaves out the Title
    metadata, so readers fall back to the file name.
    """
    articles = list(articles)
    path.unlink(missing_ok=True)
    with _stdout_silenced(quiet), Creator(path).config_indexing(fulltext, LANGUAGE) as creator:
        creator.set_mainpath(main_path or articles[0].path)
        if title is not None:
            creator.add_metadata("Title", title)
        creator.add_metadata("Language", LANGUAGE)
        for article in articles:
            creator.add_item(_Item(article))
        for redirect in redirects:
            creator.add_redirection(redirect.path, redirect.title, redirect.target, {Hint.FRONT_ARTICLE: True})
    return path


def corpus_pages() -> list[Page]:
    """The corpus pages an encyclopedia would hold: the readable articles, not the hostile ones."""
    return [page for page in PAGES if page.kind in ARTICLE_KINDS]


def corpus_articles() -> list[Article]:
    """Each readable corpus page as an article at its slug, in the HTML the lab web serves."""
    return [Article(path=page.slug, title=page.title, content=render_article(page)) for page in corpus_pages()]


def corpus_redirects() -> list[Redirect]:
    """The lab web's moved pages (/go/<slug>) become redirect entries, as renamed wiki articles do."""
    return [Redirect(path=f"go/{page.slug}", title=f"{page.title} (moved)", target=page.slug)
            for page in corpus_pages() if page.kind == "moved"]


def build_corpus_zim(path: Path, *, fulltext: bool = True, title: str = CORPUS_TITLE) -> Path:
    """An archive of the lab corpus's readable pages (with its moved pages as redirects)."""
    return build_zim(path, corpus_articles(), fulltext=fulltext, title=title, redirects=corpus_redirects())
