"""The `on_finish` command: tell someone that a brief ended (mail, chat, a ticket inside the network).

The operator gives a command as its words (argv: `on_finish = ["/usr/local/bin/notify", "ops"]`);
briefd runs it when a brief ends (done, failed, cancelled) with the brief's id, status, whether
its report found an answer (BRIEFD_ANSWER_FOUND: `yes` or `no`, report.json's `answer.found`: a
notice that says "done" for an estimate left at its prior misleads), report path and outbox folder
in its environment, never through a shell and never with brief text on
its command line, so nothing a brief or a page says can become a command. It inherits the
daemon's environment (PATH, HOME, LANG, a proxy...) less what is the daemon's alone: every secret
setting's variable (BRIEFD_SERVE_TOKEN: settings.secret_variables) and systemd's notify protocol
(NOTIFY_SOCKET, WATCHDOG_*: a child that pinged for the daemon would hide a stuck one).

It runs off the event loop (an asyncio subprocess) under `on_finish_timeout_s`, judged by its own
exit (what it leaves running in the background is its business, and lives on); whatever happens
to it (not found, non-zero exit, killed with its process group at the limit) is logged with its
exit code and the tail of its stderr, and never fails the brief or stops the daemon: the report
is already written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..rules.numbers import number_text
from .sdnotify import NOTIFY_VARIABLES
from ..core.settings import secret_variables

log = logging.getLogger("briefd")

TAIL_BYTES = 2000  # the end of the command's stderr kept for the log (its start is usually the least useful)


def answer_found(report: Mapping[str, Any]) -> bool:
    """Whether a report found an answer (report.json's `answer.found`; a report without one: no)."""
    answer = report.get("answer")
    return isinstance(answer, Mapping) and answer.get("found") is True


@dataclass(frozen=True)
class Ended:
    """What the command is told about a brief that ended."""

    brief_id: str
    status: str        # done | failed | cancelled
    outdir: Path
    answer_found: bool = False  # the report's answer.found: a run that ended without one found none

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The daemon's environment, less its secrets and systemd's notify variables, plus the five
        BRIEFD_ variables docs/running.md documents."""
        withheld = secret_variables() | set(NOTIFY_VARIABLES)
        kept = {name: value for name, value in base.items() if name not in withheld}
        return {**kept, "BRIEFD_ID": self.brief_id, "BRIEFD_STATUS": self.status,
                "BRIEFD_ANSWER_FOUND": "yes" if self.answer_found else "no",
                "BRIEFD_REPORT": str(self.outdir / "report.json"), "BRIEFD_OUTDIR": str(self.outdir)}


def outcome(argv: tuple[str, ...], ended: Ended, code: int | None, stderr: bytes, timeout_s: float) -> str | None:
    """The log line for a command that did not succeed (None: it did). `code` None: killed at the limit."""
    tail = stderr[-TAIL_BYTES:].decode("utf-8", "replace").strip()
    said = f"; its stderr ends: {tail}" if tail else ""
    if code is None:
        return (f"{ended.brief_id}: on_finish {argv[0]} ran past on_finish_timeout_s ({number_text(timeout_s)} s) "
                f"and was killed{said}")
    if code != 0:
        return f"{ended.brief_id}: on_finish {argv[0]} exited {code}{said}"
    return None


def not_started(argv: tuple[str, ...], ended: Ended, exc: OSError) -> str:
    return (f"{ended.brief_id}: on_finish could not start {argv[0]}: {exc.strerror or exc}; set on_finish to a "
            f"program the daemon's user can run (an absolute path is safest)")


async def run(argv: tuple[str, ...], ended: Ended, timeout_s: float) -> int | None:
    """Run the command for one ended brief; its exit code (None: not started or killed). Never raises
    for the command's sake: every failure is logged at WARNING.

    Its exit alone decides (`proc.wait`): a command that leaves work in the background (`curl ... &`)
    has succeeded when it exits 0, though its child still holds stderr open. So stderr goes to an
    unlinked temporary file, not a pipe whose end-of-file would wait for that child (and whose
    closing would kill it with SIGPIPE); its tail is read once the command exits."""
    with tempfile.TemporaryFile() as stderr:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr, env=ended.environ(os.environ), start_new_session=True)
        except OSError as exc:
            log.warning("%s", not_started(argv, ended, exc))
            return None
        code: int | None
        try:
            code = await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            code = None
        except asyncio.CancelledError:  # the daemon stops: a command still running does not outlive it
            _kill_group(proc.pid)
            raise
        _say(argv, ended, code, _tail(stderr), timeout_s)
    return code


def run_now(argv: tuple[str, ...], ended: Ended, timeout_s: float) -> int | None:
    """The same for a command-line caller without an event loop (`briefd cancel` of a queued brief):
    decided by the command's exit alone, its process group killed only past the limit (as `run`)."""
    with tempfile.TemporaryFile() as stderr:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    env=ended.environ(os.environ), start_new_session=True)
        except OSError as exc:
            log.warning("%s", not_started(argv, ended, exc))
            return None
        code: int | None
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            code = None
        _say(argv, ended, code, _tail(stderr), timeout_s)
    return code


def _tail(stderr: IO[bytes]) -> bytes:
    """The last TAIL_BYTES the command (or a child it left behind, so far) wrote to its stderr file."""
    size = stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, size - TAIL_BYTES))
    return stderr.read(TAIL_BYTES)


def _say(argv: tuple[str, ...], ended: Ended, code: int | None, stderr: bytes, timeout_s: float) -> None:
    problem = outcome(argv, ended, code, stderr, timeout_s)
    if problem is not None:
        log.warning("%s", problem)
    else:
        log.info("%s: on_finish %s done", ended.brief_id, argv[0])


def _kill_group(pid: int) -> None:
    """The command and whatever it started (start_new_session: its own process group)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
