"""CPU seconds of the Parameters page's work on each rerun: the count at the fields' limits and the live
cross-check against an instantiated attncore model (serving.parameters.crosscheck_attncore) at the
largest size the page instantiates (CROSSCHECK_LIMIT) and at sizes around it.

Usage: python benchmarks/parameters_page.py [--repeats 7]
Prints the median process CPU time of each piece over the repeats, and the BLAS library threadpoolctl sees;
nothing is stored. The machine's other load shows in the wall time, not in the CPU time.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from threadpoolctl import threadpool_info  # noqa: E402

from attncore.config import ModelConfig  # noqa: E402
from serving import parameters as calc  # noqa: E402
from serving.decoder import Decoder  # noqa: E402
from serving.presets import PRESETS  # noqa: E402
from serving.weights import WeightFormat, stored_weights  # noqa: E402

# The fields at their limits (a Parameters link of a million experts of 10^7 over 10^6-wide layers)
AT_THE_LIMITS = dict(d_model=1_000_000, n_layers=10_000, n_heads=250, d_ff=10_000_000, vocab_size=100_000_000,
                     n_experts=1_000_000, experts_per_token=1_000_000, moe_d_ff=10_000_000,
                     n_shared_experts=1_000_000)  # fmt: skip


def median_cpu(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        cpu = time.process_time()
        fn()
        times.append(time.process_time() - cpu)
    return statistics.median(times)


def attncore_of_size(total: int) -> ModelConfig:
    """The largest 2-block attncore model (d_ff = 4d, 4 heads, d a multiple of 16) of at most `total` parameters."""
    found = None
    for d in range(16, 8192, 16):
        cfg = ModelConfig(d_model=d, n_heads=4, d_ff=4 * d, n_layers=2, max_len=13)
        if calc.count_parameters(calc.describe_attncore(cfg)).total > total:
            return found
        found = cfg
    raise ValueError(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    a = parser.parse_args()
    blas = ", ".join(f"{i['internal_api']} {i.get('architecture') or ''}".strip() for i in threadpool_info())
    print(f"{platform.processor() or platform.machine()}, {blas}; medians of {a.repeats} (CPU seconds)")
    limits = Decoder(**(PRESETS["attncore"].arch.__dict__ | AT_THE_LIMITS))

    def count_at_the_limits():
        calc.count_parameters(limits)
        stored_weights(limits, WeightFormat("fp8"))

    label = "count and stored weights, the fields at their limits"
    print(f"{label:<74} {median_cpu(count_at_the_limits, a.repeats):8.4f}")
    for total in sorted({30_000, 1_000_000, calc.CROSSCHECK_LIMIT, 5_000_000, 20_000_000}):
        cfg = attncore_of_size(total)
        n = calc.count_parameters(calc.describe_attncore(cfg)).total
        shown = " (the page's limit)" if total == calc.CROSSCHECK_LIMIT else ""
        label = f"cross-check, an attncore model of {n:,} parameters{shown}"
        print(f"{label:<74} {median_cpu(lambda cfg=cfg: calc.crosscheck_attncore(cfg), a.repeats):8.4f}", flush=True)


if __name__ == "__main__":
    main()
