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
  SearXNG that floods a share of answers with 200,000 results (tests/lab/hostile.py);
- with `--hostile-library`, runs the daemon with a library folder and, while it runs, puts in
  it what anyone who can write to the share can: chains of 1,200 nested folders (made in place
  and moved in), named pipes, unix sockets, hard links to a file outside, slow documents (a PDF
  claiming a million pages, a 20 MB PDF) and plain ones (`hostile_library_round`); it prints the
  daemon's peak descriptors beside its peak RSS, and what `briefd library status` refused.
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
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.lab import documents, hostile, web
from tests.lab.corpus import TOPICS
from tests.lab.searxng import SearxngOptions, SearxngServer, engine_settings, start_searxng
from tests.lab.servers import Proc, free_port, start_ollama, start_proc, start_search_lab
from tests.lab.workspace import BRIEFD, Workspace, keep_or_remove

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
        self.proxy = start_proc("search-proxy", [sys.executable, "-m", "tests.lab.hostile",
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

    @property
    def ollama_url(self) -> str:
        return f"http://127.0.0.1:{self.ollama_port}"

    @property
    def searxng_url(self) -> str:
        return f"http://127.0.0.1:{self.searxng_port}"

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


def chaos_round(ws: Workspace, services: Services, rng: random.Random, tally: Tally) -> None:
    """One daemon life: start it, maybe break a service meanwhile, then kill or stop it."""
    log = open(ws.root / "daemon.log", "a")
    daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_WORKERS="2"), cwd=ws.root,
                              stdout=log, stderr=log)
    reaped = False
    try:
        time.sleep(rng.uniform(0.5, 4.0))
        if rng.random() < 0.3:
            which = rng.choice(["ollama", "searxng"])
            (services.ollama if which == "ollama" else services.searxng).stop()  # type: ignore[union-attr]
            time.sleep(rng.uniform(1.0, 5.0))
            services.start_ollama() if which == "ollama" else services.start_searxng()
            tally.outages[which] += 1
            time.sleep(rng.uniform(0.5, 2.0))
        tally.watch(daemon.pid)
        if rng.random() < 0.75:
            os.kill(daemon.pid, signal.SIGKILL)
            tally.kills += 1
        else:
            daemon.send_signal(signal.SIGTERM)
            tally.terms += 1
        tally.reaped(daemon, timeout=60)
        reaped = True
    finally:
        if not reaped:
            daemon.kill()
            tally.reaped(daemon, timeout=60)
        log.close()


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
            _deep_chain(self.outside / here.name if kind == "deep-moved" else here, 1_200)
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


def _deep_chain(top: Path, levels: int) -> None:
    """`top`/d/d/.../d, built through descriptors (os.makedirs recurses, and stops near 1,000)."""
    top.mkdir(parents=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
    finally:
        os.close(fd)


def hostile_library_round(ws: Workspace, rng: random.Random, tally: Tally, library: HostileLibrary) -> None:
    """One daemon life over the library: hostile things planted while it runs, then a kill or a stop."""
    log = open(ws.root / "daemon.log", "a")
    daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_WORKERS="2", **library.env()), cwd=ws.root,
                              stdout=log, stderr=log)
    reaped = False
    try:
        until = time.monotonic() + rng.uniform(2.0, 8.0)
        while time.monotonic() < until and daemon.poll() is None:
            library.plant(rng, sum(library.made.values()))
            for _ in range(10):
                tally.watch(daemon.pid)
                library.watch(daemon.pid)
                time.sleep(0.05)
        if rng.random() < 0.5:
            os.kill(daemon.pid, signal.SIGKILL)
            tally.kills += 1
        else:
            daemon.send_signal(signal.SIGTERM)
            tally.terms += 1
        tally.reaped(daemon, timeout=60)
        reaped = True
    finally:
        if not reaped:
            daemon.kill()
            tally.reaped(daemon, timeout=60)
        log.close()


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
    args = parser.parse_args(argv)
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
    finally:
        services.stop()
        lab.stop()
        if library is not None:
            library.close()
    mode = (", hostile web" if args.hostile else "") + (", hostile library" if library else "")
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
    print(f"briefs lost:       {len(lost)}")
    for line in lost:
        print(f"  LOST {line}")
    if library is not None and not args.keep:  # shutil.rmtree recurses, and the chains are 1,200 deep
        subprocess.run(["rm", "-rf", "--one-file-system", str(library.folder), str(library.outside)], check=False)
    keep_or_remove(root, args.keep, "work folder")
    return 1 if lost or drained != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
