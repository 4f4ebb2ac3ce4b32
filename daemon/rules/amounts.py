"""Amounts read from text: numbers with their currency, scale and share, and the money and share units.

Pure, typed, no I/O. parse_amounts finds every number in a text ("$410 million", "US$0.43bn", "34 percent",
"7.6 ppb", "ten billion", "twice"); parse_unit and to_unit read a brief's money or share unit and convert an
amount into it (a currency never into another: no exchange rates offline). Durations and data sizes are the
units library's (units.py); which amount a quote states as the quantity asked is figures.py's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable




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


# "each TCP request twice": a count written as an adverb of how many times ("once" is left out: it opens
# clauses as often as it counts).
_NUMBER_WORDS.update({"twice": 2, "thrice": 3})


_TENS: dict[str, int] = {w: 20 + 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}


def alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


_ONES = alternation(w for w in _NUMBER_WORDS if 0 < _NUMBER_WORDS[w] < 10)


_WORD_NUMBER = (rf"(?:(?:{alternation(_TENS)})(?:[-\s](?:{_ONES}))?|(?:{alternation(_NUMBER_WORDS)}))"
                rf"(?:\s+hundred)?\b")


_AMOUNT = re.compile(
    rf"""
    (?<![\w.])                                            # not inside a word or another number
    (?P<sign>[-\u2212](?=[\d.$€£¥₹])|\bminus\s+)?
    (?:(?P<symbol>{alternation(_SYMBOLS)})\s?|(?P<code>{"|".join(_CODES)})\s?)?
    (?P<num>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+|{_WORD_NUMBER})
    (?P<ordinal>(?:st|nd|rd|th)\b)?
    (?:\s?(?P<scale>thousands?|millions?|billions?|trillions?|mln|mn|bln|bn|trn|tn)\b
       |(?P<short>[kmb])(?![a-z]))?
    (?:\s?(?P<pct>{_RATIO_TEXT}))?
    (?:\s(?P<word>{alternation(_WORDS)}|{"|".join(_CODES)})\b)?
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


YEAR = re.compile(r"1[89]\d\d|20\d\d|2100")


RANGE_GAP = re.compile(r"\s*(?:-|–|—|\.\.|to|and|through|thru)\s*", re.IGNORECASE)


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
        if not RANGE_GAP.fullmatch(gap):
            continue
        if gap.strip().lower() == "and" and not re.search(r"between\s*$", text[:a.span[0]], re.I):
            continue
        if YEAR.fullmatch(a.raw.strip()):  # "rose in 2024 to $2.27 billion": a year, not an end of a range
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
    word = re.search(rf"\b({alternation(_WORDS)})\b", text, re.I)
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


def tidy(x: float) -> float:
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
            return tidy(amount.value * RATIOS[amount.ratio] / RATIOS[target.ratio])
        bare = amount.ratio is None and amount.currency is None and amount.scale_word is None
        return tidy(amount.value) if bare and target.ratio not in (None, "percent") else None
    if amount.currency is not None and amount.currency != target.currency:
        return None
    if target.currency is not None and amount.currency is None and amount.scale_word is None:
        return None
    scale = SCALES[amount.scale_word] if amount.scale_word else 1.0
    return tidy(amount.value * scale / target.scale)


# Two figures are the same when within 1 %: the rounding a quoted figure carries.
SAME_FIGURE = 0.01
