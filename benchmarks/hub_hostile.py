"""A hostile Hub against serving.hub.fetch_model (what a page calls for a Hub id): a stand-in Hub (tests/fake_hub.py, in
its own process on 127.0.0.1, so its CPU is not counted here) serving a repository whose index is huge, and one
whose index names thousands of shards. For each: the wall time of the fetch, this process's CPU time over it and
until --after seconds past it, its peak RSS, the bytes left in huggingface_hub's cache, and the header requests
the Hub received after the fetch had returned (work that went on after the page gave up), over --after seconds.

Run the current checkout, then another one (the code before) side by side:
    python benchmarks/hub_hostile.py [--index-mb 300] [--shards 5000] [--ids 3] [--after 30] [--latency 0]
    python benchmarks/hub_hostile.py --code /path/to/other/checkout
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVER = r"""
import json, os, sys, threading, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from fake_hub import FakeHub, Repo, serve
from serving.safetensors_count import header_bytes
index_mb, shards, ids, log = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
latency = float(sys.argv[6])
config = json.dumps({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                     "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}).encode()
hub = FakeHub(latency_s=latency)
two = {f"model-0000{i}-of-00002.safetensors": header_bytes({f"w{i}": ("BF16", (4, 4))}) for i in (1, 2)}
entry = '"model.layers.%d.mlp.up_proj.weight": "model-00001-of-00002.safetensors", '
n = index_mb * 2**20 // len(entry % 10**6)
body = ('{"metadata": {}, "weight_map": {' + "".join(entry % i for i in range(n))
        + '"w2": "model-00002-of-00002.safetensors"}}').encode()
for k in range(ids):
    hub.repos[f"org/huge-index-{k}"] = Repo(two | {"config.json": config, "model.safetensors.index.json": body})
names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
files = {name: header_bytes({f"layer{i}.w": ("BF16", (4, 4))}) for i, name in enumerate(names)}
index = json.dumps({"weight_map": {f"layer{i}.w": n for i, n in enumerate(names)}}).encode()
hub.repos["org/many-shards"] = Repo(files | {"config.json": config, "model.safetensors.index.json": index})
server, url = serve(hub)
print(url, flush=True)
while True:  # the header requests so far, with the time of the last count
    gets = sum(1 for m, p, _ in list(hub.requests) if m == "GET" and "-of-" in p)
    with open(log + ".part", "w") as f:
        f.write(f"{gets} {time.time()}")
    os.replace(log + ".part", log)
    time.sleep(0.2)
"""


def header_requests(log: Path) -> int:
    return int(log.read_text().split()[0])


def bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def probe(model: str, log: Path, after: float, home: Path) -> dict:
    try:
        from serving import hub
    except ImportError:  # a --code checkout from before the calculator was its own package
        from lab import hub

    before_cpu, started = time.process_time(), time.monotonic()
    try:
        found = hub.fetch_model(hub.parse_model_id(model))
        note = found.checkpoint_note or f"counted {found.checkpoint.total:,}"
    except hub.HubError as e:
        note = str(e)
    wall, cpu = time.monotonic() - started, time.process_time() - before_cpu
    time.sleep(0.5)  # the stand-in's count catches up with the fetch's end
    at_return = header_requests(log)
    time.sleep(after)
    total_cpu = time.process_time() - before_cpu  # the work that went on after the page's wait, included
    return {"model": model, "page_s": round(wall, 1), "cpu_s": round(cpu, 1), "cpu_s_with_after": round(total_cpu, 1),
            "header_requests_after_return": header_requests(log) - at_return, "kept_bytes": bytes_under(home),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "note": note[:160]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose serving.hub is measured")
    parser.add_argument("--index-mb", type=int, default=300)
    parser.add_argument("--shards", type=int, default=5000)
    parser.add_argument("--ids", type=int, default=3, help="repositories with the huge index, fetched one by one")
    parser.add_argument("--after", type=float, default=30.0, help="seconds to count requests after a fetch returns")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the stand-in takes to answer a header")
    args = parser.parse_args()
    sys.path[:0] = [args.code]
    with tempfile.TemporaryDirectory() as tmp:
        log, home = Path(tmp) / "requests", Path(tmp) / "hf"
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT), str(args.index_mb), str(args.shards),
                                   str(args.ids), str(log), str(args.latency)], stdout=subprocess.PIPE,
                                  text=True)  # fmt: skip
        try:
            url = server.stdout.readline().strip()
            while not log.exists():
                time.sleep(0.1)
            os.environ.update(HF_ENDPOINT=url, HF_HOME=str(home))
            for name in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
                os.environ.pop(name, None)
            print(f"code: {args.code}; stand-in latency {args.latency:g} s a header; load average "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
            for k in range(args.ids):
                print(json.dumps(probe(f"org/huge-index-{k}", log, args.after, home)), flush=True)
            print(json.dumps(probe("org/many-shards", log, args.after, home)), flush=True)
        finally:
            server.kill()


if __name__ == "__main__":
    main()
