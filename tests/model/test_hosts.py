"""Several model servers (`ollama_hosts`): the routing rule, and briefs spread over two lab servers.

The rule (daemon/model/hosts.py `HostPool`) is pure: a fake clock and a fixed jitter drive it. The lab
part runs real briefs (`briefd run --once`) against two scripted lab Ollama servers, each counting
the calls it answered, and against one live server beside one that was never started.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest

from briefd.daemon.model.hosts import FAILOVER_ATTEMPTS, OUT, HostPool, ModelHosts, model_hosts
from briefd.daemon.model.llm import ModelConfig, ModelMissing, ServiceDown, make_client, refusal_fix
from briefd.daemon.core.retry import backoff_delay
from briefd.daemon.core.settings import SettingsError, load_settings
from tests.conftest import OllamaLab, Workspace, serve_ollama
from lab.corpus import TOPICS
from lab.servers import SearchLab, free_port

A, B, C = "http://a:11434", "http://b:11434", "http://c:11434"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pool(*hosts: str) -> tuple[HostPool, Clock]:
    clock = Clock()
    return HostPool(list(hosts), clock=clock, rand=lambda: 0.999), clock


def full_out(failures: int) -> float:
    """How long a host that failed `failures` times in a row is out, with the pool's jitter (0.999)."""
    return backoff_delay(OUT, failures, lambda: 0.999)


# ---- the rule ------------------------------------------------------------------------------------


def test_each_call_goes_to_the_least_busy_host_ties_by_order() -> None:
    p, _ = pool(A, B, C)
    picks = [p.acquire() for _ in range(4)]
    assert [x.host for x in picks if x] == [A, B, C, A]  # all idle: in order; then the least busy again
    p.release(B)
    p.release(C)
    nxt = p.acquire()
    assert nxt is not None and nxt.host == B  # B and C idle, B first in order
    assert all(x is not None and x.others and not x.all_out for x in picks)


def test_a_failed_host_is_skipped_until_its_backoff_ends_then_its_next_call_probes_it() -> None:
    p, clock = pool(A, B)
    first = p.acquire()
    assert first is not None and first.host == A
    out_s = p.failed(A, "connection refused")
    p.release(A)
    assert out_s == pytest.approx(full_out(1))
    for _ in range(3):  # only B while A is out, however busy B gets
        pick = p.acquire()
        assert pick is not None and pick.host == B and not pick.others
    clock.now += out_s
    probe = p.acquire()
    assert probe is not None and probe.host == A  # due back, and idle: the probe
    again = p.acquire()
    assert again is not None and again.host == B, "one probe at a time: A takes no other call meanwhile"
    p.release(A)
    p.succeeded(A)
    back = p.acquire()
    assert back is not None and back.host == A and not p.out()


def test_a_host_that_keeps_failing_stays_out_longer_and_in_flight_failures_count_once() -> None:
    p, clock = pool(A, B)
    assert [x.host for x in (p.acquire(), p.acquire(), p.acquire()) if x] == [A, B, A]  # two in flight on A
    first = p.failed(A, "down")
    assert p.failed(A, "down") == pytest.approx(first)  # the second does not lengthen the wait
    assert p.states[A].failures == 1
    clock.now += first
    p.release(A)
    p.release(A)
    again = p.failed(A, "still down")  # the probe failed: out longer
    assert again == pytest.approx(full_out(2)) and again > first


def test_with_every_host_out_the_soonest_due_is_tried_with_the_full_retry_policy() -> None:
    p, clock = pool(A, B)
    p.failed(A, "down")
    clock.now += 1
    p.failed(B, "down")
    pick = p.acquire()
    assert pick is not None and (pick.host, pick.others, pick.all_out) == (A, False, True)
    assert p.acquire([A]) is None, "a call that already failed over everywhere gives up: the brief waits"


def test_a_call_fails_over_only_to_hosts_it_has_not_tried() -> None:
    p, _ = pool(A, B)
    pick = p.acquire([A])
    assert pick is not None and pick.host == B and not pick.others  # the last host: full retry policy
    assert p.acquire([A, B]) is None


def test_model_hosts_is_ollama_hosts_when_set_else_ollama_host() -> None:
    assert model_hosts(load_settings({}, {"OLLAMA_HOST": "gpu:1"})) == ("http://gpu:1",)
    both = load_settings({}, {"BRIEFD_OLLAMA_HOSTS": "gpu-1, http://gpu-2:8080/, gpu-1:11434"})
    assert both.ollama_hosts == ("http://gpu-1:11434", "http://gpu-2:8080")  # normalised, once each
    assert model_hosts(both) == both.ollama_hosts


def test_ollama_hosts_from_toml_and_a_bad_entry_named_with_its_fix(tmp_path: Path) -> None:
    config = tmp_path / "briefd.toml"
    config.write_text('ollama_hosts = ["gpu-1", "0.0.0.0:11435"]\n')
    assert load_settings({}, {}, config).ollama_hosts == ("http://gpu-1:11434", "http://127.0.0.1:11435")
    config.write_text('ollama_hosts = ["gpu-1", "ftp://gpu-2"]\n')
    with pytest.raises(SettingsError) as err:
        load_settings({}, {}, config)
    assert "ftp://gpu-2" in str(err.value) and 'ollama_hosts = ["gpu-1:11434"]' in str(err.value)


# ---- real calls on lab servers ------------------------------------------------------------------

FAST = ("--tokens-per-s", "1500")


@pytest.fixture(scope="module")
def two_ollamas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OllamaLab, OllamaLab]]:
    """Two lab model servers of this module's own, so their call counts are this module's alone."""
    for one in serve_ollama(tmp_path_factory.mktemp("ollama-h1"), "scripted", name="ollama-h1", extra=FAST):
        for two in serve_ollama(tmp_path_factory.mktemp("ollama-h2"), "scripted", name="ollama-h2", extra=FAST):
            yield one, two


def calls(lab: OllamaLab) -> int:
    return int(lab.stats()["total_chat_calls"])


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def model_hosts_for(hosts: list[str], model: str = "lab-scripted") -> ModelHosts:
    cfg = ModelConfig(host=hosts[0], model=model, num_ctx=4096, num_predict=256, timeout_s=30,
                      backoff_base_s=0.05, backoff_cap_s=0.1)
    return ModelHosts.build(cfg, hosts, make_client)


async def ask(hosts: ModelHosts, n: int) -> list[Any]:
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}},
              "required": ["answer"]}
    results = await asyncio.gather(*(hosts.call_json(
        purpose="plan", system="You answer in JSON.", user=f"Question {i}: what is a bridge?", schema=schema,
        coerce=lambda v: v, fallback=lambda: None) for i in range(n)))
    return [r.value for r in results]


@pytest.mark.lab
def test_calls_in_parallel_are_spread_over_both_servers(two_ollamas: tuple[OllamaLab, OllamaLab]) -> None:
    one, two = two_ollamas
    one.reset()
    two.reset()
    answers = asyncio.run(ask(model_hosts_for([one.url, two.url]), 6))
    assert all(a is not None for a in answers)
    assert (calls(one), calls(two)) == (3, 3)  # at once: each goes to the least busy, so half each


@pytest.mark.lab
def test_a_dead_server_is_left_out_and_every_call_is_answered_by_the_other(
        two_ollamas: tuple[OllamaLab, OllamaLab], caplog: pytest.LogCaptureFixture) -> None:
    one, _ = two_ollamas
    one.reset()
    dead = dead_url()
    hosts = model_hosts_for([dead, one.url])
    with caplog.at_level(logging.WARNING, logger="briefd"):
        answers = asyncio.run(ask(hosts, 4))
    assert all(a is not None for a in answers) and calls(one) == 4
    assert [s.host for s in hosts.pool.out()] == [dead]
    assert any(dead in r.getMessage() and "is out" in r.getMessage() for r in caplog.records)


@pytest.mark.lab
def test_when_every_server_is_down_the_call_raises_service_down_as_one_server_does() -> None:
    hosts = model_hosts_for([dead_url(), dead_url()])
    with pytest.raises(ServiceDown):
        asyncio.run(ask(hosts, 1))
    assert len(hosts.pool.out()) == 2


@pytest.mark.lab
def test_a_server_without_the_model_is_out_and_the_log_says_how_to_pull_it(
        two_ollamas: tuple[OllamaLab, OllamaLab], caplog: pytest.LogCaptureFixture) -> None:
    one, two = two_ollamas
    hosts = model_hosts_for([one.url, two.url], model="no-such-model:1b")
    with caplog.at_level(logging.WARNING, logger="briefd"), pytest.raises(ModelMissing):
        asyncio.run(ask(hosts, 1))  # neither has it: the brief waits for the fix, as with one server
    assert len(hosts.pool.out()) == 2
    assert any("ollama pull no-such-model:1b" in r.getMessage() and one.url in r.getMessage()
               for r in caplog.records)


@pytest.mark.lab
def test_a_server_that_refuses_briefd_is_out_with_the_fix_and_the_call_is_answered_by_the_other(
        two_ollamas: tuple[OllamaLab, OllamaLab], caplog: pytest.LogCaptureFixture) -> None:
    """Issue 29 #3: a 403 from one server's proxy (its probe refused too) is that server refusing briefd: it
    is out with the fix said, and the call goes to the other server, not to its fallback."""
    one, two = two_ollamas
    one.reset()
    two.reset()
    one.fault(kind="status", status=403, message="Forbidden", count=2)  # the request and its health probe
    hosts = model_hosts_for([one.url, two.url])
    with caplog.at_level(logging.WARNING, logger="briefd"):
        [answer] = asyncio.run(ask(hosts, 1))
    assert answer is not None, "answered by the other server, not the fallback"
    assert [s.host for s in hosts.pool.out()] == [one.url] and calls(two) == 1
    assert any(one.url in r.getMessage() and refusal_fix(403) in r.getMessage() for r in caplog.records)


def test_failover_keeps_two_tries_so_a_poisoned_request_is_still_told_from_an_outage() -> None:
    from briefd.daemon.model.llm import PROBE_AFTER_REFUSALS
    assert FAILOVER_ATTEMPTS >= PROBE_AFTER_REFUSALS


# ---- briefs -------------------------------------------------------------------------------------

BRIEFS = {
    "bridge": {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1},
    "tunnel": {"question": TOPICS["northgate"].question, "depth": "quick", "max_rounds": 1},
}


def brief_workspace(root: Path, search_lab: SearchLab, lab: OllamaLab) -> Workspace:
    ws = Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=lab.url, model="lab-scripted")
    for brief_id, brief in BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    return ws


def test_briefs_with_two_servers_configured_spread_their_calls_over_both(
        tmp_path: Path, search_lab: SearchLab, two_ollamas: tuple[OllamaLab, OllamaLab]) -> None:
    one, two = two_ollamas
    one.reset()
    two.reset()
    ws = brief_workspace(tmp_path, search_lab, one)
    done = ws.briefd("run", "--once", timeout=300, BRIEFD_WORKERS="2", BRIEFD_FETCH_TIMEOUT_S="1.5",
                     BRIEFD_OLLAMA_HOSTS=f"{one.url},{two.url}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(ws.report(b)["status"] == "done" for b in BRIEFS)
    assert calls(one) > 0 and calls(two) > 0, (calls(one), calls(two))
    hosts = {h["host"] for b in BRIEFS for h in ws.report(b)["egress"]["hosts"]}
    assert {one.url.split("//")[1], two.url.split("//")[1]} <= hosts  # the audit lists both model servers


def test_a_brief_finishes_on_the_live_server_when_the_other_never_started(
        tmp_path: Path, search_lab: SearchLab, two_ollamas: tuple[OllamaLab, OllamaLab]) -> None:
    one, _ = two_ollamas
    one.reset()
    ws = brief_workspace(tmp_path, search_lab, one)
    dead = dead_url()
    done = ws.briefd("run", "--once", timeout=300, BRIEFD_FETCH_TIMEOUT_S="1.5",
                     BRIEFD_OLLAMA_HOSTS=f"{dead},{one.url}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(ws.report(b)["status"] == "done" for b in BRIEFS)
    assert calls(one) > 0
    assert f"model server {dead} is out" in done.stderr


def test_check_probes_every_model_server(tmp_path: Path, two_ollamas: tuple[OllamaLab, OllamaLab],
                                         search_lab: SearchLab) -> None:
    one, _ = two_ollamas
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=one.url, model="lab-scripted")
    ws.inbox.mkdir()
    dead = dead_url()
    result = ws.briefd("check", BRIEFD_OLLAMA_HOSTS=f"{one.url},{dead}")
    lines = result.stdout.splitlines()
    assert result.returncode == 3
    assert any(line.startswith("ok") and one.url in line for line in lines), result.stdout
    assert any(line.startswith("FAIL") and dead in line for line in lines), result.stdout
