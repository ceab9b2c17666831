"""The C paged pool at the C level: its driver (csrc/test_pagedkv.c: directed cases and a burst against
an in-C model, in small shapes and at production scale) linked to the ASan+UBSan library and, plainly, under valgrind memcheck; the driver
failing on a broken pool; and the Python differential streams driving the sanitized library.

Memory errors (a read past a block, a leak on a refused op, a use of a freed record) are what a
Python-level comparison cannot see; these runs make them test failures.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from impl.errors import Unavailable
from tests.support.csrc import CSRC, asan_burst, valgrind_burst


def _exercised(stdout: str) -> dict[str, int]:
    m = re.search(r"exercised: (\d+) copies on write, (\d+) exhausted appends, (\d+) blocks released, "
                  r"(\d+) prefix hits, (\d+) bad-input sweeps", stdout)
    assert m, stdout
    return dict(zip(("cow", "exhausted", "released", "hits", "bad"), map(int, m.groups())))


def _scale(stdout: str) -> dict[str, int]:
    """The scale regime's "scale:" line: what the burst reached (pool shapes, live sequences, pressure)."""
    m = re.search(r"scale: (\d+) pools, largest block size (\d+), largest pool (\d+) blocks, highest block id held "
                  r"(\d+), most live sequences (\d+), most blocks held by one sequence (\d+), longest sequence (\d+) "
                  r"tokens, longest pool life (\d+) ops, (\d+) exhausted appends with >= 48 live", stdout)
    assert m, stdout
    return dict(zip(("pools", "block", "pool", "block_id", "live", "held", "tokens", "life", "pressed"),
                    map(int, m.groups())))


def _assert_production_scale(stdout: str, pressed: int) -> None:
    """A page of 257 (past the 256 boundary), a pool past 256 blocks with ids past 255 held, 64 sequences live at
    once, a window over 9 blocks held whole, sequences many pages long, pools living hundreds of ops, and appends
    refused by a pool that 48+ live sequences exhausted."""
    seen = _scale(stdout)
    assert seen["block"] == 257 and seen["pool"] > 256 and seen["block_id"] > 255, seen
    assert seen["live"] == 64 and seen["held"] == 9 and seen["tokens"] > 4 * 257, seen
    assert seen["life"] >= 500 and seen["pressed"] >= pressed, seen


#: Iterations of the scale bursts: about 10 s under ASan and 20 s under memcheck on the 2-core CI machine under
#: load (measured there: 4000 ops 13 s under ASan, 2500 ops 36 s under memcheck); a scale op checks up to 64
#: sequences' reads of up to 2 000 entries each.
SCALE_ASAN_ITERS = 3500
SCALE_VALGRIND_ITERS = 1500


def test_sanitizer_burst(built):
    """Directed cases and a 20000-op burst, every bad input included, against libpagedkv_asan.so."""
    out = asan_burst(built / "test_pagedkv_asan", "7", "20000", min_checks=1_000_000, timeout=120)
    seen = _exercised(out)
    assert seen["cow"] > 50 and seen["exhausted"] > 100 and seen["hits"] > 100 and seen["bad"] > 1000, seen


def test_valgrind_burst(built):
    """The same driver under memcheck: 0 errors, no leaks (exit 1 on any)."""
    out = valgrind_burst(built / "test_pagedkv", "3", "3000")
    assert _exercised(out)["hits"] > 10, out


def test_sanitizer_scale_burst(built):
    """The scale regime (pages of 15-257, windows over up to 9 pages, 64 live sequences in pressed, long-lived
    pools) against libpagedkv_asan.so: no failure, no sanitizer report, and production scale was reached."""
    out = asan_burst(built / "test_pagedkv_asan", "5", str(SCALE_ASAN_ITERS), "scale", min_checks=10_000_000)
    _assert_production_scale(out, pressed=100)
    assert _exercised(out)["cow"] > 5 and _exercised(out)["hits"] > 100, out


def test_valgrind_scale_burst(built):
    """The scale regime under memcheck: 0 errors, no leaks, production scale reached."""
    out = valgrind_burst(built / "test_pagedkv", "3", str(SCALE_VALGRIND_ITERS), "scale", timeout=600)
    _assert_production_scale(out, pressed=30)


def test_the_driver_rejects_an_unknown_regime(built):
    proc = subprocess.run([str(built / "test_pagedkv"), "1", "10", "huge"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "huge" in proc.stderr, proc.stdout + proc.stderr


#: The C pool's size mutants (impl/mutants/paged_mutants.py): right in every small pool, wrong only at production
#: scale (a pool past 256 blocks, more than 16 live sequences, a page of 257).
SIZE_MUTANTS = ("paged-c-block-id-8-bits", "paged-c-sixteen-lanes", "paged-c-slot-8-bits")


@pytest.mark.parametrize("name", SIZE_MUTANTS)
def test_only_the_scale_regime_catches_a_size_mutant(built, tmp_path, name):
    """The scale regime is not vacuous: each size mutant passes the directed cases and the small bursts the
    sanitizer tests run (seeds 7 and 3), and the scale burst fails on it."""
    from impl.mutants.catalogue import select

    (m,) = select([name])
    try:
        lib = m.implementation()
    except Unavailable as e:
        pytest.skip(str(e))
    shutil.copy(lib, tmp_path / "libpagedkv.so")
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-O1", f"-I{CSRC}", str(CSRC / "test_pagedkv.c"), f"-L{tmp_path}", "-lpagedkv",
                    f"-Wl,-rpath,{tmp_path}", "-o", str(exe)], check=True)
    for seed, iters in (("7", "20000"), ("3", "3000")):
        small = subprocess.run([str(exe), seed, iters], capture_output=True, text=True, timeout=120)
        assert small.returncode == 0 and " 0 failures" in small.stdout, small.stdout + small.stderr[-2000:]
    scale = subprocess.run([str(exe), "3", str(SCALE_VALGRIND_ITERS), "scale"], capture_output=True, text=True,
                           timeout=120)
    assert scale.returncode == 1 and "FAIL" in scale.stderr, scale.stdout + scale.stderr[-2000:]


def test_driver_catches_a_broken_pool(built, tmp_path):
    """The driver is not vacuous: it fails against a pool that writes into shared blocks (no copy on write)."""
    from impl._paged_build import compile_paged_library

    compile_paged_library(tmp_path / "libpagedkv.so", replace=(
        "  } else if (p->ref[*e] > 1) { /* copy on write", "  } else if (p->ref[*e] > 1 && 0) { /* copy on write"))
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-O1", f"-I{CSRC}", str(CSRC / "test_pagedkv.c"), f"-L{tmp_path}", "-lpagedkv",
                    f"-Wl,-rpath,{tmp_path}", "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe), "1", "3000"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "FAIL" in proc.stderr, proc.stdout + proc.stderr[-2000:]


def test_python_streams_against_the_sanitizer_library(tmp_path):
    """The differential streams (every op and error, through cffi ABI mode) driving a sanitized build
    from the one build recipe (compile_paged_library(sanitize=True), what KVWINDOW_SANITIZE selects).
    An ASan library loaded into Python needs the ASan runtime preloaded, hence the subprocess."""
    from impl._paged_build import compile_paged_library
    from impl._ring_build import asan_runtime

    asan = asan_runtime()
    if asan is None:
        pytest.skip("the compiler's libasan.so was not found; Python-driven sanitizer streams not run")
    lib = compile_paged_library(tmp_path / "libpagedkv_asan.so", sanitize=True)
    assert b"__asan_report" in lib.read_bytes() and b"__ubsan_handle" in lib.read_bytes(), "not a sanitized build"
    script = f"""
from impl.paged import PagedC, load_paged_library
from tests.support.paged_model import run_stream
b = load_paged_library({str(lib)!r})
hits = sum(run_stream(PagedC(backend=b), seed)["hits"] for seed in range(40))
run_stream(PagedC(backend=b), 99, ops=40, shape=(2**40, 2, 12, 1))
assert hits > 5, hits
print('SANITIZED-OK', hits)
"""
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=str(CSRC.parent), timeout=300)
    assert proc.returncode == 0 and "SANITIZED-OK" in proc.stdout, proc.stdout + proc.stderr[-4000:]
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-4000:]


def test_the_sanitized_python_run_does_catch_a_memory_error(tmp_path):
    """Negative control for the run above: a copy whose refcount bound is off by one reads ref[N], and
    the same preloaded-ASan subprocess dies with a heap-buffer-overflow report."""
    from impl._paged_build import compile_paged_library
    from impl._ring_build import asan_runtime

    asan = asan_runtime()
    if asan is None:
        pytest.skip("the compiler's libasan.so was not found; sanitizer negative control not run")
    lib = compile_paged_library(tmp_path / "liboob.so", sanitize=True, replace=(
        "if (block < 0 || block >= p->nb) return PAGEDKV_E_RANGE;", "if (block < 0 || block > p->nb) return PAGEDKV_E_RANGE;"))
    script = f"""
from impl.paged import PagedC, load_paged_library
pool = PagedC(backend=load_paged_library({str(lib)!r}))
pool.configure(3, 2, 4, 1)
print(pool.refcount(4))
"""
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=str(CSRC.parent), timeout=120)
    assert proc.returncode != 0 and "heap-buffer-overflow" in proc.stderr, proc.stdout + proc.stderr[-2000:]
