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

Run the whole lab for a demo:

    python -m tests.lab.servers --workdir DIR [--searxng-port 8888]

prints one JSON line with the URLs, then serves until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from tests.lab.corpus import Page
    from tests.lab.search_index import Rows
    from tests.lab.searxng import SearxngOptions, SearxngServer

REPO_ROOT = Path(__file__).resolve().parents[2]

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


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    """A server subprocess with its log file."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)

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
                        f"{self.name} exited with {self.popen.returncode} before it was ready "
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
    full_env.update(env or {})
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=str(cwd or REPO_ROOT),
        )
    return Proc(name=name, argv=argv, log_path=log_path, popen=popen)


def start_ollama(log_dir: Path, driver: str = "scripted", *, name: str = "ollama", port: int | None = None,
                 extra: Sequence[str] = (), timeout: float = 60.0) -> tuple[Proc, str]:
    """The lab's Ollama-compatible server (tests.lab.ollama_server) on loopback, ready; returns it and its URL.

    Requests are logged to ``log_dir/<name>.requests.ndjson``; ``extra`` adds flags such as
    ``--tokens-per-s 60``.
    """
    port = port or free_port()
    proc = start_proc(
        name,
        [sys.executable, "-m", "tests.lab.ollama_server", "--host", "127.0.0.1", "--port", str(port),
         "--driver", driver, "--log", str(log_dir / f"{name}.requests.ndjson"), *extra],
        log_dir,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        proc.wait_ready(f"{url}/api/version", timeout=timeout)
    except BaseException:
        proc.stop()
        raise
    return proc, url


@contextmanager
def lab_with_model(root: Path, driver: str = "scripted", *, lab_dir: str = "lab", name: str = "ollama",
                   extra: Sequence[str] = ()) -> Iterator[tuple[SearchLab, str]]:
    """The search lab and one model server for a script (demo, benches): (the lab, the model's URL),
    both stopped at the end, the lab also when the model server fails to start."""
    lab = start_search_lab(root / lab_dir)
    try:
        ollama, url = start_ollama(root / "logs", driver, name=name, extra=extra)
        try:
            yield lab, url
        finally:
            ollama.stop()
    finally:
        lab.stop()


def start_web(workdir: Path, port: int | None = None, docs: Path | None = None) -> tuple[Proc, int]:
    """The lab web (tests.lab.web) as a subprocess, `docs` served under /docs/; returns it and its port."""
    port = port or free_port()
    proc = start_proc(
        "web",
        [sys.executable, "-m", "tests.lab.web", "--host", "127.0.0.1", "--port", str(port),
         *(["--docs", str(docs)] if docs is not None else [])],
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
        from tests.lab.corpus import PAGES_BY_SLUG

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
        from tests.lab.searxng import SearxngOptions, start_searxng

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
) -> SearchLab:
    """Build the index and start web, datasette and SearXNG; return when a search works (for `probe`).

    Another corpus (tests/lab/docset.py): `docs` served under /docs/, `rows` its index rows."""
    from tests.lab.corpus import TOPICS
    from tests.lab.search_index import start_datasette
    from tests.lab.searxng import SearxngOptions, start_searxng

    t0 = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    opts = searxng_options or SearxngOptions()
    procs: list[Proc] = []
    try:
        web, web_port = start_web(workdir, web_port, docs)
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
    from tests.lab.drivers import LlamaDriver

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
        while not stop.is_set():
            stop.wait(0.5)
            dead = [proc.name for proc in procs if not proc.alive]
            if dead:
                print(f"lab server(s) exited: {', '.join(dead)}", file=sys.stderr, flush=True)
                return 1
    finally:
        for proc in procs[len(lab.procs):]:
            proc.stop()
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
