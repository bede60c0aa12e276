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

import numpy as np
import pandas as pd

from attncore.config import RunConfig
from attncore.tasks import bigram_backcopy as bb
from attncore.tasks.bigram_backcopy import BB_RUN, make_backcopy
from lab import compare, formats, stats
from lab.store import RunRecord

DEFAULT_SEEDS = 6  # the fewest with which one comparison can show a difference (floor 2/2^6 < 0.05)
DEFAULT_WINDOW = 8  # W: keys of the sliding window
SHARE, WINDOW, SINK = "sink share vs a uniform head", "window vs full attention", "window + sink vs window"
FLAGS = {"steps": "--steps", "lr": "--lr", "decay": "--decay", "warmup": "--warmup", "length": "--N",
         "bigram_vocab": "--bigram-vocab", "triggers": "--triggers", "n_layers": "--layers", "n_heads": "--heads",
         "position": "--position"}  # fmt: skip


def runs_of(seeds: Sequence[int], **settings) -> list[RunConfig]:
    """The runs over the seeds at the task's defaults (BB_RUN) with `settings` (make_run arguments) overridden."""
    return [make_backcopy(s, **settings) for s in dict.fromkeys(seeds)]


def check_window(run: RunConfig, window: int) -> None:
    """ConfigError naming the window and its range (1 to N - 2) unless W leaves a query without position 0."""
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


def sink_head(record: RunRecord) -> tuple[int, int]:
    """(layer, head) with the largest share of its bigram queries' attention on position 0 at the end."""
    share = np.asarray(record.snapshots[-1].figures["sink_share"])
    layer, head = np.unravel_index(int(np.argmax(share)), share.shape)
    return int(layer), int(head)


def seed_figures(record: RunRecord, windowed: bb.WindowLosses) -> dict:
    """One run's figures for the JSON and the page: the end of training's sink figures (the last snapshot, the
    first 100 held-out sequences; first_token_attention the mean over every head, beside each head's and the sink
    head's, its value and residual norms at position 0 and elsewhere) and StreamingLLM's test on all of them."""
    run, final = record.config, record.snapshots[-1].figures
    layer, head = sink_head(record)
    share = np.asarray(final["sink_share"])
    return {
        "seed": run.train.seed,
        "first_token_attention": float(share.mean()),
        "first_token_attention_by_head": share.tolist(),
        "uniform_share": bb.uniform_share(run.task),
        "sink_head": [layer, head],
        "sink_head_share": float(share[layer, head]),
        "copy_attention": float(np.max(final["copy_attention"])),
        "value_norm_first": float(np.asarray(final["value_norm_first"])[layer, head]),
        "value_norm_rest": float(np.asarray(final["value_norm_rest"])[layer, head]),
        "resid_norm_first": float(np.asarray(final["resid_norm_first"])[layer]),
        "resid_norm_rest": float(np.asarray(final["resid_norm_rest"])[layer]),
        "window": windowed.window,
        "full_loss": windowed.full_loss,
        "window_loss": windowed.window_loss,
        "window_sink_loss": windowed.window_sink_loss,
        "bayes_loss": windowed.bayes_loss,
        "test_loss": record.test_loss,
        "bigram_loss": record.figures["bigram_loss"],
        "copy_loss": record.figures["copy_loss"],
        "bayes_test_loss": bb.bayes_loss(run.task),
        "bayes_bigram_loss": bb.bayes_bigram_loss(run.task),
    }


CELLS = {  # facet: (baseline, variant, what the difference is in)
    SHARE: ("uniform_share", "first_token_attention", "share"),
    WINDOW: ("full_loss", "window_loss", "loss"),
    SINK: ("window_loss", "window_sink_loss", "loss"),
}


def comparisons(per_seed: Sequence[Mapping]) -> pd.DataFrame:
    """One row per cell: the two figures' means over the seeds and lab.stats.compare_paired's columns of their
    paired differences (variant − baseline): the heads' mean share on position 0 against a uniform causal head's,
    the window's loss against full attention's, the window with the sink against the window alone."""
    rows = []
    for facet, (base, variant, unit) in CELLS.items():
        a = np.array([r[base] for r in per_seed], dtype=float)
        b = np.array([r[variant] for r in per_seed], dtype=float)
        result = stats.compare_paired({facet: b - a})[facet]
        rows.append({"facet": facet, "baseline": base, "variant": variant, "unit": unit,
                     "baseline_mean": float(a.mean()), "variant_mean": float(b.mean())} | result)  # fmt: skip
    return pd.DataFrame(rows)


def _said(row) -> str:
    interval = stats.format_interval(row["ci_low"], row["ci_high"])
    return f"Δ {stats.format_delta(row['delta_mean'])}, 95 % interval {interval}, {row['verdict']}"


def finding(per_seed: Sequence[Mapping], rows: pd.DataFrame) -> str:
    """A paragraph from the numbers: the sink share against the uniform share, then the window's losses, each with
    its paired verdict."""
    n = formats.count(len(per_seed), "seed")
    by = {r["facet"]: r for _, r in rows.iterrows()}
    share, window, sink = by[SHARE], by[WINDOW], by[SINK]
    w = per_seed[0]["window"]
    bayes = float(np.mean([r["bayes_loss"] for r in per_seed]))
    return (
        f"Over {n}, the heads put {formats.share(share['variant_mean'])} of their bigram queries' attention on "
        f"position 0 at the end of training (mean over heads), where a uniform causal head would put "
        f"{formats.share(share['baseline_mean'])} ({_said(share)}). On the queries whose window of {w} keys no "
        "longer holds position 0, full attention "
        f"scores {formats.loss(window['baseline_mean'])} nats (the best possible: {formats.loss(bayes)}); the window "
        f"without position 0 {formats.loss(window['variant_mean'])} ({_said(window)}); the same window keeping "
        f"position 0 as a sink {formats.loss(sink['variant_mean'])} ({_said(sink)}). Over every position the "
        f"held-out loss is {formats.loss(_mean(per_seed, 'test_loss'))} nats against the Bayes loss "
        f"{formats.loss(_mean(per_seed, 'bayes_test_loss'))}: {formats.loss(_mean(per_seed, 'bigram_loss'))} against "
        f"{formats.loss(_mean(per_seed, 'bayes_bigram_loss'))} at the bigram queries, "
        f"{formats.loss(_mean(per_seed, 'copy_loss'))} against 0 at the copy queries."
    )


def _mean(per_seed: Sequence[Mapping], key: str) -> float:
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


CONDITIONS = {"full_loss": "full attention", "window_loss": "window", "window_sink_loss": "window + sink"}


def window_frame(per_seed: Sequence[Mapping]) -> pd.DataFrame:
    """One row per seed and condition (full attention, window, window + sink): the held-out loss over the queries
    the window leaves without position 0."""
    rows = [{"seed": r["seed"], "condition": name, "loss": float(r[key])}
            for r in per_seed for key, name in CONDITIONS.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "condition", "loss"])


def seeds_csv(per_seed: Sequence[dict]) -> str:
    rows = [{k: (str(v) if isinstance(v, list) else v) for k, v in r.items()} for r in per_seed]
    return pd.DataFrame(rows).to_csv(index=False)
