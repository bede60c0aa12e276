"""KV cache: the memory of a workload's key-value cache, whether it fits on a GPU, and the cache measured."""

import streamlit as st

from attncore import ConfigError
from attncore.config import ModelConfig
from lab.jobs.slots import BusyError
from serving import kvcache as kv
from serving.kvbench import benchmark_generation
from serving.parameters import describe_attncore
from serving.presets import PRESETS
from serving.weights import FLOAT_DTYPES
from ui import docs, gpu_fit, kv_model, weights_form
from ui.charts import calculators as cc
from ui.config_input import FILE, reader
from ui.kv_model import CUSTOM, NAMES
from ui.limits import limits
from ui.params import show_invalid, url_number, url_radio, url_select, url_toggle
from ui.slots import training_slot

FIT_MODES = {"simple": "Simple: weights + a reserve", "vllm": "As the serving engine sees it (vLLM)"}


def show(metrics: list[tuple[str, str, str]]) -> None:
    for col, metric in zip(st.columns(len(metrics)), metrics, strict=True):
        col.metric(*metric, delta_color="off", delta_arrow="off")


st.title("KV cache")
st.caption(
    "Keys and values of every past token, kept so each new token costs one step, not a re-read of the whole "
    "prefix: 2 · layers · KV heads · head dim · tokens · batch · bytes. Watch how GQA, MQA and latent (MLA) "
    "caches shrink it, how sliding windows cap it, how it grows with context and batch until the GPU is full."
)
docs.link("the-key-value-cache", "The key-value cache explained, with the article's worked examples")
gpu_fit.note_opening_link()  # before any widget writes the URL
reader("kv_", kv_model.from_file)
cols = st.columns(4)
with cols[0]:
    preset = url_select("Preset", "kv_preset", [CUSTOM, FILE, *PRESETS], "llama-3-8b", on_change=kv_model.load_preset,
                        format_func=lambda n: NAMES.get(n, n))  # fmt: skip
with cols[1]:
    context = url_number("Context (tokens per sequence)", "kv_context", 8192, 1, 10**8)
with cols[2]:
    batch = url_number("Batch (sequences)", "kv_batch", 1, 1, 10**6)
with cols[3]:
    dtype = url_select("Cache element type", "kv_dtype", kv.DTYPES, "fp16")
geometry, params, base = kv_model.inputs(preset)
storage_fields = None
if base is not None:
    with st.expander("How the weights are stored: quantisation (the element type is the fit's)"):
        storage_fields = weights_form.fields("kv_", PRESETS[preset].weights if preset in PRESETS else
                                             weights_form.UNQUANTISED)  # fmt: skip
if base and base.position == "learned" and context > base.max_len:
    st.warning(f"{preset} has {base.max_len:,} learned positions: it cannot read a context of {context:,}.")
try:  # the weights beside the cache in its element type (a quantisation leaves the rest in fp16 if that is int)
    rest = dtype if dtype in FLOAT_DTYPES else "fp16"
    fmt = gpu_fit.quantised(storage_fields, rest, kv.with_geometry(base, geometry)) if base is not None else None
    cache = kv.workload(base, geometry, context, batch, dtype, weight_params=params or None,
                        weight_storage=gpu_fit.storage_of(fmt))  # fmt: skip
except ConfigError as e:
    show_invalid(e, "workload")
    st.stop()

show(cc.cache_metrics(cache))
chunked = cache.window_kind == "chunked"  # Llama 4: a chunk of the window's tokens, at most as many cached
window = f", the {'chunk' if chunked else 'window'} keeps {cache.tokens_per_layer:,} per layer" if cache.window else ""
if cache.window and cache.window_layers < cache.n_layers:
    window = (
        f"; the {cache.window_layers} {'chunked-attention' if chunked else 'windowed'} layers keep "
        f"{cache.tokens_per_layer:,} tokens each, the {cache.n_layers - cache.window_layers} full ones all {context:,}"
    )
st.caption(
    f"Exactly {kv.human_bytes(cache.bytes)} for {context:,} tokens × batch {batch:,}{window}; "
    f"{cache.bits_per_element:.3g} bits per cached number (int8/int4 carry an fp16 scale per {cache.group_size})."
)

if cache.state_layers:  # a hybrid: state layers keep a fixed state per sequence beside the attention layers' tokens
    st.dataframe(kv_model.kinds_rows(cache), hide_index=True)
    st.caption(
        f"{cache.n_layers} attention layers cache keys and values per token; {cache.state_layers} state layers keep "
        f"one state per sequence however long it is ({kv.human_bytes(cache.state_total)} at batch {batch:,}), in "
        "vLLM's default dtypes: the conv state in the cache's element type (bf16 for an 8- or 4-bit cache), the "
        "temporal one as the config asks (mamba_ssm_dtype), else the same."
    )

st.subheader("Does it fit on a GPU?")
mode = url_radio("Fit", "kv_mode", list(FIT_MODES), "simple", format_func=FIT_MODES.get)
if mode == "vllm":
    st.caption(
        "The engine's own accounting: budget = total × gpu_memory_utilization, less the weights, memory outside "
        "torch and the activation peak of its profiling run; the rest becomes blocks of block_size tokens."
    )
    try:
        arch = kv.with_geometry(base or describe_attncore(ModelConfig()), geometry)
    except ConfigError as e:
        show_invalid(e, "model")
        st.stop()
    limit = PRESETS[preset].model.limit if preset in PRESETS else kv_model.limit_of(preset)
    budget = gpu_fit.engine(arch, context, params or None, custom=base is None, storage=storage_fields, limit=limit)
    if budget is None:
        st.stop()
else:
    budget = gpu_fit.simple(base, geometry, context, batch, dtype, params or None, storage=storage_fields)
    if budget is None:
        st.stop()

st.subheader("Memory against context")
left, right = st.columns([3, 2])
with left:
    log = url_toggle("Log scales", "kv_log", True)
    curves = cc.curves_frame(kv.cache_curves(contexts=cc.chart_contexts(context), batch=batch, dtype=dtype, **geometry))
    st.altair_chart(cc.memory_chart(curves, context, budget / kv.GIB, log), width="stretch")
with right:
    st.markdown(f"**{context:,} tokens × batch {batch:,}, in each element type**")
    dtypes = cc.curves_frame(kv.dtype_curves(contexts=[context], batch=batch, **geometry))
    st.altair_chart(cc.dtype_bars(dtypes, dtype), width="stretch")
drawn = set(curves["variant"]) if len(curves) else set()
kinds = ["MHA keeps every query head's keys and values"]
kinds += ["GQA one pair per group"] if any(v.startswith("GQA") for v in drawn) else []
kinds += ["MQA a single pair"] + (["MLA one compressed latent"] if any(v.startswith("MLA") for v in drawn) else [])
window_note = " The sliding window flattens every curve once the context passes it." if geometry["window"] else ""
if geometry["window"] and cache.window_layers < cache.n_layers:
    window_note = " Past the window only the full layers' cache keeps growing: each curve bends, then climbs slower."
st.caption(
    f"Same layers and head size, {dtype}; {', '.join(kinds)}. The grey line is the room the GPU leaves for the "
    f"cache.{window_note} The longest context above is a bound set by memory alone: a model is only reliable up "
    "to the context it was trained for."
)

st.subheader("Measured: generation with and without the cache")
st.caption(
    "A randomly initialised attncore decoder (embeddings, attention, FFN, LayerNorms, output layer), batch 1, "
    "a 32-token prompt. The article's 4 layers, d 256, 8 heads and 128 new tokens are the largest choices here "
    "(its toy had attention and residuals only); the smaller default takes several seconds. Both paths must "
    "pick the same tokens; the cache only saves time."
)
cols = st.columns(5)
with cols[0]:
    layers = url_number("Layers", "kv_m_layers", 2, 1, 4)
with cols[1]:
    width = url_select("Width d", "kv_m_d", [64, 128, 256], 128)
with cols[2]:
    heads = url_select("Heads", "kv_m_heads", [2, 4, 8], 8)
with cols[3]:
    cap = limits().max_kv_new_tokens
    n_new = url_select("New tokens", "kv_m_new", [n for n in (16, 32, 64, 128) if n <= cap] or [cap], 64)
with cols[4]:
    repeats = url_number("Repeats (median)", "kv_m_repeats", 3, 1, 5)
key, measured = (layers, width, heads, n_new, repeats), st.session_state.setdefault("kv_measured", {})
if st.button("Measure", type="primary", key="kv_measure", icon=":material/timer:"):
    bar = st.progress(0.0, text="Generating with and without the cache...")
    try:
        with training_slot("this measurement"):
            measured[key] = benchmark_generation(
                n_layers=layers, d_model=width, n_heads=heads, n_new=n_new, repeats=repeats,
                progress=lambda done, total: bar.progress(done / total, text=f"timed run {done} of {total}"),
            )  # fmt: skip
    except BusyError as e:
        st.warning(str(e))
    bar.empty()
if key not in measured:
    st.info("Press **Measure** to time greedy generation of this toy model both ways.", icon=":material/timer:")
    st.stop()
show(cc.benchmark_metrics(measured[key]))
st.altair_chart(cc.timing_chart(cc.timing_frame(measured[key])), width="stretch")
st.caption(
    "Without the cache each new token re-runs the whole prefix, so the work grows with the square of the "
    "length; with it, each step runs one new position against the cached keys and values, and the work grows "
    "linearly. The time saved is smaller than the work saved: re-running the prefix uses matrix–matrix products, "
    "which run at a far higher rate per operation than the matrix–vector products of a cached step, and both "
    "paths pay the same fixed cost per NumPy call."
)
