"""Figures in the brief's unit, the true reason for each one discarded, and ranges that one
source cannot collapse (daemon/rules/judge.py; issue 9, finding 3 and its B rules).

Tables of cases, then properties; then the figure rule's tables of real sentences, both ways: Debian manuals
of the real-document set and the rule vectors' dev half. The lab end-to-end twin is tests/e2e/test_units_e2e.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from briefd.daemon.core.brief import Brief, validate_brief
from briefd.daemon.research import planner
from briefd.daemon.research.policy import EstimatePolicy, Facts, accept_labels
from briefd.daemon.rules import amounts, asked, contracts, decide, figures, judge, stated
from briefd.daemon.rules.contracts import Contract
from briefd.daemon.rules.decide import Limits, LoopState, Usage
from briefd.daemon.rules.judge import Reading
from tests.rules.vector_cases import mechanism_tests, vector_cases

# ----------------------------------------------------------------- one quantity, another scale


@pytest.mark.parametrize("text, unit, expected", [
    # money in another scale of the same currency: converted
    ("US$0.43bn", "USD million", 430),
    ("US$0.43 billion", "USD million", 430),
    ("$430m", "USD billion", 0.43),
    ("$430 million", "USD", 430e6),
    ("$12k", "USD thousand", 12),
    ("$12 thousand", "USD million", 0.012),
    ("$1.2 trillion", "USD bn", 1200),
    # shares: percent, fraction, per mille, basis points, ppm and ppb are one quantity
    ("23 percent", "fraction", 0.23),
    ("23%", "fraction", 0.23),
    ("23 per cent", "share", 0.23),
    ("23.4 pct", "proportion", 0.234),
    ("23 percent", "percent", 23),
    ("23%", "%", 23),
    ("0.23", "fraction", 0.23),               # a bare share is a fraction as written
    ("50 basis points", "percent", 0.5),
    ("5 per mille", "percent", 0.5),
    ("7.6 ppm", "ppb", 7600),
    ("7.6 ppb", "ppm", 0.0076),
    ("7.6 parts per billion", "ppb", 7.6),
    ("5 parts per million", "percent", 0.0005),
    ("12 ppm", "fraction", 12e-6),
    # not the same quantity: no conversion
    ("0.23", "percent", None),                # a bare number next to a percent is as often a count
    ("23 percent", "USD million", None),
    ("$0.43bn", "percent", None),
    ("$0.43bn", "fraction", None),
    ("€85m", "USD million", None),
    ("7.6 ppb", "USD million", None),
    ("2.1 million", "percent", None),
])
def test_scale_conversion_table(text: str, unit: str, expected: float | None) -> None:
    (amount,) = amounts.parse_amounts(text)
    got = amounts.to_unit(amount, unit)
    if expected is None:
        assert got is None
    else:
        assert got is not None and math.isclose(got, expected, rel_tol=1e-9), got


@pytest.mark.parametrize("unit, ratio", [
    ("percent", "percent"), ("%", "percent"), ("per cent", "percent"), ("percentage", "percent"),
    ("fraction", "fraction"), ("share of households", "fraction"), ("ratio", "fraction"),
    ("ppm", "ppm"), ("parts per million", "ppm"), ("ppb", "ppb"), ("basis points", "basis points"),
    ("USD million", None), ("million people", None), ("GBP bn", None),
])
def test_brief_units_that_are_shares(unit: str, ratio: str | None) -> None:
    parsed = amounts.parse_unit(unit)
    assert parsed.ratio == ratio
    if ratio is not None:
        assert parsed.scale == 1.0, '"parts per million" is a share, not a scale of a million'


def test_a_shared_ratio_reaches_both_ends_of_a_range() -> None:
    low, high = amounts.parse_amounts("between 20 and 30 percent")
    assert (amounts.to_unit(low, "fraction"), amounts.to_unit(high, "fraction")) == (0.2, 0.3)


# ----------------------------------------------------------------- figures kept or discarded, truly

NORTHGATE = ("The Commission accepts the Auditor-General's finding that the project ended US$0.43bn "
             "over its approved budget of US$1.84bn, an overrun of 23 percent.")


@pytest.mark.parametrize("proposed, quote, unit, value, reason", [
    # kept as proposed: the quote states it in the brief's unit
    (430, NORTHGATE, "USD million", 430, None),
    (23, NORTHGATE, "percent", 23, None),
    (0.23, NORTHGATE, "fraction", 0.23, None),
    # kept, converted by code: the model copied the figure as written, in another scale
    (0.43, NORTHGATE, "USD million", 430, None),          # "US$0.43bn" for USD million
    (430e6, NORTHGATE, "USD million", 430, None),         # the same figure in full
    (1.84, NORTHGATE, "USD million", 1840, None),
    (23, NORTHGATE, "fraction", 0.23, None),              # "23 percent" for a fraction
    (7.6, "a lead level of 7.6 ppm", "ppb", 7600, None),
    # discarded: the quote states it, but in a unit that is not the brief's
    (0.43, NORTHGATE, "percent", None, "in another unit (USD)"),
    (430e6, NORTHGATE, "percent", None, "in another unit (USD)"),
    (430, NORTHGATE, "percent", None, "in another unit (USD)"),   # in the brief's scale, still dollars
    (23, NORTHGATE, "USD million", None, "in another unit (percent)"),
    (85, "costs rose by €85m", "USD million", None, "in another unit (EUR)"),
    (7.6, "a lead level of 7.6 ppb", "USD million", None, "in another unit (ppb)"),
    (1840, "approved at 1.84 billion", "percent", None, "in another unit (billion, no currency)"),
    (431, "the overrun was 431", "USD million", None, "in another unit (no unit)"),
    # discarded: the quote does not state it at all
    (500, NORTHGATE, "USD million", None, figures.NOT_IN_QUOTE),
    (500, NORTHGATE, "percent", None, figures.NOT_IN_QUOTE),
    (24, NORTHGATE, "percent", None, figures.NOT_IN_QUOTE),
    (2019, "approved in 2019 at 1.84 billion dollars", "USD million", None, "in another unit (no unit)"),
    (float("nan"), NORTHGATE, "USD million", None, figures.NOT_IN_QUOTE),
    (float("inf"), NORTHGATE, "USD million", None, figures.NOT_IN_QUOTE),
    (430, "", "USD million", None, figures.NOT_IN_QUOTE),
])
def test_each_figure_is_kept_in_the_brief_unit_or_discarded_with_its_true_reason(
        proposed: float, quote: str, unit: str, value: float | None, reason: str | None) -> None:
    figure = figures.read_figure(proposed, quote, unit)
    assert figure.reason == reason
    assert figures.discard_reason(proposed, quote, unit) == reason
    if value is None:
        assert figure.value is None
    else:
        assert figure.value is not None and math.isclose(figure.value, value, rel_tol=1e-9)
    if reason is not None and reason.startswith(stated.OTHER_UNIT):
        assert figure.written and figure.written in quote, "the reason names what the quote wrote"


@given(st.floats(1, 1e6), st.sampled_from(["bn", "billion", "m", "million", "k", "thousand", ""]),
       st.sampled_from(["USD million", "USD billion", "USD thousand", "USD"]))
def test_property_money_in_any_scale_is_converted_never_discarded(
        number: float, scale: str, unit: str) -> None:
    """Whichever way the model copies "$N<scale>" (as written, in full, or converted), it is kept,
    and kept as code's conversion."""
    number = float(f"{number:.4g}")
    quote = f"The overrun was ${number}{' ' if len(scale) > 2 else ''}{scale}."
    (amount,) = amounts.parse_amounts(quote)
    converted = amounts.to_unit(amount, unit)
    assert converted is not None
    full = number * amounts.SCALES.get(amount.scale_word or "", 1.0)
    for proposed in (number, full, converted):
        figure = figures.read_figure(proposed, quote, unit)
        assert figure.reason is None and figure.value == converted, (proposed, figure)


@given(st.floats(0.01, 99.99), st.sampled_from(["percent", "%", "per cent", "ppm", "ppb", "basis points"]),
       st.sampled_from(["USD million", "EUR bn", "million people"]))
def test_property_a_share_for_a_money_brief_is_in_another_unit_never_not_in_its_quote(
        number: float, marker: str, unit: str) -> None:
    number = float(f"{number:.4g}")
    quote = f"It rose by {number}{'' if marker == '%' else ' '}{marker} last year."
    reason = figures.discard_reason(number, quote, unit)
    assert reason is not None and reason.startswith(stated.OTHER_UNIT)


# ----------------------------------------------------------------- no usable figure: said, counted


def test_no_usable_figures_says_so_with_the_count_and_reasons() -> None:
    discarded = {"in another unit (USD)": 5, figures.NOT_IN_QUOTE: 2}
    sentence = figures.no_usable_figures(0, discarded, "percent")
    assert sentence is not None
    assert "No usable figure in percent" in sentence and "initial range" in sentence
    assert "7 figures discarded: 5 in another unit (USD), 2 not in its quote" in sentence
    assert figures.no_usable_figures(1, discarded, "percent") is None, "one kept figure is a usable figure"
    nothing = figures.no_usable_figures(0, {}, "percent")
    assert nothing is not None and "no source stated a figure" in nothing
    assert figures.NO_USABLE_FIGURES == "no_usable_figures"


def test_discarded_text() -> None:
    assert figures.discarded_text({}) == "no figure was discarded"
    assert figures.discarded_text({figures.NOT_IN_QUOTE: 1}) == "1 figure discarded: 1 not in its quote"


# ----------------------------------------------------------------- one source is not a certainty


def _r(value: float, confidence: float, source: str, impact: str = "narrows_both") -> Reading:
    return Reading(low=value, high=value, confidence=confidence, impact=impact, source=source, round=1)


@pytest.mark.parametrize("initial, readings, expected", [
    # the lab's finding: one industry figure (0.7) in a 10..1,000 range gave 97..97
    ((10, 1000), [_r(97, 0.7, "industry")], (70.9, 367.9)),
    # one source repeated on the page is still one source
    ((10, 1000), [_r(97, 0.7, "industry"), _r(97, 0.7, "industry")], (70.9, 367.9)),
    # a regulator alone (0.95) draws it close, still not to a point
    ((10, 1000), [_r(97, 0.95, "regulator")], (92.65, 142.15)),
    # a confidence of 1.0 keeps ONE_SOURCE_KEEPS (5 %) of the way
    ((10, 1000), [_r(97, 1.0, "certain")], (92.65, 142.15)),
    # corroboration: a second independent source at the same figure removes the uncertainty
    ((10, 1000), [_r(97, 0.7, "industry"), _r(97, 0.6, "news")], (97, 97)),
    ((10, 1000), [_r(97, 0.7, "industry"), _r(110, 0.6, "news")], (97, 110)),
    # one source on one side: only that side keeps its share; the other side is corroborated
    ((100, 2000), [_r(430, 0.9, "a"), _r(450, 0.6, "b"), _r(520, 0.85, "c", "narrows_high"),
                   _r(420, 0.9, "d", "narrows_low")], (420, 520)),
    ((100, 2000), [_r(430, 0.9, "a", "narrows_low"), _r(520, 0.85, "c", "narrows_high")], (397, 742)),
    # a lone reading beyond the initial range: the range moves out to it, not past it
    ((100, 2000), [_r(3000, 0.9, "a")], (2710, 3000)),
    ((100, 2000), [_r(50, 0.9, "a")], (50, 245)),
    # below the credible line nothing moves, as before
    ((10, 1000), [_r(97, 0.49, "forum")], (10, 1000)),
])
def test_one_credible_reading_moves_the_range_but_never_to_a_point(
        initial: tuple[float, float], readings: list[Reading], expected: tuple[float, float]) -> None:
    low, high = judge.update_range(initial, readings)
    assert (low, high) == pytest.approx(expected, rel=1e-9)


SOURCES = st.sampled_from([f"site{i}.example" for i in range(6)])


@given(st.floats(10, 1000), st.floats(judge.CREDIBLE, 1.0), st.sampled_from(["narrows_both", "widens"]),
       st.integers(1, 4))
def test_property_one_source_never_collapses_the_range(value: float, c: float, impact: str, repeats: int) -> None:
    """However sure, however often it repeats itself: one source leaves at least ONE_SOURCE_KEEPS of
    the initial width, and the range always holds its reading."""
    initial = (10.0, 1000.0)
    low, high = judge.update_range(initial, [_r(value, c, "one.example", impact)] * repeats)
    assert low <= value <= high
    assert high - low >= judge.ONE_SOURCE_KEEPS * (initial[1] - initial[0]) * (1 - 1e-9)
    assert initial[0] <= low and high <= initial[1]
    if value >= initial[0] + 1:
        assert low > initial[0], "it moved toward the reading"


@given(st.floats(10, 1000), st.floats(judge.CREDIBLE, 0.95), st.floats(judge.CREDIBLE, 0.95))
def test_property_independent_corroboration_narrows_further(value: float, c1: float, c2: float) -> None:
    initial = (10.0, 1000.0)
    one = judge.update_range(initial, [_r(value, c1, "first.example")])
    two = judge.update_range(initial, [_r(value, c1, "first.example"), _r(value, c2, "second.example")])
    assert one[0] <= two[0] <= two[1] <= one[1]
    assert two == (value, value), "two independent sources agreeing: the evidence alone sets the range"


@given(st.lists(st.tuples(st.floats(10, 1000), st.floats(judge.CREDIBLE, 1.0), SOURCES), min_size=1, max_size=8))
def test_property_a_point_needs_two_sources(raw: list[tuple[float, float, str]]) -> None:
    readings = [_r(v, c, s) for v, c, s in raw]
    low, high = judge.update_range((10.0, 1000.0), readings)
    if low == high:
        assert judge.credible_sources(readings) >= judge.CORROBORATION


@pytest.fixture(scope="module")
def units_loaded() -> None:
    """The units library builds its registry on first use (seconds): done once before a property test,
    so Hypothesis' per-example deadline measures the rule, not the registry (a test process that met no
    unit before failed the first example so)."""
    figures.read_figure(5.0, "5 ms", "seconds")


@given(st.one_of(st.floats(), st.integers(-10**20, 10**20)), st.text(max_size=200),
       st.sampled_from(["USD million", "percent", "fraction", "ppb", "people", ""]))
@example(float("9" * 300), "$" + "9" * 300 + " trillion", "USD million")   # converts to inf: no usable figure
def test_property_read_figure_is_total(units_loaded: None, proposed: float, quote: str, unit: str) -> None:
    """Any number against any page text: kept with a finite value, or discarded with a reason."""
    figure = figures.read_figure(proposed, quote, unit)
    assert (figure.value is None) == (figure.reason is not None)
    assert figure.value is None or math.isfinite(figure.value)
    assert figure.reason in (None, figures.NOT_IN_QUOTE) or figure.reason.startswith(stated.OTHER_UNIT + " (") \
        or figure.reason.startswith(stated.NOT_THE_QUANTITY + " (")


# A data rate's unit named before its figure, as md(4) names speed_limit_min's (the real-document set's second
# part, dev half), and written after figures as a size per a duration.
@pytest.mark.parametrize("quote, proposed, value", [
    ("The speed is in Kibibytes per second, and is a per-device rate, not a per-array rate (which means that an "
     "array with more disks will shuffle more data for a given speed). The default is 1000.", 1000, 1000.0),
    ("The speed is 50 MB/s.", 50, 51200.0),
    ("The speed is 2 kilobytes per second.", 2, 1.953125),
    ("It runs 5 times per second.", 5, None),  # a count per a duration is no data rate
    ("The speed is 8 MB.", 8, None),           # a size is no rate
])
def test_a_rate_is_read_in_the_briefs_rate(quote: str, proposed: float, value: float | None) -> None:
    figure = figures.read_figure(proposed, quote, "KiB/s", asked="What is the default rebuild speed?")
    assert figure.value == value


def test_a_figure_that_restates_the_claim_does_not_outvote_the_one_that_measures() -> None:
    """The lab corpus's news story reports a study's 7.6 ppb beside the claim it challenges ("... cut lead levels
    below 5 ppb"): the words of the claim are at the restating bound, the metric is the other figure's, which
    decides against the claim (asked.parallel_figures under a contract)."""
    from briefd.daemon.rules import contracts
    quote = ("A new study from Lakeside University has measured lead at 7.6 ppb at the 90th percentile in homes "
             "with lead service lines, challenging the water authority's claim that its plant upgrade cut lead "
             "levels below 5 ppb.")
    claim = contracts.Contract("<", 5.0, "ppb", "90th-percentile lead level",
                               "The Lakeside water plant upgrade cut lead levels below 5 ppb")
    assert contracts.quote_stance(claim, quote).stance == "contradicts"


# === real sentences: a figure counts only where its quote states the quantity asked ==================================
#
# A figure counts only where its quote states it as the quantity asked (issue 21, part 3; issue 27).
#
# stated.figure_reading is the rule; read_figure (estimates) and quote_figures (contracts) read
# through it. The tables are real sentences, both ways (figures the rule must keep and figures it must
# refuse): from the Debian manuals of the real-document set (lab/docset.py; the path of each is
# given) and from the rule vectors' dev half (lab/vectors/dev.json). The held-out manuals are
# quoted nowhere. Then the case where the range is computed (accept_labels, EstimatePolicy): a formula's
# divisor and a command line's value, from two sources, made a range with "target reached"; now the
# range is the prior and the brief says no figure was kept.

# manpages/path_resolution.7
SYMLINKS = ("As currently implemented on Linux, the maximum number of symbolic links that will be followed while "
            "resolving a pathname is 40.  Before Linux 2.6.18, the limit on the recursion depth was 5.")
# manpages/pipe.7
PIPE_CAPACITY = ("Before Linux 2.6.11, the capacity of a pipe was the same as the system page size (e.g., 4096 bytes "
                 "on i386).  Since Linux 2.6.11, the pipe capacity is 16 pages (i.e., 65,536 bytes in a system with "
                 "a page size of 4096 bytes).")
PIPE_BUF = "POSIX.1 requires PIPE_BUF to be at least 512 bytes.  (On Linux, PIPE_BUF is 4096 bytes.)"
# manpages/tcp.7
KEEPALIVE = ("The default value is 7200 seconds (2 hours).  An idle connection is terminated after approximately an "
             "additional 11 minutes (9 probes an interval of 75 seconds apart) when keep-alive is enabled.")
# bash-doc/bashref.html, CHILD_MAX
CHILD_MAX = ("CHILD_MAX: Set the number of exited child status values for the shell to remember. Bash will not "
             "allow this value "
             "to be decreased below a POSIX-mandated minimum, and there is a maximum value (currently 8192) that "
             "this may not exceed.")
# curl/curl.1, --max-redirs: the prose and its example
CURL_PROSE = ("When -L, --location is used, to prevent curl from following too many redirects, by default, the "
              "limit is set to 50 redirects. Set this option to -1 to make it unlimited.")
CURL_EXAMPLE = "curl --max-redirs 3 --location https://example.com"
# zstd/zstd.1
ZSTD_TRAIN = ("The training set should ideally contain a lot of samples (> 100), and weight typically 100x the "
              "target dictionary size (for example, ~10 MB for a 100 KB dictionary).")
ZSTD_MEMORY = ("-M#, --memory=#: Set a memory usage limit. By default, zstd uses 128 MiB for decompression as the "
               "maximum amount of memory the decompressor is allowed to use")
ZSTD_ULTRA = "--ultra: unlocks high compression levels 20+ (maximum 22), using a lot more memory."
# manpages/feature_test_macros.7, an example command line
FTM = "$ cc -D_XOPEN_SOURCE=500 ftm.c"
# git-doc/user-manual.html: a download size
GIT_DOWNLOAD = "# Git itself (approx. 40MB download):"
# openssh-client/sftp.1
SFTP = ("Increasing this may slightly improve file transfer speed but will increase memory usage.  The default is 64 "
        "outstanding requests.")
# git-doc/gitformat-chunk.html: the size of each row of a table
ROWS = "This consists of (C+1) rows of 12 bytes each,"
# The rule vectors' dev half (lab/vectors/dev.json): a divisor in a formula (systemd-12), a block size's
# command-line table (lz4-02), a command line (procps-12), a default that leans on its entry (dnsmasq-base-03),
# the unit named two sentences before (sudo-01), a figure in another unit of the case (nfs-common-06), one in
# another unit of the same quantity (systemd-16); and a grammar's build note
INODES_MAX = ("Sets the limit on number of inodes for the $XDG_RUNTIME_DIR runtime directory for each user who logs "
              "in. Takes a number, optionally suffixed with the usual K, G, M, and T suffixes, to the base 1024 (IEC). "
              "Defaults to RuntimeDirectorySize= divided by 4096.")                        # systemd logind.conf(5)
LZ4_BLOCKS = "-B4= 64KB ; -B5= 256KB ; -B6= 1MB ; -B7= 4MB"                                 # lz4(1)
SYSCTL_ECHO = "echo 256 > /proc/sys/net/ipv6/neigh/eth0/base_reachable_time"               # sysctl(8)
TFTP_MAX = "This defaults to 50."                                                           # dnsmasq(8), --tftp-max
SUDO_TIMEOUT = ("Number of minutes that can elapse before sudo will ask for a password again. The timeout may include "
                "a fractional component if minute granularity is insufficient, for example 2.5. The default is 15.")
NFS_RETRY = ("If this option is not specified, the default value for foreground mounts is 2 minutes, and the default "
             "value for background mounts is 10000 minutes (80 minutes shy of one week).")    # nfs(5), retry=
START_TIMEOUT = "DefaultTimeoutStartSec= and DefaultTimeoutStopSec= default to 90s."        # systemd-system.conf(5)
GRAMMAR = "The grammar is LALR(1); build it with -DOS_OTHER=1"

KEPT = None
IN_CODE = f"{stated.NOT_THE_QUANTITY} (inside code, a formula or a command line)"
NO_UNIT = stated.NOT_THE_QUANTITY + " (no {unit} beside it)"
VERSION = f"{stated.NOT_THE_QUANTITY} (a version, a name's number or a reference)"
EARLIER = f"{stated.NOT_THE_QUANTITY} (an earlier release's value)"
EACH = f"{stated.NOT_THE_QUANTITY} (the size of each of many things)"


@pytest.mark.parametrize("unit, proposed, quote, reason", [
    # kept: the unit beside the figure, or named before it in its sentence or the one before
    ("redirects", 50, CURL_PROSE, KEPT),
    ("symbolic links", 40, SYMLINKS, KEPT),                     # "the maximum number of symbolic links ... is 40"
    ("bytes", 65536, PIPE_CAPACITY, KEPT),
    ("bytes", 4096, PIPE_BUF, KEPT),
    ("seconds", 7200, KEEPALIVE, KEPT),
    ("seconds", 75, KEEPALIVE, KEPT),
    ("statuses", 8192, CHILD_MAX, KEPT),                        # "child status values ... (currently 8192)"
    ("MiB", 128, ZSTD_MEMORY, KEPT),
    ("requests", 64, SFTP, KEPT),                               # one word between: "64 outstanding requests"
    ("connections", 50, TFTP_MAX, KEPT),                        # a count's bare figure that ends its clause
    ("seconds", 15, SUDO_TIMEOUT, KEPT),                        # "Number of minutes ...": 900 seconds, below
    ("KB", 100, ZSTD_TRAIN, KEPT),
    # kept, converted: the same quantity in another unit (issue 27: pint's conversions)
    ("seconds", 2, KEEPALIVE, KEPT),                            # "(2 hours)" is the 7200 seconds again
    ("minutes", 90, START_TIMEOUT, KEPT),                       # "90s" asked in minutes: 1.5
    ("bytes", 40, GIT_DOWNLOAD, KEPT),                          # "40MB" in bytes
    # refused: code, a formula, a command line
    ("redirects", 3, CURL_EXAMPLE, IN_CODE),
    ("inodes", 4096, INODES_MAX, IN_CODE),                      # "divided by 4096"
    ("MB", 4, LZ4_BLOCKS, IN_CODE),                             # "-B4=", "-B7= 4MB"
    ("bytes", 500, FTM, IN_CODE),
    ("states", 1, GRAMMAR, IN_CODE),                            # LALR(1) and -DOS_OTHER=1
    # refused: another unit beside it, one that does not convert; a command line's bare value
    ("retries", 2, NFS_RETRY, f"{stated.OTHER_UNIT} (minutes)"),
    ("seconds", 256, SYSCTL_ECHO, NO_UNIT.format(unit="seconds")),
    # refused: a count of something else, a per-item size, a version, an earlier release
    ("bytes", 16, PIPE_CAPACITY, NO_UNIT.format(unit="bytes")),  # "16 pages"
    ("seconds", 9, KEEPALIVE, NO_UNIT.format(unit="seconds")),   # "9 probes"
    ("bytes", 12, ROWS, EACH),
    ("symbolic links", 2.6, SYMLINKS, VERSION),
    ("symbolic links", 5, SYMLINKS, EARLIER),
    ("bytes", 4096, PIPE_CAPACITY.split("  ")[0], EARLIER),     # "Before Linux 2.6.11, ... 4096 bytes on i386"
    ("connections", 100, LZ4_BLOCKS, figures.NOT_IN_QUOTE),
    ("redirects", -1, CURL_PROSE, NO_UNIT.format(unit="redirects")),   # "Set this option to -1": a special value
])
def test_a_figure_counts_only_where_its_quote_states_the_quantity(
        unit: str, proposed: float, quote: str, reason: str | None) -> None:
    figure = figures.read_figure(proposed, quote, unit)
    assert figure.reason == reason, figure
    assert (figure.value is None) is (reason is not None)


@pytest.mark.parametrize("unit, proposed, quote, value", [
    ("seconds", 2, KEEPALIVE, 7200),              # copied as written from "(2 hours)"
    ("seconds", 7200, KEEPALIVE, 7200),
    ("minutes", 90, START_TIMEOUT, 1.5),
    ("seconds", 15, SUDO_TIMEOUT, 900),           # the minutes the entry's first sentence names
    ("bytes", 40, GIT_DOWNLOAD, 40 * 1024 ** 2),  # a size letter's base: 1024, the software manuals' convention
    ("MiB", 40, GIT_DOWNLOAD, 40),                # the same prefix as the brief's: as written, whatever the base
])
def test_a_figure_in_another_unit_of_the_same_quantity_is_converted(unit: str, proposed: float, quote: str,
                                                                   value: float) -> None:
    assert figures.read_figure(proposed, quote, unit).value == pytest.approx(value)


# ----------------------------------------------------------------- contracts read figures by the same rule

@pytest.mark.parametrize("contract, quote, stance", [
    # the unit named in the subject, not after the number: read (it was "no figure")
    (Contract(">", 600, "seconds", "password timeout"), SUDO_TIMEOUT, "supports"),
    (Contract(">=", 32, "symbolic links", "symbolic links followed"), SYMLINKS, "supports"),
    (Contract(">", 20, "level", "maximum compression level"), ZSTD_ULTRA, "supports"),   # "20+" is 20 or more
    (Contract("<", 20, "level", "maximum compression level"), ZSTD_ULTRA, "contradicts"),
    (Contract(">", 4000, "statuses", "maximum CHILD_MAX value"), CHILD_MAX, "supports"),
    # a row size, a command line's variable, a formula's constant, an example's option: no reading
    (Contract(">", 10, "bytes", "size of each row"), ROWS, "neutral"),
    (Contract(">=", 10, "MB", "default block size"), LZ4_BLOCKS, "neutral"),
    (Contract(">=", 1000, "inodes", "default inode limit"), INODES_MAX, "neutral"),
    (Contract("<=", 20, "redirects", "default redirect limit"), CURL_EXAMPLE, "neutral"),
    (Contract("<=", 20, "redirects", "default redirect limit"), CURL_PROSE, "contradicts"),
    # an earlier release's limit is no reading of today's
    (Contract("<", 32, "symbolic links", "symbolic links followed"), SYMLINKS, "contradicts"),
])
def test_a_contract_reads_only_figures_stated_as_its_quantity(contract: Contract, quote: str, stance: str) -> None:
    assert contracts.quote_stance(contract, quote).stance == stance


# ----------------------------------------------------------------- where the range is computed

INODES_QUESTION = "By default, how many inodes may a user's $XDG_RUNTIME_DIR hold at most?"
INODES_ESTIMATE = {"unit": "inodes", "low": 10, "high": 5000, "target_width": 20}
TFTP_QUESTION = "How many concurrent TFTP connections does dnsmasq allow by default?"
TFTP_ESTIMATE = {"unit": "connections", "low": 10, "high": 5000, "target_width": 20}
LIMITS = Limits(max_rounds=3, max_searches_per_round=3, pages_per_round=6, budget_tokens=50000)


def _brief(question: str, estimate: dict[str, object]) -> Brief:
    return validate_brief({"question": question, "estimate": estimate}, "b.json")


def _range_from(brief: Brief, items: list[tuple[float, str, str]]) -> tuple[tuple[float, float], str | None, int]:
    """What the estimate rule makes of the model's figures: each (number, quote, url) checked by
    accept_labels, the kept ones read as the loop reads them, the range computed by EstimatePolicy;
    then the stop reason after that round and how many figures were discarded."""
    policy = EstimatePolicy(brief)
    readings: list[judge.Reading] = []
    discarded = 0
    for number, quote, url in items:
        item = planner.EvidenceItem(sentence_ids=["s1"], summary=quote, confidence=0.95, gap="g", value=number,
                                    tier="regulator")
        labels = accept_labels(brief, item, quote, url)
        assert labels is not None
        discarded += len(labels.discarded)
        if labels.low is not None and labels.high is not None:
            readings.append(judge.Reading(low=labels.low, high=labels.high, confidence=labels.confidence,
                                          impact=labels.impact or "neutral", source=url, round=1))
    low, high = policy.range_after(readings)
    history = [{"round": 1, "low": low, "high": high, "progress_score": policy.score((low, high)), "tokens": 100}]
    state = LoopState(phase="rounds", round=1, estimate_history=history, new_evidence_per_round=[len(items)])
    facts = Facts(state=state, limits=LIMITS, usage=Usage(tokens=100, seconds=1.0, pages=2), readings=readings)
    return (low, high), policy.stop_reason(facts), discarded


def test_a_formula_and_a_command_line_do_not_collapse_the_range() -> None:
    """Issue 21's shape: a formula's constant and a command line's value, from two sources, made a range and
    "target reached". Neither states the quantity: both are discarded, the range stays the prior and the target
    is not reached."""
    brief = _brief(INODES_QUESTION, INODES_ESTIMATE)
    rng, reason, discarded = _range_from(brief, [
        (4096, INODES_MAX, "https://docs.example/logind.conf.5.html"),
        (256, SYSCTL_ECHO, "https://wiki.example.org/sysctl"),
    ])
    assert rng == (10, 5000)
    assert reason != decide.TARGET_REACHED
    assert discarded == 2


def test_the_figure_stated_as_the_quantity_still_narrows_it() -> None:
    """The other way: the sentence that states 50 connections, from two sources, reaches the target."""
    brief = _brief(TFTP_QUESTION, TFTP_ESTIMATE)
    rng, reason, discarded = _range_from(brief, [
        (50, TFTP_MAX, "https://docs.example/dnsmasq.8.html"),
        (50, "--tftp-max: the maximum number of concurrent TFTP connections defaults to 50.",
         "https://wiki.example.org/d"),
        (4, LZ4_BLOCKS, "https://docs.example/lz4.1.html"),
    ])
    assert rng == (50, 50)
    assert reason == decide.TARGET_REACHED
    assert discarded == 1


# ----------------------------------------------------------------- a neighbouring limit is not the metric

# Quotes the docset's contract briefs kept (lab-scripted, library), each with a figure in the contract's
# unit; only those naming the metric are readings of it.
FLEX_BUFFER = ("The default size of this buffer (16384 bytes) is almost always too large. The ideal size for this "
               "buffer is the length of the longest token expected, in bytes, plus a little more.")  # flex-doc
FANOTIFY = ("For performance reasons, it is recommended to use a large buffer size (for example, 4096 bytes), so "
            "that multiple events can be retrieved by a single read(2).")                             # fanotify.7
FLEX_REENTRANT = "Flex allocates about 84 bytes for the reentrant scanner structure when you call yylex init()."
MQ = "The default value for msgsize_max is 8192 bytes."                                              # mq_overview.7
ZSTD_CLEVEL = "ZSTD_CLEVEL just replaces the default compression level (3)."                        # zstd.1
GIT_ZLIB = ("If that is not set, defaults to -1, the zlib default, which is \"a default compromise between speed "
            "and compression (currently equivalent to level 6).\"")                                   # git-config
DIR_COLORS = "LINK 36 Symbolic link"                                                                 # dir_colors.5
TCP_RMEM = "(On Linux 2.4, the default is 87380*2 bytes, lowered to 87380 in low-memory systems)."  # tcp.7
BPF = ("If the string length is larger than size, just size-1 bytes are copied and the last byte is set to "
       "NUL.")                                                                                        # bpf-helpers.7
FLEX_INPUT = Contract("<", 8192, "bytes", "default input buffer size")
ZSTD_MAX = Contract(">", 20, "level", "maximum compression level")
SYMLINK_MIN = Contract(">=", 32, "symbolic links", "symbolic links followed")
PIPE_BUF_MIN = Contract(">", 8192, "bytes", "PIPE_BUF")


@pytest.mark.parametrize("contract, quote, stance", [
    (FLEX_INPUT, FLEX_BUFFER, "contradicts"),
    (FLEX_INPUT, FANOTIFY, "neutral"),          # a buffer size, not the scanner's default input buffer
    (FLEX_INPUT, FLEX_REENTRANT, "neutral"),
    (FLEX_INPUT, MQ, "neutral"),
    (ZSTD_MAX, ZSTD_ULTRA, "supports"),
    (ZSTD_MAX, ZSTD_CLEVEL, "neutral"),         # the default level, not the maximum
    (ZSTD_MAX, GIT_ZLIB, "neutral"),
    (SYMLINK_MIN, SYMLINKS, "supports"),
    (SYMLINK_MIN, DIR_COLORS, "neutral"),       # a colour code
    (PIPE_BUF_MIN, PIPE_BUF, "contradicts"),
    (PIPE_BUF_MIN, PIPE_CAPACITY, "neutral"),   # the pipe's capacity and page size, not PIPE_BUF
    (PIPE_BUF_MIN, TCP_RMEM, "neutral"),
    (PIPE_BUF_MIN, BPF, "neutral"),
])
def test_a_neighbouring_limit_in_the_same_unit_is_no_reading_of_the_metric(
        contract: Contract, quote: str, stance: str) -> None:
    assert contracts.quote_stance(contract, quote).stance == stance


@pytest.mark.parametrize("unit, proposed, quote, reason", [
    ("bytes", 2, TCP_RMEM, IN_CODE),            # "87380*2 bytes"
    ("bytes", 1, BPF, IN_CODE),                 # "size-1 bytes"
    ("symbolic links", 1, "Specifies the color used for an orphaned symbolic link (one which points to a "
                          "nonexistent file).", NO_UNIT.format(unit="symbolic links")),
])
def test_an_expression_or_a_pronoun_is_no_figure(unit: str, proposed: float, quote: str, reason: str) -> None:
    assert figures.read_figure(proposed, quote, unit).reason == reason


@given(st.text(max_size=300), st.sampled_from(["connections", "bytes", "MiB", "seconds", "symbolic links",
                                               "USD million", "percent", "ppb", "million people"]))
def test_property_every_amount_is_read_or_refused_with_a_reason(text: str, unit: str) -> None:
    """Any page text: each amount parse_amounts finds is stated as the quantity or refused with a reason
    of the two families, and nothing else is invented."""
    read = figures.stated_amounts(text, unit)
    assert [r.amount for r in read] == amounts.parse_amounts(text)
    for r in read:
        assert r.why is None or r.why.startswith((stated.NOT_THE_QUANTITY + " (", stated.OTHER_UNIT + " ("))


# "the <noun> of N": the noun names what N measures (contracts.measures_another_quantity). tcp(7) kept both
# sentences for the docset's tcp-keepalive-hour brief; with the manual tiered regulator, the interval between
# probes decided alone, and wrongly, that the idle time is under an hour.
KEEPALIVE_IDLE = Contract(">", 3600, "seconds", "idle time before keep-alive probes")
TCP_KEEPALIVE_TIME = ("The number of seconds a connection needs to be idle before TCP begins sending out keep-alive "
                      "probes.  Keep-alives are sent only when the SO_KEEPALIVE socket option is enabled.  The default "
                      "value is 7200 seconds (2 hours).")                                                       # tcp.7
TCP_KEEPALIVE_END = ("An idle connection is terminated after approximately an additional 11 minutes (9 probes an "
                     "interval of 75 seconds apart) when keep-alive is enabled.")                               # tcp.7
CPUSET_PRESSURE = ("The cpuset.memory_pressure file provides an integer number representing the recent (half-life of "
                   "10 seconds) rate of entries to the direct reclaim code caused by any process in the cpuset, in "
                   "units of reclaims attempted per second, times 1000.")                                      # cpuset.7
PROC_STAT_SIZE = ("For pseudofiles that are autogenerated by the kernel, the file size (stat.st_size; statx.stx_size) "
                  "reported by the kernel is not accurate.  For example, the value 0 is returned for many files "
                  "under the /proc directory, while various files under /sys report a size of 4096 bytes, even "
                  "though the file content is smaller.")                                                       # proc.5
FILE_SIZE = Contract("<", 8192, "bytes", "file size reported for a /sys file")


@pytest.mark.parametrize("contract, quote, stance", [
    (KEEPALIVE_IDLE, TCP_KEEPALIVE_TIME, "supports"),   # "The default value is 7200 seconds": the value says no other
    (KEEPALIVE_IDLE, TCP_KEEPALIVE_END, "neutral"),     # the interval between probes, not the idle time
    (Contract("<", 60, "seconds", "recent memory pressure rate"), CPUSET_PRESSURE, "neutral"),  # a half-life
    (FILE_SIZE, PROC_STAT_SIZE, "supports"),            # "a size of 4096 bytes": size is the metric's own word
])
def test_a_figure_said_of_another_noun_is_that_quantitys(contract: Contract, quote: str, stance: str) -> None:
    assert contracts.quote_stance(contract, quote).stance == stance


# Which extreme a figure is said to be (asked.figure_roles), and which setting (contracts.code_names). Each was a
# verdict of the docset: ssh_config(5)'s default of RequiredRSASize (a minimum) refuted "ssh-keygen creates RSA
# keys of more than 2048 bits by default"; ssh-keygen(1)'s minimum in one clause and default in the next, and
# zstd(1)'s "[1-19] (default: 3)" beside "(maximum 22)", made a single manual read both ways (nothing decided);
# git-config's http.maxRequestBuffer paragraph (its "10 MiB" default) was read as the http.postBuffer default.
SSH_REQUIRED_RSA = ("Specifies the minimum RSA key size (in bits) that ssh(1) will accept.  User authentication keys "
                    "smaller than this limit will be ignored.  Servers that present host keys smaller than this limit "
                    "will cause the connection to be terminated.  The default is 1024 bits.")       # ssh_config.5
SSH_KEYGEN_B = "For RSA keys, the minimum size is 1024 bits and the default is 3072 bits."       # ssh-keygen.1
ZSTD_LEVELS = ("○ -#: selects # compression level [1-19] (default: 3) ○ --ultra: unlocks high compression levels "
               "20+ (maximum 22), using a lot more memory.")                                      # zstd.1
GIT_MAX_REQUEST = ("The GIT_HTTP_MAX_REQUEST_BUFFER environment variable (or the http.maxRequestBuffer config "
                   "variable) may be set to change the largest ref negotiation request that git will handle during a "
                   "fetch; any fetch requiring a larger buffer will not succeed. This value should not normally need "
                   "to be changed, but may be helpful if you are fetching from a repository with an extremely large "
                   "number of refs. The value can be specified with a unit (e.g., 100M for 100 MiB). The default "
                   "value is 10 MiB.")                                                            # git-http-backend
GIT_POST_BUFFER = ("http.postBuffer: Maximum size in bytes of the buffer used by smart HTTP transports when POSTing "
                   "data to the remote system. For requests larger than this buffer size, HTTP/1.1 and "
                   "Transfer-Encoding: chunked is used to avoid creating a massive pack file locally. Default is 1 "
                   "MiB, which is sufficient for most requests.")                                 # git-config.html
DEFAULT_RSA = Contract(">", 2048, "bits", "default RSA key size")
MINIMUM_RSA = Contract("<=", 1024, "bits", "minimum RSA key size")
MAX_LEVEL = Contract(">", 20, "level", "maximum compression level")
POST_BUFFER = Contract(">", 10, "MiB", "http.postBuffer default")


@pytest.mark.parametrize("contract, quote, read", [
    (DEFAULT_RSA, SSH_REQUIRED_RSA, []),            # the default of a minimum setting: not the default key size
    (MINIMUM_RSA, SSH_REQUIRED_RSA, ["1024"]),      # ... and the very minimum that contract asks about
    (DEFAULT_RSA, SSH_KEYGEN_B, ["3072"]),          # the minimum's clause, then the default's
    (MINIMUM_RSA, SSH_KEYGEN_B, ["1024"]),
    (MAX_LEVEL, ZSTD_LEVELS, ["22"]),               # "[1-19]", "(default: 3)" and "20+" are not said to be maximum
    (Contract(">", 4000, "statuses", "maximum CHILD_MAX value"), CHILD_MAX, ["8192"]),  # the last extreme named
    (Contract(">=", 32, "symbolic links", "symbolic links followed"), SYMLINKS, ["40"]),  # the maximum's value
    (POST_BUFFER, GIT_POST_BUFFER, ["1"]),          # the maximum size's default: "size" is none of the metric's words
    (POST_BUFFER, GIT_MAX_REQUEST, []),             # another setting, though "http" and "default" are the metric's
])
def test_a_figure_is_read_only_as_the_extreme_and_the_setting_the_metric_names(
        contract: Contract, quote: str, read: list[str]) -> None:
    assert [f.raw.strip() for f in contracts.quote_stance(contract, quote).figures] == read


@pytest.mark.parametrize("metric, names", [
    ("http.postBuffer default", ("http.postBuffer",)),
    ("PIPE_BUF", ("PIPE_BUF",)),
    ("default HISTSIZE", ("HISTSIZE",)),
    ("maximum CHILD_MAX value", ("CHILD_MAX",)),
    ("minimum RSA key size", ()),                    # an acronym names a field, not a setting
    ("idle time before keep-alive probes", ()),
    ("default input buffer size", ()),
])
def test_the_code_names_a_metric_is_said_of(metric: str, names: tuple[str, ...]) -> None:
    assert contracts.code_names(metric) == names


M4_DIVERSIONS = ("GNU m4 tries to keep diversions in memory. However, there is a limit to the overall memory usable "
                 "by all diversions taken together (512K, currently).")                        # m4-doc/Diversions
LINE_MAX = ("parsed as Kilobytes, Megabytes, Gigabytes, or Terabytes (with the base 1024), respectively. Defaults "
            "to 48K, which is relatively large but still small enough so that log records likely fit into network "
            "datagrams along with extra room for metadata.")                      # journald.conf(5), systemd-02


@pytest.mark.parametrize("unit, quote, proposed, value", [
    ("KB", M4_DIVERSIONS, 512, 512),          # the letter of kilobytes, not a thousand
    ("MB", M4_DIVERSIONS, 512, 0.5),          # 512K is half a megabyte (a size letter's base is 1024)
    ("MB", GIT_DOWNLOAD, 40, 40),             # "40MB": the unit written in full
    ("bytes", M4_DIVERSIONS, 512, 512 * 1024),  # "512K" in bytes, converted
    ("bytes", LINE_MAX, 48, 48 * 1024),       # "48K", the base stated
])
def test_a_size_written_with_its_units_letter_is_in_that_unit(unit: str, quote: str, proposed: float,
                                                              value: float | None) -> None:
    assert figures.read_figure(proposed, quote, unit).value == value


def test_m4s_diversion_limit_refutes_a_megabyte_of_memory() -> None:
    contract = Contract(">=", 1024, "KB", "memory usable by all diversions")
    assert contracts.quote_stance(contract, M4_DIVERSIONS).stance == "contradicts"


# tcp(7) as the model quotes two entries at once (a man page's term on its own line, then its text): the unit
# named in one entry is no unit of the next entry's figure (stated._subject_before stays within the figure's line)
TCP_INTVL_PROBES = ("tcp_keepalive_intvl (integer; default: 75; since Linux 2.4)\nThe number of seconds between TCP "
                    "keep-alive probes.\ntcp_keepalive_probes (integer; default: 9; since Linux 2.2)\nThe maximum "
                    "number of TCP keep-alive probes to send before giving up and killing the connection if no "
                    "response is obtained from the other end.")                                         # tcp.7
CURL_PARALLEL_MAX = ("--parallel-max <num>\nWhen asked to do parallel transfers, using -Z, --parallel, this option "
                     "controls the maximum amount of transfers to do simultaneously.\n\nThe default is 50.")  # curl.1


@pytest.mark.parametrize("quote, unit, read", [
    (TCP_INTVL_PROBES, "seconds", []),                # "9" is the next entry's count of probes
    (TCP_INTVL_PROBES.replace("\n", " "), "seconds", ["9"]),  # the old reading, one line: what the rule prevents
    (CURL_PARALLEL_MAX, "transfers", ["50"]),         # a line that names nothing reads the paragraph before it
])
def test_a_figures_unit_is_named_in_its_own_line_or_the_one_it_leans_on(quote: str, unit: str,
                                                                          read: list[str]) -> None:
    assert [r.amount.raw for r in figures.stated_amounts(quote, unit) if r.why is None] == read


def test_a_default_in_a_paragraph_of_its_own_is_said_of_the_extreme_in_the_paragraph_above() -> None:
    """curl(1) puts "The default is 50." in a paragraph of its own under "... the maximum amount of transfers":
    the figure is the maximum's (stated._leaned_on_from reads past the blank line, as the cited unit does)."""
    contract = Contract(">", 20, "transfers", "maximum parallel transfers")
    assert [f.raw for f in contracts.quote_stance(contract, CURL_PARALLEL_MAX).figures] == ["50"]


# ----------------------------------------------------------------- a figure given of a name the line above named

LUA_MINSTACK = ("Whenever Lua calls C, it ensures that the stack has at least LUA_MINSTACK extra slots.\n\n"
                "LUA_MINSTACK is defined as 20, so that usually you do not have to worry about stack space unless "
                "your code has loops pushing elements onto the stack.")                         # Lua 5.2 manual, 4.2
LUA_FREE_SLOTS = Contract(">=", 20, "slots", "free stack slots",
                          "Lua guarantees at least 20 free stack slots when it calls a C function")


def test_a_figure_given_of_a_name_the_paragraph_above_counts_reads_that_count() -> None:
    """"LUA_MINSTACK is defined as 20" names no unit; the paragraph above says LUA_MINSTACK counts "extra slots",
    and a claim of "free stack slots" is read there (the sentence above defines the name in the claim's words)."""
    reading = contracts.quote_stance(LUA_FREE_SLOTS, LUA_MINSTACK)
    assert reading.stance == "supports" and [f.raw for f in reading.figures] == ["20"]
    assert contracts.quote_stance(replace(LUA_FREE_SLOTS, target=32), LUA_MINSTACK).stance == "contradicts"
    alone = LUA_MINSTACK.split("\n\n")[1]
    assert contracts.quote_stance(LUA_FREE_SLOTS, alone).stance == "neutral", "alone, 20 is a count of nothing"


# ----------------------------------------------------------------- a man page's option is its program's

CURL_KEEPALIVE = ("This option sets the time a connection needs to remain idle before sending keepalive probes and "
                  "the time between individual keepalive probes. It is currently effective on operating systems "
                  "offering the TCP_KEEPIDLE and TCP_KEEPINTVL socket options (meaning Linux, recent AIX, HP-UX and "
                  "more). Keepalives are used by the TCP stack to detect broken networks on idle connections. If "
                  "unspecified, the option defaults to 60 seconds.")                     # curl(1), --keepalive-time
LINUX_KEEPALIVE = replace(KEEPALIVE_IDLE, claim="Linux TCP waits more than 3600 seconds of idle time before it "
                                                "sends keep-alive probes, by default")
CURL_KEEPALIVE_CLAIM = replace(KEEPALIVE_IDLE, claim="curl waits more than 3600 seconds of idle time before it "
                                                     "sends keep-alive probes, by default")


@pytest.mark.parametrize("contract, quote, url, stance", [
    (LINUX_KEEPALIVE, CURL_KEEPALIVE, "http://docs.example/docs/curl/curl.1.txt", "neutral"),   # curl's, not TCP's
    (LINUX_KEEPALIVE, CURL_KEEPALIVE, "https://manpages.debian.org/bookworm/curl/curl.1.en.html", "neutral"),
    (CURL_KEEPALIVE_CLAIM, CURL_KEEPALIVE, "file:///srv/docs/curl/curl.1.txt", "contradicts"),  # the claim is curl's
    (LINUX_KEEPALIVE, CURL_KEEPALIVE, "file:///srv/docs/curl/everything-curl.html", "contradicts"),  # no man page
    (KEEPALIVE_IDLE, CURL_KEEPALIVE, "file:///srv/docs/curl/curl.1.txt", "contradicts"),  # no claim's words given
    (LINUX_KEEPALIVE, TCP_KEEPALIVE_TIME, "file:///srv/docs/manpages/tcp.7.txt", "supports"),  # no option: read
])
def test_a_man_pages_option_reads_only_a_claim_about_its_program(contract: Contract, quote: str, url: str,
                                                                  stance: str) -> None:
    assert contracts.quote_stance(contract, quote, url).stance == stance


def test_tcp7_decides_the_linux_claim_alone_when_curls_option_is_set_aside() -> None:
    quotes = [judge.Quoted(TCP_KEEPALIVE_TIME, "regulator", "docs/manpages", "file:///d/manpages/tcp.7.txt"),
              judge.Quoted(CURL_KEEPALIVE, "regulator", "docs/curl", "file:///d/curl/curl.1.txt")]
    verdict = judge.contract_verdict(LINUX_KEEPALIVE, quotes)
    assert verdict.value == "supported" and "one source suffices" in verdict.rule
    assert "1 quote(s) with a figure that meets it, 0 with one that fails it" in verdict.rule


@pytest.mark.parametrize("url, names", [
    ("file:///d/openssh-client/ssh_config.5.txt", {"ssh", "config"}),
    ("https://man7.org/linux/man-pages/man7/tcp.7.html", {"tcp"}),
    ("https://manpages.debian.org/bookworm/curl/curl.1.en.html", {"curl"}),
    ("file:///d/lua5.2-doc/manual.html", set()),
    ("file:///d/bash-doc/bashref.html", set()),
    ("file:///d/python3/library/decimal.html", set()),
    (None, set()),
])
def test_a_man_page_is_named_for_its_program(url: str | None, names: set[str]) -> None:
    assert contracts.man_page_names(url) == names


# ----------------------------------------------------------------- a figure in a condition is a case

PROTECTED_SYMLINKS = ("/proc/sys/fs/protected_symlinks (since Linux 3.6) When the value in this file is 0, no "
                      "restrictions are placed on following symbolic links (i.e., this is the historical behavior "
                      "before Linux 3.6). When the value in this file is 1, symbolic links are followed only in the "
                      "following circumstances:")                                                         # proc(5)
BASH_COMPAT = ("If the shell compatibility level is set to 50 or lower, it reverts to the method from bash-5.0 and "
               "previous versions.")                                                                     # Bash manual
ZSTD_SPLIT = "If split is 100, all input samples are used for both training and testing to find optimal d and k."
CASE = f"{stated.NOT_THE_QUANTITY} (a case in a condition: \"if ... is N\")"


@pytest.mark.parametrize("unit, proposed, quote, reason", [
    ("symbolic links", 1, PROTECTED_SYMLINKS, CASE),
    ("symbolic links", 0, PROTECTED_SYMLINKS, CASE),
    ("levels", 50, BASH_COMPAT, CASE),
    ("samples", 100, ZSTD_SPLIT, CASE),
    ("seconds", 60, CURL_KEEPALIVE, KEPT),            # "If unspecified, the option defaults to 60": the if ends first
    ("symbolic links", 40, SYMLINKS, KEPT),
])
def test_a_figure_in_a_condition_is_a_case_not_the_quantity(unit: str, proposed: float, quote: str,
                                                             reason: str | None) -> None:
    assert figures.read_figure(proposed, quote, unit).reason == reason


def test_proc5s_cases_do_not_refute_the_symbolic_link_limit() -> None:
    assert contracts.quote_stance(SYMLINK_MIN, PROTECTED_SYMLINKS).stance == "neutral"


# ----------------------------------------------------------------- an estimate reads only the quantity it asks

PIPE_QUESTION = "What is the default capacity of a pipe on Linux?"
MQ_ENTRY = ("Before Linux 2.6.28, the default mq_msgsize was 8192; from Linux 2.6.28 to Linux 3.4, the default was "
            "the value defined for the msgsize_max limit.\n\n/proc/sys/fs/mqueue/msgsize_max\nThis file can be used to "
            "view and change the ceiling on the maximum message size. This value acts as a ceiling on the "
            "attr->mq_msgsize argument given to mq_open(3). The default value for msgsize_max is 8192 bytes. The "
            "minimum value is 128 (8192 before Linux 2.6.28).")                                     # mq_overview.7
PIPE_BUF_SEMANTICS = ("(On Linux, PIPE_BUF is 4096 bytes.) The precise semantics depend on whether the file "
                      "descriptor is nonblocking (O_NONBLOCK), whether there are multiple writers to the pipe, and "
                      "on n, the number of bytes to be written:")                                     # pipe.7
PIPE_CAPACITY_ONE_SPACE = " ".join(PIPE_CAPACITY.split())  # as the web page gave it: one space between sentences
SAID_OF = stated.NOT_THE_QUANTITY + " (said of {}, which the question does not name)"


@pytest.mark.parametrize("question, proposed, quote, reason", [
    (PIPE_QUESTION, 8192, MQ, SAID_OF.format("msgsize_max")),
    (PIPE_QUESTION, 4096, PIPE_BUF_SEMANTICS, SAID_OF.format("PIPE_BUF")),
    (PIPE_QUESTION, 4096, PIPE_CAPACITY_ONE_SPACE.split("). ")[1], stated.NOT_THE_QUANTITY
     + " (a size, which the question does not ask about)"),            # "a page size of 4096 bytes"
    (PIPE_QUESTION, 65536, PIPE_CAPACITY_ONE_SPACE, KEPT),              # "(i.e., 65,536 bytes": "i.e" names nothing
    ("What is the default value of msgsize_max?", 8192, MQ, KEPT),      # the question names it
    ("What is the default page size of a Linux system?", 4096, PIPE_CAPACITY_ONE_SPACE.split("). ")[1], KEPT),
    (TFTP_QUESTION, 50, TFTP_MAX, KEPT),
    ("", 8192, MQ, KEPT),                                               # no question given: the unit rule alone
])
def test_an_estimate_reads_a_figure_only_as_the_quantity_its_question_asks(question: str, proposed: float,
                                                                          quote: str, reason: str | None) -> None:
    unit = "connections" if quote == TFTP_MAX else "bytes"
    assert figures.read_figure(proposed, quote, unit, asked=question).reason == reason


def test_neighbouring_quantities_of_two_manual_pages_do_not_collapse_the_pipe_capacity() -> None:
    """The web pass of the real-document set once ended "the default capacity of a pipe" at 4,096-8,192 bytes
    (truth 65,536): the model proposed pipe(7)'s PIPE_BUF and page size and mq_overview(7)'s msgsize_max, each
    in bytes, and two pages made two sources. None is the pipe's capacity: the range stays the prior."""
    brief = validate_brief({"question": PIPE_QUESTION, "estimate": {"unit": "bytes", "low": 512, "high": 10_000_000,
                                                                    "target_width": 10_000}}, "pipe.json")
    rng, reason, discarded = _range_from(brief, [
        (4096, PIPE_CAPACITY_ONE_SPACE, "http://docs.example/manpages/pipe.7.txt"),
        (4096, PIPE_BUF_SEMANTICS, "http://docs.example/manpages/pipe.7.txt"),
        (8192, MQ_ENTRY, "http://docs.example/manpages/mq_overview.7.txt"),
    ])
    assert rng == (512, 10_000_000) and discarded == 3 and reason != decide.TARGET_REACHED
    rng, _, _ = _range_from(brief, [(65536, PIPE_CAPACITY_ONE_SPACE, "http://docs.example/manpages/pipe.7.txt")])
    assert rng[0] <= 65536 <= rng[1]


@pytest.mark.parametrize("text, names", [
    ("(i.e., 65,536 bytes in a system", []),
    ("(e.g., 4096 bytes on i386)", []),
    ("git's http.postBuffer and PIPE_BUF", ["http.postBuffer", "PIPE_BUF"]),
    ("lua_pushcfunction is defined as a macro", ["lua_pushcfunction"]),
])
def test_a_code_name_is_not_an_abbreviation(text: str, names: list[str]) -> None:
    assert [m.group(0) for m in decide.CODE_NAME.finditer(text)] == names


# === the rule vectors' dev half: each reading mechanism of the figure rule, both ways ===============================
#
# The reading rules of issue 27, each table-tested on real sentences of the rule vectors' dev half, both ways:
# every case below is a case of lab/vectors/dev.json, decided as `briefd eval --vectors` decides it
# (daemon/ops/vectors.decide_case): the quote filter, then the figure rule. Each mechanism appears with cases
# it must keep and cases it must refuse. (The units' cases are in tests/rules/test_units.py, relevance's in
# tests/rules/test_relevance.py.)

FIGURE_MECHANISMS: dict[str, list[str]] = {
    # what a figure is, from its own clause: an example, the ends of a permitted range, an extreme, an earlier
    # value, an added amount, what the quantity is not, a recommendation; kept where it is what is asked
    "roles": ["squid-common-04", "sudo-02", "systemd-22", "bzip2-02", "e2fsprogs-07", "haproxy-doc-02",
              "iputils-ping-03", "nfs-common-05", "squid-common-05", "smartmontools-03", "openssl-05", "procps-09",
              "openssl-02", "gnupg-02", "systemd-30", "nfs-common-02", "debian-policy-07", "xz-utils-09",
              "systemd-07", "lz4-05"],
    # figures side by side for different cases: the one whose own words the question asks
    "parallel figures": ["debian-reference-en-01", "debian-reference-en-02", "nfs-common-06", "iputils-ping-04",
                         "php8.2-common-05", "lz4-03", "lz4-04"],
    # a figure said of a setting the question does not name; code, a formula, a command line
    "another setting, code": ["apt-02", "systemd-12", "haproxy-doc-05", "exim4-doc-html-02", "exim4-doc-html-05",
                              "dnsmasq-base-05"],
    # contracts: negation and modality, the extreme the metric is, a range's end, a figure in another unit
    "contracts": ["smartmontools-06", "dnsmasq-base-07", "nfs-common-08", "systemd-28", "exim4-doc-html-06",
                  "debian-reference-en-03", "sudo-05", "smartmontools-05", "systemd-27", "bzip2-07", "e2fsprogs-01",
                  "xz-utils-11", "iputils-ping-06", "procps-10", "debian-policy-01", "e2fsprogs-09", "bzip2-08"],
}


test_each_mechanism_reads_real_sentences_right, test_the_tables_have_both_ways = mechanism_tests(FIGURE_MECHANISMS)


# What a model says of its figure can set a kept figure aside, never keep a refused one (the model proposes,
# the rules verify): dev sentences with the reading a careless or a careful model gives.
@pytest.mark.parametrize("case_id, said, kept", [
    ("sudo-01", figures.ModelReading(kind="default", of="password timeout"), True),       # a careful model
    ("sudo-01", figures.ModelReading(kind="example", of="password timeout"), False),      # it says an example's
    ("sudo-01", figures.ModelReading(kind="default", of="log line length"), False),       # of what the quote lacks
    ("haproxy-doc-02", figures.ModelReading(kind="default", of="dynamic header table size"), False),  # refused stays
    ("systemd-16", figures.ModelReading(kind="maximum", of="start timeout"), False),       # an extreme, not the default
    ("systemd-16", figures.ModelReading(kind="default", of="timeout for a unit to start"), True),
])
def test_what_a_model_says_of_its_figure_is_verified(case_id: str, said: figures.ModelReading, kept: bool) -> None:
    case = vector_cases()[case_id]
    assert case.proposed is not None
    lead = case.context.partition("\n")[2]
    lead = lead[:lead.find(case.quote)] if case.quote in lead else ""
    figure = figures.read_figure(case.proposed, case.quote, case.unit, asked=case.question, lead=lead, said=said)
    assert (figure.value is not None) is kept, figure
