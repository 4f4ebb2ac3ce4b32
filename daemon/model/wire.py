"""The two ways briefd talks to a model server (setting `model_api`): Ollama's `/api/chat`, and the
OpenAI-compatible `/v1/chat/completions` that vLLM, llama.cpp's server, LM Studio, LocalAI, TGI and
Ollama's own `/v1` serve.

Why a layer of its own: `llm.call_json` owns the policy of a call (budgets, repair, the one retry,
health probes, outages, the answer cache) and must not care which protocol carried it. Each client
here turns one request into a `ChatReply` (the text, what it cost, whether it was cut at its budget)
and every refusal into a `ModelHTTPError` (the status, the server's own words, its Retry-After), so
the policy reads both the same way. Transport failures (no connection, a timeout) pass through as
httpx's (or the builtin ConnectionError the ollama client raises), and a 200 that is not a chat answer
as ValueError/TypeError/AttributeError: the policy already reads those as the service misbehaving.

What the OpenAI-compatible servers differ in, and how it is met:
- Structured output. The standard is `response_format` `{"type": "json_schema", ...}` (vLLM's guided
  decoding, Ollama's /v1, LM Studio); llama-cpp-python's server takes only `{"type": "json_object",
  "schema": ...}` and refuses the other (with 500); some servers take neither. A client asks the
  standard first and, refused for the format itself (`refuses_format`), the
  next (`STRUCTURED_PATHS`), down to none: the answer is then parsed, repaired and retried as any
  other. The path a server took is kept per client (asked once) and said in usage (`ChatReply.structured`).
- Context. There is no `num_ctx` to send: the server has one context, reported by vLLM as
  `max_model_len` in `/v1/models` (`OpenAIChat.served_context`), set by `num_ctx` where it is not. A prompt past it
  is refused with 400 (vLLM: "maximum context length"; llama.cpp: "exceed context window"), not cut
  silently as Ollama cuts it: `is_context_refusal` tells that refusal from others.
- Keys. An API key (the one a vLLM server was started with, a gateway's token) goes in one header, never in
  a message: `ModelHTTPError` carries the server's words, which never echo a bearer token back.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import ollama

from .jsonrepair import one_line
from ..core.errors import BriefdError

__all__ = [
    "STRUCTURED_PATHS",
    "ChatClient",
    "ChatReply",
    "ModelHTTPError",
    "OllamaChat",
    "OpenAIChat",
    "error_detail",
    "is_context_refusal",
    "retry_after_s",
    "listed_context",
]

STRUCTURED_PATHS = ("json_schema", "json_object", "none")
"""How an OpenAI-compatible server is asked for JSON under `structured = "schema"`, most constrained first:
`response_format` with the schema as OpenAI defines it, then as llama.cpp's server takes it, then not at all
(the schema in the prompt; parse and repair)."""

SCHEMA_LEAD = "Your answer must be one JSON object that matches this JSON schema:"
"""Where the server is not given the schema (`structured` json or none, or a server that takes no
`response_format`), the system prompt carries it, compact, after these words: without it a model never
learns the keys the answer must have."""


@dataclass(frozen=True)
class ChatReply:
    """One answered request, whichever API carried it."""

    content: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cut: bool  # generation stopped at the output budget (Ollama's done_reason / OpenAI's finish_reason "length")
    thinking: str = ""  # what a thinking model said before its answer, where the server returns it apart
    structured: str = "schema"  # how JSON was asked for: schema (decoding held to it), json (JSON mode), none
    # the server's own clock, where it says (Ollama's prompt_eval_duration and eval_duration, llama.cpp's `timings`):
    # seconds reading the prompt and generating the answer, without the queue, the load or the transport
    prompt_seconds: float | None = None
    eval_seconds: float | None = None


class ModelHTTPError(BriefdError):
    """The server answered with an HTTP error: its status, its own words (one line), and how long it asked
    to be left alone (Retry-After, in seconds) when it said."""

    def __init__(self, status: int, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


class ChatClient(Protocol):
    """What `llm` asks of a model server: one chat request, not streamed."""

    api: str  # one of settings.MODEL_APIS

    async def chat(self, model: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                   options: dict[str, Any], keep_alive: str | float | None,
                   structured: str = "schema") -> ChatReply: ...

    async def close(self) -> None: ...


def schema_in_prompt(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """`messages` with the schema told in words (`SCHEMA_LEAD`), at the end of the system message."""
    told = f"{SCHEMA_LEAD} {json.dumps(schema, separators=(',', ':'), ensure_ascii=False)}"
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n{told}"}, *messages[1:]]
    return [{"role": "system", "content": told}, *messages]


# ---- Ollama ----------------------------------------------------------------------------------------


class OllamaChat:
    """Ollama's /api/chat through the official client (`ollama.AsyncClient`)."""

    api = "ollama"

    def __init__(self, client: ollama.AsyncClient) -> None:
        self.client = client

    async def close(self) -> None:
        await self.client.close()  # type: ignore[no-untyped-call]  # ollama 0.6 leaves it untyped

    async def chat(self, model: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                   options: dict[str, Any], keep_alive: str | float | None,
                   structured: str = "schema") -> ChatReply:
        fmt: dict[str, Any] | None = schema
        if schema is not None and structured != "schema":
            messages, fmt = schema_in_prompt(messages, schema), None
        try:
            if structured == "json" and schema is not None:  # Ollama's JSON mode: any JSON, the schema told in words
                response = await self.client.chat(model=model, messages=messages, format="json", options=options,
                                                  think=False, stream=False, keep_alive=keep_alive)
            else:
                response = await self.client.chat(model=model, messages=messages, format=fmt, options=options,
                                                  think=False, stream=False, keep_alive=keep_alive)
        except ollama.ResponseError as exc:  # Ollama sends no Retry-After, and its client keeps no headers
            raise ModelHTTPError(exc.status_code, one_line(str(exc.error))) from None
        return ChatReply(content=response.message.content or "", prompt_tokens=response.prompt_eval_count,
                         completion_tokens=response.eval_count, cut=response.done_reason == "length",
                         thinking=response.message.thinking or "", structured=structured,
                         prompt_seconds=_seconds(response.prompt_eval_duration, 1e9),
                         eval_seconds=_seconds(response.eval_duration, 1e9))


# ---- OpenAI-compatible -----------------------------------------------------------------------------


class OpenAIChat:
    """`/v1/chat/completions` on an OpenAI-compatible server, over httpx (no SDK: one endpoint, and the
    daemon's egress transport must carry it)."""

    api = "openai"

    def __init__(self, base_url: str, http: httpx.AsyncClient) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.refused: set[str] = set()  # response_format kinds this server refused: never asked again

    async def close(self) -> None:
        await self.http.aclose()

    async def chat(self, model: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                   options: dict[str, Any], keep_alive: str | float | None,
                   structured: str = "schema") -> ChatReply:
        while True:
            path = self._path(structured) if schema is not None else "none"
            body: dict[str, Any] = {"model": model, "stream": False, "max_tokens": options.get("num_predict"),
                                    "temperature": options.get("temperature"), "seed": options.get("seed")}
            told = schema is not None and path in ("json", "none")  # the server is not given the schema
            body["messages"] = schema_in_prompt(messages, schema) if told and schema is not None else messages
            if path != "none" and schema is not None:
                body["response_format"] = response_format(path, schema)
            response = await self.http.post(self.base_url + "/chat/completions",
                                             json={k: v for k, v in body.items() if v is not None})
            if response.status_code >= 400:
                error = http_error(response)
                if path != "none" and refuses_format(error):
                    self.refused.add(path)  # this server does not take it: the next, for every later call too
                    continue
                raise error
            return read_completion(response.json(), "schema" if path in STRUCTURED_PATHS[:2] else path)

    def _path(self, structured: str) -> str:
        """The response_format to ask (`response_format`'s name for it), the first of the setting's own that
        this server has not refused: schema → json_schema, json_object with the schema; json → JSON mode
        ("json"); none, or all refused → none."""
        wanted = {"schema": STRUCTURED_PATHS[:2], "json": ("json",)}.get(structured, ())
        return next((path for path in wanted if path not in self.refused), "none")

    async def served_context(self, model: str) -> int | None:
        """The context the server reports for `model` (GET /models: vLLM's `max_model_len`), or None."""
        response = await self.http.get(self.base_url + "/models", timeout=10.0)
        return listed_context(response.json(), model) if response.status_code == 200 else None


def response_format(path: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The `response_format` of a path: json_schema (OpenAI's), json_object with the schema (llama.cpp's
    server), json (JSON mode: json_object alone)."""
    if path == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    if path == "json_object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def read_completion(data: Any, structured: str) -> ChatReply:
    """A chat.completion object as a ChatReply; anything else raises ValueError (the service misbehaving)."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("the answer is not a chat completion (no choices)")
    choice = data["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ValueError("the answer's first choice has no message")
    found = data.get("usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    content = message.get("content")
    thinking = message.get("reasoning_content") or message.get("reasoning") or ""
    found = data.get("timings")  # llama.cpp's server (llama-server) adds its clock; vLLM and others do not
    timings: dict[str, Any] = found if isinstance(found, dict) else {}
    return ChatReply(content=content if isinstance(content, str) else "",
                     prompt_tokens=_count(usage.get("prompt_tokens")),
                     completion_tokens=_count(usage.get("completion_tokens")),
                     cut=choice.get("finish_reason") == "length",
                     thinking=thinking if isinstance(thinking, str) else "", structured=structured,
                     prompt_seconds=_seconds(timings.get("prompt_ms"), 1e3),
                     eval_seconds=_seconds(timings.get("predicted_ms"), 1e3))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds(value: Any, per_second: float) -> float | None:
    """A server's duration (nanoseconds, milliseconds: `per_second` of them make a second) in seconds, or None
    where it said nothing usable."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return value / per_second


def http_error(response: httpx.Response) -> ModelHTTPError:
    return ModelHTTPError(response.status_code, error_detail(response), retry_after_s(response.headers.get("retry-after")))


def error_detail(response: httpx.Response) -> str:
    """The server's own words for an error, on one line: OpenAI's `{"error": {"message"}}`, vLLM's older
    `{"message"}`, FastAPI's `{"detail"}` (llama-cpp-python's 422), or the start of the body."""
    try:
        data = response.json()
    except ValueError:
        data = None
    found: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        found = error.get("message") if isinstance(error, dict) else error
        found = found or data.get("message") or data.get("detail")
    if isinstance(found, list):  # FastAPI's validation errors: each one's place and message
        found = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}" if isinstance(e, dict)
                          else str(e) for e in found)
    text = str(found) if found else (response.text or response.reason_phrase or "no reason given")
    return one_line(text)


def refuses_format(error: ModelHTTPError) -> bool:
    """Was the request refused for its `response_format` (a server without that kind of structured output)?
    400 or 422 naming it, and 500 too: llama-cpp-python 0.3.36's server answers its own validation error
    ("body.response_format.type: Input should be 'text' or 'json_object'") with 500. Read as a crashed
    runner, that 500 was asked again, probed, and the call given up as poisoned."""
    return error.status in (400, 422, 500) and "response_format" in error.detail


_CONTEXT_REFUSAL = re.compile(
    r"maximum context length|context (?:length|window|size)|exceeds? (?:the )?(?:available )?context|"
    r"context_length_exceeded|exceed_context_size|too many tokens|prompt is too long", re.IGNORECASE)
"""How the servers word a prompt past the context: vLLM and OpenAI "This model's maximum context length is
N tokens", llama-cpp-python "Requested tokens (N) exceed context window of M", llama.cpp's server "the
request exceeds the available context size" (type exceed_context_size_error), TGI "inputs tokens +
max_new_tokens must be <= N" is not matched (said as a plain refusal)."""


def is_context_refusal(error: ModelHTTPError) -> bool:
    """A 400 that says the prompt and budget do not fit the model's context: the prompt is too long for this
    model, a fact of the request (not an outage, and not a server refusing briefd)."""
    return error.status in (400, 413, 422) and _CONTEXT_REFUSAL.search(error.detail) is not None


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Retry-After in seconds: a number of seconds, or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def listed_context(models: Any, model: str) -> int | None:
    """The context the server reports for `model` in its `/v1/models` list (vLLM's `max_model_len`), if it does."""
    entries = models.get("data") if isinstance(models, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and same_model(model, entry.get("id")):
            value = entry.get("max_model_len")
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return None


def same_model(wanted: str, listed: Any) -> bool:
    """Does a listed model name the one wanted? Exactly, or as Ollama reads names (`x` is `x:latest`)."""
    if not isinstance(listed, str):
        return False

    def norm(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"
    return norm(wanted) == norm(listed)
