"""serving: sizing real models for serving, from their shapes alone (the LLM calculator behind the Parameters and
KV cache pages and `python -m attncore params / kv-cache`).

decoder (the Decoder: a model's shape, attention pattern, norms, experts), parameters (its parameter counts),
hf_config with hf_fields, hf_families and hf_weights (a Hugging Face config.json read into a Decoder), weights (the
weights' bytes as a checkpoint stores them, quantised or not), safetensors_count (a checkpoint's own count from its
headers), kvcache (key-value-cache bytes and what fits a GPU), presets (published models as shipped config.json
files in configs/, found next to this package, and GPUs), engine (a serving engine's fit, as vLLM accounts for it),
validation (published vLLM logs and the activation estimate's error against each), kvbench (cached against
uncached generation on attncore's own model), hub (a model's config.json and headers fetched by its Hub id).

It may import NumPy and the standard library; hub alone may import huggingface_hub. Of attncore it imports the
checks (attncore.checks: ConfigError, check_int, check_choice) and three bridges to the lab's own model
(parameters.describe_attncore / attncore_config / crosscheck_attncore and hf_families' "attncore" config.json:
attncore.config.ModelConfig; crosscheck_attncore and kvbench: attncore.model.init_params / generate); nothing of
lab, ui, cli, app_pages, streamlit, pandas or altair (pyproject's import-linter contracts).
"""
