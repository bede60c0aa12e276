"""ConfigError and the value checks every config and task uses: one clear line naming the field and the
allowed values. Standard library only (the bottom of attncore)."""

from __future__ import annotations

import numbers
import re

# The one number syntax of flags, links and typed numbers: ASCII digits only. Python's int() and float() also read
# other scripts' digits ('٣' is 3, '١' is 1), underscores ('1_000') and surrounding spaces; none of those is taken.
ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")
ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)


class ConfigError(ValueError):
    """An invalid configuration value; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def check_int(field: str, value, low: int = 1, high: int | None = 10**9) -> None:
    """Raise ConfigError unless value is an integer in [low, high] (high None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(field, f"must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        allowed = f">= {low:,}" if high is None else f"from {low:,} to {high:,}"
        raise ConfigError(field, f"must be {allowed}, got {value:,}")


def check_choice(field: str, value, choices: tuple[str, ...]) -> None:
    """Raise ConfigError unless value is one of choices."""
    if value not in choices:
        raise ConfigError(field, f"must be one of {', '.join(choices)}; got {value!r}")


def check_float(field: str, value, low: float, high: float, *, open_low=True) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, f"must be a number, got {value!r}")
    ok = (value > low if open_low else value >= low) and value < high
    if not ok:
        bracket = "(" if open_low else "["
        raise ConfigError(field, f"must be in {bracket}{low}, {high}), got {value}")
