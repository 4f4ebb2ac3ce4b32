"""How busy the model was over one `briefd run --once`, from the lab model server's own request log (not a test).

Issue 28's decision: model busy is measured from the model's first generation to the end of `run --once`, and the
start-up before that generation (interpreter, imports, the first search and plan prompt) is reported beside it, not
hidden in the share. `make bench` and `make bench-real` print both; `lab.busy_timeline` shows where the idle
seconds fall. The lab server answers one request at a time and a request's seconds include its wait in the
server's queue, so the model is busy whenever a request is in the server: the union of the requests, never their sum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path



def requests_log(lab_root: Path, name: str = "ollama") -> Path:
    """Where the lab's model server `name` (servers.lab_with_model's) logs each request under the lab's root."""
    return lab_root / "logs" / f"{name}.requests.ndjson"


def iso_time(stamp: str) -> float:
    """The lab server's "2026-11-27T21:09:19.300615154Z" as epoch seconds (nanoseconds cut to micro)."""
    day, _, frac = stamp.rstrip("Z").partition(".")
    whole = datetime.strptime(day, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return whole + (float("0." + frac[:6]) if frac else 0.0)


def generations(log: Path, spawned: float, exited: float) -> list[tuple[float, float, str]]:
    """(arrival, answer, task) of each chat request the lab's model server took between spawn and exit, in order,
    from its request log (requests_log)."""
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        start = iso_time(entry["at"])
        if entry.get("endpoint") == "chat" and spawned <= start <= exited:
            found.append((start, start + float(entry.get("seconds") or 0.0), str(entry.get("task", ""))))
    return sorted(found)


def idle_stretches(gens: list[tuple[float, float, str]], spawned: float,
                   exited: float) -> list[tuple[float, float, str]]:
    """(start, end, where) of each stretch from spawn to exit with no request in the model server."""
    stretches, free_from = [], spawned
    for n, (start, end, _) in enumerate(gens):
        if start > free_from:
            stretches.append((free_from, start, "before the first generation" if n == 0 else "between generations"))
        free_from = max(free_from, end)
    if exited > free_from:
        stretches.append((free_from, exited, "after the last generation"))
    return stretches


@dataclass(frozen=True)
class Busy:
    """One run's model-busy figures (issue 28's decision)."""

    startup_s: float        # spawn to the first generation's arrival (the whole run when the model was never asked)
    after_first_s: float    # the first generation's arrival to exit
    busy_s: float           # seconds with a request in the model server
    whole_s: float          # spawn to exit

    @property
    def share(self) -> float:
        """Busy seconds over the run from the first generation to exit: the figure the goal (>= 0.9) is for."""
        return self.busy_s / self.after_first_s if self.after_first_s > 0 else 0.0

    @property
    def whole_share(self) -> float:
        """Busy seconds over the whole run, start-up included (what `make bench` printed before)."""
        return self.busy_s / self.whole_s if self.whole_s > 0 else 0.0


def busy_of(gens: list[tuple[float, float, str]], spawned: float, exited: float) -> Busy:
    """The figures of one run from its generations (generations()) and its spawn and exit."""
    whole = max(exited - spawned, 0.0)
    if not gens:
        return Busy(startup_s=whole, after_first_s=0.0, busy_s=0.0, whole_s=whole)
    first = gens[0][0]
    idle = sum(end - start for start, end, _ in idle_stretches(gens, spawned, exited))
    return Busy(startup_s=first - spawned, after_first_s=exited - first, busy_s=whole - idle, whole_s=whole)


def run_busy(log: Path, spawned: float, exited: float) -> Busy:
    """busy_of the requests the lab's model server logged (requests_log) between spawn and exit."""
    return busy_of(generations(log, spawned, exited), spawned, exited)
