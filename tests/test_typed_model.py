"""A model typed by its fields is a modern decoder in every choice not typed (parameters.typed_decoder), on the
command line (`params --d ...`) and on the Parameters page (the preset "typed"), and says so in one line; the lab's
own model keeps its count, and a link made before (the preset "custom") reopens the numbers it showed."""

from __future__ import annotations

import json

import pytest
from apptest_helpers import page

from attncore.config import ModelConfig
from cli.main import main
from serving import parameters as calc

LLAMA3_8B = 8_030_261_248  # meta-llama/Meta-Llama-3-8B's safetensors count (the llama-3-8b preset's source)
# Llama 3 8B's eight fields (its config.json: hidden_size, num_hidden_layers, num_attention_heads,
# num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings)
EIGHT = ["--d", "4096", "--layers", "32", "--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--d-ff", "14336",
         "--vocab", "128256", "--no-tied-embeddings"]  # fmt: skip
TOY = 27_253  # the lab's own model, `params` without flags (the attncore preset's figure)


def run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_llama3_8bs_fields_typed_give_its_count_and_the_line_says_what_was_assumed(capsys):
    out = json.loads(run(capsys, "params", *EIGHT, "--json"))
    assert out["total"] == LLAMA3_8B
    assert out["assumed_flags"] == ["--ffn", "--bias", "--norm", "--norm-placement", "--position", "--no-final-norm",
                                    "--head-bias", "--qk-norm"]  # fmt: skip
    assert "swiglu FFN" in out["assumed"] and "no biases" in out["assumed"]
    six = [a for a in EIGHT if a not in ("--head-dim", "128", "--no-tied-embeddings")]  # the others derived as Llama's
    text = run(capsys, "params", *six)
    first = text.splitlines()[0]
    assert first.startswith("assumed (not typed): swiglu FFN, no biases, rmsnorm") and "an untied output head" in first
    assert "change with --ffn --bias --norm --norm-placement --position --tied-embeddings" in first
    assert f"custom: {LLAMA3_8B:,} parameters" in text
    kv = json.loads(run(capsys, "kv-cache", *six, "--context", "8192", "--json"))
    assert kv["weight_params"] == LLAMA3_8B and "--ffn" in kv["assumed_flags"]
    assert "assumed (not typed)" in run(capsys, "kv-cache", *six, "--engine", "vllm", "--gpu", "h100-80gb")


def test_a_typed_width_alone_takes_llamas_ffn_width_and_the_labs_shape(capsys):
    assert calc.swiglu_width(4096) == 11008 and calc.swiglu_width(5120) == 13824  # Llama 2 7B's and 13B's
    out = json.loads(run(capsys, "params", "--d", "4096", "--json"))
    arch = out["architecture"]
    assert (arch["d_ff"], arch["n_layers"], arch["n_heads"], arch["vocab_size"]) == (11008, 2, 4, 21)
    assert "FFN width 11,008 (Llama's 2/3 · 4d rounded up to 256)" in out["assumed"]
    relu = json.loads(run(capsys, "params", "--d", "4096", "--ffn", "relu", "--json"))["architecture"]
    assert relu["d_ff"] == 4 * 4096 and relu["bias"] == "none"


def test_the_labs_own_model_counts_as_before(capsys):
    out = json.loads(run(capsys, "params", "--json"))
    assert out["total"] == TOY and "assumed" not in out
    text = run(capsys, "params")
    assert text.startswith(f"custom: {TOY:,} parameters") and "assumed" not in text
    toy_changed = json.loads(run(capsys, "params", "--layers", "4", "--json"))  # no --d: the lab's model, changed
    assert toy_changed["total"] == calc.count_parameters(calc.describe_attncore(ModelConfig(n_layers=4))).total
    assert json.loads(run(capsys, "params", "--preset", "attncore", "--json"))["total"] == TOY


LINK = dict(par_d_model="4096", par_n_layers="32", par_n_heads="32", par_n_kv_heads="8", par_d_ff="14336",
            par_vocab_size="128256")  # fmt: skip


def total(at) -> str:
    return next(m.value for m in at.metric if m.label.startswith("Total parameters"))


@pytest.mark.slow  # AppTests of the page
def test_the_page_typed_agrees_with_the_command_line_and_old_links_keep_their_numbers(capsys):
    at = page("parameters", par_preset="typed", **LINK)
    assert total(at) == f"{LLAMA3_8B:,}"
    assert any(c.value.startswith("Assumed, not typed: swiglu FFN, no biases") for c in at.caption)
    width_only = json.loads(run(capsys, "params", "--d", "4096", "--json"))["total"]
    assert total(page("parameters", par_preset="typed", par_d_model="4096")) == f"{width_only:,}"
    # a link made before, with the lab's model's defaults for the fields it left out: the same numbers as then
    assert total(page("parameters", par_preset="custom", **LINK)) == "6,152,578,304"
    # chosen on the page: the shape kept, every choice a modern decoder's
    at = page("parameters", par_preset="llama-3-8b")
    at = at.selectbox(key="par_preset").set_value("typed").run()
    assert not at.exception and total(at) == f"{LLAMA3_8B:,}"
    assert at.selectbox(key="par_ffn").value == "swiglu" and at.toggle(key="par_tied_embeddings").value is False


@pytest.mark.slow  # AppTests of the page
def test_the_kv_pages_custom_engine_fit_assumes_what_the_command_line_does(capsys):
    engine = dict(kv_mode="vllm", kv_e_gpu="h100-80gb", kv_context="8192")
    geometry = dict(kv_n_layers="32", kv_n_heads="32", kv_kv_heads="8", kv_head_dim="128")
    widths = dict(kv_e_d="4096", kv_e_dff="14336", kv_e_vocab="128256")
    at = page("kv_cache", **engine, kv_preset="custom", **geometry, **widths, kv_e_rest="modern decoder")
    argv = ["kv-cache", *EIGHT, "--engine", "vllm", "--gpu", "h100-80gb", "--context", "8192", "--json"]
    fit = json.loads(run(capsys, *argv))
    blocks = next(m.value for m in at.metric if m.label.startswith("GPU blocks"))
    assert blocks == f"{fit['num_blocks']:,}" and fit["weight_params"] == LLAMA3_8B
    assert any(c.value.startswith("Assumed for the weights and the activation peak: a SwiGLU FFN, no biases")
               for c in at.caption)  # fmt: skip
    # a link made before the choice existed keeps the lab's model's choices, and its numbers
    old = page("kv_cache", **engine, kv_preset="custom", **geometry, **widths)
    assert old.selectbox(key="kv_e_rest").value == "lab"
    assert next(m.value for m in old.metric if m.label.startswith("GPU blocks")) == "27,884"  # as it showed before
    # a visitor who chooses custom on the page starts from the modern decoder
    fresh = page("kv_cache", **engine)
    fresh = fresh.selectbox(key="kv_preset").set_value("custom").run()
    assert fresh.selectbox(key="kv_e_rest").value == "modern"
