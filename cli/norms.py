"""`python -m attncore norms` (issue 30.3): gradient and residual norms by block, and the attention logits,
entropy and saturated rows by layer, at initialisation and at each training snapshot of the run of the flags.

The snapshots are measured by training the run again (attncore.interpret.norms.over_training: the same steps,
bit for bit); `--init-only` measures the initial weights alone, in about a second.
"""

from __future__ import annotations

import json
import sys

from attncore.interpret import norms as nm
from cli.flags import add_model_args, check_length_flags, run_settings
from lab import formats


def _print_blocks(figures: dict) -> None:
    names = list(nm.MATRICES)
    print(f"  {'block':>5}  " + "  ".join(f"{n:>9}" for n in names) + f"  {'residual':>9}")
    for b in figures["blocks"]:
        norms = "  ".join(f"{formats.significant(b['grad_norm'][n], 3):>9}" for n in names)
        print(f"  {b['block']:>5}  {norms}  {formats.significant(b['residual_norm'], 3):>9}")


def _print_layers(figures: dict) -> None:
    for key, label in (("max_logit", "max |q·k|/scale"), ("entropy", "entropy (nats)"), ("saturated", "saturated")):
        print(f"  {label:<16} " + " ".join(f"{formats.significant(x, 3):>7}" for x in figures[key]))


def cmd_norms(a) -> int:
    from attncore.config import make_run
    from attncore.memory import check_fits

    check_length_flags(a)
    run = make_run(a.task, a.length, a.seed, lr=a.lr, position=a.position, norm=a.norm, **run_settings(a))
    check_fits([run], cap=a.max_memory)
    if a.init_only:
        out = {"init": nm.at_init(run), "snapshots": []}
    else:
        print(f"training the run to measure its {run.train.steps} steps' snapshots ...", file=sys.stderr)
        out, _ = nm.over_training(run)
    if a.json:
        print(json.dumps(out | {"config": run.to_dict()}))
        return 0
    print(f"gradient norms ‖∂L/∂W‖_F by block, mean over {nm.N_BATCHES} fixed batches, and the residual norm")
    print("at initialisation:")
    _print_blocks(out["init"])
    _print_layers(out["init"])
    for snap in out["snapshots"]:
        print(f"after step {snap['step']}:")
        _print_blocks(snap)
        _print_layers(snap)
    return 0


def register(sub) -> None:
    p = sub.add_parser("norms", help="gradient, residual and attention-logit norms by layer (init and over training)")
    add_model_args(p)
    p.add_argument("--init-only", action="store_true", help="measure the initial weights only (no training)")
    p.set_defaults(func=cmd_norms)
