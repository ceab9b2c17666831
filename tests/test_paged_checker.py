"""The paged checker holds implementations to docs/paged.md: the correct ones pass the tours and drawn cases,
and every wrong one of tests/support/paged_caches.py (one per paged bug class, and a pool sharing state with
earlier pools) fails with the outcome its bug is."""

from __future__ import annotations

import pytest

from fuzz.paged.checks import OverBound
from fuzz.paged.ops import PagedCase
from fuzz.paged.strategies import _Seeded, build, tours
from fuzz.targets.base import EFFICIENCY, Crash, HarnessFault, Mismatch, failure_kind
from fuzz.targets.paged import PagedTarget, make_paged_c
from impl.mutants.paged_pool import BlockPool
from pyspec.paged import PagedPool
from tests.support.paged_caches import WRONG, MinimalPool, NoRollbackBlockPool, SharedAllocatorPool, wrong


def cases_for(t: PagedTarget, drawn: int = 40) -> list[PagedCase]:
    return tours(t.paged_ops, rollback=t.max_rollback) + \
        [build(_Seeded(k), t.paged_ops, rollback=t.max_rollback, n_ops=80) for k in range(drawn)]


def first_failure(t: PagedTarget, cases) -> BaseException | None:
    for c in cases:
        assert t.accepts(c) is None, t.accepts(c)
        try:
            t.run(c)
        except (Mismatch, Crash, HarnessFault) as e:
            return e
    return None


@pytest.mark.parametrize("make", [make_paged_c, lambda: PagedTarget("pyspec", PagedPool),
                                  lambda: PagedTarget("block", BlockPool), lambda: PagedTarget("minimal", MinimalPool)],
                         ids=["paged-c", "pyspec", "block", "minimal"])
def test_correct_pools_pass(make):
    t = make()
    assert first_failure(t, cases_for(t, 30)) is None


def test_declared_ops():
    assert make_paged_c().paged_ops == ("fork", "admit")
    assert PagedTarget("minimal", MinimalPool).paged_ops == ()

    class NoBound(BlockPool):
        max_rollback = None

    nb = PagedTarget("nobound", NoBound)
    assert "rollback" not in nb.paged_ops and "no max_rollback" in nb.notes[0]
    b = PagedTarget("block", BlockPool)
    assert b.paged_ops == ("fork", "admit", "rollback", "append_batch") and b.max_rollback == 4
    assert PagedTarget("n", NoRollbackBlockPool).paged_ops == ("fork", "admit")
    spec = PagedCase.parse("+s0 s0 chunk:3 spec:s0:2-1", window=3, block_size=2, num_blocks=4, width=2)
    assert "rollback" in make_paged_c().accepts(spec)
    far = PagedCase.parse("+s0 s0 chunk:3 spec:s0:6-6", window=3, block_size=2, num_blocks=4, width=2)
    assert "max_rollback 4" in b.accepts(far)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_every_wrong_pool_is_caught(name):
    t = PagedTarget(f"wrong:{name}", wrong(name))
    e = first_failure(t, cases_for(t))
    assert e is not None, f"{name} passed every case"
    assert failure_kind(e) == WRONG[name][2], f"{name}: {type(e).__name__}: {e}"
    if WRONG[name][2] == "efficiency":
        assert isinstance(e, OverBound) and failure_kind(e) == EFFICIENCY


def test_state_shared_between_pools_is_caught():
    t = PagedTarget("shared", SharedAllocatorPool)
    e = first_failure(t, cases_for(t))
    assert isinstance(e, Mismatch) and "free_blocks()" in str(e), e


def test_a_refusal_that_changes_the_pool_is_a_mismatch():
    class Leaky(BlockPool):
        def append(self, seq, pos, key, value):
            if not self.free_list and pos % self.cfg[1] == 0:
                self.seqs[seq].n += 1  # changes the length, then refuses
                raise self.exhausted_error("pool exhausted")
            super().append(seq, pos, key, value)

    c = PagedCase.parse("+s0 +s1 s0 chunk:4 s1 chunk:4 s1 push", window=5, block_size=2, num_blocks=4, width=2)
    with pytest.raises(Mismatch, match="changed the pool"):
        PagedTarget("leaky", Leaky).run(c)
    assert PagedTarget("block", BlockPool).run(c) is not None  # the refusal itself is expected there


def test_exhausted_where_the_spec_had_room_is_efficiency_only():
    class Stingy(BlockPool):
        def append(self, seq, pos, key, value):
            if len(self.free_list) < 2 and pos % self.cfg[1] == 0:
                raise self.exhausted_error("keeps a spare block")
            super().append(seq, pos, key, value)

    c = PagedCase.parse("+s0 s0 chunk:2 s0 push s0 push", window=9, block_size=1, num_blocks=4, width=2)
    stats = PagedTarget("stingy", Stingy).run(c)
    assert stats.efficiency == {"exhausted_early": 1} and stats.efficiency_first == {"exhausted_early": 3}

    class Raises(BlockPool):
        def append(self, seq, pos, key, value):
            raise ValueError("no")

    with pytest.raises(Crash, match="raised ValueError"):
        PagedTarget("raises", Raises).run(c)


def test_a_short_hit_is_efficiency_a_long_one_a_mismatch():
    class NeverHits(BlockPool):
        def admit(self, seq, entries, identity=0):
            self._new(seq)
            from impl.mutants.paged_pool import _Seq

            self.seqs[seq] = _Seq(identity)
            return 0

    c = PagedCase.parse("+s0 s0 chunk:9 admit:s1<s0:9 s1 push", window=3, block_size=2, num_blocks=12, width=2)
    assert PagedTarget("never", NeverHits).run(c).efficiency == {"hits_missed": 1}

    class Overclaims(BlockPool):
        def admit(self, seq, entries, identity=0):
            return super().admit(seq, entries, 0)  # ignores the identity: hits identity-0 blocks

    c1 = PagedCase.parse("+s0 s0 chunk:9 admit:s1<s0:9#1", window=3, block_size=2, num_blocks=12, width=2)
    with pytest.raises(Mismatch, match="longest valid hit is 0"):
        PagedTarget("over", Overclaims).run(c1)


def test_reads_are_checked_bit_for_bit_on_every_sequence():
    class CrossTalk(BlockPool):
        def read(self, seq):
            out = super().read(seq)
            if seq == 1 and out:
                out[0] = (out[0][0], out[0][1] + 0, out[0][2] * 1.0000001)
            return out

    c = PagedCase.parse("+s0 s0 chunk:3 fork:s0>s1 s0 push", window=3, block_size=2, num_blocks=8, width=2)
    with pytest.raises(Mismatch, match=r"read\(s1\): value of position 1"):
        PagedTarget("x", CrossTalk).run(c)


class _ShadowGroup(BlockPool):
    """A pool shared with a second attention group that holds one block per live sequence (as a hybrid
    model's full-attention group does), taken from the same free list."""

    paged_queries = ("length", "refcount", "held_elsewhere")

    def configure(self, window, block_size, num_blocks, width):
        super().configure(window, block_size, num_blocks, width)
        self.shadow = {}

    def add(self, seq):
        super().add(seq)
        if self.free_list:
            self.shadow[seq] = self.free_list.pop()

    def free(self, seq):
        super().free(seq)
        if seq in self.shadow:
            self.free_list.append(self.shadow.pop(seq))

    def held_elsewhere(self):
        return sorted(self.shadow.values())


def test_blocks_held_by_another_group_are_counted_and_must_be_disjoint():
    c = PagedCase.parse("+s0 s0 chunk:3 +s1 s1 push free:s0 s1 push", window=3, block_size=1, num_blocks=8, width=2)
    assert PagedTarget("shadow", _ShadowGroup).run(c) is not None

    class Undeclared(_ShadowGroup):
        paged_queries = ()

    with pytest.raises(Mismatch, match=r"free_blocks\(\) = 7, but the tables reference 0"):
        PagedTarget("undeclared", Undeclared).run(c)

    class Overlapping(_ShadowGroup):
        def held_elsewhere(self):  # claims a block a sliding table holds
            return sorted(set(self.shadow.values()) | {b for q in self.seqs.values() for b in q.table
                                                       if b is not None})

    with pytest.raises(Mismatch, match="held by another group too"):
        PagedTarget("overlapping", Overlapping).run(c)
