"""The C paged pool's binding: the header is the binding (every function bound, every symbol checked at
load), the Python paged protocol over it (types, copies, array entry points, typed exceptions that
name the bad value), independence of pools, and payload bits kept exactly."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from impl import paged as P
from tests.support.paged_model import Model, entry, run_stream

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build copies of the pool")

HEADER_FUNCTIONS = ["pagedkv_strerror", "pagedkv_create", "pagedkv_destroy", "pagedkv_config", "pagedkv_add",
                    "pagedkv_append", "pagedkv_append_chunk", "pagedkv_fork", "pagedkv_free", "pagedkv_read",
                    "pagedkv_table", "pagedkv_free_blocks", "pagedkv_length", "pagedkv_identity",
                    "pagedkv_refcount", "pagedkv_admit"]


def ent(pos, tok, d=2):
    return (pos, np.full(d, tok, dtype=np.float32), np.full(d, -tok - 1, dtype=np.float32))


def test_binding_declares_the_header():
    from impl._paged_build import cdef

    assert P.header_symbols(cdef()) == sorted(HEADER_FUNCTIONS)
    lib = P.api_backend().lib
    names = ["PAGEDKV_OK", "PAGEDKV_E_NULL", "PAGEDKV_E_CONFIG", "PAGEDKV_E_NOMEM", "PAGEDKV_E_UNKNOWN_SEQ",
             "PAGEDKV_E_DUPLICATE_SEQ", "PAGEDKV_E_POSITION", "PAGEDKV_E_EXHAUSTED", "PAGEDKV_E_CAPACITY",
             "PAGEDKV_E_RANGE"]
    assert [getattr(lib, n) for n in names] == list(range(10))
    assert (P.OK, P.E_EXHAUSTED, P.E_RANGE) == (0, 7, 9)


def test_strerror_is_distinct_per_code():
    b = P.api_backend()
    texts = [b.ffi.string(b.lib.pagedkv_strerror(c)) for c in range(10)]
    assert len(set(texts)) == 10
    assert b.ffi.string(b.lib.pagedkv_strerror(99)) == b.ffi.string(b.lib.pagedkv_strerror(-1)) not in texts


@needs_cc
def test_load_checks_every_symbol(tmp_path):
    from impl._paged_build import compile_paged_library

    lib = compile_paged_library(tmp_path / "libok.so")
    pool = P.PagedC(backend=P.load_paged_library(lib))
    assert run_stream(pool, seed=3)["forks"] > 0  # ABI mode drives a copy like the API module
    broken = compile_paged_library(tmp_path / "libmissing.so", replace=(
        "int pagedkv_identity(const pagedkv_t *p", "int pagedkv_identity_renamed(const pagedkv_t *p"))
    with pytest.raises(P.LibraryError, match="does not export pagedkv_identity") as e:
        P.load_paged_library(broken)
    assert e.value.symbol == "pagedkv_identity"
    (tmp_path / "notalib.so").write_text("not an ELF file")
    with pytest.raises(P.LibraryError, match="not a loadable shared library"):
        P.load_paged_library(tmp_path / "notalib.so")


def test_the_protocol_walkthrough_with_types():
    pool = P.PagedC()
    pool.configure(4, 2, 6, 2)
    assert pool.config == (4, 2, 6, 2) and pool.free_blocks() == 6
    pool.add(5)
    pool.append_chunk(5, [ent(i, i) for i in range(7)])
    assert pool.table(5) == [None, None, 2, 3]
    got = pool.read(5)
    assert [p for p, _, _ in got] == [4, 5, 6] and all(type(p) is int for p, _, _ in got)
    assert all(k.dtype == np.float32 and k.shape == (2,) for _, k, _ in got)
    assert got[0][1].tolist() == [4.0, 4.0] and got[0][2].tolist() == [-5.0, -5.0]
    pool.fork(5, 9)
    assert [pool.refcount(x) for x in range(6)] == [0, 0, 2, 2, 0, 0]
    pool.append(9, 7, np.ones(2), np.ones(2))
    assert pool.table(9) == [None, None, 2, 4] and pool.table(5) == [None, None, 2, 3]
    assert pool.read(5)[2][1].tolist() == [6.0, 6.0], "the source's read is not changed by the fork's append"
    assert pool.length(9) == 8 and pool.identity(9) == 0 and pool.sequences() == [5, 9]
    pool.free(5)
    pool.free(9)
    assert pool.free_blocks() == 6 and pool.sequences() == []
    assert pool.admit(1, [ent(i, i) for i in range(9)]) == 6  # blocks 1, 2 still cached
    assert pool.table(1) == [None, 1, 2] and pool.identity(1) == 0
    assert pool.admit(2, [ent(i, i) for i in range(9)], identity=7) == 0 and pool.identity(2) == 7


def test_reads_are_copies_and_arrays_are_views():
    pool = P.PagedC()
    pool.configure(3, 2, 4, 2)
    pool.add(0)
    pool.append_arrays(0, np.arange(3), np.arange(6, dtype=np.float32).reshape(3, 2), np.zeros((3, 2)))
    first = pool.read(0)
    pos, keys, vals = pool.read_arrays(0)
    assert pos.tolist() == [1, 2] and keys.tolist() == [[2, 3], [4, 5]] and vals.shape == (2, 2)
    pool.append(0, 3, [9, 9], [9, 9])
    assert [p for p, _, _ in first] == [1, 2] and first[1][1].tolist() == [4, 5], "read() returns copies"
    pos2, keys2, _ = pool.read_arrays(0)
    assert pos2.tolist() == [2, 3] and keys2[1].tolist() == [9, 9]

    class Tensor:  # what the binding asks of a torch tensor (torch itself is slow to import)
        def __init__(self, a):
            self.a = a

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    pool.append_chunk(0, [(4, Tensor(np.ones(2)), Tensor(np.zeros(2)))])
    assert pool.read(0)[-1][0] == 4 and pool.read(0)[-1][1].tolist() == [1, 1]


def test_a_read_larger_than_the_buffers_is_seen_not_refused():
    pool = P.PagedC()
    pool.configure(100, 4, 30, 1)
    pool.add(3)
    pool.append_arrays(3, np.arange(90), np.arange(90, dtype=np.float32)[:, None], np.zeros((90, 1)))
    pos, keys, _ = pool.read_arrays(3)
    assert pos.tolist() == list(range(90)) and keys[:, 0].tolist() == list(range(90))


def test_exceptions_are_typed_and_name_the_bad_value():
    assert all(issubclass(c, P.PagedKVError) and issubclass(c, ValueError) for c in P._ERRORS.values())
    assert issubclass(P.AllocationError, MemoryError) and issubclass(P.UnknownSequenceError, LookupError)
    assert issubclass(P.WidthError, P.ConfigError)
    pool = P.PagedC()
    with pytest.raises(P.NullHandleError, match="call configure"):
        pool.add(1)
    with pytest.raises(P.ConfigError, match="block_size 0"):
        pool.configure(4, 0, 2, 2)
    with pytest.raises(P.AllocationError, match="num_blocks 9223372036854775807"):
        pool.configure(4, 1, 2**63 - 1, 2)
    pool.configure(4, 2, 1, 2)
    pool.add(3)
    with pytest.raises(P.DuplicateSequenceError, match="sequence 3 already exists") as e:
        pool.add(3)
    assert (e.value.code, e.value.func) == (P.E_DUPLICATE_SEQ, "pagedkv_add")
    with pytest.raises(P.UnknownSequenceError, match="sequence 77 does not exist"):
        pool.read(77)
    with pytest.raises(P.RangeError, match="sequence id -2 is negative"):
        pool.append(-2, 0, [0, 0], [0, 0])
    with pytest.raises(P.PositionError, match="position 4 .*next position is 0"):
        pool.append(3, 4, [0, 0], [0, 0])
    with pytest.raises(P.PositionError, match="entry 1 has position 5, expected 1"):
        pool.append_chunk(3, [ent(0, 1), ent(5, 1)])
    with pytest.raises(P.WidthError, match=r"key has shape \(3,\), the pool's width is 2"):
        pool.append(3, 0, [0, 0, 0], [0, 0])
    with pytest.raises(P.UnknownSequenceError):  # the sequence is checked before the payload, as in C
        pool.append(8, 0, [0, 0, 0], [0, 0])
    pool.append_chunk(3, [ent(0, 1), ent(1, 1)])
    with pytest.raises(P.PoolExhaustedError, match="position 2 .*0 of 1 blocks free"):
        pool.append(3, 2, [0, 0], [0, 0])
    with pytest.raises(P.RangeError, match="block 1 .*blocks 0 .. 0"):
        pool.refcount(1)
    with pytest.raises(P.RangeError, match="at least 1"):
        pool.admit(9, [])
    with pytest.raises(P.PositionError, match="prompt entry 0 has position 1"):
        pool.admit(9, [ent(1, 0)])
    with pytest.raises(TypeError, match="sequence id must be an int"):
        pool.add("3")
    assert pool.config == (4, 2, 1, 2), "a failed configure keeps the pool"


def test_pools_are_independent():
    a, b = P.PagedC(), P.PagedC()
    a.configure(3, 2, 4, 1)
    b.configure(5, 1, 6, 2)
    ma, mb = Model(3, 2, 4, 1), Model(5, 1, 6, 2)
    for pool, m in ((a, ma), (b, mb)):
        pool.add(0)
        m.add(0)
    for i in range(6):
        for pool, m, d in ((a, ma, 1), (b, mb, 2)):
            e = (i, np.full(d, i + d, np.float32), np.full(d, -i, np.float32))
            pool.append(0, *e)
            m.append(0, entry(*e))
    for pool, m in ((a, ma), (b, mb)):
        assert [entry(*e) for e in pool.read(0)] == m.read(0) and pool.table(0) == m.table(0)


def test_payload_bits_are_kept_and_compared_exactly():
    """A NaN payload reads back bit for bit; -0.0 and 0.0 are different content to the prefix cache."""
    pool = P.PagedC()
    pool.configure(8, 2, 8, 1)
    pool.add(0)
    nan = np.frombuffer(np.uint32(0x7FC0BEEF).tobytes(), dtype=np.float32)
    pool.append_chunk(0, [(0, nan, -nan), (1, np.zeros(1), np.zeros(1)), (2, np.ones(1), np.ones(1))])
    got = pool.read(0)
    assert got[0][1].tobytes() == nan.tobytes() and got[0][2].tobytes() == (-nan).tobytes()
    zeros = [(i, np.zeros(1, np.float32), np.zeros(1, np.float32)) for i in range(5)]
    pool.add(1)
    pool.append_chunk(1, zeros)
    neg = [(i, np.full(1, -0.0, np.float32), np.zeros(1, np.float32)) for i in range(5)]
    assert pool.admit(2, neg) == 0 and pool.admit(3, zeros) == 4


def test_a_hit_prefers_a_referenced_block_then_the_lowest_id():
    """Two blocks with the same content (two sequences wrote the same prefix): the hit takes the one a
    table references, leaving the free cached copy on the free list."""
    pool = P.PagedC()
    pool.configure(3, 2, 6, 1)
    prompt = [ent(i, i % 2, 1) for i in range(4)]
    for s in (0, 1):
        pool.add(s)
        pool.append_chunk(s, prompt)
    assert pool.table(0) == [None, 1] and pool.table(1) == [None, 3]
    pool.free(0)
    assert pool.admit(2, prompt + [ent(4, 0, 1)]) == 4
    assert pool.table(2) == [None, 3] and pool.refcount(1) == 0 and pool.free_blocks() == 5
    pool.free(1)
    pool.free(2)
    assert pool.admit(4, prompt + [ent(4, 0, 1)]) == 4 and pool.table(4) == [None, 1], "then the lowest id"
