"""Fetching web pages without letting a page hurt the daemon or reach where it must not.

briefd fetches whatever URLs a search engine (and so, indirectly, the open web)
hands it, so every page is treated as hostile:

- only http and https, never URLs with credentials in them;
- no link-local or cloud-metadata addresses (169.254.169.254 and friends), checked
  for the literal host, for every address the name resolves to, and for every
  redirect hop; the connection then goes to an address that was checked (the pin,
  `PinnedBackend`), never to a second DNS answer, so a name that rebinds between
  our lookup and the connect gets no byte to the refused address; the address
  actually connected to is checked once more after the headers, as a second guard;
- redirects are followed by hand, so each hop gets the same checks, and loops are
  named as loops;
- the body is streamed and cut at `max_bytes` whatever Content-Length claims, and
  the whole fetch (DNS, connect, headers, body) runs under one wall-clock deadline
  so a server that trickles a byte a second cannot hold a worker;
- compressed bodies are decoded here, not by httpx, with an output bound on every
  zlib call (`read_limited`): a 2 KB gzip bomb costs at most `max_bytes` plus one
  64 KiB piece, and stacked or unknown codings are refused before decoding;
- a page read before is asked for again conditionally (`Validators`: If-None-Match,
  If-Modified-Since), on the hop its stored copy came from only, under every rule
  above; a 304 ends the fetch with no body read (`not_modified`). The validators a
  page sends are untrusted and echoed back in a later request, so only those of
  the RFC 9110 grammar, and of bounded length, are kept (`clean_etag`,
  `clean_last_modified`).

Network trouble never raises: `fetch_page` returns a `FetchResult` whose `error`
says, in a few words a user can read in the event log, what went wrong.
Private addresses (loopback, RFC 1918, ULA) are allowed by default because
briefd is meant to run on a private network next to its SearXNG and its pages.

The `egress` policy (daemon/sources/egress.py decides, `egress_reason`) is enforced by the
same checks, on the same vetted addresses: a public address under egress = private,
anything under egress = none (refused before even a DNS lookup). `vetted_transport`
carries the policy to the clients that do not fetch pages (SearXNG, the model server).
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import functools
import ipaddress
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timezone
from types import MappingProxyType
from urllib.parse import unquote, urlsplit

import httpcore
import httpx

from .egress import (NONE_REASON, CountingTransport, RefusedConnect, egress_reason, embedded_ipv4, normal_host,
                     note_refused, refused_by_policy)
from .. import __version__
from ..core.retry import transient_status
from ..core.errors import BriefdError
from ..core.settings import Settings
from ..rules.numbers import number_text

MAX_URL_CHARS = 4096
"""Longer URLs are refused: nothing legitimate needs more, and absurd ones are a smell."""

ALLOWED_SCHEMES = ("http", "https")

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES: frozenset[_IP] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (classic)
    )
)
"""Cloud metadata endpoints: they hand out credentials to anyone who can GET them."""

METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"})
"""Names that resolve to a metadata endpoint inside a cloud; refused without a DNS lookup."""

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

ACCEPT_ENCODING = "gzip, deflate"
"""The codings briefd asks for, and the only ones `read_limited` decodes (one layer at most)."""

DECODE_PIECE_BYTES = 64 * 1024
"""Most bytes one zlib call may produce: the bound that makes a bomb cost no more than the limit."""

_CODING_ALIASES = {"x-gzip": "gzip"}  # RFC 9110 8.4.1.3: a recipient treats x-gzip as gzip

MAX_ETAG_CHARS = 256
"""Longer entity tags are dropped: real ones are a hash or a version (tens of characters), and a
page's header is stored and sent back, so its size must not be the page's choice."""

MAX_DATE_CHARS = 64
"""An HTTP-date is 29 characters (IMF-fixdate); the obsolete forms are a little longer."""

_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"')  # RFC 9110 8.8.3, ASCII only (obs-text dropped)

NOT_MODIFIED = 304


@dataclass(frozen=True)
class Validators:
    """What a stored copy of a page lets a fetch ask with: "send it only if it changed".

    `url` is the address the copy was answered from (its final URL after redirects): the
    conditional headers go on that hop only, since an entity tag belongs to one resource.
    """

    url: str
    etag: str | None = None
    last_modified: str | None = None

    def __bool__(self) -> bool:
        return bool(self.etag or self.last_modified)

    def headers_for(self, url: str) -> dict[str, str]:
        """If-None-Match / If-Modified-Since for a request to `url` (none for another hop)."""
        if _loop_key(url) != _loop_key(self.url):
            return {}
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


def clean_etag(value: str | None) -> str | None:
    """A page's ETag as briefd keeps and sends it back: one entity tag of RFC 9110's grammar
    (visible ASCII within quotes, W/ for a weak one), at most MAX_ETAG_CHARS; anything else,
    a list, control characters or a line break among them, is no validator (None)."""
    if value is None:
        return None
    value = value.strip()
    if len(value) > MAX_ETAG_CHARS or not _ETAG.fullmatch(value):
        return None
    return value


def clean_last_modified(value: str | None) -> str | None:
    """A page's Last-Modified as an IMF-fixdate briefd writes itself ("Tue, 11 Mar 2025
    09:00:00 GMT"), or None when it is no HTTP-date: the page's own text is never sent back."""
    if value is None or len(value) > MAX_DATE_CHARS:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # RFC 9110 5.6.7: an HTTP-date is UTC whatever it says
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return email.utils.format_datetime(moment.astimezone(timezone.utc), usegmt=True)
    except (ValueError, OverflowError):
        return None


USER_AGENT = f"briefd/{__version__} (+offline research daemon)"  # the version: daemon/__init__.py's


@dataclass(frozen=True)
class FetchLimits:
    """What one page fetch may cost and where it may go."""

    # The defaults of the knobs a user can set are Settings' (the one place; settings.config_knobs carries
    # a user's values here by name); the others are fixed here.
    max_bytes: int = Settings.fetch_max_bytes
    timeout_s: float = Settings.fetch_timeout_s  # total wall time per page: DNS, connect, every hop, the whole body
    connect_timeout_s: float = 5.0
    max_redirects: int = Settings.fetch_max_redirects
    allow_private: bool = True  # loopback, RFC 1918, ULA: briefd lives on private networks
    allow_link_local: bool = Settings.allow_link_local  # 169.254/16, fe80::/10 and cloud metadata addresses
    egress: str = Settings.egress  # open | private | none (egress.egress_reason decides)
    egress_hosts: tuple[str, ...] = Settings.egress_hosts  # names or addresses egress = private allows
    user_agent: str = USER_AGENT


@dataclass
class FetchResult:
    """The outcome of one fetch; `error` is None only when the body is the whole page.

    `final_url` is where the fetch ended: the page after redirects, or the hop that
    was refused. `status` is the answer from `final_url`: None when it was never
    asked (refused) or never answered (connect failure, timeout before headers).
    `truncated` says the body is not the complete resource (cut at max_bytes, or a
    timeout mid-body); such a result always carries an error too.
    `redirects` lists each hop followed, in order (not in the agreed API: an extra for
    the page_fetched event). `transient` says the failure may heal (timeout, connection
    trouble, 408/429/5xx), so the URL is worth trying in a later run; a 404, a redirect
    loop or a refused address will not.
    `not_modified`: asked with `Validators`, the server said the stored copy is still the
    page (304): no error, no body, and not `ok` (there is nothing here to read).
    `etag` and `last_modified` are the answer's validators, cleaned (None: it sent none).
    """

    url: str
    final_url: str
    status: int | None = None
    content_type: str = ""
    body: bytes = b""
    error: str | None = None
    elapsed_s: float = 0.0
    truncated: bool = False
    redirects: list[str] = field(default_factory=list)
    transient: bool = False
    timed_out: bool = False  # the page did not answer within the time limits (a slow page, remembered as such)
    not_modified: bool = False
    etag: str | None = None
    last_modified: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The TLS context of every briefd client that is not given one: httpx's own default (certifi's CAs; no
    SSL_CERT_FILE from the environment, as each client here has trust_env off), made once a process.

    Why: each context loads the CA bundle again, about 40 ms of CPU, and the daemon made five as it started
    (one per service client and the page client), each `briefd run --once` from cron among them. httpcore
    sets only the ALPN list on a context it is given (http/1.1 for every client here), so one is shared."""
    return httpx.create_ssl_context(verify=True, trust_env=False)


def tls(verify: ssl.SSLContext | bool) -> ssl.SSLContext | bool:
    """`verify` as a transport takes it: True (the default) is the shared `default_tls()`."""
    return default_tls() if verify is True else verify


def make_client(limits: FetchLimits, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
    """An AsyncClient fit for `fetch_page`: explicit timeouts, bounded pool, no auto-redirects.

    trust_env=False: a proxy from the environment would fetch on our behalf and make
    the address checks meaningless, and .netrc credentials must never leak to pages.
    Its transport connects only to addresses `fetch_page` vetted (`PinnedBackend`).
    `verify` is httpx's: the system's CAs by default, or a context trusting an intranet CA.
    Accept-Encoding is pinned to gzip/deflate, the codings `read_limited` decodes
    itself (httpx's decoders have no output bound, and brotli/zstd would depend on
    which optional packages happen to be installed). Each request is counted into
    the running brief's egress log (`egress.CountingTransport`).
    """
    pool_limits = httpx.Limits(max_connections=16, max_keepalive_connections=0)  # see fetch_page
    return httpx.AsyncClient(
        transport=CountingTransport(pinned_transport(pool_limits, verify)),
        timeout=httpx.Timeout(limits.timeout_s, connect=limits.connect_timeout_s),
        limits=pool_limits,
        follow_redirects=False,
        trust_env=False,
        headers={
            "User-Agent": limits.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": ACCEPT_ENCODING,
        },
    )


def address_reason(ip: _IP, limits: FetchLimits, host: str | None = None) -> str | None:
    """Why this address may not be fetched, or None when it may.

    With `host` (the name it was reached by), the egress policy is checked too; its
    reason names the host itself, the others get "(for host)" from their caller.
    """
    if host is not None:
        return address_reason(ip, limits) or egress_reason(limits.egress, limits.egress_hosts, host, ip)
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        reason = address_reason(embedded, limits)
        return reason and f"{reason} (inside {ip})"
    if not limits.allow_link_local:
        if ip.is_link_local:
            return f"refused: link-local address {ip}"
        if ip in METADATA_ADDRESSES:
            return f"refused: cloud metadata address {ip}"
    if ip.is_unspecified or ip.is_multicast or (isinstance(ip, ipaddress.IPv4Address) and ip.is_reserved):
        return f"refused: unroutable address {ip}"
    if not limits.allow_private and not ip.is_global and not ip.is_link_local:
        kind = "loopback" if ip.is_loopback else "private"
        return f"refused: {kind} address {ip}"
    return None


def _literal_ip(host: str) -> _IP | None:
    """The address a host names literally, including the forms libc also accepts.

    getaddrinfo turns "2852039166", "0xa9fea9fe" and "169.254.43518" into
    169.254.169.254, so those count as literals too.
    """
    host = host.rstrip(".")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def check_url(url: str, limits: FetchLimits) -> str | None:
    """A reason to refuse `url` that needs no network, or None.

    Checks length, control characters, scheme, credentials, a host being present,
    and literal addresses (however spelled). Host names are checked after DNS by
    `resolve_vetted`. Under egress = none every URL is refused here: no DNS lookup either.
    """
    if limits.egress == "none":
        return NONE_REASON
    if len(url) > MAX_URL_CHARS:
        return f"URL too long ({len(url)} chars)"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "control character in URL"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        return f"malformed URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        return f"scheme '{scheme}' not allowed" if scheme else "no scheme in URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "credentials in URL not allowed"
    host = unquote(parts.hostname or "")
    if not host:
        return "no host in URL"
    ip = _literal_ip(host)
    if ip is not None:
        return address_reason(ip, limits, host)
    name = host.rstrip(".").lower()
    if not limits.allow_link_local and name in METADATA_HOSTNAMES:
        return f"refused: cloud metadata host {name}"
    if not limits.allow_private and (name == "localhost" or name.endswith(".localhost")):
        return f"refused: loopback host {name}"
    return None


@dataclass(frozen=True)
class Resolved:
    """A host's addresses after vetting: `reason` says why it is refused (then there are none)."""

    reason: str | None
    addresses: tuple[_IP, ...] = ()


async def resolve_vetted(host: str, limits: FetchLimits) -> Resolved:
    """Resolve `host` once and vet every address; refused if ANY address is.

    Any, not all: a name that answers with both a public and a metadata address
    would otherwise be a coin toss away from the metadata service. The addresses
    returned are the ones the connection may use (see `PinnedBackend`). The egress
    policy is checked on each address too, by the name it was reached by, so a name
    that resolves to a public address is refused under egress = private, whatever
    the URL looked like.
    """
    if limits.egress == "none":
        return Resolved(NONE_REASON)  # not even a DNS query leaves
    host = unquote(host).strip("[]")
    literal = _literal_ip(host)
    if literal is not None:
        reason = address_reason(literal, limits, host)
        return Resolved(reason, () if reason else (literal,))
    resolved = await _lookup(host)
    for ip in resolved.addresses:
        reason = address_reason(ip, limits)
        if reason is not None:
            return Resolved(f"{reason} (for {host})")
        reason = egress_reason(limits.egress, limits.egress_hosts, host, ip)
        if reason is not None:
            return Resolved(reason)
    return resolved


async def _lookup(host: str) -> Resolved:
    """Every address `host` resolves to (no vetting), in the resolver's order, once each."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return Resolved(f"cannot resolve host '{host}'")
    addresses: list[_IP] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return Resolved(f"refused: unparseable address {address!r} for {host}")
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        return Resolved(f"cannot resolve host '{host}'")
    return Resolved(None, tuple(addresses))


_PINS: ContextVar[Mapping[str, tuple[_IP, ...]]] = ContextVar("briefd_fetch_pins", default=MappingProxyType({}))
"""Host -> the vetted addresses this task may connect to. Per task, so concurrent fetches never mix."""


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to the addresses pinned for the host.

    httpx would otherwise resolve the name again when it connects, and a name can
    answer differently the second time (DNS rebinding). Only the TCP target is
    swapped: the URL, and so the Host header, TLS SNI and certificate check, still
    use the name. A host with no pin is refused: nothing connects unvetted.
    """

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        addresses = _PINS.get().get(host.lower())
        if not addresses:
            raise RefusedConnect(f"refused: {host} was not resolved and vetted before connecting")
        return await _connect_first(self._inner, addresses, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        raise RefusedConnect("refused: pages are not fetched over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _connect_first(inner: httpcore.AsyncNetworkBackend, addresses: tuple[_IP, ...], port: int,
                         timeout: float | None, local_address: str | None,
                         socket_options: Iterable[httpcore.SOCKET_OPTION] | None) -> httpcore.AsyncNetworkStream:
    """Connect to the first of `addresses` that answers, in the resolver's order (as getaddrinfo's callers do)."""
    failure: Exception | None = None
    for ip in addresses:
        try:
            return await inner.connect_tcp(str(ip), port, timeout=timeout, local_address=local_address,
                                           socket_options=socket_options)
        except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
            failure = exc
    assert failure is not None
    raise failure


class VettingBackend(PinnedBackend):
    """A backend that resolves and vets each host itself, at connect time, under the egress policy only.

    For the clients whose requests do not go through `fetch_page` (SearXNG, the model
    server): the operator configured them, so the page rules (link-local, metadata) do
    not apply, but the policy does, on the address actually dialled. `limits` carries
    the policy and the hosts it allows (`egress.service_allowed`); under egress = none
    with no host allowed, nothing is even resolved.
    """

    def __init__(self, inner: httpcore.AsyncNetworkBackend, limits: FetchLimits) -> None:
        super().__init__(inner)
        self._limits = limits

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        resolved = await _resolve_for_policy(host, self._limits)
        if resolved.reason is not None:
            raise RefusedConnect(resolved.reason)
        return await _connect_first(self._inner, resolved.addresses, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        raise RefusedConnect("refused: briefd's services are reached over TCP only")


async def _resolve_for_policy(host: str, limits: FetchLimits) -> Resolved:
    """`resolve_vetted` with only the egress policy applied (a service's own address is the operator's choice)."""
    host = unquote(host).strip("[]")
    if limits.egress == "none" and normal_host(host) not in limits.egress_hosts:
        return Resolved(NONE_REASON)  # not even a DNS query leaves
    literal = _literal_ip(host)
    if literal is not None:
        reason = egress_reason(limits.egress, limits.egress_hosts, host, literal)
        return Resolved(reason, () if reason else (literal,))
    resolved = await _lookup(host)
    for ip in resolved.addresses:
        reason = egress_reason(limits.egress, limits.egress_hosts, host, ip)
        if reason is not None:
            return Resolved(reason)
    return resolved


def vetted_transport(limits: FetchLimits, pool_limits: httpx.Limits = httpx.Limits(),
                     verify: ssl.SSLContext | bool = True) -> httpx.AsyncBaseTransport:
    """A transport for a service client under `limits.egress`, counting each request into the brief's log.

    Under egress = open the connections are not vetted (as before: the operator chose
    the service); they are still counted.
    """
    transport = httpx.AsyncHTTPTransport(limits=pool_limits, trust_env=False, verify=tls(verify))
    if limits.egress != "open":
        _wrap_backend(transport, lambda inner: VettingBackend(inner, limits))
    return CountingTransport(transport)


def pinned_transport(limits: httpx.Limits, verify: ssl.SSLContext | bool = True) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose connections go through `PinnedBackend`.

    httpx takes no network backend argument, so the pool's backend is wrapped in
    place; if a new httpx/httpcore moves it, this fails loudly at start-up rather
    than fetching unpinned.
    """
    transport = httpx.AsyncHTTPTransport(limits=limits, trust_env=False, verify=tls(verify))
    _wrap_backend(transport, PinnedBackend)
    return transport


def _wrap_backend(transport: httpx.AsyncHTTPTransport,
                  wrap: Callable[[httpcore.AsyncNetworkBackend], httpcore.AsyncNetworkBackend]) -> None:
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("this httpx/httpcore version hides the network backend; "
                           "briefd cannot pin fetches to vetted addresses (pin httpx/httpcore to a known version)")
    pool._network_backend = wrap(pool._network_backend)


def _peer_reason(response: httpx.Response, limits: FetchLimits, host: str) -> str | None:
    """Check the address we actually connected to (catches DNS rebinding after our lookup)."""
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    peer = stream.get_extra_info("server_addr")
    if not peer:
        return None
    try:
        ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
    except ValueError:
        return None
    return address_reason(ip, limits, host)


def _loop_key(url: str) -> str:
    """URLs that differ only by fragment are the same request."""
    return url.split("#", 1)[0]


def _describe(exc: BaseException, limits: FetchLimits) -> str:
    """A few words for a network failure, the way a user would say it."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"connect timeout after {number_text(limits.connect_timeout_s)}s"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout after {number_text(limits.timeout_s)}s"
    if isinstance(exc, httpx.ConnectError):
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED:
                return "connection refused"
            if isinstance(cause, ssl.SSLError):
                return f"TLS error: {cause.reason or cause}"
            cause = cause.__cause__ or cause.__context__
        text = str(exc)
        if "refused" in text.lower():
            return "connection refused"
        return f"connect failed: {text or type(exc).__name__}"
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc)
        if "peer closed" in text or "incomplete" in text.lower():
            return "connection closed before the page was complete"
        return f"protocol error: {text or type(exc).__name__}"
    if isinstance(exc, httpx.DecodingError):
        return f"bad content encoding: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def fetch_page(client: httpx.AsyncClient, url: str, limits: FetchLimits,
                     validators: Validators | None = None) -> FetchResult:
    """GET `url` within `limits`, following redirects by hand; never raises for network trouble.

    With `validators` (a stored copy's), the request is conditional: a 304 gives a result
    that says `not_modified`, with no body read."""
    started = time.monotonic()
    result = FetchResult(url=url, final_url=url)
    try:
        async with asyncio.timeout(limits.timeout_s):
            await _fetch_into(result, client, url, limits, validators)
    except TimeoutError:
        result.error = f"timeout after {number_text(limits.timeout_s)}s"
        result.transient = result.timed_out = True
        if result.body:
            result.truncated = True
    except BodyRefused as exc:
        result.error = str(exc)
        result.transient = False
        result.truncated = bool(result.body)
    except MemoryError:
        # Defence in depth: read_limited bounds what a page may cost, but if memory runs out
        # anyway this page must not escape as an exception (the brief would retry it forever).
        result.body = b""
        result.error = "out of memory reading this page; not fetched again"
        result.transient = False
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError, UnicodeError) as exc:
        result.error = _describe(exc, limits)
        result.transient = isinstance(exc, (httpx.TransportError, OSError))
        result.timed_out = isinstance(exc, httpx.TimeoutException)
        if result.body:
            result.truncated = True
    result.elapsed_s = time.monotonic() - started
    return result


async def _fetch_into(result: FetchResult, client: httpx.AsyncClient, url: str, limits: FetchLimits,
                      validators: Validators | None = None) -> None:
    """The fetch itself; fills `result` as it goes so a timeout still reports how far it got."""
    current = url
    seen = {_loop_key(url)}
    for hop in range(limits.max_redirects + 1):
        result.final_url = current
        reason = check_url(current, limits)
        if reason is not None:
            _refuse(result, current, reason)
            return
        host = httpx.URL(current).raw_host.decode("ascii")
        resolved = await resolve_vetted(host, limits)
        if resolved.reason is not None:
            _refuse(result, current, resolved.reason)
            return
        # Connection: close - a server that sends more than its Content-Length leaves bytes in a
        # kept-alive connection that the pool would hand to the next request (seen in the tests as
        # "Receive buffer too long"); pages rarely share a host, so reuse buys little. It also
        # means every hop connects afresh, to the addresses just vetted for it.
        conditional = validators.headers_for(current) if validators else {}
        headers = {"User-Agent": limits.user_agent, "Connection": "close", **conditional}
        request = client.build_request("GET", current, headers=headers)
        pinned = _PINS.set({host.lower(): resolved.addresses})
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        finally:
            _PINS.reset(pinned)
        try:
            result.status = response.status_code
            result.content_type = response.headers.get("content-type", "").strip()
            reason = _peer_reason(response, limits, host)
            if reason is not None:
                result.error = reason
                return
            result.etag = clean_etag(response.headers.get("etag"))
            result.last_modified = clean_last_modified(response.headers.get("last-modified"))
            if response.status_code == NOT_MODIFIED and conditional:
                result.not_modified = True  # the stored copy is the page: nothing to read
                return
            if response.status_code in _REDIRECT_STATUSES and "location" in response.headers:
                try:
                    target = str(response.url.join(response.headers["location"].strip()))
                except (httpx.InvalidURL, ValueError):
                    result.error = "bad redirect location"
                    return
                if _loop_key(target) in seen:
                    result.error = "redirect loop"
                    return
                if hop == limits.max_redirects:
                    result.error = "too many redirects"
                    return
                seen.add(_loop_key(target))
                result.redirects.append(target)
                current = target
                continue
            if not 200 <= response.status_code < 300:
                result.error = f"HTTP {response.status_code}"
                result.transient = transient_status(response.status_code)
                return
            await _read_body(result, response, limits)
            return
        finally:
            await response.aclose()


def _refuse(result: FetchResult, url: str, reason: str) -> None:
    """This hop is not asked for; a refusal by the egress policy is listed in the brief's egress log."""
    result.status, result.error = None, reason
    if refused_by_policy(reason):
        note_refused(url)


async def _read_body(result: FetchResult, response: httpx.Response, limits: FetchLimits) -> None:
    """Stream the body into `result`, stopping at max_bytes whatever the headers claim."""
    declared = response.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > limits.max_bytes:
        result.error = too_large(limits.max_bytes)
        result.truncated = True
        return
    buffer = bytearray()
    try:
        cut = await read_limited(response, limits.max_bytes, buffer)
    finally:
        result.body = bytes(buffer)  # also when a timeout cancels us mid-body
    if cut is not None:
        result.error = cut
        result.truncated = True


def too_large(max_bytes: int) -> str:
    return f"too large (>{max_bytes} bytes)"


class BodyRefused(BriefdError, ValueError):
    """A body briefd will not decode: stacked or unknown content codings, or a corrupt stream.

    Permanent: the same URL will send the same body again.
    """


def content_coding(response: httpx.Response) -> str | None:
    """The one content coding to undo (None: identity); refuses stacks and codings we did not ask for.

    Why refuse stacks: no real server compresses twice, and `gzip, gzip` is how a
    2 KB body becomes gigabytes; one layer, decoded with a bound, is all a page needs.
    """
    codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
    codings = [_CODING_ALIASES.get(c, c) for c in codings if c and c != "identity"]
    if len(codings) > 1:
        raise BodyRefused(f"refused: stacked content encodings ({', '.join(codings)}); "
                          f"briefd decodes one layer of {ACCEPT_ENCODING}")
    if codings and codings[0] not in ("gzip", "deflate"):
        raise BodyRefused(f"refused: content encoding '{codings[0]}' not asked for (briefd accepts {ACCEPT_ENCODING})")
    return codings[0] if codings else None


class BoundedDecoder:
    """Undo one content coding in pieces of at most DECODE_PIECE_BYTES (zlib's max_length).

    The caller stops pulling pieces once it has enough, so decoding never produces
    more than the limit plus one piece, whatever the compression ratio. "deflate"
    arrives zlib-wrapped (as RFC 9110 says) or raw (as some servers send it); its
    first two bytes tell which (RFC 1950's header check), whatever way the wire
    splits them.
    """

    def __init__(self, coding: str | None) -> None:
        self.coding = coding
        self._head = b""  # deflate's first bytes, until there are two to tell zlib from raw
        self._z: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS) if coding == "gzip" else None

    def decode(self, data: bytes) -> Iterator[bytes]:
        """The decoded form of `data`, piece by piece; trailing bytes after the stream's end are ignored."""
        if self.coding is None:
            if data:
                yield data
            return
        z = self._z
        if z is None:  # deflate, not yet told which kind
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            z = self._z = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(data) else -zlib.MAX_WBITS)
        pending = data
        while not z.eof:
            try:
                piece = z.decompress(pending, DECODE_PIECE_BYTES)
            except zlib.error as exc:
                raise BodyRefused(f"bad content encoding: {self.coding} stream is corrupt ({exc})") from exc
            pending = z.unconsumed_tail
            if piece:
                yield piece
            if not pending and len(piece) < DECODE_PIECE_BYTES:
                return  # input used up and output not cut short: nothing is held back


def _zlib_header(data: bytes) -> bool:
    """RFC 1950: method 8 (deflate) and a header that is a multiple of 31."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0


async def read_limited(response: httpx.Response, max_bytes: int, into: bytearray) -> str | None:
    """Read `response`'s body into `into`, decoded, never holding more than `max_bytes` of it.

    Returns None when the whole body fits, else why it was cut (`into` then holds
    the first `max_bytes` bytes). Both the bytes on the wire and the decoded bytes
    count against the limit: a stream that decodes to nothing cannot run forever
    either. Raises BodyRefused for codings we do not decode. This is the one
    bounded reader: pages and SearXNG answers both come through it.
    """
    decoder = BoundedDecoder(content_coding(response))
    wire = 0
    async for raw in response.aiter_raw():
        wire += len(raw)
        for piece in decoder.decode(raw):
            room = max_bytes - len(into)
            into += piece[:room]
            if len(piece) > room:
                return too_large(max_bytes) if decoder.coding is None else (
                    f"{too_large(max_bytes)} once decoded from {wire} {decoder.coding} bytes")
        if wire > max_bytes:
            return too_large(max_bytes)
    return None
