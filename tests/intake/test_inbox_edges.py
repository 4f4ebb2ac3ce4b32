"""Hostile input at the inbox (issue 4): what a user, a careless script or an attacker can
put in the drop folder, against the real Inbox class, a real folder and a real SQLite
store, and through a real `briefd run` / `briefd run --once` where the daemon's own
wiring matters.

What every test holds the inbox to (docs/contract.md, "Promises" and "The outbox"): a file
is taken only once complete; whatever is taken ends as a queued brief or as
outbox/<safe id>/error.json with `source_file`, `error`, `details` and the received
bytes (brief.json, or brief.bin when not text); nothing is read through a symlink;
nothing the user dropped disappears without being kept; and nothing raises.

The subprocess tests point briefd at closed ports for Ollama and SearXNG: they only
drop files that are rejected or left in place, which need neither service.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from briefd.daemon.core.brief import id_from_filename, valid_id
from briefd.daemon.core.briefjson import MAX_BRIEF_BYTES
from briefd.daemon.core.files import atomic_write_text
from briefd.daemon.intake.inbox import TAKE_PER_CALL, Accepted, Inbox
from briefd.daemon.core.untrusted import clean
from briefd.store import QUEUED, REJECTED, Store
from lab.workspace import BRIEFD, Workspace

QUESTION = "Why was the Kestrel River bridge closed in 2025?"
VALID = json.dumps({"question": QUESTION}).encode()
CLOSED_PORT = "http://127.0.0.1:9"  # discard: nothing listens, every connection is refused


# --------------------------------------------------------------------------- helpers


class Box:
    """One briefd installation in a folder: inbox, outbox, a real store, a real Inbox."""

    def __init__(self, root: Path, settle: float = 0.0) -> None:
        self.root = root
        self.inbox_dir = root / "inbox"
        self.outbox = root / "outbox"
        self.db = root / "briefd.db"
        self.inbox_dir.mkdir(parents=True, exist_ok=True)
        self.outbox.mkdir(parents=True, exist_ok=True)
        self.store = Store(self.db)
        self.inbox = Inbox(self.inbox_dir, self.outbox, self.store, settle_seconds=settle)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Box":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self, name: str | bytes, data: bytes) -> Path:
        """Put a complete file in the inbox the way `briefd submit` does: temp name, then rename."""
        raw_name = name if isinstance(name, bytes) else os.fsencode(name)
        folder = os.fsencode(self.inbox_dir)
        tmp = os.path.join(folder, b".drop.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
        final = os.path.join(folder, raw_name)
        os.rename(tmp, final)
        return Path(os.fsdecode(final))

    def take(self) -> list[Accepted]:
        self.inbox.scan()
        return self.inbox.take_ready()

    def left(self) -> list[str]:
        return sorted(p.name for p in self.inbox_dir.iterdir() if p.name != ".briefd.lock")

    def rows(self) -> list[sqlite3.Row]:
        conn = sqlite3.connect(self.db)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute("SELECT * FROM briefs ORDER BY run_id").fetchall()
        finally:
            conn.close()


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    with Box(tmp_path) as b:
        yield b


def error_json(folder: Path) -> dict[str, Any]:
    """error.json as a user reads it: UTF-8 JSON with the contract's keys."""
    error = json.loads((folder / "error.json").read_bytes().decode("utf-8"))
    assert isinstance(error["source_file"], str) and error["source_file"]
    assert isinstance(error["error"], str) and error["error"]
    assert isinstance(error["details"], dict)
    return error


def kept(folder: Path) -> bytes:
    """The received bytes the rejection kept: brief.json for UTF-8 text, else brief.bin."""
    names = {p.name for p in folder.iterdir()} & {"brief.json", "brief.bin"}
    assert len(names) == 1, f"exactly one of brief.json / brief.bin in {folder}: {names}"
    return (folder / names.pop()).read_bytes()


def is_text(data: bytes) -> bool:
    try:
        return "\x00" not in data.decode("utf-8")
    except UnicodeDecodeError:
        return False


def offline_env(root: Path, **extra: str) -> dict[str, str]:
    """A briefd installation whose services are down: these tests are about the inbox only."""
    return Workspace(root=root, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted").env(**extra)


def run_once(root: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`briefd run --once`: it must finish by itself (nothing it can't take may keep it waiting)."""
    result = subprocess.run([BRIEFD, "run", "--once"], env=offline_env(root), cwd=root, text=True,
                            capture_output=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


def all_outbox_bytes(outbox: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(outbox.rglob("*")) if p.is_file())


# --------------------------------------------------------------------------- files still being written


def test_a_growing_file_is_taken_only_once_it_holds_still(tmp_path: Path) -> None:
    with Box(tmp_path, settle=0.5) as b:
        path = b.inbox_dir / "slow.json"
        text = json.dumps({"question": QUESTION, "context": "written in three goes"})
        path.write_text(text[:10])
        assert b.take() == [] and b.left() == ["slow.json"]
        for end in (25, len(text)):
            time.sleep(0.3)  # less than settle: each growth starts the wait again
            with open(path, "a") as handle:
                handle.write(text[len(path.read_text()):end])
            assert b.take() == [], "grew less than settle_seconds ago: not complete yet"
            assert not list(b.outbox.iterdir()), "nothing written for a file still being written"
        time.sleep(0.6)
        [taken] = b.take()
        assert not taken.rejected and taken.brief_id == "slow"
        assert b.store.received_bytes(taken.run_id) == text.encode(), "the whole file, not a prefix"
        assert b.left() == []


def test_a_brief_dropped_before_the_daemon_started_is_taken_at_first_sight(tmp_path: Path) -> None:
    """Issue 22: `run --once` (cron) found briefs dropped long before it started and still waited
    settle_seconds for each, the model idle, though their mtime showed them still that long already.
    Such a file now counts as closed: a valid brief is taken at once; one that cannot be taken is still
    held until this daemon has seen it still for settle_seconds (a writer, or a clock, may disagree)."""
    with Box(tmp_path, settle=30.0) as b:
        old = time.time() - 31.0
        valid = b.drop("yesterday.json", VALID)
        half = b.drop("half.json", VALID[:15])
        for path in (valid, half):
            os.utime(path, (old, old))
        fresh = b.drop("just-now.json", VALID)
        [taken] = b.take()
        assert (taken.brief_id, taken.rejected) == ("yesterday", False), "taken at the first look"
        assert b.left() == ["half.json", "just-now.json"], \
            "a half brief is not rejected on its mtime alone, and one written now still settles"
        assert not (b.outbox / "half").exists() and fresh.exists()


def test_a_half_brief_closed_by_its_writer_is_not_rejected_before_it_settles(tmp_path: Path) -> None:
    """`echo '{"question": "Why' > b.json; echo ' ..."}' >> b.json`: the first close comes with
    half a brief. A closed event used to make it ready at once, and the half was rejected
    and taken away from its writer."""
    with Box(tmp_path, settle=0.5) as b:
        path = b.inbox_dir / "two-goes.json"
        path.write_bytes(VALID[:15])
        b.inbox.notice(path, complete=True)  # what the watcher delivers for IN_CLOSE_WRITE
        assert b.inbox.take_ready() == [], "half a brief, closed 0 s ago: wait, don't reject"
        assert b.left() == ["two-goes.json"] and not (b.outbox / "two-goes").exists()
        with open(path, "ab") as handle:
            handle.write(VALID[15:])
        b.inbox.notice(path, complete=True)
        [taken] = b.inbox.take_ready()
        assert not taken.rejected, "the finished brief is valid and taken at once on close"
        assert b.store.received_bytes(taken.run_id) == VALID


def test_a_file_truncated_and_rewritten_is_judged_on_its_final_bytes(tmp_path: Path) -> None:
    with Box(tmp_path, settle=0.4) as b:
        path = b.inbox_dir / "rewrite.json"
        path.write_bytes(VALID)
        b.inbox.scan()
        with open(path, "wb") as handle:  # an editor saving in place: truncate, then write
            handle.write(b'{"question": ')
            handle.flush()
            b.inbox.notice(path, complete=False)
            assert b.inbox.take_ready() == []
            time.sleep(0.2)
            assert b.take() == [], "truncated 0.2 s ago: not judged yet"
            handle.write(json.dumps("What did the rewrite change?").encode() + b"}")
        assert b.take() == [], "just changed: the wait starts again"
        time.sleep(0.5)
        [taken] = b.take()
        assert not taken.rejected
        assert b"rewrite change" in b.store.received_bytes(taken.run_id)


def test_a_broken_file_is_still_rejected_once_it_has_settled(tmp_path: Path) -> None:
    """Waiting must not become never: a half brief nobody finishes ends as error.json."""
    with Box(tmp_path, settle=0.3) as b:
        path = b.inbox_dir / "abandoned.json"
        path.write_bytes(VALID[:15])
        b.inbox.notice(path, complete=True)
        assert b.inbox.take_ready() == []
        time.sleep(0.4)
        [taken] = b.take()
        assert taken.rejected
        error = error_json(b.outbox / "abandoned")
        assert "not valid JSON" in error["error"] and kept(b.outbox / "abandoned") == VALID[:15]


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_the_daemon_waits_for_a_writer_that_closes_and_reopens(tmp_path: Path) -> None:
    """The real `briefd run` with inotify: a close event with half a brief is not a rejection."""
    (tmp_path / "inbox").mkdir()
    daemon = subprocess.Popen([BRIEFD, "run"], env=offline_env(tmp_path, BRIEFD_SETTLE_SECONDS="2.5"),
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / "inbox" / ".briefd.lock"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.1)
        time.sleep(0.5)
        path = tmp_path / "inbox" / "reopened.json"
        with open(path, "wb") as handle:
            handle.write(VALID[:20])
        time.sleep(1.0)  # closed, half written, for a second
        with open(path, "ab") as handle:
            handle.write(VALID[20:])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and path.exists():
            time.sleep(0.1)
        assert not path.exists(), "taken once complete"
        assert not (tmp_path / "outbox" / "reopened" / "error.json").exists(), "the half was not rejected"
        conn = sqlite3.connect(tmp_path / "briefd.db")
        try:
            rows = conn.execute("SELECT state, received_bytes FROM briefs").fetchall()
        finally:
            conn.close()
        assert [bytes(r[1]) for r in rows] == [VALID] and rows[0][0] != REJECTED
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0


# --------------------------------------------------------------------------- the same name again


def test_the_same_name_dropped_again_is_a_second_run(box: Box) -> None:
    box.drop("again.json", VALID)
    [first] = box.take()
    box.drop("again.json", VALID)  # same name, same bytes, after the first left the inbox
    [second] = box.take()
    assert not first.rejected and not second.rejected
    assert first.brief_id == second.brief_id == "again" and first.run_id != second.run_id
    assert [(r["brief_id"], r["state"]) for r in box.rows()] == [("again", QUEUED), ("again", QUEUED)]
    assert box.left() == []


def test_a_broken_brief_with_the_id_of_a_finished_one_keeps_its_report(box: Box) -> None:
    box.drop("q.json", VALID)
    [first] = box.take()
    folder = box.outbox / "q"  # what the worker leaves after a finished run
    atomic_write_text(folder / "brief.json", VALID.decode())
    atomic_write_text(folder / "report.json", json.dumps({"id": "q", "status": "done",
                                                          "started_at": "2026-01-02T03:04:05Z"}))
    box.store.finish(first.run_id, state="done", stop_reason="plateau")
    box.drop("q.json", b'{"question": "Why?", "depht": "quick"}')
    [second] = box.take()
    assert second.rejected and second.brief_id == "q"
    assert "did you mean 'depth'" in error_json(folder)["error"], "the latest is the rejection"
    earlier = folder / "runs" / "2026-01-02T03-04-05Z"
    assert json.loads((earlier / "report.json").read_text())["status"] == "done", "the first report is kept"
    assert (earlier / "brief.json").read_bytes() == VALID


def test_a_broken_brief_with_the_id_of_a_running_one_leaves_its_files_alone(box: Box) -> None:
    """The first run's brief.json and events.ndjson are live in outbox/q while it runs: a
    rejection there used to archive them mid-run, splitting the run's files in two."""
    box.drop("q.json", VALID)
    box.take()
    run = box.store.claim_next()
    assert run is not None
    folder = box.outbox / "q"  # what run_brief has written by now
    atomic_write_text(folder / "brief.json", VALID.decode())
    atomic_write_text(folder / "events.ndjson", '{"seq": 1, "type": "accepted"}\n')
    box.store.set_outdir_ready(run.run_id)
    bad = b'{"question": 42}'
    box.drop("q.json", bad)
    [rejected] = box.take()
    assert rejected.rejected
    assert sorted(p.name for p in folder.iterdir()) == ["brief.json", "events.ndjson", "runs"]
    assert (folder / "brief.json").read_bytes() == VALID, "the running brief's files stay together"
    [aside] = list((folder / "runs").iterdir())
    assert aside.name.endswith("-rejected")
    assert error_json(aside)["source_file"] == "q.json" and kept(aside) == bad


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_the_same_broken_name_twice_through_briefd_keeps_both_errors(tmp_path: Path) -> None:
    b = Box(tmp_path)
    b.close()
    b.drop("twice.json", b"{not json")
    run_once(tmp_path)
    time.sleep(1.1)  # a new second: its own rejected_at stamp
    b.drop("twice.json", b'{"question": ""}')
    run_once(tmp_path)
    folder = tmp_path / "outbox" / "twice"
    assert "empty" in error_json(folder)["error"] and kept(folder) == b'{"question": ""}'
    [earlier] = list((folder / "runs").iterdir())
    assert "not valid JSON" in error_json(earlier)["error"] and kept(earlier) == b"{not json"
    assert [r["state"] for r in b.rows()] == [REJECTED, REJECTED]


# --------------------------------------------------------------------------- links, folders, FIFOs, permissions


def private_brief(tmp_path: Path, marker: str) -> tuple[Path, bytes]:
    """A brief outside the inbox (private/secret.json) whose question carries `marker`, and its bytes: what a
    link in the inbox must never copy into the outbox nor change."""
    secret = tmp_path / "private" / "secret.json"
    secret.parent.mkdir()
    secret_bytes = json.dumps({"question": f"{marker}: must not reach the outbox"}).encode()
    secret.write_bytes(secret_bytes)
    return secret, secret_bytes

@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_symlinks_are_rejected_and_never_followed(tmp_path: Path) -> None:
    """Decision (daemon/intake/inbox.py): a link is rejected whatever it points to; the target is never
    opened, so nothing outside the inbox is copied into the outbox; the target is untouched."""
    b = Box(tmp_path)
    b.close()
    secret, secret_bytes = private_brief(tmp_path, "TOP-SECRET-7f3a")
    os.symlink(secret, b.inbox_dir / "secret.json")
    os.symlink("/etc/passwd", b.inbox_dir / "passwd.json")
    os.symlink(tmp_path / "nowhere.json", b.inbox_dir / "dangling.json")
    run_once(tmp_path)
    assert b.left() == [], "the links themselves left the inbox"
    for brief_id, target in (("secret", str(secret)), ("passwd", "/etc/passwd"),
                             ("dangling", str(tmp_path / "nowhere.json"))):
        folder = tmp_path / "outbox" / brief_id
        error = error_json(folder)
        assert "symbolic link" in error["error"] and target in error["error"]
        assert error["details"]["link_target"] == target and error["details"]["reason"] == "symlink"
        assert sorted(p.name for p in folder.iterdir()) == ["error.json"], "no bytes were read to keep"
    everything = all_outbox_bytes(tmp_path / "outbox")
    assert b"TOP-SECRET-7f3a" not in everything and b"root:" not in everything
    assert secret.read_bytes() == secret_bytes, "the target is untouched"
    assert [r["state"] for r in b.rows()] == [REJECTED] * 3


def test_a_link_swapped_in_after_the_check_is_not_followed(box: Box, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: lstat says a regular file, then it becomes a link just before it is opened."""
    secret = tmp_path / "secret.txt"
    secret.write_text('{"question": "SECRET-race"}')
    path = box.drop("race.json", VALID)
    real_open = os.open
    swapped: list[bool] = []

    def swap_then_open(p: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(os.fsdecode(p)) == path and not swapped:
            swapped.append(True)
            os.unlink(path)
            os.symlink(secret, path)
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr("briefd.daemon.intake.inbox.os.open", swap_then_open)
    box.inbox.notice(path, complete=True)
    assert box.inbox.take_ready() == [] and swapped, "not read through the link"
    monkeypatch.undo()
    [taken] = box.take()
    assert taken.rejected and "symbolic link" in (taken.error or "")
    assert b"SECRET-race" not in all_outbox_bytes(box.outbox) + b"".join(
        bytes(r["received_bytes"] or b"") for r in box.rows())
    assert secret.read_text() == '{"question": "SECRET-race"}'


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_hard_links_are_rejected_and_never_read(tmp_path: Path) -> None:
    """Issue 8 #13: `ln secret inbox/x.json` gives the inbox a second name for a file outside it;
    briefd, perhaps running as another user, must not copy it out. Refused like a symlink, and
    its content reaches neither the outbox nor the store; the file itself is untouched."""
    b = Box(tmp_path)
    b.close()
    secret, secret_bytes = private_brief(tmp_path, "TOP-SECRET-h4rd")
    os.link(secret, b.inbox_dir / "linked.json")
    b.drop("fine.json", b"[]")
    run_once(tmp_path)
    assert b.left() == [], "the link's name left the inbox"
    folder = tmp_path / "outbox" / "linked"
    error = error_json(folder)
    assert "hard link" in error["error"] and "cp, not ln" in error["error"]
    assert error["details"]["reason"] == "hard link"
    assert sorted(p.name for p in folder.iterdir()) == ["error.json"], "no bytes were read to keep"
    stored = b"".join(bytes(r["received_bytes"] or b"") for r in b.rows())
    assert b"TOP-SECRET-h4rd" not in all_outbox_bytes(tmp_path / "outbox") + stored
    assert secret.read_bytes() == secret_bytes and os.stat(secret).st_nlink == 1, "the file lives on, unread"
    assert error_json(tmp_path / "outbox" / "fine")["source_file"] == "fine.json", "the others are taken"
    assert [r["state"] for r in b.rows()] == [REJECTED] * 2


def test_a_hard_link_made_after_the_check_is_not_read(box: Box, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: lstat sees one name, then a second name appears just before the file is opened."""
    path = box.drop("race.json", json.dumps({"question": "SECRET-link-race"}).encode())
    real_open = os.open
    linked: list[bool] = []

    def link_then_open(p: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(os.fsdecode(p)) == path and not linked:
            linked.append(True)
            os.link(path, tmp_path / "elsewhere.json")
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr("briefd.daemon.intake.inbox.os.open", link_then_open)
    box.inbox.notice(path, complete=True)
    [taken] = box.inbox.take_ready()
    assert linked and taken.rejected and "hard link" in (taken.error or "")
    assert b"SECRET-link-race" not in all_outbox_bytes(box.outbox) + b"".join(
        bytes(r["received_bytes"] or b"") for r in box.rows())


@pytest.mark.parametrize("bad_id, why", [(".x", "hidden folder"), ("..hidden", "hidden folder"),
                                         ("-rf", "read as an option"), ("--help", "read as an option")])
def test_an_explicit_id_that_is_hidden_or_option_like_is_refused(box: Box, bad_id: str, why: str) -> None:
    """Issue 8 #13: an explicit id names outbox/<id>; ".x" would be a hidden folder and "-rf" one
    that `rm`, `ls` or `cd` read as an option. Refused at validation, in the inbox as in submit."""
    data = json.dumps({"question": QUESTION, "id": bad_id}).encode()
    box.drop("named.json", data)
    [taken] = box.take()
    assert taken.rejected and taken.brief_id == "named"
    error = error_json(box.outbox / "named")
    assert error["details"]["field"] == "id" and why in error["error"]
    assert kept(box.outbox / "named") == data
    assert sorted(p.name for p in box.outbox.iterdir()) == ["named"], "no hidden or option-like folder"
    brief = box.root / "elsewhere" / "named.json"
    brief.parent.mkdir()
    brief.write_bytes(data)
    submitted = subprocess.run([BRIEFD, "submit", str(brief)], env=offline_env(box.root), cwd=box.root,
                               text=True, capture_output=True, timeout=60)
    assert submitted.returncode == 2 and why in submitted.stderr, submitted.stderr
    assert box.left() == [], "submit wrote nothing into the inbox"


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_a_directory_and_a_fifo_named_json_are_left_in_place_with_a_notice(tmp_path: Path) -> None:
    b = Box(tmp_path)
    b.close()
    folder = b.inbox_dir / "folder.json"
    folder.mkdir()
    (folder / "inside.json").write_bytes(VALID)
    os.mkfifo(b.inbox_dir / "pipe.json")
    b.drop("fine.json", b"[]")
    started = time.monotonic()
    run_once(tmp_path)
    assert time.monotonic() - started < 30, "a FIFO never blocks the daemon"
    assert b.left() == ["folder.json", "pipe.json"], "the user's folder and FIFO are not briefd's to remove"
    assert (folder / "inside.json").read_bytes() == VALID
    for brief_id, word in (("folder", "directory"), ("pipe", "FIFO")):
        error = error_json(tmp_path / "outbox" / brief_id)
        assert word in error["error"] and "stays in the inbox" in error["error"]
        assert error["details"]["left_in_inbox"] is True
    assert error_json(tmp_path / "outbox" / "fine")["source_file"] == "fine.json", "the others are taken"
    run_once(tmp_path)  # a restart says it again only if something changed
    assert not (tmp_path / "outbox" / "folder" / "runs").exists()
    assert not (tmp_path / "outbox" / "pipe" / "runs").exists()


def test_an_unreadable_file_stays_with_a_notice_and_is_taken_once_readable(
        box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated EACCES (tests often run as root, who reads any file whatever its mode).
    chmod changes only the ctime: the retry used to wait for an mtime change that never came."""
    path = box.drop("locked.json", VALID)
    real_open = os.open

    def refuse(p: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(os.fsdecode(p)) == path:
            raise PermissionError(13, "Permission denied", str(p))
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr("briefd.daemon.intake.inbox.os.open", refuse)
    assert box.take() == [] and box.take() == []
    assert box.left() == ["locked.json"]
    error = error_json(box.outbox / "locked")
    assert "cannot be read" in error["error"] and "chmod" in error["error"]
    assert error["details"]["errno"] == "EACCES"
    monkeypatch.undo()
    assert box.take() == [], "nothing changed: not tried again in a loop"
    time.sleep(0.05)  # past the kernel's coarse timestamp tick
    os.chmod(path, 0o640)  # the user fixes the permissions: mode and ctime move, mtime does not
    [taken] = box.take()
    assert not taken.rejected and taken.brief_id == "locked" and box.left() == []


def test_a_real_chmod_000_file_is_left_in_place(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root, where chmod 000 does not stop reading; it runs as any other user "
                    "(the simulated EACCES test above covers root)")
    with Box(tmp_path) as b:
        path = b.drop("locked.json", VALID)
        os.chmod(path, 0)
        assert b.take() == [] and b.left() == ["locked.json"]
        assert "cannot be read" in error_json(b.outbox / "locked")["error"]
        os.chmod(path, 0o644)
        [taken] = b.take()
        assert not taken.rejected


def test_an_outbox_it_cannot_write_leaves_the_file_and_takes_the_others(box: Box) -> None:
    (box.outbox / "blocked").write_text("a file where the folder would go")
    box.drop("blocked.json", b"{broken")
    box.drop("fine.json", b"{broken too")
    taken = box.take()
    assert [t.brief_id for t in taken] == ["fine"], "one file that can't be written never stops the others"
    assert box.left() == ["blocked.json"], "never removed before its rejection is kept"
    assert (box.inbox_dir / "blocked.json").read_bytes() == b"{broken"


# --------------------------------------------------------------------------- names


NAMES = {
    "with spaces.json": "with-spaces",
    "café crème.json": "caf-cr-me",
    "cafe\u0301.json": "cafe",                      # NFD: e + combining acute
    "\u202eevil\u202c.json": "evil",                # RTL override around the name
    "日本語.json": None,                              # nothing usable: brief-<hash>
    "UPPER.JSON": "UPPER",
    "-.. dots ...json": "dots",
    "x" * 240 + ".json": "x" * 100,
}


@pytest.mark.parametrize("name", list(NAMES))
def test_names_give_safe_ids_and_folders(box: Box, name: str) -> None:
    box.drop(name, b'{"question": 1}')
    [taken] = box.take()
    expected = NAMES[name] or id_from_filename(name)
    assert taken.rejected and taken.brief_id == expected and valid_id(taken.brief_id)
    folder = box.outbox / taken.brief_id
    assert folder.parent == box.outbox and not folder.name.startswith(".")
    # the name as received, through the one cleaning door (an RTL override never reaches a terminal)
    assert error_json(folder)["source_file"] == clean(name)


def test_nfc_and_nfd_names_are_two_files_and_two_briefs(box: Box) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "résumé.json"), unicodedata.normalize("NFD", "résumé.json")
    assert nfc != nfd
    box.drop(nfc, VALID)
    box.drop(nfd, VALID)
    taken = box.take()
    assert len(taken) == 2 and all(not t.rejected and valid_id(t.brief_id) for t in taken)
    assert sorted(r["source_file"] for r in box.rows()) == sorted([nfc, nfd])


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_a_name_that_is_not_utf8_is_rejected_by_briefd_without_crashing(tmp_path: Path) -> None:
    """Linux names are bytes: b'\\xff\\xfe' decodes with surrogate escapes, which SQLite and
    UTF-8 JSON refuse; rejecting such a file used to crash `briefd run --once`."""
    b = Box(tmp_path)
    b.close()
    b.drop(b"\xff\xfe broken.json", b"{")
    run_once(tmp_path)
    assert b.left() == []
    error = error_json(tmp_path / "outbox" / "broken")
    assert error["source_file"] == "\ufffd\ufffd broken.json" and kept(tmp_path / "outbox" / "broken") == b"{"
    assert [(r["source_file"], r["state"]) for r in b.rows()] == [("\ufffd\ufffd broken.json", REJECTED)]


def test_a_valid_brief_whose_name_is_not_utf8_is_accepted(box: Box) -> None:
    box.drop(b"caf\xe9.json", VALID)  # a Latin-1 name
    [taken] = box.take()
    assert not taken.rejected and taken.brief_id == "caf" and box.left() == []
    [row] = box.rows()
    assert row["source_file"] == "caf\ufffd.json" and bytes(row["received_bytes"]) == VALID


IGNORED = [".hidden.json", "draft.json.tmp", "draft.json.part", "draft.json~", "notes.txt", "brief.json.swp",
           "._brief.json", ".DS_Store", "brief.jsonx", "brief.tmp"]


@pytest.mark.lab  # runs the briefd daemon in a subprocess
def test_ignored_names_are_never_touched(tmp_path: Path) -> None:
    b = Box(tmp_path)
    b.close()
    for name in IGNORED:
        b.drop(name, VALID)
    b.drop("taken.json", b"{")
    run_once(tmp_path)
    assert b.left() == sorted(IGNORED)
    assert all((b.inbox_dir / name).read_bytes() == VALID for name in IGNORED)
    assert sorted(p.name for p in (tmp_path / "outbox").iterdir()) == ["taken"]


# --------------------------------------------------------------------------- size


@pytest.mark.parametrize("size", [MAX_BRIEF_BYTES + 1, 5 * MAX_BRIEF_BYTES + 3])
def test_a_brief_over_the_size_cap_is_rejected_and_kept_whole(box: Box, size: int) -> None:
    """Only MAX_BRIEF_BYTES + 1 bytes are read to judge it; the user's whole file is kept.
    The kept copy used to be that head alone, and the error gave its size, not the file's."""
    head = b'{"question": "Why?", "context": "'
    data = head + b"x" * (size - len(head) - 2) + b'"}'
    box.drop("huge.json", data)
    [taken] = box.take()
    assert taken.rejected and box.left() == []
    folder = box.outbox / "huge"
    error = error_json(folder)
    assert "too large" in error["error"] and f"{size:,} bytes" in error["error"] and "1 MiB" in error["error"]
    assert error["details"]["size"] == size and error["details"]["limit"] == MAX_BRIEF_BYTES
    assert (folder / "brief.json").read_bytes() == data, "every byte the user dropped is kept"


def test_an_oversize_binary_file_is_kept_as_brief_bin(box: Box) -> None:
    data = bytes(range(256)) * (MAX_BRIEF_BYTES // 256 + 10)
    box.drop("blob.json", data)
    [taken] = box.take()
    assert taken.rejected
    assert (box.outbox / "blob" / "brief.bin").read_bytes() == data


def test_a_crash_before_the_unlink_is_finished_at_restart_not_taken_twice(box: Box) -> None:
    """Recorded, then killed before the file left the inbox: the restart removes it. For an
    oversize file the record holds only its head, and the restart used to hash the whole
    file (reading all of it into memory), miss, and take it a second time."""
    big = box.drop("big.json", b"[" + b" " * (MAX_BRIEF_BYTES + 10) + b"]")
    link = box.inbox_dir / "link.json"
    os.symlink("/etc/passwd", link)
    for path, received in ((big, big.read_bytes()[:MAX_BRIEF_BYTES + 1]), (link, b"/etc/passwd")):
        box.store.add_rejection(brief_id=path.stem, source_file=path.name, received=received, error="x",
                                details={}, inbox_path=str(path))  # what accept records before the unlink
    assert box.inbox.reconcile() == 2
    assert box.left() == [] and box.take() == [] and len(box.rows()) == 2


# --------------------------------------------------------------------------- thousands at once


def test_two_thousand_briefs_at_once_are_each_taken_exactly_once(box: Box) -> None:
    count = 2000
    names = [f"burst-{i:04d}.json" for i in range(count)]
    for i, name in enumerate(names):
        box.drop(name, json.dumps({"question": f"Question number {i}?"}).encode())
    started = time.perf_counter()
    taken: list[Accepted] = []
    turns = 0
    while batch := box.take():
        assert len(batch) <= TAKE_PER_CALL, "a burst is taken a slice per turn, never holding the event loop"
        taken += batch
        turns += 1
    elapsed = time.perf_counter() - started
    print(f"\n{count} briefs taken in {elapsed:.2f} s ({elapsed / count * 1000:.1f} ms each, {turns} turns)")
    assert box.take() == [], "nothing taken twice"
    assert len(taken) == count and not any(t.rejected for t in taken)
    assert sorted(t.brief_id for t in taken) == [n[:-5] for n in names]
    rows = box.rows()
    assert len(rows) == count and len({r["run_id"] for r in rows}) == count
    assert sorted(r["source_file"] for r in rows) == names, "every file exactly once"
    assert all(json.loads(r["received_bytes"])["question"] == f"Question number {int(r['brief_id'][6:])}?"
               for r in rows), "each row holds its own file's bytes"
    assert box.left() == []


# --------------------------------------------------------------------------- property tests


def take_one(name: str, data: bytes) -> None:
    """Drop one file into a fresh installation, let the Inbox take it, check the outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        with Box(Path(tmp)) as b:
            b.drop(name, data)
            taken = b.take()
            assert b.left() == [], "taken out of the inbox"
            [result] = taken
            [row] = b.rows()
            assert bytes(row["received_bytes"]) == data[:MAX_BRIEF_BYTES + 1]
            assert valid_id(result.brief_id)
            if not result.rejected:
                assert row["state"] == QUEUED and len(data) <= MAX_BRIEF_BYTES
                return
            assert row["state"] == REJECTED
            folder = b.outbox / result.brief_id
            assert folder.parent == b.outbox
            error = error_json(folder)
            assert error["source_file"] == clean(name) and error["error"] == clean(result.error)
            assert "field" in error["details"]
            assert kept(folder) == data
            assert (folder / ("brief.json" if is_text(data) else "brief.bin")).exists()


def take_and_read_error(data: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        with Box(Path(tmp)) as b:
            b.drop("fuzz.json", data)
            [result] = b.take()
            assert result.rejected and kept(b.outbox / "fuzz") == data
            return error_json(b.outbox / "fuzz")["error"]


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=20))
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["question", "id", "depth", "formats", "x"]) | st.text(max_size=8),
                                            inner, max_size=4)),
    max_leaves=20,
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(json_values)
def test_any_json_value_dropped_in_is_taken_or_rejected_with_its_bytes(value: Any) -> None:
    try:
        data = json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only a \u escape can carry it
        data = json.dumps(value).encode("ascii")
    take_one("value.json", data)


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_dropped_in_are_rejected_with_their_bytes(data: bytes) -> None:
    take_one("bytes.json", data)


# Any character a name can hold on Linux (no "/" or NUL), as long as the name stays a candidate.
name_text = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]), min_size=1,
                    max_size=40).filter(lambda t: not t.startswith(".") and len(os.fsencode(t + ".json")) <= 255)


@FUZZ
@given(name_text, st.sampled_from([VALID, b"{", b"\xff\xfe\x00", b'{"question": 7}']))
def test_any_name_gives_a_safe_id_and_folder(stem: str, data: bytes) -> None:
    take_one(stem + ".json", data)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=5000, max_value=MAX_BRIEF_BYTES // 2 - 10), st.sampled_from(["[", '{"a":']))
def test_deep_nesting_is_rejected_naming_the_nesting(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    data = ('{"question": "q", "search": ' + opener * depth + "1" + closer * depth + "}").encode()
    data = data[:MAX_BRIEF_BYTES]
    assert "nested too deeply" in take_and_read_error(data)


def test_one_hundred_thousand_brackets_are_rejected_naming_the_nesting() -> None:
    data = b"[" * 100_000 + b"]" * 100_000
    assert "nested too deeply" in take_and_read_error(data)


def test_a_context_nested_five_thousand_deep_is_refused_saying_where() -> None:
    """Issue 29 #13: error.json says the brief is nested too deeply, and where the nesting begins (jsontext's
    one bound, which eval files share)."""
    data = ('{"question": "What is the default?", "context": ' + "[" * 5000 + "]" * 5000 + "}").encode()
    error = take_and_read_error(data)
    assert "nested too deeply" in error and "at context[0][0]" in error, error


UNICODE_CASES: dict[str, tuple[bytes, str | None]] = {
    "lone high surrogate escape": (b'{"question": "why \\ud800?"}', "surrogate"),
    "lone low surrogate in a key": (b'{"question": "why?", "\\udc00": 1}', "surrogate"),
    "surrogate encoded as UTF-8": (b'{"question": "\xed\xa0\x80"}', "UTF-8"),
    "BOM then a valid brief": (b"\xef\xbb\xbf" + VALID, None),
    "BOM then nothing": (b"\xef\xbb\xbf", "empty"),
    "UTF-16 with BOM": ('{"question": "why?"}'.encode("utf-16"), "UTF-16"),
    "raw NUL inside a string": (b'{"question": "why\x00?"}', "not valid JSON"),
    "NUL escape in the question": (b'{"question": "why\\u0000?"}', None),
    "RTL marks in the question": ('{"question": "\u202ewhy\u200f?"}'.encode(), None),
    "NFD question": (json.dumps({"question": unicodedata.normalize("NFD", "Qu'a dit Médée?")},
                                ensure_ascii=False).encode(), None),
    "Latin-1 bytes": ('{"question": "caf\u00e9?"}'.encode("latin-1"), "UTF-8"),
    "NaN": (b'{"question": "why?", "max_rounds": NaN}', "NaN"),
    "integer of 5000 digits": (b'{"question": "why?", "max_rounds": ' + b"9" * 5000 + b"}", "digits"),
    "duplicate key": (b'{"question": "a?", "question": "b?"}', "more than once"),
}


@pytest.mark.parametrize("case", list(UNICODE_CASES))
def test_unicode_and_json_edge_cases_end_as_a_brief_or_a_named_error(case: str) -> None:
    data, words = UNICODE_CASES[case]
    take_one("edge.json", data)
    if words is not None:
        assert words in take_and_read_error(data)


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")), st.booleans())
def test_any_text_with_surrogates_and_bom_is_handled(data: bytes, bom: bool) -> None:
    take_one("text.json", (b"\xef\xbb\xbf" if bom else b"") + data)


@settings(max_examples=6, deadline=None)
@given(st.integers(min_value=MAX_BRIEF_BYTES + 1, max_value=3 * MAX_BRIEF_BYTES))
def test_any_size_over_the_cap_is_rejected_naming_the_limit(size: int) -> None:
    data = b"[" + b"1," * ((size - 3) // 2) + b"1]"
    data = data + b" " * (size - len(data))
    assert len(data) == size
    error = take_and_read_error(data)
    assert "too large" in error and f"{size:,}" in error

