"""The dashboard's bridge to the run store: cached loads, live training, sweeps, head ablation.

lab.store is the persistent cache; the st.cache_* layers here only keep loaded records in memory
so a rerun does not unpickle them again. A training runs in a worker process (ui.live over lab.jobs)
and takes one of the server's slots (lab.jobs.slots), so other sessions never wait on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from attncore import RunConfig
from attncore.evaluate import EvalResult, LengthResult, evaluate_lengths
from attncore.inspect import evaluate_ablated
from lab import length_store
from lab.jobs.memo import MISSING, view_memo, view_memo_on
from lab.jobs.memo import shared as memo
from lab.jobs.slots import BusyError
from lab.jobs.training import run_key as _run_key
from lab.limits import Cap, declare
from lab.store import (
    RunRecord,
    cache_dir,
    entry_stamp,
    is_cached,
    list_cached,
    pin_view,
    stored_run,
    unverified_runs,
    view_bytes,
)
from ui import bundles, live, sweeps
from ui.limits import limits
from ui.metered import metered
from ui.slots import training_slot

# the Attention page's cap, Explanations' too (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
(ABLATION_HEADS,) = declare(
    Cap("max_ablation_heads", 16, "Attention: heads zeroed one by one for the per-head table; Explanations: heads "
        "shuffled one by one")
)  # fmt: skip

run_key = functools.lru_cache(maxsize=8192)(_run_key)  # a view of 128 runs asks each run's key on every view


class _Missing(LookupError):
    """The run was not in the store after all (evicted or damaged since is_cached said yes)."""


@st.cache_resource(max_entries=64, show_spinner=False)  # up to ~6 MB each at the hosted maximum
def _load(key: str) -> RunRecord:
    record = stored_run(RunConfig.from_dict(json.loads(key)))
    if record is None:
        raise _Missing(key)  # not cached: st.cache_resource keeps no exception
    return record


VIEW = "_view_runs"  # session state: run key -> run, the runs this script run's view has asked for


def _holder() -> str | None:
    """This visitor's pin holder: a digest of the Streamlit session id (never the id itself)."""
    ctx = get_script_run_ctx()
    return hashlib.sha256(ctx.session_id.encode()).hexdigest()[:32] if ctx is not None else None


def begin_view() -> None:
    """Called by dashboard.py before each page run: the runs the page asks for from here on form its view."""
    st.session_state["_view_before"] = bool(st.session_state.get(VIEW))
    st.session_state[VIEW] = {}


def end_view() -> None:
    """Called after the page ran: a page that showed no runs releases the pin of the view shown before."""
    holder = _holder()
    if holder and st.session_state.get("_view_before") and not st.session_state.get(VIEW):
        pin_view(holder, [])


def _show(runs: Sequence[RunConfig]) -> None:
    """Pin the runs this view asks for (cached or about to be trained), so no cap pass evicts them while shown."""
    view = st.session_state.setdefault(VIEW, {})
    new = {run_key(run): run for run in runs if run_key(run) not in view}
    view.update(new)
    holder = _holder()
    if new and holder:
        pin_view(holder, list(view.values()))


def unverified_notice() -> str | None:
    """What Home says when stored runs are not signed with this server's ATTNCORE_CACHE_KEY (kept, not served)."""
    n, size = unverified_runs()
    if not n:
        return None
    return (
        f"**{n:,} stored run{'s are' if n != 1 else ' is'} not signed with this server's ATTNCORE_CACHE_KEY** "
        f"({size / 2**20:,.1f} MB): the key changed, or was set on a store sealed without one. They are kept but "
        "not served, nor counted here. On the server, `python -m attncore cache sign` re-seals them under the "
        "current key (only if they are your own runs); `python -m attncore cache check --repair "
        "--drop-unverified` deletes them."
    )


def cached(run: RunConfig) -> RunRecord | None:
    """The stored record, or None when the run is not stored; never computes in the server thread.

    A run evicted between is_cached and the read is None too: the page then offers to train it, which
    happens in a worker process under a slot.
    """
    _show([run])
    if view_memo_on():
        return _remembered(run)
    if not is_cached(run):
        return None
    try:
        return _load(run_key(run))
    except _Missing:
        return None


def record_bytes(record: RunRecord) -> int:
    """About the bytes a record holds in memory: its arrays."""
    arrays = [record.loss_history, record.probe_tokens, record.probe_attention, *record.params.values()]
    return sum(a.nbytes for a in arrays) + 4096


def _remembered(run: RunConfig) -> RunRecord | None:
    """The stored record from the server's memo while its entry is unchanged on disk (lab.store.entry_stamp), else
    read and checked from the store (its digests, as is_cached does) and kept: a view of 128 stored runs stats 256
    files, instead of reading and hashing them twice, and a rewritten, replaced or evicted entry is read again or
    found gone."""
    stamp = entry_stamp(run, touch=True)  # used now, as a read from the store would mark it
    if stamp is None:
        return None
    key, memo = (str(cache_dir()), run_key(run)), view_memo("records")  # tests open several stores in a process
    found = memo.get(key)
    if found is not MISSING and found[0] == stamp:
        return found[1]
    record = stored_run(run) if is_cached(run) else None
    if record is not None:
        memo.put(key, (stamp, record), record_bytes(record))
    return record


def cached_many(runs: Sequence[RunConfig]) -> tuple[list[RunRecord], list[RunConfig]]:
    """(records of the cached runs, the runs still missing), both in input order."""
    _show(runs)
    records, missing = [], []
    for run in runs:
        record = cached(run)
        if record is None:
            missing.append(run)
        else:
            records.append(record)
    return records, missing


def cached_summaries(runs: Sequence[RunConfig]) -> tuple[list[dict], list[RunConfig]]:
    """(summaries of the cached runs, the runs still missing), from lab.store's JSON sidecars: no unpickling."""
    _show(runs)
    stored = {json.dumps(s["config"], sort_keys=True): s for s in list_cached()}
    found = [(run, stored.get(run_key(run))) for run in runs]
    return [s for _, s in found if s is not None], [run for run, s in found if s is None]


def sweep(runs: Sequence[RunConfig], what: str, cached_before: int = 0) -> list[RunRecord] | None:
    """Every run's record (input order), the missing ones trained on the worker pool with live progress and
    Cancel (ui.sweeps); None if refused, cancelled or failed. `cached_before`: runs of the same view the caller
    already found in the store, counted apart in the progress line."""
    lim = limits()
    records, missing = cached_many(runs)
    if len(missing) > lim.max_sweep_runs:
        st.error(
            f"{len(missing)} runs is more than this server allows at once ({lim.max_sweep_runs}).",
            icon=":material/block:",
        )
        return None
    if refused := sweeps.budget_error(missing):
        st.error(refused, icon=":material/block:")
        return None
    view = _view(runs)  # the page may pass only its missing runs: the rest of what it shows stays too
    if missing and not fits_the_store(view):
        return None
    if missing:
        trained = sweeps.sweep_live(missing, what, cached=cached_before + len(records), keep=view)
        if trained is None:
            return None
        bundles.enforce_store_cap(keep=view)  # the runs just trained stay for the view that asked for them
    return [cached(run) or _trained(run, trained) for run in runs] if missing else records


def _view(runs: Sequence[RunConfig]) -> list[RunConfig]:
    """`runs` and every other run this script run's view has asked for (begin_view, _show)."""
    return list(dict.fromkeys([*st.session_state.get(VIEW, {}).values(), *runs]))


def fits_the_store(runs: Sequence[RunConfig]) -> bool:
    """Whether the view's runs, once all stored, fit under the store's cap (so none of them must be evicted to
    keep it); else an error saying so, and False: the view is refused before anything trains."""
    lim = limits()
    need = view_bytes(runs)
    if need <= lim.store_bytes():
        return True
    n = len(set(runs))
    st.error(
        f"This view's {n:,} run{'s' * (n != 1)} would take about {need / 2**20:,.1f} MB once stored, more than this "
        f"server's run store may hold ({lim.max_store_mb:,g} MB, max_store_mb), so they could not all stay stored. "
        "Fewer seeds, steps or a smaller model fit; the operator can raise max_store_mb.",
        icon=":material/block:",
    )
    return False


def _trained(run: RunConfig, trained: list[RunRecord]) -> RunRecord:
    """The record of `run` among those just trained (a store too full to keep them still shows them)."""
    return next(r for r in trained if r.config == run)


def _ablation_key(record: RunRecord, heads) -> tuple[str, tuple[tuple[int, int], ...]]:
    return run_key(record.config), tuple(sorted(heads))


def _evaluate_ablated(record: RunRecord, key) -> EvalResult:
    return evaluate_ablated(record.params, record.config, list(key[1]))


def head_ablation(record: RunRecord, heads: Sequence[tuple[int, int]]) -> EvalResult | None:
    """Evaluation with the given (layer, head) outputs zeroed: memoised, else computed under a slot.

    None (with the reason shown) when the server stayed busy.
    """
    if not heads:
        return record.eval
    key = _ablation_key(record, heads)
    try:
        return metered("ablation", key, lambda: _evaluate_ablated(record, key), "this head ablation")
    except BusyError as e:
        st.warning(str(e), icon=":material/hourglass_top:")
        return None


def single_head_ablations(record: RunRecord, heads: Sequence[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """Per-sequence accuracy with each head zeroed alone, for the first `max_ablation_heads` heads.

    Memoised per head; the missing ones are evaluated under one slot, with a progress bar. Empty when
    the server stayed busy (the reason is shown).
    """
    keys = {h: _ablation_key(record, [h]) for h in heads[: limits().max_ablation_heads]}
    found = {h: memo("ablation").get(k) for h, k in keys.items()}
    missing = [h for h in keys if not isinstance(found[h], EvalResult)]
    if missing:
        bar = st.progress(0.0, text=f"Zeroing each head alone: 0 of {len(missing)}")
        try:
            with training_slot("zeroing each head"):
                for i, h in enumerate(missing):
                    found[h] = _evaluate_ablated(record, keys[h])
                    memo("ablation").put(keys[h], found[h])
                    bar.progress((i + 1) / len(missing), text=f"Zeroing each head alone: {i + 1} of {len(missing)}")
        except BusyError as e:
            st.warning(str(e), icon=":material/hourglass_top:")
            return {}
        finally:
            bar.empty()
    return {h: e.sequence_accuracy for h, e in found.items()}


def length_results(
    records: Sequence[RunRecord], lengths: Sequence[int], randomized: bool = False
) -> list[list[LengthResult]] | None:
    """Each record evaluated at each test length (attncore.evaluate.evaluate_lengths), in input order.

    With randomized, runs trained on randomized positions are evaluated on them (evaluate_lengths).
    Memoised server-wide per (run, length, randomized); the missing ones are evaluated under one slot, with a progress
    bar. None when the server stayed busy (the reason is shown).
    """
    # randomized: evaluated on randomized positions (runs trained on them; others at 0..n-1)
    flags = [randomized and r.config.train.randomized_positions is not None for r in records]
    keys = [
        [(run_key(r.config), length) + (("randomized",) if f else ()) for length in lengths]
        for r, f in zip(records, flags, strict=True)
    ]
    found = {k: memo("length").get(k) for row in keys for k in row}
    for row, f in zip(keys, flags, strict=True):  # then what lab.length_store keeps beside the store (lessons warm)
        if not all(isinstance(found[k], LengthResult) for k in row):
            kept = length_store.read(row[0][0], f)
            for k in row:
                if k[1] in kept and not isinstance(found[k], LengthResult):
                    found[k] = kept[k[1]]
                    memo("length").put(k, found[k])
    missing = [
        (r, k) for r, row in zip(records, keys, strict=True) for k in row if not isinstance(found[k], LengthResult)
    ]
    if missing:
        bar = st.progress(0.0, text=f"Evaluating at other lengths: 0 of {len(missing)}")
        try:
            with training_slot("evaluating at other lengths"):
                for i, (record, key) in enumerate(missing):
                    randomized_key = len(key) > 2
                    (found[key],) = evaluate_lengths(record.params, record.config, [key[1]], randomized=randomized_key)
                    memo("length").put(key, found[key])
                    length_store.write(key[0], {key[1]: found[key]}, randomized_key)
                    bar.progress((i + 1) / len(missing), text=f"Evaluating at other lengths: {i + 1} of {len(missing)}")
        except BusyError as e:
            st.warning(str(e), icon=":material/hourglass_top:")
            return None
        finally:
            bar.empty()
    return [[found[k] for k in row] for row in keys]


def require(run: RunConfig, describe: str) -> RunRecord:
    """The run's record; if it was never trained, offer a Train button (live progress) and stop the page.

    First says where this visitor's last training stopped, if a Cancel or a changed setting stopped it.
    """
    live.report_cancelled(run)
    record = cached(run)
    if record is not None:
        return record
    if refused := sweeps.budget_error([run]):
        st.error(refused, icon=":material/block:")
        st.stop()
    if not fits_the_store([run]):
        st.stop()
    slot = st.empty()
    with slot.container():
        st.info(
            f"**Not trained yet:** {describe}. Training runs on this server, then lands in the cache for every "
            f"visitor. {live.expectation(run)}",
            icon=":material/science:",
        )
        clicked = st.button("Train this configuration", type="primary", key="train")
    if not clicked:
        st.stop()
    slot.empty()
    record = live.train_live(run)
    if record is None:
        st.stop()
    bundles.enforce_store_cap(keep=[run])
    return record
