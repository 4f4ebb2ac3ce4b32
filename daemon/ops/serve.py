"""`briefd serve`: the HTTP door to the queue, and the web page at `/` (docs/http-api.md; docs/contract.md, "HTTP").

Starlette routes on uvicorn: both are small, well kept and asyncio-native (the daemon's own
loop can host the server: `serve = true` runs it inside `briefd run`), Starlette's
StreamingResponse cancels a live event stream when its client goes away, and neither pulls in
anything beyond h11 and anyio, which httpx already brings.

Three modules: access.py (who may call, as set), api.py (the routes, as module functions, and the
guard that checks every request before they run) and this one (the listening socket, the door that
caps and evicts connections, and the server's start and stop, alone or inside `briefd run`).
Every route is a thin call into what the command line uses: `daemon.actions` (submit, cancel,
retry), `store.history` (list, search), the outbox files (reports, events, chart) and
`daemon.checks`. The rules the API adds are its own edges:
- Bound to loopback it needs no token; bound anywhere else it refuses to start without one
  (`serve_token` or `serve_token_file`), and every route but the page itself asks for
  `Authorization: Bearer <token>` (compared in constant time).
- A request that changes something must say `Content-Type: application/json` (a browser can
  only send that cross-site after a CORS preflight, which is never granted) and, if it names
  an Origin, be from this server's own; a Host header that is not this server's is refused
  (DNS rebinding). So a web page elsewhere cannot drive a loopback briefd.
- Bodies are read up to the brief's own limit (briefjson.MAX_BRIEF_BYTES) and no further; ids go
  through outbox.safe_outdir as everywhere else.
- The API must never take the research's descriptors, nor be taken by clients that say nothing
  (issue 19 #1, #7): a connection has HEADER_DEADLINE_S to send a whole request head (and
  BODY_DEADLINE_S for its body), and the connections held are capped at a quarter of the
  descriptor limit (at most MAX_CONNECTIONS); past the cap one is closed for the new one: a client
  that does not read its answers first, then one busy with pipelined requests, then the one that has
  owed a request head or body longest, and a client between requests last, so neither a flood of
  silent connections nor one of clients that never read can shut out a client that asks (issue 29
  #1, #11). An answer nobody reads has
  WRITE_DEADLINE_S, and one given before a body was read closes its connection (`_DoorProtocol`).
  What the flood makes uvicorn and asyncio log is rate-limited (`RateLimit`).
- Files are served only when they are regular files reached without following a link (`api.open_regular`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import signal
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .access import ServeError, access_for, start_line, token_file_warning
from .api import build_app
from ..core.settings import Settings

log = logging.getLogger("briefd")
door_log = logging.getLogger("briefd.api")  # the connections' own warnings, rate-limited

MAX_CONNECTIONS = 256  # connections held at once at most (a descriptor each), and ...
FD_SHARE = 4  # ... at most this fraction of the descriptor limit (1/4): the rest is the research's
MIN_CONNECTIONS = 8  # however low the limit, the page and a script can still connect
HEADER_DEADLINE_S = 10.0  # a connection that has not sent a whole request head by then is closed
BODY_DEADLINE_S = 30.0  # ... nor its body this long after its head (a brief of 1 MiB at 35 KB/s)
WRITE_DEADLINE_S = 10.0  # an answer the client reads none of this long (our buffer full) is aborted
LINGER_S = 2.0  # a connection closed after an answer has this long to read it before it is aborted
LISTEN_BACKLOG = 128  # kernel queue of connections not yet accepted (no descriptor of ours until accepted)
LOG_BURST = 5  # records of one kind logged per LOG_WINDOW_S; the rest counted, said with the next one
LOG_WINDOW_S = 60.0
LOG_KINDS = 256  # kinds the rate limit remembers at most (RateLimit says what a kind is)
RATE_LIMITED_LOGGERS = ("asyncio", "uvicorn.error", "briefd.api")  # an accept that fails logs each try


# --------------------------------------------------------------------------- running it


def bind(settings: Settings) -> socket.socket:
    """The listening socket, bound here so that a port in use is told as such (uvicorn would exit the process)."""
    host = settings.serve_host
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, settings.serve_port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        what = ("is in use (another briefd serve?)" if exc.errno == errno.EADDRINUSE
                else f"cannot be used ({exc.strerror or exc})")
        raise ServeError(f"{host} port {settings.serve_port} {what}: set serve_port (BRIEFD_SERVE_PORT, or "
                         "serve_port in briefd.toml) to a free port, or stop what holds it", exit_code=3) from None
    return sock


# --------------------------------------------------------------------------- the door: connections and their cost


def connection_cap() -> int:
    """How many connections the API holds at once: MAX_CONNECTIONS, or a quarter of the descriptor
    limit when that is lower, so the research (store, pages, library, model calls) keeps the rest.
    Read when the API starts, after the daemon has raised its soft limit to the hard one."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft // FD_SHARE))


class RateLimit(logging.Filter):
    """At most LOG_BURST records of one kind per LOG_WINDOW_S; the next one let through after a quiet
    spell says how many were left out. An accept that fails for want of descriptors is logged by
    asyncio at every try, with its traceback (482,520 of them in a minute, 213 MB of journal, in
    issue 19 #1): the first few say it, the count says the rest. A kind is the logger, the message's
    first line and the exception's type and words, so another failure is still told while one repeats."""

    def __init__(self, burst: int = LOG_BURST, window_s: float = LOG_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst, self.window_s, self.clock = burst, window_s, clock
        self.kinds: dict[tuple[str, str, str], list[float]] = {}  # kind -> [window start, logged, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, str(record.msg).split("\n", 1)[0][:200], _exception_words(record))
        now = self.clock()
        seen = self.kinds.get(kind)
        if seen is None or now - seen[0] >= self.window_s:
            if len(self.kinds) >= LOG_KINDS and seen is None:
                self.kinds.pop(next(iter(self.kinds)))  # the oldest kind: memory stays bounded
            left_out = int(seen[2]) if seen is not None else 0
            self.kinds[kind] = seen = [now, 0, 0]
            if left_out:
                record.msg = f"{record.getMessage()} ({left_out} more like it in the last minutes were not logged)"
                record.args = None
        if seen[1] >= self.burst:
            seen[2] += 1
            return False
        seen[1] += 1
        return True


def _exception_words(record: logging.LogRecord) -> str:
    exc = record.exc_info[1] if record.exc_info else None
    return f"{type(exc).__name__}: {str(exc)[:200]}" if exc is not None else ""


def limit_logging() -> None:
    """RateLimit on the loggers a flood of connections writes to (once per process)."""
    for name in RATE_LIMITED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RateLimit) for f in logger.filters):
            logger.addFilter(RateLimit())


# Which connections are closed to make room, in this order (each tier oldest first; `_DoorProtocol.tier_now`):
STALLED = 0  # its answer sits unread (the transport paused writing): a client that does not read
PIPELINED = 1  # it is being answered a request sent before it read the last answer (pipelined)
# It owes its first request's head, or a request's body, oldest first: one tier, so a client that has just
# connected and is sending its head goes after connections that have owed a head or a body for seconds
OWING = 2
KEPT_ALIVE = 3  # it was answered and may ask again: a real client between requests, closed last
TIERS = (STALLED, PIPELINED, OWING, KEPT_ALIVE)
EVICTED = {
    STALLED: "HTTP API: closed a connection that does not read its answers: %d were open (the cap)",
    PIPELINED: "HTTP API: closed a connection busy with pipelined requests: %d were open (the cap)",
    OWING: "HTTP API: closed the connection that had waited longest for its first request: %d were open (the cap)",
    KEPT_ALIVE: "HTTP API: closed the connection idle longest between requests: %d were open (the cap)",
}
OWING_BODY = "HTTP API: closed the connection that had waited longest for a request body: %d were open (the cap)"


@dataclass
class Door:
    """One server's connections: the cap, and the connections that may be closed to make room, by tier."""

    cap: int
    tiers: tuple[dict["_DoorProtocol", None], ...] = field(default_factory=lambda: tuple({} for _ in TIERS))

    def evictable(self) -> "tuple[_DoorProtocol, int] | None":
        """The connection to close first, and its tier: the oldest of the first tier that holds any."""
        for number, tier in enumerate(self.tiers):
            if tier:
                return next(iter(tier)), number
        return None


class _DoorProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the bounds it lacks (issue 19 #1, #7; issue 29 #1, #2, #7, #11).
    uvicorn has no header, body or write timeout, and its limit_concurrency is checked only once a
    request head has arrived, so connections that never finished theirs each held a descriptor, and
    counted against that limit until everyone got 503.

    - A connection ready for a request (just made, or its last response sent) must deliver the
      whole head within HEADER_DEADLINE_S, however it trickles, else it is closed; a body, once
      its head is in, has BODY_DEADLINE_S.
    - An answer the client does not read (the transport paused writing: the kernel's send buffer
      and ours are full) has WRITE_DEADLINE_S to start draining, else the connection is aborted:
      pipelined requests from a client that never reads cannot hold a connection for good.
    - An answer given before the request's body was read (401 to a body without a token, 413)
      closes the connection: the rest of the body is never waited for.
    - At most `door.cap` connections: past it one is closed to make room, in the order of TIERS
      (a client that does not read, then one answering pipelined requests, sent before the answers
      ahead of them were complete, then the one that has owed its first request's head or a body
      longest, and a real client between requests last). Only connections
      whose answer to a request asked anew is being made are never closed for room; when every
      connection is one, the new one is closed.
    - Every close for a deadline or for room is an abort: a close would wait for the unread answer
      to be sent, and keep the descriptor it was meant to free.
    """

    door: ClassVar[Door]
    deadlines: ClassVar[dict[object, float]] = {h11.IDLE: HEADER_DEADLINE_S, h11.SEND_BODY: BODY_DEADLINE_S}
    timer: asyncio.TimerHandle | None = None
    watched: object = None  # the h11 state (their side) the timer runs for: IDLE (the head) or SEND_BODY
    stall: asyncio.TimerHandle | None = None  # the write deadline, while the transport is paused writing
    tier: int | None = None  # where this connection sits in door.tiers (None: not to be closed for room)
    answered: int = 0  # responses completed on this connection: more than none makes it a client that reads
    pipelined: int = 0  # requests in a row that were in before the answer ahead of them was complete
    lingering: bool = False  # answered before its body was read: closing (`linger`)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        if len(self.connections) > self.door.cap and not self.make_room():
            door_log.warning("HTTP API: %d connections are open, all busy with requests (its cap): a new one "
                             "was closed", len(self.connections) - 1)
            transport.abort()
            return
        self.watch()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.unwatch()
        self.unstall()
        self.place(None)

    def handle_events(self) -> None:
        super().handle_events()
        self.watch()

    def on_response_complete(self) -> None:
        self.answered += 1
        early = self.conn.their_state is h11.SEND_BODY  # answered before the body was read: 401, 413
        super().on_response_complete()
        if early and not self.transport.is_closing():
            self.linger()
        # the next request was in already (uvicorn starts it from the buffer): pipelined, not asked anew
        self.pipelined = self.pipelined + 1 if self.conn.their_state not in (h11.IDLE, h11.CLOSED) else 0
        self.watch()

    def linger(self) -> None:
        """Close after an answer given before the body was read. A close with the body still arriving
        would make the kernel reset the connection, and the client, still sending, would never read the
        answer (a 413): so the answer is sent and writing shut, what still comes is read and dropped
        for LINGER_S, and then the connection is aborted."""
        self.unwatch()
        self.lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()
        self.loop.call_later(LINGER_S, self.abort)

    def data_received(self, data: bytes) -> None:
        if not self.lingering:  # a body no answer waits for any more is dropped unparsed
            super().data_received(data)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.stall is None:
            self.stall = self.loop.call_later(WRITE_DEADLINE_S, self.unread)
        self.place(self.tier_now())

    def resume_writing(self) -> None:
        super().resume_writing()
        self.unstall()
        self.place(self.tier_now())

    def unstall(self) -> None:
        if self.stall is not None:
            self.stall.cancel()
            self.stall = None

    def unread(self) -> None:
        self.stall = None
        self.drop("HTTP API: closed a connection that read none of its answer for %g s", WRITE_DEADLINE_S)

    def watch(self) -> None:
        """A deadline while the other side owes a head (h11's IDLE) or a body (SEND_BODY), from the
        moment it began to owe it; none while the request is being answered."""
        state = None if self.transport.is_closing() else self.conn.their_state
        if state is not self.watched:
            self.unwatch()
            deadline = self.deadlines.get(state)
            if deadline is not None:
                self.watched = state
                self.timer = self.loop.call_later(deadline, self.too_late)
        self.place(self.tier_now())

    def unwatch(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.watched = None

    def tier_now(self) -> int | None:
        """The tier this connection's state puts it in (TIERS), or None while its answer is being made
        and read, or once it is closing with nothing left unread."""
        if self.stall is not None or self.lingering:
            return STALLED
        if self.transport.is_closing():
            return None
        state = self.conn.their_state
        if state is h11.IDLE:
            return KEPT_ALIVE if self.answered else OWING
        if self.pipelined:
            return PIPELINED
        return OWING if state is h11.SEND_BODY else None

    def place(self, tier: int | None) -> None:
        """Move this connection to `tier` (at its end: the newest there), or out of every tier."""
        if tier == self.tier:
            return
        if self.tier is not None:
            self.door.tiers[self.tier].pop(self, None)
        self.tier = tier
        if tier is not None:
            self.door.tiers[tier][self] = None

    def too_late(self) -> None:
        if self.watched is h11.IDLE:
            self.drop("HTTP API: closed a connection that sent no whole request head within %g s", HEADER_DEADLINE_S)
        else:
            self.drop("HTTP API: closed a connection that sent no whole request body within %g s", BODY_DEADLINE_S)

    def make_room(self) -> bool:
        """Close the connection the tiers put first; False when none may be closed."""
        found = self.door.evictable()
        if found is None:
            return False
        oldest, tier = found
        body = tier == OWING and oldest.conn.their_state is h11.SEND_BODY
        oldest.drop(OWING_BODY if body else EVICTED[tier], self.door.cap)
        return True

    def drop(self, message: str, *args: object) -> None:
        """Abort this connection, saying why (a kind of message each: RateLimit counts them apart)."""
        self.unwatch()
        self.unstall()
        self.place(None)
        if not self.transport.is_closing():
            door_log.warning(message, *args)
        self.abort()

    def abort(self) -> None:
        """Close now, unsent answer and all: close() would wait for a reader that never comes, holding the
        descriptor, and even a socket closed with its answer unread stays in the kernel, its send buffer
        (a megabyte or more) held, while it probes a window that never opens. Lingering zero seconds
        makes the close a reset: the kernel drops the unsent answer and frees both at once."""
        self.place(None)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


def door_protocol(door: Door) -> type[_DoorProtocol]:
    """_DoorProtocol bound to one server's `door` (uvicorn makes the protocol from a class)."""

    class Guarded(_DoorProtocol):
        pass

    Guarded.door = door
    return Guarded


class _QuietServer(uvicorn.Server):
    """uvicorn's Server without its signal handlers, which re-raise SIGTERM once it has stopped (the
    process would end killed by it, not exit 0): briefd's own stop it (serve_forever), or the daemon's
    when it runs inside `briefd run` (serving_inside)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Server:
    """uvicorn's Server on a socket bound by `bind`."""

    def __init__(self, settings: Settings) -> None:
        access = access_for(settings)
        self.sock = bind(settings)
        self.line = start_line(settings, access)
        self.app = build_app(settings, access)
        self.door = Door(cap=connection_cap())
        # limit_concurrency off: it counted connections still sending their heads, and answered 503 to
        # everyone behind them (issue 19 #7); the door caps connections, and each runs one request at a time
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2, server_header=False, limit_concurrency=None,
                                http=door_protocol(self.door), ws="none", backlog=LISTEN_BACKLOG)
        limit_logging()  # after uvicorn.Config, which configures its loggers
        self.server = _QuietServer(config)

    async def run(self) -> None:
        try:
            await self.server.serve(sockets=[self.sock])
        finally:
            self.sock.close()
            await asyncio.to_thread(self.app.reader.close)

    def stop(self) -> None:
        self.server.should_exit = True

    def announce(self, settings: Settings) -> None:
        """The start line, and what the operator should fix: a token file others can read, a
        descriptor limit so low that the API's share of it holds fewer than MAX_CONNECTIONS."""
        log.info("%s", self.line)
        if (warning := token_file_warning(settings)) is not None:
            log.warning("%s", warning)
        if self.door.cap < MAX_CONNECTIONS:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            log.warning("the descriptor limit is %d (ulimit -n): the HTTP API holds at most %d connections; "
                        "raise it (LimitNOFILE= in the systemd unit, or ulimit -n)", soft, self.door.cap)


def serve_forever(settings: Settings) -> int:
    """`briefd serve` alone: the API until SIGTERM/SIGINT; a brief dropped through it waits for `briefd run`."""
    server = _Server(settings)
    server.announce(settings)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, server.stop)
        await server.run()

    asyncio.run(run())
    log.info("HTTP API stopped")
    return 0


@contextlib.asynccontextmanager
async def serving_inside(settings: Settings) -> AsyncIterator[None]:
    """The API on the daemon's own loop (`serve = true`), stopped when the daemon stops."""
    server = _Server(settings)
    task = asyncio.create_task(server.run(), name="briefd-serve")
    server.announce(settings)
    try:
        yield
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
