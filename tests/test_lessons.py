"""Lesson links (ui.lesson): ?hide= and ?lock= on every page's url_* widgets, the teacher's note, question and answer
shown literally, unknown names refused; the lessons of lab.lessons each open cleanly on their page; the CLI lists
them."""

from __future__ import annotations

import json

import pytest
from apptest_helpers import TIMEOUT, shown
from streamlit.testing.v1 import AppTest

from cli.main import main
from lab import lessons
from ui import lesson, params
from ui.nav import PAGES

KINDS = ("number_input", "selectbox", "multiselect", "radio", "select_slider", "text_input", "toggle")
BY_PATH = {p.url_path: p for p in PAGES}


def open_page(url_path: str, query: dict) -> AppTest:
    """The dashboard opened on a page with these query parameters (as a link would open it)."""
    at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
    at.run()
    at.query_params.update(query)
    at.switch_page(BY_PATH[url_path].path).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def widgets(at: AppTest) -> dict:
    return {w.key: w for kind in KINDS for w in at.get(kind) if w.key}


def open_maker(at: AppTest, url_path: str) -> AppTest:
    """Open "Make a lesson link" (closed, it draws nothing inside), as a click on it does: the page runs again."""
    at.session_state[f"_lesson_maker_{url_path}"] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def url_notices(at: AppTest) -> list[str]:
    return [shown(w.value) for w in at.warning if "link_off" in str(w.icon)]


def test_lessons_are_records_over_registered_pages():
    assert len(lessons.LESSONS) >= 8
    assert len({x.page for x in lessons.LESSONS}) >= 5
    assert len({x.name for x in lessons.LESSONS}) == len(lessons.LESSONS)
    assert lessons.MAX_TEXT == lesson.MAX_TEXT == params.MAX_TEXT
    for x in lessons.LESSONS:
        assert x.page in BY_PATH, x.name
        assert x.note and x.question and x.answer, x.name
        assert all(len(t) <= lessons.MAX_TEXT for t in (x.note, x.question, x.answer)), x.name
    assert lessons.by_name("sqrt-dk").page == "scaling"
    with pytest.raises(KeyError):
        lessons.by_name("nope")


@pytest.mark.parametrize("x", lessons.LESSONS, ids=lambda x: x.name)
def test_every_lesson_opens_on_its_page(cache, x):
    every = widgets(open_page(x.page, x.params))  # the same view with every control drawn
    assert set(x.hide) | set(x.lock) <= set(every), sorted(set(x.hide) | set(x.lock) - set(every))
    at = open_page(x.page, dict(x.query()))
    assert url_notices(at) == []
    drawn = widgets(at)
    for key in x.hide:
        assert key not in drawn, key
    for key in x.lock:
        assert drawn[key].disabled, key
    banner = " ".join(shown(c.value) for c in at.caption if "A lesson view" in c.value)
    assert all(every[key].label in banner for key in (*x.hide, *x.lock))
    assert any(shown(i.value) == x.note for i in at.info)
    assert any(shown(m.value) == f"**Question:** {x.question}" for m in at.markdown)
    assert any(e.label.startswith("Answer") for e in at.expander)
    if x.hide or x.lock:
        assert any(b.label == "Show all controls" for b in at.button)


def test_hidden_widget_keeps_the_link_value_and_locked_widget_is_disabled(cache):
    at = open_page("scaling", {"scal_T": "128", "hide": "scal_T", "lock": "scal_seed"})
    drawn = widgets(at)
    assert "scal_T" not in drawn and "scal_reps" in drawn
    assert drawn["scal_seed"].disabled and not drawn["scal_reps"].disabled
    caption = " ".join(shown(c.value) for c in at.caption)
    assert "some controls are hidden (Keys T) and locked (Seed)" in caption
    # the hidden value is used: the uniform softmax's entropy over 128 keys, ln 128, not the default's ln 64
    assert any(m.value == "4.8520" for m in at.metric if m.label == "Maximum entropy ln T")


def test_show_all_controls_drops_hide_and_lock(cache):
    at = open_page("masks", {"hide": "mask_seed", "lock": "mask_T"})
    assert "mask_seed" not in widgets(at)
    next(b for b in at.button if b.label == "Show all controls").click().run()
    drawn = widgets(at)
    assert "mask_seed" in drawn and not drawn["mask_T"].disabled
    assert "hide" not in at.query_params and "lock" not in at.query_params


def test_note_is_plain_text_and_a_markdown_link_shows_literally(cache):
    note = "Read [this](http://example.com) **first** <b>now</b>"
    at = open_page("masks", {"note": note, "question": "Why *this*?", "answer": "Because `that`."})
    body = next(i.value for i in at.info if "Read" in i.value)
    assert shown(body).replace("\u200b", "") == note  # every character as typed
    assert "](" not in body.replace("\\]\\(", "") and "**first**" not in body  # no markdown left live
    assert any(shown(m.value) == "**Question:** Why *this*?" for m in at.markdown)


def test_unknown_hide_name_is_refused_naming_the_valid_ones(cache):
    at = open_page("scaling", {"hide": "scal_seed,nosuch", "lock": "alsonot"})
    notices = url_notices(at)
    assert len(notices) == 1, notices
    assert "nosuch" in notices[0] and "alsonot" in notices[0]
    assert "Valid names: scal_dk, scal_T, scal_reps, scal_seed, " in notices[0]  # the page's own, then the sidebar's
    assert "scal_seed" not in widgets(at)  # the known name still applies


def test_lesson_text_over_the_cap_is_refused(cache):
    at = open_page("masks", {"note": "x" * (lesson.MAX_TEXT + 1)})
    assert any("note=" in n and f"at most {lesson.MAX_TEXT} characters" in n for n in url_notices(at))
    assert not any("xxxx" in i.value for i in at.info)


def test_make_a_lesson_link_gives_the_url(cache):
    at = open_page("scaling", {"scal_T": "128", "lock": "scal_T"})
    assert any(e.label == "Make a lesson link" for e in at.expander)
    assert not at.text_area and not at.code  # closed: nothing drawn inside
    open_maker(at, "scaling").text_area(key="_lesson_note").input("Look at row 3").run()
    url = at.code[-1].value
    assert url.startswith("/scaling?") and "scal_T=128" in url and "lock=scal_T" in url
    assert "note=Look+at+row+3" in url


def test_page_without_lesson_parameters_shows_no_lesson_view(cache):
    at = open_page("masks", {})
    assert not any(b.label == "Show all controls" for b in at.button)
    assert not any(e.label.startswith("Answer") for e in at.expander)


def test_lessons_page_shows_every_lesson_with_its_picture_idea_and_link(cache):
    at = open_page("lessons", {})
    links = at.get("page_link")
    assert len(links) == len(lessons.LESSONS)
    titles = {f"**{x.title}** · {BY_PATH[x.page].title}" for x in lessons.LESSONS}
    assert {shown(m.value) for m in at.markdown} >= titles
    assert {shown(c.value) for c in at.caption} >= {x.idea for x in lessons.LESSONS}
    assert len(at.get("image")) == len(lessons.LESSONS)


def test_every_lesson_has_its_picture_and_no_picture_is_orphaned():
    """static/lessons/ holds one PNG per lesson (benchmarks/lesson_pictures.py makes them), nothing else."""
    assert {p.name for p in lessons.PICTURES.iterdir()} == {lessons.picture(x).name for x in lessons.LESSONS}
    for x in lessons.LESSONS:
        assert lessons.picture(x).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", x.name
        assert x.idea and len(x.idea) <= 80, x.name


def test_cli_lists_the_lessons(capsys):
    assert main(["lessons", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["lessons"]
    assert [r["name"] for r in out] == [x.name for x in lessons.LESSONS]
    assert all(set(r) == {"name", "title", "page", "url"} and r["url"].startswith(f"/{r['page']}?") for r in out)
    assert main(["lessons", "--origin", "http://127.0.0.1:8622"]) == 0
    assert "http://127.0.0.1:8622/scaling?" in capsys.readouterr().out


def test_make_a_lesson_link_on_a_page_that_ends_in_st_stop(cache):
    """Masks stops before its last section without a trained run: the link maker, drawn before the page, still lists
    the controls the page's last run drew."""
    at = open_page("masks", {"mask_T": "8"})
    assert any(e.label == "Make a lesson link" for e in at.expander)
    assert "mask_T=8" in open_maker(at, "masks").code[-1].value


def test_a_misspelt_name_is_refused_on_a_page_that_ends_in_st_stop(cache):
    """Masks stops at its trained model on a fresh store: the names are checked as it stops."""
    at = open_page("masks", {"hide": "mask_seed,mask_sed"})
    assert at.info and any(b.label == "Train this configuration" for b in at.button)  # it did stop there
    notices = url_notices(at)
    assert len(notices) == 1, notices
    assert "mask_sed" in notices[0] and "stopped before the rest of its controls" in notices[0]
    assert "Valid names so far: mask_T, mask_seed, mask_lengths, mask_pad_T, " in notices[0]
    assert url_notices(open_page("masks", {"hide": "mask_seed", "lock": "mask_pad_T"})) == []
