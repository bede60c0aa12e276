"""The command line's text layout (cli.text): tables split into blocks of columns that fit, paragraphs wrapped."""

from __future__ import annotations

import pandas as pd

from cli import text


def test_a_wide_table_is_split_into_blocks_that_fit_each_repeating_its_key_columns():
    frame = pd.DataFrame({"level": ["learned", "none"]} | {f"column_{i:02d}": [1.5, 2.25] for i in range(16)})
    out = text.table(frame, ["level"], width=60, formatters={"column_03": lambda v: f"<{v}>"})
    blocks = out.split("\n\n")
    assert len(blocks) > 1 and all(max(map(len, b.splitlines())) <= 60 for b in blocks)
    assert all(b.splitlines()[1].split()[0] == "learned" for b in blocks)  # each block names its rows
    assert sum(len(b.splitlines()[0].split()) - 1 for b in blocks) == 16  # every other column once
    assert "<1.5>" in out  # a formatter of a column in any block
    narrow = frame[["level", "column_00"]]
    assert text.table(narrow, ["level"]) == narrow.to_string(index=False)


def test_a_paragraph_wraps_at_the_width_and_keeps_words_whole():
    words = "sign-flip " * 40
    lines = text.paragraph(words, width=50).splitlines()
    assert all(len(line) <= 50 for line in lines) and " ".join(lines).split() == words.split()


def test_help_names_the_run_store_it_will_use(monkeypatch, capsys):
    """Regression: `--help` said cache/ when ATTNCORE_CACHE_DIR pointed elsewhere."""
    import pytest

    from cli import flags
    from cli.main import main
    from lab import store

    assert flags.STORE_VAR == store.ENV_VAR
    for where, shown in (("/srv/labruns", "/srv/labruns (from ATTNCORE_CACHE_DIR)"), ("", "cache/")):  # never written
        monkeypatch.setenv(store.ENV_VAR, where)
        with pytest.raises(SystemExit):
            main(["--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"served from the run store in {shown} when known" in out and f"(in {shown})" in out
