"""Offline archives (Kiwix ZIM files) as libzim reads them, in the archive reader child: open, search, read.

This is the code that runs in the reader child (`python -m briefd.daemon.sources.archives`, whose
process pool, deadlines and memory limit are archives.py's), never in the daemon; what the parent
and the child share is here too: the `zim://` URLs, the errors, and the frames between them.

Why it looks like this:
- Each configured archive is opened once per child and kept: libzim's `Archive` builds caches
  on open (dirents, clusters), and opening a 100 GB Wikipedia again per query would pay for
  them again. One that cannot be opened (missing, damaged, not a ZIM file at all, two
  archives with the same file name) becomes a problem naming the file and the fix; the
  others still answer. Any exception libzim raises is that archive's problem: a damaged
  file can make it raise UnicodeDecodeError (its message quotes the file's bytes), not only
  RuntimeError.
- An archive is named by its file name in URLs (`zim://<file name>/<entry path>`) and by
  its Title metadata in citations. A URL only ever *names* an archive: `read` looks the
  name up among the configured ones and never opens a path taken from a URL, so a search
  hit, a stored URL or a model's answer cannot point briefd at another file.
- Search is full-text (libzim's Xapian index) when the archive has the index, else by
  title (its title index), with a notice saying so: a title search misses articles that
  only mention the query, and the user should know why an archive answered thinly.
- A snippet reads an article only when it is at most SNIPPET_MAX_ARTICLE_BYTES (its size is
  known without decompressing it): libzim materialises a whole blob to give any part of it,
  and a 119 KB archive can hold a 600 MB article of repeated text.
- `read` gives the entry's bytes and mimetype; extraction is the caller's, through the
  same path as web pages (daemon.pagework). Size and redirect limits are the fetch
  limits' (the caller passes settings.fetch_max_bytes / fetch_max_redirects), and
  non-text entries (images, fonts, scripts' binaries) are refused by mimetype.

Protocol with the child: frames of a 4-byte big-endian length and that many bytes. The
child sends a ready frame, then answers each JSON request frame with one JSON frame, and
a body frame after it when the answer says `"body": true` (an article's bytes).
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, unquote

import lxml.html

# libzim ships .pyi stubs but no py.typed marker, so mypy will not read them unless told to
# (`follow_untyped_imports` for libzim in pyproject's [tool.mypy.overrides]).
from libzim.reader import Archive, Entry, Item
from libzim.search import Query, Searcher
from libzim.suggestion import SuggestionSearcher

from .extract import MAX_TITLE_CHARS, is_readable_type
from .fetch import MAX_URL_CHARS, too_large
from .search import SNIPPET_MAX_CHARS, SearchHit
from ..rules.decide import content_words
from .pagework import CHILD_MEMORY_BYTES, limit_memory, peak_rss_mb
from .sources import ARCHIVE_SCHEME, ARCHIVES, DocumentUnavailable, rrf
from ..core.untrusted import clean

SCHEME = ARCHIVE_SCHEME
SOURCE = ARCHIVES
"""SearchHit.source for archive hits (the brief field `sources` names it)."""

ZIM_MAGIC = b"ZIM\x04"
"""The first four bytes of every ZIM file (magic number 72173914, little-endian)."""

MAX_QUERY_CHARS = 500
MAX_QUERY_TERMS = 8  # content words searched one by one besides the whole text (_paths)
"""A query is cut here: Xapian parses every word, and no real question needs more."""

SNIPPET_CHARS = 400
"""A hit's snippet: a paragraph's worth, from the article's start (libzim gives paths, not snippets)."""

SNIPPET_SCAN_BYTES = 64 * 1024
"""Only the start of an article is parsed for its snippet: a 2 MB article costs no more than a small one."""

SNIPPET_MAX_ARTICLE_BYTES = 4 << 20
"""The largest article a snippet is made from. libzim gives any slice of an article only by
materialising all of it (`item.content[:n]` of a 600 MB article took 640 MB and 0.7 s), so a
larger one gets no snippet; its size is read without decompressing it. Wikipedia's longest
articles are about 2 MB of HTML."""

SNIPPET_DEADLINE_S = 3.0
"""Time one archive's search may spend making its hits' snippets. A snippet costs milliseconds: its
article's cluster is read and unpacked (about 2 MB in Kiwix's archives). A hostile one costs seconds
each: a 124 KB archive holding one cluster of 2,000 MB of zeros before the articles a search finds
took 6 s a search, as libzim unpacked the cluster again for each hit. Past this the remaining hits
come with their title and URL only, and the brief's events say why."""

MAX_REQUEST_BYTES = 1 << 20
MAX_ANSWER_BYTES = 4 << 20
"""The largest request and JSON answer (a search's hits, bounded by MAX_HITS_PER_QUERY); an
article's body frame is bounded by the read's own `max_bytes`."""

FIX_PATH = "fix the path in the `archives` setting, or remove it"
FIX_DAMAGED = ("download the archive again (a partly downloaded file looks like this), "
               "or check it with `zimcheck` from zim-tools")
FIX_NOT_ZIM = "point the `archives` setting at Kiwix .zim files only"

_LENGTH = struct.Struct(">I")
READY = b"ready"
"""The child's first frame: its libraries are imported and it answers."""


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


# ---------------------------------------------------------------------------- opening (in the child)


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

    def as_dict(self) -> dict[str, Any]:
        """For the reader's answer (the parent knows the file it asked about)."""
        return {"name": self.name, "ok": self.ok, "articles": self.articles, "entries": self.entries,
                "fulltext": self.fulltext, "problem": self.problem, "fix": self.fix}


@dataclass
class _Opened:
    file: Path
    key: str  # the file name: what URLs name
    name: str  # for citations
    archive: Archive
    fulltext: bool
    articles: int
    entries: int
    searcher: Searcher | SuggestionSearcher | None = None

    def health(self) -> ArchiveHealth:
        return ArchiveHealth(file=self.file, name=self.name, ok=True, articles=self.articles,
                             entries=self.entries, fulltext=self.fulltext)


def archive_problem(file: Path, problem: str, fix: str) -> ArchiveHealth:
    return ArchiveHealth(file=file, name=file.name, ok=False, problem=problem, fix=fix)


def _why_unopenable(file: Path, error: Exception) -> ArchiveHealth:
    """The problem with a file libzim refused, told from what the file is."""
    if not file.exists():
        return archive_problem(file, "no such file", FIX_PATH)
    if file.is_dir():
        return archive_problem(file, "is a folder, not a ZIM file", FIX_PATH)
    try:
        with file.open("rb") as handle:
            head = handle.read(len(ZIM_MAGIC))
    except OSError as exc:
        return archive_problem(file, f"cannot be read ({clean(exc.strerror or exc)})",
                        "let briefd's user read it (file permissions)")
    if head != ZIM_MAGIC:
        return archive_problem(file, "is not a ZIM file (it does not start with the ZIM signature)", FIX_NOT_ZIM)
    return archive_problem(file, f"is damaged or incomplete ({_libzim_said(error)})", FIX_DAMAGED)


def _libzim_said(error: BaseException) -> str:
    return f"libzim: {type(error).__name__}: {clean(error)[:300]}"


def _archive_name(archive: Archive, file: Path) -> str:
    try:
        title = clean(archive.get_metadata("Title").decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - no Title, or a damaged one: the file name serves
        title = ""
    return " ".join(title.split())[:MAX_TITLE_CHARS] or file.name


def _open_one(file: Path) -> _Opened | ArchiveHealth:
    """Open an archive and read what `briefd check` shows; any exception is this file's problem.

    libzim raises RuntimeError for most files it refuses, and UnicodeDecodeError when its
    message quotes bytes of the damaged file (one of 60 randomly damaged copies did)."""
    try:
        archive = Archive(file)
        return _Opened(file=file, key=file.name, name=_archive_name(archive, file), archive=archive,
                       fulltext=archive.has_fulltext_index, articles=archive.article_count,
                       entries=archive.entry_count)
    except MemoryError:
        raise  # the reader's memory limit (serve_child answers it), not a sign of damage
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return _why_unopenable(file, exc)


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


def _read_entry(opened: _Opened, path: str, max_bytes: int, max_redirects: int) -> ArchiveEntry:
    where = f"{opened.name}: {clean(path)[:200]!r}"
    try:
        entry = _follow(opened.archive.get_entry_by_path(path), max_redirects, where)
        item = entry.get_item()
        if item.size > max_bytes:  # the size is read without decompressing the article
            raise EntryRefused(f"{where}: {too_large(max_bytes)}")
        if not is_readable_type(item.mimetype):
            raise EntryRefused(f"{where}: not text ({clean(item.mimetype)[:100]}): nothing to read")
        body = bytes(item.content)
        found = ArchiveEntry(url=archive_url(opened.key, entry.path), body=body, mimetype=item.mimetype,
                             title=clean(entry.title or entry.path)[:MAX_TITLE_CHARS], archive=opened.name)
    except (ArchiveError, MemoryError):
        raise  # MemoryError: the reader's memory limit, answered by serve_child
    except KeyError as exc:
        raise EntryRefused(f"{where}: no such entry in the archive") from exc
    except Exception as exc:  # noqa: BLE001 - any libzim failure on a damaged entry (RuntimeError, UnicodeDecodeError)
        raise EntryRefused(f"{where}: unreadable ({_libzim_said(exc)}); {FIX_DAMAGED}") from exc
    return found


def _follow(entry: Entry, max_redirects: int, where: str) -> Entry:
    for _ in range(max_redirects):
        if not entry.is_redirect:
            return entry
        entry = entry.get_redirect_entry()
    if entry.is_redirect:
        raise EntryRefused(f"{where}: more than {max_redirects} redirects")
    return entry


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


def item_snippet(item: Item, query: str) -> str:
    """An article's snippet, or "" when it is not text or larger than SNIPPET_MAX_ARTICLE_BYTES:
    `item.size` costs nothing, `item.content` decompresses the whole article."""
    if item.size > SNIPPET_MAX_ARTICLE_BYTES or not is_readable_type(item.mimetype):
        return ""
    return snippet(bytes(item.content[:SNIPPET_SCAN_BYTES]), query)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def query_text(query: str) -> str:
    return " ".join(clean(query).split())[:MAX_QUERY_CHARS]


# ---------------------------------------------------------------------------- searching (in the child)


@dataclass(frozen=True)
class _Found:
    """One archive's hits for a search, and how many of them came without a snippet for lack of time."""

    hits: list[SearchHit]
    unsnipped: int = 0


def _search_one(opened: _Opened, text: str, limit: int, snippet_deadline_s: float = SNIPPET_DEADLINE_S) -> _Found:
    """The hits for `text`, each with its snippet until `snippet_deadline_s` is spent; later hits have
    their title and URL only (SNIPPET_DEADLINE_S says why)."""
    paths = _paths(opened, text, limit)
    until = time.monotonic() + snippet_deadline_s
    hits: list[SearchHit] = []
    unsnipped = 0
    for path in paths:
        in_time = time.monotonic() < until
        unsnipped += not in_time
        if (hit := _hit(opened, path, text, snippets=in_time)) is not None:
            hits.append(hit)
    return _Found(hits, unsnipped)


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


def _hit(opened: _Opened, path: str, query: str, snippets: bool = True) -> SearchHit | None:
    try:
        entry = opened.archive.get_entry_by_path(path)
        content = item_snippet(entry.get_item(), query) if snippets else ""  # follows redirects (bounded by libzim)
        title = clean(entry.title or path)[:MAX_TITLE_CHARS]
    except MemoryError:
        raise  # a cluster that unpacks past the reader's memory limit: the archive's answer, not this hit's
    except Exception:  # noqa: BLE001 - an index pointing at a missing or damaged entry: skip it
        return None
    return SearchHit(url=archive_url(opened.key, path), title=title, content=content[:SNIPPET_MAX_CHARS],
                     engine=f"{SCHEME}:{opened.name}", source=SOURCE)


# ---------------------------------------------------------------------------- the child (and the frames)


def send_frames(stream: IO[bytes], *frames: bytes) -> None:
    """Write each frame (its length, then its bytes) and flush: the parent's requests, the child's answers."""
    stream.write(b"".join(_LENGTH.pack(len(frame)) + frame for frame in frames))
    stream.flush()


def receive_frame(stream: IO[bytes], limit: int) -> bytes | None:
    """One frame, or None at the end of the stream or for a frame over `limit` bytes."""
    head = stream.read(_LENGTH.size)
    if len(head) != _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > limit:
        return None
    data = stream.read(length)
    return data if len(data) == length else None


def _answer(shelf: dict[str, _Opened], request: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """One request's answer (and body), in the child. Exceptions from libzim are answered, not raised."""
    file = Path(request["file"])
    if request["op"] == "open":
        opened = _open_one(file)
        if isinstance(opened, ArchiveHealth):
            return {"health": opened.as_dict()}, None
        shelf[str(file)] = opened
        return {"health": opened.health().as_dict()}, None
    found = shelf.get(str(file))
    if found is None:
        return {"error": "not opened in this reader"}, None
    if request["op"] == "search":
        try:
            hits = _search_one(found, request["text"], request["limit"],
                               request.get("snippet_deadline_s", SNIPPET_DEADLINE_S))
        except MemoryError:
            raise  # serve_child answers it
        except Exception as exc:  # noqa: BLE001 - a damaged index: this archive answers nothing, the others do
            return {"error": _libzim_said(exc)}, None
        return {"hits": [h.as_dict() for h in hits.hits], "unsnipped": hits.unsnipped}, None
    try:
        entry = _read_entry(found, request["path"], request["max_bytes"], request["max_redirects"])
    except ArchiveError as exc:
        return {"refused": str(exc)}, None
    return {"body": True, "url": entry.url, "mimetype": entry.mimetype, "title": entry.title,
            "archive": entry.archive}, entry.body


def serve_child(memory_bytes: int = CHILD_MEMORY_BYTES) -> None:
    """The reader child's loop: answer requests from stdin until it closes.

    The child runs under the page readers' address-space limit (pagework.limit_memory): libzim
    unpacks a whole cluster up to the article asked for, and a 124 KB archive made one search
    allocate 2 GB. Past the limit libzim's allocation fails (std::bad_alloc, a MemoryError here),
    which is answered `{"out_of_memory": true}`: the archive's doing, said as that, never the
    machine's memory. Anything a library prints goes to stderr: fd 1 is pointed there, and the
    frames go to a private copy of the original stdout."""
    limit_memory(memory_bytes)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    source = sys.stdin.buffer
    shelf: dict[str, _Opened] = {}
    send_frames(out, READY)
    while (frame := receive_frame(source, MAX_REQUEST_BYTES)) is not None:
        try:
            answer, body = _answer(shelf, json.loads(frame))
        except MemoryError:
            answer, body = {"out_of_memory": True}, None
        answer["peak_rss_mb"] = peak_rss_mb()
        send_frames(out, json.dumps(answer).encode(), *(() if body is None else (body,)))
