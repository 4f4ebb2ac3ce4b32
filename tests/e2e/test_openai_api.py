"""A brief researched end to end through the OpenAI-compatible API (`model_api = "openai"`): on the lab's scripted
model, whose /v1 and /api answer alike, the report is the one the Ollama API gives; with real inference, through
llama-cpp-python's own server (`python -m llama_cpp.server`, lab.openai_llama) running Gemma 3 270M, the brief
finishes with a report of the same shape, its quotes verbatim and its token counts the server's.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from tests.conftest import OllamaLab, OpenAILab, Workspace
from lab.corpus import TOPICS

pytestmark = pytest.mark.lab

# objects keyed by what happened (a purpose, a path), not by the report's shape
COUNTED = {"fallbacks", "calls_skipped", "structured_output"}


def keys(value: Any) -> Any:
    """A report's shape: its keys, and the keys of each object in it (not what lists or counts hold, which the
    model decides)."""
    if not isinstance(value, dict):
        return None
    return {key: None if key in COUNTED else keys(item) for key, item in value.items()}


def research(ws: Workspace, brief_id: str, api_env: dict[str, str], **env: str) -> dict[str, Any]:
    ws.drop(f"{brief_id}.json", {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1,
                                 "formats": ["md", "json"]})
    result = ws.briefd("run", "--once", timeout=900, **api_env, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = ws.report(brief_id)
    assert report["status"] == "done", report.get("error")
    return report


def test_the_same_brief_through_either_api_gives_the_same_report(tmp_path, search_lab,
                                                                 scripted_ollama: OllamaLab) -> None:
    scripted_ollama.reset()
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    through_ollama = research(ws, "by-ollama", {})
    through_openai = research(ws, "by-openai", {"BRIEFD_MODEL_API": "openai",
                                                "BRIEFD_OPENAI_BASE_URL": scripted_ollama.url + "/v1"})
    endpoints = {c["endpoint"] for c in scripted_ollama.stats()["calls"] if c.get("reached_model")}
    assert endpoints == {"chat", "openai"}, "each brief went through its own API"
    assert keys(through_openai) == keys(through_ollama)
    for key in ("status", "stop_reason", "summary", "answer"):
        assert through_openai[key] == through_ollama[key], f"{key}: the scripted model answers alike on both APIs"
    assert [e["quote"] for e in through_openai["evidence"]] == [e["quote"] for e in through_ollama["evidence"]]
    assert through_openai["usage"]["llm_calls"] == through_ollama["usage"]["llm_calls"] > 0
    assert through_openai["usage"]["completion_tokens"] > 0, "token counts from the answer's usage"
    hosts = [h["host"] for h in through_openai["egress"]["hosts"]]
    assert scripted_ollama.url.removeprefix("http://") in hosts, "the egress block lists the model server"


@pytest.mark.slow  # real inference on CPU, through llama.cpp's server: a minute or two
def test_a_brief_researched_with_real_inference_through_llama_cpps_openai_server(
        tmp_path, search_lab, llama_openai: OpenAILab, scripted_ollama: OllamaLab) -> None:
    scripted_ollama.reset()
    ollama_ws = Workspace(root=tmp_path / "ollama", searxng_url=search_lab.searxng_url,
                          ollama_url=scripted_ollama.url, model="lab-scripted")
    through_ollama = research(ollama_ws, "bridge", {})
    ws = Workspace(root=tmp_path / "openai", searxng_url=search_lab.searxng_url, ollama_url="http://127.0.0.1:9",
                   model="gemma3:270m")
    # structured = none: llama-cpp-python's server runs a grammar over all 262k Gemma tokens at each step
    # (0.4 tokens/s measured here, 500 s for this brief); told in words, the model writes at its own speed
    report = research(ws, "bridge", {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": llama_openai.url},
                      BRIEFD_NUM_CTX="2048", BRIEFD_NUM_PREDICT="256", BRIEFD_LLM_TIMEOUT_S="240",
                      BRIEFD_STRUCTURED="none")
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
    assert report["usage"]["structured_output"] == {"none": report["usage"]["llm_calls"]}
