"""Throughput with several model servers (`ollama_hosts`), measured on the lab (not a test).

Runs the same four briefs through `briefd run --once` (workers = 2 by default) against one lab
model server, then against two, each a scripted server that answers one request at a time at a
fixed pace (--tokens-per-s), as Ollama with OLLAMA_NUM_PARALLEL=1 does. The briefs read search
snippets only (`fetch_pages: false`), so the model is the bottleneck and the figure shows what a
second server buys. Each configuration gets a fresh workspace (no cache carries over).

    PYTHONPATH=. python -m lab.hosts_bench [--tokens-per-s 60] [--workers 2]

Prints, per configuration: wall seconds for all four briefs, briefs per minute, the calls each
server answered, and the speed-up over one server.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from lab.bench_real import briefs
from lab.servers import Proc, start_ollama, start_search_lab
from lab.workspace import BRIEFD, Workspace

BRIEFS = briefs("snippet")  # the four lab briefs, depth quick, snippets only


def chat_calls(url: str) -> int:
    stats = httpx.get(f"{url}/lab/stats", timeout=10, trust_env=False).json()
    httpx.post(f"{url}/lab/reset", timeout=10, trust_env=False)
    return int(stats["total_chat_calls"])


def run(root: Path, searxng_url: str, urls: list[str], workers: int) -> tuple[float, list[int]]:
    """Wall seconds for the four briefs on `urls`, and the calls each server answered."""
    for url in urls:
        chat_calls(url)  # reset
    ws = Workspace(root=root, searxng_url=searxng_url, ollama_url=urls[0], model="lab-scripted")
    for brief_id, brief in BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    started = time.monotonic()
    with open(root / "briefd.log", "w") as log:
        subprocess.run([BRIEFD, "run", "--once"], cwd=root, check=True, stderr=log,
                       env=ws.env(BRIEFD_WORKERS=str(workers), BRIEFD_OLLAMA_HOSTS=",".join(urls)))
    wall = time.monotonic() - started
    assert all(ws.report(b)["status"] == "done" for b in BRIEFS), "a brief did not finish"
    return wall, [chat_calls(url) for url in urls]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens-per-s", type=float, default=60.0, help="pace of each scripted server")
    parser.add_argument("--workers", type=int, nargs="+", default=[2], help="briefs at once (one run each)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="briefd-hosts-bench-"))
    lab = start_search_lab(root / "lab")
    servers: list[Proc] = []
    try:
        urls = []
        for i in (1, 2):
            proc, url = start_ollama(root / "logs", "scripted", name=f"ollama-{i}",
                                     extra=("--tokens-per-s", str(args.tokens_per_s)))
            servers.append(proc)
            urls.append(url)
        print(f"briefd hosts bench: {len(BRIEFS)} snippet-mode briefs, scripted servers at "
              f"{args.tokens_per_s:g} tokens/s, one request at a time each")
        print(f"{'workers':>7} {'servers':>7} {'wall s':>8} {'briefs/min':>10} {'calls per server':>18} "
              f"{'speed-up':>8}")
        for workers in args.workers:
            base = None
            for n in (1, 2):
                wall, calls = run(root / f"w{workers}-h{n}", lab.searxng_url, urls[:n], workers)
                base = base or wall
                print(f"{workers:>7} {n:>7} {wall:>8.1f} {len(BRIEFS) * 60 / wall:>10.2f} "
                      f"{'/'.join(map(str, calls)):>18} {base / wall:>7.2f}x")
    finally:
        for proc in servers:
            proc.stop()
        lab.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
