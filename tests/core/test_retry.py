"""The one retry policy (daemon/core/retry.py): which failures are waited out, how long, when to give up.

Issue 9 found three copies of it (`llm._chat`, `loop.with_retries`, `worker.wait_or_fail`)
that disagreed: the queue's jitter was applied after its cap, so a "5 min" wait could last
6 min, and the loop's SearXNG retries had no jitter at all. The numbers here come from the
policy's named constants; the docs' sentence is compared with them.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from briefd.daemon.model import llm

from briefd.daemon.core import retry

from briefd.daemon.sources import search
from briefd.daemon.core.brief import SearchOptions
from briefd.daemon.core.retry import IN_CALL, IN_CALL_ATTEMPTS, QUEUE, Backoff, Transient
from briefd.daemon.core.settings import Settings
from tests.httpstub import QuietHandler, serving

TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
TOP = 1.0 - 1e-12  # the largest draw random.random() can return, near enough


def ceilings(schedule: Backoff, tries: int) -> list[float]:
    """What the n-th wait's ceiling must be, by the docs' words: base doubling, never past the cap."""
    out, ceiling = [], schedule.base_s
    for _ in range(tries):
        out.append(min(ceiling, schedule.cap_s))
        ceiling *= 2
    return out


# ---- the schedule --------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", [IN_CALL, QUEUE], ids=["in_call", "queue"])
def test_each_wait_doubles_from_the_base_up_to_the_cap(schedule: Backoff) -> None:
    tries = 12
    highest = [retry.backoff_delay(schedule, n, rand=lambda: TOP) for n in range(1, tries + 1)]
    lowest = [retry.backoff_delay(schedule, n, rand=lambda: 0.0) for n in range(1, tries + 1)]
    assert highest == pytest.approx(ceilings(schedule, tries))
    assert lowest == pytest.approx([c / 2 for c in ceilings(schedule, tries)])
    assert highest[0] == pytest.approx(schedule.base_s) and highest[-1] == pytest.approx(schedule.cap_s)


@pytest.mark.parametrize("schedule, failures", [(IN_CALL, 1), (IN_CALL, 3), (IN_CALL, 40), (QUEUE, 1), (QUEUE, 8),
                                                (QUEUE, 9), (QUEUE, 11), (QUEUE, 400)])
def test_jitter_spreads_waits_between_half_the_ceiling_and_the_ceiling_never_past_the_cap(
        schedule: Backoff, failures: int) -> None:
    rng = random.Random(20261123)
    ceiling = ceilings(schedule, failures)[-1] if failures < 64 else schedule.cap_s
    waits = [retry.backoff_delay(schedule, failures, rand=rng.random) for _ in range(500)]
    assert all(ceiling / 2 <= w <= ceiling <= schedule.cap_s for w in waits)
    # really jittered: two briefs that failed together do not come back together
    assert min(waits) < 0.55 * ceiling and max(waits) > 0.95 * ceiling
    assert len(set(waits)) == len(waits)


def test_a_long_outage_keeps_a_finite_wait_at_the_cap() -> None:
    """Months of outages on the queue: the exponent must not overflow a float."""
    assert retry.backoff_delay(QUEUE, 100_000, rand=lambda: TOP) == pytest.approx(QUEUE.cap_s)
    assert retry.queue_delay(10**9, rand=lambda: 0.0) == pytest.approx(QUEUE.cap_s / 2)


def test_the_queue_starts_at_its_base_on_the_first_outage() -> None:
    # the store counts outages from 0 (none yet), the schedule counts failures from 1
    assert retry.queue_delay(0, rand=lambda: TOP) == pytest.approx(QUEUE.base_s)
    assert retry.queue_delay(1, rand=lambda: TOP) == pytest.approx(2 * QUEUE.base_s)


@pytest.mark.parametrize("base, cap", [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_schedule_that_cannot_work_is_refused(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="base_s"):
        Backoff(base_s=base, cap_s=cap)
    with pytest.raises(ValueError, match="base_s"):
        llm.ModelConfig(host="x", model="m", backoff_base_s=base, backoff_cap_s=cap)


def test_the_model_calls_follow_the_policy_by_default() -> None:
    cfg = llm.ModelConfig(host="x", model="m")
    assert cfg.transport_attempts == IN_CALL_ATTEMPTS and cfg.backoff == IN_CALL
    draws = random.Random(5).random, random.Random(5).random
    assert [llm.backoff_delay(cfg, n, rand=draws[0]) for n in range(1, 9)] == \
        [retry.backoff_delay(IN_CALL, n, rand=draws[1]) for n in range(1, 9)]


def test_the_docs_state_the_queue_schedule_the_code_uses() -> None:
    """docs/troubleshooting.md ("When things go wrong") promises "2 s doubling to 5 min": it must be QUEUE's numbers."""
    said = re.search(r"\((\d+(?:\.\d+)?) s doubling to (\d+(?:\.\d+)?) min\)", TROUBLESHOOTING.read_text(encoding="utf-8"))
    assert said, "docs/troubleshooting.md lost its sentence on the queue's backoff"
    assert (float(said.group(1)), float(said.group(2)) * 60) == (QUEUE.base_s, QUEUE.cap_s)


# ---- what is transient, and patience -------------------------------------------------------------


@pytest.mark.parametrize("status, transient", [
    (500, True), (502, True), (503, True), (504, True), (599, True), (408, True), (429, True), (-1, True),
    (400, False), (401, False), (403, False), (404, False), (413, False), (422, False), (200, False),
])
def test_only_a_service_in_trouble_is_waited_for(status: int, transient: bool) -> None:
    assert retry.transient_status(status) is transient


@pytest.mark.parametrize("waited, patience, out", [
    (None, 5.0, False),    # the first outage: nothing waited yet, whatever the patience
    (None, 0.0, False),
    (0.0, 5.0, False),
    (4.99, 5.0, False),
    (5.0, 5.0, True),
    (6.0, 5.0, True),
    (0.0, 0.0, True),
])
def test_a_brief_fails_only_once_it_has_waited_its_patience(waited: float | None, patience: float, out: bool) -> None:
    assert retry.out_of_patience(waited, patience) is out


def test_the_default_patience_outlasts_many_capped_waits() -> None:
    # patience_s (6 h) is the only thing that fails a brief for an outage: it must allow
    # many trips back to the queue, not one long wait.
    assert Settings().patience_s >= 10 * QUEUE.cap_s


# ---- running a call under the policy -------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.waits: list[tuple[str, float, str]] = []
        self.fixes: list[str | None] = []
        self.slept: list[float] = []

    def on_wait(self, service: str, retry_at: float, reason: str, fix: str | None) -> None:
        self.waits.append((service, retry_at, reason))
        self.fixes.append(fix)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def run_under_policy(outcomes: list[BaseException | str], rec: Recorder, seed: int = 1,
                     attempts: int = IN_CALL_ATTEMPTS) -> tuple[str | BaseException, int]:
    """Run a call that raises or returns `outcomes` in turn; say what came out and how often it was called."""
    calls = 0

    async def call() -> str:
        nonlocal calls
        outcome = outcomes[calls]
        calls += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def go() -> str:
        return await retry.call_with_retries(call, service="svc", on_wait=rec.on_wait, attempts=attempts,
                                             rand=random.Random(seed).random, sleep=rec.sleep)
    try:
        return asyncio.run(go()), calls
    except BaseException as exc:  # noqa: BLE001 - the test looks at what escaped
        return exc, calls


def test_transient_failures_are_waited_out_and_the_caller_hears_what_it_waits_for() -> None:
    rec = Recorder()
    before = time.time()
    result, calls = run_under_policy([Transient("HTTP 503: busy"), Transient("timed out"), "answer"], rec, seed=3)
    assert (result, calls) == ("answer", 3)
    rng = random.Random(3)  # the same seeded draws, in order
    expected = [retry.backoff_delay(IN_CALL, n, rand=rng.random) for n in (1, 2)]
    assert rec.slept == expected
    assert [(s, why) for s, _, why in rec.waits] == [("svc", "HTTP 503: busy"), ("svc", "timed out")]
    for (_, retry_at, _), slept in zip(rec.waits, rec.slept):
        assert before + slept <= retry_at <= time.time() + slept + 1, "retry_at is when the next try starts"


def test_a_failure_the_next_try_waits_out_itself_is_tried_again_at_once_and_still_counts_as_a_try() -> None:
    """Issue 22: a RetryAtOnce (Ollama's crashed runner, restarted by the next request) was slept on like
    any outage, with the model idle and the caller told the service was down."""
    rec = Recorder()
    result, calls = run_under_policy([retry.RetryAtOnce("HTTP 500: runner"), "answer"], rec)
    assert (result, calls) == ("answer", 2)
    assert rec.slept == [], "no wait"
    assert len(rec.waits) == 1 and rec.waits[0][1] <= time.time(), "the caller hears of it, the next try due now"
    rec = Recorder()
    result, calls = run_under_policy([retry.RetryAtOnce("HTTP 500: runner")] * 3, rec, attempts=3)
    assert isinstance(result, retry.RetryAtOnce) and calls == 3, "the tries are counted: the call still gives up"


def test_the_caller_hears_a_failures_own_fix_from_its_first_wait() -> None:
    """SearXNG running with every engine failing is waited out like an outage, but its fix is not
    "start SearXNG": the daemon's first WARNING (loop.Research.on_wait) must already say it."""
    rec = Recorder()
    failing = search.EnginesFailing("http://searx.internal", ["duckduckgo: timeout"])
    result, calls = run_under_policy([Transient("timed out"), failing, "answer"], rec)
    assert (result, calls) == ("answer", 3)
    assert rec.fixes == [None, search.engines_fix(["duckduckgo: timeout"])]


def test_after_every_attempt_the_last_failure_is_raised_for_the_caller_to_turn_into_an_outage() -> None:
    rec = Recorder()
    failures = [Transient(f"down {n}") for n in range(IN_CALL_ATTEMPTS)]
    result, calls = run_under_policy([*failures, "never reached"], rec)
    assert result is failures[-1] and calls == IN_CALL_ATTEMPTS
    assert len(rec.waits) == len(rec.slept) == IN_CALL_ATTEMPTS - 1, "no wait after the last try"


def test_a_failure_that_is_not_transient_is_never_tried_again() -> None:
    rec = Recorder()
    refused = ValueError("HTTP 400: bad request")
    result, calls = run_under_policy([refused, "never reached"], rec)
    assert result is refused and calls == 1 and not rec.waits and not rec.slept


def test_one_attempt_means_no_wait_at_all() -> None:
    rec = Recorder()
    result, calls = run_under_policy([Transient("down"), "never reached"], rec, attempts=1)
    assert isinstance(result, Transient) and calls == 1 and not rec.waits


# ---- on loopback: a SearXNG outage is the policy's transient --------------------------------------


class FlakySearx(QuietHandler):
    """Answers 503 for the first `fail` requests, then one result."""

    fail = 0
    seen = 0

    def do_GET(self) -> None:
        type(self).seen += 1
        if type(self).seen <= type(self).fail:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"results": [{"url": "http://127.0.0.1/a", "title": "A", "content": "a"}]}).encode()
        self.send_json(body)


@pytest.fixture
def flaky_searx() -> Iterator[tuple[str, type[FlakySearx]]]:
    handler = type("Flaky", (FlakySearx,), {"fail": 0, "seen": 0})
    with serving(handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler


def searched(url: str, rec: Recorder) -> search.SearchResponse | BaseException:
    async def go() -> search.SearchResponse:
        async with httpx.AsyncClient(trust_env=False) as client:
            return await retry.call_with_retries(
                lambda: search.search(client, url, "kestrel", SearchOptions(), 5.0),
                service="searxng", on_wait=rec.on_wait, sleep=rec.sleep)
    try:
        return asyncio.run(go())
    except BaseException as exc:  # noqa: BLE001
        return exc


def test_a_searxng_answering_503_is_waited_out_inside_the_call(flaky_searx: tuple[str, type[FlakySearx]]) -> None:
    url, handler = flaky_searx
    handler.fail = IN_CALL_ATTEMPTS - 1
    rec = Recorder()
    response = searched(url, rec)
    assert isinstance(response, search.SearchResponse) and [h.url for h in response.hits] == ["http://127.0.0.1/a"]
    assert handler.seen == IN_CALL_ATTEMPTS
    assert [s for s, _, _ in rec.waits] == ["searxng"] * (IN_CALL_ATTEMPTS - 1)
    assert all("answered HTTP 503" in why for _, _, why in rec.waits)
    assert all(c / 2 <= s <= c for s, c in zip(rec.slept, ceilings(IN_CALL, IN_CALL_ATTEMPTS))), rec.slept


def test_a_searxng_down_through_every_try_raises_its_outage(flaky_searx: tuple[str, type[FlakySearx]]) -> None:
    url, handler = flaky_searx
    handler.fail = 10 * IN_CALL_ATTEMPTS
    rec = Recorder()
    outcome = searched(url, rec)
    assert isinstance(outcome, search.SearchUnavailable) and "HTTP 503" in str(outcome)
    assert handler.seen == IN_CALL_ATTEMPTS and len(rec.waits) == IN_CALL_ATTEMPTS - 1
