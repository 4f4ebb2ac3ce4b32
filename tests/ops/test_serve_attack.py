"""The HTTP API under attack (issue 19 #1, #7, #8, #10), each on loopback against a real `briefd serve`
in a subprocess (no lab servers: the API alone never calls them).

- Connections that send a request line and then trickle headers, never the blank line, took every
  descriptor of the daemon (no token needed: the guard runs after the headers) and, below that,
  made uvicorn answer 503 to everyone. Now each has HEADER_DEADLINE_S to finish its head, and the
  API holds at most a quarter of the descriptor limit: a client that asks still gets its answers.
- An accept that fails for want of descriptors was logged at every try (482,520 tracebacks a minute).
- A burst of event streams got past the stream cap: the slot was taken after the answer had started.
- A report file that is a symbolic link was served: the file it points to, anywhere.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from briefd.daemon.ops.api import MAX_STREAMS
from briefd.daemon.ops.serve import (
    BODY_DEADLINE_S,
    FD_SHARE,
    HEADER_DEADLINE_S,
    LOG_BURST,
    LOG_WINDOW_S,
    MAX_CONNECTIONS,
    RateLimit,
)
from tests.conftest import wait_for
from lab.servers import free_port
from lab.workspace import BRIEFD, Workspace

CLOSED_PORT = "http://127.0.0.1:9"  # the services `briefd serve` is never asked to reach here
NOFILE = 256  # the descriptor limit the attacked daemon runs under: its API may hold a quarter of it
CAP = min(MAX_CONNECTIONS, NOFILE // FD_SHARE)  # the connections the API holds under that limit
SLOW = 250  # connections that never finish their heads: enough to take every descriptor before the fix
JSON = {"Content-Type": "application/json"}


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))



def limited(nofile: int) -> Callable[[], None]:
    """A preexec_fn: the child runs under `nofile` descriptors, soft and hard (as a unit's LimitNOFILE)."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "inbox").mkdir()
    return Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")


class Served:
    """`briefd serve` in a subprocess on a free port, its log in the workspace."""

    def __init__(self, ws: Workspace, nofile: int | None = None, command: tuple[str, ...] = ("serve",),
                 **env: str) -> None:
        self.ws, self.port = ws, free_port()
        self.log = ws.root / f"serve-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([BRIEFD, *command], env=ws.env(BRIEFD_SERVE_PORT=str(self.port), **env),
                                         cwd=ws.root, stdout=log, stderr=log,
                                         preexec_fn=limited(nofile) if nofile else None)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_for(self.answers, 60, "the API to answer")

    def answers(self) -> bool:
        assert self.proc.poll() is None, f"briefd serve exited {self.proc.returncode}: {self.log.read_text()}"
        try:
            return httpx.get(f"{self.base}/", timeout=2, trust_env=False).status_code == 200
        except httpx.TransportError:
            return False

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=5, trust_env=False)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def served(ws: Workspace) -> Iterator[Served]:
    server = Served(ws)
    yield server
    server.stop()


def slow_head(port: int) -> socket.socket:
    """A connection that sends a request line and one header, and never the blank line that ends the head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET /briefs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    return sock


def trickle(socks: dict[socket.socket, bool]) -> None:
    """One more header on each connection still open (the attack's one header every few seconds)."""
    for sock, is_open in socks.items():
        if is_open:
            try:
                sock.sendall(b"X-Still-Here: 1\r\n")
            except OSError:
                socks[sock] = False


def closed_by_server(socks: dict[socket.socket, bool]) -> None:
    """Mark the connections the server has closed (readable, and reading gives EOF or a reset)."""
    readable, _, _ = select.select([s for s, is_open in socks.items() if is_open], [], [], 0.5)
    for sock in readable:
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            socks[sock] = False


@dataclass
class Flood:
    """A daemon's API under attack: the connections held open (each with whether the server still has it
    open), the daemon's descriptors before them, and when they began."""

    server: Served
    socks: dict[socket.socket, bool] = field(default_factory=dict)
    before: int = 0
    started: float = 0.0


@contextmanager
def flooded(ws: Workspace, connect: Callable[[int], socket.socket], count: int) -> Iterator[Flood]:
    """A served daemon under `count` connections made by `connect`; at the end they are closed and the
    daemon is stopped (its log is then whole, for the test to read)."""
    flood = Flood(Served(ws, nofile=NOFILE))
    try:
        flood.before = descriptors(flood.server.proc.pid)
        flood.started = time.monotonic()
        for _ in range(count):
            flood.socks[connect(flood.server.port)] = True
        yield flood
    finally:
        for sock in flood.socks:
            sock.close()
        flood.server.stop()


@pytest.mark.lab
@pytest.mark.slow
def test_connections_that_never_finish_their_heads_cannot_take_the_api(ws: Workspace) -> None:
    cap = CAP
    with flooded(ws, slow_head, SLOW) as flood:
        server, socks, before, started = flood.server, flood.socks, flood.before, flood.started
        peak, answered = before, 0
        with server.client() as client:
            while time.monotonic() - started < HEADER_DEADLINE_S * 0.7:  # while the flood is held
                answer = client.get("/briefs", headers={"Connection": "close"})  # a new connection each time
                assert answer.status_code == 200, answer.text
                answered += 1
                trickle(socks)
                peak = max(peak, descriptors(server.proc.pid))
                time.sleep(0.2)
        assert answered >= 5
        # the API's connections stay within its share of the limit, far from taking the research's
        assert peak <= before + cap + 16 < NOFILE, (before, peak, cap)
        while any(socks.values()) and time.monotonic() - started < HEADER_DEADLINE_S + 20:
            trickle(socks)
            closed_by_server(socks)
        still_open = sum(socks.values())
        assert still_open == 0, f"{still_open} connections still open {HEADER_DEADLINE_S:g} s after their head began"
        assert time.monotonic() - started >= HEADER_DEADLINE_S * 0.7  # not closed at once: the deadline
        with server.client() as client:
            assert client.get("/briefs").status_code == 200
        assert descriptors(server.proc.pid) <= before + 4
    log = server.log.read_text()
    assert f"HTTP API: closed a connection that sent no whole request head within {HEADER_DEADLINE_S:g} s" in log
    assert len(log.splitlines()) < 50, "the closing of each connection is rate-limited in the log"


@pytest.mark.lab
@pytest.mark.slow
def test_a_connection_that_finishes_its_head_in_time_is_answered(served: Served) -> None:
    """The deadline is on the head as a whole, not on each packet: a head sent in pieces is answered."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=HEADER_DEADLINE_S + 10) as sock:
        for piece in (b"GET /briefs HTTP/1.1\r\n", f"Host: 127.0.0.1:{served.port}\r\n".encode(), b"\r\n"):
            sock.sendall(piece)
            time.sleep(HEADER_DEADLINE_S / 5)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(HEADER_DEADLINE_S / 5)  # kept alive: the next request on it has its own deadline
        sock.sendall(f"GET /briefs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")


def slow_body(port: int) -> socket.socket:
    """A brief posted with its whole head and a few bytes of a body it never finishes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST /briefs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 100000\r\n\r\n{{\"question\": \"".encode())
    return sock


@pytest.mark.lab
@pytest.mark.slow
def test_bodies_that_never_end_hold_the_api_no_longer_than_their_deadline(ws: Workspace) -> None:
    """Past the cap, the connection that has owed its body longest is closed for a client that asks
    (issue 29 #2: before, the new one was closed, and trickled bodies shut the API), and a body that
    never ends is closed at its deadline, however it trickles."""
    cap = CAP
    with flooded(ws, slow_body, cap) as flood:
        server, socks, before, started = flood.server, flood.socks, flood.before, flood.started
        time.sleep(1)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
            extra.sendall(f"GET /briefs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
            assert extra.recv(4096).startswith(b"HTTP/1.1 200"), "past the cap, a client that asks is answered"
        closed_by_server(socks)
        assert sum(socks.values()) == cap - 1, "the body owed longest was closed for it, and only that one"
        assert descriptors(server.proc.pid) <= before + cap + 16
        while any(socks.values()) and time.monotonic() - started < BODY_DEADLINE_S + 30:
            for sock, is_open in socks.items():  # a byte of body now and then: the deadline is on the whole
                if is_open:
                    try:
                        sock.sendall(b"x")
                    except OSError:
                        socks[sock] = False
            closed_by_server(socks)
        assert sum(socks.values()) == 0, "bodies still open past their deadline"
        assert time.monotonic() - started >= BODY_DEADLINE_S * 0.9
        with server.client() as client:
            assert client.get("/briefs").status_code == 200
    assert f"sent no whole request body within {BODY_DEADLINE_S:g} s" in server.log.read_text()
    assert not [p for p in ws.inbox.iterdir() if not p.name.startswith(".")], "nothing half-posted was written"


ACCEPT_FAILS = """
import asyncio, logging, os, sys
from briefd.daemon.ops.serve import serving_inside
from briefd.daemon.core.settings import load_settings

async def main() -> None:
    async with serving_inside(load_settings({}, os.environ, None)):
        await asyncio.sleep(0.5)
        held = []
        try:
            while True:  # what else in the daemon might have taken: every descriptor
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        print("full", flush=True)
        await asyncio.sleep(float(sys.argv[1]))
        for fd in held:
            os.close(fd)

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
asyncio.run(main())
"""


@pytest.mark.lab
def test_accepts_that_fail_for_want_of_descriptors_are_logged_a_few_times_not_at_every_try(ws: Workspace) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", ACCEPT_FAILS, "4"], env=ws.env(BRIEFD_SERVE_PORT=str(port)),
                            cwd=ws.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=limited(NOFILE))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "full\n"
    socks = []
    for _ in range(30):  # connections the kernel takes, which the daemon cannot accept
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.1)
    _, err = proc.communicate(timeout=60)
    for sock in socks:
        sock.close()
    assert proc.returncode == 0, err
    failures = err.count("socket.accept() out of system resource")
    assert 1 <= failures <= LOG_BURST, err[-3000:]
    assert len(err) < 100_000


def record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, exc_info)


def test_the_rate_limit_tells_a_repeated_failure_a_few_times_then_how_often_and_another_at_once() -> None:
    now = [0.0]
    limit = RateLimit(clock=lambda: now[0])
    full = OSError(24, "Too many open files")
    storm = [limit.filter(record("socket.accept() out of system resource\nsocket: <fd=6>", full))
             for _ in range(1000)]
    assert storm.count(True) == LOG_BURST and storm[:LOG_BURST] == [True] * LOG_BURST
    assert limit.filter(record("Task exception was never retrieved", ValueError("inbox gone")))  # another failure
    now[0] += LOG_WINDOW_S
    later = record("socket.accept() out of system resource\nsocket: <fd=6>", full)
    assert limit.filter(later)
    assert f"({1000 - LOG_BURST} more like it" in later.getMessage()


def raw_request(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


@pytest.mark.lab
def test_a_burst_of_event_streams_gets_no_more_than_the_cap(served: Served) -> None:
    with served.client() as client:
        client.post("/briefs", headers=JSON, json={"id": "watched", "question": "What holds?"}).raise_for_status()
    burst = [raw_request(served.port, "/briefs/watched/events") for _ in range(150)]  # all sent before any answer
    try:
        codes = [sock.recv(4096)[:12] for sock in burst]
        assert codes.count(b"HTTP/1.1 200") == MAX_STREAMS, codes
        assert codes.count(b"HTTP/1.1 503") == 150 - MAX_STREAMS
    finally:
        for sock in burst:
            sock.close()
    with served.client() as client:  # every slot was given back when its stream ended
        wait_for(lambda: client.get("/healthz").json()["streams"] == 0, 30, "the streams to close")
        with client.stream("GET", "/briefs/watched/events") as stream:
            assert stream.status_code == 200


@pytest.mark.lab
def test_a_report_file_that_is_a_link_or_not_a_regular_file_is_not_served(served: Served, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the private key of someone else\n")
    (tmp_path / "secret.json").write_text(json.dumps({"id": "planted", "status": "done", "secret": "theirs"}))
    planted = served.ws.outbox / "planted"
    planted.mkdir(parents=True)
    (planted / "report.md").symlink_to(secret)
    (planted / "report.json").symlink_to(tmp_path / "secret.json")
    (planted / "chart.svg").symlink_to(secret)
    os.mkfifo(planted / "report.html")  # would block a reader that opened it without O_NONBLOCK
    honest = served.ws.outbox / "honest"
    honest.mkdir()
    (honest / "report.md").write_text("# What holds\n")
    with served.client() as client:
        for path in ("report.md", "report.json", "chart.svg", "chart", "report.html"):
            answer = client.get(f"/briefs/planted/{path}")
            assert answer.status_code == 404, (path, answer.text)
            assert "not served" in answer.json()["error"] and "someone else" not in answer.text
        assert "theirs" not in client.get("/briefs/planted").text
        served_md = client.get("/briefs/honest/report.md")  # a regular file still is
        assert served_md.status_code == 200 and served_md.text == "# What holds\n"
        assert served_md.headers["content-length"] == str(len("# What holds\n"))
        assert client.head("/briefs/honest/report.md").status_code == 200
