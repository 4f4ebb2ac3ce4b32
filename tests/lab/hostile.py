"""The hostile web for `make soak --hostile`: pages and a search service built to hurt a crawler.

Two loopback servers in one process:

- the **hostile web**: compression bombs (gzip of 1 GiB of zeros wrapped in a second gzip,
  1.8 KB on the wire; single-layer gzip and deflate bombs), pathological text (200 KB of
  "Mr. " on one line, 200,000 characters of prose with no line break, a 4 MB page with
  100,000 links), and a SearXNG `json_engine` endpoint (`/search?q=`) that offers these
  pages for every query, so the real SearXNG ranks them among the corpus's own;
- a **search proxy** in front of the real SearXNG: it passes every request through and,
  for a seeded share of queries, appends 200,000 junk results (about 90 MB) to the
  answer, the way a misconfigured or hostile search service would.

Bombs are built once at start-up by compressing in chunks, so neither this process nor
the soak ever holds the decompressed gigabyte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.error import HTTPError, URLError
from urllib.parse import parse_qs, urlsplit
from urllib.request import Request, urlopen

BOMB_ZEROS = 1 << 30
"""What the bombs decompress to: 1 GiB, as in the probe that found issue 8's first finding."""

HUGE_RESULTS = 200_000
"""Junk results appended to a huge search answer (about 90 MB of JSON)."""

PROSE = ("The committee reviewed the tender documents and found that the contractor had priced "
         "the tunnel lining at a rate well below the regional average for comparable work ")


def _compress(chunks: int, chunk: bytes, wbits: int) -> bytes:
    """Compress `chunks` copies of `chunk` without ever holding them together."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    out = bytearray()
    for _ in range(chunks):
        out += packer.compress(chunk)
    out += packer.flush()
    return bytes(out)


def gzip_bytes(data: bytes) -> bytes:
    return _compress(1, data, 16 + zlib.MAX_WBITS)


@dataclass(frozen=True)
class HostilePage:
    """One hostile page: its body as sent, its headers, and words for the search endpoint."""

    path: str
    title: str
    body: bytes
    content_type: str
    encoding: str = ""


def build_pages() -> list[HostilePage]:
    """The hostile pages; the bombs take a few seconds of CPU to build, once."""
    mib = b"\0" * (1 << 20)
    gz_gib = _compress(BOMB_ZEROS >> 20, mib, 16 + zlib.MAX_WBITS)
    deflate_gib = _compress(BOMB_ZEROS >> 20, mib, zlib.MAX_WBITS)
    mr = "Mr. " * 50_000
    prose = (PROSE * (200_000 // len(PROSE) + 1))[:200_000]
    links = "".join(f'<a href="/l/{i}">link {i} to somewhere</a> ' for i in range(100_000))

    def html(title: str, body: str) -> bytes:
        return f"<!doctype html><html><head><title>{title}</title></head><body><p>{body}</p></body></html>".encode()

    return [
        HostilePage("/bomb/nested.html", "Budget overrun figures (nested gzip)", gzip_bytes(gz_gib),
                    "text/html; charset=utf-8", "gzip, gzip"),
        HostilePage("/bomb/gzip.html", "Budget overrun figures (gzip)", gz_gib, "text/html; charset=utf-8", "gzip"),
        HostilePage("/bomb/deflate.html", "Budget overrun figures (deflate)", deflate_gib,
                    "text/html; charset=utf-8", "deflate"),
        HostilePage("/text/mr.html", "Messrs and their titles", html("Messrs", mr), "text/html; charset=utf-8"),
        HostilePage("/text/prose.html", "A tender review on one line", html("Tender review", prose),
                    "text/html; charset=utf-8"),
        HostilePage("/text/links.html", "A directory of every link", html("Links", links),
                    "text/html; charset=utf-8"),
    ]


def huge_answer(base: dict[str, object], query: str) -> bytes:
    """`base` (a SearXNG JSON answer) with HUGE_RESULTS junk results appended."""
    junk = [{"url": f"http://127.0.0.1:9/junk/{i}", "title": f"junk result {i} for {query}",
             "content": "filler " * 40, "engine": "junk", "score": 0.01} for i in range(HUGE_RESULTS)]
    results = base.get("results")
    answer = dict(base, results=(results if isinstance(results, list) else []) + junk)
    return json.dumps(answer).encode()


def is_huge_query(query: str, seed: int, share: float) -> bool:
    """A seeded, stable choice of the queries that get a huge answer."""
    digest = hashlib.sha256(f"{seed}:{query}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < share * 2**32


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def send_body(self, status: int, body: bytes, content_type: str, encoding: str = "") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should with a bomb


def web_handler(pages: list[HostilePage], origin: str) -> type[BaseHTTPRequestHandler]:
    by_path = {page.path: page for page in pages}

    class Handler(_Quiet):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path == "/healthz":
                self.send_body(200, b"ok\n", "text/plain")
                return
            if parts.path == "/search":
                query = parse_qs(parts.query).get("q", [""])[0]
                rows = [{"url": f"{origin}{p.path}", "title": p.title,
                         "content": f"{p.title}: {query}"} for p in pages]
                self.send_body(200, json.dumps({"rows": rows}).encode(), "application/json")
                return
            page = by_path.get(parts.path)
            if page is None:
                self.send_body(404, b"not found\n", "text/plain")
                return
            self.send_body(200, page.body, page.content_type, page.encoding)

    return Handler


def proxy_handler(upstream: str, seed: int, share: float) -> type[BaseHTTPRequestHandler]:
    class Handler(_Quiet):
        def do_GET(self) -> None:
            try:
                with urlopen(Request(upstream + self.path), timeout=30) as answer:  # noqa: S310 - loopback
                    status, body = answer.status, answer.read()
                    content_type = answer.headers.get("Content-Type", "application/json")
            except HTTPError as exc:
                status, body, content_type = exc.code, exc.read(), exc.headers.get("Content-Type", "text/plain")
            except (URLError, OSError) as exc:
                self.send_body(502, f"upstream down: {exc}\n".encode(), "text/plain")
                return
            parts = urlsplit(self.path)
            query = parse_qs(parts.query).get("q", [""])[0]
            if status == 200 and parts.path == "/search" and query and is_huge_query(query, seed, share):
                try:
                    body = huge_answer(json.loads(body), query)
                except ValueError:
                    pass
            self.send_body(status, body, content_type)

    return Handler


def engine_settings(web_url: str, timeout: float = 5.0) -> dict[str, object]:
    """A SearXNG `json_engine` that offers the hostile pages for every query."""
    return {
        "name": "hostileweb", "engine": "json_engine", "shortcut": "hw",
        "categories": ["general", "news"], "enable_http": True, "timeout": timeout,
        "time_range_support": True, "time_range_url": "&since={time_range_val}",
        "search_url": f"{web_url}/search?q={{query}}{{time_range}}",
        "results_query": "rows", "url_query": "url", "title_query": "title", "content_query": "content",
        "about": {"website": web_url, "official_api_documentation": None, "use_official_api": True,
                  "require_api_key": False, "results": "JSON"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the hostile web and a search proxy on loopback.")
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--proxy-port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the real SearXNG's URL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--huge-share", type=float, default=0.1, help="share of queries given a huge answer")
    args = parser.parse_args(argv)
    pages = build_pages()
    origin = f"http://127.0.0.1:{args.web_port}"
    web = ThreadingHTTPServer(("127.0.0.1", args.web_port), web_handler(pages, origin))
    proxy = ThreadingHTTPServer(("127.0.0.1", args.proxy_port),
                                proxy_handler(args.upstream.rstrip("/"), args.seed, args.huge_share))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    print(f"hostile web on {origin}, search proxy on :{args.proxy_port}", file=sys.stderr, flush=True)
    try:
        web.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
