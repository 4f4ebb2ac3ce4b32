"""A brief researched end to end through the OpenAI-compatible API (`model_api = "openai"`): on the lab's scripted
model, whose /v1 and /api answer alike, the report is the one the Ollama API gives. (With real inference, through
llama-cpp-python's own server: tests/e2e/test_real_inference.py, whose tests run one after the other.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import OllamaLab, Workspace
from lab.corpus import TOPICS

pytestmark = pytest.mark.lab

KEY = "sk-lab-e2e-0123456789-must-never-be-written"

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
    key = api_env.get("BRIEFD_OPENAI_API_KEY")
    assert not key or key not in result.stdout + result.stderr, "the API key is in the daemon's output"
    report = ws.report(brief_id)
    assert report["status"] == "done", report.get("error")
    return report


def test_the_same_brief_through_either_api_gives_the_same_report(tmp_path, search_lab,
                                                                 scripted_ollama: OllamaLab) -> None:
    scripted_ollama.reset()
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    through_ollama = research(ws, "by-ollama", {})
    through_openai = research(ws, "by-openai", {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_API_KEY": KEY,
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
    # the key went to the server with every call, and is nowhere briefd writes: reports, events, the store, logs
    written = [path for path in ws.root.rglob("*") if path.is_file() and KEY.encode() in path.read_bytes()]
    assert written == [], f"the API key was written to {written}"
    shown = ws.briefd("status", "--json", BRIEFD_MODEL_API="openai", BRIEFD_OPENAI_API_KEY=KEY,
                      BRIEFD_OPENAI_BASE_URL=scripted_ollama.url + "/v1")
    config = ws.briefd("config", "--json", BRIEFD_MODEL_API="openai", BRIEFD_OPENAI_API_KEY=KEY,
                       BRIEFD_OPENAI_BASE_URL=scripted_ollama.url + "/v1")
    assert KEY not in shown.stdout + shown.stderr + config.stdout + config.stderr
