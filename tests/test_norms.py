"""Norms by layer: PyTorch autograd on the same weights and batches as the oracle, measuring leaves
training bit-identical, the direction Xiong et al. report at initialisation, and the CLI's JSON."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math

import numpy as np
import pytest

from attncore.config import make_run
from attncore.interpret import norms as nm
from attncore.snapshots import snapshot_steps
from attncore.train import initial_params, train
from cli.main import main
from lab import store
from lab.store import NUMERICS_VERSION, codec
from lab.store.record import compute_run

torch = pytest.importorskip("torch")
from torch_reference import TorchModel, torch_loss_and_grads  # noqa: E402


def torch_figures(run, params, batch):
    """The figures of one batch recomputed in PyTorch: grad norms (n_layers, 4), residual norms, max |q·k|/scale,
    entropy and saturated share of the rows 1..T-1, norms.measured_rows (n_layers each)."""
    model = TorchModel(run.model, params)
    _, grads = torch_loss_and_grads(model, batch, run.task.length)
    gnorms = np.array(
        [[np.linalg.norm(grads[f"blocks.{i}.{m}"]) for m in nm.MATRICES.values()] for i in range(run.model.n_layers)]
    )
    inputs, outputs = [], []

    def record(module, args, out):  # returns None: the block's output is kept
        inputs.append(args[0])
        outputs.append(out)

    hooks = [b.register_forward_hook(record) for b in model.blocks]
    with torch.no_grad():
        model(torch.as_tensor(batch[:, :-1]))
    for h in hooks:
        h.remove()
    resid, logit, entropy, saturated = [], [], [], []
    cfg = run.model
    for block, x, out in zip(model.blocks, inputs, outputs, strict=True):
        resid.append(out.norm(dim=-1).mean().item())
        h = block.ln1(x) if cfg.norm == "pre" else x
        B, T, _ = h.shape
        q, k, _ = block.attn.qkv(h).view(B, T, 3, cfg.n_heads, cfg.d_head).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / (math.sqrt(cfg.d_head) if cfg.scaling else 1.0)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        logit.append(scores.abs().masked_fill(future, 0).max().item())
        rows = nm.measured_rows(run.task.length)  # the query rows the pages say the figures cover
        w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)[:, :, rows.start : rows.stop]
        entropy.append(-(w * torch.log(torch.where(w > 0, w, torch.ones_like(w)))).sum(-1).mean().item())
        saturated.append((w.max(-1).values > nm.SATURATED).double().mean().item())
    return gnorms, np.array(resid), np.array(logit), np.array(entropy), np.array(saturated)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_the_figures_match_pytorch_autograd_on_the_same_weights_and_batches(norm):
    run = make_run("sort", 4, 3, norm=norm, n_layers=3, dtype="float64")
    params = initial_params(run)
    batches = nm.fixed_batches(run, 3)
    got = nm.measure(params, run, batches)
    ref = [torch_figures(run, params, b) for b in batches]
    g = np.stack([r[0] for r in ref])
    for i, block in enumerate(got["blocks"]):
        assert block["block"] == i
        np.testing.assert_allclose([block["grad_norm"][m] for m in nm.MATRICES], g[:, i].mean(0), rtol=1e-10)
        np.testing.assert_allclose([block["grad_norm_spread"][m] for m in nm.MATRICES], g[:, i].std(0), atol=1e-10)
        assert block["residual_norm"] == pytest.approx(np.mean([r[1][i] for r in ref]), rel=1e-10)
    np.testing.assert_allclose(got["max_logit"], np.max([r[2] for r in ref], axis=0), rtol=1e-10)
    np.testing.assert_allclose(got["entropy"], np.mean([r[3] for r in ref], axis=0), rtol=1e-10)
    np.testing.assert_allclose(got["saturated"], np.mean([r[4] for r in ref], axis=0), atol=1e-12)


def test_the_fixed_batches_depend_on_the_task_and_length_only():
    a, b = make_run("copy", 6, 0), make_run("copy", 6, 5, lr=1e-2)
    for x, y in zip(nm.fixed_batches(a), nm.fixed_batches(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(nm.fixed_batches(a)[0], nm.fixed_batches(make_run("sort", 6, 0))[0])
    assert len(nm.fixed_batches(a)) == nm.N_BATCHES


def test_measuring_over_training_leaves_the_run_bit_identical():
    run = make_run("copy", 4, 1, steps=40)
    snapshots, params = nm.over_training(run)
    trained = train(run, snapshots=False)
    for name, value in trained.params.items():
        np.testing.assert_array_equal(params[name], value)
    assert [s["step"] for s in snapshots] == snapshot_steps(40)
    measured = train(run, on_snapshot=nm.at_snapshots(run))  # how a record's training measures them
    np.testing.assert_array_equal(measured.loss_history, trained.loss_history)
    assert measured.measured == snapshots  # what an old record's retraining gives is what a new record stores


def test_a_record_stores_its_snapshots_norms_and_an_old_record_still_decodes_without_them():
    run = make_run("sort", 3, 2, steps=30, n_layers=3)
    record = compute_run(run)
    assert record.norms == nm.over_training(run)[0]
    meta, data = codec.encode(record)
    meta["numerics_version"] = NUMERICS_VERSION
    assert codec.decode(meta, data, NUMERICS_VERSION).norms == record.norms
    old = dataclasses.replace(record, norms=None)  # a record stored before records carried their norms
    meta, data = codec.encode(old)
    meta["numerics_version"] = NUMERICS_VERSION
    assert not any(name.startswith(codec.NORMS_PREFIX) for name in meta["arrays"])
    assert codec.decode(meta, data, NUMERICS_VERSION).norms is None


def _with_arrays(record, edit, declare=True):
    """(meta, npz bytes) of the record with edit(arrays) applied, its digests fixed; declare: the sidecar says
    the edited arrays' dtypes too (else it still declares what the record held)."""
    meta, data = codec.encode(record)
    with np.load(io.BytesIO(data)) as npz:
        arrays = {k: npz[k].copy() for k in npz.files}
    edit(arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    meta |= {"numerics_version": NUMERICS_VERSION, "npz_sha256": hashlib.sha256(data).hexdigest()}
    meta["npz_bytes"] = len(data)
    if declare:
        meta["arrays"] = {k: {"shape": list(a.shape), "dtype": a.dtype.str} for k, a in arrays.items()}
    return meta, data


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda a: a["norms.saturated"].__setitem__((0, 0), 1.5), "saturated"),
        (lambda a: a["norms.grad_norm"].__setitem__((1, 0, 2), -1.0), "grad_norm"),
        (lambda a: a["norms.entropy"].__setitem__((0, 1), 9.0), "entropy"),
        (lambda a: a["norms.step"].__setitem__(0, 7), "steps"),
    ],
)
def test_a_stored_norm_that_cannot_be_is_refused(damage, message):
    meta, data = _with_arrays(compute_run(make_run("copy", 3, 0, steps=30)), damage, declare=False)
    with pytest.raises(codec.RecordError, match=message):
        codec.decode(meta, data, NUMERICS_VERSION)


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "in the file only"])
def test_a_norm_of_the_wrong_dtype_is_reported_as_its_dtype_not_its_shape(declare):
    """Regression: norms.grad_norm stored as float32 was refused as 'does not have the shape ...'."""
    record = compute_run(make_run("copy", 3, 0, steps=30))

    def to_float32(arrays):
        arrays["norms.grad_norm"] = arrays["norms.grad_norm"].astype(np.float32)

    meta, data = _with_arrays(record, to_float32, declare)
    with pytest.raises(codec.RecordError) as info:
        codec.decode(meta, data, NUMERICS_VERSION)
    assert str(info.value) == "array norms.grad_norm holds float32 numbers where its config needs float64"


def test_post_ln_gradients_near_the_output_do_not_shrink_with_depth_as_pre_ln_ones_do():
    """Xiong et al. 2020, Fig. 3: at initialisation pre-LN's last-block gradient is well below its first block's
    (about 1/sqrt(depth)); post-LN's is not."""

    def last_over_first(norm):
        blocks = nm.at_init(make_run("copy", 6, 0, norm=norm, n_layers=8))["blocks"]
        return blocks[-1]["grad_norm"]["ffn_out"] / blocks[0]["grad_norm"]["ffn_out"]

    assert last_over_first("pre") < 0.7 < 1.0 < last_over_first("post")


def test_cli_norms_prints_the_documented_json_from_the_stored_record(capsys, cache, monkeypatch):
    flags = ["norms", "--task", "copy", "--length", "3", "--steps", "12", "--layers", "2", "--json"]
    assert main(flags) == 0
    out = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(nm, "over_training", None)  # a second call reads the record: no training
    assert main(flags) == 0
    assert json.loads(capsys.readouterr().out) == out
    assert out["snapshots"] == store.get_run(make_run("copy", 3, 0, steps=12, n_layers=2)).norms
    assert [b["block"] for b in out["init"]["blocks"]] == [0, 1]
    assert set(out["init"]["blocks"][0]["grad_norm"]) == {"attn_in", "attn_out", "ffn_in", "ffn_out"}
    assert set(out["init"]["blocks"][0]["grad_norm_spread"]) == set(out["init"]["blocks"][0]["grad_norm"])
    snap = out["snapshots"][-1]
    assert snap["step"] == 12 and len(snap["max_logit"]) == len(snap["entropy"]) == len(snap["saturated"]) == 2
    assert all(0 <= s <= 1 for s in snap["saturated"])
    assert all(0 <= e <= math.log(6) for e in snap["entropy"])


def test_cli_norms_of_a_record_stored_before_them_trains_the_run_again(capsys, cache):
    run = make_run("copy", 3, 0, steps=12)
    store.put_run(dataclasses.replace(compute_run(run), norms=None))
    assert main(["norms", "--task", "copy", "--length", "3", "--steps", "12", "--json"]) == 0
    captured = capsys.readouterr()
    assert "stored before the norms" in captured.err
    assert json.loads(captured.out)["snapshots"] == nm.over_training(run)[0]


def test_cli_norms_refuses_bad_input_with_exit_2(capsys):
    assert main(["norms", "--layers", "0", "--init-only"]) == 2
    assert "--layers" in capsys.readouterr().err
