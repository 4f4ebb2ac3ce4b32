"""daemon.fetch against a real HTTP server on loopback that misbehaves on purpose.

Every hostile page a search engine could hand briefd has a route here: redirect
loops, endless streams, lying Content-Length, a trickle, a server that never
answers, a redirect into the cloud metadata service.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from daemon.fetch import FetchLimits, FetchResult, check_url, fetch_page, make_client, resolve_and_check

PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Steel output</title></head>"
    "<body><article><p>Steel output rose 4.5% in 2025, the trade body said.</p></article></body></html>"
).encode("utf-8")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
CHUNK = b"x" * 65536


class Hostile(BaseHTTPRequestHandler):
    """One route per way a web page can misbehave."""

    protocol_version = "HTTP/1.1"
    server: LabServer

    def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        self.server.user_agents.append(self.headers.get("User-Agent", ""))
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client hung up on an endless answer: exactly what we want it to do

    def route(self) -> None:
        path = self.path
        if path == "/page":
            self.send(200, PAGE, "text/html; charset=utf-8")
        elif path == "/moved":
            self.redirect(301, "/page")
        elif path == "/loop-a":
            self.redirect(302, "/loop-b")
        elif path == "/loop-b":
            self.redirect(302, "/loop-a")
        elif path.startswith("/chain/"):
            self.redirect(302, f"/chain/{int(path.rsplit('/', 1)[1]) + 1}")
        elif path == "/missing":
            self.send(404, b"<h1>Not found</h1>", "text/html")
        elif path == "/busy":
            self.send(503, b"<h1>Try again later</h1>", "text/html")
        elif path == "/image.png":
            self.send(200, PNG, "image/png")
        elif path == "/gzip":
            self.send(200, gzip.compress(PAGE), "text/html; charset=utf-8", encoding="gzip")
        elif path == "/to-metadata":
            self.redirect(302, "http://169.254.169.254/latest/meta-data/iam/security-credentials/")
        elif path == "/to-ftp":
            self.redirect(302, "ftp://127.0.0.1/pub/file.txt")
        elif path == "/huge-declared":
            self.start(200, "text/html", length=50_000_000)
            self.pour()
        elif path == "/huge-undeclared":
            self.start(200, "text/html", length=None)
            for _ in range(160):  # 10 MB, then close
                self.wfile.write(CHUNK)
        elif path == "/lying-length":
            self.start(200, "text/html", length=1000)
            self.pour(limit=2_000_000)
        elif path == "/forever":
            self.start(200, "text/html", length=None, chunked=True)
            while not self.server.stopping.is_set():
                self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
        elif path == "/trickle":
            self.start(200, "text/html", length=100_000)
            while not self.server.stopping.is_set():
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)
        elif path == "/hang":
            self.server.stopping.wait(30)  # accept the request, never answer it
        else:
            self.send(404, b"no such route", "text/plain")

    def start(self, status: int, content_type: str, *, length: int | None, chunked: bool = False,
              encoding: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")  # body runs until the connection closes
            self.close_connection = True
        self.end_headers()

    def send(self, status: int, body: bytes, content_type: str, encoding: str | None = None) -> None:
        self.start(status, content_type, length=len(body), encoding=encoding)
        self.wfile.write(body)

    def redirect(self, status: int, location: str) -> None:
        self.send_response(status)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def pour(self, limit: int | None = None) -> None:
        sent = 0
        while not self.server.stopping.is_set() and (limit is None or sent < limit):
            self.wfile.write(CHUNK)
            sent += len(CHUNK)


class LabServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Hostile)
        self.hits: list[str] = []
        self.user_agents: list[str] = []
        self.stopping = threading.Event()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_port}{path}"


@pytest.fixture(scope="module")
def server() -> Iterator[LabServer]:
    lab = LabServer()
    thread = threading.Thread(target=lab.serve_forever, daemon=True)
    thread.start()
    yield lab
    lab.stopping.set()
    lab.shutdown()
    lab.server_close()


def fetch(url: str, limits: FetchLimits | None = None) -> FetchResult:
    limits = limits or FetchLimits()

    async def go() -> FetchResult:
        async with make_client(limits) as client:
            return await fetch_page(client, url, limits)

    return asyncio.run(go())


SMALL = FetchLimits(max_bytes=100_000, timeout_s=5.0)


# --------------------------------------------------------------------------- pages that behave


def test_normal_page_comes_back_whole_with_its_content_type(server: LabServer) -> None:
    result = fetch(server.url("/page"))
    assert result.ok
    assert result.status == 200
    assert result.body == PAGE
    assert result.content_type == "text/html; charset=utf-8"
    assert result.final_url == result.url == server.url("/page")
    assert result.error is None and not result.truncated
    assert 0 < result.elapsed_s < 5


def test_every_request_says_who_is_asking(server: LabServer) -> None:
    fetch(server.url("/page"))
    assert server.user_agents[-1] == "briefd/0.1 (+offline research daemon)"


def test_301_is_followed_and_final_url_is_where_the_page_was(server: LabServer) -> None:
    result = fetch(server.url("/moved"))
    assert result.ok
    assert result.final_url == server.url("/page")
    assert result.body == PAGE
    assert result.redirects == [server.url("/page")]


def test_gzip_body_is_decoded(server: LabServer) -> None:
    result = fetch(server.url("/gzip"))
    assert result.ok
    assert result.body == PAGE


def test_binary_page_is_fetched_as_is_and_its_type_recorded(server: LabServer) -> None:
    result = fetch(server.url("/image.png"))
    assert result.ok
    assert result.content_type == "image/png"
    assert result.body == PNG


# --------------------------------------------------------------------------- redirects that misbehave


def test_redirect_loop_is_named_a_loop(server: LabServer) -> None:
    result = fetch(server.url("/loop-a"))
    assert not result.ok
    assert result.error == "redirect loop"
    assert result.final_url == server.url("/loop-b")
    assert result.status == 302
    assert not result.transient, "a loop will not heal: the URL is not worth another try"


def test_endless_redirect_chain_stops_after_max_redirects(server: LabServer) -> None:
    before = len(server.hits)
    result = fetch(server.url("/chain/0"), FetchLimits(max_redirects=3))
    assert result.error == "too many redirects"
    assert server.hits[before:] == ["/chain/0", "/chain/1", "/chain/2", "/chain/3"]
    assert result.final_url == server.url("/chain/3")


def test_redirect_into_the_metadata_service_is_refused_at_that_hop(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/to-metadata"))
    assert result.error == "refused: link-local address 169.254.169.254"
    assert result.final_url == "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
    assert result.status is None  # nothing was asked of that address
    assert result.body == b""
    assert time.monotonic() - started < 2  # no connection attempt to a black hole


def test_redirect_to_another_scheme_is_refused(server: LabServer) -> None:
    result = fetch(server.url("/to-ftp"))
    assert result.error == "scheme 'ftp' not allowed"
    assert result.final_url == "ftp://127.0.0.1/pub/file.txt"


def test_http_error_status_is_an_error(server: LabServer) -> None:
    result = fetch(server.url("/missing"))
    assert not result.ok
    assert result.status == 404
    assert result.error == "HTTP 404"
    assert not result.transient


def test_a_busy_server_is_a_failure_that_may_heal(server: LabServer) -> None:
    result = fetch(server.url("/busy"))
    assert (result.ok, result.status, result.error, result.transient) == (False, 503, "HTTP 503", True)


# --------------------------------------------------------------------------- bodies that misbehave


def test_declared_huge_body_is_refused_without_reading_it(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/huge-declared"), SMALL)
    assert result.error == "too large (>100000 bytes)"
    assert result.body == b""
    assert result.truncated
    assert time.monotonic() - started < 3


def test_undeclared_huge_body_stops_at_the_limit(server: LabServer) -> None:
    result = fetch(server.url("/huge-undeclared"), SMALL)
    assert result.error == "too large (>100000 bytes)"
    assert len(result.body) == 100_000
    assert result.truncated
    assert not result.ok


def test_default_limit_is_five_megabytes(server: LabServer) -> None:
    result = fetch(server.url("/huge-undeclared"))
    assert result.error == "too large (>5000000 bytes)"
    assert len(result.body) == 5_000_000


def test_never_ending_stream_stops_at_the_limit(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/forever"), SMALL)
    assert result.error == "too large (>100000 bytes)"
    assert len(result.body) == 100_000
    assert time.monotonic() - started < 3


def test_small_content_length_that_lies_gets_no_more_than_it_claimed(server: LabServer) -> None:
    limits = SMALL

    async def go() -> tuple[FetchResult, FetchResult]:
        async with make_client(limits) as client:
            lying = await fetch_page(client, server.url("/lying-length"), limits)
            after = await fetch_page(client, server.url("/page"), limits)  # the pool must not hand out the dirty connection
            return lying, after

    lying, after = asyncio.run(go())
    assert len(lying.body) == 1000
    assert len(lying.body) <= limits.max_bytes
    assert after.ok and after.body == PAGE


def test_slow_trickle_cannot_outlast_the_total_timeout(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/trickle"), FetchLimits(timeout_s=1.5))
    took = time.monotonic() - started
    assert result.error == "timeout after 1.5s"
    assert not result.ok
    assert result.truncated  # some bytes came, not the whole page
    assert 0 < len(result.body) < 100_000
    assert took < 3.0


def test_server_that_never_answers_times_out(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/hang"), FetchLimits(timeout_s=1.0))
    assert result.error == "timeout after 1s"
    assert result.status is None
    assert result.transient
    assert time.monotonic() - started < 2.5


def test_connection_refused_is_said_plainly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = fetch(f"http://127.0.0.1:{port}/")
    assert result.error == "connection refused"
    assert result.status is None
    assert result.transient


def test_unresolvable_host_is_said_plainly() -> None:
    result = fetch("http://no-such-host.invalid/", FetchLimits(timeout_s=10))
    assert result.error == "cannot resolve host 'no-such-host.invalid'"


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://127.0.0.1/file", "scheme 'ftp' not allowed"),
        ("file:///etc/passwd", "scheme 'file' not allowed"),
        ("javascript:alert(1)", "scheme 'javascript' not allowed"),
        ("http://169.254.169.254/latest/meta-data", "refused: link-local address 169.254.169.254"),
        ("http://[fe80::1]/", "refused: link-local address fe80::1"),
        ("http://[fd00:ec2::254]/latest", "refused: cloud metadata address fd00:ec2::254"),
        ("http://100.100.100.200/latest/meta-data", "refused: cloud metadata address 100.100.100.200"),
        ("http://2852039166/", "refused: link-local address 169.254.169.254"),  # 169.254.169.254 as one number
        ("http://0xa9.0xfe.0xa9.0xfe/", "refused: link-local address 169.254.169.254"),
        ("http://[::ffff:169.254.169.254]/",
         "refused: link-local address 169.254.169.254 (inside ::ffff:a9fe:a9fe)"),
        ("http://metadata.google.internal/computeMetadata/v1/", "refused: cloud metadata host metadata.google.internal"),
        ("http://user:secret@127.0.0.1/", "credentials in URL not allowed"),
        ("http://0.0.0.0/", "refused: unroutable address 0.0.0.0"),
        ("http:///path-only", "no host in URL"),
        ("http://example.com/" + "a" * 5000, "URL too long (5019 chars)"),
    ],
)
def test_refused_urls_are_refused_before_any_network(url: str, reason: str) -> None:
    assert check_url(url, FetchLimits()) == reason
    started = time.monotonic()
    result = fetch(url)
    assert result.error == reason
    assert result.status is None and result.body == b""
    assert time.monotonic() - started < 2


def test_public_and_private_addresses_pass_by_default() -> None:
    limits = FetchLimits()
    assert check_url("https://example.org/a?b=c", limits) is None
    assert check_url("http://127.0.0.1:8888/search", limits) is None
    assert check_url("http://192.168.1.20/page", limits) is None
    assert check_url("http://[::1]:8080/", limits) is None


def test_allow_link_local_lets_the_checks_pass() -> None:
    allowed = FetchLimits(allow_link_local=True)
    assert check_url("http://169.254.169.254/latest/meta-data", allowed) is None
    assert check_url("http://[fe80::1]/", allowed) is None
    assert check_url("http://[fd00:ec2::254]/", allowed) is None
    assert asyncio.run(resolve_and_check("169.254.169.254", allowed)) is None
    assert asyncio.run(resolve_and_check("169.254.169.254", FetchLimits())) == (
        "refused: link-local address 169.254.169.254"
    )


def test_allow_private_false_refuses_loopback_by_name_and_by_address(server: LabServer) -> None:
    public_only = FetchLimits(allow_private=False)
    assert asyncio.run(resolve_and_check("localhost", public_only)) is not None
    assert "loopback" in (asyncio.run(resolve_and_check("localhost", public_only)) or "")
    assert check_url("http://10.1.2.3/", public_only) == "refused: private address 10.1.2.3"
    before = len(server.hits)
    result = fetch(server.url("/page"), public_only)
    assert result.error == "refused: loopback address 127.0.0.1"
    assert len(server.hits) == before  # never reached the server


def test_loopback_names_resolve_and_pass_by_default() -> None:
    assert asyncio.run(resolve_and_check("localhost", FetchLimits())) is None
