"""Each Regimes default trained cold, as the page trains it: wall time and computing, beside the estimates (issue
37.3 asks each within 20 minutes on a quiet 2-core machine like the CI's).

    python benchmarks/regimes_wall.py [--workers 2] [--busy 0]

The three experiments at their defaults (lab.experiments.regimes, 6 seeds), each in an empty store on a pool of 2 worker
processes (benchmarks/view_estimates.py's measurement, the page's sweep order): printed per experiment, the
estimated and measured computing (CPU seconds) and wall time, with the platform and load average.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import view_estimates  # noqa: E402

if __name__ == "__main__":
    views = [f"regimes-{name}" for name in ("depth", "heads", "lr")]
    sys.argv[1:1] = ["--views", *views, *(["--busy", "0"] if "--busy" not in sys.argv else [])]
    view_estimates.main()
