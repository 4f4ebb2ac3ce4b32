"""Durations and schedules: `max_age` ("7d": how old a page may be and still be trusted) and a
brief's `every` ("7d", or a cron expression such as "0 6 * * 1": when it is asked again).

Pure functions of text and times, so the one reading of "7d" serves the brief, the settings,
the scheduler and the tests. Cron expressions are read by croniter (pallets-eco), not here:
its field rules (ranges, steps, names, day-of-month OR day-of-week) are the ones people know
from cron, and a hand-written reader would differ from them in the corners.

Never a burst: a series that missed runs while the daemon was down is run once when it comes
back, and its next run is counted from then (`next_after`), not from the runs it missed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from croniter import croniter

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"\s*(?:(\d{1,9})\s*([smhdw])\s*)+")
_PART = re.compile(r"(\d{1,9})\s*([smhdw])")
MIN_EVERY_S = 3600  # a series asked more often than hourly would keep a small model busy for nothing
MAX_EVERY_S = 366 * 86400
DURATION_EXAMPLE = '"7d" (s, m, h, d, w; combined as "1d12h")'
EVERY_EXAMPLE = '"7d", or a cron expression such as "0 6 * * 1" (06:00 UTC every Monday)'


class ScheduleError(ValueError):
    """A duration or schedule that can't be read: the message names what was expected."""


def parse_duration(text: str) -> float:
    """"7d", "12h", "1d12h", "90m", "0" → seconds. "0" (or "0s") means: no time at all."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"expected a duration such as {DURATION_EXAMPLE}")
    if text.strip() == "0":
        return 0.0
    if not _DURATION.fullmatch(text):
        raise ScheduleError(f"expected a duration such as {DURATION_EXAMPLE}, got {text!r}")
    return float(sum(int(n) * UNIT_SECONDS[unit] for n, unit in _PART.findall(text)))


def format_duration(seconds: float) -> str:
    """Seconds → the shortest duration text parse_duration reads back ("7d", "1d12h", "0")."""
    left, parts = int(seconds), []
    for unit in "dhms":  # days, not weeks: "7d" is how people write it
        n, left = divmod(left, UNIT_SECONDS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0"


@dataclass(frozen=True)
class Every:
    """How often a brief is asked again: a fixed interval, or a cron expression (UTC)."""

    text: str
    seconds: float | None = None  # an interval; None for cron
    cron: str | None = None

    def next_after(self, moment: datetime) -> datetime:
        """The first run strictly after `moment` (UTC)."""
        moment = _utc(moment)
        if self.seconds is not None:
            return moment + timedelta(seconds=self.seconds)
        assert self.cron is not None
        return _utc(croniter(self.cron, moment).get_next(datetime))


def parse_every(text: str) -> Every:
    """A brief's `every`: a duration of at least an hour, or a cron expression whose runs are at
    least an hour apart (five fields, UTC)."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"expected {EVERY_EXAMPLE}")
    text = text.strip()
    if _DURATION.fullmatch(text):
        seconds = parse_duration(text)
        if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
            raise ScheduleError(f"expected an interval from 1h to 366d, got {text!r}")
        return Every(text=text, seconds=seconds)
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise ScheduleError(f"expected {EVERY_EXAMPLE}, got {text!r}")
    every = Every(text=text, cron=text)
    first = every.next_after(datetime(2026, 1, 1, tzinfo=timezone.utc))
    gaps = []
    for _ in range(3):  # the shortest of a few gaps: "0,30 * * * *" is every 30 minutes
        second = every.next_after(first)
        gaps.append((second - first).total_seconds())
        first = second
    if min(gaps) < MIN_EVERY_S:
        raise ScheduleError(f"expected runs at least an hour apart, got {text!r} "
                            f"(every {format_duration(min(gaps))})")
    return every


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def parse_iso(text: str) -> datetime:
    """A store or report timestamp ("2026-11-24T06:00:00Z") → an aware UTC datetime."""
    return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


