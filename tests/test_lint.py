"""The code base is ruff clean (lint and format), as CI requires."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_clean(args):
    ruff = shutil.which("ruff")
    cmd = [ruff, *args] if ruff else [sys.executable, "-m", "ruff", *args]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
