"""The key-value cache measured: greedy generation with and without it on an attncore model.

Both paths must pick the same tokens with logits equal to rounding; the cache only
saves time, and the saving grows with the generated length.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from attncore.config import ModelConfig
from attncore.model import generate, init_params
from serving.kvcache import kv_cache

MODES = ("with cache", "recompute")


@dataclass(frozen=True)
class CacheBenchmark:
    config: ModelConfig
    prompt_len: int
    batch: int
    lengths: tuple[int, ...]  # generated tokens of each timed run
    seconds_cached: tuple[float, ...]  # median over repeats, one per length
    seconds_recompute: tuple[float, ...]
    max_abs_deviation: float  # max |logit difference| between the two paths on the longest run
    identical_tokens: bool
    cache_bytes: int  # the formula's keys and values for max_len positions

    @property
    def speedups(self) -> tuple[float, ...]:
        return tuple(r / c for c, r in zip(self.seconds_cached, self.seconds_recompute, strict=True))

    @property
    def speedup(self) -> float:
        """Recompute time over cached time at the longest generated length."""
        return self.speedups[-1]

    def rows(self) -> list[dict]:
        """Long format (generated, mode, seconds) for a chart of time against generated length."""
        times = dict(zip(MODES, (self.seconds_cached, self.seconds_recompute), strict=True))
        return [{"generated": n, "mode": m, "seconds": times[m][i]} for m in MODES for i, n in enumerate(self.lengths)]

    def to_dict(self) -> dict:
        return asdict(self) | {"speedups": list(self.speedups), "speedup": self.speedup}


def _timed(params, prompt, n, cfg, use_cache):
    start = time.perf_counter()
    tokens, logits = generate(params, prompt, n, cfg, use_cache=use_cache)
    return time.perf_counter() - start, tokens, logits


def benchmark_generation(
    *,
    n_layers: int = 4,
    d_model: int = 256,
    n_heads: int = 8,
    vocab_size: int = 21,
    prompt_len: int = 32,
    n_new: int = 128,
    batch: int = 1,
    lengths: tuple[int, ...] | None = None,
    repeats: int = 3,
    seed: int = 0,
    dtype: str = "float64",
    progress: Callable[[int, int], None] | None = None,
) -> CacheBenchmark:
    """Time generate() with use_cache True and False on a randomly initialised attncore decoder.

    The default sizes are those of the article's toy (4 layers, d 256, 8 heads, prompt 32, 128 new tokens),
    but the model is attncore's full decoder: embeddings, FFN, LayerNorms and output layer in every step,
    where the article's toy had attention and residual connections only.

    lengths default to n_new/8, /4, /2 and n_new; each is timed `repeats` times per mode,
    alternating the modes so that machine noise hits both alike. progress(done, total) follows the timed runs.
    """
    cfg = ModelConfig(
        vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=4 * d_model,
        max_len=prompt_len + n_new, dtype=dtype,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    params = init_params(cfg, rng)
    prompt = rng.integers(0, vocab_size, size=(batch, prompt_len))  # (B, T0)
    lengths = tuple(sorted({n for n in (n_new // 8, n_new // 4, n_new // 2, n_new) if n > 0} | set(lengths or ())))
    cached, recompute, outputs = [], [], {}
    total, done = 2 * len(lengths) * max(repeats, 1), 0
    for n in lengths:
        runs = {True: [], False: []}
        for _ in range(max(repeats, 1)):
            for use_cache in (True, False):
                seconds, tokens, logits = _timed(params, prompt, n, cfg, use_cache)
                runs[use_cache].append(seconds)
                done += 1
                if progress is not None:
                    progress(done, total)
                if n == lengths[-1]:
                    outputs[use_cache] = tokens, logits  # (B, n), (B, n, V)
        cached.append(statistics.median(runs[True]))
        recompute.append(statistics.median(runs[False]))
    (tok_c, log_c), (tok_r, log_r) = outputs[True], outputs[False]
    cache_dtype = {"float64": "fp64", "float32": "fp32"}[dtype]
    return CacheBenchmark(
        config=cfg,
        prompt_len=prompt_len,
        batch=batch,
        lengths=lengths,
        seconds_cached=tuple(cached),
        seconds_recompute=tuple(recompute),
        max_abs_deviation=float(np.abs(log_c - log_r).max()),
        identical_tokens=bool(np.array_equal(tok_c, tok_r)),
        cache_bytes=kv_cache(n_layers, n_heads, cfg.d_head, cfg.max_len, batch, cache_dtype).bytes,
    )
