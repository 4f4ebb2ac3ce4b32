"""`briefd eval`'s judging: is each brief's answer right, and where was a missed answer lost?

Pure and typed: an eval set (the file format agreed in EVAL_FORMAT.md, version 1) is parsed and
checked here, and each case is judged from what the store recorded of its run (store.evaluation's
RunTrace). daemon/ops/eval_run.py does the I/O (running the briefs, reading the store, printing).

Why stages: a wrong answer says little about what to fix. briefd records every search result, page,
passage shown to the model, quote and refusal, so the first stage that lost the answer can be named:

    search    no search result's URL matches the case's `where`, and no result's title or snippet
              matches its patterns (the document was never returned)
    read      returned, but never read (beyond the pages budget, not chosen, or its fetch failed)
    extract   read, but the stored extracted text lacks the answer
    shown     in the text, but no evidence prompt showed the model a passage stating it
    chosen    shown, but the model quoted none of it
    refused   the model chose it, but a rule dropped it (the rule the loop recorded is named)
    reported  kept as evidence, but the answer line, summary, range or verdict does not carry it

A later stage reached implies the earlier ones were (an answer quoted from a page the case's `where`
did not name was still searched, read and extracted): each stage counts as reached when it, or any
stage after it, holds the answer.

Patterns are the `regex` module's (re's syntax), searched under a time bound: a pattern that backtracks
without end on page text (nested quantifiers, `(\\w+\\s?)+$`) is stopped after PATTERN_TIMEOUT_S on one text,
and its case is "not judged", naming the pattern, while the other cases are judged (PatternTooSlow). Python's
re cannot be stopped: one such pattern hung `briefd eval` for good (issue 29).

What "reported" means by kind: a plain brief's answer line or summary matches a pattern; an estimate's
final range contains the true value and is narrower than the prior (the prior returned unchanged
answers nothing); a contract's verdict is the expected one.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

import regex

from ...store.evaluation import KeptQuote, QuoteRow, Refusal, ResultRow, RunTrace
from ..core.brief import Brief, parse_brief
from ..core.briefjson import BriefError
from ..rules.citations import cited_numbers
from ..rules import judge
from ..rules.numbers import number_text, span_text
from ..core.errors import BriefdError
from ..core.jsontext import NestedTooDeep, load_json

FORMAT_VERSION = 1
STAGES = ("search", "read", "extract", "shown", "chosen", "refused", "reported")
KINDS = ("plain", "estimate", "contract")
VERDICTS = ("supported", "refuted")
Kind = Literal["plain", "estimate", "contract"]

_TOP_KEYS = {"name", "briefs"}
_CASE_KEYS = {"brief", "expect", "where", "kind", "verified"}
_EXPECT_KEYS = {"patterns", "number", "verdict"}
_NUMBER_KEYS = {"value", "unit"}

PATTERN_TIMEOUT_S = 1.0
"""The longest one pattern may search one text. A pattern written for an answer sentence takes micro- to
milliseconds on a page; one that runs for a second is backtracking, and would run for hours."""

MAX_REPEAT_PRODUCT = 10_000
"""The most a pattern's counted repeats ({m}, {m,n}) may multiply to, counting each at its least (at least 1).
The regex module writes a counted repeat out when it compiles it: `a{1000000}` took half a second and
`a{4294967294}` all the machine's memory. An answer pattern needs a few digits' worth (`\\d{4}`, `.{0,300}`)."""

_COUNTED_REPEAT = re.compile(r"\{(\d+)(?:,\d*)?\}")  # {m}, {m,}, {m,n}: m is what is written out


class EvalFileError(BriefdError, ValueError):
    """The eval set cannot be used: the message names the case, the key and the fix."""


class PatternTooSlow(BriefdError, TimeoutError):
    """A case's pattern ran past its time bound on one text: the case cannot be judged (see the module's doc)."""

    def __init__(self, pattern: str, timeout_s: float, chars: int) -> None:
        self.pattern = pattern
        super().__init__(
            f"the pattern {pattern!r} ran longer than {timeout_s:g} s on one text ({chars:,} characters) and was "
            f"stopped: it backtracks (a repeat inside a repeat, such as (\\w+\\s?)+, tries every way to split the "
            f"text); write it without the nested repeat, e.g. the answer's words as they stand")


@dataclass(frozen=True)
class Truth:
    value: float
    unit: str


@dataclass(frozen=True)
class Case:
    """One brief of an eval set and what a right answer to it is."""

    id: str
    brief: dict[str, Any]          # the brief as written in the file (it is what is submitted)
    kind: Kind
    patterns: tuple[str, ...]
    truth: Truth | None = None
    verdict: str | None = None
    where: tuple[str, ...] = ()
    verified: str = ""
    timeout_s: float = PATTERN_TIMEOUT_S  # each pattern's time on one text (PatternTooSlow past it)

    def finds(self, text: str) -> bool:
        """Any of the case's patterns matches `text` (see matches); PatternTooSlow past the time bound."""
        return matches(self.patterns, text, self.timeout_s)


@dataclass(frozen=True)
class EvalSet:
    name: str
    cases: tuple[Case, ...]


# ---- the file ---------------------------------------------------------------------------------

def parse_eval_set(data: bytes | str, source: str = "the eval file") -> EvalSet:
    """The eval set in `data`, every case checked (its brief validated as `briefd submit` would),
    or EvalFileError naming what is wrong and how to fix it."""
    try:
        top = load_json(data)
    except NestedTooDeep as exc:  # the rule briefs have (core/jsontext.py), named by case
        item = exc.item_of("briefs")
        raise EvalFileError(f"{source}{f', case {item}' if item else ''}: {exc}; a case is a brief and its "
                            f"expectations, its brief at most three levels deep (\"search\" → \"engines\" → a "
                            f"name): remove the extra brackets") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EvalFileError(f"{source} is not UTF-8 JSON ({exc}); write it as in EVAL_FORMAT "
                            f"(an object with \"name\" and \"briefs\")") from exc
    if not isinstance(top, dict):
        raise EvalFileError(f"{source}: the top level must be an object with \"name\" and \"briefs\"")
    _no_unknown(top, _TOP_KEYS, source)
    cases_in = top.get("briefs")
    if not isinstance(cases_in, list) or not cases_in:
        raise EvalFileError(f"{source}: \"briefs\" must be a non-empty list of cases "
                            f"({{\"brief\": ..., \"expect\": ...}})")
    name = top.get("name", "")
    if not isinstance(name, str):
        raise EvalFileError(f"{source}: \"name\" must be a string (a label printed with the table)")
    cases = [parse_case(case, f"{source}, case {n}") for n, case in enumerate(cases_in, 1)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise EvalFileError(f"{source}: two cases have the id {case.id!r}; give each brief its own \"id\"")
        seen.add(case.id)
    return EvalSet(name=name or source, cases=tuple(cases))


def parse_case(raw: Any, where: str) -> Case:
    """One case, checked: its brief valid, its patterns compile, its truth fits its kind."""
    if not isinstance(raw, dict):
        raise EvalFileError(f"{where}: a case must be an object with \"brief\" and \"expect\"")
    _no_unknown(raw, _CASE_KEYS, where)
    brief_in = raw.get("brief")
    if not isinstance(brief_in, dict) or not isinstance(brief_in.get("id"), str):
        raise EvalFileError(f"{where}: \"brief\" must be a brief object with an \"id\" (unique in the file)")
    where = f"{where} ({brief_in['id']})"
    try:
        brief = parse_brief(json.dumps(brief_in).encode(), f"{brief_in['id']}.json")
    except BriefError as exc:
        raise EvalFileError(f"{where}: the brief is not valid: {exc}") from exc
    if brief.every is not None:  # eval runs each brief once: a series would go on asking in the store it used
        raise EvalFileError(f"{where}: the brief has \"every\": {brief.every!r}, but eval runs each brief once "
                            f"and never schedules one (a schedule would stay in the store and be asked again, "
                            f"for good); remove \"every\" from the case's brief")
    expect = raw.get("expect")
    if not isinstance(expect, dict):
        raise EvalFileError(f"{where}: \"expect\" must be an object with \"patterns\"")
    _no_unknown(expect, _EXPECT_KEYS, f"{where}, expect")
    kind = _kind(raw.get("kind"), brief, where)
    return Case(id=brief.id, brief=brief_in, kind=kind, patterns=_patterns(expect.get("patterns"), where),
                truth=_truth(expect.get("number"), kind, brief, where),
                verdict=_verdict(expect.get("verdict"), kind, where),
                where=_strings(raw.get("where", []), "where", where),
                verified=raw.get("verified", "") if isinstance(raw.get("verified", ""), str) else "")


def kind_of(brief: Brief) -> Kind:
    if brief.estimate is not None:
        return "estimate"
    return "contract" if brief.hypothesis is not None else "plain"


def _kind(given: Any, brief: Brief, where: str) -> Kind:
    derived = kind_of(brief)
    if given is None:
        return derived
    if given not in KINDS:
        raise EvalFileError(f"{where}: \"kind\" must be one of {', '.join(KINDS)} (or left out: it is derived)")
    if given != derived:
        raise EvalFileError(f"{where}: \"kind\" is {given!r} but the brief is {derived!r} "
                            f"(an estimate block makes an estimate, a hypothesis a contract); fix one of them")
    return derived


def _patterns(value: Any, where: str) -> tuple[str, ...]:
    patterns = _strings(value, "expect.patterns", where)
    if not patterns:
        raise EvalFileError(f"{where}: \"expect.patterns\" is required: a list of regexes matching the answer")
    for pattern in patterns:
        shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
        written_out = 1
        for least in _COUNTED_REPEAT.findall(pattern):
            written_out *= max(1, int(least))
            if written_out > MAX_REPEAT_PRODUCT:
                raise EvalFileError(f"{where}: the pattern {shown!r} repeats too much to compile: its counted "
                                    f"repeats ({{m}}, {{m,n}}) multiply to more than {MAX_REPEAT_PRODUCT:,}; "
                                    f"write a smaller count, or + or * for \"any number\"")
        try:
            compiled(pattern)
        except regex.error as exc:
            raise EvalFileError(f"{where}: the pattern {shown!r} is not a valid regex ({exc})") from exc
        except RecursionError:  # the pattern parser recurses once per group: thousands of nested groups
            raise EvalFileError(f"{where}: the pattern {shown!r} nests its groups too deeply to compile; "
                                f"write it with a few levels of parentheses") from None
    return patterns


def _expected(value: Any, kind: Kind, owner: Kind, missing: str, misplaced: str) -> bool:
    """Whether an expectation that belongs to briefs of kind `owner` is given: required of them (`missing` when
    absent), refused of any other kind (`misplaced`)."""
    if value is None:
        if kind == owner:
            raise EvalFileError(missing)
        return False
    if kind != owner:
        raise EvalFileError(misplaced)
    return True


def _truth(value: Any, kind: Kind, brief: Brief, where: str) -> Truth | None:
    if not _expected(value, kind, "estimate",
                     f"{where}: an estimate needs \"expect.number\": {{\"value\": ..., \"unit\": ...}}",
                     f"{where}: \"expect.number\" is for estimates; this brief has no estimate block"):
        return None
    if not isinstance(value, dict):
        raise EvalFileError(f"{where}: \"expect.number\" must be {{\"value\": number, \"unit\": string}}")
    _no_unknown(value, _NUMBER_KEYS, f"{where}, expect.number")
    number, unit = value.get("value"), value.get("unit")
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not isinstance(unit, str):
        raise EvalFileError(f"{where}: \"expect.number\" must be {{\"value\": number, \"unit\": string}}")
    assert brief.estimate is not None
    if unit.strip().casefold() != brief.estimate.unit.strip().casefold():
        raise EvalFileError(f"{where}: \"expect.number.unit\" is {unit!r} but the estimate's unit is "
                            f"{brief.estimate.unit!r}; state the true value in the estimate's unit")
    return Truth(float(number), unit)


def _verdict(value: Any, kind: Kind, where: str) -> str | None:
    if not _expected(value, kind, "contract",
                     f"{where}: a contract needs \"expect.verdict\": one of {', '.join(VERDICTS)}",
                     f"{where}: \"expect.verdict\" is for contracts; this brief has no hypothesis"):
        return None
    if value not in VERDICTS:
        raise EvalFileError(f"{where}: \"expect.verdict\" must be one of {', '.join(VERDICTS)}, not {value!r}")
    return str(value)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise EvalFileError(f"{where}: \"{key}\" must be a list of non-empty strings")
    return tuple(value)


def _no_unknown(obj: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in obj:
        if key not in known:
            raise EvalFileError(f"{where}: unknown key {key!r}; the keys are {', '.join(sorted(known))} "
                                f"(EVAL_FORMAT version {FORMAT_VERSION})")


# ---- matching ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> regex.Pattern[str]:
    """A pattern as eval searches it: the regex module (re's syntax, VERSION0), case-blind, and able to stop."""
    return regex.compile(pattern, regex.IGNORECASE)


def fold(text: str) -> str:
    """Whitespace folded to single spaces: a line break or a run of spaces inside the answer sentence
    (extraction keeps a page's layout) must not hide it from a pattern written with one space."""
    return " ".join(text.split())


def matches(patterns: Iterable[str], text: str, timeout_s: float = PATTERN_TIMEOUT_S) -> bool:
    """The answer is in `text` when any pattern matches it, case-insensitive, whitespace folded.
    PatternTooSlow when a pattern searches it for longer than `timeout_s`."""
    folded = fold(text)
    for pattern in patterns:
        try:
            if compiled(pattern).search(folded, timeout=timeout_s):
                return True
        except TimeoutError:
            raise PatternTooSlow(pattern, timeout_s, len(folded)) from None
    return False


def url_matches(where: Iterable[str], url: str) -> bool:
    """A URL is one of the case's answer documents when any `where` substring is in it (or in its
    percent-decoded form: a library path with spaces is a file:// URL with %20)."""
    decoded = unquote(url)
    return any(w in url or w in decoded for w in where)


def contains(final: tuple[float, float], truth: float) -> bool:
    """The truth inside a range, ends included."""
    low, high = final
    return low <= truth <= high


def width_ratio(final: tuple[float, float], prior: tuple[float, float]) -> float | None:
    """The final range's width as a share of the prior's (1.0: unchanged; None: the prior is a point)."""
    prior_width = prior[1] - prior[0]
    return (final[1] - final[0]) / prior_width if prior_width > 0 else None


def percent(ratio: float) -> str:
    """A width share in words: whole percent, but a collapse to a point keeps its digits (0.02%, not 0%)."""
    return f"{ratio:.0%}" if ratio == 0 or ratio >= 0.01 else f"{ratio:.2%}"


def invented_citations(summary: str, sources: Iterable[Mapping[str, Any]]) -> list[int]:
    """The [n] of the summary that no listed source resolves (docs/contract.md: every [n] resolves)."""
    known = {s.get("n") for s in sources}
    return [n for n in cited_numbers(summary) if n not in known]


# ---- the judgement ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What a run's report says, as eval reads it."""

    status: str
    answer_line: str
    summary: str
    prior: tuple[float, float] | None
    final: tuple[float, float] | None
    target: tuple[float | None, float | None, float | None]  # the brief's target: low, high, width
    verdict: str | None
    verdict_rule: str
    invented: tuple[int, ...]
    tokens: int
    wall_seconds: float
    replayed: int = 0  # model calls answered from the store's cache (usage: llm_cache_hits, replayed_failures)


def outcome_of(trace: RunTrace) -> Outcome:
    report = trace.report
    estimate = report.get("estimate") or {}
    verdict = report.get("verdict") or {}
    usage = report.get("usage") or {}
    answer = report.get("answer")
    line = answer.get("text") if isinstance(answer, dict) else answer
    # a miss stated as a miss ("No figure in connections was read ...; the range is your prior") is no
    # answer line, whatever words of the question or the prior it repeats
    missed = isinstance(answer, dict) and answer.get("found") is False
    return Outcome(
        status=str(report.get("status") or trace.state),
        answer_line="" if missed else " ".join(x for x in (str(line or ""), trace.answer_line) if x),
        summary=str(report.get("summary") or ""),
        prior=_range(estimate.get("initial")), final=_range(estimate.get("final")),
        target=_target(estimate.get("target")),
        verdict=verdict.get("value"), verdict_rule=str(verdict.get("rule") or ""),
        invented=tuple(invented_citations(str(report.get("summary") or ""), report.get("sources") or [])),
        tokens=int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0),
        wall_seconds=float(usage.get("wall_seconds") or 0.0),
        replayed=int(usage.get("llm_cache_hits") or 0) + int(usage.get("replayed_failures") or 0),
    )


def _target(value: Any) -> tuple[float | None, float | None, float | None]:
    given = value if isinstance(value, dict) else {}
    return tuple(float(given[k]) if isinstance(given.get(k), (int, float)) and not isinstance(given.get(k), bool)
                 else None for k in ("low", "high", "width"))  # type: ignore[return-value]


def _range(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, dict) or value.get("low") is None or value.get("high") is None:
        return None
    return float(value["low"]), float(value["high"])


@dataclass(frozen=True)
class Miss:
    """The first stage that lost the answer, the rule that refused it (stage `refused`), and in words why."""

    stage: str
    rule: str | None
    detail: str


@dataclass
class CaseResult:
    """One case judged: the stable shape of `briefd eval --json`'s `cases[]` (see eval_run.py)."""

    id: str
    kind: str
    status: str                       # the report's status (done, failed, cancelled), "not run", or "not judged"
                                      # (a pattern ran past its time bound: `detail` names it)
    run_id: int | None
    right: bool                       # by kind: plain in the answer line/summary, estimate in a narrowed
    kept_quote: bool                  # range, contract the expected verdict; kept_quote: in a kept quote
    answer_line: bool                 # a pattern matches the answer line or the summary; or, for an estimate or a
                                      # contract, its answer line (range, verdict) is RIGHT
    truth: float | None = None
    range: list[float] | None = None  # the final [low, high]
    truth_in_range: bool | None = None
    width_ratio: float | None = None  # final width / prior width
    verdict: str | None = None
    expected_verdict: str | None = None
    verdict_right: bool | None = None
    quotes: int = 0
    quotes_verbatim: int = 0
    invented_citations: list[int] = field(default_factory=list)
    tokens: int = 0
    wall_seconds: float = 0.0
    replayed: int = 0                 # model calls answered from the store's cache, not asked (eval --fresh: none)
    reached: dict[str, bool] = field(default_factory=dict)   # stage -> the answer got past it
    stage: str | None = None          # None: nothing lost
    rule: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


NOT_RUN, NOT_JUDGED = "not run", "not judged"  # a case's status when eval, not the run, has no verdict


def not_run(case: Case, why: str) -> CaseResult:
    """A case whose brief did not run (rejected, or still queued when a service stayed down)."""
    return CaseResult(id=case.id, kind=case.kind, status=NOT_RUN, run_id=None, right=False, kept_quote=False,
                      answer_line=False, truth=case.truth.value if case.truth else None,
                      expected_verdict=case.verdict, detail=why)


def not_judged(case: Case, trace: RunTrace, why: PatternTooSlow) -> CaseResult:
    """A case whose run cannot be judged: one of its patterns ran past its time bound (the reason names it)."""
    return CaseResult(id=case.id, kind=case.kind, status=NOT_JUDGED, run_id=trace.run_id, right=False,
                      kept_quote=False, answer_line=False, truth=case.truth.value if case.truth else None,
                      expected_verdict=case.verdict, detail=str(why))


def judge_case(case: Case, trace: RunTrace) -> CaseResult:
    """A case judged from its run's record; "not judged", with the pattern and why, when a pattern of the case
    runs past its time bound (the eval goes on with the other cases)."""
    try:
        return _judged(case, trace)
    except PatternTooSlow as exc:
        return not_judged(case, trace, exc)


def _judged(case: Case, trace: RunTrace) -> CaseResult:
    out = outcome_of(trace)
    result = CaseResult(
        id=case.id, kind=case.kind, status=out.status, run_id=trace.run_id, right=False,
        kept_quote=any(case.finds(q.quote) for q in trace.kept),
        answer_line=case.finds(out.answer_line) or case.finds(out.summary),
        quotes=len(trace.kept), quotes_verbatim=sum(q.verbatim for q in trace.kept),
        invented_citations=list(out.invented), tokens=out.tokens, wall_seconds=round(out.wall_seconds, 2),
        expected_verdict=case.verdict, verdict=out.verdict, replayed=out.replayed,
    )
    reached_target = False
    if case.truth is not None:
        result.truth = case.truth.value
        if out.final is not None:
            result.range = list(out.final)
            result.truth_in_range = contains(out.final, case.truth.value)
            result.width_ratio = width_ratio(out.final, out.prior) if out.prior else None
            reached_target = judge.target_met(out.final, *out.target)
    if case.verdict is not None:
        result.verdict_right = out.verdict == case.verdict
    result.right = reported(case, result, reached_target)
    # an estimate's answer line is its range and a contract's its verdict: the answer is in that line when the range
    # reached the target with the truth inside, or the verdict is the expected one (RIGHT), as in its words
    result.answer_line = result.answer_line or (case.kind != "plain" and result.right)
    result.reached = reached(case, trace, result.right)
    miss = first_miss(case, trace, result)
    if miss is not None:
        result.stage, result.rule, result.detail = miss.stage, miss.rule, miss.detail
        # a kept quote whose figure a rule would not read: the answer did not get past that rule
        result.reached[miss.stage] = False
    return result


def reported(case: Case, result: CaseResult, reached_target: bool = False) -> bool:
    """The answer reached the report, by the case's kind. An estimate is right when its range reached the brief's
    target (judge.target_met: inside the band, or no wider than the width) with the truth inside: a range at a
    fifth of the prior's width, fifty times the target's, holding the truth, answers nothing a user asked."""
    if case.kind == "estimate":
        return bool(result.truth_in_range) and reached_target
    if case.kind == "contract":
        return bool(result.verdict_right)
    return result.answer_line


def reached(case: Case, trace: RunTrace, right: bool) -> dict[str, bool]:
    """For each stage, whether the answer got past it (a later stage holding it implies the earlier)."""
    returned = bool(answer_results(case, trace))
    in_text = {url for url, text in trace.texts.items() if case.finds(text)}
    read = bool(in_text) or any(r.url in trace.read for r in answer_results(case, trace))
    shown = any(case.finds(q.text) for q in trace.shown)
    chosen = (any(case.finds(q.text) for q in trace.chosen)
              or any(case.finds(refused_quote(r, trace.shown)) for r in trace.refused))
    kept = any(case.finds(q.quote) for q in trace.kept)
    raw = [returned, read, bool(in_text), shown, chosen, kept]
    for i in range(len(raw) - 2, -1, -1):
        raw[i] = raw[i] or raw[i + 1]
    return dict(zip(STAGES, [*raw, right]))


NARROW = 0.1  # an estimate ending narrower than this share of its prior claims a precise answer

QUOTE_CUT = 200  # daemon/research/loop.py's evidence_skipped events carry a refused quote's first 200 characters
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def refused_quote(refusal: Refusal, shown: Iterable[QuoteRow]) -> str:
    """A refused quote as the model chose it. The loop's event keeps its first QUOTE_CUT characters, so a cut
    one is completed from the passage it was shown in, to the end of that sentence: an answer later in a long
    sentence is then still seen as chosen (and refused), not as never chosen."""
    if len(refusal.quote) < QUOTE_CUT:
        return refusal.quote
    for passage in shown:
        at = passage.text.find(refusal.quote) if passage.url == refusal.url else -1
        if at >= 0:
            end = _SENTENCE_END.search(passage.text, at + len(refusal.quote))
            return passage.text[at:end.end() if end else len(passage.text)]
    return refusal.quote


def answer_results(case: Case, trace: RunTrace) -> list[ResultRow]:
    """The search results that are the answer's: their URL is a `where`, or their text states it."""
    return [r for r in trace.results
            if url_matches(case.where, r.url) or case.finds(f"{r.title} {r.snippet}")]


def first_miss(case: Case, trace: RunTrace, result: CaseResult) -> Miss | None:
    """The first stage the answer did not get past, with the rule and the reason in words."""
    lost = next((stage for stage in STAGES if not result.reached[stage]), None)
    if lost is None:
        return None
    explain = _EXPLAIN[lost]
    return explain(case, trace, result)


def _search(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    asked = "; ".join(trace.queries[:6]) or "none"
    return Miss("search", None, f"no search result is an answer document ({', '.join(case.where) or 'no where'}) "
                                f"or states the answer; {len(trace.results)} results for the queries: {asked}")


def _read(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    hits = answer_results(case, trace)
    first = min(hits, key=lambda r: (r.rank, r.round))
    why = trace.fetch_errors.get(first.url)
    if why:
        how = f"its fetch failed: {why}"
    elif first.url in trace.unread_early:
        how = "fetched while the model planned, and no round chose it"
    elif not trace.fetch_pages:
        how = "its snippet was not among those read (fetch_pages is false)"
    else:
        how = "never read (not chosen within the pages budget)"
    return Miss("read", None, f"{first.url} returned at rank {first.rank} for {first.query!r} "
                              f"(round {first.round}); {how}")


def _extract(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    read = [r.url for r in answer_results(case, trace) if r.url in trace.read]
    url = read[0] if read else "the answer document"
    chars = len(trace.texts.get(url, ""))
    return Miss("extract", None, f"{url} was read ({chars} characters kept) but its stored text lacks the answer")


def _shown(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    urls = [url for url, text in trace.texts.items() if case.finds(text)]
    why = trace.distrusted.get(urls[0]) if urls else None
    if why:
        return Miss("shown", None, f"{urls[0]} states the answer but was distrusted ({why}): never shown")
    note = "" if trace.prompts_recorded else " (this run's prompts did not record their passages)"
    others = sum(q.url == urls[0] for q in trace.shown) if urls else 0
    why = (f"{others} other passage(s) of it were shown: the one stating it ranked below the prompt's room or "
           f"shares no word with the question or an open gap" if others else "no passage of it was shown")
    return Miss("shown", None, f"{urls[0] if urls else 'a page'} states the answer but no evidence prompt "
                               f"showed the model a passage stating it; {why}{note}")


def _chosen(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    shown = [q.url for q in trace.shown if case.finds(q.text)]
    return Miss("chosen", None, f"shown from {shown[0]}, but the model quoted none of it")


def _refused(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    for refusal in trace.refused:
        if case.finds(refused_quote(refusal, trace.shown)):
            return Miss("refused", refusal.rule, f"the model chose {refusal.quote[:120]!r} ({refusal.url}); "
                                                 f"dropped by the rule: {refusal.rule}")
    chosen = next(q for q in trace.chosen if case.finds(q.text))
    why = trace.distrusted.get(chosen.url)
    rule = f"page distrusted: {why}" if why else "dropped after it was kept"
    return Miss("refused", rule, f"the quote from {chosen.url} was kept, then dropped: {rule}")


def _reported(case: Case, trace: RunTrace, result: CaseResult) -> Miss:
    if case.kind != "plain":  # a figure the rules refused to read in a kept quote
        for refusal in trace.refused:
            if refusal.rule.startswith("number") and case.finds(refused_quote(refusal, trace.shown)):
                return Miss("refused", refusal.rule, f"the quote {refusal.quote[:120]!r} was kept, but its figure "
                                                     f"was not read: {refusal.rule}")
    if case.kind == "estimate":
        ended = span_text(result.range[0], result.range[1]) if result.range else "no range"
        width = f", {percent(result.width_ratio)} of the prior's width" if result.width_ratio is not None else ""
        read = sorted({_figure(q) for q in trace.kept if case.finds(q.quote) and q.low is not None})
        figures = f"the figure read from it: {', '.join(read)}" if read else "no figure was read from it"
        return Miss("reported", None, f"kept in a quote ({figures}), but the range ended {ended}{width} "
                                      f"(truth {'none' if result.truth is None else number_text(result.truth)})")
    if case.kind == "contract":
        rule = trace.report.get("verdict", {}).get("rule") if isinstance(trace.report.get("verdict"), dict) else ""
        return Miss("reported", None, f"kept in a quote, but the verdict is {result.verdict or 'none'} "
                                      f"(expected {case.verdict}){': ' + str(rule) if rule else ''}")
    return Miss("reported", None, "kept in a quote, but neither the answer line nor the summary states it")


def _figure(quote: KeptQuote) -> str:
    if quote.low is None:
        return "no figure"
    if quote.high is None or quote.high == quote.low:
        return number_text(quote.low)
    return span_text(quote.low, quote.high)


_EXPLAIN = {"search": _search, "read": _read, "extract": _extract, "shown": _shown, "chosen": _chosen,
            "refused": _refused, "reported": _reported}


# ---- totals -----------------------------------------------------------------------------------

def totals(results: list[CaseResult]) -> dict[str, Any]:
    """The set's totals: the stable shape of `briefd eval --json`'s `totals` (see eval_run.py)."""
    ran = [r for r in results if r.status != NOT_RUN]
    estimates = [r for r in results if r.kind == "estimate"]
    contracts = [r for r in results if r.kind == "contract"]
    return {
        "cases": len(results), "ran": len(ran), "right": sum(r.right for r in results),
        "kept_quote": sum(r.kept_quote for r in results), "answer_line": sum(r.answer_line for r in results),
        "shown": sum(r.reached.get("shown", False) for r in results),
        "estimates": len(estimates), "truth_in_range": sum(bool(r.truth_in_range) for r in estimates),
        # issue 21's bars: an estimate collapsed below a tenth of its prior's width without the truth inside,
        # and the verdicts whose deciding quote was kept (each of them must be right)
        "narrow_wrong": sum(r.width_ratio is not None and r.width_ratio < NARROW and not r.truth_in_range
                            for r in estimates),
        "contracts": len(contracts), "verdicts_right": sum(bool(r.verdict_right) for r in contracts),
        "contracts_kept": sum(r.kept_quote for r in contracts),
        "verdicts_kept_right": sum(r.kept_quote and bool(r.verdict_right) for r in contracts),
        "quotes": sum(r.quotes for r in results), "quotes_verbatim": sum(r.quotes_verbatim for r in results),
        "invented_citations": sum(len(r.invented_citations) for r in results),
        "tokens": sum(r.tokens for r in results), "wall_seconds": round(sum(r.wall_seconds for r in results), 2),
        "replayed": sum(r.replayed for r in results),
        "lost_at": {stage: sum(r.stage == stage for r in results) for stage in STAGES},
        "not_run": len(results) - len(ran),
        "not_judged": sum(r.status == NOT_JUDGED for r in results),
    }
