"""The reference pool (``pyspec.paged.PagedPool``) against the paged protocol (docs/paged.md).

* the worked example of docs/paged.md, step by step;
* every error is typed, names the bad value, and changes nothing (pool state, cached content
  identities, sequence chains), including ops before ``configure`` and pool exhaustion in the
  middle of an atomic chunk;
* copy on write: a shared block is never written, and the sharer's read does not move;
* ``admit``: the longest valid hit, never an evicted block or another identity's, ``L <= m-1``,
  blocks taken off the free list, and the admitted sequence reads its prompt's window;
* the reference is the model executed: on random op sequences its state equals the Lean mirror's
  (``run_ops``), the invariant ``pool_holds`` holds after every op, every read is ``needed`` of the
  history, and no sequence holds a block beyond the rule.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from pyspec import paged as PG
from pyspec.paged import (BadConfiguration, BadEntry, BadPosition, DuplicateSequence, PagedPool, PoolExhausted,
                          UnknownSequence)


def ent(pos: int, v: float, width: int = 1) -> tuple:
    return (pos, np.full(width, float(v)), np.full(width, -float(v)))


def pool(W: int, B: int, N: int, D: int = 1) -> PagedPool:
    p = PagedPool()
    p.configure(W, B, N, D)
    return p


def snapshot(p: PagedPool) -> tuple:
    return (p._cfg, p.state().key(), dict(p.cached()), dict(p._chain))


def vals(entries) -> list[float]:
    return [float(e[1][0]) for e in entries]


# --------------------------------------------------------------------------- the worked example


def test_worked_example():
    """docs/paged.md, "Worked example": W=3, B=2, N=4 (e_k = sequence 0's entry at position k)."""
    p = pool(3, 2, 4)

    def state():
        live = sorted(p.state().live)
        return ({s: p.table(s) for s in live}, {s: p.length(s) for s in live}, p.refcounts(), p.free_list())

    p.add(0)
    assert state() == ({0: []}, {0: 0}, [0, 0, 0, 0], (0, 1, 2, 3))
    p.append_chunk(0, [ent(0, 0), ent(1, 1), ent(2, 2)])
    assert state() == ({0: [0, 1]}, {0: 3}, [1, 1, 0, 0], (2, 3))
    assert set(p.cached()) == {0}
    p.fork(0, 1)
    assert state() == ({0: [0, 1], 1: [0, 1]}, {0: 3, 1: 3}, [2, 2, 0, 0], (2, 3))
    shared_before = {i: p.state().mem[(1, i)] for i in range(2) if (1, i) in p.state().mem}
    p.append(1, *ent(3, 13))  # copy on write into block 2, then the rule drops block 0 from table 1
    assert state() == ({0: [0, 1], 1: [None, 2]}, {0: 3, 1: 4}, [1, 1, 1, 0], (3,))
    assert {i: p.state().mem[(1, i)] for i in range(2) if (1, i) in p.state().mem} == shared_before
    assert vals(p.read(1)) == [2, 13] and vals(p.read(0)) == [1, 2]
    p.append(0, *ent(3, 3))
    assert state() == ({0: [None, 1], 1: [None, 2]}, {0: 4, 1: 4}, [0, 1, 1, 0], (3, 0))
    p.append(0, *ent(4, 4))
    assert state() == ({0: [None, 1, 3], 1: [None, 2]}, {0: 5, 1: 4}, [0, 1, 1, 1], (0,))
    assert [e[0] for e in p.read(0)] == [3, 4]
    p.free(1)
    assert state() == ({0: [None, 1, 3]}, {0: 5}, [0, 1, 0, 1], (0, 2))
    prompt = [ent(0, 0), ent(1, 1), ent(2, 2), ent(3, 13), ent(4, 24)]
    assert p.admit(2, prompt) == 4
    assert state() == ({0: [None, 1, 3], 2: [None, 2]}, {0: 5, 2: 4}, [0, 1, 1, 1], (0,))
    p.append(2, *ent(4, 24))
    assert state() == ({0: [None, 1, 3], 2: [None, 2, 0]}, {0: 5, 2: 5}, [1, 1, 1, 1], ())
    assert vals(p.read(2)) == [13, 24] and 0 not in p.cached()
    p.add(3)
    before = snapshot(p)
    with pytest.raises(PoolExhausted, match="all 4 are in use"):
        p.append(3, *ent(0, 30))
    assert snapshot(p) == before
    p.append(0, *ent(5, 5))
    assert p.table(0) == [None, None, 3] and p.free_list() == (1,)
    p.append(3, *ent(0, 30))
    assert p.table(3) == [1] and 1 not in p.cached()


# --------------------------------------------------------------------------- errors change nothing


def test_ops_before_configure_raise_bad_configuration():
    p = PagedPool()
    for call in (lambda: p.add(0), lambda: p.append(0, *ent(0, 0)), lambda: p.append_chunk(0, []),
                 lambda: p.fork(0, 1), lambda: p.free(0), lambda: p.read(0), lambda: p.table(0),
                 lambda: p.free_blocks(), lambda: p.admit(0, [ent(0, 0)])):
        with pytest.raises(BadConfiguration, match="configure"):
            call()


@pytest.mark.parametrize("args, bad", [
    ((0, 2, 4, 1), "window"), ((3, 0, 4, 1), "block_size"), ((3, 2, 0, 1), "num_blocks"),
    ((3, 2, 4, 0), "width"), ((True, 2, 4, 1), "window"), ((3, 2.0, 4, 1), "block_size"),
    ((3, 2, "4", 1), "num_blocks"),
])
def test_bad_configuration_names_the_value_and_changes_nothing(args, bad):
    p = pool(3, 2, 4)
    p.add(0)
    p.append(0, *ent(0, 1))
    before = snapshot(p)
    with pytest.raises(BadConfiguration, match=bad):
        p.configure(*args)
    assert snapshot(p) == before


def busy_pool() -> PagedPool:
    """Two sequences sharing a partial block, one freed block cached, two blocks free."""
    p = pool(3, 2, 5, 2)
    p.add(0)
    p.append_chunk(0, [ent(i, i, 2) for i in range(5)])
    p.fork(0, 1)
    return p


BAD_OPS = [
    ("unknown append", lambda p: p.append(7, *ent(0, 0, 2)), UnknownSequence, "7"),
    ("negative id", lambda p: p.add(-1), UnknownSequence, "-1"),
    ("bool id", lambda p: p.read(True), UnknownSequence, "True"),
    ("duplicate add", lambda p: p.add(1), DuplicateSequence, "1"),
    ("fork onto live", lambda p: p.fork(0, 1), DuplicateSequence, "1"),
    ("fork from unknown", lambda p: p.fork(9, 2), UnknownSequence, "9"),
    ("free unknown", lambda p: p.free(4), UnknownSequence, "4"),
    ("position ahead", lambda p: p.append(0, *ent(6, 0, 2)), BadPosition, "expects position 5"),
    ("position behind", lambda p: p.append(0, *ent(4, 0, 2)), BadPosition, "got 4"),
    ("float position", lambda p: p.append(0, 5.0, np.zeros(2), np.zeros(2)), BadPosition, "5.0"),
    ("narrow key", lambda p: p.append(0, 5, np.zeros(1), np.zeros(2)), BadEntry, "width 2"),
    ("2-D value", lambda p: p.append(0, 5, np.zeros(2), np.zeros((1, 2))), BadEntry, "value"),
    ("int key", lambda p: p.append(0, 5, np.zeros(2, dtype=np.int64), np.zeros(2)), BadEntry, "float"),
    ("chunk gap", lambda p: p.append_chunk(0, [ent(5, 0, 2), ent(7, 0, 2)]), BadPosition, "expects position 6"),
    ("chunk bad tail", lambda p: p.append_chunk(0, [ent(5, 0, 2), ent(6, 0, 1)]), BadEntry, "position 6"),
    ("chunk not triples", lambda p: p.append_chunk(0, [ent(5, 0, 2), 3]), BadEntry, "3"),
    ("admit live", lambda p: p.admit(0, [ent(0, 0, 2)]), DuplicateSequence, "0"),
    ("admit empty", lambda p: p.admit(3, []), BadPosition, "at least one"),
    ("admit gap", lambda p: p.admit(3, [ent(1, 0, 2)]), BadPosition, "expects position 0"),
    ("admit identity", lambda p: p.admit(3, [ent(0, 0, 2)], identity="x"), BadEntry, "identity"),
]


@pytest.mark.parametrize("what, op, exc, names", BAD_OPS, ids=[b[0] for b in BAD_OPS])
def test_every_error_is_typed_names_the_value_and_changes_nothing(what, op, exc, names):
    p = busy_pool()
    before = snapshot(p)
    with pytest.raises(exc, match=names):
        op(p)
    assert snapshot(p) == before


def test_exhaustion_in_the_middle_of_a_chunk_changes_nothing():
    """W=4, B=1, N=4: one sequence holds 3 blocks; a second one's chunk runs out at its second entry."""
    p = pool(4, 1, 4)
    p.add(0)
    p.append_chunk(0, [ent(i, i) for i in range(3)])
    p.add(1)
    before = snapshot(p)
    with pytest.raises(PoolExhausted):
        p.append_chunk(1, [ent(0, 10), ent(1, 11)])
    assert snapshot(p) == before and p.length(1) == 0 and p.free_blocks() == 1
    p.append_chunk(1, [ent(0, 10)])  # one entry fits
    assert p.free_blocks() == 0 and vals(p.read(1)) == [10]


def test_a_chunk_reuses_blocks_the_rule_frees_part_way():
    """W=1, B=1, N=1: each entry's block is released right after it is written, so any chunk fits."""
    p = pool(1, 1, 1)
    p.add(0)
    p.append_chunk(0, [ent(i, i) for i in range(6)])
    assert p.length(0) == 6 and p.read(0) == [] and p.free_blocks() == 1
    P = PG.MODEL.add_seq(PG.empty_pool(1), 0)
    assert PG.MODEL.append_chunk(1, 1, 0, P, 0, []) == P  # an empty chunk is fine, for a live sequence
    assert PG.MODEL.append_chunk(1, 1, 1, P, 0, []) is None  # and none for an unknown one
    p.append_chunk(0, [])
    with pytest.raises(UnknownSequence):
        p.append_chunk(5, [])


def test_exhaustion_on_copy_on_write():
    """Appending into a shared partial block needs a block for the copy."""
    p = pool(4, 2, 2)
    p.add(0)
    p.append_chunk(0, [ent(i, i) for i in range(3)])  # blocks 0 (full) and 1 (partial): pool full
    p.fork(0, 1)
    before = snapshot(p)
    with pytest.raises(PoolExhausted):
        p.append(1, *ent(3, 13))
    assert snapshot(p) == before


# --------------------------------------------------------------------------- copy on write


def test_a_shared_block_is_never_written_and_the_sharer_does_not_move():
    for W, B in [(2, 2), (3, 2), (4, 3), (5, 2)]:
        p = pool(W, B, 8)
        p.add(0)
        p.append_chunk(0, [ent(i, i) for i in range(B + 1)])  # logical block 1 partial, shared by the fork
        p.fork(0, 1)
        shared = p.table(0)[1]
        held = {k: v for k, v in p.state().mem.items() if k[0] == shared}
        read0 = p.read(0)
        p.append(1, *ent(B + 1, 100))
        assert p.table(1)[1] != shared, (W, B)
        assert {k: v for k, v in p.state().mem.items() if k[0] == shared} == held
        assert p.read(0) == read0 and p.refcounts()[shared] == 1
        assert vals(p.read(1)) == vals(PG.needed(W, [ent(i, i) for i in range(B + 1)] + [ent(B + 1, 100)]))
        p.append(0, *ent(B + 1, 7))  # now unshared: written in place, no new block
        assert p.table(0)[1] == shared


# --------------------------------------------------------------------------- admit


def history(n: int, base: float = 0.0) -> list:
    return [ent(i, base + i) for i in range(n)]


def test_admit_takes_the_longest_valid_hit_and_reads_the_prompt_window():
    W, B = 3, 2
    p = pool(W, B, 16)
    p.add(0)
    p.append_chunk(0, history(9))
    kept = set(PG.prefix_keys(0, history(9), B))  # every full block ever filled (nothing is evicted: N = 16)
    for m in range(1, 13):
        prompt = history(m) if m <= 9 else history(9) + [ent(i, 50 + i) for i in range(9, m)]
        s = 100 + m
        L = p.admit(s, prompt)
        assert L == PG.longest_valid_hit(W, B, kept, prompt), m
        assert L == (m - 1) // B * B if m <= 9 else L >= 8, m
        assert L % B == 0 and L <= m - 1
        assert vals(p.read(s)) == vals(PG.needed(W, prompt[:L]))
        assert PG.hit_valid(W, B, p.state(), prompt, L, p.table(s))
        p.append_chunk(s, prompt[L:])
        assert vals(p.read(s)) == vals(PG.needed(W, prompt))
        kept |= set(PG.prefix_keys(0, prompt, B))
        p.free(s)


def test_admit_never_uses_another_identity_or_other_payload_bits():
    p = pool(2, 2, 8)
    p.add(0)
    p.append_chunk(0, history(5))
    assert p.admit(1, history(5), identity=3) == 0
    other = history(5)
    other[1] = (1, np.array([1.0 + 1e-12]), np.array([-1.0]))  # one bit of block 0 differs
    assert p.admit(2, other) == 0  # with W=2, L=2 and L=4 both need a block whose prefix includes block 0
    assert p.admit(3, history(5)) == 4


def test_admit_takes_cached_free_blocks_off_the_free_list_and_misses_evicted_ones():
    W, B = 3, 2
    p = pool(W, B, 3)
    p.add(0)
    p.append_chunk(0, history(4))  # blocks 0, 1; block 0 released once n = 4
    p.free(0)
    assert p.free_list() == (2, 0, 1) and set(p.cached()) == {0, 1}
    assert p.admit(1, history(5)) == 4 and p.table(1) == [None, 1]
    assert p.free_list() == (2, 0) and p.refcounts()[1] == 1
    p.add(2)
    p.append_chunk(2, [ent(0, 90), ent(1, 91), ent(2, 92)])  # takes block 2, then block 0: evicts (0, e0 e1)
    assert p.table(2) == [2, 0] and 0 not in p.cached()
    p.free(1)  # block 1 cached again
    assert p.admit(3, history(3)) == 0  # L=2 needs block 0's old identity: evicted, so no hit
    kept = set(PG.prefix_keys(0, history(4), B))  # a pool that kept every block would have hit L=2:
    assert PG.longest_valid_hit(W, B, kept, history(3)) == 2  # what the efficiency check reports
    assert p.admit(4, history(5)) == 4  # block 1 still holds (0, e0..e3)


# --------------------------------------------------------------------------- the reference is the model executed


def random_ops(rng: random.Random, k: int) -> list:
    ops = []
    for _ in range(k):
        s = rng.randrange(3)
        r = rng.random()
        if r < 0.1:
            ops.append(("add", s))
        elif r < 0.55:
            ops.append(("append", s, None, rng.randrange(3)))
        elif r < 0.7:
            ops.append(("chunk", s, None, [rng.randrange(3) for _ in range(rng.randrange(4))]))
        elif r < 0.85:
            ops.append(("fork", s, rng.randrange(3)))
        else:
            ops.append(("free", s))
    return ops


@pytest.mark.parametrize("seed", range(12))
def test_reference_pool_is_the_model_executed(seed):
    rng = random.Random(seed)
    W, B, N = rng.randint(1, 5), rng.randint(1, 3), rng.randint(1, 6)
    p = pool(W, B, N)
    P, H = PG.empty_pool(N), {}
    for o in random_ops(rng, 60):
        kind, s = o[0], o[1]
        n = PG.len_of(P, s)
        if kind in ("append", "chunk"):
            vs = [o[3]] if kind == "append" else o[3]
            es = [ent(n + i, 10 * s + v) for i, v in enumerate(vs)]
            o = ("append", s, n, es[0]) if kind == "append" else ("chunk", s, n, es)
        P2 = PG.MODEL.apply_op(W, B, P, o)
        call = {"add": lambda: p.add(s), "free": lambda: p.free(s), "fork": lambda: p.fork(s, o[2]),
                "append": lambda: p.append(s, *o[3]), "chunk": lambda: p.append_chunk(s, o[3])}[kind]
        before = snapshot(p)
        try:
            call()
        except PG.PagedError:
            assert P2 is None, o
            assert snapshot(p) == before
            continue
        assert P2 is not None, o
        P, H = P2, PG.op_hist(H, o)
        assert p.state() == P
        assert PG.pool_holds(W, B, N, P, H)
        for t in P.live:
            assert vals(p.read(t)) == vals(PG.needed(W, H[t]))
            assert PG.held_blocks(p.table(t)) <= PG.max_blocks(W, B)
            assert PG.blocks_beyond_rule(W, B, p.length(t), p.table(t)) == 0
        assert p.free_blocks() == N - len(PG.referenced(P))
