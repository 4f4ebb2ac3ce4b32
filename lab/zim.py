"""Real Kiwix ZIM archives for the lab and the tests, made with libzim's own writer.

Why the real writer: an archive briefd reads in the field was made by the same C++
library (Kiwix's scrapers use it), with a real Xapian full-text index, a real title
index and real redirect entries. A mock would agree with whatever briefd expects.

`build_zim(path, articles)` writes any list of articles (with or without the full-text
index, plus redirects and non-HTML items for the hostile cases); `build_corpus_zim(path)`
writes the lab corpus's readable pages (lab/corpus.py), so a brief can find the
same facts offline that the lab web serves.

The hostile archives of issue 19: `damaged_copies` (bytes overwritten at seeded offsets past
the header, truncations), `build_huge_zim` (a tiny archive holding one article of hundreds of
MB, streamed to the writer); issue 29's `build_bomb_zim` (small articles behind a cluster of zeros). `python -m lab.zim probe|cost ...` runs briefd's own
Archives on them in a process of its own, so a crash or a hang there is a finding the test
sees, not one that takes the test down (tests/sources/test_archive_fuzz.py).

The writer prints progress lines to the process's stdout from C++ (not through
sys.stdout, and whatever `config_verbose` says): `quiet=True` points file descriptor 1 at
/dev/null for the build.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import struct
import sys
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from libzim.writer import Blob, ContentProvider, Creator, Hint, Item, StringProvider  # type: ignore[attr-defined]

from briefd.daemon.sources.archives import Archives
from briefd.daemon.sources.zim import ArchiveError, archive_url

from lab.corpus import ARTICLE_KINDS, PAGES, Page
from lab.web import render_article

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
        self.provider: type[ContentProvider] | None = None  # streamed content instead of article.content

    def get_path(self) -> str:
        return self.article.path

    def get_title(self) -> str:
        return self.article.title

    def get_mimetype(self) -> str:
        return self.article.mimetype

    def get_contentprovider(self) -> ContentProvider:
        return StringProvider(self.article.content) if self.provider is None else self.provider()

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


# ---------------------------------------------------------------------------- hostile archives

ZIM_HEADER_BYTES = 80
"""A ZIM file's fixed header: damage past it, as a partial download or a bad disk sector does."""


def damaged_copies(source: Path, folder: Path, *, seed: int, overwrites: int = 0, scattered: int = 0,
                   truncations: int = 0, span: int = 50) -> list[Path]:
    """Damaged copies of `source` in `folder`, the same for the same seed.

    `overwrites`: `span` random bytes at one random offset past the header (issue 19's probe);
    `scattered`: one to eight runs of 1-16 random bytes; `truncations`: cut at a random length."""
    data = source.read_bytes()
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    for kind, count in (("over", overwrites), ("scattered", scattered), ("cut", truncations)):
        for n in range(count):
            copy = bytearray(data)
            if kind == "cut":
                copy = copy[:rng.randrange(ZIM_HEADER_BYTES, len(copy))]
            if kind == "scattered":
                runs = [rng.randint(1, 16) for _ in range(rng.randint(1, 8))]
            else:
                runs = [span] if kind == "over" else []
            for width in runs:
                at = rng.randrange(ZIM_HEADER_BYTES, len(copy) - width)
                copy[at:at + width] = rng.randbytes(width)
            path = folder / f"{kind}-{seed}-{n}.zim"
            path.write_bytes(bytes(copy))
            made.append(path)
    return made


def unsorted_dirents(source: Path, dest: Path) -> Path:
    """A copy of `source` whose first entry's path is overwritten with 0xFF bytes: its dirent table is
    out of order, and libzim refuses it with a message quoting those bytes, which python-libzim
    raises as UnicodeDecodeError instead of RuntimeError (the case one of issue 19's 60 random
    copies hit)."""
    data = bytearray(source.read_bytes())
    entries, = struct.unpack_from("<I", data, 24)
    url_pointers, = struct.unpack_from("<Q", data, 32)
    assert entries >= 2, "two entries at least: the first must sort after the second"
    dirent, = struct.unpack_from("<Q", data, url_pointers)
    mimetype, = struct.unpack_from("<H", data, dirent)
    start = dirent + (12 if mimetype == 0xFFFF else 16)  # a redirect's dirent is 4 bytes shorter
    end = data.index(0, start)
    data[start:end] = b"\xff" * (end - start)
    dest.write_bytes(bytes(data))
    return dest


_LINE = ("<p>" + "the quick brown otter crossed the kestrel bridge again " * 18 + "</p>\n").encode()


class _Repeated(ContentProvider):
    """An article of `size` bytes of one repeated paragraph, fed to the writer a block at a time:
    the test's process never holds it (StringProvider would need all of it in memory)."""

    size = 0
    _HEAD = b"<html><head><title>Huge</title></head><body>"

    def __init__(self) -> None:
        super().__init__()
        self.lines = max(0, self.size - len(self._HEAD)) // len(_LINE)

    def get_size(self) -> int:
        return len(self._HEAD) + self.lines * len(_LINE)

    def gen_blob(self) -> Generator[Blob, None, None]:
        yield Blob(self._HEAD)
        left = self.lines
        while left:
            step = min(left, 1000)
            yield Blob(_LINE * step)
            left -= step


def build_huge_zim(path: Path, article_bytes: int) -> Path:
    """A title-indexed archive of a small article ("small") and one of `article_bytes` ("huge"),
    both titled with "otter". Repeated text compresses to almost nothing: 300 MB make a file of
    about 100 KB in about a second (the writer's own memory grows by the article's size)."""
    provider = type("_Sized", (_Repeated,), {"size": article_bytes})
    articles = [Article("small", "Otter (small)", "<html><body><p>A small otter article.</p></body></html>"),
                Article("huge", "Otter (huge)", "")]
    path.unlink(missing_ok=True)
    with _stdout_silenced(True), Creator(path).config_indexing(False, LANGUAGE) as creator:
        creator.set_mainpath("small")
        creator.add_metadata("Title", "Huge")
        for article in articles:
            item = _Item(article)
            item.provider = provider if article.path == "huge" else None
            creator.add_item(item)
    return path


class _Zeros(ContentProvider):
    """`size` zero bytes, fed to the writer a megabyte at a time."""

    size = 0

    def get_size(self) -> int:
        return self.size

    def gen_blob(self) -> Generator[Blob, None, None]:
        block = bytes(1 << 20)
        left = self.size
        while left:
            step = min(left, len(block))
            yield Blob(block[:step])
            left -= step


class _Attachment(_Item):
    """An item the writer compresses whatever its mimetype (libzim stores application/* uncompressed)."""

    def get_hints(self) -> dict[Hint, int]:
        return {Hint.FRONT_ARTICLE: False, Hint.COMPRESS: True}


BOMB_ARTICLES = 5
"""The small articles after a bomb's attachment: "Otter 0" to "Otter 4", each "Otters swim n."."""


def build_bomb_zim(path: Path, attachment_bytes: int) -> Path:
    """Issue 29 #4's archive: one compressed cluster holding an unindexed attachment of
    `attachment_bytes` zeros, then BOMB_ARTICLES small articles that a search for "otters" finds, with a
    full-text index. Each article's size is small, but libzim unpacks the cluster up to it: 2,000 MB of
    zeros made a 124 KB file whose every search allocated 2 GB. The cluster size is set past the
    attachment so that the articles share its cluster (Kiwix's scrapers use about 2 MB)."""
    provider = type("_Sized", (_Zeros,), {"size": attachment_bytes})
    path.unlink(missing_ok=True)
    cluster_bytes = min(attachment_bytes + (1 << 20), (1 << 31) - 1)  # libzim takes an int
    with (_stdout_silenced(True),
          Creator(path).config_indexing(True, LANGUAGE).config_clustersize(cluster_bytes) as creator):
        creator.set_mainpath("a0")
        creator.add_metadata("Title", "Bomb")
        attachment = _Attachment(Article("attachment.bin", "Attachment", "", mimetype="application/octet-stream"))
        attachment.provider = provider
        creator.add_item(attachment)
        for n in range(BOMB_ARTICLES):
            creator.add_item(_Item(Article(f"a{n}", f"Otter {n}",
                                           f"<html><body><p>Otters swim {n}.</p></body></html>")))
    return path


# ---------------------------------------------------------------------------- probes (run as subprocesses)

PROBE_QUERIES = ("otter river", "Kestrel bridge closed", "article", "\u202e\x00 ((", "zzzz")
PROBE_PATHS = ("a0", "a1", "a5", "r0", "missing", "A/a0")


def probe(files: list[Path], deadline_s: float) -> dict[str, Any]:
    """Open, search and read `files` as the daemon does; every exception that is not an
    ArchiveError is recorded as unexpected (the daemon would have lost the search or the start)."""
    unexpected: list[str] = []
    shelf = Archives.open(files, deadline_s=deadline_s)
    with shelf:
        searches: list[list[str]] = []
        for query in PROBE_QUERIES:
            try:
                searches.append([hit.url for hit in asyncio.run(shelf.search(query, 50))])
            except Exception as exc:  # noqa: BLE001 - the finding this probe looks for
                unexpected.append(f"search {query!r}: {type(exc).__name__}: {exc}")
        urls = sorted({url for urls in searches for url in urls}
                      | {archive_url(name, path) for name in shelf.names for path in PROBE_PATHS})
        reads = refused = 0
        for url in urls:
            try:
                asyncio.run(shelf.read(url))
                reads += 1
            except ArchiveError:
                refused += 1
            except Exception as exc:  # noqa: BLE001 - the finding this probe looks for
                unexpected.append(f"read {url}: {type(exc).__name__}: {exc}")
        return {"names": shelf.names, "searches": searches, "reads": reads, "refused": refused,
                "health": [{"file": str(h.file), "ok": h.ok, "problem": h.problem, "fix": h.fix, "line": h.line()}
                           for h in shelf.health()],
                "notes": shelf.take_notes(), "unexpected": unexpected}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


async def _search_watched(shelf: Archives, query: str) -> tuple[list[dict[str, Any]], float]:
    """The hits, and the longest the event loop went without running a 10 ms ticker meanwhile."""
    longest = 0.0
    searching = asyncio.ensure_future(shelf.search(query, 10))
    last = time.monotonic()
    while not searching.done():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    return [hit.as_dict() for hit in await searching], longest


def search_cost(zim: Path, query: str) -> dict[str, Any]:
    """What one search costs the process running briefd, and the archive reader: peak RSS growth, and
    the event loop's longest stall. Measured after a first search warmed both (imports, caches)."""
    with Archives.open([zim]) as shelf:
        asyncio.run(shelf.search("small", 1))
        before, child_before = _peak_rss_mb(), shelf.reader_peak_rss_mb
        hits, stall = asyncio.run(_search_watched(shelf, query))
        return {"hits": hits, "rss_growth_mb": _peak_rss_mb() - before,
                "reader_rss_growth_mb": shelf.reader_peak_rss_mb - child_before, "longest_stall_s": stall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.zim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    probing = commands.add_parser("probe", help="open, search and read archives; print what happened as JSON")
    probing.add_argument("--deadline", type=float, default=10.0, help="the archive reader's deadline (s)")
    probing.add_argument("files", nargs="+", type=Path)
    huge = commands.add_parser("huge", help="build an archive holding one huge article")
    huge.add_argument("file", type=Path)
    huge.add_argument("megabytes", type=int)
    bomb = commands.add_parser("bomb", help="build an archive whose one cluster unpacks to MEGABYTES of zeros")
    bomb.add_argument("file", type=Path)
    bomb.add_argument("megabytes", type=int)
    cost = commands.add_parser("cost", help="measure one search's memory and event-loop stall as JSON")
    cost.add_argument("file", type=Path)
    cost.add_argument("query")
    args = parser.parse_args(argv)
    if args.command == "probe":
        print(json.dumps(probe(args.files, args.deadline)))
    elif args.command == "huge":
        build_huge_zim(args.file, args.megabytes << 20)
    elif args.command == "bomb":
        build_bomb_zim(args.file, args.megabytes << 20)
    else:
        print(json.dumps(search_cost(args.file, args.query)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
