"""Units of measure (daemon/rules/units.py, issue 27): a figure's unit read as the units library (pint) reads it,
with the shorthand of configuration files for the quantity a brief asks, and converted to the brief's unit."""

from __future__ import annotations

import pytest

from briefd.daemon.rules import units
from briefd.daemon.rules.units import SIZE, TIME
from tests.rules.vector_cases import mechanism_tests


@pytest.mark.parametrize("word, wanted, unit", [
    ("seconds", "", "second"), ("ms", "", "millisecond"), ("msec", TIME, "millisecond"),
    ("minutes", "", "minute"), ("deciseconds", "", "decisecond"), ("KiB", "", "kibibyte"),
    ("kilobytes", "", "kilobyte"), ("bytes", "", "byte"), ("octets", "", "byte"),
    # a configuration file's letters, read only for the quantity the brief asks
    ("m", TIME, "minute"), ("w", TIME, "week"), ("s", TIME, "second"), ("K", SIZE, "kibibyte"),
    ("M", SIZE, "mebibyte"), ("kbytes", SIZE, "kibibyte"),
    ("m", "", None), ("K", "", None), ("w", "", None),       # metres, kelvins and watts are not figures here
    ("in", "", None), ("at", "", None), ("connections", "", None), ("percent", "", None),
])
def test_a_word_is_a_unit_only_where_it_writes_one(word: str, wanted: str, unit: str | None) -> None:
    assert units.unit_of_word(word, wanted) == unit


@pytest.mark.parametrize("unit, dimension, name", [
    ("seconds", TIME, "second"), ("MiB", SIZE, "mebibyte"), ("MB", SIZE, "mebibyte"),  # read as a document's
    ("kilobytes", SIZE, "kilobyte"), ("connections", "", "connection"), ("priority level", "", "priority level"),
    ("retries", "", "retry"),
])
def test_a_briefs_unit_is_a_quantity_or_a_count(unit: str, dimension: str, name: str) -> None:
    measure = units.measure(unit)
    assert (measure.dimension, measure.unit) == (dimension, name)
    assert measure.is_count is (dimension == "")


@pytest.mark.parametrize("value, written, unit, base_1000, result", [
    (30, "second", "millisecond", False, 30_000),
    (10, "week", "day", False, 70),
    (70, "decisecond", "second", False, 7),
    (64, "kibibyte", "byte", False, 65_536),
    (48, "kibibyte", "byte", True, 48_000),            # the text states base 1000
    (50, "mebibyte", "megabyte", False, 50),            # the same prefix letter: as written, whatever the base
    (20, "byte", "bit", False, 160),
    (5, "second", "byte", False, None),                 # a duration is no size
])
def test_a_figure_converts_to_the_briefs_unit(value: float, written: str, unit: str, base_1000: bool,
                                              result: float | None) -> None:
    assert units.convert(value, written, unit, base_1000=base_1000) == result


@pytest.mark.parametrize("text, base_1000", [
    ("1k => 1000 bytes, 1kb => 1024 bytes", True),
    ("parsed as Kilobytes, Megabytes ... (with the base 1024), respectively", False),
])
def test_a_document_that_states_decimal_sizes_is_read_so(text: str, base_1000: bool) -> None:
    assert bool(units.SIZE_BASE_1000.search(text)) is base_1000


@pytest.mark.parametrize("unit, name", [
    ("KiB/s", "kibibyte / second"), ("kilobytes per second", "kilobyte / second"), ("MB/s", "mebibyte / second"),
    ("Kibibytes per second", "kibibyte / second"),
])
def test_a_data_rate_is_a_size_per_a_duration(unit: str, name: str) -> None:
    assert units.measure(unit) == units.Measure(units.RATE, name)


@pytest.mark.parametrize("unit", ["rings per second", "times per day", "pages per device", "hertz"])
def test_other_things_per_a_duration_are_counts_not_data_rates(unit: str) -> None:
    """A frequency is pint's 1 / [time] as a data rate is (it counts information as dimensionless): a count of
    rings per second must never convert to kibibytes per second."""
    assert units.measure(unit).is_count


def test_a_rate_converts_as_a_rate() -> None:
    assert units.convert(5, "mebibyte / second", "kibibyte / second") == 5120
    assert units.convert(5, "hertz", "kibibyte / second") is None


# The units rule on real sentences of the rule vectors' dev half (lab/vectors/dev.json), both ways, decided as
# `briefd eval --vectors` decides them: a figure in another unit of the quantity, a size letter, a unit named
# before.
UNIT_MECHANISMS: dict[str, list[str]] = {
    "units": ["gnupg-03", "gnupg-04", "systemd-08", "systemd-15", "systemd-16", "systemd-02", "exim4-doc-html-05",
              "sudo-01", "squid-common-02", "systemd-07", "e2fsprogs-06", "dnsmasq-base-02", "gzip-04"],
}


test_each_mechanism_reads_real_sentences_right, test_the_tables_have_both_ways = mechanism_tests(UNIT_MECHANISMS)
