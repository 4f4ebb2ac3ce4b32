"""The lab's web server: corpus pages as real HTML, and the hostile ones.

briefd must fetch pages over real HTTP and extract them with trafilatura, so
each article is served as a whole HTML document with the boilerplate a real
site has (navigation, cookie banner, related links, footer): the extractor has
to find the article inside it.

Hostile pages misbehave the way the web does (see corpus.HOSTILE_KINDS). The
server is threaded with daemon threads, so a client stuck on the slow or the
endless page never holds up anyone else, and a client that hangs up ends its
handler at the next write.

Routes:
  /                          index of every page (for people)
  /healthz                   "ok"
  /pages/<slug>.html         the page, with its kind's behaviour
  /pages/<slug>.pdf          a page of kind "pdf": its article as a real PDF, a paragraph a page
  /go/<slug>                 301 to /pages/<slug>.html  (kind "moved")
  /loop/<slug>/a, /b         302 to each other forever  (kind "redirect_loop")
  /docs/<path>               a file of a real-document corpus (--docs DIR; lab/docset.py), as is
  /hostile/<name>            hostile answers outside the corpus: compression bombs (BOMBS),
                             pathological text (PATHOLOGICAL), /hostile/engine (a SearXNG
                             json_engine offering them all) and /hostile/searxng/search, a
                             SearXNG that floods

Articles (the kinds served whole: article, moved, injection, latin1, pdf) carry an ETag (of
the body) and a Last-Modified (the page's publication date, or when its override was written),
and answer a conditional request (If-None-Match, else If-Modified-Since) for an unchanged body
with 304 and no body, as a real site's cache-friendly server does; the access log shows it.

A test changes an article while the server runs by writing an override (`write_override`) into
the overrides folder: the server's `overrides` (serve_in_thread, make_server), or --overrides,
or the folder named by $LAB_WEB_OVERRIDES (so a lab started as a subprocess gets it from the
environment). It is read at each request: the next fetch sees the new text, a new ETag and a
later Last-Modified.

Run: python -m lab.web --port N [--host 127.0.0.1] [--overrides DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import functools
import gzip
import hashlib
import html
import json
import os
import random
import struct
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from datetime import datetime, timezone
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from lab.corpus import PAGES, PAGES_BY_SLUG, PDF_KIND, TOPICS, Page, pages_for
from lab.documents import pdf_bytes
from lab.servers import serve_until_interrupted

HUGE_BYTES = 30 * 1024 * 1024
SLOW_SECONDS = 60.0
SLOW_STEPS = 120
LYING_LENGTH = 100
BINARY_BYTES = 256 * 1024
STREAM_CHUNK_DELAY = 0.005
SEED = 20251122
OVERRIDES_ENV = "LAB_WEB_OVERRIDES"
DOC_TYPES = {".html": "text/html; charset=utf-8", ".pdf": "application/pdf", ".txt": "text/plain; charset=utf-8"}
"""What /docs/ serves of a real-document corpus (lab/docset.py), by suffix."""
VALIDATED_KINDS = frozenset({"article", "moved", "injection", "latin1", PDF_KIND})
"""The kinds served whole in one answer: these carry validators and answer conditional requests."""


def write_override(folder: Path, slug: str, paragraphs: Sequence[str], delay_s: float = 0.0) -> Path:
    """Replace an article's paragraphs while the server runs (atomically: a request sees the old
    text or the new, never half a file); `delay_s`: its new copy is sent that late (a 304 is
    not delayed), as a changed page is slower than an unchanged one to come and be read.
    Returns the override's path; delete it to restore."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slug}.json"
    tmp = folder / f".{slug}.json.tmp"
    tmp.write_text(json.dumps({"paragraphs": list(paragraphs), "delay_s": delay_s}), encoding="utf-8")
    tmp.replace(path)
    return path


def overridden(page: Page, folder: Path | None) -> tuple[Page, datetime, float]:
    """The page as served now, when it last changed, and how late its body is sent: its override
    (read at each request) if there is one, else the corpus page as published."""
    published = datetime.fromisoformat(page.published).replace(tzinfo=timezone.utc)
    path = folder / f"{page.slug}.json" if folder is not None else None
    try:
        if path is not None:
            data = json.loads(path.read_text(encoding="utf-8"))
            changed = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
            return (dataclasses.replace(page, paragraphs=tuple(data["paragraphs"])), max(changed, published),
                    float(data.get("delay_s", 0.0)))
    except FileNotFoundError:
        pass
    return page, published, 0.0


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:24] + '"'


def not_modified(headers: Message, etag: str, changed: datetime) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present (a weak comparison, or *); else
    If-Modified-Since, true when the page has not changed since that second."""
    match = headers.get("If-None-Match")
    if match is not None:
        tags = [t.strip().removeprefix("W/") for t in match.split(",")]
        return "*" in tags or etag in tags
    since = headers.get("If-Modified-Since")
    if since is None:
        return False
    try:
        when = email.utils.parsedate_to_datetime(since)
    except (TypeError, ValueError, IndexError):
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return changed.replace(microsecond=0) <= when


def render_article(page: Page) -> str:
    """A whole HTML document for a page, article wrapped in site boilerplate."""
    esc = html.escape
    body: list[str] = []
    for paragraph in page.paragraphs:
        if paragraph.startswith("## "):
            body.append(f"<h2>{esc(paragraph[3:])}</h2>")
        else:
            body.append(f"<p>{esc(paragraph)}</p>")
    related = [
        f'<li><a href="{esc(other.path)}">{esc(other.title)}</a></li>'
        for other in pages_for(page.topic)
        if other.slug != page.slug
    ][:5]
    byline = f"By {esc(page.author)} | " if page.author else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{esc(page.title)} | {esc(page.source)}</title>
<meta name="description" content="{esc(page.snippet)}">
<meta name="author" content="{esc(page.author)}">
<meta property="article:published_time" content="{esc(page.published)}">
<link rel="canonical" href="{esc(page.final_path)}">
<style>body{{font-family:sans-serif;max-width:46rem;margin:auto}} nav a{{margin-right:1em}}</style>
</head>
<body>
<div class="cookie-banner">We use cookies to improve your experience. By continuing to browse
you agree to our use of cookies. <a href="/privacy">Learn more</a> <button>Accept</button></div>
<header class="site-header">
<a class="logo" href="/">{esc(page.source)}</a>
<nav><a href="/">Home</a><a href="/news">News</a><a href="/topics">Topics</a>
<a href="/about">About us</a><a href="/contact">Contact</a><a href="/subscribe">Subscribe</a></nav>
</header>
<div class="breadcrumbs"><a href="/">Home</a> &rsaquo; <a href="/news">News</a> &rsaquo; {esc(page.title)}</div>
<main>
<article>
<h1>{esc(page.title)}</h1>
<p class="byline">{byline}<time datetime="{esc(page.published)}">{esc(page.published)}</time></p>
{chr(10).join(body)}
</article>
<aside class="related"><h3>Related articles</h3><ul>
{chr(10).join(related)}
</ul></aside>
<div class="newsletter"><h3>Get the morning briefing</h3>
<p>Sign up for our free newsletter and never miss a story.</p>
<form><input type="email" placeholder="you@example.com"><button>Sign up</button></form></div>
</main>
<footer class="site-footer">
<p>&copy; 2025 {esc(page.source)}. All rights reserved.</p>
<p><a href="/privacy">Privacy policy</a> &middot; <a href="/terms">Terms of use</a> &middot;
<a href="/accessibility">Accessibility</a> &middot; <a href="/advertise">Advertise with us</a></p>
</footer>
</body>
</html>
"""


def render_index() -> str:
    items = "\n".join(
        f'<li><a href="{html.escape(p.path)}">{html.escape(p.title)}</a> '
        f"({html.escape(p.topic)}, {html.escape(p.kind)}, {html.escape(p.host)})</li>"
        for p in PAGES
    )
    questions = "\n".join(f"<li>{html.escape(t.question)}</li>" for t in TOPICS.values())
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>briefd lab web</title></head>"
        f"<body><h1>briefd lab web</h1><h2>Questions</h2><ul>{questions}</ul>"
        f"<h2>Pages</h2><ul>{items}</ul></body></html>"
    )


@functools.lru_cache(maxsize=None)
def article_pdf(slug: str) -> bytes:
    """A PDF page's article, one paragraph a PDF page (made once: fpdf2 takes milliseconds)."""
    page = PAGES_BY_SLUG[slug]
    return pdf_bytes(list(page.paragraphs), title=page.title)


def png_bytes(width: int = 64, height: int = 64) -> bytes:
    """A small valid PNG (a gradient), built by hand so no imaging library is needed."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    # Each row: filter byte 0, then RGB triples.
    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 4 % 256, y * 4 % 256, 128)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def binary_bytes(slug: str, size: int = BINARY_BYTES) -> bytes:
    """Seeded random bytes: the same for the same page on every run."""
    return random.Random(f"{SEED}:{slug}").randbytes(size)


def huge_prefix_and_filler(page: Page) -> tuple[bytes, bytes, bytes]:
    """Head, one filler block and tail of the huge page (filled to HUGE_BYTES)."""
    head = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(page.title)}</title></head><body><h1>{html.escape(page.title)}</h1>\n"
    ).encode()
    filler = f"<p>Archive entry: {html.escape(page.title)}. See the next entry for more.</p>\n".encode()
    tail = b"</body></html>\n"
    return head, filler, tail


class LabHandler(BaseHTTPRequestHandler):
    """One request. Everything it needs is the corpus and the path."""

    protocol_version = "HTTP/1.1"
    server_version = "briefd-lab-web/1.0"
    quiet = False

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        if not self.quiet:
            super().log_message(format, *args)

    def log_date_time_string(self) -> str:
        """To the microsecond, UTC (tests order a page's request against a model call's log)."""
        return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    # -- helpers -----------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _redirect(self, status: int, location: str) -> None:
        body = f'<html><body>Moved: <a href="{html.escape(location)}">here</a></body></html>'.encode()
        self._send(status, body, "text/html; charset=utf-8", {"Location": location})

    def _not_found(self) -> None:
        body = (
            b"<!DOCTYPE html><html><head><title>404 Not Found</title></head>"
            b"<body><h1>Not Found</h1><p>The page you asked for does not exist.</p></body></html>"
        )
        self._send(404, body, "text/html; charset=utf-8")

    # -- routing -----------------------------------------------------------
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        try:
            self._route(path)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # The client hung up (as a fetcher with limits should): nothing to do.
            self.close_connection = True

    def _route(self, path: str) -> None:
        if path == "/":
            self._send(200, render_index().encode(), "text/html; charset=utf-8")
            return
        if path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
            return
        if path.startswith("/hostile/"):
            serve_hostile(self, path.removeprefix("/hostile/"))
            return
        if path.startswith("/docs/") and getattr(self.server, "docs", None) is not None:
            self._serve_doc(path.removeprefix("/docs/"))
            return
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "go":
            page = PAGES_BY_SLUG.get(parts[1])
            if page is not None and page.kind == "moved":
                self._redirect(301, page.final_path)
                return
        elif len(parts) == 3 and parts[0] == "loop" and parts[2] in ("a", "b"):
            page = PAGES_BY_SLUG.get(parts[1])
            if page is not None and page.kind == "redirect_loop":
                other = "b" if parts[2] == "a" else "a"
                self._redirect(302, f"/loop/{page.slug}/{other}")
                return
        elif len(parts) == 2 and parts[0] == "pages" and parts[1].endswith((".html", ".pdf")):
            page = PAGES_BY_SLUG.get(parts[1].rsplit(".", 1)[0])
            if page is not None and path == page.final_path:
                self._serve_page(page)
                return
        self._not_found()

    def _serve_validated(self, page: Page) -> None:
        """An article whole, with its validators; 304 and no body when the client's copy is current."""
        folder = getattr(self.server, "overrides", None)
        served, changed, delay_s = overridden(page, folder)
        if page.kind == "latin1":
            # No charset in the header and none in the document: the client must guess.
            doc = render_article(served).replace('<meta charset="utf-8">\n', "")
            body, content_type = doc.encode("cp1252"), "text/html"
        elif page.kind == PDF_KIND:
            pdf = article_pdf(page.slug) if served is page else pdf_bytes(list(served.paragraphs), title=served.title)
            body, content_type = pdf, "application/pdf"
        else:
            body, content_type = render_article(served).encode("utf-8"), "text/html; charset=utf-8"
        etag = etag_of(body)
        validators = {"ETag": etag, "Last-Modified": email.utils.format_datetime(changed, usegmt=True)}
        if not_modified(self.headers, etag, changed):
            self.send_response(304)  # logged as 304 in the access log
            for key, value in validators.items():
                self.send_header(key, value)
            self.end_headers()
            return
        time.sleep(delay_s)
        self._send(200, body, content_type, validators)

    def _serve_doc(self, relative: str) -> None:
        """A file of the real-document corpus, by its suffix's type; nothing outside the folder."""
        root: Path = getattr(self.server, "docs")
        target = (root / unquote(relative)).resolve()
        content_type = DOC_TYPES.get(target.suffix.lower())
        if content_type is None or not target.is_relative_to(root.resolve()) or not target.is_file():
            self._not_found()
            return
        self._send(200, target.read_bytes(), content_type)

    def _serve_page(self, page: Page) -> None:
        kind = page.kind
        if kind in VALIDATED_KINDS:
            self._serve_validated(page)
        elif kind == "not_found":
            self._not_found()
        elif kind == "redirect_loop":
            self._redirect(302, page.path)
        elif kind == "binary":
            self._send(200, binary_bytes(page.slug), "application/octet-stream")
        elif kind == "binary_html":
            self._send(200, binary_bytes(page.slug), "text/html; charset=utf-8")
        elif kind == "wrong_type":
            self._send(200, png_bytes(), "image/png")
        elif kind == "lying_length":
            self._serve_lying_length(page)
        elif kind == "slow":
            self._serve_slow(page)
        elif kind == "huge":
            self._serve_huge(page)
        elif kind == "stream_forever":
            self._serve_forever(page)
        else:  # pragma: no cover - corpus._check forbids unknown kinds
            self._not_found()

    # -- the misbehaviours ---------------------------------------------------
    def _serve_lying_length(self, page: Page) -> None:
        body = render_article(page).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(LYING_LENGTH))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve_slow(self, page: Page) -> None:
        body = render_article(page).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        if self.command == "HEAD":
            return
        step = -(-len(body) // SLOW_STEPS)
        delay = SLOW_SECONDS / SLOW_STEPS
        for start in range(0, len(body), step):
            time.sleep(delay)
            self.wfile.write(body[start : start + step])
            self.wfile.flush()

    def _serve_huge(self, page: Page) -> None:
        head, filler, tail = huge_prefix_and_filler(page)
        blocks = (HUGE_BYTES - len(head) - len(tail)) // len(filler)
        total = len(head) + blocks * len(filler) + len(tail)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.write(head)
        per_write = 512
        chunk = filler * per_write
        written = 0
        while written + per_write <= blocks:
            self.wfile.write(chunk)
            written += per_write
        self.wfile.write(filler * (blocks - written))
        self.wfile.write(tail)

    def _serve_forever(self, page: Page) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return

        def send_chunk(data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        send_chunk(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(page.title)}"
            f"</title></head><body><h1>{html.escape(page.title)}</h1>\n".encode()
        )
        line = 0
        while True:  # never ends: only the client hanging up stops it
            batch = "".join(
                f"<p>Update {line + i}: Northgate rail tunnel budget overrun ticker, no new figures.</p>\n"
                for i in range(200)
            )
            line += 200
            send_chunk(batch.encode())
            time.sleep(STREAM_CHUNK_DELAY)


# ---------------------------------------------------------------------------------------------
# Hostile answers outside the corpus (issue 8): compression bombs and a flooding SearXNG.
# Search results never link here by themselves; the tests and `make soak`'s hostile mode point
# briefd at /hostile/searxng, whose answers rank the bombs first.

BOMB_BYTES = 1 << 30
"""What each bomb decodes to: a gibibyte of zeros (the gzip one is 1 MB on the wire, nested 1,827 bytes)."""

FLOOD_RESULTS = 200_000
"""Results in each /hostile/searxng answer: about 90 MB of JSON."""


def compress_zeros(wbits: int, total: int = BOMB_BYTES) -> bytes:
    """`total` zeros compressed (gzip: wbits 31, zlib: 15, raw deflate: -15), built 1 MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(total // len(zeros))]
    return b"".join([*parts, packer.flush()])


@functools.cache
def gzip_bomb() -> bytes:
    return compress_zeros(16 + zlib.MAX_WBITS)


@functools.cache
def zlib_bomb() -> bytes:
    return compress_zeros(zlib.MAX_WBITS, BOMB_BYTES // 4)  # a quarter is plenty, and 4x quicker to build


@functools.cache
def raw_deflate_bomb() -> bytes:
    return compress_zeros(-zlib.MAX_WBITS, BOMB_BYTES // 4)


BOMBS = {
    # name -> (Content-Encoding, body); each decodes to hundreds of MB or more
    "nested-bomb": lambda: ("gzip, gzip", gzip.compress(gzip_bomb(), compresslevel=9)),
    "deflate-gzip-bomb": lambda: ("deflate, gzip", gzip.compress(zlib_bomb(), compresslevel=9)),
    "gzip-bomb": lambda: ("gzip", gzip_bomb()),
    "deflate-bomb": lambda: ("deflate", zlib_bomb()),
    "raw-deflate-bomb": lambda: ("deflate", raw_deflate_bomb()),
}


PROSE = ("The committee reviewed the tender documents and found that the contractor had priced "
         "the tunnel lining at a rate well below the regional average for comparable work. ")


def _html(title: str, body: str) -> bytes:
    return (f"<!doctype html><html><head><title>{title}</title></head>"
            f"<body><article><p>{body}</p></article></body></html>").encode()


PATHOLOGICAL = {
    # name -> page; text that once cost the daemon minutes of CPU on its event loop
    "mr-text": lambda: _html("Messrs", "Mr. " * 50_000),  # 200 KB, a period every 4 characters
    "one-line-prose": lambda: _html("Tender review", (PROSE * (200_000 // len(PROSE) + 1))[:200_000]),
    "link-farm": lambda: _html("Links", "".join(f'<a href="/l/{i}">link {i} to somewhere</a> '
                                                for i in range(100_000))),  # 4 MB, 100,000 links
}


def hostile_engine_rows(origin: str, query: str) -> bytes:
    """A SearXNG `json_engine` answer offering every hostile page, for any query (make soak --hostile).

    The order turns with the query, so over a few queries each page is ranked first once: a brief
    fetches only the top few results of each search."""
    names = [*BOMBS, *PATHOLOGICAL]
    turn = zlib.crc32(query.encode()) % len(names)
    rows = [{"url": f"{origin}/hostile/{name}", "title": f"Budget overrun figures ({name})",
             "content": f"Tender review, costs and closure figures: {name}"} for name in names[turn:] + names[:turn]]
    return json.dumps({"rows": rows}).encode()


def warm_hostile() -> None:
    """Build every bomb now (seconds of CPU), so the first request is not slower than a fetch timeout."""
    for make in BOMBS.values():
        make()


def flood_result(n: int, url: str) -> bytes:
    """One SearXNG result of about 450 bytes."""
    return json.dumps({
        "url": url, "title": f"Flood result {n}",
        "content": f"Result {n} of a search answer far larger than any search engine sends. " * 5,
        "engine": "flood", "score": 1.0, "category": "general", "positions": [n],
    }).encode()


def flood_urls(origin: str) -> list[str]:
    """What a flood answer ranks first: every bomb, then the corpus's readable articles."""
    return ([f"{origin}/hostile/{name}" for name in BOMBS]
            + [f"{origin}{page.path}" for page in PAGES if page.kind == "article"])


def serve_hostile(handler: BaseHTTPRequestHandler, name: str) -> None:
    """Answer /hostile/<name>; an unknown name is a plain 404."""
    if name in BOMBS:
        encoding, body = BOMBS[name]()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Encoding", encoding)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    elif name in PATHOLOGICAL:
        _send_plain(handler, 200, PATHOLOGICAL[name](), "text/html; charset=utf-8")
    elif name == "engine":
        query = parse_qs(urlsplit(handler.path).query).get("q", [""])[0]
        _send_plain(handler, 200, hostile_engine_rows(f"http://{handler.headers.get('Host') or '127.0.0.1'}", query),
                    "application/json")
    elif name == "searxng/search":
        _serve_flood(handler)
    else:
        _send_plain(handler, 404, b"no such hostile page", "text/plain")


def _send_plain(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _serve_flood(handler: BaseHTTPRequestHandler) -> None:
    """A SearXNG JSON answer of FLOOD_RESULTS results, written as it is made (never held whole)."""
    origin = f"http://{handler.headers.get('Host') or '127.0.0.1'}"
    first = flood_urls(origin)
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")  # the body runs until the connection closes
    handler.end_headers()
    handler.close_connection = True
    handler.wfile.write(b'{"query": "flood", "number_of_results": %d, "results": [' % FLOOD_RESULTS)
    for start in range(0, FLOOD_RESULTS, 1000):
        batch = b",".join(flood_result(n, first[n] if n < len(first) else f"{origin}/hostile/flood/{n}")
                          for n in range(start, min(start + 1000, FLOOD_RESULTS)))
        handler.wfile.write((b"," if start else b"") + batch)
    handler.wfile.write(b'], "answers": [], "unresponsive_engines": []}')


class LabWebServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    overrides: Path | None = None  # where write_override puts changed articles (None: none can change)
    docs: Path | None = None  # a real-document corpus served under /docs/ (None: no such route)


def make_server(host: str = "127.0.0.1", port: int = 0, quiet: bool = False,
                overrides: Path | None = None, docs: Path | None = None) -> LabWebServer:
    """Build (and bind) the server; port 0 picks a free port (see server.server_address).
    `overrides`: the folder of changed articles (default: $LAB_WEB_OVERRIDES, if set);
    `docs`: a real-document corpus to serve under /docs/."""
    handler = type("QuietLabHandler", (LabHandler,), {"quiet": True}) if quiet else LabHandler
    server = LabWebServer((host, port), handler)
    folder = overrides or os.environ.get(OVERRIDES_ENV)
    server.overrides = Path(folder) if folder else None
    server.docs = docs
    return server


def serve_in_thread(
    host: str = "127.0.0.1", port: int = 0, quiet: bool = True, overrides: Path | None = None,
    docs: Path | None = None,
) -> tuple[LabWebServer, threading.Thread]:
    """Start the server on a daemon thread; stop with server.shutdown(); server.server_close()."""
    server = make_server(host, port, quiet=quiet, overrides=overrides, docs=docs)
    thread = threading.Thread(target=server.serve_forever, name="lab-web", daemon=True)
    thread.start()
    return server, thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the briefd lab web (corpus and hostile pages).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    parser.add_argument("--overrides", type=Path, default=None,
                        help=f"folder of changed articles (write_override; default ${OVERRIDES_ENV})")
    parser.add_argument("--docs", type=Path, default=None, help="a real-document corpus to serve under /docs/")
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, quiet=args.quiet, overrides=args.overrides, docs=args.docs)
    print(f"lab web serving on http://{args.host}:{server.server_address[1]}/", file=sys.stderr, flush=True)
    serve_until_interrupted(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
