"""Mirror of ``lean/KVWindow/PagedModel.lean``: the pool, its ops and its reads, line by line.

:class:`PagedModel` holds the Lean definitions, one method per ``def`` (the same names in
snake_case), each docstring naming its twin. The methods call each other through ``self``, so a
twin test swaps one definition for a wrong one (a subclass) and the whole chain uses it; ``MODEL``
is the instance the oracle uses. A :class:`Pool` is immutable: an op returns a new pool, or
``None`` where Lean's returns ``none`` (the op failed and nothing changed).

Lean's functions ``Nat → β`` are dicts here (an absent key is Lean's default: ``len`` 0, table
``[]``, identity 0, slot ``none``); ``Option`` is ``None`` or the value. The invariants, the bounds
and the reference pool of the paged protocol are in :mod:`pyspec.paged`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

from pyspec.spec import _tsub

# --------------------------------------------------------------------------- the state


class Pool(NamedTuple):
    """Lean ``KVWindow.Pool``: ``mem`` (block, slot) ↦ entry, the free list (oldest first), the live
    sequences, and per sequence its length, block table and identity tag. Immutable: the ops
    build a new pool with ``_replace`` (a ``NamedTuple``, so that the twins' millions of ops stay
    fast)."""

    mem: Mapping[tuple[int, int], Any]
    free: tuple[int, ...]
    live: tuple[int, ...]
    len: Mapping[int, int]
    table: Mapping[int, tuple[Optional[int], ...]]
    ident: Mapping[int, int]

    def key(self) -> tuple:
        """A hashable value equal for equal pools (the twins deduplicate states with it)."""
        return (tuple(sorted(self.mem.items())), self.free, self.live, tuple(sorted(self.len.items())),
                tuple(sorted(self.table.items())), tuple(sorted(self.ident.items())))


def empty_pool(num_blocks: int) -> Pool:
    """The pool ``configure`` builds: no sequence, blocks ``0 .. N-1`` free in order."""
    return Pool(mem={}, free=tuple(range(num_blocks)), live=(), len={}, table={}, ident={})


def table_of(P: Pool, s: int) -> tuple[Optional[int], ...]:
    """``P.table s`` (Lean's total function: ``[]`` for a sequence never added)."""
    return P.table.get(s, ())


def len_of(P: Pool, s: int) -> int:
    """``P.len s`` (0 for a sequence never added)."""
    return P.len.get(s, 0)


def get_slot(l: Sequence[Optional[int]], j: int) -> Optional[int]:
    """Lean ``KVWindow.getSlot``: entry ``j`` of a table, ``none`` past its end."""
    return l[j] if j < len(l) else None


def upd(f: Mapping, s: int, v: Any) -> dict:
    """Lean ``KVWindow.upd f s v t := if t = s then v else f t``."""
    return {**f, s: v}


# --------------------------------------------------------------------------- the Lean definitions


class PagedModel:
    """The definitions of ``PagedModel.lean``, one method each (``W`` window, ``B`` block size).

    Lean's ``Op.apply`` is ``apply_op``; ``afterOp``/``runOps`` are :func:`run_ops`; ``Op.hist`` and
    ``Op.target`` are :func:`op_hist` and :func:`op_target`."""


    def set_ext(self, l: Sequence[Optional[int]], j: int, y: Optional[int]) -> tuple:
        """Lean ``KVWindow.setExt``: entry ``j`` := ``y``, padding with ``none`` past the end."""
        out = list(l) + [None] * max(0, j + 1 - len(l))
        out[j] = y
        return tuple(out)

    def ind(self, d: int, o: Optional[int]) -> int:
        """Lean ``KVWindow.ind d o``: 1 if the table entry ``o`` is ``some d``, else 0."""
        return 1 if o is not None and o == d else 0

    def count_in(self, d: int, l: Sequence[Optional[int]]) -> int:
        """Lean ``KVWindow.countIn d l``: how many entries of one table are ``some d``."""
        return sum(self.ind(d, o) for o in l)

    def refs_in(self, tb: Mapping, d: int, live: Sequence[int]) -> int:
        """Lean ``KVWindow.refsIn tb d live``: references to block ``d`` from the tables of ``live``."""
        return sum(self.count_in(d, tb.get(t, ())) for t in live)

    def refcount(self, P: Pool, b: int) -> int:
        """Lean ``KVWindow.refcount P b := refsIn P.table b P.live``: refcounts are counted, never
        stored, so they cannot drift from the tables (``paged_refcount``)."""
        return self.refs_in(P.table, b, P.live)

    def mem_n(self, s: int, l: Sequence[int]) -> bool:
        """Lean ``KVWindow.memN s l``: ``s`` occurs in ``l``."""
        return s in l


    def write_mem(self, m: Mapping, b: int, i: int, x: Any) -> dict:
        """Lean ``KVWindow.writeMem m b i x``: slot ``i`` of block ``b`` := ``x``."""
        return {**m, (b, i): x}

    def copy_block(self, m: Mapping, src: int, dst: int) -> dict:
        """Lean ``KVWindow.copyBlock m src dst``: block ``dst`` := every slot of block ``src``."""
        out = {k: v for k, v in m.items() if k[0] != dst}
        out.update({(dst, i): v for (b, i), v in m.items() if b == src})
        return out


    def take_with(self, P: Pool, s: int, j: int, m: Callable[[int], Mapping], free: Sequence[int]) -> Optional[Pool]:
        """Lean ``KVWindow.takeWith``: take the first free block ``c`` for logical block ``j`` of
        ``s`` (``table s [j] := c``, memory ``m c``); ``none`` if the free list is empty."""
        if not free:
            return None
        c, rest = free[0], tuple(free[1:])
        return P._replace(free=rest, table=upd(P.table, s, self.set_ext(table_of(P, s), j, c)), mem=m(c))

    def place_with(self, P: Pool, s: int, j: int, i: int, x: Any, old: Optional[int]) -> Optional[Pool]:
        """Lean ``KVWindow.placeWith``: write ``x`` into slot ``i`` of logical block ``j`` of ``s``,
        whose table entry is ``old``: a fresh block if ``none``, a copy if shared (refcount ≥ 2,
        copy on write: a shared block is never written), else in place."""
        if old is None:
            return self.take_with(P, s, j, lambda c: self.write_mem(P.mem, c, i, x), P.free)
        if 2 <= self.refcount(P, old):
            return self.take_with(P, s, j, lambda c: self.write_mem(self.copy_block(P.mem, old, c), c, i, x),
                                  P.free)
        return P._replace(mem=self.write_mem(P.mem, old, i, x))

    def bump(self, P: Pool, s: int) -> Pool:
        """Lean ``KVWindow.bump P s``: ``len s := len s + 1``."""
        return P._replace(len=upd(P.len, s, len_of(P, s) + 1))

    def push_if_unref(self, P: Pool, b: int) -> Pool:
        """Lean ``KVWindow.pushIfUnref P b``: once a reference to ``b`` is gone, ``b`` goes to the tail
        of the free list if no table references it any more."""
        return P._replace(free=P.free + (b,)) if self.refcount(P, b) == 0 else P

    def drop_ref(self, P: Pool, s: int, l: Sequence[Optional[int]]) -> Pool:
        """Lean ``KVWindow.dropRef P s l``: ``table s := l``."""
        return P._replace(table=upd(P.table, s, tuple(l)))

    def release_with(self, P: Pool, s: int, j: int, old: Optional[int]) -> Pool:
        """Lean ``KVWindow.releaseWith``: entry ``j`` (holding ``old``) := ``none``, then free ``old``
        if that was its last reference."""
        if old is None:
            return P
        return self.push_if_unref(self.drop_ref(P, s, self.set_ext(table_of(P, s), j, None)), old)

    def release_at(self, P: Pool, s: int, j: int) -> Pool:
        """Lean ``KVWindow.releaseAt P s j := releaseWith P s j (getSlot (P.table s) j)``."""
        return self.release_with(P, s, j, get_slot(table_of(P, s), j))

    def eligible(self, W: int, B: int, n: int, j: int) -> bool:
        """Lean ``KVWindow.Eligible W B n j := B * j + B + W ≤ n + 1``: every position of logical
        block ``j`` is below ``n - W + 1``, the oldest one the next query (position ``n``) needs."""
        return B * j + B + W <= n + 1

    def rule_step(self, W: int, B: int, s: int, P: Pool, j: int) -> Pool:
        """Lean ``KVWindow.ruleStep``: release logical block ``j`` of ``s`` if the rule allows it."""
        return self.release_at(P, s, j) if self.eligible(W, B, len_of(P, s), j) else P

    def rule(self, W: int, B: int, s: int, P: Pool) -> Pool:
        """Lean ``KVWindow.rule``: the freeing rule, eagerly, over every logical block in order."""
        for j in range(len(table_of(P, s))):
            P = self.rule_step(W, B, s, P, j)
        return P

    def after_place(self, W: int, B: int, s: int, P1: Optional[Pool]) -> Optional[Pool]:
        """Lean ``KVWindow.afterPlace``: a placed entry counts (``bump``), then the rule runs."""
        return None if P1 is None else self.rule(W, B, s, self.bump(P1, s))

    def append_tok(self, W: int, B: int, P: Pool, s: int, pos: int, x: Any) -> Optional[Pool]:
        """Lean ``KVWindow.appendTok``: ``none`` unless ``s`` is live and ``pos = len s``; else place
        ``x`` in slot ``pos % B`` of logical block ``pos / B``, count it, apply the rule."""
        if not (self.mem_n(s, P.live) and pos == len_of(P, s)):
            return None
        j = pos // B
        return self.after_place(W, B, s, self.place_with(P, s, j, pos % B, x, get_slot(table_of(P, s), j)))

    def chunk_from(self, W: int, B: int, s: int, P: Pool, pos: int, xs: Iterable[Any]) -> Optional[Pool]:
        """Lean ``KVWindow.chunkFrom``: the appends in order; ``none`` if any fails."""
        for x in xs:
            P = self.append_tok(W, B, P, s, pos, x)
            if P is None:
                return None
            pos += 1
        return P

    def append_chunk(self, W: int, B: int, s: int, P: Pool, pos: int, xs: Iterable[Any]) -> Optional[Pool]:
        """Lean ``KVWindow.appendChunk``: ``none`` unless ``s`` is live and ``pos = len s`` (also for an
        empty chunk), else ``chunkFrom``: atomic, nothing changes if any append fails."""
        if not (self.mem_n(s, P.live) and pos == len_of(P, s)):
            return None
        return self.chunk_from(W, B, s, P, pos, xs)

    def add_seq(self, P: Pool, s: int) -> Optional[Pool]:
        """Lean ``KVWindow.addSeq``: a new sequence, length 0, empty table, identity 0."""
        if self.mem_n(s, P.live):
            return None
        return P._replace(live=(s,) + P.live, table=upd(P.table, s, ()), len=upd(P.len, s, 0),
                       ident=upd(P.ident, s, 0))

    def fork_seq(self, P: Pool, src: int, dst: int) -> Optional[Pool]:
        """Lean ``KVWindow.forkSeq``: ``dst`` gets ``src``'s length, identity and table (sharing
        every block: each gets one more reference). Takes no block."""
        if not (self.mem_n(src, P.live) and not self.mem_n(dst, P.live)):
            return None
        return P._replace(live=(dst,) + P.live, table=upd(P.table, dst, table_of(P, src)),
                       len=upd(P.len, dst, len_of(P, src)), ident=upd(P.ident, dst, P.ident.get(src, 0)))

    def drop_head(self, P: Pool, s: int, o: Optional[int], rest: Sequence[Optional[int]]) -> Pool:
        """Lean ``KVWindow.dropHead``: ``s``'s table loses its first entry ``o`` (then ``o`` is freed
        if that was its last reference)."""
        P1 = self.drop_ref(P, s, rest)
        return P1 if o is None else self.push_if_unref(P1, o)

    def drop_all(self, P: Pool, s: int, l: Sequence[Optional[int]]) -> Pool:
        """Lean ``KVWindow.dropAll``: every entry of ``s``'s table released, in logical order."""
        l = tuple(l)
        while l:
            P = self.drop_head(P, s, l[0], l[1:])
            l = l[1:]
        return P

    def unlive(self, P: Pool, s: int) -> Pool:
        """Lean ``KVWindow.unlive``: ``s`` leaves the live list."""
        return P._replace(live=tuple(t for t in P.live if t != s))

    def free_seq(self, P: Pool, s: int) -> Optional[Pool]:
        """Lean ``KVWindow.freeSeq``: release every block of ``s``, then ``s`` no longer exists."""
        if not self.mem_n(s, P.live):
            return None
        return self.unlive(self.drop_all(P, s, table_of(P, s)), s)

    def admit_hit(self, P: Pool, s: int, identity: int, L: int, tbl: Sequence[Optional[int]]) -> Pool:
        """Lean ``KVWindow.admitHit``: ``s`` starts at length ``L`` with table ``tbl`` (a prefix hit);
        the blocks of ``tbl`` leave the free list."""
        return P._replace(live=(s,) + P.live, table=upd(P.table, s, tuple(tbl)), len=upd(P.len, s, L),
                       ident=upd(P.ident, s, identity),
                       free=tuple(b for b in P.free if self.count_in(b, tbl) == 0))


    def apply_op(self, W: int, B: int, P: Pool, o: tuple) -> Optional[Pool]:
        """Lean ``KVWindow.Op.apply``; an op is ``("add", s)``, ``("append", s, pos, x)``,
        ``("chunk", s, pos, xs)``, ``("fork", src, dst)`` or ``("free", s)``."""
        if o[0] == "append":
            return self.append_tok(W, B, P, o[1], o[2], o[3])
        if o[0] == "chunk":
            return self.append_chunk(W, B, o[1], P, o[2], o[3])
        one = {"add": self.add_seq, "fork": self.fork_seq, "free": self.free_seq}.get(o[0])
        if one is None:
            raise ValueError(f"unknown op {o!r}")
        return one(P, *o[1:])

    def lookup_in(self, m: Mapping, i: int, o: Optional[int]) -> Any:
        """Lean ``KVWindow.lookupIn m i o``: slot ``i`` of the block ``o`` names (``none`` for ``none``)."""
        return None if o is None else m.get((o, i))

    def lookup(self, P: Pool, B: int, s: int, p: int) -> Any:
        """Lean ``KVWindow.lookup``: position ``p`` of ``s``, read through its table."""
        return self.lookup_in(P.mem, p % B, get_slot(table_of(P, s), p // B))

    def read_slots(self, W: int, B: int, P: Pool, s: int) -> list:
        """Lean ``KVWindow.readSlots``: positions ``len - (W-1) .. len-1``, each looked up."""
        n = len_of(P, s)
        lo = _tsub(n, _tsub(W, 1))
        return [self.lookup(P, B, s, p) for p in range(lo, lo + min(_tsub(W, 1), n))]

    def read_seq(self, W: int, B: int, P: Pool, s: int) -> list:
        """Lean ``KVWindow.readSeq := somes (readSlots ..)``: what the next query of ``s`` attends to
        besides itself; ``paged_read_window`` says it is ``lastWindow (W-1)`` of the history."""
        return [e for e in self.read_slots(W, B, P, s) if e is not None]


MODEL = PagedModel()


# --------------------------------------------------------------------------- histories


def op_hist(H: Mapping[int, tuple], o: tuple) -> dict:
    """Lean ``KVWindow.Op.hist``: what a successful op does to the histories."""
    kind, s = o[0], o[1]
    if kind in ("add", "free"):
        return upd(H, s, ())
    if kind == "append":
        return upd(H, s, tuple(H.get(s, ())) + (o[3],))
    if kind == "chunk":
        return upd(H, s, tuple(H.get(s, ())) + tuple(o[3]))
    if kind == "fork":
        return upd(H, o[2], tuple(H.get(s, ())))
    raise ValueError(f"unknown op {o!r}")


def op_target(o: tuple) -> int:
    """Lean ``KVWindow.Op.target``: the one sequence an op may change (``dst`` for a fork)."""
    return o[2] if o[0] == "fork" else o[1]


def run_ops(W: int, B: int, P: Pool, H: Mapping, ops: Iterable[tuple], model: PagedModel = MODEL):
    """Lean ``KVWindow.runOps``: apply the ops in order; a failed op changes neither pool nor histories."""
    H = dict(H)
    for o in ops:
        P2 = model.apply_op(W, B, P, o)
        if P2 is not None:
            P, H = P2, op_hist(H, o)
    return P, H
