"""`python -m attncore norms`: gradient and residual norms by block, and the attention logits,
entropy and saturated rows by layer, at initialisation and at each training snapshot of the run of the flags.

The snapshots' figures are stored with the run (its record, trained first if it is not stored yet); a record
stored before them is measured by training the run again (attncore.interpret.norms.over_training: the same steps,
bit for bit). The initial figures follow from the config; `--init-only` measures them alone, in about a second.
"""

from __future__ import annotations

import json
import sys

from attncore.interpret import norms as nm
from cli import confirm
from cli.flags import add_model_args, run_of
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


def _snapshots(run, cap) -> list[dict]:
    """The figures at the run's snapshots: from its record (trained and stored first if it is not stored yet),
    or, for a record stored before they were, by training the run again."""
    from cli.interpret import stored_record

    record = stored_record(run, cap)
    if record.norms is not None:
        return record.norms
    print("its record was stored before the norms were: training it again to measure them ...", file=sys.stderr)
    return nm.over_training(run)[0]


# The measurement's work in training steps: each fixed batch's gradients on every row (a step computes the answer
# rows' only) and a forward for the residual norms.
MEASURE_STEPS = 3 * nm.N_BATCHES


def cmd_norms(a) -> int:
    from attncore.memory import check_fits

    run = run_of(a)
    check_fits([run], cap=a.max_memory)
    trained = [] if a.init_only else [run]  # training it if it is not stored, and measuring it
    confirm.ask(a, "norms", trained, measured=[run], extra_steps=MEASURE_STEPS)
    snapshots = [] if a.init_only else _snapshots(run, a.max_memory)
    out = {"init": nm.at_init(run), "snapshots": snapshots}
    if a.json:
        batches = {"init_batches": nm.N_BATCHES, "snapshot_batches": nm.SNAPSHOT_BATCHES}
        print(json.dumps(out | batches | {"config": run.to_dict()}))
        return 0
    print(f"gradient norms ‖∂L/∂W‖_F by block and the residual norm after it, at initialisation over {nm.N_BATCHES}")
    first = "first fixed batch" if nm.SNAPSHOT_BATCHES == 1 else f"first {nm.SNAPSHOT_BATCHES} fixed batches"
    print(f"fixed batches (the mean), at each training snapshot on the {first}")
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
    confirm.add_yes(p)
    p.add_argument("--init-only", action="store_true", help="measure the initial weights only (no training)")
    p.set_defaults(func=cmd_norms)
