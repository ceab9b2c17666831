"""The C ring through its binding on bad input: a typed error naming the value, and nothing changes."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.oracle import payload
from impl import ring as R
from tests.support.ring import filled_ring, ring_state


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
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.WindowError, match=f"window {w}") as e:
        r.reset(w)
    assert e.value.code == R.E_WINDOW and isinstance(e.value, ValueError)
    assert ring_state(r) == before


def test_width_zero():
    with pytest.raises(R.WidthError, match="got 0"):
        R.CRing(0)
    b = R.api_backend()
    h = b.ffi.new("ringkv_t **")
    assert b.lib.ringkv_create(4, 0, h) == R.E_WIDTH and h[0] == b.ffi.NULL
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.WidthError, match=r"shape \(3,\), the ring's width is 4"):
        r.push(7, np.zeros(3), np.zeros(3))
    assert ring_state(r) == before


@pytest.mark.parametrize("w", [2**40 * 16, 2**62, 2**63 - 1])
def test_huge_window_fails_cleanly(w):
    with pytest.raises(R.AllocationError, match=f"window {w}") as e:
        R.CRing().reset(w)
    assert isinstance(e.value, MemoryError)
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.AllocationError, match=f"window {w}"):
        r.reset(w)
    assert ring_state(r) == before
    r.push(7, *payload(0, 7, 4))  # the old stream goes on
    assert r.next_position() == 8


def test_window_beyond_int64():
    with pytest.raises(R.WindowError, match="does not fit in int64"):
        R.CRing().reset(2**64)


@pytest.mark.parametrize("pos", [8, 100, 6, 0, -1])
def test_position_gap_or_duplicate(pos):
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.PositionError, match=f"position {pos} \\(next position is 7\\)"):
        r.push(pos, *payload(0, pos, 4))
    assert ring_state(r) == before
    with pytest.raises(R.PositionError, match="next position is 7"):
        r.push_chunk([(pos, *payload(0, pos, 4)), (pos + 1, *payload(0, pos + 1, 4))])
    assert ring_state(r) == before


def test_chunk_positions_not_consecutive():
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.PositionError, match="entry 1 has position 9, expected 8"):
        r.push_chunk([(7, *payload(0, 7, 4)), (9, *payload(0, 9, 4))])
    assert ring_state(r) == before


def test_read_buffer_too_small():
    r = filled_ring()
    before = ring_state(r)
    with pytest.raises(R.CapacityError, match="capacity 4 \\(the cache holds 5 entries\\)"):
        r.read(4)
    with pytest.raises(R.CountError, match="capacity -1"):
        r.read(-1)
    b = r._b
    sentinel = b.ffi.new("int64_t[1]", [-99])
    out = b.ffi.new("int64_t *")
    assert b.lib.ringkv_read(r.c_handle()[2], 0, sentinel, b.ffi.NULL, b.ffi.NULL, out) == R.E_CAPACITY
    assert out[0] == 5 and sentinel[0] == -99
    assert ring_state(r) == before


def test_push_chunk_empty_is_a_noop():
    r = filled_ring()
    before = ring_state(r)
    r.push_chunk([])
    r.push_chunk(iter(()))
    assert ring_state(r) == before
    b = r._b
    assert b.lib.ringkv_push_chunk(r.c_handle()[2], 12345, 0, b.ffi.NULL, b.ffi.NULL) == R.OK
    assert ring_state(r) == before
    assert b.lib.ringkv_push_chunk(r.c_handle()[2], 7, -1, b.ffi.NULL, b.ffi.NULL) == R.E_RANGE
    assert ring_state(r) == before


def test_reset_changes_window_and_drops_entries():
    r = filled_ring(w=5, n=7)
    r.reset(3)
    assert (len(r), r.next_position(), r.window, r.contents()) == (0, 0, 3, [])
    for p in range(4):
        r.push(p, *payload(1, p, 4))
    assert [e[0] for e in r.contents()] == [1, 2, 3]
    r.reset(3)  # same window: no reallocation, still empty
    assert r.contents() == [] and r.checksum() == 0


def test_chunk_longer_than_window():
    r = filled_ring(w=4, n=0)
    r.push_chunk([(p, *payload(0, p, 4)) for p in range(11)])
    got = r.contents()
    assert [e[0] for e in got] == [7, 8, 9, 10]
    for p, k, v in got:
        wk, wv = payload(0, p, 4)
        assert np.array_equal(k, wk) and np.array_equal(v, wv)
