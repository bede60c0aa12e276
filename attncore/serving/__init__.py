"""attncore.serving: sizing real models for serving, from their shapes alone.

parameters (parameter counts of a decoder), kvcache (key-value-cache bytes and what fits a GPU), presets
(published model shapes and GPUs), engine (a serving engine's fit, as vLLM accounts for it), validation
(published vLLM logs and the activation estimate's error against each), kvbench (cached against uncached
generation on attncore's own model).
It may import the core of attncore (config, model) and NumPy; nothing of attncore.mechanisms, lab, ui or cli.
"""
