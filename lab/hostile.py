"""The hostile half of `make soak --hostile`: a search proxy that floods, and the engine to add.

The hostile pages themselves (compression bombs, pathological text, a 4 MB page of links)
live in the lab web (lab/web.py, `/hostile/<name>`), which also answers as a SearXNG
`json_engine` offering them for every query (`/hostile/engine`). Here:

- `engine_settings`: that engine, for the real SearXNG's settings, so SearXNG ranks the
  hostile pages among the corpus's own;
- a **search proxy** in front of the real SearXNG: it passes every request through and, for
  a seeded share of queries, appends `web.FLOOD_RESULTS` junk results (about 90 MB) to the
  answer, the way a misconfigured or hostile search service would. An answer that cannot
  be reached upstream is a 502, which briefd must treat as SearXNG being down.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.error import HTTPError, URLError
from urllib.parse import parse_qs, urlsplit
from urllib.request import Request, urlopen

from lab.web import FLOOD_RESULTS, flood_result


def engine_settings(web_url: str, timeout: float = 5.0) -> dict[str, object]:
    """A SearXNG `json_engine` over the lab web's /hostile/engine."""
    return {
        "name": "hostileweb", "engine": "json_engine", "shortcut": "hw",
        "categories": ["general", "news"], "enable_http": True, "timeout": timeout,
        "time_range_support": True, "time_range_url": "&since={time_range_val}",
        "search_url": f"{web_url}/hostile/engine?q={{query}}{{time_range}}",
        "results_query": "rows", "url_query": "url", "title_query": "title", "content_query": "content",
        "about": {"website": web_url, "official_api_documentation": None, "use_official_api": True,
                  "require_api_key": False, "results": "JSON"},
    }


def is_flooded(query: str, seed: int, share: float) -> bool:
    """A seeded, stable choice of the queries whose answer is flooded."""
    digest = hashlib.sha256(f"{seed}:{query}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < share * 2**32


def proxy_handler(upstream: str, seed: int, share: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            pass

        def do_GET(self) -> None:
            try:
                self._proxy()
            except (BrokenPipeError, ConnectionResetError):
                pass  # briefd stopped reading, as it should with a flood

        def _proxy(self) -> None:
            try:
                with urlopen(Request(upstream + self.path), timeout=30) as answer:  # noqa: S310 - loopback
                    status, body = answer.status, answer.read()
                    content_type = answer.headers.get("Content-Type", "application/json")
            except HTTPError as exc:
                status, body, content_type = exc.code, exc.read(), exc.headers.get("Content-Type", "text/plain")
            except (URLError, OSError) as exc:
                status, body, content_type = 502, f"upstream down: {exc}\n".encode(), "text/plain"
            parts = urlsplit(self.path)
            query = parse_qs(parts.query).get("q", [""])[0]
            flood = status == 200 and parts.path == "/search" and bool(query) and is_flooded(query, seed, share)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if not flood:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.end_headers()  # HTTP/1.0: the flood runs until the connection closes
            head, sep, tail = body.partition(b'"results": [')
            if not sep:
                self.wfile.write(body)
                return
            self.wfile.write(head + sep)
            for start in range(0, FLOOD_RESULTS, 1000):
                batch = b",".join(flood_result(n, f"http://127.0.0.1:9/flood/{n}")
                                  for n in range(start, min(start + 1000, FLOOD_RESULTS)))
                self.wfile.write(batch + b",")
            self.wfile.write(tail if not tail.startswith(b"]") else b'{"url": "http://127.0.0.1:9/end"}' + tail)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A search proxy in front of SearXNG that floods a share of answers.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the real SearXNG's URL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--share", type=float, default=0.1, help="share of queries whose answer is flooded")
    args = parser.parse_args(argv)
    proxy = ThreadingHTTPServer(("127.0.0.1", args.port), proxy_handler(args.upstream.rstrip("/"), args.seed,
                                                                        args.share))
    print(f"search proxy on :{args.port} in front of {args.upstream}", file=sys.stderr, flush=True)
    try:
        proxy.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
