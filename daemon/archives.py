"""Offline archives (Kiwix ZIM files) as a source: search them, read their articles.

Why it looks like this:
- Each configured archive is opened once and kept: libzim's `Archive` builds caches on
  open (dirents, clusters), and opening a 100 GB Wikipedia again per query would pay for
  them again. One that cannot be opened (missing, damaged, not a ZIM file at all, two
  archives with the same file name) becomes a problem naming the file and the fix; the
  others still answer.
- An archive is named by its file name in URLs (`zim://<file name>/<entry path>`) and by
  its Title metadata in citations. A URL only ever *names* an archive: `read` looks the
  name up among the configured ones and never opens a path taken from a URL, so a search
  hit, a stored URL or a model's answer cannot point briefd at another file.
- Search is full-text (libzim's Xapian index) when the archive has the index, else by
  title (its title index), with a notice saying so: a title search misses articles that
  only mention the query, and the user should know why an archive answered thinly.
- libzim's reader is blocking C++: every call runs in a worker thread
  (`asyncio.to_thread`). python-libzim 3.13 keeps the GIL during reader calls, so this
  keeps the loop free between calls, not during one (each is milliseconds). libzim's
  `Archive` is thread-safe but its searchers are not (openzim/libzim#673), so each
  archive's searches take its own lock.
- `read` gives the entry's bytes and mimetype; extraction is the caller's, through the
  same path as web pages (daemon.pagework). Size and redirect limits are the fetch
  limits' (the caller passes settings.fetch_max_bytes / fetch_max_redirects), and
  non-text entries (images, fonts, scripts' binaries) are refused by mimetype.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import lxml.html

# libzim ships .pyi stubs but no py.typed marker, so mypy will not read them unless told to
# (`follow_untyped_imports` for libzim in pyproject's [tool.mypy.overrides]).
from libzim.reader import Archive, Entry
from libzim.search import Query, Searcher
from libzim.suggestion import SuggestionSearcher

from .extract import MAX_TITLE_CHARS, is_readable_type
from .fetch import MAX_URL_CHARS, too_large
from .search import MAX_HITS_PER_QUERY, SNIPPET_MAX_CHARS, SearchHit
from .settings import Settings
from .decide import content_words
from .sources import ARCHIVE_SCHEME, ARCHIVES, DocumentUnavailable, fuse, rrf
from .untrusted import clean

SCHEME = ARCHIVE_SCHEME
SOURCE = ARCHIVES
"""SearchHit.source for archive hits (the brief field `sources` names it)."""

ZIM_MAGIC = b"ZIM\x04"
"""The first four bytes of every ZIM file (magic number 72173914, little-endian)."""

MAX_QUERY_CHARS = 500
MAX_QUERY_TERMS = 8  # content words searched one by one besides the whole text (Archives._paths)
"""A query is cut here: Xapian parses every word, and no real question needs more."""

SNIPPET_CHARS = 400
"""A hit's snippet: a paragraph's worth, from the article's start (libzim gives paths, not snippets)."""

SNIPPET_SCAN_BYTES = 64 * 1024
"""Only the start of an article is parsed for its snippet: a 2 MB article costs no more than a small one."""

FIX_PATH = "fix the path in the `archives` setting, or remove it"
FIX_DAMAGED = ("download the archive again (a partly downloaded file looks like this), "
               "or check it with `zimcheck` from zim-tools")
FIX_NOT_ZIM = "point the `archives` setting at Kiwix .zim files only"
FIX_SAME_NAME = "rename one of them: archives are named by their file name in citations and URLs"


class ArchiveError(DocumentUnavailable):
    """An archive, a URL or an entry briefd will not read; the message says which and why."""


class BadArchiveUrl(ArchiveError):
    """A `zim://` URL that is malformed or names no configured archive."""


class EntryRefused(ArchiveError):
    """An entry that exists but is not read: too large, not text, too many redirects, missing."""


# ---------------------------------------------------------------------------- URLs


@dataclass(frozen=True)
class ArchiveRef:
    """What a `zim://` URL names: an archive (by file name) and an entry path inside it."""

    archive: str
    path: str


_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f]")


def archive_url(archive: str, path: str) -> str:
    """`zim://<file name>/<entry path>`, both percent-encoded (the path keeps its slashes)."""
    return f"{SCHEME}://{quote(archive, safe='')}/{quote(path, safe='/')}"


def is_archive_url(url: str) -> bool:
    """True for URLs in the archive scheme (whether or not they are valid: parse_url decides)."""
    return url[: len(SCHEME) + 3].lower() == f"{SCHEME}://"


def parse_url(url: str) -> ArchiveRef:
    """The archive name and entry path a `zim://` URL names; BadArchiveUrl when it is not one.

    Refused: another scheme, an empty or path-like archive name ("", ".", "..", anything
    with a slash or backslash), an entry path that is empty, absolute or has "." or ".."
    segments, raw spaces or controls, bad percent-escapes. An entry path is never a file
    path, but a URL that a normaliser would rewrite must not name two entries.
    """
    if not is_archive_url(url):
        raise BadArchiveUrl(f"not a {SCHEME}:// URL: {clean(url)[:200]!r}")
    if len(url) > MAX_URL_CHARS or _UNSAFE_IN_URL.search(url):
        raise BadArchiveUrl(f"malformed archive URL (too long, or raw spaces or controls): {clean(url)[:200]!r}")
    raw_name, slash, raw_path = url[len(SCHEME) + 3:].partition("/")
    try:
        name, path = unquote(raw_name, errors="strict"), unquote(raw_path, errors="strict")
    except UnicodeDecodeError as exc:
        raise BadArchiveUrl(f"malformed percent-escapes in archive URL {clean(url)[:200]!r}") from exc
    if not slash or not _plain_file_name(name):
        raise BadArchiveUrl(f"archive URL {clean(url)[:200]!r} must name an archive by its file name")
    if not path or path.startswith("/") or any(part in (".", "..") for part in path.split("/")):
        raise BadArchiveUrl(f"archive URL {clean(url)[:200]!r} names no plain entry path inside the archive")
    return ArchiveRef(archive=name, path=path)


def _plain_file_name(name: str) -> bool:
    return name not in ("", ".", "..") and not any(c in name for c in "/\\\x00")


def citation_title(article_title: str, archive_name: str) -> str:
    """What a source is called in a report: the article and the archive it came from."""
    return f"{article_title} ({archive_name})"[:MAX_TITLE_CHARS]


# ---------------------------------------------------------------------------- opening


@dataclass(frozen=True)
class ArchiveHealth:
    """One configured archive as `briefd check` shows it: its figures, or its problem and the fix."""

    file: Path
    name: str  # Title metadata (cleaned), else the file name
    ok: bool
    articles: int = 0
    entries: int = 0
    fulltext: bool = False
    problem: str | None = None
    fix: str | None = None

    def line(self) -> str:
        if not self.ok:
            return f"archive {self.file}: {self.problem}; {self.fix}"
        index = "full-text index" if self.fulltext else "no full-text index (searched by title only)"
        return f"archive {self.name} ({self.file}): {self.articles} articles, {self.entries} entries, {index}"


@dataclass
class _Opened:
    file: Path
    key: str  # the file name: what URLs name
    name: str  # for citations
    archive: Archive
    fulltext: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    searcher: Searcher | SuggestionSearcher | None = None

    def health(self) -> ArchiveHealth:
        return ArchiveHealth(file=self.file, name=self.name, ok=True, articles=self.archive.article_count,
                             entries=self.archive.entry_count, fulltext=self.fulltext)


def _problem(file: Path, problem: str, fix: str) -> ArchiveHealth:
    return ArchiveHealth(file=file, name=file.name, ok=False, problem=problem, fix=fix)


def _why_unopenable(file: Path, error: Exception) -> ArchiveHealth:
    """The problem with a file libzim refused, told from what the file is."""
    if not file.exists():
        return _problem(file, "no such file", FIX_PATH)
    if file.is_dir():
        return _problem(file, "is a folder, not a ZIM file", FIX_PATH)
    try:
        with file.open("rb") as handle:
            head = handle.read(len(ZIM_MAGIC))
    except OSError as exc:
        return _problem(file, f"cannot be read ({clean(exc.strerror or exc)})",
                        "let briefd's user read it (file permissions)")
    if head != ZIM_MAGIC:
        return _problem(file, "is not a ZIM file (it does not start with the ZIM signature)", FIX_NOT_ZIM)
    return _problem(file, f"is damaged or incomplete (libzim: {clean(error)[:300]})", FIX_DAMAGED)


def _archive_name(archive: Archive, file: Path) -> str:
    try:
        title = clean(archive.get_metadata("Title").decode("utf-8", errors="replace"))
    except (KeyError, RuntimeError):
        title = ""
    return " ".join(title.split())[:MAX_TITLE_CHARS] or file.name


def _open_one(file: Path) -> _Opened | ArchiveHealth:
    try:
        archive = Archive(file)
    except (RuntimeError, OSError) as exc:  # libzim raises RuntimeError for every file it refuses
        return _why_unopenable(file, exc)
    return _Opened(file=file, key=file.name, name=_archive_name(archive, file), archive=archive,
                   fulltext=archive.has_fulltext_index)


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class ArchiveEntry:
    """One article read from an archive: bytes to extract like a page body, and where they came from."""

    url: str  # the entry's own URL, after redirects (what a citation points at)
    body: bytes
    mimetype: str
    title: str  # the article's title (cleaned)
    archive: str  # the archive's name for citations

    @property
    def citation_title(self) -> str:
        return citation_title(self.title, self.archive)


# ---------------------------------------------------------------------------- snippets

_WORD = re.compile(r"\w{3,}")


def snippet(html: bytes, query: str) -> str:
    """A hit's snippet: the first paragraph that has a word of the query, else the first one.

    Parsed from the article's first SNIPPET_SCAN_BYTES only (lxml tolerates the cut).
    """
    text = html[:SNIPPET_SCAN_BYTES].decode("utf-8", errors="replace")
    try:
        tree = lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        return ""
    for hidden in list(tree.iter("script", "style", "noscript", "template")):
        hidden.drop_tree()  # text no reader sees
    paragraphs = [" ".join(p.text_content().split()) for p in tree.iter("p")]
    body = tree.find("body")
    paragraphs = [p for p in paragraphs if p] or [" ".join((tree if body is None else body).text_content().split())]
    words = {w.lower() for w in _WORD.findall(query)}
    chosen = next((p for p in paragraphs if words & {w.lower() for w in _WORD.findall(p)}), paragraphs[0])
    return clean(_cut(chosen, SNIPPET_CHARS))


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def _query_text(query: str) -> str:
    return " ".join(clean(query).split())[:MAX_QUERY_CHARS]


# ---------------------------------------------------------------------------- the source


class Archives:
    """The configured archives, opened once: search them, read their entries, say how they are."""

    def __init__(self, opened: list[_Opened], problems: list[ArchiveHealth]) -> None:
        self._opened = {o.key: o for o in opened}
        self._problems = problems
        self._notices: list[str] = []
        self._taken = 0  # notices already handed to a caller by take_notes
        for problem in problems:
            self._note(problem.line())
        for o in opened:
            if not o.fulltext:
                self._note(f"archive {o.name} ({o.key}) has no full-text index: searched by title only")

    @classmethod
    def open(cls, files: Iterable[Path]) -> Archives:
        """Open every file (blocking: a few ms each; call it in a thread from async code)."""
        opened: list[_Opened] = []
        problems: list[ArchiveHealth] = []
        for file in files:
            result = _open_one(Path(file))
            if isinstance(result, ArchiveHealth):
                problems.append(result)
            elif result.key in {o.key for o in opened}:
                problems.append(_problem(result.file, f"has the same file name as another archive ({result.key})",
                                         FIX_SAME_NAME))
            else:
                opened.append(result)
        return cls(opened, problems)

    @classmethod
    def from_settings(cls, settings: Settings) -> Archives:
        return cls.open(settings.archives)

    @property
    def names(self) -> list[str]:
        """The file names URLs use, of the archives that opened."""
        return list(self._opened)

    def take_notes(self) -> list[str]:
        """The notices not handed out before (sources.Searcher): each reaches the events once."""
        fresh = self._notices[self._taken:]
        self._taken = len(self._notices)
        return fresh

    def health(self) -> list[ArchiveHealth]:
        """For `briefd check`: every configured archive, in the order given (problems after)."""
        return [o.health() for o in self._opened.values()] + list(self._problems)

    def _note(self, text: str) -> None:
        if text not in self._notices:
            self._notices.append(text)

    # ------------------------------------------------------------------ search

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """Up to `limit` (at most MAX_HITS_PER_QUERY) hits from all archives, merged by rank fusion (each archive's first, then
        each one's second...). Any query text is safe: it is cleaned, cut, and handed to libzim's
        query parser, which treats what it cannot parse as words."""
        text, limit = _query_text(query), min(limit, MAX_HITS_PER_QUERY)
        if not text or limit <= 0 or not self._opened:
            return []
        ranked = await asyncio.gather(*(asyncio.to_thread(self._search_one, o, text, limit)
                                        for o in self._opened.values()))
        return fuse(ranked)[:limit]

    def _search_one(self, opened: _Opened, text: str, limit: int) -> list[SearchHit]:
        try:
            with opened.lock:
                paths = self._paths(opened, text, limit)
                return [hit for path in paths if (hit := self._hit(opened, path, text)) is not None]
        except RuntimeError as exc:  # a damaged index: this archive answers nothing, the others do
            self._note(f"archive {opened.name} ({opened.file}) failed a search (libzim: {clean(exc)[:300]}); "
                       f"{FIX_DAMAGED}")
            return []

    @staticmethod
    def _paths(opened: _Opened, text: str, limit: int) -> list[str]:
        """The best paths for free text: the whole text, and each of its first content words alone,
        merged by rank fusion (sources.rrf).

        libzim's query parser ANDs the words ("OR" is read as a word), so a question asked in
        plain language ("Why was the bridge closed in 2025?") finds only articles holding every
        word, often none: asking word by word and fusing is an OR that still puts the articles
        matching the most words, and the whole phrase, first. A search costs about a millisecond.
        """
        asks = [text, *content_words(text)[:MAX_QUERY_TERMS]]
        if opened.fulltext:
            if not isinstance(opened.searcher, Searcher):
                opened.searcher = Searcher(opened.archive)
            searcher = opened.searcher
            lists = [list(searcher.search(Query().set_query(ask)).getResults(0, limit)) for ask in asks]
        else:
            if not isinstance(opened.searcher, SuggestionSearcher):
                opened.searcher = SuggestionSearcher(opened.archive)
            suggester = opened.searcher
            lists = [list(suggester.suggest(ask).getResults(0, limit)) for ask in asks]
        return [path for path, _, _ in rrf(lists)][:limit]

    @staticmethod
    def _hit(opened: _Opened, path: str, query: str) -> SearchHit | None:
        try:
            entry = opened.archive.get_entry_by_path(path)
            item = entry.get_item()  # follows redirects (libzim bounds the chain)
            content = snippet(bytes(item.content[:SNIPPET_SCAN_BYTES]), query) if is_readable_type(item.mimetype) else ""
        except (KeyError, RuntimeError):
            return None  # an index pointing at a missing or unreadable entry: skip it
        title = clean(entry.title or path)[:MAX_TITLE_CHARS]
        return SearchHit(url=archive_url(opened.key, path), title=title, content=content[:SNIPPET_MAX_CHARS],
                         engine=f"{SCHEME}:{opened.name}", source=SOURCE)

    # ------------------------------------------------------------------ read

    async def read(self, url: str, *, max_bytes: int = Settings.fetch_max_bytes,
                   max_redirects: int = Settings.fetch_max_redirects) -> ArchiveEntry:
        """The entry a `zim://` URL names, after at most `max_redirects` redirect entries.

        Raises BadArchiveUrl (malformed, or an archive that is not configured) or EntryRefused
        (missing, larger than `max_bytes`, not text, too many redirects, unreadable)."""
        ref = parse_url(url)
        opened = self._opened.get(ref.archive)
        if opened is None:
            raise BadArchiveUrl(f"{clean(url)[:200]!r} names an archive that is not configured ({clean(ref.archive)!r}); "
                                f"configured: {', '.join(self._opened) or 'none'}")
        return await asyncio.to_thread(_read_entry, opened, ref.path, max_bytes, max_redirects)


def _read_entry(opened: _Opened, path: str, max_bytes: int, max_redirects: int) -> ArchiveEntry:
    where = f"{opened.name}: {clean(path)[:200]!r}"
    try:
        entry = _follow(opened.archive.get_entry_by_path(path), max_redirects, where)
        item = entry.get_item()
        if item.size > max_bytes:
            raise EntryRefused(f"{where}: {too_large(max_bytes)}")
        if not is_readable_type(item.mimetype):
            raise EntryRefused(f"{where}: not text ({clean(item.mimetype)[:100]}): nothing to read")
        body = bytes(item.content)
    except KeyError as exc:
        raise EntryRefused(f"{where}: no such entry in the archive") from exc
    except RuntimeError as exc:
        raise EntryRefused(f"{where}: unreadable (libzim: {clean(exc)[:300]}); {FIX_DAMAGED}") from exc
    return ArchiveEntry(url=archive_url(opened.key, entry.path), body=body, mimetype=item.mimetype,
                        title=clean(entry.title or entry.path)[:MAX_TITLE_CHARS], archive=opened.name)


def _follow(entry: Entry, max_redirects: int, where: str) -> Entry:
    for _ in range(max_redirects):
        if not entry.is_redirect:
            return entry
        entry = entry.get_redirect_entry()
    if entry.is_redirect:
        raise EntryRefused(f"{where}: more than {max_redirects} redirects")
    return entry
