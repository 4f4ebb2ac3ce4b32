"""One brief researched with REAL inference: Gemma 3 270M through llama-cpp-python, behind the
lab's Ollama-compatible server, driven by the official ollama client; and one through llama-cpp-python's own
OpenAI-compatible server (issue 31). In one module, so one test process runs them in turn: two llama.cpp
servers generating at once on two cores each slowed a brief from 32 s to over 8 minutes.

A 270M model writes poor JSON and poor prose; the point is that briefd survives whatever it
says: the brief finishes with a well-formed report whose citations resolve and whose quotes
are verbatim page text, and every model call is recorded with the server's real token counts.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from briefd.daemon.rules import decide
from briefd.daemon.rules.citations import cited_numbers
from tests.conftest import OllamaLab, OpenAILab, Workspace
from tests.e2e.test_openai_api import keys, research
from lab.corpus import TOPICS

# Real inference on CPU: each test takes half a minute to a minute (lab: by its llama_ollama fixture); the
# suite's longest module, handed out first (early: tests/conftest.py, run_order).
pytestmark = [pytest.mark.slow, pytest.mark.early]


def test_a_brief_finishes_with_a_well_formed_report_whatever_the_tiny_model_says(
        tmp_path, search_lab, llama_ollama: OllamaLab) -> None:
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=llama_ollama.url,
                   model="gemma3:270m")
    ws.drop("bridge.json", {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1,
                            "formats": ["md", "json", "html"]})
    result = ws.briefd("run", "--once", timeout=900, BRIEFD_NUM_CTX="2048", BRIEFD_NUM_PREDICT="256",
                       BRIEFD_LLM_TIMEOUT_S="240")
    assert result.returncode == 0, result.stderr[-3000:]
    report = ws.report("bridge")
    assert report["status"] == "done", report.get("error")
    assert report["stop_reason"] in {"max_rounds", "stalled", "gaps_closed", "exhausted", "budget"}
    assert isinstance(report["summary"], str) and report["summary"].strip()
    numbers = cited_numbers(report["summary"])
    assert numbers == list(range(1, len(numbers) + 1))
    assert [s["n"] for s in report["sources"] if s["cited"]] == numbers, "the cited sources first"
    assert [s["n"] for s in report["sources"]] == list(range(1, len(report["sources"]) + 1))
    by_n = {s["n"]: s["url"] for s in report["sources"]}
    assert all(by_n.get(item["source"]) == item["url"] for item in report["evidence"]), \
        "every evidence item's number resolves to its page"
    assert {int(n) for n in re.findall(r"\[(\d+)\]", report["summary"])} <= set(numbers)
    conn = sqlite3.connect(ws.db)
    for item in report["evidence"]:
        page = conn.execute("SELECT text FROM pages WHERE url = ?", [item["url"]]).fetchone()
        assert page is not None and item["quote"] in page[0]
        assert not decide.addresses_a_model(item["quote"]), "an injected instruction was kept as evidence"
    assert "ignore all previous instructions" not in report["summary"].lower()
    calls = conn.execute("SELECT outcome, prompt_tokens, completion_tokens, model FROM model_calls").fetchall()
    assert calls and all(model == "gemma3:270m" for *_, model in calls)
    real = [c for c in calls if c[0] != "cached"]
    assert report["usage"]["llm_calls"] == len(real)
    assert all(pt and pt > 0 for _, pt, _, _ in real), "token counts come from the server's answer"
    assert report["usage"]["completion_tokens"] == sum(c[2] or 0 for c in real)
    stats = llama_ollama.stats()
    assert stats["duplicate_prompts"] == 0
    events = [json.loads(line) for line in (ws.outbox / "bridge" / "events.ndjson").read_text().splitlines()]
    assert events[-1]["type"] == "complete"
    assert (ws.outbox / "bridge" / "report.html").exists()


def test_estimate_and_hypothesis_briefs_finish_with_well_formed_numbers(
        tmp_path, search_lab, llama_ollama: OllamaLab) -> None:
    """Whatever numbers and labels the tiny model proposes, the range and the verdict come from rules."""
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=llama_ollama.url,
                   model="gemma3:270m")
    ws.drop("cost.json", {"question": TOPICS["northgate"].question, "depth": "quick", "max_rounds": 1,
                          "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100}})
    ws.drop("claim.json", {"question": TOPICS["lakeside"].question, "depth": "quick", "max_rounds": 1,
                           "hypothesis": {"claim": TOPICS["lakeside"].claim}})
    result = ws.briefd("run", "--once", timeout=900, BRIEFD_NUM_CTX="2048", BRIEFD_NUM_PREDICT="256",
                       BRIEFD_LLM_TIMEOUT_S="240")
    assert result.returncode == 0, result.stderr[-3000:]
    cost = ws.report("cost")
    assert cost["status"] == "done"
    est = cost["estimate"]
    low, high = est["final"]["low"], est["final"]["high"]
    assert low <= high and all(isinstance(v, float | int) for v in (low, high))
    assert est["history"] and all(h["low"] <= h["high"] for h in est["history"])
    assert 0.0 <= est["progress_score"] <= 1.0
    for item in cost["evidence"]:
        if item["low"] is not None:
            from briefd.daemon.rules.figures import number_in_quote
            assert number_in_quote(item["low"], item["quote"], "USD million"), "kept numbers are in their quote"
    assert (ws.outbox / "cost" / "chart.png").read_bytes()[:4] == b"\x89PNG"
    assert (ws.outbox / "cost" / "chart.svg").read_text(encoding="utf-8").startswith("<svg ")
    claim = ws.report("claim")
    assert claim["status"] == "done"
    assert claim["verdict"]["value"] in {"supported", "refuted", "inconclusive"}
    assert claim["verdict"]["rule"] and claim["verdict"]["evidence_level"] in {"deterministic", "advisory"}


def test_a_brief_researched_with_real_inference_through_llama_cpps_openai_server(
        tmp_path, search_lab, llama_openai: OpenAILab, scripted_ollama: OllamaLab) -> None:
    scripted_ollama.reset()
    ollama_ws = Workspace(root=tmp_path / "ollama", searxng_url=search_lab.searxng_url,
                          ollama_url=scripted_ollama.url, model="lab-scripted")
    through_ollama = research(ollama_ws, "bridge", {})
    ws = Workspace(root=tmp_path / "openai", searxng_url=search_lab.searxng_url, ollama_url="http://127.0.0.1:9",
                   model="gemma3:270m")
    # structured = schema, the default: llama-cpp-python's server refuses json_schema (500) and takes json_object
    # with the schema, its grammar over all 262k Gemma tokens at each step (about 3x the seconds a token here)
    report = research(ws, "bridge", {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": llama_openai.url},
                      BRIEFD_NUM_CTX="2048", BRIEFD_NUM_PREDICT="256", BRIEFD_LLM_TIMEOUT_S="240")
    assert isinstance(report["summary"], str) and report["summary"].strip()
    conn = sqlite3.connect(ws.db)
    for item in report["evidence"]:
        page = conn.execute("SELECT text FROM pages WHERE url = ?", [item["url"]]).fetchone()
        assert page is not None and item["quote"] in page[0], "every quote is verbatim page text"
    calls = conn.execute("SELECT outcome, prompt_tokens, completion_tokens FROM model_calls").fetchall()
    real = [c for c in calls if c[0] not in ("cached", "replayed")]
    assert real and all(prompt and prompt > 0 for _, prompt, _ in real), "token counts from the server's usage"
    assert report["usage"]["completion_tokens"] == sum(c[2] or 0 for c in real)
    assert keys(report) == keys(through_ollama), "the report has the shape of one made through the Ollama API"
    assert report["usage"]["structured_output"] == {"schema": report["usage"]["llm_calls"]}
