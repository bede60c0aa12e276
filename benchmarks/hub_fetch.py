"""A model by its Hub id to a shown result, against a local stand-in for the Hub (tests/fake_hub.py on 127.0.0.1):
the config.json and four safetensors headers of Llama 3 8B fetched (serving.hub.fetch_model: its own bounded reads
through huggingface_hub's HTTP session), read and counted beside the checkpoint's count, a first time in a fresh
process home and a second time (a page's fetch keeps nothing on disk, so the second asks the Hub again), beside
the read of the same config.json from a file. The network is the loopback: a real Hub adds its round trips (a
HEAD and a GET for the config.json, a range GET of model.safetensors, the index, one range GET per shard, four
shards at once).

Run: python benchmarks/hub_fetch.py [--repeats 20]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_hub import FakeHub, checkpoint_of, serve  # noqa: E402

from serving import hub  # noqa: E402
from serving.hf_config import read_config  # noqa: E402
from serving.parameters import count_parameters  # noqa: E402
from serving.presets import CONFIGS, PRESETS  # noqa: E402
from serving.safetensors_count import comparison  # noqa: E402


def shown(model_id: hub.ModelId) -> str:
    """What the page and the command show: the file read, the formula's count beside the checkpoint's."""
    found = hub.fetch_model(model_id)
    model = found.read()
    return comparison(found.checkpoint, count_parameters(model.arch).total)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=20)
    repeats = p.parse_args().repeats
    raw = (CONFIGS / "llama-3-8b.json").read_bytes()
    stand_in = FakeHub()
    stand_in.add("meta-llama/Meta-Llama-3-8B", __import__("json").loads(raw),
                 checkpoint_of(PRESETS["llama-3-8b"].arch, shards=4))  # fmt: skip
    server, url = serve(stand_in)
    os.environ["HF_ENDPOINT"] = url
    model_id = hub.parse_model_id("meta-llama/Meta-Llama-3-8B")
    cold, warm, local = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as home:
            os.environ["HF_HOME"] = home
            start = time.perf_counter()
            shown(model_id)
            cold.append(time.perf_counter() - start)
            start = time.perf_counter()
            text = shown(model_id)
            warm.append(time.perf_counter() - start)
        start = time.perf_counter()
        count_parameters(read_config(raw).arch)
        local.append(time.perf_counter() - start)
    server.shutdown()
    print(text)
    for name, times in (("by id, first", cold), ("by id, again", warm), ("from the file", local)):
        print(f"{name:<22} median {statistics.median(times) * 1000:8.1f} ms   max {max(times) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
