"""The daemon: lock, recover, watch the inbox, run briefs, stop gracefully.

`serve(settings, once=False)` is `briefd run`; with `once=True` it is cron mode:
take everything in the inbox, resume every interrupted brief, start the series
that are due (daemon/intake/series.py), finish them all, return (exit 3 when a service stayed down
for `once_patience_s`: its briefs stay queued for the next run). Briefs run as asyncio
tasks (`workers` at once); all store access happens on the event loop's thread,
where the store's connection lives.

One daemon per store and per inbox (two flocks, `<db>.lock` and `<inbox>/.briefd.lock`).
When the store fails (issue 8): another process holding SQLite's lock is waited for,
saying so; anything else (damaged, full, not writable) stops the daemon with exit 3,
the reason and the fix, and never costs a brief an attempt: a restart resumes it.

Unattended operation (issue 13): one start-up line; each outage said once (daemon.outages);
systemd's notify protocol when $NOTIFY_SOCKET is set (daemon.sdnotify); the `on_finish`
command when a brief ends (daemon.onfinish).

Supervision (issue 19 #1): every long-lived task runs under daemon.supervise, each with its `Policy`
(below: what its death does, and why); the soft limit on open files is raised at start; a down
service is probed while briefs wait for it, and its answer resumes them at once (outages.Prober).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import time
import traceback
from pathlib import Path
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx

from ...store import CANCELLED, DONE, FAILED, BriefRow, Store, StoreUnavailable, damaged, diagnose, utc_now

from .. import __version__

from ..core import crashpoints

from . import onfinish

from ..intake import series

from ..sources import sources
from ..sources.archives import Archives
from ..sources.library import RESCAN_S, Library, LibrarySource
from ..core.brief import Brief
from ..core.briefjson import BriefError
from ..report.changes import what_changed
from ..report.chart_png import matplotlib_installed, write_chart
from ..core.events import EventLog
from ..sources.egress import service_allowed
from ..sources.fetch import FetchLimits, make_client as make_fetch_client, vetted_transport
from ..research.followup import check_follows_at_start
from ..core.errors import ServiceUnavailable
from ..core.files import WriteFailed, acquire_store_lock, atomic_write_bytes, readable_by_others, sweep_temp_files
from ..model.hosts import ModelHosts, model_config, model_hosts
from ..intake.inbox import Inbox, acquire_lock, start_observer
from ..model.check import base_url
from ..model.llm import ModelConfig, make_client as make_llm_client, served_config
from ..research.loop import Research, Services, seconds_since
from ..research.run import Cancelled
from ..rules import decide
from ..core.outages import PROBE_EVERY_S, PROBE_PATHS, PROBE_TIMEOUT_S, OutageLog, Prober
from ..sources.pagework import PageWorkers
from ..report.outbox import archive_previous, archived_run, safe_outdir, write_report
from ..report.report import history_row
from ..core.retry import out_of_patience, queue_delay
from .ending import FAILED_NOTE, brief_of, cancel_note, ended_report, kind_of
from .sdnotify import Notifier
from ..core.settings import Settings, config_knobs, openai_key
from ..core.supervise import Policy, quiet_loop_errors, raise_open_files_limit, supervise
from .serve import serving_inside

log = logging.getLogger("briefd")

# Another process holding SQLite's lock (a backup, sqlite3, a long `briefd` command) is waited
# for as long as it holds it, never a crash. At start-up and in the idle loop each try waits
# LOCK_POLL_S (not the 30 s busy timeout) so SIGTERM is still handled within seconds.
LOCK_POLL_S = 1.0
LOCK_RETRY_S = 2.0           # pause between tries
LOCK_LOG_S = 60.0            # while waiting, say so again this often
STATUS_EVERY_S = 5.0         # under systemd: the queue line (STATUS=) is refreshed this often
IDLE_POLL_S = 0.5            # a worker with nothing to claim looks again this often, or when woken (`work`)

T = TypeVar("T")

# What each long-lived task's death does (daemon.supervise), and why. Restarted ones that die more than
# `restarts` times within supervise.RESTART_WINDOW_S stop the daemon (exit 3): systemd starts a fresh one.
INTAKE = Policy(5, "intake is how briefs arrive: it is restarted, and one that keeps dying stops the daemon "
                   "(exit 3) for systemd to start a fresh one, rather than leave briefs untaken")
WORKER = Policy(5, "a worker holds nothing but its loop (its brief is checkpointed): restarted like intake")
TELLER = Policy(5, "without it systemd's watchdog would kill the daemon WatchdogSec= later with no reason said")
LIBRARY = Policy(None, "the library is one source among several: research goes on with its index as it was, "
                       "and stopping would make every start a restart loop")
PROBER = Policy(None, "the probe only shortens waits: without it briefs wait out their backoff")
API = Policy(0, "the HTTP API's socket closes with its server; a restart by systemd binds it again, and "
                "every brief resumes from its checkpoint")
SERVE_TASK = "briefd-serve"  # the name daemon.serve.serving_inside gives the HTTP API's task



def fetch_limits(settings: Settings) -> FetchLimits:
    """A page fetch's limits as the user set them (`fetch_max_bytes` is its `max_bytes`, `egress` its `egress`)."""
    return FetchLimits(**config_knobs(settings, FetchLimits, "fetch_"))


def service_transport(settings: Settings, url: str, *, model: bool) -> httpx.AsyncBaseTransport:
    """The transport of a service client (SearXNG, the model server): its requests counted into the
    brief's egress log, its connections held to the egress policy (the service's own host allowed:
    the operator chose it; under egress = none, SearXNG reaches nothing)."""
    allowed = service_allowed(settings.egress, settings.egress_hosts, url, model=model)
    return vetted_transport(FetchLimits(egress=settings.egress, egress_hosts=allowed))


def changes_since(previous: tuple[int, dict[str, Any]] | None, outdir: Path,
                  report: dict[str, Any]) -> dict[str, Any] | None:
    """report.json's `changes`: what differs from the id's previous done run (Research.previous;
    None: this is its first). Only a done run is compared: one that failed or was cancelled has
    not looked again, so its missing quotes would read as withdrawn."""
    if previous is None:
        return None
    previous_run_id, old = previous
    return what_changed(old, report, previous_run_id=previous_run_id,
                        files=archived_run(outdir, old.get("started_at")))


def startup_line(settings: Settings, once: bool) -> str:
    """The one INFO line a daemon logs when it starts: what it is and what it will use, so a
    journal read later says which model, search service, folders and egress policy a run had."""
    library = ", ".join(map(str, settings.library)) or "none"
    searxng = "not used (egress = none)" if settings.egress == "none" else settings.searxng_url
    models = ", ".join(model_hosts(settings))
    hook = " ".join(settings.on_finish) if settings.on_finish else "none"
    return (f"briefd {__version__} started ({'run --once' if once else 'run'}, pid {os.getpid()}): "
            f"model {settings.model} at {models}; SearXNG {searxng}; inbox {settings.inbox}; "
            f"outbox {settings.outbox}; db {settings.db}; library {library}; archives {len(settings.archives)}; "
            f"egress {settings.egress}; workers {settings.workers}; on_finish {hook}; "
            f"config {settings.config_file or 'none'}")


def restart_fix(service: str, settings: Settings, fix: str | None = None) -> str:
    """What ends an outage of `service`, said when `run --once` gives up on it: the outage's own
    `fix` when it has one (SearXNG running with its engines failing must not be told to start
    SearXNG), else starting the service."""
    start = {"ollama": f"start Ollama at {settings.ollama_host} (or point OLLAMA_HOST / --ollama-host at it)",
             "searxng": f"start SearXNG at {settings.searxng_url} (or point BRIEFD_SEARXNG_URL / --searxng-url "
                        f"at it)"}
    where = fix or start.get(service, f"make {service} available again")
    return f"{where}; `briefd check` says what it finds; the next run takes the queued briefs"


def queue_line(counts: dict[str, int], outages: OutageLog) -> str:
    """systemd's STATUS= line: "2 queued, 1 running" and what the briefs wait for."""
    line = f"{counts.get('queued', 0)} queued, {counts.get('running', 0)} running"
    waiting = outages.summary()
    return f"{line}; {waiting}" if waiting else line


class Daemon:
    store: Store   # opened by serve(), once the locks are held
    inbox: Inbox

    def __init__(self, settings: Settings, once: bool, pages: PageWorkers | None = None) -> None:
        self.settings = settings
        self.once = once
        self.pages = pages  # the page-reading children of `briefd run` (started before this module loaded, if a brief waited)
        self.words: asyncio.Task[None] | None = None  # the relevance rule's word list loading (words_soon)
        self.stopping = asyncio.Event()
        self.work = asyncio.Event()
        self.running: dict[int, asyncio.Task[None]] = {}
        # each outage logged once, its end once, with the wait that applies to this run
        self.outages = OutageLog(patience_s=settings.once_patience_s if once else settings.patience_s, once=once)
        self.parked: dict[int, str] = {}  # `--once`: runs left queued for the next run -> the service it gave up on
        self.gave_up: dict[str, tuple[str, str | None]] = {}  # `--once`: service -> why this run stopped
        # waiting for it, and the outage's own fix (kept here: the service may come back before the run ends)
        self.notifier = Notifier.from_env()  # systemd (Type=notify); a no-op outside it
        self.hooks: set[asyncio.Task[int | None]] = set()  # on_finish commands still running
        self.fatal: str | None = None  # why the daemon had to stop (the store failed, a task died), if it did
        self.series_looked: float | None = None  # when due series were last looked for (monotonic)

    async def serve(self) -> int:
        """Lock, open and recover the store, then run until stopped (or, `once`, until done).

        Raises Locked (another daemon holds the store or the inbox) and StoreUnavailable
        (the store is damaged, full, not writable) for `briefd run` to turn into exit 3;
        a store locked by another process is waited for (`patiently`), not a failure.
        """
        settings = self.settings
        observer = None
        log.info("%s", raise_open_files_limit())  # before the API's first connection can take one
        quiet_loop_errors(asyncio.get_running_loop())  # asyncio's reports, such as accept's EMFILE: once a minute
        with contextlib.ExitStack() as held:
            held.enter_context(acquire_store_lock(settings.db))  # before anything reads or re-queues
            held.enter_context(acquire_lock(settings.inbox))
            self.install_signal_handlers()
            store = await self.patiently(lambda: Store(settings.db), "opening it")
            if store is None:
                return 0
            self.store = store
            held.callback(store.close)
            self.inbox = Inbox(settings.inbox, settings.outbox, store, settings.settle_seconds,
                               on_accept=lambda _a: self.work.set(),
                               refusal=lambda brief: sources.refusal(brief, settings))
            try:
                settings.outbox.mkdir(parents=True, exist_ok=True)
                recovered = await self.patiently(self.recover, "recovering interrupted briefs")
                if recovered is None:
                    return 0
                log.info("%s", startup_line(settings, self.once))
                if settings.on_finish and shutil.which(settings.on_finish[0]) is None:
                    log.warning("on_finish: %s is not an executable the daemon's user can find; briefs will end "
                                "without it until it is", settings.on_finish[0])
                loop = asyncio.get_running_loop()

                def deliver(callback: Callable[[], None]) -> None:  # watchdog's thread → this loop
                    loop.call_soon_threadsafe(callback)

                if not self.once:
                    observer = start_observer(self.inbox, settings.use_polling, deliver)
                self.inbox.scan()
                async with self.api(), self.services() as svc:
                    self.watch_api()
                    indexer = await self.start_library(svc)
                    watcher = self.supervised("the inbox watcher", self.watch_inbox, INTAKE)
                    workers = [self.supervised(f"worker {n}", lambda: self.worker(svc), WORKER)
                               for n in range(1, max(1, settings.workers) + 1)]
                    teller = (self.supervised("the systemd notifier", self.tell_systemd, TELLER)
                              if self.notifier.enabled else None)
                    prober = self.supervised("the outage probe", lambda: self.probe_outages(svc), PROBER)
                    try:
                        await asyncio.gather(*workers)
                    finally:  # before the clients close under them (a fetch failing then would be marked bad)
                        await self.cut_trailing(svc)
                        await self.hooks_done()
                    background = [task for task in (watcher, teller, prober, indexer, self.words) if task is not None]
                    for task in background:
                        task.cancel()
                    await asyncio.gather(*background, return_exceptions=True)
                self.notifier.stopping(self.queue_status())
                if self.gave_up and not self.fatal:
                    self.say_gave_up()
                return 3 if self.fatal or self.gave_up else 0
            finally:
                if observer is not None:
                    observer.stop()
                    observer.join(timeout=5)

    def supervised(self, name: str, run: Callable[[], Awaitable[None]], policy: Policy) -> asyncio.Task[None]:
        """`run` as a task under daemon.supervise: its death is logged by `name` and restarts it, or stops
        the daemon (exit 3) by `policy`; a store that cannot be written always stops it (as a worker's does)."""
        return asyncio.create_task(supervise(name, run, policy, stopping=self.stopping, fatal=self.die,
                                             restartable=self.restartable), name=f"briefd: {name}")

    def restartable(self, exc: Exception) -> bool:
        """Is a task that died of `exc` worth restarting? Not when the store failed (only a lock is waited for)."""
        problem = diagnose(exc, self.settings.db)
        return problem is None or problem.locked

    def die(self, reason: str) -> None:
        """A task the daemon cannot go on without died: stop, and exit 3 with `reason` (the first one said)."""
        if self.fatal is None:
            self.fatal = reason
            log.critical("%s; stopping (exit 3): a restart resumes every brief from its checkpoint", reason)
        self.stop()

    def watch_api(self) -> None:
        """The HTTP API's task (serve = true) is daemon.serve's: its end while the daemon runs stops the daemon."""
        task = next((t for t in asyncio.all_tasks() if t.get_name() == SERVE_TASK), None)
        if task is not None:
            task.add_done_callback(self.api_ended)

    def api_ended(self, task: "asyncio.Task[Any]") -> None:
        if task.cancelled() or self.stopping.is_set():
            return
        exc = task.exception()
        if exc is not None:
            log.error("the HTTP API died: %s: %s", type(exc).__name__, exc, exc_info=exc)  # the trace
        death = f"the HTTP API died: {type(exc).__name__}: {exc}" if exc else "the HTTP API stopped by itself"
        self.die(f"{death}; {API.why}")

    def api(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The HTTP API on this loop when `serve` is set (daemon.serve); not under --once, which ends with its briefs."""
        if not self.settings.serve or self.once:
            return contextlib.nullcontext()
        return serving_inside(self.settings)

    async def cut_trailing(self, svc: Services) -> None:
        """The pages finished briefs left loading (Research.hand_over) end with the daemon: a
        running daemon lets them finish while it works on (cached, or remembered as slow on their
        own timeout), but `run --once` does not stay up for them, nor a stop. Nothing is lost:
        such a page was given up by its brief already, and is only fetched again."""
        if svc.trailing:
            log.info("cutting off %d page fetch(es) left loading by finished briefs", len(svc.trailing))
        for task in list(svc.trailing):
            task.cancel()
        await asyncio.gather(*list(svc.trailing), return_exceptions=True)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop gracefully, in `run` and `run --once` alike (checkpoint, re-queue,
        exit 0). Only the main thread can own signals: a daemon embedded in a thread (tests)
        leaves them to its host."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.stop)
            except (RuntimeError, ValueError):
                return

    def recover(self) -> bool:
        """Start-up, under both locks: refuse a damaged store before writing to it, re-queue what
        was running when the last daemon died, sweep temp files, finish interrupted intake."""
        damage = self.store.quick_check()
        if damage != ["ok"]:
            raise StoreUnavailable(self.settings.db, damaged(
                self.settings.db, "is damaged (PRAGMA quick_check: " + "; ".join(damage[:5]) + ")"))
        with self.store.busy_timeout(LOCK_POLL_S):
            requeued = self.store.requeue_running()
        swept = sweep_temp_files(self.settings.outbox)
        tidied = self.inbox.reconcile()
        if requeued or swept or tidied:
            log.info("recovered: %d brief(s) re-queued, %d temp file(s) swept, %d inbox file(s) tidied",
                     requeued, swept, tidied)
        return True

    async def patiently(self, call: Callable[[], T], what: str) -> T | None:
        """`call()` against the store; while another process holds SQLite's lock, wait and
        retry (logging it when the wait starts and every LOCK_LOG_S), never crash on it.

        Returns None when told to stop while waiting. Any other store failure raises
        StoreUnavailable (the reason and the fix); a bug raises as it is.
        """
        started: float | None = None
        said = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                result = call()
            except Exception as exc:
                problem = diagnose(exc, self.settings.db)
                if problem is None:
                    raise
                if not problem.locked:
                    raise StoreUnavailable(self.settings.db, problem) from exc
                now = loop.time()
                if started is None or now - said >= LOCK_LOG_S:
                    waited = 0.0 if started is None else now - started
                    started = now if started is None else started
                    said = now
                    log.warning("store is locked by another process; waiting (%s, %.0f s so far; "
                                "retrying every %g s): %s", what, waited, LOCK_RETRY_S, problem.reason)
                try:
                    await asyncio.wait_for(self.stopping.wait(), timeout=LOCK_RETRY_S)
                except TimeoutError:
                    pass
                if self.stopping.is_set():
                    return None
                continue
            if started is not None:
                log.info("store is free again after %.0f s; going on (%s)", loop.time() - started, what)
            return result

    def stop(self) -> None:
        """SIGTERM/SIGINT: stop claiming; running briefs go back to the queue from their checkpoint."""
        log.info("stopping: no new briefs; running ones are checkpointed and re-queued")
        self.notifier.stopping("stopping: running briefs are checkpointed and re-queued")
        self.stopping.set()
        self.work.set()
        for task in self.running.values():
            task.cancel()

    async def start_library(self, svc: Services) -> "asyncio.Task[None] | None":
        """Index the library folders: kept current by a task (the daemon), or once before any
        brief is taken (`--once`: cron's briefs search the library as it is at that moment)."""
        if not self.settings.library:
            return None
        library = Library(self.settings.library, svc.store, svc.pages.read_file)
        if self.once:
            await library.guarded(library.scan())  # a pass that fails is logged; the briefs still run
            return None
        return self.supervised("the library index", lambda: library.run(
            self.stopping, rescan_s=RESCAN_S, use_polling=self.settings.use_polling), LIBRARY)

    def services(self) -> "_ServicesContext":
        return _ServicesContext(self.settings, self.store, self.outages, self.pages)

    # ---- what the operator sees: systemd, the exit of `run --once`, on_finish ------------------

    def queue_status(self) -> str:
        """The queue in one line (queue_line); the store asked without waiting on another process's
        lock (a locked store says so instead: the watchdog must keep its beat)."""
        try:
            with self.store.busy_timeout(0.2):
                return queue_line(self.store.counts_by_state(), self.outages)
        except Exception as exc:  # noqa: BLE001 - a status line is never worth stopping for
            log.debug("queue status not read: %s", exc)
            return "store busy; " + (self.outages.summary() or "working")

    async def tell_systemd(self) -> None:
        """Type=notify: READY=1 once briefs are being taken, then on every tick (STATUS_EVERY_S, or
        half of WATCHDOG_USEC when that is shorter) STATUS= when the queue changed and WATCHDOG=1.
        A ping on every tick, not once per half of WATCHDOG_USEC: a ping costs one datagram, and a
        loop that stalls just before a sparse ping would have only half of WatchdogSec= left; this
        way a stall shorter than WatchdogSec= less one tick (115 s of the unit's 120 s) is survived.
        A task on the event loop, so a stuck loop stops the pings and systemd restarts the daemon
        (which resumes every brief from its checkpoint)."""
        said = self.queue_status()
        self.notifier.ready(said)
        self.notifier.watchdog()
        every = self.notifier.watchdog_s
        tick = min(STATUS_EVERY_S, every) if every else STATUS_EVERY_S
        while True:
            await asyncio.sleep(tick)
            line = self.queue_status()
            if line != said:
                self.notifier.status(line)
                said = line
            if every is not None:
                self.notifier.watchdog()

    def say_gave_up(self) -> None:
        """`run --once` stopped waiting: which service, why, the fix, and what stays queued (exit 3)."""
        for service, (reason, own_fix) in self.gave_up.items():
            fix = restart_fix(service, self.settings, own_fix)
            waiting = sum(1 for gave_up_on in self.parked.values() if gave_up_on == service)
            log.error("run --once gave up waiting for %s after once_patience_s (%g s): %s; %d brief(s) stay "
                      "queued; to fix: %s", service, self.settings.once_patience_s, reason, waiting, fix)

    def ended(self, brief_id: str, status: str, outdir: Path, report: Mapping[str, Any]) -> None:
        """A brief ended: its on_finish command starts beside the daemon's work (daemon.onfinish),
        told whether its report found an answer."""
        argv = self.settings.on_finish
        if not argv:
            return
        ended = onfinish.Ended(brief_id, status, outdir, onfinish.answer_found(report))
        task = asyncio.create_task(onfinish.run(argv, ended,
                                                self.settings.on_finish_timeout_s), name=f"on_finish {brief_id}")
        self.hooks.add(task)
        task.add_done_callback(self.hook_ended)

    def hook_ended(self, task: "asyncio.Task[int | None]") -> None:
        """An on_finish task's death is logged, never restarted (the brief has ended: a second run of the
        command would tell twice) and never stops the daemon (onfinish: it is judged by its own exit)."""
        self.hooks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s died: %s: %s; it is not run again (the brief's report is written)", task.get_name(),
                      type(exc).__name__, exc, exc_info=exc)

    async def hooks_done(self) -> None:
        """The daemon ends after the on_finish commands it started (each bounded by its time limit)."""
        if self.hooks:
            await asyncio.gather(*list(self.hooks), return_exceptions=True)

    async def watch_inbox(self) -> None:
        """Take stable files; rescan on a timer (events can be lost, files can predate the watch)."""
        last_scan = 0.0
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            now = loop.time()
            if now - last_scan >= self.settings.poll_seconds and self.inbox.scan():
                last_scan = now  # a scan that failed (Inbox.scan said why) is tried again next turn
            self.take_files()
            await asyncio.sleep(0.2)

    async def probe_outages(self, svc: Services) -> None:
        """While a service is down (not misconfigured: a fix only the user can make is not probed), knock
        on it every PROBE_EVERY_S; when it answers after a failed knock, its waiting briefs resume now
        rather than at their retry time (up to retry.QUEUE's 5 minutes later: issue 19 #15)."""
        async with contextlib.AsyncExitStack() as clients:
            prober = Prober(self.probe_targets(svc, clients))
            while not self.stopping.is_set():
                down = [service for service in self.outages.down if self.outages.fix(service) is None]
                for service in await prober.back(down) if down else []:
                    resume = functools.partial(self.store.resume_waiting, service)
                    resumed = await self.patiently(resume, f"resuming the briefs waiting for {service}")
                    if resumed:
                        log.info("%s answers again: %d waiting brief(s) resume now, not at their retry time",
                                 service, resumed)
                        self.work.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), PROBE_EVERY_S)

    def probe_targets(self, svc: Services,
                      clients: contextlib.AsyncExitStack) -> dict[str, list[tuple[httpx.AsyncClient, str]]]:
        """Each service's probe: every model host's /api/version (an OpenAI-compatible one's /v1/models)
        through its own egress transport, and SearXNG's /healthz through the search client (not under
        egress = none: it is never contacted)."""
        settings = self.settings
        targets: dict[str, list[tuple[httpx.AsyncClient, str]]] = {"ollama": []}
        for host in model_hosts(settings):
            http = httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, trust_env=False,
                                     transport=service_transport(settings, host, model=True))
            clients.push_async_callback(http.aclose)  # closed with the probe task
            url = (base_url(host) if settings.model_api == "ollama" else host).rstrip("/")
            targets["ollama"].append((http, url + PROBE_PATHS[settings.model_api]))
        if settings.egress != "none":
            targets["searxng"] = [(svc.http, settings.searxng_url.rstrip("/") + PROBE_PATHS["searxng"])]
        return targets

    def take_files(self) -> None:
        """Take what is ready in the inbox; a store locked by another process leaves the files
        for the next turn after LOCK_POLL_S, not the 30 s busy timeout (Inbox.take_ready)."""
        with self.store.busy_timeout(LOCK_POLL_S):
            self.inbox.take_ready()

    def claim(self) -> BriefRow | None:
        with self.store.busy_timeout(LOCK_POLL_S):
            self.start_due_series()
            return self.store.claim_next(skip=self.parked)

    def start_due_series(self) -> None:
        """Series whose turn has come get their run (daemon/intake/series.py) before the next claim: on
        the claim loop's existing poll, between briefs, looked for when a daemon starts and then at most every poll_seconds; `run --once` looks only
        when it starts (an hourly series whose runs take an hour would otherwise never let it exit)."""
        now = time.monotonic()
        if self.series_looked is not None and (self.once or now - self.series_looked < self.settings.poll_seconds):
            return  # `run --once` looks once, when it starts: a series due later never keeps it from exiting
        series.start_due(self.store)
        self.series_looked = now

    def nothing_left(self) -> bool:
        """`run --once` is done: no file waiting in the inbox, nothing queued or running."""
        return not self.inbox.tracked and self.store.pending_work(skip=self.parked) == 0

    async def worker(self, svc: Services) -> None:
        try:
            await self.work_on(svc)
        except StoreUnavailable as exc:  # idle: nothing is lost by stopping; a restart resumes
            if self.fatal is None:
                self.fatal = str(exc)
                log.critical("%s; stopping (exit 3)", exc)
            self.stop()

    def words_soon(self) -> None:
        """Load the relevance rule's word frequencies (decide.is_rare_word) in a thread, once, as the first brief
        is claimed: its first quote judged does not pay them on the event loop, and a daemon with nothing to do
        loads none (about 0.2 s of CPU a cron tick on an empty inbox, when it was done at every start)."""
        if self.words is None:
            self.words = asyncio.create_task(asyncio.to_thread(decide.load_word_frequencies))

    async def work_on(self, svc: Services) -> None:
        while not self.stopping.is_set():
            if self.once:
                self.inbox.scan()
                self.take_files()
            run = await self.patiently(self.claim, "claiming the next brief")
            if run is None:
                if self.once and await self.patiently(self.nothing_left, "checking for work left"):
                    return
                self.work.clear()
                try:
                    await asyncio.wait_for(self.work.wait(), timeout=IDLE_POLL_S)
                except asyncio.TimeoutError:
                    pass
                continue
            crashpoints.reached("claimed")
            svc.pages.warm_soon()  # the children start while the brief's plan is asked (none for an idle daemon)
            self.words_soon()
            task = asyncio.create_task(self.run_brief(svc, run))
            self.running[run.run_id] = task
            try:
                await task
            except asyncio.CancelledError:
                if not self.stopping.is_set():
                    raise
                self.store.requeue(run.run_id)
                log.info("%s: interrupted, re-queued from its last checkpoint", run.brief_id)
            except Exception as exc:  # run_brief handles all but a store it cannot write to
                problem = diagnose(exc, self.settings.db)
                why = StoreUnavailable(self.settings.db, problem) if problem else exc
                self.fatal = f"{run.brief_id}: the store could not record the brief's state: {why}"
                log.critical("%s; stopping (exit 3): a restart resumes it from its last checkpoint", self.fatal)
                self.stop()
            finally:
                self.running.pop(run.run_id, None)
                # the idle workers look again now: under `run --once` the last brief's end is their cue to
                # exit, which they otherwise found only at their next poll (up to IDLE_POLL_S after the last
                # report, with workers >= 2: issue 22, the run timed start to exit)
                self.work.set()

    async def run_brief(self, svc: Services, run: BriefRow) -> None:
        settings = self.settings
        try:
            outdir = safe_outdir(settings.outbox, run.brief_id)
        except ValueError as exc:
            # Accepted by an older briefd whose id rule let ".x" or "-rf" through: there is no safe
            # folder for it, so it ends failed in the store (`briefd show`/`status` tell) rather
            # than stopping the daemon at every start.
            error = f"{exc}; submit the brief again with an id that starts with a letter, digit or _"
            log.error("%s: %s", run.brief_id, error)
            self.store.finish(run.run_id, state=FAILED, stop_reason="error", error=error,
                              event=("failed", {"state": FAILED, "stop_reason": "error", "error": error}))
            return
        events = EventLog(self.store, run.run_id, run.brief_id, outdir / "events.ndjson")
        brief: Brief | None = None
        research: Research | None = None
        try:
            brief = brief_of(self.store, run)
            if not run.outdir_ready:
                archive_previous(outdir)
                received = self.store.received_bytes(run.run_id)
                atomic_write_bytes(outdir / "brief.json", received)
                crashpoints.reached("outdir_ready")
                self.store.set_outdir_ready(run.run_id)
                events.resync()
                events.emit("signal", message="started", attempt=run.attempts)
            else:
                events.resync()
                events.emit("signal", message="resumed from checkpoint", attempt=run.attempts)
            if (refused := check_follows_at_start(self.store, brief)) is not None:
                raise refused  # queued behind its parent, which then ended without a done run
            research = Research(svc, run.run_id, brief, run.started_at or utc_now(), events)
            report = await research.run()
            report["source_file"] = run.source_file
            report["changes"] = changes_since(research.previous, outdir, report)
            self.draw_chart(outdir, report, brief, events)
            write_report(outdir, report, brief.formats)
            crashpoints.reached("report_written")
            self.store.service_back(run.run_id)
            self.outages.came_back("outbox")  # its report was written
            # a cancel asked until the brief ends reaches it, though its last step (the synthesis) is
            # past: checked in the transaction that ends it done, so `briefd cancel` (which flags it
            # in a transaction of its own) either ends it cancelled or finds it done (issue 22)
            with self.store.immediate():
                research.check_cancel()
                events.finish("complete", state=DONE, stop_reason=report["stop_reason"],
                              history=history_row(report, kind_of(brief)), report=str(outdir / "report.json"),
                              usage=report["usage"], sources=len(report["sources"]), evidence=len(report["evidence"]))
            self.ended(run.brief_id, DONE, outdir, report)
        except Cancelled:
            assert research is not None and brief is not None  # only Research.run raises it
            self.cancelled(run, brief, research, outdir, events)
        except BriefError as exc:
            self.fail(run, brief, outdir, events, str(exc), "error")
        except ServiceUnavailable as exc:  # the model, SearXNG, a full or read-only outbox: the brief waits
            self.wait_or_fail(run, brief, outdir, events, exc.service, exc.reason, fix=exc.fix, research=research)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or an unforeseen input: never take the daemon down
            if diagnose(exc, settings.db) is not None:
                raise  # the store failed, not the brief: no attempt is spent; the daemon stops (exit 3)
            log.error("%s: %s\n%s", run.brief_id, exc, traceback.format_exc())
            self.retry_or_fail(run, brief, outdir, events, f"{type(exc).__name__}: {exc}", research)

    def wait_or_fail(self, run: BriefRow, brief: Brief | None, outdir: Path, events: EventLog,
                     service: str, reason: str, fix: str | None = None, research: Research | None = None) -> None:
        """A service outage never fails a brief within `patience_s`: it waits on the queue (`retry.queue_delay`).

        A misconfiguration only the user can end (`fix`: model not pulled, SearXNG's json
        format off or its limiter on) waits the same way, so fixing it resumes every brief
        where it stood; the daemon's log says the outage (and its fix) once, not once per brief
        or retry (daemon.outages). `run --once` waits at most `once_patience_s` for a service:
        then the brief stays queued for the next run (`park`) and the run exits 3.
        """
        if research is not None and brief is not None and self.store.cancel_requested(run.run_id):
            self.cancelled(run, brief, research, outdir, events)  # cancelled meanwhile: no reason to wait
            return
        self.outages.went_down(service, reason, fix)
        cause = reason  # without the fix: `run --once`'s give-up line says the fix on its own
        if fix is not None and fix not in reason:
            reason = f"{reason}; to fix: {fix}"
        since, outages = self.store.outage_state(run.run_id)
        waited = seconds_since(since) if since is not None else None  # None: this outage is the first
        if out_of_patience(waited, self.settings.patience_s):
            self.fail(run, brief, outdir, events,
                      f"{service} stayed unavailable for {waited:.0f} s (patience_s {self.settings.patience_s:g}): "
                      f"{reason}", "error", research)
            return
        delay = queue_delay(outages)
        given = {"fix": fix} if fix else {}
        if self.once:
            left = self.settings.once_patience_s - self.outages.down_for(service)
            if left <= 0:
                self.park(run, events, service, reason, outages, cause, fix)
                return
            delay = min(delay, left)  # the last try falls on the deadline, not a doubling past it
        stamp = utc_now(delay)
        self.store.wait_for_service(run.run_id, f"{service}: {reason} (retry at {stamp})", stamp)
        events.emit("waiting", service=service, reason=reason, retry_at=stamp, outages=outages + 1, **given)
        self.work.set()

    def park(self, run: BriefRow, events: EventLog, service: str, reason: str, outages: int,
             cause: str, fix: str | None) -> None:
        """`run --once` gave up on `service`: the brief stays queued with the reason (`briefd status`
        shows it), not taken again by this run; the next run takes it where it stood. Its wait
        still counts toward patience_s, so a service gone for good fails it in the end."""
        down = self.outages.down_for(service)
        stamp = utc_now()
        self.store.wait_for_service(run.run_id, f"{service}: {reason} (run --once gave up after {down:.0f} s, "
                                                f"once_patience_s {self.settings.once_patience_s:g}; the next run "
                                                f"tries again)", stamp)
        given = {"fix": fix} if fix else {}
        events.emit("waiting", service=service, reason=reason, retry_at=stamp, outages=outages + 1,
                    next_run=True, **given)
        self.parked[run.run_id] = service
        self.gave_up.setdefault(service, (cause, fix))
        self.work.set()

    def retry_or_fail(self, run: BriefRow, brief: Brief | None, outdir: Path, events: EventLog,
                      error: str, research: Research | None = None) -> None:
        if run.attempts < self.settings.max_attempts:
            self.store.requeue(run.run_id)
            events.emit("signal", message="attempt failed; re-queued", error=error, attempt=run.attempts)
        else:
            self.fail(run, brief, outdir, events, f"{error} (after {run.attempts} attempts)", "error", research)

    def fail(self, run: BriefRow, brief: Brief | None, outdir: Path, events: EventLog, error: str,
             stop_reason: str, research: Research | None = None) -> None:
        found = self.found_so_far(run, research, stop_reason, FAILED_NOTE)
        report = ended_report(run, self.settings, status=FAILED, stop_reason=stop_reason, error=error,
                              note=FAILED_NOTE if found and found["evidence"] else None, found=found)
        self.write_ended(run, brief, outdir, report, events)
        events.finish("failed", state=FAILED, stop_reason=stop_reason, error=error, history=history_row(report, kind_of(brief)))
        self.ended(run.brief_id, FAILED, outdir, report)

    def cancelled(self, run: BriefRow, brief: Brief, research: Research, outdir: Path, events: EventLog) -> None:
        """`briefd cancel` reached a running brief: it ends `cancelled`, keeping what it found."""
        note = cancel_note(research)
        found = self.found_so_far(run, research, CANCELLED, note)
        report = ended_report(run, self.settings, status=CANCELLED, stop_reason=CANCELLED, error=None,
                              note=note, found=found)
        self.write_ended(run, brief, outdir, report, events)
        events.finish("cancelled", state=CANCELLED, stop_reason=CANCELLED, reason=note, history=history_row(report, kind_of(brief)),
                      report=str(outdir / "report.json"), usage=report["usage"],
                      sources=len(report["sources"]), evidence=len(report["evidence"]))
        self.ended(run.brief_id, CANCELLED, outdir, report)

    def found_so_far(self, run: BriefRow, research: Research | None, stop_reason: str,
                     note: str) -> dict[str, Any] | None:
        """The research so far for an ended report, or None (none, or it cannot be computed).

        Never raises for a bug in building it: the brief must still end with a report. A
        store failure still raises (the daemon stops with exit 3; a restart resumes).
        """
        if research is None:
            return None
        try:
            return research.report_so_far(stop_reason, note)
        except Exception as exc:
            if diagnose(exc, self.settings.db) is not None:
                raise
            log.error("%s: the research so far could not be reported: %s\n%s", run.brief_id, exc,
                      traceback.format_exc())
            return None

    def write_ended(self, run: BriefRow, brief: Brief | None, outdir: Path, report: dict[str, Any],
                    events: EventLog) -> None:
        if brief is not None:
            self.draw_chart(outdir, report, brief, events)
        try:
            write_report(outdir, report, brief.formats if brief else ("json", "md"))
        except WriteFailed as exc:  # the store still records the end and why; `briefd show` tells it
            log.error("%s: %s; its end is recorded in the store only", run.brief_id, exc)
        crashpoints.reached("report_written")

    @staticmethod
    def draw_chart(outdir: Path, report: dict[str, Any], brief: Brief, events: EventLog) -> None:
        """chart.png for an estimate brief when matplotlib is installed, and report["chart"]'s note
        (chart.svg itself is written with the reports); a missing chart never fails a brief."""
        report["chart"] = None
        if report.get("estimate"):
            report["chart"] = note = write_chart(outdir, report["estimate"], brief.question)
            if note["missing"]:  # the report is whole without it: say why, never fail the brief for it
                events.emit("signal", message="chart not drawn", reason=note["missing"])
            elif note["png_missing"] and matplotlib_installed():  # without the png extra there is nothing to say
                events.emit("signal", message="chart.png not drawn", reason=note["png_missing"])


class _ServicesContext:
    """Build the HTTP and model clients once, close them at the end.

    Everything started is closed through one exit stack, so a step that fails after others
    started closes what was started before the error leaves: the page-reading children and
    their warm-up task, left behind when opening the archives raised, kept a daemon that
    took no brief alive past SIGTERM (issue 19 #3)."""

    def __init__(self, settings: Settings, store: Store, outages: OutageLog, pages: PageWorkers | None = None) -> None:
        self.settings = settings
        self.store = store
        self.outages = outages
        self.prestarted = pages
        self.started = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Services:
        async with contextlib.AsyncExitStack() as started:
            services = await self.start(started)
            self.started = started.pop_all()  # kept open until __aexit__
        return services

    async def start(self, started: contextlib.AsyncExitStack) -> Services:
        settings = self.settings
        limits = fetch_limits(settings)
        # trust_env=False: a proxy from the environment would search past the egress transport.
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(settings.search_timeout_s), trust_env=False,
                                      transport=service_transport(settings, settings.searxng_url, model=False))
        started.push_async_callback(self.http.aclose)
        self.fetch_client = make_fetch_client(limits)
        started.push_async_callback(self.fetch_client.aclose)
        model = model_config(settings)
        # One client per model server, each through its own egress transport (its host allowed).
        key = openai_key(settings)
        if settings.model_api == "openai" and not settings.openai_api_key:
            exposed = readable_by_others(settings.openai_api_key_file, "openai_api_key_file")
            if exposed:
                log.warning("%s", exposed)
        self.hosts = ModelHosts.build(model, model_hosts(settings), lambda cfg: make_llm_client(
            cfg, service_transport(settings, cfg.host, model=True), key))
        self.llm_client = next(iter(self.hosts.clients.values()))
        served = await served_config(model, self.llm_client)  # an OpenAI-compatible server's own context
        if served != model:
            log.info("the model server reports a context of %d tokens for %s: prompts are sized to it (num_ctx "
                     "says %d)", served.num_ctx, settings.model, model.num_ctx)
            model = self.hosts.model = served
        # `briefd run`'s own (closed as ours too), else a pool whose children start at the first claim (warm_soon)
        self.pages = self.prestarted if self.prestarted is not None else PageWorkers()
        started.push_async_callback(self.pages.close)  # its warm-up first, then the children
        # The archives open in the background, each in its reader child, and join the searchable set as
        # they open; each one's outcome is logged as it comes (one that cannot be opened: the others still
        # serve). Waiting for them here held READY=1 back: two hung network shares took 124 s, past
        # systemd's start timeout, and the daemon was killed and restarted for ever (issue 29 #5).
        shelf = (await asyncio.to_thread(Archives.from_settings, settings, background=True)
                 if settings.archives else None)
        if shelf is not None:
            started.callback(shelf.close)  # its reader children: a kill and a reap each, milliseconds
        return Services(settings=settings, store=self.store, http=self.http,
                        fetch_client=self.fetch_client, llm_client=self.llm_client, model=model, hosts=self.hosts,
                        fetch_limits=limits,
                        fetch_slots=asyncio.Semaphore(max(1, settings.fetch_concurrency)),
                        pages=self.pages, archives=shelf, outages=self.outages,
                        library=LibrarySource(self.store) if settings.library else None)

    async def __aexit__(self, *exc: object) -> None:
        await self.started.aclose()


def serve(settings: Settings, once: bool = False) -> int:
    return asyncio.run(Daemon(settings, once).serve())
