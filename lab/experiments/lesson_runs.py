"""Which runs a lesson's page asks the store for when it is opened at the lesson's link: each page's own experiment
functions (the modules beside this one) called with the link's values, read as the page's controls read them (a
choice by its value or label, any case; a number; a list comma-separated), every other control at its default, the
seeds from the sidebar's seed on. `python -m attncore lessons warm` trains them; tests/test_lessons_warm.py opens
every lesson's page and checks that these are the runs it asks the store for, so this reading cannot drift from the
pages' controls unnoticed.

A page without runs (the calculators, the mechanism demos) needs none. A value a page would refuse falls back to
the default, as the page does (and the lesson tests refuse a lesson whose link draws a notice)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from attncore import make_run
from attncore.config import RunConfig
from attncore.settings import SETTINGS
from lab.experiments import grokking, induction, lengths, padding, regimes, sinks

Params = Mapping[str, str]  # the lesson's own URL keys -> values, as its link spells them
SIDEBAR_KEYS = {s.url for s in SETTINGS.values() if s.url}  # the sidebar's settings (task, L, seed, pos, lr, ...)


def _raw(params: Params, key: str) -> str | None:
    value = params.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _number(params: Params, key: str, default, kind=float):
    """A number as ui.urls reads one (1e3 for 1000, 3e-3 for 0.003); the default when absent or not a number."""
    raw = _raw(params, key)
    try:
        x = float(raw) if raw is not None else None
    except ValueError:
        return default
    if x is None or x != x or x in (float("inf"), float("-inf")) or (kind is int and not x.is_integer()):
        return default
    return kind(x)


def _choice(params: Params, key: str, options, default, label: Callable = str):
    """One of `options` named by its value or its label, any case, or a number equal to it; else the default."""
    raw = _raw(params, key)
    return _match(raw, options, label) if raw is not None else default


def _match(raw: str, options, label: Callable):
    low = raw.lower()
    for option in options:
        if low in (str(option).lower(), str(label(option)).lower()):
            return option
        try:
            if not isinstance(option, str) and float(raw) == option:
                return option
        except ValueError:
            pass
    return None


def _choices(params: Params, key: str, options, default, label: Callable = str) -> tuple:
    """Several of `options`, comma-separated, in the link's order; the default when absent."""
    raw = _raw(params, key)
    if raw is None:
        return tuple(default)
    found = [_match(part.strip(), options, label) for part in raw.split(",") if part.strip()]
    return tuple(dict.fromkeys(f for f in found if f is not None))


def _flag(params: Params, key: str) -> bool:
    """A toggle as ui.urls reads one: true, 1, yes or on."""
    return (_raw(params, key) or "false").lower() in ("true", "1", "yes", "on")


def _seeds(params: Params, key: str, default: int) -> list[int]:
    """N seeds from the sidebar's seed on (ui.compare_view.seeds_input)."""
    first = _number(params, "seed", 0, int)
    return list(range(first, first + _number(params, key, default, int)))


def _given(params: Params, read: dict[str, tuple[str, Callable]]) -> dict:
    """{argument: value} for the URL keys of `read` ({key: (argument, parse)}) the link sets."""
    return {arg: parse(params, key) for key, (arg, parse) in read.items() if _raw(params, key) is not None}


def _sidebar_run(params: Params) -> RunConfig:
    """The sidebar's run at its defaults (attncore.make_run's), at the link's seed."""
    other = sorted(k for k in params if k in SIDEBAR_KEYS and k != "seed")
    if other:
        raise ValueError(f"a lesson's runs are read with the sidebar at its defaults; this one sets {', '.join(other)}")
    return make_run(seed=_number(params, "seed", 0, int))


def _float(key_default):
    return lambda params, key: _number(params, key, key_default)


def _list_of(options):
    return lambda params, key: _choices(params, key, options, ())


def _int(params: Params, key: str):
    return _number(params, key, None, int)


def regimes_runs(params: Params) -> list[RunConfig]:
    experiment = _choice(params, "reg_exp", regimes.EXPERIMENTS, "depth")
    options = _given(params, {"reg_task": ("task", lambda p, k: _choice(p, k, ("copy", "sort", "reverse"), "sort")),
                              "reg_steps": ("steps", _int)})  # fmt: skip
    if experiment == "depth":
        options |= _given(params, {"reg_depths": ("depths", _list_of(range(1, 13))),
                                   "reg_lrs": ("lrs", _list_of(regimes.LR_CHOICES))})  # fmt: skip
    elif experiment == "heads":
        options |= _given(params, {"reg_heads": ("heads", _int),
                                   "reg_sizes": ("sizes", _list_of(regimes.HEAD_SIZES))})  # fmt: skip
    else:
        pair = _choice(params, "reg_pair", [*regimes.PAIRS, regimes.QK_NORM], "norm")
        qk = pair == regimes.QK_NORM
        options |= {"qk_norm": "both"} if qk else {"pair": pair}
        lrs = "reg_qklrs" if qk else "reg_lrgrid"
        options |= _given(params, {lrs: ("lrs", _list_of(regimes.LR_CHOICES)),
                                   "reg_layers": ("n_layers", _int)})  # fmt: skip
        if qk:
            options |= _given(params, {"reg_zloss": ("z_loss", _float(None)), "reg_warmup": ("warmup", _int)})
    seeds = _seeds(params, "reg_seeds", regimes.DEFAULT_SEEDS)
    return regimes.all_runs(regimes.cells_of(experiment, seeds, **options))


def induction_runs(params: Params) -> list[RunConfig]:
    every = [induction.Variant(n, p) for n in (1, 2, 3) for p in induction.POSITION_NAMES]
    default = [induction.Variant(n, p) for n, p in induction.PAGE_VARIANTS]
    chosen = list(_choices(params, "ind_var", every, default, lambda v: v.label))
    settings = _given(params, {"ind_steps": ("steps", _int), "ind_emb": ("embed_std", _float(None)),
                               "ind_norm": ("norm", lambda p, k: _choice(p, k, ("pre", "post"), "pre"))})  # fmt: skip
    seeds = _seeds(params, "ind_seeds", induction.DEFAULT_SEEDS)
    return induction.all_runs(induction.runs_of(chosen, seeds, **settings)) if chosen else []


def sinks_runs(params: Params) -> list[RunConfig]:
    settings = _given(params, {"sk_steps": ("steps", _int), "sk_lr": ("lr", _float(None)),
                               "sk_emb": ("embed_std", _float(None)), "sk_heads": ("n_heads", _int)})  # fmt: skip
    decay = _choice(params, "sk_decay", ("none", "cosine"), "none")
    if decay != "none":
        settings |= {"decay": decay, "warmup": 100}
    return sinks.runs_of(_seeds(params, "sk_seeds", sinks.DEFAULT_SEEDS), **settings)


def grokking_runs(params: Params) -> list[RunConfig]:
    settings = _given(params, {"grok_p": ("length", _int), "grok_frac": ("fraction", _float(None)),
                               "grok_lr": ("lr", _float(None)), "grok_steps": ("steps", _int)})  # fmt: skip
    decay = _number(params, "grok_wd", grokking.MODULAR_RUN["weight_decay"])
    return grokking.all_runs(grokking.runs_of(_seeds(params, "grok_seeds", grokking.DEFAULT_SEEDS), decay, **settings))


def lengths_runs(params: Params) -> list[RunConfig]:
    """The literature's protocol (the first tab) and the sidebar's run (the second); the encodings' comparison at
    the sidebar's length waits for its button, so it is not asked for when the page opens."""
    task = _raw(params, "lit_task") or lengths.LIT_TASK
    randomized = _flag(params, "lit_rand")
    positions = _choices(params, "lit_enc", lengths.LIT_POSITIONS, lengths.LIT_POSITIONS)
    seeds = range(_number(params, "lit_seeds", lengths.LIT_SEEDS, int))
    first = lengths.literature_runs(task, randomized, seeds, lengths.LIT_STEPS, positions) if len(positions) > 1 else []
    return [*first, _sidebar_run(params)]


def explanations_runs(params: Params) -> list[RunConfig]:
    """The sidebar's run and the other seeds' runs the page compares its maps with."""
    run = _sidebar_run(params)
    seeds = _choices(params, "exp_seeds", range(10), (0, 1, 2))
    return [run, *(replace(run, train=replace(run.train, seed=s)) for s in seeds if s != run.train.seed)]


NEEDS: dict[str, Callable[[Params], list[RunConfig]]] = {
    "regimes": regimes_runs,
    "induction": induction_runs,
    "sinks": sinks_runs,
    "grokking": grokking_runs,
    "lengths": lengths_runs,
    "explanations": explanations_runs,
    "masks": lambda params: [padding.trap_run()],
}  # by the page's URL path; a page not named here asks the store for nothing when opened at a link


def runs_of(page: str, params: Params) -> list[RunConfig]:
    """The runs the page at URL path `page` asks the store for when opened with these parameters, each once."""
    needs = NEEDS.get(page)
    return list(dict.fromkeys(needs(params))) if needs else []


def evaluations(page: str, params: Params, max_test_length: int) -> list[tuple[RunConfig, list[int], bool]]:
    """(run, test lengths, on randomized positions) of the evaluations at other lengths the page makes from stored
    runs on its first view (lab.length_store keeps them): Length generalisation's protocol, its runs at every test
    length. (The sidebar's run in its second tab is one run at a dozen short lengths: a tenth of a second.)"""
    if page != "lengths":
        return []
    at_random = _flag(params, "lit_rand") and _flag(params, "lit_rand_eval")
    tested = lengths.test_lengths(max_test_length)
    protocol = lengths_runs(params)[:-1]  # without the sidebar's run
    return [(run, tested, at_random and run.train.randomized_positions is not None) for run in protocol]
