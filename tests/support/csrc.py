"""The csrc/ build (``make -C csrc all``): the C test drivers and the ASan library, as a pytest fixture."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent.parent / "csrc"


@pytest.fixture(scope="module")
def built() -> Path:
    """``csrc/build`` after ``make all`` (skips without make or a C compiler)."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make or cc missing: cannot build csrc/")
    proc = subprocess.run(["make", "-s", "-C", str(CSRC), "all"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return CSRC / "build"
