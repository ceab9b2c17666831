"""The C ring at the C level: sanitizer and valgrind bursts, and the harness driving the ASan library.

The C driver (csrc/test_ringkv.c) checks a randomized burst against an in-C
reference; here it runs linked to the ASan/UBSan library and, plainly, under
valgrind memcheck — memory errors that a Python-level comparison cannot see.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.csrc import CSRC, asan_burst, valgrind_burst


def test_sanitizer_burst(built):
    """Randomized burst, all bad inputs included, against libringkv_asan.so (ASan + UBSan)."""
    asan_burst(built / "test_ringkv_asan", "7", "20000", min_checks=100_000)


def test_valgrind_burst(built):
    """The same burst under memcheck: 0 errors, no leaks (exit 1 on any)."""
    valgrind_burst(built / "test_ringkv", "3", "3000")


def test_driver_catches_a_broken_ring(built, tmp_path):
    """The burst is not vacuous: the driver fails against a ring that drops one chunk entry."""
    from impl._ring_build import compile_ring_library

    lib = compile_ring_library(tmp_path / "libringkv.so", replace=(
        "rkv_chunk_first_kept(n, r->w)", "rkv_chunk_first_kept(n, r->w - 1)"))
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-O1", f"-I{CSRC}", str(CSRC / "test_ringkv.c"), f"-L{tmp_path}", "-lringkv",
                    f"-Wl,-rpath,{tmp_path}", "-o", str(exe)], check=True)
    assert lib.exists()
    proc = subprocess.run([str(exe), "1", "3000"], capture_output=True, text=True)
    assert proc.returncode == 1 and "FAIL" in proc.stderr


def test_python_campaign_against_sanitizer_library(built, tmp_path):
    """The real harness (campaign + bulk trace) driving libringkv_asan.so through cffi ABI mode.
    An ASan library loaded into Python needs the ASan runtime preloaded, hence the subprocess."""
    import os
    import sys

    asan = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(asan):
        pytest.skip("the compiler's libasan.so was not found; Python-driven sanitizer burst not run")
    script = f"""
from fuzz.targets import registry
from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.targets.ring_bulk import check_trace
from impl.ring import load_library
lib = {str(built / 'libringkv_asan.so')!r}
r = fuzz_target(registry.resolve('c:' + lib), CampaignConfig(seconds=30, max_examples=200, campaign_seed=2,
                                                             seeds_dir=str({str(tmp_path)!r})))
assert not r.failures and r.examples == 200, r.failures
b = load_library(lib)
for w in (1, 5, 64, 512):
    check_trace(w, 3000, backend=b, segments=[1000, 0, 7, 1993])
print('SANITIZED-OK')
"""
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=str(CSRC.parent), timeout=300)
    assert proc.returncode == 0 and "SANITIZED-OK" in proc.stdout, proc.stdout + proc.stderr[-4000:]
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-4000:]
