"""The command line never hands a terminal the control sequences in what the user gave it: a config.json's keys and
values, a file's name, an unknown argument are printed with their escapes (\\x1b[31m), not as colours, cursor moves,
a cleared screen or a window title."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli import text
from cli.main import main

REPO = Path(__file__).resolve().parents[1]
RED, TITLE, BIDI = "\x1b[31m", "\x1b]0;pwned\x07", "\u202e"
MODEL = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 100}  # fmt: skip


def raw_controls(s: str) -> list[str]:
    return sorted({c for c in s if text.TERMINAL_CONTROLS.match(c)})


def test_a_config_keys_control_sequences_are_printed_escaped(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MODEL | {f"{RED}EVIL\x1b[0m": 1, f"{TITLE}x": 2, f"back{BIDI}wards": 3, "a\nb": 4}))
    assert main(["params", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert raw_controls(out) == []
    ignored = next(line for line in out.splitlines() if line.startswith("  ignored: "))
    assert ignored == "  ignored: \\x1b[31mEVIL\\x1b[0m, \\x1b]0;pwned\\x07x, back\\u202ewards, a\\nb"


def test_a_refused_files_value_and_an_unknown_argument_are_escaped(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MODEL | {"model_type": f"{RED}llama"}))
    assert main(["params", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and "\\x1b[31mllama" in err
    assert main(["train", f"{TITLE}x"]) == 2
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and "\\x1b]0;pwned\\x07x" in err


def test_a_files_name_is_escaped(tmp_path, capsys):
    path = tmp_path / f"{RED}config.json"
    path.write_text(json.dumps(MODEL))
    assert main(["params", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert raw_controls(out) == [] and out.startswith("read from \\x1b[31mconfig.json (llama)")


def test_the_guard_keeps_line_breaks_tabs_and_the_progress_lines_return():
    stream = io.StringIO()
    text.TerminalSafe(stream).write(f"a\tb\r{RED}c\n")
    assert stream.getvalue() == "a\tb\r\\x1b[31mc\n"
    assert text.escaped(f"x\ny\r{BIDI}é") == "x\\ny\\r\\u202eé"


@pytest.mark.slow  # a subprocess
def test_the_command_in_a_terminal_gets_no_escape_sequence(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MODEL | {f"{RED}EVIL": 1}))
    done = subprocess.run([sys.executable, "-m", "attncore", "params", "--config", str(path)], cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and "\x1b" not in done.stdout + done.stderr and "\\x1b[31mEVIL" in done.stdout
