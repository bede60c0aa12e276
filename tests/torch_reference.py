"""PyTorch eager version of attncore's decoder: the autograd oracle of the tests and the benchmark's speed peer.

Built from an attncore params dict (same names). nn.Linear stores W.T of attncore's x @ W, so the
mapping transposes matrices. Attention is written out (no scaled_dot_product_attention) to stay independent.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LN_EPS = 1e-5
TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}

# attncore leaf name -> (torch leaf name, stored transposed)
_LEAVES = {
    "tok_emb": ("tok_emb.weight", False),
    "pos_emb": ("pos_emb.weight", False),
    "gamma": ("weight", False),
    "beta": ("bias", False),
    "w_qkv": ("qkv.weight", True),
    "b_qkv": ("qkv.bias", False),
    "w_out": ("out.weight", True),
    "b_out": ("out.bias", False),
    "w1": ("w1.weight", True),
    "b1": ("w1.bias", False),
    "w2": ("w2.weight", True),
    "b2": ("w2.bias", False),
    "w": ("weight", True),
    "b": ("bias", False),
}


def torch_name(name: str) -> tuple[str, bool]:
    """attncore parameter name -> (the TorchModel parameter name, whether the tensor is transposed)."""
    prefix, _, leaf = name.rpartition(".")
    torch_leaf, transposed = _LEAVES[leaf]
    return (f"{prefix}.{torch_leaf}" if prefix else torch_leaf), transposed


# --- position tables and masks, built once per length ------------------------


@lru_cache(maxsize=32)
def future_mask(t: int) -> torch.Tensor:
    """(T, T) bool, True where key j lies after query i: the scores the causal mask forbids."""
    return torch.ones(t, t, dtype=torch.bool).triu(diagonal=1)


@lru_cache(maxsize=32)
def sinusoidal_table(t: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    angle = pos * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, ceil(D/2))
    table = torch.zeros(t, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d // 2])
    return table.to(dtype)  # (T, D)


@lru_cache(maxsize=32)
def rope_angles(t: int, d_head: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (T, Dh/2) of pos * 10000^(-2i/Dh), one angle per pair (2i, 2i+1)."""
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    angle = pos * 10000.0 ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def alibi_slopes(n: int) -> list[float]:
    """Press et al.'s reference code: a geometric series from 2^(-2^-(log2 n - 3)), closest power of two below
    for other n, then every other slope of the doubled series."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n - closest]


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE: rotate each pair (x[2i], x[2i+1]) of x (..., T, Dh) by its position's angle."""
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2)
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


# --- the model -----------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        d = cfg.d_model
        self.n_heads, self.d_head = cfg.n_heads, cfg.d_head
        self.scaling, self.rope, self.alibi = cfg.scaling, cfg.position == "rope", cfg.position == "alibi"
        self.qkv = nn.Linear(d, 3 * d, dtype=dtype)  # Q | K | V along the outputs
        self.out = nn.Linear(d, d, dtype=dtype)
        self.qk_norm = cfg.qk_norm
        if cfg.qk_norm:  # over each head's Dh features, one gain and bias shared by the heads
            self.q_norm = nn.LayerNorm(self.d_head, eps=LN_EPS, dtype=dtype)
            self.k_norm = nn.LayerNorm(self.d_head, eps=LN_EPS, dtype=dtype)

    def forward(self, x, future, pos):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # each (B, H, T, Dh)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            cos, sin = rope_angles(int(pos.max()) + 1, self.d_head, x.dtype)
            q, k = rotate_pairs(q, cos[pos], sin[pos]), rotate_pairs(k, cos[pos], sin[pos])
        scores = q @ k.transpose(-2, -1)  # (B, H, T, T)
        if self.scaling:
            scores = scores / math.sqrt(self.d_head)
        if self.alibi:
            slopes = torch.tensor(alibi_slopes(self.n_heads), dtype=x.dtype)[:, None, None]
            scores = scores - slopes * (pos[:, None] - pos[None, :]).to(x.dtype)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # -inf before the softmax
        y = weights @ v  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class FeedForward(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff, dtype=dtype)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, dtype=dtype)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.pre_ln = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, dtype=dtype)
        self.attn = Attention(cfg, dtype)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, dtype=dtype)
        self.ffn = FeedForward(cfg, dtype)

    def forward(self, x, future, pos):
        if self.pre_ln:
            x = x + self.attn(self.ln1(x), future, pos)
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x, future, pos))
        return self.ln2(x + self.ffn(x))


class TorchModel(nn.Module):
    """attncore's decoder (docs/model.md) in PyTorch, loaded from an attncore params dict.

    dtype defaults to cfg.dtype ("float32" or "float64").
    """

    def __init__(self, cfg, params: dict[str, np.ndarray], dtype: str | None = None):
        super().__init__()
        self.cfg = cfg
        self.dtype = TORCH_DTYPES[dtype or cfg.dtype]
        d, v = cfg.d_model, cfg.vocab_size
        self.tok_emb = nn.Embedding(v, d, dtype=self.dtype)
        if cfg.position == "learned":
            self.pos_emb = nn.Embedding(cfg.max_len, d, dtype=self.dtype)
        self.blocks = nn.ModuleList(Block(cfg, self.dtype) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d, eps=LN_EPS, dtype=self.dtype)
        self.head = nn.Linear(d, v, dtype=self.dtype)
        self.load_attncore(params)

    def load_attncore(self, params: dict[str, np.ndarray]) -> None:
        """Copy every attncore tensor into its parameter; the two name sets must match exactly."""
        mapped = {torch_name(name)[0] for name in params}
        own = {name for name, _ in self.named_parameters()}
        if mapped != own:
            raise KeyError(f"parameter names differ: missing {sorted(own - mapped)}, extra {sorted(mapped - own)}")
        self.names = {torch_name(name)[0]: name for name in params}  # torch name -> attncore name
        with torch.no_grad():
            for name, array in params.items():
                tname, transposed = torch_name(name)
                value = torch.from_numpy(np.ascontiguousarray(array.T if transposed else array))
                self.get_parameter(tname).copy_(value)

    def to_attncore(self, grads: bool = False) -> dict[str, np.ndarray]:
        """The parameters (or their .grad) as numpy arrays under attncore's names and layout."""
        out = {}
        for tname, p in self.named_parameters():
            name = self.names[tname]
            tensor = (p.grad if grads else p).detach()
            out[name] = (tensor.T if torch_name(name)[1] else tensor).numpy().copy()
        return out

    def forward(self, idx: torch.Tensor, out_from: int = 0, positions=None, padding=None) -> torch.Tensor:
        """Logits (B, T - out_from, V) for tokens idx (B, T); out_from skips positions without loss.

        positions (T,): the positions in place of 0..T-1; padding (B, T) bool: the keys that may be read.
        """
        T = idx.shape[1]
        pos = torch.arange(T) if positions is None else torch.as_tensor(np.asarray(positions), dtype=torch.long)
        rows = slice(0, T) if positions is None else pos  # a slice on the default path: the benchmark's peer
        x = self.tok_emb(idx)  # (B, T, D)
        if self.cfg.position == "learned":
            x = x + self.pos_emb.weight[rows]
        elif self.cfg.position == "sinusoidal":
            x = x + sinusoidal_table(max(self.cfg.max_len, int(pos.max()) + 1), self.cfg.d_model, self.dtype)[rows]
        future = future_mask(T)
        if padding is not None:  # (B, 1, T, T): forbidden if in the future or padding
            future = future | ~torch.as_tensor(np.asarray(padding))[:, None, None, :]
        for block in self.blocks:
            x = block(x, future, pos)
        return self.head(self.ln_f(x[:, out_from:]))  # (B, T - out_from, V)


def torch_loss(model: TorchModel, seqs, answer_len: int, positions=None, lengths=None, z_loss=0.0) -> torch.Tensor:
    """Cross-entropy on the last answer_len next-token targets of seqs (B, 2L+1), as attncore's loss_and_grads
    (answer_len = T - 1 of the induction task's seqs (B, T): every position).

    lengths (B,): seqs is right-padded; the loss is the mean over each sequence's answer tokens n..2n-1 (inputs).
    z_loss c > 0: the objective adds c · mean over the same tokens of logsumexp(logits)², the output z-loss.
    """
    seqs = torch.as_tensor(np.asarray(seqs), dtype=torch.long)
    if lengths is not None:
        n = torch.as_tensor(np.asarray(lengths))
        idx, targets = seqs[:, :-1], seqs[:, 1:]
        q = torch.arange(idx.shape[1])[None, :]
        answer = (q >= n[:, None]) & (q <= 2 * n[:, None] - 1)
        logits, targets = model(idx, positions=positions, padding=q < 2 * n[:, None])[answer], targets[answer]
    else:
        idx, targets = seqs[:, :-1], seqs[:, -answer_len:]
        logits = model(idx, out_from=idx.shape[1] - answer_len, positions=positions)  # (B, L, V)
        logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    loss = F.cross_entropy(logits, targets)
    if z_loss:
        loss = loss + z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()
    return loss


def torch_loss_and_grads(
    model: TorchModel, seqs, answer_len: int, positions=None, lengths=None, z_loss=0.0
) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and every gradient under attncore's names: the oracle for attncore.model.loss_and_grads (with a
    z-loss, the objective's value and gradients)."""
    model.zero_grad(set_to_none=True)
    loss = torch_loss(model, seqs, answer_len, positions, lengths, z_loss)
    loss.backward()
    return loss.item(), model.to_attncore(grads=True)
