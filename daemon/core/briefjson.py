"""A brief's bytes read as strict JSON, and BriefError: what the inbox's file must be before its fields are checked.

Every failure is a whole-file BriefError that says where and how to fix it: the size cap
(MAX_BRIEF_BYTES), UTF-8 (a BOM allowed, UTF-16 and -32 named), JSON's syntax, a constant that is no
number (NaN, Infinity), a number too large for a float or with too many digits, nesting past
jsontext.MAX_DEPTH (the one bound, shared with eval and vector files), a key given twice, a lone
surrogate escape. What the fields of the decoded object must hold is brief.py's checker; both
describe a JSON value in their messages the same way (json_type, preview, describe).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from .errors import BriefdError
from .jsontext import MAX_DEPTH, NestedTooDeep, load_json, path_text
from .untrusted import LONE_SURROGATE

MAX_BRIEF_BYTES = 1 << 20  # 1 MiB: far above any real brief, far below trouble
# Python refuses to turn longer digit strings into int (CVE-2020-10735 guard).
MAX_INT_DIGITS = 4300
# Problems listed in BriefError.details["problems"]; a 1 MiB brief could hold 100,000.
MAX_LISTED_PROBLEMS = 20
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


# --------------------------------------------------------------------------- errors


def utf8_safe(text: str) -> str:
    """Replace lone surrogates so that an error can always be written as UTF-8."""
    return LONE_SURROGATE.sub("\ufffd", text)


def _clean_json(value: Any) -> Any:
    """`utf8_safe` on every string of a JSON-shaped value (keys too); anything else not JSON becomes its text."""
    if isinstance(value, str):
        return utf8_safe(value)
    if isinstance(value, dict):
        return {utf8_safe(str(k)): _clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return utf8_safe(str(value))


class BriefError(BriefdError, ValueError):
    """A brief that can't be used: which field (a JSON path, "" for the whole file), why, and the fix.

    `details` is JSON-serialisable and UTF-8-safe: it goes into outbox/<id>/error.json.
    """

    def __init__(self, field: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.field = utf8_safe(truncate(field, 300))  # a path 900 levels deep is no help past this
        self.message = utf8_safe(message)
        self.details: dict[str, Any] = _clean_json(details or {})
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass
class Problem:
    """One thing wrong with a brief, before it becomes a BriefError: the field's path, why and the fix, and
    the details error.json gets."""

    field: str
    message: str
    details: dict[str, Any]


class _Reject(Exception):
    """Raised inside json.loads hooks; becomes a whole-file BriefError."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class _DupDict(dict[str, Any]):
    """An object that had a key twice; found after parsing so that the error can name its path."""

    dups: list[str]


# --------------------------------------------------------------------------- reading bytes

def decode_json(data: bytes) -> Any:
    """Size cap, UTF-8 (BOM allowed), strict JSON: every failure a whole-file BriefError."""
    if len(data) > MAX_BRIEF_BYTES:
        raise too_large(len(data))
    text = _decode_utf8(data)
    if not text.strip():
        raise BriefError("", 'the brief is empty; write a JSON object such as {"question": "What ...?"}',
                         {"size": len(data)})
    duplicates: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = _pairs_hook(pairs)
        if isinstance(obj, _DupDict):
            duplicates.append(obj.dups[0])
        return obj

    try:
        value = load_json(
            text, object_pairs_hook=pairs_hook, parse_constant=_reject_constant,
            parse_float=_parse_float, parse_int=_parse_int,
        )
    except _Reject as exc:
        raise BriefError("", exc.message, exc.details) from None
    except json.JSONDecodeError as exc:
        raise BriefError(
            "", f"the brief is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
                f"fix the syntax there (common causes: a trailing comma, a missing comma or quote, "
                f"single quotes instead of double quotes)",
            {"line": exc.lineno, "column": exc.colno, "char_offset": exc.pos, "reason": exc.msg},
        ) from None
    except NestedTooDeep as exc:  # jsontext.MAX_DEPTH: the one bound, shared with eval and vector files
        raise BriefError(
            "", f"the brief is nested too deeply to read ({exc}); a brief is at most three levels deep "
                '(for example "search" → "engines" → a name), so remove the extra brackets',
            {"reason": "nesting", "limit": MAX_DEPTH, "at": path_text(exc.path) if exc.path is not None else None},
        ) from None
    except (ValueError, OverflowError) as exc:  # nothing else should reach here; stay a BriefError
        raise BriefError("", f"the brief could not be read as JSON ({type(exc).__name__}); "
                             f"check that it is plain JSON text", {"reason": type(exc).__name__}) from None
    # Only a \u escape can put a lone surrogate into valid UTF-8 text: skip the walk when there is none.
    if isinstance(value, dict) and (duplicates or _SURROGATE_ESCAPE.search(text)):
        problem = _first_structural_problem(value)
        if problem is not None:
            raise BriefError(problem.field, problem.message, problem.details)
    return value


def too_large(size: int | None) -> BriefError:
    """The error for a brief over MAX_BRIEF_BYTES, naming the file's real size.

    Shared with the inbox and `briefd submit`, which read at most MAX_BRIEF_BYTES + 1
    bytes of a file (a 10 GB drop must not be read into memory) and so know the size
    only from stat: the message must say 10,000,000,000 bytes, not the 1,048,577 it
    happened to read. None: no size to tell (/dev/zero, a pipe), only "more than".
    """
    shown = f"{size:,} bytes" if size is not None else f"more than {MAX_BRIEF_BYTES:,} bytes"
    return BriefError(
        "", f"the brief is too large: {shown}, and the limit is {MAX_BRIEF_BYTES:,} bytes "
            f"(1 MiB); shorten the context or split it into several briefs",
        {"size": size, "limit": MAX_BRIEF_BYTES},
    )


def _decode_utf8(data: bytes) -> str:
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise BriefError("", f"the brief is {name} text; save it as UTF-8 (JSON files must be UTF-8)",
                             {"encoding": name.lower()})
    skipped = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[skipped:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + skipped
        line = data.count(b"\n", 0, offset) + 1
        raise BriefError(
            "", f"the brief is not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset} (line {line}) "
                f"is not valid UTF-8; save the file as UTF-8",
            {"offset": offset, "line": line, "byte": f"0x{data[offset]:02x}"},
        ) from None


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    dups: dict[str, None] = {}  # ordered set: an object of 100,000 repeated keys stays linear
    for key, value in pairs:
        if key in obj:
            dups[key] = None
        obj[key] = value
    if not dups:
        return obj
    marked = _DupDict(obj)
    marked.dups = list(dups)[:MAX_LISTED_PROBLEMS]
    return marked


def _reject_constant(name: str) -> Any:
    raise _Reject(f"the brief contains {name}, which is not a JSON number; write a number or leave the field out",
                  {"constant": name})


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Reject(f"the number {truncate(text, 40)} is too large to use; write a smaller number",
                      {"number": truncate(text, 40)})
    return value


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Reject(f"the brief contains an integer with {digits:,} digits; numbers may have at most "
                      f"{MAX_INT_DIGITS:,} digits", {"digits": digits})
    return int(text)


def _first_structural_problem(value: Any) -> Problem | None:
    """A duplicate key or a lone-surrogate escape anywhere, in document order.

    Iterative, so depth can't hurt; paths are linked (parent, key) pairs turned
    into text only for the one problem reported, so width × depth can't either.
    """
    stack: list[tuple[Any, Any]] = [(None, value)]  # (link to the parent's path, node)
    while stack:
        link, node = stack.pop()
        if isinstance(node, str):
            if LONE_SURROGATE.search(node):
                path = _path_text(link)
                where = truncate(path, 100) or "the brief"
                return Problem(path, f"{where} contains a \\u escape of half a character (a lone surrogate), "
                                      f"which is not valid Unicode; remove it or escape the whole character",
                                {"reason": "lone surrogate"})
        elif isinstance(node, dict):
            if isinstance(node, _DupDict):
                key = node.dups[0]
                where = truncate(_path_text(link), 100) or "the brief"
                return Problem(_path_text((link, key)), f"the key '{quoted_key(key)}' appears more than once in "
                                                         f"{where}; keep one of them",
                                {"duplicate_keys": [truncate(k, 100) for k in node.dups]})
            for key in node:
                if LONE_SURROGATE.search(key):
                    where = truncate(_path_text(link), 100) or "the brief"
                    return Problem(_path_text((link, key)), f"a field name in {where} contains a \\u escape of "
                                                             f"half a character (a lone surrogate); rename it",
                                    {"reason": "lone surrogate"})
            stack.extend(((link, key), child) for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((link, i), node[i]) for i in range(len(node) - 1, -1, -1))
    return None


def _path_text(link: Any) -> str:
    """(((None, "search"), "engines"), 0) → "search.engines[0]"."""
    parts: list[str | int] = []
    while link is not None:
        link, key = link
        parts.append(key)
    return path_text(parts[::-1])


# --------------------------------------------------------------------------- describing a JSON value in a message


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type ("string", "array", "integer"), as a message says it."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def preview(value: Any) -> str:
    """A short JSON-ish rendering of any value, bounded in size and time (no recursion into containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        if value.bit_length() > 200:
            return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(truncate(value, 40), ensure_ascii=False)
    if isinstance(value, list):
        return f"[...{len(value)} item{'s' if len(value) != 1 else ''}]" if value else "[]"
    if isinstance(value, dict):
        return "{...}" if value else "{}"
    return truncate(repr(value), 40)


def describe(value: Any) -> str:
    """A value and its JSON type, as a message quotes what the user wrote: '"three" (string)'."""
    return f"{preview(value)} ({json_type(value)})"


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with "..." when cut: a message stays readable whatever the input."""
    return text if len(text) <= limit else text[:limit] + "..."


def quoted_key(key: str) -> str:
    """A field name as it can be shown inside quotes in a message: escaped, bounded."""
    return json.dumps(truncate(key, 60), ensure_ascii=False)[1:-1]
