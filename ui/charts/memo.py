"""Chart builders memoised server-wide: `@memo_chart` keeps a builder's chart per content of its arguments (frames
and arrays by a digest of their values, numbers and text as they are), so every visitor's view of the same stored
run reuses one chart instead of building it again, and the chart checks its Vega-Lite schema on its first
conversion only (the same spec, without the second validation: Altair's schema check is most of a conversion).

Arguments without a content key (a run record, an open object) call the builder as before. A memoised chart is
shared: callers derive charts from it (`.properties`, `+`, `|` copy it) and never set its attributes.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pandas as pd
from altair import TopLevelMixin
from altair.utils.schemapi import SchemaBase

from lab.jobs.memo import memoised

C = TypeVar("C")
PLAIN = (str, int, float, bool, type(None), bytes, enum.Enum)


class Unkeyable(TypeError):
    """An argument whose content gives no memo key."""


def content_key(value) -> object:
    """A hashable key equal for equal contents: frames and arrays by a SHA-256 of their values and labels."""
    if isinstance(value, PLAIN) or isinstance(value, np.generic):
        return (type(value).__name__, value)
    if isinstance(value, pd.DataFrame | pd.Series):
        try:
            rows = pd.util.hash_pandas_object(value, index=True).to_numpy()
        except TypeError as exc:  # a cell holding a list or a dict
            raise Unkeyable(str(exc)) from None
        if isinstance(value, pd.Series):
            return ("series", str(value.name), str(value.dtype), _digest(rows))
        return ("frame", tuple(map(str, value.columns)), tuple(map(str, value.dtypes)), _digest(rows))
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return ("objects", value.shape, tuple(content_key(v) for v in value.ravel()))
        return ("array", value.shape, str(value.dtype), _digest(np.ascontiguousarray(value)))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(content_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((content_key(k), content_key(v)) for k, v in value.items()))
    if isinstance(value, SchemaBase) and not isinstance(value, TopLevelMixin):  # a scale, an axis: by their spec
        return ("altair", type(value).__name__, json.dumps(value.to_dict(validate=False), sort_keys=True, default=str))
    if dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen:
        return (type(value).__qualname__, tuple(content_key(getattr(value, f.name)) for f in dataclasses.fields(value)))
    raise Unkeyable(type(value).__name__)


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(array.view(np.uint8).ravel() if array.size else b"").hexdigest()


def validated_once(chart: C) -> C:
    """The chart, whose to_dict checks the Vega-Lite schema on its first call only (its spec is the same)."""
    to_dict, checked = chart.to_dict, threading.Event()

    def once(validate=True, **kwargs):
        spec = to_dict(validate=validate and not checked.is_set(), **kwargs)
        checked.set()  # set only after a conversion that passed its check
        return spec

    object.__setattr__(chart, "to_dict", once)  # Altair's own __setattr__ would store it as a chart property
    return chart


def data_bytes(value) -> int:
    """About the bytes the frames and arrays in an argument hold (a chart built from them holds as much again)."""
    if isinstance(value, pd.DataFrame | pd.Series):
        return int(value.memory_usage(deep=True).sum()) if isinstance(value, pd.DataFrame) else value.nbytes
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, list | tuple):
        return sum(data_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(data_bytes(v) for v in value.values())
    return 0


def _own(value):
    """The arguments with the frames and arrays copied: a caller that changes its frame later changes no kept chart."""
    if isinstance(value, pd.DataFrame | pd.Series | np.ndarray):
        return value.copy()
    if isinstance(value, list | tuple):
        return type(value)(_own(v) for v in value)
    if isinstance(value, dict):
        return {k: _own(v) for k, v in value.items()}
    return value


CHART_BYTES = 64 * 1024  # an Altair chart's own objects, beside its data


def memo_chart(builder: Callable[..., C]) -> Callable[..., C]:
    """The builder, its charts kept server-wide per content of its arguments (lab.jobs.memo.memoised, "charts")."""
    name = f"{builder.__module__}.{builder.__qualname__}"

    @functools.wraps(builder)
    def build(*args, **kwargs):
        try:
            key = (name, content_key((args, sorted(kwargs.items()))))
        except Unkeyable:
            return builder(*args, **kwargs)
        size = lambda _: CHART_BYTES + 2 * data_bytes((args, kwargs))  # noqa: E731
        return memoised("charts", key, lambda: validated_once(builder(*_own(args), **_own(kwargs))), size)

    return build
