"""A child process started from the event loop and cancelled while it starts: the cancel ends promptly and no
child is left (daemon/core/spawn.py). With `asyncio.create_subprocess_exec` itself, Python 3.11 sometimes waits
for ever in `base_subprocess._wait` under such a cancel: a brief cut off while a page reader started hung its
process (1 in 180 briefs under load, and a `make test` run). A plain cancel does not hang the raw call (300
tries here): the hang needs the loop's final cancel, which reaches the pipe-connecting task too (the last test
but one, which hangs on the old code). The first tests hold the contract: the cancel is raised at once, and
the child it made does not outlive it."""

from __future__ import annotations

import asyncio
import sys
import threading

import psutil
import pytest

from briefd.daemon.core.spawn import spawn
from briefd.daemon.sources import pagework

MARK = "briefd-spawn-test-child"


def marked_children() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True)
            if MARK in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE]


async def cancelled_as_it_starts(start: "asyncio.Task[object]") -> None:
    await asyncio.sleep(0)  # the start has made the process and waits for its pipes to connect
    assert not start.done(), "the start ended before the cancel: the test's premise does not hold"
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(start, 10)  # a hang is a TimeoutError here


@pytest.mark.parametrize("yields", [0, 1, 2, 3])
def test_a_start_cancelled_before_its_pipes_connect_ends_at_once_and_leaves_no_child(yields: int) -> None:
    async def go() -> None:
        start = asyncio.create_task(spawn(sys.executable, "-c", "import time; time.sleep(60)", MARK,
                                          stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE))
        for _ in range(yields):
            await asyncio.sleep(0)
        await cancelled_as_it_starts(start)
    asyncio.run(go())
    assert marked_children() == []


def test_a_page_reader_cancelled_as_it_starts_ends_at_once_and_leaves_no_child() -> None:
    before = {child.pid for child in psutil.Process().children()}

    async def go() -> None:
        await cancelled_as_it_starts(asyncio.create_task(pagework._start_child()))
    asyncio.run(go())
    left = [child for child in psutil.Process().children() if child.pid not in before
            and child.status() != psutil.STATUS_ZOMBIE and "pagework" in " ".join(child.cmdline())]
    assert left == []


def test_a_start_not_cancelled_gives_the_process() -> None:
    async def go() -> int:
        process = await spawn(sys.executable, "-c", "print('up')", stdout=asyncio.subprocess.PIPE)
        out, _ = await process.communicate()
        assert out.strip() == b"up"
        return await process.wait()
    assert asyncio.run(go()) == 0


def test_a_loop_that_ends_while_a_page_reader_starts_ends_and_leaves_no_child() -> None:
    """The hang itself: the pool closed, and the loop ended (asyncio.run cancels every task, the pipes'
    connecting one among them) while a read was making its child. `close` waits for the making, starts no
    more, and the read's own cancel stops the child."""
    before = {child.pid for child in psutil.Process().children()}
    ended: list[bool] = []

    async def go() -> None:
        pool = pagework.PageWorkers()
        asyncio.create_task(pool.read(b"<html><body><p>A page.</p></body></html>", "http://x.test/", "text/html"))
        await asyncio.sleep(0)  # the read is making its child
        await pool.close()  # and the loop ends with the read under way

    run = threading.Thread(target=lambda: ended.append(bool(asyncio.run(go()) or True)), daemon=True)
    run.start()
    run.join(60)
    assert ended == [True], "asyncio.run never ended: a child's creation was cut off by the loop's end"
    left = [child for child in psutil.Process().children() if child.pid not in before
            and child.status() != psutil.STATUS_ZOMBIE and "pagework" in " ".join(child.cmdline())]
    assert left == []


def test_a_closed_pool_starts_no_child() -> None:
    async def go() -> None:
        pool = pagework.PageWorkers()
        await pool.close()
        pool.warm_soon()
        with pytest.raises(pagework.PageUnreadable, match="closed"):
            await pool.read(b"<p>x</p>", "http://x.test/", "text/html")
    asyncio.run(go())
