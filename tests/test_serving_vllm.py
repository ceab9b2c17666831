"""vLLM's real KV-cache manager (impl/serving/vllm.py) against the C reference pool, op by op.

Runs under ``.venv-serving/bin/python -m pytest tests/test_serving_vllm.py`` (build it with
``scripts/install_serving_cores.sh``); elsewhere every test skips with the reason. Random streams of
add / append / chunk / free / admit / bad reads go to the adapter and to ``impl.paged.PagedC``;
every live sequence's read must equal the reference's and ``lastWindow (W-1)`` of the history after
every op (tests/support/serving_diff.py says what is recorded as efficiency instead). Negative
controls: the same adapter with the window mapped one off (``sliding_window = W - 1`` or ``W + 1``)
is caught, so the convention ``sliding_window = W`` is what the streams check.
"""

from __future__ import annotations

import numpy as np
import pytest

from impl.engines import EngineUnavailable
from tests.support.serving_diff import Divergences, run_diff

try:
    from impl.serving._imports import import_vllm

    VLLM = import_vllm()
    REASON = ""
except EngineUnavailable as e:  # not installed here, or a release the adapter cannot drive
    VLLM, REASON = None, str(e)

pytestmark = pytest.mark.skipif(VLLM is None, reason=f"vLLM's block manager is not importable: {REASON}")

if VLLM is not None:
    from impl.paged import PoolExhaustedError, PositionError, UnknownSequenceError
    from impl.serving._base import Unsupported
    from impl.serving.vllm import VllmHybrid, VllmSwa

    class _OffByOne(VllmSwa):
        """A negative control: the adapter with the window mapped ``W + offset`` (at least 1)."""

        offset = 0

        def engine_window(self, W):
            return max(1, W + self.offset)


def _ent(pos, tok, d=2):
    return (pos, np.full(d, tok, np.float32), np.full(d, tok + 10, np.float32))


def _total(cls, seeds, **kw) -> Divergences:
    tot = Divergences()
    for seed in seeds:
        tot.merge(run_diff(cls(), seed, **kw))
    return tot


def test_vllm_swa_matches_the_reference_on_random_streams():
    tot = _total(VllmSwa, range(200))
    assert tot.correctness == [] and tot.reference == [], (tot.correctness[:5], tot.reference[:5])
    # The streams are not vacuous: hits, refusals and every op happened.
    assert tot.counts["hits"] >= 100 and tot.counts["chunk"] >= 1000, tot.counts
    # Retention is the spec's exactly (eager freeing through vLLM's own remove_skipped_blocks).
    assert tot.efficiency["held"] == 0 and tot.efficiency["held_over_bound"] == 0, tot.examples
    # The only short hits are W = 1 (vLLM needs one cached block to grant a hit; see docs/findings).
    assert tot.efficiency["short_hit"] == 0, tot.examples.get("short_hit")


def test_vllm_hybrid_matches_the_reference_on_random_streams():
    tot = _total(VllmHybrid, range(150), hybrid_factor=4)
    assert tot.correctness == [] and tot.reference == [], (tot.correctness[:5], tot.reference[:5])
    assert tot.counts["hits"] >= 100, tot.counts
    assert tot.efficiency["held"] == 0 and tot.efficiency["held_over_bound"] == 0, tot.examples


@pytest.mark.parametrize("shape", [(1, 1, 4, 1), (2, 1, 3, 1), (5, 2, 3, 2), (9, 4, 2, 1), (64, 3, 30, 1),
                                   (4, 16, 3, 1)],
                         ids=["W1-B1", "W2-B1", "tight-pool", "W>B*N", "long-window", "big-block"])
def test_vllm_swa_edge_shapes(shape):
    tot = _total(VllmSwa, range(500, 515), shape=shape, ops=50)
    assert tot.correctness == [] and tot.reference == [], tot.correctness[:5]


@pytest.mark.parametrize("offset", [-1, 1])
def test_a_window_mapped_one_off_is_caught(offset):
    """``sliding_window = W - 1`` frees a needed block (a wrong read); ``W + 1`` holds one position
    too many (blocks held past the freeing rule): the streams tell both from ``sliding_window = W``."""
    cls = type(f"OffBy{offset}", (_OffByOne,), {"offset": offset})
    tot = _total(cls, range(40), shape=None)
    if offset < 0:
        assert tot.correctness, "sliding_window = W - 1 was not caught"
        assert any("read of sequence" in c or "released while needed" in c for c in tot.correctness)
    else:
        assert tot.efficiency["held"] > 0, dict(tot.efficiency)


def test_the_convention_is_sliding_window_equals_w():
    a = VllmSwa()
    a.configure(5, 2, 8, 1)
    spec = a._m.kv_cache_config.kv_cache_groups[0].kv_cache_spec
    assert type(spec).__name__ == "SlidingWindowSpec" and spec.sliding_window == 5


def test_errors_are_typed_and_change_nothing():
    a = VllmSwa()
    a.configure(3, 2, 2, 2)
    a.add(0)
    with pytest.raises(PositionError):
        a.append(0, 1, *_ent(1, 1.0)[1:])
    with pytest.raises(UnknownSequenceError):
        a.append(9, 0, *_ent(0, 1.0)[1:])
    a.append_chunk(0, [_ent(i, float(i)) for i in range(4)])
    before = (a.read(0), a.table(0), a.free_blocks())
    a.add(1)
    with pytest.raises(PoolExhaustedError):
        a.append_chunk(1, [_ent(i, 7.0) for i in range(3)])  # needs 2 blocks, 0 free
    after = (a.read(0), a.table(0), a.free_blocks())
    assert str(before) == str(after) and a.read(1) == [] and a.table(1) == []
    with pytest.raises(Unsupported, match="fork"):
        a.fork(0, 2)
    assert "fork" not in VllmSwa.ops


def test_a_refused_decode_step_rolls_the_request_back():
    a = VllmSwa()
    a.configure(8, 2, 3, 1)
    a.add(0)
    a.append_chunk(0, [_ent(i, float(i), 1) for i in range(6)])  # 3 blocks, all in the window
    req = a._seqs[0].req
    before = (list(req.all_token_ids), list(req.block_hashes), a.free_blocks())
    with pytest.raises(PoolExhaustedError):
        a.append(0, *_ent(6, 6.0, 1))
    assert (list(req.all_token_ids), list(req.block_hashes), a.free_blocks()) == before
    a.free(0)
    assert a.free_blocks() == 3


def test_a_prefix_hit_is_the_engines_own_and_keyed_by_identity():
    a = VllmSwa()
    a.configure(4, 2, 16, 1)
    prompt = [_ent(i, float(i % 3), 1) for i in range(9)]
    a.add(0)
    a.append_chunk(0, prompt[:8])
    assert a.longest_valid_hit(prompt) == 8
    assert a.admit(1, prompt) == 8  # the blocks of positions 5..7 (logical 2, 3) are cached
    assert [p for p, _, _ in a.read(1)] == [5, 6, 7]
    assert a.admit(2, prompt, identity=1) == 0  # another identity (cache_salt) hits nothing


def test_a_hit_one_block_short_is_recorded_as_efficiency():
    """A negative control for the hit-length check: vLLM asked for a hit at most one block shorter than it
    may grant (``max_cache_hit_length = m - 1 - B``; such hits stay valid, so reads stay right) is seen as
    ``short_hit``."""

    class Short(VllmSwa):
        def admit(self, seq, entries, identity=0):
            m, B = self._m, self._cfg[1]
            real = m.get_computed_blocks
            m.get_computed_blocks = lambda req: real(req, max_cache_hit_length=max(0, req.num_tokens - 1 - B))
            try:
                return super().admit(seq, entries, identity)
            finally:
                m.get_computed_blocks = real

    tot = _total(Short, range(60))
    assert tot.efficiency["short_hit"] > 0, dict(tot.efficiency)
