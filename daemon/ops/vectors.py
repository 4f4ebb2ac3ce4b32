"""`briefd eval --vectors`: the rules scored on cases of real text, without running a brief.

Seed 2's policy helpers are "tested with shared parity vectors"; these are briefd's. A vector file
(`briefd-rule-vectors/1`, UTF-8 JSON) holds cases of three kinds, each a quote with its context and what a
careful reader concludes of it:

    estimate    a question, its unit, the figure a model proposes from the quote: kept with this value, or
                refused (a trap: an example's value, another setting's figure, a permitted range, a port)
    contract    a claim's contract (metric, comparator, target, unit): the quote supports it, contradicts it,
                or says nothing that decides it (neutral)
    relevance   a question: the quote bears on it, or not (navigation, a heading, a shared common word)

Each case is decided by exactly what a run does with a quote the model chose (research/evidence.py): the
quote filter (steps.skipped_quote: not a statement, not bearing on the question) and then the figure rule
(figures.read_figure for an estimate, contracts.quote_stance for a contract). A site checks the rules on its own
sentences the same way. Pure: the file is read and the result printed by cli.cmd_eval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.brief import validate_brief
from ..core.briefjson import BriefError
from ..core.errors import BriefdError
from ..rules import amounts, contracts, figures, judge, layout, steps
from ..sources.structure import plain_regions

FORMAT = "briefd-rule-vectors/1"
KINDS = ("estimate", "contract", "relevance")
STANCES = ("supports", "contradicts", "neutral")
READING_KEYS = ("unit", "of", "kind")  # what a model may say of its figure beyond the number (a case's "reading")
VECTOR_URL = "file:///vectors/case"  # a case without a url: a document of no man page's name
TOTAL_KEYS = ("cases", "right", "should_keep", "kept_right", "traps", "traps_kept", "contracts", "contracts_right",
              "contracts_wrong_way", "relevance", "relevance_right")


class VectorFileError(BriefdError, ValueError):
    """The vector file cannot be used: the message names the case, the key and the fix."""


@dataclass(frozen=True)
class Case:
    """One case as read from the file; `expect` is its kind's expected outcome."""

    id: str
    kind: str
    quote: str
    context: str
    url: str
    question: str = ""
    unit: str = ""
    proposed: float | None = None
    contract: contracts.Contract | None = None
    reading: Mapping[str, str] = field(default_factory=dict)
    expect_kept: bool | None = None
    expect_value: float | None = None
    expect_stance: str | None = None
    expect_bears_on: bool | None = None
    genre: str = ""


@dataclass(frozen=True)
class Outcome:
    """A case decided: right or not, what the rules gave (`got`), and the rule that decided."""

    id: str
    kind: str
    right: bool
    got: dict[str, Any]
    rule: str
    genre: str = ""


# ----------------------------------------------------------------------------------------- reading the file


def _fail(where: str, problem: str) -> VectorFileError:
    return VectorFileError(f"{where}: {problem}")


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"'{key}' must be a non-empty string, got {value!r:.60}")
    return value


def _number(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(where, f"'{key}' must be a finite number, got {value!r:.60}")
    return float(value)


def _expect(raw: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    expect = raw.get("expect")
    if not isinstance(expect, dict):
        raise _fail(where, "'expect' must be an object: {\"kept\": ...}, {\"stance\": ...} or {\"bears_on\": ...}")
    return expect


def _contract(raw: Mapping[str, Any], claim: str, where: str) -> contracts.Contract:
    """The case's contract, checked as a brief's hypothesis is (the same messages)."""
    spec = raw.get("contract")
    if not isinstance(spec, dict):
        raise _fail(where, "'contract' must be an object {metric, comparator, target, unit}")
    try:
        brief = validate_brief({"question": claim, "hypothesis": {"claim": claim, **spec}}, "vectors.json")
    except BriefError as exc:
        raise _fail(where, f"'contract' is not a valid contract: {exc}") from None
    contract = brief.hypothesis.contract if brief.hypothesis else None
    if contract is None:
        raise _fail(where, "'contract' needs a comparator, a target and a unit")
    return contract


def _reading(raw: Mapping[str, Any], where: str) -> dict[str, str]:
    reading = raw.get("reading", {})
    if not isinstance(reading, dict) or any(not isinstance(reading[k], str) for k in reading if k in READING_KEYS):
        raise _fail(where, f"'reading' must be an object of strings with keys among {', '.join(READING_KEYS)}")
    return {k: v for k, v in reading.items() if k in READING_KEYS}


def parse_case(raw: Any, n: int) -> Case:
    """One case of the file, checked; VectorFileError names the case, the key and the fix."""
    where = f"case {n}"
    if not isinstance(raw, dict):
        raise _fail(where, "each case must be an object with id, kind, quote and expect")
    cid = _text(raw, "id", where)
    where = f"case {n} ({cid})"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _fail(where, f"'kind' must be one of {', '.join(KINDS)}, got {kind!r:.40}")
    quote = _text(raw, "quote", where)
    context = _text(raw, "context", where, required=False)
    url = _text(raw, "url", where, required=(kind == "contract")) or VECTOR_URL
    source = raw.get("source")
    genre = str(source.get("genre", "")) if isinstance(source, dict) else ""
    expect = _expect(raw, where)
    base = {"id": cid, "kind": kind, "quote": quote, "context": context, "url": url, "genre": genre}
    if kind == "estimate":
        kept = expect.get("kept")
        if not isinstance(kept, bool):
            raise _fail(where, "'expect.kept' must be true or false")
        value = expect.get("value")
        if kept and value is None:
            raise _fail(where, "'expect.value' is required when expect.kept is true (the figure in 'unit')")
        return Case(**base, question=_text(raw, "question", where), unit=_text(raw, "unit", where),
                    proposed=_number(raw.get("proposed"), where, "proposed"), reading=_reading(raw, where),
                    expect_kept=kept, expect_value=_number(value, where, "expect.value") if kept else None)
    if kind == "contract":
        claim = _text(raw, "claim", where)
        stance = expect.get("stance")
        if stance not in STANCES:
            raise _fail(where, f"'expect.stance' must be one of {', '.join(STANCES)}, got {stance!r:.40}")
        return Case(**base, question=claim, contract=_contract(raw, claim, where), reading=_reading(raw, where),
                    expect_stance=stance)
    bears = expect.get("bears_on")
    if not isinstance(bears, bool):
        raise _fail(where, "'expect.bears_on' must be true or false")
    return Case(**base, question=_text(raw, "question", where), expect_bears_on=bears)


def parse_vectors(data: Any) -> tuple[str, list[Case]]:
    """(name, cases) of a vector file's JSON; VectorFileError for a file that cannot be used."""
    if not isinstance(data, dict):
        raise VectorFileError(f"a vector file is a JSON object {{\"format\": \"{FORMAT}\", \"name\", \"cases\"}}")
    if data.get("format") != FORMAT:
        raise VectorFileError(f"'format' must be \"{FORMAT}\", got {data.get('format')!r:.40}")
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise VectorFileError("'cases' must be a non-empty list of cases")
    parsed = [parse_case(raw, n) for n, raw in enumerate(cases, start=1)]
    seen: set[str] = set()
    for case in parsed:
        if case.id in seen:
            raise VectorFileError(f"case {case.id}: 'id' is used twice; give each case its own id")
        seen.add(case.id)
    return str(data.get("name") or ""), parsed


# ----------------------------------------------------------------------------------------- deciding


def _title_and_passage(context: str) -> tuple[str, str]:
    """A case's context is its document's title on the first line, then the passage around the quote."""
    title, _, passage = context.partition("\n")
    return title.strip(), passage


def lead_of(case: Case) -> str:
    """The passage before the quote (where a definition's term may name its figure's unit), as a run has it."""
    _, passage = _title_and_passage(case.context)
    at = passage.find(case.quote)
    return passage[:at] if at > 0 else ""


def unit_kind_of(case: Case) -> str:
    """What the case's document marks its quote's part as, read as a run reads a plain-text document: its
    passage's section headings (structure.plain_regions; "" where the passage holds none, as most do)."""
    _, passage = _title_and_passage(case.context)
    at = passage.find(case.quote)
    return layout.kind_of(tuple(plain_regions(passage)), at, at + len(case.quote)) if at >= 0 else ""


def kept_quote(case: Case, about: Sequence[str]) -> str | None:
    """Why the run would not keep the case's quote (steps.skipped_quote), or None."""
    title, passage = _title_and_passage(case.context)
    skipped = steps.skipped_quote(case.quote, case.url, title, True, {}, about, (), context=passage,
                                  unit_kind=unit_kind_of(case))
    return None if skipped is None else str(skipped["reason"])


def decide_case(case: Case) -> Outcome:
    """What the rules make of one case, and whether that is what the case expects."""
    if case.kind == "relevance":
        reason = kept_quote(case, [case.question])
        bears = reason is None
        return Outcome(case.id, case.kind, bears == case.expect_bears_on, {"bears_on": bears},
                       reason or "bears on the question", case.genre)
    if case.kind == "contract":
        assert case.contract is not None
        reason = kept_quote(case, [case.question, case.contract.metric])
        if reason is not None:
            return Outcome(case.id, case.kind, case.expect_stance == "neutral", {"stance": "neutral"},
                           f"quote not kept: {reason}", case.genre)
        reading = contracts.quote_stance(case.contract, case.quote, case.url, lead_of(case), unit_kind_of(case))
        return Outcome(case.id, case.kind, reading.stance == case.expect_stance, {"stance": reading.stance},
                       reading.why, case.genre)
    assert case.proposed is not None
    reason = kept_quote(case, [case.question])
    if reason is not None:
        got: dict[str, Any] = {"kept": False, "value": None}
        return Outcome(case.id, case.kind, case.expect_kept is False, got, f"quote not kept: {reason}", case.genre)
    said = figures.ModelReading(kind=case.reading.get("kind"), of=case.reading.get("of"))
    figure = figures.read_figure(case.proposed, case.quote, case.unit, asked=case.question, lead=lead_of(case),
                                 said=said, unit_kind=unit_kind_of(case))
    kept = figure.value is not None
    got = {"kept": kept, "value": figure.value}
    if not case.expect_kept:
        right = not kept
    else:
        assert case.expect_value is not None
        right = kept and math.isclose(figure.value or 0.0, case.expect_value, rel_tol=amounts.SAME_FIGURE,
                                      abs_tol=1e-12)
    return Outcome(case.id, case.kind, right, got, figure.reason or "kept", case.genre)


def wrong_way(case: Case, outcome: Outcome) -> bool:
    """A contract decided against what the quote says: supports where it contradicts, or the reverse."""
    got = outcome.got.get("stance")
    return {got, case.expect_stance} == {"supports", "contradicts"}


def totals(cases: Sequence[Case], outcomes: Sequence[Outcome]) -> dict[str, int]:
    """The counts `--json` prints (TOTAL_KEYS)."""
    out = dict.fromkeys(TOTAL_KEYS, 0)
    for case, outcome in zip(cases, outcomes):
        out["cases"] += 1
        out["right"] += outcome.right
        if case.kind == "estimate":
            if case.expect_kept:
                out["should_keep"] += 1
                out["kept_right"] += outcome.right
            else:
                out["traps"] += 1
                out["traps_kept"] += bool(outcome.got.get("kept"))
        elif case.kind == "contract":
            out["contracts"] += 1
            out["contracts_right"] += outcome.right
            out["contracts_wrong_way"] += wrong_way(case, outcome)
        else:
            out["relevance"] += 1
            out["relevance_right"] += outcome.right
    return out


def score(name: str, cases: Sequence[Case]) -> dict[str, Any]:
    """The whole result, as `--json` prints it."""
    outcomes = [decide_case(case) for case in cases]
    return {"format": 1, "name": name,
            "cases": [{"id": o.id, "kind": o.kind, "right": o.right, "got": o.got, "rule": o.rule,
                       **({"genre": o.genre} if o.genre else {})} for o in outcomes],
            "totals": totals(cases, outcomes)}


def _share(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "0/0"


def table(result: Mapping[str, Any]) -> str:
    """The result for a reader: the wrong cases with the rule that decided, then the totals."""
    t = result["totals"]
    lines = [f"rule vectors: {result['name'] or '(unnamed)'}, {t['cases']} cases"]
    wrong = [c for c in result["cases"] if not c["right"]]
    if wrong:
        lines.append("wrong:")
        lines += [f"  {c['id']:<40} {c['kind']:<10} got {c['got']}: {c['rule']}" for c in wrong]
    lines += [
        f"right                                   {_share(t['right'], t['cases'])}",
        f"figures that state the quantity, kept   {_share(t['kept_right'], t['should_keep'])} (right value)",
        f"traps kept                              {_share(t['traps_kept'], t['traps'])}",
        f"contracts decided right                 {_share(t['contracts_right'], t['contracts'])}"
        f", the wrong way {t['contracts_wrong_way']}",
        f"relevance right                         {_share(t['relevance_right'], t['relevance'])}",
    ]
    return "\n".join(lines)
