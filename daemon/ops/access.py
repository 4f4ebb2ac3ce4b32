"""Who may call `briefd serve`, as set: the token and the Host names the API answers to, read from the settings.

Why its own module: the CLI checks the rule before it starts anything (`briefd run` with `serve = true` refuses a
configuration the API would refuse), the API's guard enforces it on every request (api.py), and the server
start-up says it (serve.py); none of them needs the others' code for it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..core.errors import BriefdError
from ..core.files import readable_by_others, secret_line
from ..core.settings import SERVE_TOKEN_MIN_CHARS, Settings


class ServeError(BriefdError, ValueError):
    """The API cannot start as configured: the message names the setting and the fix.

    `exit_code` is the CLI's: 2 for a configuration to correct, 3 for a port that cannot be had.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Access:
    """Who may call: the token (None: loopback without one) and the Host names this server answers to."""

    token: str | None
    hosts: frozenset[str]


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) stays on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(settings: Settings) -> str | None:
    """The bearer token from serve_token, else the first line of serve_token_file; None when neither is set."""
    if settings.serve_token:
        return settings.serve_token
    if settings.serve_token_file is None:
        return None
    path = settings.serve_token_file
    try:
        token = secret_line(path, "serve_token_file", "the token")
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    if len(token) < SERVE_TOKEN_MIN_CHARS or " " in token:
        raise ServeError(f"serve_token_file {path}: its first line must be a token of at least "
                         f"{SERVE_TOKEN_MIN_CHARS} characters without spaces; make one with "
                         "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE")
    return token


def access_for(settings: Settings) -> Access:
    """The access rule for this configuration, or ServeError: anywhere but loopback needs a token.

    `hosts` are the Host names a request may carry (lower case, with and without the port): the
    address it listens on (and loopback's names when that is loopback), and serve_hosts, a
    reverse proxy's public names. Listening on every address (0.0.0.0, ::) with no serve_hosts
    answers to any Host: the token guards it.
    """
    token = read_token(settings)
    host = settings.serve_host
    if token is None and not is_loopback(host):
        raise ServeError(f"serve_host {host} is reachable from other machines, and no token is set: set "
                         "serve_token_file (a file whose first line is the token; BRIEFD_SERVE_TOKEN_FILE) or "
                         "serve_token, or listen on loopback (serve_host = \"127.0.0.1\")")
    port = settings.serve_port
    wildcard = host in ("0.0.0.0", "::")
    bare = set(settings.serve_hosts) | ({"127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else set())
    if not wildcard:
        bare.add(f"[{host}]" if ":" in host else host)
    elif not settings.serve_hosts:
        return Access(token=token, hosts=frozenset())
    names = bare | {f"{name}:{port}" for name in bare}
    return Access(token=token, hosts=frozenset(name.lower() for name in names))


def token_file_warning(settings: Settings) -> str | None:
    """A warning when serve_token_file can be read by others than its owner (docs/http-api.md says chmod 600)."""
    return None if settings.serve_token else readable_by_others(settings.serve_token_file, "serve_token_file")


def start_line(settings: Settings, access: Access) -> str:
    """What `briefd serve` says when it starts: where, and who may call."""
    host = f"[{settings.serve_host}]" if ":" in settings.serve_host else settings.serve_host
    who = ("every request needs Authorization: Bearer <serve_token>" if access.token
           else "loopback only, no token")
    return f"HTTP API and web page on http://{host}:{settings.serve_port}/ ({who})"
