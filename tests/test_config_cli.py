"""`params --config` and `kv-cache --config` (simple and --engine vllm): a config.json from a file or standard input
gives the same figures as the preset of the same model, the hybrid cache by layer kind, the weights as the checkpoint
stores them, and every bad file one line on stderr with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from serving.engine import GIB
from serving.presets import CONFIGS, PRESETS

REPO = Path(__file__).resolve().parents[1]
TEST_CONFIGS = Path(__file__).resolve().parent / "configs"


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def cli(*argv, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "attncore", *argv], cwd=REPO, capture_output=True, input=stdin)


@pytest.mark.parametrize("name", list(PRESETS))
def test_params_config_prints_the_presets_total_and_breakdown(capsys, name):
    by_file = run_json(capsys, "params", "--config", str(CONFIGS / f"{name}.json"), "--json")
    by_name = run_json(capsys, "params", "--preset", name, "--json")
    assert by_file["total"] == by_name["total"] == PRESETS[name].published
    assert by_file["breakdown"] == by_name["breakdown"] and by_file["per_layer"] == by_name["per_layer"]
    assert by_file["config"]["summary"] and by_file["name"] == f"{name}.json"


def test_kv_cache_config_counts_each_layer_kind_by_its_window(capsys):
    """Gemma 2 9B at 8,192 tokens: the 21 global layers keep 8,192 tokens, the 21 local ones stop at 4,096."""
    out = run_json(capsys, "kv-cache", "--config", str(CONFIGS / "gemma-2-9b.json"), "--context", "8192", "--json")
    per_layer = 2 * 8 * 256 * 2  # K and V, 8 KV heads of 256, bf16 (the file's float32 served in 16 bits)
    assert out["bytes_per_token"] == 42 * per_layer and out["dtype"] == "bf16"
    assert out["bytes"] == per_layer * (21 * 8192 + 21 * 4096)
    assert out["by_kind"] == [
        {"kind": "full", "layers": 21, "window": None, "tokens_per_layer": 8192, "bytes": per_layer * 21 * 8192,
         "bytes_per_token": per_layer * 21, "bytes_per_sequence": per_layer * 21 * 8192},
        {"kind": "sliding", "layers": 21, "window": 4096, "tokens_per_layer": 4096, "bytes": per_layer * 21 * 4096,
         "bytes_per_token": per_layer * 21, "bytes_per_sequence": per_layer * 21 * 4096},
    ]  # fmt: skip
    uniform = run_json(capsys, "kv-cache", "--config", str(CONFIGS / "llama-3.1-8b.json"), "--json")
    assert [row["kind"] for row in uniform["by_kind"]] == ["full"]


@pytest.mark.slow
def test_gemma3_keeps_five_local_layers_of_1024_for_each_global():
    out = cli("kv-cache", "--config", str(TEST_CONFIGS / "gemma-3-12b-it.json"), "--context", "32768", "--json")
    rows = {r["kind"]: r for r in json.loads(out.stdout)["by_kind"]}
    assert (rows["sliding"]["layers"], rows["sliding"]["tokens_per_layer"]) == (40, 1024)
    assert (rows["full"]["layers"], rows["full"]["tokens_per_layer"]) == (8, 32768)


@pytest.mark.slow
def test_config_from_standard_input_and_flags_over_its_fields(capsys):
    text = (CONFIGS / "qwen3-8b.json").read_bytes()
    out = cli("params", "--config", "-", "--json", stdin=text)
    assert out.returncode == 0 and json.loads(out.stdout)["total"] == 8_190_735_360
    changed = run_json(capsys, "params", "--config", str(CONFIGS / "qwen3-8b.json"), "--qk-norm", "none", "--json")
    assert changed["total"] == 8_190_735_360 - 36 * 2 * 128 and changed["config"]["changed_by_flags"]


def test_the_weights_are_what_the_checkpoint_stores(capsys):
    """gpt-oss-20b: its index total_size 13,761,264,768 B (MXFP4 experts), not 2 B per parameter."""
    out = run_json(capsys, "kv-cache", "--config", str(CONFIGS / "gpt-oss-20b.json"), "--gpu", "h100-80gb", "--json")
    assert out["weight_bytes"] == 13_761_264_768 and out["weight_dtype"].startswith("MXFP4")
    fp16 = run_json(capsys, "kv-cache", "--config", str(CONFIGS / "gpt-oss-20b.json"), "--weights-dtype", "fp16",
                    "--json")  # fmt: skip
    assert fp16["weight_bytes"] == 2 * 20_914_757_184
    engine = ["kv-cache", "--config", str(CONFIGS / "gpt-oss-20b.json"), "--engine", "vllm", "--gpu", "h100-80gb"]
    fit = run_json(capsys, *engine, "--tp", "2", "--json")
    assert fit["weights_bytes"] == 13_761_264_768 // 2 and fit["weight_format"].startswith("MXFP4")
    assert fit["groups"] == [["full", 1], ["sliding", 1]] and fit["group_size"] == 12  # 12 sliding, 12 full
    olmo = run_json(capsys, "kv-cache", "--config", str(CONFIGS / "olmo-2-13b.json"), "--engine", "vllm", "--gpu",
                    "h100-80gb", "--json")  # fmt: skip
    assert olmo["weights_bytes"] == 2 * 13_716_198_400 and olmo["kv_dtype"] == "16-bit"  # float32 served in bf16


def test_engine_fit_groups_a_hybrid_model_as_the_hybrid_manager_does(capsys):
    """Gemma 3 12B: 40 sliding and 8 full layers make 5 sliding groups and 1 full of 8 layers each, one block table
    a group; a request of 32,768 tokens needs 5 x (cdiv(1023 + 2048, 16) + 1) + 2048 blocks."""
    argv = ["kv-cache", "--config", str(TEST_CONFIGS / "gemma-3-12b-it.json"), "--engine", "vllm", "--gpu", "a100-80gb"]
    fit = run_json(capsys, *argv, "--context", "32768", "--json")
    assert fit["groups"] == [["full", 1], ["sliding", 5]] and fit["group_size"] == 8
    assert fit["max_num_batched_tokens"] == 2048 and fit["blocks_per_request"] == 5 * (-(-3071 // 16) + 1) + 2048
    assert fit["tokens"] == fit["num_blocks"] // 6 * 16
    assert fit["page_bytes"] == 2 * 16 * 8 * 256 * 2 and fit["window_layers"] == 40


def test_engine_startup_check_counts_a_groups_padding_layers(capsys):
    """Gemma 3 1B: 22 sliding and 4 full layers; groups of 4, so the sliding layers fill 6 groups with 2 padding
    layers, which the startup check (kv_cache_utils._max_memory_usage_bytes_from_groups) counts."""
    argv = ["kv-cache", "--config", str(CONFIGS / "gemma-3-1b.json"), "--engine", "vllm", "--gpu", "l4"]
    fit = run_json(capsys, *argv, "--max-model-len", "32768", "--kv-cache-memory-gib", "1", "--json")
    assert fit["groups"] == [["full", 1], ["sliding", 6]] and fit["group_size"] == 4
    page, sliding = fit["page_bytes"], -(-(512 - 1 + 2048) // 16) + 1
    needed = page * 4 * (32768 // 16 + 6 * sliding)  # 24 sliding slots: the 22 layers and 2 of padding
    n = fit["longest_max_model_len"]
    assert page * 4 * (-(-n // 16) + 6 * sliding) <= GIB < page * 4 * (-(-(n + 16) // 16) + 6 * sliding)
    assert (needed <= GIB) == fit["starts"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, stdin, words",
    [(["params", "--config", "-"], b"{not json", "--config: not JSON (line 1, column 2)"),
     (["params", "--config", "-"], b'{"model_type": "llama"}', "--config: hidden_size: missing; model_type llama"),
     (["params", "--config", "-"], b" " * 1_000_001, "--config: over 1 MB"),
     (["kv-cache", "--config", "-"], b'{"model_type": "t5"}', "--config: model_type: 't5' is not one the lab reads"),
     (["kv-cache", "--config", "-", "--engine", "vllm", "--gpu", "l4"], b"[]", "must be a JSON object"),
     (["params", "--config", "/no/such/config.json"], None, "--config: cannot read '/no/such/config.json'"),
     (["params", "--config", "-", "--preset", "gpt2"], b"{}",
      "--config: give one of --config FILE, --model ID and --preset NAME"),
     (["kv-cache", "--config", str(CONFIGS / "llama-3.1-8b.json"), "--window-layers", "4"], None,
      "--window-layers: needs a sliding window")],
    ids=["not-json", "missing", "over-1mb", "unknown", "not-object", "no-file", "with-preset", "window-layers"],
)  # fmt: skip
def test_a_bad_file_is_one_line_and_exit_2(argv, stdin, words):
    r = cli(*argv, stdin=stdin)
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert words in err, err


def test_text_output_says_what_was_read_defaults_notes_and_ignored(capsys):
    assert main(["params", "--config", str(CONFIGS / "gemma-2-9b.json")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("read from gemma-2-9b.json (gemma2): 42 layers, d_model 3,584, 16 query heads, 8 KV heads")
    assert "21 sliding-window layers (4,096) and 21 full" in text and "note: query_pre_attn_scalar 256" in text
    assert "ignored: architectures, attention_dropout, attn_logit_softcapping" in text
    assert "9,241,705,984 parameters" in text
    assert main(["kv-cache", "--config", str(CONFIGS / "gemma-2-9b.json"), "--context", "8192"]) == 0
    text = capsys.readouterr().out
    assert "window 4,096 on 21 layers -> 4,096 tokens each; the other 21 keep all 8,192" in text
