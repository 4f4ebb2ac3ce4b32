"""call_json and probe against a real HTTP server speaking the Ollama API on loopback.

The server here is deliberately tiny: a queue of canned HTTP answers per test, and a log of
what the official `ollama` client really sent. (The full lab server lives in lab/.)
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from briefd.daemon.model.llm import (
    PROBE_AFTER_REFUSALS,
    PROBE_PURPOSE,
    RETRY_PREFIX,
    CallRecord,
    CallResult,
    FAILURE_REPLAY_S,
    KeptFailure,
    ModelConfig,
    AUTH_STATUSES,
    ModelMissing,
    ModelRefused,
    ServiceDown,
    backoff_delay,
    call_json,
    estimate_tokens,
    fits,
    make_client,
    probe_options,
    prompt_budget,
    output_budget,
    prompt_key,
    refusal_fix,
)
from briefd.daemon.model.check import probe
from lab.servers import free_port

# ---- the scripted server ---------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; str → sent as is
    delay_s: float = 0.0


def chat(content: str, *, done_reason: str = "stop", prompt_eval_count: int | None = 120,
         eval_count: int | None = 40, thinking: str | None = None) -> Reply:
    """A non-streaming /api/chat answer shaped like Ollama's."""
    body: dict[str, Any] = {
        "model": "lab", "created_at": "2026-11-22T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True, "done_reason": done_reason,
        "total_duration": 1_000_000, "load_duration": 1000, "eval_duration": 500_000,
    }
    if thinking is not None:
        body["message"]["thinking"] = thinking
    if prompt_eval_count is not None:
        body["prompt_eval_count"] = prompt_eval_count
    if eval_count is not None:
        body["eval_count"] = eval_count
    return Reply(200, body)


def error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


@dataclass
class Scripted:
    url: str
    replies: deque[Reply] = field(default_factory=deque)
    chats: list[dict[str, Any]] = field(default_factory=list)  # request bodies of /api/chat, in order
    gets: dict[str, Reply] = field(default_factory=dict)  # GET path → reply

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(state: Scripted) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

        def _send(self, reply: Reply) -> None:
            if reply.delay_s:
                time.sleep(reply.delay_s)
            raw = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = raw.encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:
            self._send(state.gets.get(self.path, Reply(404, "404 page not found")))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path != "/api/chat":
                self._send(Reply(404, "404 page not found"))
                return
            state.chats.append(body)
            # An exhausted script is a test bug: answer something the test will notice.
            self._send(state.replies.popleft() if state.replies else error(500, "script exhausted"))

    return Handler


@pytest.fixture
def server() -> Iterator[Scripted]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state := Scripted(url="")))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()



# ---- what briefd asks ------------------------------------------------------------------------------

SYSTEM = "You answer only with one JSON object that matches the given schema."
USER = "QUESTION: How large was the cost overrun of the Berlin airport?\nTODAY: 2026-11-22"
SCHEMA: dict[str, Any] = {
    "title": "plan", "type": "object",
    "properties": {"research_question": {"type": "string"}, "queries": {"type": "array", "items": {"type": "string"}}},
    "required": ["research_question", "queries"],
}
GOOD = '{"research_question": "BER overrun", "queries": ["BER cost audit", "BER final cost"]}'
GOOD_PLAN = ("BER overrun", ("BER cost audit", "BER final cost"))
FALLBACK_PLAN = ("template question", ("template query",))


def coerce_plan(value: Any) -> tuple[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    question = value["research_question"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError("research_question must be a non-empty string")
    queries = value["queries"]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries) or not queries:
        raise ValueError("queries must be a non-empty list of strings")
    return question, tuple(queries)


class DictCache:
    """The AnswerCache protocol over a dict (the store implements it over SQLite)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[str, int | None, int | None]] = {}
        self.failures: dict[str, tuple[KeptFailure, float]] = {}  # key -> (failure, when kept: monotonic)

    def get(self, key: str) -> str | None:
        hit = self.answers.get(key)
        return hit[0] if hit else None

    def put(self, key: str, answer: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        self.answers[key] = (answer, prompt_tokens, completion_tokens)
        self.failures.pop(key, None)

    def failure(self, key: str, max_age_s: float) -> KeptFailure | None:
        kept = self.failures.get(key)
        return kept[0] if kept and time.monotonic() - kept[1] <= max_age_s else None

    def put_failure(self, key: str, failure: KeptFailure) -> None:
        self.failures[key] = (failure, time.monotonic())

    def older(self, seconds: float) -> None:
        """Every kept failure `seconds` older (a later day's run)."""
        self.failures = {k: (f, at - seconds) for k, (f, at) in self.failures.items()}


def config(url: str, **overrides: Any) -> ModelConfig:
    # Tiny backoff so outage tests take milliseconds; everything else as briefd runs it.
    settings: dict[str, Any] = {"host": url, "model": "lab-scripted", "backoff_base_s": 0.01, "backoff_cap_s": 0.05}
    settings.update(overrides)
    return ModelConfig(**settings)


@dataclass
class Run:
    result: CallResult[Any]
    records: list[CallRecord]
    waits: list[tuple[str, float, str]]


def ask(cfg: ModelConfig, *, cache: DictCache | None = None, user: str = USER, system: str = SYSTEM,
        schema: dict[str, Any] = SCHEMA, retry_cut: bool = True) -> Run:
    records: list[CallRecord] = []
    waits: list[tuple[str, float, str]] = []

    async def go() -> CallResult[Any]:
        client = make_client(cfg)
        try:
            return await call_json(
                client, cfg, purpose="plan", system=system, user=user, schema=schema, coerce=coerce_plan,
                fallback=lambda: FALLBACK_PLAN, cache=cache, record=records.append,
                on_wait=lambda service, at, reason, fix: waits.append((service, at, reason)), retry_cut=retry_cut,
            )
        finally:
            await client.close()

    return Run(asyncio.run(go()), records, waits)


# ---- a clean call ----------------------------------------------------------------------------------


def test_a_clean_answer_is_used_and_the_request_carries_every_setting(server: Scripted) -> None:
    server.script(chat(GOOD, prompt_eval_count=321, eval_count=45))
    cfg = config(server.url, num_ctx=4096, num_predict=512, temperature=0.1, seed=7)
    cache = DictCache()
    run = ask(cfg, cache=cache)

    assert run.result.value == GOOD_PLAN
    assert run.result.outcome == "ok"
    assert run.result.repairs == []
    assert (run.result.prompt_tokens, run.result.completion_tokens) == (321, 45)

    [sent] = server.chats
    assert sent["model"] == "lab-scripted"
    assert sent["options"] == {"num_ctx": 4096, "num_predict": 512, "temperature": 0.1, "seed": 7}
    assert sent["think"] is False
    assert sent["stream"] is False
    assert sent["format"] == SCHEMA
    assert sent["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]

    [rec] = run.records
    assert rec.outcome == "ok" and rec.attempt == 1 and rec.error is None
    assert (rec.prompt_tokens, rec.completion_tokens) == (321, 45)
    assert rec.answer == GOOD
    assert rec.purpose == "plan" and rec.model == "lab-scripted"
    assert rec.started_at.endswith("Z") and rec.seconds >= 0
    assert not rec.truncated_prompt and not rec.truncated_answer
    assert run.result.records == run.records
    key = prompt_key(cfg, sent["messages"], SCHEMA)
    assert rec.prompt_hash == key
    assert cache.answers == {key: (GOOD, 321, 45)}


def test_missing_token_counts_are_recorded_as_unknown(server: Scripted) -> None:
    # Ollama leaves prompt_eval_count out when the whole prompt came from its cache.
    server.script(chat(GOOD, prompt_eval_count=None, eval_count=None))
    run = ask(config(server.url))
    assert run.result.outcome == "ok"
    assert (run.records[0].prompt_tokens, run.records[0].completion_tokens) == (None, None)
    assert (run.result.prompt_tokens, run.result.completion_tokens) == (0, 0)


# ---- repaired answers ------------------------------------------------------------------------------


def test_a_fenced_answer_is_repaired_without_a_retry(server: Scripted) -> None:
    server.script(chat("Sure! Here is the plan:\n```json\n" + GOOD + "\n```"))
    run = ask(config(server.url))
    assert run.result.value == GOOD_PLAN
    assert run.result.outcome == "repaired"
    assert run.result.repairs == ["fence", "prose"]
    assert [r.outcome for r in run.records] == ["repaired"]
    assert len(server.chats) == 1


def test_an_answer_cut_off_at_num_predict_is_closed_and_flagged(server: Scripted) -> None:
    cut = '{"research_question": "BER overrun", "queries": ["BER cost audit", "BER final co'
    server.script(chat(cut, done_reason="length", eval_count=1024))
    run = ask(config(server.url))
    assert run.result.value == ("BER overrun", ("BER cost audit",)), "the query cut mid-word is dropped"
    assert run.result.outcome == "repaired"
    assert run.result.repairs == ["truncated"]
    [rec] = run.records
    assert rec.truncated_answer is True and rec.completion_tokens == 1024


def test_a_truncated_answer_that_cannot_be_used_is_retried_with_the_length_limit_named(server: Scripted) -> None:
    server.script(chat('{"research_question": "BER overrun", "queries": [', done_reason="length"), chat(GOOD))
    run = ask(config(server.url, num_predict=256))
    assert run.result.outcome == "retried"
    retry = server.chats[1]["messages"][-1]["content"]
    assert retry.startswith(RETRY_PREFIX)
    assert "cut off at the 256-token limit" in retry
    assert [r.truncated_answer for r in run.records] == [True, False]


# ---- output budgets: a bounded schema, a bounded answer ---------------------------------------------

BOUNDED: dict[str, Any] = {
    "title": "plan", "type": "object", "additionalProperties": False,
    "properties": {"research_question": {"type": "string", "maxLength": 120},
                   "queries": {"type": "array", "maxItems": 6, "minItems": 1,
                               "items": {"type": "string", "maxLength": 80}}},
    "required": ["research_question", "queries"],
}
AT_FLOOR: dict[str, Any] = {  # one short query at most: no valid answer is shorter than what was asked
    **BOUNDED, "properties": {**BOUNDED["properties"],
                              "queries": {**BOUNDED["properties"]["queries"], "maxItems": 1}},
}
CUT = '{"research_question": "BER overrun", "queries": ['


def test_a_bounded_schema_sends_its_output_budget_not_the_setting(server: Scripted) -> None:
    server.script(chat(GOOD))
    cfg = config(server.url)
    run = ask(cfg, schema=BOUNDED)
    budget = output_budget(cfg, BOUNDED)
    assert budget < cfg.num_predict
    assert server.chats[0]["options"]["num_predict"] == budget
    assert server.chats[0]["options"]["num_ctx"] == cfg.num_ctx, "one num_ctx: the model is never reloaded"
    assert run.records[0].num_predict == budget


def test_a_cut_off_answer_is_retried_with_fewer_items_and_the_tighter_schema(server: Scripted) -> None:
    server.script(chat(CUT, done_reason="length"), chat(GOOD))
    cfg = config(server.url)
    run = ask(cfg, schema=BOUNDED)
    assert run.result.outcome == "retried" and run.result.value == GOOD_PLAN
    first, retry = server.chats
    assert first["format"] == BOUNDED
    assert retry["format"]["properties"]["queries"]["maxItems"] == 3, "half the items"
    assert retry["options"]["num_predict"] < first["options"]["num_predict"]
    said = retry["messages"][-1]["content"]
    assert said.startswith(RETRY_PREFIX)
    assert f"cut off at the {first['options']['num_predict']}-token limit" in said
    assert "at most 3 queries" in said
    assert [r.num_predict for r in run.records] == [first["options"]["num_predict"], retry["options"]["num_predict"]]


def test_a_cut_off_answer_that_cannot_be_shorter_is_not_retried(server: Scripted) -> None:
    server.script(chat(CUT, done_reason="length"), chat(GOOD))
    run = ask(config(server.url), schema=AT_FLOOR)
    assert len(server.chats) == 1, "asking again for the same thing would be cut off again"
    assert run.result.outcome == "fallback" and run.result.value == FALLBACK_PLAN
    [rec] = run.records
    assert rec.truncated_answer and rec.outcome == "fallback"
    assert rec.error and "no shorter answer can exist" in rec.error


def test_a_caller_may_say_a_cut_off_answer_is_not_worth_asking_again(server: Scripted) -> None:
    """The synthesis: its schema holds the summary to its budget, and its fallback (the strongest
    quotes) is at least as good as a summary in half the room."""
    server.script(chat(CUT, done_reason="length"), chat(GOOD))
    run = ask(config(server.url), schema=BOUNDED, retry_cut=False)
    assert len(server.chats) == 1
    assert run.result.outcome == "fallback" and run.result.retry_skipped
    assert run.records[0].error and "a shorter answer would not be better" in run.records[0].error


def test_a_retry_that_is_cut_off_is_a_fallback_of_a_retry_made_not_a_retry_skipped(server: Scripted) -> None:
    """usage counts a fallback and no skipped retry: the retry was asked (and paid for), then cut off. It
    counted as skipped once the chaos lab cut off a synthesis's retry (tests/e2e/test_chaos.py, by chance)."""
    server.script(chat("I cannot help with that."), chat(CUT, done_reason="length"))
    run = ask(config(server.url), schema=BOUNDED, retry_cut=False)
    assert len(server.chats) == 2
    assert run.result.outcome == "fallback" and not run.result.retry_skipped


def test_an_answer_that_is_wrong_but_not_cut_off_is_retried_with_the_same_schema(server: Scripted) -> None:
    server.script(chat('{"research_question": "BER overrun", "queries": []}'), chat(GOOD))
    run = ask(config(server.url), schema=AT_FLOOR)
    assert run.result.outcome == "retried"
    assert server.chats[1]["format"] == AT_FLOOR


def test_a_runaway_answer_costs_no_more_than_its_purposes_budget(scripted_ollama: Any) -> None:
    """The lab server's endless fault ignores the schema, as a server without a grammar would:
    the array is cut at the call's budget, not at the 1,024-token setting."""
    from briefd.daemon.research import planner

    lab = scripted_ollama
    lab.reset()
    lab.fault(kind="endless", model="lab-scripted")
    cfg = config(lab.url)
    schema = planner.evidence_schema("plain", 2)
    prompt = planner.evidence_prompt("How much did the tunnel overrun?", "2026-11-22", [], [
        planner.PassageIn(1, "http://127.0.0.1/a", "Audit", "page",
                          "The overrun reached $430 million. Engineers blamed the clay.")], lambda _t: True)

    async def go() -> CallResult[Any]:
        client = make_client(cfg)
        try:
            return await call_json(client, cfg, purpose="evidence", system=SYSTEM, user=prompt.text,
                                   schema=schema, coerce=planner.coerce_evidence,
                                   fallback=lambda: planner.EvidenceAnswer([], [], []))
        finally:
            await client.close()

    result = asyncio.run(go())
    budget = output_budget(cfg, schema)
    assert budget < cfg.num_predict // 2
    [call] = [c for c in lab.stats()["calls"] if c.get("fault") == "endless"]
    assert call["num_predict"] == budget and call["eval_tokens"] <= budget
    assert result.completion_tokens <= budget
    assert len(result.value.items) <= planner.EVIDENCE_MAX_ITEMS, "the repaired answer is cut to the bound"


# ---- the one retry, then the fallback --------------------------------------------------------------


def test_a_wrong_shape_is_retried_once_with_the_reason(server: Scripted) -> None:
    bad = '{"research_question": "BER overrun", "queries": "BER cost audit"}'
    server.script(chat(bad, prompt_eval_count=100, eval_count=20), chat(GOOD, prompt_eval_count=150, eval_count=30))
    cache = DictCache()
    run = ask(config(server.url), cache=cache)

    assert run.result.value == GOOD_PLAN
    assert run.result.outcome == "retried"
    assert [(r.outcome, r.attempt) for r in run.records] == [("error", 1), ("retried", 2)]
    assert "queries must be a non-empty list of strings" in (run.records[0].error or "")
    assert (run.result.prompt_tokens, run.result.completion_tokens) == (250, 50)

    first, second = server.chats
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": bad}
    follow_up = second["messages"][3]
    assert follow_up["role"] == "user"
    assert follow_up["content"] == (
        f"{RETRY_PREFIX} the JSON does not match the schema: queries must be a non-empty list of strings. "
        "Reply with only a JSON object that matches the schema."
    )
    # The retry keeps every setting of the first request.
    assert second["options"] == first["options"] and second["format"] == SCHEMA and second["think"] is False
    # The answer that worked is cached under the first request's key: a restart replays it.
    [(key, (answer, p, c))] = cache.answers.items()
    assert key == run.records[0].prompt_hash and answer == GOOD and (p, c) == (250, 50)


def test_a_missing_field_is_named_in_the_retry(server: Scripted) -> None:
    server.script(chat('{"research_question": "BER overrun"}'), chat(GOOD))
    run = ask(config(server.url))
    assert run.result.outcome == "retried"
    assert "the JSON lacks the required field 'queries'" in server.chats[1]["messages"][-1]["content"]


def test_bad_output_twice_gives_the_fallback_and_never_raises(server: Scripted) -> None:
    server.script(chat("I cannot answer that."), chat('{"research_question": "x", "queries": []}'))
    cache = DictCache()
    run = ask(config(server.url), cache=cache)
    assert run.result.value == FALLBACK_PLAN
    assert run.result.outcome == "fallback"
    assert [(r.outcome, r.attempt) for r in run.records] == [("error", 1), ("fallback", 2)]
    assert "no JSON object" in (run.records[0].error or "")
    assert len(server.chats) == 2
    assert cache.answers == {}  # no answer is kept: the failure is kept apart (test_a_deterministic_failure_...)


def test_an_empty_answer_is_retried_with_a_placeholder_the_client_does_not_drop(server: Scripted) -> None:
    # The client drops message keys whose value is falsy, so "" would arrive without content.
    server.script(chat("", thinking="Let me think about this at length..."), chat(GOOD))
    run = ask(config(server.url))
    assert run.result.outcome == "retried"
    assistant = server.chats[1]["messages"][2]
    assert assistant == {"role": "assistant", "content": "(empty answer)"}
    assert "spent its output on thinking" in server.chats[1]["messages"][3]["content"]


def test_an_other_4xx_uses_the_fallback_without_retrying(server: Scripted) -> None:
    """A 4xx for this request while the server answers a one-word probe: the prompt is refused, not briefd."""
    server.script(error(400, "invalid JSON schema in format"), chat("OK", prompt_eval_count=7, eval_count=1))
    run = ask(config(server.url))
    assert run.result.outcome == "fallback"
    assert run.result.value == FALLBACK_PLAN
    probe_rec, rec = run.records
    assert (probe_rec.purpose, probe_rec.outcome, probe_rec.completion_tokens) == (PROBE_PURPOSE, "probe", 1)
    assert rec.outcome == "fallback" and "HTTP 400" in (rec.error or "") and "invalid JSON schema" in (rec.error or "")
    assert len(server.chats) == 2 and "format" not in server.chats[1], "asked once, then probed: never asked again"
    assert run.waits == []


# ---- the cache -------------------------------------------------------------------------------------


def test_a_cached_answer_makes_no_request(server: Scripted) -> None:
    cfg = config(server.url)
    cache = DictCache()
    server.script(chat(GOOD))
    assert ask(cfg, cache=cache).result.outcome == "ok"
    assert len(server.chats) == 1

    replay = ask(cfg, cache=cache)  # as after a restart: a new client, the same store
    assert replay.result.value == GOOD_PLAN
    assert replay.result.outcome == "cached"
    assert len(server.chats) == 1
    [rec] = replay.records
    assert rec.outcome == "cached" and (rec.prompt_tokens, rec.completion_tokens) == (0, 0)
    assert rec.answer == GOOD


def test_a_cached_answer_needs_no_server_at_all() -> None:
    cfg = config(f"http://127.0.0.1:{free_port()}")
    cache = DictCache()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    cache.put(prompt_key(cfg, messages, SCHEMA), "```json\n" + GOOD + "\n```", 100, 20)
    run = ask(cfg, cache=cache)
    assert run.result.outcome == "cached"
    assert run.result.value == GOOD_PLAN
    assert run.waits == []


HOSTILE_ANSWER = json.dumps({
    "research_question": "BER\u0007 \u001b[31moverrun\u001b[0m \u202eevil\u202c\u2028cost\ud800",
    "queries": ["BER \u2066cost\u2069\taudit", "\u001b]0;owned\u0007final cost"],
}, ensure_ascii=True)


def test_the_models_answer_is_cleaned_at_the_door_fresh_or_cached(server: Scripted) -> None:
    """Terminal escapes, bidi overrides, line separators and lone surrogates in the model's
    JSON never reach briefd's values (and so never its reports), also when replayed from cache."""
    server.script(chat(HOSTILE_ANSWER))
    cache = DictCache()
    fresh = ask(config(server.url), cache=cache)
    cached = ask(config(server.url), cache=cache)
    assert cached.result.outcome == "cached" and len(server.chats) == 1
    for run in (fresh, cached):
        assert run.result.value == ("BER overrun evil\ncost\ufffd", ("BER cost audit", "final cost"))


def test_the_cache_key_changes_with_anything_that_changes_the_answer(server: Scripted) -> None:
    cfg = config(server.url)
    cache = DictCache()
    server.script(chat(GOOD), chat(GOOD), chat(GOOD))
    ask(cfg, cache=cache)
    ask(cfg, cache=cache, user=USER + "\nCONTEXT: airports")
    ask(config(server.url, seed=43), cache=cache)
    assert len(server.chats) == 3
    assert len(cache.answers) == 3


def test_a_cached_answer_todays_coerce_rejects_is_asked_again(server: Scripted) -> None:
    cfg = config(server.url)
    cache = DictCache()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    key = prompt_key(cfg, messages, SCHEMA)
    cache.put(key, '{"research_question": "old shape"}', 10, 5)
    server.script(chat(GOOD))
    run = ask(cfg, cache=cache)
    assert run.result.outcome == "ok"
    assert len(server.chats) == 1
    assert cache.answers[key][0] == GOOD


# ---- outages ---------------------------------------------------------------------------------------


def test_server_errors_are_waited_out_with_backoff(server: Scripted) -> None:
    server.script(error(502, "bad gateway"), error(503, "server busy, please try again"), chat(GOOD))
    before = time.time()
    run = ask(config(server.url))
    assert run.result.outcome == "ok" and run.result.value == GOOD_PLAN
    assert len(server.chats) == 3
    assert [r.outcome for r in run.records] == ["ok"]  # outages cost no model call
    assert [w[0] for w in run.waits] == ["ollama", "ollama"]
    assert "HTTP 502" in run.waits[0][2] and "bad gateway" in run.waits[0][2]
    assert "HTTP 503" in run.waits[1][2]
    assert all(before <= at <= time.time() + 1 for _, at, _ in run.waits)


def test_a_crashed_runner_is_asked_again_at_once_not_waited_out_as_an_outage(server: Scripted) -> None:
    """Issue 22: Ollama's 500 "llama runner process has terminated" was waited out (0.5-1 s with the model
    idle, and the daemon logged the model as unavailable) though the next request starts a new runner
    and waits for it by itself. The re-ask goes at once; the call is still answered, and a 500 after
    that is waited out as before (a failed try is still a try)."""
    server.script(error(500, RUNNER_CRASHED), chat(GOOD))
    run = ask(config(server.url))
    assert run.result.outcome == "ok" and run.result.value == GOOD_PLAN
    assert len(server.chats) == 2 and server.chats[0] == server.chats[1], "the same request, asked again"
    assert len(run.waits) == 1 and run.waits[0][1] <= time.time(), "told, with the re-ask due at once"
    server.script(error(500, RUNNER_CRASHED), error(503, "server busy, please try again"), chat(GOOD))
    again = ask(config(server.url, seed=7))
    assert again.result.outcome == "ok" and [w[2][:8] for w in again.waits] == ["HTTP 500", "HTTP 503"]


def test_garbage_from_the_server_counts_as_an_outage_not_as_bad_output(server: Scripted) -> None:
    # A proxy's HTML page with 200, and a 502 whose JSON body is not an object (which makes the
    # client's ResponseError itself raise AttributeError): both are the service misbehaving.
    server.script(Reply(200, "<html>Bad gateway</html>"), Reply(502, "[]"), chat(GOOD))
    run = ask(config(server.url))
    assert run.result.outcome == "ok"
    assert len(run.waits) == 2
    assert "unreadable response" in run.waits[0][2]


def test_a_server_that_stays_down_raises_service_down_after_every_attempt(server: Scripted) -> None:
    server.script(*[error(503, "server busy") for _ in range(3)])
    with pytest.raises(ServiceDown) as caught:
        ask(config(server.url, transport_attempts=3))
    assert len(server.chats) == 3
    assert caught.value.host == server.url
    assert "HTTP 503" in caught.value.reason and "after 3 attempts" in caught.value.reason


def test_connection_refused_raises_service_down_after_backoff() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    waits: list[tuple[str, float, str]] = []
    cfg = config(url, transport_attempts=4, backoff_base_s=0.02, backoff_cap_s=0.04)

    async def go() -> None:
        client = make_client(cfg)
        try:
            await call_json(client, cfg, purpose="plan", system=SYSTEM, user=USER, schema=SCHEMA, coerce=coerce_plan,
                            fallback=lambda: FALLBACK_PLAN, on_wait=lambda *w: waits.append(w))
        finally:
            await client.close()

    started = time.monotonic()
    with pytest.raises(ServiceDown) as caught:
        asyncio.run(go())
    elapsed = time.monotonic() - started
    assert "connection refused" in str(caught.value) and url in str(caught.value)
    assert [w[0] for w in waits] == ["ollama"] * 3
    # Three waits of 0.01-0.02, 0.02-0.04, 0.02-0.04 s: it did back off, and not for long.
    assert 0.05 <= elapsed < 5


def test_an_answer_slower_than_the_timeout_is_an_outage(server: Scripted) -> None:
    server.script(Reply(200, chat(GOOD).body, delay_s=1.0), Reply(200, chat(GOOD).body, delay_s=1.0))
    started = time.monotonic()
    with pytest.raises(ServiceDown) as caught:
        ask(config(server.url, timeout_s=0.2, transport_attempts=2))
    assert "timed out" in caught.value.reason
    assert time.monotonic() - started < 1.5  # the client did not wait for the slow answers


RUNNER_CRASHED = "llama runner process has terminated: exit status 2"  # Ollama's body when a prompt kills its runner


def test_a_request_refused_every_time_while_the_server_answers_a_probe_gets_the_fallback(server: Scripted) -> None:
    """Issue 8 #14: one prompt crashes the runner each time, others are answered. Waiting cannot
    cure that: after the one re-ask a tiny probe shows the server healthy, and the call falls back."""
    server.script(*[error(500, RUNNER_CRASHED)] * PROBE_AFTER_REFUSALS, chat("OK", prompt_eval_count=7, eval_count=1),
                  *[error(500, RUNNER_CRASHED)] * 4)
    cfg = config(server.url)
    run = ask(cfg)
    assert run.result.outcome == "poisoned" and run.result.value == FALLBACK_PLAN
    assert len(server.chats) == PROBE_AFTER_REFUSALS + 1, "asked twice, probed once, then no more"
    asked, probe_body = server.chats[:PROBE_AFTER_REFUSALS], server.chats[-1]
    assert all(body == asked[0] for body in asked), "the same request both times"
    assert probe_body["model"] == cfg.model and probe_body["options"] == probe_options(cfg)
    assert probe_body["options"]["num_ctx"] == cfg.num_ctx, "the probe must not make Ollama reload the model"
    assert "format" not in probe_body and len(probe_body["messages"]) == 1
    assert [(r.purpose, r.outcome) for r in run.records] == [(PROBE_PURPOSE, "probe"), ("plan", "poisoned")]
    assert run.records[0].prompt_tokens == 7 and run.records[0].completion_tokens == 1, "the probe's cost is counted"
    poisoned = run.records[1]
    assert RUNNER_CRASHED in (poisoned.error or "") and "health probe succeeded" in (poisoned.error or "")
    assert len(run.waits) == PROBE_AFTER_REFUSALS - 1, "the first refusal is told (its re-ask goes at once)"


def test_a_poisoned_request_is_replayed_for_a_day_then_a_fixed_server_gets_its_chance(server: Scripted) -> None:
    """Issue 22: the same request, the same model and options, is refused the same way: a second pass
    replays the poisoned fallback. The key cannot see an upgraded Ollama, so after FAILURE_REPLAY_S it is
    asked again (this test said before that a later run always asks again)."""
    server.script(*[error(500, RUNNER_CRASHED)] * PROBE_AFTER_REFUSALS, chat("OK"), chat(GOOD))
    cache = DictCache()
    assert ask(config(server.url), cache=cache).result.outcome == "poisoned"
    assert not cache.answers
    asked = len(server.chats)
    again = ask(config(server.url), cache=cache)
    assert again.result.outcome == "poisoned" and len(server.chats) == asked, "replayed, not asked"
    cache.older(FAILURE_REPLAY_S + 60)
    assert ask(config(server.url), cache=cache).result.outcome == "ok", "a fixed server gets its chance"


CUT_NO_SHORTER = (chat(CUT, done_reason="length"),)
BAD_TWICE = (chat("I cannot answer that."), chat('{"research_question": "x", "queries": []}'))
REFUSED = (error(400, "invalid JSON schema in format"), chat("OK"))
POISONED = (*[error(500, RUNNER_CRASHED)] * PROBE_AFTER_REFUSALS, chat("OK"))


@pytest.mark.parametrize("replies, schema, outcome, skipped", [
    (BAD_TWICE, SCHEMA, "fallback", False),
    (CUT_NO_SHORTER, AT_FLOOR, "fallback", True),
    (REFUSED, SCHEMA, "fallback", False),
    (POISONED, SCHEMA, "poisoned", False),
], ids=["bad-after-the-retry", "cut-with-no-shorter-answer", "refused-4xx", "poisoned"])
def test_a_deterministic_failure_is_replayed_as_its_fallback_without_asking(
        server: Scripted, replies: tuple[Reply, ...], schema: dict[str, Any], outcome: str, skipped: bool) -> None:
    """Issue 22: a second pass asked the model again every prompt that had failed, for the same failure."""
    server.script(*replies, chat(GOOD))
    cache = DictCache()
    first = ask(config(server.url), cache=cache, schema=schema)
    assert (first.result.outcome, first.result.retry_skipped) == (outcome, skipped)
    asked = len(server.chats)
    again = ask(config(server.url), cache=cache, schema=schema)
    assert len(server.chats) == asked, "the same request was asked again for the same failure"
    assert (again.result.outcome, again.result.value, again.result.retry_skipped) == (outcome, FALLBACK_PLAN, skipped)
    [rec] = again.records
    assert rec.outcome == "replayed" and (rec.prompt_tokens, rec.completion_tokens, rec.seconds) == (0, 0, 0.0)
    assert first.records[-1].error and first.records[-1].error in (rec.error or "")


def test_a_kept_failure_is_asked_again_when_the_model_or_its_options_change(server: Scripted) -> None:
    server.script(*BAD_TWICE, chat(GOOD), chat(GOOD))
    cache = DictCache()
    assert ask(config(server.url), cache=cache).result.outcome == "fallback"
    assert ask(config(server.url, seed=43), cache=cache).result.outcome == "ok"
    assert ask(config(server.url, model="lab-other"), cache=cache).result.outcome == "ok"
    assert len(server.chats) == 4


def test_an_outage_is_never_kept(server: Scripted) -> None:
    """503 (a full queue), a timeout, no connection: the server's trouble, not the request's."""
    server.script(*[error(503, "server busy")] * 2, chat(GOOD))
    cache = DictCache()
    with pytest.raises(ServiceDown):
        ask(config(server.url, transport_attempts=2), cache=cache)
    assert not cache.failures
    assert ask(config(server.url), cache=cache).result.outcome == "ok"


def test_a_server_that_fails_the_probe_too_is_an_outage(server: Scripted) -> None:
    """Everything fails, the probe included: that is an outage, waited out, never a fallback."""
    attempts = 4
    probes = attempts - PROBE_AFTER_REFUSALS + 1  # one after each refusal from the second on
    server.script(*[error(500, RUNNER_CRASHED)] * (attempts + probes))
    with pytest.raises(ServiceDown) as caught:
        ask(config(server.url, transport_attempts=attempts))
    assert len(server.chats) == attempts + probes, "every attempt, and a probe after each refusal from the second"
    assert sum(1 for body in server.chats if "format" not in body) == probes
    assert "health probe failed too" in caught.value.reason and RUNNER_CRASHED in caught.value.reason


def test_a_probe_that_fails_once_does_not_make_a_poisoned_request_an_outage(server: Scripted) -> None:
    """A runner that one prompt crashed restarts: the probe sent while it reloads can fail too. The
    next refusal of the same request is probed again, and its answer shows the request is poisoned
    (before, one failed probe made the request an outage: waited out, the brief's call asked again)."""
    server.script(*[error(500, RUNNER_CRASHED)] * PROBE_AFTER_REFUSALS, error(500, RUNNER_CRASHED),
                  error(500, RUNNER_CRASHED), chat("OK", prompt_eval_count=7, eval_count=1),
                  *[error(500, RUNNER_CRASHED)] * 4)
    run = ask(config(server.url, transport_attempts=4))
    assert run.result.outcome == "poisoned" and run.result.value == FALLBACK_PLAN
    probes = [body for body in server.chats if "format" not in body]
    assert len(probes) == 2 and len(server.chats) == PROBE_AFTER_REFUSALS + 1 + 2, \
        "asked three times, probed twice, then no more"
    assert [(r.purpose, r.outcome) for r in run.records] == [(PROBE_PURPOSE, "probe"), ("plan", "poisoned")]


def test_a_server_unreachable_at_the_probe_is_an_outage(server: Scripted) -> None:
    """The probe's own failure mode (no answer at all, here a timeout) counts as unhealthy."""
    slow_probe = Reply(200, chat("OK").body, delay_s=1.0)
    server.script(error(500, RUNNER_CRASHED), error(500, RUNNER_CRASHED), slow_probe,
                  error(500, RUNNER_CRASHED), slow_probe, error(500, RUNNER_CRASHED), slow_probe)
    with pytest.raises(ServiceDown) as caught:
        ask(config(server.url, timeout_s=0.3, transport_attempts=4))
    assert "health probe failed too (timed out" in caught.value.reason


def test_other_server_errors_are_not_judged_as_poisoned(server: Scripted) -> None:
    """503 is Ollama's full queue: load, not this request's fault. It never triggers a probe."""
    server.script(*[error(503, "server busy, please try again")] * 4)
    with pytest.raises(ServiceDown):
        ask(config(server.url, transport_attempts=4))
    assert all("format" in body for body in server.chats), "no probe was sent"


def test_a_model_that_is_not_pulled_raises_model_missing_with_the_fix(server: Scripted) -> None:
    server.script(error(404, "model 'lab-scripted' not found"))
    with pytest.raises(ModelMissing) as caught:
        ask(config(server.url))
    assert len(server.chats) == 1  # no retry: only the user can fix it
    assert "run: ollama pull lab-scripted" in str(caught.value)
    assert "not found" in str(caught.value)
    assert caught.value.fix == "run: ollama pull lab-scripted"


@pytest.mark.parametrize("status, words", [
    (401, "unauthorized"), (403, "Forbidden"), (407, "Proxy Authentication Required"),
    (400, "bad request"),  # not an auth status, but the probe gets it too: the server refuses everything
])
def test_a_server_that_refuses_briefd_itself_is_an_outage_with_the_fix_and_nothing_is_kept(
        server: Scripted, status: int, words: str) -> None:
    """Issue 29 #3: an auth proxy whose token was rotated answers 403 to everything. Taken as a refusal of
    the prompt, each call fell back and was kept, and replayed for a day after the proxy was fixed. The
    health probe is refused too: the server refuses briefd, the brief waits for the fix, nothing is kept."""
    server.script(error(status, words), error(status, words), chat(GOOD))
    cache = DictCache()
    with pytest.raises(ModelRefused) as caught:
        ask(config(server.url), cache=cache)
    assert len(server.chats) == 2 and "format" not in server.chats[1], "asked once, probed once, no retry"
    assert not cache.failures and not cache.answers, "a refusal of briefd is not the prompt's failure"
    refused = caught.value
    assert (refused.service, refused.status, refused.host) == ("ollama", status, server.url)
    assert f"refuses briefd (HTTP {status}: {words}" in str(refused) and refused.fix == refusal_fix(status)
    assert refused.fix in str(refused), "the message says the fix"
    if status in AUTH_STATUSES:
        assert "token" in refused.fix and "OLLAMA_HOST" in refused.fix
    else:
        assert "points at Ollama" in refused.fix
    fixed = ask(config(server.url), cache=cache)  # the proxy was fixed: asked again, answered
    assert fixed.result.outcome == "ok" and len(server.chats) == 3


def test_a_4xx_whose_probe_gets_no_answer_is_an_outage_never_kept(server: Scripted) -> None:
    """Refused, and the probe finds the server down: nothing says the prompt is at fault, so it is waited
    out (each refusal probed again) and never kept as the prompt's failure."""
    server.script(*[error(400, "bad request"), error(503, "server busy")] * 2)
    cache = DictCache()
    with pytest.raises(ServiceDown) as caught:
        ask(config(server.url, transport_attempts=2), cache=cache)
    assert "HTTP 400" in caught.value.reason and "health probe failed too (HTTP 503" in caught.value.reason
    assert len(server.chats) == 4 and not cache.failures


def test_briefd_check_says_the_fix_when_the_model_server_refuses_briefd(server: Scripted) -> None:
    server.gets["/api/version"] = error(403, "Forbidden")
    found = asyncio.run(probe(server.url, "lab-scripted", 5.0))
    assert not found.ok and "refuses briefd" in found.message and "HTTP 403" in found.message
    assert found.fix == refusal_fix(403)


# ---- prompt sizing ---------------------------------------------------------------------------------


def test_token_estimates_are_conservative_and_the_budget_leaves_room_for_the_answer() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("abcd") == 2
    cfg = ModelConfig(host="x", model="m", num_ctx=8192, num_predict=1024)
    assert prompt_budget(cfg) < 8192 - 1024
    budget = prompt_budget(cfg)
    assert fits(cfg, "s" * 3, "u" * (3 * (budget - 1)))
    assert not fits(cfg, "s" * 3, "u" * (3 * budget))


def test_an_over_long_prompt_is_sent_but_flagged(server: Scripted) -> None:
    cfg = config(server.url, num_ctx=2048, num_predict=256)
    server.script(chat(GOOD, prompt_eval_count=300))
    run = ask(cfg, user=USER + "\nCONTEXT: " + "x" * 3 * prompt_budget(cfg))
    assert run.result.outcome == "ok"
    assert run.records[0].truncated_prompt is True


def test_a_prompt_the_server_cut_silently_is_flagged_from_prompt_eval_count(server: Scripted) -> None:
    # Ollama cuts an over-long prompt to num_ctx and says so only through prompt_eval_count.
    cfg = config(server.url, num_ctx=2048, num_predict=256)
    server.script(chat(GOOD, prompt_eval_count=2048))
    run = ask(cfg)
    assert run.records[0].truncated_prompt is True


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    cfg = ModelConfig(host="x", model="m", backoff_base_s=1.0, backoff_cap_s=30.0)
    assert [backoff_delay(cfg, n, rand=lambda: 1.0) for n in (1, 2, 3, 4, 5, 6, 9)] == [1, 2, 4, 8, 16, 30, 30]
    assert [backoff_delay(cfg, n, rand=lambda: 0.0) for n in (1, 2, 6)] == [0.5, 1, 15]


def test_a_config_that_cannot_work_is_refused() -> None:
    with pytest.raises(ValueError, match="num_ctx"):
        ModelConfig(host="x", model="m", num_ctx=1024, num_predict=1024)
    with pytest.raises(ValueError, match="model"):
        ModelConfig(host="x", model=" ")


# ---- briefd check ----------------------------------------------------------------------------------

TAGS = {"models": [
    {"name": "gemma3:270m", "model": "gemma3:270m", "size": 291_000_000},
    {"name": "qwen3:latest", "model": "qwen3:latest", "size": 5_200_000_000},
]}


def test_probe_finds_a_pulled_model_and_the_version(server: Scripted) -> None:
    server.gets = {"/api/version": Reply(200, {"version": "0.12.3"}), "/api/tags": Reply(200, TAGS)}
    result = asyncio.run(probe(server.url, "gemma3:270m", 5.0))
    assert result.ok and result.reachable and result.model_pulled
    assert result.version == "0.12.3"
    assert result.models == ["gemma3:270m", "qwen3:latest"]
    assert result.fix is None
    # "qwen3" means "qwen3:latest", as Ollama reads it.
    assert asyncio.run(probe(server.url, "qwen3", 5.0)).model_pulled


def test_probe_says_to_pull_a_missing_model(server: Scripted) -> None:
    server.gets = {"/api/version": Reply(200, {"version": "0.12.3"}), "/api/tags": Reply(200, TAGS)}
    result = asyncio.run(probe(server.url, "llama3.2:1b", 5.0))
    assert result.reachable and not result.model_pulled and not result.ok
    assert result.fix == "run: ollama pull llama3.2:1b"
    assert "gemma3:270m" in result.message


def test_probe_of_nothing_says_to_start_ollama() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = asyncio.run(probe(url, "gemma3:270m", 2.0))
    assert not result.reachable and not result.ok
    assert result.fix is not None and "ollama serve" in result.fix
    assert url in result.message


def test_probe_of_something_else_says_it_is_not_ollama(server: Scripted) -> None:
    server.gets = {}  # every GET is a 404, like a web server on the wrong port
    result = asyncio.run(probe(server.url, "gemma3:270m", 5.0))
    assert not result.reachable
    assert "not like Ollama" in result.message


def test_probe_uses_the_clients_reading_of_the_host(server: Scripted) -> None:
    server.gets = {"/api/version": Reply(200, {"version": "0.12.3"}), "/api/tags": Reply(200, TAGS)}
    bare = server.url.removeprefix("http://")  # OLLAMA_HOST is often written without a scheme
    result = asyncio.run(probe(bare, "gemma3:270m", 5.0))
    assert result.ok and result.host == server.url


def test_an_answer_about_given_text_is_keyed_without_the_date_a_plan_with_it() -> None:
    """Issue 12: a brief asked again another day of the year about unchanged text replays its
    evidence and synthesis answers; another year, or a plan (whose queries may aim at this month),
    is asked again."""
    from briefd.daemon.model.llm import DATE_FREE_PURPOSES, cache_messages, prompt_key
    from briefd.daemon.research.planner import evidence_prompt, plan_prompt

    cfg = ModelConfig(host="x", model="m")
    fits = lambda text: True  # noqa: E731 - every prompt fits here
    monday, tuesday = (evidence_prompt("Q?", day, [], [], fits).text for day in ("2026-11-23", "2026-11-30"))
    assert monday != tuesday
    keys = {prompt_key(cfg, cache_messages("evidence", [{"role": "user", "content": p}]), {}) for p in (monday, tuesday)}
    assert len(keys) == 1 and "evidence" in DATE_FREE_PURPOSES
    next_year = evidence_prompt("Q?", "2027-01-04", [], [], fits).text
    assert prompt_key(cfg, cache_messages("evidence", [{"role": "user", "content": next_year}]), {}) not in keys
    plans = {prompt_key(cfg, cache_messages("plan", [{"role": "user", "content": plan_prompt("Q?", "", day)}]), {})
             for day in ("2026-11-23", "2026-11-30")}
    assert len(plans) == 2
