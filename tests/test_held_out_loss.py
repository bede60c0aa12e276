"""The test loss: teacher-forced cross-entropy over the answer tokens of the fixed test set, the same
sequences for every run of a task and L, stored with the run, and computed from the weights of runs stored before
it; the same bits whatever the BLAS thread count."""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from attncore import evaluate
from attncore.config import make_run
from attncore.model import loss_and_grads
from attncore.task import task_of
from attncore.train import train
from lab import store
from lab.store import backend, codec

STEPS = 40


@pytest.fixture(scope="module")
def trained():
    run = make_run("sort", 5, 0, steps=STEPS)
    return run, train(run, snapshots=False).params


def test_it_is_the_training_loss_function_on_the_fixed_test_set_not_a_training_batch(trained):
    run, params = trained
    float64 = make_run("sort", 5, 0, steps=STEPS, dtype="float64")
    params64 = {k: v.astype(np.float64) for k, v in params.items()}
    expected, _ = loss_and_grads(params64, task_of(run.task).test_set(run.task), float64.model, run.task.length)
    assert evaluate.test_loss(params64, float64) == pytest.approx(expected, rel=1e-12)
    # in float32 the model rounds, the log-softmax and mean do not: close to the float64 figure
    assert evaluate.test_loss(params, run) == pytest.approx(expected, rel=1e-4)


def test_every_run_of_a_task_and_length_is_scored_on_the_same_sequences(trained):
    run, params = trained
    # a run trained on lengths 2..5 (its L = 5), or on randomized positions, is scored on L = 5's test set at
    # positions 0..2L-1: the same weights give the same number, so paired runs are paired on the same sequences
    ranged = make_run("sort", 5, 0, steps=STEPS, train_lengths=(2, 5))
    randomized = make_run("sort", 5, 0, steps=STEPS, randomized_positions=32)
    same = evaluate.test_loss(params, run)
    assert evaluate.test_loss(params, ranged) == same == evaluate.test_loss(params, randomized)
    other_task = make_run("copy", 5, 0, steps=STEPS)
    assert evaluate.test_loss(params, other_task) != evaluate.test_loss(params, run)


def test_the_same_bits_whatever_the_blas_thread_count(trained):
    run, params = trained
    wide = make_run("sort", 8, 0, steps=5, d_model=64, n_heads=4, d_ff=256)  # products large enough to split
    wide_params = train(wide, snapshots=False).params
    for r, p in ((run, params), (wide, wide_params)):
        with threadpool_limits(limits=1, user_api="blas"):
            one = evaluate.test_loss(p, r)
        with threadpool_limits(limits=2, user_api="blas"):
            two = evaluate.test_loss(p, r)
        assert one == two and math.isfinite(one)  # bit for bit: it is a stored number


def test_a_run_stores_its_test_loss_and_reads_it_back(cache):
    run = make_run("copy", 4, 1, steps=STEPS)
    record = store.get_run(run)
    assert record.test_loss == evaluate.test_loss(record.params, run)
    assert record.summary()["test_loss"] == record.test_loss
    again = store.stored_run(run)
    assert again.test_loss == record.test_loss  # read from the sidecar, not recomputed
    listed = [s for s in store.list_cached() if s["config"] == run.to_dict()]
    assert listed and listed[0]["test_loss"] == record.test_loss  # the index's summaries carry it too


def test_a_run_stored_before_the_test_loss_gets_it_from_its_weights_with_the_same_bits(cache):
    run = make_run("copy", 4, 2, steps=STEPS)
    stored = store.get_run(run).test_loss
    path = store._Entry(run).path / backend.SIDECAR_FILE
    meta = codec.unseal(path.read_bytes())
    del meta["summary"]["test_loss"]  # as a sidecar written before the test loss was kept reads
    path.write_text(codec.seal(meta))
    old = store.stored_run(run)
    assert old is not None and old.test_loss is None  # served, not recomputed as damaged
    assert old.summary()["test_loss"] == stored  # computed from the stored weights on first use
    assert old.test_loss == stored  # and kept on the record


def test_a_module_importing_test_loss_by_name_does_not_make_it_a_pytest_test():
    assert evaluate.test_loss.__test__ is False
