"""Units of measure: what unit a figure is written in, and what it is in the brief's unit.

Why a library: manuals write one quantity in many units ("30s", "100ms", "10min", "10w", "48K", "256 KiB",
"3700 kbytes", "two minutes", "70 deciseconds") and a brief asks it in one. The conversions and the names of
the units are pint's (the field's units library): seconds to hours, bytes to mebibytes, deciseconds to
seconds, kilobits to bytes. What pint cannot know is the shorthand of configuration files, where "m" after a
duration is minutes, not metres, and "K" after a size is a kibibyte, not a kelvin: that is the table of
_LETTERS, read only where the brief's unit says which quantity is meant (a duration or a size).

A unit pint does not know is a count of things ("connections", "retries", "lines"): two counts are the same
unit when their nouns are (singular or plural); a count never converts.

Money, shares and trace concentrations keep their own reading (amounts.parse_unit, amounts.to_unit): their unit
travels with the amount ("$4m", "34 %", "7.6 ppb").

Size letters and bases: a size written with a prefix letter ("64K", "50M", "4k", "64 KB") is read as written
when the brief's unit has the same prefix letter (kilo or kibi against "K", mega or mebi against "M": the
base does not matter then), and otherwise in base 1024, the convention of software manuals, unless the text
states base 1000 (SIZE_BASE_1000); "KiB" and "MiB" are binary and "kB" written so is decimal, as pint has them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

TIME, SIZE = "[time]", "[information]"  # a duration (pint's dimensionality) and a data size (bits, bytes)
RATE = f"{SIZE} / {TIME}"  # a data rate ("KiB/s", "kilobytes per second"): pint's 1 / [time], as a frequency is


@lru_cache(maxsize=1)
def _registry() -> Any:
    """pint's registry, built once per process and only when a figure is first read (it takes ~0.3 s)."""
    import pint

    registry: Any = pint.UnitRegistry(cache_folder=None)
    return registry


# Configuration files' shorthand where pint means something else ("m" metre, "h" planck... "w" watt, "K"
# kelvin), read only for the quantity the brief asks: a duration or a data size.
_TIME_LETTERS = {"s": "second", "sec": "second", "secs": "second", "m": "minute", "min": "minute",
                 "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour", "d": "day", "w": "week",
                 "wk": "week", "y": "year", "ms": "millisecond", "msec": "millisecond", "msecs": "millisecond",
                 "us": "microsecond", "usec": "microsecond", "µs": "microsecond", "μs": "microsecond",
                 "ns": "nanosecond", "nsec": "nanosecond"}
_SIZE_LETTERS = {"b": "byte", "k": "kibibyte", "kb": "kibibyte", "kbyte": "kibibyte", "kbytes": "kibibyte",
                 "m": "mebibyte", "mb": "mebibyte", "mbyte": "mebibyte", "mbytes": "mebibyte",
                 "g": "gibibyte", "gb": "gibibyte", "gbyte": "gibibyte", "gbytes": "gibibyte",
                 "t": "tebibyte", "tb": "tebibyte"}
_PREFIX_LETTER = {"kilo": "k", "kibi": "k", "mega": "m", "mebi": "m", "giga": "g", "gibi": "g", "tera": "t",
                  "tebi": "t"}
_DECIMAL = {"kibibyte": "kilobyte", "mebibyte": "megabyte", "gibibyte": "gigabyte", "tebibyte": "terabyte"}
SIZE_BASE_1000 = re.compile(r"\b(?:base\s+1000|1000\s+bytes|=\s*1000\b|=>\s*1000\b|powers?\s+of\s+1000|"
                            r"k\s*=\s*1000|decimal\s+(?:units|prefixes))", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-zµμ]+(?:/[A-Za-z]+)?")


@dataclass(frozen=True)
class Measure:
    """What a unit measures. `dimension` is pint's ("[time]", "[information]", ...) for a unit pint knows, or
    "" for a count; `unit` is pint's name ("second", "kibibyte") or the count's noun, singular ("connection")."""

    dimension: str
    unit: str

    @property
    def is_count(self) -> bool:
        return not self.dimension


def singular(noun: str) -> str:
    """"connections" -> "connection", "entries" -> "entry", "boxes" -> "box", "s" -> "s"."""
    noun = " ".join(noun.lower().split())
    if len(noun) <= 3:
        return noun
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if re.search(r"(?:[sxz]|ch|sh)es$", noun):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


@lru_cache(maxsize=512)
def _pint_unit(word: str) -> tuple[str, str] | None:
    """(pint's unit name, its dimensionality) for a unit word pint knows, or None. Plain English words that
    pint also takes for units ("a" year, "in" inch, "at" atmosphere...) are not asked: only what looks like
    a unit word (see unit_of_word)."""
    import pint

    registry = _registry()
    try:
        unit = registry.parse_units(word)
    except (pint.errors.UndefinedUnitError, pint.errors.DefinitionSyntaxError, ValueError, AttributeError,
            TypeError, AssertionError):
        return None
    name = str(unit)
    if re.fullmatch(r"[a-z]*(?:bit|byte|octet)", name):
        return name, SIZE  # pint counts information as dimensionless: a size is what converts to bits
    if re.fullmatch(r"[a-z]*(?:bit|byte|octet) / [a-z]+", name) and str(unit.dimensionality) == f"1 / {TIME}":
        return name, RATE  # so a data rate never converts to a frequency
    if unit.dimensionless:
        return None
    return name, str(unit.dimensionality)


# English words pint parses as units that a manual never means so: "in" (inch), "at", "a" (year), "are",
# "min" is kept (minute), "h" and "m" only through the letters above.
_NOT_UNITS = frozenset({"a", "an", "at", "are", "in", "is", "it", "of", "or", "on", "to", "by", "as", "be", "do",
                        "if", "no", "so", "up", "we", "me", "he", "us", "am", "pm", "ft", "g", "h", "m", "k",
                        "t", "b", "c", "d", "e", "f", "l", "n", "p", "q", "r", "s", "u", "v", "w", "x", "y", "z",
                        "point", "points", "line", "lines", "turn", "turns", "count", "counts", "cycle", "cycles",
                        "bit", "bits", "byte", "bytes", "percent", "degree", "degrees", "mile", "miles", "pi",
                        "ton", "tons", "gal", "cup", "cups", "hand", "hands", "foot", "feet", "yard", "yards",
                        "stone", "dram", "grain", "grains", "pica", "fortnight", "century", "pixel", "pixels",
                        "dot", "dots", "number", "atom", "atoms", "molecule", "event", "events", "unit", "units"})
_BITS_BYTES = {"bit": "bit", "bits": "bit", "byte": "byte", "bytes": "byte", "octet": "byte", "octets": "byte"}


# A rate written as two words: "Kibibytes per second", "MB/s", "kbytes / sec" (rate_of reads them).
RATE_WORDS = re.compile(r"([A-Za-zµμ]+)(?:\s+per\s+|\s*/\s*)([A-Za-zµμ]+)", re.IGNORECASE)


def rate_of(numerator: str, denominator: str) -> str | None:
    """pint's name of a data rate written as two words, a size "per" (or "/") a duration: "Kibibytes per
    second" -> "kibibyte / second", "MB/s" -> "mebibyte / second" (a size letter read as unit_of_word reads it
    against a size); None when the two are not a size and a duration."""
    size = unit_of_word(numerator, SIZE)
    duration = unit_of_word(denominator, TIME)
    if size is None or duration is None or dimension_of(size) != SIZE or dimension_of(duration) != TIME:
        return None
    found = _pint_unit(f"{size} / {duration}")
    return found[0] if found and found[1] == RATE else None


def unit_of_word(word: str, wanted: str = "") -> str | None:
    """pint's name of the unit `word` writes ("ms" -> "millisecond", "KiB" -> "kibibyte", "days" -> "day"), or
    None when it writes none. `wanted` is the dimension the brief asks (TIME, SIZE, or ""): only then are a
    configuration file's letters read ("m" minutes against a duration, "K" a kibibyte against a size)."""
    text = word.strip()
    if not text or not _WORD.fullmatch(text):
        return None
    lower = text.lower()
    if wanted == TIME and lower in _TIME_LETTERS:
        return _TIME_LETTERS[lower]
    if wanted == SIZE and lower in _SIZE_LETTERS and text != "b":  # "b" alone is a bit as often as a byte
        return _SIZE_LETTERS[lower]
    if lower in _BITS_BYTES:
        return _BITS_BYTES[lower]
    if lower in _NOT_UNITS or len(lower) > 24:
        return None
    found = _pint_unit(text) or (_pint_unit(lower) if lower != text else None)
    if found is None and len(lower) > 4 and lower.endswith("s"):
        found = _pint_unit(lower[:-1])
    if found is None:
        return None
    unit, dimension = found
    if dimension not in (SIZE, TIME, RATE):
        return None  # lengths, masses, temperatures, currents, frequencies: not what a manual's figures measure here
    return unit


def dimension_of(unit: str) -> str:
    """pint's dimensionality of one of its unit names ("second" -> "[time]")."""
    found = _pint_unit(unit)
    return found[1] if found else ""


@lru_cache(maxsize=256)
def measure(unit: str) -> Measure:
    """What a brief's unit measures: "seconds", "ms", "MiB", "kilobytes", "bits" (a quantity pint converts), or
    a count ("connections", "retries", "priority level")."""
    text = " ".join(unit.split())
    if not text:
        return Measure("", "")
    rate = RATE_WORDS.fullmatch(text)
    if rate is not None:
        found = rate_of(rate.group(1), rate.group(2))
        if found is not None:
            return Measure(RATE, found)
    if len(text.split()) == 1:
        letters = text.lower() in _SIZE_LETTERS and len(text) > 1  # "MB", "KB": read as a document's are
        found = unit_of_word(text, SIZE) if letters else unit_of_word(text)
        if found is not None:
            return Measure(dimension_of(found), found)
    return Measure("", singular(text))


def same_prefix(written: str, unit: str) -> bool:
    """Whether a size written with a prefix letter ("50M", "64 KB") and the brief's unit ("megabytes", "MiB")
    share the prefix, so the figure is read as written whatever the base (module docstring)."""
    def letter(name: str) -> str:
        for prefix, short in _PREFIX_LETTER.items():
            if name.startswith(prefix):
                return short
        return ""

    return bool(letter(written)) and letter(written) == letter(unit)


def convert(value: float, written: str, unit: str, *, base_1000: bool = False) -> float | None:
    """`value` written in pint's unit `written`, in pint's unit `unit`; None when they measure different
    things. A size with the brief's prefix letter is read as written; `base_1000`: the text states decimal
    sizes, so a size letter's kibibyte is a kilobyte."""
    if written == unit:
        return value
    if dimension_of(written) != dimension_of(unit) or not dimension_of(unit):
        return None
    if same_prefix(written, unit) and dimension_of(unit) == SIZE:
        return value
    if base_1000:
        written = _DECIMAL.get(written, written)
    registry = _registry()
    try:
        converted = float(registry.Quantity(value, written).to(unit).magnitude)
    except Exception:  # pint's conversion errors have no common base class worth naming here
        return None
    return float(f"{converted:.12g}")
