"""Numbers as briefd reads them and writes them for a person or a prompt: one reader, one form.

Why one module: the same estimate used to reach the reader in four forms ("1250000–1500000" in the stop
sentence, "1.25e+06 to 1.5e+06" in the line the model is told to state, "1.25e+06–1.5e+06" in the
side-by-side title, "1,250,000" in report.md), and three readers disagreed on whether NaN is a number.
The rule, for every text a person or the model reads (reports, stop sentences, prompts, charts, error
messages), not for protocols (JSON, SVG coordinates):

- a whole number below 10^15 is written exactly, with thousands separators: 1,250,000;
- any other number is rounded to SIGNIFICANT significant digits (0.1 + 0.2 reads 0.3), never into
  its whole part (1,234,567.891 reads 1,234,568, not 1,234,570), or, where two
  close values must read apart (an error message echoing what the user typed), kept to the shortest
  digits that read back as the same float (`exact=True`);
- positional notation with thousands separators from SMALLEST up to below LARGEST (1,234.5, 0.00042),
  exponent form outside it (1.5e-07, 2e+20), where positional digits would be mostly zeros;
- NaN and the infinities read "NaN", "inf" and "-inf" (a reader should have refused them first).
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from typing import Any

SIGNIFICANT = 6  # digits a figure keeps in prose: what `:g` kept, without its exponent for millions
SMALLEST = 1e-4  # below this (and above 0) a number is written with an exponent, as `:g` does
LARGEST = 1e15  # from here up too: a brief's figures stop here (brief.py's limit), and past it digits are noise
SPAN = "\u2013"  # the dash between a range's ends: 410–450


def finite(value: Any, *, text: bool = False) -> float | None:
    """`value` as a finite float, else None: never a bool, NaN, an infinity or an int past float's range
    (compared exactly, before any rounding). With `text`, a string such as " 410 " or "1e3" counts too;
    a caller that accepts thousands separators strips them first (a setting's "1,5" is no 15)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and text:
        try:
            number = float(value.strip())
        except ValueError:
            return None
    elif isinstance(value, (int, float)) and abs(value) <= sys.float_info.max:
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else None


def is_finite(value: Any) -> bool:
    """A real int or float that is finite (never a bool, a string, NaN or an infinity)."""
    return finite(value) is not None


def number_text(value: float, *, exact: bool = False) -> str:
    """`value` written for a person or a prompt, by the module's rule: 1,250,000, 0.3, 1.5e-07."""
    x = float(value)
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x == 0:
        return "0"  # -0.0 too
    if SMALLEST <= abs(x) < LARGEST:
        if not exact and not x.is_integer():
            x = float(f"{x:.{SIGNIFICANT}g}") if abs(x) < 1 else round(x, max(0, SIGNIFICANT - _whole_digits(x)))
        return f"{int(x):,}" if x.is_integer() else f"{Decimal(repr(x)):,f}"
    return _exponent(x) if exact else f"{x:.{SIGNIFICANT}g}"


def _whole_digits(x: float) -> int:
    """How many digits `x` has before its decimal point (|x| >= 1): never rounded away."""
    return math.floor(math.log10(abs(x))) + 1


def _exponent(x: float) -> str:
    """`x` in exponent form with the fewest digits that read back as `x`: 1.5e-07, not repr's 1.5e-7 style."""
    for digits in range(1, 18):
        text = f"{x:.{digits}g}"
        if float(text) == x:
            return text
    return repr(x)


def span_text(low: float, high: float, sep: str = SPAN) -> str:
    """A range's two ends in the one form: 1,250,000–1,500,000."""
    return f"{number_text(low)}{sep}{number_text(high)}"
