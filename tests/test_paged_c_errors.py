"""The paged pool's error contract: every documented error returns its code (a typed exception through
PagedC, the status through the raw C call) and changes nothing.

"Nothing" is checked two ways on twin pools built by the same ops: right after the refused call
every observable (each table, read bits, length, identity, every refcount, the free count, the
live sequences) equals the twin's; and a probe run afterwards on both (new sequences that take
free blocks, an admit that reads the prefix cache) gives the same answers — so the order of the
free list and the cached content identities were not touched either. Broken copies of pagedkv.c
whose error paths change state or answer with the wrong status are caught.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from impl import paged as P
from tests.support.paged_model import entry, observe_pool

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build broken copies of the pool")
D = 2


def ent(pos, tok):
    return (pos, np.full(D, tok, dtype=np.float32), np.full(D, tok + 0.5, dtype=np.float32))


def roomy(pool):
    """W=4, B=2, N=8: a forked pair sharing a partial block, a cached prefix, free blocks left."""
    pool.configure(4, 2, 8, D)
    pool.add(0)
    pool.append_chunk(0, [ent(i, i % 3) for i in range(7)])
    pool.fork(0, 1)
    pool.add(2)
    pool.append_chunk(2, [ent(i, 9) for i in range(4)])
    pool.free(2)  # its blocks stay cached on the free list


def tight(pool):
    """W=6, B=2, N=4: one free block; sequence 1 shares sequence 0's partial block."""
    pool.configure(6, 2, 4, D)
    pool.add(0)
    pool.append_chunk(0, [ent(i, i) for i in range(5)])
    pool.fork(0, 1)


def full(pool):
    """Like ``tight``, with the last free block filled by sequence 2."""
    tight(pool)
    pool.add(2)
    pool.append_chunk(2, [ent(0, 7), ent(1, 7)])


def state(pool) -> dict:
    return {"observed": observe_pool(pool, pool.sequences()), "live": pool.sequences()}


def probe(pool) -> list:
    """Ops whose answers depend on the free list's order and the prefix cache."""
    out = []
    for s in (100, 101):
        pool.add(s)
        try:
            pool.append_chunk(s, [ent(i, 5) for i in range(3)])
        except P.PoolExhaustedError:
            out.append("exhausted")
        out.append(pool.table(s))
    for s, tag in ((200, 0), (201, 1)):
        out.append(pool.admit(s, [ent(i, i % 3) for i in range(9)], tag))
        out.append(pool.table(s))
    out.append(state(pool))
    return out


def raw(pool, fn, *args):
    """A direct C call on the pool's handle (for what PagedC never lets through: short buffers, NULL data)."""
    return getattr(pool._lib, fn)(pool._h, *args)


def short_read(pool):
    ffi = pool._ffi
    buf, out = ffi.new("int64_t[]", [-99] * 4), ffi.new("int64_t *")
    rc = raw(pool, "pagedkv_read", 0, 1, buf, ffi.NULL, ffi.NULL, out)
    assert (rc, out[0], list(buf)) == (P.E_CAPACITY, 3, [-99] * 4), "a short read reports the length, writes nothing"
    rc = raw(pool, "pagedkv_table", 0, 2, buf, out)
    assert (rc, out[0], list(buf)) == (P.E_CAPACITY, 4, [-99] * 4)
    return rc


def c_status(code):
    def check(pool, fn, *args):
        ffi = pool._ffi
        conv = [ffi.NULL if a is None else a for a in args]
        assert raw(pool, fn, *conv) == code
    return check


KEY = np.zeros(D, np.float32)
# (name, setup, call, exception, regex of the message)
BAD = [
    ("add-existing", roomy, lambda p: p.add(1), P.DuplicateSequenceError, "sequence 1 already exists"),
    ("add-negative", roomy, lambda p: p.add(-5), P.RangeError, "sequence id -5 is negative"),
    ("append-unknown", roomy, lambda p: p.append(9, 0, KEY, KEY), P.UnknownSequenceError, "sequence 9 does not"),
    ("append-gap", roomy, lambda p: p.append(1, 8, KEY, KEY), P.PositionError, "position 8 .*next position is 7"),
    ("append-duplicate", roomy, lambda p: p.append(1, 6, KEY, KEY), P.PositionError, "position 6"),
    ("append-width", roomy, lambda p: p.append(1, 7, np.zeros(3), KEY), P.WidthError, r"shape \(3,\)"),
    ("chunk-gap", roomy, lambda p: p.append_chunk(0, [ent(8, 0)]), P.PositionError, "position 8"),
    ("chunk-skip", roomy, lambda p: p.append_chunk(0, [ent(7, 0), ent(9, 0)]), P.PositionError,
     "entry 1 has position 9, expected 8"),
    ("chunk-unknown", roomy, lambda p: p.append_chunk(9, [ent(0, 0)]), P.UnknownSequenceError, "sequence 9"),
    ("fork-unknown", roomy, lambda p: p.fork(9, 10), P.UnknownSequenceError, "sequence 9 does not exist"),
    ("fork-onto-existing", roomy, lambda p: p.fork(0, 1), P.DuplicateSequenceError, "sequence 1 already"),
    ("fork-negative", roomy, lambda p: p.fork(0, -1), P.RangeError, "-1"),
    ("free-unknown", roomy, lambda p: p.free(9), P.UnknownSequenceError, "sequence 9"),
    ("table-unknown", roomy, lambda p: p.table(2), P.UnknownSequenceError, "sequence 2 does not exist"),
    ("length-unknown", roomy, lambda p: p.length(2), P.UnknownSequenceError, "sequence 2"),
    ("refcount-range", roomy, lambda p: p.refcount(8), P.RangeError, "block 8"),
    ("admit-existing", roomy, lambda p: p.admit(0, [ent(0, 0)]), P.DuplicateSequenceError, "sequence 0 already"),
    ("admit-empty", roomy, lambda p: p.admit(5, []), P.RangeError, "at least 1"),
    ("admit-positions", roomy, lambda p: p.admit(5, [ent(0, 0), ent(2, 0)]), P.PositionError, "prompt entry 1"),
    ("configure-bad", roomy, lambda p: p.configure(4, 2, 0, D), P.ConfigError, "num_blocks 0"),
    ("configure-huge", roomy, lambda p: p.configure(4, 2**40, 2**40, D), P.AllocationError, "block_size 1099511627776"),
    ("append-exhausted", full, lambda p: p.append(2, 2, KEY, KEY), P.PoolExhaustedError, "position 2"),
    ("copy-on-write-exhausted", full, lambda p: p.append(1, 5, KEY, KEY), P.PoolExhaustedError, "position 5"),
    ("chunk-exhausted-part-way", tight, lambda p: p.append_chunk(0, [ent(5 + i, 1) for i in range(4)]),
     P.PoolExhaustedError, "chunk of 4 entries from position 5"),
    ("chunk-copy-exhausted", full, lambda p: p.append_chunk(1, [ent(5, 1), ent(6, 1)]), P.PoolExhaustedError,
     "chunk of 2"),
    ("c-short-read", roomy, short_read, None, None),
    ("c-negative-count", roomy, lambda p: c_status(P.E_RANGE)(p, "pagedkv_append_chunk", 0, 7, -1, None, None),
     None, None),
    ("c-negative-capacity", roomy, lambda p: c_status(P.E_RANGE)(p, "pagedkv_read", 0, -1, None, None, None,
                                                                  p._ffi.new("int64_t *")), None, None),
    ("c-null-data", roomy, lambda p: c_status(P.E_NULL)(p, "pagedkv_append", 0, 7, None, None), None, None),
    ("c-null-out", roomy, lambda p: c_status(P.E_NULL)(p, "pagedkv_admit", 5, 0, 1, None, None, None), None, None),
]


CODE = {cls: code for code, cls in P._ERRORS.items()} | {P.WidthError: P.E_CONFIG}


def check_contract(bad, setup, call, exc, regex, backend=None):
    a, b = P.PagedC(backend=backend), P.PagedC(backend=backend)
    setup(a)
    setup(b)
    if exc is None:
        call(a)
    else:
        with pytest.raises(exc, match=regex) as e:
            call(a)
        assert type(e.value) is exc and e.value.code == CODE[exc], f"{bad}: status {e.value.code}"
    assert state(a) == state(b), f"{bad}: the refused call changed the pool"
    assert probe(a) == probe(b), f"{bad}: the refused call changed the free list or the prefix cache"


@pytest.mark.parametrize("bad,setup,call,exc,regex", BAD, ids=[b[0] for b in BAD])
def test_every_documented_error_changes_nothing(bad, setup, call, exc, regex):
    check_contract(bad, setup, call, exc, regex)


def test_the_exhausted_setups_are_what_they_say():
    """The exhaustion cases are meaningful: the pool has exactly the free blocks the names claim,
    and the refused calls succeed once a block is free."""
    p = P.PagedC()
    tight(p)
    assert p.free_blocks() == 1 and p.refcount(p.table(1)[-1]) == 2
    p.append_chunk(0, [ent(5, 1)])  # 1 entry fits: its copy on write takes the free block
    assert p.free_blocks() == 0 and p.table(0)[-1] == 3 and p.table(1)[-1] == 2
    full_pool = P.PagedC()
    full(full_pool)
    assert full_pool.free_blocks() == 0
    full_pool.free(2)
    full_pool.append(1, 5, KEY, KEY)
    assert full_pool.table(1)[-1] != full_pool.table(0)[-1]


# Copies whose error paths break the contract: each is caught by check_contract.
BROKEN = [
    # The position is checked after the write: a refused append still appends.
    (("  if (pos != p->seqs[si].n) return PAGEDKV_E_POSITION;\n  if (pos == INT64_MAX) return PAGEDKV_E_RANGE;\n"
      "  if (!chunk_fits(p, si, 1)) return PAGEDKV_E_EXHAUSTED;\n  append_one(p, si, key, value);\n  return PAGEDKV_OK;",
      "  int64_t want = p->seqs[si].n;\n  if (!chunk_fits(p, si, 1)) return PAGEDKV_E_EXHAUSTED;\n"
      "  append_one(p, si, key, value);\n  return pos != want ? PAGEDKV_E_POSITION : PAGEDKV_OK;"), "append-gap",
     "next position is 8;"),  # the refused append moved the sequence on: its error names the new next position
    # An exhausted chunk keeps the appends that fitted.
    (("  if (!chunk_fits(p, si, n)) return PAGEDKV_E_EXHAUSTED;\n  for (int64_t k = 0; k < n; k++) append_one(",
      "  for (int64_t k = 0; k < n; k++) if (!chunk_fits(p, si, 1)) return PAGEDKV_E_EXHAUSTED; else append_one("),
     "chunk-exhausted-part-way", "changed the pool"),
    # A duplicate add answers "range".
    (("  if (rc == PAGEDKV_OK) rc = reserve_seq(p);\n  if (rc == PAGEDKV_OK) seq_insert(p, seq, 0, 0, chain_root(0));",
      "  if (rc == PAGEDKV_E_DUPLICATE_SEQ) rc = PAGEDKV_E_RANGE;\n  if (rc == PAGEDKV_OK) rc = reserve_seq(p);\n"
      "  if (rc == PAGEDKV_OK) seq_insert(p, seq, 0, 0, chain_root(0));"), "add-existing", "status 9"),
    # A short read fills the caller's buffer before it reports the capacity error.
    (("  *out_len = len;\n  if (capacity < len) return PAGEDKV_E_CAPACITY;\n  const int64_t *t = tab_of(p, si), first",
      "  *out_len = len;\n  if (capacity < len && positions) positions[0] = 0;\n  if (capacity < len) return "
      "PAGEDKV_E_CAPACITY;\n  const int64_t *t = tab_of(p, si), first"), "c-short-read", "writes nothing"),
]


@needs_cc
@pytest.mark.parametrize("edit,bad,message", BROKEN, ids=["write-before-check", "chunk-half-applied", "wrong-status",
                                                  "short-read-writes"])
def test_a_broken_error_path_is_caught(tmp_path, edit, bad, message):
    from impl._paged_build import compile_paged_library

    backend = P.load_paged_library(compile_paged_library(tmp_path / "lib.so", replace=edit))
    (row,) = [r for r in BAD if r[0] == bad]
    with pytest.raises((AssertionError, P.PagedKVError), match=message):
        check_contract(*row, backend=backend)
    check_contract(*row)  # and the real pool passes the same check
