"""A config.json at the reader's limits, as a hostile visitor would send it: 10,000 layers read and described in
linear work (the attention pattern's period, the parameter count), a lone surrogate refused in one sentence,
figures past 64 bits shown on the pages' tables without a conversion error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from apptest_helpers import charts, page, texts
from streamlit.testing.v1 import AppTest

from attncore.config import ConfigError
from serving import hf_config, hf_fields, parameters

REPO = Path(__file__).resolve().parents[1]
LAYERS = 10_000
EVERY_LAST = {"model_type": "gemma3_text", "hidden_size": 8, "num_hidden_layers": LAYERS, "intermediate_size": 8,
              "sliding_window_pattern": LAYERS}  # fmt: skip
LAYER_TYPES = EVERY_LAST | {"layer_types": ["sliding_attention"] * (LAYERS - 1) + ["full_attention"]}
SMALL = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 100}  # fmt: skip


class Counted:
    """A sequence that counts the reads of its items: the work a string algorithm does on it."""

    def __init__(self, text: str):
        self.text, self.reads = text, 0

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, i):
        self.reads += 1
        return self.text[i]


def brute_period(text: str) -> int:
    return next(p for p in range(1, len(text) + 1) if all(c == text[i % p] for i, c in enumerate(text)))


@pytest.mark.parametrize(
    "text, period",
    [("S", 1), ("SF", 2), ("SSF" * 5, 3), ("SSSSSF" * 4 + "SS", 6), ("SFSFF", 5), ("S" * 9_999 + "F", 10_000),
     ("SF" * 5_000, 2), ("F" + "S" * 9_999, 10_000), ("SSF" * 3_333 + "S", 3), ("SFFS" * 2_500, 4),
     ("S" * 5_000 + "F" + "S" * 4_999, 5_001)],
)  # fmt: skip
def test_the_shortest_period_of_ten_thousand_layers_in_linear_reads(text, period):
    counted = Counted(text)
    assert hf_fields.shortest_period(counted) == period
    assert counted.reads <= 4 * len(text)  # the prefix function reads each letter a bounded number of times
    if len(text) <= 100:
        assert period == brute_period(text)


def test_every_short_string_has_the_brute_force_period():
    for n in range(1, 11):
        for bits in range(2**n):
            text = "".join("SF"[(bits >> i) & 1] for i in range(n))
            assert hf_fields.shortest_period(text) == brute_period(text), text


@pytest.mark.parametrize("data", [EVERY_LAST, LAYER_TYPES], ids=["sliding_window_pattern", "layer_types"])
def test_ten_thousand_layers_described_with_one_full(data):
    model = hf_config.read_config(json.dumps(data))
    assert model.pattern() == "9,999 sliding-window layers (4,096) and 1 full"
    assert model.layer_kinds.count("full") == 1 and model.layer_kinds[-1] == "full"


def test_the_count_of_ten_thousand_layers_builds_one_layer_of_each_kind(monkeypatch):
    """The per-block counts of 10,000 alike layers come from one layer of each kind (dense, MoE), not from 10,000
    layers' tensors; the figures are those of the whole inventory."""
    model = hf_config.read_config(json.dumps(EVERY_LAST))
    moe = parameters.replace(model.arch, n_experts=8, experts_per_token=2, moe_d_ff=8, n_dense_layers=3)
    expected = {}
    for arch in (model.arch, moe):
        inventory = parameters.param_inventory(arch)
        breakdown = dict.fromkeys(parameters.COMPONENTS, 0)
        per_layer = [0] * arch.n_layers
        for t in inventory:
            breakdown[t.component] += t.size
            if t.name.startswith("blocks."):
                per_layer[int(t.name.split(".")[1])] += t.size
        expected[arch] = breakdown, tuple(per_layer)
    built = []
    norm = parameters._norm
    monkeypatch.setattr(parameters, "_norm", lambda *a: built.append(a) or norm(*a))
    for arch in (model.arch, moe):
        count = parameters.count_parameters(arch)
        assert (count.breakdown, count.per_layer) == expected[arch]
        assert count.total == sum(expected[arch][0].values())
    assert len(built) <= 40  # a few norms per kind of layer; 40,000 when every layer is built


def test_params_of_the_132_byte_file_answers(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(EVERY_LAST))
    out = subprocess.run([sys.executable, "-m", "attncore", "params", "--config", str(path)], cwd=REPO,
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "9,999 sliding-window layers (4,096) and 1 full" in out.stdout
    assert f"per block {49_888:,}" in out.stdout


def test_pattern_text_unchanged_for_the_released_patterns():
    kinds = ("sliding",) * 5 + ("full",)
    assert hf_fields.pattern_text(kinds * 4 + ("sliding",) * 2, 512) == (
        "22 sliding-window layers (512) and 4 full: S S S S S F repeated"
    )
    assert hf_fields.pattern_text(("sliding", "full") * 21, 4096) == (
        "21 sliding-window layers (4,096) and 21 full: S F repeated"
    )
    assert hf_fields.pattern_text(("sliding",) * 8 + ("full",), 8) == "8 sliding-window layers (8) and 1 full"


def paste(at: AppTest, prefix: str, text: str) -> AppTest:
    at.text_area(key=f"{prefix}file_text").input(text)
    at = at.button(key=f"{prefix}file_read").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_pages_read_a_file_once_and_word_it_once(monkeypatch):
    """The same file pasted in two sessions is read once (memoised by its content), and a rerun of the page does not
    word the attention pattern again."""
    from ui import config_input

    config_input._read.clear()
    reads, worded = [], []
    read, pattern = config_input.read_config, hf_fields.pattern_text
    monkeypatch.setattr(config_input, "read_config", lambda raw: reads.append(1) or read(raw))
    monkeypatch.setattr(hf_fields, "pattern_text", lambda *a: worded.append(1) or pattern(*a))
    text = json.dumps(EVERY_LAST)
    at = paste(page("parameters"), "par_", text)
    assert "9,999 sliding-window layers (4,096) and 1 full" in texts(at.success)
    assert (len(reads), len(worded)) == (1, 1)
    at = at.number_input(key="par_d_ff").set_value(16).run()
    assert "You changed fields since" in texts(at.caption) and len(worded) == 1
    at = paste(page("kv_cache"), "kv_", text)
    assert "9,999 sliding-window layers (4,096) and 1 full" in texts(at.success)
    assert (len(reads), len(worded)) == (1, 1)
    assert config_input.CACHED_READS <= 16  # bounded: any visitor can fill it


# --- a lone surrogate -------------------------------------------------------------------------------------------

ESCAPED_KEY = json.dumps(SMALL)[:-1] + ', "\\ud800x": 1}'  # the six characters \ud800 in the file's text
ESCAPED_VALUE = '{"model_type": "llama", "hidden_size": "\\udfffx"}'
RAW_KEY = json.dumps(SMALL)[:-1] + ', "\ud800x": 1}'  # the surrogate itself, in a pasted text


@pytest.mark.parametrize("text", [ESCAPED_KEY, ESCAPED_VALUE, RAW_KEY, '{"\\ud800": {"a": ["\\udc00"]}}'])
def test_a_lone_surrogate_is_refused_in_one_sentence(text):
    with pytest.raises(ConfigError) as e:
        hf_config.read_config(text)
    assert "lone surrogate" in str(e.value) and "\n" not in str(e.value)
    if text != RAW_KEY:
        with pytest.raises(ConfigError, match="lone surrogate"):
            hf_config.read_config(text.encode())


def test_a_surrogate_pair_is_a_character_and_read():
    """\\ud83d\\ude00 is one character (an emoji) written as its UTF-16 pair: read, and named as an ignored key."""
    model = hf_config.read_config(json.dumps(SMALL)[:-1] + ', "\\ud83d\\ude00": 1}')
    assert model.ignored == ("\U0001f600",)


@pytest.mark.parametrize("text", [ESCAPED_KEY, ESCAPED_VALUE])
def test_the_cli_refuses_a_lone_surrogate_with_exit_2(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    for command in ("params", "kv-cache"):
        out = subprocess.run([sys.executable, "-m", "attncore", command, "--config", str(path)], cwd=REPO,
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.count("\n") == 1 and "lone surrogate" in out.stderr


@pytest.mark.parametrize("pg, prefix", [("parameters", "par_"), ("kv_cache", "kv_")])
def test_the_pages_refuse_a_lone_surrogate_in_one_line(pg, prefix):
    at = page(pg)
    before = [m.value for m in at.metric]
    for text in (ESCAPED_KEY, ESCAPED_VALUE):  # a browser sends text as UTF-8: a surrogate itself never comes
        at = paste(at, prefix, text)
        assert "**Not read, nothing changed:** the pasted text: config.json:" in texts(at.error)
        assert "lone surrogate" in texts(at.error) and [m.value for m in at.metric] == before
    at.file_uploader(key=f"{prefix}file_upload").upload("config.json", ESCAPED_KEY.encode(), "application/json")
    at = at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "**Not read, nothing changed:** config.json: config.json:" in texts(at.error)


# --- figures past 64 bits -------------------------------------------------------------------------------------

# The link: a mixture of experts at the page's limits (a million experts of 10^7 over 10^6-wide layers)
AT_THE_LIMITS = dict(
    par_preset="from config.json", par_d_model="1000000", par_n_layers="10000", par_n_heads="250",
    par_d_ff="10000000", par_vocab_size="100000000", par_n_experts="1000000", par_experts_per_token="1000000",
    par_moe_d_ff="10000000", par_n_shared_experts="1000000",
)  # fmt: skip


LATENT_AT_THE_LIMITS = dict(
    par_preset="from config.json", par_d_model="1000000", par_n_layers="10000", par_n_heads="100000",
    par_head_dim="100000", par_bias="none", par_kv_lora_rank="1000000", par_q_lora_rank="1000000",
    par_rope_head_dim="100000",
)  # fmt: skip


@pytest.mark.parametrize("link, widest", [(AT_THE_LIMITS, "ffn"), (LATENT_AT_THE_LIMITS, "attention")])
def test_a_table_of_figures_past_64_bits_shows_them_as_text(link, widest):
    at = page("parameters", **link)
    table = at.dataframe[0].value
    shown = dict(zip(table["component"], table["params"], strict=True))
    assert all(isinstance(n, str) for n in shown.values())  # every cell written out, exact
    counts = {c: int(n.replace(",", "")) for c, n in shown.items()}
    assert counts[widest] > 2**64 and f"{sum(counts.values()):,}" == at.metric[0].value  # the total's own parts
    assert list(counts) == list(parameters.COMPONENTS) and len(charts(at)) == 1


def test_a_table_that_fits_keeps_its_numbers():
    from ui.charts import calculators as cc
    from ui.frames import within_int64

    count = parameters.count_parameters(hf_config.read_config(json.dumps(SMALL)).arch)
    table = cc.breakdown_frame(count)
    assert table["params"].dtype == "int64" and within_int64(table) is table
    wide = table.assign(params=[2**64, *table["params"][1:]], other=[-(2**63), *[0] * (len(table) - 2), 2**63 - 1])
    fitted = within_int64(wide)
    assert list(fitted["params"]) == [f"{2**64:,}", *[f"{n:,}" for n in table["params"][1:]]]
    assert fitted["other"].dtype == "int64" and fitted["share"].dtype == "float64"
