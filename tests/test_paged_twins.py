"""Python twins of the paged theorems (``lean/KVWindow/Paged.lean``): one ``test_<leanName>`` each.

Each theorem is a checker over the definitions of ``pyspec/paged_model.py`` (a
:class:`~pyspec.paged_model.PagedModel`) that returns the first counterexample in the scope, or
``None``:

* exhaustive: every window ``W <= 4``, block size ``B <= 3`` and pool of ``N <= 4`` blocks; every
  state reachable in ``DEPTH`` ops from the pool holding one empty sequence, over two sequences
  (``add``, ``append`` of each letter of a 2-letter payload alphabet, a two-entry ``chunk``,
  ``fork`` either way, ``free``),
  entries ``(pos, letter)`` so that a wrong position shows; states are deduplicated, and every
  successful op between them is a transition (failed ops return ``None`` and change nothing by
  construction);
* beyond the scope: a Hypothesis run of random op sequences over three sequences, with windows,
  blocks and pools up to 8, checking the same statement after every op;
* negative: the same checker against a deliberately wrong definition — the rule freeing one
  block too early, a fork whose shared block is written in place (no copy on write), a fork
  whose references are not counted (a release frees a block another table still names), a hit
  check that ignores the window's first block — must find a counterexample.

``tests/test_lean_lint.py`` checks that every theorem in ``lean/KVWindow/Audit.lean`` has a
``test_<name>`` here or in ``tests/test_theorem_twins.py``.
"""

from __future__ import annotations

import functools
import itertools
import random
from typing import Callable, Iterator, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspec import paged as PG
from pyspec.paged import MODEL, PagedModel, Pool, get_slot, len_of, op_hist, op_target, table_of, upd
from pyspec.spec import in_window, last_window

ALPHA = (0, 1)
WINDOWS, BLOCKS, POOLS = range(1, 5), range(1, 4), range(1, 5)
CONFIGS = [(W, B, N) for W in WINDOWS for B in BLOCKS for N in POOLS]
DEPTH = 4          #: ops after `add(0)` (two-entry chunks: up to 8 tokens a sequence)
HIT_DEPTH = 2      #: pools a prefix hit is admitted into
HIT_LEN = 2        #: prompt lengths 0 .. HIT_LEN, every table over `None` and the N blocks
SEQS = (0, 1)


# --------------------------------------------------------------------------- the scope


def ops_for(P: Pool, seqs=SEQS) -> list[tuple]:
    """Every op of the alphabet at this pool: ``add``; ``append`` of each letter at the next
    position; a two-entry ``chunk`` (letters 0 then 1: a chunk is its appends, and what it adds is
    atomicity); ``fork`` to each other sequence; ``free``."""
    out = []
    for s in seqs:
        n = len_of(P, s)
        out.append(("add", s))
        out.extend(("append", s, n, (n, a)) for a in ALPHA)
        out.append(("chunk", s, n, ((n, ALPHA[0]), (n + 1, ALPHA[1]))))
        out.extend(("fork", s, u) for u in seqs if u != s)
        out.append(("free", s))
    return out


def state_key(P: Pool, H: dict) -> tuple:
    return P.key(), tuple((t, tuple(H.get(t, ()))) for t in sorted(P.live))


def explore(m: PagedModel, W: int, B: int, N: int, depth: int) -> Iterator[tuple]:
    """Breadth first from the empty pool: ``("state", P, H, d)`` once per distinct state, then
    ``("step", P, H, o, P2, H2)`` for every successful op out of a state at depth ``< depth``."""
    start = (m.add_seq(PG.empty_pool(N), 0), {0: ()})  # sequence 0 exists: one op of depth saved
    seen = {state_key(*start)}
    frontier = [start]
    yield ("state", start[0], start[1], 0)
    for d in range(depth):
        nxt = []
        for P, H in frontier:
            for o in ops_for(P):
                P2 = m.apply_op(W, B, P, o)
                if P2 is None:
                    continue
                H2 = op_hist(H, o)
                yield ("step", P, H, o, P2, H2)
                k = state_key(P2, H2)
                if k not in seen:
                    seen.add(k)
                    nxt.append((P2, H2))
                    yield ("state", P2, H2, d + 1)
        frontier = nxt


@functools.lru_cache(maxsize=None)
def scope(W: int, B: int, N: int) -> tuple:
    """The explored scope of the real definitions, shared by the twins."""
    return tuple(explore(MODEL, W, B, N, DEPTH))


def events(m: PagedModel, W: int, B: int, N: int) -> Iterator[tuple]:
    return iter(scope(W, B, N)) if m is MODEL else explore(m, W, B, N, DEPTH)


def references(P: Pool, b: int) -> int:
    """Table entries naming ``b`` over the live sequences, counted here, independently of the model."""
    return sum(1 for t in P.live for o in table_of(P, t) if o == b)


# --------------------------------------------------------------------------- the statements


def read_window_at(m: PagedModel, W: int, B: int, N: int, P: Pool, H: dict) -> Optional[str]:
    """``paged_read_window`` at one state: the invariant, and every read is ``lastWindow (W-1)``."""
    if not PG.pool_holds(W, B, N, P, H, m):
        return "PoolHolds fails"
    for t in P.live:
        want = last_window(W - 1, H.get(t, ()))
        if m.read_slots(W, B, P, t) != list(want) or m.read_seq(W, B, P, t) != list(want):
            return f"sequence {t} reads {m.read_slots(W, B, P, t)}, its window is {want}"
    return None


def paged_read_window(m: PagedModel, W: int, B: int, N: int) -> Optional[tuple]:
    for ev in events(m, W, B, N):
        if ev[0] == "state":
            why = read_window_at(m, W, B, N, ev[1], ev[2])
            if why:
                return (W, B, N, ev[1], ev[2], why)
    return None


def rule_spares_future(m: PagedModel, W: int, B: int) -> Optional[tuple]:
    """The arithmetic half of ``paged_free_safe``: an eligible block holds no position a query at
    the current length or later attends to."""
    for n in range(0, 3 * B + W + 3):
        for j in range(0, n // B + 2):
            if m.eligible(W, B, n, j):
                for p in range(B * j, B * j + B):
                    for t in range(n, n + W + B + 1):
                        if in_window(W, t, p):
                            return (W, B, n, j, p, t)
    return None


def free_safe_at(m: PagedModel, W: int, B: int, P: Pool, H: dict) -> Optional[str]:
    for t in P.live:
        n = len_of(P, t)
        for q in range(max(0, n - W + 1), n):
            b = get_slot(table_of(P, t), q // B)
            if b is None or b in P.free or P.mem.get((b, q % B)) != H[t][q]:
                return f"sequence {t} needs position {q}: block {b}, free list {P.free}"
    return None


def paged_free_safe(m: PagedModel, W: int, B: int, N: int) -> Optional[tuple]:
    bad = rule_spares_future(m, W, B)
    if bad:
        return bad
    for ev in events(m, W, B, N):
        if ev[0] == "state":
            why = free_safe_at(m, W, B, ev[1], ev[2])
            if why:
                return (W, B, N, ev[1], why)
    return None


def independent_at(m: PagedModel, W: int, B: int, P: Pool, o: tuple, P2: Pool) -> Optional[str]:
    for t in P.live:
        if t == op_target(o):
            continue
        if t not in P2.live or m.read_slots(W, B, P2, t) != m.read_slots(W, B, P, t):
            return f"{o} changed what sequence {t} reads"
    return None


def paged_independent(m: PagedModel, W: int, B: int, N: int) -> Optional[tuple]:
    for ev in events(m, W, B, N):
        if ev[0] == "step":
            why = independent_at(m, W, B, ev[1], ev[3], ev[4])
            if why:
                return (W, B, N, ev[1], why)
    return None


def refcount_at(m: PagedModel, N: int, P: Pool) -> Optional[str]:
    if len(set(P.free)) != len(P.free):
        return f"a block twice on the free list {P.free}"
    for b in set(range(N)) | set(P.free) | PG.referenced(P):
        refs = references(P, b)
        if (b in P.free) != (b < N and refs == 0):
            return f"block {b}: on the free list {b in P.free}, referenced {refs} times"
        if m.refcount(P, b) != refs or (m.refcount(P, b) == 0) != (refs == 0):
            return f"block {b}: refcount {m.refcount(P, b)}, references {refs}"
    return None


def paged_refcount(m: PagedModel, W: int, B: int, N: int) -> Optional[tuple]:
    for ev in events(m, W, B, N):
        if ev[0] == "state":
            why = refcount_at(m, N, ev[1])
            if why:
                return (W, B, N, ev[1], why)
    return None


def hit_at(m: PagedModel, hit: Callable, W: int, B: int, N: int, P: Pool, H: dict,
           prompt: tuple, L: int, tbl: tuple) -> bool:
    """``paged_hit_valid`` for one hit: usable (``PoolHolds`` after admission) iff valid."""
    s = max(P.live, default=-1) + 1 + len(SEQS)  # not live
    usable = PG.pool_holds(W, B, N, m.admit_hit(P, s, 0, L, tbl), upd(H, s, tuple(prompt[:L])), m)
    return usable == hit(W, B, P, prompt, L, tbl)


def paged_hit_valid(m: PagedModel, W: int, B: int, N: int, hit: Callable = PG.hit_valid) -> Optional[tuple]:
    for ev in events(m, W, B, N):
        if ev[0] != "state" or ev[3] > HIT_DEPTH:
            continue
        P, H = ev[1], ev[2]
        for L in range(HIT_LEN + 1):
            tables = list(itertools.product((None,) + tuple(range(N)), repeat=-(-L // B)))
            for letters in itertools.product(ALPHA, repeat=L):
                prompt = tuple((q, a) for q, a in enumerate(letters))
                for tbl in tables:
                    if not hit_at(m, hit, W, B, N, P, H, prompt, L, tbl):
                        return (W, B, N, P, prompt, L, tbl)
    return None


# --------------------------------------------------------------------------- wrong definitions


class FreesOneTooEarly(PagedModel):
    """The rule's bound off by one: a block is released while its last position is still needed."""

    def eligible(self, W, B, n, j):
        return B * j + B + W <= n + 2


class NoCopyOnWrite(PagedModel):
    """A fork's shared partial block is written in place: the other sequence's entry is overwritten."""

    def place_with(self, P, s, j, i, x, old):
        if old is None:
            return super().place_with(P, s, j, i, x, old)
        return P._replace(mem=self.write_mem(P.mem, old, i, x))


class RefcountNotTaken(PagedModel):
    """The references a fork adds are never counted: a sequence treats its blocks as its own, so a
    release frees a block another table still names (and a shared block is written in place)."""

    def own(self, P: Pool, s: int, b: int) -> int:
        return self.count_in(b, table_of(P, s))

    def place_with(self, P, s, j, i, x, old):
        if old is not None and self.own(P, s, old) < 2:
            return P._replace(mem=self.write_mem(P.mem, old, i, x))
        return super().place_with(P, s, j, i, x, old)

    def release_with(self, P, s, j, old):
        if old is None:
            return P
        P1 = self.drop_ref(P, s, self.set_ext(table_of(P, s), j, None))
        return P1._replace(free=P1.free + (old,)) if self.own(P1, s, old) == 0 and old not in P1.free else P1

    def drop_head(self, P, s, o, rest):
        P1 = self.drop_ref(P, s, rest)
        if o is None or self.own(P1, s, o) or o in P1.free:
            return P1
        return P1._replace(free=P1.free + (o,))


def hit_ignores_first_block(W, B, P, prompt, L, tbl):
    """A hit check that skips the logical block holding the window's oldest position."""
    first = max(0, L - W + 1) // B
    return all(get_slot(tbl, q // B) is not None and P.mem.get((get_slot(tbl, q // B), q % B)) == prompt[q]
               for q in range(max(0, L - W + 1), L) if q // B != first)


# theorem name -> (checker, the definitions it runs against in the negative check)
TWINS: dict[str, tuple[Callable, Callable]] = {
    "paged_read_window": (paged_read_window, lambda W, B, N: paged_read_window(FreesOneTooEarly(), W, B, N)),
    "paged_free_safe": (paged_free_safe, lambda W, B, N: paged_free_safe(FreesOneTooEarly(), W, B, N)),
    "paged_independent": (paged_independent, lambda W, B, N: paged_independent(NoCopyOnWrite(), W, B, N)),
    "paged_refcount": (paged_refcount, lambda W, B, N: paged_refcount(RefcountNotTaken(), W, B, N)),
    "paged_hit_valid": (paged_hit_valid,
                        lambda W, B, N: paged_hit_valid(MODEL, W, B, N, hit_ignores_first_block)),
}


def _exhaustive(name: str) -> Optional[tuple]:
    check = TWINS[name][0]
    for W, B, N in CONFIGS:
        bad = check(MODEL, W, B, N)
        if bad:
            return bad
    return None


def _wrong(name: str) -> Optional[tuple]:
    wrong = TWINS[name][1]
    for W, B, N in reversed(CONFIGS):  # wide windows and big pools first: where the bugs show soonest
        bad = wrong(W, B, N)
        if bad:
            return bad
    return None


# --------------------------------------------------------------------------- beyond the small scope

BEYOND = settings(max_examples=25, deadline=None)


def _random_run(seed: int, W: int, B: int, N: int, k: int, m: PagedModel = MODEL) -> Iterator[tuple]:
    """``(P, H, o, P2, H2)`` for each op of a random run over three sequences (failed ops included:
    then ``P2`` is ``None``)."""
    rng = random.Random(seed)
    free = list(range(N))
    rng.shuffle(free)  # any well-formed start: garbage in every slot, the free list in any order
    P = PG.empty_pool(N)._replace(mem={(b, i): ("garbage", b, i) for b in range(N) for i in range(B)},
                                  free=tuple(free))
    H: dict = {}
    for _ in range(k):
        o = rng.choice(ops_for(P, seqs=(0, 1, 2)))
        if o[0] == "chunk":  # chunks of any length beyond the scope
            s, n = o[1], len_of(P, o[1])
            o = ("chunk", s, n, tuple((n + i, rng.randrange(3)) for i in range(rng.randrange(6))))
        P2 = m.apply_op(W, B, P, o)
        H2 = op_hist(H, o) if P2 is not None else H
        yield P, H, o, P2, H2
        if P2 is not None:
            P, H = P2, H2


_CFG = dict(seed=st.integers(0, 2**32 - 1), W=st.integers(1, 8), B=st.integers(1, 4), N=st.integers(1, 8))


def _beyond(name: str) -> None:
    @BEYOND
    @given(**_CFG)
    def run(seed, W, B, N):
        for P, H, o, P2, H2 in _random_run(seed, W, B, N, 40):
            if P2 is None:
                continue
            if name == "paged_read_window":
                assert read_window_at(MODEL, W, B, N, P2, H2) is None, (W, B, N, o)
            elif name == "paged_free_safe":
                assert free_safe_at(MODEL, W, B, P2, H2) is None, (W, B, N, o)
            elif name == "paged_independent":
                assert independent_at(MODEL, W, B, P, o, P2) is None, (W, B, N, o)
            elif name == "paged_refcount":
                assert refcount_at(MODEL, N, P2) is None, (W, B, N, o)
        if name == "paged_free_safe":
            assert rule_spares_future(MODEL, W, B) is None
        if name == "paged_hit_valid":  # hits into the final pool, prompts drawn from its histories
            rng = random.Random(seed)
            for _ in range(20):
                src = rng.choice(sorted(H2) or [0])
                base = list(H2.get(src, ()))
                L = rng.randrange(len(base) + 1) if base else 0
                prompt = tuple(base[:L])
                if prompt and rng.random() < 0.3:  # one entry changed
                    q = rng.randrange(L)
                    prompt = prompt[:q] + ((q, 9),) + prompt[q + 1:]
                tbl = tuple(rng.choice((None,) + tuple(range(N))) if rng.random() < 0.5
                            else get_slot(table_of(P2 or P, src), j) for j in range(-(-L // B)))
                assert hit_at(MODEL, PG.hit_valid, W, B, N, P2 or P, H2, prompt, L, tbl), (W, B, N, L, tbl)
    run()


# --------------------------------------------------------------------------- one test per theorem


def _twin(name: str) -> None:
    """Exhaustive, then beyond the scope, then the same checker against the wrong definition."""
    bad = _exhaustive(name)
    assert bad is None, f"{name}: counterexample {bad}"
    _beyond(name)
    assert _wrong(name) is not None, f"{name}: the checker cannot tell a wrong definition"


def test_paged_read_window():
    _twin("paged_read_window")


def test_paged_free_safe():
    _twin("paged_free_safe")


def test_paged_independent():
    _twin("paged_independent")


def test_paged_refcount():
    _twin("paged_refcount")


def test_paged_hit_valid():
    _twin("paged_hit_valid")


def test_every_twin_has_a_test_function():
    names = {n[len("test_"):] for n in globals() if n.startswith("test_")}
    assert set(TWINS) <= names


def test_the_scope_reaches_copy_on_write_exhaustion_and_freeing():
    """The exhaustive scope is not vacuous: it reaches a copy on write, an exhausted pool, a block
    the rule freed, and a freed block taken again."""
    seen = set()
    for W, B, N in [(2, 2, 2), (3, 2, 3), (1, 1, 1)]:
        for ev in scope(W, B, N):
            if ev[0] != "step":
                continue
            P, o, P2 = ev[1], ev[3], ev[4]
            if o[0] == "append":
                s, j = o[1], o[2] // B
                old = get_slot(table_of(P, s), j)
                new = get_slot(table_of(P2, s), j)
                if old is not None and new is not None and old != new:
                    seen.add("copy on write")
                if len(P2.free) > len(P.free) - (old is None):
                    seen.add("rule freed a block")
        for P, H in [(ev[1], ev[2]) for ev in scope(W, B, N) if ev[0] == "state"]:
            for o in ops_for(P):
                if o[0] == "append" and o[1] in P.live and MODEL.apply_op(W, B, P, o) is None:
                    seen.add("pool exhausted")
    assert seen == {"copy on write", "rule freed a block", "pool exhausted"}, seen
