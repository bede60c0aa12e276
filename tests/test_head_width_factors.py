"""Depth, head width d_k and warm-up beyond the pages' defaults: d_k as a Compare factor (lab.factors,
ui.compare_view) and the depth and wide-head variants of Ablations (ui.variants), within the hosted caps."""

from __future__ import annotations

import pytest
from apptest_helpers import temporary_store, texts
from streamlit.testing.v1 import AppTest

from attncore import ConfigError, make_run
from lab.factors import FACTORS, comparison_runs, faceted, value_of, varied_besides
from lab.jobs.limits import Limits
from lab.tables import variant_name
from ui import compare_view, variants

STEPS = 30


def shape(run) -> tuple[int, int, int]:
    return run.model.d_model, run.model.n_heads, run.model.d_ff


def test_d_k_is_the_head_width_of_a_run_a_record_or_a_summary():
    run = make_run(d_model=64, n_heads=2)
    assert value_of(run, "d_k") == 32
    assert value_of({"config": run.to_dict()}, "d_k") == 32
    assert FACTORS["d_k"].label == "d_k"  # what the URL holds: ?cmp_factor=d_k


def test_a_d_k_level_keeps_the_heads_and_sets_the_width():
    runs = comparison_runs(make_run, "d_k", [8, 32], [0, 1])
    assert [(shape(r), r.train.seed) for r in runs] == [
        ((32, 4, 128), 0),
        ((32, 4, 128), 1),
        ((128, 4, 512), 0),
        ((128, 4, 512), 1),
    ]
    two_heads = comparison_runs(lambda **kw: make_run(**({"n_heads": 2} | kw)), "d_k", [8, 32], [0])
    assert [shape(r) for r in two_heads] == [(16, 2, 64), (64, 2, 256)]  # the base's heads, not make_run's 4


def test_d_k_by_heads_panels_take_each_panels_heads_and_group_back_by_d_k():
    runs = comparison_runs(make_run, "d_k", [8, 32], [0], facet="heads", facet_levels=[1, 4])
    assert [shape(r)[:2] for r in runs] == [(8, 1), (32, 1), (32, 4), (128, 4)]
    across = comparison_runs(make_run, "heads", [1, 2], [0], facet="d_k", facet_levels=[16])  # d_k as the panels
    assert [shape(r)[:2] for r in across] == [(16, 1), (32, 2)]
    records = [{"config": r.to_dict()} for r in runs]
    parts = faceted(records, "d_k", [8, 32], "heads", [1, 4])
    assert [(facet, {k: len(v) for k, v in groups.items()}) for facet, groups in parts] == [
        ("1", {"8": 1, "32": 1}),
        ("4", {"8": 1, "32": 1}),
    ]


def test_varying_d_k_does_not_report_the_width_it_implies_as_varied_besides():
    records = [{"config": r.to_dict()} for r in comparison_runs(make_run, "d_k", [8, 32], [0, 1])]
    assert varied_besides(records, "d_k") == []
    by_heads = [{"config": r.to_dict()} for r in comparison_runs(make_run, "d_k", [8], [0], "heads", [1, 4])]
    assert varied_besides(by_heads, "d_k") == ["heads"]
    widths = [{"config": make_run(d_model=d).to_dict()} for d in (16, 32)]
    assert varied_besides(widths, "d") == []  # d_ff = 4d follows d: not a second change
    assert varied_besides([{"config": make_run(d_model=32, d_ff=64).to_dict()}, widths[1]], "d") == ["model.d_ff"]


def test_impossible_d_k_levels_name_the_field_and_the_level():
    with pytest.raises(ConfigError) as e:
        comparison_runs(lambda **kw: make_run(position="rope", **kw), "d_k", [8, 3], [0])
    assert e.value.field == "n_heads" and e.value.message.endswith("(asked for by d_k 3)")
    with pytest.raises(ConfigError) as e:
        comparison_runs(make_run, "d_k", [8], [0], facet="d", facet_levels=[16])
    assert e.value.field == "d_model" and "vary d or d_k, not both" in e.value.message
    capped = compare_view.capped(make_run, Limits(max_d_model=64))
    with pytest.raises(ConfigError) as e:
        comparison_runs(capped, "d_k", [8, 32], [0])  # 4 heads of 32: d 128
    assert e.value.field == "d_model"
    assert e.value.message == "at most 64 on this server, got 128 (asked for by d_k 32)"


def test_d_k_levels_stay_within_the_width_cap_at_the_heads_kept():
    lim = Limits(max_d_model=256)
    assert compare_view.level_options("d_k", lim, heads=4) == ([4, 8, 16, 32, 64], [8, 32])
    assert compare_view.level_options("d_k", lim, heads=1) == ([4, 8, 16, 32, 64, 128], [8, 32])
    assert compare_view.level_options("d_k", lim, heads=16) == ([4, 8, 16], [8])
    assert compare_view.level_options("d_k", Limits(max_d_model=32), heads=4) == ([4, 8], [8])


DEPTH_AND_WIDTH = ["8 layers", "post-LN at 8 layers", "post-LN with warm-up at 8 layers"]
DEPTH_AND_WIDTH += ["d_k × 4", "no scaling at d_k × 4"]


def test_ablations_offer_depth_and_wide_heads_named_as_the_store_tables_name_them():
    base = make_run()
    chosen, notes = variants.variant_runs(base, DEPTH_AND_WIDTH, make_run)
    assert not notes
    assert list(chosen) == [
        "base: the full model",
        "8 layers",
        "post-LN, 8 layers",
        "post-LN, 8 layers, warm-up 300",  # a fifth of 1,500 steps
        "d 128, d_k 32",  # the same 4 heads, each 4 times as wide
        "no scaling, d 128, d_k 32",
    ]
    assert all(name == variant_name(run, base) for name, run in list(chosen.items())[1:])
    wide = chosen["no scaling, d 128, d_k 32"]
    assert (wide.model.n_heads, wide.model.d_model, wide.model.scaling, wide.model.n_layers) == (4, 128, False, 2)
    assert variants.DEFAULT == ["no scaling", "no position", "post-LN", "pre-LN, lr 1e-2", "post-LN, lr 1e-2"]


def test_variant_names_say_one_layer_or_head_and_the_head_width_when_it_changes():
    base = make_run()
    assert variant_name(make_run(n_layers=1), base) == "1 layer"
    assert variant_name(make_run(n_heads=1), base) == "1 head, d_k 32"
    assert variant_name(make_run(d_model=64, n_heads=8), base) == "d 64, 8 heads"  # d_k 8 either way


def test_variants_over_the_hosted_caps_are_skipped_with_a_note():
    base = make_run(d_model=128)
    make = compare_view.capped(lambda **kw: make_run(**({"d_model": 128} | kw)), Limits(max_d_model=256, max_layers=4))
    chosen, notes = variants.variant_runs(base, ["8 layers", "d_k × 4", "post-LN"], make)
    assert list(chosen) == ["base: d 128, d_k 32", "post-LN"]
    assert notes == [
        "8 layers: not possible with this base (n_layers: at most 4 on this server, got 8)",
        "d_k × 4: not possible with this base (d_model: at most 256 on this server, got 512)",
    ]


# --- the pages -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with temporary_store(tmp_path_factory, [make_run(steps=STEPS)]):
        yield


def app(page: str, **query) -> AppTest:
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"steps": str(STEPS)} | query)
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.slow
def test_compare_by_d_k_from_the_url_trains_and_groups_by_head_width(store):
    at = app("compare", cmp_factor="d_k", cmp_lv_d_k=["4", "8"], cmp_seeds="1")
    assert at.selectbox(key="cmp_factor").value == "d_k"
    assert "Varying d_k keeps the head count (the sidebar's 4)" in texts(at.caption)
    assert "1 of 2 runs cached" in texts(at.info)  # d_k 8 at 4 heads is the sidebar's d 32
    at.button(key="cmp_train").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    assert list(summary["d_k"]) == ["4", "8"] and list(summary["n"]) == [1, 1]
    assert "Each level against 4, paired by seed" in [h.value for h in at.subheader]


@pytest.mark.slow
def test_compare_by_d_k_over_the_width_cap_names_the_field_and_the_level(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_D_MODEL", "256")
    at = app("compare", cmp_factor="d_k", cmp_lv_d_k=["8", "32"], cmp_facet="heads", cmp_fv_heads=["1", "16"])
    (error,) = at.error
    assert "Model width d: at most 256 on this server, got 512 (asked for by d_k 32, heads 16)" in error.value
    assert not at.main.dataframe  # no result table (the sidebar's lesson-link maker lists the page's controls)


@pytest.mark.slow
def test_ablations_skip_a_wide_head_variant_over_the_width_cap(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_D_MODEL", "256")
    at = app("ablations", d="128", abl_variants=["d_k × 4", "8 layers"], abl_seeds="1")
    assert "d_k × 4: not possible with this base (d_model: at most 256 on this server, got 512)" in texts(at.caption)
    assert "8 layers: not possible" not in texts(at.caption)


@pytest.mark.slow
def test_compare_never_offers_panels_by_the_setting_varied_nor_d_beside_d_k(store):
    """Regression: after refusing d as the panels of a d_k comparison, 'Panels by' still showed d."""
    at = app("compare", cmp_factor="d_k", cmp_lv_d_k=["4", "8"], cmp_facet="d", cmp_seeds="1")
    box = at.selectbox(key="cmp_facet")
    assert "d" not in box.options and "d_k" not in box.options and box.value == "none"
    assert "cmp_facet=d ignored" in texts(at.warning)  # the URL's choice is said, not silently kept
    at = app("compare", cmp_factor="position", cmp_facet="d", cmp_seeds="1")
    assert at.selectbox(key="cmp_facet").value == "d" and "position" not in at.selectbox(key="cmp_facet").options
    at.selectbox(key="cmp_factor").set_value("d_k").run()  # varying d_k now: the panels by d cannot stay
    assert not at.exception
    box = at.selectbox(key="cmp_facet")
    assert "d" not in box.options and box.value == "none"
