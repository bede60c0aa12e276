"""A model by its Hub id (serving.hub, cli --model): its config.json and safetensors headers through huggingface_hub,
against a local stand-in for the Hub (tests/fake_hub.py; HF_ENDPOINT points at it, HF_HOME is a temporary
directory). Never a weight: every read of a safetensors file is a range request for its header."""

from __future__ import annotations

import json
import threading

import pytest
from fake_hub import WEIGHT_PADDING, FakeHub, checkpoint_of, serve

from attncore.config import ConfigError
from cli.main import main
from serving import hub
from serving.presets import CONFIGS, PRESETS

LLAMA3 = json.loads((CONFIGS / "llama-3-8b.json").read_text())
NEW_ARCH = {  # an architecture no formula here counts: its attention fields only
    "model_type": "brandnew", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 8192, "vocab_size": 50000,
    "sliding_window": 1024, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
}  # fmt: skip
NEW_TENSORS = {"model.embed_tokens.weight": ("BF16", (50000, 2048)), "model.layers.0.mixer.w": ("BF16", (2048, 9000))}


def stand_in_hub() -> FakeHub:
    """The stand-in Hub's repositories: Llama 3 8B gated (four shards), open (two revisions), with a vision tower,
    without safetensors; an architecture without a formula with and without them; a config.json of 1.1 MB."""
    h = FakeHub()
    llama = PRESETS["llama-3-8b"].arch
    h.add("meta-llama/Meta-Llama-3-8B", LLAMA3, checkpoint_of(llama, shards=4), gated=True)
    h.add("org/llama-open", LLAMA3, checkpoint_of(llama), revisions=("main", "v1.0"))
    h.add("org/llama-vision", LLAMA3, checkpoint_of(llama, extra={"vision_tower.patch.weight": ("BF16", (1024, 588))}))
    h.add("org/llama-config-only", LLAMA3)
    h.add("org/new-arch", NEW_ARCH, {"model.safetensors": NEW_TENSORS})
    h.add("org/new-arch-no-weights", NEW_ARCH)
    h.add("org/huge-config", {"model_type": "llama", "pad": "x" * 1_100_000})
    h.add("org/no-config", None, checkpoint_of(PRESETS["gpt2"].arch))
    return h


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The stand-in Hub served, the environment pointed at it (a fresh cache, no token, online)."""
    h = stand_in_hub()
    server, url = serve(h)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    yield h
    server.shutdown()


def never_read_weights(h: FakeHub) -> None:
    """Every GET of a safetensors file asked for a range within its header's first 100 kB (huggingface_hub's
    read), never the whole file."""
    gets = [(p, r) for m, p, r in h.requests if m == "GET" and p.endswith(".safetensors")]
    assert gets and all(r is not None and int(r.split("-")[1]) <= 100_000 < WEIGHT_PADDING for _, r in gets)


@pytest.mark.parametrize(
    "text",
    ["llama", "org/", "/name", "org/name/extra", "org/na me", "org/a--b", "org/a..b", "-org/name", "org/name@",
     "org/name@../x", "org/name@a b", "https://huggingface.co/org/name", "org/" + "n" * 97],
)  # fmt: skip
def test_an_id_is_checked_strictly_before_any_request(text):
    with pytest.raises(ConfigError) as e:
        hub.parse_model_id(text)
    assert e.value.field == "model"


def test_ids_and_revisions_parse():
    assert hub.parse_model_id("meta-llama/Llama-3.1-8B") == hub.ModelId("meta-llama/Llama-3.1-8B", None)
    assert hub.parse_model_id("org/m_1.5@refs/pr/3") == hub.ModelId("org/m_1.5", "refs/pr/3")


def test_params_by_id_shows_the_checkpoints_count_beside_the_formula(fake, capsys):
    assert main(["params", "--model", "org/llama-open", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == out["checkpoint_total"] == 8_030_261_248 and out["checkpoint"]["formula_matches"]
    assert out["name"] == "config.json of org/llama-open" and out["config"]["model_type"] == "llama"
    assert main(["params", "--model", "org/llama-open@v1.0"]) == 0
    text = capsys.readouterr().out
    assert "read from config.json of org/llama-open@v1.0 (llama)" in text
    assert "the checkpoint holds 8,030,261,248 (BF16 8,030,261,248); the formula gives 8,030,261,248: exact" in text
    never_read_weights(fake)


def test_a_difference_is_named_by_the_tensors_that_explain_it(fake, capsys):
    assert main(["params", "--model", "org/llama-vision"]) == 0
    text = capsys.readouterr().out
    assert "the checkpoint holds +602,112 (+0.01%): beside the language model, vision_tower.patch.* 602,112" in text


def test_without_safetensors_the_checkpoint_total_is_null(fake, capsys):
    assert main(["params", "--model", "org/llama-config-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == 8_030_261_248 and out["checkpoint_total"] is None
    assert main(["params", "--preset", "llama-3-8b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint_total"] is None


def test_an_architecture_without_a_formula_takes_the_checkpoints_count(fake, capsys):
    assert main(["params", "--model", "org/new-arch", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    total = 50000 * 2048 + 2048 * 9000
    assert out["total"] == out["checkpoint_total"] == total and out["formula"] is None
    assert main(["kv-cache", "--model", "org/new-arch", "--context", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 12 full layers keep 8,192 tokens, 12 sliding ones 1,024; 4 KV heads of 128, keys and values, bf16
    per_token_full = 2 * 4 * 128 * 2
    assert out["bytes"] == 12 * per_token_full * 8192 + 12 * per_token_full * 1024
    assert out["bytes_per_token"] > 0 and out["weight_params"] == total and out["config"]["counted"] is False
    argv = ["kv-cache", "--model", "org/new-arch", "--engine", "vllm", "--gpu", "h100-80gb", "--context", "8192"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weight_params"] == total  # the engine fit weighs the checkpoint's
    assert main(["kv-cache", "--model", "org/new-arch-no-weights"]) == 2
    err = capsys.readouterr().err
    assert "the config.json of org/new-arch-no-weights: model_type: 'brandnew' is not one the lab reads" in err


def test_engine_fit_by_id_refuses_past_the_derived_maximum(fake, capsys):
    argv = ["kv-cache", "--model", "org/llama-open", "--engine", "vllm", "--gpu", "a100-40gb"]
    assert main([*argv, "--max-model-len", "32768"]) == 2
    assert "derived maximum is 8,192" in capsys.readouterr().err
    assert main([*argv, "--max-model-len", "8192"]) == 0


@pytest.mark.parametrize(
    "model_id, said",
    [
        ("meta-llama/Meta-Llama-3-8B", "is gated: accept its licence on its Hub page, then set HF_TOKEN"),
        ("org/missing", "was not found: no such model, or a private one"),
        ("org/llama-open@v9", "names a revision the repository does not have"),
        ("org/huge-config", "over the 1,000,000 a config.json may be: not fetched"),
        ("org/no-config", "does not exist: the repository has no such file"),
    ],
)
def test_what_cannot_be_had_is_one_sentence_with_the_way_to_upload_instead(fake, capsys, model_id, said):
    assert main(["params", "--model", model_id]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: --model: The config.json of")
    assert said in err and "upload it (or pass --config FILE) instead" in err
    assert not fake.bytes_served("huge-config/resolve/main/config.json")  # its HEAD said its size: never fetched


def test_hf_token_opens_a_gated_model(fake, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_ok_test")
    assert main(["params", "--model", "meta-llama/Meta-Llama-3-8B", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_total"] == 8_030_261_248 and out["checkpoint"]["files"] == 4
    never_read_weights(fake)


def test_offline_mode_reads_the_cache_and_asks_nothing(fake, monkeypatch, capsys):
    assert main(["params", "--model", "org/llama-open"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(fake.requests)
    assert main(["params", "--model", "org/llama-open", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == 8_030_261_248 and out["checkpoint_total"] is None and "HF_HUB_OFFLINE" in (
        out["checkpoint"]["note"])  # fmt: skip
    assert main(["params", "--model", "org/llama-vision"]) == 2
    assert "is not in huggingface_hub's cache, and HF_HUB_OFFLINE is set" in capsys.readouterr().err
    assert len(fake.requests) == asked


def test_an_unreachable_or_silent_hub_is_said_within_the_deadline(fake, monkeypatch):
    release = threading.Event()  # a fetch that never answers until released
    with pytest.raises(hub.HubError, match="the config.json of org/x gave no answer within 0.2 s"):
        hub.bounded("the config.json", release.wait, hub.ModelId("org/x", None), 0.2)
    release.set()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(hub.HubError, match=r"could not be reached \(ConnectError\)"):
        hub.fetch_config(hub.parse_model_id("org/llama-open"))


def test_id_with_another_source_is_refused(fake, capsys):
    assert main(["params", "--model", "org/llama-open", "--preset", "gpt2"]) == 2
    assert "give one of --config FILE, --model ID and --preset NAME" in capsys.readouterr().err


def test_a_safetensors_header_is_read_from_its_opening_bytes():
    from serving.safetensors_count import count_headers, header_bytes, parse_header

    tensors = {"a.weight": ("BF16", (3, 4)), "b.bias": ("F32", (5,))}
    raw = header_bytes(tensors) + b"\0" * 100  # the data after the header is never looked at
    assert parse_header(raw) == tensors
    count = count_headers({"model.safetensors": parse_header(raw)})
    assert (count.total, count.per_dtype) == (17, {"BF16": 12, "F32": 5})
    with pytest.raises(ValueError, match="8-byte header length"):
        parse_header(b"\x01\x02")
