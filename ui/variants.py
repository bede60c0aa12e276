"""The ablation variants offered on the Ablations page: named changes to the sidebar's base run."""

from __future__ import annotations

from attncore import ConfigError, RunConfig, make_run
from attncore import task as tasks
from lab.presets import ABLATIONS
from lab.stats import seeds_needed
from lab.tables import variant_name

WARMUP_FRACTION = 0.2  # "with warm-up": a linear warm-up over this share of the base's steps


def warmup_steps(base: RunConfig) -> int:
    return round(WARMUP_FRACTION * base.train.steps)


# name -> make_run overrides (or a function of the base run giving them); the article's five (ABLATIONS) first
VARIANTS = dict(ABLATIONS) | {
    "scaling on": {"scaling": True},
    "learned position": {"position": "learned"},
    "sinusoidal position": {"position": "sinusoidal"},
    "RoPE position": {"position": "rope"},
    "pre-LN": {"norm": "pre"},
    "lr 1e-3": {"lr": 1e-3},
    "lr 3e-2": {"lr": 3e-2},
    "post-LN with warm-up": lambda base: {"norm": "post", "warmup": warmup_steps(base)},  # Xiong et al. 2020
    "warm-up": lambda base: {"warmup": warmup_steps(base)},
    # the regimes where the LayerNorm's place and the √d_k scaling matter (docs/regimes.md): depth and wide heads
    # (post-LN fails at 8 layers without a warm-up there; no scaling is worse from d_k = 32, d_k × 4 at the defaults)
    "1 layer": {"n_layers": 1},  # the induction task: one layer cannot compose a previous-token and an induction head
    "8 layers": {"n_layers": 8},
    "post-LN at 8 layers": {"norm": "post", "n_layers": 8},
    "post-LN with warm-up at 8 layers": lambda base: {"norm": "post", "n_layers": 8, "warmup": warmup_steps(base)},
    "d_k × 4": lambda base: {"d_model": 4 * base.model.d_model},  # the same heads, each 4 times as wide
    "no scaling at d_k × 4": lambda base: {"scaling": False, "d_model": 4 * base.model.d_model},
}
DEFAULT = list(ABLATIONS)
DEFAULT_SEEDS = seeds_needed(len(DEFAULT))  # the fewest with which the default view can show a difference (Holm)


def base_label(base: RunConfig) -> str:
    """The base row's name: what it is against the article's model of the same task, L and seed (the induction
    task: against its experiment's defaults at the same T, V and k_min)."""
    k = base.task
    task = tasks.get(k.name)
    own = {key: value for key, value in task.defaults.items() if key != "length"}  # its experiment's (Task.defaults)
    article = make_run(k.name, k.length, base.train.seed, **own | dict(k.own))
    name = variant_name(base, article)
    return "base: the full model" if name == "full" else f"base: {name}"


def variant_runs(base: RunConfig, names, make) -> tuple[dict[str, RunConfig], list[str]]:
    """{label: run} for the chosen variants (base first, named by base_label; the others as in lab.tables), and
    notes on the skipped ones.

    `make(**overrides)` builds a run from the base settings (ui.sidebar.make, within the hosted caps by
    ui.compare_view.capped). A variant equal to the base or to an earlier one is skipped (one note lists them); an
    invalid one (e.g. RoPE with an odd head size, or a width over the cap) is reported.
    """
    chosen, notes, repeats = {base_label(base): base}, [], []
    for name in names:
        overrides = VARIANTS[name]
        try:
            run = make(**(overrides(base) if callable(overrides) else overrides))
        except ConfigError as e:
            notes.append(f"{name}: not possible with this base ({e})")
            continue
        if run in chosen.values():
            repeats.append(name)
            continue
        chosen[variant_name(run, base)] = run
    if repeats:
        notes.append(f"{'; '.join(repeats)}: already the base or another variant, shown once")
    return chosen, notes
