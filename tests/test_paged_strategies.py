"""The paged strategies reach the shapes paged caches break at: every boundary class of (W, B), pool
pressure, forks at the window edge, every hit length, rollbacks across a block edge, ragged batches."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings

from fuzz.paged.ops import Admit, Batch, Chunk, Fork, PagedCase, Preempt, Push, Spec
from fuzz.paged.strategies import _Seeded, build, paged_cases, seeded_cases, tours
from pyspec.paged import max_blocks

ALL = ("fork", "admit", "rollback", "append_batch")


def shape(c: PagedCase) -> set[str]:
    W, B = c.window, c.block_size
    out = set()
    out |= {"W=1"} if W == 1 else set()
    out |= {"W<B"} if W < B else {"W=B"} if W == B else set()
    out |= {"W%B=0"} if W > B and W % B == 0 else set()
    out |= {"W%B=1"} if W > B and W % B == 1 else set()
    out |= {"B=1"} if B == 1 else set()
    return out


def lengths_before(c: PagedCase):
    """(op, length of its sequence before it) for every op, by replaying the shape of the case."""
    n = {}
    for op in c.ops:
        t = type(op)
        if t is Fork:
            yield op, n[op.src]
            n[op.dst] = n[op.src]
        elif t is Admit:
            yield op, n[op.src]
            n[op.dst] = op.length
        else:
            s = getattr(op, "seq", None)
            yield op, n.get(s)
            if t.__name__ == "Add":
                n[s] = 0
            elif t is Push:
                n[s] += 1
            elif t is Chunk:
                n[s] += op.n
            elif t is Batch:
                for q in op.seqs:
                    n[q] += 1
            elif t is Spec:
                n[s] += op.k - op.r
            elif t.__name__ == "Free":
                del n[s]


def test_tours_cover_every_boundary_class():
    ts = tours(ALL, rollback=4)
    shapes = set().union(*(shape(c) for c in ts))
    assert shapes >= {"W=1", "W<B", "W=B", "W%B=0", "W%B=1", "B=1"}
    # forks at the window edge (n = W - 1 and n = W) and at a block edge in a partial block
    forks = {(c.window, c.block_size, n) for c in ts for op, n in lengths_before(c) if type(op) is Fork}
    assert any(n == W - 1 for W, B, n in forks) and any(n == W for W, B, n in forks)
    assert any(n % B and n > B for W, B, n in forks)
    # every hit length: a prompt ending at each block boundary and one past it, up to 3 blocks
    for c in ts:
        if any(type(op) is Admit for op in c.ops):
            Ls = {op.length for op in c.ops if type(op) is Admit}
            B = c.block_size
            assert {B, B + 1, 2 * B, 2 * B + 1, 3 * B} <= Ls | {B + 1 if B == 1 else 0}
    assert any(op.identity == 1 for c in ts for op in c.ops if type(op) is Admit)
    assert any(type(op) is Preempt for c in ts for op in c.ops)
    # rollbacks that cross a block edge
    assert any(type(op) is Spec and op.r > 0 and (n + op.k) // c.block_size != (n + op.k - op.r) // c.block_size
               for c in ts for op, n in lengths_before(c))
    # a pool too small for what its sequences need (the append must be refused)
    assert any(c.num_blocks < 2 * max_blocks(c.window, c.block_size) for c in ts)


def test_tours_take_only_the_ops_a_target_has():
    plain = tours(())
    assert all(c.needs() == set() for c in plain)
    assert any("fork" in c.needs() for c in tours(("fork",)))
    assert not any("rollback" in c.needs() for c in tours(("fork", "admit")))


def test_drawn_cases_cover_configurations_and_ops():
    cases = [build(_Seeded(k), ALL, rollback=4, n_ops=60) for k in range(300)]
    shapes = Counter(s for c in cases for s in shape(c))
    assert all(shapes[s] >= 10 for s in ("W=1", "W<B", "W=B", "W%B=0", "W%B=1", "B=1")), shapes
    pressure = sum(c.num_blocks <= max_blocks(c.window, c.block_size) + 1 for c in cases)
    assert pressure >= 30
    kinds = Counter(type(op).__name__ for c in cases for op in c.ops)
    assert all(kinds[k] > 50 for k in ("Add", "Push", "Chunk", "Fork", "Free", "Batch", "Admit", "Spec", "Preempt"))
    ragged = sum(1 for c in cases for op, _ in lengths_before(c) if type(op) is Batch)
    assert ragged > 100
    # without the optional ops, none is drawn
    bare = [build(_Seeded(k), (), n_ops=60) for k in range(50)]
    assert not any(c.needs() for c in bare)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(paged_cases(ALL, rollback=2))
def test_hypothesis_cases_are_well_formed(c):
    assert PagedCase.from_json(c.to_json()) == c
    assert all(op.r <= 2 for op in c.ops if type(op) is Spec)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(seeded_cases(("fork",), max_ops=100))
def test_seeded_cases_round_trip(c):
    assert len(c.ops) <= 101 and PagedCase.from_json(c.to_json()) == c and not c.needs() - {"fork"}


def test_many_live_pools_stay_within_the_block_bound_at_the_default_window_max():
    """64 live sequences over pages of 1 token with W = 39 asked for up to 4,992 blocks, past NUM_BLOCKS_BOUND:
    the strategy raised PagedOpError on ~1 case in 750 of a default campaign (--window-max 65537). Seed
    1193541424 (``(W, B) = (39, 1)``, many live) was one."""
    from fuzz.config import NUM_BLOCKS_BOUND

    worst = build(_Seeded(1193541424), ("admit",), window_max=65_537, n_ops=600)
    assert (worst.window, worst.block_size) == (39, 1) and worst.num_blocks <= NUM_BLOCKS_BOUND
    for k in range(1500):
        assert build(_Seeded(k), ("admit",), window_max=65_537, n_ops=5).num_blocks <= NUM_BLOCKS_BOUND


def test_a_pressed_pool_of_64_over_a_window_of_pages_of_1_stays_within_the_block_bound():
    """Seed 668 draws 64 live sequences over a window of 55 over pages of 1 (worst case 55 blocks each): the pool for
    up to twice that (7 040) passed NUM_BLOCKS_BOUND (4 096) and the campaign stopped with a harness fault."""
    from fuzz.config import NUM_BLOCKS_BOUND

    c = build(_Seeded(668), ALL, window_max=65_537, n_ops=3)
    assert c.block_size == 1 and 64 * max_blocks(c.window, 1) // 4 <= c.num_blocks <= NUM_BLOCKS_BOUND, c
    for s in range(1500):
        assert build(_Seeded(s), ALL, window_max=65_537, n_ops=2).num_blocks <= NUM_BLOCKS_BOUND
