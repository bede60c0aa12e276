"""The config.json reader (serving.hf_config) on a config of just under its 1 MB limit: medians of the
whole read (parse, checks, the Decoder, the per-layer pattern, the weights' storage) beside json.loads alone.

The file is a released one (google/gemma-2-9b) grown to 10,000 layers with a layer_types entry each, and padded to
999,999 bytes with an id2label table (a key the reader lists as ignored), so every part of the reader has work.
Then the small hostile files of 10,000 layers with one full one (by sliding_window_pattern, by layer_types): the
read, the description (the attention pattern's shortest period) and the parameter count, in process, and the whole
`python -m attncore params --config FILE` beside `params --preset gpt2` (the command's start-up alone).

Run: python benchmarks/config_reader.py [--repeats 50]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serving.hf_config import MAX_BYTES, read_config  # noqa: E402
from serving.parameters import count_parameters  # noqa: E402
from serving.presets import CONFIGS  # noqa: E402
from serving.weights import stored_weights  # noqa: E402


def big_config(layers: int = 10_000) -> str:
    """gemma-2-9b at `layers` layers, alternating windows written out, padded to MAX_BYTES - 1 bytes."""
    data = json.loads((CONFIGS / "gemma-2-9b.json").read_text())
    data |= {"num_hidden_layers": layers, "layer_types": ["sliding_attention", "full_attention"] * (layers // 2)}
    text = json.dumps(data | {"id2label": {}})
    labels, i = {}, 0
    while len(text) < MAX_BYTES - 40:
        labels[str(i)] = f"LABEL_{i}"
        i += 1
        if i % 1000 == 0:
            text = json.dumps(data | {"id2label": labels})
    while len(text) > MAX_BYTES - 1:
        labels.popitem()
        text = json.dumps(data | {"id2label": labels})
    return text + " " * (MAX_BYTES - 1 - len(text))


ROOT = Path(__file__).resolve().parents[1]
LAYERS = 10_000
ONE_FULL = {"model_type": "gemma3_text", "hidden_size": 8, "num_hidden_layers": LAYERS, "intermediate_size": 8}
HOSTILE = {
    "sliding_window_pattern": ONE_FULL | {"sliding_window_pattern": LAYERS},
    "layer_types": ONE_FULL | {"layer_types": ["sliding_attention"] * (LAYERS - 1) + ["full_attention"]},
}


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=50)
    a = p.parse_args()
    text = big_config()
    raw = text.encode()
    model = read_config(raw)
    print(f"config: {len(raw):,} bytes, {model.arch.n_layers:,} layers ({model.pattern()}), "
          f"{len(model.ignored)} keys ignored; median of {a.repeats}")  # fmt: skip
    parse = median_ms(lambda: json.loads(raw.decode()), a.repeats)
    read = median_ms(lambda: read_config(raw), a.repeats)
    weights = median_ms(lambda: stored_weights(model.arch, model.weights), a.repeats)
    print(f"{'json.loads alone':<34}{parse:>9.1f} ms")
    print(f"{'read_config (parse and checks)':<34}{read:>9.1f} ms   {read / parse:.2f}x json.loads")
    print(f"{'stored_weights (10,000 layers)':<34}{weights:>9.3f} ms   {weights / parse:.3f}x json.loads")
    print("\n10,000 layers, one of them full (medians; the command: the best of 5 runs, wall time)")
    command = lambda *args: [sys.executable, "-m", "attncore", "params", *args]  # noqa: E731
    start_up = best_wall(command("--preset", "gpt2"))
    print(f"{'params --preset gpt2 (start-up)':<34}{start_up * 1000:>9.1f} ms")
    for name, data in HOSTILE.items():
        hostile = json.dumps(data).encode()
        model = read_config(hostile)
        describe = median_ms(lambda: read_config(hostile).summary(), a.repeats)  # noqa: B023
        count = median_ms(lambda: count_parameters(model.arch), a.repeats)  # noqa: B023
        with tempfile.NamedTemporaryFile("wb", suffix=".json") as f:
            f.write(hostile)
            f.flush()
            whole = best_wall(command("--config", f.name))
        over = (whole - start_up) * 1000
        print(f"{name} ({len(hostile):,} bytes): read and describe {describe:.1f} ms, count {count:.2f} ms, "
              f"params --config {whole * 1000:.0f} ms ({over:+.0f} ms over the start-up)")  # fmt: skip


def best_wall(argv: list[str], runs: int = 5) -> float:
    """The least wall time of `runs` runs of a command, in seconds (the least is the one least slowed by others)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


if __name__ == "__main__":
    main()
