"""Start and stop the lab's real servers: the web, datasette and SearXNG.

Each server is a real subprocess on 127.0.0.1 on a free port, with its output
in a log file under the lab's work directory, so a failing test can show what
the server said. ``start_search_lab`` starts all three at once (they start in
parallel: a few seconds on two cores) and checks that a question typed into
SearXNG really comes back with corpus results before it returns.

    with start_search_lab(tmp_path) as lab:
        httpx.get(f"{lab.searxng_url}/search", params={"q": "...", "format": "json"})

Children die with the process that started them (PR_SET_PDEATHSIG on Linux),
so a test run killed with -9 leaves no servers behind. The signal follows the
*thread* that started them: start the lab from a thread that outlives it (the
main thread, as pytest fixtures are).

A lab server that dies while the lab is in use is reported at once, with its exit signal and
the end of its log (``LabWatch``): `make demo`, `make lab`, `make bench-real` and the test
fixtures stop there, instead of briefd waiting out its patience and blaming the user's Ollama.

Run the whole lab for a demo:

    python -m lab.servers --workdir DIR [--searxng-port 8888]

prints one JSON line with the URLs, then serves until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence, TYPE_CHECKING, TypeVar

import httpx

if TYPE_CHECKING:
    from lab.corpus import Page
    from lab.search_index import Rows
    from lab.searxng import SearxngOptions, SearxngServer

REPO_ROOT = Path(__file__).resolve().parents[1]

# Runs before the real program: ask the kernel to SIGTERM us when our parent
# goes away, and go now if it already has. prctl survives exec.
_LAUNCHER = (
    "import ctypes, os, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, 15, 0, 0, 0)\n"  # PR_SET_PDEATHSIG, SIGTERM
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class LabError(RuntimeError):
    """A lab server did not start; the message carries the end of its log."""


class LabServerDied(LabError):
    """A lab server exited while the lab was in use; the message names its signal and ends with its log."""


# How a lab server is named to a person, by its Proc name (the first match wins).
ROLES = (("ollama", "the model server"), ("valkey", "SearXNG's Valkey"), ("searxng", "SearXNG"),
         ("datasette", "the search index"), ("web", "the lab web"))
LOG_TAIL_LINES = 40  # what a death report quotes of the server's log (a crash's trace, with its threads)


def role_of(name: str) -> str:
    """What the server is to a person: 'the model server' (ollama-llama), 'SearXNG' (searxng-2)."""
    return next((text for key, text in ROLES if name.startswith(key) or name.endswith(key)), "the lab server")


def exit_description(returncode: int) -> str:
    """'died of SIGSEGV' for a signal (Popen's negative return code), 'exited with status 3' otherwise."""
    if returncode < 0:
        try:
            return f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died of signal {-returncode}"
    return f"exited with status {returncode}"


EPHEMERAL_PORTS_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
EPHEMERAL_PORTS_DEFAULT = (32768, 60999)  # Linux's default range, where the file cannot be read
LAB_PORTS_LOWEST = 10000  # below it live the well-known and registered services a host may run
_handed_out: set[int] = set()  # the ports this process has given a server: never given twice
_DRAWS = random.SystemRandom()  # the OS's randomness: two processes (a fork, a bench beside the tests) draw apart


def ephemeral_ports() -> range:
    """The ports the kernel gives outgoing connections (and bind to port 0): ip_local_port_range."""
    try:
        low, high = (int(part) for part in EPHEMERAL_PORTS_FILE.read_text().split())
    except (OSError, ValueError):
        low, high = EPHEMERAL_PORTS_DEFAULT
    return range(low, high + 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port for a lab server that nothing holds now and that no outgoing connection can take meanwhile.

    A server binds its port seconds after the port is chosen (SearXNG takes 2-3 s to import). A port the
    kernel picks with bind(0) lies in the ephemeral range, which every outgoing connection draws its local
    port from: the lab's own readiness polls could take it in between, and SearXNG then died 'Address
    already in use' (a CI run, 2026-11-28). So the port is drawn at random outside that range, where only a
    listening server could hold it, checked free by binding it, and never handed out twice by this process.
    """
    ephemeral = ephemeral_ports()
    pool = [port for port in range(LAB_PORTS_LOWEST, 65536) if port not in ephemeral and port not in _handed_out]
    for port in _DRAWS.sample(pool, min(len(pool), 200)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue  # held by a server, or closing (TIME_WAIT): another
        _handed_out.add(port)
        return port
    if pool:
        raise LabError(f"no free TCP port on {host} outside the ephemeral range "
                       f"{ephemeral.start}-{ephemeral.stop - 1}: stop some servers, or narrow that range")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # the host made every port ephemeral
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Startable(Protocol):
    """A started server process briefd's lab waits for (datasette, SearXNG)."""

    def wait_ready(self, timeout: float = 30.0) -> float: ...

    def stop(self) -> None: ...


StartedT = TypeVar("StartedT", bound=Startable)


def ready_or_stopped(server: StartedT, wait: bool, timeout: float) -> StartedT:
    """The server, once it answers when `wait` asks for it; one that never answers is stopped before the error
    goes up, so no half-started server outlives the lab that started it."""
    if wait:
        try:
            server.wait_ready(timeout)
        except BaseException:
            server.stop()
            raise
    return server


def serve_until_interrupted(server: socketserver.BaseServer, poll_interval: float = 0.5) -> None:
    """A lab server's own process: serve until Ctrl-C (or SIGINT from the lab), then close the socket."""
    try:
        server.serve_forever(poll_interval=poll_interval)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@dataclass
class Proc:
    """A server subprocess with its log file."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)
    stopping: bool = False  # stop() was called: its exit is no death to report

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode("utf-8", "replace")

    def death(self) -> str | None:
        """What to tell a person once this server has exited without stop(): None while it runs or once stopped.

        'lab: the model server (ollama-llama, pid 812) died of SIGSEGV; its log (PATH) ends:' and the log's
        last lines (the lab's Python servers run with faulthandler, so a crash leaves its traceback there).
        """
        code = self.popen.poll()
        if code is None or self.stopping:
            return None
        lines = self.log_tail().rstrip().splitlines()[-LOG_TAIL_LINES:] or ["(empty)"]
        tail = "\n".join(f"    {line}" for line in lines)
        return (f"lab: {role_of(self.name)} ({self.name}, pid {self.pid}) {exit_description(code)}; "
                f"its log ({self.log_path}) ends:\n{tail}")

    def wait_ready(
        self,
        url: str,
        timeout: float = 30.0,
        ready: Callable[[httpx.Response], bool] = lambda r: r.status_code == 200,
    ) -> float:
        """Poll ``url`` until ``ready(response)``; return seconds since start.

        Raises LabError (with the log's tail) if the process exits or the
        deadline passes first.
        """
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if not self.alive:
                    raise LabError(
                        f"{self.name} {exit_description(self.popen.returncode)} before it was ready "
                        f"({url}); log {self.log_path}:\n{self.log_tail()}"
                    )
                try:
                    response = client.get(url)
                    if ready(response):
                        return time.monotonic() - self.started_at
                    last = f"HTTP {response.status_code}: {response.text[:200]!r}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() > deadline:
                    raise LabError(
                        f"{self.name} not ready after {timeout:.0f}s at {url} ({last}); "
                        f"log {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(0.05)

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds. Returns the exit code."""
        self.stopping = True
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(grace)
        return self.popen.returncode


def start_proc(
    name: str,
    argv: list[str],
    log_dir: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Proc:
    """Start ``argv`` with stdout+stderr in ``log_dir/<name>.log``.

    ``argv[0]`` must be an executable path (sys.executable, a found binary).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    full_env = dict(os.environ)
    # The lab is loopback only: never send its traffic through a proxy.
    for key in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        full_env.pop(key, None)
    full_env["NO_PROXY"] = full_env["no_proxy"] = "127.0.0.1,localhost"
    full_env["PYTHONUNBUFFERED"] = "1"
    full_env["PYTHONFAULTHANDLER"] = "1"  # a crash (SIGSEGV in llama.cpp) leaves its Python traceback in the log
    full_env.update(env or {})
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=str(cwd or REPO_ROOT),
            # Ctrl-C reaches only the script, which stops its servers; none dies first and is reported dead
            start_new_session=True,
        )
    return Proc(name=name, argv=argv, log_path=log_path, popen=popen)


WATCH_INTERVAL_S = 0.2  # how often the watch looks at the lab's servers
INTERRUPT_SIGNAL = signal.SIGUSR1  # how it wakes the main thread: a real signal ends a blocking wait at once


def report_to_stderr(text: str) -> None:
    """A death as scripts report it (make demo, make lab, make bench-real): on stderr, at once."""
    print(text, file=sys.stderr, flush=True)


class LabWatch:
    """Watches the lab's servers from a thread; the first that dies without stop() is reported at once.

    Why: while the lab is in use the main thread is blocked in whatever uses it (`briefd run --once`
    in subprocess.run, a test), and briefd sees a dead model server only as an outage: it waits out
    once_patience_s, then tells the user to start Ollama. The watch instead ``report``s the death
    (its signal and the end of its log: Proc.death) and, while its group is ``armed``, raises
    LabServerDied in the main thread, woken by a real signal (INTERRUPT_SIGNAL, to the main thread
    only) so that a blocking wait returns at once; subprocess.run then kills the briefd it started.
    A death while its group is not armed (between two tests) is kept: the next ``armed`` of that
    group raises it at once. Start it from the main thread (the signal handler is installed there;
    from another thread it only reports).
    """

    def __init__(self, report: Callable[[str], None] | None = None, interval: float = WATCH_INTERVAL_S) -> None:
        self.report = report
        self.interval = interval
        self._lock = threading.Lock()
        self._groups: dict[str, list[Proc]] = {}
        self._deaths: dict[str, str] = {}  # group -> its first death
        self._seen: set[int] = set()  # id() of the Procs already reported
        self._armed: dict[str, int] = {}  # group -> how many armed() blocks hold it
        self._pending: tuple[str, str] | None = None  # (group, death) the signal is raising
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main: int | None = None
        self._previous: Any = None

    def add(self, group: str, *procs: Proc) -> None:
        """Watch ``procs`` as ``group`` (a fixture's name, "lab" for a script's whole lab)."""
        with self._lock:
            self._groups.setdefault(group, []).extend(procs)

    def death(self, groups: Iterable[str] | None = None) -> str | None:
        """The first death the watch saw in ``groups`` (all when None), or None."""
        with self._lock:
            return next((text for group, text in self._deaths.items() if groups is None or group in groups), None)

    @contextmanager
    def armed(self, groups: Iterable[str] | None = None) -> Iterator[None]:
        """While inside, a death in ``groups`` (all watched groups when None) raises LabServerDied here at once;
        one that came before raises on entry."""
        with self._lock:
            chosen = list(self._groups) if groups is None else [g for g in groups if g in self._groups]
        text = self.death(chosen)
        if text is not None:
            raise LabServerDied(text)
        with self._lock:
            for group in chosen:
                self._armed[group] = self._armed.get(group, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for group in chosen:
                    self._armed[group] -= 1
                    if not self._armed[group]:
                        del self._armed[group]

    def start(self) -> LabWatch:
        if threading.current_thread() is threading.main_thread():
            self._main = threading.main_thread().ident
            self._previous = signal.signal(INTERRUPT_SIGNAL, self._on_signal)
        self._thread = threading.Thread(target=self._run, name="lab-watch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop watching; the thread is joined before the signal handler is put back, so no signal is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._main is not None:
            signal.signal(INTERRUPT_SIGNAL, self._previous)
            self._main = None

    def __enter__(self) -> LabWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Look at every watched server once; report and raise (when armed) each new death."""
        with self._lock:
            watched = [(group, proc) for group, procs in self._groups.items() for proc in procs]
        for group, proc in watched:
            text = proc.death() if id(proc) not in self._seen else None
            if text is None:
                continue
            self._seen.add(id(proc))
            with self._lock:
                self._deaths.setdefault(group, text)
                interrupt = group in self._armed and self._main is not None and self._pending is None
                if interrupt:
                    self._pending = (group, text)
            if self.report is not None:
                self.report(text)
            if interrupt and self._main is not None:
                signal.pthread_kill(self._main, INTERRUPT_SIGNAL)

    def _on_signal(self, signum: int, frame: Any) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
            live = pending is not None and pending[0] in self._armed
        if pending is not None and live:
            raise LabServerDied(pending[1])
        if pending is None and callable(self._previous):
            self._previous(signum, frame)  # not ours: another watch's (nested) signal


def answering(proc: Proc, url: str, timeout: float) -> Proc:
    """`proc` once `url` answers; stopped before the error goes up when it never does."""
    try:
        proc.wait_ready(url, timeout=timeout)
    except BaseException:
        proc.stop()
        raise
    return proc


def start_ollama(log_dir: Path, driver: str = "scripted", *, name: str = "ollama", port: int | None = None,
                 extra: Sequence[str] = (), timeout: float = 60.0) -> tuple[Proc, str]:
    """The lab's Ollama-compatible server (lab.ollama_server) on loopback, ready; returns it and its URL.

    Requests are logged to ``log_dir/<name>.requests.ndjson``; ``extra`` adds flags such as
    ``--tokens-per-s 60``.
    """
    port = port or free_port()
    proc = start_proc(
        name,
        [sys.executable, "-m", "lab.ollama_server", "--host", "127.0.0.1", "--port", str(port),
         "--driver", driver, "--log", str(log_dir / f"{name}.requests.ndjson"), *extra],
        log_dir,
    )
    url = f"http://127.0.0.1:{port}"
    return answering(proc, f"{url}/api/version", timeout), url


def start_openai_llama(log_dir: Path, *, name: str = "openai-llama", port: int | None = None,
                       n_ctx: int = 2048, threads: int | None = None, timeout: float = 180.0) -> tuple[Proc, str]:
    """llama-cpp-python's OpenAI-compatible server with Gemma 3 270M (lab.openai_llama) on loopback, ready
    (its model loaded); returns it and its base URL, with the /v1. `threads`: llama.cpp's CPU threads (None:
    lab.openai_llama's own default)."""
    port = port or free_port()
    more = ["--threads", str(threads)] if threads is not None else []
    proc = start_proc(name, [sys.executable, "-m", "lab.openai_llama", "--port", str(port), "--n-ctx", str(n_ctx),
                             *more], log_dir)
    url = f"http://127.0.0.1:{port}/v1"
    return answering(proc, f"{url}/models", timeout), url


@contextmanager
def lab_with_model(root: Path, driver: str = "scripted", *, lab_dir: str = "lab", name: str = "ollama",
                   extra: Sequence[str] = ()) -> Iterator[tuple[SearchLab, str]]:
    """The search lab and one model server for a script (demo, benches): (the lab, the model's URL),
    both stopped at the end, the lab also when the model server fails to start.

    All of them are watched (LabWatch): one that dies is reported on stderr at once, with its signal and
    its log's end, and LabServerDied is raised in the block (a `briefd run` it was running is killed).
    """
    lab = start_search_lab(root / lab_dir)
    try:
        ollama, url = start_ollama(root / "logs", driver, name=name, extra=extra)
        try:
            with LabWatch(report=report_to_stderr) as watch:
                watch.add("lab", *lab.procs, ollama)
                with watch.armed():
                    yield lab, url
        finally:
            ollama.stop()
    finally:
        lab.stop()


def start_web(workdir: Path, port: int | None = None, docs: Path | None = None,
              overrides: Path | None = None) -> tuple[Proc, int]:
    """The lab web (lab.web) as a subprocess, `docs` served under /docs/, the articles changed under `overrides`
    (web.write_override) served changed; returns it and its port."""
    port = port or free_port()
    proc = start_proc(
        "web",
        [sys.executable, "-m", "lab.web", "--host", "127.0.0.1", "--port", str(port),
         *(["--docs", str(docs)] if docs is not None else []),
         *(["--overrides", str(overrides)] if overrides is not None else [])],
        workdir / "logs",
    )
    return proc, port


@dataclass
class SearchLab:
    """The running search stack. URLs have no trailing slash."""

    workdir: Path
    web_port: int
    web_url: str
    datasette_url: str
    searxng_url: str
    search_api_url: str  # datasette's canned query, as SearXNG's engine calls it
    db_path: Path
    startup_seconds: float
    procs: list[Proc] = field(default_factory=list)
    extra_searxngs: list[SearxngServer] = field(default_factory=list)

    def page_url(self, page: Page | str) -> str:
        """The URL the search index gives for a page (or a slug)."""
        from lab.corpus import PAGES_BY_SLUG

        if isinstance(page, str):
            page = PAGES_BY_SLUG[page]
        return page.url(self.web_port)

    def start_searxng(
        self, options: SearxngOptions | None = None, *, wait: bool = True, **kwargs: object
    ) -> SearxngServer:
        """Another SearXNG over the same index (json off, limiter on, ...); stopped with the lab.

        Keyword arguments are SearxngOptions fields: ``lab.start_searxng(json_format=False)``.
        With ``wait=False`` it returns at once: call ``server.wait_ready()`` (start several
        in parallel that way).
        """
        from lab.searxng import SearxngOptions, start_searxng

        opts = options or SearxngOptions(**kwargs)  # type: ignore[arg-type]
        name = f"searxng-{len(self.extra_searxngs) + 2}"
        server = start_searxng(self.workdir, self.datasette_url, options=opts, name=name, wait=wait)
        self.extra_searxngs.append(server)
        return server

    def stop(self) -> None:
        for server in self.extra_searxngs:
            server.stop()
        for proc in self.procs:
            proc.stop()

    def as_json(self) -> dict[str, object]:
        return {
            "web_url": self.web_url,
            "datasette_url": self.datasette_url,
            "searxng_url": self.searxng_url,
            "search_api_url": self.search_api_url,
            "workdir": str(self.workdir),
            "startup_seconds": round(self.startup_seconds, 2),
        }

    def __enter__(self) -> SearchLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_search_lab(
    workdir: Path,
    *,
    web_port: int | None = None,
    datasette_port: int | None = None,
    searxng_port: int | None = None,
    searxng_options: SearxngOptions | None = None,
    timeout: float = 60.0,
    docs: Path | None = None,
    rows: Rows | None = None,
    probe: str | None = None,
    overrides: Path | None = None,
) -> SearchLab:
    """Build the index and start web, datasette and SearXNG; return when a search works (for `probe`).

    Another corpus (lab/docset.py): `docs` served under /docs/, `rows` its index rows. `overrides`: the folder
    of the web's changed articles (web.write_override)."""
    from lab.corpus import TOPICS
    from lab.search_index import start_datasette
    from lab.searxng import SearxngOptions, start_searxng

    t0 = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    opts = searxng_options or SearxngOptions()
    procs: list[Proc] = []
    try:
        web, web_port = start_web(workdir, web_port, docs, overrides)
        procs.append(web)
        datasette = start_datasette(workdir, web_port, port=datasette_port, wait=False, rows=rows)
        procs.append(datasette.proc)
        searxng = start_searxng(workdir, datasette.url, options=opts, port=searxng_port, wait=False)
        procs.extend(searxng.procs)

        web.wait_ready(f"http://127.0.0.1:{web_port}/healthz", timeout)
        datasette.wait_ready(timeout)
        searxng.wait_ready(timeout)
        if opts.json_format and not opts.limiter:
            # End to end: a question typed into SearXNG comes back with corpus pages.
            _wait_for_results(searxng.url, probe or TOPICS["kestrel"].question, searxng.proc, timeout)
    except BaseException:
        for proc in reversed(procs):
            proc.stop()
        raise
    return SearchLab(
        workdir=workdir,
        web_port=web_port,
        web_url=f"http://127.0.0.1:{web_port}",
        datasette_url=datasette.url,
        searxng_url=searxng.url,
        search_api_url=datasette.search_url,
        db_path=datasette.db_path,
        startup_seconds=time.monotonic() - t0,
        procs=procs,
    )


def _wait_for_results(searxng_url: str, query: str, proc: Proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            response = client.get(f"{searxng_url}/search", params={"q": query, "format": "json"})
            if response.status_code == 200 and response.json().get("results"):
                return
            last = response.text[:500]
            time.sleep(0.1)
    raise LabError(f"SearXNG returned no corpus results for {query!r}: {last}\n{proc.log_tail()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the briefd search lab until SIGTERM.")
    parser.add_argument("--workdir", type=Path, required=True, help="where the index, settings and logs go")
    parser.add_argument("--web-port", type=int, default=None)
    parser.add_argument("--datasette-port", type=int, default=None)
    parser.add_argument("--searxng-port", type=int, default=None)
    from lab.drivers import LlamaDriver

    models = {"llama": LlamaDriver.MODEL, "scripted": "lab-scripted"}  # the model each driver serves
    parser.add_argument("--driver", choices=("none", *models), default="none",
                        help="also the lab's Ollama-compatible model server: llama (real inference, Gemma 3 "
                             "270M) or scripted (instant, deterministic); none: the search lab alone")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    lab = start_search_lab(
        args.workdir,
        web_port=args.web_port,
        datasette_port=args.datasette_port,
        searxng_port=args.searxng_port,
    )
    procs = list(lab.procs)
    try:
        shown = lab.as_json()
        if args.driver != "none":
            model, url = start_ollama(args.workdir / "logs", args.driver)
            procs.append(model)
            # what briefd needs to research on this lab (`make lab`, then these in another shell)
            shown.update(ollama_url=url, model=models[args.driver],
                         env={"OLLAMA_HOST": url, "BRIEFD_MODEL": models[args.driver],
                              "BRIEFD_SEARXNG_URL": lab.searxng_url})
        print(json.dumps(shown), flush=True)
        with LabWatch(report=report_to_stderr) as watch:  # a server that dies is reported at once, and ends the lab
            watch.add("lab", *procs)
            while not stop.wait(0.5):
                if watch.death() is not None:
                    return 1
    finally:
        for proc in procs[len(lab.procs):]:
            proc.stop()
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
