"""A page's deadline is the CPU its reader spends on it, not the clock (daemon/sources/pagework.py): a model that
keeps every core busy must not make a good page look costly; a reader that waits rather than works is still given
up, at WALL_FACTOR times the deadline of wall time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from briefd.daemon.sources.extract import MAX_TRAFILATURA_ELEMENTS
from briefd.daemon.sources.pagework import WALL_FACTOR, PageUnreadable, PageWorkers, cpu_seconds
from tests.sources.test_hostile_pages import linked_paragraphs

COSTLY = linked_paragraphs(MAX_TRAFILATURA_ELEMENTS // 6)  # a third of hostile_pages' /costly: about 0.5 s of CPU
SMALL = b"<html><body><article><p>" + b"A short paragraph of plain text. " * 20 + b"</p></article></body></html>"


@contextlib.contextmanager
def cores_taken(pid: int, running_s: float = 0.04, taken_s: float = 0.16) -> Iterator[None]:
    """Process `pid` let run `running_s` in every `running_s + taken_s` (SIGSTOP, SIGCONT from a thread): its
    share of the CPU when a model server runs a thread on each core, without burning the cores to show it."""
    done = threading.Event()

    def throttle() -> None:
        while not done.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            done.wait(taken_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            done.wait(running_s)

    thread = threading.Thread(target=throttle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_cpu_seconds_are_read_for_a_process_and_none_for_one_that_is_gone() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    after = cpu_seconds(os.getpid())
    assert after is not None and after - before >= 0.2
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_seconds(gone.pid) is None


def test_a_page_within_its_cpu_bound_is_read_however_busy_the_cores_are() -> None:
    async def go() -> tuple[float, float, float, bool]:
        # no wall cap here: the test suite's own load on top of the throttling below may stretch the read past any
        # multiple of its deadline; what is shown is that the CPU bound alone does not give it up
        pool = PageWorkers(size=1, wall_factor=float("inf"))
        try:
            await pool.read(SMALL, "http://lab.test/warm", "text/html")  # the child started and warm
            pid = pool._idle[0].process.pid
            before = cpu_seconds(pid)
            await pool.read(COSTLY, "http://lab.test/alone", "text/html")
            after = cpu_seconds(pid)
            assert before is not None and after is not None
            cost = after - before
            pool.deadline_s = 2 * cost + 0.1  # twice the page's own cost: within its bound, whatever the jitter
            with cores_taken(pid):
                started = time.monotonic()
                page = await pool.read(COSTLY, "http://lab.test/busy", "text/html")
                wall = time.monotonic() - started
            return cost, wall, pool.deadline_s, page is not None
        finally:
            await pool.close()

    cost, wall, deadline, read = asyncio.run(go())
    assert cost >= 0.2, f"the page cost {cost:.2f} s of CPU: too cheap to show anything"
    assert wall > deadline, f"the busy cores did not stretch the read ({wall:.1f} s of wall): nothing is shown"
    assert read, "a page within its CPU bound was given up because the cores were busy"


def test_a_reader_that_waits_rather_than_works_is_given_up_at_the_wall_cap() -> None:
    deadline = 0.25

    async def go() -> tuple[str, float, bool]:
        pool = PageWorkers(size=1, deadline_s=deadline)
        try:
            await pool.read(SMALL, "http://lab.test/warm", "text/html")
            child = pool._idle[0].process
            os.kill(child.pid, signal.SIGSTOP)  # stopped: it spends no CPU, however long it is given
            started = time.monotonic()
            with pytest.raises(PageUnreadable) as given_up:
                await pool.read(SMALL, "http://lab.test/stopped", "text/html")
            waited = time.monotonic() - started
            await asyncio.wait_for(child.wait(), 5)  # killed, stopped or not
            again = await pool.read(SMALL, "http://lab.test/after", "text/html")  # a new reader takes over
            return str(given_up.value), waited, again is not None
        finally:
            await pool.close()

    reason, waited, again = asyncio.run(go())
    assert f"was not done after {WALL_FACTOR * deadline:g} s" in reason and "waited rather than worked" in reason
    assert WALL_FACTOR * deadline <= waited < WALL_FACTOR * deadline + 3.0
    assert again
