"""Relevance: a quote must answer something the question asks, not share a common word (issue 21).

The walkthrough's miss: "What is the boiling point of water at the top of Mount Everest?" kept two
Lakeside lead-in-water quotes and listed them as "the strongest quotes found for" the question,
because the gate (decide.is_related) passed anything sharing one content word ("water"). It was seen
with the lab's small real model; the scripted one quotes only sentences sharing two words with the
question, so the loop test below stands in a model that quotes whatever says "water". The rule now
(decide.bears_on): read with the passage it was quoted from, a quote shares two of a longer
question's terms (three of a long one), one of them in the quote itself.

Table-tested on real text both ways: sentences of the Debian manuals of briefd's real-document set
(lab/docset, copied here verbatim so the test needs no download) and the synthetic lab's pages
(lab/corpus.py). A manual's answer sentence names its subject once, in the term or the sentence
before, so the answers are judged with their passage, as the loop judges them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

from briefd.daemon.research.loop import Research
from briefd.daemon.rules import decide, steps
from lab.corpus import PAGES, TOPICS
from tests.rules.vector_cases import mechanism_tests, vector_cases
from tests.sources.test_sources import _research

T = TypeVar("T")

EVEREST = "What is the boiling point of water at the top of Mount Everest?"

# (question, quote, the passage it sits in): the answer sentences of the docset's plain questions
# (lab/docset/questions.json), with the text around them in the manual
ANSWERS = [
    ("What is the default size of GNU m4's internal symbol hash table?",
     "The default is 65537 entries.",
     "Make the internal hash table for symbol lookup be num entries big. For better performance, the number "
     "should be prime, but this is not checked. The default is 65537 entries."),
    ("What is the default size of the buffer sftp uses when transferring files?",
     "The default is 32768 bytes.",
     "-B buffer_size\nSpecify the size of the buffer that sftp uses when transferring files. Larger buffers "
     "require fewer round trips at the cost of higher memory consumption. The default is 32768 bytes."),
    ("Which port does ssh connect to on the remote host by default?",
     "The default is 22.",
     "Port Specifies the port number to connect on the remote host. The default is 22."),
    ("What is the default size of the buffer git's smart HTTP transports use when POSTing data?",
     "Default is 1 MiB, which is sufficient for most requests.",
     "- Maximum size in bytes of the buffer used by smart HTTP transports when POSTing data to the remote "
     "system. For requests larger than this buffer size, HTTP/1.1 and Transfer-Encoding: chunked is used to "
     "avoid creating a massive pack file locally. Default is 1 MiB, which is sufficient for most requests."),
    ("How long must a connection sit idle before curl sends TCP keepalive probes, by default?",
     "If unspecified, the option defaults to 60 seconds.",
     "--keepalive-time <seconds>\nThis option sets the time a connection needs to remain idle before sending "
     "keepalive probes and the time between individual keepalive probes.\n\nIf unspecified, the option "
     "defaults to 60 seconds."),
    ("How many values at most can lua_pushcclosure associate with a C function?",
     "The maximum value for n is 255.",
     "To associate values with a C function, first these values should be pushed onto the stack (when there "
     "are multiple values, the first value is pushed first). Then lua_pushcclosure is called to create and "
     "push the C function onto the stack, with the argument n telling how many values will be associated "
     "with the function. The maximum value for n is 255."),
    ("How long must a Linux TCP connection be idle before keep-alive probes are sent, by default?",
     "The default value is 7200 seconds (2 hours).",
     "The number of seconds a connection needs to be idle before TCP begins sending out keep-alive probes. "
     "Keep-alives are sent only when the SO_KEEPALIVE socket option is enabled. The default value is 7200 "
     "seconds (2 hours)."),
    ("How large is the sun_path field of a UNIX domain socket address on Linux?",
     "On Linux, sun_path is 108 bytes in size; see also BUGS, below.",
     "On Linux, sun_path is 108 bytes in size; see also BUGS, below."),
    ("How many real-time signals does the Linux kernel support?",
     "The Linux kernel supports a range of 33 different real-time signals, numbered 32 to 64.",
     "The Linux kernel supports a range of 33 different real-time signals, numbered 32 to 64."),
]

# (question, a sentence of another manual that shares one term with it, the passage around it)
UNRELATED = [
    ("Which port does ssh connect to on the remote host by default?",
     "The default is half of the number of your physical RAM pages, or (on a machine with highmem) the "
     "number of lowmem RAM pages, whichever is smaller.",
     "The default is half of the number of your physical RAM pages, or (on a machine with highmem) the "
     "number of lowmem RAM pages, whichever is smaller. Inodes may be specified with k, m, or g suffixes "
     "like size, but not a % suffix."),
    ("What is the default size of GNU m4's internal symbol hash table?",
     "where BBBBBB is the sha1 hash of the bad merge base and [GGGGGG,\u2026] is a comma separated list of "
     "the sha1 of the good commits.", ""),
    ("How many times does wget try a download by default?",
     "You should try to see if you can find weaknesses and correct them; or see Answers).", ""),
    ("How many rules can one flex scanner have?",
     "POSIX requires support for multiple arguments to defn, without any clarification on how defn behaves "
     "when one of the multiple arguments names a builtin.", ""),
    ("How large is the sun_path field of a UNIX domain socket address on Linux?",
     "For example, when mirroring a repository at https://<domain>/<org>/<repo> the bundle server could have "
     "its bundle list available at https://<server-url>/<domain>/<org>/<repo>.", ""),
    ("What is the default size of the buffer git's smart HTTP transports use when POSTing data?",
     "In order to use a filesystem, you have to mount it; see mount(2) and mount(8).", ""),
]


# (question, a sentence of another manual that shares two of its many terms): a long question needs three
TWO_OF_MANY = [
    ("What is the default size of GNU m4's internal symbol hash table?",
     "It sets window size to 8 MiB by default (can be changed manually, see wlog)."),
    ("What is the default size of GNU m4's internal symbol hash table?",
     "--maxdict=# Limit dictionary to specified size (default: 112640 bytes)."),
]


@pytest.mark.parametrize("question, quote, passage", ANSWERS)
def test_a_manuals_answer_bears_on_its_question_read_with_its_passage(question: str, quote: str,
                                                                     passage: str) -> None:
    assert decide.bears_on(passage, [question]), "the passage must be shown to the model"
    assert decide.bears_on(quote, [question], context=passage), "the answer must be kept"


@pytest.mark.parametrize("question, sentence, passage", UNRELATED)
def test_a_sentence_sharing_one_word_with_the_question_does_not_bear_on_it(question: str, sentence: str,
                                                                           passage: str) -> None:
    assert decide.is_related(sentence, [question]), "the old gate passed it: the row tests what it should"
    assert not decide.bears_on(sentence, [question], context=passage)
    assert not decide.bears_on(passage or sentence, [question])


@pytest.mark.parametrize("question, sentence", TWO_OF_MANY)
def test_two_generic_terms_of_a_long_question_do_not_bear_on_it(question: str, sentence: str) -> None:
    assert len(decide.topic_terms(question)) >= decide.TERMS_FOR_THREE
    assert len(decide.topic_terms(question) & decide.topic_terms(sentence)) == 2
    assert not decide.bears_on(sentence, [question])


def test_lakeside_lead_in_water_does_not_bear_on_the_boiling_point_on_everest() -> None:
    """Every paragraph and snippet of the lab's Lakeside pages shares "water" with the Everest
    question, and none answers it: none is shown to the model, none is kept."""
    lakeside = [p for p in PAGES if p.topic == "lakeside"]
    texts = [t for p in lakeside for t in (p.snippet, *p.paragraphs) if "water" in t.lower()]
    assert len(texts) >= 5
    for text in texts:
        assert decide.is_related(text, [EVEREST])
        assert not decide.bears_on(text, [EVEREST], context=lakeside[0].title)


def test_the_lab_topics_own_pages_bear_on_their_questions_and_not_on_the_others() -> None:
    """Both ways on the synthetic lab: each topic's pages summarise their answer in a snippet that
    bears on its question (read with the page's title, as a quote is); no paragraph of another
    topic's page that shares one of its terms bears on it."""
    own = [(t.question, p.snippet, p.title) for t in TOPICS.values() for p in PAGES if p.topic == t.key]
    kept = [row for row in own if decide.bears_on(row[1], [row[0]], context=row[2])]
    assert len(kept) >= 0.9 * len(own), [row for row in own if row not in kept]
    shared_one = [(t.question, para) for t in TOPICS.values() for p in PAGES if p.topic != t.key
                  for para in p.paragraphs if len(decide.topic_terms(t.question) & decide.topic_terms(para)) == 1]
    assert shared_one, "the lab's pages must hold such paragraphs for this to test anything"
    assert [row for row in shared_one if decide.bears_on(row[1], [row[0]])] == []


@pytest.mark.parametrize("text, bears", [
    ("Many of the rules were rewritten.", False),    # "many" frames the question, "rules" alone is chance
    ("Flex allows 8192 rules per scanner.", True),
])
def test_the_word_that_frames_a_quantity_is_not_a_term(text: str, bears: bool) -> None:
    assert decide.bears_on(text, ["How many rules can one flex scanner have?"]) is bears


def test_a_quote_is_kept_with_the_passage_it_was_quoted_from() -> None:
    """steps.skipped_quote judges a quote with the title and the passage the loop gives it."""
    question, quote, passage = ANSWERS[0]
    assert steps.skipped_quote(quote, "file:///m4.html", "Limits control", True, {}, [question], set(),
                               context=passage) is None
    assert steps.skipped_quote(quote, "file:///m4.html", "Limits control", True, {}, [question], set()) == {
        "reason": steps.UNRELATED, "url": "file:///m4.html", "quote": quote}
    assert steps.skipped_quote(UNRELATED[0][1], "file:///tmpfs.txt", "tmpfs(5)", True, {},
                               [UNRELATED[0][0]], set(), context=UNRELATED[0][2])["reason"] == steps.UNRELATED


def test_a_quote_about_something_else_never_heads_the_strongest_however_confident() -> None:
    """A quote kept for an open gap ("lead in tap water") that does not bear on the question comes after
    one that does, whatever the model's confidence: the fallback summary lists them in this order."""
    lakeside = next(p for p in PAGES if p.slug == "lakeside-utility-release")
    items = [{"id": 1, "quote": lakeside.paragraphs[0], "title": lakeside.title, "confidence": 0.98,
              "low": None, "stance": None},
             {"id": 2, "quote": "At the top of Mount Everest water boils at about 70 degrees.", "title": "Altitude",
              "confidence": 0.4, "low": None, "stance": None}]
    assert [e["id"] for e in decide.strongest_first(items, [EVEREST])] == [2, 1]


def _lakeside_pages(research: Research) -> list[int]:
    """The lab's Lakeside pages (lead in tap water), stored as read: one passage a paragraph."""
    ids: list[int] = []
    for page in (p for p in PAGES if p.topic == "lakeside"):
        url = f"http://127.0.0.1/{page.slug}"
        text, spans, start = "", [], 0
        for para in page.paragraphs:
            text += ("\n\n" if text else "") + para
            start = len(text) - len(para)
            spans.append((len(spans), start, len(text), para, None))
        research.store.save_page(url=url, final_url=url, status=200, content_type="text/html", title=page.title,
                                 text=text, size=len(text), extraction="plain", error=None, passages=spans)
        ids += research.store.passage_ids(url, "page")
    return ids


def test_everest_keeps_no_lakeside_quote_and_reports_none_as_the_strongest(tmp_path: Path) -> None:
    """The walkthrough at the loop: the model (like the lab's small real one) quotes the sentences
    that say "water" at confidence 0.98, and cannot write a summary. No Lakeside passage bears on
    the question, so none is shown to it, none is kept, and the fallback summary lists none as
    "the strongest quotes found for" the question."""
    research = _research(tmp_path, ["web"])
    research.brief = dataclasses.replace(research.brief, question=EVEREST)
    research.state.research_question = EVEREST

    async def a_small_model(purpose: str, user: str, schema: dict[str, Any], coerce: Callable[[Any], T],
                            fallback: Callable[[], T], retry_cut: bool = True) -> T:
        if purpose != "evidence":
            return fallback()
        ids = re.findall(r"^\[(S\d+)\] .*\bwater\b", user, re.MULTILINE | re.IGNORECASE)
        return coerce({"items": [{"sentence_ids": [sid], "summary": "water", "confidence": 0.98, "gap": ""}
                                 for sid in ids[:4]], "new_gaps": [], "new_queries": []})

    research.evidence.ask = a_small_model  # the model door the evidence reader and the synthesis call
    research.calls.ask = a_small_model
    try:
        asyncio.run(research.evidence.read_batch(1, _lakeside_pages(research), {}, []))
        summary, _ = asyncio.run(research.synthesize())
        assert "Lakeside" not in summary and "lead" not in summary, summary
        assert research.store.evidence(research.run_id) == []
    finally:
        research.store.close()


# ---- the question's distinctive words (issue 28): what it names its subject by, not its common words ------------

def _vector_case(file: str, case_id: str) -> Any:
    """A case of the rule vectors' dev half (lab/vectors: real sentences of Debian packages' documents),
    read as `briefd eval --vectors` reads it."""
    return vector_cases(file)[case_id]


@pytest.mark.parametrize("question, words", [
    # rare in general English, capitalised inside the sentence, letters with digits: names and the quantity asked
    ("By default, how far in the future may a Release file's Date header be before APT rejects it?",
     ["release", "date", "apt"]),
    ("What is the default size of GNU m4's internal symbol hash table?", ["gnu", "m4"]),
    ("With --fast-dns-retry, what is the default initial retry delay, in milliseconds?", ["retry"]),
    # an inflection is as common as its word ("computes": compute); a unit asked in frames the figure
    ("What base priority does a window manager start from when it computes its x-window-manager alternative "
     "priority?", []),
    # a program named by a common word names nothing the rule can read (a failing case, said in the README: "What the rules cannot read yet")
    ("How many kilobytes of buffer space does less use by default?", []),
])
def test_a_questions_distinctive_words_are_its_names_not_its_common_words(question: str, words: list[str]) -> None:
    assert list(decide.distinctive_words(question)) == words


@pytest.mark.parametrize("file, case_id, bears", [
    # another program's sentence sharing only "default", "file", "future", "time": each was kept before
    ("common-words-dev.json", "nfs-common-common-words-01", False),    # NFS versions, for APT's Date header
    ("common-words-dev.json", "dnsmasq-base-common-words-01", False),  # resolv.conf files, for NFS attribute caching
    ("common-words-dev.json", "sudo-common-words-02", False),          # sudoers' file mode, for XDG_RUNTIME_DIR
    ("common-words-dev.json", "squid-common-common-words-04", False),  # a Squid default, for PHP's max_input_time
    # the answers, whose distinctive word is in the sentence, its passage or its document's name
    ("dev.json", "systemd-13", True),      # HandleLidSwitchDocked= defaults to "ignore" (logind.conf)
    ("dev.json", "haproxy-doc-10", True),  # HAProxy's logs over UDP, port 514
    ("dev.json", "xz-utils-14", True),     # --check=crc64
    ("dev.json", "gnupg-07", True),        # the GnuPG release that made 2048-bit RSA keys the default
])
def test_a_quote_must_carry_a_word_the_question_names_its_subject_by(file: str, case_id: str, bears: bool) -> None:
    from briefd.daemon.ops.vectors import kept_quote

    case = _vector_case(file, case_id)
    reason = kept_quote(case, [case.question])
    assert (reason is None) is bears, reason


# The relevance rule on real sentences of the rule vectors' dev half (lab/vectors/dev.json), both ways, decided as
# `briefd eval --vectors` decides them.
RELEVANCE_MECHANISMS: dict[str, list[str]] = {
    # relevance: navigation is never evidence, a quote with no figure answers no "how many", a setting's name
    # read as its words, a sentence that leans on its passage
    "relevance": ["gnupg-08", "systemd-32", "procps-07", "debian-policy-31", "debian-policy-32",
                  "debian-reference-en-05", "openssl-09", "xz-utils-15", "systemd-13", "squid-common-08",
                  "dnsmasq-base-09", "xz-utils-07", "haproxy-doc-04"],
}


test_each_mechanism_reads_real_sentences_right, test_the_tables_have_both_ways = mechanism_tests(RELEVANCE_MECHANISMS)


# === who a question is about, and a quote that names it ==============================================================
#
# Who a question is about, read from its grammar (decide.question_subjects), and the quote filter's rule that a
# quote names it (decide.names_subject, through steps.skipped_quote): a sentence of one program's manual is no
# answer about another program, however many words it shares.
#
# The questions are the real-document set's second part, dev half (lab/docset/part2-dev.json), and the rule
# vectors' dev half; the sentences are from those dev packages' manuals. The test halves are never quoted here.

MUTT_KEEPALIVE = ("At most how long does mutt wait before polling an open IMAP connection to keep it alive, "
                  "by default, in minutes?")


@pytest.mark.parametrize("question, subjects", [
    (MUTT_KEEPALIVE, {"mutt"}),
    ("How often does keepalived's health checker poll a real server when delay_loop is not set?", {"keepalived"}),
    ("What chunk size does mdadm use by default when creating a RAID array?", {"mdadm"}),
    ("Is md's default minimum rebuild speed below 5000 KiB/s per device?", {"md"}),
    ("Is trimming once a week enough for most desktop and server systems, according to fstrim?", {"fstrim"}),
    ("How many bytes is one block in sar's bread/s and bwrtn/s figures?", {"sar"}),
    ("How large a buffer does dmesg use by default to query the kernel ring buffer?", {"dmesg"}),
    # none named: a noun phrase opened by a determiner, a pronoun, a relative clause's modal
    ("What is the default size of the md RAID5/RAID6 stripe cache, in pages per device?", set()),
    ("Does a keepalived VRRP backup wait at least 4 advert intervals before declaring the master down?", set()),
    ("How many packs does it take to consolidate them into one, by default?", set()),
    ("What is the largest exit status a command can return to its shell?", set()),
])
def test_who_a_question_is_about(question: str, subjects: set[str]) -> None:
    assert decide.question_subjects(question) == subjects


MUTT_ENTRY = ("imap_keepalive Type: number Default: 300 This variable specifies the maximum amount of time in "
              "seconds that mutt will wait before polling open IMAP connections, to prevent the server from "
              "closing them before mutt has finished with them.")
KEEPALIVED_ENTRY = ("# Optional connection timeout in seconds. # The default is 5 seconds connect_timeout <TIMER>")


def kept(quote: str, context: str, url: str, title: str, question: str) -> bool:
    return steps.skipped_quote(quote, url, title, True, {}, [question], (), context=context) is None


def test_the_asked_programs_manual_answers() -> None:
    quote = "Default: 300"
    assert kept(quote, MUTT_ENTRY, "file:///docs/mutt/muttrc.5.txt", "muttrc.5.txt", MUTT_KEEPALIVE)


def test_the_name_may_be_only_in_the_documents_name() -> None:
    """A manual's entry seldom repeats its program's name; the file it is in does ("muttrc", a configuration
    file's name begun by its program's)."""
    entry = "imap_keepalive Type: number Default: 300 This variable specifies the maximum amount of time " \
            "in seconds to wait before polling open IMAP connections."
    assert kept("Default: 300", entry, "https://docs.example/man5/muttrc.5.html", "muttrc(5)", MUTT_KEEPALIVE)


def test_another_programs_manual_is_no_answer_however_many_words_it_shares() -> None:
    quote = "# The default is 5 seconds"
    url, title = "file:///docs/keepalived/keepalived.conf.5.txt", "keepalived.conf.5.txt"
    question = "How long does mutt wait for a connection before it times out, by default?"
    assert decide.bears_on(quote, [question], context=f"{title}\n{KEEPALIVED_ENTRY}")  # the words alone: yes
    assert not kept(quote, KEEPALIVED_ENTRY, url, title, question)
    # the same sentence, asked of the program whose manual it is
    assert kept(quote, KEEPALIVED_ENTRY, url, title,
                "How long does keepalived wait for a connection before it times out, by default?")


def test_a_question_that_names_no_one_asks_no_name() -> None:
    quote = "# The default is 5 seconds"
    url, title = "file:///docs/keepalived/keepalived.conf.5.txt", "keepalived.conf.5.txt"
    assert kept(quote, KEEPALIVED_ENTRY, url, title, "What is the default connection timeout, in seconds?")
