"""`kv-cache --engine vllm` with --pp, --pp-layer-partition, --plan-grid and --efficiency: text, JSON, and one line
with exit code 2 for a bad flag."""

import json

import pytest

from cli.main import main

L70 = ["kv-cache", "--preset", "llama-3-70b", "--engine", "vllm", "--gpu", "l4", "--max-model-len", "4096"]


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_pp_json_lists_the_stages_with_their_layers_weights_and_blocks(capsys):
    out = run_json(capsys, *L70, "--pp", "8", "--json")
    stages = out["pipeline_stages"]
    assert [s["layers"] for s in stages] == [[10 * i, 10 * i + 10] for i in range(8)]
    assert out["num_blocks"] == min(s["num_blocks"] for s in stages)
    assert stages[0]["embeddings"] and stages[-1]["head"] and not stages[3]["embeddings"]
    assert out["decode_bound"]["kinds"]["tokens_per_s"] == "bound"


def test_a_layer_partition_gives_the_stage_count_and_is_printed(capsys):
    assert main([*L70, "--pp-layer-partition", "9,10,10,11,11,10,10,9"]) == 0
    text = capsys.readouterr().out
    assert "8 pipeline stages" in text and "9+10+10+11+11+10+10+9" in text and "<- fewest" in text
    assert "a BOUND" in text


def test_the_grid_gives_a_verdict_per_cell(capsys):
    out = run_json(capsys, *L70, "--plan-grid", "8", "--json")
    cells = {(c["tp"], c["pp"]): c for c in out["cells"]}
    assert set(cells) == {(tp, pp) for tp in (1, 2, 4, 8) for pp in (1, 2, 4, 8) if tp * pp <= 8}
    assert not cells[1, 1]["fits"] and cells[1, 1]["reason"].startswith("weights")
    assert cells[8, 1]["fits"]
    out = run_json(capsys, "kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb",
                   "--plan-grid", "--json")  # fmt: skip
    cells = {(c["tp"], c["pp"]): c for c in out["cells"]}
    assert cells[1, 1]["fits"] and "TP and the 8 KV heads" not in cells[8, 1]["reason"]


@pytest.mark.parametrize(
    "argv, flag, words",
    [
        (["--pp-layer-partition", "10,10,10"], "--pp-layer-partition", "sum to the model's 80 layers, got 30"),
        (["--pp", "3", "--pp-layer-partition", "40,40"], "--pp-layer-partition", "must give 3 layer counts"),
        (["--pp-layer-partition", "10;70"], "--pp-layer-partition", "separated by commas"),
        (["--pp", "0"], "--pp", "from 1 to 80"),
        (["--efficiency", "1.5"], "--efficiency", "from 0 (excluded) to 1"),
        (["--plan-grid", "0"], "--plan-grid", "from 1 to 64"),
        (["--pp", "2", "--weights-gib", "10"], "--weights-gib", "one worker's figure"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it_with_exit_code_2(capsys, argv, flag, words):
    assert main([*L70, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and words in err


def test_the_models_derived_maximum_is_refused_under_its_flag_with_stages(capsys):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb", "--pp", "2"]
    assert main([*argv, "--max-model-len", "32768"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --max-model-len") and "--allow-long-max-model-len" in err
