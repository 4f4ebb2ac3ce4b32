"""Reading a quote's amounts: whether a quote states an amount as a quantity in a unit, and its value.

Pure, typed, no I/O. figure_reading is the rule: the figure's unit, written beside it or named before it
in its entry, converted by the units library (units.py); never inside code, a formula, a command line, a
version, a date or a condition. Which of the figures so read is the one a question asks about is asked.py's;
figures.py checks a proposed number against both.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from . import units
from .amounts import Amount, parse_unit, RANGE_GAP, SCALES, to_unit, YEAR
from .decide import ENTRY_MAX_CHARS, entry_of, is_term_line, leans_on_before


NOT_THE_QUANTITY = "not stated as the quantity"


OTHER_UNIT = "in another unit"


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


def sentence_starts(quote: str, start: int) -> tuple[int, ...]:
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
    starts = sentence_starts(quote, start)
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
    sentence = sentence_starts(quote, start)[-1]
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
    own = sentence_starts(quote, start)[-1]
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
