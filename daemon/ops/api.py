"""The HTTP API's routes: what each answers, from the queue, the store and the outbox, and who may ask (the guard).

Every route is a thin call into what the command line uses: `daemon.actions` (submit, cancel, retry),
`store.history` (list, search), the outbox files (reports, events, chart) and `daemon.checks`. The routes are
module functions: what they share (the settings, the one store reader of the live streams, the stream slots,
/healthz's last probe, the page) is the app's `ApiState`, made once by `build_app` and read from
`request.app.state`, so no route is a closure over another's variables. serve.py runs the app behind the door
that caps its connections.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import json
import logging
import os
import secrets
import stat
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .. import __version__
from .access import Access
from .actions import Outcome, cancel, check_brief, drop_into_inbox, retry
from ..core.brief import id_from_filename
from ..core.briefjson import MAX_BRIEF_BYTES, BriefError, too_large
from ..report.chart_png import PNG_FILE
from ..report.charts import CHART_FILE, CHART_NAMES
from ..core.files import TooLarge, read_file_at_most
from ..intake.inbox import is_candidate
from .status import from_history, open_store, progress_of, status_data
from ...store import diagnose
from ...store.history import DEFAULT_SEARCH_LIMIT, HistoryError, check_limit, list_query, search_words
from ..core.settings import Settings
from ..report.html import render_html
from ..report.outbox import safe_outdir
from .checks import run_checks
from ..core.errors import BriefdError

log = logging.getLogger("briefd")

# What a run's last event is called (worker: events.finish): a stream ends after one of these.
FINAL_EVENTS = ("complete", "failed", "cancelled")
EVENT_POLL_S = 0.2  # how often a live stream looks for new lines: the model's pace is seconds
STATE_POLL_S = 1.0  # how often a quiet stream asks the store whether its brief still runs
NDJSON = "application/x-ndjson"
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
    """An id in a URL that no brief can have (outbox.safe_outdir's rule): 400, never a path."""


def _outdir(settings: Settings, brief_id: str) -> Path:
    try:
        return safe_outdir(Path(settings.outbox), brief_id)
    except ValueError as exc:
        raise BadId(str(exc)) from None


async def _bad_id(request: Request, exc: Exception) -> Response:
    return problem(400, str(exc), "ids are 1-100 of A-Z a-z 0-9 . _ - (GET /briefs lists them)")


async def _failure(request: Request, exc: Exception) -> Response:
    """Any other failure answered as JSON like every error: a store that cannot be used is a 503
    with the store's own diagnosis and fix; anything else a 500 (and its traceback in the log)."""
    settings = api_state(request).settings
    found = diagnose(exc, Path(settings.db))
    if found is not None:
        return problem(503, f"the store {settings.db} {found.reason}", found.fix)
    log.error("HTTP API: %s %s failed", request.method, request.url.path, exc_info=exc)
    return problem(500, f"briefd failed on this request ({type(exc).__name__}); its log has the details",
                   "briefd's log (journalctl -u briefd) says what failed")


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
    would have written it (html.render_html); None when there is no report yet."""
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


@dataclass
class ApiState:
    """What the routes share, made once per app by `build_app` and kept in its `state.api`."""

    settings: Settings
    reader: StoreReader  # the live streams' one view of the store
    page: bytes  # the web page at /, read once
    streams: Slots = field(default_factory=lambda: Slots(MAX_STREAMS))
    # /healthz's last probe, (when on the loop's clock, its body), and the lock that makes one probe at a time
    health: tuple[float, dict[str, Any]] | None = None
    health_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def api_state(request: Request) -> ApiState:
    """The state of the app that `request` reached (Starlette puts the app in the request's scope)."""
    state: ApiState = request.app.state.api
    return state


async def index(request: Request) -> Response:
    return Response(api_state(request).page, media_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})


async def healthz(request: Request) -> Response:
    """What `briefd check` knows, probed at most once every HEALTH_TTL_S, and ?fresh=1 now unless
    the last probe is younger than FRESH_MIN_S: a probe runs a real search through SearXNG and asks
    every model server, which a page polling this, or a script asking fresh=1 in a loop, must not
    turn into a flood (issue 29 #12)."""
    state = api_state(request)
    async with state.health_lock:  # one probe at a time; the others wait for its answer
        now = asyncio.get_running_loop().time()
        fresh = request.query_params.get("fresh", "").lower() in ("1", "true", "yes")
        last = state.health
        if last is None or now - last[0] >= HEALTH_TTL_S or (fresh and now - last[0] >= FRESH_MIN_S):
            checks = await run_checks(state.settings, create_store=False)
            last = state.health = (now, {"ok": all(c[0] for c in checks), "version": __version__,
                                         "checks": [{"ok": c[0], "message": c[1], "fix": c[2]} for c in checks]})
        at, probed = last
        body = {**probed, "checked_s_ago": round(now - at, 1), "streams": state.streams.held}
    return JSONResponse(body, status_code=200 if body["ok"] else 503)


async def post_brief(request: Request) -> Response:
    settings = api_state(request).settings
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
    entries = await asyncio.to_thread(from_history, api_state(request).settings, lambda h: h.briefs(query)) or []
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
    hits = await asyncio.to_thread(from_history, api_state(request).settings, lambda h: h.search(text, limit)) or []
    return JSONResponse([h.to_json() for h in hits])


async def status(request: Request) -> Response:
    return JSONResponse(await asyncio.to_thread(status_data, api_state(request).settings))


async def get_brief(request: Request) -> Response:
    brief_id = request.path_params["id"]
    body = await asyncio.to_thread(brief_state, api_state(request).settings, brief_id)
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
    outdir = _outdir(api_state(request).settings, brief_id)
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
    outdir = _outdir(api_state(request).settings, brief_id)
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
    state = api_state(request)
    brief_id = request.path_params["id"]
    _outdir(state.settings, brief_id)
    raw = request.query_params.get("seq", "0")
    if not raw.isdigit() or len(raw) > 12:
        return problem(400, f"seq must be a whole number, not {raw[:40]!r}", "GET /briefs/{id}/events?seq=1")
    if await asyncio.to_thread(brief_state, state.settings, brief_id) is None:
        return problem(404, f"no brief with id {brief_id!r}", "GET /briefs lists them")
    streams = state.streams
    if not streams.take():  # no await from here to the response: the slot is this request's
        return JSONResponse({"error": f"{streams.cap} event streams are open already",
                             "fix": "try again in a few seconds, or close a stream"},
                            status_code=503, headers={"Retry-After": "5"})
    return SlotStream(follow_events(state.settings, state.reader, brief_id, int(raw)), streams,
                      headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _queue_action(request: Request, act: Callable[[Settings, str], Outcome]) -> Response:
    """POST /briefs/{id}/cancel and /retry: daemon.actions' own answer, as the CLI prints it."""
    settings = api_state(request).settings
    brief_id = request.path_params["id"]
    _outdir(settings, brief_id)  # the id rule first: 400 for an id no brief can have
    return outcome_response(brief_id, await asyncio.to_thread(act, settings, brief_id))


async def cancel_brief(request: Request) -> Response:
    return await _queue_action(request, cancel)


async def retry_brief(request: Request) -> Response:
    return await _queue_action(request, retry)


ROUTES = (
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
    Route("/briefs/{id}/cancel", cancel_brief, methods=["POST"]),
    Route("/briefs/{id}/retry", retry_brief, methods=["POST"]),
)


def build_app(settings: Settings, access: Access) -> "_Guard":
    """The ASGI application: routes over `settings`' folders and store, guarded by `access`."""
    page = resources.files(__package__ or "briefd.daemon.ops").joinpath("web/index.html").read_bytes()
    reader = StoreReader(settings)
    app = Starlette(routes=list(ROUTES), exception_handlers={BadId: _bad_id, Exception: _failure})
    app.state.api = ApiState(settings=settings, reader=reader, page=page)
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
    """ASGI middleware: who may call, before any route runs (serve.py's docstring says why).

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
