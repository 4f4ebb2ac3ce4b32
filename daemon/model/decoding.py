"""How fast the configured model writes JSON each way it can be asked (`structured`): what `briefd check` times.

Why: a grammar that holds decoding to a JSON schema costs a different price on each server. Ollama (and the
lab's stand-in, and llama.cpp's own sampler) asks the grammar only about the token it drew: 1.05x the seconds
of unconstrained generation per token with Gemma 3 270M over the lab's briefs; llama-cpp-python's server runs
the grammar over all 262k Gemma tokens at every step: about 3x (docs/measurements.md). Which way is cheapest,
and whether the model still writes valid JSON without the grammar, depends on the server and the model, so it
is measured on them, not assumed: one short call each way, the same question, the server's own clock where it
keeps one (the call's wall where not).

The decisions (`Trial`, `valid_answer`, `decoding_line`) are pure; `time_structured` makes the three calls.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.settings import STRUCTURED
from .llm import ModelConfig, make_client, request_options
from .wire import ChatClient, ModelHTTPError
from .jsonrepair import one_line

__all__ = ["PROBE_SCHEMA", "Trial", "decoding_line", "time_structured", "valid_answer"]

PROBE_SYSTEM = "You answer with one JSON object and nothing else."
PROBE_USER = "Name five colours of a rainbow and, for each, one thing that has that colour."
PROBE_SCHEMA: dict[str, Any] = {
    "title": "check",
    "type": "object",
    "properties": {
        "colours": {
            # five, not "up to": an answer long enough that the prompt's seconds do not swamp the per-token
            # figure where the server keeps no clock (its wall is then all there is)
            "type": "array", "minItems": 5, "maxItems": 5,
            "items": {"type": "object",
                      "properties": {"colour": {"type": "string", "maxLength": 20},
                                     "example": {"type": "string", "maxLength": 40}},
                      "required": ["colour", "example"], "additionalProperties": False},
        },
    },
    "required": ["colours"],
    "additionalProperties": False,
}
TRIAL_TIMEOUT_S = 120.0  # a call of PROBE_TOKENS: a large model on a CPU takes about a minute
PROBE_TOKENS = 128  # room for the five items (about 70 tokens); few enough that check stays quick
FASTER_BY = 1.3  # a way at least this much faster per token than the one set is worth a line of advice


@dataclass(frozen=True)
class Trial:
    """One short call made one way: its generated tokens and seconds, whether its answer is valid JSON of the
    schema's shape, and `error` when the call itself failed (then the figures are 0)."""

    structured: str
    generated: int
    seconds: float
    clock: bool  # the seconds are the server's generating (True) or the call's wall (False: it keeps no clock)
    valid: bool
    error: str = ""
    answered: bool = False  # with `error`: the server answered (an HTTP refusal), so it is up

    @property
    def per_token(self) -> float | None:
        return self.seconds / self.generated if self.generated and not self.error else None


def valid_answer(text: str, schema: dict[str, Any] = PROBE_SCHEMA) -> bool:
    """Is `text` one JSON object with the schema's required keys (the shape briefd's parse needs first)?"""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and all(key in value for key in schema.get("required", ()))


async def time_structured(cfg: ModelConfig, api_key: str | None = None,
                          ways: Sequence[str] = STRUCTURED) -> list[Trial]:
    """One short call each way on `cfg`'s model and server (the first host), one after another, each given at
    most TRIAL_TIMEOUT_S; after a call the server did not answer in time (or at all), the rest are not asked
    (said as not tried): `briefd check` must not wait three timeouts for one dead server."""
    cfg = dataclasses.replace(cfg, timeout_s=min(cfg.timeout_s, TRIAL_TIMEOUT_S))
    client = make_client(cfg, api_key=api_key)
    trials: list[Trial] = []
    try:
        for way in ways:
            if trials and trials[-1].error and not trials[-1].answered:
                trials.append(Trial(way, 0, 0.0, False, False, error="not tried: the server did not answer"))
                continue
            trials.append(await _trial(client, cfg, way))
        return trials
    finally:
        await client.close()


async def _trial(client: ChatClient, cfg: ModelConfig, way: str) -> Trial:
    messages = [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": PROBE_USER}]
    started = time.monotonic()
    try:
        reply = await client.chat(cfg.model, messages, PROBE_SCHEMA, request_options(cfg, PROBE_TOKENS),
                                  cfg.keep_alive, structured=way)
    except ModelHTTPError as exc:  # the server answered, refusing: the next way may fare better
        return Trial(way, 0, 0.0, False, False, error=one_line(str(exc), 200), answered=True)
    except Exception as exc:  # noqa: BLE001 - a probe: its failure is its finding, said in the line
        return Trial(way, 0, 0.0, False, False, error=one_line(f"{type(exc).__name__}: {exc}", 200))
    wall = time.monotonic() - started
    clock = reply.eval_seconds is not None
    return Trial(way, reply.completion_tokens or 0, reply.eval_seconds if reply.eval_seconds is not None else wall,
                 clock, valid_answer(reply.content))


def decoding_line(trials: Sequence[Trial], configured: str, model: str) -> str:
    """What `briefd check` says of the trials: each way's milliseconds per generated token and whether its JSON
    was valid, which valid way was fastest, and advice when it beats the one set by FASTER_BY or more."""
    parts = []
    for t in trials:
        if t.error:
            parts.append(f"{t.structured} failed ({t.error})")
            continue
        figure = f"{1000 * t.per_token:.0f} ms a token" if t.per_token is not None else "no tokens"
        parts.append(f"{t.structured} {figure}{'' if t.clock else ' (wall)'}, "
                     f"{'valid JSON' if t.valid else 'NOT valid JSON'}")
    line = f"structured output, one short call each way on {model}: " + "; ".join(parts)
    valid = [t for t in trials if t.valid and t.per_token is not None]
    if not valid:
        return line + f"; no way gave valid JSON: keep structured = \"{configured}\" (briefd repairs and retries)"
    best = min(valid, key=lambda t: t.per_token or 0.0)
    mine = next((t for t in trials if t.structured == configured), None)
    line += f"; fastest with valid JSON: {best.structured}"
    if (mine is not None and best.structured != configured and best.per_token and
            (mine.per_token is None or not mine.valid or mine.per_token >= FASTER_BY * best.per_token)):
        line += f" (set structured = \"{best.structured}\"; it is \"{configured}\" now)"
    else:
        line += f" (structured = \"{configured}\" is set)"
    return line
