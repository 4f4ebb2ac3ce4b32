"""The daemon's long-lived tasks under supervision (issue 19 #1), without the lab: intake outlives a real
EMFILE, a task that dies is restarted or stops the daemon with exit 3 naming it, a repeated error is
logged once per interval, the open-files limit is raised at start; and `briefd status` numbers a
brief's own runs and says the round its events are in (#16)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from briefd.daemon.ops import onfinish

from briefd.daemon.core import supervise

from briefd.daemon.ops import worker
from briefd.daemon.ops.cli import main
from briefd.daemon.intake.inbox import Inbox
from briefd.daemon.core.retry import Backoff
from briefd.daemon.ops.api import brief_state
from briefd.daemon.core.settings import Settings, load_settings
from briefd.daemon.core.supervise import OPEN_FILES_WANTED, REPEAT_EVERY_S, Policy, RepeatLog, raise_open_files_limit
from briefd.store import Store
from tests.conftest import wait_for
from tests.polling import until
from lab.servers import free_port
from lab.workspace import BRIEFD

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "contrib" / "systemd" / "briefd.service"
BRIEF = {"question": "Why did the Kestrel River bridge close?"}


def settings_in(root: Path, **flags: str) -> Settings:
    """A daemon's settings in a folder of its own; services on closed ports (nothing here calls them)."""
    return load_settings({"inbox": str(root / "inbox"), "outbox": str(root / "outbox"), "db": str(root / "briefd.db"),
                          "ollama_host": "http://127.0.0.1:9", "searxng_url": "http://127.0.0.1:9",
                          "settle_seconds": "0", **flags}, {})


@contextlib.contextmanager
def daemon_with_inbox(root: Path, **flags: str) -> Iterator[worker.Daemon]:
    """A Daemon with its store and inbox opened as `serve` opens them, for running one of its tasks."""
    settings = settings_in(root, **flags)
    settings.inbox.mkdir(parents=True)
    daemon = worker.Daemon(settings, once=False)
    daemon.store = Store(settings.db)
    daemon.inbox = Inbox(settings.inbox, settings.outbox, daemon.store, settings.settle_seconds)
    try:
        yield daemon
    finally:
        daemon.store.close()


@contextlib.contextmanager
def descriptors_exhausted(headroom: int = 32) -> Iterator[list[int]]:
    """Every descriptor this process may open taken, as an API flood takes them: the soft RLIMIT_NOFILE
    lowered to what is open plus `headroom`, then /dev/null opened until the kernel says EMFILE. Yields
    the descriptors taken (`take_the_rest` takes any freed since); all are closed and the limit restored at
    the end."""
    gc.collect()  # an earlier test's unreferenced file or socket closes now, not in the middle of this one
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + headroom, hard))
    held: list[int] = []
    try:
        take_the_rest(held)
        yield held
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def take_the_rest(held: list[int]) -> None:
    """Open /dev/null into `held` until the kernel says EMFILE."""
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as exc:
            assert exc.errno == errno.EMFILE, exc
            return


async def keep_exhausted(held: list[int], seconds: float, every: float = 0.02) -> None:
    """Wait `seconds` with every descriptor taken: any another thread frees (a client or a child's pipe of an
    earlier test closing) is taken again within `every`, so the watcher's turns meet EMFILE, not a free slot."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        take_the_rest(held)
        await asyncio.sleep(every)


def scandir_refused(folder: Path, held: list[int], tries: int = 5) -> OSError:
    """The error os.scandir(folder) gets with every descriptor taken. Another thread of this process (a client
    or a child's pipe of an earlier test closing) can free one between the taking and the scan: then the rest
    is taken again, a few times, before the condition is called unreal."""
    for _ in range(tries):
        try:
            os.scandir(folder).close()
        except OSError as exc:
            return exc
        take_the_rest(held)
    raise AssertionError(f"os.scandir({folder}) kept finding a free descriptor: the condition could not be made")


def taken(store: Store, brief_id: str) -> bool:
    return store.latest_run(brief_id) is not None


# --------------------------------------------------------------------------- intake under EMFILE


def test_intake_outlives_emfile_and_takes_a_brief_dropped_after_it_clears(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The inbox watcher runs while every descriptor is taken (a real EMFILE from os.scandir, for about
    2 s of 0.2 s turns): it says so once, not once per turn, and lives; a brief dropped once the
    descriptors are back is taken. Before, the watcher task died on the first scan and nothing was taken."""
    with daemon_with_inbox(tmp_path, poll_seconds="0.1") as daemon, caplog.at_level(logging.INFO, "briefd"):
        async def scenario() -> tuple[int, bool, bool]:
            watcher = asyncio.create_task(daemon.watch_inbox())
            try:
                with descriptors_exhausted() as fds:
                    # the condition is real, not assumed
                    assert scandir_refused(daemon.inbox.folder, fds).errno == errno.EMFILE
                    held = len(fds)
                    await keep_exhausted(fds, 2.0)
                alive = not watcher.done()
                (daemon.inbox.folder / "after.json").write_text(json.dumps(BRIEF))
                took = await until(lambda: taken(daemon.store, "after"), 15)
                return held, alive, took
            finally:
                daemon.stop()
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)

        held, alive, took = asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records]
    assert held > 0
    assert alive, "the inbox watcher died under EMFILE"
    assert took, f"a brief dropped after the descriptors came back was not taken: {said[-5:]}"
    # once per shortage, not once per turn: a descriptor freed for a moment (another thread's) ends a shortage
    # and the next begins one, each said once; a watcher that said it every turn says it about 10 times to one
    cannot = [m for m in said if "cannot be read: Too many open files" in m]
    again = [m for m in said if "can be read again" in m]
    assert cannot, f"the shortage was never said: {said[-5:]}"
    assert len(cannot) == len(again), f"said {len(cannot)} times for {len(again)} shortage(s): {cannot[:3]}"


def test_a_brief_noticed_while_descriptors_are_out_is_taken_when_they_are_back(tmp_path: Path) -> None:
    """A file the watcher saw (inotify needs no descriptor) is taken while every descriptor is taken: its
    open fails with EMFILE. That is the daemon's shortage, not the file's: it stays tracked and is taken
    once descriptors are back. Before, it was refused as unreadable, once per version: never taken."""
    with daemon_with_inbox(tmp_path) as daemon:
        path = daemon.inbox.folder / "during.json"
        path.write_text(json.dumps(BRIEF))
        daemon.inbox.notice(path, complete=True)  # what the observer thread does on the close event
        with descriptors_exhausted() as fds:
            assert scandir_refused(daemon.inbox.folder, fds).errno == errno.EMFILE  # none was freed since
            assert daemon.inbox.take_ready() == []
        accepted = daemon.inbox.take_ready()
        assert [a.brief_id for a in accepted] == ["during"] and not path.exists()
        assert not (daemon.settings.outbox / "during" / "error.json").exists(), "never refused for it"


FLOOD_LIMIT = 128         # the daemon's RLIMIT_NOFILE, soft and hard, so that raising it cannot help
FLOOD_CONNECTIONS = 300   # slow-header connections: more than the limit, as 1,100 were against 1,024


@pytest.mark.slow
def test_an_api_flood_under_a_low_descriptor_limit_stops_neither_intake_nor_the_log(tmp_path: Path) -> None:
    """`briefd run` with `serve = true` under 128 descriptors: 300 connections that send a request line and
    one header, never the blank line, take every descriptor. A brief dropped during the flood and one
    dropped after it are both taken; the log stays small (asyncio's accept EMFILE, the inbox's scan: once a
    minute each). Measured before the fix: neither brief taken, 45 MB of log in 30 s (102,235 tracebacks)."""
    import socket

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_")}
    env.update(BRIEFD_INBOX=str(tmp_path / "inbox"), BRIEFD_OUTBOX=str(tmp_path / "outbox"),
               BRIEFD_DB=str(tmp_path / "briefd.db"), OLLAMA_HOST="http://127.0.0.1:9",
               BRIEFD_SEARXNG_URL="http://127.0.0.1:9", BRIEFD_SERVE="true", BRIEFD_SERVE_PORT=str(port),
               BRIEFD_SETTLE_SECONDS="0.2")
    log = tmp_path / "daemon.log"
    limit = (FLOOD_LIMIT, FLOOD_LIMIT)
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=env, cwd=tmp_path, stdout=sink, stderr=sink,
                                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limit))
    held: list[socket.socket] = []
    try:
        wait_for(lambda: "HTTP API and web page on" in log.read_text(), 60, "the daemon to serve")
        for _ in range(FLOOD_CONNECTIONS):
            with contextlib.suppress(OSError):
                conn = socket.create_connection(("127.0.0.1", port), timeout=2)
                conn.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                held.append(conn)
        peak = len(os.listdir(f"/proc/{daemon.pid}/fd"))
        (tmp_path / "inbox" / "during.json").write_text(json.dumps(BRIEF))
        time.sleep(5)
        for conn in held:
            conn.close()
        held.clear()
        (tmp_path / "inbox" / "after.json").write_text(json.dumps(BRIEF))
        with contextlib.closing(Store(tmp_path / "briefd.db")) as store:
            wait_for(lambda: taken(store, "during") and taken(store, "after"), 60, "both briefs to be taken")
        assert daemon.poll() is None, log.read_text()[-3000:]
    finally:
        for conn in held:
            conn.close()
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=60)
    text = log.read_text()
    print(f"daemon descriptors at the flood's peak: {peak} of {FLOOD_LIMIT}; log {len(text)} bytes")
    assert code == 0, text[-3000:]
    assert len(text) < 100_000 and text.count("Traceback") <= 3, (len(text), text[:3000])


# --------------------------------------------------------------------------- supervised tasks


def test_a_supervised_task_that_dies_is_logged_by_name_and_restarted(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        await asyncio.Event().wait()  # the restarted task lives on

    with daemon_with_inbox(tmp_path) as daemon, caplog.at_level(logging.INFO, "briefd"):
        async def scenario() -> bool:
            task = daemon.supervised("the inbox watcher", flaky, worker.INTAKE)
            try:
                return await until(lambda: len(calls) == 2, 10)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        restarted = asyncio.run(scenario())
    assert restarted and daemon.fatal is None and not daemon.stopping.is_set()
    [died] = [r for r in caplog.records if "died" in r.getMessage()]
    assert died.levelno == logging.ERROR
    assert died.getMessage().startswith("the inbox watcher died: OSError: [Errno 24] Too many open files; "
                                        "restarting it in ")
    assert "Traceback" in died.getMessage(), "the traceback is in the log"


def test_a_task_that_cannot_be_restarted_stops_the_daemon_with_its_name(caplog: pytest.LogCaptureFixture) -> None:
    """Policy(0) (the HTTP API's) stops at the first death; a restartable one after its restarts run out."""
    async def dies() -> None:
        raise RuntimeError("boom")

    for policy, deaths in ((Policy(0, "no restart"), 1), (Policy(2, "two restarts"), 3)):
        said: list[str] = []
        calls: list[int] = []

        async def counted() -> None:
            calls.append(1)
            await dies()

        async def scenario() -> None:
            await asyncio.wait_for(supervise.supervise("the thing", counted, policy, stopping=asyncio.Event(),
                                                       fatal=said.append), 30)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(supervise, "RESTART", Backoff(0.01, 0.01))
            asyncio.run(scenario())
        assert len(calls) == deaths
        assert len(said) == 1 and said[0].startswith("the thing died: RuntimeError: boom") and policy.why in said[0]


def test_an_inbox_watcher_that_keeps_dying_stops_the_daemon_with_exit_3_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The whole daemon (`Daemon.serve`, services on closed ports): its inbox watcher raises at every
    start. It is restarted INTAKE.restarts times, then the daemon stops with exit 3 and the log names the
    inbox watcher. Before, the task died unseen and the daemon ran on without intake."""
    monkeypatch.setattr(supervise, "RESTART", Backoff(0.01, 0.01))
    starts: list[int] = []

    async def broken(self: worker.Daemon) -> None:
        starts.append(1)
        raise PermissionError(errno.EACCES, "Permission denied", "inbox")

    monkeypatch.setattr(worker.Daemon, "watch_inbox", broken)
    daemon = worker.Daemon(settings_in(tmp_path), once=False)
    with caplog.at_level(logging.INFO, "briefd"):
        code = asyncio.run(asyncio.wait_for(daemon.serve(), 120))
    assert code == 3
    assert len(starts) == worker.INTAKE.restarts + 1  # type: ignore[operator]
    critical = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert any(m.startswith("the inbox watcher died: PermissionError") and "stopping (exit 3)" in m
               for m in critical), critical


def test_an_http_api_that_dies_stops_the_daemon_with_exit_3_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`serve = true`: the API's server task raises a moment after it started. The daemon stops with exit 3
    and says the HTTP API died (API: its socket is gone with it; systemd's restart binds it again).
    Before, the task ended unseen and the daemon ran on with no API."""
    from briefd.daemon.ops import serve

    async def breaks(self: object) -> None:
        await asyncio.sleep(0.3)
        raise RuntimeError("the server broke")

    monkeypatch.setattr(serve._Server, "run", breaks)
    daemon = worker.Daemon(settings_in(tmp_path, serve="true", serve_port=str(free_port())), once=False)
    with caplog.at_level(logging.INFO, "briefd"):
        code = asyncio.run(asyncio.wait_for(daemon.serve(), 120))
    assert code == 3
    critical = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert any(m.startswith("the HTTP API died: RuntimeError: the server broke") and "stopping (exit 3)" in m
               for m in critical), critical


def test_a_dead_on_finish_task_is_logged_with_the_brief(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """on_finish's own set-up failing (its stderr file under EMFILE) was swallowed by gather; it is logged."""
    async def no_descriptor(*_args: object) -> int | None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(onfinish, "run", no_descriptor)
    with daemon_with_inbox(tmp_path) as daemon, caplog.at_level(logging.INFO, "briefd"):
        daemon.settings = dataclasses.replace(daemon.settings, on_finish=("true",))
        async def scenario() -> None:
            daemon.ended("kestrel", "done", tmp_path, {"answer": {"found": True, "text": "14 metres"}})
            await daemon.hooks_done()

        asyncio.run(scenario())
    [said] = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
    assert said.startswith("on_finish kestrel died: OSError: [Errno 24] Too many open files; it is not run again")


# --------------------------------------------------------------------------- rate-limited errors


def test_a_repeated_error_is_logged_once_per_interval_with_the_count_it_left_out(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    repeats = RepeatLog(clock=lambda: now[0])
    with caplog.at_level(logging.INFO, "briefd"):
        logged = 0
        for _ in range(1000):  # 1,000 failures in 100 s: the flood's rate
            logged += repeats.error("inbox scan", "the inbox cannot be read")
            now[0] += 0.1
        repeats.cleared("inbox scan", "the inbox can be read again")
        assert repeats.error("inbox scan", "the inbox cannot be read"), "after it cleared, the next one is news"
    said = [r.getMessage() for r in caplog.records]
    assert logged == 2 and len(said) == 4, said
    assert said[1] == f"the inbox cannot be read ({int(REPEAT_EVERY_S * 10) - 1} more like it in 60 s not logged)"
    assert said[2].startswith("the inbox can be read again after 100 s; 399 repeat(s)")


def test_asyncios_own_reports_are_said_once_a_minute_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    """A listening socket's accept failing with EMFILE is reported once per pending connection: 1,000
    reports are one line (with its traceback), and another kind of report is still said at once."""
    loop = asyncio.new_event_loop()
    try:
        supervise.quiet_loop_errors(loop)
        with caplog.at_level(logging.INFO, "briefd"):
            for _ in range(1000):
                loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                             "exception": OSError(errno.EMFILE, "Too many open files")})
            loop.call_exception_handler({"message": "Task exception was never retrieved",
                                         "exception": RuntimeError("boom")})
    finally:
        loop.close()
    said = [r.getMessage() for r in caplog.records]
    assert said == ["socket.accept() out of system resource: OSError: [Errno 24] Too many open files",
                    "Task exception was never retrieved: RuntimeError: boom"], said[:5]


# --------------------------------------------------------------------------- the open-files limit


def test_the_soft_open_files_limit_is_raised_to_the_hard_one_at_start(tmp_path: Path) -> None:
    """`briefd run --once` started under a soft limit of 256 logs the limit it raised, and runs with it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 256:
        pytest.skip(f"the hard limit here is {hard}: nothing to raise")
    wanted = min(hard, OPEN_FILES_WANTED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_")}
    env.update(BRIEFD_INBOX=str(tmp_path / "inbox"), BRIEFD_OUTBOX=str(tmp_path / "outbox"),
               BRIEFD_DB=str(tmp_path / "briefd.db"), OLLAMA_HOST="http://127.0.0.1:9",
               BRIEFD_SEARXNG_URL="http://127.0.0.1:9")
    result = subprocess.run([BRIEFD, "run", "--once"], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"open files: soft limit raised from 256 to {wanted}" in result.stderr, result.stderr[-2000:]
    probe = "import resource; from briefd.daemon.core.supervise import raise_open_files_limit as r; " \
            "print(r()); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    assert shown.stdout.split("\n")[1] == str(wanted), shown.stdout + shown.stderr
    assert raise_open_files_limit(wanted=1).endswith("kept"), "never lowered"


def test_the_unit_sets_the_open_files_limit_the_daemon_raises_to() -> None:
    lines = [line.strip() for line in UNIT.read_text().splitlines()]
    assert f"LimitNOFILE={OPEN_FILES_WANTED}" in lines


# --------------------------------------------------------------------------- briefd status (#16)


def add_run(store: Store, brief_id: str) -> int:
    data = json.dumps(BRIEF).encode()
    run_id = store.add_brief(brief_id=brief_id, question=BRIEF["question"], source_file=f"{brief_id}.json",
                             received=data, brief_json=data.decode(), inbox_path=f"/nowhere/{brief_id}.json")
    store.mark_inbox_removed(run_id)
    return run_id


def test_status_numbers_a_briefs_own_runs_and_says_the_round_its_events_are_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """lakeside's first run is run id 2 (another brief came first): status says `lakeside (run 1)`, and
    its second run, queued behind it, `(run 2)`. It is searching in round 2 (its events say
    round_started 2) while its checkpoint still says 1 round finished: status says round 2."""
    monkeypatch.chdir(tmp_path)
    settings = settings_in(tmp_path)
    store = Store(settings.db)
    try:
        add_run(store, "kestrel")
        store.add_rejection(brief_id="lakeside", source_file="lakeside.json", received=b"{", error="not JSON",
                            details={}, inbox_path="/nowhere/lakeside.json")  # a rejected file: no run of it
        first = add_run(store, "lakeside")
        second = add_run(store, "lakeside")  # its next run, queued behind it
        store.db.execute("UPDATE briefs SET state = 'done' WHERE brief_id = 'kestrel'")
        claimed = store.claim_next()
        assert claimed is not None and claimed.run_id == first and first > 1
        for event, data in (("round_started", {"round": 1}), ("signal", {"message": "round 1 done"}),
                            ("round_started", {"round": 2})):
            store.add_event(first, event, data)
        store.save_checkpoint(first, 1, "search", {"round": 1, "phase": "search", "current_round": {}})
    finally:
        store.close()
    flags = ["--db", str(settings.db), "--inbox", str(settings.inbox), "--outbox", str(settings.outbox)]
    assert main(["status", *flags]) == 0
    out = capsys.readouterr().out
    assert "running (daemon not running: will resume when it starts) lakeside (run 1): round 2, search" in out, out
    assert "queued  lakeside (run 2) since" in out, out
    assert main(["status", "--json", *flags]) == 0
    data = json.loads(capsys.readouterr().out)
    [running] = data["running"]
    assert (running["run"], running["run_number"], running["round"]) == (first, 1, 2)
    store = Store(settings.db)
    try:  # GET /briefs/{id} shows the latest run: with the queued one gone, that is the running one
        store.db.execute("DELETE FROM briefs WHERE run_id = ?", [second])
    finally:
        store.close()
    detail = brief_state(settings, "lakeside")  # GET /briefs/lakeside: the same round as briefd status
    assert detail is not None and detail["progress"]["round"] == 2, detail
