"""The `on_finish` command: tell someone that a brief ended (mail, chat, a ticket inside the network).

The operator gives a command as its words (argv: `on_finish = ["/usr/local/bin/notify", "ops"]`);
briefd runs it when a brief ends (done, failed, cancelled) with the brief's id, status, report
path and outbox folder in its environment, never through a shell and never with brief text on
its command line, so nothing a brief or a page says can become a command. It inherits the
daemon's environment (PATH, HOME, LANG, a proxy...) less what is the daemon's alone: every secret
setting's variable (BRIEFD_SERVE_TOKEN: settings.secret_variables) and systemd's notify protocol
(NOTIFY_SOCKET, WATCHDOG_*: a child that pinged for the daemon would hide a stuck one). It runs off the
event loop (an asyncio subprocess) under `on_finish_timeout_s`; whatever happens to it (not
found, non-zero exit, killed at the limit) is logged with its exit code and the tail of its
stderr, and never fails the brief or stops the daemon: the report is already written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .sdnotify import NOTIFY_VARIABLES
from .settings import secret_variables

log = logging.getLogger("briefd")

TAIL_BYTES = 2000  # the end of the command's stderr kept for the log (its start is usually the least useful)


@dataclass(frozen=True)
class Ended:
    """What the command is told about a brief that ended."""

    brief_id: str
    status: str        # done | failed | cancelled
    outdir: Path

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The daemon's environment, less its secrets and systemd's notify variables, plus the four
        BRIEFD_ variables the README documents."""
        withheld = secret_variables() | set(NOTIFY_VARIABLES)
        kept = {name: value for name, value in base.items() if name not in withheld}
        return {**kept, "BRIEFD_ID": self.brief_id, "BRIEFD_STATUS": self.status,
                "BRIEFD_REPORT": str(self.outdir / "report.json"), "BRIEFD_OUTDIR": str(self.outdir)}


def outcome(argv: tuple[str, ...], ended: Ended, code: int | None, stderr: bytes, timeout_s: float) -> str | None:
    """The log line for a command that did not succeed (None: it did). `code` None: killed at the limit."""
    tail = stderr[-TAIL_BYTES:].decode("utf-8", "replace").strip()
    said = f"; its stderr ends: {tail}" if tail else ""
    if code is None:
        return (f"{ended.brief_id}: on_finish {argv[0]} ran past on_finish_timeout_s ({timeout_s:g} s) "
                f"and was killed{said}")
    if code != 0:
        return f"{ended.brief_id}: on_finish {argv[0]} exited {code}{said}"
    return None


def not_started(argv: tuple[str, ...], ended: Ended, exc: OSError) -> str:
    return (f"{ended.brief_id}: on_finish could not start {argv[0]}: {exc.strerror or exc}; set on_finish to a "
            f"program the daemon's user can run (an absolute path is safest)")


async def run(argv: tuple[str, ...], ended: Ended, timeout_s: float) -> int | None:
    """Run the command for one ended brief; its exit code (None: not started or killed). Never raises
    for the command's sake: every failure is logged at WARNING."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=ended.environ(os.environ), start_new_session=True)
    except OSError as exc:
        log.warning("%s", not_started(argv, ended, exc))
        return None
    assert proc.stderr is not None
    tail = bytearray()

    async def keep_tail() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            tail.extend(chunk)
            del tail[:-TAIL_BYTES]

    code: int | None
    try:
        await asyncio.wait_for(asyncio.gather(keep_tail(), proc.wait()), timeout_s)
        code = proc.returncode
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        code = None
    except asyncio.CancelledError:  # the daemon stops: the command does not outlive it
        _kill_group(proc.pid)
        raise
    problem = outcome(argv, ended, code, bytes(tail), timeout_s)
    if problem is not None:
        log.warning("%s", problem)
    else:
        log.info("%s: on_finish %s done", ended.brief_id, argv[0])
    return code


def run_now(argv: tuple[str, ...], ended: Ended, timeout_s: float) -> int | None:
    """The same for a command-line caller without an event loop (`briefd cancel` of a queued brief)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=ended.environ(os.environ), timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        log.warning("%s", outcome(argv, ended, None, exc.stderr or b"", timeout_s))
        return None
    except OSError as exc:
        log.warning("%s", not_started(argv, ended, exc))
        return None
    problem = outcome(argv, ended, done.returncode, done.stderr, timeout_s)
    if problem is not None:
        log.warning("%s", problem)
    return done.returncode


def _kill_group(pid: int) -> None:
    """The command and whatever it started (start_new_session: its own process group)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
