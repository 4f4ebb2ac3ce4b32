"""The decision core for estimates and verdicts: pure, typed, no I/O.

The model proposes labels and numbers; the rules here decide. Code, not the
model, reads amounts out of quotes and converts them to the brief's unit; a
number the model proposes that its quote does not state in that unit (or in
another scale of it), or does not state as the quantity asked (inside code, a
formula, a version, another unit's figure: figure_reading), is discarded with its
true reason (read_figure); a contract reads its figures by the same rule. The
estimate's range, its progress score, when to stop, which bound to research
next, and a hypothesis's verdict are all computed from the evidence by rules
written down in this file, so each can be checked with a table of cases.

Numbers used below (the worked examples are repeated as tests):
  CREDIBLE = 0.5    readings and stances below this confidence never move anything
  TRIM = 0.1        each bound trims the outer 10 % of credible weight
  PLAUSIBLE = 10    a positive estimate ignores lone readings 10x outside the brief's range
  CORROBORATION = 2   independent credible sources: only they narrow a bound to the evidence, and a
                      range meets its target only with that many inside it
  ONE_SOURCE_KEEPS = 0.05   one source moves a bound by its confidence, never all the way
  SUPPORT_NEEDED = 1.2, DOMINANCE = 2.0   the verdict rule's thresholds
  ONE_SOURCE_TIERS = ("regulator",)   with a contract, one such source decides alone where no
                                      credible quote disagrees (contract_verdict)
  MODEL_TIER_CEILING = "industry"   the highest tier the model's label alone gives a page

A hypothesis verdict is `deterministic` only when computed from a contract (contract_verdict:
figures read from the quotes against a target); from the model's stance labels it is
`advisory` (verdict).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from .decide import CODE_NAME, ENTRY_MAX_CHARS, content_words, leans_on_before
from .numbers import number_text

# ----------------------------------------------------------------- amounts

SCALES: dict[str, float] = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SCALE_WORDS: dict[str, str] = {
    "k": "thousand", "thousand": "thousand", "thousands": "thousand",
    "m": "million", "mn": "million", "mln": "million", "million": "million", "millions": "million",
    "b": "billion", "bn": "billion", "bln": "billion", "billion": "billion", "billions": "billion",
    "tn": "trillion", "trn": "trillion", "trillion": "trillion", "trillions": "trillion",
}
# "$" alone is read as US dollars: the commonest meaning, and no FX conversion happens anyway.
_SYMBOLS: dict[str, str] = {
    "US$": "USD", "A$": "AUD", "AU$": "AUD", "C$": "CAD", "CA$": "CAD", "NZ$": "NZD",
    "HK$": "HKD", "S$": "SGD", "$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR",
}
# Ratios: shares written per hundred, per thousand, per ten thousand, per million, per billion,
# or as the bare fraction. "23 percent" is 0.23 as a fraction: one quantity in another scale.
RATIOS: dict[str, float] = {
    "fraction": 1.0, "percent": 1e-2, "permille": 1e-3, "basis points": 1e-4, "ppm": 1e-6, "ppb": 1e-9,
}
# Bare "bp" is left out on purpose: "7 BP shares" is a company.
_RATIO_TEXT = (r"%|percent\b|per\s?cent\b|pct\b|‰|per\s?mille\b|basis\s+points?\b|"
               r"ppm\b|ppb\b|parts\s+per\s+million\b|parts\s+per\s+billion\b")


def _ratio_name(text: str) -> str:
    """The RATIOS key for a ratio marker as written ("%", "per cent", "bps", "parts per million")."""
    t = " ".join(text.lower().split())
    if t in ("%", "pct") or t.startswith("per") and "cent" in t:
        return "percent"
    if t == "‰" or t.startswith("per") and "mille" in t:
        return "permille"
    if t.startswith("basis"):
        return "basis points"
    return "ppm" if t == "ppm" or t.endswith("million") else "ppb"


_CODES = ("USD", "EUR", "GBP", "JPY", "CNY", "INR", "CHF", "AUD", "CAD", "NZD", "HKD", "SGD")
# Bare "pounds" is left out on purpose: it is as often a weight as a currency.
_WORDS: dict[str, str] = {
    "us dollars": "USD", "dollars": "USD", "dollar": "USD", "euros": "EUR", "euro": "EUR",
    "pounds sterling": "GBP", "sterling": "GBP", "yen": "JPY", "yuan": "CNY", "renminbi": "CNY",
    "rupees": "INR", "rupee": "INR", "swiss francs": "CHF",
}
_NUMBER_WORDS: dict[str, int] = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split())
}
_TENS: dict[str, int] = {w: 20 + 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


_ONES = _alternation(w for w in _NUMBER_WORDS if 0 < _NUMBER_WORDS[w] < 10)
_WORD_NUMBER = (rf"(?:(?:{_alternation(_TENS)})(?:[-\s](?:{_ONES}))?|(?:{_alternation(_NUMBER_WORDS)}))"
                rf"(?:\s+hundred)?\b")
_AMOUNT = re.compile(
    rf"""
    (?<![\w.])                                            # not inside a word or another number
    (?P<sign>[-\u2212](?=[\d.$€£¥₹])|\bminus\s+)?
    (?:(?P<symbol>{_alternation(_SYMBOLS)})\s?|(?P<code>{"|".join(_CODES)})\s?)?
    (?P<num>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+|{_WORD_NUMBER})
    (?P<ordinal>(?:st|nd|rd|th)\b)?
    (?:\s?(?P<scale>thousands?|millions?|billions?|trillions?|mln|mn|bln|bn|trn|tn)\b
       |(?P<short>[kmb])(?![a-z]))?
    (?:\s?(?P<pct>{_RATIO_TEXT}))?
    (?:\s(?P<word>{_alternation(_WORDS)}|{"|".join(_CODES)})\b)?
    """,
    re.IGNORECASE | re.VERBOSE,
)
_QUALIFIER = re.compile(
    r"(?<!\w)(about|around|approximately|approx\.|roughly|nearly|almost|some|circa|~|up\s+to|"
    r"at\s+least|at\s+most|more\s+than|less\s+than|over|under|below|above|as\s+much\s+as|exactly)\s*$",
    re.IGNORECASE,
)
# Dates and times are not amounts: blank them out (keeping offsets) before reading numbers.
_DATES = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")
_YEAR = re.compile(r"1[89]\d\d|20\d\d|2100")
_RANGE_GAP = re.compile(r"\s*(?:-|–|—|to|and)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Amount:
    """One number read from text. `value` is the number as written (signed; "ten" is 10),
    `scale_word` its normalised scale ("million" for m/mn/million), `currency` an ISO code.
    A year, a count or an ordinal-looking "7 of the 32" comes back bare (no currency, no
    scale): whether that is money is the caller's decision, and `to_unit` says it is not."""

    value: float
    currency: str | None
    scale_word: str | None
    percent: bool
    span: tuple[int, int]
    raw: str
    qualifier: str | None = None  # "about", "up to", "at least", ... as written before it
    ratio: str | None = None      # a RATIOS key when a ratio marker follows ("percent" for "%")


def _number(text: str) -> float:
    text = text.lower().replace(",", "")
    if text[0].isdigit() or text[0] == ".":
        return float(text)
    words = text.split()
    hundred = words[-1] == "hundred"
    words = words[:-1] if hundred else words
    total = 0
    for part in re.split(r"[-\s]+", " ".join(words)):
        total += _TENS.get(part, _NUMBER_WORDS.get(part, 0))
    return float(total * (100 if hundred else 1))


def parse_amounts(text: str) -> list[Amount]:
    """Every number in `text` with its currency, scale and percent sign, in order.

    Ranges share what is written once: "$410-450 million" and "between 410 and 450 million"
    give two amounts, both USD and million.
    """
    masked = _DATES.sub(lambda m: " " * len(m.group(0)), text)
    found: list[Amount] = []
    for m in _AMOUNT.finditer(masked):
        if m.group("ordinal"):
            continue
        value = _number(m.group("num"))
        if m.group("sign"):
            value = -value
        currency = None
        if m.group("symbol"):
            currency = _SYMBOLS[m.group("symbol").upper()]
        elif m.group("code"):
            currency = m.group("code").upper()
        elif m.group("word"):
            word = " ".join(m.group("word").lower().split())
            currency = _WORDS.get(word, word.upper())
        scale = m.group("scale") or m.group("short")
        qual = _QUALIFIER.search(masked[max(0, m.start() - 24):m.start()])
        ratio = _ratio_name(m.group("pct")) if m.group("pct") else None
        found.append(Amount(
            value=value, currency=currency,
            scale_word=_SCALE_WORDS[scale.lower()] if scale else None,
            percent=ratio == "percent", span=(m.start(), m.end()), raw=text[m.start():m.end()],
            qualifier=" ".join(qual.group(1).lower().split()) if qual else None, ratio=ratio,
        ))
    return _share_across_ranges(masked, found)


def _share_across_ranges(text: str, amounts: list[Amount]) -> list[Amount]:
    out = list(amounts)
    for i in range(len(out) - 1):
        a, b = out[i], out[i + 1]
        gap = text[a.span[1]:b.span[0]]
        if not _RANGE_GAP.fullmatch(gap):
            continue
        if gap.strip().lower() == "and" and not re.search(r"between\s*$", text[:a.span[0]], re.I):
            continue
        if _YEAR.fullmatch(a.raw.strip()):  # "rose in 2024 to $2.27 billion": a year, not an end of a range
            continue
        if a.scale_word is None and a.ratio is None:
            a = replace(a, scale_word=b.scale_word, percent=b.percent, ratio=b.ratio)
        if a.currency is None and (a.scale_word or b.currency):
            a = replace(a, currency=b.currency)
        if b.currency is None and b.scale_word:
            b = replace(b, currency=a.currency)
        out[i], out[i + 1] = a, b
    return out


@dataclass(frozen=True)
class Unit:
    currency: str | None
    scale: float
    percent: bool
    ratio: str | None = None  # a RATIOS key: "percent", "fraction", "ppm", ...


_UNIT_SYMBOL = re.compile("|".join(re.escape(s) for s in sorted(_SYMBOLS, key=len, reverse=True)))


@lru_cache(maxsize=256)
def parse_unit(unit: str) -> Unit:
    """A brief's free-text unit: "USD million", "EUR bn", "$m", "percent", "fraction", "ppb",
    "million people"."""
    text = " ".join(unit.split())
    percent = bool(re.search(r"%|\bper\s?cent|\bpct\b|\bpercentage\b", text, re.I))
    ratio = "percent" if percent else None
    if ratio is None and re.search(r"\b(?:fraction|share|proportion|ratio)\b", text, re.IGNORECASE):
        ratio = "fraction"
    if ratio is None:
        marker = re.search(rf"(?<!\w)(?:{_RATIO_TEXT})", text, re.IGNORECASE)
        ratio = _ratio_name(marker.group(0)) if marker else None
    if ratio is not None:  # "parts per million" is a ratio, not a scale
        return Unit(currency=None, scale=1.0, percent=percent, ratio=ratio)
    currency = None
    symbol = _UNIT_SYMBOL.search(text)
    code = re.search(rf"\b({'|'.join(_CODES)})\b", text, re.I)
    word = re.search(rf"\b({_alternation(_WORDS)})\b", text, re.I)
    if code:
        currency = code.group(1).upper()
    elif symbol:
        currency = _SYMBOLS[symbol.group(0).upper()]
    elif word:
        currency = _WORDS[" ".join(word.group(1).lower().split())]
    scale = 1.0
    long = re.search(r"\b(thousands?|millions?|billions?|trillions?|mln|mn|bln|bn|trn|tn)\b", text, re.I)
    short = re.search(r"(?:^|[\s$€£¥₹])([kmb])\b", text, re.I) if currency else None  # "m" alone may be metres
    if long:
        scale = SCALES[_SCALE_WORDS[long.group(1).lower()]]
    elif short:
        scale = SCALES[_SCALE_WORDS[short.group(1).lower()]]
    return Unit(currency=currency, scale=scale, percent=percent)


def _tidy(x: float) -> float:
    return float(f"{x:.12g}")


def to_unit(amount: Amount, unit: str) -> float | None:
    """`amount` in the brief's `unit`, or None when it cannot be that.

    Ratios convert among themselves: "23 percent" is 0.23 in a fraction unit, "7.6 ppm" is
    7600 in ppb. A ratio never converts to a non-ratio unit (nor money to a ratio). A bare
    number converts to a ratio unit as written, except to percent: a bare "23" beside a
    percent is as often a count, and a quote that means percent writes the sign. A currency other than the unit's
    gives None (no exchange rates offline); so does any currency into a unit without one
    ("$5 million" is not a number of people). An amount with no currency converts to a money
    unit only when it has a scale word ("430 million"): a bare "2025" or "7" is not money.
    """
    target = parse_unit(unit)
    if not math.isfinite(amount.value):
        return None
    if amount.ratio is not None or target.ratio is not None:
        if amount.ratio is not None and target.ratio is not None:
            return _tidy(amount.value * RATIOS[amount.ratio] / RATIOS[target.ratio])
        bare = amount.ratio is None and amount.currency is None and amount.scale_word is None
        return _tidy(amount.value) if bare and target.ratio not in (None, "percent") else None
    if amount.currency is not None and amount.currency != target.currency:
        return None
    if target.currency is not None and amount.currency is None and amount.scale_word is None:
        return None
    scale = SCALES[amount.scale_word] if amount.scale_word else 1.0
    return _tidy(amount.value * scale / target.scale)


# Two figures are the same when within 1 %: the rounding a quoted figure carries.
SAME_FIGURE = 0.01


def number_in_quote(value: float, quote: str, unit: str, rel_tol: float = SAME_FIGURE) -> bool:
    """True when some amount in `quote`, converted to `unit`, equals `value` within rel_tol.

    read_figure's first test; read_figure also converts a figure copied in another scale and
    says why a discarded one was discarded."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return any(converted is not None and _close(value, converted, rel_tol)
               for converted in (to_unit(a, unit) for a, why in stated_amounts(quote, unit) if why is None))


NOT_IN_QUOTE = "not in its quote"
OTHER_UNIT = "in another unit"


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


# ----------------------------------------------------------------- a figure stated as the quantity

NOT_THE_QUANTITY = "not stated as the quantity"

# Units a manual writes in more than one way: a figure followed by any name of its group is in that unit.
# Bare "B", "K" and "M" are left out on purpose: "8B" may be bits, "512K" and "5M" are read as scale words
# (except against a size in KB, MB or GB: size_letter).
_UNIT_NAMES: tuple[tuple[str, ...], ...] = (
    ("ppb", "parts per billion", "parts-per-billion"), ("ppm", "parts per million", "parts-per-million"),
    ("ppt", "parts per trillion", "parts-per-trillion"),
    ("bytes", "byte"), ("bits", "bit"),
    ("KB", "KiB", "kB", "kilobytes", "kilobyte", "kibibytes"),
    ("MB", "MiB", "megabytes", "megabyte", "mebibytes"), ("GB", "GiB", "gigabytes", "gigabyte", "gibibytes"),
    ("seconds", "second", "secs", "sec", "s"), ("milliseconds", "millisecond", "msecs", "msec", "ms"),
    ("microseconds", "microsecond", "usec", "µs"), ("minutes", "minute", "mins", "min"),
    ("hours", "hour", "hrs", "hr", "h"), ("days", "day"),
)
# A unit-like word written against a number: "8MB", "40MB download", "16kB", "2 hours" beside a figure in
# another unit is that unit's figure, not the brief's.
_KNOWN_UNITS = frozenset(n.lower() for group in _UNIT_NAMES for n in group)
_KNOWN_UNIT_WORDS = _alternation(_KNOWN_UNITS)


def _unit_names(unit: str) -> tuple[str, ...]:
    """Every way a quote may write `unit`: its group in _UNIT_NAMES, else the unit as given and its
    singular ("statuses" -> "status", "symbolic links" -> "symbolic link"), less a scale word
    ("million people": the quote writes "2.1 million people", the scale read with the number)."""
    key = " ".join(re.sub(_SCALE_IN_UNIT, " ", unit).split()) or " ".join(unit.split())
    if not key:
        return ()
    group = next((g for g in _UNIT_NAMES if key.lower() in (n.lower() for n in g)), None)
    if group is not None:
        return group
    singular = re.sub(r"(?:(?<=[sxz])|(?<=ch)|(?<=sh))es$|(?<!s)s$", "", key)
    return (key, singular) if singular != key else (key,)


_SCALE_IN_UNIT = re.compile(r"\b(?:thousands?|millions?|billions?|trillions?)\b", re.IGNORECASE)


@lru_cache(maxsize=64)
def _unit_after(unit: str) -> re.Pattern[str]:
    """What must follow a number for it to be stated in `unit` ("7.6 ppb", "64 outstanding requests":
    up to two words may come between)."""
    names = sorted(_unit_names(unit), key=len, reverse=True)
    words = "|".join(re.escape(n).replace(r"\ ", r"\s+") + r"(?:e?s)?" for n in names) or "(?!)"
    between = rf"(?:(?!(?:{_KNOWN_UNIT_WORDS})(?![\w-]))[a-z][\w-]*\s+){{0,2}}?"
    return re.compile(rf"[\s-]?{between}(?:{words})(?![\w-])", re.IGNORECASE)


@lru_cache(maxsize=64)
def _unit_named(unit: str) -> re.Pattern[str]:
    """The unit named as a word anywhere ("The maximum number of bytes ..."); not inside an identifier
    (max_connections names no connections), nor as a rate's denominator ("reclaims attempted per second,
    times 1000" states no 1000 seconds), nor as another figure's unit ("(half-life of 10 seconds) ...
    times 1000": the seconds are the 10's)."""
    names = sorted(_unit_names(unit), key=len, reverse=True)
    words = "|".join(re.escape(n).replace(r"\ ", r"\s+") + r"(?:e?s)?" for n in names) or "(?!)"
    return re.compile(rf"(?<![\w.-])(?<!\bper\s)(?<!\d\s)(?:{words})(?![\w-])", re.IGNORECASE)


# Code, a formula or a command line around a number: "make MAX_CONNECTIONS=5 check", "-DOS_OTHER=1",
# "LALR(1)", "fork(2)", "ceil((max_connections + 6) / 16) * 17", "curl --max-redirs 3 --location".
# "+" and "/" are operators between operands ("a + 6", "24/7"), not a sign ("rose +5%"); so is "-" after a
# name ("size-1 bytes"), not between two numbers ("4-6 ppb", a range).
_CODE_BEFORE = re.compile(r"(?:[=*^]\s*|[\w)][/+]|[A-Za-z_)]-|[\s)][/+]\s+|\w\(|(?<!\S)--?[A-Za-z][\w-]*\s+)$")
_CODE_AFTER = re.compile(r"\)*\s*(?:[=*/^]|\s\+\s*[\w(]|\+[\w(])")
# A version or a reference: "2.6.11", "since Linux 2.2", "Lua 5.2", "section 6.2", "page 24", "RFC 1122".
_VERSION_AFTER = re.compile(r"\.\d")
_NAME_BEFORE = re.compile(
    r"(?<![\w.])(?:version|release|v|rev|revision|page|pages|p\.|pp\.|section|sections|chapter|rfc|figure|"
    r"fig\.|table|step|appendix|posix\.?|iso|ieee|std|draft|issue|no\.|#)\s*$", re.IGNORECASE)
# A capitalised name right before the number ("Linux 2.2", "Lua 5.2", "ServerAliveCountMax 3"), unless the
# word merely starts a sentence ("Around 15 ...").
_NAME_BEFORE_CASED = re.compile(r"(?<![.!?]\s)(?<![.!?]\s\s)(?<!^)\b[A-Z][\w+]*[A-Za-z+]\s+$")
_MONTHS = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
           r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
_DATE_BEFORE = re.compile(rf"\b(?:{_MONTHS}|in|since|until|before|after|copyright|\(c\)|©)\s+$", re.IGNORECASE)
_DATE_AFTER = re.compile(rf"\s+(?:{_MONTHS})\b", re.IGNORECASE)
# A figure "each" is the size of one of many things ("rows of 12 bytes each"), not the quantity asked.
_EACH = re.compile(r"\s*(?:each|apiece)\b", re.IGNORECASE)
# What may follow a figure whose unit is named before it ("... is 1 billion (1,000,000,000)."): the end
# of a clause or a word that starts another one; any other word makes it a count of something else.
_CLAUSE_GOES_ON = re.compile(
    r"\+?\s*(?:$|[.,;:)\]!?(]|\b(?:and|or|but|which|that|if|when|while|unless|for|on|in|at|by|so|is|was|are|"
    r"were|to|of|with|as|than|otherwise|currently|default|by\s+default|since|before|after)\b)",
    re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(\"'])")
# A figure in a condition is a case the text goes on to describe, not the quantity's value: "When the value in
# this file is 1, symbolic links are followed only ..." (proc(5)), "If the shell compatibility level is set to
# 50 or lower, ...", "if there are 150 or more possible completions", "If split is 100, all input samples are
# used" (zstd(1)). The condition runs from its "if" or "when" to the figure within one clause.
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless)\b[^,;.:()]*?\b(?:is|are|equals|set\s+to)\s+$",
                        re.IGNORECASE)
# "Before Linux 2.6.18, the limit on the recursion depth was 5": what an older release did, not the quantity.
_EARLIER_RELEASE = re.compile(r"\s*(?:before|until|prior\s+to)\s+(?:[A-Za-z][\w+-]*\s+){0,2}v?\d+(?:\.\d+)+,",
                              re.IGNORECASE)
# How far before a figure its unit may be named: this sentence and the one before it ("The maximum
# number of bytes in a string ... is defined by SQLITE_MAX_LENGTH. The default value of this macro is
# 1 billion"), not a whole table or page; and never more than SUBJECT_CHARS back.
SUBJECT_SENTENCES = 2
SUBJECT_CHARS = 300


@lru_cache(maxsize=32)
def _sentence_ends(quote: str) -> tuple[int, ...]:
    """Where each sentence of `quote` begins: 0, then after each sentence end (once per quote)."""
    return (0, *(m.end() for m in _SENTENCE_END.finditer(quote)))


def _sentence_starts(quote: str, start: int) -> tuple[int, ...]:
    """Where each sentence before the figure at `start` begins (0 first), the figure's own last."""
    ends = _sentence_ends(quote)
    return ends[:bisect_right(ends, start)]


def _leaned_on_from(quote: str, at: int) -> int:
    """Where the text that the words at `at` lean on starts (decide.leans_on_before): their line's start, or,
    when they open their line, the start of the nearest line above that is not blank (curl(1) gives "The
    default is 50." a paragraph of its own). The same reach as the model's cited units (sources/citable.py)."""
    line = quote.rfind("\n", 0, at) + 1
    if line == 0 or quote[line:at].strip():
        return line
    return quote[:line].rstrip().rfind("\n") + 1


def _subject_before(quote: str, start: int) -> str:
    """The text a figure's unit may be named in: SUBJECT_SENTENCES sentences ending at the figure, within
    its line (a line is a paragraph, an entry's term or a table row: tcp(7)'s "The number of seconds between
    TCP keep-alive probes." names no unit of the next entry's "tcp_keepalive_probes (integer; default: 9;"),
    unless the figure's line names nothing of its own ("The default is 50.": decide.leans_on_before)."""
    starts = _sentence_starts(quote, start)
    line = quote.rfind("\n", 0, start) + 1
    if line:
        above = _leaned_on_from(quote, line)
        if leans_on_before(quote[line:start + 1].lstrip(), quote[above:line]):
            line = above
    return quote[max(starts[-min(SUBJECT_SENTENCES, len(starts))], start - SUBJECT_CHARS, line):start]


def _money_or_share(unit: str) -> bool:
    target = parse_unit(unit)
    return target.currency is not None or target.ratio is not None


def _beside(quote: str, amount: Amount) -> str:
    """The unit-like word written right after `amount`: "MB" for "8MB", "hours" for "2 hours", or ""."""
    after = re.match(r"(?:\s?([A-Za-zµ]+)|([A-Za-zµ]+))", quote[amount.span[1]:amount.span[1] + 24])
    if after is None:
        return ""
    word = after.group(1) or after.group(2) or ""
    attached = after.group(2) is not None
    return word if attached or word.lower() in _KNOWN_UNITS else ""


# "512K", "64M", "2G" written against a size in kilo-, mega- or gigabytes: the letter is the unit, not a scale
# word (m4's "a limit to the overall memory usable by all diversions taken together (512K, currently)")
_SIZE_LETTERS = {"kb": "K", "mb": "M", "gb": "G"}


def size_letter(amount: Amount, unit: str) -> bool:
    """Whether `amount` is written with the one letter of `unit`, a size in KB, MB or GB ("512K" in KB)."""
    names = _unit_names(unit)
    letter = _SIZE_LETTERS.get(names[0].lower()) if names else None
    return letter is not None and re.fullmatch(rf"\d[\d,.]*{letter}", amount.raw.strip()) is not None


def value_in(amount: Amount, unit: str) -> float | None:
    """`amount` in `unit` (to_unit), a size written with its unit's letter as written ("512K" is 512 KB)."""
    return amount.value if size_letter(amount, unit) else to_unit(amount, unit)


def figure_reading(amount: Amount, quote: str, unit: str) -> tuple[int, str | None]:
    """Whether `quote` states `amount` as the quantity in `unit`: (where its unit ends, None), or
    (-1, why not).

    A figure counts when its unit (or another name of it: "MiB", "ms") is written beside it
    ("100 connections", "64 outstanding requests"), or named before it in this sentence or the
    one before ("The maximum number of bytes ... is 1 billion (1,000,000,000)") with nothing
    after the figure that makes it a count of something else. It never counts inside code, a
    formula or a command line ("make MAX_CONNECTIONS=5 check", "+ 6) / 16", "LALR(1)",
    "curl --max-redirs 3"), as a version or a reference ("Linux 2.6.11", "section 6.2"), as a
    date, as an earlier release's value ("Before Linux 2.6.18, the limit ... was 5"), in
    another unit ("8MB" is no count of file descriptors, "2 hours" no figure in
    seconds) or as the size of each of many things ("rows of 12 bytes each"). Money and shares
    carry their unit in the amount (to_unit decides); the code and formula rule holds for them too.
    Nor does a case in a condition ("When the value in this file is 1, symbolic links are followed only
    ...": _CONDITION).
    """
    start, end = amount.span
    back = max(0, start - 40)
    if _CODE_BEFORE.search(quote, back, start) or _CODE_AFTER.match(quote, end):
        return -1, f"{NOT_THE_QUANTITY} (inside code, a formula or a command line)"
    own = _sentence_starts(quote, start)[-1]
    if _EARLIER_RELEASE.match(quote, own, start):
        return -1, f"{NOT_THE_QUANTITY} (an earlier release's value)"
    if _CONDITION.search(quote, max(back - 80, own), start):
        return -1, f"{NOT_THE_QUANTITY} (a case in a condition: \"if ... is N\")"
    if _money_or_share(unit) or amount.currency is not None or amount.ratio is not None or size_letter(amount, unit):
        return end, None  # the amount carries its unit: to_unit (or size_letter) says whether it is the brief's
    written = _unit_after(unit).match(quote, end)
    if written is not None:
        if _EACH.match(quote, written.end()):
            return -1, f"{NOT_THE_QUANTITY} (the size of each of many things)"
        return written.end(), None
    other = _beside(quote, amount)
    if other:
        return -1, f"{OTHER_UNIT} ({other})"
    if _VERSION_AFTER.match(quote, end) or _NAME_BEFORE_CASED.search(quote, back, start) \
            or _NAME_BEFORE.search(quote, back, start):
        return -1, f"{NOT_THE_QUANTITY} (a version, a name's number or a reference)"
    year = bool(_YEAR.fullmatch(amount.raw.strip()))
    if _DATE_AFTER.match(quote, end) or (year and _DATE_BEFORE.search(quote, back, start)):
        return -1, f"{NOT_THE_QUANTITY} (a date)"
    # A negative bare number is a setting's special value ("Set this option to -1 to make it unlimited"), and
    # a bare "one" a pronoun as often as a number ("an orphaned symbolic link (one which points ...)").
    if amount.value >= 0 and amount.raw.lower() != "one" and _unit_named(unit).search(_subject_before(quote, start)) \
            and _CLAUSE_GOES_ON.match(quote, end):
        return end, None
    return -1, f"{NOT_THE_QUANTITY} (no {unit} beside it)"


def another_quantity_asked(amount: Amount, quote: str, asked: str) -> str | None:
    """Why `amount`, stated in the brief's unit, is still not the quantity the question `asked` about, or None.

    An estimate has no metric; its question says what is measured, and a manual states many quantities in one
    unit side by side. Two shapes say plainly that a figure is another one's:
    - its own clause names a setting the question does not (decide.CODE_NAME): "(On Linux, PIPE_BUF is 4096
      bytes.)" and mq_overview(7)'s "The default value for msgsize_max is 8192 bytes." are no capacity of a
      pipe. Only the figure's own clause counts: SQLite's "The default value of this macro is 1 billion",
      which leans on "... SQLITE_MAX_LENGTH.", is still the maximum length of a string;
    - it is "the <noun> of N" and the question has no such word: pipe(7)'s "(i.e., 65,536 bytes in a system
      with a page size of 4096 bytes)" gives 4096 as a page size, not the pipe's capacity."""
    if not asked:
        return None
    start = amount.span[0]
    clause = quote[_sentence_starts(quote, start)[-1]:start]
    folded = asked.lower()
    for name in CODE_NAME.finditer(clause):
        if name.group(0).lower() not in folded:
            return f"{NOT_THE_QUANTITY} (said of {name.group(0)}, which the question does not name)"
    noun = _quantity_noun(quote, start)
    if noun is not None and _stem(noun) not in _stems(asked):
        return f"{NOT_THE_QUANTITY} (a {noun}, which the question does not ask about)"
    return None


def stated_amounts(quote: str, unit: str, asked: str = "") -> list[tuple[Amount, str | None]]:
    """Every amount in `quote` with why it is not stated as the quantity in `unit` (None: it is;
    figure_reading), nor, when the brief's question is given (`asked`), as the quantity it asks about
    (another_quantity_asked). The low end of a range shares the unit written once after its high end
    ("10-20 seconds", "between 10 and 20 seconds")."""
    amounts = parse_amounts(quote)
    whys = [figure_reading(a, quote, unit)[1] or another_quantity_asked(a, quote, asked) for a in amounts]
    for i in range(len(amounts) - 1):
        no_unit = whys[i] is not None and whys[i] == f"{NOT_THE_QUANTITY} (no {unit} beside it)"
        if no_unit and whys[i + 1] is None and _is_range(quote, amounts[i], amounts[i + 1]):
            whys[i] = None
    return list(zip(amounts, whys))


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


def read_figure(proposed: float, quote: str, unit: str, rel_tol: float = SAME_FIGURE, asked: str = "") -> Figure:
    """Check a number the model proposed against its quote: keep it in the brief's unit or
    say truly why not. `asked`: the brief's question (another_quantity_asked).

    In order, the first that holds:
    1. An amount in the quote, converted to `unit`, is the number: kept as is.
    2. The number is an amount of the quote as written, in another scale of the same unit
       (0.43 for "US$0.43bn" in USD million, 23 for "23 percent" in a fraction): kept,
       converted by code (430, 0.23). A figure is never discarded for its scale.
    3. The number is an amount of the quote, as written or in any scale word, that does not
       convert to `unit` (0.43 or 430 for "US$0.43bn" in a brief in percent): discarded,
       "in another unit (USD)".
    4. Otherwise: discarded, NOT_IN_QUOTE (the model may read, not invent).
    Steps 1 and 2 take only amounts the quote states as the quantity (figure_reading): an amount
    that is the number but is not ("make MAX_CONNECTIONS=5 check", "8MB" for file descriptors)
    is discarded with figure_reading's reason, before steps 3 and 4.
    """
    if not isinstance(proposed, (int, float)) or isinstance(proposed, bool) or not math.isfinite(proposed):
        return Figure(proposed=proposed, value=None, reason=NOT_IN_QUOTE)
    target = parse_unit(unit)
    read = [(a, c if c is not None and math.isfinite(c) else None, why)
            for a, why in stated_amounts(quote, unit, asked) for c in (value_in(a, unit),)]
    stated = [(a, c) for a, c, why in read if why is None]
    for amount, converted in stated:
        if converted is not None and _close(proposed, converted, rel_tol):
            return Figure(proposed=proposed, value=converted, reason=None, written=amount.raw)
    for amount, converted in stated:
        if converted is not None and any(_close(proposed, x, rel_tol) for x in _as_written(amount, target)):
            return Figure(proposed=proposed, value=converted, reason=None, written=amount.raw)
    for amount, converted, why in read:
        if why is not None and any(_close(proposed, x, rel_tol) for x in _in_any_scale(amount, target)):
            return Figure(proposed=proposed, value=None, reason=why, written=amount.raw)
    for amount, converted, _ in read:
        if converted is None and any(_close(proposed, x, rel_tol) for x in _in_any_scale(amount, target)):
            return Figure(proposed=proposed, value=None, reason=f"{OTHER_UNIT} ({_unit_words(amount)})",
                          written=amount.raw)
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


# ----------------------------------------------------------------- source tiers

TIERS: tuple[str, ...] = ("regulator", "peer_reviewed", "industry", "news", "social")
TIER_CAPS: dict[str, float] = {
    "regulator": 0.95, "peer_reviewed": 0.85, "industry": 0.7, "news": 0.6, "social": 0.3,
}
_TIER_ALIASES: dict[str, str] = {
    "regulatory": "regulator", "government": "regulator", "official": "regulator", "auditor": "regulator",
    "peer-reviewed": "peer_reviewed", "peer reviewed": "peer_reviewed", "peerreviewed": "peer_reviewed",
    "academic": "peer_reviewed", "journal": "peer_reviewed", "scientific": "peer_reviewed",
    "trade": "industry", "company": "industry", "press": "news", "media": "news",
    "forum": "social", "blog": "social", "anonymous": "social", "social_media": "social", "unreliable": "social",
}
CREDIBLE = 0.5


def normalize_tier(tier: str | None) -> str:
    """One of TIERS; a label the model made up (or none) counts as news: neither trusted nor dismissed."""
    if not isinstance(tier, str):
        return "news"
    key = " ".join(tier.strip().lower().split())
    if key.replace(" ", "_") in TIER_CAPS:
        return key.replace(" ", "_")
    return _TIER_ALIASES.get(key, _TIER_ALIASES.get(key.replace(" ", "_"), "news"))


def tier_confidence(tier: str | None, model_confidence: float) -> float:
    """The model's confidence, capped by the source's tier: a forum post cannot be 0.9 sure."""
    try:
        c = float(model_confidence)
    except (TypeError, ValueError):
        c = 0.0
    c = 0.0 if math.isnan(c) else min(1.0, max(0.0, c))
    return min(c, TIER_CAPS[normalize_tier(tier)])


# The model's word alone never makes a page a regulator or a peer-reviewed source: a news
# story quoting an auditor is not the auditor. Without an organisation's source_tiers rule,
# those two tiers need the page's host to agree (a government host for regulator, an
# academic or government one for peer_reviewed); otherwise the tier is capped at
# MODEL_TIER_CEILING, the highest a page can reach on the model's label alone.
MODEL_TIER_CEILING = "industry"
_GOV_HOST = re.compile(r"(?:^|\.)(?:(?:gov|mil)(?:\.[a-z]{2})?|(?:gouv|gob|go|govt|gv)\.[a-z]{2}|europa\.eu|int)$")
_ACADEMIC_HOST = re.compile(r"(?:^|\.)(?:edu(?:\.[a-z]{2})?|ac\.[a-z]{2})$")


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def independent_source(url: str) -> str:
    """Which source a page counts as wherever sources are counted (an estimate's corroboration, a verdict's
    domains): a library document's folder, an archive (`zim://<archive>/...`), a web page itself. One
    manual's pages (its HTML and its PDF, git-config.html and git-gc.html) or one archive's articles say
    one publisher's word once: they are one source, not two that agree. A web page stays its own source:
    briefd cannot tell one publisher's sites or sections from a host name, and a host serves many
    publishers (a mirror, a hosting service; the lab serves every site from two loopback names)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.scheme == FILE_SCHEME:
        return "file://" + unquote(parts.path).rsplit("/", 1)[0] + "/"
    if parts.scheme == ARCHIVE_SCHEME:
        return f"{parts.scheme}://{parts.netloc}/"
    return url


def _under_prefix(url: str, prefix: str) -> bool:
    """`url` is `prefix` or lies below it: same scheme and host (any case), the path continuing
    at a "/" ("https://x.org/audits" covers /audits/2024 but not /audits-old)."""
    try:
        u, p = urlsplit(url), urlsplit(prefix)
    except ValueError:
        return False
    if (u.scheme.lower(), u.netloc.lower()) != (p.scheme.lower(), p.netloc.lower()):
        return False
    rest = f"{u.path}{'?' + u.query if u.query else ''}"
    path = p.path or "/"
    if not (rest or "/").startswith(path):
        return False
    tail = (rest or "/")[len(path):]
    return path.endswith("/") or not tail or tail[0] in "/?#"


# A source_tiers key may also name where a document lives (core/settings.py makes it an absolute
# path): a library folder or file covers the file:// URLs at or under it (the library's documents
# are read at the paths under the configured folder, daemon/sources/library.py), and a Kiwix
# archive file covers its zim://<file name>/... articles (an article's URL names its archive by
# file name alone, daemon/sources/archives.py). Without such a rule a library document is
# unrated: its tier is the model's label, so the product's own manual weighed like a news story.
FILE_SCHEME, ARCHIVE_SCHEME = "file", "zim"


def is_path_key(key: str) -> bool:
    """True for a source_tiers key that names a folder or a file (settings stores those absolute)."""
    return key.startswith("/")


def _path_of(url: str, scheme: str) -> str | None:
    """The decoded path of a file:// URL, or the archive file name of a zim:// URL; else None."""
    try:
        split = urlsplit(url)
    except ValueError:
        return None
    if split.scheme.lower() != scheme:
        return None
    return unquote(split.netloc if scheme == ARCHIVE_SCHEME else split.path)


def _covers_path(url: str, key: str) -> bool:
    """`key` (an absolute path) is the document's file or a folder above it, or the archive it is in."""
    document = _path_of(url, FILE_SCHEME)
    if document is not None:
        folder = key.rstrip("/") or "/"
        return document == folder or document.startswith(folder.rstrip("/") + "/")
    archive = _path_of(url, ARCHIVE_SCHEME)
    return archive is not None and archive == key.rstrip("/").rpartition("/")[2]


def tier_rule(url: str, source_tiers: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The `source_tiers` rule (key, tier) that sets `url`'s tier, or None when none covers it (unrated).

    A key with "://" is a URL prefix, a key that is a path a library folder, document or
    archive file (is_path_key), any other a host that also covers its subdomains (as
    include_domains does). The most specific rule wins: URL prefixes and paths before hosts,
    longer before shorter."""
    host = _host(url)
    best: tuple[int, int] | None = None
    found: tuple[str, str] | None = None
    for key, tier in source_tiers:
        if "://" in key:
            hit, rank = _under_prefix(url, key), (1, len(key))
        elif is_path_key(key):
            hit, rank = _covers_path(url, key), (1, len(key))
        else:
            name = key.lower().rstrip(".")
            hit, rank = bool(host) and (host == name or host.endswith("." + name)), (0, len(name))
        if hit and (best is None or rank > best):
            best, found = rank, (key, tier)
    return found


def source_tier_rule(url: str, source_tiers: Sequence[tuple[str, str]]) -> str | None:
    """The organisation's tier for `url` (the `source_tiers` setting), or None when no rule covers
    it: the tier of the most specific rule (tier_rule)."""
    rule = tier_rule(url, source_tiers)
    return None if rule is None else normalize_tier(rule[1])


def capped_tier(url: str, model_tier: str | None, source_tiers: Sequence[tuple[str, str]] = ()) -> str:
    """The tier briefd uses for a page: the organisation's rule if one covers it, else the
    model's label, which may not reach regulator or peer_reviewed unless the host agrees
    (see MODEL_TIER_CEILING). Lower labels (news, social) are taken as given: a model that
    distrusts a page is never overruled upwards."""
    ruled = source_tier_rule(url, source_tiers)
    if ruled is not None:
        return ruled
    tier = normalize_tier(model_tier)
    host = _host(url)
    if tier == "regulator" and not _GOV_HOST.search(host):
        return MODEL_TIER_CEILING
    if tier == "peer_reviewed" and not (_ACADEMIC_HOST.search(host) or _GOV_HOST.search(host)):
        return MODEL_TIER_CEILING
    return tier


# ----------------------------------------------------------------- the range

IMPACTS = ("narrows_low", "narrows_high", "narrows_both", "widens", "neutral")
TRIM = 0.1
PLAUSIBLE = 10.0
CORROBORATION = 2  # independent sources at a bound before the evidence alone sets it
# The least share of its initial distance an uncorroborated bound keeps: 1 - the highest tier
# cap (a regulator's 0.95), so even a confidence of 1.0 cannot make one source a certainty.
ONE_SOURCE_KEEPS = 1 - max(TIER_CAPS.values())


@dataclass(frozen=True)
class Reading:
    """One evidence item's reading for an estimate, already in the brief's unit.

    A point value has low == high. `confidence` should already be tier-capped
    (tier_confidence). `source` is the independence key: readings that share it share
    one source's weight."""

    low: float
    high: float
    confidence: float
    impact: str
    source: str
    round: int = 0


@dataclass(frozen=True)
class _Weighted:
    low: float
    high: float
    weight: float
    source: str
    speaks_low: bool
    speaks_high: bool
    confidence: float = 0.0


def _confidence(c: float) -> float:
    return 0.0 if not isinstance(c, (int, float)) or math.isnan(c) else min(1.0, max(0.0, float(c)))


def _credible(readings: Sequence[Reading], initial: tuple[float, float] | None = None) -> list[_Weighted]:
    """Credible, plausible readings with their weights (see update_range)."""
    kept: list[Reading] = []
    for r in readings:
        if r.impact == "neutral" or _confidence(r.confidence) < CREDIBLE:
            continue
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (r.low, r.high)):
            continue
        kept.append(r)
    if initial is not None:
        kept = _plausible(kept, initial)
    per_source: dict[str, int] = {}
    for r in kept:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    out: list[_Weighted] = []
    for r in kept:
        lo, hi = min(r.low, r.high), max(r.low, r.high)
        c = _confidence(r.confidence)
        impact = r.impact if r.impact in IMPACTS else "narrows_both"
        out.append(_Weighted(lo, hi, c * c / per_source[r.source], r.source,
                             impact != "narrows_high", impact != "narrows_low", c))
    return out


def _plausible(readings: list[Reading], initial: tuple[float, float]) -> list[Reading]:
    """For a positive quantity, a reading more than PLAUSIBLE times outside the brief's range
    is a different quantity (a wrong scale, an injected "$1"), unless a second source agrees."""
    lo, hi = initial
    if not lo > 0:
        return readings
    too_low = {r.source for r in readings if min(r.low, r.high) < lo / PLAUSIBLE}
    too_high = {r.source for r in readings if max(r.low, r.high) > hi * PLAUSIBLE}
    out = []
    for r in readings:
        if min(r.low, r.high) < lo / PLAUSIBLE and len(too_low) < 2:
            continue
        if max(r.low, r.high) > hi * PLAUSIBLE and len(too_high) < 2:
            continue
        out.append(r)
    return out


def _lower_quantile(points: Sequence[tuple[float, float]], q: float) -> float:
    """Smallest value whose cumulative weight from below reaches q of the total."""
    ordered = sorted(points)
    need = q * math.fsum(w for _, w in ordered)
    cum = 0.0
    for value, weight in ordered:
        cum += weight
        if cum >= need * (1 - 1e-12):
            return value
    return ordered[-1][0]


def _upper_quantile(points: Sequence[tuple[float, float]], q: float) -> float:
    return -_lower_quantile([(-v, w) for v, w in points], q)


def update_range(initial: tuple[float, float], readings: Sequence[Reading]) -> tuple[float, float]:
    """The range after a round: a pure function of all the evidence so far.

    The rule, in order:
    1. Only credible readings count: not `neutral`, confidence >= CREDIBLE (0.5), finite.
       A forum post (tier cap 0.3) can never move the range, however extreme.
    2. Plausibility (positive quantities only, initial low > 0): a reading more than 10x
       below the initial low or above the initial high is dropped unless a second source
       is out there too. An injected "$1" is read as 0.000001 USD million: dropped.
    3. Weight = confidence squared, shared among readings from the same source, so one
       page cannot outvote others by saying the same thing five times.
    4. Low bound = weighted 10th percentile of the lows of readings that speak to the low
       bound (narrows_low, narrows_both, widens); high bound = weighted 90th percentile of
       the highs of those that speak to the high bound (narrows_high, narrows_both, widens).
       A minority holding under 10 % of the weight is trimmed; evidence beyond the initial
       range with more than that widens it.
    5. A bound with no evidence keeps its initial value; if the two then cross, the side
       without evidence follows the other; if both had evidence, they are swapped.
    6. One source is not corroboration (seed 1: "only narrow where evidence supports it").
       A bound that fewer than CORROBORATION (2) independent sources speak to keeps part of
       its distance to the initial bound: with one source of confidence c it moves
       from the initial bound towards the evidence by c, keeping (1 - c), at least
       ONE_SOURCE_KEEPS (0.05), of the way: bound = evidence + (1 - c) x (initial - evidence),
       only on the side where the initial bound lies beyond the evidence. So one credible
       reading draws the range towards it but never collapses it to a point: an industry
       figure of 97 (0.7) in a 10..1000 range gives 70.9..367.9; a second independent
       source at 97 corroborates it and the range becomes 97..97.

    No credible evidence: the initial range, unchanged. The result does not depend on the
    order of `readings`; raising an in-range reading's confidence only draws the bounds
    towards it (while it stays credible and has its own source).

    Worked example (northgate, USD million, initial 100..2000): audit office 431 (0.95),
    regulator 430 (0.9), journal 430 (0.85), contractors 410 (0.7), two news items 430 and
    450 (0.6), forum 440 (0.3), economist "up to 520" (0.85, narrows_high), anonymous blog
    10000 (0.3), injected "$1" = 0.000001 (0.3). Steps 1-2 drop the forum, blog and
    injection. Low side weights: 410: .49, 430: .81 + .7225 + .36, 431: .9025, 450: .36;
    total 3.645, 10 % = 0.3645, reached at 410 -> low 410. High side adds 520: .7225;
    total 4.3675, 10 % = 0.43675, reached from the top at 520 -> high 520. Range 410..520.
    """
    init_lo, init_hi = min(initial), max(initial)
    weighted = _credible(readings, (init_lo, init_hi))
    lows = [(w.low, w.weight) for w in weighted if w.speaks_low]
    highs = [(w.high, w.weight) for w in weighted if w.speaks_high]
    lo = _lower_quantile(lows, TRIM) if lows else init_lo
    hi = _upper_quantile(highs, TRIM) if highs else init_hi
    if lo > hi:
        if not highs:
            hi = lo
        elif not lows:
            lo = hi
        else:
            lo, hi = hi, lo
    keep_lo = _uncorroborated_share([w for w in weighted if w.speaks_low])
    keep_hi = _uncorroborated_share([w for w in weighted if w.speaks_high])
    if init_lo < lo:
        lo = min(lo, max(init_lo, (1 - keep_lo) * lo + keep_lo * init_lo))  # a convex mix: no overflow
    if hi < init_hi:
        hi = max(hi, min(init_hi, (1 - keep_hi) * hi + keep_hi * init_hi))
    return (lo, hi)


def _uncorroborated_share(side: Sequence[_Weighted]) -> float:
    """How much of its distance to the initial bound a bound keeps (update_range, step 6):
    0 when CORROBORATION independent sources speak to it, 1 - c for one source (its most
    confident reading, at least ONE_SOURCE_KEEPS), 1 with no evidence."""
    sources = {w.source for w in side}
    if len(sources) >= CORROBORATION:
        return 0.0
    if not sources:
        return 1.0
    return max(ONE_SOURCE_KEEPS, 1 - max(w.confidence for w in side))


def credible_sources(readings: Sequence[Reading]) -> int:
    """How many independent sources give a credible (non-neutral, confidence >= 0.5) reading."""
    return len({w.source for w in _credible(readings)})


def weakest_bound(current: tuple[float, float], readings: Sequence[Reading]) -> str:
    """Seed 4's reflect step for an estimate: which bound has the least evidence at it.

    A reading supports the low bound when its low lies in the bottom quarter of the current
    range, the high bound when its high lies in the top quarter (credible readings, weighted
    as in update_range). A bound with under half the other's support is the one to research
    next: "narrow_low" or "narrow_high"; otherwise (or with no evidence) "both".
    """
    lo, hi = min(current), max(current)
    half = _half_width(lo, hi)
    if not half > 0:
        return "both"
    eps = 2 * (half * 1e-9)  # = width * 1e-9, without computing a width that may overflow
    quarter = half / 2
    low_support = math.fsum(w.weight for w in _credible(readings)
                            if w.speaks_low and lo - eps <= w.low <= lo + quarter)
    high_support = math.fsum(w.weight for w in _credible(readings)
                             if w.speaks_high and hi - quarter <= w.high <= hi + eps)
    if low_support < high_support / 2:
        return "narrow_low"
    if high_support < low_support / 2:
        return "narrow_high"
    return "both"


# ----------------------------------------------------------------- progress and stopping


def _clamp01(x: float) -> float:
    return 0.0 if math.isnan(x) else min(1.0, max(0.0, x))


def _half_width(lo: float, hi: float) -> float:
    """(hi - lo) / 2, finite for any finite lo <= hi.

    Why halves: hi - lo overflows to inf for a range such as -1e308..1e308, and the
    centre (lo + hi) / 2 likewise; hi/2 - lo/2 and lo/2 + hi/2 cannot. Halving is exact
    for normal floats, so every ordinary range gets the same result as the plain formula;
    only subnormal ends (below 2.2e-308) lose their last bit, and a half-width that
    rounds to 0 there is treated as an empty range rather than divided by.
    """
    return hi / 2 - lo / 2


def _centre(lo: float, hi: float) -> float:
    return lo / 2 + hi / 2


def _bounded(x: float) -> float:
    """x within the finite floats (nan as 0): a ratio over a tiny width may overflow to inf."""
    if math.isnan(x):
        return 0.0
    return min(_FLOAT_MAX, max(-_FLOAT_MAX, x))


_FLOAT_MAX = sys.float_info.max


def width_reduction_pct(initial: tuple[float, float], current: tuple[float, float]) -> float:
    """How much narrower than the initial range the current one is, in percent (negative: wider).

    Total: any finite ranges give a finite number <= 100 (an empty or non-finite initial range
    gives 0.0), because it goes into events and report.json, where inf is not JSON.
    """
    if not all(math.isfinite(x) for x in (*initial, *current)):
        return 0.0
    ih = _half_width(min(initial), max(initial))
    ch = _half_width(min(current), max(current))
    if not ih > 0:
        return 0.0
    return _bounded(_tidy(_bounded(100.0 * ((ih - ch) / ih))))


def progress_score(
    initial: tuple[float, float],
    current: tuple[float, float],
    target_low: float | None = None,
    target_high: float | None = None,
    target_width: float | None = None,
) -> float:
    """Seed 1's progress score, 0..1.

    width progress = (initial width - current width) / (initial width - target width), in 0..1
    centre alignment = 1 - |current centre - target centre| / (initial width / 2), in 0..1
    score = harmonic mean of the two (0 when either is 0). With target_low and target_high the
    target width is their difference; with only target_width the score is the width term
    alone; with no target at all the target width is 0. The score falls when the range widens.

    Total: any finite inputs give a number in 0..1 (a non-finite one gives 0.0). The brief's
    validation keeps ranges sane, but evidence can move a range anywhere a page's numbers
    reach, and a score that raised would fail the brief.
    """
    given = [*initial, *current] + [t for t in (target_low, target_high, target_width) if t is not None]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in given):
        return 0.0
    i_lo, i_hi = min(initial), max(initial)
    c_lo, c_hi = min(current), max(current)
    # Half-widths, not widths: total for every finite input (see _half_width).
    ih, ch = _half_width(i_lo, i_hi), _half_width(c_lo, c_hi)
    centre: float | None = None
    if target_low is not None and target_high is not None:
        t_lo, t_hi = min(target_low, target_high), max(target_low, target_high)
        th, centre = _half_width(t_lo, t_hi), _centre(t_lo, t_hi)
    else:
        th = target_width / 2 if target_width is not None else 0.0
    if ih - th > 0:
        width = _clamp01((ih - ch) / (ih - th))
    else:  # the initial range was already as narrow as the target
        width = 1.0 if ch <= th else 0.0
    if centre is None:
        return width
    offset = abs(_centre(c_lo, c_hi) - centre)  # may be inf for centres 2e308 apart: align is then 0
    align = _clamp01(1 - offset / ih) if ih > 0 else (1.0 if offset == 0 else 0.0)
    if width == 0 or align == 0:
        return 0.0
    return 2 * width * align / (width + align)


PLATEAU_GAIN = 0.005   # seed 1: a score that moved less than this ...
PLATEAU_ROUNDS = 2     # ... over this many rounds has converged


def plateau(scores: Sequence[float], min_gain: float = PLATEAU_GAIN, window: int = PLATEAU_ROUNDS) -> bool:
    """True when the score has moved less than `min_gain` over the last `window` rounds.

    Needs window + 1 scores. "Moved" counts both ways: a score that fell means new evidence
    widened the range, which is news, not convergence, so it does not count as a plateau.
    """
    if window < 1 or len(scores) < window + 1:
        return False
    recent = list(scores[-(window + 1):])
    if not all(math.isfinite(s) for s in recent):
        return False
    return max(recent) - min(recent) < min_gain


TARGET_SOURCES = CORROBORATION  # a range counts as the answer only with this many independent credible sources inside it


def target_met(
    current: tuple[float, float],
    target_low: float | None = None,
    target_high: float | None = None,
    target_width: float | None = None,
) -> bool:
    """Whether the range itself meets the brief's target (seed 1, read literally).

    With target_low/target_high: the whole range lies inside [target_low, target_high].
    With target_width: the range is no wider than it. With no target: never (the brief
    narrows toward a point, and a point is not claimed from evidence; the loop stops on
    convergence, stalling, the budget or the round cap instead).

    Why not the progress score: it blends width and centre, so 430..520 against a 400..460
    target scores 0.968 while 520 lies outside the target; a score says how far the range
    has come, not whether it is the answer.
    """
    lo, hi = min(current), max(current)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if target_low is not None and target_high is not None:
        return min(target_low, target_high) <= lo and hi <= max(target_low, target_high)
    if target_width is not None:
        return _half_width(lo, hi) <= target_width / 2
    return False


def supporting_sources(current: tuple[float, float], readings: Sequence[Reading],
                       initial: tuple[float, float] | None = None) -> int:
    """How many independent sources give a credible reading that lies inside `current`.

    Credible is what update_range counts: a non-neutral reading whose tier-capped
    confidence is at least CREDIBLE (0.5), so a regulator, peer-reviewed, industry or news
    source can be credible and a social/anonymous one (capped at 0.3) never is; with
    `initial`, a lone reading more than PLAUSIBLE times outside it is left out too.
    Independent means a different `source` (the page's URL). A reading supports the range
    when both its ends lie inside it: a figure the range does not contain is not support.
    """
    lo, hi = min(current), max(current)
    return len({w.source for w in _credible(readings, initial) if lo <= w.low and w.high <= hi})


# ----------------------------------------------------------------- verdicts

SUPPORT_NEEDED = 1.2
DOMINANCE = 2.0
_RANK = {tier: i for i, tier in enumerate(TIERS)}  # 0 = regulator, the highest tier
_HIGH_STANDING = _RANK["peer_reviewed"]


@dataclass(frozen=True)
class Stance:
    """The model's label for one evidence item. `domain` is the independence key (independent_source);
    `url` the page or document itself, named where one source decides."""

    stance: str  # supports | contradicts | neutral
    confidence: float
    tier: str | None
    domain: str
    url: str | None = None


@dataclass(frozen=True)
class Verdict:
    value: str  # supported | refuted | inconclusive
    rule: str
    evidence_level: str  # deterministic | advisory
    support: float
    contradiction: float


@dataclass(frozen=True)
class _Side:
    weight: float
    domains: int
    best_rank: int  # the best tier on this side (lowest rank); len(TIERS) when empty
    best_tier: str


def _side(best: dict[str, tuple[float, int]]) -> _Side:
    ranks = [rank for _, rank in best.values()]
    best_rank = min(ranks, default=len(TIERS))
    return _Side(math.fsum(c for c, _ in best.values()), len(best), best_rank,
                 TIERS[best_rank] if best_rank < len(TIERS) else "none")


def _blocking(rank_against: Iterable[int], side: _Side) -> int | None:
    """The best rank among opposing items that block this side, or None."""
    limit = max(side.best_rank, _HIGH_STANDING)
    blockers = [r for r in rank_against if r <= limit]
    return min(blockers) if blockers else None


def verdict(stances: Sequence[Stance]) -> Verdict:
    """The hypothesis verdict from the model's stance labels: always `advisory`.

    Seed 2: a verdict is deterministic only when computed from a measured figure against a
    target (contract_verdict); a verdict that rests on the model's reading of each quote
    ("supports", "contradicts") is the model grading its own homework, however carefully
    the labels are weighed. The weighing (_weigh) is shared with contract_verdict.
    """
    return _weigh(stances, ADVISORY)


def _weigh(stances: Sequence[Stance], level: str) -> Verdict:
    """Weigh stances into a verdict; `level` says where the stances came from.

    1. Each item's confidence is capped by its tier; items under CREDIBLE (0.5) after that
       (every social-tier item) are counted but decide nothing; neutral items are ignored.
    2. Independence: per domain and side, only the strongest item counts.
    3. support = sum over supporting domains; contradiction likewise.
    4. supported when support >= 1.2, support >= 2 x contradiction, and no credible
       contradiction comes from a tier at or above the best support's tier, or from a
       peer-reviewed or regulator source (a study or an official finding against the claim
       leaves it contested, however much else agrees). refuted symmetrically. Otherwise
       inconclusive. 1.2 is more than any single item can carry (0.95), so a verdict weighed
       here always rests on at least two domains (contract_verdict's one-source rule is apart).
    Adding a supporting item never undoes "supported"; the order of `stances` never matters.
    """
    best: dict[str, dict[str, tuple[float, int]]] = {"supports": {}, "contradicts": {}}
    ranks: dict[str, list[int]] = {"supports": [], "contradicts": []}
    weak = 0
    for item in stances:
        if item.stance not in best:
            continue
        tier = normalize_tier(item.tier)
        conf = tier_confidence(tier, item.confidence)
        if conf < CREDIBLE:
            weak += 1
            continue
        domain = (item.domain or "").strip().lower()
        rank = _RANK[tier]
        ranks[item.stance].append(rank)
        held = best[item.stance].get(domain)
        if held is None or (conf, -rank) > (held[0], -held[1]):
            best[item.stance][domain] = (conf, rank)
    sup, con = _side(best["supports"]), _side(best["contradicts"])
    domains = len(set(best["supports"]) | set(best["contradicts"]))
    counts = (f"{sup.domains} domain(s) support (weight {sup.weight:.2f}, best tier {sup.best_tier}), "
              f"{con.domains} contradict (weight {con.weight:.2f}, best tier {con.best_tier})")
    if weak:
        counts += f"; {weak} item(s) under confidence {CREDIBLE} ignored"
    sup_block = _blocking(ranks["contradicts"], sup)
    con_block = _blocking(ranks["supports"], con)

    def decides(side: _Side, other: _Side) -> bool:
        return side.weight >= SUPPORT_NEEDED and side.weight >= DOMINANCE * other.weight

    if decides(sup, con) and sup_block is None:
        value, why = "supported", (f"support >= {SUPPORT_NEEDED}, "
                                   f"at least {number_text(DOMINANCE)}x the contradiction, "
                                   "and no contradiction of equal or higher tier or from a regulator or "
                                   "peer-reviewed source")
    elif decides(con, sup) and con_block is None:
        value, why = "refuted", (f"contradiction >= {SUPPORT_NEEDED}, at least {number_text(DOMINANCE)}x the support, "
                                 "and no support of equal or higher tier or from a regulator or "
                                 "peer-reviewed source")
    else:
        value = "inconclusive"
        # Here a side that decides is blocked (its block is set), or it would have won above.
        if decides(sup, con) and sup_block is not None:
            why = f"support would decide, but a {TIERS[sup_block]} source contradicts"
        elif decides(con, sup) and con_block is not None:
            why = f"contradiction would decide, but a {TIERS[con_block]} source supports"
        elif not domains:
            why = "no credible evidence either way"
        else:
            why = f"neither side reaches {SUPPORT_NEEDED} with at least {number_text(DOMINANCE)}x the other's weight"
    return Verdict(value=value, rule=f"{value}: {counts}; {why}", evidence_level=level,
                   support=round(sup.weight, 6), contradiction=round(con.weight, 6))


# ----------------------------------------------------------------- hypothesis contracts (seed 2)

COMPARATORS: tuple[str, ...] = ("<", "<=", ">", ">=", "==", "between")
DETERMINISTIC, ADVISORY = "deterministic", "advisory"
# What each evidence level means, in the words the report prints under the verdict.
EVIDENCE_LEVEL_MEANING: dict[str, str] = {
    DETERMINISTIC: ("Deterministic: code read the figures in the quotes and compared them with the brief's "
                    "target; the model's opinion of the quotes was not used."),
    ADVISORY: ("Advisory: this verdict weighs the model's own reading of each quote (supports or "
               "contradicts); no figure was checked against a target. Treat it as a lead to verify, not "
               "a finding. Give the hypothesis a metric, comparator, target and unit for a computed verdict."),
}
EVIDENCE_LEVEL_WORDS: dict[str, str] = {
    # the same two meanings in a few words, for the report's answer line
    DETERMINISTIC: "computed from the quoted figures against the brief's target, not judged by the model",
    ADVISORY: ("weighed from the model's reading of each source (supports or contradicts): "
               "a lead to verify, not a finding"),
}
MEETS, FAILS, UNDECIDED = "meets", "fails", "undecided"
RESTATES, EARLIER, THRESHOLD = "restates the target", "earlier value", "a threshold named"


@dataclass(frozen=True)
class Contract:
    """Seed 2's machine-readable contract: the claim holds when the measured figure, in `unit`,
    satisfies `comparator` against `target` (a (low, high) pair, inclusive, for "between")."""

    comparator: str
    target: float | tuple[float, float]
    unit: str
    metric: str = ""
    claim: str = ""  # the brief's words: which program or system the figure must be of (another_programs_option)

    def describe(self) -> str:
        """"90th-percentile lead level < 5 ppb", "share between 20 and 30 %"."""
        if isinstance(self.target, tuple):
            goal = f"between {number_text(self.target[0])} and {number_text(self.target[1])} {self.unit}"
        else:
            goal = f"{self.comparator} {number_text(self.target)} {self.unit}"
        return f"{self.metric} {goal}" if self.metric else f"the figure {goal}"


@dataclass(frozen=True)
class ClaimFigure:
    """One figure read from a quote in the contract's unit, as the set of values it allows
    (low..high; an open end excludes itself; a bound like "below 5" has an infinite end)."""

    raw: str
    low: float
    high: float
    low_open: bool
    high_open: bool
    outcome: str  # meets | fails | undecided | restates the target | earlier value | a threshold named


@dataclass(frozen=True)
class QuoteReading:
    """What a quote's figures say about the contract: `stance` supports, contradicts or neutral."""

    stance: str
    figures: tuple[ClaimFigure, ...]
    why: str


@dataclass(frozen=True)
class Quoted:
    """One kept evidence item for contract_verdict: its verbatim quote, its (capped) tier, its source."""

    quote: str
    tier: str | None
    domain: str            # the independence key (independent_source)
    url: str | None = None  # the page or document itself, named where one source decides


# A bound is what a qualifier makes of a figure: "below 5 ppb" allows anything under 5.
_STRICT_UPPER = r"below|under|less\s+than|lower\s+than|fewer\s+than|nearly|almost|just\s+under"
_CLOSED_UPPER = r"at\s+most|up\s+to|no\s+more\s+than|not\s+more\s+than|as\s+much\s+as|a\s+maximum\s+of"
_STRICT_LOWER = (r"above|over|more\s+than|greater\s+than|higher\s+than|exceed(?:s|ed|ing)?|in\s+excess\s+of|"
                 r"just\s+over")
_CLOSED_LOWER = r"at\s+least|no\s+less\s+than|not\s+less\s+than|upwards\s+of|a\s+minimum\s+of"
_BOUND = re.compile(rf"(?<!\w)(?:(?P<su>{_STRICT_UPPER})|(?P<cu>{_CLOSED_UPPER})|(?P<sl>{_STRICT_LOWER})|"
                    rf"(?P<cl>{_CLOSED_LOWER}))\s*$", re.IGNORECASE)
# "fell from 14.2 ppb to 4.6 ppb", "down from 14.2 ppb", "compared with 14.2 ppb": what it was.
_FROM = re.compile(r"(?<!\w)(?:from|compared\s+(?:with|to)|previously|formerly)\s*$", re.IGNORECASE)
# "the 15 ppb action level", "an action level of 15 ppb": a threshold named, not a measurement.
_THRESHOLD_WORDS = (r"action\s+levels?|limits?|targets?|thresholds?|standards?|goals?|benchmarks?|guidelines?|"
                    r"caps?|ceilings?")
_THRESHOLD_AFTER = re.compile(rf"\s*(?:[\w-]+\s+){{0,2}}?(?:{_THRESHOLD_WORDS})\b", re.IGNORECASE)
_THRESHOLD_BEFORE = re.compile(rf"(?<!\w)(?:{_THRESHOLD_WORDS})\s+(?:of|is|was|at|set\s+at)\s*$", re.IGNORECASE)
def _stated_in(amount: Amount, quote: str, unit: str) -> float | None:
    """The amount in `unit`, or None when the quote does not state it in that unit.

    Money and percent units: to_unit decides (a currency or a percent sign is part of the
    amount). A trace or share unit must be written right after a bare number ("7.6 ppb"), or a
    bare count ("148 homes", "2025") would be read as 148 ppb. Any other unit: figure_reading
    (written beside the number, or named before it; never in code, a version or a date)."""
    found = _in_unit(amount, quote, unit)
    return found[0] if found else None


_RATIO_FAMILY: dict[str, str] = {
    "fraction": "share", "percent": "share", "permille": "share", "basis points": "share",
    "ppm": "trace", "ppb": "trace",
}
"""Shares (of homes, of a budget) and trace concentrations are one quantity to arithmetic but not
to a claim: "18% had lead lines" is no reading of a lead level in ppb."""


def _in_unit(amount: Amount, quote: str, unit: str) -> tuple[float, int] | None:
    """(the amount in `unit`, where its unit ends in `quote`), or None (see _stated_in)."""
    value = value_in(amount, unit)
    if value is None:
        return None
    target = parse_unit(unit)
    if target.ratio and amount.ratio and _RATIO_FAMILY[target.ratio] != _RATIO_FAMILY[amount.ratio]:
        return None
    if target.ratio and amount.ratio is None:  # a bare "7.6" is a reading in ppb only with "ppb" after it
        written = _unit_after(unit).match(quote, amount.span[1])
        return (value, written.end()) if written else None
    end, why = figure_reading(amount, quote, unit)  # "$4m", "34 percent" carry their unit; a count says it
    return (value, end) if why is None else None


def _names_a_threshold(quote: str, start: int, end: int) -> bool:
    """"the 15 ppb action level", "a limit of 15 ppb": the figure is a yardstick, not a reading."""
    return bool(_THRESHOLD_AFTER.match(quote, end) or _THRESHOLD_BEFORE.search(quote[max(0, start - 40):start]))


def _decide(contract: Contract, low: float, low_open: bool, high: float, high_open: bool) -> str:
    """meets when every value the figure allows satisfies the contract, fails when none does."""
    c, t = contract.comparator, contract.target
    if isinstance(t, tuple) or c == "between":
        a, b = t if isinstance(t, tuple) else (t, t)
        if low >= a and high <= b:
            return MEETS
        if high < a or (high == a and high_open) or low > b or (low == b and low_open):
            return FAILS
        return UNDECIDED
    if c == "==":
        if low == high:
            return MEETS if math.isclose(low, t, rel_tol=SAME_FIGURE, abs_tol=1e-12) else FAILS
        inside = (low < t or (low == t and not low_open)) and (t < high or (t == high and not high_open))
        return UNDECIDED if inside else FAILS
    meets = {"<": high < t or (high == t and high_open), "<=": high <= t,
             ">": low > t or (low == t and low_open), ">=": low >= t}[c]
    fails = {"<": low >= t, "<=": low > t or (low == t and low_open),
             ">": high <= t, ">=": high < t or (high == t and high_open)}[c]
    return MEETS if meets else FAILS if fails else UNDECIDED


def _at_target(contract: Contract, value: float) -> bool:
    ends = contract.target if isinstance(contract.target, tuple) else (contract.target,)
    return any(math.isclose(value, end, rel_tol=SAME_FIGURE, abs_tol=1e-12) for end in ends)


def quote_figures(contract: Contract, quote: str) -> tuple[ClaimFigure, ...]:
    """Every figure `quote` states in the contract's unit, each judged against the contract.

    Read by code (parse_amounts), never by the model:
    - a figure after "from" ("fell from 14.2 ppb to 4.6 ppb"), "compared with", "previously" is
      an earlier value: not judged;
    - a figure that names a threshold ("the 15 ppb action level", "a limit of 15 ppb") is a
      yardstick, not a reading: not judged;
    - a qualifier makes a bound: "below/under/less than/nearly X" allows values under X,
      "at most/up to X" up to X, "above/over/more than/exceeded X" over X, "at least X" from X;
    - a bound at the target itself ("cut lead below 5 ppb", "exceeded 5 ppb" against a 5 ppb
      target) restates the claim or its denial rather than measuring anything: not judged;
    - "between 4 and 6 ppb" and "4-6 ppb" are one figure, the range;
    - anything else ("a 90th-percentile lead level of 7.6 ppb", "about 7.6 ppb") is that value.
    """
    amounts = parse_amounts(quote)
    figures: list[ClaimFigure] = []
    i = 0
    while i < len(amounts):
        a = amounts[i]
        before = quote[max(0, a.span[0] - 30):a.span[0]]
        earlier = bool(_FROM.search(before))
        nxt = amounts[i + 1] if i + 1 < len(amounts) else None
        is_range = nxt is not None and not earlier and _is_range(quote, a, nxt)
        if another_extreme(contract, quote, a.span[0], amounts[i - 1].span[1] if i > 0 else 0):
            i += 2 if is_range else 1
            continue  # "the minimum size is 1024 bits" against the default size: another quantity's figure
        if nxt is not None and is_range:
            hi = _stated_in(nxt, quote, contract.unit)
            lo = to_unit(a, contract.unit) if hi is not None else None
            if lo is not None and hi is not None:
                lo, hi = min(lo, hi), max(lo, hi)
                figures.append(ClaimFigure(quote[a.span[0]:nxt.span[1]], lo, hi, False, False,
                                      _decide(contract, lo, False, hi, False)))
                i += 2
                continue
        i += 1
        found = _in_unit(a, quote, contract.unit)
        if found is None:
            continue
        value, unit_end = found
        if measures_another_quantity(contract, quote, a.span[0]) is not None:
            continue  # "an interval of 75 seconds" against the idle time: another quantity's figure
        if _names_a_threshold(quote, a.span[0], unit_end):
            figures.append(ClaimFigure(a.raw, value, value, False, False, THRESHOLD))
            continue
        if earlier:
            figures.append(ClaimFigure(a.raw, value, value, False, False, EARLIER))
            continue
        bound = _BOUND.search(before)
        inf = math.inf
        if bound is None and quote.startswith("+", a.span[1]):  # "levels 20+": 20 or more
            low, low_open, high, high_open = value, False, inf, True
        elif bound is None:
            low, low_open, high, high_open = value, False, value, False
        elif bound.group("su") or bound.group("cu"):
            low, low_open, high, high_open = -inf, True, value, bool(bound.group("su"))
        else:
            low, low_open, high, high_open = value, bool(bound.group("sl")), inf, True
        raw = (bound.group(0) if bound else "") + a.raw
        if (bound is not None or math.isinf(high)) and _at_target(contract, value):
            figures.append(ClaimFigure(raw, low, high, low_open, high_open, RESTATES))
            continue
        figures.append(ClaimFigure(raw, low, high, low_open, high_open, _decide(contract, low, low_open, high, high_open)))
    return tuple(figures)


def _is_range(quote: str, a: Amount, b: Amount) -> bool:
    """"4-6 ppb", "4 to 6 ppb", "between 4 and 6 ppb": two amounts that are one range."""
    gap = quote[a.span[1]:b.span[0]]
    if not _RANGE_GAP.fullmatch(gap) or _YEAR.fullmatch(a.raw.strip()):
        return False
    if gap.strip().lower() == "and":
        return bool(re.search(r"between\s*$", quote[:a.span[0]], re.IGNORECASE))
    return True


# Words a manual and a claim use for one quantity's qualifier: a claim of "free stack slots" is read in Lua's
# "at least LUA_MINSTACK extra slots". Kept to words that say the same of a count or a size in any manual.
_SAME_SENSE = {"extra": "free", "spare": "free", "unused": "free"}


def _stem(word: str) -> str:
    """A word less its plural or past ending, enough to match "links" to "link", "needed" to "need", and a
    qualifier as its sense (_SAME_SENSE: "extra" is "free")."""
    word = _SAME_SENSE.get(word, word)
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[:-len(ending)]
    return word


def _stems(text: str) -> set[str]:
    """`text`'s content words, stemmed (_stem): what a metric, a claim, a question and a quote are matched by."""
    return {_stem(w) for w in content_words(text)}


def _metric_words(contract: Contract) -> set[str]:
    """The metric's own words, stemmed, less the unit's ("maximum compression level" in "level": maximum,
    compression): figure_reading already asks for the unit beside the figure, and "LINK 36 Symbolic link"
    (dir_colors(5)) names "symbolic links" but is no count of the symbolic links followed."""
    return _stems(contract.metric) - _stems(contract.unit)


def code_names(metric: str) -> tuple[str, ...]:
    """The code names a metric is said of (decide.CODE_NAME: "http.postBuffer", "PIPE_BUF", "HISTSIZE"): the
    one word that says which of a manual's many settings the claim is about, so a quote of that metric names
    each of them."""
    return tuple(m.group(0) for m in CODE_NAME.finditer(metric))


def names_the_metric(contract: Contract, quote: str) -> bool:
    """True when `quote` names more than half of the metric's own words (_metric_words) and every code name
    in it (code_names), or the contract names no metric, or its unit is money, a share or a trace
    concentration. A count or a size (bytes, seconds, levels) is said of many things in one manual: a figure
    in it from a neighbouring limit ("the default compression level (3)" against the maximum compression
    level, "a large buffer size (for example, 4096 bytes)" against the default input buffer size) is no
    reading of the metric; nor is "the largest ref negotiation request ... (http.maxRequestBuffer) ... 10 MiB"
    one of the http.postBuffer default, however many of the metric's plain words ("http", "default") it has."""
    wanted = _metric_words(contract)
    if not wanted or _money_or_share(contract.unit):
        return True
    folded = quote.lower()
    if any(name.lower() not in folded for name in code_names(contract.metric)):
        return False
    found = wanted & _stems(quote)
    return 2 * len(found) > len(wanted)


# "an interval of 75 seconds", "a half-life of 10 seconds": the noun right before "of" is what the figure
# measures. These nouns say nothing of which quantity (a contract's metric words say that).
_OF_NOUN = re.compile(r"\b([a-z][a-z-]*)\s+of\s+(?:about\s+|approximately\s+|roughly\s+|around\s+)?$", re.IGNORECASE)
_SAYS_NO_QUANTITY = frozenset({"value", "default", "total", "maximum", "minimum", "max", "min", "limit", "amount",
                               "number", "average", "mean", "median", "excess", "upwards", "one", "each"})


# Which extreme of a quantity a text speaks of: "the minimum RSA key size" is not the default key size, and "the
# default is 3072 bits" is not the minimum, though both are RSA key sizes in bits.
_EXTREMES = {"maximum": "maximum", "max": "maximum", "largest": "maximum", "highest": "maximum",
             "greatest": "maximum", "biggest": "maximum", "minimum": "minimum", "min": "minimum",
             "smallest": "minimum", "lowest": "minimum", "fewest": "minimum"}


_EXTREME_BEFORE_WORD = re.compile(rf"\b({_alternation(_EXTREMES)})\s+([A-Za-z][\w-]*)", re.IGNORECASE)


def _extremes(text: str) -> list[str]:
    """The extremes `text` names, in order ("... below a minimum, and there is a maximum value": minimum,
    maximum): the last is the one said of a figure after it."""
    return [_EXTREMES[w] for w in re.findall(r"[a-z]+", text.lower()) if w in _EXTREMES]


def figure_subject(quote: str, start: int, after: int = 0) -> str:
    """What the figure at `start` is said of: its clause (from its sentence's start, or from the end `after`
    of the figure before it in that sentence), or, when its sentence names nothing of its own ("The default
    is 1024 bits.": decide.leans_on_before), the sentences of its paragraph before it."""
    own = _sentence_starts(quote, start)[-1]
    own += len(quote[own:start]) - len(quote[own:start].lstrip())  # the sentence's first word, not the break
    if after > own:
        return quote[after:start]
    above = _leaned_on_from(quote, own)
    if not leans_on_before(quote[own:start + 1], quote[above:own]):
        return quote[own:start]
    return quote[max(above, start - ENTRY_MAX_CHARS):start]


def another_extreme(contract: Contract, quote: str, start: int, after: int = 0) -> str | None:
    """Why the figure at `start` is another extreme of a quantity than the metric's, or None. A metric that
    names an extreme ("minimum RSA key size") is read only from a figure said to be that extreme (the last
    one named before it: "below a minimum, and there is a maximum value (currently 8192)" is the maximum);
    one that names none ("default RSA key size") not from a figure said of an extreme of the metric's own
    words ("the minimum RSA key size", "the minimum size"), while "the maximum number of symbolic links"
    still reads "symbolic links followed", and "Maximum size in bytes of the buffer ... Default is 1 MiB"
    the http.postBuffer default. ssh_config(5)'s "Specifies the minimum RSA key size (in bits) that ssh(1)
    will accept. ... The default is 1024 bits." is so no reading of the default RSA key size ssh-keygen(1)
    makes, and ssh-keygen(1)'s "For RSA keys, the minimum size is 1024 bits and the default is 3072 bits."
    gives the minimum in its first clause and the default in its second."""
    if _money_or_share(contract.unit):
        return None  # money and shares: their unit says what is measured (names_the_metric)
    wanted = set(_extremes(contract.metric))
    subject = figure_subject(quote, start, after)
    named = _extremes(subject)
    said = named[-1] if named else None
    if wanted and said not in wanted:
        return f"not said to be the {sorted(wanted)[0]}"
    if not wanted and said is not None:
        words = _metric_words(contract)
        for match in _EXTREME_BEFORE_WORD.finditer(subject):
            if _stem(match.group(2).lower()) in words:
                return f"said of the {_EXTREMES[match.group(1).lower()]} {match.group(2)}"
    return None


def measures_another_quantity(contract: Contract, quote: str, start: int) -> str | None:
    """The other quantity a contract's figure at `start` is said of ("an interval of 75 seconds": interval),
    or None. Where a count or a size is "the <noun> of N", the noun names what N measures: a noun that is
    none of the metric's words is another quantity, however much of the metric the rest of the quote
    names (tcp(7)'s "An idle connection is terminated after approximately an additional 11 minutes (9
    probes an interval of 75 seconds apart) when keep-alive is enabled." names the idle time before
    keep-alive probes, but its 75 seconds are the interval between probes). Money, shares and trace
    concentrations are read as before (names_the_metric): their unit says what is measured."""
    wanted = _metric_words(contract)
    if not wanted or _money_or_share(contract.unit):
        return None
    noun = _quantity_noun(quote, start)
    return None if noun is None or _stem(noun) in wanted else noun


def _quantity_noun(quote: str, start: int) -> str | None:
    """The noun that says what the figure at `start` measures when it is "the <noun> of N" ("an interval of
    75 seconds": interval), or None (no such noun, or one that says no quantity: "a value of", "a maximum of").
    measures_another_quantity asks it of a contract's metric, another_quantity_asked of an estimate's question."""
    said = _OF_NOUN.search(quote[max(0, start - 40):start])
    noun = said.group(1).lower() if said else None
    return None if noun is None or noun in _SAYS_NO_QUANTITY else noun


# A man page documents one program or interface, and its file is named for it: "curl.1.txt" (the lab's),
# "curl.1.en.html" (manpages.debian.org), "man1/curl.1.html" (man7.org), "ssh_config.5.gz".
_MAN_PAGE = re.compile(r"([A-Za-z][\w+-]*)\.[1-9][a-z]*(?:\.[a-z]{2}(?:_[A-Z]{2})?)?(?:\.(?:txt|html?|gz))?")
# What a man page says of "this option" or "the option" is said of one of its program's options.
_AN_OPTION = re.compile(r"\b(?:this|the)\s+option\b", re.IGNORECASE)


def man_page_names(url: str | None) -> set[str]:
    """The words a man page's file is named for ("ssh_config.5.txt": ssh, config), or none when `url` names no
    man page (a manual's "manual.html" or "bashref.html" is named for no one program)."""
    if not url:
        return set()
    name = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    page = _MAN_PAGE.fullmatch(name)
    if page is None:
        return set()
    return {_stem(w) for w in re.split(r"[\W_]+", page.group(1).lower()) if len(w) >= 2}


def another_programs_option(contract: Contract, quote: str, url: str | None) -> str | None:
    """Why the quote's figures are the value of an option of a program the claim is not about, or None.

    A man page's "this option" is its program's: curl(1)'s "This option sets the time a connection needs to
    remain idle before sending keepalive probes ... If unspecified, the option defaults to 60 seconds." names
    the metric of "Linux TCP waits more than 3600 seconds of idle time before it sends keep-alive probes", but
    its 60 seconds are curl's --keepalive-time, not the kernel's (tcp(7): 7200 seconds). It still reads a claim
    that names the program ("curl follows at most 50 redirects"). Only a man page's file says which program it
    documents; a claim that names none (Contract.claim empty) is read as before."""
    if not contract.claim or not _AN_OPTION.search(quote):
        return None
    names = man_page_names(url)
    claimed = _stems(f"{contract.claim} {contract.metric}")
    if not names or names & claimed:
        return None
    return f"an option of {'/'.join(sorted(names))}, which the claim does not name"


def quote_stance(contract: Contract, quote: str, url: str | None = None) -> QuoteReading:
    """The quote's stance on the contract, from its figures alone (the model's label plays no part).

    supports: at least one figure meets the contract and none fails it; contradicts: at least
    one fails and none meets; neutral: no figure in the unit decides, or figures on both sides
    (the quote gives two readings and code cannot tell which one is the metric), or the quote
    does not name the metric (names_the_metric: its figures are another quantity's), or its
    figures are an option of a program the claim is not about (another_programs_option: `url`
    is the quote's page or document)."""
    if not names_the_metric(contract, quote):
        return QuoteReading("neutral", (), f"does not name the metric ({contract.metric})")
    other = another_programs_option(contract, quote, url)
    if other is not None:
        return QuoteReading("neutral", (), other)
    figures = quote_figures(contract, quote)
    outcomes = {f.outcome for f in figures}
    if MEETS in outcomes and FAILS in outcomes:
        return QuoteReading("neutral", figures, "figures on both sides of the target")
    if FAILS in outcomes:
        return QuoteReading("contradicts", figures, "a figure fails the contract")
    if MEETS in outcomes:
        return QuoteReading("supports", figures, "a figure meets the contract")
    why = f"no figure in {contract.unit} that decides" if figures else f"no figure in {contract.unit}"
    return QuoteReading("neutral", figures, why)


# One source suffices for a contract when code read its figure (never the model's label) in a
# source of these tiers: the organisation's source_tiers rule says the document is the authority
# (a product's own manual, a regulator's own filing), or the host is a government's (capped_tier).
# A second source is asked for everywhere else because any one page may be wrong; the authority
# on a fact is not corroborated by a blog repeating it. It decides only where no credible quote
# reads the other way: where sources disagree, the weighing (_weigh) decides, as before.
ONE_SOURCE_TIERS: tuple[str, ...] = ("regulator",)


def _one_source(stances: Sequence[Stance], torn: bool = False) -> tuple[str, str] | None:
    """(stance, domain) when an authoritative source decides alone; None otherwise.

    The stance is the one every credible stance takes (supports or contradicts), and a source
    of ONE_SOURCE_TIERS takes it; any credible stance on the other side, from any source,
    including another quote of the same document, means the sources disagree. `torn`: a
    credible quote states figures on both sides of the target (neutral, as code cannot tell
    which one is the metric): that is disagreement too, so one source cannot settle it."""
    if torn:
        return None
    sides: set[str] = set()
    deciding: list[str] = []
    for item in stances:
        if item.stance not in ("supports", "contradicts"):
            continue
        tier = normalize_tier(item.tier)
        if tier_confidence(tier, item.confidence) < CREDIBLE:
            continue
        sides.add(item.stance)
        if tier in ONE_SOURCE_TIERS:
            deciding.append(item.url or item.domain)
    if len(sides) != 1 or not deciding:
        return None
    return sides.pop(), min(deciding)


def contract_verdict(contract: Contract, quotes: Sequence[Quoted]) -> Verdict:
    """The verdict of a hypothesis with a contract: `deterministic`.

    Each quote's stance is quote_stance's, computed from the figures code reads in it; the
    model's stance label is never used, so a quote stating "a 90th-percentile lead level of
    7.6 ppb" counts against "< 5 ppb" whatever the model called it. Each quote weighs what
    its source's tier allows (TIER_CAPS: the tier is the organisation's source_tiers rule or
    the model's label capped by capped_tier), not the model's confidence, and the quotes are
    weighed by the same rule as `verdict` (independent domains, 1.2, 2x, no equal-or-higher
    tier against). Where that leaves it inconclusive, one source decides when it is of
    ONE_SOURCE_TIERS and no credible quote disagrees (_one_source): the rule says "one source".
    """
    stances: list[Stance] = []
    counted = {"supports": 0, "contradicts": 0, "neutral": 0}
    torn = False
    for item in quotes:
        reading = quote_stance(contract, item.quote, item.url)
        counted[reading.stance] += 1
        tier = normalize_tier(item.tier)
        stances.append(Stance(stance=reading.stance, confidence=TIER_CAPS[tier], tier=tier, domain=item.domain,
                              url=item.url))
        outcomes = {f.outcome for f in reading.figures}
        torn = torn or (MEETS in outcomes and FAILS in outcomes and TIER_CAPS[tier] >= CREDIBLE)
    weighed = _weigh(stances, DETERMINISTIC)
    head = (f"contract {contract.describe()}: {counted['supports']} quote(s) with a figure that meets it, "
            f"{counted['contradicts']} with one that fails it, {counted['neutral']} with none that decides")
    alone = _one_source(stances, torn) if weighed.value == "inconclusive" else None
    if alone is None:
        return replace(weighed, rule=f"{head}; {weighed.rule}")
    stance, domain = alone
    value = "supported" if stance == "supports" else "refuted"
    tiers = " or ".join(ONE_SOURCE_TIERS)
    why = (f"{value}: one source suffices: code read a figure that {'meets' if value == 'supported' else 'fails'} "
           f"the contract in a {tiers} source ({domain}), and no credible source disagrees")
    return replace(weighed, value=value, rule=f"{head}; {why}")
