"""`briefd serve`: the HTTP door to the queue, and the web page at `/` (CONTRACT.md, "HTTP").

Starlette routes on uvicorn: both are small, well kept and asyncio-native (the daemon's own
loop can host the server: `serve = true` runs it inside `briefd run`), Starlette's
StreamingResponse cancels a live event stream when its client goes away, and neither pulls in
anything beyond h11 and anyio, which httpx already brings.

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
- Bodies are read up to the brief's own limit (brief.MAX_BRIEF_BYTES) and no further; ids go
  through report.safe_outdir as everywhere else.
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
- Files are served only when they are regular files reached without following a link (`open_regular`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import os
import resource
import secrets
import signal
import socket
import stat
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .. import __version__
from .actions import Outcome, cancel, check_brief, drop_into_inbox, retry
from ..core.brief import MAX_BRIEF_BYTES, BriefError, id_from_filename, too_large
from ..report.chart_png import PNG_FILE
from ..report.charts import CHART_FILE, CHART_NAMES
from ..core.files import TooLarge, read_file_at_most
from ..intake.inbox import is_candidate
from .status import from_history, open_store, progress_of, status_data
from ...store import diagnose
from ...store.history import DEFAULT_SEARCH_LIMIT, HistoryError, check_limit, list_query, search_words
from ..core.settings import SERVE_TOKEN_MIN_CHARS, Settings
from ..report.html import render_html
from ..report.outbox import safe_outdir
from .checks import run_checks
from ..core.errors import BriefdError

log = logging.getLogger("briefd")
door_log = logging.getLogger("briefd.api")  # the connections' own warnings, rate-limited

# What a run's last event is called (worker: events.finish): a stream ends after one of these.
FINAL_EVENTS = ("complete", "failed", "cancelled")
EVENT_POLL_S = 0.2  # how often a live stream looks for new lines: the model's pace is seconds
STATE_POLL_S = 1.0  # how often a quiet stream asks the store whether its brief still runs
NDJSON = "application/x-ndjson"
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
MAX_STREAMS = 64  # live event streams open at once; past it 503 and Retry-After (each polls the store)
MAX_JSON_READ = 64 << 20  # report.json/error.json read for an answer: far above any report briefd writes
FILE_CHUNK = 64 * 1024  # a served file is sent in chunks this size, read off the event loop
MAX_PENDING_SCAN = 2000  # inbox entries looked through to find a brief not yet taken
HEALTH_TTL_S = 60.0  # /healthz answers from its last probe this long: a probe runs a real search
FRESH_MIN_S = 10.0  # ... and ?fresh=1 probes again only when the last probe is at least this old
# The report.html of a brief is page text briefd escaped; served with no right to run anything.
REPORT_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
# The page's report frame is a blob: of report.html (fetched with the token, so it works with one),
# sandboxed: it runs nothing; its source links open outside it.
PAGE_CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src 'self' data:; frame-src 'self' blob:; form-action 'none'; "
            "frame-ancestors 'none'; base-uri 'none'")
CHART_FILES = (*((name, "image/svg+xml") for name in CHART_NAMES), (PNG_FILE, "image/png"))
# The outbox files served by name (a whitelist: nothing else in the folder is reachable)
REPORT_FILES = {"report.md": "text/markdown; charset=utf-8", "report.html": "text/html; charset=utf-8",
                "report.json": "application/json", **dict(CHART_FILES)}


T = TypeVar("T")


class ServeError(BriefdError, ValueError):
    """The API cannot start as configured: the message names the setting and the fix.

    `exit_code` is the CLI's: 2 for a configuration to correct, 3 for a port that cannot be had.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Access:
    """Who may call: the token (None: loopback without one) and the Host names this server answers to."""

    token: str | None
    hosts: frozenset[str]


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) stays on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(settings: Settings) -> str | None:
    """The bearer token from serve_token, else the first line of serve_token_file; None when neither is set."""
    if settings.serve_token:
        return settings.serve_token
    if settings.serve_token_file is None:
        return None
    path = settings.serve_token_file
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.readline(4096).strip()
    except OSError as exc:
        raise ServeError(f"serve_token_file {path}: cannot read it ({exc.strerror or exc}); "
                         "write the token on its first line, readable by briefd alone (chmod 600)") from None
    except UnicodeDecodeError:
        raise ServeError(f"serve_token_file {path}: not UTF-8 text; write the token on its first line") from None
    if len(token) < SERVE_TOKEN_MIN_CHARS or " " in token:
        raise ServeError(f"serve_token_file {path}: its first line must be a token of at least "
                         f"{SERVE_TOKEN_MIN_CHARS} characters without spaces; make one with "
                         "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE")
    return token


def access_for(settings: Settings) -> Access:
    """The access rule for this configuration, or ServeError: anywhere but loopback needs a token.

    `hosts` are the Host names a request may carry (lower case, with and without the port): the
    address it listens on (and loopback's names when that is loopback), and serve_hosts, a
    reverse proxy's public names. Listening on every address (0.0.0.0, ::) with no serve_hosts
    answers to any Host: the token guards it.
    """
    token = read_token(settings)
    host = settings.serve_host
    if token is None and not is_loopback(host):
        raise ServeError(f"serve_host {host} is reachable from other machines, and no token is set: set "
                         "serve_token_file (a file whose first line is the token; BRIEFD_SERVE_TOKEN_FILE) or "
                         "serve_token, or listen on loopback (serve_host = \"127.0.0.1\")")
    port = settings.serve_port
    wildcard = host in ("0.0.0.0", "::")
    bare = set(settings.serve_hosts) | ({"127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else set())
    if not wildcard:
        bare.add(f"[{host}]" if ":" in host else host)
    elif not settings.serve_hosts:
        return Access(token=token, hosts=frozenset())
    names = bare | {f"{name}:{port}" for name in bare}
    return Access(token=token, hosts=frozenset(name.lower() for name in names))


def token_file_warning(settings: Settings) -> str | None:
    """A warning when serve_token_file can be read by others than its owner (the README says chmod 600)."""
    path = settings.serve_token_file
    if path is None or settings.serve_token:
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if mode & 0o077:
        return (f"serve_token_file {path} can be read by other users (mode {mode & 0o777:04o}): "
                f"chmod 600 {path}")
    return None


def start_line(settings: Settings, access: Access) -> str:
    """What `briefd serve` says when it starts: where, and who may call."""
    host = f"[{settings.serve_host}]" if ":" in settings.serve_host else settings.serve_host
    who = ("every request needs Authorization: Bearer <serve_token>" if access.token
           else "loopback only, no token")
    return f"HTTP API and web page on http://{host}:{settings.serve_port}/ ({who})"


# --------------------------------------------------------------------------- answers


def problem(status: int, error: str, fix: str | None = None, **more: Any) -> JSONResponse:
    """An error as every route gives it: what is wrong and, where there is one, the fix."""
    body: dict[str, Any] = {"error": error}
    if fix:
        body["fix"] = fix
    body.update(more)
    return JSONResponse(body, status_code=status)


def unknown_parameter(request: Request, allowed: tuple[str, ...], command: str) -> Response | None:
    """400 for a query parameter the route does not take (a typo would otherwise be ignored unseen)."""
    unknown = sorted(set(request.query_params) - set(allowed))
    if not unknown:
        return None
    return problem(400, f"unknown parameter {unknown[0]!r}", f"use {', '.join(allowed)} (as {command})")


def outcome_response(brief_id: str, outcome: Outcome) -> JSONResponse:
    """An actions.Outcome: 200 when done, 404 when the id names nothing, else 409 (the brief's state forbids it)."""
    body = {"id": brief_id, "ok": outcome.ok, "message": " ".join(outcome.lines), "run": outcome.run,
            "state": outcome.state}
    if outcome.ok:
        return JSONResponse(body)
    return JSONResponse({**body, "error": body["message"]}, status_code=404 if not outcome.found else 409)


def not_served(exc: NotServed) -> JSONResponse:
    """404 for a file in the outbox that is not one briefd wrote (open_regular): said, and not served."""
    return problem(404, f"{exc}: not served", "briefd writes its reports as regular files: remove what was put "
                   "in their place (it may be someone's attempt to read other files through the API)")


class BadId(BriefdError, ValueError):
    """An id in a URL that no brief can have (report.safe_outdir's rule): 400, never a path."""


def _outdir(settings: Settings, brief_id: str) -> Path:
    try:
        return safe_outdir(Path(settings.outbox), brief_id)
    except ValueError as exc:
        raise BadId(str(exc)) from None


async def _bad_id(request: Request, exc: Exception) -> Response:
    return problem(400, str(exc), "ids are 1-100 of A-Z a-z 0-9 . _ - (GET /briefs lists them)")


def _failure(settings: Settings) -> Callable[[Request, Exception], Any]:
    """Any other failure answered as JSON like every error: a store that cannot be used is a 503
    with the store's own diagnosis and fix; anything else a 500 (and its traceback in the log)."""
    async def answer(request: Request, exc: Exception) -> Response:
        found = diagnose(exc, Path(settings.db))
        if found is not None:
            return problem(503, f"the store {settings.db} {found.reason}", found.fix)
        log.error("HTTP API: %s %s failed", request.method, request.url.path, exc_info=exc)
        return problem(500, f"briefd failed on this request ({type(exc).__name__}); its log has the details",
                       "briefd's log (journalctl -u briefd) says what failed")

    return answer


class NotServed(BriefdError, ValueError):
    """A file the API will not serve: a link, or not a regular file (briefd writes only regular files)."""


def open_regular(folder: Path, name: str) -> tuple[int, int] | None:
    """A descriptor on `folder`/`name` and its size, when that is a regular file reached without
    following a link (issue 19 #10: a report file that was a link to a file elsewhere was served);
    None when there is no such file; NotServed for a link, a FIFO, a device or a folder. The brief's
    folder is opened without following a link as well, and the file by name inside it, so a link
    swapped in after a check is not followed either; O_NONBLOCK: a FIFO does not block the open."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotServed(f"{folder.name} is not a folder briefd wrote ({exc.strerror or exc})") from None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        what = "a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise NotServed(f"{name} of {folder.name} is {what}") from None
    finally:
        os.close(folder_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotServed(f"{name} of {folder.name} is not a regular file")
    return fd, info.st_size


def read_regular(folder: Path, name: str, limit: int = MAX_JSON_READ) -> bytes | None:
    """The bytes of `folder`/`name` as `open_regular` finds it; None when it is missing, not served,
    unreadable or over `limit`."""
    try:
        opened = open_regular(folder, name)
    except (NotServed, OSError):
        return None
    if opened is None:
        return None
    fd, size = opened
    try:
        if size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)[:limit]
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_json(folder: Path, name: str) -> Any:
    data = read_regular(folder, name)
    try:
        return json.loads(data) if data is not None else None
    except (ValueError, RecursionError):
        return None


class OpenedFile(Response):
    """A regular file already opened by `open_regular`, sent from its descriptor (never by its path
    again, which could be swapped for a link meanwhile) in chunks read off the event loop; the
    descriptor is closed however the response ends."""

    def __init__(self, fd: int, size: int, media_type: str, headers: dict[str, str]) -> None:
        self.fd, self.size = fd, size
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers({**headers, "content-length": str(size)})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            sent = 0
            while scope.get("method") != "HEAD" and sent < self.size:
                chunk = await asyncio.to_thread(os.pread, self.fd, min(FILE_CHUNK, self.size - sent), sent)
                if not chunk:
                    break  # truncated since: h11 refuses the short body and the connection is closed
                sent += len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            os.close(self.fd)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def pending_file(settings: Settings, brief_id: str) -> Path | None:
    """The file in the inbox that will become a run of `brief_id` once the daemon takes it: a brief
    whose `id` field is `brief_id`, or whose file name gives it (brief.id_from_filename), as the
    daemon will read it. Bounded: at most MAX_PENDING_SCAN entries, each read up to the brief limit."""
    inbox = Path(settings.inbox)
    try:
        entries = sorted(inbox.iterdir())[:MAX_PENDING_SCAN]
    except OSError:
        return None
    for path in entries:
        if is_candidate(path, inbox) and _pending_id(path) == brief_id:
            return path
    return None


def _pending_id(path: Path) -> str | None:
    try:
        data = read_file_at_most(path, MAX_BRIEF_BYTES)
    except (OSError, TooLarge):
        return None
    try:
        given = json.loads(data).get("id")
    except (ValueError, AttributeError, RecursionError):
        given = None
    return given if isinstance(given, str) and given else id_from_filename(path.name)


ACTIVE = ("queued", "running")


def brief_state(settings: Settings, brief_id: str) -> dict[str, Any] | None:
    """A brief as `GET /briefs/{id}` shows it: its latest run's state and report; None when unknown.

    The inbox is looked at before the store: the daemon records a brief and only then removes its
    file, so a brief being taken is found in one or the other, never in neither. A file waiting
    in the inbox is the brief's next run ("submitted") unless a run of the id is still going.
    """
    outdir = _outdir(settings, brief_id)
    pending = pending_file(settings, brief_id)
    store = open_store(settings)
    row = None
    running: dict[str, Any] | None = None
    events_round: int | None = None
    if store is not None:
        try:
            row = store.latest_run(brief_id)
            if row is not None and row.state == "running":
                running = store.load_checkpoint(row.run_id)
                events_round = store.events_round(row.run_id)
        finally:
            store.close()
    report = _read_json(outdir, "report.json")
    error = _read_json(outdir, "error.json")
    if pending is not None and (row is None or row.state not in ACTIVE):
        body: dict[str, Any] = {"id": brief_id, "state": "submitted", "run": None, "report": None,
                                "file": pending.name,
                                "message": "in the inbox: the daemon takes it when it next looks "
                                           "(briefd run, or serve = true)"}
        if report is not None:
            body["previous_report"] = report
        return body
    if row is None:
        if error is not None:
            return {"id": brief_id, "state": "rejected", "run": None, "report": None, "error": error}
        if report is None:
            return None
    body = {"id": brief_id, "state": row.state if row else report.get("status"),
            "run": row.run_id if row else None, "report": report}
    if row is not None:
        body.update(question=row.question, brief=_loads(row.brief_json), accepted_at=row.accepted_at,
                    started_at=row.started_at, finished_at=row.finished_at, stop_reason=row.stop_reason,
                    waiting_for=row.waiting_for, error=row.error)
        if report is not None and row.state in ACTIVE:
            body["report"] = None  # the files are an earlier run's: this run has none yet
            body["previous_report"] = report
    if running:
        body["progress"] = progress_of(running, events_round)  # the round briefd status shows
    if error is not None and row is not None and row.state == "rejected":
        body["error"] = error
    return body


def rendered_html(outdir: Path) -> str | None:
    """report.html for a brief that did not ask for one, rendered from its report.json as the daemon
    would have written it (report.render_html); None when there is no report yet."""
    report = _read_json(outdir, "report.json")
    if not isinstance(report, dict):
        return None
    return render_html(report)


# --------------------------------------------------------------------------- live events


class StoreReader:
    """The live streams' one view of the store: one connection on one thread of its own (a
    connection is bound to the thread that opened it), shared by every stream, so a thousand
    open streams cost no more threads or descriptors than one and never block the event loop.
    Each read is a short indexed query; the streams take turns."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="briefd-events")
        self.store: Any = None

    async def call(self, fn: Callable[[Any], T]) -> T:
        """`fn(store)` on the reader's thread; the store is None until the daemon has made one."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._with_store, fn)

    def _with_store(self, fn: Callable[[Any], T]) -> T:
        if self.store is None:
            self.store = open_store(self.settings)
        return fn(self.store)

    def close(self) -> None:
        def shut() -> None:
            if self.store is not None:
                self.store.close()

        self.pool.submit(shut)
        self.pool.shutdown(wait=True)


def _latest(brief_id: str) -> Callable[[Any], Any]:
    return lambda store: store.latest_run(brief_id) if store is not None else None


@dataclass
class Slots:
    """The live event streams open, at most `cap`. A stream's slot is taken in the same step as the
    count is checked, with no await between (issue 19 #8: taken inside the stream, after the response
    had started, a burst of 150 got 105 streams past a cap of 64), and given back when its response
    ends, however it ends (`SlotStream`)."""

    cap: int
    held: int = 0

    def take(self) -> bool:
        if self.held >= self.cap:
            return False
        self.held += 1
        return True

    def give_back(self) -> None:
        self.held -= 1


class SlotStream(StreamingResponse):
    """An event stream holding one of `slots`: given back when the response ends, even one whose body
    never started (a client gone before it), which the stream's own `finally` would not see."""

    def __init__(self, content: AsyncIterator[bytes], slots: Slots, headers: dict[str, str]) -> None:
        super().__init__(content, media_type=NDJSON, headers=headers)
        self.slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slots.give_back()


async def follow_events(settings: Settings, reader: StoreReader, brief_id: str, since: int) -> AsyncIterator[bytes]:
    """A run's events as NDJSON, from seq `since` on, then each new one as it happens, until the run
    has ended and its final event is sent. The store is the record (events.ndjson is its live copy),
    so the stream follows exactly one run: the latest of the id while it is going, or the next one
    when the brief waits in the inbox (submitted again after an earlier run ended). A run that failed
    and was retried goes on past its earlier final event."""
    latest = await reader.call(_latest(brief_id))
    waiting = await asyncio.to_thread(pending_file, settings, brief_id)
    run = latest if waiting is None or (latest is not None and latest.state in ACTIVE) else None
    after = latest.run_id if latest is not None else 0
    while run is None:  # the brief is a file in the inbox: its run starts when the daemon takes it
        await asyncio.sleep(STATE_POLL_S)
        waiting = await asyncio.to_thread(pending_file, settings, brief_id)
        row = await reader.call(_latest(brief_id))  # after the inbox: a file taken since is in the store
        if row is not None and row.run_id > after:
            run = row
        elif waiting is None:
            return  # gone from the inbox with no run: refused unread, or removed by hand
    run_id = run.run_id
    quiet = 0.0
    while True:
        rows = await reader.call(lambda store: store.events(run_id, since))
        final = False
        for event in rows:
            since = int(event["seq"]) + 1
            yield (json.dumps(event, ensure_ascii=False) + "\n").encode()
            final = final or event.get("type") in FINAL_EVENTS
        quiet = 0.0 if rows else quiet
        if final or quiet >= STATE_POLL_S:
            quiet = 0.0
            row = await reader.call(lambda store: store.get_brief(run_id))
            if row is None or row.state not in ACTIVE:
                if final or not await reader.call(lambda store: store.events(run_id, since)):
                    return
        await asyncio.sleep(EVENT_POLL_S)
        quiet += EVENT_POLL_S


# --------------------------------------------------------------------------- the application


def build_app(settings: Settings, access: Access) -> "_Guard":
    """The ASGI application: routes over `settings`' folders and store, guarded by `access`."""
    streams = Slots(MAX_STREAMS)
    reader = StoreReader(settings)
    health: dict[str, Any] = {"at": None, "body": None}
    health_lock = asyncio.Lock()

    page = resources.files(__package__ or "briefd.daemon.ops").joinpath("web/index.html").read_bytes()

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})

    async def healthz(request: Request) -> Response:
        """What `briefd check` knows, probed at most once every HEALTH_TTL_S, and ?fresh=1 now unless
        the last probe is younger than FRESH_MIN_S: a probe runs a real search through SearXNG and asks
        every model server, which a page polling this, or a script asking fresh=1 in a loop, must not
        turn into a flood (issue 29 #12)."""
        async with health_lock:  # one probe at a time; the others wait for its answer
            now = asyncio.get_running_loop().time()
            fresh = request.query_params.get("fresh", "").lower() in ("1", "true", "yes")
            age = None if health["at"] is None else now - health["at"]
            if age is None or age >= HEALTH_TTL_S or (fresh and age >= FRESH_MIN_S):
                checks = await run_checks(settings, create_store=False)
                health["body"] = {"ok": all(c[0] for c in checks), "version": __version__,
                                  "checks": [{"ok": c[0], "message": c[1], "fix": c[2]} for c in checks]}
                health["at"] = now
            body = {**health["body"], "checked_s_ago": round(now - health["at"], 1), "streams": streams.held}
        return JSONResponse(body, status_code=200 if body["ok"] else 503)

    async def post_brief(request: Request) -> Response:
        data = await _bounded_body(request)
        if isinstance(data, Response):
            return data
        # a brief without an id is named as a file dropped by hand would be: by its file name
        name = f"api-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}.json"
        try:
            brief = await asyncio.to_thread(check_brief, settings, data, name)
        except BriefError as exc:
            return problem(422, str(exc), field=exc.field, details=exc.details)
        try:
            path = await asyncio.to_thread(drop_into_inbox, Path(settings.inbox), f"{brief.id}.json", data)
        except OSError as exc:
            return problem(503, f"cannot write into the inbox {settings.inbox}: {exc.strerror or exc}",
                           "make the inbox writable by the user briefd serve runs as")
        return JSONResponse({"id": brief.id, "state": "submitted", "file": path.name,
                             "url": f"/briefs/{brief.id}", "events": f"/briefs/{brief.id}/events"},
                            status_code=202, headers={"Location": f"/briefs/{brief.id}"})

    async def list_briefs(request: Request) -> Response:
        params = request.query_params
        if (refused := unknown_parameter(request, ("state", "kind", "since", "until", "limit", "runs"),
                                         "briefd list")) is not None:
            return refused
        try:
            query = list_query(state=params.get("state"), kind=params.get("kind"), since=params.get("since"),
                               until=params.get("until"), limit=params.get("limit"),
                               runs=params.get("runs", "").lower() in ("1", "true", "yes"))
        except HistoryError as exc:
            return problem(400, str(exc))
        entries = await asyncio.to_thread(from_history, settings, lambda h: h.briefs(query)) or []
        return JSONResponse([e.to_json() for e in entries])

    async def search(request: Request) -> Response:
        if (refused := unknown_parameter(request, ("q", "limit"), "briefd search")) is not None:
            return refused
        text = request.query_params.get("q", "")
        try:
            search_words(text)
            limit = check_limit(request.query_params.get("limit"), DEFAULT_SEARCH_LIMIT)
        except HistoryError as exc:
            return problem(400, str(exc), "GET /search?q=words")
        hits = await asyncio.to_thread(from_history, settings, lambda h: h.search(text, limit)) or []
        return JSONResponse([h.to_json() for h in hits])

    async def status(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(status_data, settings))

    async def get_brief(request: Request) -> Response:
        brief_id = request.path_params["id"]
        body = await asyncio.to_thread(brief_state, settings, brief_id)
        if body is None:
            return problem(404, f"no brief with id {brief_id!r}", "GET /briefs lists them")
        return JSONResponse(body)

    async def report_file(request: Request) -> Response:
        brief_id, name = request.path_params["id"], request.path_params["name"]
        if name in ("cancel", "retry"):
            refused = problem(405, f"{name} is a POST",
                              f"POST /briefs/{{id}}/{name} with Content-Type: application/json")
            refused.headers["Allow"] = "POST"
            return refused
        if name not in REPORT_FILES:
            return problem(404, f"no such file: {name[:100]!r}", f"ask for one of {', '.join(REPORT_FILES)}, "
                           "chart, events, cancel or retry")
        outdir = _outdir(settings, brief_id)
        headers = {"Content-Security-Policy": REPORT_CSP, "X-Content-Type-Options": "nosniff"}
        try:
            opened = await asyncio.to_thread(open_regular, outdir, name)
        except NotServed as exc:
            return not_served(exc)
        if opened is None and name == "report.html":  # not asked for: made from report.json, as the file would be
            html = await asyncio.to_thread(rendered_html, outdir)
            if html is not None:
                return Response(html, media_type=REPORT_FILES[name], headers=headers)
        if opened is None:
            return problem(404, f"no {name} for {brief_id!r} (yet)", "GET /briefs/{id} says its state")
        return OpenedFile(*opened, media_type=REPORT_FILES[name], headers=headers)

    async def chart(request: Request) -> Response:
        brief_id = request.path_params["id"]
        outdir = _outdir(settings, brief_id)
        for name, media in ((CHART_FILE, "image/svg+xml"), (PNG_FILE, "image/png")):  # the band
            try:
                opened = await asyncio.to_thread(open_regular, outdir, name)
            except NotServed as exc:
                return not_served(exc)
            if opened is not None:
                return OpenedFile(*opened, media_type=media,
                                  headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                                           "X-Content-Type-Options": "nosniff"})
        return problem(404, f"no chart for {brief_id!r}", "estimate briefs get one when they finish")

    async def events(request: Request) -> Response:
        brief_id = request.path_params["id"]
        _outdir(settings, brief_id)
        raw = request.query_params.get("seq", "0")
        if not raw.isdigit() or len(raw) > 12:
            return problem(400, f"seq must be a whole number, not {raw[:40]!r}", "GET /briefs/{id}/events?seq=1")
        if await asyncio.to_thread(brief_state, settings, brief_id) is None:
            return problem(404, f"no brief with id {brief_id!r}", "GET /briefs lists them")
        if not streams.take():  # no await from here to the response: the slot is this request's
            return JSONResponse({"error": f"{streams.cap} event streams are open already",
                                 "fix": "try again in a few seconds, or close a stream"},
                                status_code=503, headers={"Retry-After": "5"})
        return SlotStream(follow_events(settings, reader, brief_id, int(raw)), streams,
                          headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    def queue_action(act: Callable[[Settings, str], Outcome]) -> Callable[[Request], Any]:
        """POST /briefs/{id}/cancel and /retry: daemon.actions' own answer, as the CLI prints it."""
        async def endpoint(request: Request) -> Response:
            brief_id = request.path_params["id"]
            _outdir(settings, brief_id)  # the id rule first: 400 for an id no brief can have
            return outcome_response(brief_id, await asyncio.to_thread(act, settings, brief_id))

        return endpoint

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/status", status, methods=["GET"]),
        Route("/search", search, methods=["GET"]),
        Route("/briefs", list_briefs, methods=["GET"]),
        Route("/briefs", post_brief, methods=["POST"]),
        Route("/briefs/{id}", get_brief, methods=["GET"]),
        Route("/briefs/{id}/events", events, methods=["GET"]),
        Route("/briefs/{id}/chart", chart, methods=["GET"]),
        Route("/briefs/{id}/{name:str}", report_file, methods=["GET"]),
        Route("/briefs/{id}/cancel", queue_action(cancel), methods=["POST"]),
        Route("/briefs/{id}/retry", queue_action(retry), methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={BadId: _bad_id, Exception: _failure(settings)})
    return _Guard(app, access, reader)


async def _bounded_body(request: Request) -> bytes | Response:
    """The request body, at most MAX_BRIEF_BYTES (413 past that, unread), or the Response refusing it."""
    length = request.headers.get("content-length")
    if length is not None and not length.isdigit():
        return problem(400, f"Content-Length {length[:40]!r} is not a number", "send a well-formed HTTP request")
    if length is not None and int(length) > MAX_BRIEF_BYTES:
        return problem(413, str(too_large(int(length))), f"send a brief of at most {MAX_BRIEF_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BRIEF_BYTES:
                return problem(413, str(too_large(size)), f"send a brief of at most {MAX_BRIEF_BYTES} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        return Response(status_code=400)
    return b"".join(chunks)


# --------------------------------------------------------------------------- the guard


class _Guard:
    """ASGI middleware: who may call, before any route runs (the module docstring says why).

    - Host: one of the names this server answers to (DNS rebinding: a name of the attacker's
      that resolves to 127.0.0.1 carries its own Host).
    - The token, when there is one, on every route but the page itself.
    - No token, and the request came through a proxy (Forwarded, X-Forwarded-For): refused, since
      loopback then stands for whoever can reach the proxy.
    - A browser's request for another site's page (Sec-Fetch-Site cross-site or same-site: another
      port of localhost is the same site) reaches nothing but the page.
    - A request that changes something: application/json, and an Origin (when sent) that is this
      server's own, so a form or a fetch from elsewhere cannot post.
    """

    def __init__(self, app: Any, access: Access, reader: StoreReader) -> None:
        self.app = app
        self.access = access
        self.reader = reader

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: dict[str, Any], headers: dict[str, str]) -> Response | None:
        host = headers.get("host", "").lower()
        if self.access.hosts and host not in self.access.hosts:
            return problem(421, f"this server does not answer to Host {host[:100]!r}",
                           "use the address briefd serve printed when it started, or add the name to serve_hosts")
        path, method = scope.get("path", "/"), scope.get("method", "GET")
        if self.access.token is None and ("forwarded" in headers or "x-forwarded-for" in headers):
            return problem(403, "this briefd has no token and the request came through a proxy",
                           "set serve_token_file (or serve_token) when a reverse proxy forwards to briefd")
        if self.access.token is not None and path != "/":
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            wrong = not hmac.compare_digest(token.strip().encode(), self.access.token.encode())
            if scheme.lower() != "bearer" or wrong:
                response = problem(401, "this briefd asks for a token" if not given else "wrong token",
                                   "send Authorization: Bearer <the serve_token>")
                response.headers["WWW-Authenticate"] = 'Bearer realm="briefd"'
                return response
        if path != "/" and headers.get("sec-fetch-site") in ("cross-site", "same-site"):
            return problem(403, "a page of another site may not use this API",
                           "call the API from a script, or from the page this server serves")
        if method not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is not None and not self.same_origin(origin, host):
                return problem(403, f"requests from another site ({origin[:100]}) may not change anything here",
                               "call the API from a script, or from the page this server serves")
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return problem(415, "a request that changes something must be Content-Type: application/json",
                               "send the header Content-Type: application/json")
        return None

    def same_origin(self, origin: str, host: str) -> bool:
        """The Origin names this server: the Host asked for, or one of its names (a proxy's public one)."""
        netloc = origin.split("://", 1)[-1].lower()
        return netloc == host or netloc in self.access.hosts


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
