"""Training snapshots: their steps, their structure, their numbers, and that taking them
leaves the training bit-identical."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attncore import _blas, layers
from attncore.config import ConfigError, make_run
from attncore.evaluate import evaluate
from attncore.inspect import attention_maps
from attncore.interpret.hooks import run_with_hooks
from attncore.snapshots import N_SNAPSHOTS, SNAPSHOT_N_TEST, snapshot_steps, stack, unstack
from attncore.task import task_of
from attncore.train import Trainer, train

RUN = make_run("copy", 3, steps=40, seed=1)


@pytest.fixture(scope="module")
def trained():
    return train(RUN)


@pytest.mark.parametrize("steps", [1, 2, 5, 9, 10, 11, 20, 37, 99, 100, 150, 1500, 4321, 1_000_000])
def test_snapshot_steps_are_increasing_log_spaced_and_end_at_the_last_step(steps):
    at = snapshot_steps(steps)
    assert at[-1] == steps
    assert all(1 <= a < b for a, b in zip(at, at[1:], strict=False))  # strictly increasing, in 1..steps
    assert 1 <= len(at) <= N_SNAPSHOTS
    if steps >= 10:
        assert at[0] <= steps / 10  # the first within the first 10% of the steps
    if steps <= 5:
        assert at == list(range(1, steps + 1))  # short runs: every step once, no duplicates
    if steps >= 1500:
        assert len(at) == N_SNAPSHOTS
        ratios = np.array(at[1:]) / np.array(at[:-1])
        assert ratios.max() / ratios.min() < 1.2  # even on a log scale (up to rounding)


@pytest.mark.parametrize("steps", [0, -3, 1.5, True, "20"])
def test_snapshot_steps_rejects_a_bad_step_count(steps):
    with pytest.raises(ConfigError) as err:
        snapshot_steps(steps)
    assert err.value.field == "steps"


def test_a_run_keeps_one_snapshot_per_snapshot_step_with_the_probes_attention(trained):
    snaps = trained.snapshots
    assert [s.step for s in snaps] == snapshot_steps(RUN.train.steps)
    L, cfg = RUN.task.length, RUN.model
    for s in snaps:
        assert s.probe_attention.shape == (cfg.n_layers, cfg.n_heads, 2 * L, 2 * L)
        np.testing.assert_allclose(s.probe_attention.sum(axis=-1), 1.0, rtol=1e-5)
        assert not np.triu(s.probe_attention, k=1).any()  # causal: no weight on a later key
        assert 0.0 <= s.token_accuracy <= 1.0 and 0.0 <= s.sequence_accuracy <= 1.0
    assert trained.snapshot_seconds > 0
    assert len({s.probe_attention.tobytes() for s in snaps}) == len(snaps)  # the maps move as it trains


def test_the_final_snapshot_equals_a_direct_evaluation_of_the_final_weights_on_the_subset(trained):
    final = trained.snapshots[-1]
    direct = evaluate(trained.params, RUN, n=SNAPSHOT_N_TEST)
    assert final.step == RUN.train.steps
    assert (final.token_accuracy, final.sequence_accuracy) == (direct.token_accuracy, direct.sequence_accuracy)
    np.testing.assert_array_equal(final.probe_attention, attention_maps(trained.params, RUN))


def assert_replays(snap) -> None:
    """The snapshot's probe attention and scores are those of RUN's weights replayed for exactly its steps."""
    trainer = Trainer(RUN)
    for _ in range(snap.step):
        trainer.step()
    np.testing.assert_array_equal(snap.probe_attention, attention_maps(trainer.params, RUN))
    direct = evaluate(trainer.params, RUN, n=SNAPSHOT_N_TEST)
    assert (snap.token_accuracy, snap.sequence_accuracy) == (direct.token_accuracy, direct.sequence_accuracy)


def test_a_snapshot_holds_the_weights_after_exactly_its_step(trained):
    assert_replays(trained.snapshots[len(trained.snapshots) // 2])


def test_snapshots_leave_the_loss_history_and_the_final_weights_bit_identical(trained):
    plain = train(RUN, snapshots=False)
    assert plain.snapshots == []
    np.testing.assert_array_equal(plain.loss_history, trained.loss_history)
    assert plain.params.keys() == trained.params.keys()
    for name, value in plain.params.items():
        np.testing.assert_array_equal(value, trained.params[name], err_msg=name)


def test_stack_and_unstack_round_trip(trained):
    arrays = stack(trained.snapshots)
    assert arrays["probe_attention"].shape == (len(trained.snapshots), *trained.snapshots[0].probe_attention.shape)
    back = unstack(arrays)
    assert [s.summary() for s in back] == [s.summary() for s in trained.snapshots]
    for a, b in zip(back, trained.snapshots, strict=True):
        np.testing.assert_array_equal(a.probe_attention, b.probe_attention)
    assert set(back[0].summary()) == {"step", "token_accuracy", "sequence_accuracy"}
    with pytest.raises(ValueError):
        unstack(arrays | {"step": arrays["step"][:-1]})


@pytest.fixture
def two_blas_threads():
    """OpenBLAS on 2 threads, as a process inherits it on a 2-core machine (skipped without OpenBLAS)."""
    if _blas.blas_threads() is None:
        pytest.skip("NumPy is not linked to OpenBLAS here")
    funcs = _blas._find()
    before = [get() for get, _ in funcs]
    for _, put in funcs:
        put(2)
    yield
    for (_, put), count in zip(funcs, before, strict=True):
        put(count)


def test_every_computation_of_a_run_reaches_blas_on_one_thread_called_from_train_or_not(two_blas_threads, monkeypatch):
    """A training step driven outside `train`, the evaluation, the attention maps and the hooked
    forward each run on one BLAS thread (seen from inside the model's LayerNorm) and leave the 2 threads after.
    With OpenBLAS's Haswell kernels two threads gave other bits (130 of 288 probe weights, 3.3e-07)."""
    seen = []
    layernorm = layers.layernorm_forward

    def watched(*args, **kwargs):
        seen.append(_blas.blas_threads())
        return layernorm(*args, **kwargs)

    monkeypatch.setattr(layers, "layernorm_forward", watched)
    trainer = Trainer(RUN)
    trainer.step()
    evaluate(trainer.params, RUN, n=10)
    attention_maps(trainer.params, RUN)
    run_with_hooks(trainer.params, task_of(RUN.task).probe(RUN.task)[None, :], RUN.model)
    assert seen and set(seen) == {1}
    assert _blas.blas_threads() == 2


def test_nested_and_concurrent_pins_restore_the_count_once_the_last_caller_leaves(two_blas_threads):
    inside, entered, release = [], threading.Event(), threading.Event()

    @_blas.on_one_blas_thread
    def hold():
        entered.set()
        release.wait(10)
        inside.append(_blas.blas_threads())

    other = threading.Thread(target=hold)
    with _blas.one_blas_thread():
        other.start()
        entered.wait(10)
        with _blas.one_blas_thread():
            inside.append(_blas.blas_threads())
    inside.append(_blas.blas_threads())  # the other thread is still inside its pin
    release.set()
    other.join(10)
    assert inside == [1, 1, 1]
    assert _blas.blas_threads() == 2


def test_a_snapshot_equals_the_steps_replayed_on_two_blas_threads(trained, two_blas_threads):
    """The bits of a run do not depend on the thread count: the snapshot's weights replayed step by step in a
    process on 2 BLAS threads give the same probe attention and the same scores."""
    assert_replays(trained.snapshots[-3])
