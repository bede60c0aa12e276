"""Long-format DataFrames the charts draw, shaped from run records and arrays (pandas only, no streamlit).

Reshaping, thinning and smoothing for display; every number shown comes from attncore or lab.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attncore.checks import ASCII_INTEGER
from attncore.config import SEP, ConfigError
from lab.jobs.memo import memoised

MAX_POINTS = 400  # points per curve sent to the browser
INT64 = range(-(2**63), 2**63)  # the whole numbers an Arrow column, and so st.dataframe and a chart's data, holds


def within_int64(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each column holding a whole number past 64 bits written as text, every cell exact with its
    thousands separators ('2,457,600,103,411,384,328,192'); the frame itself when every column fits. Arrow, which
    st.dataframe and st.altair_chart send, has no wider integer (a uint64 column up to 2^64 - 1 fits as it is)."""
    wide = [c for c in frame.columns if frame[c].dtype == object and any(_past_int64(v) for v in frame[c])]
    if not wide:
        return frame
    return frame.assign(**{str(c): [f"{v:,}" if _whole(v) else v for v in frame[c]] for c in wide})


def _whole(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _past_int64(value) -> bool:
    return _whole(value) and int(value) not in INT64


def thin(n: int, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most max_points evenly spread steps out of n, always with the first and the last."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(int))


def history_frame(losses: Sequence[float], smooth: int = 1, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """One loss curve: columns step (1-based), loss; optionally a trailing rolling mean over `smooth` steps."""
    loss = pd.Series(np.asarray(losses, dtype=float))
    if smooth > 1:
        loss = loss.rolling(smooth, min_periods=1).mean()
    keep = thin(len(loss), max_points)
    return pd.DataFrame({"step": keep + 1, "loss": loss.to_numpy()[keep]})


def schedule_frame(lrs: Sequence[float], max_points: int = MAX_POINTS) -> pd.DataFrame:
    """A learning-rate schedule (attncore.optim.lr_schedule): columns step (1-based), lr."""
    keep = thin(len(lrs), max_points)
    return pd.DataFrame({"step": keep + 1, "lr": np.asarray(lrs, dtype=float)[keep]})


def loss_frame(histories: dict[str, np.ndarray], smooth: int = 1, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Several labelled loss curves: columns label, step, loss (labels keep their order)."""
    parts = [history_frame(h, smooth, max_points).assign(label=label) for label, h in histories.items()]
    if not parts:
        return pd.DataFrame(columns=["label", "step", "loss"])
    return pd.concat(parts, ignore_index=True)[["label", "step", "loss"]]


def seed_loss_frame(records, smooth: int = 1, max_points: int = 300) -> pd.DataFrame:
    """Loss curves of many runs: columns run ('copy, L=6'), seed, step, loss (optionally smoothed).

    Kept server-wide per the runs' configs (a run's history is a pure function of its config, lab.jobs.memo): every
    visitor's Results page draws the same curves; each caller gets its own copy."""
    key = ("seed_loss_frame", tuple(r.config for r in records), smooth, max_points)
    frame = memoised("frames", key, lambda: _seed_loss_frame(records, smooth, max_points), _frame_bytes)
    return frame.copy()


def _frame_bytes(frame: pd.DataFrame) -> int:
    return int(frame.memory_usage(deep=True).sum())


def _seed_loss_frame(records, smooth: int, max_points: int) -> pd.DataFrame:
    parts = []
    for r in records:
        c = r.config
        part = history_frame(r.loss_history, smooth, max_points)
        parts.append(part.assign(run=f"{c.task.name}, L={c.task.length}", seed=c.train.seed))
    if not parts:
        return pd.DataFrame(columns=["run", "seed", "step", "loss"])
    return pd.concat(parts, ignore_index=True)[["run", "seed", "step", "loss"]]


def accuracy_long(table: pd.DataFrame) -> pd.DataFrame:
    """lab.tables.accuracy_table -> columns task, length, metric ('per-token'/'per-sequence'), mean, min."""
    parts = []
    for metric, prefix in (("per-token", "token_accuracy"), ("per-sequence", "sequence_accuracy")):
        part = table[["task", "length", "seeds"]].copy()
        part["metric"] = metric
        part["mean"] = table[f"{prefix}_mean"].astype(float)
        part["min"] = table[f"{prefix}_min"].astype(float)
        parts.append(part)
    if not parts or table.empty:
        return pd.DataFrame(columns=["task", "length", "seeds", "metric", "mean", "min"])
    return pd.concat(parts, ignore_index=True)


def token_name(token: int, sep: bool = True) -> str:
    """A token as shown: 'SEP' for the separator (sep=False: a task without one, whose token 20 is a token)."""
    return "SEP" if sep and token == SEP else str(int(token))


def attention_frame(maps: np.ndarray, tokens: np.ndarray, sep: bool = True) -> pd.DataFrame:
    """maps (n_layers, H, T, T), tokens (T,) -> one row per allowed (query, key) pair of every head.

    Keys after the query are masked by causality and left out, so they show as blank cells.
    """
    n_layers, n_heads, T, _ = maps.shape
    layer, head, query, key = np.indices(maps.shape).reshape(4, -1)
    keep = key <= query
    names = np.array([token_name(t, sep) for t in tokens])
    frame = pd.DataFrame(
        {
            "layer": layer[keep],
            "head": head[keep],
            "query": query[keep],
            "key": key[keep],
            "query_token": names[query[keep]],
            "key_token": names[key[keep]],
            "weight": maps.reshape(-1)[keep].astype(float),
        }
    )
    frame["query_label"] = frame["query"].astype(str) + " · " + frame["query_token"]
    frame["key_label"] = frame["key"].astype(str) + " · " + frame["key_token"]
    return frame


def head_label(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def heads_frame(summary: list[dict], accuracy_zeroed: dict[tuple[int, int], float], base_accuracy: float):
    """attncore.inspect.head_summary rows + each head's per-sequence accuracy when zeroed alone."""
    rows = []
    for s in summary:
        zeroed = accuracy_zeroed.get((s["layer"], s["head"]), np.nan)
        rows.append(
            {
                "head": head_label(s["layer"], s["head"]),
                "layer": s["layer"],
                "most-weighted keys": " ".join(map(str, s["keys"])),
                "offsets": " ".join(f"{o:+d}" for o in s["offsets"]),
                "constant offset": "varies" if s["constant_offset"] is None else f"{s['constant_offset']:+d}",
                "mean max weight": s["mean_max_weight"],
                "per-seq acc. zeroed": zeroed,
                "drop": base_accuracy - zeroed,
            }
        )
    return pd.DataFrame(rows)


def breakdown_frame(evals: dict) -> pd.DataFrame:
    """{label: EvalResult} -> columns variant, symbols ('all distinct'/'some repeated'), accuracy, n."""
    rows = []
    for label, e in evals.items():
        rows.append({"variant": label, "symbols": "all distinct", "accuracy": e.distinct_accuracy, "n": e.n_distinct})
        rows.append({"variant": label, "symbols": "some repeated", "accuracy": e.repeated_accuracy, "n": e.n_repeated})
    return pd.DataFrame(rows, columns=["variant", "symbols", "accuracy", "n"])


def snapshot_frame(snapshots) -> pd.DataFrame:
    """Accuracy over training (attncore.snapshots.Snapshot list): columns step, metric, accuracy."""
    rows = [
        {"step": s.step, "metric": metric, "accuracy": getattr(s, field)}
        for s in snapshots
        for metric, field in (("per-token", "token_accuracy"), ("per-sequence", "sequence_accuracy"))
    ]
    return pd.DataFrame(rows, columns=["step", "metric", "accuracy"])


def length_frame(results: dict[str, list[list]]) -> pd.DataFrame:
    """Accuracy against test length over seeds: {encoding: [LengthResult list of one seed, ...]} -> columns
    encoding, length, metric, mean, min, max, seeds (lengths without a number are left out: a gap)."""
    rows = []
    for encoding, per_seed in results.items():
        for metric, field in (("per-token", "token_accuracy"), ("per-sequence", "sequence_accuracy")):
            values: dict[int, list[float]] = {}
            for seed_results in per_seed:
                for r in seed_results:
                    if getattr(r, field) is not None:
                        values.setdefault(r.length, []).append(getattr(r, field))
            for length, v in values.items():
                rows.append(
                    {"encoding": encoding, "length": length, "metric": metric}
                    | {"mean": float(np.mean(v)), "min": min(v), "max": max(v), "seeds": len(v)}
                )
    return pd.DataFrame(rows, columns=["encoding", "length", "metric", "mean", "min", "max", "seeds"])


def parse_ints(text: str, field: str, max_count: int = 12) -> list[int]:
    """'5 3 0' or '5, 3, 0' -> [5, 3, 0]; ConfigError(field) for anything else (bounds are the library's)."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise ConfigError(field, "type at least one whole number")
    if len(parts) > max_count:
        raise ConfigError(field, f"at most {max_count} numbers, got {len(parts)}")
    if not all(ASCII_INTEGER.fullmatch(p) for p in parts):  # int() would also read '٣' and '1_000'
        raise ConfigError(field, f"whole numbers separated by spaces, got {text!r}")
    return [int(p) for p in parts]


def length_findings(df: pd.DataFrame, trained: tuple[int, int]) -> pd.DataFrame:
    """Per encoding of a length_frame: mean accuracy inside the trained range and beyond it (mean over seeds and
    lengths), the seed spread beyond it (the widest min-max band) and the rank beyond (1 best; no number: last),
    per sequence (inside, beyond, spread, rank) and per token (token_...); sorted by rank, then token_rank."""
    lo, hi = trained
    nan = float("nan")
    rows = []
    for encoding in dict.fromkeys(df["encoding"]):
        row = {"encoding": encoding}
        for metric, prefix in (("per-sequence", ""), ("per-token", "token_")):
            part = df[(df["encoding"] == encoding) & (df["metric"] == metric)]
            inside, beyond = part[part["length"].between(lo, hi)], part[part["length"] > hi]
            row[prefix + "inside"] = float(inside["mean"].mean()) if len(inside) else nan
            row[prefix + "beyond"] = float(beyond["mean"].mean()) if len(beyond) else nan
            row[prefix + "spread"] = float((beyond["max"] - beyond["min"]).max()) if len(beyond) else nan
        rows.append(row)
    columns = ["encoding", "inside", "beyond", "spread", "token_inside", "token_beyond", "token_spread"]
    out = pd.DataFrame(rows, columns=columns)
    out["rank"] = out["beyond"].rank(ascending=False, method="min", na_option="bottom").astype(int)
    out["token_rank"] = out["token_beyond"].rank(ascending=False, method="min", na_option="bottom").astype(int)
    return out.sort_values(["rank", "token_rank", "encoding"]).reset_index(drop=True)


def length_notes(results) -> list[str]:
    """The notes of a run's length results, one line per run of consecutive lengths with the same note:
    ["L′ = 7–12: <note>"], so a long note is read once, in full, instead of in a narrow table column."""
    lines, start = [], None
    for i, r in enumerate(results):
        nxt = results[i + 1] if i + 1 < len(results) else None
        start = r.length if start is None else start
        if nxt is None or nxt.note != r.note or nxt.length != r.length + 1:
            if r.note:
                span = f"{start}" if start == r.length else f"{start}–{r.length}"
                lines.append(f"L′ = {span}: {r.note}")
            start = None
    return lines
