"""The calculator pages' tables, metric texts and charts, without a browser: pure functions over library results."""

from __future__ import annotations

import dataclasses

import pytest

from attncore.config import ModelConfig
from serving import kvcache
from serving import parameters as calc
from serving.kvbench import CacheBenchmark
from serving.presets import PRESETS, get_preset
from ui.charts import calculators as cc


def layers(chart) -> list[dict]:
    spec = chart.to_dict()
    return spec.get("layer", [spec])


def color_scale(layer: dict) -> dict:
    return layer["encoding"]["color"]["scale"]


# --- text ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, binary, decimal",
    [
        (999, "999 B", "999 B"),
        (2**10, "1.00 KiB", "1.02 kB"),
        (1_610_612_736, "1.50 GiB", "1.61 GB"),
        (80 * 10**9, "74.5 GiB", "80.0 GB"),
        (2**40, "1.00 TiB", "1.10 TB"),  # three digits kept: not '1.1 TB' beside '1.02 kB'
    ],
)
def test_sizes_in_binary_and_decimal_units(n, binary, decimal):
    assert cc.binary_size(n) == binary and cc.decimal_size(n) == decimal


@pytest.mark.parametrize("n, text", [(27_253, "27.3k"), (124_439_808, "124M"), (8_030_261_248, "8.03B"), (7, "7")])
def test_count_text(n, text):
    assert cc.count_text(n) == text


def test_count_metrics_mark_the_published_figure():
    arch = get_preset("gpt2").arch
    count = calc.count_parameters(arch)
    total, published, non_embedding, weights = cc.count_metrics(count, 124_439_808, "gpt2", modified=False)
    assert total == ("Total parameters", "124,439,808", "124M")
    assert published == ("Published (gpt2)", "124,439,808", "✓ equals the count")
    assert non_embedding[1:] == ("85.1M", f"{count.total - 50257 * 768 - 1024 * 768:,}")
    assert weights[1] == "249 MB"  # 2 bytes per parameter
    changed = calc.count_parameters(dataclasses.replace(arch, tied_embeddings=False))
    assert cc.count_metrics(changed, 124_439_808, "gpt2", modified=True)[1][2] == f"{50257 * 768:+,} after your changes"
    assert cc.count_metrics(count, None, "custom", modified=False)[1][1] == "—"


def test_cache_and_fit_metrics_of_llama_3_8b():
    cache = kvcache.kv_cache_for(get_preset("llama-3-8b").arch, 8192, 4, "fp16")
    metrics = dict((label, (value, note)) for label, value, note in cc.cache_metrics(cache))
    assert metrics["KV cache, binary units"][0] == "4.00 GiB" and metrics["KV cache, decimal units"][0] == "4.29 GB"
    assert metrics["Per token"][0] == "131,072 B" and metrics["Cache / weights"][1] == "GQA cache"
    assert metrics["Cache / weights"][0] == f"{cache.bytes / (2 * 8_030_261_248):.3g}×"
    fit = kvcache.fit(cache, 80)
    metrics = cc.fit_metrics(fit, cache)
    assert [(label, note) for label, _, note in metrics[1:3]] == [
        ("Longest context", "at batch 4, estimate"),
        ("Largest batch", "at context 8,192, estimate"),
    ]
    assert all(note.endswith(", estimate") for _, _, note in metrics)  # each figure labelled
    assert cc.fit_metrics(fit, cache)[0][1] == f"{(72 * 10**9 - 2 * 8_030_261_248) // 131_072:,}"
    windowed = kvcache.kv_cache_for(get_preset("mistral-7b-v0.1").arch, 65536, 1, "fp16")
    assert cc.fit_metrics(kvcache.fit(windowed, 80), windowed)[1][1] == "any"
    bare = kvcache.kv_cache(2, 2, 8, 16)
    assert [v for _, v, _ in cc.cache_metrics(bare)][3:] == ["not counted", "—"]


def test_a_huge_cache_to_weights_ratio_fits_its_metric():
    """The KV cache page at context 100,000,000 and batch 100,000 showed '8.16e+0…' (cut in its column)."""
    assert [cc.cache_ratio(x) for x in (0.5373, 4.2, 512.4, 9999, 81_600_000)] == [
        "0.537×", "4.2×", "512×", "1.00e4×", "8.16e7×"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "n, text",
    [(8192, "8,192"), (9_999_999, "9,999,999"), (10**8, "100M"), (99_000_000, "99M"), (12_345_678, "≈12.35M")],
)
def test_a_long_context_is_written_in_millions_in_the_narrow_note(n, text):
    """CI's Chromium clipped 'at context 100,000,000, estimate' at 1,280 px; rounded counts say so (≈)."""
    assert cc.short_count(n) == text
    cache = kvcache.kv_cache_for(get_preset("llama-3-8b").arch, n, 1, "fp16")
    assert cc.fit_metrics(kvcache.fit(cache, 80), cache)[2][2] == f"at context {text}, estimate"


# --- parameters ----------------------------------------------------------------------------------


def test_breakdown_frame_and_share_chart():
    count = calc.count_parameters(calc.describe_attncore(ModelConfig()))
    df = cc.breakdown_frame(count)
    assert list(df["component"]) == list(calc.COMPONENTS) and df["params"].sum() == 27_253
    assert df["share"].sum() == pytest.approx(1.0)
    bars, labels = layers(cc.share_chart(df))
    assert bars["mark"]["type"] == "bar" and color_scale(bars)["domain"] == list(calc.COMPONENTS)
    assert labels["mark"]["type"] == "text" and labels["encoding"]["text"]["field"] == "label"
    gpt2 = cc.share_chart(cc.breakdown_frame(calc.count_parameters(PRESETS["gpt2"].arch))).data
    assert set(gpt2["label"]) >= {"<0.1%", "0%"}  # norms: 38,400 of 124M; a tied head: none (lab.formats.share)


def test_crosscheck_frame_marks_equality():
    rows = [{"component": "ffn", "formula": 10, "model": 10, "equal": True}]
    rows.append({"component": "total", "formula": 11, "model": 12, "equal": False})
    assert list(cc.crosscheck_frame(rows)["equal"]) == ["✓", "✗"]


# --- the key-value cache -------------------------------------------------------------------------


@pytest.mark.parametrize("context", [1, 100, 4096, 8192, 100_000])
def test_chart_contexts_surround_the_chosen_context(context):
    grid = cc.chart_contexts(context)
    assert context in grid and grid == sorted(set(grid)) and grid[-1] >= 4 * context and grid[0] <= 256


def test_memory_chart_colours_by_attention_kind_with_rules():
    geometry = kvcache.cache_geometry(get_preset("deepseek-v2-lite").arch)
    df = cc.curves_frame(kvcache.cache_curves(contexts=[1024, 4096], **geometry))
    assert set(df["attention"]) == {"MHA", "MQA", "MLA"} and len(df) == 6
    chart = layers(cc.memory_chart(df, context=4096, budget_gib=10.0, log=True))
    lines = chart[0]
    scale = color_scale(lines)
    kinds = [df.loc[df["variant"] == v, "attention"].iloc[0] for v in scale["domain"]]
    assert scale["range"] == [cc.ATTENTION_COLORS[k] for k in kinds]
    assert lines["encoding"]["y"]["scale"]["type"] == "log"
    assert len(chart) == 4  # lines, the chosen context, the GPU's room for the cache and its label
    assert len(layers(cc.memory_chart(df, log=False))) == 1
    assert len(layers(cc.memory_chart(df, budget_gib=-1.0))) == 1  # weights alone do not fit: no room to draw


def test_memory_chart_axis_fits_the_contexts_with_ticks_on_them():
    """Contexts 256 to 32,768: the axis spans exactly them (not 100 to 100k) with ticks on powers of two."""
    geometry = kvcache.cache_geometry(get_preset("llama-3-8b").arch)
    contexts = cc.chart_contexts(8192)
    df = cc.curves_frame(kvcache.cache_curves(contexts=contexts, **geometry))
    x = layers(cc.memory_chart(df, context=8192, log=True))[0]["encoding"]["x"]
    assert x["scale"] == {"type": "log", "domain": [256, 32768], "nice": False}
    assert set(x["axis"]["values"]) <= set(contexts) and x["axis"]["values"][0] == 256
    assert len(x["axis"]["values"]) <= 8 and x["axis"]["format"] == ","


def test_timing_chart_ticks_on_the_generated_lengths():
    cfg = ModelConfig(d_model=32, n_heads=4, n_layers=2, max_len=96, dtype="float64")
    bench = CacheBenchmark(cfg, 32, 1, (8, 16, 32, 64), (0.1,) * 4, (0.2,) * 4, 1e-15, True, 1)
    x = layers(cc.timing_chart(cc.timing_frame(bench)))[0]["encoding"]["x"]
    assert x["axis"]["values"] == [8, 16, 32, 64] and x["scale"]["domain"] == [0, 64]


def test_dtype_bars_highlight_the_chosen_type():
    df = cc.curves_frame(kvcache.dtype_curves(2, 4, 4, 16, [10]))
    bars, _ = layers(cc.dtype_bars(df, "int8"))
    assert bars["encoding"]["color"]["condition"]["test"] == "(datum.dtype === 'int8')"
    assert list(df["dtype"]) == list(kvcache.DTYPES)


def test_fit_frame_divides_the_gpu():
    cache = kvcache.kv_cache_for(get_preset("llama-3-8b").arch, 8192, 4, "fp16")
    fit = kvcache.fit(cache, 80, 0.1)
    df = cc.fit_frame(fit, cache.bytes).set_index("part")
    assert list(df.index) == ["reserve", "weights", "KV cache", "free"]
    assert df["size"].sum() == pytest.approx(80) and df.loc["reserve", "size"] == pytest.approx(8)
    assert df.loc["weights", "size"] == pytest.approx(2 * 8_030_261_248 / 1e9)
    too_big = kvcache.kv_cache_for(get_preset("llama-3-70b").arch, 8192, 4, "fp16")
    over = cc.fit_frame(kvcache.fit(too_big, 80), too_big.bytes).set_index("part")
    assert over.loc["free", "size"] == 0 and over["size"].sum() > 80
    assert len(layers(cc.memory_split(over.reset_index(), 80))) == 2


def test_a_fit_in_gib_says_gib_everywhere_and_its_axis_names_the_unit():
    cache = kvcache.kv_cache_for(get_preset("llama-3-8b").arch, 8192, 4, "fp16")
    fit = kvcache.fit(cache, 79.22 * 2**30 / 1e9, 0.1)  # an H100 as the driver reports it
    df = cc.fit_frame(fit, cache.bytes, "GiB").set_index("part")
    assert df["size"].sum() == pytest.approx(79.22) and df.loc["KV cache", "size"] == pytest.approx(4)
    message = cc.fit_message(fit, cache, "GiB")
    assert message.startswith("Fits: ") and "GB" not in message.replace("GiB", "")
    assert f"{0.9 * 79.22:.1f} GiB usable (79.22 GiB less 10% reserved)" in message
    metrics = {label: (value, note) for label, value, note in cc.fit_metrics(fit, cache, "GiB")}
    left = metrics["Left for the cache"]
    assert left[0].endswith("GiB") and left[1] == "of 79.22 GiB, estimate"
    axes = {}
    for unit in ("GB", "GiB"):
        bar = layers(cc.memory_split(cc.fit_frame(fit, cache.bytes, unit).reset_index(), 80, unit))[0]
        axes[unit] = bar["encoding"]["x"]["title"]
    assert axes == {"GB": "GPU memory (GB = 10⁹ B)", "GiB": "GPU memory (GiB = 2³⁰ B)"}  # no '10^9'
    over = kvcache.fit(kvcache.kv_cache_for(get_preset("llama-3-70b").arch, 8192, 4, "fp16"), 80)
    assert cc.fit_message(over, cache, "GB").startswith("Does not fit: the weights alone need")


# --- the measured companion ----------------------------------------------------------------------


def test_timing_frame_chart_and_metrics():
    cfg = ModelConfig(d_model=32, n_heads=4, n_layers=2, max_len=40, dtype="float64")
    bench = CacheBenchmark(cfg, 32, 1, (2, 4, 8), (0.01, 0.02, 0.04), (0.02, 0.08, 0.32), 3e-15, True, 40_960)
    df = cc.timing_frame(bench)
    assert list(df.columns) == ["generated", "mode", "seconds"] and len(df) == 6
    assert df.groupby("mode")["seconds"].max().to_dict() == {"with cache": 0.04, "recompute": 0.32}
    assert color_scale(layers(cc.timing_chart(df))[0])["domain"] == ["with cache", "recompute"]
    speedup, same, deviation, size = cc.benchmark_metrics(bench)
    assert speedup[:2] == ("Speed-up at 8 tokens", "8.0×") and same[1] == "✓ identical"
    assert deviation[1] == "3.0e-15" and size[1] == "40.0 KiB"


# --- the serving engine's fit --------------------------------------------------------------------


def test_engine_frame_split_formula_and_metrics():
    from serving.engine import EngineSettings, engine_fit

    s = EngineSettings(version="v0", non_torch_gib=0.10, activation_gib=9.37)
    fit = engine_fit(get_preset("llama-3-8b").arch, 39.50, s)
    df = cc.engine_frame(fit).set_index("part")
    assert list(df.index) == list(cc.ENGINE_PARTS) and df["gib"].sum() == pytest.approx(39.50)
    assert df.loc["activation peak", "gib"] == pytest.approx(9.37) and df.loc["KV cache", "gib"] == pytest.approx(
        11.12, abs=0.005
    )
    assert df.loc["kept free (1 − utilization)", "gib"] == pytest.approx(3.95)
    chart = layers(cc.engine_split(df.reset_index(), 39.50))
    assert len(chart) == 2 and color_scale(chart[0])["domain"] == list(cc.ENGINE_PARTS)
    assert chart[0]["encoding"]["x"]["title"].startswith("GPU memory (GiB")
    lines = cc.engine_formula(fit)
    assert lines[0] == "**budget** = total × gpu_memory_utilization = 39.50 GiB × 0.90 = **35.55 GiB** _(exact)_"
    assert f"= **{fit.num_blocks:,}** blocks of 16 tokens" in lines[5] and f"÷ {512:,} = **11.12×**" in lines[7]
    labels = [m[0] for m in cc.engine_metrics(fit)]
    assert labels[1:4] == ["GPU blocks", "GPU KV cache size", "Maximum concurrency for 8,192 tokens per request"]
    broke = engine_fit(get_preset("llama-3-70b").arch, 39.50, EngineSettings())
    assert cc.engine_frame(broke).set_index("part").loc["KV cache", "gib"] == 0  # no negative bar


# --- sizes past 2⁶³ B and labels that fit ------------------------------------------------------------


def test_curve_frames_of_caches_past_int64_convert_to_arrow_with_every_digit_kept():
    """A context and batch at the KV page's tops give caches past 2⁶³ B: Python ints Arrow cannot hold."""
    import pyarrow as pa

    geometry = kvcache.cache_geometry(get_preset("llama-3-70b").arch)
    rows = kvcache.cache_curves(contexts=cc.chart_contexts(10**8), batch=10**6, **geometry)
    assert max(r["bytes"] for r in rows) > 2**63
    df = cc.curves_frame(rows)
    pa.Table.from_pandas(df)  # raised 'Python int too large to convert to C long'
    assert list(df["bytes_text"]) == [f"{r['bytes']:,}" for r in rows]
    for chart in (cc.memory_chart(df, 10**8, 10.0), cc.dtype_bars(cc.curves_frame(kvcache.dtype_curves(
            contexts=[10**8], batch=10**6, **geometry)), "fp16")):  # fmt: skip
        tooltips = [t.get("field") for layer in layers(chart) for t in layer["encoding"].get("tooltip", [])]
        assert "bytes_text" in tooltips and "bytes" not in tooltips


def test_dtype_bars_are_rows_with_room_for_each_label():
    """Side by side, seven columns in a third of the page ran their labels together ('1.00 GiB1.00 GiB'); as rows
    each label has the width past its bar, and the axis leaves room for the longest one."""
    df = cc.curves_frame(kvcache.dtype_curves(32, 32, 8, 128, [8192]))
    bars, labels = layers(cc.dtype_bars(df, "fp16"))
    assert bars["encoding"]["y"]["field"] == "dtype" and bars["encoding"]["x"]["field"] == "gib"
    assert labels["mark"]["align"] == "left" and labels["encoding"]["text"]["field"] == "label"
    assert bars["encoding"]["x"]["scale"]["domain"][1] >= 1.2 * df["gib"].max()


def test_share_chart_leaves_room_for_the_longest_bars_label():
    count = calc.count_parameters(get_preset("llama-3-70b").arch)  # the FFN holds 80 %
    df = cc.breakdown_frame(count)
    bars, _ = layers(cc.share_chart(df))
    top = bars["encoding"]["x"]["scale"]["domain"][1]
    assert 1.2 * df["share"].max() <= top <= 1.0


def test_engine_formula_and_metrics_mark_each_figure_by_what_it_rests_on():
    from serving.engine import EngineSettings, engine_fit

    estimated = engine_fit(get_preset("llama-3-8b").arch, 39.50, EngineSettings(), gpu="a100-40gb")
    lines = cc.engine_formula(estimated)
    assert lines[0].endswith("_(measured (published log))_")  # the A100's total: read from a vLLM log
    assert all(line.endswith("_(estimate)_") for line in lines[1:])
    assert all(note.endswith("estimate") for _, _, note in cc.engine_metrics(estimated)[:4])
    logged = EngineSettings(version="v0", weights_gib=14.96, non_torch_gib=0.1, activation_gib=9.37)
    measured = engine_fit(get_preset("llama-3-8b").arch, 39.50, logged, gpu="a100-40gb")
    assert all(line.endswith("_(measured)_") for line in cc.engine_formula(measured)[1:])
