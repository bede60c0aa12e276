"""One text format per quantity, for the pages and the command line alike: losses, accuracies, shares, counts,
bytes, learning rates, durations and plurals. Pure functions of the standard library; imports nothing of the lab
(a learning rate is written as attncore.settings writes it, for the settings' labels).
"""

from __future__ import annotations

import math

from attncore.settings import learning_rate as learning_rate  # one notation, the settings' too

LOSS_DIGITS = 3  # significant digits of a loss
ACCURACY_DECIMALS = 3


def loss(x: float, digits: int = LOSS_DIGITS) -> str:
    """A loss to `digits` significant digits: 2.30, 0.0412, 3.10e-05 (below 1e-3: scientific), never '0.0000'."""
    if x is None or not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def signed_loss(x: float, digits: int = LOSS_DIGITS) -> str:
    """A loss difference: loss() with its sign, '+0.0120', '−3.10e-05'."""
    text = loss(abs(x), digits)
    return text if x == 0 else ("+" if x > 0 else "−") + text


def accuracy(x: float, decimals: int = ACCURACY_DECIMALS) -> str:
    """An accuracy (a fraction from 0 to 1) with fixed decimals: 0.987, 1.000."""
    return f"{x:.{decimals}f}"


def share(x: float) -> str:
    """A fraction as a percent with one decimal, '70.2%'; exactly 0 and 1 as '0%' and '100%', and a share that one
    decimal would round to either as '<0.1%' or '>99.9%' (a component of 38,400 parameters is not '0.0%')."""
    if x == 0 or x == 1:
        return f"{x * 100:.0f}%"
    if 0 < x < 0.0005:
        return "<0.1%"
    if 0.9995 <= x < 1:
        return ">99.9%"
    return f"{x * 100:.1f}%"


def count(n: int, noun: str | None = None, plural: str | None = None) -> str:
    """A count with thousands separators, '27,253'; with a noun, its plural right: '1 run', '18 runs'."""
    text = f"{n:,}"
    if noun is None:
        return text
    return f"{text} {noun if n == 1 else plural or noun + 's'}"


IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
SI = ("B", "kB", "MB", "GB", "TB", "PB")


def size(n_bytes: float, unit: str = "iec", digits: int = 3) -> str:
    """Bytes with a labelled unit: IEC (1 GiB = 2**30 B) by default, SI (1 GB = 10**9 B) with unit='si';
    three significant digits: '0.516 GiB' is written '528 MiB', '80.0 GB'."""
    if unit not in ("iec", "si"):
        raise ValueError(f"unit must be 'iec' or 'si', got {unit!r}")
    base, names = (1024, IEC) if unit == "iec" else (1000, SI)
    value, i = float(n_bytes), 0
    while abs(value) >= base and i < len(names) - 1:
        value, i = value / base, i + 1
    if i == 0:
        return f"{value:,.0f} B"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value)))) if value else 0
    return f"{value:.{decimals}f} {names[i]}"


def significant(value: float, digits: int = 3) -> str:
    """A positive amount with `digits` significant digits, trailing zeros kept: 16.1, 1.07, 72.0, 0.500, 1,234."""
    if not value:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def scientific(x: float, digits: int = 2) -> str:
    """A number in the lab's short scientific notation, as the learning rates: 'digits' significant digits and a
    plain exponent, '1.7e-5', '1e-6' (never '1e-06' beside '1e-6')."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    mantissa, exponent = f"{x:.{max(digits, 1) - 1}e}".split("e")
    return _minus(f"{mantissa}e{int(exponent)}")


def seconds(s: float) -> str:
    """Seconds of a measurement, rounded to what a reader uses: '13.9 s', '0.42 s', '125 s'."""
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.1f} s"
    return f"{s:.2f} s"


def duration(s: float) -> str:
    """A time to wait or waited: '42 s', '3 min 05 s' (from 90 s on), '2 h 05 min' (from 90 min on)."""
    s = round(max(0.0, s))
    if s < 90:
        return f"{s} s"
    if s < 90 * 60:
        return f"{s // 60} min {s % 60:02d} s"
    minutes = round(s / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def duration_span(low: float, high: float) -> str:
    """A range of times to wait, rounded to what a range can say: '40–75 s', '12–25 min', '1.5–3.0 h'; one figure
    where both ends round to it ('2 min', not '2–2 min')."""
    low, high = max(0.0, low), max(0.0, high)
    if high < 90:
        ends, unit = (str(round(low)), str(round(high))), "s"
    elif high < 90 * 60:
        ends, unit = (str(max(1, round(low / 60))), str(round(high / 60))), "min"
    else:
        ends, unit = (f"{low / 3600:.1f}", f"{high / 3600:.1f}"), "h"
    return f"{ends[0]} {unit}" if ends[0] == ends[1] else f"{ends[0]}–{ends[1]} {unit}"


def ratio(x: float) -> str:
    """How many times larger, with separators: '147,342×', '2.5×'."""
    return f"{x:,.0f}×" if abs(x) >= 10 else f"{x:.2g}×"


def signed_accuracy(x: float) -> str:
    """An accuracy difference with its sign and one minus sign for the whole lab: '+0.012', '−0.134'."""
    return _minus(f"{x:+.{ACCURACY_DECIMALS}f}")


MINUS = "−"  # U+2212, the lab's one minus sign (printf's ASCII hyphen is replaced)
MAX_DECIMALS = 5  # a column needing more decimals than this for its smallest value (< 1e-3) is scientific


def _minus(text: str) -> str:
    return MINUS + text[1:] if text.startswith("-") else text  # the sign only: '2.00e-04' keeps its exponent


def column_spec(values, digits: int = 3, max_decimals: int = MAX_DECIMALS) -> str:
    """The one format spec ('.3f', '.2e') that writes every value of a column: enough decimals for `digits`
    significant digits of its smallest non-zero magnitude, or scientific for all when that needs more than
    max_decimals decimals or the largest is 10,000 or more. So a column never mixes '1.87e-04' with '0.471', nor
    '0.0078' with '0.25'."""
    finite = [abs(float(v)) for v in values if v is not None and math.isfinite(float(v)) and float(v) != 0]
    if not finite:
        return f".{max(digits - 1, 0)}f"
    smallest, largest = min(finite), max(finite)
    decimals = max(0, digits - 1 - math.floor(math.log10(smallest)))
    if decimals > max_decimals or largest >= 1e4:
        return f".{digits - 1}e"
    return f".{decimals}f"


def with_spec(x: float, spec: str, signed: bool = False) -> str:
    """One value in a column's spec (column_spec), the lab's minus sign, '+' if signed, '–' if missing."""
    if x is None or x != x:
        return "–"
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return _minus(format(float(x), ("+" if signed else "") + spec))


def column(values, digits: int = 3, signed: bool = False, max_decimals: int = MAX_DECIMALS) -> list[str]:
    """Every value of a column in one format (column_spec): ['0.00231', '0.00049', '2.04000'] is written
    ['2.31e-03', '4.95e-04', '2.04e+00'], and ['0.25', '0.03125'] as ['0.25000', '0.03125'] with digits=4."""
    values = list(values)
    spec = column_spec(values, digits, max_decimals)
    return [with_spec(v, spec, signed) for v in values]


def p_values(values) -> list[str]:
    """A column of p-values in one format, 3 significant digits of the smallest: ['0.250', '0.500', '1.000'],
    ['0.00781', '0.25000']; scientific for all when the smallest is below 1e-3."""
    return column(values, 3)


def table_formatters(columns, frame=None) -> dict:
    """pandas to_string formatters for the lab's columns: losses (differences signed), accuracies, seconds and
    learning rates as above; other columns are left to pandas. Given the frame, each loss column is written in
    one format for the whole column (column_spec), so '1.87e-04' never stands above '0.471'."""
    out = {}
    for c in columns:
        if "loss" in c:
            signed = c.endswith("_diff")
            if frame is not None and c in frame:
                spec = column_spec(frame[c])
                out[c] = lambda v, spec=spec, signed=signed: with_spec(v, spec, signed)
            else:
                out[c] = signed_loss if signed else loss
        elif "accuracy" in c:
            out[c] = signed_accuracy if c.endswith("_diff") else accuracy
        elif c == "train_seconds":
            out[c] = seconds
        elif c == "lr":
            out[c] = learning_rate
    return out
