"""Reading text: whether a quote states a figure as the quantity asked, in which unit, and which figure it is.

Pure, typed, no I/O. The model proposes a number (and says what it is of and which figure it is); the rules
here verify it against the verbatim quote and the passage before it (its lead), in general English rather
than any one manual's words:
- figure_reading: the figure's unit, written beside it or named before it in its entry, converted by the
  units library (units.py); never inside code, a formula, a command line, a version, a date or a condition;
- figure_roles and asked_roles: what a figure is of its quantity (an example's value, an end of a permitted
  range, a minimum, a maximum, a default, a recommendation, an earlier value, an added amount, what it is
  not), from its own clause, against what the question or a contract's metric asks (role_conflict);
- parallel_figures and another_quantity_asked: which of several figures, and whose setting;
- read_figure: a proposed number kept in the brief's unit or discarded with its true reason, and
  model_reading_conflict: what the model said of its figure, which can set it aside, never keep it.
contracts.py reads a claim's figures through the same rules; judge.py decides ranges and verdicts.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping, Sequence

from . import units
from .amounts import alternation, Amount, parse_amounts, parse_unit, RANGE_GAP, SAME_FIGURE, SCALES, to_unit, Unit, YEAR
from .layout import EXAMPLE_KINDS
from .decide import CODE_NAME, ENTRY_MAX_CHARS, entry_of, STOPWORDS, bears_on, content_words, is_term_line, leans_on_before


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
def unit_after(unit: str) -> re.Pattern[str]:
    """What must follow a number for it to be stated in `unit` ("7.6 ppb", "64 outstanding requests":
    up to two words may come between)."""
    names = sorted(_unit_names(unit), key=len, reverse=True)
    words = "|".join(re.escape(n).replace(r"\ ", r"\s+") + r"(?:e?s)?" for n in names) or "(?!)"
    between = r"(?:[a-z][\w-]*\s+){0,2}?"
    return re.compile(rf"[\s-]?{between}(?:{words})(?![\w-])", re.IGNORECASE)


# Code, a formula or a command line around a number: "make MAX_CONNECTIONS=5 check", "-DOS_OTHER=1",
# "LALR(1)", "fork(2)", "pop(L, 1)", "Defaults to RuntimeDirectorySize= divided by 4096",
# "curl --max-redirs 3 --location".
# "+" and "/" are operators between operands ("a + 6", "24/7"), not a sign ("rose +5%"); so is "-" after a
# name ("size-1 bytes"), not between two numbers ("4-6 ppb", a range).
_CODE_BEFORE = re.compile(r"(?:[=*^]\s*|[\w)][/+]|[A-Za-z_)]-|[\s)][/+]\s+|\w\((?:[^()\n]{0,40},\s*)?|"
                          r"(?<!\S)--?[A-Za-z][\w-]*\s+|"
                          r"\b(?:divided|multiplied)\s+by\s+|\bmodulo\s+)$", re.IGNORECASE)


# A line that sets one name to the figure ("session.gc_maxlifetime = 1440", "; maximum_icp_query_timeout 2000" in an
# annotated configuration file) is the value of that setting, not code around another figure.
_ASSIGNMENT_LINE = re.compile(r"(?:^|\s)(?<!-)[A-Za-z_][\w.-]*\s*(?:=|:|\s)\s*$")


_CODE_AFTER = re.compile(r"\)*\s*(?:[=*/^]|\s\+\s*[\w(]|\+[\w(])")


# A version or a reference: "2.6.11", "since Linux 2.2", "Lua 5.2", "section 6.2", "(see §4.7)", "page 24", "RFC 1122".
_VERSION_AFTER = re.compile(r"\.\d")


_NAME_BEFORE = re.compile(
    r"(?<![\w.])(?:version|release|v|rev|revision|page|pages|p\.|pp\.|section|sections|chapter|rfc|figure|"
    r"fig\.|table|step|appendix|posix\.?|iso|ieee|std|draft|issue|no\.|#|§|¶|port|ports|uid|gid|pid|signal)"
    r"\s*\(?\s*$",
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
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless)\b[^,;.:()]*?\b(?:is|are|equals|set\s+to)"
                        r"(?:\s+(?:a\s+value\s+)?(?:less|more|greater|smaller|larger|lower|higher)\s+than"
                        r"(?:\s+or\s+equal\s+to)?)?\s+$", re.IGNORECASE)


# "Note: for level 19, you can get ...": a figure that names the case a clause opens with.
_CASE_OPENS = re.compile(r"(?:^|[.:;]\s*)(?:for|with|at|on|in)\s+(?:[\w-]+\s+){0,2}$", re.IGNORECASE)
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


def money_or_share(unit: str) -> bool:
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
    `dimension` (units.TIME, units.SIZE: then a configuration file's letters count, "30s", "48K"; units.RATE: a
    size per a duration, "50 MB/s"), or None."""
    end = _digits_end(quote, amount)
    if dimension == units.RATE:  # "2 kilobytes per second", "50 MB/s", "256 KiB/s", "a 10-MB/s limit"
        pair = units.RATE_WORDS.match(quote, end + (quote[end:end + 1] in (" ", "-")))
        found_rate = units.rate_of(pair.group(1), pair.group(2)) if pair else None
        return (found_rate, pair.end()) if pair and found_rate else None
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
    "secs", "kbytes"), or a unit inside a setting's name ("InhibitDelayMaxSec=", "timeout_ms"); a rate's two
    words ("The speed is in Kibibytes per second ... The default is 1000.")."""
    found: list[tuple[int, str]] = []
    if dimension == units.RATE:  # a rate is two words, a size per a duration ("Kibibytes per second", "MB/s")
        for rate in units.RATE_WORDS.finditer(text):
            unit = units.rate_of(rate.group(1), rate.group(2))
            if unit is not None and not re.search(r"\d[\s-]?$", text[max(0, rate.start() - 8):rate.start()]):
                found.append((rate.start(), unit))
        return found
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
        texts.append(entry_of(lead))
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
    year = bool(YEAR.fullmatch(amount.raw.strip()))
    if _DATE_AFTER.match(quote, end) or (year and (_DATE_BEFORE.search(quote, back, start)
                                                   or _YEARS_LISTED.match(quote, end))):
        return f"{NOT_THE_QUANTITY} (a date)"
    line = quote.rfind("\n", 0, start) + 1
    sentence = _sentence_starts(quote, start)[-1]
    if _LIST_MARKER.match(quote[max(line, sentence):end + 2]) or _ENUMERATOR.match(quote, max(0, start - 1)):
        return f"{NOT_THE_QUANTITY} (a list item's number)"
    return None


# "Copyright c 2001, 2002, 2003": a year followed by more years is a date, whatever comes before it.
_YEARS_LISTED = re.compile(r"\s*[,-]\s*(?:1[89]|20)\d\d\b")
# "(1) Within the dirname component ...", "2. Redistributions ...": the number of an item of a list.
_LIST_MARKER = re.compile(r"^\s*(?:\(\d{1,2}\)|\d{1,2}\.\s)")
_ENUMERATOR = re.compile(r"\(\d{1,2}\)\s+[a-z]")  # "two steps: (1) assert copyright ..., and (2) offer you ..."


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
    written = unit_after(unit).match(quote, end) or _TIMES.match(quote, end)
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
    negative = amount.raw.lstrip()[:1] in ("-", "\u2212")
    if negative and _OPTION_FIGURE.search(quote, 0, end) and _CLAUSE_GOES_ON.match(quote, end):
        return Stated(amount, -amount.value, None, -amount.value, end)  # "The default is -6.": level 6
    if not negative and amount.raw.lower() != "one" and _CLAUSE_GOES_ON.match(quote, end):
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
    if _CONDITION.search(quote, max(back - 80, own), start) or \
            (_CASE_OPENS.search(quote, max(back, own), start) and quote.startswith(",", end)):
        return Stated(amount, None, f"{NOT_THE_QUANTITY} (a case in a condition: \"if ... is N\")")
    if money_or_share(unit) or amount.currency is not None or amount.ratio is not None:
        value = to_unit(amount, unit)  # the amount carries its unit: to_unit says whether it is the brief's
        return Stated(amount, value if value is not None and math.isfinite(value) else None, None, amount.value, end)
    if units.measure(unit).is_count:
        return _count_value(amount, quote, unit, lead)
    return _quantity_value(amount, quote, unit, lead)


# A setting's name as a manual writes it: a code name (decide.CODE_NAME) or a hyphenated one ("Cache-Grow",
# "Max-ValidTime").
SETTING_NAME = re.compile(rf"{CODE_NAME.pattern}|(?<![\w.-])[A-Z][a-z]+(?:-[A-Z][A-Za-z]+)+(?![\w-])")


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
    return {stem(w.lower()) for w in words if len(w) >= 2 and w.lower() not in _GENERIC_PARTS}


def question_words(asked: str) -> set[str]:
    """A question's words as a quote's are matched against them: stemmed, its superlatives with the quantity
    they ask (_SUPERLATIVES), and the parts of the names it writes."""
    words = stems(asked) | {stem(w) for w in re.findall(r"[a-z]+", asked.lower())}
    for word, means in _SUPERLATIVES.items():
        if re.search(rf"\b{word}\b", asked, re.IGNORECASE):
            words |= {stem(w) for w in means.split()}
    for name in SETTING_NAME.finditer(asked):
        words |= name_parts(name.group(0))
    return words


# Nouns that name a duration or a size itself, whatever it is of: "a 5s timeout" is the duration asked.
_QUANTITY_NOUNS = frozenset({"timeout", "delay", "interval", "period", "duration", "wait", "time", "lifetime",
                             "size", "length", "amount", "total"})


_FOR_WHAT = re.compile(r"\s+for\s+(?:the\s+|a\s+|an\s+|each\s+)?((?:[a-z][\w-]*\s*){1,4})", re.IGNORECASE)
_ATTRIBUTE_OF = re.compile(r"[-\s]+([a-z][a-z-]{2,})\b(?!\s+(?:of|is|are|was|were|to|from|in|on|at|by|for)\b)")


def _defined_as_asked(name: str, before: str, wanted: set[str]) -> bool:
    """Whether a sentence before the figure that names `name` says, in the question's words, what it is: "Whenever
    Lua calls C, it ensures that the stack has at least LUA_MINSTACK extra slots." makes LUA_MINSTACK a count of
    free stack slots (two of the question's words at least, besides the name's)."""
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", before):
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", sentence) and \
                len(_words_of(sentence.replace(name, " ")) & wanted - STOP_STEMS - ROLE_WORDS) >= 2:
            return True
    return False


def another_quantity_asked(amount: Amount, quote: str, asked: str, unit_end: int = -1,
                           quantity: str = "") -> str | None:
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
    breaks = list(re.finditer(r"[,;]", sentence))
    clause = sentence[breaks[-1].end():] if breaks else sentence
    wanted = question_words(asked)
    folded = asked.lower()
    for name in SETTING_NAME.finditer(clause):
        parts = name_parts(name.group(0))
        if name.group(0).lower() in folded or not parts or 2 * len(parts & wanted) > len(parts):
            continue
        if not _defined_as_asked(name.group(0), quote[:_sentence_starts(quote, start)[-1]], wanted):
            return f"{NOT_THE_QUANTITY} (said of {name.group(0)}, which the question does not name)"
    noun = quantity_noun(quote, start)
    if noun is not None and stem(noun) not in stems(asked):
        return f"{NOT_THE_QUANTITY} (a {noun}, which the question does not ask about)"
    # "84 bytes for the reentrant scanner guts": what follows "for" after its unit is what the figure measures
    purpose = _FOR_WHAT.match(quote, unit_end) if unit_end > amount.span[1] else None
    if purpose is not None:
        named = {stem(w) for w in re.findall(r"[a-z][\w-]*", purpose.group(1).lower())} - STOP_STEMS
        if named and not named & (question_words(quantity) if quantity else wanted):
            return f"{NOT_THE_QUANTITY} (for {purpose.group(1).strip()}, which the question does not ask about)"
    # "a 1024 byte buffer", "an 8 KiB page": the figure, right after "a", is the size of the noun after its unit
    attribute = _ATTRIBUTE_OF.match(quote, unit_end) if unit_end > amount.span[1] and \
        re.search(r"\b(?:an?|the)\s+$", quote[max(0, start - 6):start], re.IGNORECASE) else None
    if attribute is not None:
        noun = attribute.group(1).lower()
        if noun not in STOPWORDS | _QUANTITY_NOUNS and stem(noun) not in wanted | ROLE_WORDS:
            return f"{NOT_THE_QUANTITY} (a {noun}'s size, which the question does not ask about)"
    return None



# What a figure is of a quantity, from the words of its own clause (general English, no manual's words):
# the value an example shows, the least or the most a quantity may be, a default, a recommendation, a value
# before a change. A question or a contract's metric says which one it asks (asked_roles); a figure that is
# another one (role_conflict) is not the answer, however well its unit and its words fit: "For example,
# maxpoll 9 indicates ... 9 (512 seconds)", "cannot be larger than 65536 bytes" against the default,
# "reduced from 100 to 15 seconds" against today's value.
EXAMPLE, MINIMUM, MAXIMUM, DEFAULT, ADVICE, BEFORE, RANGE, NEGATED, DELTA = (
    "example", "minimum", "maximum", "default", "recommended", "earlier value", "range end", "negated",
    "added amount")


NEGATION = r"(?:not|never|cannot|can't|must\s+not|may\s+not|no)\s+(?:[a-z]+\s+){0,2}?"


_ROLE_CUES: tuple[tuple[str, str], ...] = (
    (EXAMPLE, r"for\s+example|for\s+instance|e\.\s?g\.|such\s+as|example|examples|\bsay,"),
    (MAXIMUM, rf"{NEGATION}(?:exceed|larger|greater|more|longer|bigger|higher|above|over)|"
              r"(?:less|smaller|shorter|fewer|lower)\s+than|below|under|"
              r"maximum|max|at\s+most|up\s+to|upper\s+(?:limit|bound)|largest|highest|longest|biggest|"
              r"limit(?:ed)?\s+(?:of|to|is)|cap(?:s|ped)?\b(?:\s+\S+){0,5}?\s+(?:at|to)|ceiling|cap\s+of"),
    (MINIMUM, rf"{NEGATION}(?:smaller|less|lower|shorter|fewer|below|under|quicker|faster|sooner)|"
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
ROLE_AFTER = re.compile(r"[-\s]*(?:[a-zµ]+[-\s]*)?(?:(?P<max>or\s+(?:less|fewer|lower|smaller|below)|at\s+most|"
                         r"maximum|max\b)|(?P<min>or\s+(?:more|greater|higher|larger|above)|at\s+least|minimum|"
                         r"min\b))", re.IGNORECASE)


_EXTREME_AFTER_MAX = re.compile(r"^\s*\((?:the\s+)?(?:highest|largest|maximum|max|longest|most)\b", re.IGNORECASE)


_EXTREME_AFTER_MIN = re.compile(r"^\s*\((?:the\s+)?(?:lowest|smallest|minimum|min|shortest|least)\b", re.IGNORECASE)


_ILLUSTRATION_GOES_ON = re.compile(r"\d\s+(?:means|would\s+mean)\s+that\b", re.IGNORECASE)
_ILLUSTRATES = re.compile(r"(?:\s+[a-zµ]+)?\s+(?:means|would\s+mean|would|gives|makes)\b", re.IGNORECASE)
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


def phrase_after(quote: str, amounts: Sequence[Amount], i: int) -> str:
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


def clause_before(quote: str, amounts: Sequence[Amount], i: int) -> tuple[str, str]:
    """(the figure's own clause, the segment of its sentence since the figure before it and its own phrase)
    before amounts[i]."""
    start = amounts[i].span[0]
    own = _sentence_starts(quote, start)[-1]
    previous = i - 1 if i > 0 and amounts[i - 1].span[1] > own else None
    begin = amounts[previous].span[1] + len(phrase_after(quote, amounts, previous)) if previous is not None else own
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
    clause, segment = clause_before(quote, amounts, i)
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
    phrase = phrase_after(quote, amounts, i)
    if _DEFAULT_AFTER.search(phrase):
        roles.add(DEFAULT)
    if _ILLUSTRATES.match(quote, amount.span[1]) or _ILLUSTRATION_GOES_ON.search(
            quote, _sentence_starts(quote, amount.span[0])[-1], amount.span[0]):
        roles.add(EXAMPLE)  # "so a value of 1000 means that Readline will wait one second": an illustration
    tail = ROLE_AFTER.match(phrase)
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
            quote.startswith("..", amount.span[1]) or quote[:amount.span[0]].endswith("..")
            or (i > 0 and is_range(quote, amounts[i - 1], amount))
            or (i + 1 < len(amounts) and is_range(quote, amount, amounts[i + 1]))
            or re.search(r"\bbetween\s*$", clause, re.IGNORECASE)
            or (i > 0 and re.search(r"\bbetween\s*$", clause_before(quote, amounts, i - 1)[0], re.IGNORECASE)
                and re.search(r"\band\s*$", segment, re.IGNORECASE))):
        roles.add(RANGE)
    return frozenset(roles)


def range_high_end(quote: str, amounts: Sequence[Amount], i: int) -> bool:
    """Whether amounts[i] is the upper end of a range ("4-6", "from 2048 to 256M", "between 1 (...) and 99")."""
    if i == 0:
        return False
    if is_range(quote, amounts[i - 1], amounts[i]):
        return True
    return re.search(r"\bbetween\s*$", clause_before(quote, amounts, i - 1)[0], re.IGNORECASE) is not None \
        and re.search(r"\band\s*$", clause_before(quote, amounts, i)[1], re.IGNORECASE) is not None


def subject_extremes(text: str, quantity: set[str]) -> frozenset[str]:
    """The extremes `text` says its setting is of the quantity (`quantity`: its words, stemmed): "Specifies the
    minimum RSA key size ...", "controls the maximum amount of transfers" are an extreme's entry; a word of the
    quantity must follow the extreme within four words, so a stray "maximum" elsewhere says nothing."""
    return frozenset(_EXTREMES[m.group(1).lower()] for m in _EXTREME_OF.finditer(text)
                     if {stem(w.lower()) for w in m.group(2).split()} & quantity
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
    return stems(text) | {stem(w) for w in re.findall(r"[a-z]+", text.lower())} | \
        {part for name in SETTING_NAME.finditer(text) for part in name_parts(name.group(0))} | \
        set(re.findall(r"\d+(?:\.\d+)+", text))


def _own_words(quote: str, amounts: Sequence[Amount], i: int) -> set[str]:
    """The words that say what the i-th figure is of: its sentence's segment since the figure before it (and
    that figure's own phrase) and its own phrase after it."""
    _, segment = clause_before(quote, amounts, i)
    return _words_of(f"{segment} {phrase_after(quote, amounts, i)}")


_CASE_QUALIFIER = re.compile(r"\b(?:for|with|on|under|without|when|if|in)\s+[\w\"'“]", re.IGNORECASE)


def parallel_figures(quote: str, amounts: Sequence[Amount], read: Sequence[Stated], asked: str,
                     wanted: frozenset[str] = frozenset(), claimed: set[str] | None = None) -> dict[int, str]:
    """The figures a quote states in the brief's unit side by side, for different cases, that the question does
    not ask about: each is refused when another one's own words fit the question better. "the default value for
    foreground mounts is 2 minutes, and the default value for background mounts is 10000 minutes" answers a
    question about foreground mounts with 2; "Default Value: -1 (Unlimited) ; Development Value: 60" asked for
    the default answers -1; "Recommended values are 1 for fast compression (default), and 9 for high
    compression" asked for the default answers 1. Only the words that tell the figures apart count (those of
    every figure's clause are the sentence's subject), and a tie refuses nothing. Under a contract (`claimed`:
    the claim's words that are not its metric's), a figure whose own words are more than half of them is the
    claim restated, not a case of it, and takes no part: "measured lead at 7.6 ppb at the 90th percentile ..., challenging the
    water authority's claim that its plant upgrade cut lead levels below 5 ppb" measures with its 7.6 (the
    contract rule then sets the restating bound aside)."""
    candidates = [i for i, r in enumerate(read) if r.why is None and r.value is not None]
    if len({read[i].value for i in candidates}) < 2:
        return {}
    words = question_words(asked) - set(STOP_STEMS)
    own = {i: _own_words(quote, amounts, i) for i in candidates}
    restating = {w for w in (claimed or set()) - set(STOP_STEMS) if not w[:1].isdigit()}
    candidates = [i for i in candidates if not 2 * len(own[i] & restating) > len(restating)]
    if len({read[i].value for i in candidates}) < 2:
        return {}
    qualified = [i for i in candidates[1:] if _CASE_QUALIFIER.search(clause_before(quote, amounts, i)[1])]
    if not qualified:  # "For RSA keys, the minimum size is 1024 bits and the default is 3072 bits": "For RSA keys"
        first = candidates[0]  # is said of both, as no later figure has a qualifier of its own
        segment = clause_before(quote, amounts, first)[1]
        breaks = list(_CLAUSE_BREAK.finditer(segment.rstrip()))
        if breaks:
            own[first] = _words_of(f"{segment[breaks[-1].end():]} {phrase_after(quote, amounts, first)}")
    for i in candidates:  # "from 2048 to 256M bytes": the two ends of one range share their words
        if i - 1 in own and range_high_end(quote, amounts, i):
            own[i] = own[i - 1] = own[i] | own[i - 1]
    common = set.intersection(*(own[i] for i in candidates))
    extremes = wanted & {MINIMUM, MAXIMUM}  # said to be the extreme asked ("(maximum 22)"): that counts first
    score = {i: len((own[i] - common) & words) + 10 * len(figure_roles(quote, amounts, i) & extremes)
             for i in candidates}
    best = max(score.values())
    leaders = [i for i in candidates if score[i] == best]
    if len({read[i].value for i in leaders}) != 1:
        return {}
    return {i: f"{NOT_THE_QUANTITY} (another figure of the quote is said of what the question asks)"
            for i in candidates if score[i] < best and read[i].value != read[leaders[0]].value}


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
        of = _words_of(said.of) - STOP_STEMS - ROLE_WORDS
        if of and not of & _words_of(f"{entry_of(lead)} {quote}"):
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


_UNIT_IN_GAP = re.compile(r"^\s*[A-Za-zµμ]+(?=\s*(?:-|–|—|to|through|thru)\s*$)", re.IGNORECASE)


def is_range(quote: str, a: Amount, b: Amount) -> bool:
    """"4-6 ppb", "4 to 6 ppb", "between 4 and 6 ppb", "100,000 bytes through 900,000 bytes": two amounts that
    are one range."""
    gap = quote[a.span[1]:b.span[0]]
    unit_word = _UNIT_IN_GAP.match(gap)
    gap = gap[unit_word.end():] if unit_word else gap
    if not RANGE_GAP.fullmatch(gap) or YEAR.fullmatch(a.raw.strip()):
        return False
    if gap.strip().lower() == "and":
        return bool(re.search(r"between\s*$", quote[:a.span[0]], re.IGNORECASE))
    return True


def stem(word: str) -> str:
    """A word less its plural or past ending, enough to match "links" to "link", "needed" to "need"."""
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[:-len(ending)]
    return word


STOP_STEMS = frozenset({"value", "set", "use"} | STOPWORDS)


def stems(text: str) -> set[str]:
    """`text`'s content words, stemmed (stem): what a metric, a claim, a question and a quote are matched by."""
    return {stem(w) for w in content_words(text)}


# Words of a metric that say which figure of a quantity it is, not which quantity: its extreme or default.
ROLE_WORDS = frozenset(stem(w) for w in ("maximum", "minimum", "max", "min", "default", "largest", "smallest",
                                            "highest", "lowest", "longest", "shortest", "typical", "allowed",
                                            "permitted", "value", "limit", "most", "least", "minimal", "maximal"))


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


_EXTREME_OF = re.compile(rf"\b({alternation(_EXTREMES)})((?:\s+[A-Za-z][\w-]*){{1,4}})", re.IGNORECASE)


def quantity_noun(quote: str, start: int) -> str | None:
    """The noun that says what the figure at `start` measures when it is "the <noun> of N" ("an interval of
    75 seconds": interval), or None (no such noun, or one that says no quantity: "a value of", "a maximum of").
    measures_another_quantity asks it of a contract's metric, another_quantity_asked of an estimate's question."""
    said = _OF_NOUN.search(quote[max(0, start - 40):start])
    noun = said.group(1).lower() if said else None
    return None if noun is None or noun in _SAYS_NO_QUANTITY else noun
