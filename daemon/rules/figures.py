"""Checking a figure: whether a number the model proposed is one its quote states as the quantity asked.

Pure, typed, no I/O. The model proposes a number (and says what it is of and which figure it is); the rules
verify it against the verbatim quote and the passage before it (its lead):
- stated_amounts: every amount of a quote, read in the brief's unit (stated.figure_reading: its unit, never
  inside code, a formula, a version, a date or a condition) and held to what the question asks
  (asked.py: which quantity, which figure of it: a default, an extreme, an example, another case);
- read_figure: a proposed number kept in the brief's unit or discarded with its true reason, and
  model_reading_conflict: what the model said of its figure, which can set it aside, never keep it;
- states_plainly: whether a quote states its figure plainly enough to settle an estimate alone.
contracts.py reads a claim's figures through the same rules; judge.py decides ranges and verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping

from .amounts import Amount, parse_amounts, parse_unit, SAME_FIGURE, SCALES, Unit
from .asked import (
    DEFAULT, EXAMPLE, MAXIMUM, MINIMUM, RESTATES, ROLE_WORDS, STOP_STEMS, another_quantity_asked, asked_roles,
    figure_roles, parallel_figures, question_words, range_high_end, role_conflict, subject_extremes, words_of,
)
from .layout import EXAMPLE_KINDS
from .decide import entry_of, bears_on
from .stated import NOT_THE_QUANTITY, OTHER_UNIT, Stated, figure_reading, is_range


def number_in_quote(value: float, quote: str, unit: str, rel_tol: float = SAME_FIGURE) -> bool:
    """True when some amount in `quote`, converted to `unit`, equals `value` within rel_tol.

    read_figure's first test; read_figure also converts a figure copied in another scale and
    says why a discarded one was discarded."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return any(r.value is not None and _close(value, r.value, rel_tol)
               for r in stated_amounts(quote, unit) if r.why is None)


NOT_IN_QUOTE = "not in its quote"

@dataclass(frozen=True)
class Figure:
    """A number the model proposed for an estimate, checked against its quote by code.

    Kept: `value` is the figure in the brief's unit (code's conversion of the amount the quote
    writes, whatever scale the model copied it in) and `reason` is None. Discarded: `value`
    is None and `reason` is the true one: NOT_IN_QUOTE when no amount in the quote is that
    number, or "in another unit (USD)" when the quote states it, but in a unit that does not
    convert to the brief's (no exchange rates offline; money is not a percent), or "not stated as
    the quantity (...)" when the quote has the number but not as the quantity asked (figure_reading:
    "make MAX_CONNECTIONS=5 check", a formula's "+ 6", "Linux 2.6"). `written` is
    the amount as the quote writes it ("US$0.43bn"), when one was found."""

    proposed: float
    value: float | None
    reason: str | None
    written: str | None = None


@lru_cache(maxsize=4096)
def states_plainly(quote: str, lead: str, asked: str, unit: str = "", value: float | None = None) -> bool:
    """Whether a quote states its figure (`value`, in `unit`) plainly for the question `asked`: the quote itself,
    read with no more than its entry (entry_of: a definition's term line), bears on the question
    (decide.bears_on), not only through the passage around it; and neither it nor the text it follows (`lead`)
    states another figure the question's rules would read as the answer (stated_amounts). Only such a reading
    may settle an estimate alone (judge.settled_by). Why: a quote kept because its passage is about the question
    may be another setting's entry there ("retrans_time ... Defaults to 1 second." in a page of the kernel's
    networking settings, read for how long the kernel waits for a final FIN); and an entry that states two
    figures of the quantity ("By default, zstd uses 128 MiB for decompression ..." then "... the default limit
    of 2 GiB" for dictionary training) leaves which one answers to the weighing. Kept, either moves a range as
    one source does; it must not be the range. (Cached: the range rule reads every reading each round.)"""
    if not bears_on(quote, [asked], context=entry_of(lead)):
        return False
    if unit and value is not None:
        for text, before in ((lead, ""), (quote, lead)):
            if any(r.value is not None and not _close(r.value, value, SAME_FIGURE)
                   for r in stated_amounts(text, unit, asked, before)):
                return False
    return True


def stated_amounts(quote: str, unit: str, asked: str = "", lead: str = "", roles_of: str | None = None,
                   unit_kind: str = "") -> list[Stated]:
    """Every amount in `quote`, with its value in `unit` or why it is not stated as that quantity
    (figure_reading; `lead`: the passage before the quote), nor, when the brief's question is given (`asked`),
    as the quantity it asks about (another_quantity_asked). The low end of a range shares the unit written
    once after its high end ("10-20 seconds", "between 10 and 20 seconds"). A figure in a part its document
    marks as an example or code (`unit_kind`: layout.EXAMPLE_KINDS) is an example's value unless its own words
    say it is the default: a sample configuration's values, a command's arguments."""
    amounts = parse_amounts(quote)
    read = [figure_reading(a, quote, unit, lead) for a in amounts]
    for i in range(len(read) - 1):
        low, high = read[i], read[i + 1]
        no_unit = low.why == f"{NOT_THE_QUANTITY} (no {unit} beside it)"
        if no_unit and high.why is None and high.value is not None and high.written \
                and is_range(quote, low.amount, high.amount):
            read[i] = replace(low, value=high.value * low.amount.value / high.written, why=None,
                              written=low.amount.value, end=high.end)
    wanted = asked_roles(asked if roles_of is None else roles_of) if asked else frozenset()
    quantity = (question_words(asked if roles_of is None else roles_of) - STOP_STEMS - ROLE_WORDS) if asked \
        else set()
    base = list(read)  # each figure as its unit reads it, before the question's rules
    for i, r in enumerate(read):
        if r.why is not None or r.value is None or not asked:
            continue
        high_end = range_high_end(quote, amounts, i)
        since = max((base[j].amount.span[1] for j in range(i) if base[j].value is not None), default=-1)
        subject = subject_extremes(f"{entry_of(lead)}\n{quote[:r.amount.span[0]]}" if since < 0
                                   else quote[since:r.amount.span[0]], quantity)
        roles = figure_roles(quote, amounts, i)
        if unit_kind in EXAMPLE_KINDS and DEFAULT not in roles:
            roles |= {EXAMPLE}
        why = another_quantity_asked(r.amount, quote, asked, r.end, roles_of or "") \
            or role_conflict(roles, wanted, high_end, subject)
        if why:
            read[i] = replace(r, value=None, why=why)
    if asked:
        claimed = question_words(asked) - question_words(roles_of) if roles_of is not None else set()
        for i, why in parallel_figures(quote, amounts, read, asked, wanted, claimed=claimed).items():
            read[i] = replace(read[i], value=None, why=why)
    for i in range(1, len(read)):  # "1048576 (~1 MB)": the same figure again, said of the same thing
        if read[i - 1].why is not None and read[i].why is None and \
                RESTATES.match(quote[read[i - 1].end if read[i - 1].end >= 0 else amounts[i - 1].span[1]:
                                      amounts[i].span[0]].replace("~", "")):
            read[i] = replace(read[i], value=None, why=read[i - 1].why)
    return read


def _unit_words(amount: Amount) -> str:
    """What unit an amount is written in, for a discard reason: "USD", "percent", "no unit"."""
    if amount.ratio is not None:
        return amount.ratio
    if amount.currency is not None:
        return amount.currency
    return f"{amount.scale_word}, no currency" if amount.scale_word else "no unit"


def _as_written(amount: Amount, unit: Unit) -> tuple[float, ...]:
    """The numbers a reader may copy for `amount`: as written (0.43 of "US$0.43bn"), in full
    (430,000,000), or in the unit's scale ignoring currency and ratio (430 for "million")."""
    full = amount.value * (SCALES[amount.scale_word] if amount.scale_word else 1.0)
    return (amount.value, full, full / unit.scale)


def _in_any_scale(amount: Amount, unit: Unit) -> tuple[float, ...]:
    """_as_written, and the full amount in every scale word (430 for "US$0.43bn" in millions):
    what makes a discarded figure one the quote states, in another unit."""
    full = amount.value * (SCALES[amount.scale_word] if amount.scale_word else 1.0)
    return _as_written(amount, unit) + tuple(full / s for s in SCALES.values())


def _close(a: float, b: float, rel_tol: float) -> bool:
    return math.isfinite(b) and math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12)


# What a model may say its figure is, beside the number (the evidence schema's "kind"): code checks it
MODEL_KINDS = (DEFAULT, MAXIMUM, MINIMUM, EXAMPLE, "range", "other_case", "value")


@dataclass(frozen=True)
class ModelReading:
    """What the model said of its figure beyond the number: its kind (MODEL_KINDS) and what it is of ("default
    maximum polling interval"). The model proposes; model_reading_conflict verifies."""

    kind: str | None = None
    of: str | None = None


def model_reading_conflict(said: ModelReading, quote: str, lead: str, asked: str) -> str | None:
    """Why the model's own reading of a figure the rules kept says it is not the answer, or None.

    The model's word can only set a figure aside, never keep one the rules refused: a figure it calls an
    example's, a range's end or another case's is no answer to a question that does not ask one; an extreme
    when the question asks the default, or the other extreme; and what it says the figure is of must be in the
    quote or the definition it leans on (`lead`), else the model is reading what the text does not say, and
    must share the question's words, else it is another quantity by the model's own account."""
    wanted = asked_roles(asked)
    kind = said.kind
    if kind in (EXAMPLE, "range", "other_case") and not (kind == EXAMPLE and EXAMPLE in wanted):
        what = {EXAMPLE: "an example's value", "range": "an end of a range", "other_case": "another case's value"}
        return f"{NOT_THE_QUANTITY} (the model reads it as {what[kind]})"
    extremes = wanted & {MINIMUM, MAXIMUM}
    if kind in (MINIMUM, MAXIMUM) and ((extremes and kind not in extremes) or (not extremes and DEFAULT in wanted)):
        return f"{NOT_THE_QUANTITY} (the model reads it as the {kind}, not the one asked)"
    if said.of:
        of = words_of(said.of) - STOP_STEMS - ROLE_WORDS
        if of and not of & words_of(f"{entry_of(lead)} {quote}"):
            return f"{NOT_THE_QUANTITY} (the model says it is of \"{said.of}\", which the quote does not say)"
        if of and not of & (question_words(asked) - STOP_STEMS):
            return f"{NOT_THE_QUANTITY} (the model says it is of \"{said.of}\", not what the question asks)"
    return None


def read_figure(proposed: float, quote: str, unit: str, rel_tol: float = SAME_FIGURE, asked: str = "",
                lead: str = "", said: ModelReading = ModelReading(), unit_kind: str = "") -> Figure:
    """Check a number the model proposed against its quote: keep it in the brief's unit or
    say truly why not. `asked`: the brief's question (another_quantity_asked); `lead`: the passage before the
    quote, where a definition's term may name the unit (figure_reading).

    In order, the first that holds:
    1. An amount in the quote, converted to `unit`, is the number: kept as is.
    2. The number is an amount of the quote as written, in another unit or scale of the same quantity
       (0.43 for "US$0.43bn" in USD million, 23 for "23 percent" in a fraction, 30 for "30s" in
       milliseconds, 48 for "48K" in bytes): kept, converted by code (430, 0.23, 30000, 49152). A figure is
       never discarded for its scale or its unit.
    3. The number is an amount of the quote, as written or in any scale word, that does not
       convert to `unit` (0.43 or 430 for "US$0.43bn" in a brief in percent): discarded,
       "in another unit (USD)".
    4. Otherwise: discarded, NOT_IN_QUOTE (the model may read, not invent).
    Steps 1 and 2 take only amounts the quote states as the quantity (figure_reading): an amount
    that is the number but is not ("make MAX_CONNECTIONS=5 check", "8MB" for file descriptors)
    is discarded with figure_reading's reason, before steps 3 and 4. What the model `said` of its figure
    can set a kept one aside (model_reading_conflict), never keep a refused one. `unit_kind`: what the document
    marks the quote's part as (stated_amounts).
    """
    figure = _read_figure(proposed, quote, unit, rel_tol, asked, lead, unit_kind)
    if figure.value is None or said == ModelReading():
        return figure
    why = model_reading_conflict(said, quote, lead, asked)
    return figure if why is None else replace(figure, value=None, reason=why)


def _read_figure(proposed: float, quote: str, unit: str, rel_tol: float, asked: str, lead: str,
                 unit_kind: str = "") -> Figure:
    if not isinstance(proposed, (int, float)) or isinstance(proposed, bool) or not math.isfinite(proposed):
        return Figure(proposed=proposed, value=None, reason=NOT_IN_QUOTE)
    target = parse_unit(unit)
    read = stated_amounts(quote, unit, asked, lead, unit_kind=unit_kind)
    stated = [r for r in read if r.why is None and r.value is not None and math.isfinite(r.value)]
    for r in stated:
        if _close(proposed, r.value or 0.0, rel_tol):
            return Figure(proposed=proposed, value=r.value, reason=None, written=r.amount.raw)
    for r in stated:
        copies = _as_written(r.amount, target) + ((r.written,) if r.written is not None else ())
        if any(_close(proposed, x, rel_tol) for x in copies):
            return Figure(proposed=proposed, value=r.value, reason=None, written=r.amount.raw)
    for r in read:
        if r.why is not None and any(_close(proposed, x, rel_tol) for x in _in_any_scale(r.amount, target)):
            return Figure(proposed=proposed, value=None, reason=r.why, written=r.amount.raw)
    for r in read:
        if r.value is None and any(_close(proposed, x, rel_tol) for x in _in_any_scale(r.amount, target)):
            return Figure(proposed=proposed, value=None, reason=f"{OTHER_UNIT} ({_unit_words(r.amount)})",
                          written=r.amount.raw)
    return Figure(proposed=proposed, value=None, reason=NOT_IN_QUOTE)


def discard_reason(proposed: float, quote: str, unit: str) -> str | None:
    """Why a proposed number is discarded (see read_figure), or None when it is kept."""
    return read_figure(proposed, quote, unit).reason


NO_USABLE_FIGURES = "no_usable_figures"


def discarded_text(discarded: Mapping[str, int]) -> str:
    """'7 figures discarded: 5 in another unit (USD), 2 not in its quote' (most common first)."""
    total = sum(discarded.values())
    if not total:
        return "no figure was discarded"
    parts = [f"{n} {reason}" for reason, n in sorted(discarded.items(), key=lambda kv: (-kv[1], kv[0])) if n]
    return f"{total} figure{'s' if total != 1 else ''} discarded: " + ", ".join(parts)


def no_usable_figures(kept: int, discarded: Mapping[str, int], unit: str) -> str | None:
    """The report's sentence when an estimate ends without one figure in the brief's unit, or None.

    `kept` counts the evidence items that carry a figure in `unit`; `discarded` counts the
    figures the model proposed that code discarded, by reason (read_figure). With none kept,
    the range cannot have moved, so no stop reason that speaks of the range (converged,
    target_reached) is true: the brief stops as NO_USABLE_FIGURES and says why in words.
    """
    if kept > 0:
        return None
    head = f"No usable figure in {unit} was found, so the range is the brief's initial range, unchanged"
    if not sum(discarded.values()):
        return f"{head}: no source stated a figure for it."
    text = discarded_text(discarded)
    return f"{head}. {text[0].upper()}{text[1:]}."
