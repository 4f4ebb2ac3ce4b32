"""Where the model sits idle in `make bench`'s first pass: a timeline of one `briefd run --once` (not a test).

`make bench` says how busy the model is over the whole run (issue 22: at least 90 % at 0.25 s an answer);
this says where the rest goes. It runs the bench's four briefs on the bench's harsh web and failing model
(lab/bench.py) once, then merges three clocks into one timeline: the process's spawn and exit (this
script), the daemon's log lines (each event, with milliseconds), and each generation's start and length as
the lab's model server recorded them (logs/ollama.requests.ndjson). Every stretch of the run with no
generation running longer than --min-gap is printed with the log lines around it, then the idle time summed
by where it falls: before the first generation, between generations, after the last one.

    PYTHONPATH=$PWD .venv/bin/python -m lab.busy_timeline --seconds-per-answer 0.25
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from lab import web
from lab.bench import BRIEFS, failing_model, harsh_web
from lab.model_busy import busy_of, generations, idle_stretches, requests_log
from lab.servers import lab_with_model
from lab.workspace import BRIEFD, Workspace, keep_or_remove


@dataclass
class Run:
    """One `run --once`: its spawn and exit (epoch seconds), its log lines and the model's generations."""

    spawned: float
    exited: float
    lines: list[tuple[float, str]]        # (when, the log line without its timestamp)
    generations: list[tuple[float, float, str]]  # (arrival, answer, task): queued and generating


def log_time(line: str) -> float | None:
    """The epoch seconds of a daemon log line ("2026-11-27 21:09:18,839 briefd INFO ..."), else None."""
    try:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def run_once(ws: Workspace, log: Path, workers: int | None = None, profile: Path | None = None) -> Run:
    """The bench's first pass (the same briefs, environment and default fetch timeout), timed from spawn to exit."""
    for brief_id, brief in BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    env = ws.env()
    env.pop("BRIEFD_FETCH_TIMEOUT_S")
    if workers is not None:
        env["BRIEFD_WORKERS"] = str(workers)
    with open(log, "w") as err:
        spawned = time.time()
        under = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else []
        subprocess.run([*under, BRIEFD, "run", "--once"], env=env, cwd=ws.root, check=True, stderr=err)
        exited = time.time()
    lines = []
    for line in log.read_text().splitlines():
        when = log_time(line)
        if when is not None:
            lines.append((when, line[24:]))
    return Run(spawned, exited, lines, generations(requests_log(ws.root), spawned, exited))


def clip(text: str, width: int = 150) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def print_timeline(run: Run, min_gap: float) -> None:
    whole = run.exited - run.spawned
    stretches = idle_stretches(run.generations, run.spawned, run.exited)
    busy = busy_of(run.generations, run.spawned, run.exited)  # the union of the requests in the server
    print(f"run --once: {whole:.2f} s spawn to exit; model generating {busy.busy_s:.2f} s ({busy.whole_share:.0%}); "
          f"from its first generation {busy.share:.0%} (start-up {busy.startup_s:.2f} s before it); "
          f"{len(run.generations)} generations")
    if run.lines:
        print(f"  first log line at +{run.lines[0][0] - run.spawned:.2f} s (interpreter start and imports before it); "
              f"last at +{run.lines[-1][0] - run.spawned:.2f} s")
    sums: dict[str, float] = {}
    for start, end, where in stretches:
        sums[where] = sums.get(where, 0.0) + end - start
        if end - start < min_gap:
            continue
        print(f"idle +{start - run.spawned:.2f} .. +{end - run.spawned:.2f} s ({end - start:.2f} s, {where})")
        inside = [(t, line) for t, line in run.lines if start - 0.002 <= t <= end + 0.002]
        shown = inside if len(inside) <= 8 else inside[:4] + [(0.0, "...")] + inside[-4:]
        for t, line in shown:
            print(f"    {'' if not t else f'+{t - run.spawned:.3f}'} {clip(line)}")
    print("idle by where it falls: " + "; ".join(f"{where} {s:.2f} s" for where, s in sums.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-answer", type=float, default=0.25)
    parser.add_argument("--min-gap", type=float, default=0.05, help="print idle stretches at least this long")
    parser.add_argument("--workers", type=int, help="briefs at once (BRIEFD_WORKERS; default: briefd's, 1)")
    parser.add_argument("--profile", type=Path, help="run the daemon under cProfile, its stats written here")
    parser.add_argument("--keep", action="store_true", help="keep the folder (store, logs) and print where it is")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="briefd-timeline-"))
    harsh_web(root / "web-overrides")
    os.environ[web.OVERRIDES_ENV] = str(root / "web-overrides")
    with lab_with_model(root, extra=("--seconds-per-answer", str(args.seconds_per_answer))) as (lab, url):
        failing_model(url)
        ws = Workspace(root=root, searxng_url=lab.searxng_url, ollama_url=url, model="lab-scripted")
        run = run_once(ws, root / "first.log", args.workers, args.profile)
    print_timeline(run, args.min_gap)
    keep_or_remove(root, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
