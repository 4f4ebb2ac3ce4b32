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
import secrets
import signal
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import __version__
from .actions import Outcome, cancel, check_brief, drop_into_inbox, from_history, open_store, retry
from .brief import MAX_BRIEF_BYTES, BriefError, id_from_filename, too_large
from .chart_png import PNG_FILE
from .charts import CHART_FILE, CHART_NAMES
from .files import TooLarge, read_file_at_most
from .inbox import is_candidate
from .report import safe_outdir
from .settings import Settings
from .status import progress_of, status_data

log = logging.getLogger("briefd")

# What a run's last event is called (worker: events.finish): a stream ends after one of these.
FINAL_EVENTS = ("complete", "failed", "cancelled")
EVENT_POLL_S = 0.2  # how often a live stream looks for new lines: the model's pace is seconds
STATE_POLL_S = 1.0  # how often a quiet stream asks the store whether its brief still runs
NDJSON = "application/x-ndjson"
MAX_CONNECTIONS = 256  # past it uvicorn answers 503 at once: a flood cannot take the daemon's descriptors
MAX_STREAMS = 64  # live event streams open at once; past it 503 and Retry-After (each polls the store)
MAX_PENDING_SCAN = 2000  # inbox entries looked through to find a brief not yet taken
HEALTH_TTL_S = 60.0  # /healthz answers from its last probe this long: a probe runs a real search
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


class ServeError(ValueError):
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
    from .settings import SERVE_TOKEN_MIN_CHARS

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


class BadId(ValueError):
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
    from ..store import diagnose

    async def answer(request: Request, exc: Exception) -> Response:
        found = diagnose(exc, Path(settings.db))
        if found is not None:
            return problem(503, f"the store {settings.db} {found.reason}", found.fix)
        log.error("HTTP API: %s %s failed", request.method, request.url.path, exc_info=exc)
        return problem(500, f"briefd failed on this request ({type(exc).__name__}); its log has the details",
                       "briefd's log (journalctl -u briefd) says what failed")

    return answer


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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
    if store is not None:
        try:
            row = store.latest_run(brief_id)
            if row is not None and row.state == "running":
                running = store.load_checkpoint(row.run_id)
        finally:
            store.close()
    report = _read_json(outdir / "report.json")
    error = _read_json(outdir / "error.json")
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
        body["progress"] = progress_of(running)
    if error is not None and row is not None and row.state == "rejected":
        body["error"] = error
    return body


def rendered_html(outdir: Path) -> str | None:
    """report.html for a brief that did not ask for one, rendered from its report.json as the daemon
    would have written it (report.render_html); None when there is no report yet."""
    from .report import render_html

    report = _read_json(outdir / "report.json")
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


async def follow_events(settings: Settings, reader: StoreReader, brief_id: str, since: int,
                        streams: list[int]) -> AsyncIterator[bytes]:
    """A run's events as NDJSON, from seq `since` on, then each new one as it happens, until the run
    has ended and its final event is sent. The store is the record (events.ndjson is its live copy),
    so the stream follows exactly one run: the latest of the id while it is going, or the next one
    when the brief waits in the inbox (submitted again after an earlier run ended). A run that failed
    and was retried goes on past its earlier final event. `streams` counts the streams open."""
    streams[0] += 1
    try:
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
    finally:
        streams[0] -= 1


# --------------------------------------------------------------------------- the application


def build_app(settings: Settings, access: Access) -> "_Guard":
    """The ASGI application: routes over `settings`' folders and store, guarded by `access`."""
    streams = [0]
    reader = StoreReader(settings)
    health: dict[str, Any] = {"at": None, "body": None}
    health_lock = asyncio.Lock()

    async def index(request: Request) -> Response:
        page = resources.files(__package__ or "briefd.daemon").joinpath("web/index.html").read_bytes()
        return Response(page, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})

    async def healthz(request: Request) -> Response:
        """What `briefd check` knows, probed at most once every HEALTH_TTL_S (?fresh=1: now): a probe
        runs a real search through SearXNG, which a page polling this must not turn into a flood."""
        from .checks import run_checks

        async with health_lock:  # one probe at a time; the others wait for its answer
            now = asyncio.get_running_loop().time()
            fresh = request.query_params.get("fresh", "").lower() in ("1", "true", "yes")
            if fresh or health["at"] is None or now - health["at"] >= HEALTH_TTL_S:
                checks = await run_checks(settings, create_store=False)
                health["body"] = {"ok": all(c[0] for c in checks), "version": __version__,
                                  "checks": [{"ok": c[0], "message": c[1], "fix": c[2]} for c in checks]}
                health["at"] = now
            body = {**health["body"], "checked_s_ago": round(now - health["at"], 1), "streams": streams[0]}
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
        from ..store.history import HistoryError, list_query

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
        from ..store.history import DEFAULT_SEARCH_LIMIT, HistoryError, check_limit, search_words

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
            refused = problem(405, f"{name} is a POST", f"POST /briefs/{{id}}/{name} with Content-Type: application/json")
            refused.headers["Allow"] = "POST"
            return refused
        if name not in REPORT_FILES:
            return problem(404, f"no such file: {name[:100]!r}", f"ask for one of {', '.join(REPORT_FILES)}, "
                           "chart, events, cancel or retry")
        path = _outdir(settings, brief_id) / name
        headers = {"Content-Security-Policy": REPORT_CSP, "X-Content-Type-Options": "nosniff"}
        if not path.is_file() and name == "report.html":  # not asked for: made from report.json, as the file would be
            html = await asyncio.to_thread(rendered_html, path.parent)
            if html is not None:
                return Response(html, media_type=REPORT_FILES[name], headers=headers)
        if not path.is_file():
            return problem(404, f"no {name} for {brief_id!r} (yet)", "GET /briefs/{id} says its state")
        return FileResponse(path, media_type=REPORT_FILES[name], headers=headers)

    async def chart(request: Request) -> Response:
        brief_id = request.path_params["id"]
        outdir = _outdir(settings, brief_id)
        for name, media in ((CHART_FILE, "image/svg+xml"), (PNG_FILE, "image/png")):  # the band
            if (outdir / name).is_file():
                return FileResponse(outdir / name, media_type=media,
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
        if streams[0] >= MAX_STREAMS:
            return JSONResponse({"error": f"{MAX_STREAMS} event streams are open already",
                                 "fix": "try again in a few seconds, or close a stream"},
                                status_code=503, headers={"Retry-After": "5"})
        return StreamingResponse(follow_events(settings, reader, brief_id, int(raw), streams), media_type=NDJSON,
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
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.access.token.encode()):
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
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        what = "is in use (another briefd serve?)" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror or exc})"
        raise ServeError(f"{host} port {settings.serve_port} {what}: set serve_port (--serve-port, BRIEFD_SERVE_PORT) "
                         "to a free port, or stop what holds it", exit_code=3) from None
    return sock


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
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2, server_header=False, limit_concurrency=MAX_CONNECTIONS)
        self.server = _QuietServer(config)

    async def run(self) -> None:
        try:
            await self.server.serve(sockets=[self.sock])
        finally:
            self.sock.close()
            await asyncio.to_thread(self.app.reader.close)

    def stop(self) -> None:
        self.server.should_exit = True


def serve_forever(settings: Settings) -> int:
    """`briefd serve` alone: the API until SIGTERM/SIGINT; a brief dropped through it waits for `briefd run`."""
    server = _Server(settings)
    log.info("%s", server.line)
    if (warning := token_file_warning(settings)) is not None:
        log.warning("%s", warning)

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
    log.info("%s", server.line)
    if (warning := token_file_warning(settings)) is not None:
        log.warning("%s", warning)
    try:
        yield
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
