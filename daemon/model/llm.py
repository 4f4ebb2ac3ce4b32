"""Every model call briefd makes, and how its answer is read.

Why it looks like this:
- A small local model's answer is data we cannot trust to be well formed:
  `jsonrepair.parse_json_answer_ex` repairs what can be repaired without guessing
  and otherwise says precisely what is wrong, because that reason goes back to
  the model in the one retry.
- The call wrapper owns the whole policy of every model call: explicit
  `num_ctx`/`num_predict`/`temperature`/`seed`, `think=False`, a JSON schema in
  `format`, a timeout on the client, token counts from the response, repair,
  one retry with the reason, then the caller's fallback. Bad output never
  raises; only an unreachable service (`ServiceDown`, the brief waits), a
  model that is not pulled (`ModelMissing`) or a server that refuses briefd
  itself (`ModelRefused`: the user must act, the brief waits meanwhile) do.
- A 4xx is either this prompt refused or briefd refused: an auth proxy in front
  of Ollama whose token was rotated answers 403 to everything (issue 29 #3).
  Kept as the prompt's failure, every call of a brief run meanwhile was replayed
  as a fallback for a day after the fix. So a 4xx (404 aside: the model is not
  pulled) is judged at once by the health probe below: answered → the prompt is
  refused (kept, as below); refused with a 4xx too → `ModelRefused`, an outage
  with a fix that the brief waits out and nothing kept; not answered → an outage.
- An HTTP 500 is either an outage or a poisoned request: Ollama answers 500
  ("llama runner process has terminated") both when its runner is down and when
  one prompt crashes the runner every time, while it answers every other prompt.
  Waiting cannot cure the second, so a request refused with 500 is asked again at
  once (Ollama starts a new runner for it: a backoff would only keep the model idle,
  `retry.RetryAtOnce`) and, refused a second time, judged by a health probe: the
  same model, the same `num_ctx` (no reload), a one-word prompt and one token to
  generate. The probe needs the runner to load
  and generate, which `/api/version` or `/api/tags` would not prove (they answer
  while every inference crashes). The probe answers → the request is poisoned:
  the caller's fallback, outcome "poisoned", no more asking. It fails too → the
  server was down at that moment, waited out as before, and the next refusal of
  the same request is judged by a new probe: a runner that a prompt crashed
  restarts, so one failed probe (made while it reloaded) must not turn a
  poisoned request into an outage that is waited out and asked again.
- Answers are cached by a hash of the exact request, so a restart replays
  finished calls instead of paying for them again. So are deterministic failures
  (issue 22): an answer still unusable after the retry, one cut at its budget with
  no shorter answer to ask for, a request refused for what it asks (4xx while
  the probe answers) or poisoned (500 while the probe answers). The model, its seed and temperature are
  in the key, so the same request gets the same failure: a second pass or a resumed
  run replays its fallback (outcome "replayed") instead of paying for it again.
  Outages (no connection, timeouts, 503, a 500 or 4xx the probe could not tell, a
  server that refuses the probe too) raise and are never kept. A kept failure is replayed for `FAILURE_REPLAY_S` only: the key
  cannot see a fixed Ollama or a model re-pulled under the same name, and a day
  later such a server gets its chance.

Facts about the `ollama` client 0.6.x this relies on (read from its source):
- Its default timeout is none: `make_client` always passes one.
- Without streaming a refused connection is the builtin `ConnectionError`;
  timeouts and dropped connections are raw `httpx` errors; HTTP errors are
  `ResponseError` with `.status_code`. A JSON error body that is not an object
  makes `ResponseError.__init__` itself raise `AttributeError`, and a 200 whose
  body is not a chat response raises `ValueError`/`TypeError`: all are treated
  as the service misbehaving (transient), never as bad model output.
- Message keys with falsy values are dropped before sending, so an empty
  assistant message would reach the server without `content`: the retry sends a
  placeholder instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Literal, Protocol, TypeVar

import httpx
import ollama

from ...store.db import utc_now
from ..core import retry
from ..core.retry import (
    IN_CALL,
    IN_CALL_ATTEMPTS,
    Backoff,
    OnWait,
    RetryAtOnce,
    Transient,
    call_with_retries,
    transient_status,
)
from ..core.settings import Settings
from ..core.untrusted import clean_json
from ..core.errors import ServiceUnavailable
from .jsonrepair import AnswerError, one_line, parse_json_answer_ex
from .wire import ChatClient, ChatReply, ModelHTTPError, OllamaChat, OpenAIChat, is_context_refusal

T = TypeVar("T")

__all__ = [
    "AnswerCache",
    "FAILURE_REPLAY_S",
    "KeptFailure",
    "LONG_TEXT_CHARS",
    "OUTPUT_FLOOR_TOKENS",
    "Shorter",
    "CallRecord",
    "CallResult",
    "HealthProbe",
    "ModelConfig",
    "AUTH_STATUSES",
    "ModelMissing",
    "ModelRefused",
    "PROBE_AFTER_REFUSALS",
    "PROBE_PURPOSE",
    "RETRY_PREFIX",
    "ServiceDown",
    "backoff_delay",
    "answer_token_bound",
    "call_json",
    "estimate_tokens",
    "fits",
    "health_probe",
    "make_client",
    "output_budget",
    "probe_options",
    "prompt_budget",
    "refusal_fix",
    "prompt_key",
    "request_options",
    "shorter_schema",
]

# ---- configuration ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """One model, one context size: Ollama reloads the model whenever `num_ctx` changes."""

    host: str  # Ollama's address, or the OpenAI-compatible server's base URL (with its /v1)
    model: str
    api: str = "ollama"  # the protocol (settings.MODEL_APIS): the setting `model_api`
    structured: str = Settings.structured  # how JSON is asked for (wire.STRUCTURED): the setting `structured`
    # Defaults of the knobs a user sets: Settings' (settings.config_knobs carries a user's values here by name).
    num_ctx: int = Settings.num_ctx
    num_predict: int = Settings.num_predict
    timeout_s: float = Settings.llm_timeout_s
    temperature: float = Settings.temperature
    seed: int = Settings.seed
    transport_attempts: int = IN_CALL_ATTEMPTS  # the retry policy's (retry.py); tests shrink the waits
    backoff_base_s: float = IN_CALL.base_s
    backoff_cap_s: float = IN_CALL.cap_s
    keep_alive: str | float | None = None  # None: the server's default (5 minutes)

    def __post_init__(self) -> None:
        # A blank model makes the client raise a pydantic error we would mistake for a bad response.
        if not self.model.strip():
            raise ValueError("ModelConfig.model must name a model, e.g. 'gemma3:270m'")
        if self.num_predict <= 0 or self.num_ctx <= self.num_predict + PROMPT_MARGIN_TOKENS:
            raise ValueError(
                f"num_ctx ({self.num_ctx}) must exceed num_predict ({self.num_predict}) "
                f"+ {PROMPT_MARGIN_TOKENS} tokens of margin, and num_predict must be positive"
            )
        if self.transport_attempts < 1:
            raise ValueError("transport_attempts must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive: the client would otherwise wait forever")
        Backoff(self.backoff_base_s, self.backoff_cap_s)  # a schedule that cannot work is refused here, not mid-call

    @property
    def backoff(self) -> Backoff:
        """This model's waits between transport attempts, as the one retry policy's schedule."""
        return Backoff(base_s=self.backoff_base_s, cap_s=self.backoff_cap_s)

    @property
    def server(self) -> str:
        """The server as messages name it (`server_name`)."""
        return server_name(self.api)


def server_name(api: str) -> str:
    """A model server as messages name it: "Ollama", or "the model server" (an OpenAI-compatible one)."""
    return "Ollama" if api == "ollama" else "the model server"


def make_client(cfg: ModelConfig, transport: httpx.AsyncBaseTransport | None = None,
                api_key: str | None = None) -> ChatClient:
    """The client every call goes through, for `cfg.api`. The libraries' default timeout is none (waits forever).

    Connecting gets its own short limit: a dead host should be noticed in seconds, while a
    slow model on a busy machine may legitimately take minutes to answer. `transport` is
    the daemon's egress transport (checked at connect, counted per brief); with it,
    trust_env=False, as a proxy from the environment would carry calls past it.
    ollama.AsyncClient hands extra keyword arguments to its httpx.AsyncClient. `api_key` (OpenAI-compatible
    servers only) goes in the Authorization header and nowhere else.
    """
    timeout = httpx.Timeout(cfg.timeout_s, connect=min(cfg.timeout_s, 10.0))
    if cfg.api == "openai":
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return OpenAIChat(cfg.host, httpx.AsyncClient(timeout=timeout, transport=transport, headers=headers,
                                                      trust_env=transport is None))
    if transport is None:
        return OllamaChat(ollama.AsyncClient(host=cfg.host, timeout=timeout))
    return OllamaChat(ollama.AsyncClient(host=cfg.host, timeout=timeout, transport=transport, trust_env=False))


async def served_config(cfg: ModelConfig, client: ChatClient) -> ModelConfig:
    """`cfg` with the context an OpenAI-compatible server reports for the model (vLLM's `max_model_len`):
    the prompts are then sized to what it takes, whatever num_ctx says. Unchanged for Ollama (num_ctx is
    sent with every request), for a server that does not report it (set num_ctx to its context), one that
    does not answer now, or a context too small for num_predict and the margin (the calls will say so)."""
    if not isinstance(client, OpenAIChat):
        return cfg
    try:
        context = await client.served_context(cfg.model)
    except (ConnectionError, httpx.HTTPError, ValueError):
        return cfg
    if context is None or context == cfg.num_ctx or context <= cfg.num_predict + PROMPT_MARGIN_TOKENS:
        return cfg
    return dataclasses.replace(cfg, num_ctx=context)


def request_options(cfg: ModelConfig, num_predict: int | None = None) -> dict[str, Any]:
    """The `options` of every chat request: always explicit, never the model's defaults.

    `num_predict`: this call's output budget (`output_budget`); None: the setting, the ceiling.
    """
    return {
        "num_ctx": cfg.num_ctx,
        "num_predict": cfg.num_predict if num_predict is None else min(num_predict, cfg.num_predict),
        "temperature": cfg.temperature,
        "seed": cfg.seed,
    }


# ---- token sizing ----------------------------------------------------------------------------------

# The chat template's role markers and special tokens, plus slack for our estimate being wrong
# in the optimistic direction on unusual text.
PROMPT_MARGIN_TOKENS = 256


def estimate_tokens(text: str) -> int:
    """A conservative token count: about 3 characters a token (English runs nearer 4)."""
    return math.ceil(len(text) / 3)


def prompt_budget(cfg: ModelConfig) -> int:
    """Tokens the system + user messages may use so that the answer still has `num_predict`."""
    return cfg.num_ctx - cfg.num_predict - PROMPT_MARGIN_TOKENS


def fits(cfg: ModelConfig, system: str, user: str) -> bool:
    """Whether a prompt fits the budget: Ollama would cut a longer one silently."""
    return estimate_tokens(system) + estimate_tokens(user) <= prompt_budget(cfg)


# ---- output budgets (pure) -------------------------------------------------------------------------
# Why: every call used to be allowed `num_predict` (1,024) tokens whatever it asked for, and a small
# model fills an array until it is cut off, which then costs a retry. A schema that bounds every array
# (maxItems) and string (maxLength) bounds the answer, since a grammar-constrained server (Ollama's
# `format`) cannot write past it. The largest answer the schema allows, counted as conservatively as
# `estimate_tokens` counts a prompt, is the call's `num_predict`: never more than the setting, which
# stays the ceiling, and never less than OUTPUT_FLOOR_TOKENS. A schema that bounds nothing gets the
# ceiling, as before. The sizes themselves live with the schemas (planner.py), so a prompt, its schema
# and its budget cannot disagree.

OUTPUT_FLOOR_TOKENS = 32      # braces, keys and whitespace of the smallest valid answer, with room to spare
NUMBER_TOKENS = 12            # a JSON number: a tokenizer may spend a token a digit (Gemma's does)
LITERAL_TOKENS = 2            # true, false, null
SEPARATOR_TOKENS = 2          # a comma or colon, and the newline and indent a model may put after it
LONG_TEXT_CHARS = 1000        # a string this long may be asked shorter; shorter ones are ids and labels
# Prose the model writes (a string of PROSE_CHARS or more: the synthesis's summary) may take more tokens
# than estimate_tokens' 3 characters a token: Gemma 3 270M wrote Markdown with citations at about 2.8,
# and a summary held to 400 characters by its grammar was cut off at a budget counted at 3. Counted at
# 2 a token, such an answer is not cut off by its own budget (the grammar still bounds it; only a model
# that writes to the bound spends it). Shorter strings (ids, labels, one-line summaries) keep 3.
PROSE_CHARS = 400
PROSE_CHARS_PER_TOKEN = 2


def answer_token_bound(schema: Any) -> int | None:
    """The most tokens a JSON value valid under `schema` can take, or None when the schema leaves
    it unbounded (an array without maxItems, a string without maxLength, an unknown type).

    Optional properties are counted as present: the bound is for the largest answer.
    """
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return max(estimate_tokens(json.dumps(v)) for v in schema["enum"]) + 1
    if "const" in schema:
        return estimate_tokens(json.dumps(schema["const"])) + 1
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _most([answer_token_bound(s) for s in schema[key]])
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return _most([_type_bound(schema, k) for k in kinds]) if kinds else None


def _most(bounds: list[int | None]) -> int | None:
    return None if not bounds or any(b is None for b in bounds) else max(b for b in bounds if b is not None)


def _type_bound(schema: dict[str, Any], kind: Any) -> int | None:
    if kind == "string":
        most = schema.get("maxLength")
        if not isinstance(most, int):
            return None
        return (math.ceil((most + 2) / PROSE_CHARS_PER_TOKEN) if most >= PROSE_CHARS
                else estimate_tokens("x" * (most + 2))) + 1
    if kind in ("number", "integer"):
        return NUMBER_TOKENS
    if kind in ("boolean", "null"):
        return LITERAL_TOKENS
    if kind == "array":
        most, item = schema.get("maxItems"), answer_token_bound(schema.get("items", {}))
        if not isinstance(most, int):
            return None
        if most == 0:
            return 2
        return None if item is None else 2 + most * (item + SEPARATOR_TOKENS)
    if kind == "object":
        # a missing additionalProperties is false to a grammar-constrained server (llama.cpp's converter)
        props = schema.get("properties")
        if not isinstance(props, dict) or schema.get("additionalProperties", False) is not False:
            return None
        values = [answer_token_bound(v) for v in props.values()]
        if any(v is None for v in values):
            return None
        keys = sum(estimate_tokens(json.dumps(k) + ": ") + SEPARATOR_TOKENS for k in props)
        return 2 + keys + sum(v for v in values if v is not None)
    return None


def output_budget(cfg: ModelConfig, schema: dict[str, Any]) -> int:
    """The `num_predict` of a call answering `schema`: its largest valid answer, floored, under the ceiling."""
    bound = answer_token_bound(schema)
    if bound is None:
        return cfg.num_predict
    return min(cfg.num_predict, max(OUTPUT_FLOOR_TOKENS, bound))


@dataclass(frozen=True)
class Shorter:
    """The schema for the retry of a cut-off answer, and what it asks for ("at most 3 items")."""

    schema: dict[str, Any]
    asks: list[str]


def shorter_schema(schema: dict[str, Any]) -> Shorter | None:
    """A tighter schema for the retry of an answer that was cut off, or None when no valid answer
    can be shorter (asking again for the same thing would be cut off again: the fallback instead).

    The answer's own arrays (not those inside their items: three sentence ids make one quote) get
    half their maxItems, never below minItems or 1; a long text (LONG_TEXT_CHARS or more) gets half
    its maxLength. An array or text with no bound can always be shorter: the retry asks for that in
    words, the schema cannot say how much.
    """
    tight: dict[str, Any] = json.loads(json.dumps(schema))  # a deep copy
    asks: list[str] = []
    _tighten(tight, "items", asks)
    return Shorter(tight, asks) if asks else None


def _tighten(node: Any, name: str, asks: list[str]) -> None:
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds:
        floor = max(1, node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0)
        most = node.get("maxItems")
        if not isinstance(most, int):
            asks.append(f"fewer {name}")
        elif most > floor:
            node["maxItems"] = max(floor, most // 2)
            asks.append(f"at most {node['maxItems']} {name}")
    elif "string" in kinds and "enum" not in node:
        most = node.get("maxLength")
        if not isinstance(most, int):
            asks.append(f"a shorter {name}")
        elif most >= LONG_TEXT_CHARS:
            node["maxLength"] = most // 2
            asks.append(f"a {name} of at most {node['maxLength']} characters")
    elif "object" in kinds or isinstance(node.get("properties"), dict):
        for key, child in (node.get("properties") or {}).items():
            _tighten(child, key, asks)


# ---- the call --------------------------------------------------------------------------------------

Outcome = Literal["ok", "repaired", "retried", "fallback", "cached", "error", "poisoned", "probe", "replayed"]

RETRY_PREFIX = "Your previous answer could not be used:"
_EMPTY_ANSWER_PLACEHOLDER = "(empty answer)"


# How long a kept failure is replayed: a second pass and a resumed run come within it; after it the
# same request is asked again, as Ollama may have been upgraded or the model pulled anew meanwhile
# (neither changes the prompt's key).
FAILURE_REPLAY_S = 24 * 3600.0


@dataclass(frozen=True)
class KeptFailure:
    """A deterministic failure of one request, as the answer cache keeps it."""

    outcome: Literal["fallback", "poisoned"]
    error: str
    retry_skipped: bool = False


class AnswerCache(Protocol):
    """Where finished answers, and deterministic failures, are kept by prompt hash (the store implements it)."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, answer: str, prompt_tokens: int | None, completion_tokens: int | None) -> None: ...

    def failure(self, key: str, max_age_s: float) -> KeptFailure | None: ...

    def put_failure(self, key: str, failure: KeptFailure) -> None: ...


@dataclass
class CallRecord:
    """One attempt at a model call (or one cache hit), as the store's model_calls table keeps it."""

    purpose: str
    model: str
    prompt_hash: str
    started_at: str
    seconds: float
    prompt_tokens: int | None
    completion_tokens: int | None
    outcome: Outcome
    answer: str
    error: str | None = None
    truncated_prompt: bool = False
    truncated_answer: bool = False
    attempt: int = 1
    num_predict: int | None = None  # the output budget this attempt was sent (None: no request was answered)
    structured: str | None = None  # how its JSON was asked for (wire.STRUCTURED); None: no request was answered
    prompt_seconds: float | None = None  # the server's seconds reading the prompt (ChatReply's); None: not said
    eval_seconds: float | None = None  # the server's seconds generating the answer; None: not said


@dataclass
class CallResult(Generic[T]):
    """What `call_json` settled on, and what it cost."""

    value: T
    outcome: Literal["ok", "repaired", "retried", "fallback", "cached", "poisoned"]
    records: list[CallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: list[str] = field(default_factory=list)
    retry_skipped: bool = False  # cut off, and not asked again (no shorter answer, or the caller said so)


class ServiceDown(ServiceUnavailable):
    """The model server stayed unreachable (or kept answering 5xx) through every transport attempt.

    The brief should wait and try again later; it has not failed.
    """

    def __init__(self, host: str, reason: str, api: str = "ollama") -> None:
        said = f"{server_name(api)} at {host} is unavailable: {reason}"
        super().__init__("ollama", said, said=said)  # the whole line is what briefs waiting for it say
        self.host = host


class ModelMissing(ServiceUnavailable):
    """The server answered 404 for the model: Ollama has not pulled it, an OpenAI-compatible server does not
    serve it under that name. Only the user can fix that."""

    def __init__(self, model: str, host: str, detail: str = "", api: str = "ollama") -> None:
        if api == "ollama":
            fix = f"run: ollama pull {model}"
            said = f"model {model!r} is not available on Ollama at {host}{f' ({detail})' if detail else ''}; {fix}"
        else:
            fix = (f"set `model` to a name the server serves (`briefd check` lists them), or start the server "
                   f"with {model!r}; a base URL without its /v1 gets 404 too")
            said = f"model {model!r} is not served by the model server at {host}{f' ({detail})' if detail else ''}; {fix}"
        super().__init__("ollama", said, fix, said=said)
        self.model = model
        self.host = host
        self.detail = detail


# The statuses a server or a proxy in front of it answers to a caller it does not let in: 401 (no or a wrong
# token), 403 (forbidden: a rotated token, an address not allowed) and 407 (the proxy wants credentials).
AUTH_STATUSES = (401, 403, 407)


def refusal_fix(status: int, api: str = "ollama") -> str:
    """What ends a model server's refusal of briefd itself (HTTP `status` to every request): the one
    wording the daemon's log, the brief's waiting events and `briefd check` say."""
    if api == "openai":
        if status in AUTH_STATUSES:
            return ("check the API key (BRIEFD_OPENAI_API_KEY or openai_api_key_file) against the one the server "
                    "was started with, and the token of any proxy in front of it")
        return ("check that openai_base_url / BRIEFD_OPENAI_BASE_URL points at the OpenAI-compatible server, "
                "with its /v1, and read that server's log")
    if status in AUTH_STATUSES:
        return ("check the token or credentials of the proxy in front of Ollama (and its address allow-list), "
                "or point OLLAMA_HOST / --ollama-host at Ollama itself")
    return ("check that OLLAMA_HOST / --ollama-host points at Ollama, not at another service or a proxy that "
            "rejects briefd, and read that server's log")


class ModelRefused(ServiceUnavailable):
    """The model server refuses briefd itself: a request and a one-word health probe both got a 4xx (401,
    403, 407: a proxy whose token was rotated). Not the prompt's fault, so never kept as its failure, and
    not a failure a retry cures: the brief waits for the user's fix, as for a model that is not pulled.
    `status` and `detail` are the probe's: what the server says to any request."""

    def __init__(self, host: str, status: int, detail: str = "", api: str = "ollama") -> None:
        fix = refusal_fix(status, api)
        said = (f"the model server at {host} refuses briefd (HTTP {status}{f': {detail}' if detail else ''}; "
                f"a one-word health probe was refused too); {fix}")
        super().__init__("ollama", said, fix, said=said)
        self.host = host
        self.status = status
        self.detail = detail


class _Rejected(Exception):
    """A 4xx other than 404 while the health probe was answered: this request is refused, so asking again
    will not help. `probe` is the answered probe: it cost model time, and it is the proof."""

    def __init__(self, server: str, status: int, detail: str, probe: HealthProbe) -> None:
        super().__init__(f"{server} refused the request: HTTP {status}: {detail} (it answers others: a health "
                         f"probe succeeded)")
        self.status = status
        self.probe = probe


class _TooLong(Exception):
    """An OpenAI-compatible server refused the prompt as longer than its context (vLLM's 400 "maximum
    context length"): a fact of this request on this model, which asking again cannot change."""


class _Unusable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class HealthProbe:
    """What the health probe found: `response` is set when the model answered it (healthy)."""

    response: ChatReply | None
    started_at: str
    seconds: float
    reason: str = ""  # why it failed, when it did
    status: int | None = None  # the HTTP status it was refused with, when it was
    detail: str = ""  # the server's own words with that status

    @property
    def healthy(self) -> bool:
        return self.response is not None


class _Poisoned(Exception):
    """This request got HTTP 500 every time while the health probe was answered: asking again will not help."""

    def __init__(self, reason: str, probe: HealthProbe) -> None:
        super().__init__(reason)
        self.reason = reason
        self.probe = probe


# Answers about given text (an evidence batch's passages, the synthesis of given quotes) hardly
# depend on the day they are asked: their cache key keeps only the year of the prompt's date
# line, so a brief asked again another day of the year, about text that did not change, replays
# them instead of paying for the same answer (issue 12: a scheduled re-run whose sources did not
# change makes no model call). The year stays: a page's "last year" is read against it. A plan's
# key keeps the whole date: its queries may aim at this month.
TODAY_PREFIX = "TODAY: "
DATE_FREE_PURPOSES = ("evidence", "synthesis")


def cache_messages(purpose: str, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The messages as the answer cache keys them: the user prompt's date line (planner's header,
    TODAY_PREFIX) cut to its year where the answer does not depend on the day."""
    if purpose not in DATE_FREE_PURPOSES:
        return messages
    return [{**m, "content": _year_only(m["content"])} if m.get("role") == "user" else m for m in messages]


def _year_only(prompt: str) -> str:
    lines = prompt.split("\n")
    for n, line in enumerate(lines[:3]):  # the header: QUESTION, then TODAY
        if line.startswith(TODAY_PREFIX):
            lines[n] = line[:len(TODAY_PREFIX) + 4]
            break
    return "\n".join(lines)


def prompt_key(cfg: ModelConfig, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of (model, messages, format, options), and the API where it is not Ollama's:
    the cache key. The same name on two APIs may be two models (a vLLM's "gemma-3" is no Ollama "gemma-3"),
    so neither replays the other's answers; Ollama's keys are those of every earlier version (a cache kept)."""
    payload: dict[str, Any] = {"model": cfg.model, "messages": messages, "format": schema,
                               "options": request_options(cfg)}
    if cfg.api != "ollama":
        payload["api"] = cfg.api
    if cfg.structured != "schema":  # another request, another answer (the schema asked in words, say)
        payload["structured"] = cfg.structured
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def backoff_delay(cfg: ModelConfig, failures: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after `failures` failed tries of a model call: the retry policy's schedule
    (`retry.backoff_delay`) with this model's base and cap."""
    return retry.backoff_delay(cfg.backoff, failures, rand)


def transport_reason(exc: BaseException) -> str:
    """Why a request never got an answer, on one line: the calls' reason and `briefd check`'s message."""
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, ConnectionError):
        return "connection refused or failed"
    return one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


# A request refused with this status this many times (and each time after) is judged by a health probe: the first
# 500 may be a runner that crashed for another reason and restarts; the second, on the very same
# request, is the one retry a call is allowed before a fallback.
RUNNER_FAILED_STATUS = 500
PROBE_AFTER_REFUSALS = 2
PROBE_PURPOSE = "health_probe"
PROBE_PROMPT = "Reply with the single word OK."


def probe_options(cfg: ModelConfig) -> dict[str, Any]:
    """`request_options` with one token to generate: the same `num_ctx`, so the probe never reloads the model."""
    return {**request_options(cfg), "num_predict": 1}


async def health_probe(client: ChatClient, cfg: ModelConfig) -> HealthProbe:
    """Can the model answer anything right now? A one-word prompt, one token, the same model and context.

    Any failure (an HTTP error, no connection, a timeout, an unreadable answer) is "no": an
    outage. Only an answer says the runner loads and generates, so a request it keeps
    refusing is refused for what it asks, not because the server is down.
    """
    started_at, t0 = utc_now(), time.monotonic()
    try:
        response = await client.chat(cfg.model, [{"role": "user", "content": PROBE_PROMPT}], None,
                                     probe_options(cfg), cfg.keep_alive)
    except ModelHTTPError as exc:
        return HealthProbe(None, started_at, round(time.monotonic() - t0, 3), f"HTTP {exc.status}: {exc.detail}",
                           exc.status, exc.detail)
    except (ConnectionError, httpx.HTTPError) as exc:
        return HealthProbe(None, started_at, round(time.monotonic() - t0, 3), transport_reason(exc))
    except (ValueError, TypeError, AttributeError) as exc:
        return HealthProbe(None, started_at, round(time.monotonic() - t0, 3),
                           one_line(f"unreadable response ({type(exc).__name__}: {exc})", 200))
    return HealthProbe(response, started_at, round(time.monotonic() - t0, 3))


async def _chat(client: ChatClient, cfg: ModelConfig, messages: list[dict[str, str]],
                schema: dict[str, Any], on_wait: OnWait | None,
                num_predict: int | None = None) -> tuple[ChatReply, str, float]:
    """One model attempt; transport failures are waited out by the retry policy, up to `transport_attempts`.

    From the second HTTP 500 for this request on, each refusal is judged by a health probe:
    answered → `_Poisoned` (this request crashes the model; the caller falls back), not answered →
    the outage is waited out, and the next refusal probes again. A 4xx other than 404 is judged by a
    probe at once: answered → `_Rejected` (this prompt is refused; the caller falls back), refused with
    a 4xx too → `ModelRefused` (the server refuses briefd: the brief waits for the fix), not answered
    otherwise → an outage, waited out. A refusal that says the prompt passes the context (an
    OpenAI-compatible server's 400, `wire.is_context_refusal`) → `_TooLong` at once, no probe. A busy
    server's Retry-After (429, 503) is waited at least (`Transient.retry_after_s`).
    """
    refusals = 0
    probe_failed = ""  # said with every later reason: the user learns that the whole server is down

    async def attempt() -> tuple[ChatReply, str, float]:
        nonlocal refusals, probe_failed
        started_at, t0 = utc_now(), time.monotonic()
        retry_after: float | None = None
        try:
            response = await client.chat(cfg.model, messages, schema, request_options(cfg, num_predict),
                                         cfg.keep_alive, cfg.structured)
            return response, started_at, round(time.monotonic() - t0, 3)
        except ModelHTTPError as exc:
            if exc.status == 404:
                raise ModelMissing(cfg.model, cfg.host, exc.detail, cfg.api) from None
            if is_context_refusal(exc):
                raise _TooLong(f"HTTP {exc.status}: {exc.detail}") from None
            reason = f"HTTP {exc.status}: {exc.detail}"
            retry_after = exc.retry_after
            if not transient_status(exc.status):
                # this prompt refused, or briefd itself (a proxy whose token was rotated)? Only a request the
                # server answers tells: a refusal kept as the prompt's would be replayed for a day after the fix
                probe = await health_probe(client, cfg)
                if probe.healthy:
                    raise _Rejected(cfg.server, exc.status, exc.detail, probe) from None
                if probe.status == 404:
                    raise ModelMissing(cfg.model, cfg.host, probe.detail, cfg.api) from None
                if probe.status is not None and not transient_status(probe.status):
                    raise ModelRefused(cfg.host, probe.status, probe.detail, cfg.api) from None
                probe_failed = f"; a health probe failed too ({probe.reason})"  # down meanwhile: waited out
            elif exc.status == RUNNER_FAILED_STATUS:
                refusals += 1
                if refusals >= PROBE_AFTER_REFUSALS:  # each refusal from the second: a failed probe may be a reload
                    probe = await health_probe(client, cfg)
                    if probe.healthy:
                        raise _Poisoned(
                            f"{cfg.server} refused this request {refusals} times ({reason}) but answers others "
                            f"(a health probe succeeded): the request itself crashes the model",
                            probe) from None
                    probe_failed = f"; a health probe failed too ({probe.reason})"
                else:  # the re-ask itself waits for Ollama's new runner: no backoff keeps the model idle before it
                    raise RetryAtOnce(reason) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ServiceDown(cfg.host, f"bad {cfg.server} address: {exc}", cfg.api) from None
        except (ConnectionError, httpx.TransportError) as exc:
            reason = transport_reason(exc)
        except (ValueError, TypeError, AttributeError) as exc:
            # A 200 that is not a chat response, or an error body the client cannot read.
            reason = one_line(f"unreadable response ({type(exc).__name__}: {exc})", 200)
        failure = Transient(reason + probe_failed)
        failure.retry_after_s = retry_after
        raise failure

    try:
        return await call_with_retries(attempt, service="ollama", on_wait=on_wait,
                                       attempts=cfg.transport_attempts, schedule=cfg.backoff)
    except Transient as exc:
        raise ServiceDown(cfg.host, f"{exc} (after {cfg.transport_attempts} attempts)", cfg.api) from None


def _use(answer: str, coerce: Callable[[Any], T]) -> tuple[T, list[str]]:
    try:
        parsed, repairs = parse_json_answer_ex(answer)
    except AnswerError as exc:
        raise _Unusable(exc.reason) from None
    try:
        return coerce(clean_json(parsed)), repairs  # the model's door: every string cleaned (untrusted.py)
    except KeyError as exc:
        raise _Unusable(f"the JSON lacks the required field {exc.args[0]!r}" if exc.args else "a field is missing") from None
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        raise _Unusable(one_line(f"the JSON does not match the schema: {exc}" if str(exc)
                                  else f"the JSON does not match the schema ({type(exc).__name__})")) from None


def _probe_record(cfg: ModelConfig, probe: HealthProbe) -> CallRecord:
    """The answered health probe as a model call: it is not free, so usage counts it."""
    response = probe.response
    return CallRecord(purpose=PROBE_PURPOSE, model=cfg.model, prompt_hash="", started_at=probe.started_at,
                      seconds=probe.seconds, prompt_tokens=response.prompt_tokens if response else None,
                      completion_tokens=response.completion_tokens if response else None, outcome="probe",
                      answer=response.content if response else "")


def _retry_messages(cfg: ModelConfig, messages: list[dict[str, str]], bad: str, reason: str) -> list[dict[str, str]]:
    """The first request, the bad answer (clipped to what the window can hold), and the reason."""
    follow_up = f"{RETRY_PREFIX} {one_line(reason)}. Reply with only a JSON object that matches the schema."
    room = prompt_budget(cfg) - sum(estimate_tokens(m["content"]) for m in messages) - estimate_tokens(follow_up)
    limit = max(room * 3, 600)
    shown = bad.strip() or _EMPTY_ANSWER_PLACEHOLDER
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return [*messages, {"role": "assistant", "content": shown}, {"role": "user", "content": follow_up}]


async def call_json(
    client: ChatClient,
    cfg: ModelConfig,
    *,
    purpose: str,
    system: str,
    user: str,
    schema: dict[str, Any],
    coerce: Callable[[Any], T],
    fallback: Callable[[], T],
    cache: AnswerCache | None = None,
    record: Callable[[CallRecord], None] | None = None,
    on_wait: OnWait | None = None,
    retry_cut: bool = True,
) -> CallResult[T]:
    """Ask the model for JSON matching `schema` and turn it into a T, whatever the model does.

    `retry_cut=False`: an answer cut off at its budget is not asked again (the caller has a
    fallback at least as good as a shorter answer would be: the synthesis's quotes).

    Cache hit → "cached". Otherwise one chat, whose `num_predict` is the schema's output budget
    (`output_budget`); a usable answer (after repair) → "ok" or "repaired"; else one retry quoting
    the reason → "retried"; else `fallback()` → "fallback". An answer cut off at its budget is
    retried only when a shorter answer can exist (`shorter_schema`): the retry asks for fewer items
    in words and sends the tighter schema (and its smaller budget); when none can, the fallback at once. A request Ollama keeps refusing with HTTP 500 while its health probe is
    answered → `fallback()` as "poisoned" (the probe is recorded as a "probe" call: it cost
    model time). Each of those fallbacks is kept in `cache`; a kept failure younger than
    `FAILURE_REPLAY_S` is given again (its fallback, with the outcome it had; recorded as one
    "replayed" call, no model time) instead of asking. A request refused with a 4xx (not 404) while the
    health probe is answered → `fallback()`, kept likewise. Raises only ServiceDown (Ollama unreachable
    after every transport attempt, the probe included), ModelMissing (404) and ModelRefused (a 4xx to the
    health probe too: the server refuses briefd). Every attempt is passed to `record`.
    """
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    key = prompt_key(cfg, cache_messages(purpose, messages), schema)
    records: list[CallRecord] = []

    def emit(rec: CallRecord) -> None:
        records.append(rec)
        if record is not None:
            record(rec)

    def result(value: T, outcome: Any, repairs: list[str], retry_skipped: bool = False) -> CallResult[T]:
        return CallResult(
            value=value, outcome=outcome, records=records, repairs=repairs, retry_skipped=retry_skipped,
            prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
            completion_tokens=sum(r.completion_tokens or 0 for r in records),
        )

    def failed(outcome: Literal["fallback", "poisoned"], retry_skipped: bool = False) -> CallResult[T]:
        """The fallback, and the failure kept: the same request would fail the same way (see the module doc)."""
        if cache is not None:
            cache.put_failure(key, KeptFailure(outcome, records[-1].error or "", retry_skipped))
        return result(fallback(), outcome, [], retry_skipped=retry_skipped)

    if cache is not None:
        stored = cache.get(key)
        if stored is not None:
            try:
                value, repairs = _use(stored, coerce)
            except _Unusable:
                pass  # an entry today's coerce rejects (briefd was upgraded): ask the model again
            else:
                emit(CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=utc_now(),
                                seconds=0.0, prompt_tokens=0, completion_tokens=0, outcome="cached",
                                answer=stored))
                return result(value, "cached", repairs)
        kept = cache.failure(key, FAILURE_REPLAY_S)
        if kept is not None:
            emit(CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=utc_now(),
                            seconds=0.0, prompt_tokens=0, completion_tokens=0, outcome="replayed", answer="",
                            error=f"replayed failure ({kept.outcome}): {kept.error}"))
            return result(fallback(), kept.outcome, [], retry_skipped=kept.retry_skipped)

    over_budget = not fits(cfg, system, user)
    attempt_messages, attempt_schema = messages, schema
    for attempt in (1, 2):
        budget = output_budget(cfg, attempt_schema)
        try:
            response, started_at, seconds = await _chat(client, cfg, attempt_messages, attempt_schema, on_wait,
                                                        budget)
        except _Rejected as exc:
            emit(_probe_record(cfg, exc.probe))
            emit(CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=utc_now(),
                            seconds=0.0, prompt_tokens=None, completion_tokens=None, outcome="fallback",
                            answer="", error=str(exc), truncated_prompt=over_budget, attempt=attempt))
            return failed("fallback")
        except _Poisoned as exc:
            emit(_probe_record(cfg, exc.probe))
            emit(CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=utc_now(),
                            seconds=0.0, prompt_tokens=None, completion_tokens=None, outcome="poisoned",
                            answer="", error=exc.reason, truncated_prompt=over_budget, attempt=attempt))
            return failed("poisoned")
        except _TooLong as exc:  # the server's context is smaller than num_ctx says: the prompt cannot be sent
            emit(CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=utc_now(),
                            seconds=0.0, prompt_tokens=None, completion_tokens=None, outcome="fallback",
                            answer="", error=(f"the prompt is too long for this model's context ({exc}); set num_ctx "
                                              f"to the server's context, {cfg.num_ctx} tokens now"),
                            truncated_prompt=True, attempt=attempt))
            return failed("fallback")
        answer = response.content
        prompt_tokens, completion_tokens = response.prompt_tokens, response.completion_tokens
        truncated_answer = response.cut
        # Ollama cuts a prompt past num_ctx silently (an OpenAI-compatible server refuses it: _TooLong)
        server_cut = cfg.api == "ollama" and prompt_tokens is not None and prompt_tokens >= cfg.num_ctx - cfg.num_predict
        rec = CallRecord(purpose=purpose, model=cfg.model, prompt_hash=key, started_at=started_at,
                         seconds=seconds, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                         outcome="ok", answer=answer, truncated_prompt=over_budget or server_cut,
                         truncated_answer=truncated_answer, attempt=attempt, num_predict=budget,
                         structured=response.structured, prompt_seconds=response.prompt_seconds,
                         eval_seconds=response.eval_seconds)
        try:
            value, repairs = _use(answer, coerce)
        except _Unusable as exc:
            reason = exc.reason
            shorter = shorter_schema(attempt_schema) if truncated_answer and retry_cut else None
            if truncated_answer and shorter is None:
                why = "no shorter answer can exist" if retry_cut else "a shorter answer would not be better"
                rec.outcome, rec.error = "fallback", f"it was cut off at the {budget}-token limit ({reason}) and {why}"
                emit(rec)
                return failed("fallback", retry_skipped=attempt == 1)  # a cut-off retry was asked all the same
            if shorter is not None:
                reason = (f"it was cut off at the {budget}-token limit ({reason}); "
                          f"give a shorter answer with {', '.join(shorter.asks)}")
                attempt_schema = shorter.schema
            elif not answer.strip() and response.thinking:
                reason = "it was empty: the model spent its output on thinking"
            rec.outcome, rec.error = ("error" if attempt == 1 else "fallback"), reason
            emit(rec)
            attempt_messages = _retry_messages(cfg, messages, answer, reason)
            continue
        rec.outcome = "retried" if attempt == 2 else ("repaired" if repairs else "ok")
        emit(rec)
        final = result(value, rec.outcome, repairs)
        if cache is not None:
            cache.put(key, answer, final.prompt_tokens, final.completion_tokens)
        return final
    return failed("fallback")
