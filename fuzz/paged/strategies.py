"""Paged cases: the boundary tours (explicit cases) and the Hypothesis strategy, both biased to where
paged caches break (DESIGN §5, issue 22).

Configurations: ``W < B``, ``W = B``, ``W mod B = 0``, ``W mod B = 1`` and ``B - 1``, ``W = 1``, ``B = 1``;
pools sized for pressure (a block or two more than the sequences need, so appends find the pool
exhausted) as well as with room. Ops: chunks of ``B - 1``, ``B``, ``B + 1``, ``W - 1``, ``W``, ``W + 1``
tokens and longer than the window; forks at the window edge and at block edges (a partial last
block: copy on write); ragged batches over sequences of different lengths; prompts that end at every
block boundary and one past it (every hit length), under another identity; speculative steps that
roll back across a block edge; preemption. Only the optional ops the target has (``ops``) are drawn.
"""

from __future__ import annotations

from typing import Iterable

from hypothesis import strategies as st

from fuzz.paged.ops import (MAX_SEQS, Add, Admit, Batch, Chunk, Fork, Free, PagedCase, PagedOp, Preempt, Push,
                            Spec)
from fuzz.config import NUM_BLOCKS_BOUND
from pyspec.paged import max_blocks

#: ``(W, B)`` shapes every tour visits: one per boundary class.
TOUR_SHAPES = ((1, 1), (1, 4), (2, 4), (3, 8), (4, 4), (5, 4), (7, 4), (8, 4), (6, 2), (3, 1), (9, 3), (2, 1))
#: ``(W, B)`` shapes of the production-scale tours (:func:`scale_tours`): pages of 16-256 tokens (and one past),
#: windows spanning many blocks (4 and 8 pages of 128 plus one token, 16 of 16 plus one, 4 of 256 plus one), cheapest
#: first.
SCALE_SHAPES = ((64, 257), (513, 128), (257, 16), (1025, 256), (1024, 128))
#: ``(W, B)`` of the windows past 4096 the scale tours reach (Mistral's and Gemma 2's 4096, one past it): 16 pages of
#: 256 plus one token, 256 pages of 16. Lean bodies (:func:`_huge_window_tour`, ~17k tokens) so a Python pool (a
#: serving engine's block manager, a few thousand tokens/s) runs one in seconds; last, as the most expensive.
HUGE_SHAPES = ((4097, 256), (4096, 16))
#: Block sizes the strategy draws three times in four (the boundary classes live here).
BLOCKS = (1, 2, 3, 4, 8, 16)
#: Page sizes production engines use (16-256 tokens) with their neighbours: drawn one time in four.
LARGE_BLOCKS = (15, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)
WIDTHS = (1, 2, 3, 4, 8, 16)
#: Most sequences live at once in a drawn case (seven cases in eight), and ops per case.
MAX_LIVE = 4
#: Most sequences live at once in the other cases (every id a case may name: :data:`fuzz.paged.ops.MAX_SEQS`),
#: with a pool sized for a fraction of them (pool pressure at that count).
MANY_LIVE = 64
MAX_OPS = 40
#: A drawn window of any size (not one of the shapes tied to the block size) is at most this.
ANY_WINDOW = 64


class _State:
    """Names, lengths, high-water marks and (conservative) admitted bases while a case is built."""

    def __init__(self, W: int, B: int, R: int):
        self.W, self.B, self.R = W, B, R
        self.n: dict[int, int] = {}
        self.hw: dict[int, int] = {}
        self.base: dict[int, int] = {}
        self.next_id = 0

    def fresh(self) -> int:
        s = self.next_id
        self.next_id += 1
        return s

    def apply(self, op: PagedOp) -> None:
        t = type(op)
        if t is Add:
            self.n[op.seq] = self.hw[op.seq] = self.base[op.seq] = 0
        elif t in (Push, Chunk):
            self._grow(op.seq, 1 if t is Push else op.n)
        elif t is Batch:
            for s in op.seqs:
                self._grow(s, 1)
        elif t is Fork:
            for d in (self.n, self.hw, self.base):
                d[op.dst] = d[op.src]
        elif t is Free:
            for d in (self.n, self.hw, self.base):
                del d[op.seq]
        elif t is Admit:
            self.n[op.dst] = self.hw[op.dst] = op.length
            self.base[op.dst] = (op.length - 1) // self.B * self.B  # the longest hit a cache may pick
        elif t is Spec:
            self._grow(op.seq, op.k)
            self.n[op.seq] -= op.r
        elif t is Preempt:
            m = self.n[op.seq]
            self.hw[op.seq] = m
            self.base[op.seq] = max(0, (m - 1) // self.B * self.B)

    def _grow(self, s: int, k: int) -> None:
        self.n[s] += k
        self.hw[s] = max(self.hw[s], self.n[s])

    def max_rollback_after(self, s: int, k: int) -> int:
        """The most tokens a rollback may withdraw right after ``s`` appends ``k``."""
        n, hw = self.n[s] + k, max(self.hw[s], self.n[s] + k)
        return max(0, n - max(hw - self.R, self.base[s]))


def edges(W: int, B: int, upto: int) -> list[int]:
    """Lengths at the boundaries: every block edge and one either side, ``W - 1``, ``W``, ``W + 1``, up to ``upto``."""
    out = {W - 1, W, W + 1, 2 * W - 1, 2 * W}
    for k in range(0, upto // B + 2):
        out |= {k * B - 1, k * B, k * B + 1}
    return sorted(x for x in out if 0 <= x <= upto)


# --------------------------------------------------------------------------- tours


def scale_tours(*, width: int = 4) -> list[PagedCase]:
    """The paged boundary cases at production scale, in the order the campaign's share of the budget
    (:meth:`fuzz.phases.paged.PagedTours.skip`) should reach them: the page of 257 (the first of
    :data:`SCALE_SHAPES`); one long-lived pool of :data:`MANY_LIVE` sequences (W = 65 over pages of 16: five blocks
    each; 0.4 s on the C pool, 5 s on vLLM's block manager) holding half the blocks their worst case needs — each
    appends past its window in rounds, a batch step advances all of them, every other one is freed and the rest go
    on in the blocks that returned (appends that find the pool empty are refused and must change nothing); the
    windows past 4096 of :data:`HUGE_SHAPES` in a few long chunks (0.8-0.9 s each on vLLM); then the other shapes
    of :data:`SCALE_SHAPES` (pages of 16-257 tokens, windows spanning many blocks): chunks of every edge length
    through one sequence, then a second one stepping one token at a time across its first page's last slot (the
    chunks can jump past the reads that see it: a slot kept in 8 bits shows only there). A 3 s campaign on a Python pool reaches the 64 live sequences (the paged-four-lanes
    mutant); a 60 s one on vLLM one of the two windows past 4096, a 120 s one every tour."""
    out = []
    for W, B in SCALE_SHAPES:
        mb = max_blocks(W, B)
        body = [Add(0)] + [Chunk(0, m) for m in edges(W, B, 2 * W + 2 * B + 1)] + [Push(0)]
        body += [Add(1), Chunk(1, B - 1), Push(1), Push(1)]
        out.append(PagedCase(W, B, 4 * (mb + 2) + 8, width, tuple(body)))
    return out[:1] + [_many_live_tour(width)] + [_huge_window_tour(W, B, width) for W, B in HUGE_SHAPES] + out[1:]


def _huge_window_tour(W: int, B: int, width: int) -> PagedCase:
    """A window past 4096 in a few long chunks: one token short of the window, the two pushes across its edge,
    a page and one more, past the window again; a second sequence filled to twice the window in one chunk (its
    first pages freed as it goes), a batch over both, a free, a push on the survivor."""
    mb = max_blocks(W, B)
    body = [Add(0), Chunk(0, W - 1), Push(0), Push(0), Chunk(0, B + 1), Chunk(0, W + 1), Push(0), Add(1),
            Chunk(1, 2 * W + 1), Batch((0, 1)), Free(0), Push(1)]
    return PagedCase(W, B, 4 * (mb + 2) + 8, width, tuple(body))


def _many_live_tour(width: int) -> PagedCase:
    W, B = 65, 16
    mb = max_blocks(W, B)
    seqs = range(MANY_LIVE)
    body = [Add(s) for s in seqs]
    for r in range(2):
        body += [Chunk(s, W // 2 + r * B + s % 3) for s in seqs]
        body.append(Batch(tuple(seqs)))
    body += [Free(s) for s in seqs if s % 2]
    body += [Chunk(s, W + 1) for s in seqs if not s % 2]
    body.append(Batch(tuple(s for s in seqs if not s % 2)))
    return PagedCase(W, B, MANY_LIVE * mb // 2, width, tuple(body))



def tours(ops: Iterable[str], *, width: int = 4, rollback: int = 0) -> list[PagedCase]:
    """The explicit boundary cases for a target with the optional ``ops``: for every shape of
    :data:`TOUR_SHAPES`, a stream pushed one token at a time past ``2W + 2B``; chunks of every edge length;
    forks at the window edge and at block edges, then appends on both (copy on write) and ragged batches;
    every hit length (prompts ending at each block boundary and one past it), under identity 1 too;
    preemption; speculative steps that roll back across block edges; and a pool one block short."""
    ops = set(ops)
    out = []
    for W, B in TOUR_SHAPES:
        mb = max_blocks(W + rollback, B)
        roomy = 4 * (mb + 2) + 8
        n_long = 2 * W + 2 * B + 2
        # 1. one token at a time through every boundary, with a second sequence interleaved
        body: list[PagedOp] = [Add(0), Add(1)]
        for _ in range(n_long):
            body += [Push(0)]
        body += [Chunk(1, n_long), Free(0), Push(1)]
        out.append(PagedCase(W, B, roomy, width, tuple(body)))
        # 2. chunks of every edge length
        body = [Add(0)] + [Chunk(0, m) for m in edges(W, B, 2 * W + 2 * B + 1)] + [Push(0)]
        out.append(PagedCase(W, B, roomy, width, tuple(body)))
        # 3. forks at the window edge and at every block edge, then both append, then a ragged batch
        if "fork" in ops:
            body, seq = [Add(0)], 1
            n = 0
            for m in edges(W, B, 2 * W + B):
                if seq >= 6:
                    break
                if m > n:
                    body.append(Chunk(0, m - n))
                    n = m
                body += [Fork(0, seq), Push(seq), Push(0), Batch((0, seq)), Free(seq)]
                n += 2
                seq += 1
            body += [Fork(0, 1), Fork(1, 2), Batch((0, 1, 2)), Push(2), Batch((2, 0)), Free(1), Free(0), Push(2)]
            out.append(PagedCase(W, B, roomy, width, tuple(body)))
        # 4. every hit length: prompts ending at each block boundary and one past it, identity 1 too
        if "admit" in ops:
            m0 = 3 * B + W + 1
            body = [Add(0), Chunk(0, m0)]
            seq = 1
            for L in sorted({x for x in edges(W, B, m0) if x >= 1}):
                body += [Admit(seq, 0, L), Push(seq), Free(seq)]
            body += [Admit(1, 0, m0, 1), Admit(2, 1, m0 - 1, 1), Admit(3, 0, m0 - 1), Preempt(0), Push(0),
                     Preempt(1), Free(0), Admit(0, 3, m0 - 1), Push(0)]
            out.append(PagedCase(W, B, roomy, width, tuple(body)))
        # 5. speculative steps: rollbacks across a block edge, then on a fork
        if "rollback" in ops and rollback:
            body = [Add(0)]
            st_ = _State(W, B, rollback)
            st_.apply(body[0])
            for m in edges(W, B, 2 * W + 2 * B)[:8]:
                k = max(1, m % (2 * B) + 1)
                r = min(k, st_.max_rollback_after(0, k))
                for o in (Spec(0, k, r), Push(0)):
                    body.append(o)
                    st_.apply(o)
            if "fork" in ops:
                for o in (Fork(0, 1), Spec(1, 2, min(2, st_.max_rollback_after(0, 2))), Batch((0, 1))):
                    body.append(o)
                    st_.apply(o)
            out.append(PagedCase(W, B, roomy, width, tuple(body)))
        # 6. pool pressure: two sequences in a pool one block short of what they need, then a free
        tight = max(1, 2 * max_blocks(W, B) - 1)
        body = [Add(0), Add(1), Chunk(0, n_long), Chunk(1, n_long), Push(1), Push(0), Free(0), Push(1), Chunk(1, W)]
        if "fork" in ops:
            body += [Fork(1, 2), Push(2), Push(1)]
        out.append(PagedCase(W, B, tight, width, tuple(body)))
    return out


# --------------------------------------------------------------------------- the strategies


class _Draws:
    """The choices a case is built from, drawn by Hypothesis (fine-grained shrinking)."""

    def __init__(self, draw):
        self.draw = draw

    def choice(self, xs):
        return self.draw(st.sampled_from(xs))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


class _Seeded:
    """The same choices from a seeded PRNG: a long case costs one Hypothesis draw (the campaign's rate)."""

    def __init__(self, seed: int):
        import random

        self.rng = random.Random(seed)

    def choice(self, xs):
        return xs[self.rng.randrange(len(xs))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


def config(ch, window_max: int = 16) -> tuple[int, int, int, int]:
    """``(W, B, N, D)`` biased to the boundary classes and to pool pressure."""
    B = ch.choice(BLOCKS) if ch.integer(0, 3) else ch.choice(LARGE_BLOCKS)
    shape = ch.choice(("lt", "eq", "mult", "plus1", "minus1", "one", "any", "many"))
    if shape == "lt" and B > 1:
        W = ch.integer(1, B - 1)
    elif shape == "eq":
        W = B
    elif shape == "mult":
        W = B * ch.integer(2, 3)
    elif shape == "plus1":
        W = B * ch.integer(1, 2) + 1
    elif shape == "minus1" and B > 1:
        W = B * ch.integer(1, 2) - 1
    elif shape == "one":
        W = 1
    elif shape == "many":  # a window spanning many blocks, at a block edge or one either side
        W = B * ch.integer(4, 8) + ch.choice((-1, 0, 1))
    else:
        W = ch.integer(1, min(window_max, ANY_WINDOW))
    W = max(1, min(W, window_max))
    mb = max_blocks(W, B)
    lo, hi = {"tight": (1, mb + 1), "snug": (mb + 1, 2 * mb + 2),
              "roomy": (3 * mb + 3, 6 * mb + 12)}[ch.choice(("tight", "snug", "roomy", "roomy"))]
    return W, B, ch.integer(lo, hi), ch.choice(WIDTHS)


def _length(ch, W: int, B: int) -> int:
    """A chunk length: an edge (``B ± 1``, ``W ± 1``, longer than the window) or anything up to ``2W + 2B``."""
    if ch.integer(0, 2):
        return ch.choice(sorted({0, 1, B - 1, B, B + 1, W - 1, W, W + 1, 2 * W + 3, 3 * B}))
    return ch.integer(0, 2 * W + 2 * B)


def build(ch, ops: Iterable[str], *, window_max: int = 16, rollback: int = 0, n_ops: int | None = None,
          max_ops: int = MAX_OPS) -> PagedCase:
    """A well-formed paged case over the optional ``ops`` the target has, from the choices of ``ch``."""
    ops = set(ops)
    W, B, N, D = config(ch, window_max)
    live_cap = MAX_LIVE if ch.integer(0, 7) else MANY_LIVE
    if live_cap == MANY_LIVE:  # a pool for a quarter to twice the sequences' worst case: pressure at that count
        mb = max_blocks(W + rollback, B)
        hi = min(2 * MANY_LIVE * mb, NUM_BLOCKS_BOUND)  # W = 39 over pages of 1 would ask for 4,992 blocks
        N = ch.integer(min(max(2, MANY_LIVE * mb // 4), hi), hi)
    S = _State(W, B, rollback)
    out: list[PagedOp] = []

    def emit(o: PagedOp) -> None:
        out.append(o)
        S.apply(o)

    emit(Add(S.fresh()))
    weights = {"push": 6, "chunk": 5, "add": 2 if live_cap == MAX_LIVE else 6, "free": 1, "batch": 3, "edge": 2}
    if "fork" in ops:
        weights["fork"] = 3
    if "admit" in ops:
        weights.update(admit=3, preempt=1)
    if "rollback" in ops and rollback:
        weights["spec"] = 3
    menu = [k for k, w in weights.items() for _ in range(w)]
    n = ch.integer(1, max_ops) if n_ops is None else n_ops
    for _ in range(n):
        live = sorted(S.n)
        kind = ch.choice(menu)
        crowded = len(live) >= live_cap or S.next_id >= MAX_SEQS - 4  # ids left for a fork's or an admit's
        if not live or kind in ("add", "fork", "admit") and crowded:
            if crowded:
                kind = "push"
            elif not live or kind == "add":
                emit(Add(S.fresh()))
                continue
        s = ch.choice(live)
        if kind == "push":
            emit(Push(s))
        elif kind == "chunk":
            emit(Chunk(s, _length(ch, W, B)))
        elif kind == "edge":  # to a boundary length (a block edge, the window edge)
            nxt = [m for m in edges(W, B, S.n[s] + 2 * W + 2 * B) if m > S.n[s]]
            if nxt:
                emit(Chunk(s, ch.choice(nxt[:4]) - S.n[s]))
        elif kind == "free":
            emit(Free(s))
        elif kind == "batch":
            if len(live) > 1:
                k = ch.integer(2, len(live))
                rest = [t for t in live if t != s]
                picked = [s] + [rest.pop(ch.integer(0, len(rest) - 1)) for _ in range(k - 1)]
                emit(Batch(tuple(picked)))
            else:
                emit(Push(s))
        elif kind == "fork":
            emit(Fork(s, S.fresh()))
            if ch.integer(0, 1):  # both sides append: the partial last block is copied on write
                emit(Push(out[-1].dst))
        elif kind == "admit":
            if S.n[s] == 0:
                emit(Chunk(s, ch.integer(1, 2 * B + W)))
            # prompts ending at the first block boundaries and the window edge (every hit length up to a few
            # blocks), now and then anywhere
            cands = [m for m in edges(W, B, min(S.n[s], 4 * B + 2 * W + 1)) if m >= 1] or [S.n[s]]
            L = ch.choice(cands) if ch.integer(0, 3) else ch.integer(1, S.n[s])
            emit(Admit(S.fresh(), s, L, ch.choice((None, None, None, 1))))
        elif kind == "preempt":
            emit(Preempt(s))
        elif kind == "spec":
            k = ch.integer(1, rollback + 1)
            emit(Spec(s, k, ch.integer(0, min(k, S.max_rollback_after(s, k)))))
    # at most n ops after the opening add (a fork's push can add one more per step; a prefix stays well formed)
    return PagedCase(W, B, N, D, tuple(out[:1 + n]))


@st.composite
def paged_cases(draw, ops: Iterable[str] = (), *, window_max: int = 16, rollback: int = 0, max_ops: int = MAX_OPS):
    """Hypothesis draws every choice (module docstring): shrinks op by op."""
    return build(_Draws(draw), ops, window_max=window_max, rollback=rollback, max_ops=max_ops)


#: Ops per seeded case, at most (the campaign's generated batches).
LONG_OPS = 600


def seeded_cases(ops: Iterable[str] = (), *, window_max: int = 16, rollback: int = 0, max_ops: int = LONG_OPS):
    """Cases of up to ``max_ops`` ops built from a PRNG seed and an op count Hypothesis draws: the same biased
    choices as :func:`paged_cases` at a fraction of the cost per op. Hypothesis shrinks the count (a failure's
    case is a prefix of the ops), the campaign's reducer the ops themselves (:meth:`PagedCase.candidates`)."""
    ops = tuple(ops)
    return st.tuples(st.integers(0, 2**32 - 1), st.integers(1, max_ops)).map(
        lambda t: build(_Seeded(t[0]), ops, window_max=window_max, rollback=rollback, n_ops=t[1]))
