"""Every door answers as the daemon will (issue 19 #5, #9, #11, #13).

A brief reaches the queue through `briefd submit`, `POST /briefs` or a file in the inbox, and each
door must refuse what the daemon would refuse, naming the field: an `every` that never fires
(croniter raised out of validation: a traceback, a 500, a file retried at every restart), one with
croniter's random or hashed fields (runs minutes apart, against the hour rule), a source these
settings cannot search (accepted, then rejected by the daemon). And `briefd submit` into an inbox
that no daemon serves says so. (A follow-up of a brief still running: tests/intake/test_follow_queue.py.)
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from briefd.daemon.ops.actions import check_brief
from briefd.daemon.core.brief import parse_brief
from briefd.daemon.core.briefjson import BriefError
from briefd.daemon.intake.inbox import acquire_lock
from briefd.daemon.core.schedule import MIN_EVERY_S, ScheduleError, parse_every
from briefd.daemon.core.settings import Settings
from briefd.daemon.sources.sources import refusal
from tests.conftest import wait_for
from lab.servers import free_port
from lab.workspace import BRIEFD
from tests.intake.test_inbox_edges import Box, error_json, offline_env

QUESTION = "How deep is the Kestrel River at the bridge?"
NEVER = "0 0 30 2 *"  # February 30th
REFUSED_EVERY = [
    (NEVER, "never fires"), ("0 6 31 4 *", "never fires"),
    ("R R * * *", "random (R)"), ("r 6 * * *", "random (R)"), ("H H * * *", "hashed (H)"),
    ("17 H(0-5) * * 1", "hashed (H)"),
]


def brief(**fields: Any) -> bytes:
    return json.dumps({"question": QUESTION, **fields}).encode()



@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    with Box(tmp_path) as b:
        yield b


# --------------------------------------------------------------------------- every (#5, #9)


@pytest.mark.parametrize("every, words", REFUSED_EVERY)
def test_an_every_that_never_fires_or_cannot_be_predicted_is_refused_naming_the_field(every: str, words: str) -> None:
    with pytest.raises(BriefError) as caught:
        parse_brief(brief(every=every), "b.json")
    assert caught.value.field == "every"
    assert str(caught.value).startswith(f"every: {every!r} "), str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize("every", ["0 6 * MAR THU", "0 6 * * FRI", "0 0 29 2 *", "0 0 30 2 1", "0 6 1 JAN,APR *"])
def test_month_and_day_names_and_rare_days_are_still_schedules(every: str) -> None:
    """R and H stand alone in a field; in MAR, THU, FRI or APR they are letters of a name. February 29th
    fires every four years; "30 2 1" is February 30th or any Monday in February (cron's day-or)."""
    assert parse_every(every).cron == every


# Cron fields as people write them, and croniter's R and H among them.
_MINUTES = st.sampled_from(["0", "30", "0,30", "*/20", "59", "0,59", "R", "H", "*"])
_HOURS = st.sampled_from(["*", "6", "0,1", "*/2", "23", "R", "H", "0-23/1"])
_DAYS = st.sampled_from(["*", "1", "15", "29", "30", "31", "1,15", "L", "R"])
_MONTHS = st.sampled_from(["*", "2", "4", "2,4", "JAN", "FEB", "*/3"])
_WEEKDAYS = st.sampled_from(["*", "1", "MON", "THU", "1-5", "SUN,SAT", "H"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(_MINUTES, _HOURS, _DAYS, _MONTHS, _WEEKDAYS).map(" ".join), st.integers(0, 3 * 365))
def test_an_accepted_cron_schedule_keeps_the_hour_rule_from_any_moment(every: str, day: int) -> None:
    """docs/running.md's promise, for cron: runs at least MIN_EVERY_S apart, whenever the series starts and
    however often the expression is read again (briefd reads it at every turn)."""
    try:
        parsed = parse_every(every)
    except ScheduleError:
        return
    run = parsed.next_after(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=day))
    for _ in range(12):
        following = parsed.next_after(run)
        assert (following - run).total_seconds() >= MIN_EVERY_S, (every, run, following)
        run = following


def test_submit_refuses_an_every_that_never_fires_without_a_traceback(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    for n, (every, words) in enumerate(REFUSED_EVERY[::2]):
        path = tmp_path / f"series-{n}.json"
        path.write_bytes(brief(every=every))
        result = subprocess.run([BRIEFD, "submit", str(path), "--inbox", str(inbox)],
                                env=offline_env(tmp_path), cwd=tmp_path, text=True, capture_output=True, timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{path}: every: {every!r}" in result.stderr and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert not inbox.exists() or not list(inbox.iterdir()), "nothing was written"


def test_the_inbox_rejects_an_every_that_never_fires_with_its_error_json(box: Box) -> None:
    for n, (every, words) in enumerate(REFUSED_EVERY):
        box.drop(f"series-{n}.json", brief(every=every))
    taken = box.take()
    assert len(taken) == len(REFUSED_EVERY) and all(t.rejected for t in taken)
    for n, (every, words) in enumerate(REFUSED_EVERY):
        error = error_json(box.outbox / f"series-{n}")
        assert error["details"]["field"] == "every" and words in error["error"] and every in error["error"]
    assert box.left() == [], "out of the inbox: not tried again at every restart"


# --------------------------------------------------------------------------- sources (#11, #13)

LIBRARY = (Path("/srv/library"),)


@pytest.mark.parametrize("configured, asked", [
    (Settings(), ["library"]),                                      # #11: no library
    (Settings(), ["web", "archives"]),
    (Settings(egress="none", library=LIBRARY), ["web"]),            # #13: egress = none
    (Settings(egress="none"), None),                                # nothing to search at all
])
def test_check_brief_refuses_a_source_these_settings_cannot_search_as_the_daemon_does(
        tmp_path: Path, configured: Settings, asked: list[str] | None) -> None:
    configured = replace(configured, db=tmp_path / "briefd.db")
    data = brief(sources=asked) if asked is not None else brief()
    expected = refusal(parse_brief(data, "b.json"), configured)
    assert expected is not None
    with pytest.raises(BriefError) as caught:
        check_brief(configured, data, "b.json")
    assert (caught.value.field, str(caught.value)) == (expected.field, str(expected)), "the daemon's one rule"
    assert caught.value.field.startswith("sources")


def test_check_brief_accepts_the_sources_that_are_configured(tmp_path: Path) -> None:
    configured = Settings(egress="none", library=LIBRARY, db=tmp_path / "briefd.db")
    assert check_brief(configured, brief(sources=["library"]), "b.json").sources == ("library",)
    assert check_brief(configured, brief(), "b.json").sources is None


def test_submit_refuses_web_under_egress_none_and_library_without_one(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    web = tmp_path / "web.json"
    web.write_bytes(brief(sources=["web"]))
    library = tmp_path / "library.json"
    library.write_bytes(brief(sources=["library"]))
    for path, env, words in [(web, {"BRIEFD_EGRESS": "none", "BRIEFD_LIBRARY": str(tmp_path)}, "egress = none"),
                             (library, {}, "no library is configured")]:
        result = subprocess.run([BRIEFD, "submit", str(path), "--inbox", str(inbox)],
                                env=offline_env(tmp_path, **env), cwd=tmp_path, text=True, capture_output=True,
                                timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{path}: sources asks for" in result.stderr and words in result.stderr, result.stderr
    assert not inbox.exists() or not list(inbox.iterdir()), "nothing was written"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[httpx.Client]:
    """`briefd serve` alone, under egress = none with a library: the API's door."""
    (tmp_path / "library").mkdir()
    port = free_port()
    env = offline_env(tmp_path, BRIEFD_SERVE_PORT=str(port), BRIEFD_EGRESS="none",
                      BRIEFD_LIBRARY=str(tmp_path / "library"))
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([BRIEFD, "serve"], env=env, cwd=tmp_path, stdout=log, stderr=log)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False)

    def answers() -> bool:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            client.get("/")
            return True
        except httpx.TransportError:
            return False

    try:
        wait_for(answers, 60, "briefd serve to answer")
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(30)


def test_the_api_refuses_what_the_daemon_would_with_a_422_naming_the_field(served: httpx.Client,
                                                                           tmp_path: Path) -> None:
    headers = {"Content-Type": "application/json"}
    cases = [({"every": NEVER}, "every", "never fires"), ({"every": "R R * * *"}, "every", "random (R)"),
             ({"sources": ["web"]}, "sources[0]", "egress = none"),
             ({"sources": ["library", "archives"]}, "sources[1]", "no archives are configured")]
    for fields, field, words in cases:
        answer = served.post("/briefs", headers=headers, content=brief(**fields))
        assert answer.status_code == 422, answer.text
        assert answer.json()["field"] == field and words in answer.json()["error"], answer.json()
    assert served.post("/briefs", headers=headers, content=brief(sources=["library"])).status_code == 202
    assert [p.name for p in (tmp_path / "inbox").iterdir() if p.suffix == ".json"] != []


# --------------------------------------------------------------------------- an inbox nobody serves (#13)


def test_submit_into_an_inbox_no_daemon_serves_says_so_and_still_queues(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(brief())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run([BRIEFD, "submit", str(path)], env=offline_env(tmp_path, BRIEFD_INBOX="inbox"),
                            cwd=elsewhere, text=True, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    inbox = elsewhere / "inbox"
    assert f"warning: no daemon serves the inbox {inbox} (it did not exist: it is made now)" in result.stderr
    assert "briefd status" in result.stderr and "--inbox" in result.stderr
    assert [p.name for p in inbox.iterdir() if p.suffix == ".json"] == ["b.json"], "kept for run --once"
    again = subprocess.run([BRIEFD, "submit", str(path)], env=offline_env(tmp_path, BRIEFD_INBOX="inbox"),
                           cwd=elsewhere, text=True, capture_output=True, timeout=60)
    assert again.returncode == 0 and f"no daemon serves the inbox {inbox}, so" in again.stderr


def test_submit_into_an_inbox_a_daemon_serves_says_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(brief())
    inbox = tmp_path / "inbox"
    with acquire_lock(inbox):  # what briefd run holds while it runs
        result = subprocess.run([BRIEFD, "submit", str(path), "--inbox", str(inbox)], env=offline_env(tmp_path),
                                cwd=tmp_path, text=True, capture_output=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
