"""daemon.fetch against a real HTTP server on loopback that misbehaves on purpose.

Every hostile page a search engine could hand briefd has a route here: redirect
loops, endless streams, lying Content-Length, a trickle, a server that never
answers, a redirect into the cloud metadata service.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from briefd.daemon import __version__
from briefd.daemon.sources.fetch import (
    DECODE_PIECE_BYTES,
    BoundedDecoder,
    FetchLimits,
    FetchResult,
    check_url,
    default_tls,
    fetch_page,
    make_client,
    resolve_vetted,
    vetted_transport,
)
from lab import web
from lab.servers import free_port

PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>Steel output</title></head>"
    b"<body><article><p>Steel output rose 4.5% in 2025, the trade body said.</p></article></body></html>"
)
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
        self.server.hosts.append(self.headers.get("Host", ""))
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
        elif path == "/deflate-zlib":
            self.send(200, zlib.compress(PAGE), "text/html; charset=utf-8", encoding="deflate")
        elif path == "/deflate-raw":
            raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
            self.send(200, raw.compress(PAGE) + raw.flush(), "text/html; charset=utf-8", encoding="deflate")
        elif path == "/brotli":
            self.send(200, PAGE, "text/html; charset=utf-8", encoding="br")
        elif path == "/to-metadata":
            self.redirect(302, "http://169.254.169.254/latest/meta-data/iam/security-credentials/")
        elif path == "/to-rebinding":
            self.redirect(302, f"http://{REBINDING_NAME}:{self.server.server_port}/page")
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

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Hostile)
        self.hits: list[str] = []
        self.user_agents: list[str] = []
        self.hosts: list[str] = []
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
    assert server.user_agents[-1] == f"briefd/{__version__} (+offline research daemon)"


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


def reason_for(host: str, limits: FetchLimits) -> str | None:
    """Why a host may not be fetched, or None (`resolve_vetted` without its addresses)."""
    return asyncio.run(resolve_vetted(host, limits)).reason


@pytest.mark.parametrize("path", ["/deflate-zlib", "/deflate-raw"])
def test_deflate_body_is_decoded_wrapped_or_raw(server: LabServer, path: str) -> None:
    result = fetch(server.url(path))
    assert result.ok, result.error
    assert result.body == PAGE


def test_a_coding_briefd_did_not_ask_for_is_refused_for_good(server: LabServer) -> None:
    result = fetch(server.url("/brotli"))
    assert not result.ok
    assert result.error == "refused: content encoding 'br' not asked for (briefd accepts gzip, deflate)"
    assert not result.transient


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


def test_the_default_limit_holds_without_a_content_length(server: LabServer) -> None:
    limit = FetchLimits().max_bytes  # the settings default is pinned in tests/core/test_settings.py
    result = fetch(server.url("/huge-undeclared"))
    assert result.error == f"too large (>{limit} bytes)"
    assert len(result.body) == limit


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
    assert result.error == "timeout after 1.5s" and result.timed_out
    assert not result.ok
    assert result.truncated  # some bytes came, not the whole page
    assert 0 < len(result.body) < 100_000
    assert took < 3.0


def test_server_that_never_answers_times_out(server: LabServer) -> None:
    started = time.monotonic()
    result = fetch(server.url("/hang"), FetchLimits(timeout_s=1.0))
    assert result.error == "timeout after 1s"
    assert result.status is None
    assert result.transient and result.timed_out  # a slow page, remembered as such by the loop
    assert time.monotonic() - started < 2.5


def test_connection_refused_is_said_plainly() -> None:
    result = fetch(f"http://127.0.0.1:{free_port()}/")
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
    assert reason_for("169.254.169.254", allowed) is None
    assert reason_for("169.254.169.254", FetchLimits()) == (
        "refused: link-local address 169.254.169.254"
    )


def test_allow_private_false_refuses_loopback_by_name_and_by_address(server: LabServer) -> None:
    public_only = FetchLimits(allow_private=False)
    assert reason_for("localhost", public_only) is not None
    assert "loopback" in (reason_for("localhost", public_only) or "")
    assert check_url("http://10.1.2.3/", public_only) == "refused: private address 10.1.2.3"
    before = len(server.hits)
    result = fetch(server.url("/page"), public_only)
    assert result.error == "refused: loopback address 127.0.0.1"
    assert len(server.hits) == before  # never reached the server


def test_loopback_names_resolve_and_pass_by_default() -> None:
    assert reason_for("localhost", FetchLimits()) is None


# --------------------------------------------------------------------------- compression bombs


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("size", [0, 1, DECODE_PIECE_BYTES - 1, DECODE_PIECE_BYTES, DECODE_PIECE_BYTES + 1,
                                  3 * DECODE_PIECE_BYTES, 1_000_003])
@pytest.mark.parametrize(("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress),
                                                ("deflate", _raw_deflate)])
def test_bounded_decoding_gives_back_every_byte_however_the_wire_splits_it(size: int, coding: str, encode) -> None:
    data = (bytes(range(256)) * 7 + b"briefd")[:size] * (size // 1798 + 1)
    data = data[:size]
    wire = encode(data)
    for step in (1, 7, 4096, max(1, len(wire))):
        decoder = BoundedDecoder(coding)
        pieces = [piece for i in range(0, len(wire), step) for piece in decoder.decode(wire[i:i + step])]
        assert b"".join(pieces) == data
        assert all(len(piece) <= DECODE_PIECE_BYTES for piece in pieces)


BOMB_LIMIT = 5_000_000
ADDRESS_SPACE_HEADROOM = 1 << 30
"""The bomb fetch runs in a child whose address space may grow by 1 GiB at most: a regression
then fails with MemoryError instead of taking gigabytes from the machine."""

MEASURE_FETCH = r"""
import asyncio, json, resource, sys
from briefd.daemon.sources.fetch import FetchLimits, fetch_page, make_client

warm_url, url, limit, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open("/proc/self/status") as status:
    vm_bytes = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes + headroom, resource.RLIM_INFINITY))


def peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def main() -> dict:
    limits = FetchLimits(max_bytes=limit, timeout_s=60)
    async with make_client(limits) as client:
        warm = await fetch_page(client, warm_url, limits)  # imports, pools and buffers warmed up
        assert warm.ok, warm.error
        before = peak_kb()
        try:
            result = await fetch_page(client, url, limits)
        except MemoryError:
            return {"escaped": "MemoryError"}
        return {"error": result.error, "transient": result.transient, "body": len(result.body),
                "grew_kb": peak_kb() - before}


print(json.dumps(asyncio.run(main())))
"""


def fetch_in_child(server: LabServer, url: str, limit: int = BOMB_LIMIT,
                   headroom: int = ADDRESS_SPACE_HEADROOM) -> dict[str, object]:
    """Fetch `url` in a fresh interpreter under an address-space cap; what it got and how much it grew."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE_FETCH, server.url("/page"), url, str(limit), str(headroom)],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("bomb", ["nested-bomb", "deflate-gzip-bomb"])
def test_a_stacked_compression_bomb_is_refused_for_good_without_decoding_it(
        server: LabServer, hostile_web: str, bomb: str) -> None:
    outcome = fetch_in_child(server, f"{hostile_web}/hostile/{bomb}")
    assert "escaped" not in outcome, "the fetch ran out of memory instead of refusing the page"
    codings = web.BOMBS[bomb]()[0]
    assert outcome["error"] == (f"refused: stacked content encodings ({codings}); "
                                "briefd decodes one layer of gzip, deflate")
    assert outcome["transient"] is False, "the same URL will send the same bomb: it is bad for good"
    assert outcome["body"] == 0
    assert int(outcome["grew_kb"]) < 60_000  # type: ignore[call-overload]


@pytest.mark.parametrize("bomb", ["gzip-bomb", "deflate-bomb", "raw-deflate-bomb"])
def test_a_single_layer_bomb_stops_at_the_limit_with_memory_bounded(
        server: LabServer, hostile_web: str, bomb: str) -> None:
    outcome = fetch_in_child(server, f"{hostile_web}/hostile/{bomb}")
    assert "escaped" not in outcome, "the fetch ran out of memory instead of stopping at the limit"
    coding, body = web.BOMBS[bomb]()
    error = str(outcome["error"])
    assert error.startswith(f"too large (>{BOMB_LIMIT} bytes) once decoded from ")
    assert error.endswith(f" {coding} bytes")
    assert int(error.split("decoded from ")[1].split()[0]) <= len(body)
    assert outcome["transient"] is False
    assert outcome["body"] == BOMB_LIMIT
    # 5 MB kept, and once more as the result's bytes; the rest is the interpreter's slack.
    # (httpx's own decoding grew ~127 MB here for a single layer, gigabytes for two.)
    assert int(outcome["grew_kb"]) < 60_000  # type: ignore[call-overload]


def test_running_out_of_memory_is_a_failure_for_good_not_an_exception(server: LabServer, hostile_web: str) -> None:
    # A limit set far above what the process may map: the gibibyte bomb exhausts memory first.
    outcome = fetch_in_child(server, f"{hostile_web}/hostile/gzip-bomb", limit=4 << 30, headroom=256 << 20)
    assert "escaped" not in outcome, "MemoryError escaped fetch_page: the brief would retry the page forever"
    assert outcome["error"] == "out of memory reading this page; not fetched again"
    assert outcome["transient"] is False
    assert outcome["body"] == 0


# --------------------------------------------------------------------------- DNS rebinding

REBINDING_NAME = "rebinding.briefd.test"


class Listener:
    """A bare TCP listener that records every byte anyone sends it (and never answers)."""

    def __init__(self, family: socket.AddressFamily, host: str, port: int = 0) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind((host, port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.received = bytearray()
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.settimeout(0.2)
            with conn:
                while not self.stopping.is_set():
                    try:
                        data = conn.recv(65536)
                    except TimeoutError:
                        continue
                    if not data:
                        break
                    self.received += data

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LabServer, Listener, list[str]]]:
    """A name that answers 127.0.0.1 (allowed) the first time and :: (refused) ever after.

    The allowed address has the real page server on port P; the refused one ends up
    at a bare listener on [::1]:P (Linux connects :: to the local host), so the test
    sees on a real socket whether any byte went where the check said no. Returns the
    page server, that listener, and the names asked of the resolver.
    """
    refused = Listener(socket.AF_INET6, "::1")
    allowed = LabServer(port=refused.port)
    thread = threading.Thread(target=allowed.serve_forever, daemon=True)
    thread.start()
    asked: list[str] = []
    real = socket.getaddrinfo

    def resolver(host: str | bytes | None, port: str | int | None, family: int = 0, type: int = 0,
                 proto: int = 0, flags: int = 0) -> list:  # type: ignore[type-arg]
        name = host.decode() if isinstance(host, bytes) else host
        if name != REBINDING_NAME:
            return real(host, port, family, type, proto, flags)
        asked.append(name)
        number = int(port or 0)
        if len(asked) == 1:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", number))]
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::", number, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    yield allowed, refused, asked
    allowed.stopping.set()
    allowed.shutdown()
    allowed.server_close()
    refused.close()


def test_a_name_that_rebinds_after_the_check_gets_no_byte_to_the_refused_address(rebinding) -> None:
    allowed, refused, asked = rebinding
    assert check_url("http://[::]/", FetchLimits()) == "refused: unroutable address ::"
    result = fetch(f"http://{REBINDING_NAME}:{refused.port}/page", FetchLimits(timeout_s=3))
    time.sleep(0.3)  # let the listener's thread take whatever might have arrived
    assert bytes(refused.received) == b"" and refused.connections == 0, "bytes reached the refused address"
    assert result.ok, result.error
    assert result.body == PAGE
    assert allowed.hits == ["/page"]
    assert asked == [REBINDING_NAME], "the name must be resolved once per hop, then connected to as checked"


def test_each_redirect_hop_is_resolved_and_pinned_afresh(rebinding) -> None:
    _, refused, _ = rebinding
    first = fetch(f"http://{REBINDING_NAME}:{refused.port}/page", FetchLimits(timeout_s=3))
    assert first.ok
    # the name now answers the refused address: a redirect to it is refused at that hop
    result = fetch(f"http://127.0.0.1:{refused.port}/to-rebinding", FetchLimits(timeout_s=3))
    time.sleep(0.3)
    assert result.error == f"refused: unroutable address :: (for {REBINDING_NAME})"
    assert result.status is None
    assert bytes(refused.received) == b"" and refused.connections == 0


def test_the_fetch_client_connects_nowhere_unvetted(server: LabServer) -> None:
    before = len(server.hits)

    async def go() -> None:
        async with make_client(FetchLimits()) as client:
            await client.get(server.url("/page"))

    with pytest.raises(httpx.ConnectError, match="not resolved and vetted"):
        asyncio.run(go())
    assert len(server.hits) == before


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate; runs wherever openssl is installed (CI has it)")
def test_https_to_a_pinned_address_still_checks_the_certificate_for_the_name(
        rebinding, tmp_path: Path) -> None:
    """Pinning swaps only the TCP target: SNI, the Host header and certificate checks use the name."""
    _, refused, _ = rebinding
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={REBINDING_NAME}",
                    "-addext", f"subjectAltName=DNS:{REBINDING_NAME}"], check=True, capture_output=True)
    tls = LabServer()
    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,misc,return-value]
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    threading.Thread(target=tls.serve_forever, daemon=True).start()
    trusted = ssl.create_default_context(cafile=str(cert))
    limits = FetchLimits(timeout_s=5)

    async def go(url: str) -> FetchResult:
        async with make_client(limits, verify=trusted) as client:
            return await fetch_page(client, url, limits)

    try:
        by_name = asyncio.run(go(f"https://{REBINDING_NAME}:{tls.server_port}/page"))
        by_address = asyncio.run(go(f"https://127.0.0.1:{tls.server_port}/page"))
    finally:
        tls.stopping.set()
        tls.shutdown()
        tls.server_close()
    assert by_name.ok, by_name.error
    assert by_name.body == PAGE
    assert names[0] == REBINDING_NAME
    assert tls.hosts[0] == f"{REBINDING_NAME}:{tls.server_port}"
    assert by_address.error == "TLS error: CERTIFICATE_VERIFY_FAILED"  # the certificate names the host, not the IP
    assert refused.connections == 0


def test_every_client_shares_one_tls_context_that_checks_certificates() -> None:
    """Made once a process (each one loads the CA bundle: 40 ms of CPU, five times at each daemon start), and
    what httpx's default would be: certificates and host names checked against the public CAs."""
    shared = default_tls()
    assert default_tls() is shared
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
    assert shared.get_ca_certs(), "the CA bundle is loaded"
    pools = [vetted_transport(FetchLimits()).inner._pool,  # type: ignore[attr-defined]
             make_client(FetchLimits())._transport.inner._pool]  # type: ignore[attr-defined]
    assert all(pool._ssl_context is shared for pool in pools)
