"""The HTTP API against clients that never read, bodies that never end, and probes asked in a loop
(issue 29 #1, #2, #7, #11, #12), each on loopback against a real `briefd serve` (or `briefd run` with
`serve = true`) in a subprocess, with a token set and not.

- About 100 connections, each sending hundreds of pipelined `GET /` (the page needs no token) with a
  small receive buffer and never reading, shut the API for good: each answer's write waited on a
  drain that never came, such a connection could not be closed for room, and past the cap every new
  connection was closed at once. Now an answer nobody reads has WRITE_DEADLINE_S, a connection that
  does not read is the first closed for room, and closing it frees its descriptor (the cap is a bound).
- A `POST /briefs` without the token was answered 401 at once, but its connection waited for the
  rest of the body for BODY_DEADLINE_S: just over the cap, a trickle of them shut the API. An answer
  given before the body was read now closes the connection.
- A keep-alive client between two requests was closed for room like a connection that never asked.
- `GET /healthz?fresh=1` in a loop sent one real search per request.

What a user notices is measured: the share of fresh requests from another client answered within 5 s,
during the attack and after it, and the daemon's descriptors.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from briefd.daemon.ops.serve import (
    BODY_DEADLINE_S,
    FD_SHARE,
    FRESH_MIN_S,
    LINGER_S,
    MAX_CONNECTIONS,
    WRITE_DEADLINE_S,
)
from tests.lab.workspace import Workspace
from tests.test_serve_attack import NOFILE, Served, descriptors

TOKEN = "flood-test-token-0123456789abcdef"
CAP = min(MAX_CONNECTIONS, NOFILE // FD_SHARE)  # the connections the attacked API may hold
ANSWER_WITHIN_S = 5.0  # a fresh request counts as answered when its answer came within this
SHARE = 0.95  # ... and at least this share of them must be
ATTACKERS = CAP + 36  # connections the attack keeps open: past the cap, as in the finding
# Where each configuration of the Done-when runs: the command, and the token (None: loopback without one)
CONFIGS = {"serve": (("serve",), None), "serve-token": (("serve",), TOKEN), "run-token": (("run",), TOKEN)}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "inbox").mkdir()
    return Workspace(root=tmp_path, searxng_url="http://127.0.0.1:9", ollama_url="http://127.0.0.1:9",
                     model="lab-scripted")


def start(ws: Workspace, config: str) -> Served:
    command, token = CONFIGS[config]
    env = {"BRIEFD_SERVE_TOKEN": token} if token else {}
    if command == ("run",):
        env["BRIEFD_SERVE"] = "true"
    return Served(ws, nofile=NOFILE, command=command, **env)


def headers_for(config: str) -> dict[str, str]:
    token = CONFIGS[config][1]
    return {"Authorization": f"Bearer {token}"} if token else {}


def gone(sock: socket.socket) -> bool:
    """Whether the server has closed `sock`, found without reading what it sent (a peek)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Fresh:
    """Another client: a new connection every `pace_s` asking `GET /briefs`, each answer timed."""

    def __init__(self, served: Served, headers: dict[str, str]) -> None:
        self.served, self.headers = served, headers
        self.answered = self.asked = 0
        self.failures: list[str] = []

    def ask(self) -> None:
        self.asked += 1
        started = time.monotonic()
        try:
            answer = httpx.get(f"{self.served.base}/briefs", headers={**self.headers, "Connection": "close"},
                               timeout=ANSWER_WITHIN_S, trust_env=False)
        except httpx.HTTPError as exc:
            self.failures.append(type(exc).__name__)
            return
        if answer.status_code == 200 and time.monotonic() - started <= ANSWER_WITHIN_S:
            self.answered += 1
        else:
            self.failures.append(str(answer.status_code))

    def share(self) -> float:
        return self.answered / max(1, self.asked)


class Attack:
    """Keeps `count` attacking connections open, opening a new one for each the server closes."""

    def __init__(self, port: int, count: int, open_one: "type[Connect]") -> None:
        self.port, self.count, self.open_one = port, count, open_one
        self.socks: list[socket.socket] = []
        self.closed_by_server = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            for sock in [s for s in self.socks if gone(s)]:
                self.socks.remove(sock)
                sock.close()
                self.closed_by_server += 1
            while len(self.socks) < self.count and not self.stop.is_set():
                try:
                    self.socks.append(self.open_one.connect(self.port))
                except OSError:
                    break
            for sock in self.socks:
                self.open_one.more(sock)
            time.sleep(0.5)

    def __enter__(self) -> "Attack":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        for sock in self.socks:
            sock.close()


class Connect:
    """How one attacking connection starts (`connect`) and what it sends now and then (`more`)."""

    @staticmethod
    def connect(port: int) -> socket.socket:
        raise NotImplementedError

    @staticmethod
    def more(sock: socket.socket) -> None:
        pass


class NeverReads(Connect):
    """Hundreds of pipelined `GET /` (the page: no token needed), a small receive buffer, never read."""

    @staticmethod
    def connect(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * 300)
        return sock


class TrickledBody(Connect):
    """`POST /briefs` with no token, a body announced at 100 kB, and a byte of it every other second."""

    @staticmethod
    def connect(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(f"POST /briefs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: 100000\r\n\r\n{{".encode())
        return sock

    @staticmethod
    def more(sock: socket.socket) -> None:
        try:
            sock.send(b" ")
        except OSError:
            pass


def under_attack(served: Served, attack: Attack, headers: dict[str, str], seconds: float) -> tuple[Fresh, int]:
    """Fresh requests for `seconds` while `attack` runs; them, and the daemon's most descriptors."""
    fresh = Fresh(served, headers)
    peak = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        fresh.ask()
        peak = max(peak, descriptors(served.proc.pid))
        time.sleep(0.25)
    return fresh, peak


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.parametrize("config", list(CONFIGS))
def test_clients_that_never_read_cannot_shut_the_api(ws: Workspace, config: str) -> None:
    served = start(ws, config)
    try:
        before = descriptors(served.proc.pid)
        with Attack(served.port, ATTACKERS, NeverReads) as attack:
            time.sleep(2)  # the flood is in: every connection's answers fill the buffers
            during, peak = under_attack(served, attack, headers_for(config), WRITE_DEADLINE_S + 6)
            attack.stop.set()  # no new attackers; those open stay open, unread
            attack.thread.join(30)
            after, _ = under_attack(served, attack, headers_for(config), 4)
            assert attack.closed_by_server > 0
    finally:
        served.stop()
    assert during.share() >= SHARE, (during.answered, during.asked, during.failures[:10])
    assert after.share() >= SHARE, (after.answered, after.asked, after.failures[:10])
    # the cap is a bound: a connection closed for room or its deadline frees its descriptor at once
    assert peak <= before + CAP + 16, (before, peak, CAP)
    log = served.log.read_text()
    assert ("closed a connection that does not read its answers" in log
            or f"closed a connection that read none of its answer for {WRITE_DEADLINE_S:g} s" in log), log[-3000:]


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.parametrize("config", ["serve", "serve-token"])
def test_bodies_trickled_past_the_cap_cannot_shut_the_api(ws: Workspace, config: str) -> None:
    """With a token, each is answered 401 and closed at once; without one, the connection owing a body
    longest is closed for room before a client that asks is turned away."""
    served = start(ws, config)
    try:
        with Attack(served.port, ATTACKERS, TrickledBody) as attack:
            time.sleep(2)
            during, _ = under_attack(served, attack, headers_for(config), 12)
            attack.stop.set()
            attack.thread.join(30)
            after, _ = under_attack(served, attack, headers_for(config), 4)
    finally:
        served.stop()
    assert during.share() >= SHARE, (during.answered, during.asked, during.failures[:10])
    assert after.share() >= SHARE, (after.answered, after.asked, after.failures[:10])
    assert not [p for p in ws.inbox.iterdir() if not p.name.startswith(".")], "nothing half-posted was written"


@pytest.mark.lab
def test_an_answer_given_before_the_body_closes_the_connection(ws: Workspace) -> None:
    """401 to a body without the token (Expect: 100-continue: no byte of it sent), then the close, not
    BODY_DEADLINE_S of waiting for a body nobody will read."""
    served = start(ws, "serve-token")
    try:
        for expect in ("Expect: 100-continue\r\n", ""):
            with socket.create_connection(("127.0.0.1", served.port), timeout=BODY_DEADLINE_S) as sock:
                sock.sendall(f"POST /briefs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                             f"Content-Type: application/json\r\nContent-Length: 100000\r\n{expect}\r\n".encode())
                started = time.monotonic()
                received = b""
                sock.settimeout(0.5)
                while time.monotonic() - started < BODY_DEADLINE_S + 5:  # a byte of body now and then
                    try:
                        if not (chunk := sock.recv(65536)):
                            break
                        received += chunk
                    except TimeoutError:
                        with contextlib.suppress(OSError):
                            sock.sendall(b" ")
                    except OSError:
                        break
                took = time.monotonic() - started
                assert received.startswith(b"HTTP/1.1 401"), received[:200]
                assert took < LINGER_S, f"the connection was held {took:.1f} s after its 401"
    finally:
        served.stop()


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer (head and Content-Length bytes of body: they may come in two reads); b"" at a close."""
    received = b""
    while b"\r\n\r\n" not in received:
        if not (chunk := sock.recv(65536)):
            return b""
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        if not (chunk := sock.recv(65536)):
            return b""
        body += chunk
    return received


def silent(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


@pytest.mark.lab
@pytest.mark.slow
def test_a_keep_alive_client_between_requests_is_closed_for_room_last(ws: Workspace) -> None:
    served = start(ws, "serve")
    flood: list[socket.socket] = []
    stop = threading.Event()

    def churn() -> None:  # new silent connections as fast as they open: each past the cap makes room
        while not stop.is_set():
            try:
                flood.append(silent(served.port))
            except OSError:
                time.sleep(0.05)
            if len(flood) > CAP * 2:
                flood.pop(0).close()

    thread = threading.Thread(target=churn, daemon=True)
    failed = 0
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as client:
            request = f"GET /briefs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode()
            client.sendall(request)
            assert read_answer(client).startswith(b"HTTP/1.1 200")  # answered once: a client, between requests
            thread.start()
            time.sleep(1)
            for _ in range(20):  # the same connection, a request every 0.3 s
                try:
                    client.sendall(request)
                    answer = read_answer(client)
                except OSError:
                    answer = b""
                if not answer.startswith(b"HTTP/1.1 200"):
                    failed += 1
                    break
                time.sleep(0.3)
    finally:
        stop.set()
        thread.join(30)
        for sock in flood:
            sock.close()
        served.stop()
    assert failed == 0, "the keep-alive client was closed for room while silent connections were open"
    assert "closed the connection that had waited longest for its first request" in served.log.read_text()


class CountingSearx(http.server.BaseHTTPRequestHandler):
    """A SearXNG stand-in that answers an empty JSON search and counts the searches it was sent."""

    searches = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).searches += 1
        body = b'{"query": "x", "results": [], "unresponsive_engines": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def searx() -> Iterator[str]:
    CountingSearx.searches = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingSearx)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.lab
def test_healthz_fresh_in_a_loop_sends_one_search_not_one_each(tmp_path: Path, searx: str) -> None:
    (tmp_path / "inbox").mkdir()
    ws = Workspace(root=tmp_path, searxng_url=searx, ollama_url="http://127.0.0.1:9", model="lab-scripted")
    served = Served(ws)
    try:
        with served.client() as client:
            started = time.monotonic()
            answers = [client.get("/healthz", params={"fresh": "1"}) for _ in range(30)]
            took = time.monotonic() - started
    finally:
        served.stop()
    assert took < FRESH_MIN_S, "the loop ran longer than the rate limit: the count below would mean nothing"
    assert {a.status_code for a in answers} == {503}, "the model server is down: the probe says so"
    assert CountingSearx.searches == 1, f"{CountingSearx.searches} searches sent for 30 fresh=1 in {took:.1f} s"
    assert answers[-1].json()["checked_s_ago"] > 0, "the answers after the first come from its probe"
