"""The engine fit's deployment section: pipeline stages (serving.pipeline), the grid of TP x PP with a verdict per
cell and the chosen cell highlighted (serving.plan), and the decode-throughput bound (serving.throughput). The
chosen tp (kv_e_tp) and pp (kv_e_pp) are in the page's link, which reopens the same cell."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attncore import ConfigError
from lab.jobs.slots import BusyError
from serving import plan, throughput
from serving.kvcache import GIB
from serving.pipeline import pipeline_fit
from serving.presets import CARDS
from ui import plain
from ui.metered import metered
from ui.params import show_invalid, url_number

MAX_GPUS = 8  # the grid's GPUs in all


def caption(text: str) -> None:
    st.caption(plain.plain(text))


def short(c: plan.Cell) -> str:
    """A cell's verdict in a few words: 'fits 3.81×' or 'no: weights', 'no: KV', 'no: TP ∤ heads'."""
    if c.fits:
        return f"fits {c.fit.concurrency:.2f}×"
    head = c.reason.split(":")[0].split(" must")[0]
    return "no: " + {"KV for the context": "KV", "TP and the": "KV heads"}.get(head, head)[:24]


def grid_frame(cells) -> pd.DataFrame:
    """Rows TP, columns PP: each cell's short verdict ('' where tp x pp exceeds the grid's GPUs)."""
    tps = sorted({c.tp for c in cells})
    pps = sorted({c.pp for c in cells})
    frame = pd.DataFrame("", index=[f"TP {t}" for t in tps], columns=[f"PP {p}" for p in pps])
    for c in cells:
        frame.loc[f"TP {c.tp}", f"PP {c.pp}"] = short(c)
    return frame


def highlight(frame: pd.DataFrame, tp: int, pp: int):
    """The frame styled: fits green, not red, the chosen cell outlined in bold."""

    def style(value, row, col):
        css = "color: #1a7f37" if value.startswith("fits") else "color: #b42318" if value else ""
        if (row, col) == (f"TP {tp}", f"PP {pp}"):
            css += "; font-weight: bold; background-color: #fff3bf; border: 2px solid #333"
        return css

    return frame.style.apply(lambda col: [style(v, r, col.name) for r, v in col.items()], axis=0)


def stage_frame(f) -> pd.DataFrame:
    rows = []
    for s in f.stages:
        kinds = ", ".join(f"{n} {k}" for k, n in s.kinds.items())
        holds = "+".join(x for x, on in (("embeddings", s.embeddings), ("head", s.head)) if on) or "-"
        rows.append({"stage": s.index, "layers": f"{s.start}-{s.end - 1}", "kinds": kinds, "holds": holds,
                     "weights GiB/GPU": round(s.fit.weights_bytes / GIB, 2),
                     "KV GiB/GPU": round(s.fit.kv_bytes / GIB, 2), "blocks": s.fit.num_blocks})  # fmt: skip
    return pd.DataFrame(rows)


def section(arch, total, settings, weights, model_dtype, card, limit, context: int, batch: int) -> None:
    """Draw pipeline stages, the TP x PP grid and the decode bound for the engine fit's settings."""
    st.markdown("**Pipeline stages and the GPU grid**")
    pp = url_number("pipeline_parallel_size", "kv_e_pp", 1, 1, min(arch.n_layers, 64),
                    help="stages of layers, vLLM's split (get_pp_indices); each stage a worker of tp GPUs")  # fmt: skip
    tp = settings.tensor_parallel_size
    try:
        key = (arch, total, settings, weights, model_dtype, card, limit, pp)
        fit = metered("pipeline_fit", key, lambda: pipeline_fit(arch, total, settings, pp=pp, weights=weights,
                      model_dtype=model_dtype, gpu=card, limit=limit), "this fit")  # fmt: skip
        cells = metered("plan_grid", key[:-1], lambda: plan.plan_grid(arch, total, settings, weights=weights,
                        model_dtype=model_dtype, gpu=card, limit=limit, max_gpus=MAX_GPUS), "this grid")  # fmt: skip
    except ConfigError as e:
        show_invalid(e, "pipeline setting")
        return
    except BusyError as e:
        st.warning(str(e))
        return
    if pp > 1:
        st.dataframe(stage_frame(fit), hide_index=True)
        caption(f"The fit above is one worker holding every layer; over {pp} stages of tp {tp}: every worker "
                f"keeps the fewest blocks, stage {fit.bottleneck}'s: {fit.num_blocks:,} blocks, "
                      f"{fit.tokens:,} tokens, {fit.concurrency:.2f}× ({fit.kind}). The embeddings sit on the first "
                      "stage, the final norm, head and sampler on the last.")  # fmt: skip
        if not fit.starts:
            plain.error("The engine would not start:", fit.error)
    st.dataframe(highlight(grid_frame(cells), tp, pp))
    chosen = next((c for c in cells if (c.tp, c.pp) == (tp, pp)), None)
    said = f"TP {tp} × PP {pp}: {chosen.reason}" if chosen else f"TP {tp} × PP {pp} is outside this grid"
    caption(
        f"{card or 'this GPU'}, max_model_len {settings.max_model_len:,}, TP × PP up to {MAX_GPUS} GPUs. "
        f"Highlighted, the chosen cell: {said}. The page's link keeps tp and pp, so it reopens this cell."
    )
    bound_line(arch, card, settings, weights, model_dtype, pp, context, batch)


def bound_line(arch, card, settings, weights, model_dtype, pp, context, batch) -> None:
    if card is None or not CARDS[card].bandwidth_gbs:
        caption("Decode bound: choose a named card for its datasheet bandwidth.")
        return
    eff = url_number("Measured efficiency (0: none)", "kv_e_eff", 0.0, 0.0, 1.0, step=0.05, fmt="%.2f",
                     help="your own ratio of achieved to datasheet bandwidth; scales the bound")  # fmt: skip
    kv = {"auto": model_dtype}.get(settings.kv_cache_dtype, settings.kv_cache_dtype)
    try:
        b = throughput.decode_bound(arch, CARDS[card].bandwidth_gbs, context=context, batch=batch,
                                    kv_dtype="fp8" if kv.startswith("fp8") else kv, weights=weights,
                                    model_dtype=model_dtype, tp=settings.tensor_parallel_size, pp=pp,
                                    efficiency=eff or None)  # fmt: skip
    except ConfigError as e:
        show_invalid(e, "decode bound")
        return
    text = (f"Decode bound at batch {batch:,}, context {context:,}: at most {b.tokens_per_s:,.0f} tokens/s (a bound: "
            f"{b.bandwidth_gbs:,.0f} GB/s datasheet bandwidth ÷ {b.step_bytes / 1e9:.2f} GB read per step on the "
            f"busiest GPU: weights {b.weights_bytes / 1e9:.2f}, KV {b.kv_bytes / 1e9:.2f}, state "
            f"{b.state_bytes / 1e9:.2f} GB).")  # fmt: skip
    if b.spread_tokens_per_s is not None:
        text += f" With the batch's tokens routed to distinct experts: at most {b.spread_tokens_per_s:,.0f}."
    if b.efficient_tokens_per_s is not None:
        text += f" At your measured efficiency {eff:.2f}: about {b.efficient_tokens_per_s:,.0f} (an estimate)."
    caption(text)
