"""The checker's side of a paged case: histories, the entries they hold, what every read must return.

* **Payloads** are a pure function of ``(lineage, position)`` (:class:`Payloads`): a lineage is one
  run of appends — a sequence's own, a fork's new branch, the tokens after a rollback — so a fork
  and an admit *share* their source's entries (same lineage, same positions, same bits) while the
  tokens a rollback withdrew and the ones appended in their place differ. Each lineage has a
  payload table (``float32[cap, D]`` keys and values, grown by doubling), and every entry the
  checker hands a cache or expects back is a slice of one: no per-entry Python.
* A **history** is a list of segments ``(lineage, lo, hi)`` covering positions ``0 .. n-1``
  (:class:`SeqSpec`); the expected read of a sequence is ``lastWindow (W-1)`` of it
  (:func:`pyspec.paged.needed`), i.e. the rows ``max(0, n-W+1) .. n-1`` of its segments.
* **Content identities** (docs/paged.md "Prefix cache"): block ``j`` of a history is identified by its
  identity tag and its segments clipped at ``(j+1)·B``; :attr:`PagedSpec.kept` holds every full
  block ever filled, i.e. a pool that kept every block it was allowed to keep, against which a hit
  is judged (:meth:`PagedSpec.longest_valid_hit`, the oracle's :func:`pyspec.paged.hit_blocks`).
* **Rollback** (docs/paged.md "Rollback"): a cache declaring ``max_rollback = R`` keeps every block a
  rollback to ``floor = max(hw - R, base)`` needs, where ``hw`` is the high-water mark of the
  sequence's length and ``base`` its admitted hit; with ``R = 0`` (no rollback) ``floor`` is ``n`` and
  this is the plain freeing rule (:func:`pyspec.paged.may_free`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from pyspec.paged import hit_blocks, max_blocks, may_free

_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on ``uint64`` (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M2
    x = x ^ (x >> np.uint64(27))
    x = x * _M3
    return x ^ (x >> np.uint64(31))


class Payloads:
    """Per-lineage payload tables: row ``p`` of lineage ``l`` is the key (or value) of position ``p`` of
    every history in that lineage. Values are 24-bit fractions in ``[-1, 1)``, exact in float32,
    different for every ``(lineage, position, column)`` with overwhelming probability."""

    def __init__(self, width: int, salt: int = 0):
        self.width = width
        self.salt = np.uint64(salt & 0xFFFFFFFF)
        self._k: dict[int, np.ndarray] = {}
        self._v: dict[int, np.ndarray] = {}
        self._col = np.arange(width, dtype=np.uint64)

    def _grow(self, lineage: int, hi: int) -> None:
        old = self._k.get(lineage)
        have = 0 if old is None else old.shape[0]
        cap = max(16, have)
        while cap < hi:
            cap *= 2
        p = np.arange(have, cap, dtype=np.uint64)[:, None]
        base = (np.uint64(lineage + 1) * _M1) ^ (p * _M2) ^ (self._col[None, :] * _M3) ^ self.salt
        rows = []
        for lane in (np.uint64(0x5851F42D4C957F2D), np.uint64(0x14057B7EF767814F)):
            h = _mix(base + lane)
            rows.append(((h >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0).astype(np.float32))
        k, v = rows
        if old is not None:
            k, v = np.concatenate([old, k]), np.concatenate([self._v[lineage], v])
        k.flags.writeable = v.flags.writeable = False  # handed to caches as views: none may write the oracle's
        self._k[lineage], self._v[lineage] = k, v

    def rows(self, lineage: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys and values of positions ``lo .. hi-1`` of ``lineage`` (views; do not write)."""
        k = self._k.get(lineage)
        if k is None or k.shape[0] < hi:
            with np.errstate(over="ignore"):
                self._grow(lineage, hi)
            k = self._k[lineage]
        return k[lo:hi], self._v[lineage][lo:hi]


Segs = list  # [(lineage, lo, hi), ...] covering 0 .. n-1 in order


def clip(segs: Segs, m: int) -> tuple:
    """The segments of the first ``m`` positions (a prefix's content, hashable)."""
    out = []
    for l, lo, hi in segs:
        if lo >= m:
            break
        if hi > lo:  # an empty segment holds no position (and must not make two equal prefixes differ)
            out.append((l, lo, min(hi, m)))
    return tuple(out)


def common_prefix(a: Segs, b: Segs) -> int:
    """How many leading positions two histories agree on (same lineage at each position). Both cover
    positions ``0 ..`` contiguously, but a history may be cut into segments differently (a clip, a preempt):
    the segments are walked position by position, not pairwise."""
    a = [seg for seg in a if seg[2] > seg[1]]  # an empty segment holds no position
    b = [seg for seg in b if seg[2] > seg[1]]
    i = j = pos = 0
    while i < len(a) and j < len(b):
        la, _, hia = a[i]
        lb, _, hib = b[j]
        if la != lb:
            return pos
        pos = min(hia, hib)
        if hia == pos:
            i += 1
        if hib == pos:
            j += 1
    return pos


class SeqSpec:
    """One live sequence of the spec: its history, length, identity, high-water mark and admitted base."""

    __slots__ = ("segs", "n", "identity", "hw", "base", "cur", "want")

    def __init__(self, segs: Segs, n: int, identity: int, hw: int, base: int, cur: int):
        self.segs, self.n, self.identity, self.hw, self.base, self.cur = segs, n, identity, hw, base, cur
        #: The expected read and its bytes, while the history is unchanged (``None``: to compute).
        self.want = None

    def copy(self, cur: int) -> "SeqSpec":
        out = SeqSpec(list(self.segs), self.n, self.identity, self.hw, self.base, cur)
        out.want = self.want
        return out


class PagedSpec:
    """The spec state of one paged case: every live sequence's history, and what a cache may and must do."""

    def __init__(self, window: int, block_size: int, num_blocks: int, width: int, max_rollback: int = 0,
                 salt: int = 0):
        self.W, self.B, self.N, self.D, self.R = window, block_size, num_blocks, width, max_rollback
        self.payloads = Payloads(width, salt)
        self.seqs: dict[int, SeqSpec] = {}
        #: Content identities of every full block ever filled (a pool that kept them all).
        self.kept: set = set()
        self._lineages = 0
        self.bound = max_blocks(window + max_rollback, block_size)
        self._pos = np.arange(1024, dtype=np.int64)

    # -- lineages and entries -------------------------------------------------
    def new_lineage(self) -> int:
        self._lineages += 1
        return self._lineages

    def positions(self, lo: int, hi: int) -> np.ndarray:
        """``lo .. hi-1`` as ``int64`` (a view of one growing range)."""
        if hi > self._pos.shape[0]:
            self._pos = np.arange(max(hi, 2 * self._pos.shape[0]), dtype=np.int64)
        return self._pos[lo:hi]

    def entries(self, segs: Segs, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, keys and values of ``lo .. hi-1`` of the history ``segs`` (views when one segment
        holds them all, the common case)."""
        if segs:
            ln, a, b = segs[-1]
            if a <= lo and hi <= b:  # the common case: one segment, the last, holds them all
                k = self.payloads._k.get(ln)
                if k is not None and k.shape[0] >= hi:
                    return self.positions(lo, hi), k[lo:hi], self.payloads._v[ln][lo:hi]
        parts = [(l, max(lo, a), min(hi, b)) for l, a, b in segs if a < hi and b > lo]
        if len(parts) == 1:
            k, v = self.payloads.rows(*parts[0])
            return self.positions(lo, hi), k, v
        if not parts:
            empty = np.empty((0, self.D), dtype=np.float32)
            return self.positions(0, 0), empty, empty
        ks, vs = zip(*(self.payloads.rows(*p) for p in parts))
        return self.positions(lo, hi), np.concatenate(ks), np.concatenate(vs)

    def expected(self, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What ``read(s)`` must return: ``lastWindow (W-1)`` of ``s``'s history."""
        q = self.seqs[s]
        return self.entries(q.segs, max(0, q.n - self.W + 1), q.n)

    def expected_bytes(self, s: int) -> tuple:
        """``(expected read, its positions', keys' and values' bytes, the three concatenated)``, kept while the
        history is unchanged."""
        q = self.seqs[s]
        if q.want is None:
            want = self.expected(s)
            pb, kb, vb = want[0].tobytes(), want[1].tobytes(), want[2].tobytes()
            q.want = (want, pb, kb, vb, pb + kb + vb)
        return q.want

    # -- bounds and the rule -----------------------------------------------------
    def floor(self, q: SeqSpec) -> int:
        """The lowest length a rollback may return ``q`` to (``n`` itself without rollback)."""
        return max(q.hw - self.R, q.base) if self.R else q.n

    def needed_from(self, q: SeqSpec) -> int:
        """First logical block holding a position the next query needs (every one from it on must be present)."""
        return max(0, q.n - self.W + 1) // self.B

    def keep_from(self, q: SeqSpec) -> int:
        """First logical block the rule keeps (one a rollback may need again counts as kept)."""
        return max(0, self.floor(q) - self.W + 1) // self.B

    def may_release(self, q: SeqSpec, j: int) -> bool:
        """:func:`pyspec.paged.may_free` at the rollback floor (the plain rule when ``R = 0``)."""
        return may_free(self.W, self.B, self.floor(q), j)

    # -- ops on histories -------------------------------------------------------
    def add(self, s: int, identity: int = 0) -> None:
        self.seqs[s] = SeqSpec([], 0, identity, 0, 0, self.new_lineage())

    def _note_full(self, q: SeqSpec, n0: int) -> None:
        """Record the content identity of every block ``q`` filled while its length went ``n0 -> q.n``."""
        B = self.B
        for j in range(n0 // B, q.n // B):
            self.kept.add((q.identity, clip(q.segs, (j + 1) * B)))

    def extend(self, s: int, segs: Segs) -> None:
        """Append the entries of ``segs`` (positions ``n ..``) to ``s``'s history."""
        q = self.seqs[s]
        n0 = q.n
        for l, lo, hi in segs:
            if hi <= lo:  # an empty chunk adds no position (and no segment)
                continue
            if q.segs and q.segs[-1][0] == l and q.segs[-1][2] == lo:
                q.segs[-1] = (l, q.segs[-1][1], hi)
            else:
                q.segs.append((l, lo, hi))
            q.n = hi
        q.hw = max(q.hw, q.n)
        q.want = None
        self._note_full(q, n0)

    def grow(self, s: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``k`` new tokens of ``s``'s own lineage: returns their entries and adds them to the history."""
        q = self.seqs[s]
        lo = q.n
        self.extend(s, [(q.cur, lo, lo + k)])
        return self.entries(q.segs, lo, lo + k)

    def fork(self, src: int, dst: int) -> None:
        self.seqs[dst] = self.seqs[src].copy(self.new_lineage())

    def free(self, s: int) -> None:
        del self.seqs[s]

    def rollback(self, s: int, r: int) -> None:
        """Withdraw the last ``r`` tokens; the tokens appended next are a new lineage (other payloads)."""
        q = self.seqs[s]
        q.n -= r
        q.want = None
        q.segs = list(clip(q.segs, q.n))
        q.cur = self.new_lineage()

    def admitted(self, dst: int, prompt: Segs, hit: int, identity: int) -> None:
        """``dst`` starts from a hit of ``hit`` entries of the prompt ``prompt``."""
        self.seqs[dst] = SeqSpec(list(clip(prompt, hit)), hit, identity, hit, hit, self.new_lineage())

    def rollback_ok(self, s: int, r: int) -> Optional[str]:
        """Why rolling ``s`` back by ``r`` is not a valid call for a cache of ``max_rollback = R`` (``None``: valid)."""
        q = self.seqs[s]
        if r > q.n:
            return f"s{s} has {q.n} tokens, fewer than the {r} to roll back"
        if q.n - r < max(q.hw - self.R, q.base):
            return (f"rolling s{s} back to {q.n - r} passes below max(high-water mark {q.hw} - max_rollback {self.R}, "
                    f"admitted hit {q.base})")
        return None

    # -- prefix hits ------------------------------------------------------------------
    def longest_valid_hit(self, prompt: Segs, m: int, identity: int) -> int:
        """The longest hit (a multiple of ``B``, ``<= m-1``) every block of whose window some history of
        this identity filled: what a pool that kept every block could give (docs/paged.md)."""
        B = self.B
        for L in range((m - 1) // B * B, 0, -B):
            if all((identity, clip(prompt, (j + 1) * B)) in self.kept for j in hit_blocks(self.W, B, L)):
                return L
        return 0
