"""Parameter counts of decoder-only transformers (docs/model.md): the architecture and its tensor inventory.

The `Decoder` (decoder.py) in, every trained tensor with its shape and component, the totals
per component and per block, and the cross-check against an instantiated attncore model.
Cache memory and GPU fit live in kvcache.py, real-model presets in presets.py.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

from attncore.checks import ConfigError
from attncore.config import ModelConfig
from serving.decoder import (  # noqa: F401  (re-exported: the Decoder and its kinds are the counts' vocabulary)
    BIAS_KINDS,
    CHOICES,
    FFN_KINDS,
    GATED_FFNS,
    NORM_KINDS,
    NORM_PLACEMENTS,
    POSITION_KINDS,
    QK_NORMS,
    WINDOW_KINDS,
    Decoder,
)
from serving.state import StateMixer

STRUCTURE = ("layer_kinds", "mixer")  # Decoder fields no form shows: a hybrid model's pattern and state mixer
# mixer: a hybrid model's state layers (Gated DeltaNet, Mamba, short convolution, KDA: state.py), 0 elsewhere
COMPONENTS = ("embeddings", "position", "attention", "mixer", "ffn", "norms", "output_head")


def describe_attncore(cfg: ModelConfig) -> Decoder:
    """The Decoder that attncore.model builds from cfg: ReLU FFN, biases everywhere, untied head; with qk_norm a
    LayerNorm over head_dim on the queries and one on the keys, shared by the heads (as Qwen3's)."""
    return Decoder(
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        vocab_size=cfg.vocab_size,
        d_ff=cfg.d_ff,
        ffn="relu",
        bias="all",
        norm="layernorm",
        tied_embeddings=False,
        position=cfg.position,
        max_len=cfg.max_len,
        final_norm=True,
        head_bias=True,
        qk_norm="head" if cfg.qk_norm else "none",
    )


# --- a model typed by its fields ---------------------------------------------

# A typed model's choices when not given: a modern decoder as Llama's (SwiGLU, no biases, RMSNorm before each
# sublayer and a final one, RoPE, an untied head without bias, no q/k norms); the same on the command line and
# the Parameters page. Its shape when not given is this lab's model's (2 layers, 4 heads, vocabulary 21).
MODERN = dict(ffn="swiglu", bias="none", norm="rmsnorm", position="rope", max_len=0, tied_embeddings=False,
              final_norm=True, head_bias=False, norm_placement="pre", qk_norm="none")  # fmt: skip
TYPED_SHAPE = dict(n_layers=2, n_heads=4, vocab_size=21)  # attncore.config.ModelConfig's
TYPED_WIDTH = 32  # the Parameters page's width for a typed model when its link gives none (the lab's model's)
# what each assumed choice is called, in the order the line says them
ASSUMED_WORDS = {
    "d_ff": None, "ffn": "{ffn} FFN", "bias": "no biases", "norm": "{norm}",
    "norm_placement": "norms before each sublayer", "position": "{position} positions",
    "tied_embeddings": "an untied output head", "final_norm": "a final norm", "head_bias": "no output-head bias",
    "qk_norm": "no q/k norms", "n_layers": "{n_layers} layers", "n_heads": "{n_heads} heads",
    "vocab_size": "vocabulary {vocab_size:,}",
}  # fmt: skip


def swiglu_width(d_model: int) -> int:
    """Llama's gated FFN width for width d: int(2/3 · 4d) rounded up to a multiple of 256 (Meta's llama model.py,
    FeedForward with multiple_of 256 and no ffn_dim_multiplier): 11,008 for d 4,096, Llama 1 and 2 7B's."""
    return 256 * -(-int(2 * 4 * d_model / 3) // 256)


def typed_decoder(fields: dict) -> Decoder:
    """The Decoder of a model typed by its fields (d_model among them): every field not given a modern decoder's
    (MODERN), the shape not given the lab's model's, and d_ff Llama's SwiGLU width for a gated FFN (swiglu_width)
    or 4d for an ungated one. Raises ConfigError on a bad mix."""
    d_ff = fields.get("d_ff") or typed_d_ff(fields["d_model"], fields.get("ffn", MODERN["ffn"]))
    return Decoder(**(MODERN | TYPED_SHAPE | fields | {"d_ff": d_ff}))


def typed_d_ff(d_model: int, ffn: str) -> int:
    """A typed model's FFN width when not given: Llama's for a gated FFN (swiglu_width), 4d otherwise (1 for a
    width that is no width, which the Decoder then refuses by its own field)."""
    if not isinstance(d_model, int) or d_model < 1:
        return 1
    return swiglu_width(d_model) if ffn in GATED_FFNS else 4 * d_model


def assumed(a: Decoder, typed: set[str]) -> list[tuple[str, str]]:
    """(field, words) of each choice of a typed model that was not typed: what the model was assumed to be."""
    out = []
    for f, words in ASSUMED_WORDS.items():
        if f in typed or (f == "d_ff" and "d_model" not in typed):
            continue
        if f == "d_ff":
            rule = "Llama's 2/3 · 4d rounded up to 256" if a.ffn in GATED_FFNS else "4d"
            out.append((f, f"FFN width {a.d_ff:,} ({rule})"))
        elif f == "position" and a.position == "learned":
            out.append((f, f"learned positions ({a.max_len:,})"))
        else:
            out.append((f, words.format(**asdict(a))))
    return out


OPTIONAL_FIELDS = ("n_kv_heads", "head_dim", "v_head_dim", "sliding_window")  # None: derived; 0 in a form


def form_values(a: Decoder) -> dict:
    """Every field as a plain number, string or flag, 0 standing for an optional field left to its default; a hybrid
    model's layer pattern and mixer are its structure, not form fields."""
    return {k: 0 if v is None and k in OPTIONAL_FIELDS else v for k, v in asdict(a).items() if k not in STRUCTURE}


def with_form_values(a: Decoder, values: dict, **exact) -> Decoder:
    """a with these fields replaced (0 in an optional field: its default), and the `exact` ones as given, in one
    construction; raises ConfigError on a bad mix (a hybrid's layer count is its pattern's)."""
    layers = exact.get("n_layers", values.get("n_layers", a.n_layers))
    if a.layer_kinds and layers != a.n_layers:
        raise ConfigError("n_layers", f"must be {a.n_layers:,}: a hybrid model's layers follow its layer pattern "
                          "(read a config.json with another pattern for another count)")  # fmt: skip
    return replace(a, **{k: None if k in OPTIONAL_FIELDS and not v else v for k, v in values.items()} | exact)


# --- the parameter inventory -------------------------------------------------


class Tensor(NamedTuple):
    name: str  # dotted, attncore style: blocks.{i}.attn.w_q, ffn.w1, ffn.router.w, ln1.gamma ...
    shape: tuple[int, ...]  # weights (in, out) as in y = x @ W; a leading axis counts experts
    component: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _linear(prefix, suffix, d_in, d_out, component, bias, lead=()):
    out = [Tensor(f"{prefix}.w{suffix}", (*lead, d_in, d_out), component)]
    if bias:
        out.append(Tensor(f"{prefix}.b{suffix}", (*lead, d_out), component))
    return out


def _norm(prefix, width, kind):
    out = [Tensor(f"{prefix}.gamma", (width,), "norms")]
    if kind == "layernorm":
        out.append(Tensor(f"{prefix}.beta", (width,), "norms"))
    return out


def _ffn(prefix, d, f, kind, bias, lead=()):
    out = _linear(prefix, "1", d, f, "ffn", bias, lead)
    if kind in GATED_FFNS:
        out += _linear(prefix, "3", d, f, "ffn", bias, lead)
    return out + _linear(prefix, "2", f, d, "ffn", bias, lead)


def _qk_norms(p, a: Decoder):
    if a.qk_norm == "none":
        return []
    q, k = (a.d_head, a.d_head) if a.qk_norm == "head" else (a.n_heads * a.d_head, a.kv_heads * a.d_head)
    return _norm(p + "attn.q_norm", q, a.norm) + _norm(p + "attn.k_norm", k, a.norm)


def _attention(p, a: Decoder):
    D, H, Dh = a.d_model, a.n_heads, a.d_head
    sinks = [Tensor(p + "attn.sinks", (H,), "attention")] if a.attention_sinks else []
    if not a.kv_lora_rank:
        qkv_bias = a.bias in ("all", "qkv", "attention")
        gate = 2 if a.mixer is not None and a.mixer.attn_gate else 1  # a gated output: the gate from q_proj
        out = _linear(p + "attn", "_q", D, gate * H * Dh, "attention", qkv_bias)
        out += _linear(p + "attn", "_k", D, a.kv_heads * Dh, "attention", qkv_bias)
        out += _linear(p + "attn", "_v", D, a.kv_heads * Dh, "attention", qkv_bias)
        out += _qk_norms(p, a) + sinks
        return out + _linear(p + "attn", "_out", H * Dh, D, "attention", a.bias in ("all", "attention"))
    R, Dr = a.kv_lora_rank, a.rope_head_dim
    Dv = a.v_head_dim or Dh
    if a.q_lora_rank:
        out = _linear(p + "attn", "_q_a", D, a.q_lora_rank, "attention", False)
        out += _norm(p + "attn.q_a_norm", a.q_lora_rank, a.norm)
        out += _linear(p + "attn", "_q_b", a.q_lora_rank, H * (Dh + Dr), "attention", False)
    else:
        out = _linear(p + "attn", "_q", D, H * (Dh + Dr), "attention", False)
    out += _linear(p + "attn", "_kv_a", D, R + Dr, "attention", False)  # latent + shared RoPE key: what is cached
    out += _norm(p + "attn.kv_a_norm", R, a.norm)
    out += _linear(p + "attn", "_kv_b", R, H * (Dh + Dv), "attention", False)  # latent -> per-head keys, values
    return out + sinks + _linear(p + "attn", "_out", H * Dv, D, "attention", False)


def _moe(p, a: Decoder):
    out = _linear(p + "ffn.router", "", a.d_model, a.n_experts, "ffn", a.router_bias)
    out += _ffn(p + "ffn.experts", a.d_model, a.moe_d_ff, a.ffn, a.bias == "all", lead=(a.n_experts,))
    if a.n_shared_experts:
        width = (a.mixer.shared_d_ff if a.mixer is not None else 0) or a.moe_d_ff
        out += _ffn(p + "ffn.shared", a.d_model, width, a.ffn, a.bias == "all", lead=(a.n_shared_experts,))
        if a.mixer is not None and a.mixer.shared_gate:
            out += _linear(p + "ffn.shared_gate", "", a.d_model, 1, "ffn", False)
    return out


def _mixer(p: str, D: int, m: StateMixer) -> list[Tensor]:
    """A state layer's tensors, per each family's modeling file (transformers): weights (in, out) as elsewhere, a
    depthwise convolution (channels, kernel)."""
    p, c, K = p + "mixer.", "mixer", m.conv_kernel
    if m.kind == "gated_deltanet":  # Qwen3-Next's in_proj_qkvz and in_proj_ba (Qwen3.5: four, the same sizes)
        key, value = m.k_heads * m.k_head_dim, m.heads * m.head_dim
        out = _linear(p + "in_proj", "_qkvz", D, 2 * key + 2 * value, c, False)
        out += _linear(p + "in_proj", "_ba", D, 2 * m.heads, c, False)
        out += [Tensor(p + "conv1d.w", (2 * key + value, K), c), Tensor(p + "dt_bias", (m.heads,), c),
                Tensor(p + "A_log", (m.heads,), c), Tensor(p + "norm.gamma", (m.head_dim,), c)]  # fmt: skip
        return out + _linear(p + "out_proj", "", value, D, c, False)
    if m.kind == "mamba2":  # in_proj gives the gate z, x, B, C (groups x state each) and dt per head
        conv = m.inner + 2 * m.n_groups * m.state_size
        out = _linear(p + "in_proj", "", D, m.inner + conv + m.heads, c, m.proj_bias)
        out += [Tensor(p + "conv1d.w", (conv, K), c)] + ([Tensor(p + "conv1d.b", (conv,), c)] * m.conv_bias)
        out += [Tensor(p + name, (m.heads,), c) for name in ("dt_bias", "A_log", "D")]
        out += [Tensor(p + "norm.gamma", (m.inner,), c)] if m.gated_norm else []
        return out + _linear(p + "out_proj", "", m.inner, D, c, m.proj_bias)
    if m.kind == "mamba":  # Jamba's: x_proj to dt (dt_rank), B and C; dt_proj back to inner; RMSNorms on dt, B, C
        out = _linear(p + "in_proj", "", D, 2 * m.inner, c, m.proj_bias)
        out += [Tensor(p + "conv1d.w", (m.inner, K), c)] + ([Tensor(p + "conv1d.b", (m.inner,), c)] * m.conv_bias)
        out += _linear(p + "x_proj", "", m.inner, m.dt_rank + 2 * m.state_size, c, False)
        out += _linear(p + "dt_proj", "", m.dt_rank, m.inner, c, True)
        out += [Tensor(p + "A_log", (m.inner, m.state_size), c), Tensor(p + "D", (m.inner,), c)]
        out += [Tensor(p + f"{n}_norm.gamma", (w,), c) for n, w in (("dt", m.dt_rank), ("b", m.state_size),
                                                                     ("c", m.state_size))]  # fmt: skip
        return out + _linear(p + "out_proj", "", m.inner, D, c, m.proj_bias)
    if m.kind == "short_conv":  # LFM2: in_proj to B, C, x; a depthwise convolution; out_proj
        out = _linear(p + "in_proj", "", D, 3 * m.inner, c, m.proj_bias)
        out += [Tensor(p + "conv.w", (m.inner, K), c)] + ([Tensor(p + "conv.b", (m.inner,), c)] * m.conv_bias)
        return out + _linear(p + "out_proj", "", m.inner, D, c, m.proj_bias)
    value, key, Dh = m.heads * m.head_dim, (m.k_heads or m.heads) * (m.k_head_dim or m.head_dim), m.head_dim  # kda
    out = _linear(p + "q_proj", "", D, key, c, False) + _linear(p + "k_proj", "", D, key, c, False)
    out += _linear(p + "v_proj", "", D, value, c, False) + [Tensor(p + "conv1d.w", (2 * key + value, K), c)]
    out += [Tensor(p + "dt_bias", (value,), c), Tensor(p + "A_log", (m.heads,), c)]
    out += _linear(p + "f_a_proj", "", D, Dh, c, False) + _linear(p + "f_b_proj", "", Dh, value, c, False)
    out += _linear(p + "b_proj", "", D, m.heads, c, False)
    out += _linear(p + "g_a_proj", "", D, Dh, c, False) + _linear(p + "g_b_proj", "", Dh, value, c, False)
    return out + [Tensor(p + "o_norm.gamma", (Dh,), c)] + _linear(p + "o_proj", "", value, D, c, False)


def layer_plan(a: Decoder) -> list[tuple[str, bool]]:
    """(kind, MoE) of each layer: kind as Decoder.layer_kinds ("full" for every layer of a model without them); the
    layers after the first n_dense_layers that have an FFN hold experts (Nemotron-H: only its "ffn" layers have
    one). Hybrids whose experts interleave (Jamba) are counted by kind: the order changes no count."""
    kinds = a.layer_kinds or ("full",) * a.n_layers
    one = a.mixer is not None and a.mixer.one_sublayer
    plan, ffn_seen = [], 0
    for kind in kinds:
        has_ffn = kind == "ffn" if one else kind != "ffn"
        plan.append((kind, bool(a.n_experts) and has_ffn and ffn_seen >= a.n_dense_layers))
        ffn_seen += has_ffn
    return plan


def param_inventory(a: Decoder) -> list[Tensor]:
    """Every trained tensor of the model with its shape and component, in forward order."""
    out = _embeddings(a)
    for i, (kind, moe) in enumerate(layer_plan(a)):
        out += _block(f"blocks.{i}.", a, moe=moe, kind=kind)
    return out + _after_blocks(a)


def block_groups(a: Decoder) -> list[tuple[list[Tensor], int]]:
    """(the tensors of one layer, how many layers are alike) per (kind, MoE) of layer_plan, then (the tensors
    outside the blocks, 1): a hybrid's inventory without building every layer."""
    groups = [(_block("blocks.0.", a, moe, kind), n) for (kind, moe), n in Counter(layer_plan(a)).items()]
    return groups + [(_embeddings(a) + _after_blocks(a), 1)]


def _embeddings(a: Decoder) -> list[Tensor]:
    out = [Tensor("tok_emb", (a.vocab_size, a.d_model), "embeddings")]
    if a.position == "learned":
        out.append(Tensor("pos_emb", (a.max_len, a.d_model), "position"))
    return out


def _block(p: str, a: Decoder, moe: bool, kind: str = "full") -> list[Tensor]:
    """The tensors of one block: a dense one, or one with experts (`moe`); of a hybrid, by its kind (a state
    layer's mixer in place of attention, Falcon-H1's beside it, Nemotron-H's one sublayer a layer)."""
    D = a.d_model
    if a.mixer is not None:
        mixer = _mixer(p, D, a.mixer) if kind in ("state", "parallel") else []
        attention = _attention(p, a) if kind not in ("state", "ffn") else []
        ffn = _moe(p, a) if moe else _ffn(p + "ffn", D, a.d_ff, a.ffn, a.bias == "all")
        if a.mixer.one_sublayer:  # one norm, then the mixer, the attention or the FFN
            return _norm(p + "ln1", D, a.norm) + mixer + attention + (ffn if kind == "ffn" else [])
        return _norm(p + "ln1", D, a.norm) + attention + mixer + _norm(p + "ln2", D, a.norm) + ffn
    sandwich = a.norm_placement == "sandwich"  # a second norm after each sublayer
    out = _norm(p + "ln1", D, a.norm) + _attention(p, a)
    out += _norm(p + "ln1_post", D, a.norm) if sandwich else []
    out += _norm(p + "ln2", D, a.norm) if a.norm_placement != "parallel" else []  # parallel: one norm feeds both
    out += _moe(p, a) if moe else _ffn(p + "ffn", D, a.d_ff, a.ffn, a.bias == "all")
    return out + (_norm(p + "ln2_post", D, a.norm) if sandwich else [])


def _after_blocks(a: Decoder) -> list[Tensor]:
    """The final norm, the output head."""
    D, V = a.d_model, a.vocab_size
    out = []
    if a.final_norm:
        out += _norm("ln_f", D, a.norm)
    if not a.tied_embeddings:
        out.append(Tensor("head.w", (D, V), "output_head"))
    if a.head_bias:
        out.append(Tensor("head.b", (V,), "output_head"))
    return out


@dataclass(frozen=True)
class ParamCount:
    total: int
    breakdown: dict[str, int]  # component -> parameters, in COMPONENTS order
    per_layer: tuple[int, ...]  # parameters of each block
    active: int  # used per token: total minus the routed experts a token skips (== total when dense)

    @property
    def non_embedding(self) -> int:
        """Without embeddings, learned positions and output head (the 'non-embedding' count of scaling laws)."""
        b = self.breakdown
        return self.total - b["embeddings"] - b["position"] - b["output_head"]

    def rows(self) -> list[dict]:
        """One row per component with its share of the total: ready for a table or a bar chart."""
        return [{"component": c, "params": n, "share": n / self.total} for c, n in self.breakdown.items()]

    def to_dict(self) -> dict:
        return asdict(self) | {"per_layer": list(self.per_layer), "non_embedding": self.non_embedding}


def count_parameters(a: Decoder) -> ParamCount:
    """Total, per-component and per-block parameter counts of the described model. The blocks are alike but for
    their FFN (dense, or experts after the first n_dense_layers): one block of each kind is built and counted as
    many times as it occurs, so 10,000 layers cost two blocks' tensors, not 10,000 (whole numbers: the same sums)."""
    breakdown = dict.fromkeys(COMPONENTS, 0)
    for t in _embeddings(a) + _after_blocks(a):
        breakdown[t.component] += t.size
    plan = layer_plan(a)
    sizes = {}
    for layer, n in Counter(plan).items():  # each kind of block built once, however many layers share it
        block = _block("blocks.0.", a, layer[1], layer[0])
        sizes[layer] = sum(t.size for t in block)
        for t in block:
            breakdown[t.component] += n * t.size
    per_layer = [sizes[layer] for layer in plan]
    total = sum(breakdown.values())
    skipped = 0
    if a.n_experts:
        expert = sum(t.size for t in _ffn("e", a.d_model, a.moe_d_ff, a.ffn, a.bias == "all"))
        moe_layers = sum(moe for _, moe in plan)
        skipped = (a.n_experts - a.experts_per_token) * expert * moe_layers
    return ParamCount(total, breakdown, tuple(per_layer), total - skipped)


def attncore_component(name: str) -> str:
    """The component of an attncore.model.param_shapes name."""
    if name in ("tok_emb", "pos_emb"):
        return "embeddings" if name == "tok_emb" else "position"
    if name.startswith("head."):
        return "output_head"
    if name.endswith((".q_norm.gamma", ".q_norm.beta", ".k_norm.gamma", ".k_norm.beta")):
        return "norms"  # qk-norm: counted with the norms, as the calculator counts q/k norms
    if ".attn." in name:
        return "attention"
    if ".ffn." in name:
        return "ffn"
    return "norms"  # ln1, ln2, ln_f


CROSSCHECK_LIMIT = 2_000_000  # the largest model the Parameters page instantiates on a rerun (about 0.04 s of CPU)


def crosscheck_attncore(cfg: ModelConfig, params: dict | None = None) -> list[dict]:
    """Formula against an instantiated attncore model, per component (rows: component, formula, model, equal)."""
    import numpy as np

    from attncore.model import init_params

    params = init_params(cfg, np.random.default_rng(0)) if params is None else params
    measured = dict.fromkeys(COMPONENTS, 0)
    for name, array in params.items():
        measured[attncore_component(name)] += int(array.size)
    formula = count_parameters(describe_attncore(cfg)).breakdown
    rows = [{"component": c, "formula": formula[c], "model": measured[c]} for c in COMPONENTS]
    rows.append({"component": "total", "formula": sum(formula.values()), "model": sum(measured.values())})
    return [r | {"equal": r["formula"] == r["model"]} for r in rows]


def attncore_config(a: Decoder) -> ModelConfig | None:
    """The ModelConfig attncore.model would build for this description, or None if it builds something else
    (gated FFN, GQA, tied head, no biases, RMSNorm, latent attention, experts, a window ...). Norm placement,
    scaling and dtype do not change the count: they keep ModelConfig's defaults."""
    try:
        cfg = ModelConfig(
            vocab_size=a.vocab_size, d_model=a.d_model, n_heads=a.n_heads, n_layers=a.n_layers, d_ff=a.d_ff,
            max_len=max(a.max_len, 1), position=a.position, qk_norm=a.qk_norm == "head",
        )  # fmt: skip
    except ConfigError:
        return None
    return cfg if replace(describe_attncore(cfg), max_len=a.max_len) == a else None
