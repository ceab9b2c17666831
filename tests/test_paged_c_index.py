"""The paged index math of csrc/pagedkv_index.h, compiled for the host (impl._pagedindex), against its
mirror pyspec/paged_index.py, and the mirror against the semantics' own wording.

Exhaustive on small scopes (windows <= 7, blocks <= 5, every n up to several windows), plus the
int64 edges the header promises to handle without overflow. The gather kernel's index loop
(pkvh_gather_plan, the sequential form of what its threads compute) is checked against the
mirror and against reading the history through a block table. Runs everywhere: no GPU, no nvcc.
"""

from __future__ import annotations

import random
import re

import pytest

from pyspec import last_window
from pyspec import paged_index as M

idx = pytest.importorskip("impl._pagedindex", reason="impl._pagedindex not built (pip install -e .)")
ffi, lib = idx.ffi, idx.lib
I64 = 2**63 - 1
WINDOWS, BLOCKS = range(1, 8), range(1, 6)


def scope():
    for w in WINDOWS:
        for b in BLOCKS:
            for n in range(0, 3 * (w + b) + 2):
                yield w, b, n


def test_every_function_matches_the_mirror_exhaustively():
    for w, b, n in scope():
        assert lib.pkv_table_len(n, b) == M.pkv_table_len(n, b)
        assert lib.pkv_first_needed(n, w) == M.pkv_first_needed(n, w)
        assert lib.pkv_needed_len(n, w) == M.pkv_needed_len(n, w)
        assert lib.pkv_first_kept_block(n, w, b) == M.pkv_first_kept_block(n, w, b)
        assert bool(lib.pkv_starts_block(n, b)) == M.pkv_starts_block(n, b)
        assert lib.pkv_logical_block(n, b) == M.pkv_logical_block(n, b)
        assert lib.pkv_block_slot(n, b) == M.pkv_block_slot(n, b)
        for j in range(0, n // b + 3):
            assert bool(lib.pkv_block_released(n, w, b, j)) == M.pkv_block_released(n, w, b, j)
            assert lib.pkv_ring_index(j, w) == M.pkv_ring_index(j, w)
        for i in range(M.pkv_needed_len(n, w)):
            assert lib.pkv_gather_live(n, w, b, i) == M.pkv_gather_live(n, w, b, i)
            assert lib.pkv_gather_slot(n, w, b, i) == M.pkv_gather_slot(n, w, b, i)
        for N in range(1, 9):
            assert lib.pkv_table_cap(w, b, N) == M.pkv_table_cap(w, b, N)
        assert lib.pkv_max_blocks(w, b) == M.pkv_max_blocks(w, b)


def test_the_mirror_says_what_the_semantics_say():
    """Needed range = lastWindow (W-1) of positions; released = {j : (j+1)B <= n-W+1}, literally."""
    for w, b, n in scope():
        needed = last_window(w - 1, list(range(n)))
        assert M.pkv_needed_len(n, w) == len(needed)
        assert M.pkv_first_needed(n, w) == (needed[0] if needed else n)
        assert M.pkv_table_len(n, b) == len({p // b for p in range(n)})
        for j in range(0, n // b + 3):
            assert M.pkv_block_released(n, w, b, j) == ((j + 1) * b <= n - w + 1)
        # Released blocks hold no needed position; kept blocks each hold one (or an unwritten slot).
        kept = range(M.pkv_first_kept_block(n, w, b), M.pkv_table_len(n, b))
        assert all(not any(j * b <= p < (j + 1) * b for p in needed) for j in range(kept.start))
        assert all(any(j * b <= p < (j + 1) * b for p in needed) or (j + 1) * b > n for j in kept)
        for i, p in enumerate(needed):
            assert (M.pkv_gather_live(n, w, b, i), M.pkv_gather_slot(n, w, b, i)) == (p // b - kept.start, p % b)


def test_max_blocks_is_the_tight_bound_and_sizes_the_ring():
    """A sequence never holds more than ceil((W-1)/B)+1 blocks — also at the moment an append takes a
    block, before its freeing step — the bound is reached, and the live blocks map to distinct ring slots."""
    for w in WINDOWS:
        for b in BLOCKS:
            k = M.pkv_max_blocks(w, b)
            assert k == -(-(w - 1) // b) + 1
            spans = []
            for n in range(0, 4 * (w + b)):
                fk = M.pkv_first_kept_block(n, w, b)
                live = list(range(fk, M.pkv_table_len(n, b)))
                spans.append(len(live))
                if M.pkv_starts_block(n, b):  # the append at n takes block n/b before releasing
                    live = list(range(fk, n // b + 1))
                    spans.append(len(live))
                assert len({M.pkv_ring_index(j, k) for j in live}) == len(live) <= k
            assert max(spans) == k, (w, b, spans)


def test_int64_edges_do_not_overflow():
    cases = [(I64, 1, I64 - 1), (I64, 2, I64), (1, 1, I64), (2, I64, I64), (I64, I64, I64), (3, 5, I64 - 3)]
    for w, b, n in cases:
        assert lib.pkv_first_needed(n, w) == M.pkv_first_needed(n, w)
        assert lib.pkv_needed_len(n, w) == M.pkv_needed_len(n, w)
        assert lib.pkv_first_kept_block(n, w, b) == M.pkv_first_kept_block(n, w, b)
        assert lib.pkv_table_len(n, b) == M.pkv_table_len(n, b)
        assert lib.pkv_max_blocks(w, b) == M.pkv_max_blocks(w, b)
        assert lib.pkv_table_cap(w, b, I64) == M.pkv_table_cap(w, b, I64)
        j = n // b
        assert bool(lib.pkv_block_released(n, w, b, j)) == M.pkv_block_released(n, w, b, j)


def test_pool_and_dense_rows_are_bijections():
    b, N, w, S = 3, 4, 5, 3
    assert [lib.pkv_pool_row(p, s, b) for p in range(N) for s in range(b)] == list(range(N * b))
    assert [lib.pkv_dense_row(q, i, w) for q in range(S) for i in range(w - 1)] == list(range(S * (w - 1)))
    assert [M.pkv_dense_row(q, i, w) for q in range(S) for i in range(w - 1)] == list(range(S * (w - 1)))
    with pytest.raises(ValueError, match="slot must be < block size 3"):
        M.pkv_pool_row(0, 3, 3)
    with pytest.raises(ValueError, match="window must be >= 1"):
        M.pkv_first_needed(3, 0)


def test_gather_plan_reads_every_needed_entry_through_the_table():
    """The kernel's rows: sequence q's dense row i reads the pool row holding position first_needed + i,
    found through its live table; rows past the needed length are -1 (zero-filled)."""
    rng = random.Random(5)
    for w in range(1, 9):
        for b in range(1, 5):
            seqs = rng.randint(1, 4)
            ns = [rng.randint(0, 4 * w + 2) for _ in range(seqs)]
            stride = M.pkv_max_blocks(w, b)
            N = seqs * stride + 3
            perm = rng.sample(range(N), seqs * stride)  # distinct physical blocks, as a pool gives
            live = [perm[q * stride:(q + 1) * stride] for q in range(seqs)]
            rows = ffi.new("int64_t[]", max(1, seqs * (w - 1)))
            filled = lib.pkvh_gather_plan(seqs, ffi.new("int64_t[]", ns), w, b,
                                          ffi.new("int64_t[]", [x for t in live for x in t]), stride, rows)
            # A pool where slot s of block x holds the position its table says: read positions back.
            where = {}
            for q in range(seqs):
                fk = M.pkv_first_kept_block(ns[q], w, b)
                for t, x in enumerate(live[q]):
                    for s in range(b):
                        where[(q, M.pkv_pool_row(x, s, b))] = (fk + t) * b + s
            assert filled == sum(M.pkv_needed_len(n, w) for n in ns)
            for q in range(seqs):
                for i in range(w - 1):
                    r = rows[M.pkv_dense_row(q, i, w)]
                    assert r == M.pkv_gather_row(ns[q], w, b, live[q], i)
                    want = last_window(w - 1, list(range(ns[q])))
                    assert (r == -1) == (i >= len(want))
                    if r >= 0:
                        assert where[(q, r)] == want[i]


def test_binding_declares_every_header_function():
    from impl import _pagedindex_build as build
    from impl._ring_build import CSRC

    text = (CSRC / "pagedkv_index.h").read_text()
    defined = re.findall(r"PKV_HD\s+[\w\s\*]*?\b(pkv_\w+)\(", text)
    declared = re.findall(r"\b(pkv_\w+)\(", build.header_declarations())
    assert declared == defined and len(defined) == 16
    mirrored = {n for n in dir(M) if n.startswith("pkv_")}
    assert mirrored == set(defined), "pyspec/paged_index.py names one function per C twin"
    for name in defined:
        assert callable(getattr(lib, name))


def test_binding_without_markers_fails_loudly(tmp_path):
    from impl import _pagedindex_build as build

    bare = tmp_path / "pagedkv_index.h"
    bare.write_text("PKV_HD int64_t pkv_table_len(int64_t n, int64_t b) { return n; }\n")
    with pytest.raises(RuntimeError, match="cffi:begin"):
        build.header_declarations(bare)
