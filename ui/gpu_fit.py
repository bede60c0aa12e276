"""The KV-cache page's GPU fit, in its two modes: the simple one (weights + a reserve of the card as sold) and the
serving engine's (vLLM's flags as URL-mirrored widgets, its fit, the deductions with the numbers substituted, the
lines the engine would log). Numbers from serving.kvcache and serving.engine; the weights as
stored (a quantisation from ui.weights_form) from serving.weights."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from attncore import ConfigError
from lab.jobs.slots import BusyError
from serving import cuda_graphs, engine_advice, validation, vllm_hybrid
from serving import engine as eng
from serving import kvcache as kv
from serving import parameters as calc
from serving.kvcache import GB, GIB
from serving.presets import CARDS, GPUS
from serving.releases import RELEASES
from serving.weights import WeightFormat, stored_weights, weights_checked
from ui import adapters_form, plain, plan_grid, weights_form
from ui.charts import calculators as cc
from ui.figure import show_chart
from ui.metered import metered
from ui.params import show_invalid, url_number, url_radio, url_select, url_toggle, write_to_url

OTHER = "other"
BATCH = {"max_num_batched_tokens": "kv_e_tokens", "max_num_seqs": "kv_e_seqs"}  # EngineSettings field: URL key
SIMPLE_GPU = "h100-80gb"  # the simple fit's card when none is chosen
UNITS = ("GiB", "GB")  # a typed capacity: GiB = 2^30 B (as torch reports), GB = 10^9 B (as sold)
MEASURED = {  # EngineSettings field: (label, what to copy from the log)
    "weights_gib": ("Weights", "'model weights take X GiB' (V0) or 'Model loading took X GiB' (V1)"),
    "non_torch_gib": ("Non-torch", "'non_torch_memory takes X GiB'"),
    "activation_gib": ("Activation peak", "'PyTorch activation peak memory takes X GiB'"),
    "kv_cache_memory_gib": ("KV cache memory", "V1's --kv-cache-memory-bytes in GiB: skips the profiling"),
}


def card_label(name: str) -> str:
    return (
        "other (type it)" if name == OTHER else f"{name}: {CARDS[name].total_gib:.2f} GiB (sold as {CARDS[name].sold})"
    )


def simple_choice() -> tuple[str, float, str]:
    """(card or OTHER, the typed size, its unit GB or GiB) as the simple fit holds them, so that switching fits
    keeps the visitor's GPU (both fits list the same cards)."""
    unit = url_select("Count the GPU's memory", "kv_unit", list(SIMPLE_UNITS), "GB", format_func=SIMPLE_UNITS.get,
                      peek=True)  # fmt: skip
    cards = GPUS if unit == "GB" else CARDS
    key = "kv_gpu" if unit == "GB" else "kv_gpu_gib"
    gpu = url_select("GPU", key, [*cards, OTHER], SIMPLE_GPU, peek=True)
    size = url_number(f"GPU memory ({UNIT_NAMES[unit]})", "kv_gpu_gb", 80.0, 0.5, 90_000.0, peek=True)
    return gpu, size, unit


def gpu_inputs() -> tuple[float, str | None, str]:
    """(total GiB, card name or None, weights' element type) from the card picker or a typed capacity; both start
    from the simple fit's choice."""
    chosen, typed, typed_unit = simple_choice()
    cols = st.columns([3, 1, 1, 1.4])
    with cols[0]:
        name = url_select("GPU (total as torch reports it)", "kv_e_gpu", [*CARDS, OTHER], chosen,
                          format_func=card_label)  # fmt: skip
    with cols[3]:
        weight_dtype = url_select("Weights element type", "kv_wdtype", kv.DTYPES, "bf16")
    if name != OTHER:
        card = CARDS[name]
        cols[1].markdown(f"**{card.total_gib:.2f} GiB**  \n= {card.total_gib * GIB / GB:.2f} GB")
        st.caption(("Logged by vLLM: " if card.logged else "Not from a vLLM log naming the card: ") + card.source)
        return card.total_gib, name, weight_dtype
    with cols[1]:
        size = url_number("Total memory", "kv_e_total", typed if chosen == OTHER else 39.5, 0.5, 1e5, fmt="%.2f")
    with cols[2]:
        unit = url_select("Unit", "kv_e_unit", UNITS, typed_unit if chosen == OTHER else "GiB",
                          help="GiB = 2³⁰ B, as torch and vLLM print; GB = 10⁹ B")  # fmt: skip
    return (size if unit == "GiB" else size * GB / GIB), None, weight_dtype


def settings_inputs(default_len: int, total: float, card: str | None) -> dict:
    cols = st.columns(4)
    with cols[0]:
        version = url_select("Engine", "kv_e_version", list(eng.VERSIONS), "v1", format_func=str.upper,
                             help="V1: " + eng.VERSIONS["v1"] + ". V0: " + eng.VERSIONS["v0"])  # fmt: skip
    with cols[1]:
        util = url_number("gpu_memory_utilization", "kv_e_util", 0.9, 0.01, 1.0, step=0.01, fmt="%.2f")
    with cols[2]:
        max_len = url_number("max_model_len (tokens)", "kv_e_len", default_len, 1, eng.MAX_SEARCH_LEN)
    with cols[3]:
        dtype = url_select("kv_cache_dtype", "kv_e_dtype", eng.KV_DTYPES, "auto", help="auto: the model's dtype")
    cols = st.columns(4)
    # the batch limits the engine will use, shown as numbers; a switch below the row lets the visitor set them
    engine_batch = eng.default_batch(eng.EngineSettings(version=version, max_model_len=max_len), total, card)
    given = any(url_number(field, key, 0, 0, 10**7, peek=True) > 0 for field, key in BATCH.items())
    with st.container():
        own = url_toggle("Set max_num_batched_tokens and max_num_seqs myself", "kv_e_batch_on", given,
                         help="Off: the values the engine picks for this card, version and max_model_len.")  # fmt: skip
    batch = {}
    for col, (field, key), value in zip(cols[1:3], BATCH.items(), engine_batch, strict=True):
        with col:
            if own:
                batch[field] = url_number(field, key, value, 1, 10**7)
            else:  # not a widget of the URL: the engine's own value, greyed out
                st.number_input(field, value=value, disabled=True, help="the engine's default here")
                batch[field] = None
    with cols[0]:
        block = url_select("block_size", "kv_e_block", [8, 16, 32, 64, 128], 16)
    with cols[3]:
        tp = url_number("tensor_parallel_size", "kv_e_tp", 1, 1, 1024, help="KV heads and weights split over GPUs")
    values = dict(version=version, gpu_memory_utilization=util, max_model_len=max_len, kv_cache_dtype=dtype)
    values |= dict(block_size=block, **batch)
    values["tensor_parallel_size"] = tp
    values["allow_long_max_model_len"] = url_toggle(
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "kv_e_long", False,
        help="vLLM's override: a max_model_len past the model's derived maximum warns instead of refusing to start",
    )  # fmt: skip
    # a figure is used only when its switch says so (a link that gives a figure turns its switch on)
    given = {
        f: url_number(f"{lab} (GiB)", f"kv_e_{f}", 0.0, 0.0, 1e5, peek=True) > 0 for f, (lab, _) in MEASURED.items()
    }
    with st.expander("Figures from your own startup log, in place of the estimates", expanded=any(given.values())):
        cols = st.columns(2)  # a toggle's label in a quarter of the row was cut off
        for i, (field, (label, hint)) in enumerate(MEASURED.items()):
            with cols[i % 2]:
                use = url_toggle(f"{label} from my log", f"kv_e_{field}_on", given[field], help=hint)
                value = url_number(f"{label} (GiB)", f"kv_e_{field}", 0.0, 0.0, 1e5, fmt="%.2f", disabled=not use)
            values[field] = value if use else None
    return values


def release_inputs(arch, values: dict) -> None:
    """The vLLM release to fit as (none: the engine version above; a model with state layers: the latest release
    modelled) and, for a model with state layers, prefix caching, speculative tokens and the state's dtypes."""
    cols = st.columns(4)
    with cols[0]:
        release = url_select("vLLM release", "kv_e_release", ["none", *RELEASES], "none",
                             format_func=lambda r: "not named" if r == "none" else r,
                             help="; ".join(r.summary for r in RELEASES.values()))  # fmt: skip
    values["vllm_version"] = None if release == "none" else release
    if arch.mixer is None:
        return
    with cols[1]:
        values["num_speculative_tokens"] = url_number("Speculative tokens (state rows)", "kv_e_stok", 0, 0, 1024)
    with cols[2]:
        values["mamba_cache_dtype"] = url_select("mamba_cache_dtype", "kv_e_conv", vllm_hybrid.STATE_DTYPES, "auto")
    with cols[3]:
        values["mamba_ssm_dtype"] = url_select("mamba_ssm_dtype", "kv_e_ssm", vllm_hybrid.STATE_DTYPES, "auto")
    values["prefix_caching"] = url_toggle("Prefix caching (mamba_cache_mode align)", "kv_e_prefix", False,
                                          help="A state group then keeps two pages a request")  # fmt: skip


# the rest of a custom model: a modern decoder's choices (as `kv-cache --d`), or this lab's model's, which links
# made before assume (a link without kv_e_rest); a visitor who did not open such a link starts from the modern one
RESTS = {"modern": "modern decoder", "lab": "the lab's model"}
LINKED_CUSTOM = "_kv_opened_custom_link"  # session: the page was opened by a custom link without kv_e_rest


def note_opening_link() -> None:
    """Remember, on the page's first run in a session, whether its link was a custom one made before kv_e_rest."""
    params = st.query_params
    st.session_state.setdefault(LINKED_CUSTOM, params.get("kv_preset") == "custom" and "kv_e_rest" not in params)


def widths(arch):
    """A custom model's widths and vocabulary, which its weights and the activation peak need (the cache geometry
    is above), and its other choices: a modern decoder's or this lab's model's, said in one line."""
    cols = st.columns(4)
    with cols[0]:
        d = url_number("Hidden width d_model", "kv_e_d", 4096, 1, 10**6)
    with cols[1]:
        d_ff = url_number("FFN width (gated: per branch)", "kv_e_dff", 14336, 1, 10**7)
    with cols[2]:
        vocab = url_number("Vocabulary", "kv_e_vocab", 128256, 1, 10**8)
    if "kv_e_rest" not in st.session_state and "kv_e_rest" not in st.query_params and not st.session_state.get(
        LINKED_CUSTOM
    ):  # fmt: skip
        st.session_state["kv_e_rest"] = "modern"
        write_to_url(["kv_e_rest"])
    with cols[3]:
        rest = url_select("The rest of the model", "kv_e_rest", list(RESTS), "lab", format_func=RESTS.get,
                          help="modern decoder: SwiGLU, no biases, RMSNorm, RoPE, untied head (as kv-cache --d); "
                          "the lab's model: biases, LayerNorms, learned positions, a head bias")  # fmt: skip
    shape = dict(d_model=d, d_ff=d_ff, vocab_size=vocab, ffn="swiglu")
    if rest == "lab":
        st.caption("Assumed for the weights and the activation peak: a SwiGLU FFN, and this lab's model's other "
                   f"choices: biases on every linear layer, LayerNorms, {arch.max_len:,} learned positions, an "
                   "untied output head with a bias.")  # fmt: skip
        return replace(arch, **shape)
    modern = replace(arch, **(calc.MODERN | shape))
    typed = {"d_model", "d_ff", "vocab_size", "ffn", "n_layers", "n_heads", "n_kv_heads", "head_dim"}
    words = ", ".join(w for _, w in calc.assumed(modern, typed))
    st.caption(f"Assumed for the weights and the activation peak: a SwiGLU FFN, {words} (a modern decoder's, as "
               "`kv-cache --d` assumes); type the weights' parameters above to count them yourself.")  # fmt: skip
    return modern


def fit_of(arch, total, settings, weight_dtype, model_dtype, card, weight_params, fmt, limit=None) -> eng.EngineFit:
    stored = stored_weights(arch, fmt) if fmt is not None else None
    return eng.engine_fit(arch, total, settings, weight_dtype=weight_dtype, model_dtype=model_dtype, gpu=card,
                          weight_params=weight_params, weight_bytes_given=stored.bytes if stored else None,
                          weight_label=stored.label if stored else "", limit=limit)  # fmt: skip


def quantised(storage: dict | None, weight_dtype: str, arch):
    """The WeightFormat of a quantisation chosen on the page, None when the weights are plain parameters × bytes;
    ConfigError on a bad mix."""
    if storage is None or storage["method"] == "none":
        return None
    fmt = weights_form.format_of(storage, weight_dtype)
    weights_checked(fmt, arch)
    return fmt


def storage_of(fmt):
    """kvcache.workload's weight_storage for a quantisation (None: parameters × the element type's bytes)."""
    if fmt is None:
        return None

    def stored(arch):
        weights = stored_weights(arch, fmt)
        return weights.bytes, weights.label

    return stored


def engine(arch, default_len: int, weight_params: int | None, custom: bool = False, storage=None,
           limit=None, batch: int = 1) -> int | None:  # fmt: skip
    """Draw the engine mode for a Decoder; returns the bytes left for the cache (None on bad input). `storage`:
    the quantisation fields of ui.weights_form (None: no quantisation offered); `limit`: the model's derived
    maximum (serving.context_limit), past which vLLM refuses to start."""
    total, card, weight_dtype = gpu_inputs()
    if custom:
        try:
            arch = widths(arch)
        except ConfigError as e:
            show_invalid(e, "model")
            return None
    values = settings_inputs(default_len, total, card)
    release_inputs(arch, values)
    if arch.window_kind == "chunked" and arch.sliding_window:
        values["allow_chunked_hybrid"] = url_toggle(
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1", "kv_e_chunked", False,
            help="Off (vLLM's default): the engine pages chunked local-attention layers as full ones. On: by their "
            "chunk, as its hybrid KV-cache manager does",
        )  # fmt: skip
    model_dtype = weight_dtype if weight_dtype in eng.MODEL_DTYPES else "bf16"
    release = values["vllm_version"]
    extras = adapters_form.choices(bool(release) and cuda_graphs.profiles(release))  # as `kv-cache --vllm-version`
    try:
        values |= adapters_form.settings(extras)
        fmt = quantised(storage, weight_dtype, arch)
        key = (arch, total, eng.EngineSettings(**values), weight_dtype, model_dtype, card, weight_params, fmt, limit)
        fit = metered("engine_fit", key, lambda: fit_of(*key), "this fit")  # 0.3 s of CPU at 10,000 layers
    except ConfigError as e:
        if e.field == "max_model_len" and limit is not None:  # vLLM's own refusal, not a bad value
            plain.error("The engine would not start:", e.message)
        else:
            show_invalid(e, "engine setting")
        return None
    except BusyError as e:
        st.warning(str(e))
        return None
    metrics = cc.engine_metrics(fit)
    cc_metrics(metrics[:3])
    cc_metrics(metrics[3:])
    if not fit.starts:
        plain.error("The engine would not start. vLLM's error:", fit.error)
        if fit.advice_note:
            st.warning(f"But {fit.advice_note}.", icon=":material/block:")
        st.markdown(advice_text(fit.advice))
    if fit.max_model_len_warning:
        st.warning(fit.max_model_len_warning, icon=":material/warning:")
    if fit.paging_note:
        st.caption(f"Note: {fit.paging_note}.")
    if note := adapters_form.caption(fit.extras):
        st.caption(note)
    if fit.derived_max_model_len is not None:
        st.caption(f"The model's derived maximum, checked first: {fit.derived_max_model_len:,} "
                   f"({fit.max_model_len_rule}).")  # fmt: skip
    st.markdown(f"**{fit.engine}** — how the budget is divided:")
    st.markdown("  \n".join(cc.engine_formula(fit)))
    show_chart(cc.engine_split(cc.engine_frame(fit), fit.total_bytes / GIB), "engine-split", width="stretch")
    if eng.log_estimated(fit):
        st.caption("**Estimated**: what the engine would log if the estimates above held (its words and number "
                   "formats, not a log):")  # fmt: skip
    else:
        st.caption("What the engine would log from your log's figures (its words and number formats):")
    st.code("\n".join(eng.log_lines(fit)), language=None, wrap_lines=True)
    if fit.hybrid is not None:
        st.markdown(plain.plain(vllm_hybrid.capacity_sentence(fit.hybrid)))
    st.caption(engine_caption(fit))
    if weight_params is None:  # stages need the model's layers counted, not a typed total
        plan_grid.section(arch, total, key[2], fmt or WeightFormat(dtype=weight_dtype), model_dtype, card, limit,
                          default_len, batch)  # fmt: skip
    return fit.kv_bytes


def advice_text(advice: tuple[str, ...]) -> str:
    """What would start an engine that does not start (engine_advice), as a markdown list; numbers only."""
    if not advice:
        return (f"None of a higher gpu_memory_utilization, a tensor-parallel size up to {engine_advice.MAX_TP}, "
                "fp8 or int4 weights alone would start it.")  # fmt: skip
    return "**What would start it:**\n\n" + "\n".join(f"- {line}" for line in advice)


def engine_caption(fit: eng.EngineFit) -> str:
    """What each kind means and what the estimates rest on, with the activation estimate's error per published
    log computed from serving.validation (never typed)."""
    names = {"non_torch": "non-torch", "kv": "KV cache", "draft": "drafter weights", "cuda_graph": "CUDA graphs"}
    estimates = [names.get(k, k) for k, kind in fit.kinds.items() if kind == "estimate"]
    text = (
        "Each figure is marked exact (the engine's own arithmetic on exact inputs), measured (typed from your log; "
        "the budget's 'measured (published log)': a card's total read from a published vLLM log) or estimate; a "
        "figure computed from an estimate is an estimate"
        + (f", so here {', '.join(estimates)} are estimates. " if estimates else ". ")
    )
    weights = "the checkpoint's stored bytes ÷ tp" if fit.weight_format else "parameters × bytes ÷ tp"
    text += (
        f"The estimates: the weights ({weights}; the log adds a little for padding), non-torch memory "
        "(0.10 GiB on one GPU, 0.30 GiB per GPU with tp > 1; tp 8 has logged 7 GiB), a card's total when no vLLM "
        "log names the card, and the activation peak: the larger of the forward's widest tensors over "
        f"max_num_batched_tokens ({fit.max_num_batched_tokens:,}) and the sampler's float32 work over the logits of "
        f"max_num_seqs ({fit.max_num_seqs:,}) rows. Against the published V0 logs that print it, the activation "
        f"estimate is off by {validation.error_sentence()}: vLLM #12330's launch flags are not all shown, the OCI "
        "log shows no sampler work, and MoE routing buffers and workspaces are not counted. Type your log's figures "
        "above to replace any estimate. "
    )
    if "draft" in fit.kinds:
        text += ("The drafter's weights: its own parameters (what it shares with the model not counted) × the "
                 "model's stored bytes per parameter. ")  # fmt: skip
    if fit.graph_log:
        return text + ("CUDA graphs: profiled before the cache and subtracted, as vLLM 0.21 on does; "
                       + ("the estimate is from your log." if fit.kinds.get("cuda_graph") == "measured" else
                          "the estimate is a lower bound of vLLM's estimator, which published logs put from 0.1 to "
                          "several GiB: give your log's figure."))  # fmt: skip
    return text + ("CUDA graphs (captured after the cache in these versions) live in the 1 − utilization kept free; "
                   "vLLM 0.21 on subtracts them (a switch under LoRA adapters, speculative decoding, CUDA "
                   "graphs).")  # fmt: skip


def cc_metrics(metrics) -> None:
    for col, metric in zip(st.columns(len(metrics)), metrics, strict=True):
        col.metric(*metric, delta_color="off", delta_arrow="off")


UNIT_NAMES = {"GB": "GB = 10⁹ B", "GiB": "GiB = 2³⁰ B"}
SIMPLE_UNITS = {"GB": f"as sold ({UNIT_NAMES['GB']})", "GiB": f"as the driver reports it ({UNIT_NAMES['GiB']})"}


def simple(base, geometry: dict, context: int, batch: int, dtype: str, params: int | None, storage=None) -> int | None:
    """Draw the simple fit (weights + a flat reserve of the GPU's memory, counted as sold in GB or as reported in
    GiB, the visitor's choice); returns the bytes left for the cache (None on a bad quantisation)."""
    unit = url_radio("Count the GPU's memory", "kv_unit", list(SIMPLE_UNITS), "GB", format_func=SIMPLE_UNITS.get)
    cards = GPUS if unit == "GB" else {name: card.total_gib for name, card in CARDS.items()}
    cols = st.columns(4)
    with cols[0]:
        key = "kv_gpu" if unit == "GB" else "kv_gpu_gib"  # the two lists differ: each keeps its own choice
        gpu = url_select("GPU", key, [*cards, OTHER], SIMPLE_GPU, help=f"'other': type the memory in {unit}")
    with cols[1]:
        if gpu == OTHER:
            size = url_number(f"GPU memory ({UNIT_NAMES[unit]})", "kv_gpu_gb", 80.0, 0.5, 90_000.0)
        else:
            size = cards[gpu]
            other, per = ("GiB", GIB) if unit == "GB" else ("GB", GB)
            n_bytes = size * cc.SIZE_UNITS[unit]
            st.markdown(f"**{size:g} {unit}** = {n_bytes:,.0f} B  \n≈ {n_bytes / per:.1f} {other}")
    with cols[2]:
        reserve = url_number(
            "Reserved for the runtime (fraction)", "kv_reserve", kv.DEFAULT_RESERVE, 0.0, 0.95, step=0.05, fmt="%.2f",
            help="Share of the GPU's memory kept for the runtime, activations and fragmentation: 0.10 = 10%.",
        )  # fmt: skip
    with cols[3]:
        weight_dtype = url_select("Weights element type", "kv_wdtype", kv.DTYPES, "fp16")
    try:
        fmt = quantised(storage, weight_dtype, kv.with_geometry(base, geometry)) if base is not None else None
    except ConfigError as e:
        show_invalid(e, "weight storage")
        return None

    served = kv.workload(base, geometry, context, batch, dtype, weight_dtype=weight_dtype, weight_params=params,
                         weight_storage=storage_of(fmt))  # fmt: skip
    fit = kv.fit(served, size * cc.SIZE_UNITS[unit] / GB, reserve)
    cc_metrics(cc.fit_metrics(fit, served, unit))
    (st.success if fit.fits else st.error)(
        cc.fit_message(fit, served, unit), icon=":material/check_circle:" if fit.fits else ":material/block:"
    )
    show_chart(cc.memory_split(cc.fit_frame(fit, served.bytes, unit), size, unit), "memory-split", width="stretch")
    sold = "the card as sold (GB = 10⁹ B); the card reports less" if unit == "GB" else "what the driver reports"
    st.caption(
        f"This fit takes a flat reserve of {sold}, and the engine also keeps its activation peak: choose the "
        "serving engine's fit above for what vLLM will report. So its four figures are estimates; the cache's and "
        "the weights' sizes above them are exact (bytes per element × the shapes and parameters)."
    )
    return fit.budget_bytes
