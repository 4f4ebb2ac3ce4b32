"""Hypothesis contracts (seed 2): what a quote's figures say of a claim's metric against its target.

Pure, typed, no I/O. A quote's figures are read by the estimate's rules (stated.py, asked.py, figures.py) with
the metric in place of a question; their own words bound them ("at most 31", "must not exceed 4", "under 80",
"at least 2"), and where the metric is that very extreme the figure is its value. quote_stance gives a quote's stance (supports, contradicts,
neutral) from those figures alone, never from the model's label; judge.contract_verdict weighs the stances.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .amounts import Amount, parse_amounts, parse_unit, SAME_FIGURE
from .decide import CODE_NAME, entry_of
from .asked import (
    asked_roles, BEFORE, clause_before, figure_roles, MAXIMUM, MINIMUM, name_parts, NEGATION, phrase_after,
    quantity_noun, RANGE, range_high_end, ROLE_AFTER, ROLE_WORDS, SETTING_NAME, stem, stems, STOP_STEMS,
)
from .figures import stated_amounts
from .stated import figure_reading, is_range, money_or_share, unit_after
from .numbers import number_text



COMPARATORS: tuple[str, ...] = ("<", "<=", ">", ">=", "==", "between")


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


_UPPER_CLOSED = (rf"{NEGATION}(?:exceed\w*|larger|greater|more|longer|bigger|higher|above|over)(?:\s+than)?|at\s+most|"
                 r"up\s+to|no\s+more\s+than|as\s+(?:much|many|long|large|high)\s+as|a\s+maximum\s+of|"
                 r"limit(?:s|ed)?\b(?:\s+\S+){0,6}?\s+(?:to|at)|cap(?:s|ped)?\b(?:\s+\S+){0,5}?\s+(?:at|to)|"
                 r"cap\s+of|<=|=<|≤")


_LOWER_OPEN = r"(?:more|greater|larger|longer|higher)\s+than|above|over|exceed\w*|in\s+excess\s+of|just\s+over|>>?"


_LOWER_CLOSED = (rf"{NEGATION}(?:less|fewer|smaller|shorter|lower|below|under|quicker|faster|sooner)(?:\s+than)?|"
                 r"at\s+least|no\s+(?:less|fewer)\s+than|upwards\s+of|a\s+minimum\s+of|>=|≥")


_BOUND_WORDS = re.compile(rf"(?<![\w-])(?:(?P<uc>{_UPPER_CLOSED})|(?P<lc>{_LOWER_CLOSED})|(?P<uo>{_UPPER_OPEN})|"
                          rf"(?P<lo>{_LOWER_OPEN})|(?P<uo2><<?))(?![\w-])", re.IGNORECASE)


_BOUND_BEFORE = re.compile(rf"(?<![\w-])((?:{_UPPER_CLOSED})|(?:{_LOWER_CLOSED})|(?:{_UPPER_OPEN})|(?:{_LOWER_OPEN}))\s*$",
                           re.IGNORECASE)


# "If a person contributes more than around 15 lines ..., we need copyright papers": in a rule's condition a bound
# word states the threshold at which the rule applies, the figure the metric is, not a bound on it.
_THRESHOLD_OF_A_RULE = re.compile(r"\b(?:if|when|whenever|once)\b", re.IGNORECASE)


def _bound(clause: str, phrase: str) -> tuple[str, bool] | None:
    """("upper" or "lower", open) of the last bound word of a figure's clause, or of its phrase after it ("3 or
    more", "90 days at most"); None when neither bounds it."""
    tail = ROLE_AFTER.match(phrase)
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
    return unit_after(unit).match(quote, amount.span[1]) is not None


def quote_figures(contract: Contract, quote: str, lead: str = "", unit_kind: str = "") -> tuple[ClaimFigure, ...]:
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
    read = stated_amounts(quote, contract.unit, naming, lead, roles_of=contract.metric, unit_kind=unit_kind)
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
        if nxt is not None and not earlier and is_range(quote, a, amounts[nxt]) and read[nxt].value is not None \
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
        clause, segment = clause_before(quote, amounts, i)
        bound = None if _THRESHOLD_OF_A_RULE.search(clause) else _bound(clause, phrase_after(quote, amounts, i))
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


def _metric_words(contract: Contract) -> set[str]:
    """The metric's own words, stemmed, less the unit's ("maximum compression level" in "level": maximum,
    compression): figure_reading already asks for the unit beside the figure, and "LINK 36 Symbolic link"
    (dir_colors(5)) names "symbolic links" but is no count of the symbolic links followed."""
    return stems(contract.metric) - stems(contract.unit)


def code_names(metric: str) -> tuple[str, ...]:
    """The code names a metric is said of (decide.CODE_NAME: "http.postBuffer", "PIPE_BUF", "HISTSIZE"): the
    one word that says which of a manual's many settings the claim is about, so a quote of that metric names
    each of them."""
    return tuple(m.group(0) for m in CODE_NAME.finditer(metric))


NAMED_WORDS = 2  # the claim's and the metric's words a quote names, at the least, where few of the metric's are


def names_the_metric(contract: Contract, quote: str, lead: str = "") -> bool:
    """True when `quote`, read with the definition it leans on (`lead`: the passage before it, a term line),
    names the quantity the metric is: more than half of the metric's own words (_metric_words, less the words
    that only say which figure of it: its extreme, its default), or NAMED_WORDS of the claim's and the metric's
    words ("The single line synopsis ... under 80 characters" names a package's one-line synopsis), and every
    code name the metric names (code_names, or
    most of its words: "UserStopDelaySec=" in the term line above "Defaults to 10s."), or the contract names
    no metric, or its unit is money, a share or a trace concentration. Which figure of the quantity a figure
    is (the default, the maximum, an example's), and which setting's, figure_roles and another_quantity_asked
    decide for each figure: "the largest ref negotiation request ... (http.maxRequestBuffer) ... 10 MiB"
    names none of the http.postBuffer default's settings."""
    if money_or_share(contract.unit):
        return True
    wanted = (_metric_words(contract) - ROLE_WORDS) or (stems(contract.metric) - ROLE_WORDS)  # "default redirect
    if not wanted:                                                  # limit" in redirects: the redirects are named
        return True
    text = f"{entry_of(lead)}\n{quote}"
    folded = text.lower()
    words = stems(text) | {part for name in SETTING_NAME.finditer(text) for part in name_parts(name.group(0))}
    for name in code_names(contract.metric):  # each named setting, written out or every word of it there
        if name.lower().rstrip("=") not in folded and not name_parts(name) <= words:
            return False
    claim = _BOUND_WORDS.sub(" ", contract.claim)  # "smaller than", "at most": the comparison, not the quantity
    claimed = (stems(claim) - stems(contract.unit) - ROLE_WORDS - STOP_STEMS) | wanted
    return 2 * len(wanted & words) > len(wanted) or len(claimed & words) >= NAMED_WORDS


def measures_another_quantity(contract: Contract, quote: str, start: int) -> str | None:
    """The other quantity a contract's figure at `start` is said of ("an interval of 75 seconds": interval),
    or None. Where a count or a size is "the <noun> of N", the noun names what N measures: a noun that is
    none of the metric's words is another quantity, however much of the metric the rest of the quote
    names (tcp(7)'s "An idle connection is terminated after approximately an additional 11 minutes (9
    probes an interval of 75 seconds apart) when keep-alive is enabled." names the idle time before
    keep-alive probes, but its 75 seconds are the interval between probes). Money, shares and trace
    concentrations are read as before (names_the_metric): their unit says what is measured."""
    wanted = _metric_words(contract)
    if not wanted or money_or_share(contract.unit):
        return None
    noun = quantity_noun(quote, start)
    return None if noun is None or stem(noun) in wanted else noun


# A man page documents one program or interface, and its file is named for it: "curl.1.txt" (the lab's),
# "curl.1.en.html" (manpages.debian.org), "man1/curl.1.html" (man7.org), "ssh_config.5.gz".
_MAN_PAGE = re.compile(r"([A-Za-z][\w+-]*)\.([1-9])[a-z]*(?:\.[a-z]{2}(?:_[A-Z]{2})?)?(?:\.(?:txt|html?|gz))?")


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
    return {stem(w) for w in re.split(r"[\W_]+", page.group(1).lower()) if len(w) >= 2}


def another_programs_option(contract: Contract, quote: str, url: str | None) -> str | None:
    """Why the quote's figures are the value of an option of a program the claim is not about, or None.

    A man page's "this option" is its program's: curl(1)'s "This option sets the time a connection needs to
    remain idle before sending keepalive probes ... If unspecified, the option defaults to 60 seconds." names
    the metric of "Linux TCP waits more than 3600 seconds of idle time before it sends keep-alive probes", but
    its 60 seconds are curl's --keepalive-time, not the kernel's (tcp(7): 7200 seconds). It still reads a claim
    that names the program ("curl follows at most 50 redirects"). Only "this option" is read so: the rest of a
    command's page may state a fact of its subject ("all are managed as pages (typically 4096 bytes)" in a
    process viewer's page), and another program's page is kept from a question about one program by the quote
    filter (decide.names_subject), not here. Only a man page's file says which program it documents; a claim
    that names none (Contract.claim empty) is read as before."""
    if not contract.claim or not _AN_OPTION.search(quote):
        return None
    names = man_page_names(url)
    claimed = stems(f"{contract.claim} {contract.metric}")
    if not names or any(word.startswith(name) for word in claimed for name in names):  # "bzip2recover": bzip2's
        return None
    return f"an option of {'/'.join(sorted(names))}, which the claim does not name"


def quote_stance(contract: Contract, quote: str, url: str | None = None, lead: str = "",
                 unit_kind: str = "") -> QuoteReading:
    """The quote's stance on the contract, from its figures alone (the model's label plays no part).

    supports: at least one figure meets the contract and none fails it; contradicts: at least
    one fails and none meets; neutral: no figure in the unit decides, or figures on both sides
    (the quote gives two readings and code cannot tell which one is the metric), or the quote
    does not name the metric (names_the_metric: its figures are another quantity's), or its
    figures are an option of a program the claim is not about (another_programs_option: `url`
    is the quote's page or document). `lead`: the passage before the quote, where its unit or its setting's
    name may be written (a definition's term line); `unit_kind`: what its document marks the quote's part as
    (an example's figures decide nothing: figures.stated_amounts)."""
    if not names_the_metric(contract, quote, lead):
        return QuoteReading("neutral", (), f"does not name the metric ({contract.metric})")
    other = another_programs_option(contract, quote, url)
    if other is not None:
        return QuoteReading("neutral", (), other)
    figures = quote_figures(contract, quote, lead, unit_kind)
    outcomes = {f.outcome for f in figures}
    if MEETS in outcomes and FAILS in outcomes:
        return QuoteReading("neutral", figures, "figures on both sides of the target")
    if FAILS in outcomes:
        return QuoteReading("contradicts", figures, "a figure fails the contract")
    if MEETS in outcomes:
        return QuoteReading("supports", figures, "a figure meets the contract")
    why = f"no figure in {contract.unit} that decides" if figures else f"no figure in {contract.unit}"
    return QuoteReading("neutral", figures, why)
