"""The Attention page's input: the probe or a typed sequence (validated by attncore), and the model's answer."""

from __future__ import annotations

import numpy as np

from attncore import ConfigError, RunConfig
from attncore.inspect import parse_sequence
from attncore.model import generate
from attncore.tasks import make_sequences
from lab.store import RunRecord
from ui import plain
from ui.frames import token_name
from ui.params import url_text


def chosen_tokens(run: RunConfig, record: RunRecord, key: str = "seq") -> np.ndarray:
    """A text input mirrored in the URL (?seq=... or another key); invalid text shows st.error and falls back
    to the probe."""
    L, probe = run.task.length, record.probe_tokens
    text = url_text(
        "Input symbols",
        key,
        "",
        check=lambda text: text.strip() and parse_sequence(text, run),
        placeholder=" ".join(map(str, probe[:L])),
        help=f"{L} symbols from 0 to 19, separated by spaces. Empty: the probe sequence.",
    )
    if not text.strip():
        return probe
    try:
        return parse_sequence(text, run)
    except ConfigError as e:
        plain.error("Not a valid input.", f"Input symbols: {e.message}. Showing the probe sequence instead.")
        return probe


def answer_line(run: RunConfig, record: RunRecord, tokens: np.ndarray) -> str:
    """Markdown: the input (2L,), the task's answer, and the trained model's greedy answer."""
    L = run.task.length
    expected = make_sequences(tokens[None, :L], run.task.name)[0, L + 1 :]  # (L,)
    answer = generate(record.params, tokens[None, : L + 1], L, run.model)[0][0]  # (L,)
    verdict = "right" if (answer == expected).all() else "wrong"
    return (
        f"Input `{' '.join(token_name(t) for t in tokens)}` · expected answer `{' '.join(map(str, expected))}` · "
        f"the model's greedy answer `{' '.join(map(str, answer))}` (**{verdict}**)"
    )
