"""Briefs per hour on one machine as `workers` grows, against a model server that serves 2 at once.

Ollama runs `OLLAMA_NUM_PARALLEL` generations at once and queues the rest; briefd's
`workers` researches that many briefs at once. Throughput should rise with workers until
the server is saturated (here at 2), then stay flat: more workers only queue at the server.

Each run: a fresh store (nothing cached), the lab's real SearXNG and pages, the scripted model
at a fixed pace (`--tokens-per-s`) with `--parallel 2`, `briefs` briefs (the bench's four
topics, repeated under new ids), `briefd run --once` with BRIEFD_WORKERS = 1, 2, 4.

Run: python -m lab.throughput_bench [--briefs 8] [--tokens-per-s 60] [--parallel 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.bench import BRIEFS
from lab.servers import lab_with_model
from lab.workspace import BRIEFD, Workspace


def run_with_workers(root: Path, searxng_url: str, ollama_url: str, workers: int, count: int) -> dict[str, float]:
    ws = Workspace(root=root / f"workers-{workers}", searxng_url=searxng_url, ollama_url=ollama_url,
                   model="lab-scripted")
    topics = list(BRIEFS.items())
    for i in range(count):
        brief_id, brief = topics[i % len(topics)]
        ws.drop(f"{brief_id}-{i}.json", {**brief, "id": f"{brief_id}-{i}"})
    started = time.monotonic()
    with open(ws.root / "briefd.log", "w") as log:
        subprocess.run([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_WORKERS=str(workers)), cwd=ws.root,
                       check=True, stderr=log)
    wall = time.monotonic() - started
    done = sum(1 for i in range(count) if ws.report(f"{topics[i % len(topics)][0]}-{i}")["status"] == "done")
    return {"workers": float(workers), "briefs": float(count), "done": float(done), "wall_s": wall,
            "briefs_per_hour": 3600 * done / wall if wall else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=8)
    parser.add_argument("--tokens-per-s", type=float, default=60.0)
    parser.add_argument("--parallel", type=int, default=2, help="generations the lab server runs at once")
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="briefd-throughput-"))
    pace = ("--tokens-per-s", str(args.tokens_per_s), "--parallel", str(args.parallel))
    with lab_with_model(root, extra=pace) as (lab, url):
        rows = [run_with_workers(root, lab.searxng_url, url, int(w), args.briefs) for w in args.workers.split(",")]
    print(f"briefd bench: {args.briefs} briefs, scripted model at {args.tokens_per_s:g} tokens/s serving "
          f"{args.parallel} at once")
    print("workers | briefs done | wall_seconds | briefs_per_hour")
    for row in rows:
        print(f"{row['workers']:.0f} | {row['done']:.0f}/{row['briefs']:.0f} | {row['wall_s']:.1f} | "
              f"{row['briefs_per_hour']:.0f}")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
