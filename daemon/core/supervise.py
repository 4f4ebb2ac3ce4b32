"""What keeps the daemon's long-lived tasks alive, and its log readable while something keeps failing.

Why (issue 19 #1): the inbox watcher was an asyncio task nobody awaited. An API flood took every
descriptor, `os.scandir` raised EMFILE, the task died without a word, and the daemon went on pinging
systemd's watchdog with intake dead for good. Every long-lived task now runs under `supervise`: its
death is logged with its name and traceback and, by the task's `Policy`, either restarts it after a
backoff or stops the daemon with exit 3 naming it (systemd restarts a daemon that exits 3, and every
brief resumes from its checkpoint). A task that dies again and again within `RESTART_WINDOW_S` stops
the daemon too: a fresh process is the remedy for what keeps killing it, and a daemon that only
pings the watchdog while doing nothing is what this module exists to prevent.

`RepeatLog` says a repeated error once per interval with the count of repeats it left unsaid (the
flood wrote 482,520 tracebacks, 213 MB, to the journal), and says when the condition cleared.
`raise_open_files_limit` lifts the soft RLIMIT_NOFILE to the hard one at start, so the HTTP API's
connections cannot take the descriptors research needs under the usual soft limit of 1,024.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .retry import Backoff, backoff_delay
from ..rules.numbers import number_text

log = logging.getLogger("briefd")

RESTART = Backoff(base_s=1.0, cap_s=60.0)  # between a dead task and its restart: 1 s doubling to a minute
RESTART_WINDOW_S = 600.0   # deaths counted toward a task's restart limit within this long
REPEAT_EVERY_S = 60.0      # a repeated error is logged at most this often (RepeatLog)
# The soft limit on open files the daemon asks for, at most (never above the hard limit). Not unbounded:
# a container's hard limit can be 2**30, and children (on_finish, the page readers) inherit the soft one.
OPEN_FILES_WANTED = 65536


@dataclass(frozen=True)
class Policy:
    """What a task's death does: `restarts` within RESTART_WINDOW_S before the daemon stops (exit 3);
    0 stops it at the first death; None restarts it for ever (a task the research can do without)."""

    restarts: int | None
    why: str  # said in the log when the task dies: why it is restarted, or why the daemon stops

    def gives_up(self, deaths: int) -> bool:
        return self.restarts is not None and deaths > self.restarts


@dataclass
class RepeatLog:
    """One line per `every_s` for an error that keeps happening, with the count of repeats not logged.

    `error(key, ...)` logs at once the first time, then at most once per `every_s` ("(41 more like
    it in 60 s not logged)"); `cleared(key, ...)` says once that it ended (with the repeats since the
    last line) and forgets it, so the next failure is logged at once again. Keys are the caller's:
    "inbox scan", a service's name."""

    every_s: float = REPEAT_EVERY_S
    clock: Callable[[], float] = time.monotonic
    said: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # key -> (first, last said, unsaid)

    def error(self, key: str, message: str, level: int = logging.ERROR,
              exc_info: BaseException | None = None) -> bool:
        """Log `message` (with `exc_info`'s traceback) unless `key` was logged less than `every_s` ago
        (counted instead); True when logged."""
        now = self.clock()
        known = self.said.get(key)
        if known is not None and now - known[1] < self.every_s:
            self.said[key] = (known[0], known[1], known[2] + 1)
            return False
        unsaid = f" ({known[2]} more like it in {now - known[1]:.0f} s not logged)" if known and known[2] else ""
        log.log(level, "%s%s", message, unsaid, exc_info=exc_info)
        self.said[key] = (known[0] if known else now, now, 0)
        return True

    def cleared(self, key: str, message: str) -> None:
        """The condition behind `key` ended: one INFO line (how long it lasted), and the next failure is news."""
        known = self.said.pop(key, None)
        if known is not None:
            unsaid = f"; {known[2]} repeat(s) since the last line were not logged" if known[2] else ""
            log.info("%s after %.0f s%s", message, self.clock() - known[0], unsaid)


def quiet_loop_errors(loop: asyncio.AbstractEventLoop, repeats: RepeatLog | None = None) -> None:
    """asyncio's own error reports go through `repeats` (one line a minute per kind, with the count).

    Why: a listening socket whose accept fails with EMFILE is reported once per pending connection,
    each with its traceback, and tried again every second: an API flood wrote 38 MB in 30 s here (issue
    19 #1: 213 MB in its minute). A kind is the report's message and its exception's type and errno."""
    said = repeats if repeats is not None else RepeatLog()

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message") or "asyncio reported an error")
        exc = context.get("exception")
        kind = f"{type(exc).__name__} {getattr(exc, 'errno', '')}" if exc is not None else ""
        shown = f"{message}: {type(exc).__name__}: {exc}" if exc is not None else message
        said.error(f"asyncio: {message}: {kind}", shown,
                   exc_info=exc if isinstance(exc, BaseException) else None)

    loop.set_exception_handler(handler)


def raise_open_files_limit(wanted: int = OPEN_FILES_WANTED) -> str:
    """Lift the soft RLIMIT_NOFILE toward the hard one (at most `wanted`); the line to log, with the values.

    The usual soft limit (1,024) is what an API flood exhausted; the hard limit is the operator's
    (the unit's `LimitNOFILE=`), so going up to it needs no privilege."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if target <= soft:
        return f"open files: soft limit {soft} (hard {_shown(hard)}), kept"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        return f"open files: soft limit {soft} kept, raising it to {target} failed: {exc}"
    return f"open files: soft limit raised from {soft} to {target} (hard {_shown(hard)})"


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


async def supervise(name: str, run: Callable[[], Awaitable[None]], policy: Policy, *,
                    stopping: asyncio.Event, fatal: Callable[[str], None],
                    restartable: Callable[[Exception], bool] = lambda _exc: True,
                    clock: Callable[[], float] = time.monotonic) -> None:
    """Run `run()` until it returns (the daemon is stopping, or its work is done), restarting it by `policy`.

    A death (an exception) is logged with `name` and its traceback. It is restarted after a backoff
    (RESTART) unless the policy gives up or `restartable(exc)` says no (a store that cannot be written:
    running it again would only fail again); then `fatal(reason)` stops the daemon (exit 3) with the
    reason naming the task. A restart waits on `stopping`, so a stop is never held up by it."""
    deaths: list[float] = []
    while True:
        try:
            await run()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the whole point: no death goes unseen
            now = clock()
            deaths = [at for at in deaths if now - at < RESTART_WINDOW_S] + [now]
            death = f"{name} died: {type(exc).__name__}: {exc}"
            trace = traceback.format_exc()
            if policy.gives_up(len(deaths)) or not restartable(exc):
                times = f" ({len(deaths)} deaths within {number_text(RESTART_WINDOW_S)} s)" if len(deaths) > 1 else ""
                log.error("%s%s\n%s", death, times, trace)  # the trace; `fatal` says the stop (CRITICAL)
                fatal(f"{death}{times}; {policy.why}")
                return
            delay = backoff_delay(RESTART, len(deaths))
            log.error("%s; restarting it in %.1f s (%s)\n%s", death, delay, policy.why, trace)
            try:
                await asyncio.wait_for(stopping.wait(), delay)
                return
            except TimeoutError:
                pass
