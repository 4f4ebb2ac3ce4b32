"""Service outages as the operator's log tells them: once when they begin, once when they end.

Every brief that meets a down service emits its own `waiting` events (its log, `briefd status`);
the daemon's log must not repeat that per brief and per retry, or a six-hour SearXNG outage
buries everything else in journald. `OutageLog` keeps, per service (ollama, searxng, outbox),
since when it has been down in this process and which fix was said: the first failure is one
WARNING (with the fix when only the user can end it), a new fix for a service already down is
news and said again, and the first success afterwards is one INFO line saying how long it
lasted. `run --once` reads `down_for` to decide when to give up (daemon.worker).

`Prober` (issue 19 #15): a brief that met an outage waits its backoff on the queue (up to 5 min), so
it went on up to 5 minutes after the service was back. While a service is down the daemon knocks on
its cheapest door every PROBE_EVERY_S (Ollama's GET /api/version, SearXNG's GET /healthz), and the
first answer after a failed knock resumes its waiting briefs at once (Store.resume_waiting).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import httpx

from .retry import transient_status
from ..rules.numbers import number_text

log = logging.getLogger("briefd")


@dataclass
class _Down:
    since: float          # monotonic seconds
    reason: str
    fix: str | None


@dataclass
class OutageLog:
    """Which services are down now (in this process), logged once per outage."""

    patience_s: float = 0.0  # only said in the warning: how long a brief waits (patience_s, or once_patience_s)
    once: bool = False  # `run --once`: after once_patience_s a brief stays queued for the next run, not failed
    clock: Callable[[], float] = time.monotonic
    down: dict[str, _Down] = field(default_factory=dict)

    def went_down(self, service: str, reason: str, fix: str | None = None) -> None:
        """A call to `service` failed with `reason`: a WARNING when this outage (or its fix) is news."""
        known = self.down.get(service)
        if known is not None and (fix is None or fix == known.fix):
            known.reason = reason
            return
        if known is None:
            self.down[service] = known = _Down(self.clock(), reason, fix)
        else:
            known.reason, known.fix = reason, fix
        said = f"; to fix: {fix}" if fix is not None and fix not in reason else ""
        waits = (f"up to once_patience_s {number_text(self.patience_s)} s, then they stay queued for the next run"
                 if self.once
                 else f"up to patience_s {number_text(self.patience_s)} s")
        log.warning("%s is unavailable: %s%s. Briefs that need it wait (%s) and go on when it is back.",
                    service, reason, said, waits)

    def came_back(self, service: str) -> None:
        """A call to `service` succeeded: an INFO line when it had been down."""
        known = self.down.pop(service, None)
        if known is not None:
            log.info("%s is back after %.0f s down", service, self.clock() - known.since)

    def down_for(self, service: str) -> float:
        """Seconds `service` has been down (0 when it is up)."""
        known = self.down.get(service)
        return 0.0 if known is None else self.clock() - known.since

    def fix(self, service: str) -> str | None:
        known = self.down.get(service)
        return None if known is None else known.fix

    def summary(self) -> str:
        """For systemd's STATUS line: "waiting for ollama, searxng" (empty when all are up)."""
        return f"waiting for {', '.join(sorted(self.down))}" if self.down else ""


PROBE_EVERY_S = 2.0    # while a service is down, its probe runs this often (one cheap GET per server)
PROBE_TIMEOUT_S = 2.0  # a probe that takes longer is a failed knock
# each service's cheapest answer; "openai": the model service's when model_api = openai (under its /v1 base)
PROBE_PATHS = {"ollama": "/api/version", "openai": "/models", "searxng": "/healthz"}


async def answers(client: httpx.AsyncClient, url: str) -> bool:
    """Does something answer at `url` with a status that is not a service's passing trouble
    (retry.transient_status: a proxy's 502 in front of a stopped server is no answer)?"""
    try:
        resp = await client.get(url, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return not transient_status(resp.status_code)


@dataclass
class Prober:
    """Which down services answer their probe again.

    `targets`: per service, the client and URL of each of its servers (every model host). A service is
    back when a probe that failed is followed by one that answers: a service whose probe answers while
    its real calls fail (a model server answering /api/version but HTTP 500 to every chat) never had
    a failed knock, so its briefs keep their backoff rather than being resumed into the same failure."""

    targets: dict[str, list[tuple[httpx.AsyncClient, str]]]
    unreachable: set[str] = field(default_factory=set)  # services whose last probe failed

    async def back(self, down: Collection[str]) -> list[str]:
        """Probe each service of `down` that has a probe; the ones that answer after a failed knock."""
        self.unreachable &= set(down)  # an outage that ended forgets its failed knocks
        back: list[str] = []
        for service in down:
            servers = self.targets.get(service)
            if not servers:
                continue
            if any(await asyncio.gather(*(answers(client, url) for client, url in servers))):
                if service in self.unreachable:
                    back.append(service)
                self.unreachable.discard(service)
            else:
                self.unreachable.add(service)
        return back
