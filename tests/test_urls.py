"""Hostile links and typed text: every registered page, every URL-bound key, never a traceback or live markdown.

Covering design (about 70 script runs, not keys x payloads x pages). Each page is opened once with all twelve
sidebar keys hostile at once: even pages give each key a bad value of its kind (rotated by the page's index),
odd pages a markdown payload (link, image, HTML, directives/LaTeX/autolinks, rotated), so every sidebar key
meets six bad values and all four payloads across the pages. Each page is opened twice more with every one of
its own keys hostile at once: round 0 bad values of each kind, round 1 a markdown payload for every key. The
keys come from the widgets a clean run of the page draws (their `query_param_key`), so a new page or widget is
covered without editing this file; keys a page draws only in some state (KV cache's custom preset and 'other'
GPU) are revealed by REVEAL. Each run must: raise nothing, render the page (its title), show exactly one
notice per hostile key naming it, and put no payload into any markdown where it could become live. Typed text
(the three free-text inputs) gets all four payloads each.
"""

from __future__ import annotations

import re

import pytest
from apptest_helpers import shown, temporary_store, texts
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attncore import make_run
from ui.nav import PAGES
from ui.sidebar import DEFAULTS, TASK_KEYS

pytestmark = pytest.mark.slow  # AppTests: every page opened with hostile URLs

DASHBOARD = "../dashboard.py"
STEPS = 30  # the sidebar's valid baseline: a short run the store fixture trains once
VALID = {"steps": str(STEPS)}
# states that show further widgets, each covered by a markdown round of its own
REVEAL = {
    "kv-cache": [
        {"kv_preset": "custom", "kv_gpu": "other"},
        {"kv_mode": "vllm"},
        {"kv_preset": "custom", "kv_mode": "vllm", "kv_e_gpu": "other"},
        {"kv_preset": "config.json", "kv_wquant": "awq"},  # a model read from a file: its fields, a quantisation's
    ],
    "parameters": [{"par_preset": "config.json", "par_wquant": "gptq"}],
}

LINK = "[Session expired - log in again](https://evil.example/login)"
IMAGE = "![p](http://127.0.0.1:9/x.png)"
HTML = "<img src=x onerror=alert(1)>"
DIRECTIVES = ":red[pwned] :material/skull: $x^2$ www.evil.example admin@evil.example"
MARKDOWN = [LINK, IMAGE, HTML, DIRECTIVES]
# micromark-level syntax (an escaped character starts none of it), and GitHub's autolinks, found after parsing
SYNTAX = ["](https://evil", "](http://127", "<img", ":red[pwned", ":material/skull", "$x^2$"]
AUTOLINK = re.compile(r"(https?://|www(?=\.))[-.\w]+|[-.\w+]+@[-\w]+(\.[-\w]+)+", re.IGNORECASE | re.ASCII)

NUMBERS = ["inf", "-inf", "nan", "1e309", "99999999999999999999", "abc", "", "1,5", "0x10", "OUT_OF_RANGE"]
BAD = {  # every one invalid for its kind of widget; MARKDOWN is invalid for every kind too
    "number": NUMBERS,
    "choice": ["no-such-option", "", "1e309"],
    "multi": [["no-such-option"], "nan,inf", ["4", "no-such-option"]],
    "toggle": ["maybe", "", "2"],
    "text": ["x" * 201],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A temporary run store holding the sidebar's default run at 30 steps, so Lab pages draw everything."""
    with temporary_store(tmp_path_factory, [make_run(steps=STEPS)]):
        yield


def open_page(spec, query: dict) -> AppTest:
    """The dashboard opened at this page's URL with these query parameters, as a browser's first request.

    AppTest's public switch_page needs a finished run first, which would bind the sidebar on Home; a first
    request for /<url_path> runs that page at once, and st.Page identifies a page by the hash of its url_path.
    """
    at = AppTest.from_file(DASHBOARD, default_timeout=120)
    at.query_params.update(query)
    at._page_hash = calc_hash(spec.url_path) if spec.url_path else ""
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def bound_widgets(at: AppTest) -> dict[str, tuple[str, object]]:
    """query key -> (kind, proto) for every widget on the page bound to the URL."""
    kinds = {"number_input": "number", "selectbox": "choice", "radio": "choice", "multiselect": "multi"}
    kinds |= {"text_input": "text", "toggle": "toggle"}
    found = {}
    for element_type, kind in kinds.items():
        for w in at.get(element_type):
            if w.proto.query_param_key:
                found[w.proto.query_param_key] = (kind, w.proto)
    return found


def payload(kind: str, proto, i: int, markdown: bool):
    """The i-th bad value for this kind of widget (rotating), or the i-th markdown payload."""
    value = MARKDOWN[i % len(MARKDOWN)] if markdown else BAD[kind][i % len(BAD[kind])]
    return str(proto.max + 1) if value == "OUT_OF_RANGE" else value


def noticed(at: AppTest) -> list[str]:
    """The query keys named by the page's URL notices (one entry per notice)."""
    return [m.group(1) for w in at.warning if (m := re.match(r"URL parameter (\w+)=", shown(w.value)))]


def advanced(at: AppTest):
    """The sidebar's Advanced expander (its proto: .expanded)."""
    return next(e for e in at.sidebar.expander if e.label == "Advanced").proto


def markdown_bodies(at: AppTest) -> list[str]:
    """Every string Streamlit renders as markdown on this page (not widget values, which are plain)."""
    bodies = [e.value for kind in ("markdown", "caption", "title", "header", "subheader") for e in at.get(kind)]
    bodies += [e.value for kind in ("error", "warning", "info", "success") for e in at.get(kind)]
    bodies += [m.label for m in at.metric] + [e.label for e in at.expander]
    for kind in ("number_input", "selectbox", "radio", "multiselect", "text_input", "toggle", "button"):
        bodies += [w.proto.label for w in at.get(kind)] + [w.proto.help for w in at.get(kind)]
    return bodies


def assert_no_live_markdown(at: AppTest) -> None:
    """No payload can become live markdown: once escaped characters are dropped none of its syntax is left,
    and the text as shown holds no bare URL or address that GitHub markdown would turn into a link."""
    for body in markdown_bodies(at):
        unescaped = re.sub(r"\\[!-/:-@\[-`{-~]", "", body)
        assert not [m for m in SYNTAX if m in unescaped], body
        assert not [m.group() for m in AUTOLINK.finditer(shown(body)) if re.search("evil|127", m.group())], body


# --- discovery: a clean run of every page ------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean(store):
    """url_path -> (title, every bound widget at the baseline, the page's own keys there, and with REVEAL)."""
    out = {}
    for spec in PAGES:
        at = open_page(spec, VALID)
        assert at.title and not noticed(at), spec.url_path
        assert not advanced(at).expanded
        widgets = bound_widgets(at)
        own = {k: v for k, v in widgets.items() if k not in DEFAULTS}
        revealed = [own]
        if spec.url_path in REVEAL:
            revealed = []
            for state in REVEAL[spec.url_path]:
                shown_more = bound_widgets(open_page(spec, VALID | state))
                revealed.append({k: v for k, v in shown_more.items() if k not in DEFAULTS and k not in state})
        out[spec.url_path] = at.title[0].value, widgets, own, revealed
    return out


def test_every_page_binds_every_sidebar_key(clean):
    """Every sidebar key of the task a page opens with (copy: all but the induction task's T, V and k_min)."""
    assert all(set(widgets) >= set(DEFAULTS) - set(TASK_KEYS) for _, widgets, _, _ in clean.values())


# --- hostile links ---------------------------------------------------------------------------------------


def check_hostile(spec, title: str, hostile: dict, extra: dict) -> None:
    at = open_page(spec, extra | hostile)
    assert at.title and at.title[0].value == title
    assert sorted(noticed(at)) == sorted(hostile), (spec.url_path, hostile, [shown(w.value) for w in at.warning])
    assert_no_live_markdown(at)


@pytest.mark.parametrize("index", range(len(PAGES)), ids=[p.url_path or "home" for p in PAGES])
def test_hostile_sidebar_keys_on_every_page(clean, index):
    """All twelve sidebar keys bad at once: twelve notices at the top of the page, the defaults in use."""
    spec = PAGES[index]
    title, widgets, _, _ = clean[spec.url_path]
    widgets = {k: v for k, v in widgets.items() if k in DEFAULTS}
    i, markdown = index // 2, index % 2 == 1  # odd pages: markdown, so each key meets all four payloads
    hostile = {k: payload(kind, proto, i + j, markdown) for j, (k, (kind, proto)) in enumerate(sorted(widgets.items()))}
    check_hostile(spec, title, hostile, {})


PAGE_ROUNDS = [(p, r) for p in PAGES for r in range(1 + len(REVEAL.get(p.url_path, [{}])))]


@pytest.mark.parametrize("spec, round_", PAGE_ROUNDS, ids=[f"{p.url_path or 'home'}-{r}" for p, r in PAGE_ROUNDS])
def test_hostile_page_keys(clean, spec, round_):
    """Every key of the page's own bad at once (rounds 1.. in each state of REVEAL, with the keys it shows too):
    one notice each."""
    title, _, base, revealed = clean[spec.url_path]
    states = REVEAL.get(spec.url_path, [{}])
    widgets, extra = (base, VALID) if round_ == 0 else (revealed[round_ - 1], VALID | states[round_ - 1])
    if not widgets:
        pytest.skip("no URL-bound keys of its own")
    i = PAGES.index(spec)  # round 0: bad values of each kind, later rounds: a markdown payload for every key
    hostile = {
        k: payload(kind, proto, i + j, round_ >= 1) for j, (k, (kind, proto)) in enumerate(sorted(widgets.items()))
    }
    check_hostile(spec, title, hostile, extra)


def test_other_spellings_are_accepted_without_a_notice(store):
    query = {"pos": "rope", "norm": "post", "task": "SORT", "scaling": "0", "lr": "3e-2", "L": "4.0", "d": "1.6e1"}
    at = open_page(next(p for p in PAGES if p.url_path == "train"), VALID | query | {"heads": "2"})
    assert not noticed(at) and not at.error
    assert (at.selectbox(key="pos").value, at.radio(key="norm").value, at.radio(key="task").value) == (
        "rope",
        "post",
        "sort",
    )
    assert (at.toggle(key="scaling").value, at.selectbox(key="lr").value) == (False, 0.03)
    assert (at.number_input(key="L").value, at.number_input(key="d").value) == (4, 16)
    assert at.query_params["pos"] == "RoPE" and at.query_params["norm"] == "post-LN"  # rewritten as the widget spells
    spec = next(p for p in PAGES if p.url_path == "results")
    at = open_page(spec, VALID | {"res_L": "4,6", "res_tasks": ["copy", "copy"]})
    assert not noticed(at)
    assert at.multiselect(key="res_L").value == [4, 6] and at.multiselect(key="res_tasks").value == ["copy"]
    spec = next(p for p in PAGES if p.url_path == "heads-and-position")
    at = open_page(spec, {"hp_enc": "rope"})
    assert not noticed(at) and at.radio(key="hp_enc").value == "rope"


def test_a_notice_is_plain_text_and_names_the_range(store):
    at = open_page(PAGES[0], {"steps": "inf", "task": LINK})
    notices = {re.match(r"URL parameter (\w+)=", shown(w.value)).group(1): shown(w.value) for w in at.warning}
    assert "ignored. Training steps: a whole number from 10 to 3,000. Using the default, 1,500." in notices["steps"]
    registered = "copy, sort, reverse, induction, Bigram-Backcopy, modular"  # each task's label (Task.label)
    assert f"Task: one of {registered}. Using the default, copy." in notices["task"]
    assert at.number_input(key="steps").value == 1500 and "steps" not in at.query_params
    assert_no_live_markdown(at)
    at.number_input(key="seed").set_value(3).run()  # said once: the next run has nothing to say
    assert not noticed(at)


# --- typed text ------------------------------------------------------------------------------------------

FREE_TEXT = [("cost", "cost_T"), ("masks", "mask_lengths"), ("attention", "seq")]


@pytest.mark.parametrize("url_path, key", FREE_TEXT)
def test_typed_markdown_is_shown_literally(store, url_path, key):
    at = open_page(next(p for p in PAGES if p.url_path == url_path), VALID)
    for text in MARKDOWN:
        at.text_input(key=key).set_value(text).run()
        assert not at.exception
        assert "Not a valid input" in texts(at.error), text
        assert_no_live_markdown(at)


# --- a field named by an error is in view ----------------------------------------------------------------


def test_an_error_in_an_advanced_field_unfolds_advanced(store):
    train = next(p for p in PAGES if p.url_path == "train")
    at = open_page(train, VALID | {"heads": "5"})
    assert "Heads: must divide" in texts(at.error) and advanced(at).expanded
    at = open_page(train, VALID)
    assert not advanced(at).expanded
    at.number_input(key="d").set_value(30).run()  # typed: heads 4 no longer divides d
    assert "Heads: must divide" in texts(at.error) and advanced(at).expanded


def test_an_error_in_a_folded_parameters_field_unfolds_its_section(store):
    parameters = next(p for p in PAGES if p.url_path == "parameters")
    at = open_page(parameters, {"par_preset": "custom", "par_n_experts": "4"})  # MoE without an expert width
    section = next(e for e in at.expander if e.label.startswith("Latent attention")).proto
    assert "moe_d_ff" in texts(at.error) and section.expanded
    at = open_page(parameters, {})
    assert not next(e for e in at.expander if e.label.startswith("Latent attention")).proto.expanded


def test_plain_text_cannot_reorder_hide_or_break_lines():
    from ui.plain import plain

    assert plain("a\u202eb\u200dc\n# d") == "abc \\# d"  # no bidi override, no zero-width joiner, no heading
    assert plain("see https://x.io") == "see https\\:\u200b\\/\\/x\\.io"  # looks the same; no autolink
