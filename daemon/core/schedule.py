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

from croniter import CroniterBadDateError, CroniterError, croniter
from .errors import BriefdError

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"\s*(?:(\d{1,9})\s*([smhdw])\s*)+")
_PART = re.compile(r"(\d{1,9})\s*([smhdw])")
# The one copy of the rule for how often a series may run (docs/history.md "Questions asked again", the
# schema's description and every message below say it from these two).
MIN_EVERY_S = 3600  # a series asked more often than hourly would keep a small model busy for nothing
MAX_EVERY_S = 366 * 86400
DURATION_EXAMPLE = '"7d" (s, m, h, d, w; combined as "1d12h")'
EVERY_EXAMPLE = '"7d", or a cron expression such as "0 6 * * 1" (06:00 UTC every Monday)'
# croniter's own extensions to cron: `R` (a value drawn at random each time the expression is read:
# briefd reads it at every turn, so "R R * * *" ran minutes apart) and `H` (a value hashed from an
# id). A letter standing alone in a field is one of them; month and day names are three letters.
_UNPREDICTABLE = re.compile(r"(?<![A-Za-z])[RH](?![A-Za-z])", re.IGNORECASE)
_SAMPLE_FROM = datetime(2026, 1, 1, tzinfo=timezone.utc)
_SAMPLED_GAPS = 3  # the shortest of a few gaps: "0,30 * * * *" is every 30 minutes


class ScheduleError(BriefdError, ValueError):
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
    least an hour apart (five fields, UTC), that fires at all and at the same times every time
    it is read (no croniter `R` or `H` field)."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"expected {EVERY_EXAMPLE}")
    text = text.strip()
    if _DURATION.fullmatch(text):
        seconds = parse_duration(text)
        if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
            raise ScheduleError(f"expected an interval from {format_duration(MIN_EVERY_S)} to "
                                f"{format_duration(MAX_EVERY_S)}, got {text!r}")
        return Every(text=text, seconds=seconds)
    if len(text.split()) == 5 and _UNPREDICTABLE.search(text):
        raise ScheduleError(f"{text!r} has a random (R) or hashed (H) field, so its runs cannot be predicted "
                            f"and may come minutes apart; write the minute and hour out, e.g. \"17 6 * * *\"")
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise ScheduleError(f"expected {EVERY_EXAMPLE}, got {text!r}")
    every = Every(text=text, cron=text)
    shortest = _shortest_gap(every)
    if shortest < MIN_EVERY_S:
        raise ScheduleError(f"expected runs at least {format_duration(MIN_EVERY_S)} apart, got {text!r} "
                            f"(every {format_duration(shortest)})")
    return every


def _shortest_gap(every: Every) -> float:
    """The shortest of the first few gaps between runs, in seconds. That is the shortest of all: with
    one minute value every gap is whole hours, and with several the first two runs share an hour.

    croniter answers a day that no month of the expression has (February 30th, April 31st) with
    CroniterBadDateError, which is said here as the schedule never firing."""
    try:
        first = every.next_after(_SAMPLE_FROM)
        gaps = []
        for _ in range(_SAMPLED_GAPS):
            second = every.next_after(first)
            gaps.append((second - first).total_seconds())
            first = second
    except CroniterBadDateError:
        raise ScheduleError(f"{every.text!r} never fires: no month it names has the day of the month it names "
                            f"(there is no February 30th or April 31st); choose a day those months have, "
                            f"e.g. \"0 6 28 2 *\"") from None
    except CroniterError as exc:
        raise ScheduleError(f"expected {EVERY_EXAMPLE}, got {every.text!r} ({exc})") from None
    return min(gaps)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def parse_iso(text: str) -> datetime:
    """A store or report timestamp ("2026-11-24T06:00:00Z") → an aware UTC datetime."""
    return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


