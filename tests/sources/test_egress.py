"""The egress policy, enforced where briefd connects, and the per-brief record of where it went.

Real HTTP servers on loopback; the only stand-in is the system resolver (as in
tests/sources/test_fetch.py's rebinding test), so a name can answer a public address without
this machine reaching the internet: every refusal here happens before any connect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from briefd.daemon.sources import egress
from briefd.daemon.sources.egress import NONE_REASON, egress_reason, service_allowed
from briefd.daemon.sources.fetch import FetchLimits, FetchResult, check_url, fetch_page, make_client, resolve_vetted
from briefd.daemon.model.llm import ModelConfig, make_client as make_llm_client
from briefd.daemon.core.settings import Settings
from briefd.daemon.ops.worker import fetch_limits, service_transport

GUARD = Path(__file__).parents[1] / "socket_guard"
PAGE = b"<html><body><p>Steel output rose 4.5% in 2025.</p></body></html>"
PUBLIC = "93.184.216.34"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        if self.path.startswith("/to/"):  # /to/<url>: a redirect anywhere
            self.send_response(302)
            self.send_header("Location", self.path[len("/to/"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, kind = (b'{"models": []}', "application/json") if self.path.startswith("/api/") else (PAGE, "text/html")
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits: list[str] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def key(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    pair = Server(), Server()
    yield pair
    for server in pair:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The system resolver, with some names answered by the test (name -> addresses); records every name asked."""
    answers: dict[str, list[str]] = {"asked": []}
    real = socket.getaddrinfo

    def resolver(host: str | bytes | None, port: str | int | None, family: int = 0, type: int = 0,
                 proto: int = 0, flags: int = 0) -> list:  # type: ignore[type-arg]
        name = host.decode() if isinstance(host, bytes) else str(host)
        answers["asked"].append(name)
        if name not in answers:
            return real(host, port, family, type, proto, flags)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port or 0)))
                for a in answers[name]]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return answers


PRIVATE = FetchLimits(egress="private", timeout_s=5)
NONE = FetchLimits(egress="none", timeout_s=5)


def fetch(url: str, limits: FetchLimits) -> tuple[FetchResult, dict[str, object]]:
    """Fetch `url` as a brief would, and return what the brief's egress log says about it."""

    async def go() -> tuple[FetchResult, dict[str, object]]:
        log = egress.start(limits.egress)
        async with make_client(limits) as client:
            result = await fetch_page(client, url, limits)
        return result, log.block()

    return asyncio.run(go())


def reason_for(host: str, limits: FetchLimits) -> str | None:
    return asyncio.run(resolve_vetted(host, limits)).reason


# --------------------------------------------------------------------------- the policy, as a table


@pytest.mark.parametrize(("policy", "allowed", "host", "ip", "refused"), [
    ("open", (), "example.org", PUBLIC, False),
    ("private", (), "localhost", "127.0.0.1", False),
    ("private", (), "nas.lan", "10.1.2.3", False),
    ("private", (), "nas.lan", "192.168.1.20", False),
    ("private", (), "ula.lan", "fd12:3456::1", False),
    ("private", (), "tailnet", "100.101.102.103", False),  # CGNAT: a carrier or overlay network, not the internet
    ("private", (), "example.org", PUBLIC, True),
    ("private", (), "mapped", f"::ffff:{PUBLIC}", True),  # judged by the IPv4 address it carries
    ("private", (), "v6", "2606:2800:220:1::1", True),
    ("private", ("example.org",), "Example.org.", PUBLIC, False),
    ("private", ("example.org",), "www.example.org", PUBLIC, True),  # a listed name does not allow its subdomains
    ("private", (PUBLIC,), "anything.test", PUBLIC, False),
    ("none", (), "localhost", "127.0.0.1", True),
    ("none", ("127.0.0.1",), "127.0.0.1", "127.0.0.1", False),
    ("none", ("gpu-box",), "other-box", "10.0.0.9", True),
])
def test_the_policy_decides_by_address_and_by_the_name_it_was_reached_by(
        policy: str, allowed: tuple[str, ...], host: str, ip: str, refused: bool) -> None:
    reason = egress_reason(policy, allowed, host, ipaddress.ip_address(ip))
    assert (reason is not None) == refused, reason
    if refused:
        assert reason is not None and reason.startswith(egress.REFUSED_PREFIX + policy)


def test_a_public_address_is_refused_under_private_with_the_fix_in_the_reason() -> None:
    assert check_url(f"http://{PUBLIC}/page", PRIVATE) == (
        f"refused by egress = private: public address {PUBLIC}; list the host in egress_hosts or set egress = open")
    assert check_url(f"http://{PUBLIC}/page", FetchLimits()) is None  # open: today's behaviour


def test_a_name_that_resolves_to_a_public_address_is_refused_at_resolve_time(dns: dict[str, list[str]]) -> None:
    dns["example.org"] = [PUBLIC]
    assert check_url("http://example.org/page", PRIVATE) is None  # the URL text says nothing...
    result, block = fetch("http://example.org/page", PRIVATE)  # ...the address does
    assert result.error == (f"refused by egress = private: public address {PUBLIC} (for example.org); "
                            "list the host in egress_hosts or set egress = open")
    assert result.status is None
    assert block == {"policy": "private", "hosts": [], "refused": [{"host": "example.org", "attempts": 1}]}


def test_a_name_with_a_private_and_a_public_address_is_refused(dns: dict[str, list[str]]) -> None:
    """DNS rebinding's other face: one answer private, one public; connecting could reach either."""
    dns["split.test"] = ["127.0.0.1", PUBLIC]
    assert "public address" in (reason_for("split.test", PRIVATE) or "")


def test_a_redirect_to_a_name_that_resolves_public_is_refused_at_that_hop(
        servers: tuple[Server, Server], dns: dict[str, list[str]]) -> None:
    web, _ = servers
    dns["cdn.example.org"] = [PUBLIC]
    result, block = fetch(f"{web.origin}/to/http://cdn.example.org/file", PRIVATE)
    assert result.error is not None and result.error.startswith("refused by egress = private: public address")
    assert result.final_url == "http://cdn.example.org/file"
    assert block["hosts"] == [{"host": web.key, "requests": 1}]
    assert block["refused"] == [{"host": "cdn.example.org", "attempts": 1}]


def test_loopback_pages_are_fetched_under_private(servers: tuple[Server, Server]) -> None:
    web, _ = servers
    result, block = fetch(f"{web.origin}/page", PRIVATE)
    assert result.ok, result.error
    assert result.body == PAGE
    assert block == {"policy": "private", "hosts": [{"host": web.key, "requests": 1}], "refused": []}


def test_egress_hosts_lets_a_listed_public_host_through(dns: dict[str, list[str]]) -> None:
    dns["search.example.org"] = [PUBLIC]
    listed = FetchLimits(egress="private", egress_hosts=("search.example.org",))
    resolved = asyncio.run(resolve_vetted("search.example.org", listed))
    assert resolved.reason is None and [str(a) for a in resolved.addresses] == [PUBLIC]
    assert check_url(f"http://{PUBLIC}/", FetchLimits(egress="private", egress_hosts=(PUBLIC,))) is None
    dns["other.example.org"] = [PUBLIC]
    assert "public address" in (reason_for("other.example.org", listed) or "")  # only the listed name


def test_egress_hosts_never_opens_the_metadata_service() -> None:
    listed = FetchLimits(egress="private", egress_hosts=("169.254.169.254",))
    assert check_url("http://169.254.169.254/latest/meta-data", listed) == "refused: link-local address 169.254.169.254"


def test_none_refuses_every_page_even_on_loopback_and_asks_no_resolver(
        servers: tuple[Server, Server], dns: dict[str, list[str]]) -> None:
    web, _ = servers
    for url in (f"{web.origin}/page", "http://localhost/page", f"http://{PUBLIC}/"):
        result, block = fetch(url, NONE)
        assert result.error == NONE_REASON == "refused by egress = none: briefd contacts only the model server"
        assert block["hosts"] == []
    assert web.hits == []
    assert dns["asked"] == []  # not even a DNS query left


# --------------------------------------------------------------------------- counting, per brief


def test_every_hop_is_counted_by_host_and_port_in_the_brief_that_made_it(servers: tuple[Server, Server]) -> None:
    web, other = servers

    async def go() -> tuple[dict[str, object], dict[str, object]]:
        limits = FetchLimits(timeout_s=5)
        async with make_client(limits) as client:
            async def brief(url: str) -> dict[str, object]:
                log = egress.start("open")
                # tasks made inside the brief count into its log (they inherit the context)
                await asyncio.gather(*(asyncio.create_task(fetch_page(client, url, limits)) for _ in range(2)))
                return log.block()

            outside = await fetch_page(client, f"{web.origin}/page", limits)  # outside any brief: counted nowhere
            assert outside.ok
            return await asyncio.gather(brief(f"{web.origin}/to/{other.origin}/page"), brief(f"{other.origin}/page"))

    first, second = asyncio.run(go())
    assert first["hosts"] == sorted([{"host": web.key, "requests": 2}, {"host": other.key, "requests": 2}],
                                    key=lambda h: str(h["host"]))
    assert second["hosts"] == [{"host": other.key, "requests": 2}]


def test_a_resumed_brief_keeps_the_hosts_of_its_earlier_attempt() -> None:
    earlier = egress.EgressLog("none")
    earlier.count("127.0.0.1:11434")
    log = egress.start("none", earlier=json.loads(json.dumps(earlier.snapshot())))  # as a checkpoint stores it
    log.count("127.0.0.1:11434")
    assert log.block()["hosts"] == [{"host": "127.0.0.1:11434", "requests": 2}]


def test_host_keys_name_the_port_only_when_it_is_not_the_default() -> None:
    assert egress.host_key(httpx.URL("https://example.org/a")) == "example.org"
    assert egress.host_key(httpx.URL("http://example.org:80/a")) == "example.org"
    assert egress.host_key(httpx.URL("http://127.0.0.1:8888/search")) == "127.0.0.1:8888"
    assert egress.host_key(httpx.URL("http://[::1]:11434/api")) == "[::1]:11434"


# --------------------------------------------------------------------------- the services' clients


def settings_for(policy: str, searxng: str, ollama: str, hosts: tuple[str, ...] = ()) -> Settings:
    return Settings(egress=policy, egress_hosts=hosts, searxng_url=searxng, ollama_host=ollama)


def search_client(settings: Settings) -> httpx.AsyncClient:
    return httpx.AsyncClient(trust_env=False, timeout=5,
                             transport=service_transport(settings, settings.searxng_url, model=False))


def test_under_none_the_searxng_client_connects_nowhere(servers: tuple[Server, Server],
                                                       dns: dict[str, list[str]]) -> None:
    searxng, _ = servers
    settings = settings_for("none", searxng.origin, "http://127.0.0.1:11434")

    async def go() -> dict[str, object]:
        log = egress.start("none")
        async with search_client(settings) as client:
            with pytest.raises(httpx.ConnectError, match="refused by egress = none: briefd contacts only the model"):
                await client.get(f"{searxng.origin}/search?q=x&format=json")
        return log.block()

    block = asyncio.run(go())
    assert searxng.hits == [] and dns["asked"] == []
    assert block == {"policy": "none", "hosts": [], "refused": [{"host": searxng.key, "attempts": 1}]}


def test_the_configured_searxng_is_allowed_under_private_whatever_its_address() -> None:
    assert service_allowed("private", ("docs.example.org",), "https://search.example.org", model=False) == (
        "docs.example.org", "search.example.org")
    assert service_allowed("none", ("docs.example.org",), "https://search.example.org", model=False) == ()
    assert service_allowed("none", ("docs.example.org",), "http://[::1]:11434", model=True) == ("::1",)


def test_under_private_the_searxng_client_is_counted_and_a_public_redirect_refused(
        servers: tuple[Server, Server], dns: dict[str, list[str]]) -> None:
    searxng, _ = servers
    dns["tracker.example.com"] = [PUBLIC]
    settings = settings_for("private", searxng.origin, "http://127.0.0.1:11434")

    async def go() -> dict[str, object]:
        log = egress.start("private")
        async with search_client(settings) as client:
            assert (await client.get(f"{searxng.origin}/search")).status_code == 200
            with pytest.raises(httpx.ConnectError, match=f"public address {PUBLIC} \\(for tracker.example.com\\)"):
                await client.get(f"{searxng.origin}/to/http://tracker.example.com/x", follow_redirects=True)
        return log.block()

    block = asyncio.run(go())
    assert block["hosts"] == [{"host": searxng.key, "requests": 2}]
    assert block["refused"] == [{"host": "tracker.example.com", "attempts": 1}]


def test_under_none_the_model_server_is_reached_and_counted_but_nothing_it_redirects_to(
        servers: tuple[Server, Server]) -> None:
    """The policy goes by host: the model server's host is allowed (any port on it), another host is not."""
    model, elsewhere = servers
    settings = settings_for("none", "http://127.0.0.1:8888", model.origin)
    cfg = ModelConfig(host=model.origin, model="m", num_ctx=4096, num_predict=256, timeout_s=5, temperature=0, seed=1)
    client = make_llm_client(cfg, service_transport(settings, model.origin, model=True))

    async def go() -> dict[str, object]:
        log = egress.start("none")
        ollama_client = client.client  # the official client inside llm's OllamaChat
        listed = await ollama_client.list()  # GET /api/tags on the model server
        assert listed.models == []
        inner = ollama_client._client
        with pytest.raises(httpx.ConnectError, match="refused by egress = none"):
            await inner.get(f"/to/http://localhost:{port}/api/tags")  # the model server sends briefd elsewhere
        return log.block()

    port = elsewhere.server_address[1]
    block = asyncio.run(go())
    assert elsewhere.hits == []
    assert block["hosts"] == [{"host": model.key, "requests": 2}]
    assert block["refused"] == [{"host": f"localhost:{port}", "attempts": 1}]


def test_the_worker_builds_fetch_limits_with_the_policy() -> None:
    limits = fetch_limits(Settings(egress="private", egress_hosts=("search.example.org",)))
    assert (limits.egress, limits.egress_hosts) == ("private", ("search.example.org",))


# --------------------------------------------------------------------------- what briefd says about it


def test_check_and_method_lines_name_the_policy_and_every_host() -> None:
    assert egress.check_line("none", (), "http://127.0.0.1:8888", "http://127.0.0.1:11434") == (
        "egress = none: briefd contacts only the model server (127.0.0.1:11434); "
        "SearXNG and web pages are never contacted (library and archives only)")
    log = egress.EgressLog("none")
    for _ in range(12):
        log.count("127.0.0.1:11434")
    block = log.block(egress.service_roles("http://127.0.0.1:8888", "http://127.0.0.1:11434"))
    assert block["hosts"] == [{"host": "127.0.0.1:11434", "requests": 12, "role": "model server"}]
    assert egress.method_line(block) == (
        "Network (egress = none): hosts contacted, 127.0.0.1:11434 (model server): 12 requests. "
        "No other host was contacted.")


# --------------------------------------------------------------------------- the socket guard


GUARDED = """
import socket, sys
def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, port))
        return "connected"
    except PermissionError as exc:
        return f"guard: {exc}"
    except OSError as exc:
        return f"os: {type(exc).__name__}"
    finally:
        s.close()
print(connect("127.0.0.1", int(sys.argv[1])))
print(connect("192.0.2.1", 80))
print(connect("10.255.255.1", 80))
"""


def test_the_socket_guard_lets_loopback_through_and_fails_any_other_connect(
        servers: tuple[Server, Server], tmp_path: Path) -> None:
    web, _ = servers
    log = tmp_path / "connects.ndjson"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(GUARD), os.environ.get("PYTHONPATH", "")]),
           "BRIEFD_SOCKET_GUARD_LOG": str(log)}
    done = subprocess.run([sys.executable, "-c", GUARDED, str(web.server_address[1])], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "connected"
    assert lines[1] == "guard: socket guard: connect to 192.0.2.1:80 refused (not a loopback address)"
    assert lines[2].startswith("guard: ")
    connects = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["host"], c["port"], c["allowed"]) for c in connects if c["event"] == "connect"] == [
        ("127.0.0.1", web.server_address[1], True), ("192.0.2.1", 80, False), ("10.255.255.1", 80, False)]


def test_every_model_server_is_named_in_the_roles_and_the_check_line() -> None:
    """Several model servers (ollama_hosts): each is a "model server" in report.json's egress roles."""
    hosts = ("http://127.0.0.1:11434", "http://gpu-2:11434")
    roles = egress.service_roles("http://127.0.0.1:8888", hosts)
    assert roles == {"127.0.0.1:8888": "SearXNG", "127.0.0.1:11434": "model server", "gpu-2:11434": "model server"}
    assert "model servers (127.0.0.1:11434, gpu-2:11434)" in egress.check_line("none", (), "http://127.0.0.1:8888",
                                                                               hosts)
