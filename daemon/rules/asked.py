"""What a question asks of a figure: which quantity (its words, a setting's name) and which figure of it.

Pure, typed, no I/O. A quote states many figures in the brief's unit; the rules here, in general English
rather than any one manual's words, say which of them is not the one asked:
- figure_roles and asked_roles: what a figure is of its quantity (an example's value, an end of a permitted
  range, a minimum, a maximum, a default, a recommendation, an earlier value, an added amount, what it is
  not), from its own clause, against what the question or a contract's metric asks (role_conflict);
- parallel_figures and another_quantity_asked: which of several figures, and whose setting;
- stem, stems, question_words, quantity_noun: the words a question, a metric and a quote are matched by.
How a figure is read from its quote is stated.py's; figures.py and contracts.py use both.
"""

from __future__ import annotations

import re
from typing import Sequence

from . import units
from .amounts import alternation, Amount
from .decide import CODE_NAME, STOPWORDS, content_words
from .stated import NOT_THE_QUANTITY, Stated, is_range, sentence_starts


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
                len(words_of(sentence.replace(name, " ")) & wanted - STOP_STEMS - ROLE_WORDS) >= 2:
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
    sentence = quote[sentence_starts(quote, start)[-1]:start]
    breaks = list(re.finditer(r"[,;]", sentence))
    clause = sentence[breaks[-1].end():] if breaks else sentence
    wanted = question_words(asked)
    folded = asked.lower()
    for name in SETTING_NAME.finditer(clause):
        parts = name_parts(name.group(0))
        if name.group(0).lower() in folded or not parts or 2 * len(parts & wanted) > len(parts):
            continue
        if not _defined_as_asked(name.group(0), quote[:sentence_starts(quote, start)[-1]], wanted):
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


RESTATES = re.compile(r"^\s*(?:\(|\(\s*i\.\s?e\.,?|\(=|=)\s*$")  # "10 (1024 seconds)": the same figure again


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
    own = sentence_starts(quote, start)[-1]
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
    if i > 0 and RESTATES.match(segment) and amounts[i - 1].span[1] > sentence_starts(quote, amount.span[0])[-1]:
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
            quote, sentence_starts(quote, amount.span[0])[-1], amount.span[0]):
        roles.add(EXAMPLE)  # "so a value of 1000 means that Readline will wait one second": an illustration
    tail = ROLE_AFTER.match(phrase)
    if tail is not None:
        roles |= {MAXIMUM} if tail.group("max") else set()
        roles |= {MINIMUM} if tail.group("min") else set()
    roles |= {MAXIMUM} if _EXTREME_AFTER_MAX.search(phrase) else set()  # "99 (highest priority)"
    roles |= {MINIMUM} if _EXTREME_AFTER_MIN.search(phrase) else set()
    sentence = quote[sentence_starts(quote, amount.span[0])[-1]:amount.span[0]]
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


def words_of(text: str) -> set[str]:
    """`text`'s words as a figure's own words are matched against a question's: stemmed, the parts of the
    setting names it writes (name_parts) and its dotted numbers ("2.6.11")."""
    return stems(text) | {stem(w) for w in re.findall(r"[a-z]+", text.lower())} | \
        {part for name in SETTING_NAME.finditer(text) for part in name_parts(name.group(0))} | \
        set(re.findall(r"\d+(?:\.\d+)+", text))


def _own_words(quote: str, amounts: Sequence[Amount], i: int) -> set[str]:
    """The words that say what the i-th figure is of: its sentence's segment since the figure before it (and
    that figure's own phrase) and its own phrase after it."""
    _, segment = clause_before(quote, amounts, i)
    return words_of(f"{segment} {phrase_after(quote, amounts, i)}")


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
            own[first] = words_of(f"{segment[breaks[-1].end():]} {phrase_after(quote, amounts, first)}")
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
