"""The decoder's parameters: every trained tensor's dotted name and shape in a fixed order, the views of one flat
buffer, and the initialisation (one random stream per tensor, a function of the seed and the name only).
"""

from __future__ import annotations

import zlib

import numpy as np

from .config import ModelConfig


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every trained tensor with its shape, in a fixed order."""
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    shapes = {"tok_emb": (v, d)}
    if cfg.position == "learned":
        shapes["pos_emb"] = (cfg.max_len, d)
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        shapes |= {
            p + "ln1.gamma": (d,),
            p + "ln1.beta": (d,),
            p + "attn.w_qkv": (d, 3 * d),  # Q, K, V projections fused along the columns
            p + "attn.b_qkv": (3 * d,),
        }
        if cfg.qk_norm:  # one gain and bias over d_head for every head's queries, one for its keys
            dh = cfg.d_head
            shapes |= {
                p + n: (dh,) for n in ("attn.q_norm.gamma", "attn.q_norm.beta", "attn.k_norm.gamma", "attn.k_norm.beta")
            }
        shapes |= {
            p + "attn.w_out": (d, d),
            p + "attn.b_out": (d,),
            p + "ln2.gamma": (d,),
            p + "ln2.beta": (d,),
            p + "ffn.w1": (d, f),
            p + "ffn.b1": (f,),
            p + "ffn.w2": (f, d),
            p + "ffn.b2": (d,),
        }
    shapes |= {"ln_f.gamma": (d,), "ln_f.beta": (d,), "head.w": (d, v), "head.b": (v,)}
    return shapes


def count_params(cfg: ModelConfig) -> int:
    return sum(int(np.prod(s)) for s in param_shapes(cfg).values())


def unflatten(flat: np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Views into `flat`, one per name: writing a view writes the buffer."""
    out, offset = {}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        out[name] = flat[offset : offset + n].reshape(shape)
        offset += n
    assert offset == flat.size, "flat buffer does not match the shapes"
    return out


def flatten(tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> np.ndarray:
    return np.concatenate([tensors[name].ravel() for name in shapes])


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    """The random stream of one initial tensor: a function of (seed, name) only.

    Spawn key (0, crc32(name)) under the run's seed: the initial-weights branch (0) of the
    SeedSequence whose branch 1 draws the training batches. A stable hash (never the salted hash()).
    """
    key = zlib.crc32(name.encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, key)))


def init_params(cfg: ModelConfig, rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """The article's initialisation: weights N(0, 1)/sqrt(fan_in), biases 0, LN gamma 1 beta 0, embeddings
    N(0, 1)*0.1 (cfg.embed_std).

    rng an int seed: every tensor draws from its own stream `tensor_rng(seed, name)`, so variants
    at one seed (no position table, post-LN, ...) start bit-identical on every tensor they share.
    rng a Generator: the tensors draw from it one after another, in `param_shapes` order.
    """
    shapes = param_shapes(cfg)
    flat = np.zeros(sum(int(np.prod(s)) for s in shapes.values()), dtype=cfg.dtype)
    params = unflatten(flat, shapes)
    seeded = not isinstance(rng, np.random.Generator)
    for name, shape in shapes.items():
        leaf = name.rsplit(".", 1)[-1]
        if name in ("tok_emb", "pos_emb") or leaf.startswith("w"):
            draw = (tensor_rng(rng, name) if seeded else rng).standard_normal(shape)
            params[name][...] = draw * cfg.embed_std if name in ("tok_emb", "pos_emb") else draw / np.sqrt(shape[0])
        elif leaf == "gamma":
            params[name][...] = 1.0
    return params
