"""`briefd run`'s first second: the page-reading children start before the daemon's own modules load.

Importing the daemon (daemon.ops.worker and all it reads: the store, the model and search clients,
the research loop) takes about 1 s on a busy 2-core box, and the page-reading children
(daemon.sources.pagework) take about as long again to import their readers and read a warm-up
page. One after the other, the first brief's first pages waited for children still starting,
with the model idle (issue 22: 0.6 s in `make bench`'s first run). Here research's own reader is
started first (PageWorkers.start), then the daemon is imported while it imports its readers on the
other core; the rest of the pool starts once the daemon is loaded.

This module is kept light (nothing of the daemon's at import) so that `briefd run` reaches the
children's start in the time the command line takes to load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.settings import Settings

if TYPE_CHECKING:
    from .worker import Daemon


def load_daemon() -> "type[Daemon]":
    """The daemon's class, its modules imported now (the slow part this module exists to overlap)."""
    from .worker import Daemon

    return Daemon


async def run_daemon(settings: Settings, once: bool, load: Callable[[], "type[Daemon]"] = load_daemon) -> int:
    """Start the page-reading children (PageWorkers.start), then load and run the daemon with them
    (`worker.serve`'s work).

    The children are the daemon's own once it has started its services (it closes them at its end,
    in their usual order); they are closed here as well for every way out before that (another daemon
    holds the store's lock, a store that cannot be opened, a stop while starting): closing is a no-op
    the second time.
    """
    from ..sources.pagework import PageWorkers

    pages = PageWorkers()
    warming = await pages.start()
    try:
        daemon = load()(settings, once, pages=(pages, warming))
        return await daemon.serve()
    finally:
        warming.cancel()
        await asyncio.gather(warming, return_exceptions=True)
        await pages.close()
