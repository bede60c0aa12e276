"""The Induction heads experiment (Olsson et al. 2022, docs/induction.md): the induction task trained at several
depths and position encodings over the same seeds, each run's phase change, head scores and causal check (the
induction head, then the previous-token head, zeroed on the held-out set), and the variants compared by the
comparison rule of lab.compare, one cell per pair as the Regimes page's (no correction across cells).

Pure functions: configs out, records in, figures, DataFrames, JSON and sentences out (attncore.tasks.induction
measures).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attncore.config import RunConfig
from attncore.inspect import head_mask_for
from attncore.tasks import induction as figures
from attncore.tasks.induction import INDUCTION_RUN, make_induction
from lab import compare, formats, stats
from lab.store import RunRecord

DEFAULT_LAYERS = (2, 1)  # the first (deepest) is the baseline of every comparison
DEFAULT_POSITIONS = ("rope",)
PAGE_VARIANTS = ((2, "rope"), (1, "rope"), (2, "none"))  # the page: 2 layers against 1, and 2 without positions
DEFAULT_SEEDS = 6  # the fewest with which one comparison can show a difference (floor 2/2^6 < 0.05)
METRICS = ("repeat_loss", "first_loss")
POSITION_NAMES = {"learned": "learned positions", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi",
                  "none": "no positions"}  # fmt: skip
INDUCTION_HEAD, PREVIOUS_HEAD = "induction head", "previous-token head"


@dataclass(frozen=True)
class Variant:
    layers: int
    position: str

    @property
    def label(self) -> str:
        return f"{formats.count(self.layers, 'layer')}, {POSITION_NAMES.get(self.position, self.position)}"


def variants(layers: Sequence[int] = DEFAULT_LAYERS, positions: Sequence[str] = DEFAULT_POSITIONS) -> list[Variant]:
    """Every (layers, position) pair, in the order given (layers first); duplicates dropped."""
    return list(dict.fromkeys(Variant(n, p) for n, p in itertools.product(layers, positions)))


def runs_of(chosen: Sequence[Variant], seeds: Sequence[int], **settings) -> dict[Variant, list[RunConfig]]:
    """{variant: its runs over the seeds} at the induction defaults (attncore.tasks.induction.INDUCTION_RUN) with
    `settings` (make_run arguments: steps, length = T, vocab, k_min, ...) overridden."""
    return {v: [make_induction(s, **settings | {"n_layers": v.layers, "position": v.position}) for s in seeds]
            for v in chosen}  # fmt: skip


FLAGS = {"steps": "--steps", "length": "--T", "vocab": "--V", "k_min": "--k-min", "embed_std": "--embed-std",
         "norm": "--norm"}  # fmt: skip


def command(chosen: Sequence[Variant], seeds: Sequence[int], **settings) -> str:
    """The command line that trains the runs of runs_of(chosen, seeds, **settings) (`python -m attncore induction
    ...`): its --layers and --position are every depth and encoding of `chosen`, so where the variants are not a
    full grid of the two it trains those and the other pairs too. Settings at the induction default are left out."""
    layers = [str(n) for n in dict.fromkeys(v.layers for v in chosen)]
    positions = list(dict.fromkeys(v.position for v in chosen))
    parts = ["python -m attncore induction", "--layers", *layers, "--position", *positions]
    parts += ["--seeds", *(str(s) for s in seeds)]
    for key, flag in FLAGS.items():
        if key in settings and settings[key] != INDUCTION_RUN[key]:
            value = settings[key]
            parts += [flag, value if isinstance(value, str) else f"{value:g}"]
    return " ".join(parts)


def all_runs(by_variant: Mapping[Variant, Sequence[RunConfig]]) -> list[RunConfig]:
    """Every run once, in order: the one sweep that trains the experiment."""
    return list(dict.fromkeys(run for runs in by_variant.values() for run in runs))


def curve(record: RunRecord) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(steps (S,), {repeat_loss, first_loss, icl_score: (S,)}) of a run's snapshots."""
    steps = np.array([s.step for s in record.snapshots])
    return steps, {k: np.array([s.figures[k] for s in record.snapshots]) for k in ("repeat_loss", "first_loss",
                                                                                       "icl_score")}  # fmt: skip


def phase(record: RunRecord) -> figures.PhaseChange:
    """The phase change of the run's held-out repeat loss over its snapshots (attncore.tasks.induction.phase_change)."""
    steps, values = curve(record)
    return figures.phase_change(steps, values["repeat_loss"])


def heads_of(record: RunRecord) -> dict[str, tuple[int, int]]:
    """{INDUCTION_HEAD: (layer, head) with the highest final induction score past the first layer (in it, for one
    layer), PREVIOUS_HEAD: the highest previous-token score in the layers before it (none for one layer)}."""
    final = record.snapshots[-1].figures  # the last snapshot is of the final weights
    scores, n_layers = final["induction_score"], record.config.model.n_layers
    first = 1 if n_layers > 1 else 0
    layer, head = np.unravel_index(int(np.argmax(scores[first:])), scores[first:].shape)
    out = {INDUCTION_HEAD: (int(layer) + first, int(head))}
    if n_layers > 1:
        prev = final["previous_token_score"][: out[INDUCTION_HEAD][0]]
        p_layer, p_head = np.unravel_index(int(np.argmax(prev)), prev.shape)
        out[PREVIOUS_HEAD] = (int(p_layer), int(p_head))
    return out


def ablate(record: RunRecord, head: tuple[int, int]) -> dict:
    """The held-out repeat and first-copy losses (all 500 sequences) with one head's output zeroed."""
    run = record.config
    held = figures.held_out(record.params, run, head_mask=head_mask_for(run, [head]))
    return {"head": [int(head[0]), int(head[1])], "repeat_loss": held.repeat_loss, "first_loss": held.first_loss}


def ablations(record: RunRecord) -> dict[str, dict]:
    """{INDUCTION_HEAD: ablate(...), PREVIOUS_HEAD: ...} of heads_of(record)."""
    return {kind: ablate(record, head) for kind, head in heads_of(record).items()}


def run_figures(record: RunRecord, zeroed: Mapping[str, dict]) -> dict:
    """One run's figures for the CLI's JSON and the page's tables (zeroed: `ablations(record)`)."""
    run, change = record.config, phase(record)
    final = record.snapshots[-1].figures
    steps, values = curve(record)
    before = float(np.interp(change.window_start, steps, values["repeat_loss"]))
    return {
        "layers": run.model.n_layers,
        "position": run.model.position,
        "seed": run.train.seed,
        "phase_step": change.step,
        "largest_drop": change.largest_drop,
        "drop_window_start": change.window_start,
        "drop_before": change.drop_before,
        "drop_earlier": change.drop_earlier,
        "repeat_loss": {
            "start": float(values["repeat_loss"][0]),
            "before_drop": before,
            "final": record.figures["repeat_loss"],
        },  # fmt: skip
        "first_loss_final": record.figures["first_loss"],
        "icl_score_final": record.figures["icl_score"],
        "induction_score": {"final": np.asarray(final["induction_score"]).tolist()},
        "previous_token_score": {"final": np.asarray(final["previous_token_score"]).tolist()},
        "ablation": zeroed[INDUCTION_HEAD],  # the induction head zeroed
        "previous_token_ablation": zeroed.get(PREVIOUS_HEAD),  # the previous-token head zeroed (None: one layer)
    }


def zeroed_heads(figures_of_run: Mapping) -> list[tuple[str, dict]]:
    """[(INDUCTION_HEAD, its ablation), (PREVIOUS_HEAD, ...)] of a run_figures row: the heads zeroed, in order."""
    found = ((INDUCTION_HEAD, figures_of_run["ablation"]), (PREVIOUS_HEAD, figures_of_run["previous_token_ablation"]))
    return [(kind, a) for kind, a in found if a is not None]


def _summary(record: RunRecord, losses: Mapping[str, float]) -> dict:
    """A summary lab.compare pairs by seed: the config and the two losses."""
    return {"config": record.config.to_dict()} | {m: losses[m] for m in METRICS}


@dataclass
class Cell:
    """One comparison: two groups over the same seeds, the first the baseline; `text` names it."""

    text: str
    groups: dict[str, list[dict]]


def cells(by_variant: Mapping[Variant, Sequence[RunRecord]], zeroed: Mapping[RunConfig, Mapping[str, dict]]):
    """The comparisons: the deepest against each shallower depth at every position; the first position against each
    other at the deepest; and on the baseline (the first variant) each head zeroed against the intact model."""
    chosen = list(by_variant)
    final = {v: [_summary(r, r.figures) for r in records] for v, records in by_variant.items()}
    out = []
    deepest = max(v.layers for v in chosen)
    for v in chosen:
        base = Variant(deepest, v.position)
        if v.layers != deepest and base in final:
            text = f"{v.layers} vs {formats.count(deepest, 'layer')}, {POSITION_NAMES.get(v.position, v.position)}"
            out.append(Cell(text, {base.label: final[base], v.label: final[v]}))
    first = Variant(deepest, chosen[0].position)
    for v in chosen:
        if v.layers == deepest and v != first and first in final:
            names = (POSITION_NAMES.get(p, p) for p in (v.position, first.position))
            out.append(Cell(f"{' vs '.join(names)}, {formats.count(deepest, 'layer')}",
                            {first.label: final[first], v.label: final[v]}))  # fmt: skip
    baseline = chosen[0]
    for kind in (INDUCTION_HEAD, PREVIOUS_HEAD):
        records = by_variant[baseline]
        if all(kind in zeroed[r.config] for r in records):
            label = f"{kind} zeroed"
            ablated = [_summary(r, zeroed[r.config][kind]) for r in records]
            out.append(Cell(f"{label} vs intact, {baseline.label}", {f"{baseline.label}, intact": final[baseline],
                                                                       label: ablated}))  # fmt: skip
    return out


def comparisons(found: Sequence[Cell]) -> pd.DataFrame:
    """One row per cell and metric: `facet` (the cell in words), each group's mean, and lab.compare's columns."""
    rows = []
    for cell in found:
        for _, c in compare.paired_differences(cell.groups, metrics=METRICS).iterrows():
            a, b = cell.groups.values()
            means = {"baseline_mean": _mean(a, c["metric"]), "variant_mean": _mean(b, c["metric"])}
            rows.append({"facet": cell.text} | means | c.to_dict())
    return pd.DataFrame(rows)


def _mean(summaries: Sequence[dict], metric: str) -> float:
    values = [s[metric] for s in summaries if s.get(metric) is not None]
    return float(np.mean(values)) if values else math.nan


def phase_table(per_run: Sequence[dict]) -> pd.DataFrame:
    """Per variant: seeds, seeds with a phase change, its step's mean, min and max over those, the largest drop's
    mean, and the final repeat and first-copy losses' means."""
    frame = pd.DataFrame(per_run)
    rows = []
    for (layers, position), part in frame.groupby(["layers", "position"], sort=False):
        steps = [s for s in part["phase_step"] if s is not None and s == s]
        rows.append({
            "variant": Variant(int(layers), position).label,
            "seeds": len(part),
            "changed": len(steps),
            "step_mean": float(np.mean(steps)) if steps else math.nan,
            "step_min": float(min(steps)) if steps else math.nan,
            "step_max": float(max(steps)) if steps else math.nan,
            "largest_drop": float(part["largest_drop"].mean()),
            "repeat_final": float(np.mean([r["final"] for r in part["repeat_loss"]])),
            "first_final": float(part["first_loss_final"].mean()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def icl_means(per_run: Sequence[dict]) -> list[float]:
    """Per variant, in phase_table's order: the mean over its seeds of the final in-context score (Olsson et al.'s:
    the loss at a late token minus at an early one, on the probe set; below 0 the context helps)."""
    frame = pd.DataFrame(per_run)
    return [float(part["icl_score_final"].mean()) for _, part in frame.groupby(["layers", "position"], sort=False)]


def _steps_text(row) -> str:
    if not row["changed"]:
        return f"no phase change on any of its {formats.count(int(row['seeds']), 'seed')}"
    if row["changed"] == 1:
        where = f"at step {row['step_mean']:,.0f}"
    else:
        where = f"at step {row['step_mean']:,.0f} on average (range {row['step_min']:,.0f}–{row['step_max']:,.0f})"
    return f"a phase change on {int(row['changed'])} of {formats.count(int(row['seeds']), 'seed')}, {where}"


def finding(table: pd.DataFrame, rows: pd.DataFrame, vocab: int = INDUCTION_RUN["vocab"]) -> str:
    """A paragraph from the numbers: each variant's phase change and final losses, then every comparison of the
    repeat loss that shows a difference and the causal checks' effect on both losses."""
    parts = []
    for _, r in table.iterrows():
        parts.append(f"{r['variant']}: {_steps_text(r)}; the repeat loss ends at {formats.loss(r['repeat_final'])} "
                     f"nats, the first copy at {formats.loss(r['first_final'])}")  # fmt: skip
    text = "; ".join(parts) + f" (ln {vocab} = {formats.loss(math.log(vocab))})."
    if rows.empty:
        return text
    said = []
    for _, c in rows[rows["metric"] == "repeat_loss"].iterrows():
        first = rows[(rows["facet"] == c["facet"]) & (rows["metric"] == "first_loss")].iloc[0]
        said.append(
            f"{c['facet']}: repeat loss Δ {stats.format_delta(c['delta_mean'])} ({c['verdict']}), first-copy loss "
            f"Δ {stats.format_delta(first['delta_mean'])} ({first['verdict']})"
        )
    return text + " Paired by seed: " + "; ".join(said) + "."


def to_json(per_run: Sequence[dict], rows: pd.DataFrame, table: pd.DataFrame, text: str) -> dict:
    """The CLI's --json object: runs, comparisons (lab.compare's columns and each group's mean), variants (the
    phase table), finding and the comparison rule."""

    def plain(value):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return None if isinstance(value, float) and value != value else value

    records = [{k: plain(v) for k, v in row.items()} for row in rows.to_dict(orient="records")]
    variants_out = [{k: plain(v) for k, v in row.items()} for row in table.to_dict(orient="records")]
    return {"runs": list(per_run), "comparisons": records, "variants": variants_out, "finding": text,
            "method": compare.RULE}  # fmt: skip


# --- frames for the page's charts (ui.charts.induction) ---------------------------------------------------

LOSS_NAMES = {"repeat_loss": "repeat", "first_loss": "first copy"}


def curves_frame(by_variant: Mapping[Variant, Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per variant, seed, snapshot step and loss (repeat, first copy): the held-out loss there."""
    rows = []
    for v, records in by_variant.items():
        for record in records:
            steps, values = curve(record)
            for key, name in LOSS_NAMES.items():
                rows += [{"variant": v.label, "seed": record.config.train.seed, "step": int(s), "loss": name,
                          "value": float(x)} for s, x in zip(steps, values[key], strict=True)]  # fmt: skip
    return pd.DataFrame(rows, columns=["variant", "seed", "step", "loss", "value"])


def phases_frame(per_run: Sequence[dict]) -> pd.DataFrame:
    """One row per run with a phase change: its variant, seed and step."""
    rows = [{"variant": Variant(r["layers"], r["position"]).label, "seed": r["seed"], "step": r["phase_step"]}
            for r in per_run if r["phase_step"] is not None]  # fmt: skip
    return pd.DataFrame(rows, columns=["variant", "seed", "step"])


def head_scores_frame(record: RunRecord) -> pd.DataFrame:
    """One row per snapshot step, head (L0H0, ...) and pattern: the head's score on the probe set there."""
    rows = []
    names = {"induction_score": "induction", "previous_token_score": "previous token"}
    for s in record.snapshots:
        for key, name in names.items():
            scores = np.asarray(s.figures[key])
            rows += [{"step": s.step, "head": f"L{layer}H{head}", "pattern": name, "score": float(scores[layer, head])}
                     for layer, head in np.ndindex(scores.shape)]  # fmt: skip
    return pd.DataFrame(rows, columns=["step", "head", "pattern", "score"])


def snapshot_near(record: RunRecord, step: float):
    """The snapshot whose step is nearest `step`."""
    return min(record.snapshots, key=lambda s: abs(s.step - step))


def ablation_frame(per_run: Sequence[dict], variant: Variant) -> pd.DataFrame:
    """One row per seed of `variant`, condition (intact, each head zeroed) and loss: the held-out loss."""
    rows = []
    for r in per_run:
        if (r["layers"], r["position"]) != (variant.layers, variant.position):
            continue
        conditions = {"intact": {"repeat_loss": r["repeat_loss"]["final"], "first_loss": r["first_loss_final"]}}
        conditions |= {f"{kind} zeroed": z for kind, z in zeroed_heads(r)}
        for condition, losses in conditions.items():
            rows += [{"seed": r["seed"], "condition": condition, "loss": name, "value": float(losses[key])}
                     for key, name in LOSS_NAMES.items()]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "condition", "loss", "value"])


def maps_frame(record: RunRecord, heads: Mapping[str, tuple[int, int]], steps: Mapping[str, float]) -> pd.DataFrame:
    """Rows panel, query, key, weight (causal pairs): each head's probe attention at the snapshot nearest each
    step, e.g. heads {"induction head": (1, 0)}, steps {"before": 800, "after": 2000}; panels in that order."""
    rows = []
    for kind, (layer, head) in heads.items():
        for when, step in steps.items():
            snap = snapshot_near(record, step)
            a = np.asarray(snap.probe_attention[layer, head], dtype=np.float64)
            q, k = np.tril_indices(a.shape[0])
            panel = f"{kind} L{layer}H{head} · step {snap.step:,} ({when})"
            rows.append(pd.DataFrame({"panel": panel, "query": q, "key": k, "weight": a[q, k]}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["panel", "query", "key", "weight"])


def runs_csv(per_run: Sequence[dict]) -> str:
    """The per-run figures as CSV: one row per run, nested figures flattened (repeat_loss.final, ...; the head
    scores and ablations as JSON text)."""
    rows = []
    for r in per_run:
        row = {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
        row |= {f"repeat_loss.{k}": v for k, v in r["repeat_loss"].items()}
        row |= {k: json.dumps(r[k]["final"]) for k in ("induction_score", "previous_token_score")}
        row |= {k: json.dumps(r[k]) for k in ("ablation", "previous_token_ablation")}
        rows.append(row)
    return pd.DataFrame(rows).to_csv(index=False)
