"""The numerics of length generalisation: ALiBi, randomized positions and padded mixed-length batches, each
checked against finite differences and the PyTorch oracle; ALiBi's slopes; greedy generation with the KV cache
against recomputation; per-sequence losses of a padded batch independent of the batch order and the padding amount."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import agrees, centred_difference

from attncore import layers
from attncore.config import ConfigError, make_run
from attncore.model import (
    AnswerRows,
    forward,
    generate,
    init_params,
    loss_and_grads,
    padded_forward,
    sequence_losses,
)  # fmt: skip
from attncore.positions import alibi_bias, alibi_slopes
from attncore.task import get as get_task
from attncore.task import task_of
from attncore.tasks import draw_positions, pad_sequences

ENCODINGS = ("learned", "sinusoidal", "rope", "alibi")
N_MAX = 24


def small(position, *, n_max=None, lengths=None, norm="pre", task="sort", heads=4):
    return make_run(
        task, 4, d_model=16, n_heads=heads, d_ff=32, position=position, norm=norm, dtype="float64",
        randomized_positions=n_max, train_lengths=lengths,
    )  # fmt: skip


def padded_batch(rng, ns, task="sort"):
    return pad_sequences([get_task(task).make_sequences(rng.integers(0, 20, (1, n)))[0] for n in ns])


# --- ALiBi's slopes -----------------------------------------------------------


def test_alibi_slopes_of_four_and_eight_heads_are_press_et_al_s():
    assert alibi_slopes(4) == (1 / 4, 1 / 16, 1 / 64, 1 / 256)
    assert alibi_slopes(8) == tuple(2.0**-h for h in range(1, 9))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 16])
def test_alibi_slopes_match_the_reference_recursion_for_any_head_count(n):
    torch_reference = pytest.importorskip("torch_reference")
    assert np.allclose(alibi_slopes(n), torch_reference.alibi_slopes(n), rtol=1e-13, atol=0)  # the recursion rounds
    assert len(set(alibi_slopes(n))) == n  # every head its own slope


def test_alibi_slopes_of_six_heads_are_the_four_then_every_other_of_eight():
    eight = [2.0**-h for h in range(1, 9)]
    assert alibi_slopes(6) == tuple([2.0 ** (-2 * h) for h in range(1, 5)] + eight[0::2][:2])


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(np.array([0, 3, 7]), np.array([0, 3, 7]), 2)
    assert bias.shape == (2, 3, 3)
    assert bias[0, 2, 0] == -(1 / 16) * 7 and bias[1, 1, 0] == -(1 / 256) * 3 and bias[0, 1, 1] == 0


# --- finite differences -------------------------------------------------------


def fd_check(run, params, seqs, n, positions=None, lengths=None, n_coords=8):
    """Sampled coordinates of every tensor: the analytic gradient against a centred difference (EPS / 10 at kinks)."""
    _, grads = loss_and_grads(params, seqs, run.model, n, positions=positions, lengths=lengths)
    rng = np.random.default_rng(2)

    def loss():
        return loss_and_grads(params, seqs, run.model, n, positions=positions, lengths=lengths)[0]

    for name, array in params.items():
        g = grads[name].reshape(-1)
        resolvable = np.flatnonzero(np.abs(g) > 1e-6)
        assert resolvable.size, f"{name}: nothing to check"
        for i in rng.choice(resolvable, size=min(n_coords, resolvable.size), replace=False):
            fd = centred_difference(loss, array, i, 1e-6)
            if not agrees(fd, g[i], 5e-9):
                fd = centred_difference(loss, array, i, 1e-7)  # a ReLU kink within eps
                assert agrees(fd, g[i], 5e-8), f"{name}[{i}]: analytic {g[i]} vs finite difference {fd}"


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_alibi_gradients_match_finite_differences(random_params, norm):
    run = small("alibi", norm=norm)
    params = random_params(run.model, seed=0)
    fd_check(run, params, task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(1)), 4)


@pytest.mark.parametrize("position", ENCODINGS)
def test_randomized_position_gradients_match_finite_differences(random_params, position):
    run = small(position, n_max=N_MAX)
    params = random_params(run.model, seed=0)
    rng = np.random.default_rng(1)
    seqs = task_of(run.task).sample_batch(run.task, 3, rng)
    positions = draw_positions(rng, 8, N_MAX)
    assert positions[-1] > 7  # not 0..7
    fd_check(run, params, seqs, 4, positions=positions)


@pytest.mark.parametrize("position", ["learned", "alibi", "rope"])
def test_padded_batch_gradients_match_finite_differences(random_params, position):
    run = small(position, lengths=(1, 4))
    params = random_params(run.model, seed=0)
    seqs, ns = padded_batch(np.random.default_rng(1), [4, 1, 3])
    fd_check(run, params, seqs, 4, lengths=ns)


# --- the PyTorch oracle ---------------------------------------------------------


def oracle(run, params, seqs, n, positions=None, lengths=None):
    torch_reference = pytest.importorskip("torch_reference")
    loss, grads = loss_and_grads(params, seqs, run.model, n, positions=positions, lengths=lengths)
    model = torch_reference.TorchModel(run.model, params)
    t_loss, t_grads = torch_reference.torch_loss_and_grads(model, seqs, n, positions, lengths)
    assert abs(loss - t_loss) <= 1e-12 * abs(t_loss)
    for name, g in grads.items():
        ref = t_grads[name]
        assert np.abs(g - ref).max() <= 1e-9 * np.abs(ref).max(), name


@pytest.mark.parametrize("position", ENCODINGS)
@pytest.mark.parametrize("heads", [4, 2])
def test_randomized_positions_match_torch(random_params, position, heads):
    run = small(position, n_max=N_MAX, heads=heads)
    rng = np.random.default_rng(3)
    seqs = task_of(run.task).sample_batch(run.task, 5, rng)
    oracle(run, random_params(run.model, seed=3), seqs, 4, positions=draw_positions(rng, 8, N_MAX))


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("position", ENCODINGS + ("none",))
def test_padded_mixed_batch_matches_torch(random_params, position, norm):
    run = small(position, lengths=(1, 4), norm=norm)
    seqs, ns = padded_batch(np.random.default_rng(4), [2, 4, 1, 3, 4])
    oracle(run, random_params(run.model, seed=4), seqs, 4, lengths=ns)


@pytest.mark.parametrize("position", ENCODINGS)
def test_padded_mixed_batch_on_randomized_positions_matches_torch(random_params, position):
    run = small(position, n_max=N_MAX, lengths=(1, 4))
    rng = np.random.default_rng(5)
    seqs, ns = padded_batch(rng, [3, 1, 4, 2])
    oracle(run, random_params(run.model, seed=5), seqs, 4, positions=draw_positions(rng, 8, N_MAX), lengths=ns)


# --- a padded batch computes the rows of the lengths it holds -------------------


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("position", ENCODINGS + ("none",))
def test_packed_rows_give_the_full_forward_s_logits(random_params, position, norm):
    """AnswerRows compute each sequence's real positions only and output its answer rows: the same logits as
    the whole padded batch computed at every position, at those rows."""
    run = small(position, lengths=(1, 5), norm=norm)
    params = random_params(run.model, seed=6)
    seqs, ns = padded_batch(np.random.default_rng(6), [5, 1, 3, 2, 5, 4])
    idx = seqs[:, :-1]
    padding = layers.padding_mask(2 * ns, idx.shape[1])
    full, _ = forward(params, idx, run.model, padding=padding)  # (B, T, V)
    rows = AnswerRows.of(ns, ns, idx.shape[1], computed=2 * ns)
    packed, _ = forward(params, idx, run.model, out_from=rows, padding=padding)
    expected = np.concatenate([full[b, n : 2 * n] for b, n in enumerate(ns)])
    assert packed.shape == expected.shape and np.abs(packed - expected).max() < 1e-12
    logits, targets, _, _ = padded_forward(params, seqs, ns, run.model)
    assert np.array_equal(logits, packed)
    assert np.array_equal(targets, np.concatenate([s[n + 1 : 2 * n + 1] for s, n in zip(seqs, ns, strict=True)]))


def test_windows_that_would_pass_the_end_are_moved_back(random_params):
    """Rows of unequal counts: each window is W = max(counts) wide and ends inside the batch."""
    run = small("rope", lengths=(1, 4))
    params = random_params(run.model, seed=7)
    idx = task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(7))[:, :-1]  # (3, 8)
    starts, counts = np.array([6, 0, 3]), np.array([2, 5, 1])
    rows = AnswerRows.of(starts, counts, 8)
    assert rows.window[:, 0].tolist() == [3, 0, 3]
    full, _ = forward(params, idx, run.model)
    packed, _ = forward(params, idx, run.model, out_from=rows)
    expected = np.concatenate([full[b, s : s + c] for b, (s, c) in enumerate(zip(starts, counts, strict=True))])
    assert np.abs(packed - expected).max() < 1e-12


def test_a_padded_training_batch_costs_the_attention_of_its_longest_length_only():
    """The work of a mixed batch, read off the forward's cache: the first block runs on the real positions
    (sum 2n rows, not B·2·max n), the last block asks max n queries per sequence (a batch at the longest
    length asks as many) and its MLP and the head run on the answer rows (sum n)."""
    run = make_run("copy", 8, train_lengths=(1, 8), mixed_lengths=True)
    ns = np.array([8, 1, 3, 5, 2, 8, 4, 6])
    seqs = pad_sequences([get_task("copy").make_sequences(np.zeros((1, n), dtype=np.int64))[0] for n in ns])[0]
    params = init_params(run.model, 0)
    logits, _, rows, cache = padded_forward(params, seqs, ns, run.model)
    first, last = cache.blocks[0], cache.blocks[-1]
    assert first.ffn.x.shape[0] == 2 * ns.sum()  # the first block's MLP input rows
    assert first.attn.weights.shape == (len(ns), run.model.n_heads, 16, 16)  # its attention: every position asks
    assert last.attn.weights.shape == (len(ns), run.model.n_heads, 8, 16)  # the last: max n = 8 queries each
    assert last.ffn.x.shape[0] == ns.sum() and logits.shape == (ns.sum(), run.model.vocab_size)
    assert rows.keep.size == ns.sum() and rows.present.size == 2 * ns.sum()


@pytest.mark.parametrize(
    ("starts", "counts", "computed"),
    [
        ([0, 2], [0, 1], None),
        ([-1, 0], [1, 1], None),
        ([7, 0], [2, 1], None),
        ([2, 0], [2, 1], [3, 8]),
        ([0], [1, 1], None),
    ],
)
def test_answer_rows_outside_the_batch_are_refused(starts, counts, computed):
    with pytest.raises(ValueError):
        AnswerRows.of(starts, counts, 8, computed)


# --- generation -----------------------------------------------------------------


@pytest.mark.parametrize("heads", [4, 3, 6])
def test_alibi_generation_with_the_kv_cache_matches_full_recomputation(random_params, heads):
    run = make_run("copy", 5, d_model=24, n_heads=heads, position="alibi", dtype="float64")
    params = random_params(run.model, seed=5)
    prompt = task_of(run.task).sample_batch(run.task, 6, np.random.default_rng(6))[:, :6]
    cached, logits_c = generate(params, prompt, 9, run.model, use_cache=True)
    full, logits_f = generate(params, prompt, 9, run.model, use_cache=False)
    assert np.array_equal(cached, full)
    assert np.abs(logits_c - logits_f).max() < 1e-12


def test_alibi_attends_by_distance_only(random_params):
    """ALiBi carries no embedding: the same tokens shifted give the same logits (no absolute position)."""
    run = make_run("copy", 5, d_model=16, position="alibi", dtype="float64")
    params = random_params(run.model, seed=7)
    assert "pos_emb" not in params
    idx = task_of(run.task).sample_batch(run.task, 2, np.random.default_rng(8))[:, :-1]
    a, _ = forward(params, idx, run.model)
    b, _ = forward(params, idx, run.model, positions=np.arange(10) + 17)
    assert np.abs(a - b).max() < 1e-12


# --- padding: the article's trap 4 ------------------------------------------------


@pytest.fixture(scope="module")
def padded_case():
    from conftest import _random_params

    run = small("learned", lengths=(1, 4))
    params = _random_params(run.model, seed=9)
    rng = np.random.default_rng(10)
    seqs = [
        get_task("sort").make_sequences(rng.integers(0, 20, (1, n)))[0] for n in (1, 2, 2, 1, 2, 1)
    ]  # room for 2 more of padding in the 9 rows
    return run, params, seqs


def per_sequence(run, params, seqs, order=None, extra_pad=0, **kw):
    order = np.arange(len(seqs)) if order is None else order
    batch, ns = pad_sequences([seqs[i] for i in order])
    batch = np.pad(batch, ((0, 0), (0, 2 * extra_pad)))  # more padding on the right
    losses = sequence_losses(params, batch, ns, run.model, **kw)
    out = np.empty(len(seqs))
    out[order] = losses
    return out


def test_per_sequence_losses_do_not_depend_on_batch_order_or_padding(padded_case):
    run, params, seqs = padded_case
    base = per_sequence(run, params, seqs)
    alone = [sequence_losses(params, *pad_sequences([s]), run.model)[0] for s in seqs]
    assert np.abs(base - alone).max() < 1e-12  # as if each sequence were its own batch
    order = np.random.default_rng(0).permutation(len(seqs))
    assert np.abs(per_sequence(run, params, seqs, order) - base).max() < 1e-12
    assert np.abs(per_sequence(run, params, seqs, extra_pad=2) - base).max() < 1e-12


def test_without_the_loss_mask_per_sequence_losses_change_with_the_padding(padded_case):
    run, params, seqs = padded_case
    base = per_sequence(run, params, seqs, loss_mask=False)
    assert np.abs(per_sequence(run, params, seqs, extra_pad=2, loss_mask=False) - base).max() > 1e-3


def test_right_padding_under_the_causal_mask_never_reaches_a_real_query(padded_case):
    """With right padding a real query at i reads keys j <= i, all real: the key padding mask changes only the
    padded rows. So dropping it leaves every answer's loss unchanged (to rounding); it matters for left padding
    and for non-causal attention. The lab's padding mask is still applied, in one place (layers.attention_mask)."""
    run, params, seqs = padded_case
    with_mask = per_sequence(run, params, seqs, extra_pad=2)
    without = per_sequence(run, params, seqs, extra_pad=2, key_padding=False)
    assert np.abs(with_mask - without).max() < 1e-12


def test_left_padding_without_the_key_mask_changes_the_outputs(random_params):
    """The article's trap 4 where it bites: padding keys before the sequence. ALiBi sees distances only, so with
    the key mask the left-padded sequence gives exactly its unpadded logits; without it every real row changes."""
    run = small("alibi", lengths=(1, 4))
    params = random_params(run.model, seed=9)
    idx = task_of(run.task).sample_batch(run.task, 1, np.random.default_rng(10))[:, :-1]  # (1, 8)
    left = np.concatenate([np.zeros((1, 3), dtype=np.int64), idx], axis=1)
    alone, _ = forward(params, idx, run.model)
    masked, _ = forward(params, left, run.model, padding=np.array([[False] * 3 + [True] * 8]))
    unmasked, _ = forward(params, left, run.model)
    assert np.abs(masked[:, 3:] - alone).max() < 1e-12
    assert np.abs(unmasked[:, 3:] - alone).max() > 1e-3


def test_fully_masked_rows_in_a_padded_batch_give_no_nan(random_params):
    run = small("alibi", lengths=(1, 4))
    params = random_params(run.model, seed=1)
    idx = task_of(run.task).sample_batch(run.task, 2, np.random.default_rng(2))[:, :-1]
    padding = np.zeros(idx.shape, dtype=bool)
    padding[1] = True  # sequence 0: every key masked
    logits, _ = forward(params, idx, run.model, padding=padding)
    assert np.isfinite(logits).all()


def test_the_mask_combines_in_one_place():
    combined = layers.attention_mask(layers.causal_mask(3), np.array([[True, True, False]]))
    assert combined.shape == (1, 1, 3, 3) and not combined[0, 0, 2, 2] and combined[0, 0, 1, 0]


# --- batches ------------------------------------------------------------------------


def test_one_length_per_batch_draws_every_length_of_the_range():
    run = make_run("reverse", 6, train_lengths=(2, 6))
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(60):
        seqs, ns = task_of(run.task).sample_range_batch(run.task, 8, rng)
        assert ns is None and seqs.shape[0] == 8
        n = (seqs.shape[1] - 1) // 2
        seen.add(n)
        assert np.array_equal(seqs[:, n + 1 :], seqs[:, :n][:, ::-1])  # reverse
    assert seen == {2, 3, 4, 5, 6}


def test_mixed_batches_are_right_padded_with_each_answer_in_place():
    run = make_run("sort", 5, train_lengths=(1, 5), mixed_lengths=True)
    seqs, ns = task_of(run.task).sample_range_batch(run.task, 16, np.random.default_rng(1))
    assert seqs.shape == (16, 2 * ns.max() + 1) and len(set(ns.tolist())) > 1
    for row, n in zip(seqs, ns, strict=True):
        assert row[n] == 20 and np.array_equal(row[n + 1 : 2 * n + 1], np.sort(row[:n]))


def test_randomized_positions_are_sorted_and_distinct():
    p = draw_positions(np.random.default_rng(0), 10, 12)
    assert np.all(np.diff(p) > 0) and p.min() >= 0 and p.max() < 12


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(randomized_positions=8), "randomized_positions"),  # below 2L = 12
        (dict(randomized_positions=32, position="none"), "randomized_positions"),
        (dict(train_lengths=(0, 6)), "train_lengths"),
        (dict(mixed_lengths=True), "mixed_lengths"),
    ],
)
def test_bad_range_settings_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as e:
        make_run("copy", 6, **kwargs)
    assert e.value.field == field


@pytest.mark.parametrize("position", ENCODINGS)
def test_generation_on_randomized_positions_with_the_cache_matches_recomputation(random_params, position):
    run = small(position, n_max=N_MAX)
    params = random_params(run.model, seed=11)
    prompt = task_of(run.task).sample_batch(run.task, 4, np.random.default_rng(12))[:, :5]
    positions = draw_positions(np.random.default_rng(13), 8, N_MAX)
    cached, logits_c = generate(params, prompt, 4, run.model, positions=positions)
    full, logits_f = generate(params, prompt, 4, run.model, use_cache=False, positions=positions)
    plain, _ = generate(params, prompt, 4, run.model, use_cache=False)
    assert np.array_equal(cached, full) and np.abs(logits_c - logits_f).max() < 1e-12
    one_pass, _ = forward(params, np.concatenate([prompt, full[:, :-1]], axis=1), run.model, positions=positions)
    assert np.abs(one_pass[:, 4:] - logits_f).max() < 1e-12  # the last logits of one forward pass
    assert not np.array_equal(logits_f, generate(params, prompt, 4, run.model)[1]) and plain.shape == full.shape


def test_evaluation_on_randomized_positions_uses_a_fixed_draw_per_length(random_params):
    from attncore.evaluate import evaluate_lengths, evaluation_positions

    run = make_run("copy", 4, steps=10, position="rope", randomized_positions=12, train_lengths=(1, 4))
    params = random_params(run.model, seed=1)
    a = evaluate_lengths(params, run, [2, 4, 7], randomized=True)
    b = evaluate_lengths(params, run, [2, 4, 7], randomized=True)
    assert a == b  # the same fixed draw each time
    assert a[2].sequence_accuracy is None and "N_MAX=12" in a[2].note  # 2·7 = 14 positions > 12
    p = evaluation_positions(4, 12)
    assert len(p) == 8 and np.all(np.diff(p) > 0) and np.array_equal(p, evaluation_positions(4, 12))
    with pytest.raises(ConfigError):
        evaluate_lengths(params, make_run("copy", 4), [4], randomized=True)
