"""Named moments at which a test can make the daemon die exactly as `kill -9` would.

Why this lives in the product: a crash test that kills from outside lands at random
moments, and the boundaries that matter most (just after a commit, between a temp
file and its rename, between the report and the final event) are microseconds wide,
so random kills would almost never hit them. With `BRIEFD_CRASH_AT=<point>[:<n>]`
the daemon sends itself SIGKILL the n-th time (default the first) it passes <point>.
Unset, which is always the case in real use, `reached()` is one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "BRIEFD_CRASH_AT"

POINTS: tuple[str, ...] = (
    "accepted",        # the brief is in the store; its inbox file is not yet removed
    "claimed",         # claim committed: the brief is 'running'
    "outdir_ready",    # brief.json written to the outbox, not yet marked in the store
    "model_answer",    # a model answer is stored in the answer cache
    "checkpoint",      # a round's checkpoint is committed
    "before_rename",   # an outbox file is fsynced under its temp name, not yet renamed
    "report_written",  # every report file is in place; the brief is not yet finished in the store
    "final_event",     # the final event is in events.ndjson; the store's commit has not happened
)

_passed: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(ENV, "")
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    if name not in POINTS:
        raise SystemExit(f"{ENV}={spec!r}: unknown point {name!r}; known: {', '.join(POINTS)}")
    return name, int(nth or 1)


def reached(point: str) -> None:
    """Die here (SIGKILL, no cleanup of any kind) if the test asked for this point."""
    target = _target()
    if target is None or target[0] != point:
        return
    _passed[point] = _passed.get(point, 0) + 1
    if _passed[point] == target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
