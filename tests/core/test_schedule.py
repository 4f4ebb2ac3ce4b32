"""daemon/core/schedule.py: the one reading of "7d" and of a cron expression (pure, table tests)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from briefd.daemon.core.schedule import MIN_EVERY_S, ScheduleError, format_duration, parse_duration, parse_every, parse_iso

UTC = timezone.utc


@pytest.mark.parametrize("text, seconds", [
    ("0", 0), ("30s", 30), ("90m", 5400), ("12h", 43200), ("7d", 604800), ("1w", 604800), ("1d12h", 129600),
    (" 2h ", 7200), ("1d 6h", 108000),
])
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds  # what briefd writes back reads the same


@pytest.mark.parametrize("text", ["", "7", "7 days", "-1d", "1.5h", "d", "7d!", "1y"])
def test_a_duration_that_cannot_be_read_says_what_was_expected(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"7d"):
        parse_duration(text)


def test_an_interval_runs_that_long_after_the_moment_given() -> None:
    every = parse_every("7d")
    assert every.next_after(datetime(2026, 11, 24, 6, 0, tzinfo=UTC)) == datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def test_a_cron_expression_runs_at_its_next_firing_in_utc() -> None:
    every = parse_every("0 6 * * 1")  # 06:00 every Monday; 2026-11-24 is a Tuesday
    assert every.next_after(datetime(2026, 11, 24, 7, 0, tzinfo=UTC)) == datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    assert every.next_after(parse_iso("2026-11-30T06:00:00Z")) == datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, why", [
    ("5m", "1h to 366d"), ("400d", "1h to 366d"),
    ("* * * * *", "at least 1h apart"), ("0,30 * * * *", "at least 1h apart"),
    ("61 * * * *", "cron"), ("0 6 * *", "cron"), ("every monday", "cron"), ("0 6 * * 1 2026", "cron"),
])
def test_schedules_too_frequent_or_unreadable_are_refused(text: str, why: str) -> None:
    with pytest.raises(ScheduleError, match=why):
        parse_every(text)
    assert MIN_EVERY_S == 3600
