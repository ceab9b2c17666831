"""Bulk mode: every step of long streams checked through ringkv_trace against pyspec.bulk.

Also checks that the bulk checker's shortcuts are the spec: the vectorized
payloads are fuzz.oracle.payload's, the numpy hash is the header's formula (against
an independent per-float implementation and the C ringkv_checksum), and the
translated rows are window_positions' rows.
"""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fuzz.targets import ring_bulk as bulk
from fuzz.oracle import payload, payloads
from impl.ring import CRing, load_library
from pyspec.bulk import window_positions

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build library copies")
M64 = 2**64


def _h_reference(key, value) -> int:
    """ringkv.h's h(e), one float at a time with Python ints."""
    h = 0
    for j, (k, v) in enumerate(zip(key, value)):
        kb = struct.unpack("<I", struct.pack("<f", float(k)))[0]
        vb = struct.unpack("<I", struct.pack("<f", float(v)))[0]
        h += (2 * j + 1) * (0x9E3779B97F4A7C15 * kb + 0xC2B2AE3D27D4EB4F * vb)
    return h % M64


@pytest.mark.parametrize("epoch,first,width", [(0, 0, 4), (3, 4_194_000, 16), (7, 10**7, 1)])
def test_payloads_of_a_range_are_payload_per_position(epoch, first, width):
    keys, vals = payloads(epoch, np.arange(first, first + 50, dtype=np.int64), width)
    for i in range(50):
        k, v = payload(epoch, first + i, width)
        assert np.array_equal(keys[i], k) and np.array_equal(vals[i], v)


@pytest.mark.parametrize("width", [1, 4, 16, 1025])
def test_entry_hash_matches_header_formula_and_c(width):
    rng = np.random.default_rng(width)
    keys = rng.standard_normal((6, width)).astype(np.float32)
    vals = rng.standard_normal((6, width)).astype(np.float32)
    h = bulk.entry_hashes(keys, vals)
    assert [int(x) for x in h] == [_h_reference(keys[i], vals[i]) for i in range(6)]
    r = CRing(width)
    r.reset(8)
    r.push_chunk([(i, keys[i], vals[i]) for i in range(6)])
    assert r.checksum() == sum((i + 1) * int(h[i]) for i in range(6)) % M64


@given(w=st.integers(1, 40), n=st.integers(0, 120), a=st.integers(0, 100), m=st.integers(1, 30))
def test_translated_rows_are_window_positions(w, n, a, m):
    """The identity _Expect relies on: full rows are translates of the row after w pushes."""
    table = window_positions(n + a + m, w)
    exp = bulk._Expect(w, m)
    for t in range(a, a + m):
        assert np.array_equal(exp.row(t), table[t])
    if a >= w - 1:
        assert np.array_equal(exp.steady[:m] + (a - (w - 1)), table[a:a + m])


def _segments(w: int):
    edge = st.sampled_from([0, 1, max(w - 1, 0), w, w + 1, 2 * w + 3])
    return st.lists(st.one_of(edge, st.integers(0, 3 * w + 3)), max_size=8)


@st.composite
def streams(draw):
    w = draw(st.one_of(st.integers(1, 9), st.integers(1, 512), st.sampled_from([1, 63, 64, 65, 511, 512])))
    return w, draw(_segments(w))


@settings(max_examples=100, deadline=None)
@given(st.lists(streams(), min_size=1, max_size=3), st.integers(0, 2**20))
def test_bulk_property(runs, epoch):
    """Random windows up to 512 and random trace boundaries, several streams on one ring
    (so each later stream starts with a reset that may change the window)."""
    ring = CRing(16)
    for i, (w, segs) in enumerate(runs):
        res = bulk.check_trace(w, sum(segs), ring=ring, segments=segs, epoch=epoch + i)
        assert res.tokens == sum(segs)


@pytest.mark.parametrize("w,n", [(1, 100_000), (7, 100_000), (512, 60_000)])
def test_long_streams(w, n):
    res = bulk.check_trace(w, n, width=16, epoch=w)
    assert res.tokens == n


def test_measure_bulk_reports_rate():
    from fuzz.bench.throughput import measure_bulk

    out = measure_bulk(8, 20_000, 16)
    assert out["tokens"] == 20_000 and out["w"] == 8 and out["width"] == 16 and out["tokens_per_s"] > 0


@needs_cc
@pytest.mark.parametrize("edit,what", [
    # The last float of each value is not stored: positions are right, payloads are not.
    (("memcpy(r->values + s * wd, value, wd * sizeof(float));",
      "memcpy(r->values + s * wd, value, (wd - 1) * sizeof(float));"), "payload checksum"),
    # The trace reports one entry too few in each row.
    (("const int64_t len = rkv_len(r->n, w);", "const int64_t len = rkv_len(r->n - 1, w);"), "window positions differ"),
])
def test_bulk_catches_broken_copies(tmp_path, edit, what):
    from impl._ring_build import compile_ring_library

    backend = load_library(compile_ring_library(tmp_path / "libbroken.so", replace=edit))
    with pytest.raises(bulk.BulkMismatch, match=f"W=5: after push #\\d+ .*{what}"):
        bulk.check_trace(5, 1000, width=16, backend=backend)


def test_array_last_window_is_the_list_last_window():
    """pyspec.bulk.last_window mirrors Lean lastWindow on array rows: exhaustively equal to the list mirror
    pyspec.last_window for every W <= 6 (0 included) and every history of length <= 9, rows of 1 or 3 floats."""
    import pyspec
    from pyspec.bulk import last_window

    for n in range(10):
        hist = np.arange(n, dtype=np.int64)
        rows = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        for w in range(7):
            assert last_window(w, hist).tolist() == pyspec.last_window(w, hist.tolist())
            assert last_window(w, rows).tolist() == pyspec.last_window(w, rows.tolist())
    with pytest.raises(ValueError, match="-1"):
        last_window(-1, np.arange(3))
