"""An estimate settles as a contract does (issue 27): one authoritative source stating the figure plainly, with
nothing credible against it, is the range, and the report says the range rests on it; any other source still
needs a second one."""

from __future__ import annotations

import pytest

from briefd.daemon.rules import figures, judge
from briefd.daemon.rules.judge import Reading

INITIAL = (1.0, 100_000.0)


def reading(value: float, source: str, tier: str, confidence: float | None = None) -> Reading:
    return Reading(low=value, high=value, confidence=judge.TIER_CAPS[tier] if confidence is None else confidence,
                   impact="narrows_both", source=source, tier=tier)


def test_one_authority_is_the_range_and_is_named() -> None:
    manual = [reading(4096, "docs/manpages", "regulator")]
    assert judge.update_range(INITIAL, manual) == (4096, 4096)
    assert judge.settled_by(manual, INITIAL) == "docs/manpages"
    assert judge.target_met((4096, 4096), target_width=100)


def test_one_source_of_any_other_tier_still_keeps_part_of_the_way() -> None:
    news = [reading(4096, "news.example", "news")]
    low, high = judge.update_range(INITIAL, news)
    assert low < 4096 < high and judge.settled_by(news, INITIAL) is None


def test_anything_credible_against_it_means_no_one_source_settles() -> None:
    both = [reading(4096, "docs/manpages", "regulator"), reading(8192, "wiki.example", "industry")]
    assert judge.settled_by(both, INITIAL) is None
    low, high = judge.update_range(INITIAL, both)
    assert low <= 4096 and high >= 8192  # two sources: the weighing, as before


def test_a_weak_reading_against_it_is_no_disagreement() -> None:
    weak = [reading(4096, "docs/manpages", "regulator"), reading(8192, "forum.example", "social")]
    assert judge.settled_by(weak, INITIAL) == "docs/manpages"


def test_one_authority_stating_several_figures_settles_nothing() -> None:
    """Three quotes of one manual giving 1, 5 and 60 seconds for the one quantity asked: at most one is the answer,
    and nothing says which (a real run: another daemon's manual, read for a mail client's keep-alive interval).
    The range moves towards them as any one source's readings move it; it does not collapse onto them."""
    several = [reading(1, "docs/daemon", "regulator"), reading(5, "docs/daemon", "regulator"),
               reading(60, "docs/daemon", "regulator")]
    assert judge.settled_by(several, INITIAL) is None
    low, high = judge.update_range(INITIAL, several)
    assert high > 60 * 10  # a tenth of the way or more stays: an answer of 300 seconds is still inside


def test_the_same_figure_quoted_twice_is_one_figure() -> None:
    twice = [reading(4096, "docs/manpages", "regulator"), reading(4096.0, "docs/manpages", "regulator")]
    assert judge.settled_by(twice, INITIAL) == "docs/manpages"
    assert judge.update_range(INITIAL, twice) == (4096, 4096)


def test_a_reading_that_is_not_plain_moves_the_range_as_one_source_does() -> None:
    """A quote kept because its passage is about the question, itself saying nothing of it, may be another
    setting's entry: it cannot be the range alone (figures.states_plainly, judge.Reading.plain)."""
    entry = [Reading(low=1, high=1, confidence=judge.TIER_CAPS["regulator"], impact="narrows_both",
                     source="docs/manpages", tier="regulator", plain=False)]
    assert judge.settled_by(entry, INITIAL) is None
    low, high = judge.update_range(INITIAL, entry)
    assert high > 10 * low


MDADM = "How long does mdadm --monitor wait between polls of the md arrays by default?"
MUTT = ("At most how long does mutt wait before polling an open IMAP connection to keep it alive, by default, "
        "in minutes?")


@pytest.mark.parametrize("asked, quote, lead, plain", [
    # the question's own words in the quote or its term line: plain
    (MDADM, "The default is 60.", "-d, --delay\nGive a delay in seconds. mdadm polls the md arrays and then waits "
     "this many seconds before polling again.", True),
    (MDADM, "Give a delay in seconds. mdadm polls the md arrays and then waits this many seconds before polling "
     "again. The default is 60.", "", True),
    # a bare default under a term that shares one word of the question: kept (its passage says more), not plain
    (MUTT, "Default: 300", "imap_keepalive\nType: number\n", False),
    (MDADM, "A value of 252 signifies a timeout of 21 minutes.", "", False),
])
def test_what_states_a_figure_plainly(asked: str, quote: str, lead: str, plain: bool) -> None:
    assert figures.states_plainly(quote, lead, asked) is plain


ZSTD_MEMORY = "How much memory may zstd's decompressor use by default?"
ZSTD_ENTRY = ("-M#, --memory=#: Set a memory usage limit. By default, zstd uses 128 MiB for decompression as the "
              "maximum amount of memory the decompressor is allowed to use, but you can override this manually if "
              "need be in either direction (i.e. you can increase or decrease it).\n\nThis is also used during "
              "compression when using with --patch-from=. In this case, this parameter overrides that maximum size "
              "allowed for a dictionary. (128 MiB).\n\n")
ZSTD_TRAINING = ("Additionally, this can be used to limit memory for dictionary training. This parameter overrides "
                 "the default limit of 2 GiB. zstd will load training samples up to the memory limit and ignore "
                 "the rest.")


def test_an_entry_that_states_two_figures_of_the_quantity_settles_neither() -> None:
    """zstd(1)'s --memory entry (the real-document set's first part): the decompressor's 128 MiB, a dictionary's
    (128 MiB), then the dictionary training's 2 GiB. A reader who quotes the second quotes a figure of the quantity, about zstd, in
    plain words; but the entry it follows states another, so it is not the range alone."""
    assert not figures.states_plainly(ZSTD_TRAINING, ZSTD_ENTRY, ZSTD_MEMORY, "MiB", 2048.0)
    assert figures.states_plainly(ZSTD_TRAINING, ZSTD_ENTRY, ZSTD_MEMORY)  # without the figure: the words do
    answer = ZSTD_ENTRY.split("\n")[0]
    assert figures.states_plainly(answer, "", ZSTD_MEMORY, "MiB", 128.0)
