"""What the op-level engine targets share (fuzz/targets/engines/streams.py), without any engine: the per-payload key
index finds the same positions as a byte-for-byte table (also when fingerprints collide), the stacked reference of
a batch equals each row's own, and a view's deferred output check reports the first disagreeing call — before an
exception a later call raised — naming its row and positions."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.ops import Push
from fuzz.targets.base import Mismatch
from fuzz.targets.engines import streams as S


def _slow_positions(keys, history):
    table = {history[p].tobytes(): p for p in range(len(history) - 1, -1, -1)}
    return [table.get(np.ascontiguousarray(k).tobytes()) for k in keys]


def test_key_index_agrees_with_a_byte_table():
    p = S.payload(5, 40, 2, 1, 8)
    keys = p.k[[0, 7, 39, 7]].copy()
    keys[3, 0, 5] += 1.0  # a row that is no history key
    assert p.positions(keys) == _slow_positions(keys, p.k) == [0, 7, 39, None]
    assert p.positions(np.zeros((0, 1, 8), np.float32)) == []


def test_key_index_with_colliding_fingerprints_falls_back_to_exact_rows():
    p = S.payload(6, 10, 2, 1, 8)
    p.k[4, 0, 0] = p.k[2, 0, 0]  # two positions share the first 32 bits
    keys = p.k[[4, 2, 9]]
    assert p.positions(keys) == _slow_positions(keys, p.k) == [4, 2, 9]


@pytest.mark.parametrize("sinks", [0, 2])
def test_stacked_references_equal_each_rows_own(sinks):
    a, b = S.payload(1, 30, 2, 1, 8), S.payload(2, 30, 2, 1, 8)
    ra, rb = S.references([a, b], 6, sinks)
    assert np.array_equal(ra.out, S.Reference(S.payload(1, 30, 2, 1, 8), 6, sinks).out)
    assert np.array_equal(rb.out, S.Reference(S.payload(2, 30, 2, 1, 8), 6, sinks).out)
    assert a.reference(6, sinks) is ra  # cached: computed once per payload and window


def _view(ref, row=None):
    return S.Outputs("eng:x", ref, 1e-5, 1e-4, "v", row)


def test_deferred_check_names_the_first_disagreeing_call_and_its_row():
    p = S.payload(3, 6, 2, 1, 8)
    ref = p.reference(3)
    calls = [S.Call(i, Push(), i, 1) for i in range(6)]
    rows = [_view(ref, 0), _view(ref, 1)]
    with pytest.raises(Mismatch, match=r"op #2 .*\[v, batch row 1\] attention output for positions 2\.\.2"):
        with S.deferred(*rows):
            for i, c in enumerate(calls):
                rows[0].put(c, ref.rows(c) + (1.0 if i == 4 else 0.0), order=i)  # row 0 goes wrong later
                rows[1].put(c, ref.rows(c) + (1.0 if i == 2 else 0.0), order=i)
    ok = _view(ref)
    with S.deferred(ok):
        for c in calls:
            ok.put(c, ref.rows(c))


def test_an_earlier_disagreement_is_reported_before_a_later_exception():
    p = S.payload(4, 4, 2, 1, 8)
    ref = p.reference(2)
    out = _view(ref)
    with pytest.raises(Mismatch, match=r"op #1 .*positions 1\.\.1"):
        with S.deferred(out):
            for i in range(4):
                c = S.Call(i, Push(), i, 1)
                if i == 3:
                    raise RuntimeError("the engine crashed at op 3")
                out.put(c, ref.rows(c) + (np.nan if i == 1 else 0.0))
    clean = _view(ref)
    with pytest.raises(RuntimeError, match="op 3"):  # nothing earlier disagreed: the exception itself
        with S.deferred(clean):
            clean.put(S.Call(0, Push(), 0, 1), ref.rows(S.Call(0, Push(), 0, 1)))
            raise RuntimeError("the engine crashed at op 3")
