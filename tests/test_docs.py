"""docs/ and the Science page: every link a page or a docs file makes lands on a section that exists, and no
page or README sentence cites a file the repository does not ship."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_helpers import page

from attncore.mechanisms.demos import scaling_statistics
from ui import docs, science
from ui.charts.scaling import scaling_table

ROOT = Path(__file__).resolve().parents[1]
PAGE_LINK = re.compile(r"""docs\.(?:link|href)\(\s*["']([^"']+)["']""")
MD_LINK = re.compile(r"\]\(([^)#\s]+\.md)?(#[^)\s]+)?\)")


def test_slug_is_githubs_anchor():
    assert docs.slug("Why divide by √d_k") == "why-divide-by-d_k"
    assert docs.slug("Tasks, training and evaluation") == "tasks-training-and-evaluation"
    assert docs.slug("The key-value cache") == "the-key-value-cache"


def test_every_page_link_lands_on_a_docs_section():
    anchors = docs.all_anchors()
    linked = {a for p in (ROOT / "app_pages").glob("*.py") for a in PAGE_LINK.findall(p.read_text())}
    assert len(linked) >= 9  # the pages that rely on the science link it
    assert linked <= anchors, sorted(linked - anchors)


@pytest.mark.parametrize("name", docs.FILES)
def test_links_between_docs_files_resolve(name):
    for target, anchor in MD_LINK.findall(docs.read(name)):
        if target:
            assert (docs.DOCS_DIR / target).is_file(), target
        if anchor:
            assert anchor[1:] in docs.anchors(docs.read(target or name)), (name, target, anchor)


def test_headings_are_unique_across_the_science_page():
    every = [a for name in docs.FILES for a in docs.anchors(docs.read(name))]
    assert len(every) == len(set(every))


def test_no_page_readme_or_docs_file_cites_the_design_reference_or_an_issue_number():
    """Neither the design reference nor the project's issues are shipped: pages name "the article" and link docs/,
    never a section of the reference or an issue by number (another project's is cited as 'vLLM #N')."""
    shown = [*(ROOT / "app_pages").glob("*.py"), ROOT / "README.md", *docs.DOCS_DIR.glob("*.md")]
    shown += [ROOT / "serving" / "presets.py", ROOT / "benchmarks" / "attention_cost.py"]
    shown += [ROOT / "benchmarks" / "kv_cache.py", ROOT / "serving" / "kvbench.py"]
    assert [p.name for p in shown if "SPEC" in p.read_text()] == []
    assert [p.name for p in shown if re.search(r"[Ii]ssues? [0-9]", p.read_text())] == []


@pytest.mark.slow
def test_science_page_renders_every_file_with_anchors_and_in_page_links():
    at = page("science")
    assert not at.exception and at.title[0].value == "Science"
    headings = [h for h in at.get("heading")] + list(at.header) + list(at.subheader)
    anchors = {h.proto.anchor for h in headings}
    assert docs.all_anchors() <= anchors
    body = "\n".join(m.value for m in at.markdown)
    assert "Attention, Derived in Full" in body
    assert ".md)" not in body and "](#the-model)" in body  # links between files point within the page


@pytest.mark.slow
def test_science_page_renders_formulas_as_math_and_redraws_the_sqrt_dk_table_from_the_lab():
    at = page("science")
    body = "\n".join(m.value for m in at.markdown)
    assert "$$Y = \\operatorname{softmax}" in body and "biases: Q = X W_Q" not in body  # math, not plain text
    table = at.dataframe[0].value  # the lab's own √d_k table, after the article's
    rows = scaling_statistics(*science.SCALING_KEY)
    assert table.equals(scaling_table(rows))
    assert "numerics version 3" not in "\n".join(docs.read(name) for name in docs.FILES)


# --- the README a newcomer reads, and the docs pages behind it ---------------------------------------------

README = ROOT / "README.md"
LOCAL_LINK = re.compile(r"\]\((?!https?://)([^)#\s]+)(#[^)\s]+)?\)")
N_PAGES = len([p for p in (ROOT / "app_pages").glob("*.py") if p.name != "__init__.py"])


def shipped_text() -> dict[str, str]:
    """The README and every docs file, by name."""
    return {"README.md": README.read_text(encoding="utf-8")} | {
        f"docs/{p.name}": p.read_text(encoding="utf-8") for p in sorted(docs.DOCS_DIR.glob("*.md"))
    }


def test_every_docs_file_is_on_the_science_page_and_linked_from_both_indexes():
    on_disk = {p.name for p in docs.DOCS_DIR.glob("*.md")}
    assert set(docs.FILES) == on_disk  # a new docs file is shown, not forgotten
    readme_links = {t for t, _ in LOCAL_LINK.findall(README.read_text())}
    index_links = {t for t, _ in LOCAL_LINK.findall(docs.read("README.md"))}
    assert {f"docs/{name}" for name in on_disk} <= readme_links, sorted(on_disk - {t[5:] for t in readme_links})
    assert on_disk - {"README.md"} <= index_links, sorted(on_disk - index_links - {"README.md"})


def test_the_readmes_links_land_on_files_and_sections_that_exist():
    for target, anchor in LOCAL_LINK.findall(README.read_text()):
        path = ROOT / target
        assert path.exists(), target
        if anchor and target.endswith(".md"):
            assert anchor[1:] in docs.anchors(path.read_text(encoding="utf-8")), (target, anchor)


def test_the_readme_tours_every_page_and_every_page_count_agrees_with_app_pages():
    from ui.nav import PAGES

    text = README.read_text()
    assert N_PAGES == len(PAGES)
    table = text[text.index("| section | page |") :].split("\n\n")[0].splitlines()[2:]
    assert [line.split("|")[2].strip() for line in table] == [p.title for p in PAGES]
    for name, body in shipped_text().items():
        for n in re.findall(r"\b(\d+) pages\b", body):
            assert int(n) == N_PAGES, f"{name} says {n} pages; app_pages/ has {N_PAGES}"


def test_the_readme_opens_with_the_two_commands_and_the_torch_cpu_build_pinned_in_requirements_dev():
    text = README.read_text()
    pin = re.search(r"^torch==([\w.]+)$", (ROOT / "requirements-dev.txt").read_text(), re.M).group(1)
    top = text[: text.index("\n## ")]
    assert "pip install -r requirements.txt && streamlit run dashboard.py" in top
    assert f"pip install torch=={pin} && pip install -r requirements-dev.txt" in top  # torch first, pinned
    assert "CPU build" in top and "torch==" + pin + ' --index-url "$' in top  # the CPU build as a command
    assert not re.search(r"://(?!localhost)|\b[\w-]+\.(org|com|io|net|dev)\b", top)  # no package host is named
    assert len(re.findall(r"\S+", top)) <= 200  # the first screen: what it is, the commands, the fast selection
    assert 'python -m pytest -m "not slow and not browser"' in top
    assert "pip install -r requirements-dev.txt && python -m pytest" in top
    assert "second terminal" in top.lower() or "terminal 2" in top.lower()  # streamlit run keeps the first one
    assert "-r requirements-dev.txt && python -m pytest" in (ROOT / ".ci" / "run").read_text()  # CI runs it


def test_nothing_shipped_types_a_test_count_or_a_suite_time_that_goes_stale():
    stale = re.compile(r"\d[\d,]* (passed|tests? (passed|in))|\d+ min \d+ s", re.I)
    assert {name: stale.findall(body) for name, body in shipped_text().items() if stale.search(body)} == {}


def test_every_benchmark_script_is_named_by_the_readme_and_every_named_script_exists():
    text = README.read_text()
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    named = set(re.findall(r"`(?:python benchmarks/)?(\w+\.py)`", text)) | set(
        re.findall(r"benchmarks/(\w+\.py)", text)
    )
    assert scripts <= named, sorted(scripts - named)
    for name, body in shipped_text().items():
        for script in re.findall(r"benchmarks/(\w+\.py)", body):
            assert (ROOT / "benchmarks" / script).is_file(), (name, script)


def test_docs_rendered_on_the_science_page_hold_no_image_it_could_not_show():
    """st.markdown cannot load a relative image path, so the screenshots stay in the README."""
    assert [name for name in docs.FILES if re.search(r"!\[[^\]]*\]\(", docs.read(name))] == []


def test_a_heading_inside_a_code_block_is_not_a_section():
    text = "# Title\n\n```bash\n# a shell comment\npython x.py\n```\n\n## After\nbody"
    assert docs.anchors(text) == ["title", "after"]
    assert [title for _, title, _ in docs.sections(text)] == ["Title", "After"]
    assert "# a shell comment" in docs.sections(text)[0][2]


def test_the_kernel_family_is_tied_to_the_instruction_set_and_the_environment_not_the_vendor():
    """An AMD EPYC runs SkylakeX kernels where it has AVX-512; Haswell kernels there were forced."""
    for name, body in shipped_text().items():
        for sentence in re.split(r"(?<=[.;])\s+", " ".join(body.split())):
            if "Haswell" in sentence and "EPYC" in sentence:
                assert "OPENBLAS_CORETYPE" in sentence, (name, sentence)


@pytest.mark.parametrize(
    "claim",
    [
        "2L + 1 trained rows",  # only 2L rows are trained
        "fixed distance back (L + 1)",  # copy reads L back
        "show nothing",  # scaling and LN: no difference at 2 blocks and d_k = 8, not "nothing"
        "change nothing",
        "0.36 and\n0.19",  # every-position figures once quoted "at the query"
        "0.36 and 0.19",
        "all 15 pages",
    ],
)
def test_no_page_or_docs_file_makes_a_claim_the_runs_do_not_support(claim):
    shown = shipped_text() | {p.name: p.read_text() for p in (ROOT / "app_pages").glob("*.py")}
    assert [name for name, body in shown.items() if claim in body] == []


def test_the_training_docs_say_how_each_range_mode_weights_the_lengths():
    text = " ".join(docs.read("training.md").split())
    assert "long sequences dominate" in text and "each length counts equally" in text


def test_regimes_sources_link_a_section_that_says_what_the_papers_found():
    """The Regimes page names each experiment's papers and links the docs section that reports them."""
    from ui import regimes_view

    anchors = docs.all_anchors()
    for experiment, (papers, section) in regimes_view.SOURCES.items():
        assert section in anchors, (experiment, section)
        body = next(b for _, t, b in docs.sections(docs.read("regimes.md")) if docs.slug(t) == section)
        assert papers.split(" et al.")[0] in body, (experiment, papers)


def test_length_view_links_the_section_that_says_what_the_papers_found():
    from ui import length_view

    assert length_view.PAPERS_SECTION in docs.all_anchors()
    body = next(
        b for _, t, b in docs.sections(docs.read("experiments.md")) if docs.slug(t) == length_view.PAPERS_SECTION
    )
    assert "Kazemnejad et al. 2023" in body and "Ruoss et al. 2023" in body
