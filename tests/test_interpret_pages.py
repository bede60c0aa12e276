"""AppTest for the Patching and Explanations pages: every number shown comes from attncore.interpret
on the stored run; the view is in the URL; bad input is a message, not a traceback."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from apptest_helpers import charts, metric, temporary_store, texts
from streamlit.testing.v1 import AppTest

from attncore import make_run
from attncore.interpret import explain, heads, patching
from attncore.task import task_of
from lab import formats
from lab.store import get_run

pytestmark = pytest.mark.slow  # AppTests of pages that train

STEPS = 60
SHORT = {"steps": str(STEPS)}


def page(name: str, **query) -> AppTest:
    """The dashboard opened at app_pages/<name>.py with these query parameters (the sidebar's run included)."""
    at = AppTest.from_file("../dashboard.py", default_timeout=180)
    at.query_params.update(query)
    at.run()
    at.switch_page(f"app_pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The default configuration at 60 steps, seed 1 of it (one baseline seed for the explanations), sort and
    reverse at L=4."""
    runs = [make_run(steps=STEPS), make_run(steps=STEPS, seed=1), make_run("sort", 4, steps=STEPS)]
    runs.append(make_run("reverse", 4, steps=STEPS))
    with temporary_store(tmp_path_factory, runs):
        yield


def chart_data(at: AppTest) -> list[list]:
    """Per chart, the data frames Streamlit sent beside its spec (as Arrow)."""
    read = pa.ipc.open_stream
    return [[read(d.data.data).read_pandas() for d in c.proto.datasets] for c in at.get("vega_lite_chart")]


def test_patching_shows_the_library_figures(store):
    at = page("patching", **SHORT)
    run = make_run(steps=STEPS)
    tokens = task_of(run.task).probe(run.task)
    r = patching.patch(get_run(run).params, run, patching.contrast(run, tokens, 0, 1))  # default: position 0 -> 1
    assert metric(at, "Logit difference, clean") == formats.with_spec(r.clean_metric, ".2f")  # one minus sign: −
    assert metric(at, "Logit difference, corrupted") == formats.with_spec(r.corrupted_metric, ".2f")
    specs = charts(at)
    assert len(specs) == 4  # heads, residual + MLP by position, heads by position, the logit lens
    (grid,) = chart_data(at)[0]
    assert np.allclose(grid["restored"], r.head.ravel())
    assert "teacher forcing" in texts(at.caption) and "interventions" in texts(at.markdown)


def test_patching_follows_its_inputs_and_the_url(store):
    at = page("patching", **SHORT, pat_at="3", pat_sym="5")
    assert at.selectbox(key="pat_at").value == 3 and at.selectbox(key="pat_sym").value == 5
    run = make_run(steps=STEPS)
    r = patching.patch(get_run(run).params, run, patching.contrast(run, task_of(run.task).probe(run.task), 3, 5))
    assert metric(at, "Logit difference, corrupted") == formats.with_spec(r.corrupted_metric, ".2f")
    at.selectbox(key="pat_sym").set_value(12).run()  # the clean symbol at position 3: nothing to patch
    assert not at.exception and "Nothing to patch" in texts(at.info)
    assert len(charts(at)) == 1  # only the logit lens


def test_patching_typed_sequence_and_bad_text(store):
    at = page("patching", **SHORT)
    at.text_input(key="pat_seq").set_value("1 2 3 4 5 6").run()
    assert "Input `1 2 3 4 5 6 SEP" in texts(at.markdown)
    at.text_input(key="pat_seq").set_value("1 2 99").run()
    assert not at.exception and "Not a valid input" in texts(at.error)


def test_explanations_show_the_library_figures(store):
    at = page("explanations", **SHORT, exp_steps="50", exp_restarts="2", exp_seeds="0,1")
    run = make_run(steps=STEPS)
    record, other = get_run(run), get_run(make_run(steps=STEPS, seed=1))
    tokens = task_of(run.task).probe(run.task)
    layer, head = heads.best_head(record.params, run, tokens)
    assert at.selectbox(key="exp_head").value == f"L{layer}H{head}"
    found = explain.explain(record.params, run, tokens, layer, head, 11, others={1: (other.params, other.config)},
                            restarts=2, steps=50)  # fmt: skip
    assert explain.finding(found, formats.loss) in texts(at.info)
    assert len(charts(at)) == 6  # two score maps, scores over training, permutation, divergences, rows
    table = at.dataframe[0].value
    assert list(table["head"]) == [f"L{i}H{h}" for i in range(2) for h in range(4)]
    assert np.allclose(table["L back"], heads.probe_scores(record.params, run, tokens)["L back"].ravel())


def test_explanations_offer_to_train_missing_seeds_and_cap_the_search(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_EXPLAIN_STEPS", "100")
    monkeypatch.setenv("ATTNLAB_MAX_ABLATION_HEADS", "3")
    at = page("explanations", **SHORT, exp_steps="500", exp_restarts="2", exp_seeds="0,2")
    assert at.number_input(key="exp_steps").value == 100  # the URL's 500 is beyond this server's cap
    assert "URL parameter exp_steps=" in texts(at.warning)
    assert any("missing baseline seed" in b.label for b in at.button)
    assert "Not trained yet: seeds 2" in texts(at.caption)
    assert len(at.dataframe[0].value) == 3 and "Only the first 3 of 8 heads" in texts(at.caption)


def test_explanations_say_no_other_seed_row_when_none_is_stored(store):
    """Seed 2 is not stored: the rows chart has no other-seed row, so neither its caption nor a legend names one."""
    at = page("explanations", **SHORT, exp_steps="20", exp_restarts="1", exp_seeds="0,2")
    said = texts(at.caption)
    assert "no other seed's row" in said and "and the closest other-seed row" not in said
    divergences = next(c for c in charts(at) if "JSD from the original row" in json.dumps(c))
    assert "another seed's map" not in json.dumps(divergences)
    at = page("explanations", **SHORT, exp_steps="20", exp_restarts="1", exp_seeds="0,1")  # seed 1 is stored
    assert "the closest other-seed row." in texts(at.caption)


def test_attention_links_to_both_pages(store):
    at = page("attention", **SHORT)
    assert {"patching", "explanations"} <= {link.proto.page for link in at.get("page_link")}


def test_sort_patches_the_first_changed_answer_and_scores_the_kth_smallest(store):
    at = page("patching", **SHORT, task="sort", L="4", pat_at="0", pat_sym="1")  # 17 3 0 12 -> 1 3 0 12
    assert not at.error and "answer token 2, the first that differs" in texts(at.caption)  # 0 3 12 17 -> 0 1 3 12
    at = page("explanations", **SHORT, task="sort", L="4", exp_steps="20", exp_restarts="1", exp_seeds="0")
    assert "k-th smallest" in at.dataframe[0].value.columns


def test_patching_noises_on_request_and_says_how_to_read_each_direction(store):
    """The direction is named (denoising by default) and noising is a switch in the URL."""
    at = page("patching", **SHORT)
    assert "**Denoising**" in str([c.value for c in at.caption]) and "Heimersheim & Nanda" in texts(at.caption)
    at = page("patching", **SHORT, pat_dir="noise")
    run = make_run(steps=STEPS)
    c = patching.contrast(run, task_of(run.task).probe(run.task), 0, 1)
    r = patching.patch(get_run(run).params, run, c, direction="noise")
    (grid,) = chart_data(at)[0]
    assert np.allclose(grid["destroyed"], r.head.ravel())
    assert "Noising" in texts(at.caption) and "necessary" in texts(at.caption)


def test_an_operator_cap_above_the_search_bound_is_clamped_with_a_notice(store, monkeypatch):
    """A restarts cap of 2,000 and a URL asking 1,001 (within it, beyond the search's 1,000)."""
    monkeypatch.setenv("ATTNLAB_MAX_EXPLAIN_RESTARTS", "2000")
    at = page("explanations", **SHORT, exp_restarts="1001", exp_steps="10", exp_seeds="0")
    box = at.number_input(key="exp_restarts")  # the old page offered 2,000 and raised ConfigError on 1,001
    assert box.max == explain.MAX_RESTARTS and box.value == 5  # beyond the cap: the default, said below
    assert "the search itself stops at 1,000" in texts(at.info)
    assert "URL parameter exp_restarts=" in texts(at.warning)


def test_explanations_pick_the_mirrored_head_on_reverse(store):
    """On reverse the default head is the one whose map best matches the mirrored pattern."""
    at = page("explanations", **SHORT, task="reverse", L="4", exp_steps="20", exp_restarts="1", exp_seeds="0")
    run = make_run("reverse", 4, steps=STEPS)
    layer, head = heads.best_head(get_run(run).params, run, task_of(run.task).probe(run.task))
    scores = heads.probe_scores(get_run(run).params, run, task_of(run.task).probe(run.task))["mirrored"]
    assert (layer, head) == np.unravel_index(int(np.argmax(scores)), scores.shape)
    assert at.selectbox(key="exp_head").value == f"L{layer}H{head}"
    assert "mirrored" in at.dataframe[0].value.columns
