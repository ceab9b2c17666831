"""The csrc/ build (``make -C csrc all``): the C test drivers and the ASan library, as a pytest fixture."""

from __future__ import annotations

import re
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


def asan_burst(driver: Path, *args: str, min_checks: int, timeout: float = 300) -> str:
    """Run a sanitized C test driver (``test_*_asan SEED ITERS [REGIME]``); assert a clean exit, at least
    ``min_checks`` checks with 0 failures and no ASan / UBSan report; return its stdout (what it exercised)."""
    proc = subprocess.run([str(driver), *args], capture_output=True, text=True, timeout=timeout,
                          env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    m = re.search(r"(\d+) checks, 0 failures", proc.stdout)
    assert m and int(m.group(1)) > min_checks, proc.stdout
    assert "runtime error" not in proc.stderr and "ERROR: AddressSanitizer" not in proc.stderr, proc.stderr[-4000:]
    return proc.stdout


def valgrind_burst(driver: Path, *args: str, timeout: float = 300) -> str:
    """Run a plain C test driver under memcheck; assert 0 failures, 0 errors and no definite or indirect leak
    (``--error-exitcode=1``); return its stdout. Skips where valgrind is not installed."""
    vg = shutil.which("valgrind")
    if vg is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind); memcheck burst not run")
    proc = subprocess.run([vg, "-q", "--error-exitcode=1", "--leak-check=full",
                           "--errors-for-leak-kinds=definite,indirect", str(driver), *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "0 failures" in proc.stdout, proc.stdout
    assert "Invalid" not in proc.stderr and "uninitialised" not in proc.stderr, proc.stderr[-4000:]
    return proc.stdout
