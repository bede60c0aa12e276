"""Tables, metric texts and Altair charts of the Parameters and KV-cache pages, as pure functions; no streamlit.

Library results (ParamCount, KVCache, Fit, curve rows, CacheBenchmark) in; a DataFrame, an alt.Chart or
(label, value, note) triples for st.metric out. Colours are fixed per component, attention kind and mode.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from lab import formats
from serving.engine import GIB, EngineFit, deductions, tokens_formula
from serving.kvbench import MODES, CacheBenchmark
from serving.kvcache import DTYPES, GB, Fit, KVCache, weight_bytes
from serving.parameters import COMPONENTS, ParamCount
from serving.weights import StoredWeights
from ui.charts.memo import memo_chart
from ui.charts.runs import BASE_COLOR, SEQUENCE_COLOR, TOKEN_COLOR, VARIANT_COLORS
from ui.frames import within_int64

COMPONENT_COLORS = alt.Scale(
    domain=list(COMPONENTS),
    range=[TOKEN_COLOR, "#72B7B2", SEQUENCE_COLOR, "#FF9DA6", "#54A24B", "#EECA3B", "#B279A2"],
)
ATTENTION_COLORS = {"MHA": VARIANT_COLORS[0], "GQA": TOKEN_COLOR, "MQA": VARIANT_COLORS[1], "MLA": VARIANT_COLORS[2]}
MODE_COLORS = alt.Scale(domain=list(MODES), range=[TOKEN_COLOR, SEQUENCE_COLOR])
MUTED = "#BAB0AC"
Metric = tuple[str, str, str]  # label, value, the small grey line under it
LABEL_ROOM = 1.25  # a bar chart's value axis runs this far past its longest bar, so the bar's label fits


# --- numbers as text ---------------------------------------------------------


def binary_size(n: float) -> str:
    """Bytes in binary units (KiB = 2^10 B ... TiB), three significant figures kept (lab.formats.size): '1.00 GiB'
    beside '1.07 GB' and '0.516 GiB' written '528 MiB', never '1 GiB' beside '1.07 GB'."""
    return formats.size(n, "iec")


def decimal_size(n: float) -> str:
    """Bytes in decimal units (kB = 10^3 B ... TB), three significant figures kept (lab.formats.size)."""
    return formats.size(n, "si")


def count_text(n: int) -> str:
    """1,234,567,890 -> '1.23B'; the exact figure goes beside it."""
    for unit, power in (("T", 12), ("B", 9), ("M", 6), ("k", 3)):
        if n >= 10**power:
            return f"{n / 10**power:.3g}{unit}"
    return str(n)


# --- parameters --------------------------------------------------------------


def count_metrics(
    count: ParamCount, published: int | None, preset: str, modified: bool, stored: StoredWeights | None = None
) -> list[Metric]:
    """Total, the published figure (✓ when equal), non-embedding, and the weights' memory: in bf16, or as `stored`
    (a checkpoint's storage: its element type, quantisation and scales) when given."""
    if published is None:
        reference = ("Published", "—", "read from a config.json" if preset == "from config.json" else
                     "a custom architecture")  # fmt: skip
    else:
        mark = "✓ equals the count" if count.total == published else "✗ differs from the count"
        mark = f"{count.total - published:+,} after your changes" if modified and count.total != published else mark
        reference = (f"Published ({preset})", f"{published:,}", mark)
    bf16 = weight_bytes(count.total, "bf16")
    return [
        ("Total parameters", f"{count.total:,}", count_text(count.total)),
        reference,
        ("Non-embedding", count_text(count.non_embedding), f"{count.non_embedding:,}"),
        ("Weights in bf16", decimal_size(bf16), f"= {binary_size(bf16)}")  # GB = 10^9 B, GiB = 2^30 B
        if stored is None
        else ("Weights as stored", decimal_size(stored.bytes), stored.label.split(",")[0]),
    ]


def breakdown_frame(count: ParamCount) -> pd.DataFrame:
    """Columns component, params, share: one row per component, in COMPONENTS order (params as text when a count
    passes 64 bits: ui.frames.within_int64)."""
    return within_int64(pd.DataFrame(count.rows(), columns=["component", "params", "share"]))


@memo_chart
def share_chart(df: pd.DataFrame, height: int = 230) -> alt.Chart:
    """breakdown_frame rows -> horizontal bars of each component's share of the total, labelled."""
    top = min(1.0, float(df["share"].max()) * LABEL_ROOM) if len(df) else 1.0  # room for the longest bar's label
    exact = pd.api.types.is_numeric_dtype(df["params"])  # else written out past 64 bits (breakdown_frame)
    params_tooltip = alt.Tooltip("params:Q", format=",") if exact else alt.Tooltip("params:N")
    base = alt.Chart(df.assign(label=[formats.share(x) for x in df["share"]])).encode(
        y=alt.Y("component:N", sort=list(COMPONENTS), title=None, axis=alt.Axis(labelFontSize=12)),
        x=alt.X(
            "share:Q",
            title="share of all parameters",
            axis=alt.Axis(format="%"),
            scale=alt.Scale(domain=[0, top], nice=False),
        ),
        tooltip=["component:N", params_tooltip, alt.Tooltip("share:Q", format=".1%")],
    )
    bars = base.mark_bar(cornerRadiusEnd=3).encode(color=alt.Color("component:N", scale=COMPONENT_COLORS, legend=None))
    labels = base.mark_text(align="left", dx=4, fontSize=12, color=BASE_COLOR).encode(
        text=alt.Text("label:N")  # lab.formats.share, as in the table beside it: '0%', '<0.1%', '22.8%'
    )
    return (bars + labels).properties(height=height)


def crosscheck_frame(rows: list[dict]) -> pd.DataFrame:
    """calculators.crosscheck_attncore rows -> columns component, formula, model, equal ('✓' or '✗')."""
    df = within_int64(pd.DataFrame(rows, columns=["component", "formula", "model", "equal"]))
    return df.assign(equal=df["equal"].map({True: "✓", False: "✗"}))


# --- the key-value cache -----------------------------------------------------


def cache_metrics(c: KVCache) -> list[Metric]:
    """The cache in binary and decimal units, per token, the weights in the same element type, the ratio."""
    weights = "not counted" if c.weight_bytes is None else decimal_size(c.weight_bytes)
    label, note = f"Weights in {c.weight_dtype}", f"{count_text(c.weight_params or 0)} parameters"  # fits 1/5 row
    if c.weight_dtype not in DTYPES:  # a checkpoint's storage (weights.StoredWeights.label): its method, short
        label, note = "Weights as stored", c.weight_dtype.split(",")[0]
    return [
        ("KV cache, binary units", binary_size(c.bytes), "GiB = 2³⁰ B"),
        ("KV cache, decimal units", decimal_size(c.bytes), "GB = 10⁹ B"),
        ("Per token", f"{c.bytes_per_token:,} B", f"one sequence, all {'attention ' * bool(c.state_layers)}layers"),
        (label, weights, note),
        ("Cache / weights", "—" if c.ratio is None else cache_ratio(c.ratio), f"{c.attention} cache"),
    ]


SIZE_UNITS = {"GB": GB, "GiB": GIB}  # a GPU's memory as sold (10^9 B) or as the driver reports it (2^30 B)


def size_in(n: float, unit: str) -> str:
    """Bytes in the family of `unit` (GB: decimal kB..TB; GiB: binary KiB..TiB), three significant figures."""
    return decimal_size(n) if unit == "GB" else binary_size(n)


def cache_ratio(x: float) -> str:
    """The cache over the weights in a metric's narrow value: three significant digits ('0.537×', '4.2×', '512×'),
    from 1,000 on in the lab's short scientific notation ('8.16e7×': '8.16e+07×' was cut to '8.16e+0…')."""
    return f"{x:.3g}×" if x < 999.5 else f"{formats.scientific(x, 3)}×"


def short_count(n: int) -> str:
    """A count for a metric's note, whose column is narrow: 8,192 in full; from ten million on in millions
    (100M; ≈12.35M where four digits do not hold it), as contexts are spoken of: the page's largest context,
    100,000,000, was clipped at 1,280 px."""
    if n < 10_000_000:
        return f"{n:,}"
    millions = f"{n / 1e6:.4g}M"
    return millions if n % 1_000_000 == 0 and n < 10**10 else f"≈{millions}"


def fit_metrics(f: Fit, c: KVCache, unit: str = "GB") -> list[Metric]:
    """Tokens that fit, the longest context at the workload's batch, the largest batch at its context, and what is
    left for the cache in the unit the GPU was given in (GB or GiB); each note ends in the figure's kind, as the
    engine fit's do: an estimate, since each rests on the flat reserve standing in for what an engine keeps."""
    longest = "any" if f.max_context is None else f"{f.max_context:,}"
    return [
        ("Cached tokens that fit", f"{f.tokens_that_fit:,}", "all sequences, estimate"),
        ("Longest context", longest, f"at batch {c.batch:,}, estimate"),  # short enough for any batch or context
        ("Largest batch", f"{f.max_batch:,}", f"at context {short_count(c.context)}, estimate"),
        (
            "Left for the cache",
            size_in(max(f.budget_bytes, 0), unit),
            f"of {f.gpu_bytes / SIZE_UNITS[unit]:.4g} {unit}, estimate",
        ),
    ]


def fit_message(f: Fit, c: KVCache, unit: str = "GB") -> str:
    """The fit's verdict with every size in `unit` (GB or GiB), three significant digits as the metrics write
    them (kvcache.fit words it the same way in GB); the card's own capacity as its list gives it."""
    per = SIZE_UNITS[unit]

    def amount(n_bytes: float) -> str:
        return f"{formats.significant(n_bytes / per)} {unit}"

    where = f"{amount(f.usable_bytes)} usable ({f.gpu_bytes / per:.4g} {unit} less {f.reserve:.0%} reserved)"
    if not f.weights_fit:
        return f"Does not fit: the weights alone need {amount(f.weight_bytes)} in {c.weight_dtype}, over the {where}"
    unknown = "" if c.weight_bytes is not None else "; weights not counted"
    verdict, sign = ("Fits", "≤") if f.fits else ("Does not fit", ">")
    return (
        f"{verdict}: weights {amount(f.weight_bytes)} + cache {amount(c.bytes)} {sign} {where}; "
        f"room for {f.tokens_that_fit:,} cached tokens{unknown}"
    )


def chart_contexts(context: int) -> list[int]:
    """The x axis of a memory chart: powers of two from 256 (or lower) to past 4x the chosen context, plus it."""
    top, start = max(4 * context, 4096), min(256, context)
    grid = [2**k for k in range(64) if start <= 2**k < 2 * top]  # the last power of two is >= top
    return sorted(set(grid) | {context})


def context_ticks(contexts, max_ticks: int = 8) -> list[int]:
    """Ticks of a log context axis on the data: its powers of two, every other one when there are many."""
    powers = sorted({int(c) for c in contexts if int(c) & (int(c) - 1) == 0}) or sorted({int(c) for c in contexts})
    return powers[:: -(-len(powers) // max_ticks)]


def curves_frame(rows: list[dict]) -> pd.DataFrame:
    """kvcache.cache_curves / dtype_curves rows -> columns context, variant, attention, dtype, bytes, gib, and
    bytes_text: the exact count as text. bytes and gib are floats, so that a cache past 2⁶³ B (a context and batch
    at the inputs' tops) still converts to Arrow; bytes_text keeps every digit for the tooltip."""
    df = pd.DataFrame(rows, columns=["context", "variant", "attention", "dtype", "bytes", "gib"])
    exact = [f"{int(n):,}" for n in df["bytes"]]
    return df.astype({"bytes": float, "gib": float}).assign(bytes_text=exact)


@memo_chart
def memory_chart(
    df: pd.DataFrame, context: int | None = None, budget_gib: float | None = None, log: bool = True
) -> alt.LayerChart:
    """curves_frame of cache_curves -> one line per attention variant against context; a dashed rule at the
    chosen context and, if given, a horizontal rule at the memory left for the cache on the GPU."""
    variants = list(dict.fromkeys(df["variant"]))
    kinds = df.drop_duplicates("variant").set_index("variant")["attention"]
    color = alt.Color(
        "variant:N",
        title=None,
        sort=variants,
        scale=alt.Scale(domain=variants, range=[ATTENTION_COLORS.get(kinds[v], BASE_COLOR) for v in variants]),
        legend=alt.Legend(orient="bottom", columns=2, labelLimit=320),
    )
    scale = alt.Scale(type="log") if log else alt.Scale()
    x_domain = [int(df["context"].min()), int(df["context"].max())]
    x_scale = alt.Scale(type="log" if log else "linear", domain=x_domain, nice=False)  # nice would widen it
    x_axis = alt.Axis(values=context_ticks(df["context"]), format=",", labelOverlap=True) if log else alt.Axis()
    lines = (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=30), strokeWidth=2)
        .encode(
            x=alt.X("context:Q", title="context (tokens)" + (", log" if log else ""), scale=x_scale, axis=x_axis),
            y=alt.Y("gib:Q", title="KV cache (GiB)" + (", log" if log else ""), scale=scale),
            color=color,
            tooltip=[
                "variant:N",
                alt.Tooltip("context:Q", format=","),
                alt.Tooltip("bytes_text:N", title="bytes"),
                alt.Tooltip("gib:Q", format=",.3f", title="GiB"),
            ],
        )
    )
    layers = [lines]
    if context is not None:
        rule = pd.DataFrame({"context": [context]})
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[4, 4], color=BASE_COLOR).encode(x="context:Q"))
    if budget_gib is not None and budget_gib > 0:
        room = pd.DataFrame({"gib": [budget_gib], "label": ["room for the cache on the GPU"]})
        budget = alt.Chart(room).encode(y="gib:Q")
        layers += [
            budget.mark_rule(color=MUTED, strokeWidth=2),
            budget.mark_text(align="left", baseline="bottom", x=4, dy=-3, color="#79706E").encode(text="label:N"),
        ]
    return alt.layer(*layers).properties(height=340)


@memo_chart
def dtype_bars(df: pd.DataFrame, chosen: str) -> alt.Chart:
    """curves_frame of dtype_curves at one context -> a horizontal bar per element type, the chosen one
    highlighted, each labelled at its end (rows, so the labels never collide, at any width)."""
    order = list(dict.fromkeys(df["dtype"]))
    df = df.assign(label=df["bytes"].map(binary_size))  # as the metrics above: 528 MiB, not 0.516 GiB
    top = float(df["gib"].max()) * LABEL_ROOM if len(df) else 1.0
    base = alt.Chart(df).encode(
        y=alt.Y("dtype:N", sort=order, title="cache element type"),
        x=alt.X(
            "gib:Q",
            title="KV cache (GiB)",
            scale=alt.Scale(domain=[0, top], nice=False),
            axis=alt.Axis(labelFlush=True, labelOverlap=True),
        ),
        tooltip=[
            "dtype:N",
            alt.Tooltip("bytes_text:N", title="bytes"),
            alt.Tooltip("gib:Q", format=",.3f", title="GiB"),
        ],
    )
    highlight = alt.condition(alt.datum.dtype == chosen, alt.value(TOKEN_COLOR), alt.value(MUTED))
    bars = base.mark_bar(cornerRadiusEnd=3).encode(color=highlight)
    labels = base.mark_text(align="left", dx=3, fontSize=11, color=BASE_COLOR).encode(text="label:N")
    return (bars + labels).properties(height=300)


def fit_frame(f: Fit, cache_bytes: int, unit: str = "GB") -> pd.DataFrame:
    """Columns part, size (in `unit`: GB or GiB), share: the GPU's memory as the runtime reserve, the weights, this
    cache and what is free (0 when over; the parts then add up to more than the GPU)."""
    parts = {
        "reserve": f.gpu_bytes - f.usable_bytes,
        "weights": f.weight_bytes,
        "KV cache": cache_bytes,
        "free": max(f.usable_bytes - f.weight_bytes - cache_bytes, 0),
    }
    per = SIZE_UNITS[unit]
    rows = [{"part": k, "size": v / per, "share": v / f.gpu_bytes} for k, v in parts.items()]
    return pd.DataFrame(rows, columns=["part", "size", "share"])


@memo_chart
def memory_split(df: pd.DataFrame, gpu_size: float, unit: str = "GB") -> alt.LayerChart:
    """fit_frame -> one stacked bar (reserve, weights, cache, free) against a tick at the GPU's size, both in `unit`;
    the axis names its unit (GB = 10⁹ B or GiB = 2³⁰ B)."""
    parts = list(df["part"])
    colors = {"reserve": MUTED, "weights": SEQUENCE_COLOR, "KV cache": TOKEN_COLOR, "free": "#E6E6E6"}
    title = "GPU memory (GB = 10⁹ B)" if unit == "GB" else "GPU memory (GiB = 2³⁰ B)"
    bar = (
        alt.Chart(df.assign(order=range(len(df)), row=""))
        .mark_bar(size=30)
        .encode(
            x=alt.X("size:Q", stack="zero", title=title, axis=alt.Axis(labelFlush=True)),  # '80' not cut
            y=alt.Y("row:N", title=None, axis=None),
            color=alt.Color(
                "part:N",
                title=None,
                sort=parts,
                scale=alt.Scale(domain=parts, range=[colors.get(p, BASE_COLOR) for p in parts]),
                legend=alt.Legend(orient="bottom"),
            ),
            order="order:Q",
            tooltip=["part:N", alt.Tooltip("size:Q", format=".2f", title=unit), alt.Tooltip("share:Q", format=".1%")],
        )
    )
    edge = alt.Chart(pd.DataFrame({"size": [gpu_size], "row": [""]})).encode(x="size:Q", y=alt.Y("row:N", axis=None))
    edge = edge.mark_tick(color=BASE_COLOR, thickness=3, size=36)  # the card's edge, across the bar, above its label
    return alt.layer(bar, edge).properties(height=130)  # the whole chart: bar, axis and legend


# --- the serving engine's fit ------------------------------------------------------------------


def engine_metrics(f: EngineFit) -> list[Metric]:
    """The cache, its blocks and tokens, the concurrency and the longest max_model_len that starts, labelled as
    the engine logs them, each note ending in the figure's kind; the last one's note says whether it starts at the
    max_model_len asked for."""
    longest = "any" if f.longest_max_model_len is None else f"{f.longest_max_model_len:,}"
    verdict = f"{'✓ starts' if f.starts else '✗ does not start'} at {f.max_model_len:,}"
    k = f.kinds
    return [
        (
            "Available KV cache memory",
            f"{formats.with_spec(f.kv_bytes / GIB, '.2f')} GiB",  # the lab's minus, as the breakdown and the CLI
            f"= {formats.with_spec(f.kv_bytes / GB, '.2f')} GB, {k['kv']}",
        ),
        ("GPU blocks", f"{f.num_blocks:,}", f"{binary_size(f.block_bytes)} each, {k['blocks']}"),
        (
            "GPU KV cache size",
            f"{f.tokens:,}",
            f"tokens, {'as vLLM prints it' if f.hybrid else 'all requests'}, {k['tokens']}",
        ),  # a long number fits; a hybrid's is not a capacity (vllm_hybrid.capacity_sentence)
        (
            f"Maximum concurrency for {f.max_model_len:,} tokens per request",
            f"{f.concurrency:.2f}×",
            f"full-length requests, {k['concurrency']}",
        ),
        ("Longest max_model_len that starts", longest, verdict),
    ]


def engine_formula(f: EngineFit) -> list[str]:
    """The deductions and the blocks as markdown lines with the numbers substituted, each marked exact (the
    engine's own arithmetic on exact inputs), estimate or measured (typed from a log): EngineFit.kinds, where a
    figure computed from an estimate is an estimate."""
    rows = {r["term"]: r for r in deductions(f)}
    lines = []
    for term, r in rows.items():
        sign = "" if term in ("budget", "KV cache") else "− "  # a deduction's size, after its minus
        gib = formats.with_spec(r["gib"] if term == "KV cache" else abs(r["gib"]), ".2f")  # the cache keeps its sign
        numbers = f" = {r['numbers']}" if r["numbers"] else ""
        lines.append(f"{sign}**{term}** = {r['formula']}{numbers} = **{gib} GiB** _({r['kind']})_")
    share = f"{f.group_size} layers" + (" of one group" if len(f.groups) > 1 else "")
    draft = f" + the drafter's {f.draft_layers} layers of its own page" if f.draft_block_bytes else ""
    draft_b = f" + {f.draft_block_bytes:,} B" if f.draft_block_bytes else ""
    lines.append(
        f"**blocks** = ⌊KV cache ÷ (page × {share}{draft})⌋ = ⌊{max(f.kv_bytes, 0):,} B ÷ ({f.page_bytes:,} B × "
        f"{f.group_size}{draft_b})⌋ = **{f.num_blocks:,}** blocks of {f.block_size} tokens _({f.kinds['blocks']})_"
    )
    if f.vllm_version is None:
        groups = sum(n for _, n in f.groups)
        per = f" ÷ {groups} groups" if groups > 1 else ""
        lines.append(f"**tokens** = blocks{per} × block_size = **{f.tokens:,}** _({f.kinds['tokens']})_")
    else:  # as the release prints it (serving.releases)
        lines.append(f"**tokens** = {tokens_formula(f)} = **{f.tokens:,}** _({f.kinds['tokens']})_")
    lines.append(
        f"**concurrency** = blocks ÷ blocks one request of {f.max_model_len:,} tokens needs = {f.num_blocks:,} ÷ "
        f"{f.blocks_per_request:,} = **{f.concurrency:.2f}×** _({f.kinds['concurrency']})_"
    )
    return lines


ENGINE_PARTS = (
    "weights",
    "non-torch",
    "activation peak",
    "LoRA, drafter, CUDA graphs",
    "KV cache",
    "kept free (1 − utilization)",
)


def engine_frame(f: EngineFit) -> pd.DataFrame:
    """Columns part, gib, share: the card's total as the engine divides it (a negative cache shows as 0 and the
    parts then add up to more than the card)."""
    extra = -sum(r["bytes"] for r in f.extra_rows)  # serving/adapters.py's deductions
    values = (f.weights_bytes, f.non_torch_bytes, f.activation_bytes, extra, max(f.kv_bytes, 0))
    values += (f.total_bytes - f.budget_bytes,)
    return pd.DataFrame(
        [{"part": p, "gib": v / GIB, "share": v / f.total_bytes} for p, v in zip(ENGINE_PARTS, values, strict=True)],
        columns=["part", "gib", "share"],
    )


@memo_chart
def engine_split(df: pd.DataFrame, total_gib: float) -> alt.LayerChart:
    """engine_frame -> one stacked bar in GiB against a tick at the card's total."""
    colors = [SEQUENCE_COLOR, "#EECA3B", "#E45756", "#B279A2", TOKEN_COLOR, MUTED]
    bar = (
        alt.Chart(df.assign(order=range(len(df)), row=""))
        .mark_bar(size=30)
        .encode(
            x=alt.X(
                "gib:Q",
                stack="zero",
                title="GPU memory (GiB = 2³⁰ B, as torch reports)",
                axis=alt.Axis(labelFlush=True),
            ),
            y=alt.Y("row:N", title=None, axis=None),
            color=alt.Color(
                "part:N",
                title=None,
                sort=list(ENGINE_PARTS),
                scale=alt.Scale(domain=list(ENGINE_PARTS), range=colors),
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=260),
            ),  # fmt: skip
            order="order:Q",
            tooltip=["part:N", alt.Tooltip("gib:Q", format=".2f", title="GiB"), alt.Tooltip("share:Q", format=".1%")],
        )
    )
    edge = alt.Chart(pd.DataFrame({"gib": [total_gib], "row": [""]})).encode(x="gib:Q", y=alt.Y("row:N", axis=None))
    return alt.layer(bar, edge.mark_tick(color=BASE_COLOR, thickness=3, size=36)).properties(height=170)


# --- the measured companion --------------------------------------------------


def benchmark_metrics(b: CacheBenchmark) -> list[Metric]:
    """The speed-up, whether both paths chose the same tokens, how far their logits drift, the cache's size."""
    return [
        (f"Speed-up at {b.lengths[-1]} tokens", f"{b.speedup:.1f}×", "recompute ÷ cached"),
        ("Same tokens", "✓ identical" if b.identical_tokens else "✗ differ", "greedy, both paths"),
        ("Max |logit deviation|", f"{b.max_abs_deviation:.1e}", f"{b.config.dtype} rounding"),
        ("Cache (formula)", binary_size(b.cache_bytes), f"{b.config.max_len} positions"),
    ]


def timing_frame(bench: CacheBenchmark) -> pd.DataFrame:
    """Columns generated, mode, seconds: the measured time of each generated length, with and without the cache."""
    return pd.DataFrame(bench.rows(), columns=["generated", "mode", "seconds"])


@memo_chart
def timing_chart(df: pd.DataFrame) -> alt.Chart:
    """timing_frame -> time against generated length, one line per mode."""
    return (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=50), strokeWidth=2)
        .encode(
            x=alt.X(
                "generated:Q",
                title="generated tokens",
                scale=alt.Scale(domain=[0, int(df["generated"].max())] if len(df) else alt.Undefined),
                axis=alt.Axis(values=sorted({int(n) for n in df["generated"]})),  # ticks on the lengths timed
            ),
            y=alt.Y("seconds:Q", title="seconds (median)"),
            color=alt.Color("mode:N", title=None, scale=MODE_COLORS, legend=alt.Legend(orient="bottom")),
            tooltip=["mode:N", "generated:Q", alt.Tooltip("seconds:Q", format=".4f")],
        )
        .properties(height=300)
    )
