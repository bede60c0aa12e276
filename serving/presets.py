"""Real decoder models with their published parameter totals, and GPUs: each card once (CARDS), with the total torch
reports for the serving engine's fit and its size as sold (GPUS, decimal GB) for the simple fit.

Each model is the released config.json, shipped in serving/configs/ and read by hf_config.py (the reader
behind --config and the pages' upload), so every preset is also a test of the reader; tests/test_calculators.py
checks that count_parameters reproduces every published total exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from attncore.checks import ConfigError
from serving.hf_config import ModelFile, read_config
from serving.parameters import Decoder
from serving.weights import WeightFormat

CONFIGS = Path(__file__).resolve().parent / "configs"  # one <preset name>.json per model


@dataclass(frozen=True)
class Preset:
    name: str
    model: ModelFile  # the shipped config.json, read
    published: int  # total parameters as published, embeddings included
    source: str  # where the published figure and the config.json come from
    note: str = ""

    @property
    def arch(self) -> Decoder:
        return self.model.arch

    @property
    def weights(self) -> WeightFormat:
        """The checkpoint's storage as its config.json gives it (MXFP4 experts for gpt-oss-20b)."""
        return self.model.weights


def _preset(name: str, published: int, source: str, note: str = "") -> Preset:
    return Preset(name, read_config((CONFIGS / f"{name}.json").read_bytes()), published, source, note)


_HF = "Hugging Face safetensors parameter count of"
_INDEX = "its model.safetensors.index.json total_size"
_TF = "transformers' AutoModelForCausalLM.from_config count of"
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        _preset("gpt2", 124_439_808, f"{_HF} openai-community/gpt2 (124M)",
                "the GPT-2 paper's 117M undercounted; HF num_parameters() gives 124,439,808"),
        _preset("gpt2-medium", 354_823_168, f"{_HF} openai-community/gpt2-medium (355M)"),
        _preset("gpt2-large", 774_030_080, f"{_HF} openai-community/gpt2-large (774M)"),
        _preset("gpt2-xl", 1_557_611_200, f"{_HF} openai-community/gpt2-xl (1.56B)"),
        _preset("llama-2-7b", 6_738_415_616, f"{_HF} meta-llama/Llama-2-7b-hf (6.74B)"),
        _preset("llama-3-8b", 8_030_261_248, f"{_HF} meta-llama/Meta-Llama-3-8B (8.03B)",
                "GQA: 8 KV heads for 32 query heads"),
        _preset("llama-3-70b", 70_553_706_496, f"{_HF} meta-llama/Meta-Llama-3-70B (70.6B)",
                "does not fit one 80 GB card in fp16"),
        _preset("llama-3.1-8b", 8_030_261_248, f"{_HF} meta-llama/Llama-3.1-8B (8.03B)",
                "the shape of Llama 3 8B with a 131,072-token RoPE; untied head"),
        _preset("llama-3.2-1b", 1_235_814_400, f"{_HF} meta-llama/Llama-3.2-1B (1.24B)",
                "the output head tied to the embedding, which is a fifth of the model"),
        _preset("mistral-7b-v0.1", 7_241_732_096, f"{_HF} mistralai/Mistral-7B-v0.1 (7.24B)",
                "sliding-window attention of 4096 tokens in every layer"),
        _preset("mixtral-8x7b", 46_702_792_704, f"{_HF} mistralai/Mixtral-8x7B-v0.1 (46.7B; {_INDEX} "
                "93,405,585,408 B in bf16)", "8 experts of 14,336 in every layer, 2 a token; a router of 4,096 × 8 "
                "each; sliding_window null: full attention"),
        _preset("qwen2.5-7b", 7_615_616_512, f"{_HF} Qwen/Qwen2.5-7B (model card: 7.61B, 6.53B non-embedding)",
                "biases on the q, k, v projections only; vocabulary padded to 152,064; use_sliding_window false"),
        _preset("qwen3-8b", 8_190_735_360, f"{_HF} Qwen/Qwen3-8B (model card: 8.2B, 6.95B non-embedding)",
                "q and k RMS norms of head_dim 128 in every layer"),
        _preset("gemma-2-2b", 2_614_341_888, f"{_HF} google/gemma-2-2b (2.61B)",
                "four norms a layer; half the layers slide a 4,096-token window"),
        _preset("gemma-2-9b", 9_241_705_984, f"{_HF} google/gemma-2-9b (9.24B)",
                "head_dim 256 with d 3,584 and 16 heads; alternating 4,096-token windows"),
        _preset("gemma-3-1b", 999_885_952, f"{_HF} google/gemma-3-1b-pt (1.00B)",
                "five 512-token window layers for each global one; q/k norms"),
        _preset("phi-3-mini-4k", 3_821_079_552, f"{_HF} microsoft/Phi-3-mini-4k-instruct (3.82B)",
                "fused qkv and gate-up projections (counted as separate matrices: the same total)"),
        _preset("olmo-2-13b", 13_716_198_400, f"allenai/OLMo-2-1124-13B: {_INDEX} 54,864,793,600 B in float32 "
                "(13.7B)", "norms after the sublayers, q/k norms over the whole projection"),
        _preset("gpt-oss-20b", 20_914_757_184, "openai/gpt-oss-20b model card (20.9B total, 3.6B active; the exact "
                f"count is transformers' from_config); {_INDEX} 13,761,264,768 B (MXFP4 experts)",
                "MXFP4 experts (32, 4 a token) with biases, attention sinks, alternating 128-token windows"),
        _preset("deepseek-v2-lite", 15_706_484_224,
                f"{_HF} deepseek-ai/DeepSeek-V2-Lite (model card: 15.7B total, 2.4B activated)",
                "MLA caches a 512 latent + 64 RoPE key per token and layer; MoE in layers 1-26 "
                "(64 routed experts, 6 per token, 2 shared, width 1408), layer 0 dense (10944)"),
        # hybrids: the exact count is transformers 5.25's from_config on the meta device (tests/test_hybrid_models.py)
        _preset("qwen3-next-80b-a3b", 79_674_391_296, f"{_TF} Qwen/Qwen3-Next-80B-A3B-Instruct's config.json "
                "(model card: 80B total, 3B activated; the checkpoint adds a multi-token-prediction layer)",
                "Gated DeltaNet in 3 layers of 4, gated attention in the 4th; 512 experts (10 a token) + 1 shared"),
        _preset("qwen3.5-35b-a3b", 34_660_610_688, f"{_TF} Qwen3_5MoeTextConfig's defaults, which its docstring "
                "gives as Qwen/Qwen3.5-35B-A3B's (model card: 35B total, 3B active), in the multimodal wrapper",
                "Gated DeltaNet (float32 temporal state: mamba_ssm_dtype) in 3 layers of 4; 256 experts + 1 shared"),
        _preset("nemotron-h-8b-base-8k", 8_100_852_736, f"{_TF} nvidia/Nemotron-H-8B-Base-8K's config.json "
                "(model card: 8B)", "24 Mamba2, 4 attention and 24 ReLU² MLP layers, one sublayer each"),
        _preset("jamba-v0.1", 51_570_323_328, f"{_TF} JambaConfig's defaults, which are ai21labs/Jamba-v0.1's "
                "(Hugging Face: 51.6B params; AI21: 52B total, 12B active)",
                "Mamba in 7 layers of 8, attention in the 8th; 16 experts (2 a token) in every other layer"),
        _preset("falcon-h1-tiny-90m", 91_131_072, f"{_TF} tiiuae/Falcon-H1-Tiny-90M-Base's geometry (the other "
                "fields FalconH1Config's defaults; model card: 90M)",
                "attention and Mamba2 side by side in every layer: each keeps a KV cache and a state"),
        _preset("granite-4.0-h-tiny", 6_939_037_248, f"{_TF} ibm-granite/granite-4.0-h-tiny's config.json "
                "(Hugging Face: 6.94B params; 1B active)",
                "Mamba2 in 36 layers, attention in 4; 64 experts (6 a token) beside a shared MLP of 1,024"),
        _preset("lfm2-350m", 354_483_968, f"{_TF} LiquidAI/LFM2-350M's config.json (Hugging Face: 354M params)",
                "gated short convolutions (kernel 3) in 10 layers, attention in 6; tied embeddings"),
        _preset("kimi-linear-48b-a3b", 49_133_074_464, f"{_TF} KimiLinearConfig's defaults (its docstring: "
                "moonshotai/Kimi-Linear-48B-A3B-Instruct; model card: 48B total, 3B active)",
                "Kimi Delta Attention (float32 state) and MLA layers; 256 experts (8 a token) + 1 shared"),
        _preset("attncore", 27_253,
                'this lab\'s experiment model, as in the article "Attention, Derived in Full" (see the Science page)',
                "vocab 21, d 32, 4 heads, 2 blocks, d_ff 128, 13 learned positions"),
    )
}  # fmt: skip


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
             "GeForce/Titan cards; nvidia-smi 24564 MiB on a 4090 (vLLM #7553)", False),
        Card("a100-40gb", 39.50, "40 GB", f"{_VLLM % '39.50'}, vLLM #12330 (A100-40GB, vLLM 0.6.6)", True),
        Card("rtx-a6000", 47.54, "48 GB", "estimate: PyTorch out-of-memory messages give '47.54 GiB total "
             "capacity' on 48 GB cards they do not name; with ECC on (as on the L40S below) a card reports less",
             False),
        Card("l40s", 44.42, "48 GB", f"{_VLLM % '44.42'}, vLLM #15815 (2x L40S, vLLM 0.7)", True),
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
