"""A socket guard for end-to-end tests: any connect to a non-loopback address fails, and every one is recorded.

Put this folder first on PYTHONPATH of a process (the daemon, and so its page-reading
children, which inherit the environment) and Python imports it at start-up (`site`
imports `sitecustomize`). It installs an audit hook (PEP 578) on "socket.connect":
- a TCP/UDP connect to a loopback address (or the name "localhost") goes ahead;
- any other address raises PermissionError inside `connect`, before the kernel sees it,
  so no packet leaves, whatever the code above it meant to do;
- with BRIEFD_SOCKET_GUARD_LOG set, each connect is appended to that file as one JSON
  line: {"event": "connect", "host", "port", "allowed", "pid"}. Name lookups
  ("socket.getaddrinfo") are recorded too ({"event": "getaddrinfo", "host", "pid"}),
  allowed, since a DNS query is traffic an auditor may want to see; libc's own
  resolver traffic is below Python and cannot be seen here.

Unix-domain sockets are local by nature and allowed, unrecorded. An audit hook cannot
be removed: the guard lasts for the life of the process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
from typing import Any

LOG_ENV = "BRIEFD_SOCKET_GUARD_LOG"


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = (json.dumps({**entry, "pid": os.getpid()}) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)  # one write per line, O_APPEND: lines from several processes never interleave
    finally:
        os.close(fd)


def _loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # any other name: the guard does not resolve it to find out


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getaddrinfo":
        host = args[0]
        _record({"event": "getaddrinfo", "host": host.decode() if isinstance(host, bytes) else host})
        return
    if event != "socket.connect":
        return
    sock, address = args[0], args[1]
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return
    host, port = str(address[0]), int(address[1])
    allowed = _loopback(host)
    _record({"event": "connect", "host": host, "port": port, "allowed": allowed})
    if not allowed:
        raise PermissionError(f"socket guard: connect to {host}:{port} refused (not a loopback address)")


sys.addaudithook(_hook)
