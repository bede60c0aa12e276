"""The Attention sinks experiment (Xiao et al. 2023, arXiv:2309.17453; Guo et al. 2024, arXiv:2410.13835;
docs/sinks.md): the Bigram-Backcopy task trained over seeds; per run the share of attention its bigram queries put on
position 0 over training against a uniform causal head's, and StreamingLLM's test of the final weights (a sliding
window that drops position 0 against the same window keeping it); the three paired over seeds by the comparison rule
of lab.stats, one comparison per cell (no correction across cells, as the Regimes and Induction pages').

Pure functions: configs out, records in, figures, DataFrames, JSON and sentences out (attncore.tasks.bigram_backcopy
measures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attncore.config import RunConfig
from attncore.tasks import bigram_backcopy as bb
from attncore.tasks.bigram_backcopy import BB_RUN, make_backcopy
from lab import compare, stats
from lab.store import RunRecord

DEFAULT_SEEDS = 6  # the fewest with which one comparison can show a difference (floor 2/2^6 < 0.05)
DEFAULT_WINDOW = 8  # W: keys of the sliding window
FLAGS = {"steps": "--steps", "lr": "--lr", "decay": "--decay", "warmup": "--warmup", "length": "--N",
         "bigram_vocab": "--bigram-vocab", "triggers": "--triggers", "n_layers": "--layers", "n_heads": "--heads",
         "position": "--position", "embed_std": "--embed-std"}  # fmt: skip


def runs_of(seeds: Sequence[int], **settings) -> list[RunConfig]:
    """The runs over the seeds at the task's defaults (BB_RUN) with `settings` (make_run arguments) overridden."""
    return [make_backcopy(s, **settings) for s in dict.fromkeys(seeds)]


def check_window(run: RunConfig, window: int) -> None:
    """ConfigError naming the window and its range (1 to N - 3) unless W + 1 keys leave a query without key 0."""
    bb.check_window(run.task, window)


def command(seeds: Sequence[int], window: int, **settings) -> str:
    """The command line that trains and measures the same runs (`python -m attncore sinks ...`); settings at the
    task's defaults are left out."""
    parts = ["python -m attncore sinks", "--seeds", *(str(s) for s in seeds)]
    if window != DEFAULT_WINDOW:
        parts += ["--window", str(window)]
    for key, flag in FLAGS.items():
        if key in settings and settings[key] != BB_RUN.get(key, _schedule_default(key)):
            value = settings[key]
            parts += [flag, value if isinstance(value, str) else f"{value:g}"]
    return " ".join(parts)


def _schedule_default(key: str):
    from attncore.settings import SETTINGS

    return SETTINGS[key].default


@dataclass(frozen=True)
class FinalTest:
    """What the final weights are measured on beyond the stored snapshots: StreamingLLM's window test and Gu et
    al.'s sink importance per head, both on every held-out sequence."""

    window: bb.WindowLosses
    importance: bb.SinkImportance


def final_test(record: RunRecord, window: int) -> FinalTest:
    return FinalTest(bb.window_losses(record.params, record.config, window),
                     bb.sink_importance(record.params, record.config))  # fmt: skip


def _argmax(a: np.ndarray) -> tuple[int, int]:
    layer, head = np.unravel_index(int(np.argmax(a)), a.shape)
    return int(layer), int(head)


def sink_head(record: RunRecord) -> tuple[int, int]:
    """(layer, head) with the largest share of its bigram queries' attention on position 0 at the end."""
    return _argmax(np.asarray(record.snapshots[-1].figures["sink_share"]))


BOTH, SPLIT = "one head sinks and copies", "one head sinks, another copies"


def seed_figures(record: RunRecord, final: FinalTest) -> dict:
    """One run's figures for the JSON and the page. From the end of training's snapshot (the first 100 held-out
    sequences): the sink head (the largest share of the bigram queries' attention on position 0) and its share
    (first_token_attention), the heads' mean share, the copy head (the largest copy attention), the roles, the sink
    head's value norms and its block's residual norms at position 0 and elsewhere; per head (`heads`) its share, Gu
    importance, rate above ε and copy attention. From every held-out sequence: StreamingLLM's test."""
    run, snap, w, gu = record.config, record.snapshots[-1].figures, final.window, final.importance
    share, copy = np.asarray(snap["sink_share"]), np.asarray(snap["copy_attention"])
    (layer, head), copy_head = _argmax(share), _argmax(copy)
    heads = [{"head": f"L{i}H{h}", "share": float(share[i, h]), "gu_importance": float(gu.importance[i, h]),
              "sink_rate": float(gu.rate[i, h]), "copy_attention": float(copy[i, h])}
             for i, h in np.ndindex(share.shape)]  # fmt: skip
    windows = {k: getattr(w, k) for k in ("window", "full_loss", "window_loss", "window_wide_loss", "window_sink_loss",
                                          "window_key1_loss", "window_key2_loss", "bayes_loss")}  # fmt: skip
    return {
        "seed": run.train.seed,
        "first_token_attention": float(share[layer, head]),
        "mean_share": float(share.mean()),
        "uniform_share": bb.uniform_share(run.task),
        "sink_head": [layer, head],
        "gu_importance": float(gu.importance[layer, head]),
        "sink_rate": gu.sink_rate,
        "epsilon": gu.epsilon,
        "sink_heads": int((gu.importance > gu.epsilon).sum()),
        "copy_head": list(copy_head),
        "copy_attention": float(copy[copy_head]),
        "roles": BOTH if copy_head == (layer, head) else SPLIT,
        "heads": heads,
        "value_norm_first": float(np.asarray(snap["value_norm_first"])[layer, head]),
        "value_norm_rest": float(np.asarray(snap["value_norm_rest"])[layer, head]),
        "resid_norm_first": float(np.asarray(snap["resid_norm_first"])[layer]),
        "resid_norm_rest": float(np.asarray(snap["resid_norm_rest"])[layer]),
        **windows,
        "test_loss": record.test_loss,
        "bigram_loss": record.figures["bigram_loss"],
        "copy_loss": record.figures["copy_loss"],
        "bayes_test_loss": bb.bayes_loss(run.task),
        "bayes_bigram_loss": bb.bayes_bigram_loss(run.task),
    }


SHARE, WINDOW = "mean share vs a uniform head", "window of W + 1 vs full attention"
SINK, KEY1, KEY2 = "W + key 0 vs window of W + 1", "W + key 1 vs window of W + 1", "W + key 2 vs window of W + 1"
CELLS = {  # facet: (baseline, variant, what the difference is in); the last three at one cache size, W + 1 keys
    SHARE: ("uniform_share", "mean_share", "share"),
    WINDOW: ("full_loss", "window_wide_loss", "loss"),
    SINK: ("window_wide_loss", "window_sink_loss", "loss"),
    KEY1: ("window_wide_loss", "window_key1_loss", "loss"),
    KEY2: ("window_wide_loss", "window_key2_loss", "loss"),
}


def comparisons(per_seed: Sequence[Mapping]) -> pd.DataFrame:
    """One row per cell: the two figures' means over the seeds and lab.stats.compare_paired's columns of their
    paired differences (variant − baseline): the heads' mean share on position 0 against a uniform causal head's,
    the window of W + 1 keys against full attention, and at that cache size W keys with key 0 (the sink), key 1 or
    key 2 kept against the window of W + 1."""
    rows = []
    for facet, (base, variant, unit) in CELLS.items():
        a = np.array([r[base] for r in per_seed], dtype=float)
        b = np.array([r[variant] for r in per_seed], dtype=float)
        result = stats.compare_paired({facet: b - a})[facet]
        rows.append({"facet": facet, "baseline": base, "variant": variant, "unit": unit,
                     "baseline_mean": float(a.mean()), "variant_mean": float(b.mean())} | result)  # fmt: skip
    return pd.DataFrame(rows)


def mean_of(per_seed: Sequence[Mapping], key: str) -> float:
    values = [r[key] for r in per_seed if r.get(key) is not None]
    return float(np.mean(values)) if values else math.nan


def verdicts(rows: pd.DataFrame) -> dict[str, str]:
    return {r["facet"]: r["verdict"] for _, r in rows.iterrows()}


def _plain(value):
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and value != value:
        return None
    return value.item() if isinstance(value, np.generic) else value


def to_json(per_seed: Sequence[dict], rows: pd.DataFrame, text: str, settings: Mapping) -> dict:
    """The command's --json object: settings (make_run arguments), seeds (per seed_figures), comparisons
    (lab.stats' columns, one per cell), verdicts {cell: verdict}, finding and the comparison rule."""
    records = [{k: _plain(v) for k, v in row.items()} for row in rows.to_dict(orient="records")]
    return {"settings": dict(settings), "seeds": list(per_seed), "comparisons": records, "verdicts": verdicts(rows),
            "finding": text, "method": compare.RULE}  # fmt: skip


# --- frames for the page's charts (ui.charts.sinks) ---------------------------------------------------------


SINK_HEAD, OTHER_HEADS = "sink head", "other heads"


def sink_frame(records: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per seed, snapshot step and head (L0H0, ...): the head's share of its bigram queries' attention on
    position 0 there, and its role (the run's sink head, the one with the largest share at the end, or another)."""
    rows = []
    for record in records:
        seed, sink = record.config.train.seed, sink_head(record)
        for s in record.snapshots:
            share = np.asarray(s.figures["sink_share"])
            rows += [{"seed": seed, "step": s.step, "head": f"L{layer}H{head}", "share": float(share[layer, head]),
                      "role": SINK_HEAD if (layer, head) == sink else OTHER_HEADS}
                     for layer, head in np.ndindex(share.shape)]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "step", "head", "share", "role"])


def norms_frame(records: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per seed, step and quantity (of the sink head: its value norm, and the residual stream entering its
    block; at position 0 and at the others): the mean norm there."""
    rows = []
    for record in records:
        layer, head = sink_head(record)
        for s in record.snapshots:
            f = s.figures
            values = {("value", "position 0"): f["value_norm_first"][layer, head],
                      ("value", "other positions"): f["value_norm_rest"][layer, head],
                      ("residual", "position 0"): f["resid_norm_first"][layer],
                      ("residual", "other positions"): f["resid_norm_rest"][layer]}  # fmt: skip
            rows += [{"seed": record.config.train.seed, "step": s.step, "norm": k[0], "where": k[1], "value": float(v)}
                     for k, v in values.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "step", "norm", "where", "value"])


def conditions(window: int) -> dict[str, str]:
    """{per-seed key: the condition's label} of StreamingLLM's test with a window of W keys."""
    return {"full_loss": "full attention", "window_loss": f"{window} keys", "window_wide_loss": f"{window + 1} keys",
            "window_sink_loss": f"{window} + key 0", "window_key1_loss": f"{window} + key 1",
            "window_key2_loss": f"{window} + key 2"}  # fmt: skip


def window_frame(per_seed: Sequence[Mapping]) -> pd.DataFrame:
    """One row per seed and condition (full attention; a window of W keys, of W + 1; W keys and key 0, 1 or 2): the
    held-out loss over the queries the window of W + 1 leaves without position 0."""
    names = conditions(per_seed[0]["window"])
    rows = [{"seed": r["seed"], "condition": name, "loss": float(r[key])}
            for r in per_seed for key, name in names.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "condition", "loss"])


HEAD_COLUMNS = {"share": "share on position 0", "gu_importance": "Gu importance", "sink_rate": "sequences above ε",
                "copy_attention": "copy attention"}  # fmt: skip


def heads_frame(per_seed: Sequence[Mapping]) -> pd.DataFrame:
    """One row per seed and head: its share of the bigram queries' attention on position 0, Gu et al.'s importance
    and the share of sequences above ε, its copy attention, and its role (sink head, copy head, both or neither)."""
    rows = []
    for r in per_seed:
        sink, copy = "L{}H{}".format(*r["sink_head"]), "L{}H{}".format(*r["copy_head"])
        for h in r["heads"]:
            role = " and ".join(name for name, head in (("sink head", sink), ("copy head", copy)) if head == h["head"])
            rows.append({"seed": r["seed"], "head": h["head"], **{k: h[k] for k in HEAD_COLUMNS}, "role": role or "—"})
    return pd.DataFrame(rows, columns=["seed", "head", *HEAD_COLUMNS, "role"])


def seeds_csv(per_seed: Sequence[dict]) -> str:
    """One row per seed, a column per figure; the heads' figures as columns <head>_<figure>."""
    rows = []
    for r in per_seed:
        flat = {k: (str(v) if isinstance(v, list) else v) for k, v in r.items() if k != "heads"}
        rows.append(flat | {f"{h['head']}_{k}": h[k] for h in r["heads"] for k in HEAD_COLUMNS})
    return pd.DataFrame(rows).to_csv(index=False)
