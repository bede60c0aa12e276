"""Controlled initialisation: at one seed every variant starts from the same weights and batches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncore import initial_params, make_run
from attncore import task as tasks
from attncore.model import param_shapes
from attncore.train import Trainer

VARIANTS = {
    "learned": {},
    "none": {"position": "none"},
    "sinusoidal": {"position": "sinusoidal"},
    "rope": {"position": "rope"},
    "post-LN": {"norm": "post"},
    "no scaling": {"scaling": False},
    "lr 1e-2": {"lr": 1e-2},
    "post-LN lr 1e-2": {"norm": "post", "lr": 1e-2},
    "2 heads": {"n_heads": 2},
}
RANDOM = ("tok_emb", "pos_emb", "w_qkv", "w_out", "w1", "w2", "head.w")  # the tensors drawn at random


def is_random(name: str) -> bool:
    return name.endswith(RANDOM)


@pytest.mark.parametrize("seed", [0, 3])
def test_every_variant_shares_every_common_tensor_bit_for_bit(seed):
    base = initial_params(make_run("copy", 6, seed))
    for label, overrides in VARIANTS.items():
        variant = initial_params(make_run("copy", 6, seed, **overrides))
        common = set(base) & set(variant)
        assert len(common) >= len(base) - 1, label  # at most the position table is missing
        for name in common:
            assert variant[name].tobytes() == base[name].tobytes(), (label, name)


def test_a_tensor_does_not_depend_on_the_shapes_of_the_others():
    """A wider FFN changes w1, b1, w2 only; the attention and embeddings keep their values."""
    base = initial_params(make_run("copy", 6, 0))
    wide = initial_params(make_run("copy", 6, 0, d_ff=256))
    for name in base:
        same = np.array_equal(base[name], wide[name]) if base[name].shape == wide[name].shape else False
        assert same == (name.rsplit(".", 1)[-1] not in ("w1", "b1", "w2")), name


def test_another_seed_changes_every_random_tensor():
    a, b = initial_params(make_run("copy", 6, 0)), initial_params(make_run("copy", 6, 1))
    for name in a:
        assert np.array_equal(a[name], b[name]) != is_random(name), name


def test_every_tensor_draws_from_its_own_stream():
    """Two tensors of one shape (w_qkv of block 0 and block 1) are not the same draw."""
    p = initial_params(make_run("copy", 6, 0))
    assert not np.array_equal(p["blocks.0.attn.w_qkv"], p["blocks.1.attn.w_qkv"])
    assert not np.array_equal(p["blocks.0.ffn.w1"], p["blocks.1.ffn.w1"])


def test_initial_values_follow_the_articles_distributions():
    """The article's initialisation: weights N(0,1)/sqrt(fan_in), biases 0, LN gamma 1 beta 0, embeddings N(0,1)*0.1."""
    run = make_run("copy", 6, 0, d_model=64)
    params = initial_params(run)
    assert {k: v.shape for k, v in params.items()} == param_shapes(run.model)
    for name, a in params.items():
        assert a.dtype == np.float32, name
        leaf = name.rsplit(".", 1)[-1]
        if name in ("tok_emb", "pos_emb"):
            expected_sd = 0.1
        elif leaf.startswith("w"):
            expected_sd = 1 / np.sqrt(a.shape[0])
        else:
            assert np.all(a == (1.0 if leaf == "gamma" else 0.0)), name
            continue
        assert abs(a.mean()) < 4 * expected_sd / np.sqrt(a.size), name
        assert abs(a.std() / expected_sd - 1) < 5 / np.sqrt(2 * a.size), name


def test_initial_params_keep_the_parameter_count():
    assert sum(a.size for a in initial_params(make_run("copy", 6, 0)).values()) == 27_253


def test_training_starts_from_initial_params():
    run = make_run("copy", 6, 2, position="none")
    trainer, expected = Trainer(run), initial_params(run)
    assert set(trainer.params) == set(expected)
    for name, a in expected.items():
        assert trainer.params[name].tobytes() == a.tobytes(), name


def test_training_batches_are_identical_across_variants(monkeypatch):
    """The batch stream depends on the seed only, never on the model variant."""
    seen: list[np.ndarray] = []
    copy = tasks.get("copy")  # the trainer draws its batches from the task (Task.sample_batch)
    original = copy.sample_batch

    def recording(task, batch_size, rng):
        batch = original(task, batch_size, rng)
        seen.append(batch.copy())
        return batch

    monkeypatch.setattr(copy, "sample_batch", recording)
    batches = {}
    for label, overrides in VARIANTS.items():
        seen.clear()
        trainer = Trainer(make_run("copy", 6, 0, **overrides))
        for _ in range(3):
            trainer.step()
        batches[label] = np.stack(seen)
    base = batches["learned"]
    assert base.shape == (3, 32, 13) and not np.array_equal(base[0], base[1])
    for label, b in batches.items():
        assert np.array_equal(b, base), label


@pytest.mark.slow
def test_streams_do_not_depend_on_the_interpreters_hash_seed():
    """The (seed, name) stream uses a stable hash, not Python's salted hash()."""
    code = (
        "import sys; from attncore import initial_params, make_run; "
        "p = initial_params(make_run('copy', 4, 5)); "
        "sys.stdout.write(p['blocks.1.attn.w_qkv'].tobytes().hex())"
    )
    root = str(Path(__file__).resolve().parents[1])
    path = root + os.pathsep + os.environ.get("PYTHONPATH", "")
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env=os.environ | {"PYTHONPATH": path, "PYTHONHASHSEED": hash_seed},
        ).stdout
        for hash_seed in ("1", "2")
    ]
    assert outs[0] == outs[1] == initial_params(make_run("copy", 4, 5))["blocks.1.attn.w_qkv"].tobytes().hex()
