"""Python twins of the Lean theorems (DESIGN §3): one ``test_<leanName>`` per theorem.

Each theorem's statement is written once, as a checker that takes the
definitions as parameters (a :class:`Defs`) and returns the first
counterexample in the small scope or ``None``:

* exhaustive: every window ``W <= 6`` (from 0, or from 1 where the theorem needs
  ``0 < w``) and every history of length ``<= 9`` over a 2-letter alphabet;
  position theorems use entries ``(pos, letter)`` with positions ``0..n-1``;
* beyond the scope: a Hypothesis test on longer histories and wider windows;
* negative: the *same* checker run against a deliberately wrong definition
  (a step keeping ``W + 1``, an inclusive far edge, a ring that reads unfilled
  slots, a sink step that forgets the sinks, ...) must find a counterexample,
  so a twin that cannot fail does not count as a check.

The index-math twins (``rkv_*``) depend only on the history's length, so they run
once per length ``<= 9`` instead of once per history; the twins of the shipped ring
(``index_*``) use entries ``(pos, letter)`` so that a slot holding the wrong
position is visible, and rings whose unwritten slots hold recognizable garbage.

The Lean names are in ``lean/README.md``; ``tests/test_lean_lint.py`` checks
that every theorem in ``lean/KVWindow/Audit.lean`` has a ``test_<name>`` here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import sys
import types
from typing import Any, Callable, Iterable, Optional

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspec import index_ring as IX
from pyspec import spec
from pyspec.golden import sink_run as py_sink_run
from pyspec.ring import Ring

ALPHA = (0, 1)
MAX_LEN = 9
WINDOWS = range(0, 7)
POS_WINDOWS = range(1, 7)
SINKS = range(0, 4)
HISTS: list[tuple[int, ...]] = [h for n in range(MAX_LEN + 1) for h in itertools.product(ALPHA, repeat=n)]
LENGTHS: list[tuple[int, ...]] = [(0,) * n for n in range(MAX_LEN + 1)]  #: one history per length


# --------------------------------------------------------------------------- definitions under test


def _fold(step: Callable, w: int, c: Iterable, ys: Iterable) -> list:
    out = list(c)
    for y in ys:
        out = step(w, out, y)
    return out


@dataclasses.dataclass(frozen=True)
class Defs:
    """The definitions a theorem talks about; pyspec by default, a mutant in negative tests."""

    last_window: Callable = spec.last_window
    step: Callable = spec.step
    run: Callable = spec.run
    push_chunk: Callable = spec.push_chunk
    position_invariant: Callable = spec.position_invariant
    positions_last_window: Callable = spec.positions_last_window
    in_window: Callable = spec.in_window
    sink_window: Callable = spec.sink_window
    sink_step: Callable = spec.sink_step
    sink_run: Callable = py_sink_run
    ring: type = Ring
    masked_fold: Callable = spec.masked_fold
    ix: Any = IX  #: the index functions of csrc/ringkv_index.h (pyspec/index_ring.py)
    index_ring: type = IX.IndexRing

    def ring_run(self, w: int, xs: Iterable) -> Any:
        r = self.ring.empty(w)
        for x in xs:
            r = r.push(x)
        return r


PY = Defs()


def with_step(step: Callable) -> Defs:
    """A mutant ``step``; ``run``/``pushChunk`` are rebuilt from it (they are folds of ``step``)."""
    return dataclasses.replace(
        PY,
        step=step,
        run=lambda w, xs: _fold(step, w, [], xs),
        push_chunk=lambda w, c, ys: _fold(step, w, c, ys),
    )


def with_ix(**overrides: Callable) -> Defs:
    """Some index functions replaced by wrong ones (the rest are pyspec's)."""
    ns = types.SimpleNamespace(**{n: getattr(IX, n) for n in dir(IX) if n.startswith("rkv_") or n == "split_per"})
    vars(ns).update(overrides)
    return dataclasses.replace(PY, ix=ns)


def with_sink_step(sink_step: Callable) -> Defs:
    def sink_run(s, w, hs):
        c: list = []
        for x in hs:
            c = sink_step(s, w, c, x)
        return c

    return dataclasses.replace(PY, sink_step=sink_step, sink_run=sink_run)


def entries(letters: Iterable[int], base: int = 0) -> list[tuple[int, int]]:
    """A history of entries ``(pos, letter)`` with consecutive positions from ``base``."""
    return [(base + i, a) for i, a in enumerate(letters)]


def first_failure(check: Callable, d: Defs, windows: Iterable[int], hists=None) -> Optional[tuple]:
    for w in windows:
        for hs in (HISTS if hists is None else hists):
            if not check(d, w, list(hs)):
                return (w, hs)
    return None


# --------------------------------------------------------------------------- the statements (one per theorem)


def lastWindow_length(d: Defs, w: int, hs: list) -> bool:
    return len(d.last_window(w, hs)) == min(w, len(hs))


def lastWindow_suffix(d: Defs, w: int, hs: list) -> bool:
    lw = list(d.last_window(w, hs))
    # ∃ pre, pre ++ lastWindow w hs = hs
    return any(hs[:k] + lw == hs for k in range(len(hs) + 1))


def step_lastWindow(d: Defs, w: int, hs: list) -> bool:
    return all(d.step(w, d.last_window(w, hs), x) == d.last_window(w, hs + [x]) for x in ALPHA)


def step_preserves_valid(d: Defs, w: int, hs: list) -> bool:
    def valid(hist, c):
        return list(c) == list(d.last_window(w, hist))

    for k in range(len(hs) + 1):  # every candidate cache: each suffix of hs (one is valid)
        c = hs[k:]
        if valid(hs, c):
            if not all(valid(hs + [x], d.step(w, c, x)) for x in ALPHA):
                return False
    return True


def run_correct(d: Defs, w: int, hs: list) -> bool:
    return d.run(w, hs) == d.last_window(w, hs)


def run_length_le(d: Defs, w: int, hs: list) -> bool:
    return len(d.run(w, hs)) <= w


def pushChunk_correct(d: Defs, w: int, xs: list) -> bool:
    for m in range(MAX_LEN - len(xs) + 1):
        for ys in itertools.product(ALPHA, repeat=m):
            if d.push_chunk(w, d.last_window(w, xs), list(ys)) != d.last_window(w, xs + list(ys)):
                return False
    return True


def run_length_lt_of_gt(d: Defs, w: int, hs: list) -> bool:
    return not (w < len(hs)) or len(d.run(w, hs)) < len(hs)


def positions_lastWindow(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return [p for p, _ in d.last_window(w, hs)] == d.positions_last_window(w, len(hs))


def step_preserves_positionInvariant(d: Defs, w: int, letters: list) -> bool:
    for base in (0, 3):
        c = entries(letters, base)
        for a in ALPHA:
            x = (base + len(c), a)  # hx : x.pos = base + c.length
            if not d.position_invariant(d.step(w, c, x)):
                return False
    return True


def _ring_states(d: Defs, w: int):
    """Every ring of ``w`` slots over {empty, 0, 1}, any head and size (WF or not)."""
    for buf in itertools.product((None,) + ALPHA, repeat=w):
        for head in range(w):
            for size in range(w + 1):
                yield d.ring(w, buf, head, size)


RING_STATE_WINDOWS = range(1, 7)


def push_simulates_step(d: Defs, w: int, _hs: list) -> bool:
    for r in _ring_states(d, w):
        if Ring.wf(r):  # the hypothesis is the real WF, whatever the ring under test
            for x in ALPHA:
                if r.push(x).to_list() != spec.step(r.w, r.to_list(), x):
                    return False
    return True


def push_preserves_wf(d: Defs, w: int, _hs: list) -> bool:
    for r in _ring_states(d, w):
        if Ring.wf(r):
            for x in ALPHA:
                if not Ring.wf(r.push(x)):
                    return False
    return True


def ring_run_correct(d: Defs, w: int, hs: list) -> bool:
    return d.ring_run(w, hs).to_list() == d.run(w, hs)


def slot_eq_pos_mod(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    r = d.ring_run(w, range(n))  # positions 0..n-1
    return all(r.buf[p % w] == p for p in range(n) if n <= p + w)


def _masked(d: Defs, w: int, hs: list) -> list:
    t = max(0, len(hs) - 1)  # Lean `hs.length - 1` (truncated)
    return [e for e in hs if d.in_window(w, t, e[0])]


def filter_inWindow_eq_lastWindow(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return _masked(d, w, hs) == list(d.last_window(w, hs))


def sinkStep_correct(d: Defs, w: int, hs: list) -> bool:
    return all(
        d.sink_step(s, w, d.sink_window(s, w, hs), x) == d.sink_window(s, w, hs + [x])
        for s in SINKS for x in ALPHA
    )


def sinkRun_correct(d: Defs, w: int, hs: list) -> bool:
    return all(d.sink_run(s, w, hs) == d.sink_window(s, w, hs) for s in SINKS)


def hf_convention_eq(d: Defs, w: int, hs: list) -> bool:
    # for w >= 1: lastWindow (w - 1) hs ++ [x] = lastWindow w (hs ++ [x])
    return all(list(d.last_window(w - 1, hs)) + [x] == list(d.last_window(w, hs + [x])) for x in ALPHA)


def slot_eq_pos_mod_entry(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    n = len(hs)
    r = d.ring_run(w, hs)
    return all(r.buf[p % w] is not None and r.buf[p % w][0] == p for p in range(n) if n <= p + w)


FOLDS: list[tuple[Callable, Any]] = [
    (lambda acc, e: acc + (e,), ()),  # the keys themselves, in order: the strongest fold
    (lambda acc, e: acc + (1 + e[1]) * 2.0 ** -(e[0] % 7), 0.0),  # a weighted sum of values
    # online softmax (running max, normalizer, weighted value), as FlashAttention computes it
    (lambda acc, e: _online_softmax(acc, 0.37 * e[0] - e[1], float(e[1] + 1)), (-math.inf, 0.0, 0.0)),
]


def _online_softmax(acc: tuple, logit: float, value: float) -> tuple:
    m, z, v = acc
    m2 = max(m, logit)
    scale = 0.0 if m == -math.inf else math.exp(m - m2)
    p = math.exp(logit - m2)
    return (m2, z * scale + p, v * scale + p * value)


def attention_eq(d: Defs, w: int, letters: list) -> bool:
    # maskedFold f (inWindow w (n-1)) init hs = (run w hs).foldl f init, for every fold (f, init)
    hs = entries(letters)
    t = max(0, len(hs) - 1)  # Lean `hs.length - 1` (truncated)
    return all(d.masked_fold(f, lambda e: d.in_window(w, t, e[0]), init, hs)
               == functools.reduce(f, d.run(w, hs), init) for f, init in FOLDS)


def chunk_attention_eq(d: Defs, w: int, letters: list, splits: Optional[Iterable[int]] = None) -> bool:
    full = entries(letters)
    n = len(full)
    for a in (range(n + 1) if splits is None else splits):  # history = full[:a], chunk = full[a:]
        kernel_keys = list(d.last_window(w, full[:a])) + full[a:]  # the cache, then the chunk
        for t in range(a, n):
            want = list(d.last_window(w, full[:t + 1]))
            if [e for e in kernel_keys if d.in_window(w, t, e[0])] != want:
                return False
            if [e for e in full if d.in_window(w, t, e[0])] != want:
                return False
    return True


# ---- the index functions of csrc/ringkv_index.h (pyspec/index_ring.py); n = the history's length


def rkv_slot_lt(d: Defs, w: int, hs: list) -> bool:
    return all(0 <= d.ix.rkv_slot(p, w) < w for p in range(len(hs) + w + 1))


def rkv_len_eq_min(d: Defs, w: int, hs: list) -> bool:
    return d.ix.rkv_len(len(hs), w) == min(len(hs), w)


def rkv_oldest_add_len(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    return d.ix.rkv_oldest(n, w) + d.ix.rkv_len(n, w) == n


def rkv_logical_slot_lt(d: Defs, w: int, hs: list) -> bool:
    return all(0 <= d.ix.rkv_logical_slot(len(hs), w, i) < w for i in range(2 * w + 2))


def rkv_slot_pos_logical_slot(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    return all(d.ix.rkv_slot_pos(n, w, d.ix.rkv_logical_slot(n, w, i)) == d.ix.rkv_oldest(n, w) + i
               for i in range(w))


def rkv_slot_pos_inverse(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    o = d.ix.rkv_oldest(n, w)
    for s in range(w):
        pos = d.ix.rkv_slot_pos(n, w, s)
        if not (o <= pos < o + w and d.ix.rkv_logical_slot(n, w, pos - o) == s):
            return False
    return True


def rkv_slot_pos_slot(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    o = d.ix.rkv_oldest(n, w)
    return all(d.ix.rkv_slot_pos(n, w, d.ix.rkv_slot(p, w)) == p for p in range(o, o + w))


def rkv_slot_valid_iff(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    return all(d.ix.rkv_slot_valid(n, w, s) == (d.ix.rkv_slot_pos(n, w, s) < n) for s in range(w))


def rkv_chunk_kept_eq(d: Defs, w: int, hs: list) -> bool:
    return all(d.ix.rkv_chunk_first_kept(k, w) + d.ix.rkv_chunk_kept(k, w) == k
               and d.ix.rkv_chunk_kept(k, w) == min(k, w) for k in range(len(hs) + 2 * w + 3))


def rkv_chunk_src_range(d: Defs, w: int, hs: list) -> bool:
    for k in range(len(hs) + 2 * w + 3):
        for i in range(d.ix.rkv_chunk_kept(k, w)):
            src = d.ix.rkv_chunk_src(k, w, i)
            if not (src < k and k <= src + w):
                return False
    return True


def rkv_chunk_dst_inj(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    for pos0 in (0, n, n + w - 1):
        for k in range(2 * w + 3):
            dsts = [d.ix.rkv_chunk_dst(pos0, k, w, i) for i in range(d.ix.rkv_chunk_kept(k, w))]
            if not all(0 <= x < w for x in dsts) or len(set(dsts)) != len(dsts):
                return False
    return True


def rkv_in_window_iff(d: Defs, w: int, hs: list) -> bool:
    r = range(len(hs) + w + 2)
    return all(bool(d.ix.rkv_in_window(w, t, p)) == spec.in_window(w, t, p) for t in r for p in r)


def rkv_split_range_partition(d: Defs, w: int, hs: list) -> bool:
    length = len(hs)
    for nsplit in range(1, w + 3):
        ranges = [d.ix.rkv_split_range(length, nsplit, j) for j in range(nsplit + 1)]
        if ranges[0][0] != 0 or ranges[nsplit - 1][1] != length:
            return False
        if not all(lo <= hi <= length for lo, hi in ranges):
            return False
        if not all(ranges[j][1] == ranges[j + 1][0] for j in range(nsplit)):
            return False
    return True


def rkv_cache_row_next(d: Defs, w: int, hs: list) -> bool:
    row = d.ix.rkv_cache_row
    for L, hkv in itertools.product(range(4), range(4)):
        if row(0, 0, 0, 0, L, hkv, w) != 0:
            return False
        for b, l, h in itertools.product(range(3), range(3), range(3)):  # noqa: E741
            if row(b, l, h, w, L, hkv, w) != row(b, l, h + 1, 0, L, hkv, w):
                return False
            if row(b, l, hkv, 0, L, hkv, w) != row(b, l + 1, 0, 0, L, hkv, w):
                return False
            if row(b, L, 0, 0, L, hkv, w) != row(b + 1, 0, 0, 0, L, hkv, w):
                return False
            if not all(row(b, l, h, s + 1, L, hkv, w) == row(b, l, h, s, L, hkv, w) + 1 for s in range(w + 1)):
                return False
    return True


# ---- the shipped ring (IndexRing): entries (pos, letter), unwritten slots hold garbage


def _garbage(slot: int) -> tuple:
    return ("garbage", slot)


def _holding_ring(d: Defs, w: int, hs: list) -> Any:
    """A ring with `Holds w hs r`: the window's positions in their slots, garbage elsewhere."""
    n = len(hs)
    return d.index_ring(w, n, {p % w: hs[p] for p in range(IX.rkv_oldest(n, w), n)}, _garbage)


def _rings_holding(d: Defs, w: int, hs: list) -> list:
    """Rings the relation holds for: built slot by slot, and reached by pushes or by one chunk."""
    rings = [_holding_ring(d, w, hs), IX.index_ring_run(w, hs, _garbage, d.index_ring)]
    k = len(hs) // 2
    rings.append(IX.index_ring_run(w, hs[:k], _garbage, d.index_ring).push_chunk(hs[k:]))
    return [r for r in rings if IX.holds(w, hs, r)]  # the hypothesis is the real Holds


def index_read_lastWindow(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    rings = _rings_holding(d, w, hs)
    return len(rings) > 0 and all(r.read() == list(d.last_window(w, hs)) for r in rings)


def index_push_simulates_step(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    r = _holding_ring(d, w, hs)
    for a in ALPHA:
        x = (len(hs), a)
        r2 = r.push(x)
        if r2.read() != spec.step(w, r.read(), x) or not IX.holds(w, hs + [x], r2):
            return False
    return True


def _index_chunk_ok(d: Defs, w: int, hs: list, ys: list) -> bool:
    r = _holding_ring(d, w, hs)
    r2 = r.push_chunk(ys)
    return r2.read() == spec.push_chunk(w, r.read(), ys) and IX.holds(w, hs + ys, r2)


def index_pushChunk_simulates(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    for m in range(MAX_LEN - len(hs) + 1):
        for ys in itertools.product(ALPHA, repeat=m):
            if not _index_chunk_ok(d, w, hs, [(len(hs) + i, a) for i, a in enumerate(ys)]):
                return False
    return True


def index_run_correct(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return IX.index_ring_run(w, hs, _garbage, d.index_ring).read() == list(d.last_window(w, hs))


def index_slot_eq_pos_mod(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    n = len(hs)
    r = IX.index_ring_run(w, hs, _garbage, d.index_ring)
    return all(r.slots(d.ix.rkv_slot(p, w)) == hs[p] and r.slots(d.ix.rkv_slot(p, w))[0] == p
               for p in range(n) if n <= p + w)


def index_slot_pos_correct(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    n = len(hs)
    r = IX.index_ring_run(w, hs, _garbage, d.index_ring)
    return all(r.slots(s)[0] == d.ix.rkv_slot_pos(n, w, s) for s in range(w) if d.ix.rkv_slot_valid(n, w, s))


# --------------------------------------------------------------------------- mutants (negative checks)


def step_keeps_w_plus_1(w, c, x):
    c2 = list(c) + [x]
    return c2[1:] if w + 1 < len(c2) else c2


def step_evicts_at_w(w, c, x):  # `<=` instead of `<`: holds W - 1
    c2 = list(c) + [x]
    return c2[1:] if w <= len(c2) else c2


def step_never_evicts(w, c, x):
    return list(c) + [x]


def step_evicts_newest_old(w, c, x):  # drops the wrong entry: positions stop being consecutive
    c2 = list(c) + [x]
    return c2[:-2] + c2[-1:] if w < len(c2) else c2


def push_chunk_long_bug(w, c, ys):  # a chunk longer than W keeps its first W tokens
    ys = list(ys)
    if len(ys) > w:
        return ys[:w]
    return _fold(spec.step, w, c, ys)


class RingNoAdvance(Ring):
    """Overwrites the oldest slot but forgets to advance ``head``."""

    def push(self, x):
        if self.size < self.w:
            return super().push(x)
        buf = self.buf[:self.head] + (x,) + self.buf[self.head + 1:]
        return type(self)(self.w, buf, self.head, self.size)


class RingReadsGarbage(Ring):
    """Reads all ``w`` slots from ``head`` before the ring is full (unfilled slots leak out)."""

    def to_list(self):
        return [self.buf[(self.head + i) % self.w] for i in range(self.w)]


class RingWritePastEnd(Ring):
    """While filling, writes one slot too far: ``(head + size + 1) % w``."""

    def push(self, x):
        if self.size < self.w:
            slot = (self.head + self.size + 1) % self.w
            buf = self.buf[:slot] + (x,) + self.buf[slot + 1:]
            return type(self)(self.w, buf, self.head, self.size + 1)
        return super().push(x)


class RingEvictBeforeAppend(Ring):
    """When full, advances ``head`` first and writes at the new head (head/tail order swapped)."""

    def push(self, x):
        if self.size < self.w:
            return super().push(x)
        head = (self.head + 1) % self.w
        buf = self.buf[:head] + (x,) + self.buf[head + 1:]
        return type(self)(self.w, buf, head, self.size)


def in_window_inclusive_far_edge(w, t, p):  # `<=` on the far edge: W + 1 keys
    return p <= t and t <= p + w


def in_window_excludes_self(w, t, p):  # mask diagonal off by one
    return p < t and t < p + w


def sink_step_forgets_sinks(s, w, c, x):
    return spec.step(w, c, x)


def last_window_w_plus_1(w, hs):
    hs = list(hs)
    return hs[max(0, len(hs) - w - 1):]


def last_window_prefix(w, hs):
    return list(hs)[:min(w, len(hs))]


def positions_by_cache_length(w, n):  # the position replaced by the slot index
    return list(range(min(w, n)))


def in_window_no_causal_mask(w, t, p):  # the prefill mask forgets `p <= t`: later chunk keys leak in
    return t < p + w


def masked_fold_ignores_mask(f, mask, init, keys):  # masked keys still contribute
    return functools.reduce(f, keys, init)


def rkv_slot_mod_w_plus_1(pos, w):
    return pos % (w + 1)


def rkv_len_w_plus_1(n, w):  # W + 1 keys
    return min(n, w + 1)


def rkv_oldest_off_by_one(n, w):
    return max(0, n - w - 1)


def rkv_logical_slot_no_mod(n, w, i):  # reads past the last slot instead of wrapping
    return IX.rkv_oldest(n, w) + i


def rkv_slot_pos_drops_plus_w(n, w, s):  # `(s - slot(o)) % w` with the `+ w` dropped, unsigned
    o = IX.rkv_oldest(n, w)
    return o + max(0, s - IX.rkv_slot(o, w)) % w


def rkv_slot_pos_is_slot(n, w, s):  # "the slot index is the position": wrong once the ring wraps
    return s


def rkv_slot_valid_one_more(n, w, s):  # one unfilled slot read while filling
    return s <= IX.rkv_len(n, w)


def rkv_chunk_first_kept_w_plus_1(k, w):  # keeps W + 1 entries of a long chunk
    return max(0, k - w - 1)


def rkv_chunk_src_from_start(k, w, i):  # copies the chunk's first entries instead of its last
    return i


def rkv_chunk_kept_all(k, w):  # writes every chunk entry: two writes to one slot when k > W
    return k


def rkv_in_window_inclusive(w, t, p):  # `<=` on the far edge: W + 1 keys
    return p <= t <= p + w


def rkv_split_range_floor(length, nsplit, j):  # per = len / nsplit rounded down: the tail is never read
    per = length // nsplit
    a, b = j * per, j * per + per
    return (min(a, length), min(b, length))


def rkv_cache_row_swapped(b, l, h, s, L, hkv, w):  # noqa: E741  [B][L][W][H]: a window is not contiguous
    return ((b * L + l) * w + s) * hkv + h


class IndexRingReadsGarbage(IX.IndexRing):
    """Reads `w` slots from slot `n % w` even while filling (unwritten slots leak out)."""

    def read(self):
        return [self.slots((self.n + i) % self.w) for i in range(self.w)]


class IndexRingPushOffByOne(IX.IndexRing):
    """Writes position `n` into slot `(n + 1) % w`."""

    def push(self, e):
        return self._with(self.n + 1, IX.write_slot(self.written, (self.n + 1) % self.w, e))


class IndexRingChunkKeepsHead(IX.IndexRing):
    """Writes a chunk's first `min(k, w)` entries instead of its last."""

    def push_chunk(self, ys):
        ys = list(ys)
        kept = IX.rkv_chunk_kept(len(ys), self.w)
        return self._with(self.n + len(ys), IX.write_from(self.w, self.written, self.n, ys[:kept]))


# --------------------------------------------------------------------------- the table

# theorem name -> (checker, windows, mutant Defs that must fail)
TWINS: dict[str, tuple[Callable, Iterable[int], Defs]] = {
    "lastWindow_length": (lastWindow_length, WINDOWS, dataclasses.replace(PY, last_window=last_window_w_plus_1)),
    "lastWindow_suffix": (lastWindow_suffix, WINDOWS, dataclasses.replace(PY, last_window=last_window_prefix)),
    "step_lastWindow": (step_lastWindow, WINDOWS, with_step(step_keeps_w_plus_1)),
    "step_preserves_valid": (step_preserves_valid, WINDOWS, with_step(step_keeps_w_plus_1)),
    "run_correct": (run_correct, WINDOWS, with_step(step_evicts_at_w)),
    "run_length_le": (run_length_le, WINDOWS, with_step(step_keeps_w_plus_1)),
    "pushChunk_correct": (pushChunk_correct, WINDOWS, dataclasses.replace(PY, push_chunk=push_chunk_long_bug)),
    "run_length_lt_of_gt": (run_length_lt_of_gt, WINDOWS, with_step(step_never_evicts)),
    "positions_lastWindow": (positions_lastWindow, WINDOWS,
                             dataclasses.replace(PY, positions_last_window=positions_by_cache_length)),
    "step_preserves_positionInvariant": (step_preserves_positionInvariant, WINDOWS,
                                         with_step(step_evicts_newest_old)),
    "push_simulates_step": (push_simulates_step, RING_STATE_WINDOWS, dataclasses.replace(PY, ring=RingNoAdvance)),
    "push_preserves_wf": (push_preserves_wf, RING_STATE_WINDOWS, dataclasses.replace(PY, ring=RingWritePastEnd)),
    "ring_run_correct": (ring_run_correct, POS_WINDOWS, dataclasses.replace(PY, ring=RingReadsGarbage)),
    "slot_eq_pos_mod": (slot_eq_pos_mod, POS_WINDOWS, dataclasses.replace(PY, ring=RingEvictBeforeAppend)),
    "filter_inWindow_eq_lastWindow": (filter_inWindow_eq_lastWindow, WINDOWS,
                                      dataclasses.replace(PY, in_window=in_window_inclusive_far_edge)),
    "attention_eq": (attention_eq, WINDOWS, dataclasses.replace(PY, masked_fold=masked_fold_ignores_mask)),
    "sinkStep_correct": (sinkStep_correct, WINDOWS, with_sink_step(sink_step_forgets_sinks)),
    "sinkRun_correct": (sinkRun_correct, WINDOWS, with_sink_step(sink_step_forgets_sinks)),
    "hf_convention_eq": (hf_convention_eq, POS_WINDOWS, dataclasses.replace(PY, last_window=last_window_prefix)),
    "slot_eq_pos_mod_entry": (slot_eq_pos_mod_entry, POS_WINDOWS,
                              dataclasses.replace(PY, ring=RingEvictBeforeAppend)),
    "chunk_attention_eq": (chunk_attention_eq, WINDOWS,
                           dataclasses.replace(PY, in_window=in_window_no_causal_mask)),
    "rkv_slot_lt": (rkv_slot_lt, POS_WINDOWS, with_ix(rkv_slot=rkv_slot_mod_w_plus_1)),
    "rkv_len_eq_min": (rkv_len_eq_min, WINDOWS, with_ix(rkv_len=rkv_len_w_plus_1)),
    "rkv_oldest_add_len": (rkv_oldest_add_len, WINDOWS, with_ix(rkv_oldest=rkv_oldest_off_by_one)),
    "rkv_logical_slot_lt": (rkv_logical_slot_lt, POS_WINDOWS, with_ix(rkv_logical_slot=rkv_logical_slot_no_mod)),
    "rkv_slot_pos_logical_slot": (rkv_slot_pos_logical_slot, POS_WINDOWS,
                                  with_ix(rkv_slot_pos=rkv_slot_pos_drops_plus_w)),
    "rkv_slot_pos_inverse": (rkv_slot_pos_inverse, POS_WINDOWS, with_ix(rkv_slot_pos=rkv_slot_pos_is_slot)),
    "rkv_slot_pos_slot": (rkv_slot_pos_slot, POS_WINDOWS, with_ix(rkv_slot_pos=rkv_slot_pos_drops_plus_w)),
    "rkv_slot_valid_iff": (rkv_slot_valid_iff, POS_WINDOWS, with_ix(rkv_slot_valid=rkv_slot_valid_one_more)),
    "rkv_chunk_kept_eq": (rkv_chunk_kept_eq, WINDOWS,
                          with_ix(rkv_chunk_first_kept=rkv_chunk_first_kept_w_plus_1)),
    "rkv_chunk_src_range": (rkv_chunk_src_range, POS_WINDOWS, with_ix(rkv_chunk_src=rkv_chunk_src_from_start)),
    "rkv_chunk_dst_inj": (rkv_chunk_dst_inj, POS_WINDOWS, with_ix(rkv_chunk_kept=rkv_chunk_kept_all)),
    "rkv_in_window_iff": (rkv_in_window_iff, WINDOWS, with_ix(rkv_in_window=rkv_in_window_inclusive)),
    "rkv_split_range_partition": (rkv_split_range_partition, WINDOWS,
                                  with_ix(rkv_split_range=rkv_split_range_floor)),
    "rkv_cache_row_next": (rkv_cache_row_next, WINDOWS, with_ix(rkv_cache_row=rkv_cache_row_swapped)),
    "index_read_lastWindow": (index_read_lastWindow, POS_WINDOWS,
                              dataclasses.replace(PY, index_ring=IndexRingReadsGarbage)),
    "index_push_simulates_step": (index_push_simulates_step, POS_WINDOWS,
                                  dataclasses.replace(PY, index_ring=IndexRingPushOffByOne)),
    "index_pushChunk_simulates": (index_pushChunk_simulates, POS_WINDOWS,
                                  dataclasses.replace(PY, index_ring=IndexRingChunkKeepsHead)),
    "index_run_correct": (index_run_correct, POS_WINDOWS,
                          dataclasses.replace(PY, index_ring=IndexRingReadsGarbage)),
    "index_slot_eq_pos_mod": (index_slot_eq_pos_mod, POS_WINDOWS,
                              dataclasses.replace(PY, index_ring=IndexRingPushOffByOne)),
    "index_slot_pos_correct": (index_slot_pos_correct, POS_WINDOWS, with_ix(rkv_slot_pos=rkv_slot_pos_is_slot)),
}

# Ring-state theorems range over ring states, not histories: one pass per window.
_STATE_ONLY = {"push_simulates_step", "push_preserves_wf"}
# Index-function theorems depend on the history's length only: one history per length.
_LENGTH_ONLY = {name for name in TWINS if name.startswith("rkv_")}


def _exhaustive(name: str, d: Defs) -> Optional[tuple]:
    check, windows, _ = TWINS[name]
    hists = [()] if name in _STATE_ONLY else LENGTHS if name in _LENGTH_ONLY else None
    return first_failure(check, d, windows, hists)


def _twin(name: str) -> None:
    """Exhaustive positive check, Hypothesis beyond that scope, then the same checker
    against the mutant must fail."""
    assert _exhaustive(name, PY) is None, f"{name}: pyspec counterexample {_exhaustive(name, PY)}"
    _beyond(name)
    assert _exhaustive(name, TWINS[name][2]) is not None, f"{name}: the checker cannot tell a wrong definition"


# --------------------------------------------------------------------------- beyond the small scope

_BIG_W = st.integers(min_value=0, max_value=40)
# Lengths drawn first, so long histories (past every window) are as common as short ones.
_LETTERS = st.integers(0, 120).flatmap(lambda n: st.lists(st.integers(0, 5), min_size=n, max_size=n))
BEYOND = settings(max_examples=40, deadline=None)


def _history_beyond(name: str, w: int, hs: list) -> None:
    check, windows, _ = TWINS[name]
    if min(windows) >= 1 and w < 1:
        w = 1
    if name == "pushChunk_correct":  # its checker enumerates chunks up to MAX_LEN; split instead
        k = len(hs) // 2
        assert spec.push_chunk(w, spec.last_window(w, hs[:k]), hs[k:]) == spec.last_window(w, hs)
        return
    if name == "index_pushChunk_simulates":  # the same: one split of the history into two chunks
        es = entries(hs)
        k = len(es) // 2
        assert _index_chunk_ok(PY, w, es[:k], es[k:]), (name, w, hs)
        return
    if name == "chunk_attention_eq":  # every query of one chunk (all splits would be cubic)
        assert chunk_attention_eq(PY, w, hs, splits=[len(hs) // 2]), (name, w, hs)
        return
    assert check(PY, w, hs), (name, w, hs)


def _ring_state_beyond(name: str, w: int, head: int, size: int, fill: list, x: int) -> None:
    r = Ring(w, tuple(fill[:w]), head % w, min(size, w))
    if not Ring.wf(r):
        return
    if name == "push_simulates_step":
        assert r.push(x).to_list() == spec.step(r.w, r.to_list(), x)
    else:
        assert Ring.wf(r.push(x))


def _beyond(name: str) -> None:
    """The same statement with Hypothesis, past the exhaustive scope (windows to 40, histories to 120)."""
    if name in _STATE_ONLY:
        @BEYOND
        @given(w=st.integers(1, 12), head=st.integers(0, 11), size=st.integers(0, 12),
               fill=st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=12, max_size=12),
               x=st.integers(0, 9))
        def run(w, head, size, fill, x):
            _ring_state_beyond(name, w, head, size, fill, x)
    else:
        @BEYOND
        @given(w=_BIG_W, hs=_LETTERS)
        def run(w, hs):
            _history_beyond(name, w, hs)
    run()


# --------------------------------------------------------------------------- one test per theorem


def test_lastWindow_length():
    _twin("lastWindow_length")


def test_lastWindow_suffix():
    _twin("lastWindow_suffix")


def test_step_lastWindow():
    _twin("step_lastWindow")


def test_step_preserves_valid():
    _twin("step_preserves_valid")


def test_run_correct():
    _twin("run_correct")


def test_run_length_le():
    _twin("run_length_le")


def test_pushChunk_correct():
    _twin("pushChunk_correct")


def test_run_length_lt_of_gt():
    _twin("run_length_lt_of_gt")


def test_positions_lastWindow():
    _twin("positions_lastWindow")


def test_step_preserves_positionInvariant():
    _twin("step_preserves_positionInvariant")


def test_push_simulates_step():
    _twin("push_simulates_step")


def test_push_preserves_wf():
    _twin("push_preserves_wf")


def test_ring_run_correct():
    _twin("ring_run_correct")


def test_slot_eq_pos_mod():
    _twin("slot_eq_pos_mod")


def test_filter_inWindow_eq_lastWindow():
    _twin("filter_inWindow_eq_lastWindow")


def test_attention_eq():
    _twin("attention_eq")


def test_sinkStep_correct():
    _twin("sinkStep_correct")


def test_sinkRun_correct():
    _twin("sinkRun_correct")


def test_hf_convention_eq():
    _twin("hf_convention_eq")


def test_slot_eq_pos_mod_entry():
    _twin("slot_eq_pos_mod_entry")


def test_chunk_attention_eq():
    _twin("chunk_attention_eq")


def test_rkv_slot_lt():
    _twin("rkv_slot_lt")


def test_rkv_len_eq_min():
    _twin("rkv_len_eq_min")


def test_rkv_oldest_add_len():
    _twin("rkv_oldest_add_len")


def test_rkv_logical_slot_lt():
    _twin("rkv_logical_slot_lt")


def test_rkv_slot_pos_logical_slot():
    _twin("rkv_slot_pos_logical_slot")


def test_rkv_slot_pos_inverse():
    _twin("rkv_slot_pos_inverse")


def test_rkv_slot_pos_slot():
    _twin("rkv_slot_pos_slot")


def test_rkv_slot_valid_iff():
    _twin("rkv_slot_valid_iff")


def test_rkv_chunk_kept_eq():
    _twin("rkv_chunk_kept_eq")


def test_rkv_chunk_src_range():
    _twin("rkv_chunk_src_range")


def test_rkv_chunk_dst_inj():
    _twin("rkv_chunk_dst_inj")


def test_rkv_in_window_iff():
    _twin("rkv_in_window_iff")


def test_rkv_split_range_partition():
    _twin("rkv_split_range_partition")


def test_rkv_cache_row_next():
    _twin("rkv_cache_row_next")


def test_index_read_lastWindow():
    _twin("index_read_lastWindow")


def test_index_push_simulates_step():
    _twin("index_push_simulates_step")


def test_index_pushChunk_simulates():
    _twin("index_pushChunk_simulates")


def test_index_run_correct():
    _twin("index_run_correct")


def test_index_slot_eq_pos_mod():
    _twin("index_slot_eq_pos_mod")


def test_index_slot_pos_correct():
    _twin("index_slot_pos_correct")


def test_every_twin_has_a_test_function():
    names = {n[len("test_"):] for n in globals() if n.startswith("test_")}
    assert set(TWINS) <= names


def test_beyond_scope_catches_what_the_exhaustive_scope_cannot(monkeypatch):
    """A window edge that breaks only for W > 8 passes every exhaustive check (W <= 6) —
    the Hypothesis half of the twin is what catches it."""
    def last_window_wide_bug(w, hs):
        hs = list(hs)
        return hs[max(0, len(hs) - w - (1 if w > 8 else 0)):]

    wrong = dataclasses.replace(PY, last_window=last_window_wide_bug)
    assert _exhaustive("lastWindow_length", wrong) is None
    monkeypatch.setattr(sys.modules[__name__], "PY", wrong)
    with pytest.raises(AssertionError):
        _beyond("lastWindow_length")
