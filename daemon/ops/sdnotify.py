"""systemd's notify protocol (sd_notify(3)), with the standard library only.

Under `Type=notify` systemd waits for READY=1 before it counts the service as started, shows
the last STATUS= line in `systemctl status`, restarts the service when WATCHDOG=1 pings stop
for `WatchdogSec=`, and knows a stop is under way from STOPPING=1. Each message is one
datagram of `KEY=value` lines sent to the AF_UNIX socket named by $NOTIFY_SOCKET: a path, or
an abstract socket written with a leading '@' (a NUL byte on the wire).

Outside systemd ($NOTIFY_SOCKET unset) every call does nothing, and a failing send is never
the daemon's failure (it is logged at debug): telling the supervisor is a courtesy, not work.
libsystemd is not needed, and no package that wraps it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("briefd")

# What systemd hands the daemon for this protocol: the daemon's alone (a child that inherited them
# could send READY, STATUS or WATCHDOG for it), so the commands it starts never get them (daemon.onfinish).
NOTIFY_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def socket_address(value: str) -> str | bytes | None:
    """$NOTIFY_SOCKET as an address for sendto: '@name' is the abstract socket '\\0name'; a
    path is used as it is; anything else (empty, relative) is not a notify socket (None)."""
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Seconds between WATCHDOG=1 pings: half of $WATCHDOG_USEC, as sd_watchdog_enabled(3)
    advises; None when no watchdog is asked of this process ($WATCHDOG_PID names another)."""
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(usec) / 1_000_000 / 2


@dataclass
class Notifier:
    """Sends notify messages to one socket (None: not under systemd, every send is a no-op)."""

    address: str | bytes | None
    watchdog_s: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if env is None else env
        return cls(socket_address(env.get("NOTIFY_SOCKET", "")), watchdog_interval(env, os.getpid()))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: str) -> bool:
        """One datagram of KEY=value lines (ready="1" → READY=1); True when it was sent."""
        if self.address is None:
            return False
        message = "\n".join(f"{key.upper()}={value}" for key, value in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.setblocking(False)  # a full receive queue must never stall the event loop
                sock.sendto(message, self.address)
        except OSError as exc:
            log.debug("systemd notify (%s) not sent: %s", message[:80], exc)
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send(ready="1", status=status, mainpid=str(os.getpid()))

    def status(self, status: str) -> bool:
        return self.send(status=status)

    def watchdog(self) -> bool:
        return self.send(watchdog="1")

    def stopping(self, status: str) -> bool:
        return self.send(stopping="1", status=status)
