"""Training speed: attncore against a PyTorch eager model of the same decoder, side by side.

The default run (copy, L = 6, d 32, 4 heads, 2 blocks, batch 32) is trained in
rounds of --chunk steps, the contenders interleaved round by round, so a noisy
shared machine slows them alike. Prints the median ms per step of each and the
ratios, and the time of attncore's own matrix products replayed alone (the floor
that per-call overhead sits on). The same step at batch 1, where the arithmetic
all but vanishes, measures that per-call overhead itself. The induction default
(T = V = 32, 2 heads, RoPE, a loss on every position; attncore.tasks.induction.INDUCTION_RUN)
is timed beside its PyTorch peer too, and its 2,000 steps extrapolated.

--variants times the default float32 step beside the same step with qk-norm, with an output z-loss (1e-4), with
weight decay (AdamW, 0.1) and with all three, interleaved round by round; prints the medians, their ratios to the
default step and the BLAS kernel (threadpoolctl).

--against DIR times this checkout's training steps beside another checkout's (DIR, e.g. `git worktree add
/tmp/before <commit>`): each tree's attncore runs in its own subprocess, the two driven round by round, and the
medians, their ratio and whether the two gave the same losses bit for bit are printed.

    python benchmarks/train_speed.py [--steps 1500] [--chunk 100] [--threads 1] [--against DIR | --variants]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from torch_reference import TorchModel, torch_loss  # noqa: E402

from attncore.config import make_run  # noqa: E402
from attncore.model import loss_and_grads  # noqa: E402
from attncore.task import task_of  # noqa: E402
from attncore.tasks.induction import make_induction  # noqa: E402
from attncore.train import Trainer, batch_rng, initial_params  # noqa: E402


class AttncoreTrainer:
    """attncore.train's own Trainer, driven in resumable chunks."""

    def __init__(self, dtype: str, batch_size: int = 32, run=None):
        self.trainer = Trainer(run or make_run("copy", 6, 0, batch_size=batch_size, dtype=dtype))

    def steps(self, n: int) -> float:
        for _ in range(n):
            loss = self.trainer.step()
        return loss


class TorchTrainer:
    """The same model, batches and initial weights in PyTorch eager with torch.optim.Adam."""

    def __init__(self, dtype: str, run=None):
        self.run = run or make_run("copy", 6, 0)
        self.data_rng = batch_rng(0)
        self.model = TorchModel(self.run.model, initial_params(self.run), dtype)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.run.train.lr)

    def steps(self, n: int) -> float:
        for _ in range(n):
            batch = task_of(self.run.task).sample_batch(self.run.task, self.run.train.batch_size, self.data_rng)
            self.opt.zero_grad(set_to_none=True)
            loss = torch_loss(self.model, batch, self.run.task.answer_len)
            loss.backward()
            self.opt.step()
        return loss.item()


class MatmulRecorder(np.ndarray):
    """An array that logs the operands of every matrix product it takes part in."""

    log: list = []

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, MatmulRecorder) else x for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, MatmulRecorder) else o for o in out)
        if ufunc is np.matmul:
            MatmulRecorder.log.append([(x.shape, x.strides, x.dtype) for x in plain[:2]])
        result = getattr(ufunc, method)(*plain, **kwargs)
        if out is not None:  # hand back the caller's own arrays, so results written in place stay recorded
            return out[0] if len(out) == 1 else out
        return result.view(MatmulRecorder) if isinstance(result, np.ndarray) else result


def _like(shape, strides, dtype):
    """A fresh operand of the same shape whose last two axes have the same order (plain or transposed)."""
    if len(shape) >= 2 and strides[-2] < strides[-1]:  # a transposed view
        return np.ones(shape[:-2] + shape[-2:][::-1], dtype).swapaxes(-1, -2)
    return np.ones(shape, dtype)


def _matmul_flops(a: tuple, b: tuple) -> int:
    a, b = (1, *a) if len(a) == 1 else a, (*b, 1) if len(b) == 1 else b  # vectors as 1-row / 1-column
    batch = int(np.prod(np.broadcast_shapes(a[:-2], b[:-2])))
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _is_reduction(a: tuple, b: tuple) -> bool:
    """A sum written as a product with a ones vector (layers.row_sum / col_sum), not a product of the model."""
    return len(a) == 1 or len(b) == 1 or b[-1] == 1


class MatmulReplay:
    """The matrix products of one attncore training step, replayed alone on fresh arrays.

    model=True keeps the model's own products (projections, attention, their gradients); model=False
    keeps only the row and column sums that attncore writes as matrix-vector products.
    """

    def __init__(self, dtype: str, batch_size: int = 32, model: bool = True):
        t = Trainer(make_run("copy", 6, 0, batch_size=batch_size, dtype=dtype))
        params = {k: v.view(MatmulRecorder) for k, v in t.params.items()}
        MatmulRecorder.log = []
        loss_and_grads(params, task_of(t.run.task).sample_batch(t.run.task, batch_size, t.data_rng), t.run.model, 6)
        ops = [tuple(_like(*op) for op in ops) for ops in MatmulRecorder.log]
        self.operands = [(a, b) for a, b in ops if _is_reduction(a.shape, b.shape) != model]
        self.flops = sum(_matmul_flops(a.shape, b.shape) for a, b in self.operands)
        # Forward: QKV, scores, weights x values, output, FFN in, FFN out per block, and the head;
        # backward: two products per projection and four for attention, the head's two, the embedding's one.
        expected = 18 * t.run.model.n_layers + 4
        if model and len(self.operands) != expected:
            raise RuntimeError(f"recorded {len(self.operands)} model matrix products, expected {expected}")

    def steps(self, n: int) -> None:
        for _ in range(n):
            for a, b in self.operands:
                a @ b


# One tree's trainers in a subprocess: reads "<run> <steps>" lines, trains, answers "<wall s> <CPU s> <loss as hex>"
# (the process's CPU time: on a machine shared with other work, less disturbed than the wall time).
WORKER = """
import gc, sys, time
sys.path.insert(0, sys.argv[1])
from threadpoolctl import threadpool_limits
from attncore.config import make_run
from attncore.train import Trainer
try:
    from attncore.tasks.induction import make_induction
except ImportError:  # a checkout from before the task registry
    from attncore.config import make_induction
runs = {
    "float32": make_run("copy", 6, 0, dtype="float32"),
    "float64": make_run("copy", 6, 0, dtype="float64"),
    "float32, batch 1": make_run("copy", 6, 0, batch_size=1, dtype="float32"),
    "float32, induction": make_induction(),
}
trainers = {name: Trainer(run) for name, run in runs.items()}
gc.disable()
with threadpool_limits(int(sys.argv[2])):
    for line in sys.stdin:
        name, n = line.rsplit(" ", 1)
        trainer, start, cpu = trainers[name], time.perf_counter(), time.process_time()
        for _ in range(int(n)):
            loss = trainer.step()
        print(time.perf_counter() - start, time.process_time() - cpu, float(loss).hex(), flush=True)
"""
AGAINST_RUNS = ("float32", "float64", "float32, batch 1", "float32, induction")


def against(other: Path, steps: int, chunk: int, threads: int) -> None:
    """This checkout's training steps beside `other`'s, each tree in its own subprocess, interleaved."""
    trees = {"this checkout": ROOT, "other": other.resolve()}
    env = os.environ | {"PYTHONPATH": ""}
    workers = {
        name: subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tree), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tree,
            env=env,
        )
        for name, tree in trees.items()
    }

    def run(worker, name: str, n: int) -> tuple[float, float, str]:
        worker.stdin.write(f"{name} {n}\n")
        worker.stdin.flush()
        wall, cpu, loss = worker.stdout.readline().split()
        return float(wall) / n * 1e3, float(cpu) / n * 1e3, loss

    clocks = ("wall", "CPU")
    times = {(clock, tree, name): [] for clock in clocks for name in AGAINST_RUNS for tree in trees}
    same_losses = True
    for name in AGAINST_RUNS:  # warm-up
        for w in workers.values():
            run(w, name, 5)
    for r in range(steps // chunk):
        for name in AGAINST_RUNS:
            order = list(workers.items()) if r % 2 == 0 else list(workers.items())[::-1]  # who goes first alternates
            losses = set()
            for tree, w in order:
                *ms, loss = run(w, name, chunk)
                for clock, m in zip(clocks, ms, strict=True):
                    times[clock, tree, name].append(m)
                losses.add(loss)
            same_losses &= len(losses) == 1
    for w in workers.values():
        w.stdin.close()
        w.wait()
    this, that = trees
    print(f"ms per training step over {steps // chunk} interleaved rounds of {chunk} steps, {threads} thread(s);")
    print(f"other: {other}; medians, and the median of the rounds' own ratios")
    print(f"  {'run':20s} {'clock':5s} {'this checkout':>14s} {'other':>14s}   this / other   per round")
    for name in AGAINST_RUNS:
        for clock in clocks:
            a, b = times[clock, this, name], times[clock, that, name]
            paired = statistics.median(x / y for x, y in zip(a, b, strict=True))
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"  {name:20s} {clock:5s} {ma:11.3f} ms {mb:11.3f} ms   {ma / mb:11.3f}x  {paired:9.3f}x")
    print(f"losses after every round bit-identical between the two trees: {same_losses}")


# the stability settings, each alone and all three, beside the default step (float32, the lab's training dtype)
VARIANTS = {
    "default": {},
    "qk-norm": {"qk_norm": True},
    "z-loss 1e-4": {"z_loss": 1e-4},
    "weight decay 0.1": {"weight_decay": 0.1},
    "all three": {"qk_norm": True, "z_loss": 1e-4, "weight_decay": 0.1},
}


def blas_kernels() -> str:
    """The BLAS libraries numpy loaded, as threadpoolctl reports them: library, version and kernel family."""
    from threadpoolctl import threadpool_info

    return "; ".join(
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    )


def variants(steps: int, chunk: int, threads: int) -> None:
    """The default step beside the same step with each stability setting, interleaved round by round; wall and CPU
    time (the process's: on a machine shared with other work, less disturbed than the wall time)."""
    trainers = {name: AttncoreTrainer("float32", run=make_run("copy", 6, 0, **kw)) for name, kw in VARIANTS.items()}
    clocks = {"wall": time.perf_counter, "CPU": time.process_time}
    times = {(clock, name): [] for clock in clocks for name in trainers}
    gc.disable()
    with threadpool_limits(threads):
        for t in trainers.values():  # warm-up
            t.steps(5)
        for r in range(steps // chunk):
            order = list(trainers.items())
            for name, t in order if r % 2 == 0 else order[::-1]:  # who goes first alternates
                start = {clock: now() for clock, now in clocks.items()}
                t.steps(chunk)
                for clock, now in clocks.items():
                    times[clock, name].append((now() - start[clock]) / chunk * 1e3)
    print(f"ms per float32 step of the default run over {steps // chunk} interleaved rounds of {chunk} steps,")
    print(f"{threads} thread(s); BLAS: {blas_kernels()}; medians, and the median of the rounds' own ratios")
    print(f"  {'variant':18s} {'clock':5s} {'median':>9s}   {'/ default':>9s}   per round")
    for name in trainers:
        for clock in clocks:
            ts, base = times[clock, name], times[clock, "default"]
            m, paired = statistics.median(ts), statistics.median(x / y for x, y in zip(ts, base, strict=True))
            print(f"  {name:18s} {clock:5s} {m:6.3f} ms   {m / statistics.median(base):8.3f}x   {paired:8.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500, help="training steps per contender")
    ap.add_argument("--chunk", type=int, default=100, help="steps per contender per round")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy and torch's intra-op threads")
    ap.add_argument("--against", type=Path, help="another checkout whose training steps to time beside this one's")
    ap.add_argument("--variants", action="store_true", help="the default step beside qk-norm, z-loss, weight decay")
    a = ap.parse_args()
    if a.variants:
        variants(a.steps, a.chunk, a.threads)
        return
    if a.against:
        against(a.against, a.steps, a.chunk, a.threads)
        return
    torch.set_num_threads(a.threads)
    contenders = {
        "attncore float32": AttncoreTrainer("float32"),
        "attncore float64": AttncoreTrainer("float64"),
        "torch eager float32": TorchTrainer("float32"),
        "torch eager float64": TorchTrainer("float64"),
        "attncore matmuls only, float32": MatmulReplay("float32"),
        "attncore sums as matmuls, float32": MatmulReplay("float32", model=False),
        "attncore float32, batch 1": AttncoreTrainer("float32", batch_size=1),
        "attncore matmuls only, batch 1": MatmulReplay("float32", batch_size=1),
        "attncore float32, induction": AttncoreTrainer("float32", run=make_induction()),
        "torch eager float32, induction": TorchTrainer("float32", run=make_induction()),
    }
    replay, sums = contenders["attncore matmuls only, float32"], contenders["attncore sums as matmuls, float32"]
    print(f"{len(replay.operands)} matrix products per step, {replay.flops / 1e6:.1f} MFLOP (float32 step)")
    print(f"(and {len(sums.operands)} row or column sums written as matrix-vector products)")
    times = {name: [] for name in contenders}
    gc.disable()  # as attncore.train does; applied to every contender alike
    with threadpool_limits(a.threads):
        for c in contenders.values():  # warm-up
            c.steps(5)
        for _ in range(a.steps // a.chunk):
            for name, c in contenders.items():
                start = time.perf_counter()
                c.steps(a.chunk)
                times[name].append((time.perf_counter() - start) / a.chunk * 1e3)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(
        f"\nmedian ms per step over {a.steps // a.chunk} interleaved rounds of {a.chunk} steps, {a.threads} thread(s)"
    )
    for name, m in med.items():
        print(f"  {name:34s} {m:7.3f} ms   (min {min(times[name]):.3f})")
    a32, t32, t64 = med["attncore float32"], med["torch eager float32"], med["torch eager float64"]
    print("\nratios")
    print(f"  torch eager float32 / attncore float32   {t32 / a32:5.2f}x")
    print(f"  torch eager float64 / attncore float64   {t64 / med['attncore float64']:5.2f}x")
    mm32 = med["attncore matmuls only, float32"]
    print(f"  attncore float32 / its matmuls alone     {a32 / mm32:5.2f}x   (goal: at most 1.5x)")
    mm_all = mm32 + med["attncore sums as matmuls, float32"]
    print(f"  ... counting its sums as matmuls too     {a32 / mm_all:5.2f}x")
    ind, ind_torch = med["attncore float32, induction"], med["torch eager float32, induction"]
    steps = make_induction().train.steps
    print(f"  torch eager float32 / attncore float32, induction default   {ind_torch / ind:5.2f}x")
    print(f"  (the induction default's {steps:,} steps: {ind * steps / 1e3:.1f} s of attncore's training steps)")
    overhead = med["attncore float32, batch 1"] - med["attncore matmuls only, batch 1"]
    print("\nper-call floor")
    print(f"  everything but the matmuls, at batch 1   {overhead:7.3f} ms  (per-call cost, almost no arithmetic)")
    print(f"  everything but the matmuls, at batch 32  {a32 - mm32:7.3f} ms")
    print(f"  allowed by 'within 1.5x of the matmuls'  {0.5 * mm32:7.3f} ms")


if __name__ == "__main__":
    main()
