"""Model busy as `make bench` and `make bench-real` print it (issue 28's decision): from the model's first generation
to the end of `run --once`, with the start-up before that generation reported beside it, never hidden in the share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.model_busy import busy_of, generations, requests_log


def test_the_start_up_is_reported_beside_the_share_not_inside_it() -> None:
    # spawned at 100, first request at 102 (2 s of start-up), requests 102-104 and 105-109, exit at 110
    busy = busy_of([(102.0, 104.0, "plan"), (105.0, 109.0, "evidence")], 100.0, 110.0)
    assert busy.startup_s == pytest.approx(2.0)
    assert busy.busy_s == pytest.approx(6.0)
    assert busy.share == pytest.approx(6.0 / 8.0)        # from the first generation: 8 s, 6 of them busy
    assert busy.whole_share == pytest.approx(6.0 / 10.0)  # what the whole run's share says


def test_requests_queued_together_count_once() -> None:
    # the lab server answers one request at a time; a request's seconds include its wait in the queue, so two
    # requests in the server at once are one busy stretch, not the sum of their seconds
    busy = busy_of([(1.0, 5.0, "evidence"), (2.0, 6.0, "evidence")], 0.0, 6.0)
    assert busy.busy_s == pytest.approx(5.0) and busy.share == pytest.approx(1.0)


def test_a_run_that_never_asked_the_model_has_no_share() -> None:
    busy = busy_of([], 0.0, 3.0)
    assert busy.share == 0.0 and busy.startup_s == pytest.approx(3.0) and busy.busy_s == 0.0


def test_generations_are_read_from_the_lab_servers_request_log(tmp_path: Path) -> None:
    log = requests_log(tmp_path)
    log.parent.mkdir()
    entries = [
        {"at": "2026-12-06T10:00:01.500000000Z", "endpoint": "chat", "seconds": 2.0, "task": "plan"},
        {"at": "2026-12-06T10:00:02.000000000Z", "endpoint": "tags", "seconds": 0.01},  # not a generation
        {"at": "2026-12-06T10:00:09.000000000Z", "endpoint": "chat", "seconds": 1.0, "task": "synthesis"},  # after exit
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))
    base = 1_796_551_200.0  # 2026-12-06T10:00:00Z
    assert generations(log, base, base + 5.0) == [(base + 1.5, base + 3.5, "plan")]
