"""SGLang's real SWA allocator and window eviction (impl/serving/sglang.py) against the C reference pool.

Runs under ``.venv-serving/bin/python -m pytest tests/test_serving_sglang.py`` (build it with
``scripts/install_serving_cores.sh``); elsewhere every test skips with the reason. The same random
streams as tests/test_serving_vllm.py (without prefix hits: the adapter does not drive SGLang's
radix cache); every live sequence's read must equal the reference's and ``lastWindow (W-1)``, its
full-attention read the whole history. Negative controls: ``sliding_window_size = W`` (the HF value
without SGLang's ``- 1``) holds one position too many, ``W - 2`` evicts a needed one.
"""

from __future__ import annotations

import numpy as np
import pytest

from impl.engines import EngineUnavailable
from tests.support.serving_diff import Divergences, run_diff

try:
    from impl.serving._imports import import_sglang

    SGLANG = import_sglang()
    REASON = ""
except EngineUnavailable as e:
    SGLANG, REASON = None, str(e)

pytestmark = pytest.mark.skipif(SGLANG is None, reason=f"SGLang's SWA allocator is not importable: {REASON}")

if SGLANG is not None:
    from impl.paged import PoolExhaustedError, PositionError, UnknownSequenceError
    from impl.serving._base import Unsupported
    from impl.serving.sglang import SglangSwa

    class _OffByOne(SglangSwa):
        offset = 0

        def engine_window(self, W):
            return max(0, W - 1 + self.offset)


def _ent(pos, tok, d=2):
    return (pos, np.full(d, tok, np.float32), np.full(d, tok + 10, np.float32))


def _total(cls, seeds, **kw) -> Divergences:
    tot = Divergences()
    for seed in seeds:
        tot.merge(run_diff(cls(), seed, **kw))
    return tot


def test_sglang_swa_matches_the_reference_on_random_streams():
    tot = _total(SglangSwa, range(150))
    assert tot.correctness == [] and tot.reference == [], (tot.correctness[:5], tot.reference[:5])
    assert tot.counts["chunk"] >= 800 and tot.counts["append"] >= 1500, tot.counts
    assert tot.efficiency["held"] == 0 and tot.efficiency["held_over_bound"] == 0, tot.examples


@pytest.mark.parametrize("shape", [(1, 1, 4, 1), (2, 1, 3, 1), (5, 2, 3, 2), (9, 4, 2, 1), (64, 3, 30, 1),
                                   (4, 16, 3, 1)],
                         ids=["W1-B1", "W2-B1", "tight-pool", "W>B*N", "long-window", "big-block"])
def test_sglang_swa_edge_shapes(shape):
    tot = _total(SglangSwa, range(500, 512), shape=shape, ops=50)
    assert tot.correctness == [] and tot.reference == [], tot.correctness[:5]


@pytest.mark.parametrize("offset", [-1, 1])
def test_a_window_mapped_one_off_is_caught(offset):
    cls = type(f"OffBy{offset}", (_OffByOne,), {"offset": offset})
    tot = _total(cls, range(40))
    if offset < 0:
        assert any("read of sequence" in c or "released while needed" in c for c in tot.correctness), \
            "sliding_window_size = W - 2 was not caught"
    else:
        assert tot.efficiency["held"] > 0, dict(tot.efficiency)


def test_errors_are_typed_and_change_nothing():
    a = SglangSwa()
    a.configure(3, 2, 2, 2)
    a.add(0)
    with pytest.raises(PositionError):
        a.append(0, 1, *_ent(1, 1.0)[1:])
    with pytest.raises(UnknownSequenceError):
        a.append(9, 0, *_ent(0, 1.0)[1:])
    a.append_chunk(0, [_ent(i, float(i)) for i in range(4)])
    before = (str(a.read(0)), a.table(0), a.free_blocks())
    a.add(1)
    with pytest.raises(PoolExhaustedError):
        a.append_chunk(1, [_ent(i, 7.0) for i in range(3)])
    assert (str(a.read(0)), a.table(0), a.free_blocks()) == before and a.read(1) == []
    for op, args in (("fork", (0, 2)), ("admit", (2, [_ent(0, 1.0)]))):
        with pytest.raises(Unsupported, match=op):
            getattr(a, op)(*args)
        assert op not in SglangSwa.ops
    a.free(0)
    a.free(1)
    assert a.free_blocks() == 2


def test_eviction_is_sglangs_own_and_page_granular():
    a = SglangSwa()
    a.configure(4, 2, 8, 1)
    a.add(0)
    for i in range(9):
        a.append(0, *_ent(i, float(i), 1))
    # n = 9: the next query needs 6..8; logical blocks 0..2 (positions 0..5) are evicted.
    assert a.table(0)[:3] == [None, None, None] and None not in a.table(0)[3:]
    assert [p for p, _, _ in a.read(0)] == [6, 7, 8]
    assert [p for p, _, _ in a.read_full(0)] == list(range(9))
