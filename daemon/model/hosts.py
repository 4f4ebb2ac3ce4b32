"""Several model servers (setting `ollama_hosts`, or several `openai_base_url`s): which one takes the next
call, and failover. Both APIs route the same way: the pool sees hosts, not protocols.

Why: one Ollama serves a few requests at once; a site with two GPU boxes should get about
twice the briefs an hour, and lose none when one box goes down. The rule lives in one pure
class, `HostPool` (no I/O, a clock you can inject), and `ModelHosts` does the calls:

- each call goes to the least-busy usable host (fewest calls in flight; ties by the
  configured order), so a slow host takes fewer calls without any tuning;
- a host whose call failed (`llm.ServiceDown`: refused, timed out, kept answering 5xx after
  the retry policy; `llm.ModelMissing`: 404, the model is not pulled there; or `llm.ModelRefused`:
  it, or a proxy in front of it, refuses briefd with a 4xx, a health probe too) is out for a
  backoff (`OUT`, doubling while it keeps failing); its next call after that is the probe
  (one at a time), and an answer brings it back;
- while another host is usable, a call tries a failing host only `FAILOVER_ATTEMPTS` times
  before going to the next one; the last host a call can try gets the full retry policy;
- when every host is out, the call goes to the host due back soonest with the full retry
  policy, which is today's outage behaviour: waiting events, then `ServiceDown` sends the
  brief back to the queue (worker.wait_or_fail).

Every host serves the same model name (`model`): a host that lacks it is out, and the log
says how to pull it there.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import llm
from .llm import AnswerCache, CallRecord, CallResult, ModelConfig, ModelMissing, ModelRefused, ServiceDown
from .wire import ChatClient
from ..core.retry import Backoff, OnWait, backoff_delay
from ..core.settings import Settings, config_knobs

log = logging.getLogger("briefd")
T = TypeVar("T")

__all__ = ["FAILOVER_ATTEMPTS", "OUT", "HostPool", "HostState", "ModelHosts", "Pick", "model_config", "model_hosts"]

OUT = Backoff(base_s=5.0, cap_s=300.0)  # how long a failed host is out before its probe: 5 s doubling to 5 min
# Tries of one call on a host while another is usable: two, so a request the server refuses with
# HTTP 500 twice is still judged by llm's health probe (PROBE_AFTER_REFUSALS) rather than
# taken for a dead host, while a refused connection moves on after one short wait.
FAILOVER_ATTEMPTS = llm.PROBE_AFTER_REFUSALS


def model_hosts(settings: Settings) -> tuple[str, ...]:
    """The model servers calls go to: with `model_api = "openai"` the `openai_base_url`s, else `ollama_hosts`
    when set, else the one `ollama_host`."""
    if settings.model_api == "openai":
        return settings.openai_base_url
    return settings.ollama_hosts or (settings.ollama_host,)


def model_config(settings: Settings) -> ModelConfig:
    """The model's knobs as the user set them (settings.config_knobs: `llm_timeout_s` is its `timeout_s`), on the
    first model server."""
    return ModelConfig(host=model_hosts(settings)[0], api=settings.model_api,
                       **config_knobs(settings, ModelConfig, "llm_"))


@dataclass
class HostState:
    """One host as the pool sees it."""

    host: str
    in_flight: int = 0
    failures: int = 0             # consecutive failed calls (0: healthy)
    out_until: float | None = None  # clock time its probe may start (None: healthy)
    probing: bool = False         # its probe call is in flight: no other call goes there meanwhile
    reason: str = ""              # why it is out

    def usable(self, now: float) -> bool:
        return self.out_until is None or (now >= self.out_until and not self.probing)


@dataclass(frozen=True)
class Pick:
    """The host for one call. `others`: another usable host remains if this one fails (fail over
    fast); `all_out`: every host was out, so this call is the outage's probe (full retry policy)."""

    host: str
    others: bool
    all_out: bool = False


@dataclass
class HostPool:
    """The routing rule: least busy usable host, ties by order; failed hosts out for a backoff."""

    hosts: Sequence[str]
    backoff: Backoff = OUT
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random
    states: dict[str, HostState] = field(init=False)

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValueError("a host pool needs at least one host")
        self.states = {h: HostState(h) for h in dict.fromkeys(self.hosts)}

    def acquire(self, tried: Collection[str] = ()) -> Pick | None:
        """The host for the next call (counted in flight until `release`), or None when every host
        not yet `tried` by this call is out. With nothing tried and every host out, the host due
        back soonest (ties by order) is picked anyway, `all_out`."""
        now = self.clock()
        left = [s for s in self.states.values() if s.host not in tried]
        usable = [s for s in left if s.usable(now)]
        if usable:
            best = min(usable, key=lambda s: s.in_flight)  # min keeps the first of equals: ties by order
            pick = Pick(best.host, others=len(usable) > 1)
        elif tried or not left:
            return None
        else:
            best = min(left, key=lambda s: s.out_until if s.out_until is not None else now)
            pick = Pick(best.host, others=False, all_out=True)
        best.in_flight += 1
        if best.out_until is not None:
            best.probing = True
        return pick

    def release(self, host: str) -> None:
        """A call on `host` ended (whatever its outcome, cancellation included)."""
        state = self.states[host]
        state.in_flight = max(0, state.in_flight - 1)
        state.probing = False

    def succeeded(self, host: str) -> None:
        """`host` answered: healthy again."""
        state = self.states[host]
        state.failures, state.out_until, state.reason = 0, None, ""

    def failed(self, host: str, reason: str) -> float:
        """`host` failed a call: out until its backoff ends; returns the seconds it is out.

        A failure while it is already out and not yet due (calls that were in flight when it
        went down) does not lengthen the backoff again.
        """
        now = self.clock()
        state = self.states[host]
        if state.out_until is not None and now < state.out_until:
            return state.out_until - now
        state.failures += 1
        delay = backoff_delay(self.backoff, state.failures, self.rand)
        state.out_until, state.reason = now + delay, reason
        return delay

    def out(self) -> list[HostState]:
        """The hosts out of the pool now, in order (for logs and status)."""
        return [s for s in self.states.values() if s.out_until is not None]


@dataclass
class ModelHosts:
    """The model clients, one per host, behind one `call_json` that routes each call through the pool."""

    model: ModelConfig
    clients: dict[str, ChatClient]
    pool: HostPool

    @classmethod
    def single(cls, client: ChatClient, model: ModelConfig) -> ModelHosts:
        return cls(model, {model.host: client}, HostPool([model.host]))

    @classmethod
    def build(cls, model: ModelConfig, hosts: Sequence[str],
              make_client: Callable[[ModelConfig], ChatClient]) -> ModelHosts:
        """One client per host, made by `make_client` from the model's config with that host."""
        clients = {h: make_client(dataclasses.replace(model, host=h)) for h in dict.fromkeys(hosts)}
        return cls(model, clients, HostPool(list(clients)))

    async def call_json(self, *, purpose: str, system: str, user: str, schema: dict[str, Any],
                        coerce: Callable[[Any], T], fallback: Callable[[], T], cache: AnswerCache | None = None,
                        record: Callable[[CallRecord], None] | None = None,
                        on_wait: OnWait | None = None, retry_cut: bool = True) -> CallResult[T]:
        """`llm.call_json` on the host the pool picks, failing over to the next usable host.

        Raises what `llm.call_json` raises (ServiceDown, ModelMissing, ModelRefused) only when no usable host
        is left for this call: the brief then waits as for a single server's outage.
        """
        tried: list[str] = []
        last: ServiceDown | ModelMissing | ModelRefused | None = None
        while (pick := self.pool.acquire(tried)) is not None:
            cfg = dataclasses.replace(self.model, host=pick.host)
            if pick.others:
                cfg = dataclasses.replace(cfg, transport_attempts=min(cfg.transport_attempts, FAILOVER_ATTEMPTS))
            try:
                result = await llm.call_json(self.clients[pick.host], cfg, purpose=purpose, system=system,
                                             user=user, schema=schema, coerce=coerce, fallback=fallback,
                                             cache=cache, record=record, on_wait=on_wait, retry_cut=retry_cut)
            except (ServiceDown, ModelMissing, ModelRefused) as exc:
                self._out(pick.host, exc)
                tried.append(pick.host)
                last = exc
                continue
            finally:
                self.pool.release(pick.host)
            self.pool.succeeded(pick.host)
            return result
        assert last is not None  # acquire() with nothing tried always picks a host
        raise last

    def _out(self, host: str, exc: ServiceDown | ModelMissing | ModelRefused) -> None:
        """Take `host` out, and say so (with the fix, when the model is missing there or it refuses briefd)."""
        first = self.pool.states[host].failures == 0
        seconds = self.pool.failed(host, str(exc))
        if len(self.clients) == 1:
            return  # one server: the brief's own outage handling says it (waiting events, the log)
        if isinstance(exc, ModelMissing):
            log.warning("model server %s is out: %s (on that machine, or with OLLAMA_HOST=%s); tried again in %.0f s",
                        host, exc, host, seconds)
        else:
            (log.warning if first else log.info)("model server %s is out: %s; tried again in %.0f s",
                                                  host, exc, seconds)
