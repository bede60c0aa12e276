"""Charts of the Grokking page as pure functions: grokking frames in, alt.Chart out. Training accuracy blue and
held-out orange (the app's per-token/per-sequence pair: the held-out part is what changes late), each seed a thin
line on a log step axis, the final window shaded and the spikes marked; every chart sized to fit a 1,280 px main
area."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ui.charts.base import BASE_COLOR, SEQUENCE_COLOR, TOKEN_COLOR, VARIANT_COLORS, panel_width
from ui.charts.memo import memo_chart

PARTS = alt.Scale(domain=["training", "held out"], range=[TOKEN_COLOR, SEQUENCE_COLOR])
SPIKE_COLOR = "#D62728"  # a spike's mark: red, apart from the blue and orange curves
WHEN = alt.Scale(domain=["at initialisation", "at the end"], range=["#BBBBBB", BASE_COLOR])


def _step_axis() -> alt.X:
    return alt.X("step:Q", title="training step (log scale)", scale=alt.Scale(type="log", nice=False))


@memo_chart
def accuracy_curves(
    curves: pd.DataFrame, spikes: pd.DataFrame | None = None, window: tuple[int, int] | None = None, height: int = 220
) -> alt.FacetChart:
    """grokking.curves_frame: per variant a panel of the training and held-out accuracy of every seed against
    the step (log axis), a dotted rule at 99 %; the final window (its first and last step) shaded grey, and each
    spike (lab.experiments.grokking.spikes_frame: variant, seed, step) a red triangle at its step along the top."""
    variants = list(dict.fromkeys(curves["variant"]))
    parts = [curves[curves["figure"] == "accuracy"].assign(kind="curve")]
    if window is not None:
        parts.append(pd.DataFrame({"variant": variants, "step": window[0], "step_end": window[1], "kind": "window"}))
    if spikes is not None and len(spikes):
        parts.append(spikes.assign(kind="spike", value=1.0))
    data = pd.concat(parts, ignore_index=True)
    tooltip = ["variant:N", "seed:O", "step:Q", "part:N", alt.Tooltip("value:Q", format=".3f", title="accuracy")]
    lines = (
        alt.Chart()
        .mark_line(strokeWidth=1.2, opacity=0.8)
        .encode(
            x=_step_axis(),
            y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("part:N", scale=PARTS, title=None, legend=alt.Legend(orient="bottom")),
            detail="seed:N",
            tooltip=tooltip,
        )
        .transform_filter(alt.datum.kind == "curve")
    )
    shade = (
        alt.Chart()
        .mark_rect(color="#888888", opacity=0.15)
        .encode(x="step:Q", x2="step_end:Q", tooltip=[alt.Tooltip("step:Q", title="final window from step")])
        .transform_filter(alt.datum.kind == "window")
    )
    marks = (
        alt.Chart()
        .mark_point(shape="triangle-down", filled=True, size=50, color=SPIKE_COLOR, opacity=0.9)
        .encode(x="step:Q", y="value:Q", tooltip=["variant:N", "seed:O", alt.Tooltip("step:Q", title="spike at")])
        .transform_filter(alt.datum.kind == "spike")
    )
    rule = alt.Chart().mark_rule(strokeDash=[2, 3], color=BASE_COLOR, opacity=0.5).encode(y=alt.datum(0.99))
    columns = min(2, max(1, len(variants)))
    layered = alt.layer(shade, lines, rule, marks, data=data).properties(width=panel_width(columns), height=height)
    return layered.facet(facet=alt.Facet("variant:N", title=None, sort=variants), columns=columns)


@memo_chart
def norm_and_frequencies(curves: pd.DataFrame, height: int = 200) -> alt.FacetChart:
    """grokking.curves_frame's weight norm and embedding frequencies against the step (log axis), a panel each
    with its own y scale, a line per seed coloured by variant."""
    titles = {"weight norm": "weight norm ‖θ‖", "frequencies": "frequencies in use (1 / Σ s_k²)"}
    data = curves[curves["figure"].isin(list(titles))].assign(panel=lambda f: f["figure"].map(titles))
    variants = list(dict.fromkeys(data["variant"]))
    lines = (
        alt.Chart()
        .mark_line(strokeWidth=1.2, opacity=0.8)
        .encode(
            x=_step_axis(),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=True)),
            color=alt.Color(
                "variant:N",
                scale=alt.Scale(domain=variants, range=VARIANT_COLORS[: len(variants)]),
                title=None,
                legend=alt.Legend(orient="bottom"),
            ),
            detail="seed:N",
            tooltip=["variant:N", "seed:O", "step:Q", "panel:N", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(width=panel_width(2), height=height)
    )
    return (
        alt.layer(lines, data=data)
        .facet(facet=alt.Facet("panel:N", title=None, sort=list(titles.values())), columns=2)
        .resolve_scale(y="independent")
    )


@memo_chart
def spectrum(frame: pd.DataFrame, height: int = 150) -> alt.FacetChart:
    """Rows variant, frequency, when, share (grokking.spectrum_frame per variant): per variant and moment the
    share of the embedding's power at each frequency k, as bars."""
    variants = list(dict.fromkeys(frame["variant"]))
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("frequency:O", title="frequency k", axis=alt.Axis(labelAngle=0, labelOverlap=True)),
            y=alt.Y("share:Q", title="share of power"),
            color=alt.Color("when:N", scale=WHEN, title=None, legend=None),
            tooltip=["variant:N", "when:N", "frequency:O", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=panel_width(2) - 30, height=height)  # the row titles take the rest
    )
    return alt.layer(bars, data=frame).facet(
        row=alt.Row("variant:N", title=None, sort=variants),
        column=alt.Column("when:N", title=None, sort=list(WHEN.domain)),
    )
