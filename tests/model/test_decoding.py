"""`briefd check` times one short call each way of asking for JSON (`structured`: schema, json, none) and says
which was fastest with valid JSON (model/decoding.py, issue 32). The advice is a pure function of the trials;
the calls go to the lab's model server through both APIs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from briefd.daemon.core.settings import STRUCTURED
from briefd.daemon.model.decoding import FASTER_BY, PROBE_SCHEMA, Trial, decoding_line, time_structured, valid_answer
from briefd.daemon.model.llm import ModelConfig
from lab.servers import free_port


def trial(way: str, ms: float, valid: bool = True, tokens: int = 50, clock: bool = True) -> Trial:
    return Trial(way, tokens, ms * tokens / 1000, clock, valid)


def test_an_answer_is_valid_when_it_is_one_object_with_the_required_keys() -> None:
    assert valid_answer('{"colours": [{"colour": "red", "example": "a rose"}]}')
    assert valid_answer('{"colours": []}')
    assert not valid_answer('{"colors": []}')  # a key of its own: the parse needs the schema's
    assert not valid_answer('["red"]') and not valid_answer("red, green") and not valid_answer('{"colours": [')


def test_the_line_names_each_way_and_advises_only_a_clear_saving_with_valid_json() -> None:
    line = decoding_line([trial("schema", 80), trial("json", 30), trial("none", 28, valid=False)], "schema", "m")
    assert "schema 80 ms a token, valid JSON" in line and "none 28 ms a token, NOT valid JSON" in line
    assert 'fastest with valid JSON: json (set structured = "json"; it is "schema" now)' in line
    close = decoding_line([trial("schema", 30 * FASTER_BY * 0.99), trial("json", 30), trial("none", 29, False)],
                          "schema", "m")
    assert 'fastest with valid JSON: json (structured = "schema" is set)' in close, "under FASTER_BY: no advice"
    broken = decoding_line([trial("schema", 30), trial("json", 31), trial("none", 20, valid=False)], "none", "m")
    assert 'set structured = "schema"; it is "none" now' in broken, "the way set gave no valid JSON: advised away"


def test_a_failed_call_and_a_server_without_a_clock_are_said_as_such() -> None:
    failed = Trial("schema", 0, 0.0, False, False, error="ModelHTTPError: HTTP 500: grammar")
    line = decoding_line([failed, trial("json", 30, clock=False), trial("none", 28, valid=False)], "schema", "m")
    assert "schema failed (ModelHTTPError: HTTP 500: grammar)" in line
    assert "json 30 ms a token (wall), valid JSON" in line
    nothing = decoding_line([trial("json", 30, valid=False), trial("none", 28, valid=False)], "json", "m")
    assert 'no way gave valid JSON: keep structured = "json"' in nothing


def test_a_server_that_does_not_answer_is_tried_once_not_three_times() -> None:
    cfg = ModelConfig(host=f"http://127.0.0.1:{free_port()}", model="m", api="ollama", num_ctx=2048, num_predict=512)
    trials = asyncio.run(time_structured(cfg))
    assert trials[0].error and not trials[0].answered
    assert [t.error for t in trials[1:]] == ["not tried: the server did not answer"] * 2


@pytest.mark.lab
@pytest.mark.parametrize("api", ("ollama", "openai"))
def test_each_way_is_asked_as_its_name_says_on_the_configured_server(scripted_ollama: Any, api: str) -> None:
    scripted_ollama.reset()
    host = scripted_ollama.url if api == "ollama" else scripted_ollama.url + "/v1"
    cfg = ModelConfig(host=host, model="lab-scripted", api=api, num_ctx=2048, num_predict=512)
    trials = asyncio.run(time_structured(cfg))
    assert [t.structured for t in trials] == list(STRUCTURED)
    calls = [c for c in scripted_ollama.stats()["calls"] if c.get("reached_model")]
    # only `schema` hands the server the schema (the lab reads its title); json and none tell it in words
    assert [c["task"] for c in calls] == [PROBE_SCHEMA["title"], "", ""]
    by = {t.structured: t for t in trials}
    assert by["schema"].valid and by["schema"].generated > 0 and not by["schema"].error
    assert by["schema"].clock, "the lab keeps a clock (Ollama's durations; llama-server's timings)"
    # the scripted stand-in answers the probe's shape only through the schema: without it, not valid
    assert not by["none"].valid
    scripted_ollama.reset()
