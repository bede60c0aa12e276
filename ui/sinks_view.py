"""The Attention sinks page's parts: its controls (URL-bound, within the hosted caps), StreamingLLM's window test
metered as page work, the verdicts' table and the sources it is read against. The experiment itself is sinks's.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attncore.settings import learning_rate
from attncore.tasks.bigram_backcopy import BB_RUN
from lab import compare, formats, stats
from lab.experiments import sinks, sinks_text
from lab.jobs.limits import Limits
from lab.jobs.slots import BusyError
from ui import metered, runs, tables
from ui.params import url_number, url_select
from ui.plain import plain

LRS = (1e-3, 3e-3, 1e-2, 3e-2)
EMBED_STDS = {1.0: "1", 0.1: "0.1"}
HEADS = (1, 2)
DECAYS = {"none": "constant", "cosine": "cosine to 0 (100 warm-up steps)"}
SOURCES = "Xiao et al. 2023 (StreamingLLM), Guo et al. 2024 (Bigram-Backcopy) and Gu et al. 2024 (the sink head's ε)."


def controls(lim: Limits) -> dict:
    """sinks.runs_of settings and the window from the page's widgets (URL keys sk_*), within the hosted caps."""
    c1, c2, c3, c4, c5, c6 = st.columns([1, 1, 1.2, 1.4, 0.8, 1])
    with c1:
        options = [s for s in (100, 500, 1000, 2000, 3000) if s <= lim.max_steps] or [lim.max_steps]
        steps = url_select("Steps per run", "sk_steps", options, min(BB_RUN["steps"], options[-1]), format_func=str)
    with c2:
        lr = url_select("Learning rate", "sk_lr", list(LRS), BB_RUN["lr"], format_func=learning_rate)
    with c3:
        decay = url_select("Schedule", "sk_decay", list(DECAYS), "none", format_func=DECAYS.get,
                           help="Constant, or 100 warm-up steps and a cosine decay to 0 at the last step.")  # fmt: skip
    with c4:
        embed = url_select("Embedding std at init", "sk_emb", list(EMBED_STDS), BB_RUN["embed_std"],
                           format_func=EMBED_STDS.get, help="The token and position embeddings' initial std: "
                           "the setting that decides whether a sink forms at this size. 1 is PyTorch "
                           "nn.Embedding's default, 0.1 the lab's article model's.")  # fmt: skip
    with c5:
        heads = url_select("Heads", "sk_heads", list(HEADS), BB_RUN["n_heads"], format_func=str)
    with c6:
        window = url_number("Window W (keys)", "sk_win", sinks.DEFAULT_WINDOW, 1, BB_RUN["length"] - 3,
                            help=f"The sliding window's keys, 1 to N − 3 = {BB_RUN['length'] - 3}: the test "
                            "compares caches of W + 1 keys.")  # fmt: skip
    schedule = {"decay": decay, "warmup": 100 if decay != "none" else 0}
    return {"steps": steps, "lr": lr, "embed_std": embed, "n_heads": heads} | schedule, window


def final_tests(wanted, by_run: dict, window: int) -> dict | None:
    """{run: sinks.FinalTest} of the final weights (the window test, Gu et al.'s importance), metered as page
    work (server-wide memo, else a slot); None with a message when the server is busy."""
    out = {}
    try:
        for run in wanted:
            record = by_run[run]
            key = (runs.run_key(run), window)
            out[run] = metered.metered("sinks-final", key, lambda r=record: sinks.final_test(r, window),
                                       "the window test")  # fmt: skip
    except BusyError as e:
        st.warning(str(e), icon=":material/hourglass_top:")
        return None
    return out


def finding(per_seed, rows: pd.DataFrame) -> None:
    headline = plain(sinks_text.headline(per_seed, rows))
    st.markdown(f"**What the lab found.** {headline} The sink head, the window test and the norms are measured under "
                "their charts below.")  # fmt: skip


def verdict_table(rows: pd.DataFrame) -> None:
    """Per comparison: the two means, the paired mean difference, its interval, p and the verdict."""
    digits = {"share": formats.share, "loss": formats.loss}
    shown = pd.DataFrame({
        "comparison": rows["facet"],
        "baseline": [digits[u](x) for u, x in zip(rows["unit"], rows["baseline_mean"], strict=True)],
        "variant": [digits[u](x) for u, x in zip(rows["unit"], rows["variant_mean"], strict=True)],
        "Δ (variant − baseline)": [stats.format_delta(x) for x in rows["delta_mean"]],
        "95 % interval": [stats.format_interval(a, b) for a, b in zip(rows["ci_low"], rows["ci_high"], strict=True)],
        "p": [stats.format_p(p) for p in rows["p_value"]],
        "verdict": rows["verdict"],
    })  # fmt: skip
    tables.show(shown)
    st.caption(f"Each row its own comparison, paired by seed. {compare.RULE}")


def heads_table(per_seed) -> None:
    """Per seed and head: the share on position 0, Gu et al.'s importance and rate, the copy attention, the role."""
    frame = sinks.heads_frame(per_seed)
    shown = frame.assign(**{k: [formats.share(x) for x in frame[k]] for k in ("share", "sink_rate", "copy_attention")},
                         gu_importance=[f"{x:.2f}" for x in frame["gu_importance"]])  # fmt: skip
    tables.show(shown.rename(columns=sinks.HEAD_COLUMNS))
