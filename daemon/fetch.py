"""Fetching web pages without letting a page hurt the daemon or reach where it must not.

briefd fetches whatever URLs a search engine (and so, indirectly, the open web)
hands it, so every page is treated as hostile:

- only http and https, never URLs with credentials in them;
- no link-local or cloud-metadata addresses (169.254.169.254 and friends), checked
  for the literal host, for every address the name resolves to, for every
  redirect hop, and once more for the address actually connected to (a DNS answer
  that changes between our check and httpx's own lookup is caught there);
- redirects are followed by hand, so each hop gets the same checks, and loops are
  named as loops;
- the body is streamed and cut at `max_bytes` whatever Content-Length claims, and
  the whole fetch (DNS, connect, headers, body) runs under one wall-clock deadline
  so a server that trickles a byte a second cannot hold a worker.

Network trouble never raises: `fetch_page` returns a `FetchResult` whose `error`
says, in a few words a user can read in the event log, what went wrong.
Private addresses (loopback, RFC 1918, ULA) are allowed by default because
briefd is meant to run on a private network next to its SearXNG and its pages.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import httpx

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


@dataclass(frozen=True)
class FetchLimits:
    """What one page fetch may cost and where it may go."""

    max_bytes: int = 5_000_000
    timeout_s: float = 20.0  # total wall time per page: DNS, connect, every hop, the whole body
    connect_timeout_s: float = 5.0
    max_redirects: int = 5
    allow_private: bool = True  # loopback, RFC 1918, ULA: briefd lives on private networks
    allow_link_local: bool = False  # 169.254/16, fe80::/10 and cloud metadata addresses
    user_agent: str = "briefd/0.1 (+offline research daemon)"


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

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


def make_client(limits: FetchLimits) -> httpx.AsyncClient:
    """An AsyncClient fit for `fetch_page`: explicit timeouts, bounded pool, no auto-redirects.

    trust_env=False: a proxy from the environment would fetch on our behalf and make
    the address checks meaningless, and .netrc credentials must never leak to pages.
    Accept-Encoding is pinned to gzip/deflate so behaviour does not change with
    whichever optional decoders (brotli, zstd) happen to be installed.
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(limits.timeout_s, connect=limits.connect_timeout_s),
        limits=httpx.Limits(max_connections=16, max_keepalive_connections=0),  # see fetch_page
        follow_redirects=False,
        trust_env=False,
        headers={
            "User-Agent": limits.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
        },
    )


def address_reason(ip: _IP, limits: FetchLimits) -> str | None:
    """Why this address may not be fetched, or None when it may."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
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
    `resolve_and_check`.
    """
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
        return address_reason(ip, limits)
    name = host.rstrip(".").lower()
    if not limits.allow_link_local and name in METADATA_HOSTNAMES:
        return f"refused: cloud metadata host {name}"
    if not limits.allow_private and (name == "localhost" or name.endswith(".localhost")):
        return f"refused: loopback host {name}"
    return None


async def resolve_and_check(host: str, limits: FetchLimits) -> str | None:
    """Resolve `host` and refuse it if ANY of its addresses is refused; None when fine.

    Any, not all: a name that answers with both a public and a metadata address
    would otherwise be a coin toss away from the metadata service.
    """
    host = unquote(host).strip("[]")
    literal = _literal_ip(host)
    if literal is not None:
        return address_reason(literal, limits)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return f"cannot resolve host '{host}'"
    if not infos:
        return f"cannot resolve host '{host}'"
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return f"refused: unparseable address {address!r} for {host}"
        reason = address_reason(ip, limits)
        if reason is not None:
            return f"{reason} (for {host})"
    return None


def _peer_reason(response: httpx.Response, limits: FetchLimits) -> str | None:
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
    return address_reason(ip, limits)


def _loop_key(url: str) -> str:
    """URLs that differ only by fragment are the same request."""
    return url.split("#", 1)[0]


def _describe(exc: BaseException, limits: FetchLimits) -> str:
    """A few words for a network failure, the way a user would say it."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"connect timeout after {limits.connect_timeout_s:g}s"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout after {limits.timeout_s:g}s"
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


async def fetch_page(client: httpx.AsyncClient, url: str, limits: FetchLimits) -> FetchResult:
    """GET `url` within `limits`, following redirects by hand; never raises for network trouble."""
    started = time.monotonic()
    result = FetchResult(url=url, final_url=url)
    try:
        async with asyncio.timeout(limits.timeout_s):
            await _fetch_into(result, client, url, limits)
    except TimeoutError:
        result.error = f"timeout after {limits.timeout_s:g}s"
        result.transient = True
        if result.body:
            result.truncated = True
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError, UnicodeError) as exc:
        result.error = _describe(exc, limits)
        result.transient = isinstance(exc, (httpx.TransportError, OSError))
        if result.body:
            result.truncated = True
    result.elapsed_s = time.monotonic() - started
    return result


async def _fetch_into(result: FetchResult, client: httpx.AsyncClient, url: str, limits: FetchLimits) -> None:
    """The fetch itself; fills `result` as it goes so a timeout still reports how far it got."""
    current = url
    seen = {_loop_key(url)}
    for hop in range(limits.max_redirects + 1):
        result.final_url = current
        reason = check_url(current, limits)
        if reason is None:
            reason = await resolve_and_check(httpx.URL(current).raw_host.decode("ascii"), limits)
        if reason is not None:
            result.status = None
            result.error = reason
            return
        # Connection: close - a server that sends more than its Content-Length leaves bytes in a
        # kept-alive connection that the pool would hand to the next request (seen in the tests as
        # "Receive buffer too long"); pages rarely share a host, so reuse buys little.
        headers = {"User-Agent": limits.user_agent, "Connection": "close"}
        request = client.build_request("GET", current, headers=headers)
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            result.status = response.status_code
            result.content_type = response.headers.get("content-type", "").strip()
            reason = _peer_reason(response, limits)
            if reason is not None:
                result.error = reason
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
                result.transient = response.status_code in (408, 429) or response.status_code >= 500
                return
            await _read_body(result, response, limits)
            return
        finally:
            await response.aclose()


async def _read_body(result: FetchResult, response: httpx.Response, limits: FetchLimits) -> None:
    """Stream the body into `result`, stopping at max_bytes whatever the headers claim.

    Counted after content decoding, so a gzip bomb stops at the limit as well.
    """
    too_large = f"too large (>{limits.max_bytes} bytes)"
    declared = response.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > limits.max_bytes:
        result.error = too_large
        result.truncated = True
        return
    buffer = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            room = limits.max_bytes - len(buffer)
            buffer += chunk[:room]
            if len(chunk) > room:
                result.error = too_large
                result.truncated = True
                return
    finally:
        result.body = bytes(buffer)  # also when a timeout cancels us mid-body
