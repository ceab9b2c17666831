"""CacheTarget's op loop: arrays from the oracle to the cache and back, compared by array equality;
the one adapter for tuple-protocol caches; the difference named only once one is known."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.ops import Case, Chunk
from fuzz.oracle import SpecStream, payloads
from fuzz.targets.base import Mismatch
from fuzz.targets.cache import CacheTarget, TupleCache, UnreadableContents, array_cache, compare_arrays
from fuzz.targets.pyring import PyRing


def _want(w=3, n=7, width=4):
    spec = SpecStream(w, width)
    spec.apply(Chunk(n))
    return spec.expected()


def test_equal_contents_compare_equal():
    want = _want()
    got = tuple(a.copy() for a in want)
    assert compare_arrays(got, want) is None
    assert compare_arrays((got[0], got[1].astype(np.float64), got[2].astype(np.float64)), want) is None


def test_positions_are_compared_first():
    want = _want()
    got = (want[0] + 1, want[1], want[2])
    assert compare_arrays(got, want) == ("positions differ from spec lastWindow at index 0: 3 differ, length 3 each; "
                                         "got [<5>, 6, 7], spec [<4>, 5, 6]")


def test_the_first_differing_payload_is_named():
    want = _want()
    keys = want[1].copy()
    keys[1, 2] += 1
    diff = compare_arrays((want[0], keys, want[2]), want)
    assert diff.startswith("key of position 5 (index 1): got") and diff.endswith("(1 of 3 rows differ)"), diff


def test_payloads_must_match_bit_for_bit():
    """-0.0 == 0.0 numerically, but a cache that stores -0.0 for 0.0 lost a bit: caught."""
    want = _want()
    keys, vals = want[1].copy(), want[2].copy()
    keys[:] = 0.0
    got = (want[0], keys.copy(), vals)
    got[1][2, 0] = -0.0
    assert compare_arrays(got, (want[0], keys, vals)).startswith("key of position 6")


class RecordingRing(PyRing):
    """Records what the adapter hands a tuple-protocol cache."""

    seen: list = []
    in_chunk = False

    def push(self, pos, key, value):
        if not self.in_chunk:
            RecordingRing.seen.append(("push", type(pos), np.shape(key)))
        super().push(pos, key, value)

    def push_chunk(self, entries):
        entries = list(entries)
        RecordingRing.seen.append(("chunk", [type(e[0]) for e in entries], [np.shape(e[1]) for e in entries]))
        self.in_chunk = True
        super().push_chunk(entries)
        self.in_chunk = False


def test_a_tuple_protocol_cache_gets_int_positions_and_rows():
    RecordingRing.seen = []
    CacheTarget("recording", RecordingRing).run(Case.parse(3, "push chunk:2 reset:2 chunk:0 push"))
    assert RecordingRing.seen == [("push", int, (4,)), ("chunk", [int, int], [(4,), (4,)]), ("chunk", [], []),
                                  ("push", int, (4,))]


def test_array_protocol_caches_are_not_wrapped():
    from impl.ring import CRing

    ring = CRing(4)
    assert array_cache(ring, 4) is ring
    assert isinstance(array_cache(PyRing(), 4), TupleCache)


def test_the_op_loop_drives_the_c_ring_through_its_array_entry_point(monkeypatch):
    from impl.ring import CRing

    def refuse(*_):
        raise AssertionError("the tuple protocol was used")

    monkeypatch.setattr(CRing, "push_chunk", refuse)
    monkeypatch.setattr(CRing, "contents", refuse)
    stats = CacheTarget("ring-c", lambda: CRing(4)).run(Case.parse(3, "chunk:7 push reset:5 chunk:2 push"))
    assert stats.tokens == 11


class NotAList(PyRing):
    def contents(self):
        return 42


class Ragged(PyRing):
    def contents(self):
        return [(p, k[:2], v) for p, k, v in super().contents()]


@pytest.mark.parametrize("cls, needle", [(NotAList, "contents\\(\\) returned int, not a list"),
                                         (Ragged, "key of position 0 has 2 floats, the pushed one had 4")])
def test_unreadable_contents_are_a_mismatch_naming_why(cls, needle):
    with pytest.raises(Mismatch, match=needle):
        CacheTarget("bad", cls).run(Case.parse(3, "push"))


def test_tuple_adapter_reads_torch_tensors():
    torch = pytest.importorskip("torch")

    class TorchRing(PyRing):
        def contents(self):
            return [(p, torch.from_numpy(np.asarray(k)), torch.from_numpy(np.asarray(v)))
                    for p, k, v in super().contents()]

    t = TupleCache(TorchRing(), 4)
    t.reset(2)
    pos = np.arange(3, dtype=np.int64)
    t.push_arrays(pos, *payloads(0, pos, 4))
    got = t.read_arrays()
    assert got[0].tolist() == [1, 2] and got[1].dtype == np.float64
    with pytest.raises(UnreadableContents):
        TupleCache(NotAList(), 4).read_arrays()
