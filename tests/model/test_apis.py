"""The model calls' failure handling, the same through both APIs (setting `model_api`): Ollama's /api/chat and
the OpenAI-compatible /v1/chat/completions, against the lab's model server, which speaks both (lab/ollama_server.py).

Each test runs once per API: a clean answer, bad JSON repaired or retried, a crashed runner judged by its probe,
a busy server's Retry-After waited, a slow answer, a dropped connection, a cut-off answer, a missing model, a
refused key. Then what only the OpenAI-compatible servers do: refuse a prompt past their context (vLLM's 400),
report their context in /v1/models, and take some structured-output formats and not others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from briefd.daemon.core.settings import Settings, load_settings, openai_key
from briefd.daemon.model.check import probe
from briefd.daemon.model.llm import (
    CallRecord,
    CallResult,
    ModelConfig,
    ModelMissing,
    ServiceDown,
    call_json,
    make_client,
    prompt_key,
    served_config,
)
from briefd.daemon.model.wire import (
    SCHEMA_LEAD,
    STRUCTURED_PATHS,
    ModelHTTPError,
    is_context_refusal,
    read_completion,
    retry_after_s,
)
from briefd.daemon.research import planner

pytestmark = pytest.mark.lab

APIS = ("ollama", "openai")
QUESTION = "How large was the cost overrun of the Berlin airport?"
USER = planner.plan_prompt(QUESTION, "", "2026-12-06")


def config(lab: Any, api: str, **overrides: Any) -> ModelConfig:
    """The lab's scripted model on `api`; waits between tries of milliseconds, everything else as briefd runs."""
    host = lab.url if api == "ollama" else lab.url + "/v1"
    settings: dict[str, Any] = {"host": host, "model": "lab-scripted", "api": api, "num_ctx": 2048,
                                "num_predict": 512, "backoff_base_s": 0.01, "backoff_cap_s": 0.05}
    settings.update(overrides)
    return ModelConfig(**settings)


def plan(cfg: ModelConfig, records: list[CallRecord] | None = None, user: str = USER,
         waits: list[tuple[str, float, str]] | None = None, api_key: str | None = None) -> CallResult[Any]:
    """One plan call, as the daemon makes it."""
    async def go() -> CallResult[Any]:
        client = make_client(cfg, api_key=api_key)
        try:
            return await call_json(client, cfg, purpose="plan", system=planner.system_prompt(user), user=user,
                                   schema=planner.PLAN_SCHEMA, coerce=planner.coerce_plan(QUESTION),
                                   fallback=lambda: planner.template_plan(QUESTION),
                                   record=None if records is None else records.append,
                                   on_wait=None if waits is None else
                                   (lambda service, at, reason, fix: waits.append((service, at, reason))))
        finally:
            await client.close()
    return asyncio.run(go())


def lab_calls(lab: Any) -> list[dict[str, Any]]:
    return [c for c in lab.stats()["calls"] if c.get("reached_model")]


@pytest.fixture
def lab(scripted_ollama: Any) -> Any:
    scripted_ollama.reset()
    yield scripted_ollama
    scripted_ollama.reset()


@pytest.mark.parametrize("api", APIS)
def test_a_clean_answer_is_used_with_its_token_counts(lab: Any, api: str) -> None:
    records: list[CallRecord] = []
    result = plan(config(lab, api), records)
    assert result.outcome == "ok" and result.value.queries, result
    [record] = records
    [call] = lab_calls(lab)
    assert record.prompt_tokens == call["prompt_tokens"] > 0 and record.completion_tokens == call["eval_tokens"] > 0
    assert call["endpoint"] == ("chat" if api == "ollama" else "openai")
    assert call["num_predict"] == record.num_predict, "the output budget is sent (num_predict / max_tokens)"
    assert call["task"] == "plan", "the schema reached the server (the lab reads its title)"
    # the server's own clock is kept (Ollama's durations, llama-server's timings), as the lab's driver measured it
    assert record.prompt_seconds is not None and record.eval_seconds is not None
    assert 0 <= record.prompt_seconds + record.eval_seconds <= record.seconds


@pytest.mark.parametrize("api", APIS)
def test_an_unusable_answer_is_retried_with_the_reason_then_falls_back(lab: Any, api: str) -> None:
    lab.fault(kind="answer", message="I cannot help with that.", count=2)
    records: list[CallRecord] = []
    result = plan(config(lab, api), records)
    assert result.outcome == "fallback" and [r.outcome for r in records] == ["error", "fallback"]
    assert result.value == planner.template_plan(QUESTION)
    retry = lab_calls(lab)[1]
    assert retry["retry"], "the retry quotes the reason, as on the other API"


@pytest.mark.parametrize("api", APIS)
def test_a_fenced_answer_is_repaired(lab: Any, api: str) -> None:
    answer = '```json\n{"research_question": "BER overrun", "angles": [], "queries": ["BER cost audit"]}\n```'
    lab.fault(kind="answer", message=answer, count=1)
    result = plan(config(lab, api))
    assert result.outcome == "repaired" and result.value.queries == ["BER cost audit"]


@pytest.mark.parametrize("api", APIS)
def test_a_crashed_runner_is_asked_again_and_a_request_that_always_crashes_it_falls_back(lab: Any, api: str) -> None:
    lab.fault(kind="poison", match="Berlin airport", status=500)
    records: list[CallRecord] = []
    result = plan(config(lab, api), records)
    assert result.outcome == "poisoned", [r.error for r in records]
    assert [r.outcome for r in records] == ["probe", "poisoned"], "judged by a health probe the server answered"


@pytest.mark.parametrize("api", APIS)
def test_a_server_down_for_every_attempt_is_an_outage_said_with_the_server(lab: Any, api: str) -> None:
    lab.fault(kind="status", status=503, count=10, message="server busy")
    with pytest.raises(ServiceDown) as raised:
        plan(config(lab, api, transport_attempts=2))
    assert "HTTP 503: server busy" in str(raised.value)
    assert str(raised.value).startswith("Ollama at" if api == "ollama" else "the model server at")


@pytest.mark.parametrize("api", APIS)
def test_a_busy_servers_retry_after_is_waited(lab: Any, api: str) -> None:
    """429 with Retry-After: 1 (vLLM behind a gateway, a rate-limiting proxy): the next try waits at least a second,
    where the backoff alone would wait 10 ms. Ollama's client keeps no headers: there the backoff decides."""
    lab.fault(kind="status", status=429, count=1, message="rate limited", retry_after=1)
    waits: list[tuple[str, float, str]] = []
    started = time.time()
    result = plan(config(lab, api), waits=waits)
    assert result.outcome == "ok"
    [(_service, retry_at, reason)] = waits
    assert "HTTP 429: rate limited" in reason
    if api == "openai":
        assert retry_at - started >= 0.9, "the Retry-After was not honoured"
    else:
        assert retry_at - started < 0.9


@pytest.mark.parametrize("api", APIS)
def test_an_answer_slower_than_the_timeout_and_a_dropped_connection_are_waited_out(lab: Any, api: str) -> None:
    lab.fault(kind="delay", seconds=3.0, count=1)
    lab.fault(kind="drop", count=1)
    records: list[CallRecord] = []
    result = plan(config(lab, api, timeout_s=1.0), records)
    assert result.outcome == "ok" and len(records) == 1, "two transport failures, then the answer"


@pytest.mark.parametrize("api", APIS)
def test_an_answer_cut_at_its_budget_is_flagged(lab: Any, api: str) -> None:
    lab.fault(kind="endless", count=2)
    records: list[CallRecord] = []
    plan(config(lab, api), records)
    assert records and all(r.truncated_answer for r in records), "finish_reason / done_reason 'length' read"


@pytest.mark.parametrize("api", APIS)
def test_a_model_the_server_does_not_have_is_missing_with_the_fix_for_that_api(lab: Any, api: str) -> None:
    with pytest.raises(ModelMissing) as raised:
        plan(config(lab, api, model="not-there"))
    assert raised.value.fix == ("run: ollama pull not-there" if api == "ollama" else raised.value.fix)
    if api == "openai":
        assert "briefd check" in (raised.value.fix or "") and "/v1" in (raised.value.fix or "")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("structured", ["json", "none"])
def test_json_asked_in_words_carries_the_schema_in_the_prompt_and_not_as_a_grammar(
        lab: Any, api: str, structured: str) -> None:
    """`structured` json or none: the server gets no schema to decode by (JSON mode, or nothing), the system
    prompt carries it, and the call's record says which way it was asked."""
    answer = json.dumps({"research_question": "BER overrun", "angles": ["cost"], "queries": ["BER cost audit"],
                         "gaps": ["final cost"]})
    lab.fault(kind="answer", match=SCHEMA_LEAD, message=answer)  # only a prompt that tells the schema gets it
    records: list[CallRecord] = []
    result = plan(config(lab, api, structured=structured), records)
    assert result.outcome == "ok" and result.value.queries == ["BER cost audit"], [r.error for r in records]
    [record] = records
    assert record.structured == structured
    [call] = lab_calls(lab)
    assert call["task"] == "", "no schema was sent for the server to decode by"


@pytest.mark.parametrize("api", APIS)
def test_the_schema_path_is_recorded(lab: Any, api: str) -> None:
    records: list[CallRecord] = []
    plan(config(lab, api), records)
    assert [r.structured for r in records] == ["schema"]


@pytest.mark.parametrize("api", APIS)
def test_the_cache_key_names_the_api_but_ollamas_keys_are_unchanged(api: str) -> None:
    cfg = ModelConfig(host="http://m:1", model="m", api=api)
    messages = [{"role": "user", "content": "x"}]
    ollama_key = prompt_key(ModelConfig(host="http://m:1", model="m"), messages, {})
    assert (prompt_key(cfg, messages, {}) == ollama_key) == (api == "ollama")


# ---- what only the OpenAI-compatible servers do ----------------------------------------------------


def test_a_prompt_past_the_servers_context_falls_back_as_too_long_not_as_an_outage(lab: Any) -> None:
    """vLLM refuses it with 400 "maximum context length" (Ollama would cut it silently): the call falls back at
    once, with no health probe, says why and what to set, and is flagged as a truncated prompt."""
    long_user = USER + "\n" + "background " * 3000
    records: list[CallRecord] = []
    result = plan(config(lab, "openai", num_ctx=32768), records, user=long_user)
    assert result.outcome == "fallback"
    [record] = records
    assert record.truncated_prompt and "too long for this model's context" in (record.error or "")
    assert "maximum context length" in (record.error or "") and "num_ctx" in (record.error or "")
    assert len(lab.stats()["calls"]) == 1, "no probe, no retry: the same prompt cannot fit"


def test_the_context_the_server_reports_sizes_the_prompts(lab: Any) -> None:
    cfg = config(lab, "openai", num_ctx=8192)

    async def go() -> ModelConfig:
        client = make_client(cfg)
        try:
            return await served_config(cfg, client)
        finally:
            await client.close()
    assert asyncio.run(go()).num_ctx == 2048, "the lab's max_model_len, as vLLM reports it"


def test_a_server_that_refuses_json_schema_is_asked_with_the_next_format(scripted_ollama: Any,
                                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """llama-cpp-python's server takes only json_object (with a schema); one that takes neither gets no
    response_format, and the answer is parsed and repaired as any other. Each client asks once per format."""
    from tests.conftest import serve_ollama

    for formats, path in (("json_object", "json_object"), ("", "none")):
        for lab in serve_ollama(tmp_path_factory.mktemp("formats"), "scripted", name=f"formats-{path}",
                                extra=["--openai-formats", formats]):
            cfg = config(lab, "openai")

            async def two_calls() -> list[CallResult[Any]]:
                client = make_client(cfg)
                results = []
                try:
                    for question in (QUESTION, "Why was the Kestrel River bridge closed?"):
                        results.append(await call_json(
                            client, cfg, purpose="plan", system="s", user=planner.plan_prompt(question, "", "x"),
                            schema=planner.PLAN_SCHEMA, coerce=planner.coerce_plan(question),
                            fallback=lambda: planner.template_plan(QUESTION)))
                finally:
                    await client.close()
                return results

            results = asyncio.run(two_calls())
            calls = lab.stats()["calls"]
            refused = [c for c in calls if c.get("outcome") == "http-400"]
            assert len(refused) == STRUCTURED_PATHS.index(path), f"{formats!r}: each refused format asked once"
            assert all(r.outcome in ("ok", "repaired", "retried", "fallback") for r in results)
            answered = [c for c in calls if c.get("reached_model")]
            assert len(answered) >= 2


def test_context_refusals_are_told_from_other_refusals() -> None:
    said = {
        "This model's maximum context length is 2048 tokens. However, you requested 3800 tokens": True,  # vLLM
        "Requested tokens (4100) exceed context window of 4096": True,  # llama-cpp-python
        "the request exceeds the available context size, try increasing it": True,  # llama.cpp's server
        "response_format: type 'json_schema' is not supported": False,
        "Invalid API key": False,
        "temperature must be between 0 and 2": False,
    }
    for words, too_long in said.items():
        assert is_context_refusal(ModelHTTPError(400, words)) is too_long, words


def test_a_servers_clock_is_read_where_it_says_one_and_none_is_invented_where_not() -> None:
    answer = {"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
    said = read_completion({**answer, "timings": {"prompt_ms": 250.0, "predicted_ms": 1500}}, "none")
    assert (said.prompt_seconds, said.eval_seconds) == (0.25, 1.5)
    silent = read_completion(answer, "none")  # vLLM, llama-cpp-python's server: no timings
    assert (silent.prompt_seconds, silent.eval_seconds) == (None, None)
    odd = read_completion({**answer, "timings": {"prompt_ms": "soon", "predicted_ms": -3}}, "none")
    assert (odd.prompt_seconds, odd.eval_seconds) == (None, None)


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after_s("3") == 3.0 and retry_after_s("0.5") == 0.5
    assert retry_after_s("Sun, 06 Dec 2026 20:00:10 GMT", now=1796587200.0) == 10.0  # 20:00:00 UTC that day
    assert retry_after_s("soon") is None and retry_after_s(None) is None and retry_after_s("-4") == 0.0


# ---- the key -----------------------------------------------------------------------------------------


KEY = "sk-lab-0123456789abcdef-never-shown"


def test_the_key_goes_in_one_header_and_nowhere_a_user_reads(lab: Any, tmp_path: Any,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """Sent as a bearer token; absent from call records, errors, the settings shown and the log."""
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    settings = load_settings({}, {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": lab.url + "/v1",
                                  "BRIEFD_OPENAI_API_KEY_FILE": str(key_file)})
    assert openai_key(settings) == KEY
    caplog.set_level(logging.DEBUG)
    records: list[CallRecord] = []
    lab.fault(kind="status", status=401, count=5, message="Invalid API key")
    with pytest.raises(Exception) as raised:
        plan(config(lab, "openai"), records, api_key=KEY)
    said = [str(raised.value), getattr(raised.value, "fix", "") or "", caplog.text,
            json.dumps([r.__dict__ for r in records], default=str)]
    assert "API key" in str(raised.value), "a refused key is said, with the fix"
    assert not any(KEY in text for text in said)
    from briefd.daemon.core.settings import effective_settings
    assert KEY not in json.dumps(effective_settings(settings))
    inline = load_settings({}, {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": lab.url + "/v1",
                                "BRIEFD_OPENAI_API_KEY": KEY})
    assert KEY not in json.dumps(effective_settings(inline)) and openai_key(inline) == KEY


def test_settings_refuse_an_openai_api_without_a_server_or_with_a_key_in_the_url() -> None:
    from briefd.daemon.core.settings import SettingsError

    with pytest.raises(SettingsError) as no_url:
        load_settings({}, {"BRIEFD_MODEL_API": "openai"})
    assert "BRIEFD_OPENAI_BASE_URL" in str(no_url.value)
    with pytest.raises(SettingsError) as in_url:
        load_settings({}, {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": f"http://u:{KEY}@gpu:8000/v1"})
    assert "BRIEFD_OPENAI_API_KEY" in str(in_url.value) and KEY not in str(in_url.value)
    with pytest.raises(SettingsError) as bad_key:
        load_settings({}, {"BRIEFD_MODEL_API": "openai", "BRIEFD_OPENAI_BASE_URL": "http://gpu:8000/v1",
                           "BRIEFD_OPENAI_API_KEY": "has a space " + KEY})
    assert KEY not in str(bad_key.value)
    assert Settings().model_api == "ollama"


# ---- briefd check --------------------------------------------------------------------------------


def test_check_probes_v1_models_and_names_the_fix(lab: Any) -> None:
    served = asyncio.run(probe(lab.url + "/v1", "lab-scripted", 10.0, api="openai"))
    assert served.ok and "lab-scripted" in served.message
    missing = asyncio.run(probe(lab.url + "/v1", "gemma-9", 10.0, api="openai"))
    assert not missing.ok and "lab-scripted:latest" in missing.message and "model" in (missing.fix or "")
    no_v1 = asyncio.run(probe(lab.url, "lab-scripted", 10.0, api="openai"))
    assert not no_v1.ok and "/v1" in (no_v1.fix or "")


def test_several_openai_servers_share_the_work_as_ollama_hosts_do() -> None:
    from briefd.daemon.model.hosts import model_hosts

    settings = load_settings({}, {"BRIEFD_MODEL_API": "openai",
                                  "BRIEFD_OPENAI_BASE_URL": "http://gpu-1:8000/v1, gpu-2:8000/v1/"})
    assert model_hosts(settings) == ("http://gpu-1:8000/v1", "http://gpu-2:8000/v1")
    assert model_hosts(Settings()) == (Settings().ollama_host,), "Ollama's hosts unless model_api = openai"


def test_a_key_file_others_can_read_is_warned_about_with_the_fix(tmp_path: Any) -> None:
    from briefd.daemon.core.files import readable_by_others

    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    warning = readable_by_others(key_file, "openai_api_key_file")
    assert warning is not None and f"chmod 600 {key_file}" in warning and KEY not in warning
    key_file.chmod(0o600)
    assert readable_by_others(key_file, "openai_api_key_file") is None
