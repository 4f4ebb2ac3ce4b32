"""`briefd run`'s first second: the page-reading children start before the daemon's own modules load.

Importing the daemon (daemon.ops.worker and all it reads: the store, the model and search clients,
the research loop) takes about 1 s on a busy 2-core box, and the page-reading children
(daemon.sources.pagework) take about as long again to import their readers and read a warm-up
page. One after the other, the first brief's first pages waited for children still starting,
with the model idle (issue 22: 0.6 s in `make bench`'s first run). Here research's own reader is
started first (PageWorkers.start, when the inbox holds a brief), then the daemon is imported while it imports its readers on the
other core; the rest of the pool starts once the daemon is loaded.

This module is kept light (nothing of the daemon's at import): `briefd run` reaches the child's start
once the command line and the pool's own module (daemon.sources.pagework) are loaded.

And its last moment: once the daemon has closed all it opened, `exit_now` ends the process without
the interpreter's teardown (0.2-0.3 s on a busy box after the last report, for nothing).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from ..core.settings import Settings
from ..intake.names import briefs_waiting

if TYPE_CHECKING:
    from .worker import Daemon

daemon_ended = False
"""Set once `run_daemon` has closed the daemon and its children: the process may end without teardown."""


def load_daemon() -> "type[Daemon]":
    """The daemon's class, its modules imported now (the slow part this module exists to overlap)."""
    from .worker import Daemon

    return Daemon


async def run_daemon(settings: Settings, once: bool, load: Callable[[], "type[Daemon]"] = load_daemon) -> int:
    """Start the page-reading children (PageWorkers.start) when the inbox holds a brief, then load and run
    the daemon with them (`worker.serve`'s work). With nothing in the inbox they start when the daemon
    claims its first brief (`PageWorkers.warm_soon`: one from the store, the HTTP API or a later file), and
    a cron tick on an empty inbox starts none.

    The children are the daemon's own once it has started its services (it closes them at its end,
    in their usual order); they are closed here as well for every way out before that (another daemon
    holds the store's lock, a store that cannot be opened, a stop while starting): closing is a no-op
    the second time.
    """
    from ..sources.pagework import PageWorkers

    pages = PageWorkers()
    if briefs_waiting(settings.inbox):
        await pages.start()
    try:
        daemon = load()(settings, once, pages=pages)
        return await daemon.serve()
    finally:
        await pages.close()
        global daemon_ended
        daemon_ended = True


def exit_now(code: int) -> NoReturn:
    """End the `briefd run` process now that the daemon has closed everything it opened (store, clients,
    children, the inbox's lock), without the interpreter's teardown.

    The teardown frees every object and module one by one: 0.15 s of CPU after the last report was
    written, 0.2-0.3 s on a busy 2-core box (issue 22: `run --once` is timed start to exit, and cron's
    next run or a waiting script waits for that exit). What the teardown would still do for anyone is
    done first: threads that are not daemons are joined, the atexit handlers run (logging's flush
    among them), and the standard streams are flushed.
    """
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said on it
            pass
    os._exit(code)
