"""How long the default views of Ablations and Compare take to train cold, and what adding seeds costs.

Ablations' default: the base and the article's five ablations (copy, L = 6) over seeds 0-2 (18 runs); its
'add seeds' button goes to 8 seeds (five variants under Holm), 30 more runs. Compare's default: learned vs no
position over seeds 0-5 (12 runs), enough for a verdict. Each view is trained in an empty temporary store on
2 worker processes, as the dashboard's sweep does; printed: wall time, and the runs' own training plus
evaluation seconds summed (on an idle machine about twice the wall time; on a loaded one inflated by the
contention), and the load average, so a figure from a shared machine can be read for what it is.

    python benchmarks/compare_views.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore import make_run  # noqa: E402
from lab.presets import ablations  # noqa: E402
from lab.provenance import current, describe  # noqa: E402
from lab.sweep import run_sweep  # noqa: E402

VIEWS = {
    "Ablations (base + 5 variants, 3 seeds)": [r for s in range(3) for r in ablations(seed=s)],
    "Compare (learned vs none, 6 seeds)": [make_run(seed=s, position=p) for p in ("learned", "none") for s in range(6)],
}


def main() -> None:
    print(f"platform: {describe(current())}")
    for name, runs in VIEWS.items():
        with tempfile.TemporaryDirectory() as location:
            start = time.perf_counter()
            records = run_sweep(runs, n_jobs=2, location=location)
            wall = time.perf_counter() - start
        compute = sum(r.train_seconds + r.eval.eval_seconds for r in records)
        load = os.getloadavg()[0]
        print(
            f"{name}: {len(runs)} runs cold in {wall:.1f} s wall; {compute:.1f} s of training and evaluation "
            f"(wall time inside the workers); load average {load:.1f} on {os.cpu_count()} cores"
        )


if __name__ == "__main__":
    main()
