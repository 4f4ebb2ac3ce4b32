"""Where briefd may connect (the `egress` policy) and where it did, per brief.

An air-gapped site needs proof, not a promise: every HTTP request made for a brief
(the model server, SearXNG, each page and each redirect hop) is counted by host, and
report.json's `egress` block lists them, so an auditor can see nothing else was
contacted. The proof is taken where the request leaves (`CountingTransport`, below
httpx's redirect handling, so each hop counts), not from what the loop meant to do.

The policy (settings `egress`, `egress_hosts`) is decided here as a pure function of
an address and the host name it was reached by (`egress_reason`); daemon/sources/fetch.py
enforces it at connect time, on the address actually dialled, never on URL text:
- open: any address (the page checks of daemon/sources/fetch.py still apply);
- private: addresses that are not globally routable (loopback, RFC 1918, ULA,
  CGNAT 100.64/10, ...) and the hosts named in `allowed`;
- none: the hosts named in `allowed` only, which the worker sets to the model
  server for the model client and to nothing for pages and SearXNG.

Counting follows the brief, not the client: `start()` puts a log in a ContextVar at
the start of a brief's run; tasks created from it inherit the context, and so the
same log object. Requests made outside a brief (`briefd check`) are counted nowhere.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
from ..core.errors import BriefdError

REFUSED_PREFIX = "refused by egress = "
"""How every refusal by the policy starts, so a reader (and `refused_by_policy`) can tell it from other refusals."""

NONE_REASON = f"{REFUSED_PREFIX}none: briefd contacts only the model server"

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_ipv4(ip: _IP) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), which is where it really goes."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    embedded = ip.ipv4_mapped or ip.sixtofour
    if embedded is None and ip in _NAT64:
        embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return embedded


def is_public(ip: _IP) -> bool:
    """Reachable across the internet: what egress = private refuses.

    Python's `is_global` is the IANA special-purpose registry's answer, so loopback,
    RFC 1918, ULA, link-local, CGNAT (100.64/10: carrier and overlay networks such
    as Tailscale, inside the site's reach) and documentation ranges are not public.
    An IPv6 address carrying an IPv4 one is judged by the IPv4 address
    (::ffff:8.8.8.8 would otherwise pass as "private").
    """
    inner = embedded_ipv4(ip)
    return (inner or ip).is_global


def normal_host(host: str) -> str:
    """A host as `egress_hosts` spells it: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().lower().rstrip(".").strip("[]")


def egress_reason(policy: str, allowed: tuple[str, ...], host: str, ip: _IP) -> str | None:
    """Why the policy forbids connecting to `ip`, reached as `host`; None when it allows it.

    `allowed` are names or literal addresses (normalised as `normal_host`) the policy
    lets through: under private, whatever their address; under none, they are the only
    ones. A name is matched exactly (a listed name does not allow its subdomains).
    """
    if policy == "open":
        return None
    name = normal_host(host)
    if name in allowed or str(ip) in allowed:
        return None
    if policy == "none":
        return NONE_REASON
    if not is_public(ip):
        return None
    named = f" (for {name})" if name and name != str(ip) else ""
    return (f"{REFUSED_PREFIX}private: public address {ip}{named}; "
            f"list the host in egress_hosts or set egress = open")


def refused_by_policy(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(REFUSED_PREFIX)


def service_allowed(policy: str, egress_hosts: tuple[str, ...], service_url: str, *, model: bool) -> tuple[str, ...]:
    """The hosts a service client (SearXNG, the model server) may reach under `policy`.

    The operator chose the service by configuring its URL, so under private its host is
    allowed whatever its address. Under none only the model server is reached:
    `egress_hosts` does not widen none, and SearXNG gets nothing.
    """
    host = normal_host(httpx.URL(service_url).host)
    if policy == "none":
        return (host,) if model else ()
    return tuple(dict.fromkeys((*egress_hosts, host)))


# --------------------------------------------------------------------------- counting


def host_key(url: httpx.URL) -> str:
    """How a host is named in the egress block: the host, plus ":port" when it is not the scheme's default.

    The port is kept when it says something: on one machine the model server, SearXNG and
    a web server are all 127.0.0.1, and an auditor must tell them apart.
    """
    host = url.host
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{url.port}" if url.port is not None else shown


@dataclass
class EgressLog:
    """Requests per host for one brief, and the hosts refused (by the policy or as unvetted)."""

    policy: str
    requests: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    on_change: Callable[["EgressLog"], None] | None = None  # e.g. keep the counts in the store as they grow

    def count(self, host: str) -> None:
        self.requests[host] += 1
        self._changed()

    def refuse(self, host: str) -> None:
        self.refused[host] += 1
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """Plain counts, to checkpoint with the loop state and hand back to `start(earlier=...)`."""
        return {"requests": dict(self.requests), "refused": dict(self.refused)}

    def block(self, roles: Mapping[str, str] | None = None) -> dict[str, Any]:
        """report.json's `egress`: {policy, hosts: [{host, requests, role?}], refused: [{host, attempts}]}, by host.

        `role` (from `service_roles`) names a configured service ("model server", "SearXNG");
        it and `refused` are additive to the contract's shape: `refused` lists hosts briefd
        was asked to reach and did not (no byte was sent), which shows the policy at work.
        """
        roles = roles or {}
        return {
            "policy": self.policy,
            "hosts": [{"host": h, "requests": n, **({"role": roles[h]} if h in roles else {})}
                      for h, n in sorted(self.requests.items()) if n > 0],
            "refused": [{"host": h, "attempts": n} for h, n in sorted(self.refused.items()) if n > 0],
        }


_CURRENT: ContextVar[EgressLog | None] = ContextVar("briefd_egress_log", default=None)


def start(policy: str, earlier: Mapping[str, Mapping[str, int]] | None = None) -> EgressLog:
    """Count this task's requests (and its child tasks') into a new log, and return it.

    Call at the start of a brief's run, inside the task that runs it; `earlier` is an
    earlier attempt's `snapshot()`, so a resumed brief's report still lists every host.
    """
    log = EgressLog(policy)
    if earlier:
        log.requests.update(earlier.get("requests", {}))
        log.refused.update(earlier.get("refused", {}))
    _CURRENT.set(log)
    return log


def current() -> EgressLog | None:
    return _CURRENT.get()


def note_refused(url: str) -> None:
    """A URL whose host briefd refused before any request (fetch_page's checks)."""
    log = _CURRENT.get()
    if log is not None:
        try:
            log.refuse(host_key(httpx.URL(url)))
        except httpx.InvalidURL:
            return


class RefusedConnect(BriefdError, httpcore.ConnectError):
    """A connection briefd would not open (policy, or an address nobody vetted): nothing was sent."""


def _refused(exc: BaseException) -> bool:
    """httpx wraps httpcore's errors (`raise ConnectError(msg) from exc`): look at the cause too."""
    return isinstance(exc, RefusedConnect) or isinstance(exc.__cause__, RefusedConnect)


class CountingTransport(httpx.AsyncBaseTransport):
    """A transport that counts each request into the running brief's log, then sends it.

    Sits below httpx's redirect loop, so every hop counts. A request whose connection
    was refused (`RefusedConnect`) is listed as refused, not as a request: no byte left.
    A request that failed otherwise (refused by the peer, timed out) still counts: the
    host was contacted.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        log = _CURRENT.get()
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            if log is not None:
                (log.refuse if _refused(exc) else log.count)(host_key(request.url))
            raise
        if log is not None:
            log.count(host_key(request.url))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# --------------------------------------------------------------------------- what briefd says about it


def _model_hosts(ollama_host: str | Sequence[str]) -> list[str]:
    """One model server (`ollama_host`) or several (`ollama_hosts`), by `host_key`."""
    hosts = [ollama_host] if isinstance(ollama_host, str) else list(ollama_host)
    return list(dict.fromkeys(host_key(httpx.URL(h)) for h in hosts))


def check_line(policy: str, egress_hosts: tuple[str, ...], searxng_url: str,
               ollama_host: str | Sequence[str]) -> str:
    """`briefd check`'s line about egress: the policy in words, naming who may be contacted.

    `ollama_host` is the model server, or every model server (`hosts.model_hosts`)."""
    models = _model_hosts(ollama_host)
    model = ", ".join(models)
    search = host_key(httpx.URL(searxng_url))
    if policy == "none":
        return (f"egress = none: briefd contacts only the model server{'s' if len(models) > 1 else ''} ({model}); "
                f"SearXNG and web pages are never contacted (library and archives only)")
    if policy == "private":
        listed = ", ".join(egress_hosts) if egress_hosts else "none"
        return (f"egress = private: loopback and private addresses, egress_hosts ({listed}), "
                f"and the configured services (model server{'s' if len(models) > 1 else ''} {model}, "
                f"SearXNG {search}) whatever their address")
    return "egress = open: briefd may contact any address (web pages, SearXNG, the model server)"


def method_line(block: Mapping[str, Any]) -> str:
    """The report's method-section sentence: the policy and every host contacted, with counts.

    Plain text made of untrusted host names: the report escapes it for its format.
    """
    hosts = [h for h in block.get("hosts") or [] if isinstance(h, Mapping)]
    named = [f"{h.get('host')}" + (f" ({h['role']})" if h.get("role") else "")
             + f": {h.get('requests')} request{'' if h.get('requests') == 1 else 's'}" for h in hosts]
    line = f"Network (egress = {block.get('policy')}): "
    line += ("hosts contacted, " + "; ".join(named) + ". No other host was contacted.") if named \
        else "no host was contacted."
    refused = [r for r in block.get("refused") or [] if isinstance(r, Mapping)]
    if refused:
        line += " Refused without contact: " + ", ".join(str(r.get("host")) for r in refused) + "."
    if block.get("policy") != "none":  # under none briefd looks up no name but the model server's
        line += " Names were looked up through this machine's resolver (DNS), which this list does not count."
    return line


def service_roles(searxng_url: str, ollama_host: str | Sequence[str]) -> dict[str, str]:
    """The configured services by `host_key`, for `EgressLog.block`'s roles: each model server
    (one `ollama_host`, or every host of `hosts.model_hosts`) is a "model server"."""
    roles = {host_key(httpx.URL(searxng_url)): "SearXNG"}
    for model in _model_hosts(ollama_host):
        roles[model] = "model server" if model not in roles else "model server, SearXNG"
    return roles
