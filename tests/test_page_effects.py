"""Each experiment page's named effect, trained at the page's own settings (the fewest seeds that show it on every
seed) and asserted at the size its sources report, so that a change that loses the effect goes red. The Regimes
page's (qk-norm at a high learning rate) is in test_stability. Margins are wide: they hold on any BLAS kernel,
whose float32 rounding moves these figures within the seed spread (docs/reproducibility.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def records(runs):
    """The runs trained as one sweep into the test's own store (the `cache` fixture)."""
    from lab.sweep import run_sweep

    return run_sweep(runs, n_jobs=2)


def test_induction_a_two_layer_model_has_a_phase_change_and_a_one_layer_model_does_not(cache):
    """The Induction heads page's default variants 2 layers and 1 layer (RoPE, INDUCTION_RUN: 2,000 steps).
    Olsson et al. 2022: a two-layer model's repeat loss drops abruptly; one layer cannot compose an induction head.
    docs/induction.md measured, over 6 seeds, phase steps 983-1,165 and a final repeat loss of 0.74-0.87 with two
    layers, no phase change and 2.95-2.99 with one (the first copy stays at ln V = 3.47)."""
    from lab.experiments import induction

    two, one = induction.Variant(2, "rope"), induction.Variant(1, "rope")
    assert {(v.layers, v.position) for v in (two, one)} <= set(induction.PAGE_VARIANTS)  # the page's defaults
    by_variant = induction.runs_of([two, one], range(2))
    found = dict(zip(induction.all_runs(by_variant), records(induction.all_runs(by_variant)), strict=True))
    for run_two, run_one in zip(by_variant[two], by_variant[one], strict=True):
        steps = run_two.train.steps
        change = induction.phase(found[run_two])
        assert change.step is not None and 0.2 * steps < change.step < 0.9 * steps, change
        assert induction.phase(found[run_one]).step is None
        final_two = found[run_two].snapshots[-1].figures
        final_one = found[run_one].snapshots[-1].figures
        ln_v = math.log(run_two.task.vocab)
        assert final_two["repeat_loss"] < 1.5 < 2.5 < final_one["repeat_loss"]  # about 0.8 against about 3.0
        assert abs(final_two["first_loss"] - ln_v) < 0.5  # the first copy cannot be predicted: about ln V
        assert final_two["icl_score"] < final_one["icl_score"] - 1.0


def test_ablations_without_positions_copy_collapses_per_sequence_but_not_per_token(cache):
    """The Ablations page's base (the sidebar's defaults: copy at L = 6, 1,500 steps) against "no position".
    The article: 1.000 per sequence against 0.204, per token 0.656 (chance 1/20); docs/experiments.md: without
    positions the model gets about a quarter of the sequences right, every other ablation none fewer."""
    from attncore.config import make_run
    from ui.variants import VARIANTS

    seeds = range(3)
    base = [make_run(seed=s) for s in seeds]
    ablated = [make_run(seed=s, **VARIANTS["no position"]) for s in seeds]
    found = records(base + ablated)
    for with_pos, without in zip(found[: len(base)], found[len(base) :], strict=True):
        full, none = with_pos.summary(), without.summary()
        assert full["sequence_accuracy"] > 0.95 and full["token_accuracy"] > 0.99
        assert none["sequence_accuracy"] < 0.5  # collapses per sequence
        assert none["token_accuracy"] > 0.4  # far above chance (0.05) per token: which symbols, not their order
        assert none["test_loss"] > full["test_loss"] + 0.3


def test_lengths_trained_on_1_to_8_alibi_reaches_past_the_range_where_sinusoidal_does_not(cache):
    """The Length generalisation page's first tab at its defaults (copy, trained on every length 1 to 8, 3,000
    steps, tested at 9 to 16 by greedy generation): per token past the range docs/experiments.md measured ALiBi
    0.38 (0.31-0.42 over 3 seeds) against sinusoidal 0.13 (0.11-0.15), chance 0.05 — Kazemnejad et al. 2023's
    ranking ALiBi > absolute; inside the range both learn copy (0.76 and 0.96 per sequence)."""
    from attncore.config import make_run
    from attncore.evaluate import evaluate_lengths
    from ui.length_view import LIT_L, LIT_STEPS

    seeds = range(2)
    runs = {p: [make_run("copy", LIT_L, s, train_min=1, position=p, steps=LIT_STEPS) for s in seeds]
            for p in ("alibi", "sinusoidal")}  # fmt: skip
    found = records(runs["alibi"] + runs["sinusoidal"])
    inside, past = {}, {}
    for record in found:  # as the page: every test length 1 to 16 on its own 500 sequences
        results = evaluate_lengths(record.params, record.config, range(1, 2 * LIT_L + 1))
        inside[record.config] = float(np.mean([r.sequence_accuracy for r in results[:LIT_L]]))
        past[record.config] = float(np.mean([r.token_accuracy for r in results[LIT_L:]]))
    for alibi, sinusoidal in zip(runs["alibi"], runs["sinusoidal"], strict=True):
        assert inside[alibi] > 0.5 and inside[sinusoidal] > 0.5  # both learn copy inside the range
        assert past[alibi] > past[sinusoidal] + 0.1, (past[alibi], past[sinusoidal])
        assert past[sinusoidal] < 0.25
