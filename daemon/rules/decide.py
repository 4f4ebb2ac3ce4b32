"""The decision core: pure, typed, no I/O. The model proposes; these rules decide.

Everything that chooses what happens next in a brief lives here, so it can be
tested with plain tables of cases: which queries to run (never one already
asked), which URLs to fetch (never one visited or known bad), when to stop and
why, and the loop state itself (seed 4), which is explicit and serialisable so
it can be checkpointed after every step and shown by `briefd status`.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

from . import units
from .numbers import span_text

STOPWORDS = frozenset(
    """a an and are as at be been by can could did do does for from had has have how i if in
    into is it its of on or over per so than that the their there these this those to was were
    what when where which who why will with would about after before between during than
    under vs versus""".split()
)

# Stop reasons (report.json `stop_reason`): the one list, used by the loop, its policies and tests.
TARGET_REACHED, BUDGET, STALLED, CONVERGED, GAPS_CLOSED, MAX_ROUNDS, EXHAUSTED, CANCELLED = (
    "target_reached", "budget", "stalled", "converged", "gaps_closed", "max_rounds", "exhausted", "cancelled",
)
# The order stop_reason checks them in (the first that holds wins); EXHAUSTED is the loop's own
# (it alone knows whether it could make another query), CANCELLED the worker's.
STOP_ORDER = (TARGET_REACHED, BUDGET, STALLED, CONVERGED, GAPS_CLOSED, MAX_ROUNDS)
STALL_ROUNDS = 2   # rounds in a row without new evidence that make a brief stalled (seed 4)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def content_words(text: str) -> list[str]:
    """Lower-cased words minus stopwords, in order, without repeats."""
    out: list[str] = []
    for word in _TOKEN.findall(text.lower()):
        if word not in STOPWORDS and word not in out:
            out.append(word)
    return out


def normalize_query(query: str) -> str:
    """Two queries are the same search when they have the same content words in any order."""
    return " ".join(sorted(content_words(query)))


def is_duplicate_query(query: str, asked: Iterable[str], threshold: float = 0.8) -> bool:
    """Same content words, or near enough (Jaccard ≥ threshold), as a query already used."""
    words = set(content_words(query))
    if not words:
        return True
    for other in asked:
        other_words = set(content_words(other))
        if not other_words:
            continue
        if words == other_words:
            return True
        if len(words & other_words) / len(words | other_words) >= threshold:
            return True
    return False


def relevance(text: str, topics: Sequence[str]) -> float:
    """Share of the topics' content words that `text` contains (0..1): a cheap, explainable
    measure used to order evidence and to refuse quotes that are about something else."""
    wanted = {w for topic in topics for w in content_words(topic)}
    if not wanted:
        return 0.0
    return len(wanted & set(content_words(text))) / len(wanted)


BM25_K1, BM25_B = 1.2, 0.75  # Okapi BM25's usual constants (SQLite FTS5 uses the same)


def bm25_order(texts: Sequence[str], query: str) -> list[int]:
    """Indices of `texts`, best match for `query` first, by Okapi BM25 over these texts alone.

    Why not the store's full-text index: its BM25 weighs words by how rare they are in every
    passage ever stored, so the same passages rank in another order once the store has read
    more, and a brief asked again would send other prompts (and pay for them again). Ranked
    against each other only, the same passages always come in the same order. Ties keep the
    given order (the pages' rank, then their position).
    """
    words = [_TOKEN.findall(text.lower()) for text in texts]
    terms = content_words(query)
    if not texts or not terms:
        return list(range(len(texts)))
    avg = sum(len(w) for w in words) / len(words) or 1.0
    having = {t: sum(1 for w in words if t in w) for t in terms}
    idf = {t: math.log((len(texts) - n + 0.5) / (n + 0.5) + 1.0) for t, n in having.items()}

    def score(w: list[str]) -> float:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * len(w) / avg)
        return sum(idf[t] * w.count(t) * (BM25_K1 + 1) / (w.count(t) + norm) for t in terms if t in w)

    scores = [score(w) for w in words]
    return sorted(range(len(texts)), key=lambda i: (-scores[i], i))


PLAN_RELEVANCE_MIN = 0.6


def plan_relevance(question: str, queries: Sequence[str]) -> float:
    """Seed 5's relevancy gate, computed: how much of the question the planned queries cover (0..1).

    Each query scores twice its share of the question's content words, capped at 1 (a query
    carrying half the question's words is fully on topic); the plan scores their mean.
    """
    if not queries:
        return 0.0
    return sum(min(1.0, 2 * relevance(q, [question])) for q in queries) / len(queries)


def on_topic_queries(question: str, queries: Sequence[str]) -> list[str]:
    """The planned queries that count as fully on topic for `plan_relevance` (half the question's
    content words or more), in order."""
    return [q for q in queries if 2 * relevance(q, [question]) >= 1.0]


def replan_can_help(question: str, queries: Sequence[str], slots: int) -> bool:
    """Whether a second plan could change what is searched first (the re-plan is a model call).

    Round 1 searches the question itself and `slots` planned queries. When the first plan has
    at least that many queries on topic, its off-topic ones are dropped instead: a second plan
    could only replace queries that round 1 would not reach, and later rounds are aimed by the
    gaps and the evidence, not by the plan's leftovers.
    """
    return len(on_topic_queries(question, queries)) < slots


def is_related(text: str, topics: Sequence[str]) -> bool:
    """Whether `text` shares a content word with the question or any open gap: the floor a
    proposed query or gap must pass (steps.off_topic, the plan's gaps). A quote or a passage must
    pass more than this: bears_on, because one shared word ("water", "default") is no answer.
    """
    return relevance(text, topics) > 0.0


# The word after "how" asks for a quantity ("how many", "how long", "how large"): it frames the
# question rather than naming its subject, and a passage saying "many" or "long" is not about it.
_FRAMED_BY_HOW = re.compile(r"\bhow\s+([^\W_]+)", re.IGNORECASE)
_SUFFIXES = ("ing", "ed", "es", "s", "e")  # one is taken off: boils/boiling -> boil, gives/giving -> giv
STEM_MIN_CHARS = 3
TERMS_FOR_TWO = 3  # a topic of this many terms or more needs two of them: one shared word is chance
TERMS_FOR_THREE = 7  # and of this many, three: two generic ones ("default", "size") are chance in a long one


def _stem(word: str) -> str:
    """A crude, symmetric stem: one common inflection taken off, so that "boils" meets "boiling"
    and "connections" meets "connection" (briefd has no stemmer, and a wrong merge costs little:
    it can only make a passage count as related, which the second term must confirm)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= STEM_MIN_CHARS:
            return word[: -len(suffix)]
    return word


_NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# A word made of words: "HandleLidSwitchDocked=", "tcp_fin_timeout", "http.postBuffer", "Cache-Start".
_COMPOUND = re.compile(r"(?<![\w.])(?:[A-Za-z]+[a-z0-9]*(?:[A-Z][a-z0-9]+)+|[A-Za-z]\w*(?:[._-][A-Za-z]\w*)+)(?![\w])")


def _terms(text: str) -> set[str]:
    """Stems of `text`'s content words of more than one letter (a lone "s" is a possessive's), and of the words a
    setting's name is made of ("HandleLidSwitchDocked=" names a lid switch when docked; "tcp_fin_timeout" a
    timeout)."""
    words = set(content_words(text))
    for name in _COMPOUND.finditer(text):
        words |= {part.lower() for part in _NAME_PART.findall(name.group(0))} - STOPWORDS
    return {_stem(w) for w in words if len(w) > 1}


# Words of a question that say which extreme of a figure it wants, not what of: "at most", "the smallest".
_FRAMING_WORDS = frozenset(_stem(w) for w in (
    "maximum", "minimum", "max", "min", "most", "least", "largest", "smallest", "longest", "shortest",
    "highest", "lowest", "biggest", "fewest", "typical", "typically", "usually", "allowed", "permitted"))


def topic_terms(topic: str) -> set[str]:
    """The terms a passage must share to be about `topic`: its content words, stemmed, less the words that frame
    the figure it asks rather than name its subject: the word after "how" ("how many", "how long"), the unit it
    asks in ("in megabytes": the units library knows it) and the extreme it asks ("at most", "the smallest").
    "default" stays: a manual's answer sentence often shares only it ("The default timeout is 5 minutes.")."""
    framing = {_stem(m.group(1).lower()) for m in _FRAMED_BY_HOW.finditer(topic)}
    in_unit = {_stem(w) for w in content_words(topic) if units.unit_of_word(w) is not None}
    return _terms(topic) - framing - in_unit - _FRAMING_WORDS


def terms_needed(terms: Collection[str]) -> int:
    """How many of a topic's terms a passage must share: one of a one- or two-term topic, two of
    a longer one (TERMS_FOR_TWO), so that a single common word cannot carry it, three of a long one
    (TERMS_FOR_THREE). Measured on the real-document set's manuals: every passage that states one of
    its answers shares at least three terms with its question; of the passages of *other* manuals
    sharing a word with a question, 21.8 % share two of its terms and 8.9 % share as many as this asks.
    """
    if len(terms) >= TERMS_FOR_THREE:
        return 3
    return 2 if len(terms) >= TERMS_FOR_TWO else 1


# Who a question is about, read from its grammar, not from a list of names: the owner of a possessive
# ("keepalived's health checker", "md's rebuild speed"), the source it names ("according to fstrim"), the subject
# of its inverted auxiliary ("How long does mutt wait", "What chunk size does mdadm use"). A modal is left out:
# "a command can return" is a relative clause, its next word a verb.
_POSSESSOR = re.compile(r"([^\W_][\w$.+-]*?)['’]s\b")
_ACCORDING_TO = re.compile(r"\baccording\s+to\s+([^\W_][\w$.+-]*[^\W_]|[^\W_])", re.IGNORECASE)
_DOES_SUBJECT = re.compile(r"\b(?:does|do|did)\s+([^\W_][\w$.+-]*[^\W_]|[^\W_])", re.IGNORECASE)
# Closed-class words that open a noun phrase or stand for one: "does it take", "does the kernel", "does a backup".
# What follows them is no name a document must carry.
_NOT_A_NAME = frozenset("""a an the it its this that these those one any each every there their his her you we they i
    some no all many much more most several such either neither what which who whom whose""".split())


def question_subjects(topic: str) -> set[str]:
    """The names `topic` says it is about (_POSSESSOR, _ACCORDING_TO, _DOES_SUBJECT), lower-cased: "mutt" for "How
    long does mutt wait before polling an open IMAP connection?". Empty for a question without one ("What is the
    default capacity of a pipe on Linux?"): nothing is then asked of the document."""
    names: set[str] = set()
    for pattern in (_POSSESSOR, _ACCORDING_TO, _DOES_SUBJECT):
        names |= {m.group(1).lower() for m in pattern.finditer(topic)}
    return {n for n in names if n not in _NOT_A_NAME}


def names_subject(topics: Sequence[str], read: str, document: str) -> bool:
    """Whether a quote read with its passage (`read`) or its document's name (`document`: title, address) names
    who the topics are about (question_subjects of each; an open gap is part of the brief's question, so the
    brief's names hold for it too), when they say: a sentence of one program's manual is no answer about another
    program, however many words it shares ("Wait n seconds between connection attempts" in another daemon's
    manual, for "How long does mutt wait before polling an open IMAP connection?"). One name is enough. In the
    text a name is a word (stemmed, as bears_on reads words; a compound by all its parts: "ip-link"); in a
    document's name it may begin a word, as the names of a program's files do ("muttrc", "keepalived.conf")."""
    subjects: set[str] = set().union(*(question_subjects(t) for t in topics))
    if not subjects:
        return True
    words = _terms(read)
    for name in subjects:
        parts = _terms(name)
        if parts and parts <= words:
            return True
        if begins_a_word_of(_TOKEN.findall(name), document):
            return True
    return False


def begins_a_word_of(names: Iterable[str], document: str) -> bool:
    """Whether one of `names` (lower-cased) begins a word of a document's name (its title and address), as the names
    of a program's files do ("muttrc", "keepalived.conf")."""
    file_words = [w.lower() for w in _TOKEN.findall(document)]
    return any(w.startswith(name) for name in names for w in file_words)


# What a question names, read from how rare its words are in general English, not from a list: "keepalived",
# "mdadm", "crontab", "fq_codel", "IMAP", "baud" name a program, a setting, a protocol or the quantity asked; "default",
# "compression", "level", "size" are every manual's words. wordfreq (a library made for the job: word frequencies
# from many corpora) gives each word's frequency on the Zipf scale (log10 of its occurrences per billion words).
RARE_ZIPF = 3.0
"""A word of a question rarer than this in general English (3.0 is once in a million words) names something: a
quote kept for the question must be read with one of them, when the question has any (names_distinctive)."""


@functools.lru_cache(maxsize=1 << 16)
def is_rare_word(word: str) -> bool:
    """Whether `word` (a lower-cased content word) is rarer than RARE_ZIPF in general English. A number never is:
    it is the figure asked or claimed, which the answer need not repeat."""
    if word.isdigit():
        return False
    from wordfreq import zipf_frequency  # loads its English list at the first question (load_word_frequencies)

    return all(zipf_frequency(form, "en") < RARE_ZIPF for form in _forms(word))


def load_word_frequencies() -> None:
    """Import wordfreq and load its English list now (about 0.4 s, once a process), so that the first quote
    judged (is_rare_word) does not pay it on the event loop: the daemon calls this in a thread as it starts."""
    from wordfreq import zipf_frequency

    zipf_frequency("default", "en")


def _forms(word: str) -> set[str]:
    """`word` and the words it may be an inflection of ("computes": compute, comput): an inflected form is rarer than
    its word, and "computes" names nothing that "compute" does not."""
    forms = {word}
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= STEM_MIN_CHARS:
            forms |= {word[: -len(suffix)], word[: -len(suffix)] + "e"}
    return forms


# A word written with a capital inside a sentence is a name ("APT", "Squid", "CPUs"), whatever its frequency: the
# first word of each sentence is not read so, since every sentence begins with one.
_CAPITALISED = re.compile(r"(?<=[^\W_]) +(?:[\w.$+-]*?)([A-Z][\w]*)")


# Letters and digits in one word are a name ("m4", "x509", "lz4", "bzip2"), not a figure.
_NAME_WITH_DIGITS = re.compile(r"^(?=.*[^\W\d_])(?=.*\d)[^\W_]+$")


@functools.lru_cache(maxsize=1024)
def distinctive_words(topic: str) -> tuple[str, ...]:
    """The words of `topic` that name what it is about: rare in general English (is_rare_word), capitalised inside
    its sentence, or letters with digits (_NAME_WITH_DIGITS), among those a passage must share with it
    (topic_terms: not the unit it asks in or the words that frame its figure). Cached: every quote judged asks
    it of the same few topics."""
    terms = topic_terms(topic)
    named = {m.group(1).lower() for m in _CAPITALISED.finditer(topic)}
    return tuple(w for w in content_words(topic)
                 if len(w) > 1 and _stem(w) in terms and (w in named or _NAME_WITH_DIGITS.match(w) or is_rare_word(w)))


def names_distinctive(topic: str, read: Collection[str], document: str) -> bool:
    """Whether a quote read with its passage (`read`: their terms, as bears_on has them) or its document's name (`document`: title, address) carries
    one of the words `topic` names its subject by (distinctive_words), when it has any: three quotes of another
    module's build note, a tar option and an SQL function shared "default" and "compression" with a question
    about one library's default compression level, and nothing that question names. In the text a word is a word
    (stemmed, as bears_on reads words); in a document's name it may begin a word ("mdadm.conf")."""
    rare = distinctive_words(topic)
    if not rare:
        return True
    return bool({_stem(w) for w in rare} & set(read)) or begins_a_word_of(rare, document)


def bears_on(text: str, topics: Sequence[str], *, context: str = "", document: str | None = None) -> bool:
    """Whether `text` answers something a topic (the question, an open gap) asks, not just shares
    a word with it: the rule a quote is kept by and a passage is shown to the model by.

    For one topic, `text` read with its `context` (the passage a quote was taken from, its page's
    title) must share terms_needed of the topic's terms (topic_terms: two, three of a long question),
    and `text` itself at least one. Why the context: in a manual the answer sentence names its
    subject once, in the term or the sentence before ("-H num: ... The default is 65537 entries."),
    so the quote alone often shares only "default" with the question, and so does every other
    sentence of the manual; the passage it sits in shares "hash", "symbol", "table". Why two terms:
    "What is the boiling point of water at the top of Mount Everest?" shares only "water" with a
    page on lead in tap water.
    Given the quote's `document` (its page's title and address), the quote must also name who the question
    is about, where the question says (names_subject: "does mutt wait" is not answered by another daemon's
    manual), and carry a word the question names its subject by, where it has one (names_distinctive: "APT",
    "Release", "Date", not "default", "file", "time").
    Why not weigh terms by how rare they are among the passages at hand: when search works, the
    passages at hand are all about the question, so its every term is common among them (refusing
    terms found in over half of 20 such passages refused the answer's passage for 8 of 55 of the
    real-document set's questions).
    """
    own, read = _terms(text), _terms(f"{text}\n{context}")
    leans = bool(context) and leans_on_before(text)  # "The minimum is 4 KiB.": its subject is in the passage
    if document is not None and not names_subject(topics, f"{text}\n{context}", document):
        return False
    for topic in topics:
        terms = topic_terms(topic)
        if (terms and (own & terms or leans) and len(read & terms) >= terms_needed(terms)
                and (document is None or names_distinctive(topic, read, document))):
            return True
    return False


# A sentence that names nothing of its own: what it states is said of the sentence before it ("Port Specifies
# the port number ... The default is 22."). sources/citable.py keeps it with that sentence in what the model
# cites; judge reads a figure in it as said of what that sentence names.
ENTRY_MAX_CHARS = 700
"""How far back what such a sentence leans on is looked for: a setting's whole entry in a manual (its term,
what it does, its default) fits."""
_LEANS_ON_BEFORE = re.compile(
    r"""^(?:
        (?:the\s+)?default(?:\s+(?:value|setting|size|number|limit|port))?\s*(?:is|was|are|:)(?=\W)
      | defaults?\s+(?:to|is)\b
      | (?:the\s+)?(?:maximum|minimum|max|min)(?:\s+(?:allowed|possible|permitted))?(?:\s+value)?
            (?:\s+(?:for|of)\s+\S+)?\s+is\b
      | it\s+(?:cannot|can\s+not|must|may\s+not|defaults)\b
      | if\s+(?:unspecified|unset|omitted|not\s+(?:set|specified|given|present|supplied))\b
      | otherwise\b
      | this\s+(?:option|parameter|keyword|variable|setting|value|directive|flag|limit|field)\b
      | it\s+defaults\b
      | (?:its|the)\s+default\s+value\s+is\b
      | the\s+value\s+(?:is|was|must|should|can|may|will)\b
      | (?:the\s+)?(?:(?:default|maximum|minimum)\s+)?(?:value|size|number|limit|setting)\s+of\s+(?:this|that|these)\b
    )""",
    re.IGNORECASE | re.VERBOSE,
)
TERM_MAX_WORDS = 12
"""A line of at most this many words that ends no sentence is a term or heading for the line under it."""

_ENDS_A_SENTENCE = re.compile(r"[.!?;:…][\"'”’)\]]*$")


def is_term_line(line: str) -> bool:
    """A short line that ends no sentence: a term, an option or a heading for what follows it."""
    line = line.strip()
    return bool(line) and not _ENDS_A_SENTENCE.search(line) and len(line.split()) <= TERM_MAX_WORDS


# A code name ("http.postBuffer", "PIPE_BUF", "LUA_MINSTACK", "lua_pushcfunction"): a dotted, underscored or
# camel-cased word, a capitalised one of five letters or more (not "RSA", "TCP", "HTTP", which name a field,
# not a setting; nor "i.e" and "e.g", whose first part is one letter), or a variable written with its sigil
# ("$timeout", "$HOME"). contracts.code_names reads a metric's; leans_on_before a sentence that goes on about
# one; asked.another_quantity_asked a figure's clause.
CODE_NAME = re.compile(r"(?<![\w.$])(?:[A-Za-z]\w+(?:[._]\w+)+|[a-z]+[A-Z]\w*|[A-Z][A-Z0-9_]{4,}|\$[A-Za-z_]\w*)"
                       r"(?![\w])")
# What a sentence that opens with a name goes on to say of it: "LUA_MINSTACK is defined as 20", "OPTIND is
# initialized to 1", "ZSTD_NBTHREADS has a default value of (1)". Not a term line's first words ("HISTSIZE The
# number of commands ...": the next entry's name, then what it is).
_SAYS_OF_THE_NAME = re.compile(
    r"\s+(?:is|are|was|were|has|have|can|must|may|should|will|defaults?|equals|specifies|sets|contains|holds)\b")


def leans_on_before(sentence: str, before: str = "") -> bool:
    """Does this sentence need the one before it to say what it is about? Either it names nothing of its own
    ("The default is 22.", "Defaults to 50.": _LEANS_ON_BEFORE), or it goes on about a code name that `before`
    (the text it follows) named: Lua's manual says "Whenever Lua calls C, it ensures that the stack has at least
    LUA_MINSTACK extra slots." then, as a paragraph of its own, "LUA_MINSTACK is defined as 20": the figure is a
    count of those slots. A name `before` does not name starts something new ("ORIG_HEAD is created by ..."
    after "FETCH_HEAD records ...")."""
    sentence = sentence.lstrip(" -*•")
    if _LEANS_ON_BEFORE.match(sentence):
        return True
    name = CODE_NAME.match(sentence)
    return name is not None and _SAYS_OF_THE_NAME.match(sentence, name.end()) is not None \
        and re.search(rf"(?<![\w.]){re.escape(name.group(0))}(?![\w])", before) is not None


# Text that talks to a model rather than about the world: the usual shapes of a prompt
# injection planted in a page. Narrow on purpose (a page *about* prompt injection may still
# be quoted when it describes rather than commands). One of these makes its whole page distrusted
# (distrust_reason), so a false positive costs a page: "say that" and "state that" are not here.
_ADDRESSES_A_MODEL = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+)?"
    r"(previous|prior|above|earlier|preceding|system)\s+(instructions?|prompts?|messages?|rules)"
    r"|\b(system|developer|admin)\s+(note|prompt|message|instructions?|override)\s*:"
    r"|\bnew\s+instructions?\s*:"
    r"|(^|[.!?]\s+)(please\s+)?(report|answer|respond|reply|conclude|tell\s+the\s+user)\s+that\b"
    r"|(^|[.!?]\s+)please\s+(say|state)\s+that\b",
    re.IGNORECASE,
)
# The same shape with a verb that also opens ordinary prose: "Say that 2.html is similar but ..." (wget(1):
# "suppose"), "State that ..." . Such a sentence may still be an instruction, so it is never shown to the
# model nor quoted (addresses_a_model), but it does not make a whole page distrusted: a manual that
# supposes is not a page that attacks.
_MAY_ADDRESS_A_MODEL = re.compile(r"(^|[.!?]\s+)(say|state)\s+that\b", re.IGNORECASE)


def addresses_a_model(text: str) -> bool:
    """True when a quote is an instruction to the reader-model (a prompt injection), not evidence.

    briefd's model only points at sentence ids and the rules compute every number and verdict,
    so an injection cannot steer them; this keeps it out of the quotes and the summary too.
    """
    if injected_instruction(text) is not None:
        return True
    return _MAY_ADDRESS_A_MODEL.search(" ".join(text.split())) is not None


INJECTION_EXCERPT_CHARS = 200
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s|$)")
DISTRUSTED_FOR_INJECTION = "carries instructions to a model (a prompt injection)"


def injected_instruction(text: str) -> str | None:
    """The first instruction to a model in `text` (a page's passage, title or snippet), or None.

    Each line is read on its own (a line break starts a sentence, so "Detour\nReport that ..."
    is caught) and then the whole text as one line (so an instruction broken over two lines is
    caught too): every quote briefd could take from the text is covered, which is what lets the
    loop distrust a page before the model reads any of it. Returns the sentence around the
    instruction, at most INJECTION_EXCERPT_CHARS long, for the report's distrusted list.
    """
    for piece in [*text.split("\n"), text]:
        flat = " ".join(piece.split())
        match = _ADDRESSES_A_MODEL.search(flat)
        if match is None:
            continue
        before = max((m.end() for m in _SENTENCE_BREAK.finditer(flat, 0, match.start() + 1)), default=0)
        after = _SENTENCE_BREAK.search(flat, match.end())
        excerpt = flat[before:after.start() + 1 if after else len(flat)].strip()
        return excerpt[:INJECTION_EXCERPT_CHARS]
    return None


def distrust_reason(text: str) -> str | None:
    """Why a page whose `text` this is is distrusted whole, in words for the report, or None."""
    found = injected_instruction(text)
    return None if found is None else f"{DISTRUSTED_FOR_INJECTION}: \u201c{found}\u201d"


# ---- what a quote must be to count as evidence ------------------------------------------------

# A quote must assert something. A bare question asserts nothing, and a headline or a heading
# only announces what the text under it says (and is written to sell it): the sentences below
# are the evidence. Told apart by shape, not by meaning: briefd has no part-of-speech tagger
# (a model for that would cost more than the rule is worth), and the shape is what the page
# itself signals: a line of its own with no sentence-ending punctuation.
HEADING_MAX_WORDS = 12
_CLOSERS = "\"'\u201d\u2019\u00bb)]"
_STATEMENT_END = ".!;:\u2026"
_QUOTE_SENTENCE = re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019\u00bb)\]]*\s+|\n+")
_DIGIT = re.compile(r"\d")
_NOT_A_STATEMENT = ", not a statement"
NOT_A_STATEMENT_QUESTION = "a question" + _NOT_A_STATEMENT
NOT_A_STATEMENT_HEADLINE = "the page's headline" + _NOT_A_STATEMENT
NOT_A_STATEMENT_HEADING = "a heading" + _NOT_A_STATEMENT


def _last_mark(sentence: str) -> str:
    return sentence.strip().rstrip(_CLOSERS).rstrip()[-1:]


def _words_key(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def _not_a_statement_kind(sentence: str, title: str, from_page: bool) -> str | None:
    mark = _last_mark(sentence)
    if mark == "?":
        return NOT_A_STATEMENT_QUESTION
    if mark in _STATEMENT_END:
        return None
    words = _words_key(sentence)
    if words and title and f" {words} " in f" {_words_key(title)} ":
        return NOT_A_STATEMENT_HEADLINE
    if from_page and not _DIGIT.search(sentence) and len(words.split()) <= HEADING_MAX_WORDS:
        return NOT_A_STATEMENT_HEADING
    return None


def statement_bounds(quote: str, title: str = "", *, from_page: bool = True) -> tuple[int, int]:
    """Where `quote`'s statements start and end: the span without the headings and headlines it
    begins or ends with (not_a_statement's kinds; a question stays: "Was it hit by a barge? No: ..."
    needs it). A model that points at a heading and the sentences under it quotes the sentences:
    the heading only announces them. (0, len) when nothing is to be trimmed or nothing would be
    left (not_a_statement then says why the quote is no evidence).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _QUOTE_SENTENCE.finditer(quote):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(quote)))
    spans = [(a, b) for a, b in spans if quote[a:b].strip()]

    def announces(span: tuple[int, int]) -> bool:
        kind = _not_a_statement_kind(quote[span[0]:span[1]].strip(), title, from_page)
        return kind in (NOT_A_STATEMENT_HEADLINE, NOT_A_STATEMENT_HEADING)

    kept = [i for i, span in enumerate(spans) if not announces(span)]
    if not kept:
        return 0, len(quote)
    start, end = spans[kept[0]][0], spans[kept[-1]][1]
    while start < end and quote[start].isspace():
        start += 1
    while end > start and quote[end - 1].isspace():
        end -= 1
    return start, end


NOT_EVIDENCE_NAVIGATION = "navigation (a table of contents, an index, a run of headings), not a statement"
NAVIGATION_LINE_WORDS = 8  # a line of a table of contents or an index: this many words at most, no sentence end
_ENTRY_HEAD = re.compile(r"(?<![\w.])([A-Z][a-z]+)\s+v?\d[\d.]*\b")
_NUMERIC_TOKEN = re.compile(r"^[-+(]?[\d.,]+[a-zA-Z%]{0,3}\)?$")


def is_navigation(quote: str) -> bool:
    """Whether `quote` is a document's navigation rather than its text: lines of a table of contents, an index or
    a run of headings (two lines or more, nearly all short, none ending a sentence, not a table of figures), or
    one line listing the same kind of entry over and over ("Version 2.0.28 (2015-06-02) Version 2.0.27 ...").
    Structure, not words: a model shown a table of contents quotes it because it names the question's words."""
    lines = [line.strip() for line in quote.splitlines() if line.strip()]
    tokens = quote.split()
    numeric = sum(1 for t in tokens if _NUMERIC_TOKEN.match(t))
    short = [line for line in lines if len(line.split()) <= NAVIGATION_LINE_WORDS and not re.search(r"[.!?;]$", line)]
    chars, short_chars = sum(map(len, lines)), sum(map(len, short))
    if len(lines) >= 2 and 4 * short_chars >= 3 * chars and 4 * numeric <= len(tokens):
        return True
    heads: dict[str, int] = {}
    for head in _ENTRY_HEAD.findall(quote):
        heads[head] = heads.get(head, 0) + 1
    return bool(heads) and max(heads.values()) >= 4


def not_a_statement(quote: str, title: str = "", *, from_page: bool = True) -> str | None:
    """Why `quote` cannot be evidence (no sentence of it states anything), or None if it may be.

    Each sentence of the quote is one of:
    - a question: it ends in "?" ("Was it hit by a barge?");
    - a headline: it does not end a sentence (no . ! ; : or ellipsis, closing quotes and
      brackets aside) and its words are the page title's, or part of them, figures or not
      ("Northgate tunnel finished 430 million dollars over budget, auditor finds");
    - a heading: from a page (where every line is a sentence of its own), it does not end a
      sentence, has no digit and at most HEADING_MAX_WORDS words ("Where the money went").
      Not applied to search snippets, which are cut mid-sentence by nature;
    - a statement: anything else.
    A quote with one statement is evidence ("Was it hit by a barge? No: ..."); a quote of a
    headline and a question is not. A line with a figure that is not the title (a list item
    "7 of 32 anchorages corroded") is a statement: the figure is what an estimate needs.
    """
    if from_page and is_navigation(quote):
        return NOT_EVIDENCE_NAVIGATION
    sentences = [s for s in (p.strip() for p in _QUOTE_SENTENCE.split(quote)) if s]
    kinds = [_not_a_statement_kind(s, title, from_page) for s in sentences]
    if not kinds or None in kinds:
        return None
    unique = list(dict.fromkeys(k for k in kinds if k))
    if len(unique) == 1:
        return unique[0]
    return " and ".join(k.removesuffix(_NOT_A_STATEMENT) for k in unique) + _NOT_A_STATEMENT


ASKS_A_FIGURE = re.compile(r"\bhow\s+(?:many|much|long|large|big|often|far|old)\b", re.IGNORECASE)
_FIGURE_WORD = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                          r"forty|fifty|sixty|hundred|thousand|million|billion|once|twice|thrice|half|quarter|"
                          r"double|dozen|unlimited|infinite|infinity|no\s+limit|none|zero)\b", re.IGNORECASE)
STATES_NO_FIGURE = "states no figure, and the question asks for one"


def states_no_figure(quote: str, topics: Sequence[str]) -> bool:
    """Whether `quote` states no figure at all (no digit, no number word, nor "unlimited") while every topic it
    would answer asks one ("how many", "how long", ...): a quote about the setting that does not say how much it
    is ("The rsize mount option ... appears in the /etc/mtab file.") answers no such question."""
    return bool(topics) and all(ASKS_A_FIGURE.search(t) for t in topics) and not _FIGURE_WORD.search(quote)


def is_decisive(item: Mapping[str, Any]) -> bool:
    """Evidence that enters a computed result: a figure read from it, or a stance for or against."""
    return item.get("low") is not None or item.get("stance") in ("supports", "contradicts")


def entry_of(lead: str) -> str:
    """The end of the text before a quote that may name what the quote's figure is in: its last paragraph,
    within ENTRY_MAX_CHARS (a definition's term line and the sentences under it)."""
    tail = lead[-ENTRY_MAX_CHARS:]
    cut = tail.rfind("\n\n")
    return tail[cut + 2:] if cut >= 0 else tail


def answers(quote: str, context: str, topics: Sequence[str]) -> tuple[int, int, int]:
    """How well a quote answers the topics (the question first), as a key that sorts the better answer higher:
    whether it bears on them (bears_on, read with `context`: its page's title, then the text before it in its
    passage), whether it states a figure where they ask one ("how many": states_no_figure), and how many of
    their distinctive terms the quote and the entry it lies in say (topic_terms: the names and the quantity
    asked, not the words that frame the question; the title's words are every quote of the page's, so they
    tell none apart). Not the model's confidence: a FAQ line about another module and a table row at one
    label's cap tied with the sentence that answers."""
    wanted = set().union(*(topic_terms(t) for t in topics if t)) if topics else set()
    entry = entry_of(context.partition("\n")[2])
    return (int(bears_on(quote, topics, context=context)), int(not states_no_figure(quote, [t for t in topics if t])),
            len(wanted & _terms(f"{entry}\n{quote}")))


def _read_with(item: Mapping[str, Any]) -> str:
    """What a kept quote is read with: its page's title and the text before it in its passage (`lead`)."""
    return f"{item.get('title') or ''}\n{item.get('lead') or ''}"


def strongest_first(evidence: Iterable[Mapping[str, Any]], topics: Sequence[str]) -> list[Any]:
    """Evidence in the order the synthesis is shown it, strongest first.

    Decisive items first (a figure or a stance: what decides the range or the verdict), then by how well each
    answers the topics (`answers`: a quote kept for an open gap may not bear on the question itself), then by
    confidence, then by id. The synthesis is told to cite the strongest, so the source that decided the result
    is normally among the cited ones; and the fallback summary lists the first of them as "the strongest quotes
    found for" the question, which a quote about something else at confidence 0.98 must not head. The report
    orders its evidence by the same key (report.evidence_by_source)."""
    return sorted(evidence, key=lambda e: (not is_decisive(e),
                                           tuple(-x for x in answers(e["quote"], _read_with(e), topics)),
                                           -(e["confidence"] or 0), e["id"]))


def clean_query(query: str, max_chars: int = 200) -> str:
    return " ".join(query.split())[:max_chars].strip()


@dataclass
class Gap:
    """Something the brief still needs to know. Answered gaps stay, marked with the round."""

    id: str
    text: str
    answered_round: int | None = None

    @property
    def open(self) -> bool:
        return self.answered_round is None


@dataclass
class LoopState:
    """Seed 4's explicit state: everything the loop knows, checkpointed after every step."""

    phase: str = "plan"                  # plan → rounds → synthesis → done
    round: int = 0                       # rounds completed
    research_question: str = ""
    angles: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    pending_queries: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    bad: dict[str, str] = field(default_factory=dict)
    new_evidence_per_round: list[int] = field(default_factory=list)
    results_per_round: list[int] = field(default_factory=list)
    evaluator_failures: int = 0
    pages_fetched: int = 0
    page_cache_hits: int = 0
    pages_not_modified: int = 0  # stored pages older than max_age that their server confirmed (304): not downloaded
    page_bytes: int = 0  # bytes of page bodies this run downloaded (decoded; 0 when every page was cached or a 304)
    local_reads: int = 0  # library documents and archive articles read: on this machine, no fetch
    # pages read before (by earlier briefs) that the store's own search offered, where the web's
    # answers did not list them: the URLs offered so far, and how many of them were read (no fetch)
    offered: list[str] = field(default_factory=list)
    pages_reused: int = 0
    # the rounds as they ran: {round, queries, urls, late, carried}: what a brief asked again replays
    past_rounds: list[dict[str, Any]] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)
    calls_skipped: dict[str, int] = field(default_factory=dict)  # purpose → model calls not made: see count_skipped
    next_action: str = "plan"
    why: str = "a new brief starts with a plan"
    stop_reason: str | None = None
    stop_explanation: str | None = None  # the stop reason in one sentence, as the report says it
    current_round: dict[str, Any] = field(default_factory=dict)  # {round, queries, urls}: replayed on resume
    remaining: dict[str, Any] = field(default_factory=dict)  # budgets left: rounds, tokens, seconds, pages
    plan_relevance: float | None = None  # seed 5's gate: how well the plan covers the question
    estimate_history: list[dict[str, Any]] = field(default_factory=list)  # {round, low, high, progress_score, tokens}
    figures_discarded: dict[str, int] = field(default_factory=dict)  # numbers code discarded, by reason
    distrusted: dict[str, str] = field(default_factory=dict)  # url → why: pages caught carrying an injection
    # url → what became of a page a round went on without (the loop's LATE_* words): still
    # `waiting` ones are taken into the next round, or read (or given up) before the synthesis
    late: dict[str, str] = field(default_factory=dict)
    page_wait_s: float = 0.0  # seconds the model waited for a page (pages.PageScheduler.wait_for_page)
    # when the run began, in epoch seconds to the microsecond: the wall time in `usage` and the
    # seconds budget (the brief's started_at is to the second, up to a second off for a short brief)
    began_s: float | None = None
    # a follow-up's parent run (daemon.followup): its evidence was carried in, its report is linked
    follows_run_id: int | None = None

    def open_gaps(self) -> list[Gap]:
        return [g for g in self.gaps if g.open]

    def count_fallback(self, name: str) -> None:
        self.fallbacks[name] = self.fallbacks.get(name, 0) + 1

    def count_skipped(self, purpose: str) -> None:
        """A model call not made because it could not change the outcome (usage.calls_skipped)."""
        self.calls_skipped[purpose] = self.calls_skipped.get(purpose, 0) + 1

    def add_gaps(self, texts: Iterable[str], max_open: int = 8) -> list[Gap]:
        """Add new gaps (not duplicates of known ones), keeping at most `max_open` open."""
        added: list[Gap] = []
        known = [g.text for g in self.gaps]
        for text in texts:
            text = " ".join(str(text).split())[:300]
            if not text or is_duplicate_query(text, known, threshold=0.7):
                continue
            if len(self.open_gaps()) >= max_open:
                break
            gap = Gap(id=f"G{len(self.gaps) + 1}", text=text)
            self.gaps.append(gap)
            known.append(text)
            added.append(gap)
        return added

    def answer_gap(self, gap_id: str, round_: int) -> bool:
        for gap in self.gaps:
            if gap.id == gap_id and gap.open:
                gap.answered_round = round_
                return True
        return False

    def add_queries(self, queries: Iterable[str]) -> list[str]:
        """Queue new queries, dropping any that repeat an asked or already queued one."""
        added: list[str] = []
        for query in queries:
            query = clean_query(str(query))
            if not query or is_duplicate_query(query, [*self.asked, *self.pending_queries]):
                continue
            self.pending_queries.append(query)
            added.append(query)
        return added

    @property
    def numbers_discarded(self) -> int:
        """Numbers the model proposed that code discarded (figures.read_figure): the sum of
        figures_discarded, derived so the two can never disagree."""
        return sum(self.figures_discarded.values())

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint's shape: every field, and numbers_discarded where it stood when it was stored."""
        data: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "figures_discarded":
                data["numbers_discarded"] = self.numbers_discarded
            data[key] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoopState":
        data = dict(data)
        data["gaps"] = [Gap(**g) for g in data.get("gaps", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Limits:
    """A brief's caps and budgets, resolved from its depth preset and fields."""

    max_rounds: int
    max_searches_per_round: int
    pages_per_round: int
    budget_tokens: int | None = None
    budget_seconds: float | None = None
    budget_pages: int | None = None


@dataclass(frozen=True)
class Usage:
    tokens: int
    seconds: float
    pages: int


@dataclass(frozen=True)
class Progress:
    """What a brief's kind says about its own answer; its policy (daemon/research/policy.py) computes it.

    `target_reached`: an estimate's range meets its target with enough credible sources.
    `converged`: an estimate's progress score has stopped moving.
    `answered_ends_it`: whether every gap answered ends the brief: a plain brief's yes; a
    hypothesis's only once its verdict is decided; an estimate's never (it is done when its
    range is, not when the planner's gaps are).
    """

    target_reached: bool = False
    converged: bool = False
    answered_ends_it: bool = True


def spent_budget(limits: Limits, usage: Usage) -> str | None:
    """Which hard budget is spent ("tokens", "seconds" or "pages"), or None."""
    for name, cap, used in (("tokens", limits.budget_tokens, usage.tokens),
                            ("seconds", limits.budget_seconds, usage.seconds),
                            ("pages", limits.budget_pages, usage.pages)):
        if cap is not None and used >= cap:
            return name
    return None


def stalled(state: LoopState) -> bool:
    """No new evidence for STALL_ROUNDS rounds in a row: more of the same won't help."""
    recent = state.new_evidence_per_round[-STALL_ROUNDS:]
    return len(recent) == STALL_ROUNDS and not any(recent)


def stop_reason(state: LoopState, limits: Limits, usage: Usage, progress: Progress = Progress()) -> str | None:
    """Why the rounds should stop now, or None to run another round: the one stop rule.

    Checked before every round, in STOP_ORDER; the first that holds wins:
    1. target_reached: the brief's answer is found (success first: a budget spent in the
       same round does not hide it).
    2. budget: a hard budget (tokens, seconds, pages) is spent.
    3. stalled: no new evidence for STALL_ROUNDS rounds. Before converged, because a score
       that stops moving for lack of evidence has not converged (seed 1's pitfall).
    4. converged: the estimate's score stopped moving while evidence still came in.
    5. gaps_closed: every gap answered, where that ends the brief (Progress.answered_ends_it).
    6. max_rounds: the round cap. Last, because every reason above says more about why;
       the report's sentence gives the round count whatever the reason.
    Running out of queries (exhausted) is checked by the caller, which knows whether it
    could still make one.
    """
    holds = {
        TARGET_REACHED: lambda: state.round >= 1 and progress.target_reached,
        BUDGET: lambda: spent_budget(limits, usage) is not None,
        STALLED: lambda: stalled(state),
        CONVERGED: lambda: state.round >= 1 and progress.converged,
        GAPS_CLOSED: lambda: progress.answered_ends_it and state.round >= 1 and bool(state.gaps)
        and not state.open_gaps(),
        MAX_ROUNDS: lambda: state.round >= limits.max_rounds,
    }
    return next((reason for reason in STOP_ORDER if holds[reason]()), None)


def fallback_queries(question: str, gaps: Sequence[Gap]) -> list[str]:
    """Queries made without the model: the question's content words, then each open gap's."""
    words = content_words(question)
    queries = [" ".join(words[:8])] if words else []
    for gap in gaps:
        gap_words = [w for w in content_words(gap.text) if w not in words[:3]]
        if gap_words:
            queries.append(" ".join((words[:3] + gap_words)[:8]))
    return [q for q in queries if q]


def take_queries(state: LoopState, question: str, n: int) -> list[str]:
    """This round's queries: pending ones first, then fallbacks from open gaps; never a repeat."""
    if not state.pending_queries:
        state.add_queries(fallback_queries(question, state.open_gaps() or state.gaps))
    chosen = state.pending_queries[:n]
    state.pending_queries = state.pending_queries[n:]
    return chosen


def choose_urls(candidates: Sequence[str], state: LoopState, known_bad: dict[str, str], n: int) -> list[str]:
    """Up to n URLs in search-rank order, skipping visited ones and those known to be bad.

    `known_bad` is the store's word (Store.bad_urls): bad for good, or remembered as slow
    (a fetch that timed out) until its memory expires, so no brief waits for it again meanwhile.
    """
    out: list[str] = []
    for url in candidates:
        if url in out or url in state.visited or url in state.bad or url in known_bad:
            continue
        out.append(url)
        if len(out) >= n:
            break
    return out


def replayed_round(past: Sequence[Mapping[str, Any]], round_no: int, queries: Sequence[str],
                   visited: Sequence[str], candidates: Sequence[str],
                   n: int) -> tuple[list[str], list[str], list[int]] | None:
    """The same round of an earlier run of the same brief: (its fresh pages, the pages it went on
    without, the order it read its batches in), or None when there is none to replay.

    A brief asked again reads what its earlier run read, where that run read it: the same pages
    (though the store, grown since, would rank others higher now) and the same lateness (which
    pages arrive late is a matter of timing; read at once, such a page would join another batch
    and change its prompt and every prompt after it). Its prompts are then those the earlier run
    sent, and the answer cache replays them. Only a round that is the same: its number, its
    queries, none of its pages read already by this run (else the runs went apart), each of them
    among this round's `candidates`, and as many as this round may read (`n`: another depth or
    page budget is another brief).
    """
    for then in past:
        if then.get("round") != round_no or list(then.get("queries", [])) != list(queries):
            continue
        carried = then.get("carried", [])
        fresh = [u for u in then.get("urls", []) if u not in carried]
        if len(fresh) != n or any(u in visited or u not in candidates for u in fresh):
            return None
        return fresh, list(then.get("late", [])), list(then.get("read", []))
    return None


def next_action(state: LoopState, reason: str | None) -> tuple[str, str]:
    """Seed 4's reflect step, in words: what happens next and why (shown by `briefd status`)."""
    if reason is not None:
        return "finalize", f"stop: {reason}"
    open_gaps = state.open_gaps()
    if state.round == 0:
        return "search_more", "first round: search the planned queries"
    if open_gaps:
        return "search_more", f"{len(open_gaps)} open gap(s): {open_gaps[0].text[:80]}"
    return "search_more", "no gaps recorded; searching for more evidence"


def open_questions(question: str, research_question: str, open_gaps: Sequence[str], *,
                   had_evidence: bool, verdict: str | None = None,
                   estimate: tuple[float, float, str, bool] | None = None) -> list[str]:
    """What the requester could clarify: an unattended daemon cannot ask, so the report says.

    `estimate` is (low, high, unit, target_reached)."""
    asks: list[str] = []
    if research_question and normalize_query(research_question) != normalize_query(question):
        asks.append(f"The question was researched as \u201c{research_question}\u201d; say so in a new brief "
                    f"if you meant something else.")
    if not had_evidence:
        asks.append("No usable sources were found: which documents or domains should be searched "
                    "(search.include_domains), or what other words describe the subject?")
    for gap in list(open_gaps)[:5]:
        asks.append(f"Still open: {gap}. A source you trust, or a narrower scope, would help.")
    if estimate is not None and not estimate[3]:
        low, high, unit, _ = estimate
        asks.append(f"The range {span_text(low, high)} {unit} did not reach the target width: a narrower "
                    f"definition (period, place, what counts) would let it narrow further.")
    if verdict == "inconclusive":
        asks.append("The evidence does not decide the claim: which kind of source would you accept as "
                    "authoritative, or which part of the claim matters most?")
    return asks


def remaining_budgets(state: LoopState, limits: Limits, usage: Usage) -> dict[str, Any]:
    """What is left of each budget (None: no such budget), for checkpoints and `briefd status`."""
    def left(cap: float | None, used: float) -> float | None:
        return None if cap is None else max(0, round(cap - used, 1))
    return {
        "rounds": max(0, limits.max_rounds - state.round),
        "tokens": left(limits.budget_tokens, usage.tokens),
        "seconds": left(limits.budget_seconds, usage.seconds),
        "pages": left(limits.budget_pages, usage.pages),
    }
