"""attncore.interpret: interventions on a trained model — what it relies on, not what its maps look like.

hooked (a forward pass from the same parameters and layer functions that records every activation and lets any
be replaced, and the backward from one query's logits to an overridden attention row), patching (activation
patching, denoising or noising: the fraction each head, position, residual stream and MLP restores or destroys),
lens (the logit lens), heads (detection scores for 0/1 attention patterns, on the probe, the test set and the
training snapshots), explain (the permutation test, Jain & Wallace's adversarial attention, Wiegreffe & Pinter's
seed baseline, in memory-bounded chunks). It may import the core of attncore (config, layers, model, tasks,
inspect, snapshots, memory) and NumPy; nothing of serving, mechanisms, lab, ui or cli.
"""
