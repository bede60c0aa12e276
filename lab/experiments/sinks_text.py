"""The Attention sinks experiment's sentences (docs/sinks.md): each computed from sinks's per-seed figures and
comparisons, never typed: the headline, the sink head and the roles, StreamingLLM's window test sized in nats and
perplexity with its controls, and the value and residual norms at the sink."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from lab import formats, stats
from lab.experiments.sinks import BOTH, KEY1, KEY2, SHARE, SINK, WINDOW, mean_of


def _said(row) -> str:
    interval = stats.format_interval(row["ci_low"], row["ci_high"])
    return f"Δ {stats.format_delta(row['delta_mean'])}, 95 % interval {interval}, {row['verdict']}"


def _nats(row) -> str:
    """A loss difference sized: its nats and the perplexity factor exp(Δ)."""
    return f"{stats.format_delta(row['delta_mean'])} nats, a perplexity factor of {math.exp(row['delta_mean']):.3f}"


def _span(values: Sequence[float], shown=formats.share) -> str:
    low, high = shown(min(values)), shown(max(values))
    return low if low == high else f"{low} to {high}" if high[0] in "<>" or low[0] in "<>" else f"{low}–{high}"


def sink_sentence(per_seed: Sequence[Mapping]) -> str:
    """The sink head by Gu et al.'s measure and the roles, counted over the seeds."""
    n, eps = len(per_seed), per_seed[0]["epsilon"]
    sinking = sum(r["sink_heads"] > 0 for r in per_seed)
    most = sum(r["first_token_attention"] > 0.5 for r in per_seed)
    both = sum(r["roles"] == BOTH for r in per_seed)
    heads = len(per_seed[0]["heads"])
    copying = _span([r["copy_attention"] for r in per_seed])
    if heads == 1:
        roles = f"the one head copies at the triggers (copy attention {copying})" + (
            " and parks on position 0 elsewhere: Guo et al.'s active-dormant head, one head in both roles"
            if sinking == n
            else f", and is a sink head on {sinking} of {n} seeds"
        )
    else:
        roles = (
            f"the sink head is also the copy head (one head in both roles, Guo et al.'s active-dormant head) "
            f"on {both} of {n} seeds, and another head copies on {n - both}"
        )
    return (
        f"The sink head (the largest share) puts {_span([r['first_token_attention'] for r in per_seed])} of its "
        f"bigram queries' attention on position 0 (more than half on {most} of {n} seeds); by Gu et al.'s measure "
        f"(mean attention on key 0 over every query; a sink head above ε = {eps:g}) it scores "
        f"{_span([r['gu_importance'] for r in per_seed], _two)}, and {sinking} of {n} seeds have a sink head. "
        f"On these runs {roles}."
    )


def _two(x: float) -> str:
    return f"{x:.2f}"


def window_sentence(per_seed: Sequence[Mapping], rows: pd.DataFrame) -> str:
    """StreamingLLM's test sized in nats and perplexity, at one cache size, with the controls; then how the window's
    cost goes with the sink's strength over the seeds."""
    by = {r["facet"]: r for _, r in rows.iterrows()}
    w = per_seed[0]["window"]
    bayes = mean_of(per_seed, "bayes_loss")
    cost = [r["window_wide_loss"] - r["full_loss"] for r in per_seed]
    order = sorted(per_seed, key=lambda r: r["gu_importance"])
    weakest, strongest = order[0], order[-1]
    return (
        f"On the queries whose window of {w + 1} keys no longer holds position 0, full attention scores "
        f"{formats.loss(by[WINDOW]['baseline_mean'])} nats (the best possible: {formats.loss(bayes)}); the window of "
        f"{w + 1} keys costs {_nats(by[WINDOW])} ({_said(by[WINDOW])}; {w} keys: "
        f"{formats.loss(mean_of(per_seed, 'window_loss'))}). At the same cache of {w + 1} keys, {w} keys and key 0 "
        f"change it by {_nats(by[SINK])} ({_said(by[SINK])}); keeping key 1 instead, {_nats(by[KEY1])} "
        f"({_said(by[KEY1])}); key 2, {_nats(by[KEY2])} ({_said(by[KEY2])}). The window's cost varies from seed to "
        f"seed ({_span(cost, formats.loss)} nats): {formats.loss(weakest['window_wide_loss'] - weakest['full_loss'])} "
        f"on seed {weakest['seed']}, whose sink is the weakest (Gu importance {weakest['gu_importance']:.2f}), "
        f"{formats.loss(strongest['window_wide_loss'] - strongest['full_loss'])} on seed {strongest['seed']}, the "
        f"strongest ({strongest['gu_importance']:.2f})."
    )


def norms_sentence(per_seed: Sequence[Mapping]) -> str:
    """Whether the runs show Guo et al.'s small value and large residual norm at the sink, counted over the seeds."""
    n = len(per_seed)
    value = [r["value_norm_first"] / r["value_norm_rest"] for r in per_seed]
    resid = [r["resid_norm_first"] / r["resid_norm_rest"] for r in per_seed]
    small, large = sum(v < 1 for v in value), sum(x > 1 for x in resid)
    return (
        f"The sink head's value at position 0 is smaller than at the other positions on {small} of {n} seeds (the "
        f"ratio {_span(value, _two)}){': the value-state drain' if small == n else ''}; the residual stream entering "
        f"its block is larger at position 0 on {large} of {n} (the ratio {_span(resid, _two)})"
        f"{', far from the peaks Guo et al. report' if max(resid) < 2 else ''}."
    )


def headline(per_seed: Sequence[Mapping], rows: pd.DataFrame) -> str:
    """The heads' mean share against the uniform share with its verdict, and the held-out losses."""
    n = formats.count(len(per_seed), "seed")
    share = rows.set_index("facet").loc[SHARE]
    return (
        f"Over {n}, the heads put {formats.share(share['variant_mean'])} of their bigram queries' attention on "
        f"position 0 at the end of training (mean over heads), where a uniform causal head would put "
        f"{formats.share(share['baseline_mean'])} ({_said(share)}). Over every position the held-out loss is "
        f"{formats.loss(mean_of(per_seed, 'test_loss'))} nats against the Bayes loss "
        f"{formats.loss(mean_of(per_seed, 'bayes_test_loss'))}: {formats.loss(mean_of(per_seed, 'bigram_loss'))} "
        "against "
        f"{formats.loss(mean_of(per_seed, 'bayes_bigram_loss'))} at the bigram queries, "
        f"{formats.loss(mean_of(per_seed, 'copy_loss'))} against 0 at the copy queries."
    )


def finding(per_seed: Sequence[Mapping], rows: pd.DataFrame) -> str:
    """A paragraph from the numbers: the headline, the sink head and the roles, the window test sized, the norms."""
    parts = (headline(per_seed, rows), sink_sentence(per_seed), window_sentence(per_seed, rows),
             norms_sentence(per_seed))  # fmt: skip
    return " ".join(parts)
