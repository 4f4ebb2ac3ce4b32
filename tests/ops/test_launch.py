"""`briefd run` starts its page-reading children before it loads the daemon when a brief waits (issue 22,
the model's idle time), and none when nothing does.

The daemon's imports take about a second on a busy 2-core box and the children take about as long to
import their readers. One after the other, `make bench`'s first brief had its first pages fetched and
then waited 0.6 s, the model idle, for children still starting. These tests look at the order, not
at the seconds: which processes exist when the daemon's module starts loading, and that none is left.
A run with nothing to do (cron's `run --once` on an empty inbox) starts no child at all: each pair cost
about a second of CPU for nothing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from briefd.daemon.core.settings import load_settings
from briefd.daemon.ops import launch, worker
from briefd.daemon.sources.pagework import PAGE_WORKERS, PageWorkers

from tests.conftest import Workspace
from lab.corpus import TOPICS

ROOT = Path(__file__).resolve().parents[2]

# `briefd run --once`, with an import hook that writes, when the daemon's module (daemon.ops.worker) is
# first looked for, the command lines of this process's children at that moment (to argv[1]), and every
# command line the run starts a process with (to argv[2]).
WATCHED_RUN = r"""
import asyncio, importlib.abc, os, sys
from pathlib import Path

out = Path(sys.argv[1])
started = Path(sys.argv[2])
spawn = asyncio.create_subprocess_exec


async def watched_spawn(program, *args, **kwargs):
    with started.open("a") as log:
        log.write(" ".join(map(str, (program, *args))) + "\n")
    return await spawn(program, *args, **kwargs)


asyncio.create_subprocess_exec = watched_spawn


class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "briefd.daemon.ops.worker" and not out.exists():
            lines = []
            for task in Path(f"/proc/{os.getpid()}/task").iterdir():
                for pid in (task / "children").read_text().split():
                    lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            out.write_text("\n".join(lines) + "\n")
        return None


sys.meta_path.insert(0, Watch())
from briefd.daemon.ops.cli import main

sys.exit(main(["run", "--once"]))
"""


def watched_run(tmp_path: Path) -> tuple[list[str], list[str]]:
    """`briefd run --once` on `tmp_path`'s inbox: the page readers alive when the daemon's module began to
    load, and every page reader the run started."""
    seen, started = tmp_path / "children-at-import.txt", tmp_path / "started.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRIEFD_INBOX": str(tmp_path / "inbox"),
           "BRIEFD_OUTBOX": str(tmp_path / "outbox"), "BRIEFD_DB": str(tmp_path / "briefd.db")}
    env.pop("BRIEFD_CONFIG", None)
    result = subprocess.run([sys.executable, "-c", WATCHED_RUN, str(seen), str(started)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]

    def readers(path: Path) -> list[str]:
        lines = path.read_text().splitlines() if path.exists() else []
        return [line for line in lines if "briefd.daemon.sources.pagework" in line]
    return readers(seen), readers(started)


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                    reason="needs Linux's /proc/<pid>/task/<tid>/children")
def test_the_page_readers_are_started_before_the_daemons_modules_load_when_a_brief_waits(tmp_path: Path) -> None:
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "broken.json").write_text('{"question": ')  # taken (and refused): the readers start first
    at_import, _started = watched_run(tmp_path)
    assert len(at_import) == PAGE_WORKERS, \
        f"the page readers were not started before the daemon's modules loaded: {at_import!r}"
    assert (tmp_path / "outbox" / "broken" / "error.json").exists(), "the brief waiting was taken"


def test_run_once_on_an_empty_inbox_starts_no_page_reader(tmp_path: Path) -> None:
    """A cron tick with nothing to do: no child is started, before the daemon loads or after."""
    at_import, started = watched_run(tmp_path)
    assert at_import == [] and started == [], f"page readers started with nothing to read: {started!r}"


def test_the_children_started_first_are_closed_when_the_daemon_cannot_start(tmp_path: Path) -> None:
    """Another daemon holds the store, the store is damaged, a bug at start: the children go with the run."""
    (tmp_path / "waiting.json").write_text("{}")  # a brief waits: the children start before the daemon loads
    settings = SimpleNamespace(inbox=tmp_path)
    pools: list[PageWorkers] = []

    class Refused(Exception):
        pass

    class Daemon:
        def __init__(self, settings: object, once: bool, pages: PageWorkers) -> None:
            pools.append(pages)

        async def serve(self) -> int:
            await pools[0].read(b"<html><body><article><p>A page. It is read.</p></article></body></html>",
                                "http://example.test/", "text/html")  # the children are the daemon's to use
            raise Refused()

    with pytest.raises(Refused):
        asyncio.run(launch.run_daemon(settings, True, load=lambda: Daemon))  # type: ignore[arg-type,return-value]
    [pool] = pools
    assert not pool._idle and not pool._busy, "every child was closed"


# `briefd run --once` as the `briefd` command runs it (main() with no argv), with an atexit handler and an
# object whose finalizer runs only in the interpreter's teardown
ENDING_RUN = r"""
import atexit, sys


class TornDown:
    def __del__(self):
        sys.stderr.write("TORN DOWN\n")


kept_until_teardown = TornDown()
atexit.register(lambda: sys.stderr.write("ATEXIT RAN\n"))
sys.argv = ["briefd", "run", "--once"]
from briefd.daemon.ops.cli import main

sys.exit(main())
"""


def test_briefd_run_ends_after_its_atexit_handlers_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """Issue 22: `run --once` is timed from start to exit, and the interpreter's teardown (freeing every
    object and module) took 0.2-0.3 s after the last report on a busy 2-core box, for nothing: the
    daemon has closed its store, clients and children. The atexit handlers (logging's flush) still run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRIEFD_INBOX": str(tmp_path / "inbox"),
           "BRIEFD_OUTBOX": str(tmp_path / "outbox"), "BRIEFD_DB": str(tmp_path / "briefd.db")}
    env.pop("BRIEFD_CONFIG", None)
    result = subprocess.run([sys.executable, "-c", ENDING_RUN], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "briefd INFO briefd" in result.stderr and "ATEXIT RAN" in result.stderr
    assert "TORN DOWN" not in result.stderr, "the interpreter was torn down after the daemon had ended"


@pytest.mark.lab  # a brief researched on the lab's search and scripted model, the daemon in this process
def test_run_once_with_two_workers_ends_when_its_last_brief_does_not_at_an_idle_workers_next_poll(
        workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: with workers = 2 the worker that had nothing to claim slept its poll (0.5 s) and only
    then saw that `run --once` had nothing left, after the last report. A brief's end now wakes it. The
    poll is made an hour long here: before, the run then ended an hour late."""
    monkeypatch.setattr(worker, "IDLE_POLL_S", 3600.0)
    workspace.drop("solo.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})
    settings = load_settings({}, workspace.env(BRIEFD_WORKERS="2"))
    result: list[int] = []
    run = threading.Thread(target=lambda: result.append(asyncio.run(worker.Daemon(settings, once=True).serve())),
                           daemon=True)  # left behind if this test fails, not holding pytest's exit
    run.start()
    run.join(timeout=120)
    assert not run.is_alive(), "run --once did not end after its only brief: the idle worker slept on"
    assert result == [0] and workspace.report("solo")["status"] == "done"
