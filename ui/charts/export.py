"""A chart as a file for slides and papers: its Vega-Lite spec rendered offline by vl-convert, as SVG, or as PNG at
twice the SVG's size (2 px per unit: sharp on a projector). A chart Streamlit stretches to its column is drawn as
wide as the whole main area of a 1,280 px window (MAIN_WIDTH), as a page shows it when the chart has a row of its own.
"""

from __future__ import annotations

import altair as alt
import vl_convert as vlc

from ui.charts.base import FIT_X, MAIN_WIDTH

PNG_SCALE = 2  # pixels per SVG unit
VEGA_LITE = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])  # the version Altair writes its specs in
NO_URLS: list[str] = []  # the data is in the spec: vl-convert fetches nothing (an url in a spec is refused)
MULTI_VIEW = ("facet", "hconcat", "vconcat", "concat", "repeat")  # drawn at their own width, never stretched


def figure_spec(chart: alt.TopLevelMixin, stretched: bool = False) -> dict:
    """The chart's Vega-Lite spec as a file draws it: a stretched single or layered view MAIN_WIDTH wide (its plot
    fitted to that width, axes and legend included), any other chart at the size its spec gives."""
    spec = chart.to_dict()
    if stretched and not any(key in spec for key in MULTI_VIEW) and not isinstance(spec.get("width"), int | float):
        spec = spec | {"width": MAIN_WIDTH}
        spec.setdefault("autosize", FIT_X.to_dict())
    return spec


def to_svg(spec: dict) -> str:
    """The spec drawn as an SVG document (text as <text> elements: editable, searchable)."""
    return vlc.vegalite_to_svg(spec, vl_version=VEGA_LITE, allowed_base_urls=NO_URLS)


def to_png(spec: dict, scale: float = PNG_SCALE) -> bytes:
    """The spec drawn as a PNG, `scale` pixels per SVG unit."""
    return vlc.vegalite_to_png(spec, vl_version=VEGA_LITE, scale=scale, allowed_base_urls=NO_URLS)
