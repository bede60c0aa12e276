"""The Patching and Explanations pages' bridge to attncore.interpret: each result memoised server-wide by its
inputs (ui.metered), else computed under one of the server's slots; sizes capped by ui.limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st

from attncore import RunConfig
from attncore.interpret import explain, heads, lens, patching
from lab import formats
from lab.jobs.slots import BusyError
from lab.limits import Cap, declare
from lab.store import RunRecord
from ui import runs
from ui.limits import limits
from ui.metered import metered

# the Patching and Explanations pages' own caps (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
PATCH_POSITIONS, EXPLAIN_RESTARTS, EXPLAIN_STEPS = declare(
    Cap("max_patch_positions", 24, "Patching: positions patched one at a time (each head, the residual stream, each "
        "MLP)"),
    Cap("max_explain_restarts", 5, "Explanations: restarts of the adversarial attention search (Jain & Wallace's k); "
        f"an operator value above the search's own bound, {explain.MAX_RESTARTS:,}, is clamped to it with a notice"),
    Cap("max_explain_steps", 500, "Explanations: Adam steps of each restart of that search; an operator value above "
        f"the search's own bound, {explain.MAX_STEPS:,}, is clamped to it with a notice"),
)  # fmt: skip


def _key(record: RunRecord, tokens: np.ndarray, *rest) -> tuple:
    return (runs.run_key(record.config), tuple(int(t) for t in tokens), *rest)


def _metered(kind: str, key: tuple, compute, what: str):
    try:
        return metered(kind, key, compute, what)
    except BusyError as e:
        st.warning(str(e), icon=":material/hourglass_top:")
        return None


def patch(record: RunRecord, c: patching.Contrast, direction: str = "denoise") -> patching.PatchResult | None:
    """Fractions restored (denoise) or destroyed (noise) for every component (positions capped by
    max_patch_positions); None when busy."""
    cap = limits().max_patch_positions
    key = _key(record, c.clean, c.position, int(c.corrupted[c.position]), cap, direction)

    def compute():
        return patching.patch(record.params, record.config, c, max_positions=cap, direction=direction)

    return _metered("patch", key, compute, "activation patching")


def logit_lens(record: RunRecord, tokens: np.ndarray) -> dict | None:
    compute = lambda: lens.logit_lens(record.params, record.config, tokens)  # noqa: E731
    return _metered("lens", _key(record, tokens), compute, "the logit lens")


def head_scores(record: RunRecord, tokens: np.ndarray) -> dict | None:
    """{"probe", "test": {pattern: (n_layers, H)}, "steps": (S,), "training": {pattern: (S, n_layers, H)}}."""

    def compute():
        run = record.config
        steps, over = heads.snapshot_scores(record.snapshots, record.probe_tokens, run.task)
        return {
            "probe": heads.probe_scores(record.params, run, tokens),
            "test": heads.test_scores(record.params, run),
            "steps": steps,
            "training": over,
        }

    return _metered("heads", _key(record, tokens), compute, "head detection scores")


def seed_run(run: RunConfig, seed: int) -> RunConfig:
    return dataclasses.replace(run, train=dataclasses.replace(run.train, seed=seed))


def baselines(run: RunConfig, seeds: list[int]) -> tuple[list[RunRecord], list[RunConfig]]:
    """(records of the other seeds' runs that are stored, the runs still missing); the run's own seed is skipped."""
    return runs.cached_many([seed_run(run, s) for s in seeds if s != run.train.seed])


def explanation(record: RunRecord, others: list[RunRecord], tokens, layer, head, query, restarts, steps) -> dict | None:
    """attncore.interpret.explain's result and its one-sentence finding; None when busy."""
    others_key = tuple(r.config.train.seed for r in others)
    key = _key(record, tokens, layer, head, query, restarts, steps, others_key)

    def compute():
        found = explain.explain(
            record.params,
            record.config,
            tokens,
            layer,
            head,
            query,
            others={r.config.train.seed: (r.params, r.config) for r in others},
            restarts=restarts,
            steps=steps,
        )
        return found | {"finding": explain.finding(found, formats.loss)}

    return _metered("explain", key, compute, "the attention search")


def rows_caption(result: dict) -> str:
    """What the rows chart draws: the original row, the farthest alternative when a search stayed within the
    bound, the closest other-seed row when another seed's run is stored."""
    parts = ["the original row"]
    if any(a["feasible"] for a in result["adversarial"]):
        parts.append("the farthest alternative found within the bound")
    else:
        parts.append("no alternative row: no search kept the output within the bound")
    if result["seed_jsd"]:
        parts.append("the closest other-seed row")
    else:
        parts.append("no other seed's row (no other seed's run is stored)")
    text = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return text[0].upper() + text[1:] + "."


def shuffle_table(record: RunRecord, tokens: np.ndarray, query: int) -> pd.DataFrame | None:
    """Per head: the task pattern's score on this input and the median output TVD when its row at `query` is
    shuffled (100 permutations): how readable a map is, beside how much the output depends on it. The first
    max_ablation_heads heads only."""
    run = record.config
    cap = limits().max_ablation_heads  # the Attention page's cap on heads treated one by one

    def compute():
        pattern = heads.task_pattern(run)
        s = heads.probe_scores(record.params, run, tokens)[pattern]
        rows = []
        for n in range(min(cap, run.model.n_layers * run.model.n_heads)):
            layer, h = divmod(n, run.model.n_heads)
            tvd = explain.permutation_tvd(explain.target(record.params, run, tokens, layer, h, query), 100)
            shuffled = float(np.median(tvd))
            rows.append({"head": f"L{layer}H{h}", pattern: float(s[layer, h]), "median TVD shuffled": shuffled})
        return pd.DataFrame(rows)

    return _metered("shuffle", _key(record, tokens, query, cap), compute, "the permutation tests")
