"""JSON a user wrote (a brief, an eval set, a rule-vector file), read with its nesting bounded: the one rule.

Why a bound of briefd's own: Python's json recurses once per level, so a file nested some thousand levels deep
raises RecursionError (a traceback where the caller expected a message), and a value a few hundred levels deep
gets past json only to send the next recursive reader (json.dumps, a copy, a validator) towards the same limit,
wherever its stack happens to stand. No file briefd reads needs more than a few levels (a brief three, an eval
set seven), so MAX_DEPTH refuses anything deeper before json.loads runs, and says where: the first container
past the limit as a path ("briefs[0].brief.context[0]"), so that the caller names the case or the field.

The depth is measured on ijson's event stream (yajl, a C tokenizer with a stack of its own: no recursion), and
only when the text has more opening brackets than MAX_DEPTH: a flat file costs two counts. Text that is not
JSON is left to json.loads, whose message says where its syntax breaks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import ijson

from .errors import BriefdError

MAX_DEPTH = 32
"""The deepest nesting briefd reads: objects and arrays inside one another, the outermost counted as 1."""

KEY_SHOWN = 100  # a key in a path is cut to this many characters (a path is for a message, not a lookup)
PATH_SHOWN = 6  # a message shows this many steps of a too-deep path

_OPENS = frozenset({"start_map", "start_array"})
_CLOSES = frozenset({"end_map", "end_array"})


class NestedTooDeep(BriefdError, ValueError):
    """JSON nested deeper than MAX_DEPTH. `path`: the keys and indexes down to the first container past the
    limit; None when json itself gave up first (RecursionError: the caller's stack was already deep)."""

    def __init__(self, path: tuple[str | int, ...] | None) -> None:
        self.path = path
        # the path's first steps name the field or the case; the rest is the nesting itself
        shown = path_text(path[:PATH_SHOWN]) + ("..." if len(path or ()) > PATH_SHOWN else "") if path else "the top"
        where = f" at {shown}" if path is not None else ""
        super().__init__(f"nested more than {MAX_DEPTH} levels deep{where}")

    def item_of(self, key: str) -> int | None:
        """Which item (counted from 1) of the top-level list `key` holds the nesting ("briefs": the eval
        set's case), or None when that is not known or not where it is."""
        path = self.path or ()
        return path[1] + 1 if len(path) >= 2 and path[0] == key and isinstance(path[1], int) else None


def load_json(data: str | bytes, **hooks: Any) -> Any:
    """json.loads(data, **hooks), refusing nesting deeper than MAX_DEPTH (NestedTooDeep, with where).

    Bytes are decoded as json.loads decodes them (UTF-8, -16 or -32, detected); its ValueErrors
    (JSONDecodeError, UnicodeDecodeError) and the hooks' exceptions pass through unchanged."""
    text = data.decode(json.detect_encoding(data), "surrogatepass") if isinstance(data, bytes) else data
    if text.count("[") + text.count("{") > MAX_DEPTH:
        path = too_deep_at(text)
        if path is not None:
            raise NestedTooDeep(path)
    try:
        return json.loads(text, **hooks)
    except RecursionError:  # deep enough to pass the scan's notice only if the scan stopped at a syntax error
        raise NestedTooDeep(None) from None


def too_deep_at(text: str) -> tuple[str | int, ...] | None:
    """Where the first object or array past MAX_DEPTH begins, or None: none is, or the text stops being JSON
    before one does (json.loads then names the syntax error)."""
    path: list[str | int] = []   # one entry per open container: its current key, or its current item's index
    arrays: list[bool] = []      # per open container: an array (True) or an object
    try:
        for event, value in ijson.basic_parse(text.encode("utf-8", "surrogatepass"), use_float=True):
            if event == "map_key":
                path[-1] = value
                continue
            if event in _CLOSES:
                path.pop()
                arrays.pop()
                continue
            if arrays and arrays[-1]:  # a value begins inside an array: its next item (the first: -1 + 1)
                index = path[-1]
                assert isinstance(index, int)
                path[-1] = index + 1
            if event in _OPENS:
                if len(arrays) == MAX_DEPTH:
                    return tuple(path)
                arrays.append(event == "start_array")
                path.append(-1 if event == "start_array" else "")
    except (ijson.JSONError, ValueError, ArithmeticError):  # not JSON (or a number yajl refuses): json's to say
        return None
    return None


def path_text(path: Sequence[str | int]) -> str:
    """("search", "engines", 0) -> "search.engines[0]": the notation of briefd's messages about a field."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text = f"{text}[{part}]"
        else:
            key = part if len(part) <= KEY_SHOWN else part[:KEY_SHOWN] + "..."
            text = f"{text}.{key}" if text else key
    return text
