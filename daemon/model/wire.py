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
  "schema": ...}` and refuses the other with 422; some servers take neither. A client asks the
  standard first and, refused for the format itself (a 400 or 422 naming `response_format`), the
  next (`STRUCTURED_PATHS`), down to none: the answer is then parsed, repaired and retried as any
  other. The path a server took is kept per client (asked once) and said in usage (`ChatReply.structured`).
- Context. There is no `num_ctx` to send: the server has one context, reported by vLLM as
  `max_model_len` in `/v1/models` (`OpenAIChat.served_context`), set by `num_ctx` where it is not. A prompt past it
  is refused with 400 (vLLM: "maximum context length"; llama.cpp: "exceed context window"), not cut
  silently as Ollama cuts it: `is_context_refusal` tells that refusal from others.
- Keys. An API key (vLLM's `--api-key`, a gateway's token) goes in one header, never in a message:
  `ModelHTTPError` carries the server's words, which never echo a bearer token back.
"""

from __future__ import annotations

import email.utils
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
"""How an OpenAI-compatible server is asked for JSON, most constrained first: `response_format` with the
schema as OpenAI defines it, then as llama.cpp's server takes it, then not at all (parse and repair)."""


@dataclass(frozen=True)
class ChatReply:
    """One answered request, whichever API carried it."""

    content: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cut: bool  # generation stopped at the output budget (Ollama's done_reason / OpenAI's finish_reason "length")
    thinking: str = ""  # what a thinking model said before its answer, where the server returns it apart
    structured: str = "format"  # how the schema was sent: Ollama's `format`, or one of STRUCTURED_PATHS


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
                   options: dict[str, Any], keep_alive: str | float | None) -> ChatReply: ...

    async def close(self) -> None: ...


# ---- Ollama ----------------------------------------------------------------------------------------


class OllamaChat:
    """Ollama's /api/chat through the official client (`ollama.AsyncClient`)."""

    api = "ollama"

    def __init__(self, client: ollama.AsyncClient) -> None:
        self.client = client

    async def close(self) -> None:
        await self.client.close()  # type: ignore[no-untyped-call]  # ollama 0.6 leaves it untyped

    async def chat(self, model: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                   options: dict[str, Any], keep_alive: str | float | None) -> ChatReply:
        try:
            response = await self.client.chat(model=model, messages=messages, format=schema, options=options,
                                              think=False, stream=False, keep_alive=keep_alive)
        except ollama.ResponseError as exc:  # Ollama sends no Retry-After, and its client keeps no headers
            raise ModelHTTPError(exc.status_code, one_line(str(exc.error))) from None
        return ChatReply(content=response.message.content or "", prompt_tokens=response.prompt_eval_count,
                         completion_tokens=response.eval_count, cut=response.done_reason == "length",
                         thinking=response.message.thinking or "")


# ---- OpenAI-compatible -----------------------------------------------------------------------------


class OpenAIChat:
    """`/v1/chat/completions` on an OpenAI-compatible server, over httpx (no SDK: one endpoint, and the
    daemon's egress transport must carry it)."""

    api = "openai"

    def __init__(self, base_url: str, http: httpx.AsyncClient) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.path = 0  # index into STRUCTURED_PATHS: the most constrained one this server has not refused

    async def close(self) -> None:
        await self.http.aclose()

    async def chat(self, model: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                   options: dict[str, Any], keep_alive: str | float | None) -> ChatReply:
        while True:
            path = STRUCTURED_PATHS[self.path] if schema is not None else "none"
            body: dict[str, Any] = {"model": model, "messages": messages, "stream": False,
                                    "max_tokens": options.get("num_predict"),
                                    "temperature": options.get("temperature"), "seed": options.get("seed")}
            if path != "none" and schema is not None:
                body["response_format"] = response_format(path, schema)
            response = await self.http.post(self.base_url + "/chat/completions",
                                             json={k: v for k, v in body.items() if v is not None})
            if response.status_code >= 400:
                error = http_error(response)
                if path != "none" and refuses_format(error):
                    self.path += 1  # this server does not take that format: the next, for every later call too
                    continue
                raise error
            return read_completion(response.json(), path)


    async def served_context(self, model: str) -> int | None:
        """The context the server reports for `model` (GET /models: vLLM's `max_model_len`), or None."""
        response = await self.http.get(self.base_url + "/models", timeout=10.0)
        return listed_context(response.json(), model) if response.status_code == 200 else None


def response_format(path: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The `response_format` of one of STRUCTURED_PATHS (not "none")."""
    if path == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"type": "json_object", "schema": schema}


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
    return ChatReply(content=content if isinstance(content, str) else "",
                     prompt_tokens=_count(usage.get("prompt_tokens")),
                     completion_tokens=_count(usage.get("completion_tokens")),
                     cut=choice.get("finish_reason") == "length",
                     thinking=thinking if isinstance(thinking, str) else "", structured=structured)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
    """Was the request refused for its `response_format` (a server without that kind of structured output)?"""
    return error.status in (400, 422) and "response_format" in error.detail


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
