"""The one retry policy: what is worth waiting for, how long to wait, and when to give up.

briefd waits on two services (Ollama, SearXNG) at two levels, and both levels follow this
module so that they cannot drift apart again (issue 9: `llm`, `loop` and `worker` each kept
their own copy, and the copies disagreed):

- inside a call: a transient failure is tried again, `IN_CALL_ATTEMPTS` tries in all, waiting
  `IN_CALL` (1 s doubling to 30 s) between them; `call_with_retries` runs a call that way and
  tells the caller's `on_wait` what it waits for, so the caller can say so (a `waiting` event,
  `briefd status`) without this module knowing about events or the store;
- on the queue: a brief whose call gave up goes back to the queue and is tried again after
  `QUEUE` (2 s doubling to 5 min), until it has waited `patience_s` (`out_of_patience`).

Every wait is capped exponential with "equal jitter": between half the ceiling and the
ceiling, so several briefs (or daemons) never knock on a recovering server in step, and no
wait ever exceeds its cap. Pure apart from `call_with_retries`, which only sleeps.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from .errors import BriefdError

T = TypeVar("T")

__all__ = [
    "IN_CALL",
    "IN_CALL_ATTEMPTS",
    "QUEUE",
    "RETRY_AFTER_CAP_S",
    "Backoff",
    "RetryAtOnce",
    "OnWait",
    "Transient",
    "backoff_delay",
    "call_with_retries",
    "out_of_patience",
    "queue_delay",
    "transient_status",
]

# The knobs, in one place. Tests import them rather than copy the numbers.
IN_CALL_ATTEMPTS = 4           # tries of one call (the first included) before the brief goes back to the queue
_MAX_DOUBLINGS = 62            # 2**62 × any base is far past every cap; keeps the float finite
RETRY_AFTER_CAP_S = 300.0      # the longest Retry-After waited inside a call (QUEUE's cap): a server asking for
                               # more is asked again after this, and the brief's own patience still ends the wait


@dataclass(frozen=True)
class Backoff:
    """A capped exponential schedule: the ceiling of the n-th wait is `base_s` × 2**(n-1), at most `cap_s`."""

    base_s: float
    cap_s: float

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"a backoff needs 0 < base_s <= cap_s, got base_s={self.base_s}, cap_s={self.cap_s}")


IN_CALL = Backoff(base_s=1.0, cap_s=30.0)   # between tries of one model call or search
QUEUE = Backoff(base_s=2.0, cap_s=300.0)    # between a brief's trips back to the queue (docs/troubleshooting.md: 2 s doubling to 5 min)

# What a caller is told before each wait: the service, when the next try starts (epoch
# seconds), why it waits (one line, said to the user), and the failure's own fix (Transient.fix).
OnWait = Callable[[str, float, str, "str | None"], None]


class Transient(BriefdError):
    """A failure worth waiting out (the service is down, busy or answered garbage); its text is the reason.

    Raise it (or a subclass, such as `search.SearchUnavailable`) from a call run by
    `call_with_retries`; any other exception passes straight through, untried again.
    `fix` is None when the service coming back (or being started) ends it; a failure that
    something else ends (SearXNG running while its engines fail: search.EnginesFailing) carries
    that fix, and `on_wait` hears it from the first wait on, so the daemon's log says it.
    """

    fix: str | None = None
    retry_after_s: float | None = None  # the server's Retry-After (429, 503): the wait before the next try is at least this


class RetryAtOnce(Transient):
    """A failure that the next try waits out by itself, so nothing is gained by waiting before it.

    Ollama answers HTTP 500 when its runner died (on this prompt or another) and starts a new runner for
    the next request, which waits for the load: a backoff before that try only kept the model idle
    (0.5-1 s, and a daemon log saying the model was down, for a request that then proved poisoned).
    It is still a try: it counts toward `attempts`, the caller hears of it as of any failure (`on_wait`,
    with the next try due now), and the waits after later failures are as before.
    """


def transient_status(status: int) -> bool:
    """Is an HTTP status a service's passing trouble rather than a refusal of this request?

    5xx, 408 (timeout) and 429 (busy) heal by themselves; a negative status is the client's
    own "no status" (a body it could not read). Any other 4xx says the request is wrong:
    asking again would get the same answer.
    """
    return status >= 500 or status in (408, 429) or status < 0


def backoff_delay(schedule: Backoff, failures: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after `failures` consecutive failed tries (1 = the first failure).

    The ceiling doubles from `base_s` up to `cap_s`; the wait is drawn between half the
    ceiling and the ceiling (`rand` in [0, 1)), so it never exceeds the cap.
    """
    doublings = min(max(failures - 1, 0), _MAX_DOUBLINGS)
    ceiling = min(schedule.cap_s, schedule.base_s * 2.0 ** doublings)
    return ceiling / 2 + rand() * ceiling / 2


def queue_delay(outages: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds a brief waits on the queue after its `outages`-th consecutive outage (0 = the first)."""
    return backoff_delay(QUEUE, outages + 1, rand)


def out_of_patience(waited_s: float | None, patience_s: float) -> bool:
    """Has a brief waited out an outage long enough to fail? `waited_s` is None when it has not waited yet."""
    return waited_s is not None and waited_s >= patience_s


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    service: str,
    on_wait: OnWait | None = None,
    attempts: int = IN_CALL_ATTEMPTS,
    schedule: Backoff = IN_CALL,
    rand: Callable[[], float] = random.random,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run `call` until it returns, trying again after each `Transient` up to `attempts` tries in all.

    A failure that carries the server's Retry-After waits at least that long (up to `RETRY_AFTER_CAP_S`).
    Before each wait `on_wait(service, retry_at, reason, fix)` hears what is awaited. After the
    last try the last `Transient` is raised as it is: the caller turns it into its own
    outage (which sends the brief back to the queue). Anything else raised by `call` is not
    worth waiting for and passes through at once.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    failures = 0
    while True:
        try:
            return await call()
        except Transient as exc:
            failures += 1
            if failures >= attempts:
                raise
            if isinstance(exc, RetryAtOnce):
                if on_wait is not None:  # told all the same: the user sees each refusal (a `waiting` event, now)
                    on_wait(service, time.time(), str(exc), exc.fix)
                continue
            delay = backoff_delay(schedule, failures, rand)
            if exc.retry_after_s is not None:  # the server said how long it needs: never sooner, within the cap
                delay = max(delay, min(exc.retry_after_s, RETRY_AFTER_CAP_S))
            if on_wait is not None:
                on_wait(service, time.time() + delay, str(exc), exc.fix)
        await sleep(delay)
