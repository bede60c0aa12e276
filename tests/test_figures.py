"""Figures for slides and papers: every chart goes through ui.figure.show_chart (SVG and PNG downloads), renders
offline with every axis title, legend title and legend label whole, and nothing is rendered while a page runs."""

from __future__ import annotations

import ast
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attncore.evaluate import EvalResult, LengthResult
from attncore.mechanisms import demos as mech
from lab.jobs.memo import Memo
from serving import kvcache
from serving import parameters as calc
from serving.presets import PRESETS, get_preset
from ui import figure, frames
from ui.charts import (
    base,
    calculators,
    compare,
    cost,
    export,
    gradcheck,
    grokking,
    induction,
    masks,
    position,
    regimes,
    runs,
    scaling,
    sinks,
)
from ui.charts import interpret as interpret_charts

ROOT = Path(__file__).resolve().parents[1]
SVG_TEXT = "{http://www.w3.org/2000/svg}text"
LEGEND_CHANNELS = ("color", "fill", "stroke", "shape", "strokeDash", "opacity", "size", "strokeWidth")


# --- every chart through the wrapper ------------------------------------------------------------


def test_no_page_or_view_draws_a_chart_without_its_downloads():
    """A st.altair_chart (or column.altair_chart) call anywhere in app_pages/ or ui/ but the wrapper itself."""
    found = []
    for path in [*ROOT.glob("app_pages/*.py"), *ROOT.glob("ui/**/*.py")]:
        if path == ROOT / "ui" / "figure.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "altair_chart":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"draw these with ui.figure.show_chart: {found}"


def test_tables_are_dataframes_whose_toolbar_downloads_csv():
    """st.dataframe's toolbar offers the CSV (unless rows load lazily or data export is off); st.table does not."""
    for path in [*ROOT.glob("app_pages/*.py"), *ROOT.glob("ui/**/*.py")]:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("table", "dataframe"):
                if node.func.attr == "table" and getattr(node.func.value, "id", "") == "st":
                    pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno}: st.table has no CSV download")
                lazy = [k for k in node.keywords if k.arg == "lazy"]
                assert not lazy, f"{path.relative_to(ROOT)}:{node.lineno}: lazy rows have no CSV download"
    assert "disableDataExport" not in (ROOT / ".streamlit" / "config.toml").read_text()


# --- charts of each kind, rendered --------------------------------------------------------------


def _bands(levels: list[str]) -> pd.DataFrame:
    n = len(levels)
    return pd.DataFrame(
        {"level": [lv for lv in levels for _ in range(3)], "step": [1, 50, 100] * n, "seeds": 3}
        | {"mean": [2.0, 1.0, 0.5] * n, "min": [1.8, 0.9, 0.4] * n, "max": [2.2, 1.1, 0.6] * n}
    )


LEVELS = ["base: 1,500 steps", "no scaling", "no position", "post-LN", "pre-LN, lr 1e-2", "post-LN, lr 1e-2"]


def _kv_curves() -> pd.DataFrame:
    geometry = kvcache.cache_geometry(get_preset("deepseek-v2-lite").arch)
    return calculators.curves_frame(kvcache.cache_curves(contexts=[1024, 4096, 16384], **geometry))


def _accuracy_long() -> pd.DataFrame:
    return pd.DataFrame(
        {"task": ["copy"] * 4 + ["sort"] * 4, "length": [4, 4, 8, 8] * 2, "seeds": 3}
        | {"metric": ["per-token", "per-sequence"] * 4, "mean": [1.0, 0.9, 0.95, 0.8] * 2}
        | {"min": [1.0, 0.8, 0.9, 0.7] * 2}
    )


def _mask_demo() -> dict:
    return mech.mask_order_demo(6, 0)


def _cost_frame() -> pd.DataFrame:
    frame = pd.DataFrame({"T": [64, 128, 256], "ms": [1.0, 4.0, 16.0], "T × T scores (MiB)": [1.0, 2.0, 3.0]})
    return frame.assign(**{"Q, K, V (MiB)": [0.1, 0.2, 0.3]})


def _against() -> pd.DataFrame:
    rows = [
        {"variant": v, "lr": lr, "metric": m, "mean": 0.5 + i, "min": 0.4 + i, "max": 0.6 + i, "n": 3}
        for i, v in enumerate(["pre-LN", "post-LN", "post-LN, no scaling"])
        for lr in (1e-3, 3e-3, 1e-2)
        for m in regimes.METRIC_TITLES
    ]
    return pd.DataFrame(rows)


def _grokking_curves() -> tuple[pd.DataFrame, pd.DataFrame]:
    curves = pd.DataFrame(
        {"variant": "weight decay 1", "seed": 0, "step": [1, 2, 1, 2], "figure": "accuracy"}
        | {"part": ["training", "training", "held out", "held out"], "value": [0.5, 1.0, 0.1, 0.9]}
    )
    return curves, pd.DataFrame({"variant": ["weight decay 1"], "seed": [0], "step": [2]})


def _sink_shares() -> pd.DataFrame:
    return pd.DataFrame(
        {"head": ["L0H0", "L0H1"] * 2, "role": ["sink head", "other heads"] * 2, "seed": 0}
        | {"step": [10, 10, 100, 100], "share": [0.3, 0.2, 0.9, 0.1]}
    )


DIVERGENCES = {
    "row": [0.1, 0.9],
    "adversarial": [{"jsd": 0.2, "tvd": 0.005, "feasible": True, "row": [0.5, 0.5]}],
    "seed_jsd": [{"seed": 1, "jsd": 0.3, "closest_head": 2, "closest_head_jsd": 0.01, "row": [0.3, 0.7]}],
}


CHARTS = {
    # lines with a legend below (layered over bands)
    "compare.band_curves": lambda: compare.band_curves(_bands(LEVELS)),
    "calculators.memory_chart": lambda: calculators.memory_chart(_kv_curves(), 4096, 10.0, True),
    "runs.accuracy_vs_length": lambda: runs.accuracy_vs_length(_accuracy_long()),
    "runs.length_curves": lambda: runs.length_curves(
        frames.length_frame({"ALiBi": [[LengthResult(n, 0.5, 0.1) for n in range(1, 13)]]}), 8, 16
    ),
    "position.encoding_lines": lambda: position.encoding_lines(np.sin(np.arange(48.0)).reshape(12, 4), [0, 2]),
    "cost.memory_chart": lambda: cost.memory_chart(_cost_frame()),
    # heatmaps with a colour legend: a gradient (numbers), a nominal one, facets
    "base.heatmap": lambda: base.heatmap(base.grid_frame(np.eye(4) * 0.9, ("query", "key"), "weight"), "key", "query"),
    "masks.mask_heatmap": lambda: masks.mask_heatmap(
        np.tri(4, dtype=bool)[None].repeat(2, 0), ("sequence", "query", "key"), facet="sequence"
    ),
    # bars
    "calculators.dtype_bars": lambda: calculators.dtype_bars(
        calculators.curves_frame(kvcache.dtype_curves(2, 4, 4, 16, [10])), "int8"
    ),
    "calculators.share_chart": lambda: calculators.share_chart(
        calculators.breakdown_frame(calc.count_parameters(PRESETS["gpt2"].arch))
    ),
    "runs.breakdown_bars": lambda: runs.breakdown_bars(
        frames.breakdown_frame({"full": EvalResult(0.9, 0.5, 1.0, 220, 0.8, 280, 0.01)})
    ),
    # layered: cells beside bars, points with a fitted line, lines with error bars
    "masks.weights_with_row_sums": lambda: masks.weights_with_row_sums(
        _mask_demo()["weights_after"], _mask_demo()["row_sums_after"], "after", _mask_demo()["causal"]
    ),
    "cost.time_chart": lambda: cost.time_chart(_cost_frame(), 2.0),
    "regimes.against": lambda: regimes.against(_against(), "lr", "learning rate", log_x=True),
    "position.param_chart": lambda: position.param_chart(mech.attention_param_counts(64)),
    # one of each other page group's
    "scaling.statistic_chart": lambda: scaling.statistic_chart(
        scaling.scaling_long(mech.scaling_statistics((4, 64), n_keys=32, repetitions=20, seed=1)), "entropy"
    ),
    "gradcheck.gradcheck_chart": lambda: gradcheck.gradcheck_chart(
        [
            {"norm": norm, "tensor": f"blocks.{i}.attn.W_q", "eps": eps, "n_checked": 4, "n_eligible": 9}
            | {"max_rel_dev": 1e-7 * (i + 1) / eps}
            for norm in ("pre", "post")
            for eps in (1e-6, 1e-4)
            for i in range(3)
        ]
    ),
    "grokking.accuracy_curves": lambda: grokking.accuracy_curves(*_grokking_curves(), (2, 2)),
    "induction.head_scores": lambda: induction.head_scores(
        pd.DataFrame(
            {"pattern": "induction", "head": ["L0H0", "L1H0"] * 2, "step": [100, 100, 200, 200]}
            | {"score": [0.1, 0.2, 0.3, 0.9]}
        )
    ),
    "interpret.divergences": lambda: interpret_charts.divergences(DIVERGENCES),
    "interpret.detection_scores": lambda: interpret_charts.detection_scores(
        {"L back": np.array([[0.9, 0.1]]), "previous token": np.array([[0.0, 0.5]])}
    ),
    "sinks.sink_share": lambda: sinks.sink_share(_sink_shares(), 0.125),
}


def svg_texts(svg: str) -> list[str]:
    return ["".join(t.itertext()).strip() for t in ET.fromstring(svg).iter(SVG_TEXT)]


def _rows(spec: dict, data) -> list[dict]:
    if isinstance(data, dict) and "name" in data:
        return spec.get("datasets", {}).get(data["name"], [])
    if isinstance(data, dict) and "values" in data:
        return data["values"]
    return []


def expected_texts(spec: dict) -> tuple[set[str], set[str]]:
    """(titles, legend labels) a reader must find: the explicit axis and legend titles, a legend's default title
    (its field), and every entry of a nominal or ordinal legend (its scale's domain, else the field's values)."""
    titles, labels = set(), set()

    def visit(node, data):
        if isinstance(node, list):
            for item in node:
                visit(item, data)
            return
        if not isinstance(node, dict):
            return
        data = node.get("data", data)
        for channel, enc in (node.get("encoding") or {}).items():
            if not isinstance(enc, dict) or "field" not in enc:
                continue
            if channel in ("x", "y") and enc.get("axis", {}) is not None:
                title = enc.get("title", (enc.get("axis") or {}).get("title"))
                titles.update([title] if isinstance(title, str) and title else [])
            if channel in LEGEND_CHANNELS and enc.get("legend", {}) is not None:
                legend = enc.get("legend") or {}
                title = legend.get("title", enc.get("title", enc["field"]))
                titles.update([title] if isinstance(title, str) and title else [])
                if enc.get("type") in ("nominal", "ordinal") and "labelExpr" not in legend:
                    domain = (enc.get("scale") or {}).get("domain")
                    if not isinstance(domain, list):
                        domain = [r[enc["field"]] for r in _rows(spec, data) if enc["field"] in r]
                    labels.update(str(v) for v in domain)
        for key in ("layer", "spec", "hconcat", "vconcat", "concat"):
            if key in node:
                visit(node[key], data)

    visit(spec, spec.get("data"))
    return titles, labels


def _shown_whole(text: str, texts: list[str]) -> bool:
    """The text is one <text> element, or one part of a title Vega-Lite joined from several layers' ("a, b")."""
    return any(t == text or t.startswith(text + ", ") or t.endswith(", " + text) for t in texts)


@pytest.mark.parametrize("kind", list(CHARTS))
def test_a_chart_renders_to_svg_with_every_title_and_legend_label_whole(kind):
    chart = CHARTS[kind]()
    spec = export.figure_spec(chart, stretched=True)
    texts = svg_texts(export.to_svg(spec))
    titles, labels = expected_texts(spec)
    assert titles, f"{kind}: no title found in the spec to check"
    cut = [t for t in texts if "…" in t]
    assert not cut, f"{kind}: labels cut short: {cut}"
    missing = sorted(t for t in titles | labels if not _shown_whole(t, texts))
    assert not missing, f"{kind}: not drawn whole: {missing} (drawn: {texts})"


def test_the_band_curves_show_their_legend():
    """The lines' legend names every level: the bands' fill (no legend of its own) once disabled it for both."""
    texts = svg_texts(export.to_svg(export.figure_spec(compare.band_curves(_bands(LEVELS)))))
    assert all(level in texts for level in LEVELS)


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


@pytest.mark.parametrize("kind", ["compare.band_curves", "masks.mask_heatmap"])
def test_the_png_is_the_svg_at_twice_its_size(kind):
    spec = export.figure_spec(CHARTS[kind](), stretched=True)
    svg = ET.fromstring(export.to_svg(spec))
    width, height = float(svg.attrib["width"]), float(svg.attrib["height"])
    assert _png_size(export.to_png(spec)) == (round(2 * width), round(2 * height))
    assert export.PNG_SCALE == 2


def test_a_stretched_view_is_drawn_as_wide_as_the_main_area_and_a_facet_as_its_spec_says():
    line = export.figure_spec(compare.band_curves(_bands(LEVELS)), stretched=True)
    assert line["width"] == base.MAIN_WIDTH
    assert float(ET.fromstring(export.to_svg(line)).attrib["width"]) == base.MAIN_WIDTH
    assert "width" not in export.figure_spec(compare.band_curves(_bands(LEVELS)), stretched=False)
    facet = CHARTS["masks.mask_heatmap"]()
    assert export.figure_spec(facet, stretched=True) == facet.to_dict()


def test_a_render_fetches_nothing():
    spec = {"data": {"url": "http://127.0.0.1:9/data.json"}, "mark": "point"}
    with pytest.raises(ValueError, match="not allowed"):
        export.to_svg(spec)


# --- the wrapper: nothing rendered while a page runs; a click's render kept ---------------------


def _counting(monkeypatch) -> list[str]:
    calls = []
    to_svg, to_png = export.to_svg, export.to_png
    monkeypatch.setattr(export, "to_svg", lambda spec: calls.append("svg") or to_svg(spec))
    monkeypatch.setattr(export, "to_png", lambda spec: calls.append("png") or to_png(spec))
    return calls


def _page():
    import numpy as np
    import streamlit as st

    from ui.charts.base import grid_frame, heatmap
    from ui.figure import show_chart

    left, right = st.columns(2)
    for col, k in ((left, 1), (right, 2)):
        map_ = grid_frame(np.eye(3) * k / 2, ("query", "key"), "weight")
        show_chart(heatmap(map_, "key", "query"), f"map {k}", where=col)


def test_a_page_run_renders_nothing_and_offers_svg_and_png_under_each_chart(monkeypatch):
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.testing.v1 import AppTest

    calls, deferred = _counting(monkeypatch), {}
    add_deferred = MediaFileManager.add_deferred

    def keep(self, data, mimetype, coordinates, file_name=None, **kw):  # what a click would run, by file name
        deferred[file_name] = (data, mimetype)
        return add_deferred(self, data, mimetype, coordinates, file_name=file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    at = AppTest.from_function(_page).run(timeout=120)  # a busy machine: the default 3 s is a clock, not an event
    assert not at.exception
    assert calls == []  # rendering waits for a click
    assert len(at.get("popover")) == 2 and len(at.get("vega_lite_chart")) == 2
    assert [b.proto.label.split()[0] for b in at.get("download_button")] == ["SVG", "PNG"] * 2
    assert all(b.proto.deferred_file_id for b in at.get("download_button"))
    stem = Path(at._script_path).stem  # the page's name: its script's, outside st.navigation
    assert set(deferred) == {f"{stem}-map-{k}.{fmt}" for k in (1, 2) for fmt in ("svg", "png")}
    render, mime = deferred[f"{stem}-map-2.svg"]
    assert mime == "image/svg+xml" and deferred[f"{stem}-map-2.png"][1] == "image/png"
    drawn = render()
    assert drawn.startswith(b"<svg") and calls == ["svg"]
    assert {"query", "key", "weight"} <= set(svg_texts(drawn.decode()))


def test_a_render_is_kept_per_spec_and_made_once(monkeypatch):
    calls = _counting(monkeypatch)
    monkeypatch.setattr(figure, "RENDERS", Memo(8))  # a memo of the test's own
    chart = CHARTS["cost.memory_chart"]()
    first = figure.rendered(chart, "png", stretched=True)
    assert figure.rendered(chart, "png", stretched=True) is first and calls == ["png"]
    assert figure.rendered(chart, "png", stretched=False) != first and calls == ["png", "png"]


@pytest.mark.parametrize(("text", "slug"), [("KV cache: memory", "kv-cache-memory"), ("map 2", "map-2"), ("../x", "x")])
def test_a_file_name_part_is_letters_digits_and_dashes(text, slug):
    assert figure.slug(text) == slug
