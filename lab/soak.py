"""`make soak`: the lab under load and faults for a bounded time, then a count of what was lost.

Not a test (nothing here is timed against a threshold): a figure to keep. For `--seconds`
it keeps dropping briefs of every kind plus hostile inputs into the inbox while it
- runs `briefd run` (two workers) and kills it with SIGKILL, or stops it with SIGTERM,
  at seeded random moments;
- takes the model server or SearXNG down for a few seconds and brings it back on the
  same port (an outage the briefs must wait out);
- serves the model through the lab's chaos driver (`lab-chaos`: fences, prose, cut-off,
  empty, <think>, wrong shape, refusals, HTTP 500s, slow answers);
- with `--hostile`, also offers the lab web's hostile pages (compression bombs, pathological
  text, a 4 MB page of links) through a second SearXNG engine, and puts a proxy in front of
  SearXNG that floods a share of answers with 200,000 results (lab/hostile.py);
- with `--hostile-library`, runs the daemon with a library folder and, while it runs, puts in
  it what anyone who can write to the share can: chains of 1,200 nested folders (made in place
  and moved in), named pipes, unix sockets, hard links to a file outside, slow documents (a PDF
  claiming a million pages, a 20 MB PDF) and plain ones (`hostile_library_round`); it prints the
  daemon's peak descriptors beside its peak RSS, and what `briefd library status` refused;
- with `--api-flood`, runs one daemon life with its HTTP API on (`serve = true`) under a descriptor
  limit of `--nofile` (1,024, soft and hard) while 1,100 connections send a request line and then
  one header every few seconds, never the blank line, plus slow-body POSTs, for `--seconds`; a
  normal client polls GET /status meanwhile, briefs are dropped before, during and after, and those
  dropped after must be taken by the flooded daemon itself (`api_flood_round`); it prints the
  answers and the slowest, the daemon's peak descriptors and the lines it logged.
Then it brings every service back, drains the queue with `briefd run --once` and checks
every promise: each valid brief has exactly one report with status done and exactly one
`complete` event; each bad input has an error.json with its bytes kept; no temp file is
visible; the store passes its integrity check. It prints the counts and the daemon's
peak RSS (the largest VmHWM of every `briefd` process it ran, read while each ran), and
exits 1 if any brief was lost. `--seed` replays a run's choices.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from briefd.daemon.ops.serve import HEADER_DEADLINE_S
from lab import documents, hostile, web
from lab.corpus import TOPICS
from lab.library import folder_chain
from lab.searxng import SearxngOptions, SearxngServer, engine_settings, start_searxng
from lab.servers import Proc, free_port, start_ollama, start_proc, start_search_lab
from lab.workspace import BRIEFD, Workspace, keep_or_remove

VALID: list[dict[str, Any]] = [
    {"question": TOPICS["kestrel"].question, "depth": "quick"},
    {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False},
    {"question": TOPICS["northgate"].question, "depth": "quick", "max_rounds": 2,
     "estimate": {"unit": "USD million", "low": 100, "high": 2000}},
    {"question": TOPICS["lakeside"].question, "depth": "quick", "max_rounds": 2,
     "hypothesis": {"claim": TOPICS["lakeside"].claim}},
]

BAD: list[bytes] = [
    b"",
    b"\xff\xfe\x00garbage\x80",
    b'{"question": "unterminated',
    b'{"question": "Why?", "depth": "forever"}',
    b'{"question": "Why?", "id": "../../etc/passwd"}',
    b'{"questoin": "typo in the field name"}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"question": "' + b"x" * 2_000_000 + b'"}',
    b'{"question": "\\ud800 lone surrogate"}',
    b'["a list, not an object"]',
]

# --api-flood (issue 19 #1): what the daemon's HTTP API is held against
FLOOD_CONNECTIONS = 1_100  # held at once: more than the daemon's 1,024 descriptors, no more
FLOOD_SLOW_POSTS = 5  # of them, POST /briefs that send their body a byte at a time
FLOOD_TRICKLE_S = HEADER_DEADLINE_S / 3  # one header (or body byte) per connection this often, never the end
FLOOD_REOPEN_PER_TICK = 100  # connections the daemon closed that are opened again at each trickle
FLOOD_NOFILE = 1_024  # the daemon's descriptor limit (soft and hard): the usual soft limit
FLOOD_CLIENT_TIMEOUT_S = 10.0  # the normal client's patience for GET /status
FLOOD_AFTER_PATIENCE_S = 60.0  # a brief dropped after the flood must be taken by the running daemon by then


@dataclass
class Tally:
    accepted: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    kills: int = 0
    terms: int = 0
    outages: dict[str, int] = field(default_factory=lambda: {"ollama": 0, "searxng": 0})
    peak_rss_kib: int = 0

    def watch(self, pid: int) -> None:
        """Keep the peak RSS of a live `briefd` (VmHWM, KiB). Not ru_maxrss: the kernel carries that
        over from the process a child was forked from, so it would report this script's own peak."""
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
        except (OSError, ValueError):
            pass  # gone already

    def reaped(self, popen: subprocess.Popen[bytes], timeout: float) -> int:
        """Wait for a `briefd` child, watching its peak RSS until it ends."""
        deadline = time.monotonic() + timeout
        while True:
            self.watch(popen.pid)
            pid, status, _usage = os.wait4(popen.pid, os.WNOHANG)
            if pid:
                popen.returncode = os.waitstatus_to_exitcode(status)
                return popen.returncode
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(popen.args, timeout)
            time.sleep(0.05)


class Services:
    """The model server and SearXNG on fixed ports, so either can go down and come back."""

    def __init__(self, root: Path, datasette_url: str, seed: int, hostile_web_url: str = "") -> None:
        self.root = root
        self.datasette_url = datasette_url
        self.hostile_web_url = hostile_web_url
        self.seed = seed
        self.ollama_port = free_port()
        self.searxng_port = free_port()
        self.ollama_url = f"http://127.0.0.1:{self.ollama_port}"
        self.searxng_url = f"http://127.0.0.1:{self.searxng_port}"
        self.ollama: Proc | None = None
        self.searxng: SearxngServer | None = None
        self.proxy: Proc | None = None
        self.proxy_port = free_port() if hostile_web_url else 0
        self.starts = 0

    @property
    def briefd_searxng_url(self) -> str:
        """Where briefd searches: the real SearXNG, or the proxy in front of it in hostile mode."""
        return f"http://127.0.0.1:{self.proxy_port}" if self.proxy_port else self.searxng_url

    def start_proxy(self) -> None:
        self.proxy = start_proc("search-proxy", [sys.executable, "-m", "lab.hostile",
                                                 "--port", str(self.proxy_port), "--upstream", self.searxng_url,
                                                 "--seed", str(self.seed)], self.root / "logs")
        self.proxy.wait_ready(f"{self.briefd_searxng_url}/healthz", timeout=60)
        # The lab web builds its bombs on first use: seconds of CPU that a fetch timeout would not wait
        # for. Read raw, never decoded: this process's peak RSS is inherited by every child it forks,
        # so a bomb decoded here would show up as the daemon's.
        for name in web.BOMBS:
            with httpx.stream("GET", f"{self.hostile_web_url}/hostile/{name}", timeout=120, trust_env=False) as r:
                for _ in r.iter_raw():
                    pass

    def start_ollama(self) -> None:
        self.starts += 1
        self.ollama, _ = start_ollama(self.root / "logs", "scripted", name=f"ollama-{self.starts}",
                                      port=self.ollama_port,
                                      extra=("--tokens-per-s", "400", "--chaos-seed", str(self.seed)))

    def start_searxng(self) -> None:
        self.starts += 1
        options = None
        if self.proxy_port:
            engines = [engine_settings(self.datasette_url), hostile.engine_settings(self.hostile_web_url)]
            options = SearxngOptions(extra_settings={"engines": engines})
        self.searxng = start_searxng(self.root / "searxng", self.datasette_url, port=self.searxng_port,
                                     name=f"searxng-{self.starts}", options=options)

    def stop(self) -> None:
        for proc in (self.ollama, self.searxng, self.proxy):
            if proc is not None:
                proc.stop()


def drop_some(ws: Workspace, rng: random.Random, tally: Tally, n: int) -> None:
    for _ in range(n):
        k = len(tally.accepted) + len(tally.bad)
        if rng.random() < 0.25:
            name = f"bad-{k}"
            ws.drop(f"{name}.json", rng.choice(BAD))
            tally.bad.append(name)
        else:
            name = f"brief-{k}"
            brief = dict(rng.choice(VALID), context=f"soak brief {k}")
            ws.drop(f"{name}.json", brief)
            tally.accepted.append(name)


@contextlib.contextmanager
def daemon_life(ws: Workspace, tally: Tally, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """`briefd run` with two workers, logging to the workspace's daemon.log; a life that ends by an error is
    killed and reaped all the same."""
    log = open(ws.root / "daemon.log", "a")
    daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_WORKERS="2", **env), cwd=ws.root,
                              stdout=log, stderr=log)
    reaped = False
    try:
        yield daemon
        reaped = True
    finally:
        if not reaped:
            daemon.kill()
            tally.reaped(daemon, timeout=60)
        log.close()


def end_life(daemon: subprocess.Popen[bytes], rng: random.Random, tally: Tally, kill_share: float) -> None:
    """kill -9 (`kill_share` of the lives) or SIGTERM, counted, then reaped."""
    if rng.random() < kill_share:
        os.kill(daemon.pid, signal.SIGKILL)
        tally.kills += 1
    else:
        daemon.send_signal(signal.SIGTERM)
        tally.terms += 1
    tally.reaped(daemon, timeout=60)


def chaos_round(ws: Workspace, services: Services, rng: random.Random, tally: Tally) -> None:
    """One daemon life: start it, maybe break a service meanwhile, then kill or stop it."""
    with daemon_life(ws, tally) as daemon:
        time.sleep(rng.uniform(0.5, 4.0))
        if rng.random() < 0.3:
            which = rng.choice(["ollama", "searxng"])
            (services.ollama if which == "ollama" else services.searxng).stop()  # type: ignore[union-attr]
            time.sleep(rng.uniform(1.0, 5.0))
            services.start_ollama() if which == "ollama" else services.start_searxng()
            tally.outages[which] += 1
            time.sleep(rng.uniform(0.5, 2.0))
        tally.watch(daemon.pid)
        end_life(daemon, rng, tally, kill_share=0.75)


@dataclass
class HostileLibrary:
    """The library folder `--hostile-library` keeps attacking, and the daemon's peak descriptors."""

    folder: Path
    outside: Path
    made: dict[str, int] = field(default_factory=dict)
    peak_fds: int = 0
    listeners: list[socket.socket] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"BRIEFD_LIBRARY": str(self.folder)}

    def watch(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{pid}/fd")))

    def plant(self, rng: random.Random, n: int) -> None:
        """One hostile thing (or a plain document, which must still be indexed) into the folder."""
        kind = rng.choice(["deep", "deep-moved", "fifo", "socket", "hard-link", "slow-pdf", "big-pdf", "plain"])
        self.made[kind] = self.made.get(kind, 0) + 1
        here = self.folder / f"{kind}-{n}"
        if kind in ("deep", "deep-moved"):
            folder_chain(self.outside / here.name if kind == "deep-moved" else here, 1_200)
            if kind == "deep-moved":
                os.rename(self.outside / here.name, here)
        elif kind == "fifo":
            os.mkfifo(here.with_suffix(".epub"))
        elif kind == "socket":
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(here.with_suffix(".md")))
            self.listeners.append(listener)
        elif kind == "hard-link":
            secret = self.outside / f"secret-{n}.md"
            secret.write_text("The payroll password is hunter2.\n")
            os.link(secret, here.with_suffix(".md"))
        elif kind == "slow-pdf":
            documents.write_million_page_pdf(here.with_suffix(".pdf"))
        elif kind == "big-pdf":
            documents.write_big_pdf(here.with_suffix(".pdf"), megabytes=20)
        else:
            here.with_suffix(".md").write_text(f"# Note {n}\n\nA plain note about bridge inspections, number {n}.\n")

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()


def hostile_library_round(ws: Workspace, rng: random.Random, tally: Tally, library: HostileLibrary) -> None:
    """One daemon life over the library: hostile things planted while it runs, then a kill or a stop."""
    with daemon_life(ws, tally, **library.env()) as daemon:
        until = time.monotonic() + rng.uniform(2.0, 8.0)
        while time.monotonic() < until and daemon.poll() is None:
            library.plant(rng, sum(library.made.values()))
            for _ in range(10):
                tally.watch(daemon.pid)
                library.watch(daemon.pid)
                time.sleep(0.05)
        end_life(daemon, rng, tally, kill_share=0.5)


@dataclass
class Trickler:
    """One flood connection: a request line, then one header every FLOOD_TRICKLE_S, never the blank
    line (or, for a slow POST, a whole head and then one body byte at a time)."""

    sock: socket.socket
    first: bytes  # sent as soon as the connection is made
    post: bool
    sent_first: bool = False
    closed: bool = False

    def nudge(self, n: int) -> None:
        """The next trickle; a connection the daemon closed (or never accepted) is marked closed."""
        try:
            if not self.sent_first:
                self.sock.send(self.first)
                self.sent_first = True
            else:
                self.sock.send(b"{" if self.post else f"X-Flood-{n}: {n}\r\n".encode())
        except BlockingIOError:
            pass  # still connecting (the daemon's accept queue is full): try again next time
        except OSError:
            self.closed = True
            self.sock.close()


@dataclass
class ApiFlood:
    """What `--api-flood` holds against the daemon's HTTP API, and what a normal client saw meanwhile."""

    port: int
    nofile: int
    connections: int = FLOOD_CONNECTIONS
    tricklers: list[Trickler] = field(default_factory=list)
    opened: int = 0
    answers: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0
    peak_fds: int = 0
    idle_fds: int = 0  # before the flood: what the research itself holds
    taken_during: int = 0
    after: list[str] = field(default_factory=list)
    log_lines: int = 0

    def env(self) -> dict[str, str]:
        return {"BRIEFD_SERVE": "true", "BRIEFD_SERVE_PORT": str(self.port)}

    def limit(self) -> None:
        """In the daemon's child only, before exec: soft and hard limit both, so the daemon cannot raise
        its soft limit past the flood (it lifts soft to hard at start; a host whose hard limit is this)."""
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def watch(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{pid}/fd")))

    def open_one(self, post: bool) -> Trickler:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self.port))  # EINPROGRESS, or at once on loopback
        host = f"Host: 127.0.0.1:{self.port}\r\n"
        first = (f"POST /briefs HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n"
                 if post else f"GET /status HTTP/1.1\r\n{host}")
        self.opened += 1
        return Trickler(sock, first.encode(), post)

    def keep_up(self, n: int) -> None:
        """Reopen some of what the daemon closed (an attacker keeps trying; FLOOD_REOPEN_PER_TICK bounds the
        churn, and the loopback ports it costs), then trickle once on every connection."""
        if not self.tricklers:
            self.tricklers = [self.open_one(post=i < FLOOD_SLOW_POSTS) for i in range(self.connections)]
        budget = FLOOD_REOPEN_PER_TICK
        for i, trickler in enumerate(self.tricklers):
            if trickler.closed and budget:
                self.tricklers[i] = self.open_one(trickler.post)
                budget -= 1
        for trickler in self.tricklers:
            trickler.nudge(n)

    def close(self) -> None:
        for trickler in self.tricklers:
            trickler.sock.close()
        self.tricklers = []

    def poll(self, base: str, stop: threading.Event) -> None:
        """The normal client: GET /status twice a second while the flood lasts, each answer and its time kept."""
        with httpx.Client(base_url=base, timeout=FLOOD_CLIENT_TIMEOUT_S, trust_env=False) as client:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    key = str(client.get("/status", headers={"Connection": "close"}).status_code)
                except httpx.HTTPError as exc:
                    key = type(exc).__name__
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
                self.answers[key] = self.answers.get(key, 0) + 1
                stop.wait(0.5)


def _taken(ws: Workspace, name: str) -> bool:
    """Whether the running daemon has taken `name` from the inbox into its store."""
    conn = sqlite3.connect(f"file:{ws.db}?mode=ro", uri=True, timeout=10)
    try:
        return bool(conn.execute("SELECT count(*) FROM briefs WHERE brief_id = ?", [name]).fetchone()[0])
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _drop_one(ws: Workspace, rng: random.Random, tally: Tally, when: str) -> str:
    name = f"brief-{len(tally.accepted) + len(tally.bad)}-{when}"
    ws.drop(f"{name}.json", dict(rng.choice(VALID), context=f"soak brief dropped {when} the flood"))
    tally.accepted.append(name)
    return name


def api_flood_round(ws: Workspace, rng: random.Random, tally: Tally, flood: ApiFlood, seconds: float) -> None:
    """One daemon life under an API flood for `seconds`: briefs dropped before (by the caller), during and
    after it, a normal client polling meanwhile; the daemon must take the briefs dropped after the flood
    itself (issue 19 #1: its inbox watcher had died on EMFILE), before it is stopped with SIGTERM."""
    log_path = ws.root / "daemon.log"
    log = open(log_path, "a")
    lines_before = _lines(log_path)
    daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_WORKERS="2", **flood.env()), cwd=ws.root,
                              stdout=log, stderr=log, preexec_fn=flood.limit)
    base = f"http://127.0.0.1:{flood.port}"
    stop = threading.Event()
    poller = threading.Thread(target=flood.poll, args=(base, stop), daemon=True)
    reaped = False
    try:
        _wait_ready(base, daemon)
        flood.idle_fds = len(os.listdir(f"/proc/{daemon.pid}/fd"))
        started, n, next_brief = time.monotonic(), 0, time.monotonic() + 5
        poller.start()
        while time.monotonic() - started < seconds and daemon.poll() is None:
            flood.keep_up(n)
            n += 1
            if time.monotonic() > next_brief:
                _drop_one(ws, rng, tally, "during")
                next_brief = time.monotonic() + rng.uniform(5, 15)
            until = time.monotonic() + FLOOD_TRICKLE_S
            while time.monotonic() < until:
                tally.watch(daemon.pid)
                flood.watch(daemon.pid)
                time.sleep(0.1)
        stop.set()
        poller.join(FLOOD_CLIENT_TIMEOUT_S + 5)
        flood.taken_during = sum(_taken(ws, name) for name in tally.accepted)
        flood.close()
        flood.after = [_drop_one(ws, rng, tally, "after") for _ in range(2)]
        deadline = time.monotonic() + FLOOD_AFTER_PATIENCE_S
        while time.monotonic() < deadline and not all(_taken(ws, name) for name in flood.after):
            tally.watch(daemon.pid)
            flood.watch(daemon.pid)
            time.sleep(0.2)
        flood.after = [name for name in flood.after if not _taken(ws, name)]  # not taken by the running daemon
        daemon.send_signal(signal.SIGTERM)
        tally.terms += 1
        tally.reaped(daemon, timeout=60)
        reaped = True
    finally:
        stop.set()
        flood.close()
        if not reaped:
            daemon.kill()
            tally.reaped(daemon, timeout=60)
        log.close()
        flood.log_lines = _lines(log_path) - lines_before


def _wait_ready(base: str, daemon: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and daemon.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/status", timeout=2, trust_env=False).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"briefd run did not answer GET {base}/status within 60 s (exit {daemon.poll()}): "
                       "see daemon.log in the work folder (--keep)")


def _lines(path: Path) -> int:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return sum(1 for _ in f)
    return 0


def _afford_flood(parser: argparse.ArgumentParser) -> None:
    """This script holds the flood's connections itself: its own soft descriptor limit raised to fit them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FLOOD_CONNECTIONS + 256  # the lab's servers' pipes and the normal client besides
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            parser.error(f"--api-flood holds {FLOOD_CONNECTIONS:,} connections, and this shell's hard descriptor "
                         f"limit is {hard}: raise it to {wanted} or more (ulimit -Hn, or LimitNOFILE=)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def print_flood(flood: ApiFlood) -> None:
    """The flood's figures: what the normal client got, and what the daemon spent."""
    answers = ", ".join(f"{count} x {key}" for key, count in sorted(flood.answers.items()))
    print(f"API flood:         {flood.connections:,} connections kept open, one header each every "
          f"{FLOOD_TRICKLE_S:.1f} s ({FLOOD_SLOW_POSTS} slow POSTs), {flood.opened:,} opened in all; "
          f"the daemon's limit {flood.nofile}")
    print(f"normal requests:   {answers or 'none'} (GET /status during the flood); slowest {flood.slowest_s:.2f} s")
    print(f"taken when flooded: {flood.taken_during} brief(s) by the end of the flood; after it, "
          f"{'all taken' if not flood.after else f'{len(flood.after)} NOT taken'} by the running daemon")
    print(f"daemon peak fds:   {flood.peak_fds} (limit {flood.nofile}; {flood.idle_fds} before the flood)")
    print(f"daemon log:        {flood.log_lines} lines in the flooded daemon's life")


def library_refusals(ws: Workspace) -> tuple[dict[str, int], list[str]]:
    """What the store's library rows refused, counted by the start of their reason (what `briefd
    library status` lists), and the promises broken: nothing from outside the folder indexed."""
    conn = sqlite3.connect(ws.db)
    try:
        counts: dict[str, int] = {}
        for (reason,) in conn.execute("SELECT reason FROM library_files WHERE state = 'refused'"):
            key = (reason or "").split(":")[0][:70]
            counts[key] = counts.get(key, 0) + 1
        leaked = conn.execute("SELECT count(*) FROM passages WHERE url LIKE 'file:%' AND text LIKE '%hunter2%'"
                              ).fetchone()[0]
    finally:
        conn.close()
    return counts, [f"(library: {leaked} passage(s) of a file outside the library indexed)"] if leaked else []


def lost_briefs(ws: Workspace, tally: Tally) -> list[str]:
    """Every promise, checked: what does not hold names the brief it failed for."""
    lost: list[str] = []
    conn = sqlite3.connect(ws.db)
    try:
        if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            lost.append("(store integrity)")
        for name in tally.accepted:
            try:
                report = ws.report(name)
                completes = [e["type"] for e in ws.events(name)].count("complete")
            except (OSError, ValueError):
                lost.append(f"{name}: no readable report")
                continue
            runs = conn.execute("SELECT count(*) FROM briefs WHERE brief_id = ?", [name]).fetchone()[0]
            if report.get("status") != "done" or completes != 1 or runs != 1:
                lost.append(f"{name}: status {report.get('status')}, {completes} complete event(s), {runs} run(s)")
        for name in tally.bad:
            folder = ws.outbox / name
            if not (folder / "error.json").is_file() or not any(
                    (folder / kept).is_file() for kept in ("brief.json", "brief.bin")):
                lost.append(f"{name}: bad input without error.json and its bytes")
    finally:
        conn.close()
    if any(p.name.endswith(".tmp") for p in ws.outbox.rglob("*")):
        lost.append("(a temp file is visible in the outbox)")
    if any(p.suffix == ".json" for p in ws.inbox.iterdir()):
        lost.append("(a brief is still in the inbox)")
    return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to keep breaking things")
    parser.add_argument("--seed", type=int, default=1, help="replays a run's choices")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed at the end)")
    parser.add_argument("--hostile", action="store_true",
                        help="add the hostile web (bombs, pathological text) and 90 MB search answers")
    parser.add_argument("--hostile-library", action="store_true",
                        help="run with a library folder that deep folders, FIFOs, sockets, hard links and slow "
                             "documents are put into while the daemon runs")
    parser.add_argument("--api-flood", action="store_true",
                        help=f"run the daemon with its HTTP API under {FLOOD_CONNECTIONS:,} connections that never "
                             "finish their request head, and slow POSTs, for --seconds; briefs dropped before, during "
                             "and after it must all be taken")
    parser.add_argument("--nofile", type=int, default=FLOOD_NOFILE,
                        help="the daemon's descriptor limit (soft and hard) under --api-flood")
    args = parser.parse_args(argv)
    if args.api_flood and args.hostile_library:
        parser.error("--api-flood and --hostile-library are separate soaks: run one, then the other")
    flood = ApiFlood(free_port(), args.nofile) if args.api_flood else None
    if flood is not None:
        _afford_flood(parser)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="briefd-soak-"))
    lab = start_search_lab(root / "lab")
    services = Services(root, lab.datasette_url, args.seed, hostile_web_url=lab.web_url if args.hostile else "")
    tally = Tally()
    library = HostileLibrary(root / "library", root / "outside") if args.hostile_library else None
    if library is not None:
        library.folder.mkdir()
        library.outside.mkdir()
    started = time.monotonic()
    try:
        services.start_ollama()
        services.start_searxng()
        if args.hostile:
            services.start_proxy()
        ws = Workspace(root=root, searxng_url=services.briefd_searxng_url, ollama_url=services.ollama_url,
                       model="lab-chaos")
        while time.monotonic() - started < args.seconds:
            drop_some(ws, rng, tally, rng.randint(1, 3))
            if library is not None:
                hostile_library_round(ws, rng, tally, library)
            elif flood is not None:
                api_flood_round(ws, rng, tally, flood, args.seconds)
            else:
                chaos_round(ws, services, rng, tally)
        drain_started = time.monotonic()
        with open(root / "daemon.log", "a") as log:
            drain = subprocess.Popen([BRIEFD, "run", "--once"], cwd=root, stdout=log, stderr=log,
                                     env=ws.env(BRIEFD_WORKERS="2", **(library.env() if library else {})))
            drained = tally.reaped(drain, timeout=1800)
        drain_s = time.monotonic() - drain_started
        lost = lost_briefs(ws, tally)
        finished = len(tally.accepted) - len([x for x in lost if x.startswith("brief-")])
        refusals: dict[str, int] = {}
        if library is not None:
            refusals, leaks = library_refusals(ws)
            lost += leaks
        if flood is not None:
            lost += [f"(flood) {name}: dropped after the flood, not taken by the running daemon within "
                     f"{FLOOD_AFTER_PATIENCE_S:g} s" for name in flood.after]
    finally:
        services.stop()
        lab.stop()
        if library is not None:
            library.close()
    mode = (", hostile web" if args.hostile else "") + (", hostile library" if library else "") + (
        ", API flood" if flood else "")
    print(f"briefd soak: {time.monotonic() - started:.0f} s (seed {args.seed}{mode}; "
          f"{args.seconds:g} s of faults, then a {drain_s:.0f} s drain, exit {drained})")
    print(f"briefs accepted:   {len(tally.accepted)}")
    print(f"briefs finished:   {finished}")
    print(f"kills survived:    {tally.kills} (SIGKILL) + {tally.terms} (SIGTERM)")
    print(f"outages survived:  {sum(tally.outages.values())} "
          f"(ollama {tally.outages['ollama']}, searxng {tally.outages['searxng']})")
    print(f"bad inputs tried:  {len(tally.bad)}")
    print(f"daemon peak RSS:   {tally.peak_rss_kib / 1024:.0f} MB")
    if library is not None:
        print(f"daemon peak fds:   {library.peak_fds}")
        print("library planted:   " + ", ".join(f"{k} {v}" for k, v in sorted(library.made.items())))
        for reason, count in sorted(refusals.items()):
            print(f"library refused:   {count} x {reason}")
    if flood is not None:
        print_flood(flood)
    print(f"briefs lost:       {len(lost)}")
    for line in lost:
        print(f"  LOST {line}")
    if library is not None and not args.keep:  # shutil.rmtree recurses, and the chains are 1,200 deep
        subprocess.run(["rm", "-rf", "--one-file-system", str(library.folder), str(library.outside)], check=False)
    keep_or_remove(root, args.keep, "work folder")
    return 1 if lost or drained != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
