"""An Ollama-API-compatible HTTP server that the test suite and `make demo` own.

Why: Ollama itself cannot be installed on these machines, but briefd talks to
Ollama through the official ``ollama`` client and must be tested against a real
HTTP server with Ollama's behaviour, not an in-process fake.

What it copies from Ollama (checked against ollama/server/routes.go, prompt.go):
- endpoints ``GET /``, ``/api/version``, ``/api/tags``, ``/api/ps``,
  ``POST /api/chat``, ``/api/generate``, ``/api/show``, ``/api/pull``;
- JSON shapes (``model``, ``created_at``, ``message{role,content}``, ``done``,
  ``done_reason``, durations in nanoseconds, ``prompt_eval_count``,
  ``eval_count``); NDJSON streaming when ``stream`` is true or absent;
- ``format`` (JSON schema dict or "json"), ``options.num_ctx`` (default 2048 here,
  see ``--default-num-ctx``), ``num_predict`` (cut, ``done_reason`` "length"),
  ``temperature``, ``seed``; ``think`` is accepted and ignored;
- an unknown model gives 404 ``{"error": "model 'x' not found"}``; names are
  case-insensitive and ``x`` means ``x:latest``;
- silent context truncation: the only trace is a smaller ``prompt_eval_count``;
- one inference at a time (one loaded model, ``OLLAMA_NUM_PARALLEL=1``), more
  than ``--max-queue`` waiting requests get 503 like Ollama's queue;
- a changed ``num_ctx`` reloads the model (visible as ``load_duration`` and in
  ``/lab/stats`` ``loads``);
- a client that hangs up (a timeout) stops its generation and leaves the queue,
  as in Ollama (logged as outcome ``client-gone``).

The same models on the OpenAI-compatible API, as vLLM, llama.cpp's server and Ollama's ``/v1`` serve
it: ``GET /v1/models`` (``max_model_len`` as vLLM reports it: ``--default-num-ctx``) and ``POST
/v1/chat/completions`` (not streamed): ``response_format`` ``json_schema`` or ``json_object`` with a
``schema`` (``--openai-formats`` says which are taken; others get 400), ``max_tokens``, ``usage``,
``finish_reason``; a prompt and budget past the context get vLLM's 400 "maximum context length" (no
silent cut); errors in the OpenAI shape ``{"error": {"message", "type", "code"}}``. The faults below
apply to both APIs, and a ``status`` fault may carry ``retry_after`` (sent as ``Retry-After``).

What it adds, for tests (under ``/lab/``, never used by briefd itself):
- ``GET /lab/stats``: calls that reached a model, by endpoint, model name as
  sent and task title (``chat_calls``), retries, ``duplicate_prompts`` (an
  answered request whose model+messages+format+options had been answered
  before: "never pay twice"), ``truncated_prompts``, ``loads`` per model (by
  canonical name), outcomes, pending faults, ``use_extra_bufts`` (llama: False when the loaded
  model's weights are in plain CPU buffers, lab.drivers.plain_cpu_buffers; None with the
  scripted driver or before a load), and ``calls``: every request;
- ``POST /lab/fault`` ``{"kind": "status"|"delay"|"drop"|"empty"|"endless"|"answer",
  "count": 1, "status": 500, "seconds": 2.0, "model": optional, "after": 0, "message": ""}``:
  the next ``count`` inference calls (after letting ``after`` of them through) misbehave
  (HTTP error, slow answer, connection closed without a response, empty content, an
  array that never ends until num_predict, or ``message`` as the answer: an off-topic plan);
- ``POST /lab/fault`` ``{"kind": "poison", "match": "TEXT", "status": 500,
  "message": optional}``: every inference request whose messages contain ``TEXT``
  gets that HTTP error, with Ollama's body ``{"error": "llama runner process has
  terminated: exit status 2"}`` by default, for as long as the server runs (until
  ``/lab/reset``), while every other request is answered: a prompt that crashes
  Ollama's runner each time. Logged as outcome ``poison-500``. ``also``: a second text the
  request must contain too (one brief's synthesis: its question and the synthesis's words);
- ``POST /lab/fault`` ``{"kind": "answer", "match": "TEXT", "message": "ANSWER"}`` (``also`` as
  above): every request that matches is answered ``ANSWER``, for as long as the server runs: a
  model that answers one prompt badly every time (its retry contains the text too);
- ``POST /lab/reset``: clear stats and faults (and restart the chaos deal);
- the model ``lab-chaos`` (scripted driver): a seeded share of its answers break
  (``lab.drivers.Chaos``): fenced, wrapped in prose, a leading <think> block,
  cut off mid-JSON (done_reason "length"), empty, the wrong shape, a refusal (all
  made by the driver), an HTTP 500 or a slow answer (made here). Which request
  breaks is a pure function of (``--chaos-seed``, its prompt, how many times this
  exact request was asked), so a run replays; ``/lab/stats`` ``chaos`` counts the
  kinds applied and every logged call carries ``chaos``, ``key`` and ``attempt``.
  With ``--chaos-poison-share`` a seeded share of prompts is refused with HTTP 500
  every time they are asked (``chaos`` ``poison``, outcome ``chaos-poison-500``):
  failures fixed per prompt, as a prompt that crashes Ollama's runner gets.

Knobs: ``--default-num-ctx`` (2048, older Ollama's default; today's Ollama picks
4096 on small machines), ``--max-queue`` (512), ``--tokens-per-s`` (scripted:
answer as slowly as a real model), ``--load-delay-s`` (scripted: cost of a
(re)load), ``--threads`` (llama), ``--chaos-seed`` / ``--chaos-share`` /
``--chaos-retry-share`` / ``--chaos-slow-s`` / ``--chaos-poison-share`` (lab-chaos).

Run: ``python -m lab.ollama_server --host 127.0.0.1 --port N --driver scripted|llama [--log FILE]``
(``--port 0`` picks a free port). The first stdout line is
``lab-ollama ready http://HOST:PORT driver=D models=a,b``. Every request is
logged as one JSON line to ``--log`` (or stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from lab.drivers import (
    CHAOS_CONTENT_KINDS,
    CHAOS_SERVER_KINDS,
    Chaos,
    Completion,
    Driver,
    InferenceRequest,
    Message,
    ModelCard,
    approx_tokens,
    make_driver,
    sleep_unless,
)
from lab.servers import serve_until_interrupted

OLLAMA_VERSION = "0.12.10"
DEFAULT_NUM_CTX = 2048
DEFAULT_MAX_QUEUE = 512
SERVER_BUSY = "server busy, please try again.  maximum pending requests exceeded"
RUNNER_CRASHED = "llama runner process has terminated: exit status 2"  # Ollama's 500 when the runner dies
CHAOS_MODEL = "lab-chaos:latest"
OPENAI_PREFIX = "/v1"
OPENAI_FORMATS = ("json_schema", "json_object")
OPENAI_ERROR_TYPES = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError",
                      429: "RateLimitError", 503: "ServiceUnavailableError", 500: "InternalServerError"}


def go_time(ns_since_epoch: int) -> str:
    """Go's time.Time JSON form (RFC 3339 with up to 9 fraction digits, trailing
    zeros trimmed), as Ollama writes created_at: a strptime("%f") parser breaks on it."""
    secs, nanos = divmod(ns_since_epoch, 1_000_000_000)
    frac = f"{nanos:09d}".rstrip("0")
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def now_iso() -> str:
    return go_time(time.time_ns())


def canonical_name(name: str) -> str:
    """Ollama resolves "x" to "x:latest" and compares names case-insensitively."""
    name = name.strip().lower()
    if "/" in name and name.startswith("registry.ollama.ai/library/"):
        name = name.split("/", 2)[2]
    return name if ":" in name else name + ":latest"


def ns(seconds: float) -> int:
    return max(int(seconds * 1e9), 0)


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # sent as Retry-After (seconds) when set


FAULT_KINDS = ("status", "delay", "drop", "empty", "endless", "poison", "answer")


@dataclass
class Fault:
    kind: str  # one of FAULT_KINDS
    count: int = 1
    status: int = 500
    seconds: float = 1.0
    model: str = ""  # "" = any model
    message: str = ""
    after: int = 0  # inference calls to let through before this fault starts
    match: str = ""  # poison, answer: the text that makes a request fail, every time
    also: str = ""  # with match: a second text the request must hold too
    retry_after: float | None = None  # status: sent as Retry-After, as vLLM's or a proxy's 429/503 may be

    def matches(self, model: str) -> bool:
        return not self.model or canonical_name(self.model) == model

    def poisons(self, request: InferenceRequest) -> bool:
        """A fault with `match` fails every request whose messages contain its text(s) (never used up)."""
        texts = [t for t in (self.match, self.also) if t]
        return (self.kind in ("poison", "answer") and bool(self.match) and self.matches(request.model)
                and all(any(t in m.content for m in request.messages) for t in texts))


@dataclass
class LabState:
    """Everything the server remembers: faults, stats, the call log."""

    driver: Driver
    default_num_ctx: int = DEFAULT_NUM_CTX
    max_queue: int = DEFAULT_MAX_QUEUE
    log: TextIO = sys.stderr
    # generations at once: Ollama's OLLAMA_NUM_PARALLEL (1 by default; the llama driver's one model, always 1)
    inference_slots: threading.BoundedSemaphore = field(default_factory=threading.BoundedSemaphore)
    state_lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    faults: list[Fault] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_hashes: set[str] = field(default_factory=set)
    loads: dict[str, int] = field(default_factory=dict)
    loaded: dict[str, tuple[int, float]] = field(default_factory=dict)  # model -> (num_ctx, loaded_at)
    chaos: Chaos = field(default_factory=Chaos)
    asked: dict[str, int] = field(default_factory=dict)  # prompt key -> times this exact request came
    openai_formats: tuple[str, ...] = OPENAI_FORMATS  # the response_format types /v1 takes (--openai-formats)
    openai_answers: int = 0

    def count_ask(self, key: str) -> int:
        """The attempt number of this exact request: 1 the first time, 2 when re-asked (after a 500)."""
        with self.state_lock:
            self.asked[key] = self.asked.get(key, 0) + 1
            return self.asked[key]

    def draw_chaos(self, request: InferenceRequest, attempt: int) -> str:
        """lab-chaos only: the fault this request gets ("" = a clean answer)."""
        if request.model != CHAOS_MODEL:
            return ""
        return "poison" if self.chaos.poisons(request) else self.chaos.draw(request, attempt)

    def cards(self) -> dict[str, ModelCard]:
        return {c.name: c for c in self.driver.models()}

    def take_fault(self, request: InferenceRequest) -> Fault | None:
        """The fault this inference call gets: a poison that matches it, else the next counted fault."""
        with self.state_lock:
            for f in self.faults:
                if f.poisons(request):
                    return f
            for f in self.faults:
                if f.kind == "poison" or f.match or not f.matches(request.model):
                    continue
                if f.after > 0:
                    f.after -= 1
                    continue
                f.count -= 1
                if f.count <= 0:
                    self.faults.remove(f)
                return f
        return None

    def record(self, entry: dict[str, Any]) -> None:
        with self.state_lock:
            entry["seq"] = len(self.calls) + 1
            self.calls.append(entry)
            line = json.dumps(entry, ensure_ascii=False)
        try:
            self.log.write(line + "\n")
            self.log.flush()
        except (OSError, ValueError):
            pass

    def is_duplicate(self, key: str) -> bool:
        with self.state_lock:
            if key in self.prompt_hashes:
                return True
            self.prompt_hashes.add(key)
            return False

    def stats(self) -> dict[str, Any]:
        with self.state_lock:
            calls = list(self.calls)
            faults = [asdict(f) for f in self.faults]
            loads = dict(self.loads)
        by: dict[str, dict[str, dict[str, int]]] = {"chat": {}, "generate": {}}
        retries: dict[str, dict[str, int]] = {}
        outcomes: dict[str, int] = {}
        chaos: dict[str, int] = {}
        for c in calls:
            if c.get("chaos"):
                chaos[c["chaos"]] = chaos.get(c["chaos"], 0) + 1
            if c.get("endpoint") in by and c.get("reached_model"):
                m = by[c["endpoint"]].setdefault(c["model"], {})
                m[c["task"]] = m.get(c["task"], 0) + 1
                if c.get("retry"):
                    r = retries.setdefault(c["model"], {})
                    r[c["task"]] = r.get(c["task"], 0) + 1
            outcomes[c["outcome"]] = outcomes.get(c["outcome"], 0) + 1
        return {
            "chat_calls": by["chat"],
            "generate_calls": by["generate"],
            "total_chat_calls": sum(sum(t.values()) for t in by["chat"].values()),
            "retries": retries,
            "duplicate_prompts": sum(1 for c in calls if c.get("duplicate")),
            "truncated_prompts": sum(1 for c in calls if c.get("truncated")),
            "loads": loads,
            # llama: the loaded model's use_extra_bufts (False: weights in plain CPU buffers, safe with AMX)
            "use_extra_bufts": getattr(self.driver, "use_extra_bufts", None),
            "outcomes": outcomes,
            "chaos": chaos,  # lab-chaos: kind -> answers it was applied to
            "chaos_config": {"seed": self.chaos.seed, "share": self.chaos.share,
                             "retry_share": self.chaos.retry_share, "slow_s": self.chaos.slow_s,
                             "poison_share": self.chaos.poison_share},
            "pending_faults": faults,
            "calls": calls,
        }

    def reset(self) -> None:
        with self.state_lock:
            self.faults.clear()
            self.calls.clear()
            self.prompt_hashes.clear()
            self.loads.clear()
            self.asked.clear()
        self.chaos.reset()


# --------------------------------------------------------------------------- request parsing


def _number_option(options: dict[str, Any], key: str, default: float, type_name: str) -> float:
    """An option's number, the default where it is absent or null; anything else is refused as Ollama refuses
    it (a bool is no number there either)."""
    v = options.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f'option "{key}" must be of type {type_name}')
    return v


def _int_option(options: dict[str, Any], key: str, default: int) -> int:
    return int(_number_option(options, key, default, "integer"))


def _float_option(options: dict[str, Any], key: str, default: float) -> float:
    return float(_number_option(options, key, default, "number"))


def parse_inference(body: dict[str, Any], endpoint: str, state: LabState) -> tuple[InferenceRequest, str]:
    """Validate an /api/chat or /api/generate body; returns the request and the name as sent."""
    sent_model = body.get("model")
    if not isinstance(sent_model, str) or not sent_model.strip():
        raise BadRequest("model is required")
    model = canonical_name(sent_model)
    if model not in state.cards():
        raise BadRequest(f"model '{sent_model}' not found", 404)
    fmt = body.get("format")
    if fmt == "":
        fmt = None
    if fmt is not None and fmt != "json" and not isinstance(fmt, dict):
        raise BadRequest('invalid format: expected "json" or a valid JSON schema')
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise BadRequest("options must be an object")
    if endpoint in ("chat", "openai"):
        raw = body.get("messages") or []
        if not isinstance(raw, list):
            raise BadRequest("messages must be a list")
        messages = []
        for m in raw:
            if not isinstance(m, dict) or not isinstance(m.get("role", ""), str):
                raise BadRequest("invalid message")
            messages.append(Message(role=m.get("role", "user"), content=str(m.get("content") or "")))
    else:
        messages = []
        if isinstance(body.get("system"), str) and body["system"]:
            messages.append(Message("system", body["system"]))
        if isinstance(body.get("prompt"), str) and body["prompt"]:
            messages.append(Message("user", body["prompt"]))
    seed = options.get("seed")
    req = InferenceRequest(
        model=model,
        messages=tuple(messages),
        format=fmt,
        num_ctx=max(_int_option(options, "num_ctx", state.default_num_ctx), 1),
        num_predict=_int_option(options, "num_predict", -1),
        temperature=_float_option(options, "temperature", 0.8),
        seed=int(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else None,
        top_k=_int_option(options, "top_k", 40),
        top_p=_float_option(options, "top_p", 0.9),
        repeat_penalty=_float_option(options, "repeat_penalty", 1.1),
    )
    return req, sent_model


def prompt_key(body: dict[str, Any]) -> str:
    """Identity of a paid call: same model, messages/prompt, format and options."""
    keep = {k: body.get(k) for k in ("messages", "prompt", "system", "format", "options")}
    keep["model"] = canonical_name(str(body.get("model", "")))
    return hashlib.sha256(json.dumps(keep, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def endless_answer(request: InferenceRequest) -> Completion:
    """A JSON array that never closes, cut by num_predict (or the context)."""
    limit = request.num_predict if request.num_predict > 0 else request.num_ctx
    item = '{"sentence_ids": ["S1"], "summary": "the same thing again", "confidence": 0.5, "gap": ""}, '
    text = '{"items": ['
    while approx_tokens(text + item) <= limit:
        text += item
    text = (text + item)[: limit * 4]
    prompt_tokens = min(approx_tokens(" ".join(m.content for m in request.messages)), request.num_ctx)
    return Completion(text, prompt_tokens, approx_tokens(text), "length", 0.0, 0.0)


# --------------------------------------------------------------------------- the OpenAI-compatible API (/v1)



def openai_body(body: dict[str, Any], state: LabState) -> dict[str, Any]:
    """An OpenAI chat-completions request as the Ollama-style body `_inference` reads: the schema of
    `response_format` (``json_schema``, or ``json_object`` with a ``schema`` as llama.cpp's server takes it)
    becomes ``format``, ``max_tokens`` ``num_predict``; the context is the server's own (``--default-num-ctx``,
    what /v1/models says as ``max_model_len``, as vLLM does). A format the server is not told to take
    (``--openai-formats``) is refused with 400, as a server without it refuses it."""
    fmt: dict[str, Any] | str | None = None
    response_format = body.get("response_format")
    if response_format is not None:
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind != "text" and kind not in state.openai_formats:
            raise BadRequest(f"response_format: type {kind!r} is not supported by this server "
                             f"(it takes: text, {', '.join(state.openai_formats) or 'nothing else'})")
        if kind == "json_schema":
            spec = response_format.get("json_schema")
            fmt = spec.get("schema") if isinstance(spec, dict) and isinstance(spec.get("schema"), dict) else "json"
        elif kind == "json_object":
            fmt = response_format.get("schema") if isinstance(response_format.get("schema"), dict) else "json"
    if body.get("stream") is True:
        raise BadRequest("the lab's /v1 does not stream (briefd never asks it to)")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    options: dict[str, Any] = {"num_ctx": state.default_num_ctx}
    for key, value in (("num_predict", limit), ("temperature", body.get("temperature")), ("seed", body.get("seed"))):
        if value is not None:
            options[key] = value
    return {"model": body.get("model"), "messages": body.get("messages"), "format": fmt, "options": options,
            "stream": False}


def refuse_past_context(request: InferenceRequest) -> None:
    """vLLM refuses a request whose prompt and output budget pass the model's context, with 400 and these
    words, where Ollama cuts the prompt silently."""
    prompt = approx_tokens(" ".join(m.content for m in request.messages))
    asked = prompt + max(request.num_predict, 0)
    if asked > request.num_ctx:
        raise BadRequest(f"This model's maximum context length is {request.num_ctx} tokens. However, you requested "
                         f"{asked} tokens ({prompt} in the messages, {max(request.num_predict, 0)} in the "
                         f"completion). Please reduce the length of the messages or completion.")


def openai_answer(model: str, completion: Completion, state: LabState) -> dict[str, Any]:
    """A chat.completion object: the text, why it stopped, and the usage."""
    with state.state_lock:
        state.openai_answers += 1
        number = state.openai_answers
    return {"id": f"chatcmpl-lab-{number}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text},
                         "finish_reason": "length" if completion.done_reason == "length" else "stop"}],
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                      "total_tokens": completion.prompt_tokens + completion.completion_tokens},
            # llama.cpp's server (llama-server) adds its clock as `timings`; vLLM and llama-cpp-python's do not
            "timings": {"prompt_n": completion.prompt_tokens, "prompt_ms": completion.prompt_seconds * 1e3,
                        "predicted_n": completion.completion_tokens, "predicted_ms": completion.eval_seconds * 1e3}}


# --------------------------------------------------------------------------- HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms delayed-ACK stalls
    server_version = "lab-ollama"
    sys_version = ""
    state: LabState  # set on the subclass made by make_server

    # quiet: our own JSON log replaces the default access log
    def log_message(self, format: str, *args: Any) -> None:
        return

    # -- plumbing

    def _send_json(self, status: int, obj: Any, content_type: str = "application/json; charset=utf-8",
                   headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            raise BadRequest("missing request body")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"invalid JSON: {e}") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _stream_line(self, obj: Any) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- routes

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        st = self.state
        if path == "/":
            self._send_text(200, "Ollama is running")
        elif path == "/api/version":
            self._send_json(200, {"version": OLLAMA_VERSION})
        elif path == "/api/tags":
            self._send_json(200, {"models": [self._card_json(c) for c in st.cards().values()]})
        elif path == "/api/ps":
            self._send_json(200, {"models": self._ps()})
        elif path == "/lab/stats":
            self._send_json(200, st.stats())
        elif path == OPENAI_PREFIX + "/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": c.name, "object": "model", "created": 1_762_000_000, "owned_by": "lab",
                 "max_model_len": st.default_num_ctx} for c in st.cards().values()]})
        else:
            self._send_text(404, "404 page not found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        routes: dict[str, Callable[[dict[str, Any]], None]] = {
            "/api/chat": lambda b: self._inference(b, "chat"),
            "/api/generate": lambda b: self._inference(b, "generate"),
            "/api/show": self._show,
            "/api/pull": self._pull,
            "/lab/fault": self._add_fault,
            OPENAI_PREFIX + "/chat/completions": lambda b: self._inference(b, "openai"),
        }
        if path == "/lab/reset":
            self.state.reset()
            self._send_json(200, {"status": "ok"})
            return
        if path not in routes:
            self._send_text(404, "404 page not found")
            return
        try:
            body = self._read_body()
            routes[path](body)
        except BadRequest as e:
            headers = {"Retry-After": f"{e.retry_after:g}"} if e.retry_after is not None else {}
            if path.startswith(OPENAI_PREFIX + "/"):  # the OpenAI error shape (vLLM, llama.cpp's server, Ollama's /v1)
                self._send_json(e.status, {"error": {"message": str(e), "type": OPENAI_ERROR_TYPES.get(
                    e.status, "server_error"), "param": None, "code": e.status}}, headers=headers)
            else:
                self._send_json(e.status, {"error": str(e)}, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _card_json(self, c: ModelCard) -> dict[str, Any]:
        return {
            "name": c.name,
            "model": c.name,
            "modified_at": "2026-11-01T12:00:00.000000Z",
            "size": c.size,
            "digest": c.digest,
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": c.family,
                "families": [c.family],
                "parameter_size": c.parameter_size,
                "quantization_level": c.quantization_level,
            },
        }

    def _ps(self) -> list[dict[str, Any]]:
        cards = self.state.cards()
        out = []
        with self.state.state_lock:
            loaded = dict(self.state.loaded)
        for name, (num_ctx, at) in loaded.items():
            c = cards[name]
            card = self._card_json(c)
            del card["modified_at"]
            expires = go_time(int((at + 300) * 1e9))  # keep_alive 5m
            card.update(expires_at=expires, size_vram=0, context_length=num_ctx)
            out.append(card)
        return out

    def _show(self, body: dict[str, Any]) -> None:
        sent = body.get("model") or body.get("name")
        if not isinstance(sent, str) or not sent:
            raise BadRequest("model is required")
        c = self.state.cards().get(canonical_name(sent))
        if c is None:
            raise BadRequest(f"model '{sent}' not found", 404)
        card = self._card_json(c)
        self._send_json(
            200,
            {
                "license": "",
                "modelfile": f'# Modelfile generated by "ollama show"\nFROM {c.name}\n',
                "parameters": "",
                "template": "{{ .Prompt }}",
                "details": card["details"],
                "model_info": {
                    "general.architecture": c.family,
                    f"{c.family}.context_length": c.context_length,
                },
                "capabilities": ["completion"],
                "modified_at": card["modified_at"],
            },
        )

    def _pull(self, body: dict[str, Any]) -> None:
        sent = body.get("model") or body.get("name") or ""
        if canonical_name(str(sent)) not in self.state.cards():
            # what an offline Ollama answers for a model it cannot fetch
            raise BadRequest("pull model manifest: file does not exist", 500)
        if body.get("stream") is False:
            self._send_json(200, {"status": "success"})
        else:
            self._start_stream()
            self._stream_line({"status": "success"})
            self._end_stream()

    def _add_fault(self, body: dict[str, Any]) -> None:
        kind = body.get("kind")
        if kind not in FAULT_KINDS:
            raise BadRequest(f"kind must be one of {', '.join(FAULT_KINDS)}")
        if kind == "poison" and not str(body.get("match", "")):
            raise BadRequest("a poison fault needs match: the text of the requests that fail")
        fault = Fault(
            kind=kind,
            count=int(body.get("count", 1)),
            status=int(body.get("status", 500)),
            seconds=float(body.get("seconds", 1.0)),
            model=str(body.get("model", "")),
            message=str(body.get("message", "")),
            after=max(0, int(body.get("after", 0))),
            match=str(body.get("match", "")),
            also=str(body.get("also", "")),
            retry_after=float(body["retry_after"]) if body.get("retry_after") is not None else None,
        )
        with self.state.state_lock:
            self.state.faults.append(fault)
        self._send_json(200, {"status": "ok", "fault": asdict(fault)})

    # -- inference

    def _inference(self, body: dict[str, Any], endpoint: str) -> None:
        st = self.state
        started = time.monotonic()
        try:
            if endpoint == "openai":  # read as the Ollama-style body below; a format or length it refuses is logged
                body = openai_body(body, st)
            request, sent_model = parse_inference(body, endpoint, st)
            if endpoint == "openai":
                refuse_past_context(request)
        except BadRequest as e:
            st.record(
                {
                    "at": now_iso(),
                    "endpoint": endpoint,
                    "model": str(body.get("model", "")),
                    "task": "",
                    "outcome": f"http-{e.status}",
                    "error": str(e),
                    "reached_model": False,
                }
            )
            raise
        stream = body.get("stream") is not False  # Ollama streams unless told not to
        entry: dict[str, Any] = {
            "at": now_iso(),
            "endpoint": endpoint,
            "model": sent_model,
            "model_canonical": request.model,
            "task": request.task,
            "retry": request.is_retry,
            "prompt_chars": sum(len(m.content) for m in request.messages),
            "num_ctx": request.num_ctx,
            "num_predict": request.num_predict,
            "stream": stream,
            "reached_model": True,
        }
        if not request.messages and endpoint == "openai":
            raise BadRequest("messages: at least one message is required")
        if not request.messages:  # an empty request loads (or unloads) the model
            with st.inference_slots:
                load_s = self._load(request)
            reason = "unload" if body.get("keep_alive") in (0, "0", "0s") else "load"
            final = self._final(endpoint, sent_model, "", reason, None, load_s, started)
            entry.update(outcome=reason, reached_model=False)
            st.record(entry)
            self._send_json(200, final)
            return
        key = prompt_key(body)
        entry.update(duplicate=False, key=key[:16], chaos="")
        with st.state_lock:
            if st.waiting >= st.max_queue:
                busy = True
            else:
                busy = False
                st.waiting += 1
        if busy:
            entry.update(outcome="http-503")
            st.record(entry)
            raise BadRequest(SERVER_BUSY, 503)
        fault = None
        try:
            with st.inference_slots:
                with st.state_lock:
                    st.waiting -= 1
                if self._client_gone():  # gave up while queued: Ollama drops it too
                    entry["reached_model"] = False
                    self._hang_up(entry, "client-gone")
                    return
                entry["attempt"] = st.count_ask(key)
                fault = st.take_fault(request)
                if fault and fault.kind in ("status", "poison"):
                    entry.update(outcome=f"{'fault' if fault.kind == 'status' else 'poison'}-{fault.status}")
                    st.record(entry)
                    raise BadRequest(fault.message or RUNNER_CRASHED, fault.status, fault.retry_after)
                if fault and fault.kind == "drop":
                    self._hang_up(entry, "fault-drop")
                    return
                if fault and fault.kind == "delay" and not sleep_unless(fault.seconds, self._client_gone):
                    self._hang_up(entry, "client-gone")
                    return
                chaos = "" if fault else st.draw_chaos(request, entry["attempt"])
                if chaos in CHAOS_SERVER_KINDS or chaos == "poison":
                    entry["chaos"] = chaos
                if chaos == "poison":
                    entry.update(outcome="chaos-poison-500")
                    st.record(entry)
                    raise BadRequest(RUNNER_CRASHED, 500)
                if chaos == "http500":
                    entry.update(outcome="chaos-500")
                    st.record(entry)
                    raise BadRequest(RUNNER_CRASHED, 500)
                if chaos == "slow" and not sleep_unless(st.chaos.slow_s, self._client_gone):
                    self._hang_up(entry, "client-gone")
                    return
                if chaos in CHAOS_CONTENT_KINDS:
                    request = replace(request, chaos=chaos)
                load_s = self._load(request)
                if fault and fault.kind == "empty":
                    prompt_tokens = min(approx_tokens(" ".join(m.content for m in request.messages)), request.num_ctx)
                    completion = Completion("", prompt_tokens, 1, "stop", 0.0, 0.0)
                elif fault and fault.kind == "endless":
                    completion = endless_answer(request)
                elif fault and fault.kind == "answer":  # a given answer (`message`): an off-topic plan, say
                    prompt_tokens = min(approx_tokens(" ".join(m.content for m in request.messages)), request.num_ctx)
                    completion = Completion(fault.message, prompt_tokens, approx_tokens(fault.message), "stop", 0.0, 0.0)
                else:
                    completion = st.driver.complete(request, self._client_gone)
        except BadRequest:
            raise
        except Exception as e:  # noqa: BLE001 - the backend broke: Ollama answers 500 with the reason
            entry.update(outcome="http-500", error=f"{type(e).__name__}: {e}")
            st.record(entry)
            raise BadRequest(f"llama runner error: {e}", 500) from None
        if request.chaos:  # what the driver really did (it cannot dirty an answer that is not JSON)
            entry["chaos"] = completion.dirty
        entry.update(
            done_reason=completion.done_reason,
            dirty=completion.dirty,
            fault=fault.kind if fault else "",
            truncated=completion.truncated,
            prompt_tokens=completion.prompt_tokens,
            eval_tokens=completion.completion_tokens,
            load_s=round(load_s, 4),
            seconds=round(time.monotonic() - started, 4),
            grammar_refused=completion.grammar_refused,
            grammar_whole_vocab=completion.grammar_whole_vocab,
            grammar_s=round(completion.grammar_seconds, 4),
        )
        if completion.done_reason == "cancelled":  # the client hung up mid-answer: nothing to send
            self._hang_up(entry, "client-gone")
            return
        entry.update(
            duplicate=st.is_duplicate(key),  # answered before: same model, messages, format, options
            outcome=completion.done_reason + (f" dirty:{completion.dirty}" if completion.dirty else ""),
        )
        final = self._final(endpoint, sent_model, completion.text, completion.done_reason, completion, load_s, started)
        if endpoint == "openai":
            final = openai_answer(sent_model, completion, st)
        try:
            if not stream:
                self._send_json(200, final)
            else:
                self._start_stream()
                for piece in _pieces(completion.text):
                    self._stream_line(self._chunk(endpoint, sent_model, piece))
                self._stream_line(dict(final, **self._empty_content(endpoint)))
                self._end_stream()
        finally:
            st.record(entry)

    def _client_gone(self) -> bool:
        """Has the client closed its connection (timed out, cancelled)?"""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _hang_up(self, entry: dict[str, Any], outcome: str) -> None:
        """Close the connection without an answer and log why."""
        entry["outcome"] = outcome
        self.state.record(entry)
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _load(self, request: InferenceRequest) -> float:
        st = self.state
        load_s = st.driver.ensure_loaded(request.model, request.num_ctx)
        if load_s > 0:
            with st.state_lock:
                st.loads[request.model] = st.loads.get(request.model, 0) + 1
                st.loaded[request.model] = (request.num_ctx, time.time())
        return load_s

    @staticmethod
    def _empty_content(endpoint: str) -> dict[str, Any]:
        return {"message": {"role": "assistant", "content": ""}} if endpoint == "chat" else {"response": ""}

    @staticmethod
    def _chunk(endpoint: str, model: str, piece: str) -> dict[str, Any]:
        out: dict[str, Any] = {"model": model, "created_at": now_iso()}
        if endpoint == "chat":
            out["message"] = {"role": "assistant", "content": piece}
        else:
            out["response"] = piece
        out["done"] = False
        return out

    @staticmethod
    def _final(
        endpoint: str,
        model: str,
        text: str,
        reason: str,
        completion: Completion | None,
        load_s: float,
        started: float,
    ) -> dict[str, Any]:
        out = Handler._chunk(endpoint, model, text)
        out["done"] = True
        out["done_reason"] = reason
        if completion is None:
            return out
        prompt_s, eval_s = completion.prompt_seconds, completion.eval_seconds
        total = max(time.monotonic() - started, load_s + prompt_s + eval_s)
        out.update(
            total_duration=ns(total),
            load_duration=ns(load_s),
            prompt_eval_count=completion.prompt_tokens,
            prompt_eval_duration=ns(prompt_s),
            eval_count=completion.completion_tokens,
            eval_duration=ns(eval_s),
        )
        return out


def _pieces(text: str) -> list[str]:
    """Stream chunks about one token long, like Ollama sends them."""
    return [text[i : i + 4] for i in range(0, len(text), 4)]


class LabHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (or a "drop" fault) is not worth a traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, OSError)):
            return
        super().handle_error(request, client_address)


def make_server(host: str, port: int, state: LabState) -> ThreadingHTTPServer:
    handler = type("LabHandler", (Handler,), {"state": state})
    server = LabHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.ollama_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=11434, help="0 picks a free port (printed in the ready line)")
    ap.add_argument("--driver", choices=("scripted", "llama"), default="scripted")
    ap.add_argument("--log", help="append one JSON line per request here (default: stderr)")
    ap.add_argument("--default-num-ctx", type=int, default=DEFAULT_NUM_CTX)
    ap.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE)
    ap.add_argument("--tokens-per-s", type=float, default=0.0, help="scripted: sleep like a model this fast")
    ap.add_argument("--seconds-per-answer", type=float, default=0.0,
                    help="scripted: every generation takes this long, whatever its length")
    ap.add_argument("--parallel", type=int, default=1,
                    help="scripted: requests generated at once, as OLLAMA_NUM_PARALLEL (the rest wait in the queue)")
    ap.add_argument("--load-delay-s", type=float, default=0.0, help="scripted: seconds per (re)load")
    ap.add_argument("--threads", type=int, default=2, help="llama: CPU threads")
    ap.add_argument("--chaos-seed", type=int, default=0, help="lab-chaos: seed of the fault plan")
    ap.add_argument("--chaos-share", type=float, default=0.4, help="lab-chaos: share of first answers that break")
    ap.add_argument("--chaos-retry-share", type=float, default=None,
                    help="lab-chaos: share of retries and re-asks that break (default: a third of --chaos-share)")
    ap.add_argument("--chaos-slow-s", type=float, default=2.0, help="lab-chaos: seconds a slow answer stalls")
    ap.add_argument("--chaos-poison-share", type=float, default=0.0,
                    help="lab-chaos: share of prompts refused with HTTP 500 every time they are asked")
    ap.add_argument("--openai-formats", default=",".join(OPENAI_FORMATS),
                    help="the response_format types /v1/chat/completions takes, comma-separated (\"\": none, "
                         "as a server that refuses them; text is always taken)")
    args = ap.parse_args(argv)
    try:
        if args.driver == "scripted":
            driver = make_driver("scripted", tokens_per_s=args.tokens_per_s, load_delay_s=args.load_delay_s,
                                 seconds_per_answer=args.seconds_per_answer)
        else:
            driver = make_driver("llama", n_threads=args.threads)
    except ImportError as e:
        print(f"lab-ollama: driver {args.driver!r} unavailable: {e}", file=sys.stderr)
        return 3
    try:
        chaos = Chaos(seed=args.chaos_seed, share=args.chaos_share, retry_share=args.chaos_retry_share,
                      slow_s=args.chaos_slow_s, poison_share=args.chaos_poison_share)
    except ValueError as e:
        ap.error(str(e))
    with open(args.log, "a", encoding="utf-8") if args.log else contextlib.nullcontext(sys.stderr) as log:
        if args.parallel < 1 or (args.parallel > 1 and args.driver != "scripted"):
            print("lab-ollama: --parallel must be 1 or more, and 1 with the llama driver (one model instance)",
                  file=sys.stderr)
            return 2
        state = LabState(driver=driver, default_num_ctx=args.default_num_ctx, max_queue=args.max_queue, log=log,
                         chaos=chaos, inference_slots=threading.BoundedSemaphore(args.parallel),
                         openai_formats=tuple(f for f in args.openai_formats.split(",") if f))
        try:
            server = make_server(args.host, args.port, state)
        except OSError as e:
            print(f"lab-ollama: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
            return 3
        host, port = str(server.server_address[0]), int(server.server_address[1])
        models = ",".join(c.name for c in driver.models())
        print(f"lab-ollama ready http://{host}:{port} driver={args.driver} models={models}", flush=True)
        serve_until_interrupted(server, poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
