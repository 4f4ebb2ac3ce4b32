"""A request the model server always refuses is not an outage (issue 8 #14), end to end.

Ollama answers some requests with HTTP 500 every time ("llama runner process has
terminated: exit status 2" when a prompt crashes its runner) while it answers every
other request. Treated as an outage, such a request sent its brief back to the queue and
restarted the round, the same prompt, the same 500, for hours (patience_s). Here the
lab's model server poisons one prompt for real (``/lab/fault`` kind ``poison``) while
`briefd run --once` works through a brief over real SearXNG and real pages: the brief
must finish with that call's fallback, say so, and never restart a round for it. And a
server that fails *everything* must still make the brief wait, as docs/contract.md promises,
with a restarted round re-running nothing that had already succeeded.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from briefd.daemon.model.llm import PROBE_AFTER_REFUSALS, ModelConfig
from briefd.daemon.research.calls import POISONED_MESSAGE
from briefd.daemon.report.report import USAGE_KEYS
from tests.conftest import BRIEFD, OllamaLab, Workspace, serve_ollama
from lab.servers import SearchLab
from tests.e2e.test_integration import GOOD_BRIEFS

BRIEF_ID = "kestrel"
BRIEF = GOOD_BRIEFS[BRIEF_ID]  # a plain question, two rounds of real pages at depth quick
# Before the fix a poisoned prompt never let the brief finish (it waited with growing backoff,
# patience_s 6 h); with it the whole brief takes seconds. The bound only stops a loop.
RUN_LIMIT_S = 150
# What makes a prompt crash the lab's runner: text only that prompt carries. The synthesis
# prompt's instruction, and the URL of a page the second round reads (an evidence read).
POISONS = {
    "synthesis": "Write a concise Markdown answer to the QUESTION",
    "evidence": "kestrel-engineering-journal",  # a page the quick kestrel brief reads in its second round
}


@pytest.fixture
def model_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaLab]:
    """A model server of this test's own: its faults and counts are this test's alone."""
    with contextlib.contextmanager(serve_ollama)(tmp_path_factory.mktemp("ollama-poison"), "scripted",
                                                 name="ollama-poison") as lab:
        yield lab


def run_once(ws: Workspace, brief_ids: tuple[str, ...] = (BRIEF_ID,), **env: str) -> subprocess.CompletedProcess[str]:
    """`briefd run --once`, bounded: briefs that loop are a failure that says what they kept doing."""
    proc = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(**env), cwd=ws.root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        events = [e for b in brief_ids if (ws.outbox / b / "events.ndjson").exists() for e in ws.events(b)]
        kinds = Counter(e["type"] for e in events)
        resumed = len(signals(events, "resumed from checkpoint"))
        pytest.fail(f"the briefs did not finish in {RUN_LIMIT_S} s: {kinds['waiting']} waiting events, "
                    f"{resumed} resumes, {kinds['round_started']} rounds started, "
                    f"{kinds['search_query']} search_query events")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def fresh_searches(events: list[dict[str, Any]]) -> Counter[str]:
    """How often each query really went to SearXNG (not from briefd's search cache)."""
    return Counter(e["query"] for e in events if e["type"] == "search_result" and not e["from_cache"])


def answered(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Requests the lab's model answered (not refused, not abandoned)."""
    return [c for c in stats["calls"] if c.get("reached_model") and c["outcome"].split()[0] in ("stop", "length")]


def signals(events: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "signal" and e.get("message") == message]


@pytest.mark.parametrize("purpose", list(POISONS))
def test_a_prompt_the_model_server_always_refuses_gets_its_fallback_and_the_brief_finishes(
        tmp_path, search_lab: SearchLab, model_lab: OllamaLab, purpose: str) -> None:
    model_lab.fault(kind="poison", match=POISONS[purpose])
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=model_lab.url,
                   model="lab-scripted")
    ws.drop(f"{BRIEF_ID}.json", BRIEF)
    result = run_once(ws)
    assert result.returncode == 0, result.stderr[-4000:]
    report, events, stats = ws.report(BRIEF_ID), ws.events(BRIEF_ID), model_lab.stats()

    assert report["status"] == "done", report.get("error")
    refused = [c for c in stats["calls"] if c["outcome"] == "poison-500"]
    assert refused and all(c["task"] == purpose for c in refused), "the poisoned prompt was the one asked"
    assert len(refused) == PROBE_AFTER_REFUSALS, "asked once more after the first 500, never again"
    assert len({c["key"] for c in refused}) == 1, "one request, not the same one resent by restarted rounds"

    # The user sees what happened, once, and the brief never went back to the queue for it.
    told = signals(events, POISONED_MESSAGE)
    assert len(told) == 1 and told[0]["purpose"] == purpose and "llama runner process" in told[0]["reason"]
    assert [e["type"] for e in events].count("waiting") == PROBE_AFTER_REFUSALS - 1  # told; the re-ask goes at once
    assert not signals(events, "resumed from checkpoint"), "no outage: the brief was never re-queued"
    rounds = [e["round"] for e in events if e["type"] == "round_started"]
    assert len(rounds) == len(set(rounds)), f"a round was restarted: {rounds}"
    assert max(fresh_searches(events).values()) == 1

    # The report says it: a fallback for that call, counted apart from bad answers.
    assert set(USAGE_KEYS) <= set(report["usage"])
    assert report["usage"]["poisoned_answers"] == 1 and report["fallbacks"].get(purpose) == 1
    assert "always refused" in (ws.outbox / BRIEF_ID / "report.md").read_text(encoding="utf-8")
    if purpose == "synthesis":
        assert report["summary"].strip() and report["sources"], "the template summary cites the evidence"
    else:
        assert report["evidence"], "the other pages' evidence is kept"
        assert not any("kestrel-gazette-news" in e["url"] for e in report["evidence"])
    probes = [c for c in answered(stats) if c["task"] == ""]
    assert len(probes) == 1, "one health probe decided it"
    assert probes[0]["num_ctx"] == refused[0]["num_ctx"] and probes[0]["num_predict"] == 1, \
        "the probe costs one token and never makes Ollama reload the model"
    assert report["usage"]["llm_calls"] == len(answered(stats)), \
        "every answered request, the health probe included, is a model call in usage"
    assert stats["duplicate_prompts"] == 0


@pytest.mark.slow
def test_a_model_server_that_fails_everything_still_makes_the_brief_wait_and_redoes_nothing(
        tmp_path, search_lab: SearchLab, model_lab: OllamaLab) -> None:
    """An outage mid-round: every request fails, the health probe included. The brief waits
    (never a fallback), goes back to the queue, and its restarted round replays its searches,
    pages and the model answers it already had instead of paying for them again."""
    # plan, the first round's read and the second round's first read get through; then the
    # second round's other read, its re-asks and the health probe all fail, until the daemon
    # has given up once (ServiceDown after every transport attempt, each refusal from the
    # second probed) and re-queued the brief.
    attempts = ModelConfig(host="", model="m").transport_attempts
    probes = attempts - PROBE_AFTER_REFUSALS + 1  # one after each refusal from the second on, all failing
    model_lab.fault(kind="status", status=500, after=3, count=attempts + probes)
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=model_lab.url,
                   model="lab-scripted")
    ws.drop(f"{BRIEF_ID}.json", BRIEF)
    result = run_once(ws, BRIEFD_MAX_ATTEMPTS="1")
    assert result.returncode == 0, result.stderr[-4000:]
    report, events, stats = ws.report(BRIEF_ID), ws.events(BRIEF_ID), model_lab.stats()

    assert report["status"] == "done", report.get("error")
    waits = [e for e in events if e["type"] == "waiting"]
    assert waits and all(w["service"] == "ollama" for w in waits)
    assert any("health probe failed too" in w["reason"] for w in waits), \
        "the user learns the whole model server is down, not one request"
    assert report["usage"]["poisoned_answers"] == 0 and not signals(events, POISONED_MESSAGE)
    assert signals(events, "resumed from checkpoint"), "the outage sent the brief back to the queue"
    assert sum(1 for c in stats["calls"] if c["outcome"] == "fault-500") == attempts + probes

    # The round was restarted ...
    rounds = [e["round"] for e in events if e["type"] == "round_started"]
    restarted = [r for r, n in Counter(rounds).items() if n > 1]
    assert restarted, f"the outage was meant to hit mid-round: {rounds}"
    # ... and re-ran nothing that had succeeded: each query searched once, each page fetched
    # once, each model request answered once (the lab counts an answered request seen before).
    assert max(fresh_searches(events).values()) == 1, fresh_searches(events)
    assert report["usage"]["searches"] == sum(fresh_searches(events).values()), \
        "usage counts each real search once, the restarted round's included"
    redone = [e for e in events if e["type"] == "search_result" and e["round"] in restarted]
    assert any(e["from_cache"] for e in redone), "the restarted round's searches came from the cache"
    fetched = Counter(e["url"] for e in events if e["type"] == "page_fetched" and e.get("ok", True)
                      and not e.get("from_cache"))
    assert max(fetched.values()) == 1, fetched
    assert stats["duplicate_prompts"] == 0, "a model answer was paid for twice"
    assert report["usage"]["llm_cache_hits"] >= 1, "the restarted round replayed an answer it had"
    assert not any(c["task"] == "" for c in answered(stats)), "the health probe was never answered"


# lab-chaos with failures fixed per prompt, as in the run that found this: a seeded quarter of
# prompts crash the runner every time, and a share of the others break in every other way.
# Seed 1 leaves briefd's health-probe prompt itself unpoisoned (a server that crashed on a
# one-word prompt would be down, and rightly waited for).
POISON_FLAGS = ("--chaos-seed", "1", "--chaos-share", "0.4", "--chaos-poison-share", "0.25", "--chaos-slow-s", "0.5")
CHAOS_BRIEFS = {key: GOOD_BRIEFS[key] for key in ("kestrel", "northgate", "lakeside")}


@pytest.mark.slow
def test_a_chaos_model_with_failures_fixed_per_prompt_cannot_keep_a_brief_looping(
        tmp_path, search_lab: SearchLab) -> None:
    with contextlib.contextmanager(serve_ollama)(tmp_path / "logs", "scripted", name="ollama-chaos-poison",
                                                 extra=POISON_FLAGS) as lab:
        ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=lab.url, model="lab-chaos")
        for brief_id, brief in CHAOS_BRIEFS.items():
            ws.drop(f"{brief_id}.json", brief)
        result = run_once(ws, tuple(CHAOS_BRIEFS))
        stats = lab.stats()
    assert result.returncode == 0, result.stderr[-4000:]
    poisoned = Counter(c["key"] for c in stats["calls"] if c["outcome"] == "chaos-poison-500")
    assert poisoned, "the seed poisons some prompts, or this run proves nothing"
    reports = {brief_id: ws.report(brief_id) for brief_id in CHAOS_BRIEFS}
    assert {b: r["status"] for b, r in reports.items()} == dict.fromkeys(CHAOS_BRIEFS, "done")
    assert sum(r["usage"]["poisoned_answers"] for r in reports.values()) == len(poisoned), \
        "each poisoned prompt ended once, as a fallback the report counts"
    # asked twice, then once more after each probe that found the server down at that moment (the
    # lab's chaos breaks a probe too, now and then): never asked again once a probe answered
    failed_probes = [c for c in stats["calls"] if c["task"] == "" and c not in answered(stats)]
    assert min(poisoned.values()) >= PROBE_AFTER_REFUSALS, poisoned
    assert sum(poisoned.values()) == PROBE_AFTER_REFUSALS * len(poisoned) + len(failed_probes), \
        (poisoned, len(failed_probes))
    for brief_id in CHAOS_BRIEFS:
        events = ws.events(brief_id)
        assert not signals(events, "resumed from checkpoint"), f"{brief_id} went back to the queue"
        rounds = [e["round"] for e in events if e["type"] == "round_started"]
        assert len(rounds) == len(set(rounds)), f"{brief_id} restarted a round: {rounds}"
    # the health probe is the same tiny prompt each time, asked on purpose; no other answer is paid twice
    assert not [c for c in stats["calls"] if c.get("duplicate") and c["task"]]
    assert sum(1 for c in answered(stats) if c["task"] == "") == len(poisoned), "one probe per poisoned prompt"


SYNTHESIS_FAULTS = {
    "poisoned": {"kind": "poison"},
    # issue 29 #3: a 4xx for this prompt alone, while the server answers a health probe, is still the prompt's
    "refused-400": {"kind": "poison", "status": 400, "message": "this prompt is refused"},
    "bad-answer": {"kind": "answer", "message": "I am sorry, I cannot summarise these sources."},
}


@pytest.mark.parametrize("failure", list(SYNTHESIS_FAULTS))
def test_a_second_pass_replays_a_failed_synthesis_instead_of_asking_again(
        tmp_path, search_lab: SearchLab, model_lab: OllamaLab, failure: str) -> None:
    """Issue 22: the same brief asked again under a new id paid again for its synthesis, which had
    failed the first time and failed the same way again (the failure was never kept). Snippets only,
    so that both passes read the same evidence and send the same synthesis prompt."""
    model_lab.fault(**SYNTHESIS_FAULTS[failure], match=POISONS["synthesis"])
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=model_lab.url,
                   model="lab-scripted")
    brief = {**BRIEF, "fetch_pages": False}
    ws.drop(f"{BRIEF_ID}.json", brief)
    assert run_once(ws).returncode == 0
    first = [c for c in model_lab.stats()["calls"] if c["task"] == "synthesis"]
    assert first, "the synthesis was asked"
    ws.drop(f"{BRIEF_ID}-again.json", brief)
    result = run_once(ws, (f"{BRIEF_ID}-again",))
    assert result.returncode == 0, result.stderr[-4000:]
    again = [c for c in model_lab.stats()["calls"] if c["task"] == "synthesis"]
    assert len(again) == len(first), "the failed synthesis was asked again"
    report = ws.report(f"{BRIEF_ID}-again")
    assert report["status"] == "done" and report["fallbacks"].get("synthesis") == 1
    assert report["usage"]["replayed_failures"] == 1 and report["summary"].strip()
    assert report["summary"] == ws.report(BRIEF_ID)["summary"], "the same fallback as the first pass"
    told = signals(ws.events(f"{BRIEF_ID}-again"), POISONED_MESSAGE)
    assert len(told) == (1 if failure == "poisoned" else 0), "a replayed poisoned call is said as the first was"
    probes = [c for c in answered(model_lab.stats()) if c["task"] == ""]
    assert len(probes) == (0 if failure == "bad-answer" else 1), \
        "a refusal is kept only once a health probe showed the server answers others"


def test_a_run_resumed_after_a_crash_replays_its_poisoned_synthesis(
        tmp_path, search_lab: SearchLab, model_lab: OllamaLab) -> None:
    """Issue 22: killed after its report was written (the synthesis had fallen back), the brief is
    resumed from its last checkpoint and writes its synthesis again: the poisoned request is replayed
    from the store, not refused twice more and probed again."""
    model_lab.fault(kind="poison", match=POISONS["synthesis"])
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=model_lab.url,
                   model="lab-scripted")
    ws.drop(f"{BRIEF_ID}.json", {**BRIEF, "fetch_pages": False})
    assert run_once(ws, BRIEFD_CRASH_AT="report_written:1").returncode == -signal.SIGKILL
    refused = [c for c in model_lab.stats()["calls"] if c["outcome"] == "poison-500"]
    assert len(refused) == PROBE_AFTER_REFUSALS
    result = run_once(ws)
    assert result.returncode == 0, result.stderr[-4000:]
    report = ws.report(BRIEF_ID)
    assert report["status"] == "done" and report["fallbacks"].get("synthesis")
    assert [c for c in model_lab.stats()["calls"] if c["outcome"] == "poison-500"] == refused, \
        "the resumed run asked the poisoned synthesis again"
    assert report["usage"]["replayed_failures"] >= 1
