"""The CUDA kernels' index math, compiled for the CPU (``impl._cudaindex``), against pyspec.

Runs everywhere: no GPU and no nvcc needed. Exhaustive on small scopes (windows <= 6)
for the header functions and the kernels' index loops (``rkvh_*_plan``), a short
``cuda-index`` campaign, and negative controls showing the target catches broken plans.
"""

from __future__ import annotations

import pytest

import pyspec
from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.targets.base import Mismatch

idx = pytest.importorskip("impl._cudaindex", reason="impl._cudaindex not built (pip install -e .)")
ffi, lib = idx.ffi, idx.lib

WINDOWS = range(1, 7)


def ring_after(w: int, n: int) -> pyspec.Ring:
    return pyspec.ring.ring_run(w, list(range(n)))


def gather_plan(n: int, w: int) -> tuple[int, list[int]]:
    slots = ffi.new("int64_t[]", w)
    filled = lib.rkvh_gather_plan(n, w, slots)
    return filled, list(slots)


def test_len_oldest_match_positions_last_window():
    for w in WINDOWS:
        for n in range(0, 4 * w + 3):
            want = pyspec.positions_last_window(w, n)
            assert lib.rkv_len(n, w) == len(want)
            assert lib.rkv_oldest(n, w) == (want[0] if want else n)


def test_gather_plan_reads_the_ring_in_logical_order():
    """Logical row i reads the slot pyspec's Ring (Lean Ring.toList) reads; the rest are zero-filled."""
    for w in WINDOWS:
        for n in range(0, 4 * w + 3):
            ring = ring_after(w, n)
            filled, slots = gather_plan(n, w)
            assert filled == ring.size
            assert [ring.buf[s] for s in slots[:filled]] == ring.to_list() == pyspec.last_window(w, list(range(n)))
            assert slots[filled:] == [-1] * (w - filled)


def test_slot_valid_and_slot_pos_match_the_ring_buffer():
    for w in WINDOWS:
        for n in range(0, 4 * w + 3):
            ring = ring_after(w, n)
            for s in range(w):
                assert bool(lib.rkv_slot_valid(n, w, s)) == (ring.buf[s] is not None)
                if ring.buf[s] is not None:
                    assert lib.rkv_slot_pos(n, w, s) == ring.buf[s]
                    assert lib.rkv_slot(ring.buf[s], w) == s == pyspec.slot_of(ring.buf[s], w)


def test_valid_slots_are_exactly_the_window_of_the_newest_query():
    """Decode attention reads the valid slots; their positions are those inWindow of t = n-1."""
    for w in WINDOWS:
        for n in range(1, 4 * w + 3):
            t = n - 1
            seen = sorted(lib.rkv_slot_pos(n, w, s) for s in range(w) if lib.rkv_slot_valid(n, w, s))
            assert seen == [p for p in range(n) if pyspec.in_window(w, t, p)]
            assert all(bool(lib.rkv_in_window(w, t, p)) == pyspec.in_window(w, t, p) for p in range(n + 2))


def test_append_plan_equals_pushing_the_chunk():
    """Appending a chunk of any length (k > W included) writes distinct slots and leaves the
    ring exactly as pushing its entries one by one (Lean pushChunk_correct)."""
    for w in WINDOWS:
        for pos0 in range(0, 2 * w + 2):
            for k in range(0, 3 * w + 4):
                src = ffi.new("int64_t[]", max(k, 1))
                dst = ffi.new("int64_t[]", max(k, 1))
                kept = lib.rkvh_append_plan(pos0, k, w, src, dst, k)
                assert kept == min(k, w)
                plan = [(src[i], dst[i]) for i in range(kept)]
                assert len({d for _, d in plan}) == kept, "two writes to one slot (race)"
                before = ring_after(w, pos0)
                after = ring_after(w, pos0 + k)
                buf = list(before.buf)
                for s, d in plan:
                    buf[d] = pos0 + s
                assert buf == list(after.buf)
                # The single-token step kernel uses the k = 1 plan.
                assert lib.rkv_chunk_dst(pos0, 1, w, 0) == pyspec.slot_of(pos0, w)


def test_split_ranges_partition_the_valid_slots():
    for length in range(0, 25):
        for nsplit in range(1, 10):
            covered = []
            lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
            prev_hi = 0
            for j in range(nsplit):
                lib.rkv_split_range(length, nsplit, j, lo, hi)
                assert lo[0] == prev_hi and lo[0] <= hi[0] <= length
                covered.extend(range(lo[0], hi[0]))
                prev_hi = hi[0]
            assert covered == list(range(length))
            buf = ffi.new("int64_t[]", 64)
            assert lib.rkvh_decode_plan(length + 100, length or 1, nsplit, buf, 64) == (length or 1)


def test_cache_rows_are_a_bijection():
    B, L, H, W = 3, 2, 4, 5
    rows = [lib.rkv_cache_row(b, l, h, s, L, H, W)
            for b in range(B) for l in range(L) for h in range(H) for s in range(W)]
    assert rows == list(range(B * L * H * W))  # row-major [B][L][H][W], each window contiguous


def test_cuda_index_campaign_finds_nothing():
    from fuzz.targets.cuda_index import make_cuda_index

    res = fuzz_target(make_cuda_index(), CampaignConfig(seconds=8, max_examples=150, campaign_seed=7))
    assert not res.failures, res.failures
    assert res.examples > 0


def test_cuda_index_replays_boundary_cases():
    from fuzz.targets.cuda_index import make_cuda_index

    t = make_cuda_index()
    for window, ops in [(1, [Push(), Push(), Chunk(3)]), (4, [Chunk(4), Push(), Chunk(9)]),
                        (3, [Chunk(2), Reset(5), Push(), Chunk(11), Reset(5), Push()]),
                        (6, [Chunk(0), Push()] * 5 + [Chunk(19)])]:
        t.run(Case(window, ops))


# ---------------------------------------------------------------------------
# Negative controls: the target must catch broken index routines.


class _Proxy:
    """The compiled library with some functions replaced by broken Python versions."""

    def __init__(self, **overrides):
        self._o = overrides

    def __getattr__(self, name):
        return self._o.get(name) or getattr(lib, name)


def _gather_order_while_filling(n, w, slots):
    filled = lib.rkvh_gather_plan(n, w, slots)
    for i in range(filled):  # (n + i) % w: right once full, garbage slots while filling
        slots[i] = (n + i) % w
    return filled


def _append_all_entries(pos0, k, w, src, dst, cap):
    """Writes every chunk entry (not just the last W): slot collisions when k > W."""
    for i in range(min(k, cap)):
        src[i], dst[i] = i, (pos0 + i) % w
    return k


def _decode_reads_one_unfilled(n, w, nsplit, slots, cap):
    count = lib.rkvh_decode_plan(n, w, nsplit, slots, cap)
    if count < w and count < cap:  # one unfilled slot too many while not full
        slots[count] = count
        count += 1
    return count


def _slot_pos_of_slot(n, w, s):
    return s  # "slot index is the position": wrong once the ring wraps


@pytest.mark.parametrize("overrides,window,ops", [
    ({"rkvh_gather_plan": _gather_order_while_filling}, 4, [Chunk(2)]),
    ({"rkvh_append_plan": _append_all_entries}, 2, [Chunk(5)]),
    ({"rkvh_decode_plan": _decode_reads_one_unfilled}, 4, [Push()]),
    ({"rkv_slot_pos": _slot_pos_of_slot}, 3, [Chunk(4)]),
], ids=["gather-order-while-filling", "append-whole-chunk", "decode-unfilled-slot", "slot-index-as-position"])
def test_cuda_index_target_catches_broken_index_math(monkeypatch, overrides, window, ops):
    from fuzz.targets import cuda_index as cuda_targets

    monkeypatch.setattr(cuda_targets, "_index_lib", lambda: (ffi, _Proxy(**overrides)))
    with pytest.raises(Mismatch):
        cuda_targets.make_cuda_index().run(Case(window, ops))


# -- the binding is the header ----------------------------------------------------


def test_binding_declares_every_header_function():
    """impl._cudaindex's declarations are read from csrc/ringkv_index.h, one per RKV_HD function."""
    import re

    from impl import _cudaindex_build as build
    from impl._ring_build import CSRC

    text = (CSRC / "ringkv_index.h").read_text()
    defined = re.findall(r"RKV_HD\s+\w+\s+(rkv_\w+)\(", text)
    declared = re.findall(r"\b(rkv_\w+)\(", build.header_declarations())
    assert declared == defined and len(defined) >= 13
    for name in defined:
        assert callable(getattr(lib, name))


def test_binding_without_markers_fails_loudly(tmp_path):
    from impl import _cudaindex_build as build

    bare = tmp_path / "ringkv_index.h"
    bare.write_text("RKV_HD int64_t rkv_len(int64_t n, int64_t w) { return n; }\n")
    with pytest.raises(RuntimeError, match="cffi:begin"):
        build.header_declarations(bare)
