"""Turning a small model's broken JSON answer into the object it meant, or a reason short enough to quote back.

Why it looks like this: a small local model's answer is data we cannot trust to be well formed. It may be
wrapped in prose or code fences, preceded by a <think> block, cut off at `num_predict`, or carry trailing
commas. `parse_json_answer` repairs what can be repaired *without guessing* (a truncated answer is closed only
where Python's own decoder says the text is a valid prefix) and otherwise says precisely what is wrong, because
that reason goes back to the model in the one retry (llm.py's call wrapper). Pure: no I/O, no clock.

Nesting is bounded by Python's own recursion (a RecursionError is an answer "nested too deeply"), not by
core/jsontext.py's MAX_DEPTH: that bound is for files a user wrote, whose readers need a path in the message;
an answer the schema shapes is only ever a few levels deep, and what is deeper is simply unusable.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import BriefdError

__all__ = [
    "AnswerError",
    "MAX_ANSWER_CHARS",
    "MAX_REASON_CHARS",
    "REPAIR_FENCE",
    "REPAIR_PROSE",
    "REPAIR_THINK",
    "REPAIR_TRAILING_COMMA",
    "REPAIR_TRUNCATED",
    "one_line",
    "parse_json_answer",
    "parse_json_answer_ex",
]

MAX_REASON_CHARS = 300
"""A reason quoted back to the model or kept in a call's record is cut to this many characters."""


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text` on one line, without a closing full stop, cut to `limit` characters: a reason that is quoted
    inside a sentence (the retry's follow-up, a call record, a log line)."""
    text = " ".join(str(text).split()).rstrip(".")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AnswerError(BriefdError, ValueError):
    """The answer holds no usable JSON; `reason` is short enough to quote back to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Repair names, as reported by parse_json_answer_ex and counted in CallResult.repairs.
REPAIR_THINK = "think"
REPAIR_FENCE = "fence"
REPAIR_PROSE = "prose"
REPAIR_TRAILING_COMMA = "trailing_comma"
REPAIR_TRUNCATED = "truncated"

MAX_ANSWER_CHARS = 1_000_000  # far past any num_predict; bounds the work on a hostile input
_MAX_SCAN_TOKENS = 200_000  # total bracket/string tokens examined while looking for candidates
_MAX_TRUNCATED_TRIES = 16
_MAX_CUTS_TRIED = 64

_THINK_BLOCK = re.compile(r"^\s*<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"^\s*<(think|thinking)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)
# A JSON string (group 1 set when it is terminated) or one bracket. Strings are matched whole so
# that braces inside them never count; an unterminated string runs to the end of the text.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(")?|[{}\[\]]', re.DOTALL)
_OPENER = re.compile(r"[{\[]")
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*")
# A string, closed or cut off at the end (so ",]" inside a cut-off string is never taken for a
# trailing comma), or a comma before a closer.
_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*(?:"|\\?\Z))|,(\s*[}\]])', re.DOTALL)
_PARTIAL_TOKEN = re.compile(r"[A-Za-z0-9.+\-]*\s*")
_CLOSER = {"{": "}", "[": "]"}
_JSONISH = re.compile(r'\{\s*["}]|\[\s*(?:["\-0-9{\[\]]|true\b|false\b|null\b)')


class _NonFinite(Exception):
    """NaN or Infinity in an answer: Python's json accepts them, JSON does not."""


def _reject_constant(name: str) -> Any:
    """json's parse_constant: NaN, Infinity and -Infinity are refused, so the reason can name them."""
    raise _NonFinite(name)


def _finite_float(text: str) -> float:
    """json's parse_float: a number too large for a float is refused like NaN, not read as inf."""
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf without ever calling parse_constant
        raise _NonFinite(text)
    return value


def _loads(text: str) -> Any:
    """json.loads as the repair reads JSON: raw control characters allowed, non-finite numbers refused."""
    # strict=False lets raw control characters (a literal newline) through inside strings:
    # harmless, and small models do write them.
    return json.loads(text, strict=False, parse_constant=_reject_constant, parse_float=_finite_float)


def _remove_trailing_commas(text: str) -> str:
    """`text` without the commas before a closing bracket; commas inside strings are kept."""
    return _TRAILING_COMMA.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def _kind(value: Any) -> str:
    """What a JSON scalar is, in the words of a reason ("the answer is a string, not a JSON object")."""
    return {str: "a string", bool: "a boolean", type(None): "null", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


@dataclass
class _Attempts:
    """What went wrong with the candidates tried so far, to explain a failure precisely."""

    non_finite: str | None = None
    truncated: str | None = None
    invalid: str | None = None
    invalid_len: int = -1
    scalar: str | None = None

    def note_invalid(self, reason: str, length: int) -> None:
        if length > self.invalid_len:
            self.invalid, self.invalid_len = reason, length

    def reason(self, had_think: bool) -> str:
        if self.non_finite:
            return f"the answer contains {self.non_finite}, which is not valid JSON (use null or a number)"
        if self.truncated:
            return self.truncated
        if self.invalid:
            return self.invalid
        if self.scalar:
            return self.scalar
        if had_think:
            return "the answer is a <think> block with no JSON object after it"
        return "no JSON object or array found in the answer"


def _unparseable(exc: Exception) -> str:
    """The reason for a decode that failed outside json's syntax errors (too deep, a huge integer)."""
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply"
    return one_line(f"unparseable JSON: {exc}", 200)


def _decode_error(exc: json.JSONDecodeError) -> str:
    """json's syntax error as a reason: what and where, which the model can act on."""
    return f"invalid JSON: {exc.msg} at character {exc.pos}"


def _parse_whole(text: str, why: _Attempts) -> tuple[Any, list[str]] | None:
    """`text` as it stands, or with trailing commas removed; None (noting why) when neither parses."""
    try:
        return _loads(text), []
    except _NonFinite as exc:
        why.non_finite = str(exc)
        return None
    except json.JSONDecodeError as exc:
        first_error = exc
    except (RecursionError, ValueError) as exc:  # too deeply nested; an integer past 4,300 digits
        why.note_invalid(_unparseable(exc), len(text))
        return None
    cleaned = _remove_trailing_commas(text)
    if cleaned != text:
        try:
            return _loads(cleaned), [REPAIR_TRAILING_COMMA]
        except _NonFinite as exc:
            why.non_finite = str(exc)
            return None
        except json.JSONDecodeError:
            pass
        except (RecursionError, ValueError) as exc:
            why.note_invalid(_unparseable(exc), len(text))
            return None
    why.note_invalid(_decode_error(first_error), len(text))
    return None


@dataclass
class _Scan:
    """Where the brackets opened at one place close, as far as the text shows."""

    end: int | None  # index after the matching closer (or the mismatched one), None when the text ends first
    mismatched: bool = False
    tokens: int = 0


def _scan(text: str, start: int) -> _Scan:
    """Follow brackets from the opener at `start`, skipping over strings."""
    stack: list[str] = []
    tokens = 0
    for m in _TOKEN.finditer(text, start):
        tokens += 1
        tok = m.group(0)
        if tok[0] == '"':
            if m.group(1) is None:
                return _Scan(None, tokens=tokens)
            continue
        if tok in "{[":
            stack.append(tok)
            continue
        if not stack or _CLOSER[stack[-1]] != tok:
            return _Scan(m.end(), mismatched=True, tokens=tokens)
        stack.pop()
        if not stack:
            return _Scan(m.end(), tokens=tokens)
    return _Scan(None, tokens=tokens)


_EMPTY_PREFIX = object()  # a valid JSON prefix that closes to nothing: the answer, but useless


def _close_truncated(span: str, why: _Attempts) -> tuple[Any, list[str]] | object | None:
    """Close an answer that was cut off, if what remains is a sensible prefix.

    Sensible means Python's decoder read everything up to the last, unfinished token
    (a string, number or literal that was being written, or a dangling comma, colon or
    key). An error earlier in the text is a malformed answer, not a truncated one, and
    is reported as such rather than silently cut away. The unfinished token is dropped,
    never closed: a string cut mid-word ("…a 14-k") would otherwise be published as if
    whole, so a summary that was cut leaves nothing and is asked for again, shorter.
    """
    repairs: list[str] = []
    text = span
    cleaned = _remove_trailing_commas(text)
    if cleaned != text:
        text, repairs = cleaned, [REPAIR_TRAILING_COMMA]
    try:
        _loads(text)
        return None  # cannot happen for a span that never closes; be safe
    except _NonFinite as exc:
        why.non_finite = str(exc)
        return None
    except json.JSONDecodeError as exc:
        error = exc
    except (RecursionError, ValueError) as exc:
        why.note_invalid(_unparseable(exc), len(text))
        return None
    body = text.rstrip()
    at_end = error.pos >= len(body) or _PARTIAL_TOKEN.fullmatch(text, error.pos) is not None
    in_string = error.msg.startswith("Unterminated string")
    if not (at_end or in_string):
        why.note_invalid(_decode_error(error), len(text))
        return None

    # Walk the text once, remembering places where a cut leaves a valid prefix once closed.
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (cut index, closers to append)
    inside = False
    escaped = False
    for i, ch in enumerate(text):
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
                cuts.append((i + 1, "".join(_CLOSER[b] for b in reversed(stack))))
            continue
        if ch == '"':
            inside = True
        elif ch in "{[":
            stack.append(ch)
            if len(stack) == 1:  # only the outermost: a nested {} or [] would stand for a lost item
                cuts.append((i + 1, _CLOSER[ch]))
        elif ch in "}]":
            if stack:
                stack.pop()
            cuts.append((i + 1, "".join(_CLOSER[b] for b in reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(_CLOSER[b] for b in reversed(stack))))

    closers = "".join(_CLOSER[b] for b in reversed(stack))
    tries: list[str] = [] if inside else [body.rstrip(",").rstrip() + closers]
    for index, cut_closers in reversed(cuts[-_MAX_CUTS_TRIED:]):
        tries.append(text[:index].rstrip().rstrip(",").rstrip() + cut_closers)

    for candidate in tries:
        try:
            value = _loads(candidate)
            empty = not _has_leaf(value)
        except (json.JSONDecodeError, _NonFinite, RecursionError, ValueError):
            continue
        if empty:
            # `{"items": [` closes to valid JSON that says nothing: not a sensible prefix.
            why.truncated = "the answer was cut off before its first complete value"
            return _EMPTY_PREFIX
        return value, repairs + [REPAIR_TRUNCATED]
    why.truncated = "the answer was cut off and what remains cannot be closed into valid JSON"
    return None


def _has_leaf(value: Any) -> bool:
    """Whether a value holds any scalar: `{"items": []}` closed from a cut answer says nothing."""
    if isinstance(value, dict):
        return any(_has_leaf(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_leaf(v) for v in value)
    return True


def _strip_leading_think(text: str) -> tuple[str, bool]:
    """Remove leading reasoning: whole <think>…</think> blocks, then an unclosed leading <think> tag."""
    stripped = False
    while m := _THINK_BLOCK.match(text):
        text, stripped = text[m.end():], True
    if m := _THINK_OPEN.match(text):
        text, stripped = text[m.end():], True
    return text, stripped


def _outside_repairs(text: str, start: int, end: int) -> list[str]:
    """Name what surrounded the JSON: code fences, other prose, or both."""
    outside = text[:start] + " " + text[end:]
    repairs: list[str] = []
    if _FENCE.search(outside):
        repairs.append(REPAIR_FENCE)
        outside = _FENCE.sub(" ", outside)
    if outside.strip():
        repairs.append(REPAIR_PROSE)
    return repairs


@dataclass
class _Found:
    """The best candidate so far: where it lies in the text, its value and how it was repaired."""

    start: int
    end: int  # for a closed truncated answer: the end of the text
    value: Any
    repairs: list[str]  # trailing_comma / truncated


def _search(text: str, why: _Attempts) -> _Found | None:
    """The longest JSON object or array in `text` that parses (after repair), or None.

    Every `{`/`[` is a possible start, since we cannot know where strings are in the
    prose around the JSON; starts inside a found candidate are skipped, and a candidate
    closed after truncation runs to the end of the text, so it ends the search.
    """
    best: _Found | None = None
    skip_until = 0  # openers before this lie inside a candidate already judged
    budget = _MAX_SCAN_TOKENS
    truncated_tries = 0
    for opener in _OPENER.finditer(text):
        start = opener.start()
        if start < skip_until:
            continue
        if budget <= 0:
            break
        # A candidate that starts the way JSON does and still fails is a malformed answer: the
        # pieces inside it are fragments, not answers. One that starts like prose ("{curly") is
        # prose, and the JSON may be inside or after it.
        jsonish = _JSONISH.match(text, start) is not None
        scan = _scan(text, start)
        budget -= scan.tokens
        if scan.mismatched:
            if jsonish:
                why.note_invalid("invalid JSON: a closing bracket does not match its opening one",
                                 (scan.end or start) - start)
                skip_until = scan.end or start
            continue
        if scan.end is not None:
            parsed = _parse_whole(text[start:scan.end], why)
            if parsed is not None:
                if best is None or scan.end - start > best.end - best.start:
                    best = _Found(start, scan.end, parsed[0], parsed[1])
                skip_until = scan.end
            elif jsonish:
                skip_until = scan.end
            continue
        if truncated_tries >= _MAX_TRUNCATED_TRIES:
            continue
        truncated_tries += 1
        closed = _close_truncated(text[start:], why)
        if isinstance(closed, tuple):
            if best is None or len(text) - start > best.end - best.start:
                best = _Found(start, len(text.rstrip()), closed[0], closed[1])
            break  # it runs to the end of the text: every later opener lies inside it
        if closed is _EMPTY_PREFIX or jsonish:
            break
    return best


def parse_json_answer_ex(text: str) -> tuple[Any, list[str]]:
    """Parse a model's answer into a JSON object or array, repairing what can be repaired.

    Returns the value and the repairs applied, in the order applied (names: "think",
    "fence", "prose", "trailing_comma", "truncated"); an empty list means the answer
    was clean. Raises AnswerError with a short reason otherwise. Pure: no I/O.

    A clean answer is parsed as it stands first, so text that merely *looks* like
    damage inside a JSON string (a fence in Markdown, a </think>) is never touched.
    """
    if text is None or not text.strip():
        raise AnswerError("the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"the answer is too long ({len(text)} characters)")
    why = _Attempts()
    text = text.lstrip("\ufeff")

    # The whole text's own decode error is no explanation when the JSON sits inside prose,
    # so only its NaN verdict is kept; the candidates below say what is wrong.
    whole_why = _Attempts()
    whole = _parse_whole(text.strip(), whole_why)
    why.non_finite = whole_why.non_finite
    if whole is not None:
        value, repairs = whole
        if isinstance(value, (dict, list)):
            return value, repairs
        why.scalar = f"the answer is {_kind(value)}, not a JSON object"

    text, had_think = _strip_leading_think(text)
    if had_think and not text.strip():
        raise AnswerError("the answer is only a <think> block, with no JSON after it")
    found = _search(text, why)

    # An orphan </think> (the chat template opened the block in the prompt) ends reasoning that
    # may hold JSON-looking fragments. But a </think> inside the answer's own strings is data.
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        orphan = closes[-1]
        if found is None or found.end <= orphan.start():
            after = text[orphan.end():]
            found_after = _search(after, why) if after.strip() else None
            if found_after is not None:
                text, found, had_think = after, found_after, True
        elif found.start >= orphan.end():
            cut = orphan.end()
            text, found.start, found.end, had_think = text[cut:], found.start - cut, found.end - cut, True

    if found is None:
        raise AnswerError(why.reason(had_think))
    repairs = [REPAIR_THINK] if had_think else []
    return found.value, repairs + _outside_repairs(text, found.start, found.end) + found.repairs


def parse_json_answer(text: str) -> Any:
    """`parse_json_answer_ex` without the list of repairs."""
    return parse_json_answer_ex(text)[0]
