"""The Bigram-Backcopy task and the Attention sinks experiment (docs/sinks.md): its sequences (BOS first, triggers
copy, the table fixed by the task's fields), its Bayes loss against a brute-force sum over every sequence, the
sliding-window masks, the figures' shapes, the command's JSON and refusals, and short trainings end to end (the
store, the command, the page and its URL state)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from attncore import layers as L
from attncore import task as tasks
from attncore.config import ConfigError, make_run
from attncore.model import forward, init_params
from attncore.tasks import bigram_backcopy as bb
from attncore.tasks.bigram_backcopy import BB_RUN, make_backcopy

STEPS, SEEDS = 100, 2


def test_the_registry_finds_the_task_and_its_fields_come_from_it():
    task = tasks.get("bigram_backcopy")
    assert "bigram_backcopy" in tasks.names() and task.has_page == "app_pages/sinks.py"
    run = make_backcopy()
    assert (run.task.length, run.task.bigram_vocab, run.task.triggers) == (32, 32, 3)
    assert run.model.vocab_size == 33 and run.task.answer_len == 31  # BOS besides; the loss on every position
    assert run.to_dict()["task"] == {"name": "bigram_backcopy", "length": 32, "bigram_vocab": 32, "triggers": 3}
    with pytest.raises(ConfigError, match="triggers"):
        make_backcopy(triggers=31)  # at least two ordinary tokens
    with pytest.raises(ConfigError, match="is a setting of the bigram_backcopy task"):
        make_run("copy", 4, bigram_vocab=8)
    with pytest.raises(ConfigError, match="is a setting of the induction task"):
        make_backcopy(vocab=8)
    from cli.flags import task_flags

    flags = task_flags("bigram_backcopy")
    assert flags["N"][0] == "--N" and flags["bigram_vocab"][0] == "--bigram-vocab" and flags["triggers"][1] == 3


def test_bos_comes_first_and_every_trigger_makes_the_next_token_copy_the_one_before_it():
    task = make_backcopy(length=40, bigram_vocab=9, triggers=2).task
    seqs = bb.sequences(task, 3000, np.random.default_rng(1))
    V, K = 9, 2
    assert seqs.shape == (3000, 40) and (seqs[:, 0] == V).all() and (seqs[:, 1:] < V).all()
    assert (seqs[:, 1] < V - K).all()  # the first token is ordinary: a trigger needs a token before it
    trig = seqs[:, 1:-1] >= V - K  # x[t] a trigger, t = 1 .. N - 2
    assert trig.any() and (seqs[:, 2:][trig] == seqs[:, :-2][trig]).all()
    assert not (trig[:, 1:] & trig[:, :-1]).any()  # no two triggers side by side: a copy reads an ordinary token
    _, copy = bb.query_kinds(task, seqs)
    assert (copy[:, 1:] == trig).all() and not copy[:, 0].any()


def test_the_bigram_table_is_fixed_by_the_fields_and_the_ordinary_tokens_follow_it():
    a, b = make_backcopy(seed=0).task, make_backcopy(seed=5, steps=10).task
    assert bb.bigram_table(a) is bb.bigram_table(b)  # the same V and K: the same table, whatever the run
    assert not np.array_equal(bb.bigram_table(a)[:, :20], bb.bigram_table(make_backcopy(bigram_vocab=20).task)[:, :20])
    p = bb.bigram_table(make_backcopy(length=60, bigram_vocab=6, triggers=1).task)
    assert p.shape == (5, 6) and np.allclose(p.sum(axis=1), 1)
    task = make_backcopy(length=60, bigram_vocab=6, triggers=1).task
    seqs = bb.sequences(task, 4000, np.random.default_rng(2))
    bigram, _ = bb.query_kinds(task, seqs)
    now, nxt = seqs[:, :-1][bigram], seqs[:, 1:][bigram]
    counts = np.zeros((5, 6))
    np.add.at(counts, (now, nxt), 1)
    freq = counts / counts.sum(axis=1, keepdims=True)
    assert np.abs(freq - p).max() < 0.02  # 10^4+ draws a row


def test_the_held_out_set_is_fixed_and_not_the_training_stream():
    task = make_backcopy().task
    a, again = bb.test_sequences(task), bb.test_sequences(task)
    assert a.shape == (500, 32) and (a == again).all()
    batch = tasks.get("bigram_backcopy").sample_batch(task, 500, np.random.default_rng(0))
    assert not (batch == a).all(axis=1).any()


def _brute_force_bayes(task) -> tuple[float, np.ndarray]:
    """The best predictor's expected mean loss over every query, summed over every sequence with its probability."""
    V, K, N = task.bigram_vocab, task.triggers, task.length
    p, h = bb.bigram_table(task), bb.entropies(task)
    total, per_query = 0.0, np.zeros(N - 1)
    for rest in itertools.product(range(V), repeat=N - 1):
        x = (V, *rest)
        if x[1] >= V - K:
            continue
        prob, loss = 1.0 / (V - K), [math.log(V - K)]
        for t in range(1, N - 1):
            if x[t] >= V - K:
                prob *= x[t + 1] == x[t - 1]
                loss.append(0.0)
            else:
                prob *= p[x[t], x[t + 1]]
                loss.append(h[x[t]])
            if prob == 0:
                break
        if prob:
            total += prob * np.mean(loss)
            per_query += prob * np.array(loss)
    return total, per_query


def test_the_bayes_loss_is_the_brute_force_sum_over_every_sequence():
    task = make_backcopy(length=6, bigram_vocab=4, triggers=1).task
    total, per_query = _brute_force_bayes(task)
    h, _ = bb.bayes_by_query(task)
    assert np.allclose(h, per_query, rtol=0, atol=1e-12)
    assert bb.bayes_loss(task) == pytest.approx(total, abs=1e-12)
    assert bb.bayes_loss(task, [0]) == pytest.approx(math.log(3))
    assert 0 < bb.bayes_bigram_loss(task) < math.log(4)


def test_the_bayes_loss_matches_the_held_out_sequences():
    task = make_backcopy().task
    seqs = bb.test_sequences(task)
    bigram, _ = bb.query_kinds(task, seqs)
    h = bb.entropies(task)
    empirical = h[seqs[:, :-1][bigram]].mean()  # the best predictor's expected loss on these sequences' contexts
    assert empirical == pytest.approx(bb.bayes_bigram_loss(task), rel=0.02)


def test_a_key_outside_the_window_gets_zero_weight_and_the_sink_keeps_key_0():
    mask = L.window_mask(6, 3)
    assert mask.tolist()[5] == [False, False, False, True, True, True]
    assert mask.tolist()[1] == [True, True, False, False, False, False]
    assert L.window_mask(6, 3, sink=True).tolist()[5] == [True, False, False, True, True, True]
    run = make_backcopy(length=12, steps=1)
    params = init_params(run.model, 0)
    tokens = bb.test_sequences(run.task)[:3, :-1]
    T = tokens.shape[1]
    for sink in (False, True):
        keys = L.window_mask(T, 4, sink)
        _, cache = forward(params, tokens, run.model, keys=keys)
        for block in cache.blocks:
            w = block.attn.weights  # (B, H, T, T)
            assert np.allclose(w.sum(axis=-1), 1)
            assert (w[..., ~(keys & L.causal_mask(T))] == 0).all()
            assert (w[..., 6, 2] == 0).all() and ((w[..., 6, 0] > 0) == sink).all()
    full = forward(params, tokens, run.model)[0]
    everything = forward(params, tokens, run.model, keys=np.ones((T, T), bool))[0]
    assert np.array_equal(full, everything)  # all keys allowed: the causal mask alone
    assert np.array_equal(full[:, :4], forward(params, tokens, run.model, keys=L.window_mask(T, 4))[0][:, :4])


def test_a_window_longer_than_the_sequence_is_refused_naming_its_range():
    run = make_backcopy()
    with pytest.raises(ConfigError, match=r"window: .*1.*29"):
        bb.window_losses(init_params(run.model, 0), run, 30)


def test_the_figures_of_an_untrained_model_have_their_shapes_and_ranges():
    run = make_backcopy(n_layers=2, n_heads=2, length=16)
    params = init_params(run.model, 0)
    f = bb.sink_figures(params, run, 20)
    shapes = tasks.get("bigram_backcopy").snapshot_shapes(2, 2, 1)
    assert {k: (1, *np.shape(v)) for k, v in f.items()} == {k: v for k, v in shapes.items() if k in f}
    assert ((0 <= f["sink_share"]) & (f["sink_share"] <= 1)).all()
    # at initialisation attention is near uniform: the share near a uniform head's
    assert abs(f["sink_share"].mean() - bb.uniform_share(run.task, 20)) < 0.1
    task = tasks.get("bigram_backcopy")
    zeroed = task.evaluate(params, run, head_mask=np.array([[1.0, 0.0], [1.0, 1.0]]), n=20)  # a head zeroed
    mask = np.array([[1.0, 0.0], [1.0, 1.0]])
    assert (
        0 <= zeroed.token_accuracy <= 1 and bb.held_out(params, run, 20, mask).loss != bb.held_out(params, run, 20).loss
    )
    w = bb.window_losses(params, run, 4, n=20)
    assert w.queries == 10 and w.full_loss > w.bayes_loss > 0


def test_the_command_refuses_bad_input_in_one_sentence(capsys):
    from cli.main import main

    assert main(["sinks", "--window", "30", "--estimate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "window" in err and "29" in err
    assert main(["sinks", "--triggers", "40", "--estimate"]) == 2
    assert "triggers" in capsys.readouterr().err
    assert main(["sinks", "--V", "8", "--estimate"]) == 2  # the induction task's flag is not one of this command's


def test_the_command_line_and_lab_share_the_defaults():
    from cli import sinks as cli_sinks
    from lab.experiments import sinks

    assert cli_sinks.DEFAULT_SEEDS == sinks.DEFAULT_SEEDS and cli_sinks.DEFAULT_WINDOW == sinks.DEFAULT_WINDOW
    assert sinks.command([0, 1, 2], 8, **BB_RUN) == "python -m attncore sinks --seeds 0 1 2"
    assert (
        sinks.command([0], 5, steps=500, lr=3e-3, embed_std=0.1)
        == "python -m attncore sinks --seeds 0 --window 5 --steps 500 --lr 0.003 --embed-std 0.1"
    )


def _per_seed(seed, share, full, window, sink):
    head = {"head": "L0H0", "share": share, "gu_importance": share, "sink_rate": 1.0, "copy_attention": 0.9}
    return {"seed": seed, "first_token_attention": share, "mean_share": share, "uniform_share": 0.1,
            "full_loss": full, "window_loss": window, "window_wide_loss": window, "window_sink_loss": sink,
            "window_key1_loss": window + 0.01 * (window - full), "window_key2_loss": window - 0.01 * (window - full),
            "bayes_loss": 2.0, "window": 8, "test_loss": 2.4,
            "bayes_test_loss": 2.3, "bigram_loss": 2.5, "bayes_bigram_loss": 2.45, "copy_loss": 0.05,
            "sink_head": [0, 0], "copy_head": [0, 0], "gu_importance": share, "sink_heads": int(share > 0.3),
            "epsilon": 0.3, "copy_attention": 0.9, "roles": "one head sinks and copies", "heads": [head],
            "value_norm_first": 1.0, "value_norm_rest": 2.0, "resid_norm_first": 1.0,
            "resid_norm_rest": 1.0}  # fmt: skip


def test_the_verdicts_follow_the_paired_rule_and_never_outrun_the_seeds():
    from lab import stats
    from lab.experiments import sinks, sinks_text

    six = [_per_seed(s, 0.3 + 0.01 * s, 2.3, 2.5 + 0.01 * s, 2.3) for s in range(6)]
    rows = sinks.comparisons(six)
    by = sinks.verdicts(rows)
    assert by[sinks.SHARE] == stats.SHOWN and by[sinks.WINDOW] == stats.SHOWN and by[sinks.SINK] == stats.SHOWN
    assert (rows["ci_low"] > 0).iloc[0] and (rows["ci_high"] < 0).iloc[2]  # the interval agrees with the verdict
    three = sinks.comparisons(six[:3])
    assert set(sinks.verdicts(three).values()) == {stats.TOO_FEW}  # 3 seeds: the floor 0.25 cannot show anything
    same = sinks.comparisons([_per_seed(s, 0.1, 2.3, 2.3, 2.3) for s in range(6)])
    assert set(sinks.verdicts(same).values()) == {stats.IDENTICAL}
    text = sinks_text.finding(six, rows)
    assert "position 0" in text and stats.SHOWN in text and "against the Bayes loss 2.30" in text


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from apptest_helpers import temporary_store

    from lab.experiments import sinks

    runs = sinks.runs_of(range(SEEDS), steps=STEPS)
    with temporary_store(tmp_path_factory, runs):
        yield runs


@pytest.mark.slow
def test_the_record_keeps_the_figures_and_the_json_has_one_object_per_seed(store, capsys):
    from cli.main import main
    from lab.store import get_run

    record = get_run(store[0])
    final = record.snapshots[-1].figures
    assert np.shape(final["sink_share"]) == (1, 1) and np.shape(final["resid_norm_first"]) == (2,)
    assert record.snapshots[-1].step == STEPS and set(record.figures) == {"bigram_loss", "copy_loss"}
    assert main(["sinks", "--seeds", "0", "1", "--steps", str(STEPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["seed"] for s in out["seeds"]] == [0, 1]
    for s in out["seeds"]:
        assert {"seed", "first_token_attention", "full_loss", "window_loss", "window_sink_loss", "bayes_loss"} <= set(s)
        assert s["first_token_attention"] == pytest.approx(float(np.max(final["sink_share"]))) or s["seed"] == 1
    assert set(out["verdicts"]) == {"mean share vs a uniform head", "window of W + 1 vs full attention",
                                    "W + key 0 vs window of W + 1", "W + key 1 vs window of W + 1",
                                    "W + key 2 vs window of W + 1"}  # fmt: skip
    assert set(out["verdicts"].values()) == {"too few seeds"}  # 2 seeds show nothing
    assert main(["sinks", "--seeds", "0", "1", "--steps", str(STEPS), "--estimate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing"] == 0


@pytest.mark.slow
def test_the_page_draws_the_experiment_and_keeps_its_controls_in_the_url(store):
    from apptest_helpers import charts, texts
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"sk_seeds": str(SEEDS), "sk_steps": str(STEPS), "sk_win": "5"})
    at.run()
    at.switch_page("app_pages/sinks.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not any(b.key == "sk_train" for b in at.button)  # every run cached: nothing to train
    assert "What the lab found." in texts(at.markdown)
    assert len(charts(at)) == 3
    assert at.number_input(key="sk_win").value == 5
    said = texts(at.caption)  # one head per run: it is the sink head, and there are no other heads to name
    assert "one head, its sink head" in said and "other heads" not in said
    assert "other heads" not in json.dumps(charts(at)[0])
    at = AppTest.from_file("../dashboard.py", default_timeout=120)  # every control read back from a URL
    query = {"sk_seeds": "3", "sk_steps": "500", "sk_win": "6", "sk_lr": "3e-3", "sk_decay": "cosine", "sk_emb": "0.1",
             "sk_heads": "2"}  # fmt: skip
    at.query_params.update(query)
    at.run()
    at.switch_page("app_pages/sinks.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.number_input(key="sk_seeds").value == 3 and at.selectbox(key="sk_steps").value == 500
    assert at.number_input(key="sk_win").value == 6 and at.selectbox(key="sk_lr").value == 3e-3
    assert at.selectbox(key="sk_emb").value == 0.1 and at.selectbox(key="sk_heads").value == 2
    assert at.selectbox(key="sk_decay").value == "cosine"
    assert any(b.key == "sk_train" for b in at.button)  # these runs are missing: the estimate and its button


@pytest.mark.slow
def test_a_hostile_url_gets_one_sentence_not_a_traceback(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"sk_win": "999", "sk_lr": "banana", "sk_emb": "-1", "sk_heads": "64"})
    at.run()
    at.switch_page("app_pages/sinks.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.number_input(key="sk_win").value <= BB_RUN["length"] - 3
    assert at.selectbox(key="sk_emb").value == BB_RUN["embed_std"] and at.selectbox(key="sk_heads").value == 1


def test_the_share_chart_names_only_the_roles_it_draws():
    import pandas as pd

    from ui.charts.sinks import sink_share

    one = pd.DataFrame({"seed": [0, 0], "step": [10, 20], "head": ["L0H0"] * 2, "share": [0.1, 0.9],
                        "role": ["sink head"] * 2})  # fmt: skip
    two = pd.concat([one, one.assign(head="L0H1", share=[0.1, 0.05], role="other heads")])
    assert "other heads" not in json.dumps(sink_share(one, 0.1).to_dict())
    domain = sink_share(two, 0.1).to_dict()["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert domain == ["sink head", "other heads"]
