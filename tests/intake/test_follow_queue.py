"""A follow-up of a brief still queued or running queues behind it (issue 19 #17).

It was refused at every door ("wait until northgate is done"), so a parent and its follow-up could not
be submitted together. Now the doors accept it, the store's queue does not hand it out while a run of
its parent accepted before it is queued or running, and when its turn comes the daemon judges it as
the doors used to: a parent that ended without a done run fails it, naming `follows` and the fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.ops.actions import check_brief, drop_into_inbox
from briefd.daemon.core.briefjson import BriefError
from briefd.daemon.core.settings import Settings
from briefd.store import DONE, FAILED, RUNNING, Store
from lab.corpus import TOPICS
from lab.workspace import BRIEFD, Workspace
from tests.intake.test_inbox_edges import Box, offline_env, run_once

QUESTION = "How deep is the Kestrel River at the bridge?"
KESTREL = {"question": TOPICS["kestrel"].question, "depth": "quick"}


def brief(**fields: Any) -> bytes:
    return json.dumps({"question": QUESTION, **fields}).encode()


def _queued(store: Store, brief_id: str, follows: str | None = None) -> int:
    data = {"question": QUESTION, "id": brief_id, **({"follows": follows} if follows else {})}
    return store.add_brief(brief_id=brief_id, question=QUESTION, source_file=f"{brief_id}.json",
                           received=json.dumps(data).encode(), brief_json=json.dumps(data),
                           inbox_path=f"/nowhere/{brief_id}.json")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store of its own for the test, closed after it."""
    opened = Store(tmp_path / "briefd.db")
    try:
        yield opened
    finally:
        opened.close()


def test_a_follow_up_is_not_taken_until_its_parent_has_finished(store: Store) -> None:
    parent = _queued(store, "northgate")
    child = _queued(store, "northgate-next", follows="northgate")
    other = _queued(store, "other")
    taken = store.claim_next()
    assert taken is not None and taken.run_id == parent
    assert store.get_brief(parent).state == RUNNING  # type: ignore[union-attr]
    taken = store.claim_next()
    assert taken is not None and taken.run_id == other, "the follow-up waits; the queue goes on"
    store.finish(other, state=DONE, stop_reason="max_rounds")
    assert store.claim_next() is None, "its parent is still running"
    assert store.pending_work() == 2
    store.finish(parent, state=DONE, stop_reason="max_rounds")
    taken = store.claim_next()
    assert taken is not None and taken.run_id == child


def test_briefs_following_each_others_later_runs_never_wait_for_ever(store: Store) -> None:
    """a (done) <- b follows a; a asked again following b: b must not wait for the later a, nor a for ever."""
    first = _queued(store, "a")
    assert store.claim_next() is not None
    store.finish(first, state=DONE, stop_reason="max_rounds")
    b = _queued(store, "b", follows="a")
    a_again = _queued(store, "a", follows="b")
    order = []
    while (taken := store.claim_next()) is not None:
        order.append(taken.run_id)
        store.finish(taken.run_id, state=DONE, stop_reason="max_rounds")
    assert order == [b, a_again]


def test_run_once_does_not_wait_for_a_follow_up_behind_a_parent_it_set_aside(store: Store) -> None:
    parent = _queued(store, "p")
    _queued(store, "c", follows="p")
    _queued(store, "g", follows="c")
    assert store.pending_work() == 3
    assert store.pending_work(skip=[parent]) == 0, "parked parent: its follow-ups, however deep, wait too"
    assert store.claim_next(skip=[parent]) is None


def test_the_queue_stays_cheap_with_thousands_of_follow_ups_waiting(store: Store) -> None:
    """2,000 follow-ups behind one running (then set aside) parent: claim_next runs on every turn of the
    daemon's loop and pending_work on every turn of run --once. Measured here: about 8 ms and 10 ms (a
    recursive query that read each brief's JSON once per parent took 2.3 s); the bound is 1 s."""
    parent = _queued(store, "p")
    for n in range(2000):
        _queued(store, f"c{n}", follows="p")
    assert store.claim_next() is not None  # the parent
    started = time.monotonic()
    assert store.claim_next() is None
    claimed_s = time.monotonic() - started
    started = time.monotonic()
    assert store.pending_work(skip=[parent]) == 0
    counted_s = time.monotonic() - started
    assert claimed_s < 1 and counted_s < 1, (claimed_s, counted_s)


def test_the_doors_accept_a_follow_up_of_a_brief_still_queued_or_running(tmp_path: Path) -> None:
    configured = Settings(db=tmp_path / "briefd.db", inbox=tmp_path / "inbox")
    store = Store(configured.db)
    try:
        parent = _queued(store, "northgate")
        child = brief(follows="northgate")
        assert check_brief(configured, child, "c.json").follows == "northgate", "queued: accepted"
        store.claim_next()
        assert check_brief(configured, child, "c.json").follows == "northgate", "running: accepted"
        store.finish(parent, state=FAILED, stop_reason="error", error="the lab says so")
        with pytest.raises(BriefError, match="which failed"):
            check_brief(configured, child, "c.json")
    finally:
        store.close()
    path = tmp_path / "c.json"
    path.write_bytes(brief(follows="northgate"))
    store = Store(configured.db)
    try:
        _queued(store, "northgate")
    finally:
        store.close()
    result = subprocess.run([BRIEFD, "submit", str(path)], env=offline_env(tmp_path), cwd=tmp_path, text=True,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "wait until" not in result.stderr


def test_a_follow_up_whose_parent_failed_while_it_waited_fails_naming_follows(tmp_path: Path) -> None:
    with Box(tmp_path) as box:
        box.drop("northgate.json", brief(id="northgate"))
        [parent] = box.take()
        assert box.store.claim_next() is not None  # the parent is running
        box.drop("northgate-next.json", brief(id="northgate-next", follows="northgate"))
        [child] = box.take()
        assert not child.rejected, "queued behind its running parent, not refused"
        box.store.finish(parent.run_id, state=FAILED, stop_reason="error", error="the lab says so")
    result = run_once(tmp_path)
    report = json.loads((tmp_path / "outbox" / "northgate-next" / "report.json").read_text())
    assert report["status"] == "failed", report
    assert "follows names 'northgate', which failed" in report["error"] and "briefd retry northgate" in report["error"]
    assert "Traceback" not in result.stderr


def test_submit_takes_a_follow_up_with_its_parent_in_one_call_and_the_inbox_takes_the_parent_first(
        tmp_path: Path) -> None:
    """`briefd submit x.json x-more.json`: x-more follows x, which is in no store yet. Files written within
    one tick of the kernel's coarse clock share an mtime, and the inbox then takes them by name:
    "x-more.json" before "x.json", which would reject it ("no brief with that id was ever received")."""
    folder = tmp_path / "briefs"
    folder.mkdir()
    paths = []
    for name in ("a", "b", "c", "d", "e"):
        (folder / f"{name}.json").write_bytes(brief(id=name))
        (folder / f"{name}-more.json").write_bytes(brief(id=f"{name}-more", follows=name))
        paths += [str(folder / f"{name}.json"), str(folder / f"{name}-more.json")]
    with Box(tmp_path) as box:  # its store exists: the door reads it, and finds none of the parents there
        result = subprocess.run([BRIEFD, "submit", *paths], env=offline_env(tmp_path), cwd=tmp_path, text=True,
                                capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr
        taken = box.take()
        assert [t.brief_id for t in taken if t.rejected] == [], [t.error for t in taken if t.rejected]
        assert len(taken) == len(paths)


def test_a_file_dropped_after_another_is_never_older_than_it_whatever_the_clock_says(tmp_path: Path) -> None:
    """The coarse clock, made visible: the parent's mtime a second ahead of the clock (a tie is the same
    case, one tick wide). The follow-up dropped after it must still sort after it in the inbox's order."""
    inbox = tmp_path / "inbox"
    parent = drop_into_inbox(inbox, "x.json", brief(id="x"))
    ahead_ns = time.time_ns() + 1_000_000_000
    os.utime(parent, ns=(ahead_ns, ahead_ns))
    child = drop_into_inbox(inbox, "x-more.json", brief(id="x-more", follows="x"), after=parent)
    assert child.stat().st_mtime_ns > parent.stat().st_mtime_ns
    with Box(tmp_path) as box:
        taken = box.take()
    assert [(t.brief_id, t.rejected) for t in taken] == [("x", False), ("x-more", False)]


def test_a_follow_up_submitted_with_its_parent_starts_after_it_from_its_evidence(
        tmp_path: Path, search_lab: Any, scripted_ollama: Any) -> None:
    (tmp_path / "ws").mkdir()
    ws = Workspace(root=tmp_path / "ws", searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    parent_file, child_file = tmp_path / "kestrel.json", tmp_path / "kestrel-more.json"
    parent_file.write_text(json.dumps(KESTREL))
    child_file.write_text(json.dumps({**KESTREL, "follows": "kestrel", "focus": "repair cost"}))
    submitted = ws.briefd("submit", str(parent_file), str(child_file))
    assert submitted.returncode == 0, submitted.stderr
    assert ws.briefd("run", "--once").returncode == 0
    parent, child = ws.report("kestrel"), ws.report("kestrel-more")
    assert parent["status"] == DONE and child["status"] == DONE, (parent.get("error"), child.get("error"))
    assert child["follows"]["id"] == "kestrel" and child["follows"]["finished_at"] == parent["finished_at"]
    assert child["started_at"] >= parent["finished_at"], "it waited for its parent"
