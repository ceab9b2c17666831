"""The C ring at the C level: sanitizer and valgrind bursts, and every bad input through the binding.

The C driver (csrc/test_ringkv.c) checks a randomized burst against an in-C
reference; here it runs linked to the ASan/UBSan library and, plainly, under
valgrind memcheck — memory errors that a Python-level comparison cannot see.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fuzz.oracle import payload
from impl import ring as R

CSRC = Path(__file__).resolve().parent.parent / "csrc"


@pytest.fixture(scope="module")
def built():
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make or cc missing: cannot build csrc/")
    proc = subprocess.run(["make", "-s", "-C", str(CSRC), "all"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return CSRC / "build"


def test_sanitizer_burst(built):
    """Randomized burst, all bad inputs included, against libringkv_asan.so (ASan + UBSan)."""
    proc = subprocess.run([str(built / "test_ringkv_asan"), "7", "20000"], capture_output=True, text=True,
                          env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    m = re.search(r"(\d+) checks, 0 failures", proc.stdout)
    assert m and int(m.group(1)) > 100_000, proc.stdout
    assert "runtime error" not in proc.stderr and "ERROR: AddressSanitizer" not in proc.stderr


def test_valgrind_burst(built):
    """The same burst under memcheck: 0 errors, no leaks (exit 1 on any)."""
    vg = shutil.which("valgrind")
    if vg is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind); memcheck burst not run")
    proc = subprocess.run([vg, "-q", "--error-exitcode=1", "--leak-check=full",
                           "--errors-for-leak-kinds=definite,indirect", str(built / "test_ringkv"), "3", "3000"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "0 failures" in proc.stdout
    assert "Invalid" not in proc.stderr and "uninitialised" not in proc.stderr, proc.stderr[-4000:]


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


# -- the header is the binding ------------------------------------------------

def test_binding_declares_the_header():
    from impl._ring_build import cdef

    syms = R.header_symbols(cdef())
    assert syms == sorted(["ringkv_strerror", "ringkv_create", "ringkv_destroy", "ringkv_reset", "ringkv_push",
                           "ringkv_push_chunk", "ringkv_length", "ringkv_next_pos", "ringkv_window",
                           "ringkv_width", "ringkv_read", "ringkv_checksum", "ringkv_trace"])
    lib = R.api_backend().lib
    assert [lib.RINGKV_OK, lib.RINGKV_E_NULL, lib.RINGKV_E_RANGE] == [R.OK, R.E_NULL, R.E_RANGE]


def test_strerror_is_distinct_per_code():
    b = R.api_backend()
    texts = [b.ffi.string(b.lib.ringkv_strerror(c)) for c in range(8)]
    assert len(set(texts)) == 8
    assert b.ffi.string(b.lib.ringkv_strerror(99)) == b.ffi.string(b.lib.ringkv_strerror(-1))


# -- bad inputs: typed error naming the value, and nothing changes ------------

def _ring(w=5, n=7, width=4):
    r = R.CRing(width)
    r.reset(w)
    for p in range(n):
        r.push(p, *payload(0, p, width))
    return r


def _state(r):
    pos, k, v = r.read()
    return (len(r), r.next_position(), r.window, r.checksum(), pos.tolist(), k.tobytes(), v.tobytes())


def test_null_handle():
    lib, ffi = R.api_backend().lib, R.api_backend().ffi
    out = ffi.new("int64_t *")
    assert lib.ringkv_length(ffi.NULL, out) == R.E_NULL
    assert lib.ringkv_push(ffi.NULL, 0, ffi.NULL, ffi.NULL) == R.E_NULL
    assert lib.ringkv_destroy(ffi.NULL) == R.E_NULL
    r = R.CRing()
    with pytest.raises(R.NullHandleError, match="reset\\(window\\) first"):
        r.push(0, np.zeros(4), np.zeros(4))
    assert r.contents() == [] and len(r) == 0


@pytest.mark.parametrize("w", [0, -1])
def test_window_below_one(w):
    with pytest.raises(R.WindowError, match=f"window {w}"):
        R.CRing().reset(w)
    r = _ring()
    before = _state(r)
    with pytest.raises(R.WindowError, match=f"window {w}") as e:
        r.reset(w)
    assert e.value.code == R.E_WINDOW and isinstance(e.value, ValueError)
    assert _state(r) == before


def test_width_zero():
    with pytest.raises(R.WidthError, match="got 0"):
        R.CRing(0)
    b = R.api_backend()
    h = b.ffi.new("ringkv_t **")
    assert b.lib.ringkv_create(4, 0, h) == R.E_WIDTH and h[0] == b.ffi.NULL
    r = _ring()
    before = _state(r)
    with pytest.raises(R.WidthError, match=r"shape \(3,\), the ring's width is 4"):
        r.push(7, np.zeros(3), np.zeros(3))
    assert _state(r) == before


@pytest.mark.parametrize("w", [2**40 * 16, 2**62, 2**63 - 1])
def test_huge_window_fails_cleanly(w):
    with pytest.raises(R.AllocationError, match=f"window {w}") as e:
        R.CRing().reset(w)
    assert isinstance(e.value, MemoryError)
    r = _ring()
    before = _state(r)
    with pytest.raises(R.AllocationError, match=f"window {w}"):
        r.reset(w)
    assert _state(r) == before
    r.push(7, *payload(0, 7, 4))  # the old stream goes on
    assert r.next_position() == 8


def test_window_beyond_int64():
    with pytest.raises(R.WindowError, match="does not fit in int64"):
        R.CRing().reset(2**64)


@pytest.mark.parametrize("pos", [8, 100, 6, 0, -1])
def test_position_gap_or_duplicate(pos):
    r = _ring()
    before = _state(r)
    with pytest.raises(R.PositionError, match=f"position {pos} \\(next position is 7\\)"):
        r.push(pos, *payload(0, pos, 4))
    assert _state(r) == before
    with pytest.raises(R.PositionError, match="next position is 7"):
        r.push_chunk([(pos, *payload(0, pos, 4)), (pos + 1, *payload(0, pos + 1, 4))])
    assert _state(r) == before


def test_chunk_positions_not_consecutive():
    r = _ring()
    before = _state(r)
    with pytest.raises(R.PositionError, match="entry 1 has position 9, expected 8"):
        r.push_chunk([(7, *payload(0, 7, 4)), (9, *payload(0, 9, 4))])
    assert _state(r) == before


def test_read_buffer_too_small():
    r = _ring()
    before = _state(r)
    with pytest.raises(R.CapacityError, match="capacity 4 \\(the cache holds 5 entries\\)"):
        r.read(4)
    with pytest.raises(R.CountError, match="capacity -1"):
        r.read(-1)
    b = r._b
    sentinel = b.ffi.new("int64_t[1]", [-99])
    out = b.ffi.new("int64_t *")
    assert b.lib.ringkv_read(r.c_handle()[2], 0, sentinel, b.ffi.NULL, b.ffi.NULL, out) == R.E_CAPACITY
    assert out[0] == 5 and sentinel[0] == -99
    assert _state(r) == before


def test_push_chunk_empty_is_a_noop():
    r = _ring()
    before = _state(r)
    r.push_chunk([])
    r.push_chunk(iter(()))
    assert _state(r) == before
    b = r._b
    assert b.lib.ringkv_push_chunk(r.c_handle()[2], 12345, 0, b.ffi.NULL, b.ffi.NULL) == R.OK
    assert _state(r) == before
    assert b.lib.ringkv_push_chunk(r.c_handle()[2], 7, -1, b.ffi.NULL, b.ffi.NULL) == R.E_RANGE
    assert _state(r) == before


def test_reset_changes_window_and_drops_entries():
    r = _ring(w=5, n=7)
    r.reset(3)
    assert (len(r), r.next_position(), r.window, r.contents()) == (0, 0, 3, [])
    for p in range(4):
        r.push(p, *payload(1, p, 4))
    assert [e[0] for e in r.contents()] == [1, 2, 3]
    r.reset(3)  # same window: no reallocation, still empty
    assert r.contents() == [] and r.checksum() == 0


def test_chunk_longer_than_window():
    r = _ring(w=4, n=0)
    r.push_chunk([(p, *payload(0, p, 4)) for p in range(11)])
    got = r.contents()
    assert [e[0] for e in got] == [7, 8, 9, 10]
    for p, k, v in got:
        wk, wv = payload(0, p, 4)
        assert np.array_equal(k, wk) and np.array_equal(v, wv)


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
r = fuzz_target(registry.resolve('c:' + lib), CampaignConfig(seconds=30, max_examples=200, campaign_seed=2, seeds_dir=str({str(tmp_path)!r})))
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
