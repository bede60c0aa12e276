"""Speculative decoding's drafters (serving.speculative) in the engine's fit: their own parameters written out by
hand, the MTP layer checked against DeepSeek-V3's released files, and their KV layers in the target's block pool."""

from __future__ import annotations

import json
import random

import pytest

from attncore.config import ConfigError
from cli.main import main
from serving.engine import EngineSettings, engine_fit
from serving.hf_config import read_config
from serving.parameters import count_parameters
from serving.presets import CONFIGS, PRESETS
from serving.speculative import MTP_KEYS, Speculative, drafter, mtp_layers
from serving.weights import stored_weights

LLAMA3_8B = PRESETS["llama-3-8b"].arch  # d 4,096, 32 layers, 32 heads, 8 KV heads of 128, SwiGLU 14,336, vocab 128,256
H = 4096
LLAMA_LAYER = 2 * H * H + 2 * H * 1024 + 3 * H * 14336 + 2 * H  # q, o; k, v; gate, up, down; two RMSNorms
DEEPSEEK_V3 = (CONFIGS.parent.parent / "tests" / "configs" / "deepseek-v3.json").read_bytes()


def test_an_eagle_head_is_one_layer_and_its_fc_sharing_the_target_embeddings():
    d = drafter(LLAMA3_8B, Speculative("eagle", 3))
    assert d.parts == {"decoder layers": LLAMA_LAYER, "fc": 2 * H * H} and d.params == 251_666_432
    assert d.kv_layers == 1 and d.same_page


def test_eagle3_reads_three_hidden_states_and_has_its_own_head():
    d = drafter(LLAMA3_8B, Speculative("eagle3", 3, draft_vocab=32000))
    assert d.parts["fc"] == 3 * H * H and d.parts["head"] == 32000 * H
    assert d.parts["qkv of the doubled input"] == (32 + 2 * 8) * 128 * H  # q/k/v read embedding and hidden: 2·H
    assert drafter(LLAMA3_8B, Speculative("eagle3", 3)).parts["head"] == 128256 * H  # no draft_vocab_size


def test_deepseek_v3_mtp_layer_plus_its_copies_make_the_released_files():
    """deepseek-ai/DeepSeek-V3's files hold 688,586,727,753 B: the main model (fp8 with block scales), one MTP layer
    stored alike (a MoE layer, eh_proj, three norms) and its own bf16 copies of the embedding and the head."""
    model = read_config(DEEPSEEK_V3)
    assert mtp_layers(DEEPSEEK_V3) == 1
    mtp = drafter(model.arch, Speculative("mtp", 1, mtp_layers=1))
    main_bytes = stored_weights(model.arch, model.weights).bytes
    per_param = main_bytes / count_parameters(model.arch).total
    copies = 2 * 129280 * 7168 * 2  # embed_tokens and shared_head.head of the MTP layer, bf16
    total = main_bytes + mtp.params * per_param + copies
    assert abs(total / 688_586_727_753 - 1) < 0.001  # the rest: the files' headers
    assert mtp.parts["eh_proj"] == 2 * 7168 * 7168 and mtp.kv_layers == 1 and mtp.same_page


def test_a_drafters_layers_join_the_target_block():
    s = EngineSettings()
    base = engine_fit(LLAMA3_8B, 79.22, s, gpu="h100-80gb")
    eagle = engine_fit(LLAMA3_8B, 79.22, EngineSettings(speculative=Speculative("eagle", 3)), gpu="h100-80gb")
    assert eagle.group_size == base.group_size + 1 and eagle.block_bytes == base.page_bytes * 33
    assert base.kv_bytes - eagle.kv_bytes == 251_666_432 * 2  # its weights, bf16
    assert eagle.num_blocks == eagle.kv_bytes // (base.page_bytes * 33)
    draft = Speculative("draft", 4, model=PRESETS["llama-3.2-1b"].arch)  # 16 layers, 8 KV heads of 64: another page
    small = engine_fit(LLAMA3_8B, 79.22, EngineSettings(speculative=draft), gpu="h100-80gb")
    assert small.draft_layers == 16 and small.draft_block_bytes == 16 * 2 * 16 * 8 * 64 * 2
    assert small.block_bytes == base.block_bytes + small.draft_block_bytes  # UniformTypeKVCacheSpecs: side by side
    assert small.num_blocks == small.kv_bytes // small.block_bytes and small.kinds["draft"] == "estimate"


def test_windowed_layers_and_a_draft_of_another_page_are_refused():
    gemma = PRESETS["gemma-2-9b"].arch
    with pytest.raises(ConfigError, match="not modelled"):
        engine_fit(gemma, 79.22, EngineSettings(speculative=Speculative("draft", 2, model=LLAMA3_8B)))
    same = engine_fit(gemma, 79.22, EngineSettings(speculative=Speculative("eagle", 2)))
    assert dict(same.groups)["full"] >= 1 and same.draft_layers == 1


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(method="medusa"), "speculative_method"),
        (dict(method="draft"), "speculative_model"),
        (dict(method="eagle", num_tokens=0), "num_speculative_tokens"),
        (dict(method="mtp", mtp_layers=0), "mtp_layers"),
        (dict(method="mtp", num_tokens=3, mtp_layers=2), "num_speculative_tokens"),
    ],
)
def test_settings_name_the_bad_field(kwargs, field):
    with pytest.raises(ConfigError) as e:
        Speculative(**kwargs)
    assert e.value.field == field


def test_fewer_tokens_than_mtp_layers_is_allowed_as_vllm_allows_it():
    """vllm/config/speculative.py refuses num_speculative_tokens only above n_predict and not divisible by it."""
    assert Speculative("mtp", 1, mtp_layers=2).num_tokens == 1 and Speculative("mtp", 4, mtp_layers=2).num_tokens == 4


def test_cli_mtp_from_the_config_and_eagle_from_a_preset(capsys):
    argv = ["kv-cache", "--engine", "vllm", "--gpu", "h200", "--tp", "8"]
    path = str(CONFIGS.parent.parent / "tests" / "configs" / "deepseek-v3.json")
    assert main([*argv, "--config", path, "--speculative-method", "mtp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extras"]["drafter"]["kv_layers"] == 1 and out["group_size"] == 62  # 61 layers and the MTP layer
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb"]
    assert main([*argv, "--speculative-model", "llama-3.2-1b", "--num-speculative-tokens", "4"]) == 0
    assert "the drafter's 16 layers' 524,288 B" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--speculative-method", "mtp"], "--speculative-method"),  # Llama 3 has no MTP layers
        (["--speculative-method", "eagle"], "--num-speculative-tokens"),
        (["--num-speculative-tokens", "3"], "--num-speculative-tokens"),
        (["--speculative-model", "/nonexistent.json", "--num-speculative-tokens", "2"], "--speculative-model"),
        (["--speculative-model", "-", "--num-speculative-tokens", "2"], "--speculative-model"),
        (["--speculative-method", "eagle", "--num-speculative-tokens", "65"], "--num-speculative-tokens"),
    ],
)
def test_cli_refuses_bad_speculative_flags_in_one_line(capsys, extra, flag):
    assert main(["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}: ") and err.count("\n") == 1


def test_a_hostile_config_only_ever_raises_config_error():
    rng = random.Random(1)
    values = [None, 0, -1, 1, 3, 101, 2**70, 1.0, "1", True, [], {}, {"num_nextn_predict_layers": 2}]
    for _ in range(300):
        doc = {k: rng.choice(values) for k in rng.sample([*MTP_KEYS, "text_config", "model_type"], 3)}
        for raw in (json.dumps(doc), bytes(rng.randrange(256) for _ in range(rng.randrange(40)))):
            try:
                n = mtp_layers(raw)
            except ConfigError:
                continue
            assert isinstance(n, int) and 1 <= n <= 100


def test_cli_a_hostile_speculative_model_file_is_one_line(tmp_path, capsys):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb"]
    for text in (
        "\x1b[31m",
        '{"model_type": "llama"}',
        "x" * 1_100_000,
        '{"model_type": "llama", "draft_vocab_size": -5}',
    ):
        path = tmp_path / "head.json"
        path.write_text(text)
        assert main([*argv, "--speculative-method", "eagle3", "--speculative-model", str(path),
                     "--num-speculative-tokens", "2"]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert err.startswith("error: --speculative-model: ") and err.count("\n") == 1 and "\x1b" not in err
