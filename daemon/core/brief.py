"""A brief: the JSON file a user drops into the inbox, read into a typed, normalised value.

Why a hand-written validator next to brief.schema.json: a JSON Schema validator
reports "'three' is not of type 'integer'", while a user needs "max_rounds must be
an integer from 1 to 10, got "three" (string)" and, for a typo, the field they
meant. The schema is the published description (`briefd schema`); this module
is what briefd runs. tests/core/test_brief.py checks, with `jsonschema`, that the two
accept and reject the same briefs. The bytes' rules (size, UTF-8, strict JSON) and
BriefError itself are briefjson.py's; this module checks the decoded value's fields.

Everything a surprising input can do ends as `BriefError`, never another
exception (an input that surprises is an answer, not a crash): the inbox turns it into
outbox/<id>/error.json and keeps the bytes, so a brief that crashed the parser
would be a brief lost.

Decision: a brief may carry an `estimate` or a `hypothesis`, not both. The two
ask the model for different labels on every piece of evidence (an impact on the
range vs a stance on the claim) and stop on different rules (progress score vs
gaps/verdict); a small local model asked for both at once does both badly, and
the report's evidence has one "stance or impact" per item. Refusing both now and
allowing it later breaks no one's brief; the reverse would.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath
from typing import Any, Callable, Literal, TypeGuard, TypeVar

from ..rules.contracts import COMPARATORS, Contract
from ..rules.numbers import finite, number_text
from .schedule import DURATION_EXAMPLE, EVERY_EXAMPLE, ScheduleError, format_duration, parse_duration, parse_every
from .briefjson import (
    MAX_LISTED_PROBLEMS, BriefError, Problem, decode_json, describe, json_type, preview, quoted_key, truncate,
)
from .jsontext import KEY_SHOWN

QUESTION_MAX_CHARS = 2000
CONTEXT_MAX_CHARS = 20000
CLAIM_MAX_CHARS = 2000
UNIT_MAX_CHARS = 100
ID_MAX_CHARS = 100
ROUNDS_RANGE = (1, 10)
SEARCHES_RANGE = (1, 8)
BUDGET_MINIMUMS = {"llm_tokens": 1000, "seconds": 10, "pages": 1}
# The largest integer every JSON reader (JavaScript included) and SQLite keep exactly.
SAFE_INT_MAX = 2**53 - 1
Depth = Literal["quick", "standard", "deep"]
Format = Literal["json", "md", "html"]
DEPTH_PRESETS: dict[Depth, tuple[int, int]] = {"quick": (2, 2), "standard": (3, 3), "deep": (6, 4)}
DEFAULT_DEPTH: Depth = "standard"
FORMATS: tuple[Format, ...] = ("json", "md", "html")  # also the canonical order of Brief.formats
SourceKind = Literal["web", "library", "archives"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("web", "library", "archives")  # canonical order of Brief.sources
DEFAULT_FORMATS: tuple[Format, ...] = ("json", "md")
TIME_RANGES = ("day", "week", "month", "year")
# Every number of an estimate lies within +-ESTIMATE_MAX_ABS. Why 1e15: about ten times world
# GDP in USD, so any real quantity fits with a sensible unit ("USD trillion", "TB"); under
# 2**53, so whole numbers stay exact in floats, SQLite and JavaScript; and far enough from
# the float limit (1.8e308) that widths, centres and ratios of ranges never overflow.
ESTIMATE_MAX_ABS = 1e15
# The narrowest width briefd tells apart, relative to the range's size (and absolute below
# 1): amounts read from pages keep 12 significant digits (amounts.tidy), so 1e-9 leaves a
# thousand steps of room, and a width of at least 1e-9 never underflows to 0 (5e-324 did).
ESTIMATE_RESOLUTION = 1e-9

# One of the options `_Parser.choice` was given: a Literal of them keeps its type.
_Option = TypeVar("_Option", bound=str)

TOP_FIELDS = (
    "question", "id", "context", "estimate", "hypothesis", "depth", "max_rounds",
    "max_searches_per_round", "budget", "search", "fetch_pages", "formats", "sources",
    "follows", "focus", "every", "max_age",
)
FOCUS_MAX_CHARS = 2_000
ESTIMATE_FIELDS = ("unit", "low", "high", "target_low", "target_high", "target_width")
HYPOTHESIS_FIELDS = ("claim", "metric", "comparator", "target", "unit")
# A contract is these three together (metric, a description, is optional but needs them).
CONTRACT_FIELDS = ("comparator", "target", "unit")
METRIC_MAX_CHARS = 200
# How people write comparators that are not briefd's: the error suggests briefd's spelling.
_COMPARATOR_ALIASES = {
    "=<": "<=", "=>": ">=", "\u2264": "<=", "\u2265": ">=", "=": "==", "===": "==", "eq": "==", "lt": "<",
    "le": "<=", "lte": "<=", "gt": ">", "ge": ">=", "gte": ">=", "range": "between", "in": "between",
    "below": "<", "under": "<", "less than": "<", "above": ">", "over": ">", "more than": ">",
    "at most": "<=", "at least": ">=", "equals": "==", "equal": "==",
}
BUDGET_FIELDS = ("llm_tokens", "seconds", "pages")
SEARCH_FIELDS = ("categories", "engines", "language", "time_range", "include_domains", "exclude_domains")

# The same patterns as brief.schema.json, matched whole (fullmatch), as ECMA-262 reads `^...$`.
# An id names a folder: it starts with a letter, digit or "_", so it is never hidden (".x"),
# never "." or "..", and never read as an option by a shell tool ("-rf").
ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
LANGUAGE_RE = re.compile(r"(all|auto|[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2})")
SEARCH_TERM_RE = re.compile(r"[^,]*[^,\s][^,]*")
DOMAIN_RE = re.compile(
    r"(?=.{1,254}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
_NON_BLANK = re.compile(r"\S")
_ID_BAD_RUN = re.compile(r"[^A-Za-z0-9._-]+")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Estimate:
    """A numeric range to narrow. The target is a range, a width, or absent (the loop's default)."""

    unit: str
    low: float
    high: float
    target_low: float | None = None
    target_high: float | None = None
    target_width: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"unit": self.unit, "low": self.low, "high": self.high}
        for name in ("target_low", "target_high", "target_width"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class Hypothesis:
    """A claim whose verdict briefd computes from evidence by rule.

    With a contract (comparator, target and unit; seed 2) the verdict is computed from the
    figures code reads in the quotes and is `deterministic`; without one it weighs the
    model's stance labels and is `advisory` (daemon/rules/judge.py). `target` is (low, high) for
    "between", a number otherwise."""

    claim: str
    metric: str | None = None
    comparator: str | None = None
    target: float | tuple[float, float] | None = None
    unit: str | None = None

    @property
    def contract(self) -> Contract | None:
        if self.comparator is None or self.target is None or self.unit is None:
            return None
        return Contract(comparator=self.comparator, target=self.target, unit=self.unit, metric=self.metric or "",
                        claim=self.claim)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"claim": self.claim}
        for name in ("metric", "comparator", "target", "unit"):
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Budget:
    """Hard budgets; None means no budget of that kind (the round caps still apply)."""

    llm_tokens: int | None = None
    seconds: int | None = None
    pages: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in BUDGET_FIELDS if getattr(self, name) is not None}


@dataclass(frozen=True)
class SearchOptions:
    """What goes to SearXNG, and the host filters applied to its results.

    Domains are lower-case without a trailing dot; a domain also covers its
    subdomains (the schema's description promises that to users).
    """

    categories: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    language: str | None = None
    time_range: str | None = None
    include_domains: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in SEARCH_FIELDS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                if value:
                    out[name] = list(value)
            elif value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class Brief:
    """A validated brief with every default resolved; `raw` is the object as decoded."""

    id: str
    question: str
    context: str = ""
    estimate: Estimate | None = None
    hypothesis: Hypothesis | None = None
    depth: Depth = "standard"
    max_rounds: int = DEPTH_PRESETS[DEFAULT_DEPTH][0]
    max_searches_per_round: int = DEPTH_PRESETS[DEFAULT_DEPTH][1]
    budget: Budget = field(default_factory=Budget)
    search: SearchOptions = field(default_factory=SearchOptions)
    fetch_pages: bool = True
    formats: tuple[Format, ...] = DEFAULT_FORMATS
    sources: tuple[SourceKind, ...] | None = None  # None: every source this daemon has (daemon.sources)
    follows: str | None = None  # an earlier brief's id: this one starts from its evidence, range and gaps
    focus: str = ""  # what a follow-up narrows to (its queries and gaps aim there)
    every: str | None = None  # asked again on this schedule (daemon.schedule.parse_every)
    max_age: float | None = None  # seconds a page read earlier is trusted without checking it; None: the setting
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The normalised brief: valid against the schema, and parse_brief of it gives this Brief back."""
        out: dict[str, Any] = {"id": self.id, "question": self.question, "context": self.context}
        if self.estimate is not None:
            out["estimate"] = self.estimate.to_json()
        if self.hypothesis is not None:
            out["hypothesis"] = self.hypothesis.to_json()
        out.update(
            depth=self.depth,
            max_rounds=self.max_rounds,
            max_searches_per_round=self.max_searches_per_round,
            budget=self.budget.to_json(),
            search=self.search.to_json(),
            fetch_pages=self.fetch_pages,
            formats=list(self.formats),
        )
        if self.sources is not None:
            out["sources"] = list(self.sources)
        if self.follows is not None:
            out["follows"] = self.follows
        if self.focus:
            out["focus"] = self.focus
        if self.every is not None:
            out["every"] = self.every
        if self.max_age is not None:
            out["max_age"] = format_duration(self.max_age)
        return out


# --------------------------------------------------------------------------- reading a brief


def parse_brief(data: bytes, source_name: str) -> Brief:
    """Bytes as dropped into the inbox → Brief, or BriefError naming the field, the expectation and the fix.

    `source_name` is the file's name; its stem is the id when the brief has none.
    """
    value = decode_json(bytes(data))
    return validate_brief(value, source_name)


# --------------------------------------------------------------------------- validating the value


def validate_brief(value: Any, source_name: str) -> Brief:
    """A decoded JSON value → Brief; every problem found is listed, the first one is the message."""
    if not isinstance(value, dict):
        raise BriefError("", f'the brief must be a JSON object such as {{"question": "What ...?"}}, '
                             f"got {describe(value)}", {"expected": "object", "got": json_type(value)})
    check = _Checker()
    brief = check.brief(value, source_name)
    if check.problems:
        raise check.error()
    assert brief is not None
    return brief


class _Checker:
    """Collects problems so that a user fixes a brief in one go rather than one error per attempt."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.uncounted = 0  # problems past MAX_LISTED_PROBLEMS: counted, not kept

    @property
    def full(self) -> bool:
        return len(self.problems) >= MAX_LISTED_PROBLEMS

    def add(self, field: str, message: str, **details: Any) -> None:
        if self.full:
            self.uncounted += 1
        else:
            self.problems.append(Problem(field, message, details))

    def error(self) -> BriefError:
        first = self.problems[0]
        message = first.message
        details = dict(first.details)
        total = len(self.problems) + self.uncounted
        if total > 1:
            rest = self.problems[1:]
            names = ", ".join(f"'{p.field}'" for p in rest[:5]) + (", ..." if total > 6 else "")
            message += f" (and {total - 1} more problem{'s' if total > 2 else ''}: {names})"
            details["problems"] = [{"field": p.field, "message": p.message} for p in self.problems]
            details["problem_count"] = total
        return BriefError(first.field, message, details)

    # -- the brief

    def brief(self, obj: dict[str, Any], source_name: str) -> Brief | None:
        self.unknown_keys(obj, "", TOP_FIELDS, "the brief")
        question = self.text(obj, "question", "question", QUESTION_MAX_CHARS, required=True,
                             example='"question": "What is ...?"',
                             too_long_fix='move background into "context"')
        brief_id = self.brief_id(obj, source_name)
        context = self.text(obj, "context", "context", CONTEXT_MAX_CHARS, blank_ok=True,
                            too_long_fix="keep the background the planner needs and drop the rest")
        estimate = self.estimate(obj["estimate"]) if "estimate" in obj else None
        hypothesis = self.hypothesis(obj["hypothesis"]) if "hypothesis" in obj else None
        if "estimate" in obj and "hypothesis" in obj:
            self.add("hypothesis", "a brief may have an estimate or a hypothesis, not both; split it into two "
                                   'briefs, one with "estimate" and one with "hypothesis"',
                     expected="estimate or hypothesis")
        depth = self.choice(obj, "depth", "depth", tuple(DEPTH_PRESETS)) or DEFAULT_DEPTH
        preset_rounds, preset_searches = DEPTH_PRESETS[depth]
        rounds = self.integer(obj, "max_rounds", "max_rounds", *ROUNDS_RANGE)
        searches = self.integer(obj, "max_searches_per_round", "max_searches_per_round", *SEARCHES_RANGE)
        budget = self.budget(obj["budget"]) if "budget" in obj else Budget()
        search = self.search(obj["search"]) if "search" in obj else SearchOptions()
        fetch_pages = self.boolean(obj, "fetch_pages", "fetch_pages")
        formats = self.formats(obj["formats"]) if "formats" in obj else DEFAULT_FORMATS
        sources = self.sources(obj["sources"]) if "sources" in obj else None
        follows = self.follows(obj, brief_id)
        focus = self.text(obj, "focus", "focus", FOCUS_MAX_CHARS, example='"focus": "costs after 2024"',
                          too_long_fix="say in a sentence what the follow-up narrows to")
        every = self.schedule(obj, "every", parse_every, EVERY_EXAMPLE)
        max_age = self.schedule(obj, "max_age", parse_duration, DURATION_EXAMPLE)
        if focus is not None and follows is None and "follows" not in obj:
            self.add("focus", 'focus narrows a follow-up: add "follows": "<the earlier brief\'s id>", or move the '
                              'text into "context"', expected="focus together with follows")
        if self.problems or question is None or brief_id is None or budget is None or search is None \
                or formats is None or ("sources" in obj and sources is None):
            return None
        return Brief(
            id=brief_id, question=question, context=context or "", estimate=estimate, hypothesis=hypothesis,
            depth=depth,
            max_rounds=rounds if rounds is not None else preset_rounds,
            max_searches_per_round=searches if searches is not None else preset_searches,
            budget=budget, search=search, fetch_pages=True if fetch_pages is None else fetch_pages,
            formats=formats, sources=sources, follows=follows, focus=focus or "",
            every=every.text if every is not None else None, max_age=max_age, raw=obj,
        )

    def follows(self, obj: dict[str, Any], brief_id: str | None) -> str | None:
        """An earlier brief's id (whether it exists and finished is the store's to say: the inbox checks)."""
        if "follows" not in obj:
            return None
        value = obj["follows"]
        if not valid_id(value):
            self.add("follows", f"follows must be the id of an earlier brief (as in outbox/<id>/), got {describe(value)}; "
                                'for example "follows": "kestrel-cost"', expected=f"string matching ^{ID_RE.pattern}$",
                     got=preview(value))
            return None
        if value == brief_id:
            self.add("follows", f"a brief cannot follow itself (follows and id are both {value!r}); to ask the same "
                                f"brief again, submit it again with the same id: its report then says what changed",
                     expected="another brief's id")
            return None
        return value

    def schedule(self, obj: dict[str, Any], key: str, parse: Callable[[str], Any], example: str) -> Any:
        """`every` or `max_age`: text read by daemon.schedule (its message says what was expected)."""
        if key not in obj:
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.add(key, f"{key} must be a string, {example}; got {describe(value)}", expected="string",
                     got=preview(value))
            return None
        try:
            return parse(value)
        except ScheduleError as exc:
            self.add(key, f"{key}: {exc}", expected=example, got=preview(value))
            return None

    def brief_id(self, obj: dict[str, Any], source_name: str) -> str | None:
        if "id" not in obj:
            return id_from_filename(source_name)
        value = obj["id"]
        if valid_id(value):
            return value
        suggestion = _sanitize_id(value, value) if isinstance(value, str) else id_from_filename(source_name)
        self.add("id", f"id must be 1 to {ID_MAX_CHARS} characters from A-Z a-z 0-9 . _ - starting with a letter, "
                       f"digit or _ (no slashes, spaces or other characters, and not only dots; not starting with '.', "
                       f"which makes a hidden folder, or '-', which tools read as an option), got {describe(value)}; "
                       f'for example "{suggestion}", or leave id out to use the file name',
                 expected=f"string matching ^{ID_RE.pattern}$", got=preview(value), suggestion=suggestion)
        return None

    # -- nested objects

    def estimate(self, value: Any) -> Estimate | None:
        if not self.object(value, "estimate", 'like {"unit": "USD", "low": 1000, "high": 50000}'):
            return None
        before = len(self.problems)
        self.unknown_keys(value, "estimate", ESTIMATE_FIELDS, "estimate")
        unit = self.text(value, "unit", "estimate.unit", UNIT_MAX_CHARS, required=True,
                         example='"unit": "USD" (whatever low and high are measured in)')
        low = self.number(value, "low", "estimate.low", required=True, limit=ESTIMATE_MAX_ABS)
        high = self.number(value, "high", "estimate.high", required=True, limit=ESTIMATE_MAX_ABS)
        target_low = self.number(value, "target_low", "estimate.target_low", limit=ESTIMATE_MAX_ABS)
        target_high = self.number(value, "target_high", "estimate.target_high", limit=ESTIMATE_MAX_ABS)
        target_width = self.number(value, "target_width", "estimate.target_width", positive=True,
                                   limit=ESTIMATE_MAX_ABS)
        for given, needed in (("target_low", "target_high"), ("target_high", "target_low")):
            if given in value and needed not in value:
                self.add(f"estimate.{needed}", f"estimate.{needed} is required when estimate.{given} is given; "
                                               f"add it, or use target_width alone instead",
                         expected=f"{needed} with {given}")
        if "target_width" in value and ("target_low" in value or "target_high" in value):
            self.add("estimate.target_width", "estimate.target_width and estimate.target_low/target_high both set "
                                              "the target; keep one of the two ways",
                     expected="target_width or target_low/target_high")
        if low is not None and high is not None and low > high:
            self.add("estimate.low", f"estimate.low ({_number(low)}) is greater than estimate.high ({_number(high)}); "
                                     f"swap them so that low <= high", low=low, high=high)
        if target_low is not None and target_high is not None and target_low > target_high:
            self.add("estimate.target_low", f"estimate.target_low ({_number(target_low)}) is greater than "
                                            f"estimate.target_high ({_number(target_high)}); swap them so that "
                                            f"target_low <= target_high", target_low=target_low,
                     target_high=target_high)
        if len(self.problems) == before and low is not None and high is not None:
            for problem in estimate_range_problems(low, high, target_low, target_high, target_width):
                self.add(problem.field, problem.message, **problem.details)
        if len(self.problems) > before or unit is None or low is None or high is None:
            return None
        return Estimate(unit=unit, low=low, high=high, target_low=target_low, target_high=target_high,
                        target_width=target_width)

    def hypothesis(self, value: Any) -> Hypothesis | None:
        if not self.object(value, "hypothesis", 'like {"claim": "X causes Y"}'):
            return None
        self.unknown_keys(value, "hypothesis", HYPOTHESIS_FIELDS, "hypothesis")
        before = len(self.problems)
        claim = self.text(value, "claim", "hypothesis.claim", CLAIM_MAX_CHARS, required=True,
                          example='"claim": "X causes Y"', too_long_fix="state the claim in one sentence")
        metric = self.text(value, "metric", "hypothesis.metric", METRIC_MAX_CHARS,
                           example='"90th-percentile lead level"', too_long_fix="name the measured quantity briefly")
        comparator = self.comparator(value)
        unit = self.text(value, "unit", "hypothesis.unit", UNIT_MAX_CHARS, example='"ppb"')
        target = self.contract_target(value, comparator)
        given = [name for name in ("metric", *CONTRACT_FIELDS) if name in value]
        if given:
            for name in CONTRACT_FIELDS:
                if name not in value:
                    self.add(f"hypothesis.{name}",
                             f"hypothesis.{name} is required when hypothesis.{given[0]} is given: a contract needs "
                             f'comparator, target and unit together (e.g. "comparator": "<", "target": 5, '
                             f'"unit": "ppb"); add it, or remove {", ".join(given)} for a verdict from the '
                             f"model's reading of the quotes (advisory)", expected=f"{name} with {given[0]}")
        if len(self.problems) > before or claim is None:
            return None
        return Hypothesis(claim, metric=metric, comparator=comparator, target=target, unit=unit)

    def comparator(self, value: dict[str, Any]) -> str | None:
        raw = value.get("comparator")
        if "comparator" not in value or (isinstance(raw, str) and raw in COMPARATORS):
            return raw
        listed = ", ".join(f'"{c}"' for c in COMPARATORS)
        alias = _COMPARATOR_ALIASES.get(raw.strip().lower()) if isinstance(raw, str) else None
        hint = f'; did you mean "{alias}"?' if alias else _did_you_mean(raw, COMPARATORS)
        self.add("hypothesis.comparator", f"hypothesis.comparator must be one of {listed}, got {describe(raw)}{hint}",
                 expected=list(COMPARATORS), got=preview(raw))
        return None

    def contract_target(self, value: dict[str, Any], comparator: str | None) -> float | tuple[float, float] | None:
        """A number, or [low, high] (low <= high) when the comparator is "between"."""
        if "target" not in value:
            return None
        path, raw = "hypothesis.target", value["target"]
        if comparator == "between":
            if not isinstance(raw, list) or len(raw) != 2:
                self.add(path, f'{path} must be [low, high] (two numbers, low <= high) when hypothesis.comparator '
                               f'is "between", got {describe(raw)}; write e.g. [4, 6]',
                         expected="[low, high]", got=preview(raw))
                return None
            ends = [self.number({"v": v}, "v", f"{path}[{i}]", limit=ESTIMATE_MAX_ABS) for i, v in enumerate(raw)]
            low, high = ends
            if low is None or high is None:
                return None
            if low > high:
                self.add(f"{path}[0]", f"{path}[0] ({_number(low)}) is greater than {path}[1] ({_number(high)}); "
                                       f"swap them so that low <= high", low=low, high=high)
                return None
            return (low, high)
        if isinstance(raw, list) and comparator is not None:
            self.add(path, f'{path} must be a number when hypothesis.comparator is "{comparator}", got '
                           f'{describe(raw)}; use "comparator": "between" for a range [low, high]',
                     expected="number", got=preview(raw))
            return None
        return self.number(value, "target", path, limit=ESTIMATE_MAX_ABS)

    def budget(self, value: Any) -> Budget | None:
        if not self.object(value, "budget", 'like {"llm_tokens": 200000, "seconds": 1800, "pages": 40}'):
            return None
        before = len(self.problems)
        self.unknown_keys(value, "budget", BUDGET_FIELDS, "budget")
        found = {name: self.integer(value, name, f"budget.{name}", BUDGET_MINIMUMS[name], SAFE_INT_MAX)
                 for name in BUDGET_FIELDS}
        return None if len(self.problems) > before else Budget(**found)

    def search(self, value: Any) -> SearchOptions | None:
        if not self.object(value, "search", 'like {"language": "en", "time_range": "year"}'):
            return None
        before = len(self.problems)
        self.unknown_keys(value, "search", SEARCH_FIELDS, "search")
        categories = self.names(value, "categories", '"general"')
        engines = self.names(value, "engines", '"wikipedia"')
        language = None
        if "language" in value:
            lang = value["language"]
            if isinstance(lang, str) and LANGUAGE_RE.fullmatch(lang):
                language = lang
            else:
                self.add("search.language", f'search.language must be a language code like "en" or "en-US", '
                                            f'or "all", got {describe(lang)}',
                         expected="language code", got=preview(lang))
        time_range = self.choice(value, "time_range", "search.time_range", TIME_RANGES)
        include = self.domains(value, "include_domains")
        exclude = self.domains(value, "exclude_domains")
        if len(self.problems) > before:
            return None
        return SearchOptions(categories=categories, engines=engines, language=language, time_range=time_range,
                             include_domains=include, exclude_domains=exclude)

    def formats(self, value: Any) -> tuple[Format, ...] | None:
        seen = self.members(value, "formats", FORMATS, "report formats", allow_empty=True)
        if seen is None:
            return None
        chosen = {"json", *seen}
        return tuple(f for f in FORMATS if f in chosen)

    def sources(self, value: Any) -> tuple[SourceKind, ...] | None:
        seen = self.members(value, "sources", SOURCE_KINDS, "sources", allow_empty=False)
        if seen is None:
            return None
        return tuple(kind for kind in SOURCE_KINDS if kind in seen)

    def members(self, value: Any, path: str, options: tuple[_Option, ...], noun: str,
                allow_empty: bool) -> list[_Option] | None:
        """An array of distinct `options` (formats, sources): each problem named with its index."""
        words = ", ".join(f'"{o}"' for o in options)
        if not isinstance(value, list):
            hint = f'; write ["{value}"]' if isinstance(value, str) and value in options else ""
            self.add(path, f"{path} must be an array of {words}, got {describe(value)}{hint}",
                     expected="array", got=preview(value))
            return None
        if not value and not allow_empty:
            self.add(path, f"{path} is empty: name at least one of {words}, or leave {path} out to use every "
                           f"one configured", expected=list(options))
            return None
        before = len(self.problems)
        seen: list[_Option] = []
        for i, item in enumerate(value):
            if self.full and not (isinstance(item, str) and item in options and item not in seen):
                self.uncounted += 1
            elif not isinstance(item, str) or item not in options:
                self.add(f"{path}[{i}]", f"{path}[{i}] must be one of {words}, got "
                                         f"{describe(item)}{_did_you_mean(item, options)}",
                         expected=list(options), got=preview(item))
            elif item in seen:
                self.add(f"{path}[{i}]", f'{path} lists "{item}" more than once; list each of the {noun} once',
                         duplicate=item)
            else:
                seen.append(options[options.index(item)])
        if len(self.problems) > before:
            return None
        return seen

    # -- leaves

    def unknown_keys(self, obj: dict[str, Any], prefix: str, allowed: tuple[str, ...], where: str) -> None:
        for key in obj:
            if key in allowed:
                continue
            if self.full:  # a brief of 80,000 junk keys: count them, don't fuzzy-match each one
                self.uncounted += 1
                continue
            suggestion = _nearest(key, allowed)
            hint = (f"did you mean '{suggestion}'?" if suggestion
                    else f"remove it (the fields are: {', '.join(allowed)})")
            self.add(_join(prefix, key), f"'{quoted_key(key)}' is not a field of {where}; {hint}",
                     unknown=truncate(key, 100), suggestion=suggestion, allowed=list(allowed))

    def object(self, value: Any, path: str, example: str) -> bool:
        if isinstance(value, dict):
            return True
        self.add(path, f"{path} must be an object {example}, got {describe(value)}",
                 expected="object", got=preview(value))
        return False

    def text(self, obj: dict[str, Any], key: str, path: str, max_chars: int, *, required: bool = False,
             blank_ok: bool = False, example: str = "", too_long_fix: str = "shorten it") -> str | None:
        if key not in obj:
            if required:
                self.add(path, f"{path} is required: add {example}", expected="string")
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.add(path, f"{path} must be a string (text in double quotes), got {describe(value)}",
                     expected="string", got=preview(value))
            return None
        if not blank_ok and not _NON_BLANK.search(value):
            self.add(path, f"{path} must not be empty or blank; write {example or 'some text'}",
                     expected="non-blank string")
            return None
        if len(value) > max_chars:
            self.add(path, f"{path} is {len(value):,} characters, over the limit of {max_chars:,}; {too_long_fix}",
                     expected=f"at most {max_chars} characters", length=len(value))
            return None
        return value.strip()

    def integer(self, obj: dict[str, Any], key: str, path: str, low: int, high: int) -> int | None:
        if key not in obj:
            return None
        value = obj[key]
        expected = (f"an integer from {low} to {high}" if high < SAFE_INT_MAX else f"an integer of at least {low}")
        number = _as_integer(value)
        if number is None or not low <= number <= high:
            if number is not None and number > high and high == SAFE_INT_MAX:
                expected = f"an integer from {low} to {high}"
            self.add(path, f"{path} must be {expected}, got {describe(value)}",
                     expected=expected, got=preview(value))
            return None
        return number

    def number(self, obj: dict[str, Any], key: str, path: str, *, required: bool = False,
               positive: bool = False, limit: float | None = None) -> float | None:
        """A finite number (above 0 when `positive`, within +-`limit` when given), or a problem."""
        if key not in obj:
            if required:
                self.add(path, f'{path} is required: add "{key}": <number>', expected="number")
            return None
        value = obj[key]
        if limit is None:
            expected = "a number greater than 0" if positive else "a number (like 1500 or 2.5)"
        elif positive:
            expected = f"a number greater than 0 and at most {number_text(limit)}"
        else:
            expected = f"a number from {number_text(-limit)} to {number_text(limit)}"
        number = finite(value)
        raw = _as_number(value)
        nan = isinstance(raw, float) and math.isnan(raw)
        huge = limit is not None and raw is not None and not nan and abs(raw) > limit
        if number is None or (positive and number <= 0) or huge:
            fix = ('; write the range in a larger unit (for example "USD trillion" instead of "USD", '
                   '"TB" instead of "bytes")' if huge and limit is not None else "")
            self.add(path, f"{path} must be {expected}, got {describe(value)}{fix}",
                     expected=expected, got=preview(value))
            return None
        return number

    def boolean(self, obj: dict[str, Any], key: str, path: str) -> bool | None:
        if key not in obj:
            return None
        value = obj[key]
        if isinstance(value, bool):
            return value
        self.add(path, f"{path} must be true or false (without quotes), got {describe(value)}",
                 expected="boolean", got=preview(value))
        return None

    def choice(self, obj: dict[str, Any], key: str, path: str,
               options: tuple[_Option, ...]) -> _Option | None:
        if key not in obj:
            return None
        value = obj[key]
        for option in options:
            if isinstance(value, str) and value == option:
                return option  # the option, not the value: typed as one of `options`
        listed = ", ".join(f'"{o}"' for o in options)
        self.add(path, f"{path} must be one of {listed}, got {describe(value)}{_did_you_mean(value, options)}",
                 expected=list(options), got=preview(value))
        return None

    def search_list(self, obj: dict[str, Any], key: str, shape: str, expected: str) -> tuple[str, list[Any]]:
        """search.<key>'s path and its items: [] when it is absent, or (with a problem) not an array of
        `shape` ("names like [...]")."""
        path = f"search.{key}"
        value = obj.get(key, [])
        if isinstance(value, list):
            return path, value
        hint = f"; write [{json.dumps(value, ensure_ascii=False)}]" if isinstance(value, str) and len(value) < 60 else ""
        self.add(path, f"{path} must be an array of {shape}, got {describe(value)}{hint}",
                 expected=expected, got=preview(value))
        return path, []

    def names(self, obj: dict[str, Any], key: str, example: str) -> tuple[str, ...]:
        path, value = self.search_list(obj, key, f"names like [{example}]", "array of strings")
        out: dict[str, None] = {}  # ordered set: dedupe in linear time
        for i, item in enumerate(value):
            if isinstance(item, str) and SEARCH_TERM_RE.fullmatch(item):
                out[item.strip()] = None
            elif self.full:
                self.uncounted += 1
            else:
                self.add(f"{path}[{i}]", f"{path}[{i}] must be a non-blank name without commas (one name per "
                                         f"item), got {describe(item)}", expected="name", got=preview(item))
        return tuple(out)

    def domains(self, obj: dict[str, Any], key: str) -> tuple[str, ...]:
        path, value = self.search_list(obj, key, 'hostnames like ["example.org"]', "array of hostnames")
        out: dict[str, None] = {}  # ordered set: dedupe in linear time
        for i, item in enumerate(value):
            if isinstance(item, str) and DOMAIN_RE.fullmatch(item):
                out[item.lower().rstrip(".")] = None
                continue
            if self.full:
                self.uncounted += 1
                continue
            host = _host_of(item) if isinstance(item, str) else None
            fix = f'; write "{host}"' if host else ""
            if isinstance(item, str) and not item.isascii() and not host:
                fix = "; write the ASCII (xn--) form of the name"
            self.add(f"{path}[{i}]", f'{path}[{i}] must be a hostname like "example.org" (no scheme, port or '
                                     f"path), got {describe(item)}{fix}",
                     expected="hostname", got=preview(item), suggestion=host)
        return tuple(out)


# --------------------------------------------------------------------------- ids and the schema


def valid_id(brief_id: object) -> TypeGuard[str]:
    """The one id rule (ID_RE, as brief.schema.json says it): validation, the inbox and
    the outbox's path builder (outbox.safe_outdir) all ask this function."""
    return isinstance(brief_id, str) and ID_RE.fullmatch(brief_id) is not None


def id_from_filename(name: str) -> str:
    """The id a brief gets from its file name: the stem made safe for a folder name, never empty.

    Spaces and non-ASCII become "-", runs of "-" collapse, dots and dashes are
    trimmed from both ends (no hidden folders, no "..") and it is cut to 100.
    A name with nothing usable left gets "brief-<8 hex of sha256(name)>", stable
    for the same name.
    """
    base = re.split(r"[\\/]", name)[-1]
    return _sanitize_id(PurePosixPath(base).stem if base else "", name)


def _sanitize_id(text: str, seed: str) -> str:
    cleaned = re.sub(r"-{2,}", "-", _ID_BAD_RUN.sub("-", text)).strip(".-")
    cleaned = cleaned[:ID_MAX_CHARS].rstrip(".-")
    if cleaned:
        return cleaned
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()
    return f"brief-{digest[:8]}"


@functools.lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files(__package__ or "briefd.daemon.core").joinpath("brief.schema.json").read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The brief JSON Schema (draft 2020-12) shipped with the package; a fresh dict each call."""
    schema: dict[str, Any] = json.loads(_schema_text())  # the shipped file is one JSON object
    return schema


# --------------------------------------------------------------------------- small helpers


def _as_integer(value: Any) -> int | None:
    """JSON Schema's integer: any number with no fractional part (3.0 counts), never a boolean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def estimate_range_problems(low: float, high: float, target_low: float | None = None,
                            target_high: float | None = None,
                            target_width: float | None = None) -> list[Problem]:
    """The rules on an estimate's range that JSON Schema cannot state, as problems with their fix.

    low == high (a point, which the contract allows: there is nothing to narrow, the brief only
    gathers evidence), or low < high by at least estimate_min_width (a range too narrow to tell
    its ends apart cannot be narrowed, and 5e-324..1e-323 divided by zero in the progress score); a
    target_width no finer than that and narrower than the range; a target band inside the
    range and narrower than it. `low <= high` and `target_low <= target_high` are checked by the caller first.
    """
    problems: list[Problem] = []
    width = high - low
    least = estimate_min_width(low, high)
    if 0 < width < least:
        problems.append(Problem(
            "estimate.high",
            f"estimate.high ({_number(high)}) must be above estimate.low ({_number(low)}) "
            f"by at least {number_text(least)}, "
            f"the narrowest range briefd tells apart at this size; widen the range, or write it in a smaller "
            f'unit (for example "USD thousand" instead of "USD million", "ppm" instead of a fraction)',
            {"low": low, "high": high, "min_width": least}))
        return problems
    if target_width is not None and target_width < least:
        problems.append(Problem(
            "estimate.target_width",
            f"estimate.target_width ({_number(target_width)}) is below {number_text(least)}, "
            f"the narrowest width briefd tells "
            f"apart for a range of this size; give a target_width of at least {number_text(least)}",
            {"target_width": target_width, "min_width": least}))
    elif target_width is not None and target_width >= width:
        problems.append(Problem(
            "estimate.target_width",
            f"estimate.target_width ({_number(target_width)}) is not narrower than the range itself "
            f"(high - low = {number_text(width)}), so there is nothing to narrow; "
            f"give a target_width below {number_text(width)}, "
            f"or leave it out",
            {"target_width": target_width, "width": width}))
    for name, value, outside in (("target_low", target_low, target_low is not None and target_low < low),
                                 ("target_high", target_high, target_high is not None and target_high > high)):
        if outside and value is not None:
            end, word, bound = ("low", "below", low) if name == "target_low" else ("high", "above", high)
            problems.append(Problem(
                f"estimate.{name}",
                f"estimate.{name} ({_number(value)}) is {word} estimate.{end} ({_number(bound)}); the target "
                f"band lies inside the range: move estimate.{name} inside it, or widen the range",
                {name: value, end: bound}))
    if not problems and target_low is not None and target_high is not None and target_high - target_low >= width:
        problems.append(Problem(
            "estimate.target_low",
            f"the target band estimate.target_low..target_high ({_number(target_low)}..{_number(target_high)}) "
            f"is the whole range, so there is nothing to narrow; give a narrower band inside it, or leave the "
            f"target out", {"target_low": target_low, "target_high": target_high}))
    return problems


def estimate_min_width(low: float, high: float) -> float:
    """The narrowest range (and target_width) briefd accepts around low..high: ESTIMATE_RESOLUTION
    of the range's largest magnitude, and never below ESTIMATE_RESOLUTION itself."""
    return ESTIMATE_RESOLUTION * max(1.0, abs(low), abs(high))


def _as_number(value: Any) -> int | float | None:
    """A JSON number of any size (an int past the float range included), never a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _number(value: float) -> str:
    """A number the user wrote, echoed exactly in a message (two close ends must read apart)."""
    return number_text(value, exact=True)



def _join(prefix: str, key: str) -> str:
    key = truncate(key, KEY_SHOWN)
    return f"{prefix}.{key}" if prefix else key


def _nearest(word: str, options: tuple[str, ...]) -> str | None:
    """The valid name a typo most likely meant ("qestion" → "question"), or None."""
    if len(word) > 100:
        return None
    lowered = {o.lower(): o for o in options}
    probe = word.lower().replace("-", "_").replace(" ", "_")
    if probe in lowered:
        return lowered[probe]
    found = difflib.get_close_matches(probe, list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def _did_you_mean(value: Any, options: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        return ""
    suggestion = _nearest(value.strip(), options)
    return f"; did you mean '{suggestion}'?" if suggestion else ""


def _host_of(text: str) -> str | None:
    """The hostname inside a URL-ish domain entry ("https://Example.org/x" → "example.org")."""
    from urllib.parse import urlsplit

    candidate = text.strip()
    try:
        parts = urlsplit(candidate if "://" in candidate else f"//{candidate}")
        host = parts.hostname
    except ValueError:
        return None
    if host and DOMAIN_RE.fullmatch(host) and host != text:
        return host.rstrip(".")
    return None
