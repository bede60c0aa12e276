"""attncore.serving: sizing real models for serving, from their shapes alone.

decoder (the Decoder: a model's shape, attention pattern, norms, experts), parameters (its parameter counts),
hf_config with hf_fields, hf_families and hf_weights (a Hugging Face config.json read into a Decoder), weights (the
weights' bytes as a checkpoint stores them, quantised or not), kvcache (key-value-cache bytes and what fits a GPU),
presets (published models as shipped config.json files, and GPUs), engine (a serving engine's fit, as vLLM accounts
for it), validation (published vLLM logs and the activation estimate's error against each), kvbench (cached against
uncached generation on attncore's own model).
It may import the core of attncore (config, model) and NumPy; nothing of attncore.mechanisms, lab, ui or cli.
"""
