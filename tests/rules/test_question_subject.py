"""Who a question is about, read from its grammar (decide.question_subjects), and the quote filter's rule that a
quote names it (decide.names_subject, through steps.skipped_quote): a sentence of one program's manual is no
answer about another program, however many words it shares.

The questions are the real-document set's second part, dev half (lab/docset/part2-dev.json), and the rule
vectors' dev half; the sentences are from those dev packages' manuals. The test halves are never quoted here.
"""

from __future__ import annotations

import pytest

from briefd.daemon.rules import decide, steps

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
