"""The page registry: every page of the app, grouped into sections, and the navigation built from it.

To add a page: write app_pages/<name>.py (a thin script) and add one PageSpec line to PAGES below.
`uses_run=True` keeps the shared run configuration open in the sidebar on that page; other pages
get it folded away. Home lists every registered page with its blurb, so new pages appear there too.

The folder is app_pages/, not pages/: a folder named pages/ beside dashboard.py switches Streamlit
to its legacy automatic navigation for the first script run of a server (and for every AppTest
run), so a first visitor opening /train would get the page without dashboard.py's sidebar.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import lesson, lesson_link


@dataclass(frozen=True)
class PageSpec:
    section: str  # "Lab", "Calculators" or "Mechanisms"
    path: str  # script relative to dashboard.py
    title: str
    icon: str  # a Material Symbol, e.g. ":material/home:"
    url_path: str  # the page's URL is /<url_path> ("" for the default page)
    blurb: str  # one sentence for Home's links
    uses_run: bool = True  # reads the sidebar's run configuration


SECTIONS = ("Lab", "Calculators", "Mechanisms")
PAGES = [
    PageSpec("Lab", "app_pages/home.py", "Home", ":material/home:", "",
             "What the lab is, what is cached, the article's sweep."),
    PageSpec("Lab", "app_pages/train.py", "Train", ":material/model_training:", "train",
             "Train one configuration and watch its loss fall."),
    PageSpec("Lab", "app_pages/results.py", "Results", ":material/table_chart:", "results",
             "Accuracy by task and length over seeds."),
    PageSpec("Lab", "app_pages/ablations.py", "Ablations", ":material/compare_arrows:", "ablations",
             "Remove scaling, position or pre-LN and compare, over seeds."),
    PageSpec("Lab", "app_pages/compare.py", "Compare", ":material/stacked_line_chart:", "compare",
             "Vary any one setting over seeds: curves, accuracy, and which differences the seeds can show."),
    PageSpec("Lab", "app_pages/attention.py", "Attention", ":material/grid_on:", "attention",
             "Every head's weights, and what zeroing a head does."),
    PageSpec("Lab", "app_pages/patching.py", "Patching", ":material/swap_horiz:", "patching",
             "Change one input symbol and find which heads, positions and MLPs carry it; the logit lens."),
    PageSpec("Lab", "app_pages/explanations.py", "Explanations", ":material/psychology_alt:", "explanations",
             "Head types over training, and whether a head's map explains the output: shuffles, adversarial rows, "
             "other seeds."),
    PageSpec("Lab", "app_pages/lengths.py", "Length generalisation", ":material/straighten:", "lengths",
             "Train on a range of lengths, test beyond it: five position encodings side by side."),
    PageSpec("Lab", "app_pages/regimes.py", "Regimes", ":material/layers:", "regimes",
             "Depth, wide heads and the learning rate: where scaling and the LayerNorm's place matter, over seeds.",
             uses_run=False),
    PageSpec("Lab", "app_pages/induction.py", "Induction heads", ":material/repeat:", "induction",
             "Watch in-context learning switch on during training, and zero the heads that do it, over seeds.",
             uses_run=False),
    PageSpec("Lab", "app_pages/sinks.py", "Attention sinks", ":material/anchor:", "sinks",
             "Watch a head park its attention on the first token, and test a sliding window without it, over seeds.",
             uses_run=False),
    PageSpec("Lab", "app_pages/grokking.py", "Grokking", ":material/lightbulb:", "grokking",
             "Modular addition memorised at once, generalised much later: weight decay and the Fourier spectrum, "
             "over seeds.", uses_run=False),
    PageSpec("Lab", "app_pages/lessons.py", "Lessons", ":material/school:", "lessons",
             "Pages opened at chosen values with a teacher's note and a question; some controls hidden.",
             uses_run=False),
    PageSpec("Lab", "app_pages/science.py", "Science", ":material/menu_book:", "science",
             "The model, the tasks and each experiment explained, beside the article's figures.", uses_run=False),
    PageSpec("Calculators", "app_pages/parameters.py", "Parameters", ":material/calculate:", "parameters",
             "Parameter counts of real models and of this lab's, component by component.", uses_run=False),
    PageSpec("Calculators", "app_pages/kv_cache.py", "KV cache", ":material/memory:", "kv-cache",
             "Key-value cache memory, what fits on a GPU, and the cache's speed-up measured.", uses_run=False),
    PageSpec("Mechanisms", "app_pages/scaling.py", "Scaling", ":material/straighten:", "scaling",
             "Why the scores are divided by √d_k, measured against the theory.", uses_run=False),
    PageSpec("Mechanisms", "app_pages/masks.py", "Masks", ":material/visibility_off:", "masks",
             "The causal mask before vs after the softmax, and padding.", uses_run=False),
    PageSpec("Mechanisms", "app_pages/heads_position.py", "Heads and position", ":material/view_week:",
             "heads-and-position", "Parameters independent of h, the permutation test, position encodings drawn.",
             uses_run=False),
    PageSpec("Mechanisms", "app_pages/cost.py", "Cost", ":material/speed:", "cost",
             "Attention's time and memory against the sequence length, timed live.", uses_run=False),
    PageSpec("Mechanisms", "app_pages/gradient_check.py", "Gradient check", ":material/rule:", "gradient-check",
             "Finite differences against the hand-written backward pass.", uses_run=False),
]  # fmt: skip


CARDS_PER_ROW = 3


def _page(spec: PageSpec) -> StreamlitPage:
    return st.Page(
        spec.path, title=spec.title, icon=spec.icon, url_path=spec.url_path or None, default=not spec.url_path
    )


def page_for(asked: str) -> PageSpec | None:
    """The page a URL path names, whatever its case ('/Train', as the sidebar spells it, opens Train); None when no
    page has that path (Streamlit then says the page was not found and runs Home)."""
    key = asked.strip("/").casefold()
    return next((p for p in PAGES if p.url_path and p.url_path.casefold() == key), None) if key else None


def _match_case_insensitively() -> None:
    """A first request by URL path (no page hash yet) that names a page in another case asks for that page:
    Streamlit matches the path exactly, and would run Home for /Train."""
    manager = getattr(get_script_run_ctx(), "pages_manager", None)
    if manager is None or manager.intended_page_script_hash or not manager.intended_page_name:
        return
    found = page_for(manager.intended_page_name)
    if found is not None and found.url_path != manager.intended_page_name:
        manager.set_script_intent("", found.url_path)


def navigation() -> tuple[StreamlitPage, PageSpec]:
    """Register the pages; returns the navigation (call .run() after the sidebar) and the current page's spec."""
    _match_case_insensitively()
    grouped = {s: [_page(p) for p in PAGES if p.section == s] for s in SECTIONS}
    # expanded: every page listed; by default Streamlit folds a long menu after 10 behind "View more"
    nav = st.navigation({s: pages for s, pages in grouped.items() if pages}, expanded=True)
    current = next((p for p in PAGES if p.url_path == nav.url_path), PAGES[0])
    lesson.begin(current.url_path)  # a lesson link's note and question at the top, before the sidebar's widgets
    return nav, current


# CPython 3.11 keeps one recursion counter per interpreter for building ASTs (gh-106905): two sessions' threads
# parsing at once (Streamlit parses a page's script on its first run in a server) can raise this SystemError
AST_RACE = "AST constructor recursion depth mismatch"
COMPILE_ATTEMPTS = 3


def run(page: StreamlitPage) -> None:
    """page.run(), its script compiled first into Streamlit's script cache, again if the compile lost the race above
    (nothing of the page has run then; page.run() itself may be called only once a run). Then, with every control
    of the page known, the lesson view's refusals. "Make a lesson link" is drawn before the page, from the controls
    its last run drew."""
    ctx, path = get_script_run_ctx(), getattr(page, "_page", None)  # the script's Path, as st.Page resolved it
    if ctx is not None and isinstance(path, Path):
        for attempt in range(1, COMPILE_ATTEMPTS + 1):
            try:
                ctx.pages_manager.get_page_script_byte_code(str(path))  # cached: later runs do not parse again
                break
            except SystemError as e:
                if AST_RACE not in str(e) or attempt == COMPILE_ATTEMPTS:
                    raise
    lesson_link.draw(page.url_path)  # before the page: it may end in st.stop(), after which nothing is drawn
    lesson.page_starts()
    page.run()
    lesson.finish()  # not after st.stop(): Streamlit draws nothing more in that run


def page_links() -> None:
    """Links to every page but Home, by section, each with its blurb; the sidebar's settings travel along."""
    for section in SECTIONS:
        specs = [p for p in PAGES if p.section == section and p.url_path]
        if not specs:
            continue
        st.subheader(section)
        # three cards to a row: at four, a 1,280 px window cut "Length generalisation" to "Length generalisatic"
        cols = st.columns(min(len(specs), CARDS_PER_ROW))
        for i, spec in enumerate(specs):
            with cols[i % len(cols)].container(border=True):
                st.page_link(spec.path, label=f"**{spec.title}**", icon=spec.icon)
                st.caption(spec.blurb)
