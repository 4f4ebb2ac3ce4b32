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

from . import units
from .decide import CODE_NAME, ENTRY_MAX_CHARS, STOPWORDS, content_words, is_term_line, leans_on_before
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
# "each TCP request twice": a count written as an adverb of how many times ("once" is left out: it opens
# clauses as often as it counts).
_NUMBER_WORDS.update({"twice": 2, "thrice": 3})
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
_RANGE_GAP = re.compile(r"\s*(?:-|–|—|to|and|through|thru)\s*", re.IGNORECASE)


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
    return any(r.value is not None and _close(value, r.value, rel_tol)
               for r in stated_amounts(quote, unit) if r.why is None)


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

# Shares and trace concentrations a manual writes in more than one way: a figure followed by any name of its
# group is in that unit. Durations and sizes are the units library's (units.py); a count's noun is its own.
_UNIT_NAMES: tuple[tuple[str, ...], ...] = (
    ("ppb", "parts per billion", "parts-per-billion"), ("ppm", "parts per million", "parts-per-million"),
    ("ppt", "parts per trillion", "parts-per-trillion"),
)


def _is_unit_word(word: str) -> bool:
    """Whether `word`, written against a number, is a unit of its own ("8MB", "2 hours", "7 ppb"): a count's figure
    with one beside it is that unit's, not the brief's."""
    return bool(units.unit_of_word(word, units.TIME) or units.unit_of_word(word, units.SIZE)) or \
        any(word.lower() in (n.lower() for n in group) for group in _UNIT_NAMES)


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
    between = r"(?:[a-z][\w-]*\s+){0,2}?"
    return re.compile(rf"[\s-]?{between}(?:{words})(?![\w-])", re.IGNORECASE)


# Code, a formula or a command line around a number: "make MAX_CONNECTIONS=5 check", "-DOS_OTHER=1",
# "LALR(1)", "fork(2)", "Defaults to RuntimeDirectorySize= divided by 4096", "curl --max-redirs 3 --location".
# "+" and "/" are operators between operands ("a + 6", "24/7"), not a sign ("rose +5%"); so is "-" after a
# name ("size-1 bytes"), not between two numbers ("4-6 ppb", a range).
_CODE_BEFORE = re.compile(r"(?:[=*^]\s*|[\w)][/+]|[A-Za-z_)]-|[\s)][/+]\s+|\w\(|(?<!\S)--?[A-Za-z][\w-]*\s+|"
                          r"\b(?:divided|multiplied)\s+by\s+|\bmodulo\s+)$", re.IGNORECASE)
# A line that sets one name to the figure ("session.gc_maxlifetime = 1440", "; maximum_icp_query_timeout 2000" in an
# annotated configuration file) is the value of that setting, not code around another figure.
_ASSIGNMENT_LINE = re.compile(r"(?:^|\s)(?<!-)[A-Za-z_][\w.-]*\s*(?:=|:|\s)\s*$")
_CODE_AFTER = re.compile(r"\)*\s*(?:[=*/^]|\s\+\s*[\w(]|\+[\w(])")
# A version or a reference: "2.6.11", "since Linux 2.2", "Lua 5.2", "section 6.2", "page 24", "RFC 1122".
_VERSION_AFTER = re.compile(r"\.\d")
_NAME_BEFORE = re.compile(
    r"(?<![\w.])(?:version|release|v|rev|revision|page|pages|p\.|pp\.|section|sections|chapter|rfc|figure|"
    r"fig\.|table|step|appendix|posix\.?|iso|ieee|std|draft|issue|no\.|#|port|ports|uid|gid|pid|signal)\s*\(?\s*$",
    re.IGNORECASE)
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
# How far before a figure its unit may be named in its subject: this sentence and the one before it ("Number
# of minutes that can elapse before sudo will ask for a password again. ... The default is 15."), not a whole
# table or page; and never more than SUBJECT_CHARS back (unit_named_before reads the rest of its entry).
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
    return word if attached or _is_unit_word(word) else ""


_DIGITS = re.compile(r"[-\u2212]?\s*(?:\d[\d,]*(?:\.\d+)?|\.\d+)")
# What may write a unit right after a figure: "30s", "100ms", "10min", "48K", "64 KB", "1.5 hours", "a 60-second
# maximum", "3700 kbytes", "256 KiB/s".
_UNIT_WORD_AFTER = re.compile(r"(?:\s?|-)([A-Za-zµμ]+(?:/[A-Za-z]+)?)(?![\w])")


def _digits_end(quote: str, amount: Amount) -> int:
    """Where the figure's number ends: before a letter the amount took as a scale word ("48K", "4k", "50M"),
    which against a size or a duration is its unit (units._SIZE_LETTERS, _TIME_LETTERS)."""
    digits = _DIGITS.match(amount.raw)
    if digits is None or amount.scale_word is None or not re.search(r"[kKmMbB]$", amount.raw):
        return amount.span[1]
    return amount.span[0] + digits.end()


def written_unit(quote: str, amount: Amount, dimension: str) -> tuple[str, int] | None:
    """(pint's unit, where it ends) of the unit written right after `amount`, read for a quantity of
    `dimension` (units.TIME, units.SIZE: then a configuration file's letters count, "30s", "48K"), or None."""
    end = _digits_end(quote, amount)
    match = _UNIT_WORD_AFTER.match(quote, end)
    if match is None:
        return None
    word = match.group(1)
    attached = match.start(1) == end
    if not attached and len(word) <= 2 and word.lower() not in ("ms", "us", "µs", "kb", "mb", "gb", "tb", "k"):
        found = None  # "5 s" is a unit, but "20 a day", "3 m from": spaced letters are words as often
        if word.lower() in ("s", "h", "d", "w", "m") and dimension == units.TIME:
            found = units.unit_of_word(word, dimension)
    else:
        found = units.unit_of_word(word, dimension)
    return (found, match.end(1)) if found else None


# A unit named as a word before a figure ("Number of minutes ... The default is 15.", "in bits", "(msec)",
# "timeout in seconds"): not a unit written right after another number ("(half-life of 10 seconds) ...
# times 1000": the seconds are the 10's), nor a rate's denominator ("per second").
_A_WORD = re.compile(r"[A-Za-zµμ]+")


def _units_named(text: str, dimension: str) -> list[tuple[int, str]]:
    """(where, pint's unit) of each unit of `dimension` named as a word in `text`, in order: a word pint knows
    ("seconds", "milliseconds", "bytes", "KiB"), a configuration file's word of three letters or more ("msec",
    "secs", "kbytes"), or a unit inside a setting's name ("InhibitDelayMaxSec=", "timeout_ms")."""
    found: list[tuple[int, str]] = []
    for match in _A_WORD.finditer(text):
        word = match.group(0)
        before = text[max(0, match.start() - 8):match.start()]
        if re.search(r"\d[\s-]?$", before) or re.search(r"\bper\s+$", before, re.IGNORECASE):
            continue
        unit = units.unit_of_word(word, dimension if len(word) >= 3 else "")
        if unit is None:
            for part in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", word)[1:]:  # "InhibitDelayMaxSec" -> Sec
                unit = units.unit_of_word(part, dimension if len(part) >= 2 else "")
                if unit is not None:
                    break
        if unit is not None and units.dimension_of(unit) == dimension:
            found.append((match.start(), unit))
    return found


def unit_named_before(quote: str, start: int, dimension: str, lead: str = "") -> str | None:
    """pint's unit of `dimension` the text before the figure at `start` names for it: the nearest one in its
    subject (_subject_before), else in the rest of the quote before it, else in `lead` (the passage before
    the quote: a definition's term line, "maximum_icp_query_timeout (msec)"), else None."""
    entry = _entry_start(quote, start)
    texts = [_subject_before(quote, start), quote[entry:start]]
    if entry == 0:  # the figure's entry began before the quote: its term line or first sentence may be there
        texts.append(_entry_of(lead))
    for text in texts:
        named = _units_named(text, dimension)
        if named:
            return named[-1][1]
    return None


def _entry_start(quote: str, start: int) -> int:
    """Where the entry the figure at `start` belongs to begins in `quote`: its paragraph's start, or a term line
    of its paragraph ("tcp_keepalive_probes (integer; default: 9; ...)" begins an entry of its own, so the line
    above, another entry's "The number of seconds between ...", names no unit of its figure)."""
    paragraph = quote.rfind("\n\n", 0, start)
    begin = paragraph + 2 if paragraph >= 0 else 0
    line_start = quote.rfind("\n", 0, start) + 1
    while line_start > begin:
        line_end = quote.find("\n", line_start)
        if is_term_line(quote[line_start:line_end if line_end >= 0 else len(quote)]):
            return line_start
        line_start = quote.rfind("\n", 0, line_start - 1) + 1
    return begin


def _entry_of(lead: str) -> str:
    """The end of the text before a quote that may name what the quote's figure is in: its last paragraph,
    within ENTRY_MAX_CHARS (a definition's term line and the sentences under it)."""
    tail = lead[-ENTRY_MAX_CHARS:]
    cut = tail.rfind("\n\n")
    return tail[cut + 2:] if cut >= 0 else tail


def size_letter(amount: Amount, unit: str) -> bool:
    """Whether `amount` is written with one letter that against a data size is its unit ("512K", "64M", "4k")."""
    return units.measure(unit).dimension == units.SIZE and amount.scale_word is not None \
        and re.fullmatch(r"[\d,.]+\s?[kKmMgGbB]", amount.raw.strip()) is not None


@dataclass(frozen=True)
class Stated:
    """How `quote` states one amount as the brief's quantity: `value` in the brief's unit, or `why` not;
    `written` the number as the quote writes it in its own unit (what a model may copy: 30 of "30s" asked in
    ms); `end` where its unit ends (the amount's end when no unit is written after it)."""

    amount: Amount
    value: float | None
    why: str | None
    written: float | None = None
    end: int = -1


def _scaled(amount: Amount) -> float:
    """The amount with its scale word ("1 billion"), not a letter that is its unit ("48K", "5m", "10k")."""
    letter = re.search(r"\d\s?[kKmMbB]$", amount.raw.strip()) is not None
    return amount.value * (SCALES[amount.scale_word] if amount.scale_word and not letter else 1.0)


def _quantity_value(amount: Amount, quote: str, unit: str, lead: str) -> Stated:
    """A duration's or a data size's amount (units.measure): its unit written after it ("30s", "2 hours",
    "48K"), else named before it ("Number of minutes ... The default is 15."), converted to `unit` by pint."""
    target = units.measure(unit)
    start, end = amount.span
    base_1000 = bool(units.SIZE_BASE_1000.search(f"{lead[-ENTRY_MAX_CHARS:]} {quote}"))
    written = written_unit(quote, amount, target.dimension)
    if written is None and size_letter(amount, unit):
        letter = amount.raw.strip()[-1]
        written = (units.unit_of_word(letter, units.SIZE) or "", amount.span[1])
    number = _scaled(amount)
    if written is not None:
        written_in, unit_end = written
        value = units.convert(number, written_in, target.unit, base_1000=base_1000)
        if value is None:
            return Stated(amount, None, f"{OTHER_UNIT} ({quote[_digits_end(quote, amount):unit_end].strip()})")
        if _EACH.match(quote, unit_end):
            return Stated(amount, None, f"{NOT_THE_QUANTITY} (the size of each of many things)")
        return Stated(amount, value, None, number, unit_end)
    other = _beside(quote, amount)
    if other:
        return Stated(amount, None, f"{OTHER_UNIT} ({other})")
    why = _not_a_figure(amount, quote, start, end)
    if why:
        return Stated(amount, None, why)
    source = unit_named_before(quote, start, target.dimension, lead) if amount.value >= 0 else None
    if source is not None and _CLAUSE_GOES_ON.match(quote, end):
        value = units.convert(number, source, target.unit, base_1000=base_1000)
        if value is not None:
            return Stated(amount, value, None, number, end)
    return Stated(amount, None, f"{NOT_THE_QUANTITY} (no {unit} beside it)")


def _not_a_figure(amount: Amount, quote: str, start: int, end: int, unit: str = "") -> str | None:
    """Why a number with no unit after it is a version, a name's number, a reference or a date, or None. A
    name that is the brief's unit itself ("port 4433" asked as a port, "version 1" as a version) is the figure."""
    back = max(0, start - 40)
    name = _NAME_BEFORE.search(quote, back, start) or _NAME_BEFORE_CASED.search(quote, back, start)
    named_unit = name is not None and units.singular(re.sub(r"[\s(]+$", "", name.group(0)).strip()) \
        == units.singular(unit)
    if (_VERSION_AFTER.match(quote, end) and not named_unit) or (name is not None and not named_unit):
        return f"{NOT_THE_QUANTITY} (a version, a name's number or a reference)"
    year = bool(_YEAR.fullmatch(amount.raw.strip()))
    if _DATE_AFTER.match(quote, end) or (year and _DATE_BEFORE.search(quote, back, start)):
        return f"{NOT_THE_QUANTITY} (a date)"
    return None


# "tries each request 5 times", "reboot the testbed two times": how many times a thing is done counts it.
_TIMES = re.compile(r"\s+times\b", re.IGNORECASE)
# A level given as its command-line option: "The default is -6." (gzip, xz): a dash right after a space or "is",
# the digits ending the clause; a negative value is written "-1" too, so only a single digit after "default
# is", "level", "preset" reads so.
_OPTION_FIGURE = re.compile(r"(?:default(?:\s+\w+){0,2}\s+is|level|preset)\s+-\d$", re.IGNORECASE)


def _count_value(amount: Amount, quote: str, unit: str, lead: str) -> Stated:
    """A count's amount ("100 connections", "retries"): its noun after it (up to two words between: "64
    outstanding requests"), or a bare number that ends its clause ("The default is 50.", "defaults to 4",
    "tried twice"), which is the value of what the text is about: whether that is the quantity asked is the
    question's rule's (another_quantity_asked, role_conflict) and the quote filter's (steps.skipped_quote)."""
    start, end = amount.span
    written = _unit_after(unit).match(quote, end) or _TIMES.match(quote, end)
    if written is not None:
        if _EACH.match(quote, written.end()):
            return Stated(amount, None, f"{NOT_THE_QUANTITY} (the size of each of many things)")
        counted = amount.value * (SCALES[amount.scale_word] if amount.scale_word else 1.0)
        return Stated(amount, counted, None, amount.value, written.end())
    other = _beside(quote, amount)
    if other:
        return Stated(amount, None, f"{OTHER_UNIT} ({other})")
    why = _not_a_figure(amount, quote, start, end, unit)
    if why:
        return Stated(amount, None, why)
    # A negative bare number is a setting's special value ("Set this option to -1 to make it unlimited"), and
    # a bare "one" a pronoun as often as a number ("an orphaned symbolic link (one which points ...)").
    if amount.value < 0 and _OPTION_FIGURE.search(quote, 0, end) and _CLAUSE_GOES_ON.match(quote, end):
        return Stated(amount, -amount.value, None, -amount.value, end)  # "The default is -6.": level 6
    if amount.value >= 0 and amount.raw.lower() != "one" and _CLAUSE_GOES_ON.match(quote, end):
        return Stated(amount, amount.value, None, amount.value, end)
    return Stated(amount, None, f"{NOT_THE_QUANTITY} (no {unit} beside it)")


def figure_reading(amount: Amount, quote: str, unit: str, lead: str = "") -> Stated:
    """Whether `quote` states `amount` as a quantity in `unit`, and its value in `unit`.

    A figure counts when its unit is written beside it ("100 connections", "30s", "2 hours", "48K", "64
    outstanding requests") and converts to the brief's (units.convert: 2 hours is 7200 seconds), or, for a
    duration or a size, is named before it in its subject, the quote before it or the definition it leans on
    (`lead`, the passage before the quote: "Number of minutes that can elapse ... The default is 15.",
    "InhibitDelayMaxSec= ... Defaults to 5.") with nothing after the figure that makes it a count of something
    else; a count's bare figure that ends its clause counts too ("This defaults to 50."). It never counts
    inside code, a formula or a command line ("make MAX_CONNECTIONS=5 check", "+ 6) / 16", "LALR(1)", "curl
    --max-redirs 3"), as a version or a reference ("Linux 2.6.11", "section 6.2"), as a date, as an earlier
    release's value ("Before Linux 2.6.18, the limit ... was 5"), in a unit that does not convert ("8MB" is no
    count of file descriptors) or as the size of each of many things ("rows of 12 bytes each"). Money and
    shares carry their unit in the amount (to_unit decides); the code and formula rule holds for them too. Nor
    does a case in a condition ("When the value in this file is 1, symbolic links are followed only ...").
    """
    start, end = amount.span
    back = max(0, start - 40)
    line = quote.rfind("\n", 0, start) + 1
    assigned = bool(_ASSIGNMENT_LINE.match(quote[line:start])) and not quote[end:].split("\n", 1)[0].strip(" ;")
    if not assigned and (_CODE_BEFORE.search(quote, back, start) or _CODE_AFTER.match(quote, end)):
        return Stated(amount, None, f"{NOT_THE_QUANTITY} (inside code, a formula or a command line)")
    own = _sentence_starts(quote, start)[-1]
    if _EARLIER_RELEASE.match(quote, own, start):
        return Stated(amount, None, f"{NOT_THE_QUANTITY} (an earlier release's value)")
    if _CONDITION.search(quote, max(back - 80, own), start):
        return Stated(amount, None, f"{NOT_THE_QUANTITY} (a case in a condition: \"if ... is N\")")
    if _money_or_share(unit) or amount.currency is not None or amount.ratio is not None:
        value = to_unit(amount, unit)  # the amount carries its unit: to_unit says whether it is the brief's
        return Stated(amount, value if value is not None and math.isfinite(value) else None, None, amount.value, end)
    if units.measure(unit).is_count:
        return _count_value(amount, quote, unit, lead)
    return _quantity_value(amount, quote, unit, lead)


# A setting's name as a manual writes it: a code name (decide.CODE_NAME) or a hyphenated one ("Cache-Grow",
# "Max-ValidTime").
_SETTING_NAME = re.compile(rf"{CODE_NAME.pattern}|(?<![\w.-])[A-Z][a-z]+(?:-[A-Z][A-Za-z]+)+(?![\w-])")
# Parts of a setting's name that say nothing of which quantity it is ("mke2fs.conf", "default_bits").
_GENERIC_PARTS = frozenset({"conf", "cfg", "config", "file", "dir", "path", "opt", "opts", "option", "options",
                            "default", "defaults", "value", "set", "get", "enable", "enabled", "use", "max", "min",
                            "num", "the", "per", "sys", "etc"})
# A question's superlatives name a quantity and its extreme: "the largest message" asks a message's size limit.
_SUPERLATIVES = {"largest": "max size limit large", "biggest": "max size limit", "longest": "max length time limit",
                 "shortest": "min length time", "smallest": "min size", "highest": "max limit high",
                 "lowest": "min low", "most": "max limit", "least": "min", "fewest": "min"}


def name_parts(name: str) -> set[str]:
    """The words of a setting's name, stemmed, less the generic ones: "message_size_limit" -> message, size,
    limit; "InhibitDelayMaxSec" -> inhibit, delay, sec; "mke2fs.conf" -> mke2fs."""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d*[a-z]+\d+[a-z\d]*", name) or [name]
    return {_stem(w.lower()) for w in words if len(w) >= 2 and w.lower() not in _GENERIC_PARTS}


def question_words(asked: str) -> set[str]:
    """A question's words as a quote's are matched against them: stemmed, its superlatives with the quantity
    they ask (_SUPERLATIVES), and the parts of the names it writes."""
    words = _stems(asked) | {_stem(w) for w in re.findall(r"[a-z]+", asked.lower())}
    for word, means in _SUPERLATIVES.items():
        if re.search(rf"\b{word}\b", asked, re.IGNORECASE):
            words |= {_stem(w) for w in means.split()}
    for name in _SETTING_NAME.finditer(asked):
        words |= name_parts(name.group(0))
    return words


# Nouns that name a duration or a size itself, whatever it is of: "a 5s timeout" is the duration asked.
_QUANTITY_NOUNS = frozenset({"timeout", "delay", "interval", "period", "duration", "wait", "time", "lifetime",
                             "size", "length", "amount", "total"})
_ATTRIBUTE_OF = re.compile(r"[-\s]+([a-z][a-z-]{2,})\b(?!\s+(?:of|is|are|was|were|to|from|in|on|at|by|for)\b)")


def _defined_as_asked(name: str, before: str, wanted: set[str]) -> bool:
    """Whether a sentence before the figure that names `name` says, in the question's words, what it is: "Whenever
    Lua calls C, it ensures that the stack has at least LUA_MINSTACK extra slots." makes LUA_MINSTACK a count of
    free stack slots (two of the question's words at least, besides the name's)."""
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", before):
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", sentence) and \
                len(_words_of(sentence.replace(name, " ")) & wanted - STOP_STEMS - _ROLE_WORDS) >= 2:
            return True
    return False


def another_quantity_asked(amount: Amount, quote: str, asked: str, unit_end: int = -1) -> str | None:
    """Why `amount`, stated in the brief's unit, is still not the quantity the question `asked` about, or None.

    An estimate has no metric; its question says what is measured, and a manual states many quantities in one
    unit side by side. Two shapes say plainly that a figure is another one's:
    - its own clause (since the last comma) is said of a setting whose name is not the question's: fewer than
      half of the name's words (name_parts) are the question's (question_words). "(On Linux, PIPE_BUF is 4096
      bytes.)" and "The default value for msgsize_max is 8192 bytes." are no capacity of a pipe; "Cache-Grow
      defines ... the default of 1048576" is no Cache-Start; but "message_size_limit ... Default: 50M" is the
      largest message, and "retry_data_expire (default 7 days)" how long old retry data is kept;
    - it is "the <noun> of N" and the question has no such word: "(i.e., 65,536 bytes in a system with a page
      size of 4096 bytes)" gives 4096 as a page size, not the pipe's capacity."""
    if not asked:
        return None
    start = amount.span[0]
    sentence = quote[_sentence_starts(quote, start)[-1]:start]
    breaks = list(re.finditer(r"[,;(]", sentence))
    clause = sentence[breaks[-1].end():] if breaks else sentence
    wanted = question_words(asked)
    folded = asked.lower()
    for name in _SETTING_NAME.finditer(clause):
        parts = name_parts(name.group(0))
        if name.group(0).lower() in folded or not parts or 2 * len(parts & wanted) > len(parts):
            continue
        if not _defined_as_asked(name.group(0), quote[:start], wanted):
            return f"{NOT_THE_QUANTITY} (said of {name.group(0)}, which the question does not name)"
    noun = _quantity_noun(quote, start)
    if noun is not None and _stem(noun) not in _stems(asked):
        return f"{NOT_THE_QUANTITY} (a {noun}, which the question does not ask about)"
    # "a 1024 byte buffer", "an 8 KiB page": the figure, right after "a", is the size of the noun after its unit
    attribute = _ATTRIBUTE_OF.match(quote, unit_end) if unit_end > amount.span[1] and \
        re.search(r"\b(?:an?|the)\s+$", quote[max(0, start - 6):start], re.IGNORECASE) else None
    if attribute is not None:
        noun = attribute.group(1).lower()
        if noun not in STOPWORDS | _QUANTITY_NOUNS and _stem(noun) not in wanted | _ROLE_WORDS:
            return f"{NOT_THE_QUANTITY} (a {noun}'s size, which the question does not ask about)"
    return None


# ----------------------------------------------------------------- what a figure is: its role

# What a figure is of a quantity, from the words of its own clause (general English, no manual's words):
# the value an example shows, the least or the most a quantity may be, a default, a recommendation, a value
# before a change. A question or a contract's metric says which one it asks (asked_roles); a figure that is
# another one (role_conflict) is not the answer, however well its unit and its words fit: "For example,
# maxpoll 9 indicates ... 9 (512 seconds)", "cannot be larger than 65536 bytes" against the default,
# "reduced from 100 to 15 seconds" against today's value.
EXAMPLE, MINIMUM, MAXIMUM, DEFAULT, ADVICE, BEFORE, RANGE, NEGATED, DELTA = (
    "example", "minimum", "maximum", "default", "recommended", "earlier value", "range end", "negated",
    "added amount")
_NOT = r"(?:not|never|cannot|can't|must\s+not|may\s+not|no)\s+(?:[a-z]+\s+){0,2}?"
_ROLE_CUES: tuple[tuple[str, str], ...] = (
    (EXAMPLE, r"for\s+example|for\s+instance|e\.\s?g\.|such\s+as|example|examples|\bsay,"),
    (MAXIMUM, rf"{_NOT}(?:exceed|larger|greater|more|longer|bigger|higher|above|over)|"
              r"(?:less|smaller|shorter|fewer|lower)\s+than|below|under|"
              r"maximum|max|at\s+most|up\s+to|upper\s+(?:limit|bound)|largest|highest|longest|biggest|"
              r"limit(?:ed)?\s+(?:of|to|is)|cap(?:s|ped)?\b(?:\s+\S+){0,5}?\s+(?:at|to)|ceiling|cap\s+of"),
    (MINIMUM, rf"{_NOT}(?:smaller|less|lower|shorter|fewer|below|under|quicker|faster|sooner)|"
              r"(?:more|greater|larger|longer|higher)\s+than|above|exceed(?:s|ing)?|"
              r"minimum|min|at\s+least|lower\s+(?:limit|bound)|smallest|lowest|shortest|fewest|floor"),
    (DEFAULT, r"defaults?|defaulted|by\s+default|if\s+(?:not\s+(?:set|specified|given|configured)|unset|"
              r"unspecified|omitted|absent)|if\s+\S+\s+is\s+not\s+(?:set|specified|given)|otherwise|"
              r"out\s+of\s+the\s+box|initial(?:ly)?|standard"),
    (ADVICE, r"recommend(?:ed|s)?|suggest(?:ed|s)?|(?:good|sane|reasonable|sensible)\s+(?:value|setting|"
             r"choice|size)|typical|typically|usually|normally|commonly|advis(?:ed|able)"),
    (NEGATED, r"not|rather\s+than|instead\s+of"),
    (DELTA, r"additional|an\s+extra|further|plus|(?:increased|decreased|raised|lowered|grows?|extended)\s+by"),
)
_ROLE = re.compile("|".join(f"(?P<r{i}>(?<![\\w-])(?:{cue})(?![\\w-]))" for i, (_, cue) in enumerate(_ROLE_CUES)),
                   re.IGNORECASE)
# A value before a change: "reduced the default from 100 to 15 seconds", "increased from 1 to 3 minutes",
# "(from 3 to 1.5 hours)". Not a range ("values are from 2048 to 256M"): a change is named, or the figure is
# the first of "from N to M" inside a parenthesis that follows a change.
_CHANGED_FROM = re.compile(r"\b(?:chang|increas|decreas|reduc|rais|lower|bump|drop|cut|mov|grow|grew|shrunk|"
                           r"shrink|went|go(?:es)?|extend|shorten|lengthen|doubl|halv|upp|earlier|sooner|later|fell|"
                           r"fall|rose|rise|climb|declin|jump|slid|plung|soar|improv|worsen|down|up)"
                           r"\w*\b[^.;:]{0,60}?\bfrom\s*$|\(from\s*$|\bpreviously\s*$|\bformerly\s*$|"
                           r"\bused\s+to\s+be\s*$|\bcompared\s+(?:with|to)\s*$", re.IGNORECASE)
# What a figure's own words after it say of it: "100 (the default)", "512 bytes by default", "3 or more".
_ROLE_AFTER = re.compile(r"[-\s]*(?:[a-zµ]+[-\s]*)?(?:(?P<max>or\s+(?:less|fewer|lower|smaller|below)|at\s+most|"
                         r"maximum|max\b)|(?P<min>or\s+(?:more|greater|higher|larger|above)|at\s+least|minimum|"
                         r"min\b))", re.IGNORECASE)
_EXTREME_AFTER_MAX = re.compile(r"^\s*\((?:the\s+)?(?:highest|largest|maximum|max|longest|most)\b", re.IGNORECASE)
_EXTREME_AFTER_MIN = re.compile(r"^\s*\((?:the\s+)?(?:lowest|smallest|minimum|min|shortest|least)\b", re.IGNORECASE)
# An example runs from its "for example" to the end of its sentence, unless a default is named after it or a
# clause sets something against it ("For example, the value 0 is returned for ..., while ... 4096 bytes").
_EXAMPLE_ENDS = re.compile(r";|,\s*(?:while|whereas|but|however)\b", re.IGNORECASE)
_EXAMPLE_OPENS = re.compile(r"(?<![\w-])(?:for\s+example|for\s+instance|e\.\s?g\.)(?![\w-])", re.IGNORECASE)
_RESTATES = re.compile(r"^\s*(?:\(|\(\s*i\.\s?e\.,?|\(=|=)\s*$")  # "10 (1024 seconds)": the same figure again
_QUESTION_ROLES: tuple[tuple[str, str], ...] = (
    (MAXIMUM, r"maximum|max|at\s+most|most|largest|highest|longest|biggest|upper\s+(?:limit|bound)|limit|"
              r"cap|ceiling|as\s+(?:long|large|high|many|much)\s+as|how\s+(?:large|big|long)\s+(?:can|may)"),
    (MINIMUM, r"minimum|min|at\s+least|least|smallest|lowest|shortest|fewest|lower\s+(?:limit|bound)|floor"),
    (DEFAULT, r"defaults?|by\s+default|if\s+(?:not|no|none|unset|nothing)\b|without|neither|nor|"
              r"unless|when\s+(?:no|not|none)|out\s+of\s+the\s+box|standard|stock"),
    (EXAMPLE, r"example"),
    (ADVICE, r"recommend\w*|suggest\w*|advis\w*|should|typical(?:ly)?|usually|normally"),
    (BEFORE, r"previous(?:ly)?|old|older|earlier|used\s+to|was|were|formerly"),
    (DELTA, r"add(?:ed|s)?|additional|extra|plus|increase[sd]?|more\s+than\s+the"),
)
_QUESTION_ROLE = re.compile("|".join(f"(?P<r{i}>(?<![\\w-])(?:{cue})(?![\\w-]))"
                                      for i, (_, cue) in enumerate(_QUESTION_ROLES)), re.IGNORECASE)


def _roles_in(text: str, cues: re.Pattern[str], table: tuple[tuple[str, str], ...]) -> set[str]:
    return {table[int(name[1:])][0] for m in cues.finditer(text) for name, v in m.groupdict().items() if v}


# "How many connections does it allow", "what it will accept": what may be is asked up to its most.
_ASKS_WHAT_MAY_BE = re.compile(r"\b(?:allow(?:s|ed)?|permit(?:s|ted)?|accept(?:s|ed)?|can|may)\b", re.IGNORECASE)


def asked_roles(asked: str) -> frozenset[str]:
    """Which figure of a quantity a question or a contract's metric asks for: its default, its maximum or its
    minimum, an example, a recommendation, an earlier value; none of these: the quantity's value. A question of
    what is allowed or accepted asks the most, unless it says the least."""
    roles = _roles_in(asked, _QUESTION_ROLE, _QUESTION_ROLES)
    if MINIMUM not in roles and _ASKS_WHAT_MAY_BE.search(asked):
        roles.add(MAXIMUM)
    return frozenset(roles)


_CLAUSE_BREAK = re.compile(r"[,;:(]|\s(?:and|but|while|whereas|or)\s", re.IGNORECASE)
_AFTER_PHRASE = re.compile(r"[^,;.:)\]]*")
_DEFAULT_AFTER = re.compile(r"\((?:the\s+)?default\b|\bby\s+default\b|\bis\s+the\s+default\b", re.IGNORECASE)


def _phrase_after(quote: str, amounts: Sequence[Amount], i: int) -> str:
    """The words right after amounts[i] that are still about it ("1 for fast compression (default)", "60-second
    maximum"): up to the next comma, semicolon, colon, full stop, "and" or figure."""
    stop = amounts[i + 1].span[0] if i + 1 < len(amounts) else len(quote)
    after = _AFTER_PHRASE.match(quote[:stop], amounts[i].span[1])
    phrase = after.group(0) if after else ""
    cut = re.search(r"\s(?:and|but|while|whereas)\s", phrase)
    phrase = phrase[:cut.start()] if cut else phrase
    if amounts[i].span[1] + len(phrase) == stop:  # "65,536 bytes in a system with a page size of 4096", "six
        first = re.match(r"\s*([A-Za-zµμ]*)", phrase)  # exceeded 15 ppb": the words that lead into the next
        word = first.group(1) if first else ""          # figure are that figure's; this one keeps its unit
        phrase = first.group(0) if first and word and (units.unit_of_word(word, units.TIME) or
                                                       units.unit_of_word(word, units.SIZE)) else ""
    return phrase


def _clause_before(quote: str, amounts: Sequence[Amount], i: int) -> tuple[str, str]:
    """(the figure's own clause, the segment of its sentence since the figure before it and its own phrase)
    before amounts[i]."""
    start = amounts[i].span[0]
    own = _sentence_starts(quote, start)[-1]
    previous = i - 1 if i > 0 and amounts[i - 1].span[1] > own else None
    begin = amounts[previous].span[1] + len(_phrase_after(quote, amounts, previous)) if previous is not None else own
    segment = quote[min(begin, start):start]
    breaks = list(_CLAUSE_BREAK.finditer(segment.rstrip()))
    clause = segment[breaks[-1].end():] if breaks else segment
    return clause, segment


def figure_roles(quote: str, amounts: Sequence[Amount], i: int) -> frozenset[str]:
    """What the i-th amount of `quote` is of its quantity, from its own clause (since the last comma, "and" or
    the figure before it; its sentence's segment when the clause says nothing) and the phrase after it up to
    the next comma ("1 for fast compression (default)"). A figure restated in parentheses ("The default is 10
    (1024 seconds)") is what the figure before it is; the ends of a range ("100,000 bytes through 900,000
    bytes", "between 1 and 99") are RANGE ends unless said otherwise."""
    amount = amounts[i]
    clause, segment = _clause_before(quote, amounts, i)
    if i > 0 and _RESTATES.match(segment) and amounts[i - 1].span[1] > _sentence_starts(quote, amount.span[0])[-1]:
        return figure_roles(quote, amounts, i - 1)
    roles: set[str] = _roles_in(clause, _ROLE, _ROLE_CUES)
    if not roles:  # "... and there is a maximum value (currently 8192)": the nearest clause that says what it is
        pieces = _CLAUSE_BREAK.split(segment)
        roles = next((found for piece in reversed(pieces) if (found := _roles_in(piece, _ROLE, _ROLE_CUES))), set())
    roles |= _roles_in(segment, _ROLE, _ROLE_CUES) & {DEFAULT}  # "By default, sudoers creates ... up to 980 bytes"
    if NEGATED in roles and not re.search(r"(?:\bnot|rather\s+than|instead\s+of)\s*$", clause, re.IGNORECASE):
        roles.discard(NEGATED)  # "not" elsewhere in the clause negates a verb, not this figure
    if _CHANGED_FROM.search(segment):
        roles.add(BEFORE)
    phrase = _phrase_after(quote, amounts, i)
    if _DEFAULT_AFTER.search(phrase):
        roles.add(DEFAULT)
    tail = _ROLE_AFTER.match(phrase)
    if tail is not None:
        roles |= {MAXIMUM} if tail.group("max") else set()
        roles |= {MINIMUM} if tail.group("min") else set()
    roles |= {MAXIMUM} if _EXTREME_AFTER_MAX.search(phrase) else set()  # "99 (highest priority)"
    roles |= {MINIMUM} if _EXTREME_AFTER_MIN.search(phrase) else set()
    sentence = quote[_sentence_starts(quote, amount.span[0])[-1]:amount.span[0]]
    opened = list(_EXAMPLE_OPENS.finditer(sentence))
    example = opened[-1] if opened else None
    if example is not None and not _EXAMPLE_ENDS.search(sentence, example.end()) \
            and not _roles_in(sentence[example.end():], _ROLE, _ROLE_CUES) & {DEFAULT}:
        roles.add(EXAMPLE)  # "For example, ... suspend service usage after 10 failures in 5 seconds"
    if DEFAULT not in roles and (
            (i > 0 and _is_range(quote, amounts[i - 1], amount))
            or (i + 1 < len(amounts) and _is_range(quote, amount, amounts[i + 1]))
            or re.search(r"\bbetween\s*$", clause, re.IGNORECASE)
            or (i > 0 and re.search(r"\bbetween\s*$", _clause_before(quote, amounts, i - 1)[0], re.IGNORECASE)
                and re.search(r"\band\s*$", segment, re.IGNORECASE))):
        roles.add(RANGE)
    return frozenset(roles)


def range_high_end(quote: str, amounts: Sequence[Amount], i: int) -> bool:
    """Whether amounts[i] is the upper end of a range ("4-6", "from 2048 to 256M", "between 1 (...) and 99")."""
    if i == 0:
        return False
    if _is_range(quote, amounts[i - 1], amounts[i]):
        return True
    return re.search(r"\bbetween\s*$", _clause_before(quote, amounts, i - 1)[0], re.IGNORECASE) is not None \
        and re.search(r"\band\s*$", _clause_before(quote, amounts, i)[1], re.IGNORECASE) is not None


def subject_extremes(text: str, quantity: set[str]) -> frozenset[str]:
    """The extremes `text` says its setting is of the quantity (`quantity`: its words, stemmed): "Specifies the
    minimum RSA key size ...", "controls the maximum amount of transfers" are an extreme's entry; a word of the
    quantity must follow the extreme within four words, so a stray "maximum" elsewhere says nothing."""
    return frozenset(_EXTREMES[m.group(1).lower()] for m in _EXTREME_OF.finditer(text)
                     if {_stem(w.lower()) for w in m.group(2).split()} & quantity
                     and not re.search(r"\d\s*\((?:the\s+)?$", text[:m.start()]))  # "0 (highest priority)": a scale's end


def role_conflict(roles: frozenset[str], asked: frozenset[str], high_end: bool = False,
                  subject: frozenset[str] = frozenset()) -> str | None:
    """Why a figure with `roles` is not the figure `asked` for, or None. An example's value, a recommendation or
    an earlier value answers only a question that asks for one; a range's end only one that asks for that end
    (the upper end for a maximum); the least value a quantity may take is not its most, nor either its default
    unless the text says it is. A default in the entry of a setting that is itself an extreme (`subject`:
    subject_extremes, "Specifies the minimum RSA key size ... The default is 1024 bits.") is that extreme's
    value, and no default of the quantity itself."""
    if NEGATED in roles:
        return f"{NOT_THE_QUANTITY} (what the quantity is not: \"not N\")"
    for role in (EXAMPLE, ADVICE, BEFORE, DELTA):
        if role in roles and role not in asked and not (role == ADVICE and DEFAULT in roles):
            return f"{NOT_THE_QUANTITY} (an {role}'s value)" if role == EXAMPLE else \
                f"{NOT_THE_QUANTITY} (an {role}, not the quantity itself)" if role == DELTA else \
                f"{NOT_THE_QUANTITY} (an {role}, not the one asked)" if role == BEFORE else \
                f"{NOT_THE_QUANTITY} (a {role} value, not the one asked)"
    extremes: frozenset[str] = roles & {MINIMUM, MAXIMUM}
    wanted = asked & {MINIMUM, MAXIMUM}
    if DEFAULT in roles and not extremes and RANGE not in roles:
        if wanted and DEFAULT not in asked and not subject & wanted:
            return f"{NOT_THE_QUANTITY} (the default, not the {sorted(wanted)[0]} asked)"
        if not wanted and subject:
            return f"{NOT_THE_QUANTITY} (the default of the {sorted(subject)[0]}, not of the quantity asked)"
    if RANGE in roles and DEFAULT in asked and DEFAULT not in roles:
        return f"{NOT_THE_QUANTITY} (an end of the range allowed, not the default)"
    if RANGE in roles and not extremes:
        extremes = frozenset({MAXIMUM if high_end else MINIMUM})
    if extremes and wanted and not extremes & wanted:
        return f"{NOT_THE_QUANTITY} (the {sorted(extremes)[0]}, not the {sorted(wanted)[0]} asked)"
    if extremes and not wanted and DEFAULT in asked and DEFAULT not in roles:
        return f"{NOT_THE_QUANTITY} (the {sorted(extremes)[0]} allowed, not the default)"
    return None


def _words_of(text: str) -> set[str]:
    return _stems(text) | {_stem(w) for w in re.findall(r"[a-z]+", text.lower())} | \
        {part for name in _SETTING_NAME.finditer(text) for part in name_parts(name.group(0))} | \
        set(re.findall(r"\d+(?:\.\d+)+", text))


def _own_words(quote: str, amounts: Sequence[Amount], i: int) -> set[str]:
    """The words that say what the i-th figure is of: its sentence's segment since the figure before it (and
    that figure's own phrase) and its own phrase after it."""
    _, segment = _clause_before(quote, amounts, i)
    return _words_of(f"{segment} {_phrase_after(quote, amounts, i)}")


_CASE_QUALIFIER = re.compile(r"\b(?:for|with|on|under|without|when|if|in)\s+[\w\"'“]", re.IGNORECASE)


def parallel_figures(quote: str, amounts: Sequence[Amount], read: Sequence[Stated], asked: str,
                     wanted: frozenset[str] = frozenset()) -> dict[int, str]:
    """The figures a quote states in the brief's unit side by side, for different cases, that the question does
    not ask about: each is refused when another one's own words fit the question better. "the default value for
    foreground mounts is 2 minutes, and the default value for background mounts is 10000 minutes" answers a
    question about foreground mounts with 2; "Default Value: -1 (Unlimited) ; Development Value: 60" asked for
    the default answers -1; "Recommended values are 1 for fast compression (default), and 9 for high
    compression" asked for the default answers 1. Only the words that tell the figures apart count (those of
    every figure's clause are the sentence's subject), and a tie refuses nothing."""
    candidates = [i for i, r in enumerate(read) if r.why is None and r.value is not None]
    if len({read[i].value for i in candidates}) < 2:
        return {}
    words = question_words(asked) - set(STOP_STEMS)
    own = {i: _own_words(quote, amounts, i) for i in candidates}
    qualified = [i for i in candidates[1:] if _CASE_QUALIFIER.search(_clause_before(quote, amounts, i)[1])]
    if not qualified:  # "For RSA keys, the minimum size is 1024 bits and the default is 3072 bits": "For RSA keys"
        first = candidates[0]  # is said of both, as no later figure has a qualifier of its own
        segment = _clause_before(quote, amounts, first)[1]
        breaks = list(_CLAUSE_BREAK.finditer(segment.rstrip()))
        if breaks:
            own[first] = _words_of(f"{segment[breaks[-1].end():]} {_phrase_after(quote, amounts, first)}")
    for i in candidates:  # "from 2048 to 256M bytes": the two ends of one range share their words
        if i - 1 in own and range_high_end(quote, amounts, i):
            own[i] = own[i - 1] = own[i] | own[i - 1]
    common = set.intersection(*own.values())
    extremes = wanted & {MINIMUM, MAXIMUM}  # said to be the extreme asked ("(maximum 22)"): that counts first
    score = {i: len((own[i] - common) & words) + 10 * len(figure_roles(quote, amounts, i) & extremes)
             for i in candidates}
    best = max(score.values())
    leaders = [i for i in candidates if score[i] == best]
    if len({read[i].value for i in leaders}) != 1:
        return {}
    return {i: f"{NOT_THE_QUANTITY} (another figure of the quote is said of what the question asks)"
            for i in candidates if score[i] < best and read[i].value != read[leaders[0]].value}


def stated_amounts(quote: str, unit: str, asked: str = "", lead: str = "", roles_of: str | None = None) -> list[Stated]:
    """Every amount in `quote`, with its value in `unit` or why it is not stated as that quantity
    (figure_reading; `lead`: the passage before the quote), nor, when the brief's question is given (`asked`),
    as the quantity it asks about (another_quantity_asked). The low end of a range shares the unit written
    once after its high end ("10-20 seconds", "between 10 and 20 seconds")."""
    amounts = parse_amounts(quote)
    read = [figure_reading(a, quote, unit, lead) for a in amounts]
    for i in range(len(read) - 1):
        low, high = read[i], read[i + 1]
        no_unit = low.why == f"{NOT_THE_QUANTITY} (no {unit} beside it)"
        if no_unit and high.why is None and high.value is not None and high.written \
                and _is_range(quote, low.amount, high.amount):
            read[i] = replace(low, value=high.value * low.amount.value / high.written, why=None,
                              written=low.amount.value, end=high.end)
    wanted = asked_roles(asked if roles_of is None else roles_of) if asked else frozenset()
    quantity = (question_words(asked if roles_of is None else roles_of) - STOP_STEMS - _ROLE_WORDS) if asked \
        else set()
    base = list(read)  # each figure as its unit reads it, before the question's rules
    for i, r in enumerate(read):
        if r.why is not None or r.value is None or not asked:
            continue
        high_end = range_high_end(quote, amounts, i)
        since = max((base[j].amount.span[1] for j in range(i) if base[j].value is not None), default=-1)
        subject = subject_extremes(f"{_entry_of(lead)}\n{quote[:r.amount.span[0]]}" if since < 0
                                   else quote[since:r.amount.span[0]], quantity)
        why = another_quantity_asked(r.amount, quote, asked, r.end) \
            or role_conflict(figure_roles(quote, amounts, i), wanted, high_end, subject)
        if why:
            read[i] = replace(r, value=None, why=why)
    if asked:
        for i, why in parallel_figures(quote, amounts, read, asked, wanted).items():
            read[i] = replace(read[i], value=None, why=why)
    for i in range(1, len(read)):  # "1048576 (~1 MB)": the same figure again, said of the same thing
        if read[i - 1].why is not None and read[i].why is None and \
                _RESTATES.match(quote[read[i - 1].end if read[i - 1].end >= 0 else amounts[i - 1].span[1]:
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
        of = _words_of(said.of) - STOP_STEMS - _ROLE_WORDS
        if of and not of & _words_of(f"{_entry_of(lead)} {quote}"):
            return f"{NOT_THE_QUANTITY} (the model says it is of \"{said.of}\", which the quote does not say)"
        if of and not of & (question_words(asked) - STOP_STEMS):
            return f"{NOT_THE_QUANTITY} (the model says it is of \"{said.of}\", not what the question asks)"
    return None


def read_figure(proposed: float, quote: str, unit: str, rel_tol: float = SAME_FIGURE, asked: str = "",
                lead: str = "", said: ModelReading = ModelReading()) -> Figure:
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
    can set a kept one aside (model_reading_conflict), never keep a refused one.
    """
    figure = _read_figure(proposed, quote, unit, rel_tol, asked, lead)
    if figure.value is None or said == ModelReading():
        return figure
    why = model_reading_conflict(said, quote, lead, asked)
    return figure if why is None else replace(figure, value=None, reason=why)


def _read_figure(proposed: float, quote: str, unit: str, rel_tol: float, asked: str, lead: str) -> Figure:
    if not isinstance(proposed, (int, float)) or isinstance(proposed, bool) or not math.isfinite(proposed):
        return Figure(proposed=proposed, value=None, reason=NOT_IN_QUOTE)
    target = parse_unit(unit)
    read = stated_amounts(quote, unit, asked, lead)
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
    tier: str | None = None  # the source's (capped) tier: an authority (ONE_SOURCE_TIERS) may settle alone


@dataclass(frozen=True)
class _Weighted:
    low: float
    high: float
    weight: float
    source: str
    speaks_low: bool
    speaks_high: bool
    confidence: float = 0.0
    authority: bool = False


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
                             impact != "narrows_high", impact != "narrows_low", c,
                             normalize_tier(r.tier) in ONE_SOURCE_TIERS if r.tier else False))
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
       source at 97 corroborates it and the range becomes 97..97. Unless that one source is an
       authority that decides alone (its tier in ONE_SOURCE_TIERS: settled_by) and nothing credible
       stands against it: then its figure is the range, as a contract may rest on one such source.

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
    if all(w.authority for w in side):
        return 0.0  # one authority (a regulator-tiered manual, a government host) settles alone: settled_by
    return max(ONE_SOURCE_KEEPS, 1 - max(w.confidence for w in side))


def settled_by(readings: Sequence[Reading], initial: tuple[float, float] | None = None) -> str | None:
    """The one authoritative source an estimate rests on, or None: every credible reading is that source's, and
    its tier is one that decides alone (ONE_SOURCE_TIERS: the organisation's source_tiers rule names the document
    the authority, or the host is a government's). As a contract may rest on one such source, so may a range:
    its figure, stated plainly with nothing credible against it, is the range (update_range), and the report
    says the range rests on it. Nothing credible against it means no other source's credible reading at all."""
    credible = _credible(readings, initial)
    sources = {w.source for w in credible}
    if len(sources) == 1 and all(w.authority for w in credible):
        return sources.pop()
    return None


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
    lead: str = ""         # the passage before the quote: where its figure's unit or setting may be named


# "the 15 ppb action level", "an action level of 15 ppb": a threshold named, not a measurement.
_THRESHOLD_WORDS = (r"action\s+levels?|limits?|targets?|thresholds?|standards?|goals?|benchmarks?|guidelines?|"
                    r"caps?|ceilings?")
_THRESHOLD_AFTER = re.compile(rf"\s*(?:[\w-]+\s+){{0,2}}?(?:{_THRESHOLD_WORDS})\b", re.IGNORECASE)
_THRESHOLD_BEFORE = re.compile(rf"(?<!\w)(?:{_THRESHOLD_WORDS})\s+(?:of|is|was|at|set\s+at)\s*$", re.IGNORECASE)
_RATIO_FAMILY: dict[str, str] = {
    "fraction": "share", "percent": "share", "permille": "share", "basis points": "share",
    "ppm": "trace", "ppb": "trace",
}
"""Shares (of homes, of a budget) and trace concentrations are one quantity to arithmetic but not
to a claim: "18% had lead lines" is no reading of a lead level in ppb."""


def _in_unit(amount: Amount, quote: str, unit: str) -> tuple[float, int] | None:
    """(the amount in `unit`, where its unit ends in `quote`), or None (see _stated_in)."""
    target = parse_unit(unit)
    if target.ratio and amount.ratio and _RATIO_FAMILY[target.ratio] != _RATIO_FAMILY[amount.ratio]:
        return None
    if target.ratio and amount.ratio is None:  # a bare "7.6" is a reading in ppb only with "ppb" after it
        value = to_unit(amount, unit)
        written = _unit_after(unit).match(quote, amount.span[1])
        return (value, written.end()) if written and value is not None else None
    read = figure_reading(amount, quote, unit)  # "$4m", "34 percent" carry their unit; a count says it
    if read.why is not None or read.value is None:
        return None
    return read.value, read.end if read.end >= 0 else amount.span[1]


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


# Which way a figure's own words bound the quantity, and whether the bound itself is allowed: "at most 31" and
# "cannot exceed 4" allow the figure, "under 80" and "less than 16" do not; "at least 2" and "no fewer than 2"
# allow it, "more than 1" does not. A negation turns "more than" into an upper bound ("could not handle files
# more than 512 megabytes").
_UPPER_OPEN = r"(?:less|fewer|smaller|shorter|lower)\s+than|under|below|just\s+under|nearly|almost"
_UPPER_CLOSED = (rf"{_NOT}(?:exceed\w*|larger|greater|more|longer|bigger|higher|above|over)(?:\s+than)?|at\s+most|"
                 r"up\s+to|no\s+more\s+than|as\s+(?:much|many|long|large|high)\s+as|a\s+maximum\s+of|"
                 r"limit(?:s|ed)?\b(?:\s+\S+){0,6}?\s+(?:to|at)|cap(?:s|ped)?\b(?:\s+\S+){0,5}?\s+(?:at|to)|"
                 r"cap\s+of|<=|=<|≤")
_LOWER_OPEN = r"(?:more|greater|larger|longer|higher)\s+than|above|over|exceed\w*|in\s+excess\s+of|just\s+over|>>?"
_LOWER_CLOSED = (rf"{_NOT}(?:less|fewer|smaller|shorter|lower|below|under|quicker|faster|sooner)(?:\s+than)?|"
                 r"at\s+least|no\s+(?:less|fewer)\s+than|upwards\s+of|a\s+minimum\s+of|>=|≥")
_BOUND_WORDS = re.compile(rf"(?<![\w-])(?:(?P<uc>{_UPPER_CLOSED})|(?P<lc>{_LOWER_CLOSED})|(?P<uo>{_UPPER_OPEN})|"
                          rf"(?P<lo>{_LOWER_OPEN})|(?P<uo2><<?))(?![\w-])", re.IGNORECASE)


_BOUND_BEFORE = re.compile(rf"(?<![\w-])((?:{_UPPER_CLOSED})|(?:{_LOWER_CLOSED})|(?:{_UPPER_OPEN})|(?:{_LOWER_OPEN}))\s*$",
                           re.IGNORECASE)


def _bound(clause: str, phrase: str) -> tuple[str, bool] | None:
    """("upper" or "lower", open) of the last bound word of a figure's clause, or of its phrase after it ("3 or
    more", "90 days at most"); None when neither bounds it."""
    tail = _ROLE_AFTER.match(phrase)
    if tail is not None and tail.group("max"):
        return "upper", False
    if tail is not None and tail.group("min"):
        return "lower", False
    found = list(_BOUND_WORDS.finditer(clause))
    if not found:
        return None
    last = found[-1]
    if last.group("uc"):
        return "upper", False
    if last.group("lc"):
        return "lower", False
    return ("upper", True) if (last.group("uo") or last.group("uo2")) else ("lower", True)


def _a_reading_in(amount: Amount, quote: str, unit: str) -> bool:
    """Whether a share or a trace concentration is read as one by a contract: its marker written ("7.6 ppb",
    "34 %"), and of the same family (a share of homes is no lead level in ppb: _RATIO_FAMILY). A bare "2023" or
    "Twenty-seven homes" is no reading in ppb. Other units: figure_reading has decided."""
    target = parse_unit(unit)
    if target.ratio is None:
        return True
    if amount.ratio is not None:
        return _RATIO_FAMILY[target.ratio] == _RATIO_FAMILY[amount.ratio]
    return _unit_after(unit).match(quote, amount.span[1]) is not None


def quote_figures(contract: Contract, quote: str, lead: str = "") -> tuple[ClaimFigure, ...]:
    """Every figure `quote` states as the contract's metric, each judged against the contract.

    Read by code (stated_amounts: the unit written or named, converted by pint; never the model), as an
    estimate's figures are, with the metric in place of the question (its extremes and its words) and the
    claim's words naming it too:
    - a figure of another extreme, an example's, a recommendation, an earlier value, another setting's,
      another case's (role_conflict, another_quantity_asked, parallel_figures) is no reading of the metric;
    - a figure after "from" ("fell from 14.2 ppb to 4.6 ppb"), "compared with", "previously" is an earlier
      value: not judged;
    - its own words bound it: "under 80 characters" allows values under 80, "at most 31" and "must not exceed
      4" up to them, "at least 2" from it, "more than 1" over it, "3 or more" from 3. Where the metric is that
      very extreme ("maximum user/group name length" and "at most 31"), the figure is the extreme's value;
    - a figure that names a threshold ("the 15 ppb action level", "a limit of 15 ppb") is a yardstick, not a
      reading, unless the metric is a limit itself ("up to a limit of 16" is the maximum);
    - a bound at the target itself ("cut lead below 5 ppb", "exceeded 5 ppb" against a 5 ppb target) restates
      the claim or its denial rather than measuring anything: not judged, unless the metric is that extreme;
    - "between 4 and 6 ppb" and "4-6 ppb" are one figure, the range;
    - anything else ("a 90th-percentile lead level of 7.6 ppb", "about 7.6 ppb") is that value.
    """
    amounts = parse_amounts(quote)
    naming = f"{contract.metric} {contract.claim}".strip()
    read = stated_amounts(quote, contract.unit, naming, lead, roles_of=contract.metric)
    extreme = asked_roles(contract.metric) & {MINIMUM, MAXIMUM}
    limit_metric = bool(extreme) or bool(re.search(r"\blimits?\b", contract.metric, re.IGNORECASE))
    figures: list[ClaimFigure] = []
    skip: set[int] = set()
    inf = math.inf
    for i, (a, r) in enumerate(zip(amounts, read)):
        if i in skip:
            continue
        nxt = i + 1 if i + 1 < len(amounts) else None
        earlier = BEFORE in figure_roles(quote, amounts, i)
        if nxt is not None and not earlier and _is_range(quote, a, amounts[nxt]) and read[nxt].value is not None \
                and read[nxt].why is None and (r.why is None or r.why.endswith(" beside it)")) and not extreme:
            hi = read[nxt].value or 0.0
            lo = r.value if r.value is not None else hi * a.value / (read[nxt].written or amounts[nxt].value or 1.0)
            lo, hi = min(lo, hi), max(lo, hi)
            figures.append(ClaimFigure(quote[a.span[0]:amounts[nxt].span[1]], lo, hi, False, False,
                                       _decide(contract, lo, False, hi, False)))
            skip.add(nxt)
            continue
        if r.why is not None and BEFORE in figure_roles(quote, amounts, i):  # "fell from 14.2 ppb": what it was
            was = figure_reading(a, quote, contract.unit, lead)
            if was.value is not None and was.why is None and _a_reading_in(a, quote, contract.unit):
                figures.append(ClaimFigure(a.raw, was.value, was.value, False, False, EARLIER))
            continue
        if r.why is not None or r.value is None or not _a_reading_in(a, quote, contract.unit):
            continue
        value = r.value
        unit_end = r.end if r.end >= 0 else a.span[1]
        if measures_another_quantity(contract, quote, a.span[0]) is not None:
            continue  # "an interval of 75 seconds" against the idle time: another quantity's figure
        roles = figure_roles(quote, amounts, i)
        if _names_a_threshold(quote, a.span[0], unit_end) and not limit_metric:
            figures.append(ClaimFigure(a.raw, value, value, False, False, THRESHOLD))
            continue
        if earlier or BEFORE in roles:
            figures.append(ClaimFigure(a.raw, value, value, False, False, EARLIER))
            continue
        clause, segment = _clause_before(quote, amounts, i)
        bound = _bound(clause, _phrase_after(quote, amounts, i))
        if bound is None and quote.startswith("+", a.span[1]):  # "levels 20+": 20 or more
            bound = ("lower", False)
        if RANGE in roles and bound is None and extreme:
            bound = ("upper" if range_high_end(quote, amounts, i) else "lower", False)
        said = {"upper": MAXIMUM, "lower": MINIMUM}[bound[0]] if bound else None
        if bound is None or (said in extreme):
            low = high = value
            low_open = high_open = False
            if bound is not None and bound[1]:  # "under 80" as the maximum: the maximum is below 80
                low, low_open, high, high_open = (-inf, True, value, True) if bound[0] == "upper" \
                    else (value, True, inf, True)
        elif bound[0] == "upper":
            low, low_open, high, high_open = -inf, True, value, bound[1]
        else:
            low, low_open, high, high_open = value, bound[1], inf, True
        said_by = _BOUND_BEFORE.search(quote, max(0, a.span[0] - 40), a.span[0]) if bound is not None else None
        raw = f"{said_by.group(1)} {a.raw}" if said_by else a.raw  # "below 5 ppb", "at most 3 ppb"
        if bound is not None and said not in extreme and _at_target(contract, value):
            figures.append(ClaimFigure(raw, low, high, low_open, high_open, RESTATES))
            continue
        figures.append(ClaimFigure(raw, low, high, low_open, high_open,
                                   _decide(contract, low, low_open, high, high_open)))
    return tuple(figures)


_UNIT_IN_GAP = re.compile(r"^\s*[A-Za-zµμ]+(?=\s*(?:-|–|—|to|through|thru)\s*$)", re.IGNORECASE)


def _is_range(quote: str, a: Amount, b: Amount) -> bool:
    """"4-6 ppb", "4 to 6 ppb", "between 4 and 6 ppb", "100,000 bytes through 900,000 bytes": two amounts that
    are one range."""
    gap = quote[a.span[1]:b.span[0]]
    unit_word = _UNIT_IN_GAP.match(gap)
    gap = gap[unit_word.end():] if unit_word else gap
    if not _RANGE_GAP.fullmatch(gap) or _YEAR.fullmatch(a.raw.strip()):
        return False
    if gap.strip().lower() == "and":
        return bool(re.search(r"between\s*$", quote[:a.span[0]], re.IGNORECASE))
    return True


def _stem(word: str) -> str:
    """A word less its plural or past ending, enough to match "links" to "link", "needed" to "need"."""
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[:-len(ending)]
    return word


STOP_STEMS = frozenset({"value", "set", "use"} | STOPWORDS)


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


# Words of a metric that say which figure of a quantity it is, not which quantity: its extreme or default.
_ROLE_WORDS = frozenset(_stem(w) for w in ("maximum", "minimum", "max", "min", "default", "largest", "smallest",
                                            "highest", "lowest", "longest", "shortest", "typical", "allowed",
                                            "permitted", "value", "limit", "most", "least", "minimal", "maximal"))


def names_the_metric(contract: Contract, quote: str, lead: str = "") -> bool:
    """True when `quote`, read with the definition it leans on (`lead`: the passage before it, a term line),
    names the quantity the metric is: one of the metric's own words (_metric_words, less the words that only
    say which figure of it: its extreme, its default) and every code name the metric names (code_names, or
    most of its words: "UserStopDelaySec=" in the term line above "Defaults to 10s."), or the contract names
    no metric, or its unit is money, a share or a trace concentration. Which figure of the quantity a figure
    is (the default, the maximum, an example's), and which setting's, figure_roles and another_quantity_asked
    decide for each figure: "the largest ref negotiation request ... (http.maxRequestBuffer) ... 10 MiB"
    names none of the http.postBuffer default's settings."""
    wanted = _metric_words(contract) - _ROLE_WORDS
    if not wanted or _money_or_share(contract.unit):
        return True
    text = f"{_entry_of(lead)}\n{quote}"
    folded = text.lower()
    words = _stems(text) | {part for name in _SETTING_NAME.finditer(text) for part in name_parts(name.group(0))}
    for name in code_names(contract.metric):  # each named setting, written out or every word of it there
        if name.lower().rstrip("=") not in folded and not name_parts(name) <= words:
            return False
    return bool(wanted & words)


# "an interval of 75 seconds", "a half-life of 10 seconds": the noun right before "of" is what the figure
# measures. These nouns say nothing of which quantity (a contract's metric words say that).
_OF_NOUN = re.compile(r"\b([a-z][a-z-]*)\s+of\s+(?:about\s+|approximately\s+|roughly\s+|around\s+)?$", re.IGNORECASE)
_SAYS_NO_QUANTITY = frozenset({"value", "default", "total", "maximum", "minimum", "max", "min", "limit", "amount",
                               "number", "average", "mean", "median", "excess", "upwards", "one", "each", "ratio",
                               "percentage", "proportion", "fraction", "share", "region", "order",
                               "neighbourhood", "neighborhood", "range", "multiple", "result", "reading",
                               "measurement", "figure", "estimate"})


# Which extreme of a quantity a text speaks of: "the minimum RSA key size" is not the default key size, and "the
# default is 3072 bits" is not the minimum, though both are RSA key sizes in bits.
_EXTREMES = {"maximum": "maximum", "max": "maximum", "largest": "maximum", "highest": "maximum",
             "greatest": "maximum", "biggest": "maximum", "minimum": "minimum", "min": "minimum",
             "smallest": "minimum", "lowest": "minimum", "fewest": "minimum"}


_EXTREME_OF = re.compile(rf"\b({_alternation(_EXTREMES)})((?:\s+[A-Za-z][\w-]*){{1,4}})", re.IGNORECASE)


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


def quote_stance(contract: Contract, quote: str, url: str | None = None, lead: str = "") -> QuoteReading:
    """The quote's stance on the contract, from its figures alone (the model's label plays no part).

    supports: at least one figure meets the contract and none fails it; contradicts: at least
    one fails and none meets; neutral: no figure in the unit decides, or figures on both sides
    (the quote gives two readings and code cannot tell which one is the metric), or the quote
    does not name the metric (names_the_metric: its figures are another quantity's), or its
    figures are an option of a program the claim is not about (another_programs_option: `url`
    is the quote's page or document). `lead`: the passage before the quote, where its unit or its setting's
    name may be written (a definition's term line)."""
    if not names_the_metric(contract, quote, lead):
        return QuoteReading("neutral", (), f"does not name the metric ({contract.metric})")
    other = another_programs_option(contract, quote, url)
    if other is not None:
        return QuoteReading("neutral", (), other)
    figures = quote_figures(contract, quote, lead)
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
        reading = quote_stance(contract, item.quote, item.url, item.lead)
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
