"""Questions asked again (issue 12, part 4): a brief with `every` runs on its schedule, the
schedule kept in the store across restarts, one catch-up run after downtime, never a burst.

The unit tests drive store/schedules.py through daemon/intake/series.py on a real store file with a
simulated clock (every moment is passed in). The lab tests run the real daemon; there the clock
cannot be moved, so time passes the other way round: the series' stored times are moved back by
as much as the clock would have moved on (`pass_days`). The scheduler compares only those times
with now, so for it the two are the same thing, and the daemon runs unaltered.
"""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from briefd.daemon.intake import series
from briefd.daemon.core.brief import Brief, parse_brief
from briefd.daemon.core.schedule import parse_iso
from briefd.store import CANCELLED, DONE, QUEUED, Store
from briefd.store.db import iso_utc
from briefd.store.schedules import Schedules
from tests.conftest import BRIEFD, Workspace, wait_for
from lab.corpus import TOPICS

WEEK = timedelta(days=7)
T0 = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)  # a Tuesday


def weekly(every: str | None = "7d", brief_id: str = "weekly") -> tuple[Brief, bytes]:
    fields = {"id": brief_id, "question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1}
    if every is not None:
        fields["every"] = every
    received = json.dumps(fields).encode()
    return parse_brief(received, f"{brief_id}.json"), received


def accept(store: Store, now: datetime, every: str | None = "7d", brief_id: str = "weekly") -> int:
    """What the inbox does with an accepted file (daemon.inbox records through series.record_accepted)."""
    brief, received = weekly(every, brief_id)
    return series.record_accepted(store, brief, source_file=f"{brief_id}.json", received=received,
                                  brief_json=json.dumps(brief.to_json()), inbox_path=f"/inbox/{brief_id}.json",
                                  now=now)


def finish_all(store: Store) -> None:
    """The daemon's part: claim every queued run and end it done."""
    while (run := store.claim_next()) is not None:
        store.finish(run.run_id, state=DONE, stop_reason="target_reached")


def run_ids(store: Store, brief_id: str = "weekly") -> list[int]:
    return [r[0] for r in store.db.execute("SELECT run_id FROM briefs WHERE brief_id = ? ORDER BY run_id",
                                           [brief_id]).fetchall()]


# --------------------------------------------------------------------------- the store, on a simulated clock


def test_a_weekly_series_runs_once_a_week_across_restarts(tmp_path: Path) -> None:
    db = tmp_path / "briefd.db"
    store = Store(db)
    first = accept(store, T0)
    assert series.start_due(store, T0) == [], "the accepted brief is the first run: nothing more is due"
    assert Schedules(store).get("weekly").next_run_at == iso_utc(T0 + WEEK)
    finish_all(store)
    assert series.start_due(store, T0 + WEEK - timedelta(seconds=1)) == []
    store.close()

    store = Store(db)  # a restart: the series is in the store
    [turn] = series.start_due(store, T0 + WEEK)
    assert turn.run_id is not None and turn.next_run_at == iso_utc(T0 + 2 * WEEK)
    assert series.start_due(store, T0 + WEEK) == [], "a restart at the same moment starts nothing more"
    run, accepted = store.get_brief(turn.run_id), store.get_brief(first)
    assert run is not None and accepted is not None
    assert (run.state, run.brief_id, run.brief_json) == (QUEUED, "weekly", accepted.brief_json)
    assert store.received_bytes(turn.run_id) == store.received_bytes(first), "asked again with the bytes received"
    assert turn.run_id not in [left[0] for left in store.inbox_leftovers()], "no inbox file for start-up to tidy"
    assert any(e["type"] == "signal" and e["message"] == "started by its schedule" for e in store.events(turn.run_id))
    now = Schedules(store).get("weekly")
    assert (now.runs, now.last_run_id, now.last_run_at) == (2, turn.run_id, iso_utc(T0 + WEEK))
    store.close()


def test_downtime_costs_one_catch_up_run_and_the_next_is_counted_from_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    accept(store, T0)
    finish_all(store)
    back = T0 + 3 * WEEK + timedelta(hours=5)  # three turns missed while the daemon was down
    turns = series.start_due(store, back)
    assert len(turns) == 1 and turns[0].run_id is not None, "one catch-up run, never a burst"
    assert turns[0].next_run_at == iso_utc(back + WEEK), "the next run a week after the catch-up"
    assert series.start_due(store, back + timedelta(days=6)) == []
    assert len(run_ids(store)) == 2
    store.close()


def test_a_cron_series_catches_up_once_then_keeps_to_its_cron_times(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    accept(store, T0, every="0 6 * * 1")  # 06:00 UTC on Mondays; accepted on a Tuesday
    monday = datetime(2026, 11, 30, 6, 0, tzinfo=timezone.utc)
    assert Schedules(store).get("weekly").next_run_at == iso_utc(monday)
    finish_all(store)
    late = monday + 2 * WEEK + timedelta(days=2)  # a Wednesday, two Mondays missed
    [turn] = series.start_due(store, late)
    assert turn.run_id is not None and turn.next_run_at == iso_utc(monday + 3 * WEEK)
    store.close()


def test_a_turn_is_skipped_while_the_previous_run_is_still_queued(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    first = accept(store, T0)  # never claimed: still queued a week later (a service down all week)
    [turn] = series.start_due(store, T0 + WEEK)
    assert (turn.run_id, turn.busy_run) == (None, first)
    assert turn.next_run_at == iso_utc(T0 + 2 * WEEK), "the turn is skipped, the next one scheduled"
    assert run_ids(store) == [first] and Schedules(store).get("weekly").runs == 1
    finish_all(store)
    [turn] = series.start_due(store, T0 + 2 * WEEK)
    assert turn.run_id is not None and len(run_ids(store)) == 2
    store.close()


def test_a_turn_that_fails_half_way_starts_nothing_and_is_taken_once_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run and the series' next time are one transaction: a failure (or a crash) between
    them leaves neither, so the turn is neither lost nor taken twice."""
    store = Store(tmp_path / "briefd.db")
    accept(store, T0)
    finish_all(store)

    def broken(run_id: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(store, "mark_inbox_removed", broken)
    with pytest.raises(OSError):
        series.start_due(store, T0 + WEEK)
    assert len(run_ids(store)) == 1 and Schedules(store).get("weekly").next_run_at == iso_utc(T0 + WEEK)
    monkeypatch.undo()
    assert [t.run_id is not None for t in series.start_due(store, T0 + WEEK)] == [True]
    assert len(run_ids(store)) == 2
    store.close()


def test_a_brief_submitted_again_replaces_the_series_or_is_one_more_run_of_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    accept(store, T0)
    finish_all(store)
    accept(store, T0 + timedelta(days=2), every="1d")  # the same id with another `every`: replaced
    again = Schedules(store).get("weekly")
    assert (again.every, again.next_run_at, again.runs) == ("1d", iso_utc(T0 + timedelta(days=3)), 1)
    finish_all(store)
    accept(store, T0 + timedelta(days=2, hours=1), every=None)  # the same id without `every`: one more run
    assert [s.brief_id for s in Schedules(store).active()] == ["weekly"], "the series goes on: only cancel ends it"
    finish_all(store)
    assert [t.brief_id for t in series.start_due(store, T0 + 5 * WEEK)] == ["weekly"]
    finish_all(store)
    assert series.end(store, "weekly") is not None and series.start_due(store, T0 + 6 * WEEK) == []
    accept(store, T0, brief_id="other")
    assert series.end(store, "other") is not None and series.end(store, "other") is None
    assert Schedules(store).active() == [] and series.start_due(store, T0 + 5 * WEEK) == []
    store.close()


# --------------------------------------------------------------------------- status and cancel


def briefd(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BRIEFD, "--db", str(db), *args], text=True, capture_output=True, timeout=60,
                          cwd=db.parent)


def test_status_lists_each_series_and_cancel_ends_one_that_has_no_run_going(tmp_path: Path) -> None:
    db = tmp_path / "briefd.db"
    store = Store(db)
    accept(store, T0)
    finish_all(store)
    store.close()
    [shown] = json.loads(briefd(db, "status", "--json").stdout)["series"]
    assert (shown["id"], shown["every"], shown["next_run_at"], shown["runs"], shown["last_run_state"]) == (
        "weekly", "7d", iso_utc(T0 + WEEK), 1, DONE)
    text = briefd(db, "status").stdout
    assert f"series  weekly every 7d: next run {iso_utc(T0 + WEEK)}; 1 run so far" in text
    said = briefd(db, "cancel", "weekly")
    assert said.returncode == 0, said.stderr
    assert "series ended" in said.stdout and "no run of it is queued or running" in said.stdout
    assert json.loads(briefd(db, "status", "--json").stdout)["series"] == []
    again = briefd(db, "cancel", "weekly")
    assert again.returncode == 2 and "not asked again on a schedule" in again.stderr


def test_cancel_ends_the_series_and_its_queued_run(tmp_path: Path) -> None:
    db = tmp_path / "briefd.db"
    store = Store(db)
    first = accept(store, T0)  # still queued
    store.close()
    said = briefd(db, "cancel", "weekly")
    assert said.returncode == 0, said.stderr
    assert "series ended" in said.stdout and "cancelled before it started" in said.stdout
    store = Store(db)
    try:
        latest = store.latest_run("weekly")
        assert latest is not None and (latest.run_id, latest.state) == (first, CANCELLED)
        assert Schedules(store).active() == []
    finally:
        store.close()
    assert json.loads((tmp_path / "outbox" / "weekly" / "report.json").read_text())["status"] == CANCELLED


# --------------------------------------------------------------------------- the real daemon, on the lab


def pass_days(db: Path, brief_id: str, days: float) -> None:
    """`days` pass for the series: its stored times move back by as much (module docstring)."""
    store = Store(db)
    try:
        row = store.db.execute("SELECT created_at, next_run_at, last_run_at FROM schedules WHERE brief_id = ?",
                               [brief_id]).fetchone()
        moved = [iso_utc(parse_iso(at) - timedelta(days=days)) if at else None for at in row]
        store.db.execute("UPDATE schedules SET created_at = ?, next_run_at = ?, last_run_at = ? WHERE brief_id = ?",
                         [*moved, brief_id])
    finally:
        store.close()


def series_row(db: Path, brief_id: str = "weekly") -> dict:
    store = Store(db)
    try:
        found = Schedules(store).get(brief_id)
        assert found is not None, f"no series {brief_id!r} in the store"
        return {"runs": found.runs, "next": parse_iso(found.next_run_at), "state": found.last_run_state,
                "cancelled": found.cancelled_at, "ids": run_ids(store, brief_id)}
    finally:
        store.close()


def runs_done(ws: Workspace) -> int:
    """The series' runs so far once its last one is done; 0 while none is (or no report exists yet:
    the store is not opened before the daemon has made it)."""
    if not (ws.outbox / "weekly" / "report.json").exists():
        return 0
    store = Store(ws.db)
    try:
        found = Schedules(store).get("weekly")
    finally:
        store.close()
    return found.runs if found is not None and found.last_run_state == DONE else 0


def once(ws: Workspace) -> tuple[datetime, datetime]:
    """`briefd run --once`; returns the moments before and after it."""
    before = datetime.now(timezone.utc).replace(microsecond=0)
    done = ws.briefd("run", "--once", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return before, datetime.now(timezone.utc) + timedelta(seconds=1)


LAB_BRIEF = {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1, "every": "7d"}


@pytest.mark.slow
def test_a_weekly_brief_runs_once_a_week_across_restarts_downtime_and_cancel(workspace: Workspace) -> None:
    ws = workspace
    ws.drop("weekly.json", LAB_BRIEF)
    before, after = once(ws)
    first = series_row(ws.db)
    assert len(first["ids"]) == 1 and first["runs"] == 1 and first["state"] == DONE
    assert before + WEEK <= first["next"] <= after + WEEK, "the next run a week after it was accepted"
    assert ws.report("weekly")["status"] == DONE

    once(ws)  # a restart at once: nothing is due
    assert series_row(ws.db)["ids"] == first["ids"] and not (ws.outbox / "weekly" / "runs").exists()

    pass_days(ws.db, "weekly", 7)
    once(ws)
    second = series_row(ws.db)
    assert len(second["ids"]) == 2 and second["runs"] == 2 and second["state"] == DONE
    once(ws)  # a restart right after a scheduled run: nothing is due until next week
    assert series_row(ws.db)["ids"] == second["ids"]
    # the scheduled run asked the same brief again: its pages checked (none changed), no answer paid again
    rerun = ws.report("weekly")
    assert rerun["changes"]["nothing_changed"] is True, rerun["changes"]
    assert rerun["usage"]["llm_calls"] == 0 and rerun["usage"]["page_bytes"] == 0, rerun["usage"]

    pass_days(ws.db, "weekly", 21)  # three weeks of downtime
    before, after = once(ws)
    third = series_row(ws.db)
    assert len(third["ids"]) == 3, "one catch-up run, not three"
    assert before + WEEK <= third["next"] <= after + WEEK, "the next run a week from the catch-up"

    said = ws.briefd("cancel", "weekly")
    assert said.returncode == 0 and "series ended" in said.stdout, said.stderr
    pass_days(ws.db, "weekly", 7)
    once(ws)
    assert series_row(ws.db)["ids"] == third["ids"], "a cancelled series is not asked again"
    assert json.loads(ws.briefd("status", "--json").stdout)["series"] == []

    # each earlier run's files under runs/<started>/, the latest run's at the top
    store = Store(ws.db)
    try:
        started = [store.db.execute("SELECT started_at FROM briefs WHERE run_id = ?", [run_id]).fetchone()[0]
                   for run_id in third["ids"]]
    finally:
        store.close()
    archived = sorted((ws.outbox / "weekly" / "runs").iterdir())
    assert [json.loads((folder / "report.json").read_text())["started_at"] for folder in archived] == started[:2]
    assert [folder.name for folder in archived] == [at.replace(":", "-") for at in started[:2]]
    assert ws.report("weekly")["started_at"] == started[2]


def test_the_running_daemon_starts_a_due_series_without_a_restart(workspace: Workspace) -> None:
    ws = workspace
    log = ws.root / "daemon.log"
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(BRIEFD_POLL_SECONDS="0.5"), cwd=ws.root,
                                  stdout=sink, stderr=sink)
    try:
        ws.drop("weekly.json", LAB_BRIEF)
        wait_for(lambda: runs_done(ws) == 1, 180, "the first run to finish")
        pass_days(ws.db, "weekly", 7)
        wait_for(lambda: runs_done(ws) == 2, 180, "the daemon to start and finish the series' second run")
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, log.read_text()[-3000:]
    assert len(series_row(ws.db)["ids"]) == 2
    assert (ws.outbox / "weekly" / "runs").is_dir() and ws.report("weekly")["status"] == DONE
