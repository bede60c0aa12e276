"""Real decoder models with their published parameter totals, and GPUs: each card once (CARDS), with the total torch
reports for the serving engine's fit and its size as sold (GPUS, decimal GB) for the simple fit.

Each architecture follows the model's released config.json; tests/test_calculators.py
checks that count_parameters reproduces every published total exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attncore.config import ConfigError, ModelConfig
from attncore.serving.parameters import Decoder, describe_attncore


@dataclass(frozen=True)
class Preset:
    name: str
    arch: Decoder
    published: int  # total parameters as published, embeddings included
    source: str  # where the published figure comes from
    note: str = ""


def _gpt2(d: int, layers: int) -> Decoder:
    # GELU FFN of 4d, biases everywhere, LayerNorm, 1024 learned positions, head tied to the embedding
    return Decoder(d_model=d, n_layers=layers, n_heads=d // 64, vocab_size=50257, d_ff=4 * d, max_len=1024)


def _llama(d: int, layers: int, heads: int, kv_heads: int, d_ff: int, vocab: int, **kw) -> Decoder:
    # SwiGLU FFN, no biases, RMSNorm, RoPE, untied output head
    style = dict(ffn="swiglu", bias="none", norm="rmsnorm", tied_embeddings=False, position="rope", max_len=0)
    return Decoder(
        d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads, vocab_size=vocab, d_ff=d_ff, **(style | kw)
    )


_HF = "Hugging Face safetensors parameter count of"
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "gpt2",
            _gpt2(768, 12),
            124_439_808,
            f"{_HF} openai-community/gpt2 (124M)",
            "the GPT-2 paper's 117M undercounted; HF num_parameters() gives 124,439,808",
        ),
        Preset("gpt2-medium", _gpt2(1024, 24), 354_823_168, f"{_HF} openai-community/gpt2-medium (355M)"),
        Preset("gpt2-large", _gpt2(1280, 36), 774_030_080, f"{_HF} openai-community/gpt2-large (774M)"),
        Preset("gpt2-xl", _gpt2(1600, 48), 1_557_611_200, f"{_HF} openai-community/gpt2-xl (1.56B)"),
        Preset(
            "llama-2-7b",
            _llama(4096, 32, 32, 32, 11008, 32000),
            6_738_415_616,
            f"{_HF} meta-llama/Llama-2-7b-hf (6.74B)",
        ),
        Preset(
            "llama-3-8b",
            _llama(4096, 32, 32, 8, 14336, 128256),
            8_030_261_248,
            f"{_HF} meta-llama/Meta-Llama-3-8B (8.03B)",
            "GQA: 8 KV heads for 32 query heads",
        ),
        Preset(
            "llama-3-70b",
            _llama(8192, 80, 64, 8, 28672, 128256),
            70_553_706_496,
            f"{_HF} meta-llama/Meta-Llama-3-70B (70.6B)",
            "does not fit one 80 GB card in fp16",
        ),
        Preset(
            "mistral-7b-v0.1",
            _llama(4096, 32, 32, 8, 14336, 32000, sliding_window=4096),
            7_241_732_096,
            f"{_HF} mistralai/Mistral-7B-v0.1 (7.24B)",
            "sliding-window attention of 4096 tokens in every layer",
        ),
        Preset(
            "qwen2.5-7b",
            _llama(3584, 28, 28, 4, 18944, 152064, bias="qkv"),
            7_615_616_512,
            f"{_HF} Qwen/Qwen2.5-7B (model card: 7.61B, 6.53B non-embedding)",
            "biases on the q, k, v projections only; vocabulary padded to 152,064",
        ),
        Preset(
            "deepseek-v2-lite",
            _llama(
                2048,
                27,
                16,
                16,
                10944,
                102400,
                head_dim=128,
                kv_lora_rank=512,
                rope_head_dim=64,
                v_head_dim=128,
                n_experts=64,
                n_shared_experts=2,
                experts_per_token=6,
                moe_d_ff=1408,
                n_dense_layers=1,
            ),
            15_706_484_224,
            f"{_HF} deepseek-ai/DeepSeek-V2-Lite (model card: 15.7B total, 2.4B activated)",
            "MLA caches a 512 latent + 64 RoPE key per token and layer; MoE in layers 1-26 "
            "(64 routed experts, 6 per token, 2 shared, width 1408), layer 0 dense (10944)",
        ),
        Preset(
            "attncore",
            describe_attncore(ModelConfig()),
            27_253,
            'this lab\'s experiment model, as in the article "Attention, Derived in Full" (see the Science page)',
            "vocab 21, d 32, 4 heads, 2 blocks, d_ff 128, 13 learned positions",
        ),
    )
}


@dataclass(frozen=True)
class Card:
    """A GPU as a serving engine sees it: the total torch.cuda.mem_get_info() reports, in GiB (2^30 B)."""

    name: str
    total_gib: float  # cudaMemGetInfo total: what vLLM prints as total_gpu_memory, less than the card as sold
    sold: str  # the marketing size, decimal GB
    source: str  # where total_gib was read
    logged: bool  # True: a vLLM startup log on this named card; False: another report or an estimate (see source)


_VLLM = "vLLM startup log 'total_gpu_memory (%sGiB)'"
CARDS: dict[str, Card] = {
    c.name: c
    for c in (
        Card("l4", 22.05, "24 GB", "estimate: nvidia-smi shows 23034 MiB = 22.49 GiB on an L4; the driver keeps "
             "0.43-0.59 GiB on the cards where both figures are known (A100-40GB, H100, H200)", False),
        Card("a10g", 22.07, "24 GB", f"{_VLLM % '22.07'} on a 24 GB A10-class card (OCI AI Quick Actions "
             "troubleshooting doc, vLLM 0.7); an A10G's nvidia-smi shows 23028 MiB, as an A10's", False),
        Card("rtx-4090", 23.65, "24 GB", "PyTorch out-of-memory messages '23.65 GiB total capacity' on 24 GB "
             "GeForce/Titan cards; nvidia-smi 24564 MiB on a 4090 (vLLM issue 7553)", False),
        Card("a100-40gb", 39.50, "40 GB", f"{_VLLM % '39.50'}, vLLM issue 12330 (A100-40GB, vLLM 0.6.6)", True),
        Card("rtx-a6000", 47.54, "48 GB", "estimate: PyTorch out-of-memory messages give '47.54 GiB total "
             "capacity' on 48 GB cards they do not name; with ECC on (as on the L40S below) a card reports less",
             False),
        Card("l40s", 44.42, "48 GB", f"{_VLLM % '44.42'}, vLLM issue 15815 (2x L40S, vLLM 0.7)", True),
        Card("a100-80gb", 79.15, "80 GB", "PyTorch out-of-memory message '79.15 GiB total capacity' on an A100 "
             "80 GB (a public fine-tuning note); not seen in a vLLM log naming the card", False),
        Card("h100-80gb", 79.22, "80 GB", f"{_VLLM % '79.22'}, vLLM PRs 12126 and 10511 (H100-80G SXM)", True),
        Card("h200", 139.81, "141 GB", f"{_VLLM % '139.81'} with nvidia-smi 'NVIDIA H200 143771MiB' "
             "(DeepSeek-R1 deployment notes, vLLM 0.7)", True),
    )
}  # fmt: skip
CARDS = dict(sorted(CARDS.items(), key=lambda item: item[1].total_gib))  # one list, smallest first
# The same cards by memory as sold, in decimal GB (10^9 bytes), for the simple fit.
GPUS: dict[str, int] = {name: int(card.sold.split()[0]) for name, card in CARDS.items()}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError("preset", f"unknown {name!r}; one of {', '.join(PRESETS)} (or list)")
    return PRESETS[name]


def gpu_memory_gb(gpu: str) -> float:
    """GB (10^9 bytes) of a named card, or of a plain number such as '80' or '141'."""
    if gpu in GPUS:
        return float(GPUS[gpu])
    if isinstance(gpu, str) and re.fullmatch(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf", gpu):
        return float(gpu)  # ASCII digits only: float() alone also reads '٨٠' as 80
    raise ConfigError("gpu", f"unknown {gpu!r}; a size in GB or one of {', '.join(GPUS)}")
