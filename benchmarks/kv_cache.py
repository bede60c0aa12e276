"""Generation with and without the key-value cache on an attncore decoder: medians, speed-up, agreement.

The default sizes are the article's toy (4 layers, d 256, 8 heads, prompt 32, 128 new tokens), on attncore's
full decoder (embeddings, FFN, LayerNorms, output layer), not the article's attention-and-residual-only toy.

Run: python benchmarks/kv_cache.py [--repeats 3] [--n-new 128]
     python benchmarks/kv_cache.py --activation   (no timing: the GPU fit's activation estimate against published
     vLLM logs, per log, before and after the sampler was modelled; serving/validation.py)
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serving.kvbench import benchmark_generation  # noqa: E402
from serving.kvcache import human_bytes  # noqa: E402
from serving.validation import activation_errors, percent  # noqa: E402


def print_activation() -> None:
    print("activation peak: logged vs estimated, GiB (before: forward and logits only; after: with the sampler)")
    print(f"{'log':<20}{'logged':>8}{'before':>8}{'error':>9}{'after':>8}{'error':>9}  note")
    for r in activation_errors():
        note = r["note"] + ("" if r["flags_known"] else " (launch flags not all shown)")
        print(
            f"{r['name']:<20}{r['logged_gib']:>8.2f}{r['before_gib']:>8.2f}{percent(r['before_error']):>9}"
            f"{r['estimate_gib']:>8.2f}{percent(r['error']):>9}  {note}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--n-new", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--activation", action="store_true", help="print the activation estimate's error per log")
    a = p.parse_args()
    if a.activation:
        print_activation()
        return
    b = benchmark_generation(
        n_layers=a.layers, d_model=a.d, n_heads=a.heads, prompt_len=a.prompt, n_new=a.n_new, batch=a.batch,
        repeats=a.repeats,
    )  # fmt: skip
    c = b.config
    print(
        f"{c.n_layers} layers, d {c.d_model}, {c.n_heads} heads, {c.dtype}, prompt {b.prompt_len}, "
        f"batch {b.batch}; median of {a.repeats}"
    )
    print(f"{'generated':>10}{'with cache s':>14}{'recompute s':>14}{'speed-up':>10}")
    for n, sc, sr, up in zip(b.lengths, b.seconds_cached, b.seconds_recompute, b.speedups, strict=True):
        print(f"{n:>10}{sc:>14.4f}{sr:>14.4f}{up:>9.1f}x")
    print(f"speed-up at {b.lengths[-1]} generated tokens: {b.speedup:.1f}x")
    print(f"identical tokens: {b.identical_tokens}; max |logit deviation| {b.max_abs_deviation:.2e}")
    print(f"cache for {c.max_len} positions (formula): {human_bytes(b.cache_bytes)}")


if __name__ == "__main__":
    main()
