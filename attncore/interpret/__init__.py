"""attncore.interpret: interventions on a trained model — what it relies on, not what its maps look like.

hooks (hook points on the model's own forward pass that record every activation and let any be replaced, and
the backward from one query's logits to an overridden attention row), patching (activation
patching, denoising or noising: the fraction each head, position, residual stream and MLP restores or destroys),
lens (the logit lens), heads (detection scores for 0/1 attention patterns, on the probe, the test set and the
training snapshots), explain (the permutation test, Jain & Wallace's adversarial attention, Wiegreffe & Pinter's
seed baseline, in memory-bounded chunks). It may import the core of attncore (config, layers, model, inspect,
snapshots, memory, the task registry) and NumPy; nothing of the task modules (it asks a task through the registry),
serving, mechanisms, lab, ui or cli.
"""
