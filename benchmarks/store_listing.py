"""How long list_cached takes with thousands of stored runs: the index against walking every entry's sidecar.

Usage: python benchmarks/store_listing.py [--runs N] [--repeats R]   (fills a temporary store with N fake
small runs; prints medians and the ratio). fill_store and fake_record are reused by tests/test_store_cap.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.config import RunConfig, make_run  # noqa: E402
from attncore.evaluate import EvalResult  # noqa: E402
from attncore.model import count_params  # noqa: E402
from attncore.snapshots import snapshot_steps, unstack  # noqa: E402
from attncore.tasks import N_TEST  # noqa: E402
from lab import provenance, store  # noqa: E402
from lab.store import backend as entries
from lab.store import codec
from lab.store import index as store_index

SMALL = dict(steps=10, d_model=8, n_heads=2, n_layers=1, d_ff=8)  # a fake entry of about 6 kB


def fake_record(run: RunConfig) -> store.RunRecord:
    """A record with the right shapes for `run` and made-up numbers (nothing is trained; no norms, as a record
    stored before they were; this machine's platform)."""
    expected = codec.expected_arrays(run, with_norms=False)
    arrays = {name: np.zeros(shape, dtype=dtypes[0]) for name, (shape, dtypes) in expected.items()}
    n_distinct = codec._n_distinct(run.task)  # the counts a stored record must hold (codec.check_values)
    n_repeated = N_TEST - n_distinct
    ev = EvalResult(0.5, 0.25, 0.25, n_distinct, 0.25 if n_repeated else float("nan"), n_repeated, 0.01)
    snaps = {k.removeprefix(codec.SNAPSHOT_PREFIX): arrays.pop(k) for k in list(arrays) if k.startswith("snapshots.")}
    snaps["step"] = np.array(snapshot_steps(run.train.steps))
    return store.RunRecord(
        config=run,
        loss_history=arrays.pop("loss_history"),
        final_loss=1.0,
        eval=ev,
        train_seconds=0.1,
        n_params=count_params(run.model),
        probe_tokens=arrays.pop("probe_tokens"),
        probe_attention=arrays.pop("probe_attention"),
        params={k.removeprefix(codec.PARAM_PREFIX): v for k, v in arrays.items()},
        snapshots=unstack(snaps),
        platform=provenance.current(),
    )


def write_fake(location: Path, run: RunConfig, template: tuple[dict, bytes] | None = None) -> Path:
    """Store a fake record of `run` (reusing `template`'s arrays when the shapes agree) without the index."""
    entry = store._Entry(run, location)
    if template is None:
        meta, data = codec.encode(fake_record(run))
    else:
        meta, data = template
        meta = meta | {"config": run.to_dict(), "summary": meta["summary"] | {"config": run.to_dict()}}
    entries.write_entry(entry.path, meta | {"numerics_version": store.NUMERICS_VERSION}, data)
    return entry.path


def fill_store(location: Path, n: int, base: RunConfig | None = None) -> list[RunConfig]:
    """n fake runs of `base` (default small: copy, L = 4) at seeds 0..n-1 written straight into the store, then
    the index rebuilt."""
    base = make_run("copy", 4, 0, **SMALL) if base is None else base
    meta, data = codec.encode(fake_record(base))
    runs = [replace(base, train=replace(base.train, seed=seed)) for seed in range(n)]
    for run in runs:
        write_fake(location, run, (meta, data))
    func_dir = store._Entry(base, location).func_dir
    store_index.rebuild_saved(location, func_dir)
    return runs


def walk_sidecars(location: Path) -> list[dict]:
    """What list_cached did before the index: read every entry's sidecar."""
    func_dir = store._Entry(make_run(), location).func_dir
    out = []
    for path in store_index.entry_dirs(func_dir):
        try:
            out.append(json.loads((path / entries.SIDECAR_FILE).read_text())["meta"]["summary"])
        except (OSError, ValueError, KeyError):
            pass
    return out


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=20)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "cache"
        os.environ[store.ENV_VAR] = str(location)
        start = time.perf_counter()
        fill_store(location, a.runs)
        print(f"filled {a.runs} fake runs in {time.perf_counter() - start:.1f} s")
        index = location / store_index.INDEX_FILE
        assert len(store.list_cached()) == a.runs

        def reread():  # the index file changed (another process stored a run): parse it again
            store_index._memo.clear()
            return store.list_cached()

        def rebuild():
            index.unlink()
            return reread()

        rows = [
            ("list_cached, index unchanged", timed(store.list_cached, a.repeats)),
            ("list_cached, index re-read", timed(reread, a.repeats)),
            ("walk every sidecar (before)", timed(lambda: walk_sidecars(location), max(3, a.repeats // 4))),
            ("list_cached, index rebuilt", timed(rebuild, max(3, a.repeats // 4))),
        ]
    print(f"{'operation':<32} {'median ms':>10}   ({a.runs} runs)")
    for name, seconds in rows:
        print(f"{name:<32} {1e3 * seconds:>10.2f}")
    print(
        f"walk / unchanged index: {rows[2][1] / rows[0][1]:.0f}x; walk / re-read index: {rows[2][1] / rows[1][1]:.1f}x"
    )


if __name__ == "__main__":
    main()
