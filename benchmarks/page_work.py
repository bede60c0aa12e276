"""CPU seconds of the page work a visitor can trigger, at the default and at the hosted caps (lab/jobs/limits.py).

Usage: python benchmarks/page_work.py [--only NAME ...]   (NAME: ablation, gradcheck, scaling, cost, kv, interpret)
Prints process CPU time and wall time of each piece; nothing is stored. The machine's other load shows
in the wall time, not in the CPU time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from attncore.config import make_run  # noqa: E402
from attncore.inspect import evaluate_ablated  # noqa: E402
from attncore.interpret import explain, lens, patching  # noqa: E402
from attncore.mechanisms.attention_cost import time_attention  # noqa: E402
from attncore.mechanisms.demos import scaling_statistics  # noqa: E402
from attncore.mechanisms.gradcheck import gradient_check  # noqa: E402
from attncore.model import init_params  # noqa: E402
from lab.jobs.limits import Limits  # noqa: E402
from serving.kvbench import benchmark_generation  # noqa: E402
from ui.runs import ABLATION_HEADS  # noqa: E402  the Attention page's cap, declared where its table is drawn

DEFAULT = dict(d_model=32, n_layers=2, n_heads=4)  # the sidebar's defaults (L = 6)
_CAPS = Limits()  # the hosted caps' defaults (lab/jobs/limits.py): the largest model a visitor may ask for
HOSTED_MAX = dict(d_model=_CAPS.max_d_model, n_layers=_CAPS.max_layers, n_heads=_CAPS.max_heads)
MAX_L = _CAPS.max_length


def measured(label: str, fn) -> float:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{label:<62} {cpu:8.2f} s CPU {wall:8.2f} s wall", flush=True)
    return cpu


def ablation(length: int, model: dict, heads: int) -> None:
    run = make_run(length=length, **model)
    params = init_params(run.model, np.random.default_rng(0))  # timing only: the weights do not matter
    for h in range(heads):
        evaluate_ablated(params, run, [divmod(h, run.model.n_heads)])


def interpret(length: int, model: dict, positions: int, restarts: int, steps: int) -> None:
    """The Patching page's patching and lens, and the Explanations page's shuffle table and search, on one input."""
    run = make_run(length=length, **model)
    params = init_params(run.model, np.random.default_rng(0))
    tokens = np.arange(2 * length) % 20
    size = f"L={length}, d={run.model.d_model}, {run.model.n_layers}x{run.model.n_heads} heads"
    measured(f"Patching ({positions} positions) + lens, {size}", lambda: (
        patching.patch(params, run, patching.contrast(run, tokens, 0, 19), max_positions=positions),
        lens.logit_lens(params, run, tokens)))  # fmt: skip
    heads = list(np.ndindex(run.model.n_layers, run.model.n_heads))[: ABLATION_HEADS.default]  # as the page caps it
    targets = [explain.target(params, run, tokens, i, h, 2 * length - 1) for i, h in heads]
    measured(f"Shuffle table ({len(heads)} heads, 100 permutations), {size}", lambda: [
        explain.permutation_tvd(t, 100) for t in targets])  # fmt: skip
    measured(f"Adversarial search ({restarts} x {steps}), {size}", lambda: explain.adversarial(targets[0], restarts,
             steps))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["ablation", "gradcheck", "scaling", "cost", "kv", "interpret"])
    only = parser.parse_args().only
    with threadpool_limits(limits=1, user_api="blas"):  # as the server's heavy work runs: one core each
        if "ablation" in only:
            measured("Attention: 1 head zeroed, default model", lambda: ablation(6, DEFAULT, 1))
            measured("Attention: every head zeroed alone, default model (8)", lambda: ablation(6, DEFAULT, 8))
            measured("Attention: 1 head zeroed, hosted maximum", lambda: ablation(MAX_L, HOSTED_MAX, 1))
            measured("Attention: 16 heads zeroed one by one, hosted maximum", lambda: ablation(MAX_L, HOSTED_MAX, 16))
        if "gradcheck" in only:
            for coords, eps in ((24, (1e-6, 1e-4)), (64, (1e-8, 1e-6, 1e-4, 1e-2))):
                label = f"Gradient check: one seed, {coords} coords, {len(eps)} eps, both norms"
                measured(label, lambda c=coords, e=eps: [gradient_check(n, e, 1, c) for n in ("pre", "post")])
        if "scaling" in only:
            measured(
                "Scaling: default (d_k 8, 64, 512; T 64; 400 draws)",
                lambda: scaling_statistics((8, 64, 512), 64, 400, 1),
            )
            measured(
                "Scaling: at the 10^8-draw cap (d_k 2048, T 1024, 47)", lambda: scaling_statistics((2048,), 1024, 47, 1)
            )
        if "cost" in only:
            default = (128, 256, 512, 1024)
            measured("Cost: default (4 lengths to 1024, d_k 64, 3 trials)", lambda: time_attention(default, 64, 3))
            widest = (256, 384, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 1920, 2048)
            measured("Cost: 12 lengths to 2048, d_k 256, 10 trials", lambda: time_attention(widest, 256, 10))
        if "interpret" in only:
            interpret(6, DEFAULT, 24, 5, 500)
            interpret(MAX_L, HOSTED_MAX, 24, 5, 500)
        if "kv" in only:
            measured("KV cache: default (2 layers, d 128, 8 heads, 64 new, 3 repeats)", lambda: benchmark_generation(
                n_layers=2, d_model=128, n_heads=8, n_new=64, repeats=3))  # fmt: skip
            measured("KV cache: largest (4 layers, d 256, 8 heads, 128 new, 5 repeats)", lambda: benchmark_generation(
                n_layers=4, d_model=256, n_heads=8, n_new=128, repeats=5))  # fmt: skip


if __name__ == "__main__":
    main()
