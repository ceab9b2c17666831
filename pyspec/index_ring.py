"""Mirror of ``lean/KVWindow/IndexRing.lean``: the ring ``csrc/ringkv.c`` and the CUDA kernels ship.

No head and no fill counter: the state is the window ``w``, the tokens seen ``n`` and
the slots, and every index is a function of ``n`` (``csrc/ringkv_index.h``). Each
function here has the name of its C and Lean twin and cites the Lean theorem about it.

Arithmetic is Lean's ``Nat``: subtraction truncates at 0, ``x % 0 = x`` and
``x / 0 = 0``, so the mirror agrees with Lean on every input. The header itself
requires ``w >= 1`` (and ``nsplit >= 1``); callers validate before calling, and the
golden table only holds rows that satisfy the header's preconditions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from pyspec.spec import _nat, _tsub, last_window


def _mod(a: int, b: int) -> int:
    """Lean's ``Nat`` ``%``: ``a % 0 = a``."""
    return a if b == 0 else a % b


def _div(a: int, b: int) -> int:
    """Lean's ``Nat`` ``/``: ``a / 0 = 0``."""
    return 0 if b == 0 else a // b


# --------------------------------------------------------------------------- ringkv_index.h


def rkv_slot(pos: int, w: int) -> int:
    """Lean ``KVWindow.rkv_slot pos w := pos % w`` (``rkv_slot_lt``, ``index_slot_eq_pos_mod``)."""
    return _mod(_nat("pos", pos), _nat("window", w))


def rkv_len(n: int, w: int) -> int:
    """Lean ``KVWindow.rkv_len n w := if n < w then n else w`` (``rkv_len_eq_min``)."""
    _nat("n", n)
    _nat("window", w)
    return n if n < w else w


def rkv_oldest(n: int, w: int) -> int:
    """Lean ``KVWindow.rkv_oldest n w := n - rkv_len n w`` (``rkv_oldest_add_len``)."""
    return _tsub(n, rkv_len(n, w))


def rkv_logical_slot(n: int, w: int, i: int) -> int:
    """Lean ``KVWindow.rkv_logical_slot n w i := rkv_slot (rkv_oldest n w + i) w``
    (``rkv_logical_slot_lt``, ``rkv_slot_pos_logical_slot``)."""
    return rkv_slot(rkv_oldest(n, w) + _nat("i", i), w)


def rkv_chunk_first_kept(k: int, w: int) -> int:
    """Lean ``KVWindow.rkv_chunk_first_kept k w := if k > w then k - w else 0`` (``rkv_chunk_kept_eq``)."""
    _nat("k", k)
    _nat("window", w)
    return k - w if k > w else 0


def rkv_in_window(w: int, t: int, p: int) -> bool:
    """Lean ``KVWindow.rkv_in_window w t p := decide (p ≤ t ∧ t < p + w)`` (``rkv_in_window_iff``)."""
    _nat("window", w)
    return _nat("p", p) <= _nat("t", t) and t < p + w


def rkv_chunk_kept(k: int, w: int) -> int:
    """Lean ``KVWindow.rkv_chunk_kept k w := rkv_len k w`` (``rkv_chunk_kept_eq``)."""
    return rkv_len(k, w)


def rkv_chunk_src(k: int, w: int, i: int) -> int:
    """Lean ``KVWindow.rkv_chunk_src k w i := rkv_chunk_first_kept k w + i`` (``rkv_chunk_src_range``)."""
    return rkv_chunk_first_kept(k, w) + _nat("i", i)


def rkv_chunk_dst(pos0: int, k: int, w: int, i: int) -> int:
    """Lean ``KVWindow.rkv_chunk_dst pos0 k w i := rkv_slot (pos0 + rkv_chunk_src k w i) w``
    (``rkv_chunk_dst_inj``)."""
    return rkv_slot(_nat("pos0", pos0) + rkv_chunk_src(k, w, i), w)


def rkv_slot_valid(n: int, w: int, s: int) -> bool:
    """Lean ``KVWindow.rkv_slot_valid n w s := decide (s < rkv_len n w)`` (``rkv_slot_valid_iff``)."""
    return _nat("s", s) < rkv_len(n, w)


def rkv_slot_pos(n: int, w: int, s: int) -> int:
    """Lean ``KVWindow.rkv_slot_pos n w s := rkv_oldest n w + (s + w - rkv_slot (rkv_oldest n w) w) % w``
    (``rkv_slot_pos_inverse``, ``rkv_slot_pos_slot``, ``index_slot_pos_correct``).

    The C writes ``(s - slot + w) % w`` in signed arithmetic; ``s + w - slot`` is the
    same value without a negative intermediate (``slot < w``)."""
    o = rkv_oldest(n, w)
    return o + _mod(_tsub(_nat("s", s) + w, rkv_slot(o, w)), w)


def split_per(length: int, nsplit: int) -> int:
    """Lean ``KVWindow.splitPer len nsplit := (len + nsplit - 1) / nsplit`` (the header's local ``per``)."""
    return _div(_tsub(_nat("len", length) + _nat("nsplit", nsplit), 1), nsplit)


def rkv_split_range(length: int, nsplit: int, j: int) -> tuple[int, int]:
    """Lean ``KVWindow.rkv_split_range len nsplit j`` — the ``(lo, hi)`` the C writes through
    its out-pointers (``rkv_split_range_partition``)."""
    per = split_per(length, nsplit)
    a = _nat("j", j) * per
    b = a + per
    return (a if a < length else length, b if b < length else length)


def rkv_cache_row(b: int, l: int, h: int, s: int, L: int, hkv: int, w: int) -> int:  # noqa: E741
    """Lean ``KVWindow.rkv_cache_row b l h s L hkv w := ((b * L + l) * hkv + h) * w + s``
    (``rkv_cache_row_next``)."""
    for name, v in (("b", b), ("l", l), ("h", h), ("s", s), ("L", L), ("hkv", hkv), ("window", w)):
        _nat(name, v)
    return ((b * L + l) * hkv + h) * w + s


# --------------------------------------------------------------------------- the ring


def _no_garbage(slot: int) -> Any:
    return ("garbage", slot)


@dataclass(frozen=True)
class IndexRing:
    """Lean ``KVWindow.IndexRing``: fields ``w``, ``n`` and ``slots : Nat → α``.

    ``slots`` is the Lean function: the entries written so far (``written``) over
    whatever the slots held before (``garbage``), so a read of a slot never written
    is visible in a test. Constructors go through ``type(self)`` so a test can
    subclass a deliberately broken ring.
    """

    w: int
    n: int
    written: Mapping[int, Any] = field(default_factory=dict)
    garbage: Callable[[int], Any] = _no_garbage

    def slots(self, j: int) -> Any:
        """Lean ``r.slots j``."""
        return self.written[j] if j in self.written else self.garbage(j)

    def _with(self, n: int, written: Mapping[int, Any]) -> "IndexRing":
        return type(self)(self.w, n, written, self.garbage)

    def push(self, e: Any) -> "IndexRing":
        """Lean ``IndexRing.push r e``: write slot ``rkv_slot n w`` (``write_slot``), then ``n + 1``."""
        return self._with(self.n + 1, write_slot(self.written, rkv_slot(self.n, self.w), e))

    def push_chunk(self, ys: Sequence[Any]) -> "IndexRing":
        """Lean ``IndexRing.pushChunk r ys``: write only entries ``rkv_chunk_first_kept .. k-1``
        at their positions (``ringkv_push_chunk``), then ``n + k``."""
        ys = list(ys)
        f = rkv_chunk_first_kept(len(ys), self.w)
        return self._with(self.n + len(ys), write_from(self.w, self.written, self.n + f, ys[f:]))

    def read(self) -> list:
        """Lean ``IndexRing.read r``: the ``rkv_len`` valid slots in logical order (``ringkv_read``)."""
        return [self.slots(rkv_logical_slot(self.n, self.w, i)) for i in range(rkv_len(self.n, self.w))]

    def reset(self, w: int) -> "IndexRing":
        """Lean ``IndexRing.reset r w``: next position 0; the slots are not cleared."""
        return type(self)(w, 0, self.written, self.garbage)


def write_slot(written: Mapping[int, Any], s: int, e: Any) -> dict:
    """Lean ``KVWindow.writeSlot slots s e``: slot ``s`` now holds ``e``."""
    out = dict(written)
    out[s] = e
    return out


def write_from(w: int, written: Mapping[int, Any], p: int, ys: Iterable[Any]) -> dict:
    """Lean ``KVWindow.writeFrom w slots p ys``: write ``ys`` at positions ``p, p+1, ...``."""
    out = dict(written)
    for y in ys:
        out[rkv_slot(p, w)] = y
        p += 1
    return out


def index_ring_run(w: int, xs: Iterable[Any], garbage: Callable[[int], Any] = _no_garbage,
                   ring: type = IndexRing) -> IndexRing:
    """Lean ``IndexRing.run w garbage xs``: pushes from a fresh stream whose slots hold ``garbage``."""
    r = ring(_nat("window", w), 0, {}, garbage)
    for x in xs:
        r = r.push(x)
    return r


def holds(w: int, hs: Sequence[Any], r: IndexRing) -> bool:
    """Lean ``IndexRing.Holds w hs r``: ``r.w = w``, ``r.n = hs.length``, and every position
    ``p`` still cached (``rkv_oldest ≤ p < n``) sits in slot ``rkv_slot p w``."""
    hs = list(hs)
    n = len(hs)
    return (r.w == w and r.n == n
            and all(r.slots(rkv_slot(p, w)) == hs[p] for p in range(rkv_oldest(n, w), n)))

