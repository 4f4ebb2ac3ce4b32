"""Starting a child process from the event loop without Python 3.11's hang at a loop's end, and stopping one.

`asyncio.create_subprocess_exec` with pipes makes the process, then connects its pipes in a task of its own
(`_connect_pipes`). Cancelled meanwhile, it kills the child and waits for its exit to be reported, which Python
3.11 does only once every pipe has disconnected. A plain cancel lets `_connect_pipes` finish and all is well;
but `asyncio.run`'s last step cancels every task at once, `_connect_pipes` among them, a pipe then never
connects, and the wait never ends: the process hangs at its exit. A brief cut off while a page reader was
starting did that (one `make test` run; then 1 hang in 180 briefs, three at a time on a 2-core box, in
`base_subprocess._wait` under `_make_subprocess_transport`; a shield alone, which that final cancel reaches
too, hung 3 runs in 20 briefs; with this module, 240 briefs and no hang).

So no creation may be under way when a loop ends: each runs as its own task (`spawn`: a cancel of the caller
waits for it, milliseconds, and stops the child it made), and the owner of the children waits for those under
way (`creations_done`) when it closes, before the loop's end, and starts no more.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["creations_done", "spawn", "stop_process"]

_creating: set[asyncio.Task[asyncio.subprocess.Process]] = set()


async def spawn(program: str, *args: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec(program, *args, **kwargs)` as a task the caller's cancel does not
    reach: the cancel waits for the process to exist, stops it (`stop_process`), then is raised."""
    creating = asyncio.ensure_future(asyncio.create_subprocess_exec(program, *args, **kwargs))
    _creating.add(creating)
    creating.add_done_callback(_creating.discard)
    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        while not creating.done():
            with contextlib.suppress(asyncio.CancelledError):  # a second cancel: still let it finish
                await asyncio.wait({creating})
        if not creating.cancelled() and creating.exception() is None:
            await stop_process(creating.result())
        raise


async def creations_done() -> None:
    """Wait for the processes being made on this loop (`spawn`) to exist: then none is cut off at the loop's end."""
    loop = asyncio.get_running_loop()
    under_way = {task for task in _creating if task.get_loop() is loop and not task.done()}
    if under_way:
        await asyncio.wait(under_way)


async def stop_process(process: asyncio.subprocess.Process) -> None:
    """Kill, reap, and close the pipes now (asyncio's Process has no close(): left to the garbage collector,
    its transport warns and closes from a finalizer at a random time)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()
