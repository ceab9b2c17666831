"""The paged oracle (docs/paged.md): invariants, bounds and the reference pool.

* the Lean definitions of ``lean/KVWindow/PagedModel.lean`` are mirrored in
  :mod:`pyspec.paged_model` (``PagedModel``, ``MODEL``, ``Pool``, ``run_ops``), re-exported here;
* the invariants the theorems of ``lean/KVWindow/Paged.lean`` are about, and the bounds a checker
  asserts: ``pool_holds`` (Lean ``PoolHolds``), ``hit_valid`` (``HitValid``), ``needed``,
  ``may_free``, ``max_blocks``, ``blocks_beyond_rule``, and ``longest_valid_hit`` against a pool
  that kept every block;
* :class:`PagedPool`: the reference implementation of the paged protocol (DESIGN §4), the model
  executed plus what it leaves out: typed errors (:class:`PagedError` and its subclasses), payload
  arrays, content identities of full blocks, ``admit`` with the longest valid hit.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from pyspec.paged_model import (  # noqa: F401  (re-exported: the harness imports the oracle from here)
    MODEL, PagedModel, Pool, empty_pool, get_slot, len_of, op_hist, op_target, run_ops, table_of, upd)
from pyspec.spec import _tsub, last_window

# --------------------------------------------------------------------------- errors


class PagedError(Exception):
    """Base of every error the reference pool raises; an op that raises changed nothing."""


class UnknownSequence(PagedError, KeyError):
    """The op names a sequence that does not exist (never added, or freed)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else "unknown sequence"


class DuplicateSequence(PagedError, ValueError):
    """``add``, ``fork`` or ``admit`` names a sequence that already exists."""


class BadPosition(PagedError, ValueError):
    """An entry's position is not the sequence's next position ``n_s``."""


class BadEntry(PagedError, ValueError):
    """A key or value that is not a 1-D float array of the pool's width."""


class PoolExhausted(PagedError, RuntimeError):
    """The op needs a free block and the free list is empty."""


class BadConfiguration(PagedError, ValueError):
    """``configure`` got a bad ``(window, block_size, num_blocks, width)``, or an op came before it."""


# --------------------------------------------------------------------------- invariants and bounds


def needed_pos(W: int, n: int, q: int) -> bool:
    """Lean ``KVWindow.Needed W n q := q < n ∧ n < q + W``: the query at position ``n`` attends to
    ``q`` besides itself."""
    return q < n < q + W


def needed(W: int, hist: Sequence) -> list:
    """What the next query needs besides itself: ``lastWindow (W-1)`` of the history."""
    return last_window(_tsub(W, 1), hist)


def may_free(W: int, B: int, n: int, j: int) -> bool:
    """The freeing rule (docs/paged.md): logical block ``j`` of a sequence at length ``n`` may be
    freed iff ``(j+1)·B <= n - W + 1`` (Lean ``Eligible``, written without subtraction)."""
    return (j + 1) * B <= n - W + 1


def max_blocks(W: int, B: int) -> int:
    """``ceil((W-1)/B) + 1``: the most blocks a sequence holds under the rule (DESIGN §1)."""
    return math.ceil((W - 1) / B) + 1


def held_blocks(table: Sequence[Optional[int]]) -> int:
    """How many blocks a table holds (entries that are not ``None``)."""
    return sum(1 for b in table if b is not None)


def blocks_beyond_rule(W: int, B: int, n: int, table: Sequence[Optional[int]]) -> int:
    """Blocks a sequence still holds that the rule would have freed (an efficiency finding)."""
    return sum(1 for j, b in enumerate(table) if b is not None and may_free(W, B, n, j))


def same_entry(a: Any, b: Any) -> bool:
    """Entries are equal: ``(pos, key, value)`` with arrays compared bit for bit, anything else by ``==``."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_entry(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and a.shape == b.shape and a.tobytes() == b.tobytes()  # bits: a NaN key equals itself
    return bool(a == b)


def content(W: int, B: int, P: Pool, H: Mapping, t: int) -> bool:
    """Lean ``KVWindow.Content``: ``t``'s history has length ``len t``, and every position its next
    query needs is in a block of its table that holds that position's entry."""
    n, h = len_of(P, t), tuple(H.get(t, ()))
    if len(h) != n:
        return False
    tb = table_of(P, t)
    for q in range(max(0, n - W + 1), n):
        b = get_slot(tb, q // B)
        if b is None or (b, q % B) not in P.mem or not same_entry(P.mem[(b, q % B)], h[q]):
            return False
    return True


def referenced(P: Pool) -> set:
    """Every block some live table references."""
    return {b for t in P.live for b in table_of(P, t) if b is not None}


def free_ok(N: int, P: Pool, model: PagedModel = MODEL) -> bool:
    """Lean ``KVWindow.FreeOK``: no block twice on the free list, and a block is on it iff it is a
    block of the pool (``< N``) with refcount 0."""
    if len(set(P.free)) != len(P.free):
        return False
    return all((b in P.free) == (b < N and model.refcount(P, b) == 0)
               for b in set(P.free) | set(range(N)) | referenced(P))


def refs_ok(N: int, P: Pool) -> bool:
    """Lean ``KVWindow.RefsOK``: every block a live table references is a block of the pool."""
    return all(b < N for b in referenced(P))


def pool_wf(N: int, P: Pool, model: PagedModel = MODEL) -> bool:
    """Lean ``KVWindow.PoolWF``: live sequences distinct, ``FreeOK``, ``RefsOK``."""
    return len(set(P.live)) == len(P.live) and free_ok(N, P, model) and refs_ok(N, P)


def pool_holds(W: int, B: int, N: int, P: Pool, H: Mapping, model: PagedModel = MODEL) -> bool:
    """Lean ``KVWindow.PoolHolds``: the pool is well formed and holds every live history."""
    return pool_wf(N, P, model) and all(content(W, B, P, H, t) for t in P.live)


def hit_valid(W: int, B: int, P: Pool, prompt: Sequence, L: int, tbl: Sequence[Optional[int]]) -> bool:
    """Lean ``KVWindow.HitValid``: every position ``max(0, L-W+1) .. L-1`` is in a block of ``tbl``
    that holds the prompt's entry there (``paged_hit_valid``: exactly when the hit is usable)."""
    for q in range(max(0, L - W + 1), L):
        b = get_slot(tbl, q // B)
        if b is None or (b, q % B) not in P.mem or not same_entry(P.mem[(b, q % B)], prompt[q]):
            return False
    return True


# --------------------------------------------------------------------------- content identities and hits


def entry_bits(e: Any) -> Any:
    """The hashable identity of one entry: position, dtype and bits of key and value."""
    if isinstance(e, tuple) and len(e) == 3 and isinstance(e[1], np.ndarray):
        return (e[0], e[1].dtype.str, e[1].tobytes(), e[2].dtype.str, e[2].tobytes())
    return e


def prefix_keys(identity: int, entries: Sequence, B: int) -> list:
    """The content identity of every full block of a history: block ``j``'s is the identity tag and
    every entry of positions ``0 .. (j+1)·B-1``, chained as ``(block j-1's, block j's entries)``."""
    keys, k = [], ("root", identity)
    for j in range(len(entries) // B):
        k = (k, tuple(entry_bits(e) for e in entries[j * B:(j + 1) * B]))
        keys.append(k)
    return keys


def hit_blocks(W: int, B: int, L: int) -> list[int]:
    """The logical blocks covering ``max(0, L-W+1) .. L-1``: those a hit of length ``L`` must hold."""
    return sorted({q // B for q in range(max(0, L - W + 1), L)})


def longest_valid_hit(W: int, B: int, kept: set, entries: Sequence, identity: int = 0) -> int:
    """The longest hit a pool that kept every full block it ever filled (``kept``: their content
    identities, e.g. from :func:`prefix_keys` of every history) could give a prompt of ``m >= 1``
    entries: the largest multiple of ``B`` that is ``<= m-1`` whose ``hit_blocks`` are all kept."""
    keys = prefix_keys(identity, entries, B)
    for L in range((len(entries) - 1) // B * B, 0, -B):
        if all(keys[j] in kept for j in hit_blocks(W, B, L)):
            return L
    return 0


# --------------------------------------------------------------------------- the reference pool


def _count(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise BadConfiguration(f"{name} must be an int >= 1, got {v!r}")
    return int(v)


class PagedPool:
    """The paged protocol (DESIGN §4) over :data:`MODEL`. Each op validates, computes the new state
    from the old one, and only then commits, so an op that raises changes nothing. Free blocks are
    taken least-recently-freed first; a full block keeps its content identity until it is taken
    for another use, which is what ``admit`` finds."""

    def __init__(self) -> None:
        self._cfg: Optional[tuple[int, int, int, int]] = None

    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        """Start an empty pool of ``num_blocks`` blocks of ``block_size`` positions."""
        self._cfg = (_count("window", window), _count("block_size", block_size),
                     _count("num_blocks", num_blocks), _count("width", width))
        self._pool, self._keys, self._chain = empty_pool(self._cfg[2]), {}, {}


    def _w(self) -> tuple[int, int, int, int]:
        if self._cfg is None:
            raise BadConfiguration("call configure(window, block_size, num_blocks, width) first")
        return self._cfg

    def _live(self, s: Any, want: bool) -> int:
        self._w()
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise UnknownSequence(f"sequence ids are ints >= 0, got {s!r}")
        s = int(s)
        if want and s not in self._pool.live:
            raise UnknownSequence(f"sequence {s} does not exist (add, fork or admit it first)")
        if not want and s in self._pool.live:
            raise DuplicateSequence(f"sequence {s} already exists (free it first)")
        return s

    def _entry(self, s: int, expected: int, e: Any) -> tuple:
        D = self._w()[3]
        try:
            pos, key, value = e
        except (TypeError, ValueError):
            raise BadEntry(f"an entry is (pos, key, value), got {e!r}") from None
        if isinstance(pos, bool) or not isinstance(pos, (int, np.integer)) or pos != expected:
            raise BadPosition(f"sequence {s} expects position {expected} next, got {pos!r}")
        out = [int(pos)]
        for name, a in (("key", key), ("value", value)):
            arr = np.array(a, copy=True)
            if arr.ndim != 1 or arr.shape[0] != D or not np.issubdtype(arr.dtype, np.floating):
                raise BadEntry(f"{name} at position {pos} must be a 1-D float array of width {D}, "
                               f"got shape {arr.shape} dtype {arr.dtype}")
            arr.flags.writeable = False
            out.append(arr)
        return tuple(out)


    def _append(self, state: tuple, s: int, entry: tuple) -> tuple:
        """One append on ``(pool, content identities, chains)``, returning the new triple."""
        W, B, N, _ = self._w()
        P, keys, chain = state
        pos = entry[0]
        j = pos // B
        P1 = MODEL.place_with(P, s, j, pos % B, entry, get_slot(table_of(P, s), j))
        if P1 is None:
            raise PoolExhausted(f"sequence {s}, position {pos}: logical block {j} needs a block "
                                f"and all {N} are in use")
        keys, chain = dict(keys), dict(chain)
        if P1.free != P.free:
            keys.pop(P.free[0], None)  # a cached block taken for another use: evicted
        if pos % B == B - 1:  # the block is full: it gets its content identity
            c = get_slot(table_of(P1, s), j)
            chain[s] = keys[c] = (chain[s], tuple(entry_bits(P1.mem.get((c, i))) for i in range(B)))
        return MODEL.after_place(W, B, s, P1), keys, chain

    def _commit(self, state: tuple) -> None:
        self._pool, self._keys, self._chain = state

    def add(self, seq: int) -> None:
        s = self._live(seq, False)
        self._commit((MODEL.add_seq(self._pool, s), self._keys, upd(self._chain, s, ("root", 0))))

    def append(self, seq: int, pos: int, key: Any, value: Any) -> None:
        s = self._live(seq, True)
        entry = self._entry(s, len_of(self._pool, s), (pos, key, value))
        self._commit(self._append((self._pool, self._keys, self._chain), s, entry))

    def append_chunk(self, seq: int, entries: Iterable) -> None:
        """Atomic: every entry is checked, then all are appended, or none if the pool runs out."""
        s = self._live(seq, True)
        n = len_of(self._pool, s)
        es = [self._entry(s, n + i, e) for i, e in enumerate(entries)]
        state = (self._pool, self._keys, self._chain)
        for e in es:
            state = self._append(state, s, e)
        self._commit(state)

    def fork(self, src: int, dst: int) -> None:
        a, b = self._live(src, True), self._live(dst, False)
        self._commit((MODEL.fork_seq(self._pool, a, b), self._keys, upd(self._chain, b, self._chain[a])))

    def free(self, seq: int) -> None:
        s = self._live(seq, True)
        chain = {t: k for t, k in self._chain.items() if t != s}
        self._commit((MODEL.free_seq(self._pool, s), self._keys, chain))

    def admit(self, seq: int, entries: Sequence, identity: int = 0) -> int:
        """Start ``seq`` from the longest valid cached prefix of the prompt; returns its length ``L``
        (the caller appends ``entries[L:]``). For each needed logical block the lowest-numbered
        block with the prompt's content identity is used."""
        s = self._live(seq, False)
        if isinstance(identity, bool) or not isinstance(identity, (int, np.integer)):
            raise BadEntry(f"identity must be an int, got {identity!r}")
        es = [self._entry(s, i, e) for i, e in enumerate(entries)]
        if not es:
            raise BadPosition(f"admit({s}) needs a prompt of at least one entry")
        W, B, _, _ = self._w()
        pkeys = prefix_keys(int(identity), es, B)
        lowest: dict[int, Any] = {}  # logical block j -> the lowest-numbered block with its identity, or None

        def block_for(j: int) -> Any:
            # looked up once per j: consecutive L share all but one of their hit blocks, and each lookup
            # compares chained identities as deep as the prompt (a 600-op case spent 45 s here without it)
            if j not in lowest:
                lowest[j] = min((b for b, k in self._keys.items() if k == pkeys[j]), default=None)
            return lowest[j]

        for L in range((len(es) - 1) // B * B, -1, -B):
            found = {j: block_for(j) for j in hit_blocks(W, B, L)}
            if None not in found.values():
                break
        tbl = [found.get(j) for j in range(L // B)]
        P = MODEL.admit_hit(self._pool, s, int(identity), L, tbl)
        self._commit((P, self._keys, upd(self._chain, s, pkeys[L // B - 1] if L else ("root", int(identity)))))
        return L


    def read(self, seq: int) -> list:
        W, B, _, _ = self._w()
        s = self._live(seq, True)
        return MODEL.read_seq(W, B, self._pool, s)

    def table(self, seq: int) -> list:
        s = self._live(seq, True)
        return list(table_of(self._pool, s))

    def free_blocks(self) -> int:
        self._w()
        return len(self._pool.free)

    def length(self, seq: int) -> int:
        """``n_s``: tokens seen by the sequence (the position of its next token)."""
        s = self._live(seq, True)
        return len_of(self._pool, s)

    def refcounts(self) -> list[int]:
        """The refcount of every block (counted from the tables, as Lean ``refcount``)."""
        return [MODEL.refcount(self._pool, b) for b in range(self._w()[2])]

    def free_list(self) -> tuple[int, ...]:
        """The free list, least recently freed first (the next block taken is the first)."""
        self._w()
        return self._pool.free

    def cached(self) -> dict:
        """Block → content identity of every block that holds a full block's entries."""
        self._w()
        return dict(self._keys)

    def state(self) -> Pool:
        """The model state (a :class:`Pool`), for checkers that evaluate the invariants on it."""
        self._w()
        return self._pool
