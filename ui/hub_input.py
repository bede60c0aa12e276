"""A model by its Hub id on the calculator pages: the id box (in the link; its syntax checked before any request),
the fetch through serving.hub (the config.json and the safetensors headers, never the weights, each read bounded),
metered as any visitor's work: offered only where the operator allows it (hub_fetch: off in hosted mode unless
set), one memo per id and revision for the whole server, at most CONCURRENT fetches at once, and in hosted mode a
rate limit per visitor (ui.visitors: an address over all its tabs) and for the server (lab.jobs.limits:
max_hub_fetches_session, max_hub_fetches_server, an hour: a visitor takes at most that share of the server's)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attncore import ConfigError
from lab.jobs.memo import MISSING, per_process, shared
from lab.jobs.rate import RateLimit
from lab.limits import env_var
from serving import hub
from ui.limits import headless, limits
from ui.params import url_text
from ui.plain import plain
from ui.visitors import visitor

CONCURRENT = 2  # fetches at once on this server: each holds a thread and up to serving.hub.FETCH_BYTES of memory

OFF = (f"This server does not fetch models from the Hub (a hosted server's default; its operator turns it on with "
       f"{env_var('hub_fetch')}=1): upload the model's config.json instead.")  # fmt: skip
HELP = ("org/name, or org/name@revision (a branch, tag or commit). Its config.json and its safetensors headers are "
        "fetched, never its weights; a gated model needs HF_TOKEN on the server.")  # fmt: skip


@per_process
def _rate() -> RateLimit:
    return RateLimit()


@per_process
def _running() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(CONCURRENT)


def _check(text: str) -> None:
    if text:
        hub.parse_model_id(text)


def fetch(model_id: hub.ModelId) -> hub.HubModel:
    """The Hub's answer for an id: from the server's memo, else fetched, once the rate limits allow it."""
    key = (str(model_id), hub.endpoint())
    found = shared("hub_model").get(key)
    if found is not MISSING:
        return found
    lim, ctx = limits(), get_script_run_ctx()
    who = visitor(ctx.session_id if ctx else None)
    refused = _rate().take(who, lim.max_hub_fetches_session, lim.max_hub_fetches_server)
    if refused:
        raise hub.HubError(f"{model_id} was not fetched: {refused}; {hub.UPLOAD}")
    running = _running()
    if not running.acquire(timeout=hub.DEADLINE_S):
        raise hub.HubError(f"{model_id} was not fetched: the server was busy with {CONCURRENT} other fetches for "
                           f"{hub.DEADLINE_S:g} s; try again, or {hub.UPLOAD}")  # fmt: skip
    try:
        found = hub.fetch_model(model_id)
    finally:
        running.release()
    shared("hub_model").put(key, found)
    return found


def hub_row(prefix: str, load: Callable[[hub.HubModel], None], fail: Callable[[str], None]) -> None:
    """The id box; an id not yet fetched in this session (typed, or from a link) is fetched once and loaded."""
    if not limits().hub_allowed(headless()):
        st.caption(plain(OFF))
        return
    text = url_text("Or a Hub id", f"{prefix}hub", "", check=_check, help=HELP,
                    placeholder="meta-llama/Llama-3.1-8B")  # fmt: skip
    tried = st.session_state.get(f"{prefix}hub_tried")
    if not text or text == tried:
        return
    st.session_state[f"{prefix}hub_tried"] = text
    try:
        model_id = hub.parse_model_id(text)
        with st.spinner(f"Fetching the config.json of {model_id}..."):
            found = fetch(model_id)
    except (ConfigError, hub.HubError) as e:
        fail(f"{text}: {e}" if isinstance(e, ConfigError) else str(e))
        return
    load(found)
