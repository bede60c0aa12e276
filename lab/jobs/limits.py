"""The operator's limits (the hosted caps, Limits): the largest work a visitor may ask for, as the operator set it.

The caps that refuse work (WORK_CAPS: a view's computing, its runs) apply in hosted mode only: a local server
(one with a display, or `hosted = 0`) trains whatever its user asks for, unless the operator set such a cap
explicitly. The other caps bound the inputs' ranges everywhere.

Each cap is read from an environment variable (e.g. ATTNLAB_MAX_STEPS=2000), else from
`.streamlit/secrets.toml` under `[limits]` (e.g. `max_steps = 2000`), else the default below: one rule
for every process (lab.limits; the pages pass st.secrets, workers and the CLI read the same files).
A cap several pages or processes read is one field of Limits (with its parser in PARSERS when it is not a whole
number). A cap of one page is declared where that page's work lives (lab.limits.declare(Cap(...)): the Patching
page's in ui.interpret), a task's own on its Task (Task.caps, {name: default}); both are read here the same way, by
name (Limits.own_caps, and `lim.<name>` like any other). ui.limits reads them for a page (st.secrets, and whether
the server runs headless) and shows a rejected value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from attncore import ConfigError
from attncore import task as tasks
from lab import limits

LIMIT_RANGE = (1, 10**9)  # every cap is a whole number in this range
WORK_CAPS = (
    "max_view_cpu_s",
    "max_sweep_runs",
    "max_compare_runs",
    "max_hub_fetches_session",
    "max_hub_fetches_server",
)  # refuse work: hosted mode only
UNLIMITED = LIMIT_RANGE[1]  # a work cap on a local server: nothing is refused


@dataclass(frozen=True)
class Limits:
    max_steps: int = 3000
    max_d_model: int = 256  # head sizes d_k up to d (one head); the per-view budget meters what a width costs
    max_length: int = 12  # L: symbols per task sequence
    max_induction_length: int = 64  # T: tokens per sequence of the induction task (attncore allows up to 256)
    max_vocab: int = 256  # V: the induction task's vocabulary
    max_layers: int = 12
    max_heads: int = 16
    max_batch: int = 128
    max_concurrent: int = 2  # heavy jobs (trainings, sweeps, timings, ablations) running at once on this server
    max_sweep_runs: int = 160  # runs one button press may train (their computing time: max_view_cpu_s)
    max_seeds: int = 8  # Ablations, Compare: seeds per variant or level (8: five variants vs one base, Holm)
    max_compare_runs: int = 160  # Ablations, Compare, Regimes: runs one view loads (cached or not; Regimes' 144)
    max_view_cpu_s: int = 3600  # computing seconds one button press may start, estimated (lab.cost_model) before it
    sweep_jobs: int = 2  # worker processes of a sweep
    slot_wait_seconds: int = 120  # how long a job waits for a free slot
    max_hub_fetches_session: int = 30  # Parameters, KV cache: models fetched from the Hub per visitor an hour
    max_hub_fetches_server: int = 300  # the same over every session (a model fetched before is not fetched again)
    max_store_mb: float = 512  # the run store's size cap (MB, may be a fraction); least-recently-used runs evicted
    max_bundle_mb: int = 50  # largest run bundle a visitor may upload on Home (and Streamlit's server.maxUploadSize)
    max_download_mb: int = 200  # Home's "Download all runs": the largest bundle it builds (cache import's default)
    bundle_upload: bool | None = None  # Home's "Load a bundle": None = on with a display, off when headless
    dask_scheduler: str | None = None  # tcp://HOST:PORT: the pages' sweeps train there (lab.sweep's Dask path)
    hosted: bool | None = None  # hosted mode (WORK_CAPS refuse work): None = when the server runs headless
    hub_fetch: bool | None = None  # Parameters, KV cache fetch a model by its Hub id: None = on unless hosted
    explicit: frozenset = field(default=frozenset(), compare=False)  # the caps an operator set (not a setting)
    # the caps declared outside this table, ((name, value), ...): the registered tasks' (Task.caps) and the pages'
    # (lab.limits.declare), read as `lim.<name>` like the fields above
    own_caps: tuple = field(default_factory=lambda: tuple(own_cap_defaults().items()))

    def __getattr__(self, name: str):
        """A task's or a page's own cap by name (only names the fields above do not hold reach here)."""
        caps = dict(self.__dict__.get("own_caps", ()))
        if name in caps:
            return caps[name]
        raise AttributeError(f"no cap named {name!r}")

    def is_hosted(self, headless: bool) -> bool:
        """Hosted mode: the switch if set, else whether the server runs `headless` (containers, Community Cloud;
        Streamlit runs headless where there is no display), which is how a public deployment runs."""
        if self.hosted is not None:
            return self.hosted
        return bool(headless)

    def in_force(self, headless: bool) -> Limits:
        """These caps as they apply: on a local server the work caps the operator left unset refuse nothing."""
        if self.is_hosted(headless):
            return self
        return replace(self, **{name: UNLIMITED for name in WORK_CAPS if name not in self.explicit})

    def lifted_by(self, name: str) -> str:
        """How an operator lifts cap `name`: 'ATTNLAB_MAX_VIEW_CPU_S or max_view_cpu_s under [limits] in
        .streamlit/secrets.toml, or hosted = 0 on a server of your own'."""
        return f"{limits.env_var(name)} or {name} under [limits] in .streamlit/secrets.toml" + (
            ", or hosted = 0 (ATTNLAB_HOSTED=0) on a server of your own" if name not in self.explicit else ""
        )

    def mode_text(self, headless: bool) -> str:
        """Which mode the server runs in, why, what it means here, and how to change it, in a few sentences."""
        hosted, upload = self.is_hosted(headless), self.upload_allowed(headless)
        switch = limits.env_var("hosted")
        if self.hosted is not None:
            why = f"hosted = {int(self.hosted)} is set ({switch} or hosted under [limits] in .streamlit/secrets.toml)"
        elif headless:
            why = "it runs headless, with no display, as containers and Streamlit Community Cloud run it"
        else:
            why = "it has a display, as `streamlit run` on a desktop does"
        bundle = "on" if upload else f"off (turn it on with {limits.env_var('bundle_upload')}=1)"
        if hosted:
            return (
                f"**This server runs in hosted mode**, because {why}: each button over a cap (a view's computing, "
                f"its runs) is refused before the click, naming the setting that lifts it; Load a bundle is "
                f"{bundle}. On a machine of your own, start it with `{switch}=0 streamlit run dashboard.py` (or "
                "hosted = 0 under [limits]) to train whatever you ask for."
            )
        return (
            f"**This server runs in local mode**, because {why}: it trains whatever you ask for, the caps an operator "
            f"sets aside; Load a bundle is {bundle}. A public deployment runs in "
            f"hosted mode, with its caps: `{switch}=1` (or hosted = 1 under [limits])."
        )

    def store_bytes(self) -> int:
        """max_store_mb in bytes: the cap every pass over the store takes (the page's, and its workers')."""
        return int(self.max_store_mb * 2**20)

    def hub_allowed(self, headless: bool) -> bool:
        """Whether the pages fetch from the Hub: the switch if set, else only on a server not in hosted mode."""
        return self.hub_fetch if self.hub_fetch is not None else not self.is_hosted(headless)

    def upload_allowed(self, headless: bool) -> bool:
        """Whether Home offers to load a bundle: the switch if set, else only for a desktop (non-headless) server."""
        if self.bundle_upload is not None:
            return self.bundle_upload
        return not headless


def own_cap_defaults() -> dict[str, int]:
    """{cap name: default} of the caps declared outside Limits: every registered task's own (Task.caps; a name two
    tasks declare takes the larger default, each bounding its own task's inputs), then the pages' (lab.limits.declare,
    those of the modules imported so far). ValueError for one with the name of a field of Limits."""
    out: dict[str, int] = {}
    for name in tasks.names():
        for cap, default in tasks.get(name).caps.items():
            out[cap] = max(out.get(cap, default), default)
    out |= {cap.name: cap.default for cap in limits.declared().values()}
    central = {f.name for f in fields(Limits)}
    if central & set(out):
        raise ValueError(f"the cap {sorted(central & set(out))[0]!r} is a field of Limits: declare it once")
    return out


def parse_limit(name: str, raw) -> int:
    """One cap's value from the environment (text) or secrets.toml (int, float, text); ValueError names it."""
    low, high = LIMIT_RANGE
    value = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str) and re.fullmatch(r"\s*\+?[0-9]{1,10}\s*", raw):
        value = int(raw)
    if value is None or not low <= value <= high:
        shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:37] + "..."
        raise ValueError(f"{name} must be a whole number from {low:,} to {high:,}, got {shown}")
    return value


def parse_store_mb(name: str, raw) -> float:
    """max_store_mb: a positive number of MB below 10^9 (a fraction too), read exactly as lab.store reads it."""
    try:
        return limits.parse_store_mb(raw)
    except (ValueError, TypeError):
        shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:37] + "..."
        raise ValueError(f"{name} must be a number of MB above 0 and below 1,000,000,000, got {shown}") from None


SWITCH = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


def parse_switch(name: str, raw) -> bool:
    """An on/off setting (bundle_upload) from the environment or secrets.toml; ValueError names it."""
    if isinstance(raw, bool):
        return raw
    key = str(raw).strip().lower() if isinstance(raw, (str, int)) else None
    if key not in SWITCH:
        raise ValueError(f"{name} must be on or off (1/0, true/false)")
    return SWITCH[key]


def parse_scheduler(name: str, raw) -> str:
    """dask_scheduler: an address protocol://host:port, checked as the command line's --scheduler is."""
    from lab.sweep import check_scheduler_address

    try:
        check_scheduler_address(raw)
    except ConfigError:
        allowed = "tcp, tls, ws or wss, port 1-65535"
        raise ValueError(f"{name} must be an address like tcp://HOST:PORT ({allowed})") from None
    return raw


PARSERS = {
    "bundle_upload": parse_switch,
    "hosted": parse_switch,
    "hub_fetch": parse_switch,
    "max_store_mb": parse_store_mb,
    "dask_scheduler": parse_scheduler,
}
# every other cap: parse_limit
UNSET = {  # what a setting whose default is None (unset) does, said when a bad value is ignored
    "bundle_upload": "Home offers to load a bundle only when the server is not headless, as when it is unset",
    "dask_scheduler": "the pages' sweeps train on this server's own worker pool, as when it is unset",
    "hub_fetch": "the pages fetch from the Hub only when the server is not in hosted mode, as when it is unset",
}


def parse_limits(environ: Mapping[str, str], secrets: Mapping) -> tuple[Limits, list[str]]:
    """(the caps, one message per value rejected); a rejected value leaves that cap at its default."""
    values, problems = {}, []
    own = own_cap_defaults()
    names = {f.name: f.default for f in fields(Limits) if f.name not in ("explicit", "own_caps")} | own
    for name, default in names.items():
        raw = limits.raw_setting(name, environ, secrets)
        if raw is None:
            continue
        parse = PARSERS.get(name, parse_limit)
        try:
            values[name] = parse(name, raw)
        except ValueError as e:
            problems.append(f"Limit ignored: {e}; {UNSET.get(name, f'using the default {default}')}.")
    explicit = frozenset(values)  # the caps an operator set, a task's or a page's own among them
    own |= {name: values.pop(name) for name in own if name in values}
    return Limits(**values, own_caps=tuple(own.items()), explicit=explicit), problems
