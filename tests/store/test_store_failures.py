"""When the store fails (issue 8, #5 and #7): a real `briefd` against a real SQLite file that
another daemon, another process, random bytes or a full disk has got to first.

What a user must see in every case: exit 3 with the reason and the fix, never a traceback;
a store locked by another process waited for with a message; a damaged store never written
to; and, once the store is fixed, every brief still there.

Most tests point briefd at closed ports for Ollama and SearXNG: they are about the store,
which needs neither. The two-daemon test runs the lab's servers, since the point there is
that the brief completes once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from briefd.daemon.core.brief import parse_brief
from briefd.daemon.core.files import store_lock_path
from briefd.daemon.ops.worker import LOCK_POLL_S
from briefd.store import CANCELLED, QUEUED, RUNNING, Store
from briefd.store.db import BUSY_TIMEOUT_S
from tests.conftest import BRIEFD, Workspace, wait_for
from lab.corpus import TOPICS

# Every test here runs the real `briefd` daemon against its store in a subprocess.
pytestmark = pytest.mark.lab

CLOSED_PORT = "http://127.0.0.1:9"  # discard: nothing listens, every connection is refused
QUESTION = "Why was the Kestrel River bridge closed in 2025?"


def offline(root: Path) -> Workspace:
    """An installation whose model and search services are down: only the store matters here."""
    return Workspace(root=root, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")


def seed(db: Path, count: int, running: int = 0, context_chars: int = 0, ids_as: str | None = None) -> list[str]:
    """`count` accepted briefs in a real store (the first `running` of them claimed), as the
    inbox records them (`ids_as`: under this id instead, as an older briefd may have); returns their ids."""
    store = Store(db)
    ids: list[str] = []
    try:
        for i in range(count):
            data = json.dumps({"question": f"{QUESTION} (variant {i})", "context": "c" * context_chars}).encode()
            brief = parse_brief(data, f"b{i}.json")
            run_id = store.add_brief(brief_id=ids_as or brief.id, question=brief.question, source_file=f"b{i}.json",
                                     received=data, brief_json=json.dumps(brief.to_json()),
                                     inbox_path=str(db.parent / "inbox" / f"b{i}.json"))
            store.mark_inbox_removed(run_id)
            ids.append(ids_as or brief.id)
        for _ in range(running):
            assert store.claim_next() is not None
    finally:
        store.close()
    return ids


def no_traceback(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out[-3000:]
    return out


def states(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT state, count(*) FROM briefs GROUP BY state").fetchall())
    finally:
        conn.close()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


COMMANDS = [("run", "--once"), ("run",), ("status",), ("status", "--json"), ("check",)]


# --------------------------------------------------------------------------- damage


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_store_overwritten_with_random_bytes_exits_3_with_the_fix(tmp_path: Path, args: tuple[str, ...]) -> None:
    ws = offline(tmp_path)
    ws.db.write_bytes(random.Random(8).randbytes(256 * 1024))
    before = sha(ws.db)
    result = ws.briefd(*args, timeout=60)
    out = no_traceback(result)
    assert result.returncode == 3, out[-3000:]
    assert "not a database" in out and "restore it from a backup" in out and str(ws.db) in out
    assert sha(ws.db) == before, "a damaged store is never written to"


@pytest.fixture(params=[1, 8], ids=["one page", "eight pages"])
def damaged_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Workspace, Path]]:
    """A real store with 200 queued briefs with garbage written over one page, or eight, in the
    middle of the file (a bad sector, a torn copy); yields it and a backup taken before."""
    ws = offline(tmp_path)
    seed(ws.db, 200, context_chars=3000)
    assert not Path(f"{ws.db}-wal").exists(), "checkpointed: every page is in the file"
    backup = tmp_path / "backup.db"
    backup.write_bytes(ws.db.read_bytes())
    page = sqlite3.connect(ws.db).execute("PRAGMA page_size").fetchone()[0]
    pages = ws.db.stat().st_size // page
    assert pages > 100
    garbage = random.Random(11).randbytes(page * request.param)
    with open(ws.db, "r+b") as handle:
        handle.seek(page * (pages // 2))
        handle.write(garbage)
    yield ws, backup


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_store_damaged_mid_file_exits_3_and_check_shows_the_damage(
        damaged_store: tuple[Workspace, Path], args: tuple[str, ...]) -> None:
    ws, backup = damaged_store
    before = sha(ws.db)
    result = ws.briefd(*args, timeout=60)
    out = no_traceback(result)
    assert result.returncode == 3, out[-3000:]
    assert "damaged" in out and "restore it from a backup" in out, out[-3000:]
    if args == ("check",):
        assert "FAIL database" in out and "PRAGMA quick_check" in out
        assert "tree page" in out or "malformed" in out, "quick_check's own words name the damage"
    if args[0] == "status":
        assert "cannot read the store" in result.stderr
    assert sha(ws.db) == before, "a damaged store is never written to"
    ws.db.write_bytes(backup.read_bytes())  # the user restores the backup
    for suffix in ("-wal", "-shm"):
        Path(f"{ws.db}{suffix}").unlink(missing_ok=True)
    restored = ws.briefd("status", "--json", timeout=60)
    assert restored.returncode == 0 and json.loads(restored.stdout)["counts"][QUEUED] == 200, "no brief lost"


# --------------------------------------------------------------------------- another process holds the lock



@pytest.mark.slow
def test_a_store_held_by_another_process_is_waited_for_at_start_up_and_when_idle(tmp_path: Path) -> None:
    """BEGIN EXCLUSIVE held by another process for longer than SQLite's busy timeout, first while
    the daemon starts (requeue_running), then while it idles (claim_next): it says it waits,
    does not crash, and goes on when the lock is released."""
    ws = offline(tmp_path)
    [brief_id] = seed(ws.db, 1, running=1)  # a brief that was running when the last daemon died
    hold_s = BUSY_TIMEOUT_S + 2
    assert hold_s > 10 * LOCK_POLL_S
    other = sqlite3.connect(ws.db, isolation_level=None)
    log = tmp_path / "daemon.log"
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(), cwd=ws.root, stdout=sink, stderr=sink, text=True)
    try:
        other.execute("BEGIN EXCLUSIVE")
        held = time.monotonic()
        wait_for(lambda: "store is locked by another process; waiting" in log.read_text(), 30, "the message")
        while time.monotonic() - held < hold_s:
            assert daemon.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        other.execute("COMMIT")
        events = ws.outbox / brief_id / "events.ndjson"
        wait_for(lambda: events.exists() and '"waiting"' in events.read_text(), 60, "the brief to wait for the model")
        assert "re-queued" in log.read_text(), "start-up recovery ran once the lock was free"
        assert ws.briefd("cancel", brief_id, timeout=60).returncode == 0
        wait_for(lambda: states(ws.db) == {CANCELLED: 1}, 60, "the cancel (at the brief's next step)")

        said = log.read_text().count("store is locked by another process")
        other.execute("BEGIN EXCLUSIVE")  # now the daemon is idle: nothing to run, claim_next every 0.5 s
        held = time.monotonic()
        wait_for(lambda: log.read_text().count("store is locked by another process") > said, 30,
                 "the idle daemon's message")
        while time.monotonic() - held < hold_s:
            assert daemon.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        other.execute("COMMIT")
        wait_for(lambda: log.read_text().count("store is free again") >= 2, 30, "the daemon to go on")
        ws.drop("after.json", {"question": QUESTION})
        wait_for(lambda: (ws.outbox / "after" / "events.ndjson").exists(), 30, "a new brief to be taken")
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=60)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert states(ws.db) == {CANCELLED: 1, QUEUED: 1}, "both briefs kept; the new one waits for the model"


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB filesystem (tmpfs), so ENOSPC comes from the kernel, not from a stub."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; it runs as root (CI containers do)")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); runs as root where mount is allowed, as in CI")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> Path:
    """Write until the filesystem says ENOSPC; returns the filler to delete to free space."""
    filler = folder / "filler"
    # unbuffered: a buffered file keeps what the full disk refused and fails again when closed
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.parametrize("reader", [False, True], ids=["store closed", "store open in a reader"])
def test_a_full_disk_at_start_up_exits_3_and_keeps_every_brief(tmp_path: Path, small_disk: Path,
                                                               reader: bool) -> None:
    """Closed, the store's first need is its -shm file (SQLite says "disk I/O error"); open in
    another process (`datasette briefd.db`), -wal and -shm exist and the first write fails."""
    ws = offline(tmp_path)
    env = {"BRIEFD_DB": str(small_disk / "briefd.db")}
    db = small_disk / "briefd.db"
    seed(db, 3, running=1)
    other = sqlite3.connect(db)
    if reader:
        other.execute("SELECT count(*) FROM briefs").fetchone()
    else:
        other.close()
    filler = fill(small_disk)
    for args in (("run", "--once"), ("run",)):
        result = ws.briefd(*args, timeout=120, **env)
        out = no_traceback(result)
        assert result.returncode == 3, out[-3000:]
        assert "full" in result.stderr and f"free space on the filesystem that holds {small_disk}" in result.stderr
    other.close()
    filler.unlink()  # the user frees space
    status = ws.briefd("status", "--json", timeout=60, **env)
    assert status.returncode == 0, status.stderr
    counts = json.loads(status.stdout)["counts"]
    assert (counts[QUEUED], counts[RUNNING]) == (2, 1)
    assert states(db) == {QUEUED: 2, RUNNING: 1}, "nothing lost; the restart re-queues the running one"


# --------------------------------------------------------------------------- two daemons, one store


def test_a_second_daemon_on_the_same_store_exits_3_naming_the_first(workspace: Workspace, tmp_path: Path) -> None:
    """Issue 8 #5: another inbox, the same --db. The second used to re-queue the first one's
    running brief and run it too (two `complete` events, the model paid twice)."""
    first = subprocess.Popen([BRIEFD, "run"], env=workspace.env(), cwd=workspace.root,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    second: subprocess.Popen[str] | None = None
    try:
        workspace.drop("bridge.json", {"question": TOPICS["kestrel"].question, "depth": "quick"})
        events = workspace.outbox / "bridge" / "events.ndjson"
        wait_for(lambda: events.exists() and '"started"' in events.read_text(), 60, "the brief to start")
        other_inbox = tmp_path / "other-inbox"
        second = subprocess.Popen([BRIEFD, "run"], env=workspace.env(BRIEFD_INBOX=str(other_inbox)),
                                  cwd=workspace.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _out, err = second.communicate(timeout=60)
        assert second.returncode == 3, err[-3000:]
        assert f"pid {first.pid}" in err and str(workspace.db) in err and "--db" in err
        assert "Traceback" not in err
        assert store_lock_path(workspace.db).read_text().strip() == f"pid {first.pid}"
        wait_for(lambda: (workspace.outbox / "bridge" / "report.json").exists(), 240, "the report")
    finally:
        if second is not None and second.poll() is None:
            second.kill()
            second.wait()
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0
    types = [e["type"] for e in workspace.events("bridge")]
    assert types.count("complete") == 1 and workspace.report("bridge")["status"] == "done"


# --------------------------------------------------------------------------- a store from an older briefd


@pytest.mark.parametrize("old_id", [".x", "-rf"])
def test_a_queued_brief_whose_id_the_rule_now_refuses_fails_instead_of_stopping_the_daemon(
        tmp_path: Path, old_id: str) -> None:
    """An older briefd accepted ".x" and "-rf" (issue 8 #13). Such a brief left queued in the store
    has no safe outbox folder now: it ends failed with the reason, and the daemon carries on."""
    ws = offline(tmp_path)
    seed(ws.db, 1, ids_as=old_id)
    result = ws.briefd("run", "--once", timeout=60)
    no_traceback(result)
    assert result.returncode == 0, result.stderr[-3000:]
    conn = sqlite3.connect(ws.db)
    state, error = conn.execute("SELECT state, error FROM briefs").fetchone()
    events = conn.execute("SELECT type FROM events ORDER BY seq").fetchall()
    conn.close()
    assert state == "failed" and "invalid brief id" in error and "submit the brief again" in error
    assert events[-1] == ("failed",)
    assert not ws.outbox.exists() or not [p for p in ws.outbox.iterdir() if p.name[0] in ".-"]


@pytest.mark.parametrize("how", ["same path", "relative path", "symlink"])
def test_one_store_under_another_name_is_still_one_store(tmp_path: Path, how: str) -> None:
    """The store's lock follows the file, not the spelling of --db."""
    ws = offline(tmp_path)
    seed(ws.db, 0)
    first = subprocess.Popen([BRIEFD, "run"], env=ws.env(), cwd=ws.root, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        lock = store_lock_path(ws.db)
        wait_for(lambda: lock.exists() and lock.read_text().strip() == f"pid {first.pid}", 30, "the store lock")
        other = {"same path": str(ws.db), "relative path": "./briefd.db", "symlink": str(tmp_path / "alias.db")}[how]
        if how == "symlink":
            os.symlink(ws.db, other)
        second = ws.briefd("run", "--once", timeout=60, BRIEFD_DB=other, BRIEFD_INBOX=str(tmp_path / "inbox2"))
        assert second.returncode == 3 and f"pid {first.pid}" in second.stderr, second.stderr[-3000:]
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0
