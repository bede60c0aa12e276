"""The speed benchmark's yardstick: its replay of "attncore's own matrix products" must hold all of them.

An earlier recorder lost arrays after in-place operations and replayed 50 products of the wrong set
(missing 19 gradient products, counting some sums); the ratio it printed was then wrong. Timings are
not asserted here (benchmarks print them); only what is being timed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

from attncore.config import make_run

pytest.importorskip("torch")  # train_speed imports the PyTorch peer
sys.path.insert(0, str(ROOT / "benchmarks"))
import train_speed  # noqa: E402


def model_matmul_flops(run) -> int:
    """FLOPs of one training step's matrix products, from the model's shapes.

    Forward: QKV on every position; scores, weights x values, output projection and the FFN only on
    the positions that ask queries (the last block: the answer positions); the head on the answers.
    Backward: two products (input and weight gradients) of the same size for each, plus the
    embedding's one-hot product.
    """
    m, B, L = run.model, run.train.batch_size, run.task.length
    T, D, F, V = 2 * L, m.d_model, m.d_ff, m.vocab_size
    forward = 0
    for block in range(m.n_layers):
        tq = L if block == m.n_layers - 1 else T
        forward += 2 * B * T * D * 3 * D  # fused QKV
        forward += 2 * (2 * B * tq * T * D)  # Q K^T and P V over all heads
        forward += 2 * B * tq * D * D + 2 * (2 * B * tq * D * F)  # output projection, FFN in and out
    forward += 2 * B * L * D * V  # output head
    return 3 * forward + 2 * B * T * V * D


@pytest.mark.parametrize("batch_size", [1, 32])
def test_replay_holds_every_matrix_product_of_a_step(batch_size):
    replay = train_speed.MatmulReplay("float32", batch_size=batch_size)
    run = make_run("copy", 6, 0, batch_size=batch_size)
    assert len(replay.operands) == 18 * run.model.n_layers + 4
    assert replay.flops == model_matmul_flops(run)


def test_sums_written_as_products_are_kept_apart():
    sums = train_speed.MatmulReplay("float32", model=False)
    assert sums.operands and all(train_speed._is_reduction(a.shape, b.shape) for a, b in sums.operands)


@pytest.mark.slow
def test_the_induction_peers_train_the_same_model_on_the_same_batches():
    """The benchmark's induction contenders: PyTorch's peer starts from attncore's weights, draws the same
    batches and takes the every-position loss, so both time the same training (float64: the same losses)."""
    from attncore.tasks.induction import make_induction

    run = make_induction(dtype="float64")
    ours, theirs = train_speed.AttncoreTrainer("float64", run=run), train_speed.TorchTrainer("float64", run=run)
    for _ in range(3):
        assert abs(ours.steps(1) - theirs.steps(1)) < 1e-10


def test_the_variants_benchmark_times_each_stability_setting_beside_the_default(capsys):
    train_speed.variants(steps=2, chunk=1, threads=1)
    out = capsys.readouterr().out
    for name in train_speed.VARIANTS:
        assert f"  {name} " in out
    assert "BLAS: " in out


@pytest.mark.slow
@pytest.mark.browser
def test_the_hosted_envelope_benchmark_runs_a_visitor_and_checks_the_store_after():
    """benchmarks/hosted_envelope.py --tiny: one Chromium visitor on a hosted server over a 9-run store for a few
    seconds; its table has the round's row, no traceback, every run the visitor trained kept, the slots free after
    and the store whole."""
    pytest.importorskip("playwright.async_api")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hosted_envelope.py"), "--tiny"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("N  actions"))
    row = dict(zip(re.split(r"\s{2,}", lines[head].strip()), re.split(r"\s{2,}", lines[head + 1].strip()), strict=True))
    assert row["N"] == "1" and int(row["actions"]) >= 1
    assert (row["tracebacks"], row["runs kept"], row["store check"]) == ("0", "all", "ok"), done.stdout
    assert row["slots free"] == "yes", done.stdout  # two fresh visitors trained at once, neither waited for a slot
    assert float(row["server+workers MiB"]) >= float(row["peak server MiB"]) > 0
    assert "BLAS" in done.stdout or "openblas" in done.stdout.lower()
    assert lines[-1].startswith("load average at end:")
