"""CRing's array entry point (push_arrays / read_into / read_arrays): the same ring as the tuple
protocol, bad input refused with a typed error naming the value, and nothing changed."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.oracle import payloads
from impl import ring as R
from tests.support.ring import ring_state

pytest.importorskip("impl._ringkv", reason="impl._ringkv is not built (pip install -e .)")


def _arrays(first, n, width=4, epoch=0):
    pos = np.arange(first, first + n, dtype=np.int64)
    return (pos, *payloads(epoch, pos, width))


def test_arrays_and_tuples_give_the_same_ring():
    a, b = R.CRing(4), R.CRing(4)
    a.reset(5)
    b.reset(5)
    for first, n in ((0, 3), (3, 0), (3, 9), (12, 1), (13, 5)):
        pos, keys, vals = _arrays(first, n)
        a.push_arrays(pos, keys, vals)
        b.push_chunk([(int(p), keys[i], vals[i]) for i, p in enumerate(pos)])
        assert ring_state(a) == ring_state(b)
    got = a.read_arrays()
    want = a.read()
    assert all(np.array_equal(x, y) for x, y in zip(got, want))
    assert [int(p) for p in got[0]] == [e[0] for e in b.contents()] == [13, 14, 15, 16, 17]


def test_read_into_the_callers_arrays():
    r = R.CRing(4)
    r.reset(3)
    r.push_arrays(*_arrays(0, 7))
    pos, keys, vals = np.full(5, -1, np.int64), np.zeros((5, 4), np.float32), np.zeros((5, 4), np.float32)
    assert r.read_into(pos, keys, vals) == 3
    assert pos.tolist() == [4, 5, 6, -1, -1]
    _, wk, wv = _arrays(4, 3)
    assert np.array_equal(keys[:3], wk) and np.array_equal(vals[:3], wv)


def test_push_arrays_rejects_non_consecutive_positions_and_changes_nothing():
    r = R.CRing(4)
    r.reset(5)
    r.push_arrays(*_arrays(0, 7))
    before = ring_state(r)
    pos, keys, vals = _arrays(7, 3)
    pos[2] = 11
    with pytest.raises(R.PositionError, match="entry 2 has position 11, expected 9"):
        r.push_arrays(pos, keys, vals)
    with pytest.raises(R.PositionError, match="next position is 7"):
        r.push_arrays(*_arrays(8, 2))
    assert ring_state(r) == before


def test_push_arrays_rejects_the_wrong_width_and_changes_nothing():
    r = R.CRing(4)
    r.reset(5)
    before = ring_state(r)
    pos, keys, vals = _arrays(0, 2, width=3)
    with pytest.raises(R.WidthError, match=r"keys has shape \(2, 3\), want \(2, 4\)"):
        r.push_arrays(pos, keys, vals)
    assert ring_state(r) == before


def test_read_into_too_small_names_the_count_and_changes_nothing():
    r = R.CRing(4)
    r.reset(5)
    r.push_arrays(*_arrays(0, 7))
    before = ring_state(r)
    small = (np.empty(4, np.int64), np.empty((4, 4), np.float32), np.empty((4, 4), np.float32))
    with pytest.raises(R.CapacityError, match=r"capacity 4 \(the cache holds 5 entries\)"):
        r.read_into(*small)
    with pytest.raises(R.CapacityError, match="float32"):
        r.read_into(np.empty(5, np.int64), np.empty((5, 4), np.float64), np.empty((5, 4), np.float32))
    assert ring_state(r) == before


def test_read_arrays_sees_a_cache_larger_than_its_buffers():
    """An oversized ring (here simply a wide window) is read whole, so a ring that holds too much shows
    up as a contents mismatch rather than a refused read."""
    r = R.CRing(4)
    r.reset(300)
    r.push_arrays(*_arrays(0, 250))
    pos, keys, _ = r.read_arrays()
    assert pos.tolist() == list(range(250)) and keys.shape == (250, 4)
